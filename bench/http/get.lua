-- wrk script: GET with the same one-line summary as post.lua (req/s, p50/p99 latency, errors).
done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  local errors = summary.errors.status + summary.errors.connect + summary.errors.read +
                 summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT requests=%d req_per_s=%.0f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests, summary.requests / seconds, latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, errors))
end
