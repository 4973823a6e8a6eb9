-- wrk script: POST a JSON body (WRK_BODY) with optional bearer token (WRK_TOKEN), and print the
-- figures this project reports (req/s, p50/p99 latency, non-2xx count) on one parsable line.
wrk.method = "POST"
wrk.body = os.getenv("WRK_BODY") or "{}"
wrk.headers["Content-Type"] = "application/json"
local token = os.getenv("WRK_TOKEN")
if token and token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read +
                 summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT requests=%d req_per_s=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors))
end
