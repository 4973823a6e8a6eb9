// The webhook sender: POSTs the outbox of engine/notifications.h to customers' own endpoints,
// outside the engine's writer thread.
//
// A thread claims due deliveries (engine::ClaimDeliveries, a command: each is leased so that no
// second sender takes it), POSTs each (in parallel within one claim, each on its own connection
// with a deadline) and reports every attempt (engine::RecordDeliveryAttempt, a command): a 2xx is
// delivered; anything else is retried on the engine's schedule, failed after the last attempt.
//
// Every POST carries
//   Content-Type: application/json
//   Gpuhub-Signature: t=<unix seconds>,v1=<lower-case hex HMAC-SHA256(secret, "<t>.<raw body>")>
//   Gpuhub-Delivery: <delivery id>   (the same on every retry: receivers dedupe by it)
// A receiver recomputes v1 over the exact bytes it received and compares in constant time, and
// refuses a t too far from its own clock (replays).
//
// Addresses: unless allow_private_addresses, a URL whose host resolves to an internal address
// (http/internal_address.h: loopback, private, link-local, carrier-grade NAT, multicast,
// unspecified, and the IPv6 forms that carry one of those inside) is refused (a permanent
// failure, not retried): a customer's URL must not reach the platform's own network. The check
// runs on the addresses the HTTP client resolved and then connects to, so a name whose DNS answer
// changes between a check and the connection cannot slip past it.
//
// Redirects are never followed: a 3xx is a failed attempt like any other non-2xx ("answered 302;
// redirects are not followed"), retried on the schedule and failed after the last one. Following
// one would let a public receiver send us on to an internal address with the signed body.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "engine/engine.h"
#include "engine/metrics.h"

namespace gpuhub::http {

// "t=1767225600,v1=5f1c..." for `body` signed with `secret` at `unix_seconds`.
std::string WebhookSignatureHeader(std::string_view secret, std::int64_t unix_seconds,
                                   std::string_view body);

struct WebhookSenderOptions {
  bool allow_private_addresses = false;
  std::chrono::milliseconds poll_interval{1000};
  std::chrono::milliseconds timeout{10000};  // one delivery: resolve, connect, TLS, write, read
};

struct WebhookAttempt {
  bool delivered = false;
  int status_code = 0;  // 0: no answer
  std::string error;
  bool permanent = false;  // not worth retrying (refused address, bad URL, webhook removed)
};

// One signed POST of `body` to `url` (signed at the wall clock's now), as described above.
// Blocking, bounded by options.timeout; safe to call from several threads at once.
WebhookAttempt PostWebhook(const std::string& url, const std::string& body,
                           const std::string& secret, std::int64_t delivery_id,
                           const WebhookSenderOptions& options);

class WebhookSender {
 public:
  WebhookSender(engine::Engine& engine, engine::MetricsRegistry& metrics,
                WebhookSenderOptions options);
  ~WebhookSender();
  WebhookSender(const WebhookSender&) = delete;
  WebhookSender& operator=(const WebhookSender&) = delete;

  void Start();
  // Stops after the deliveries in flight (each bounded by the timeout). Idempotent.
  void Stop();

 private:
  void Loop();
  // One round: claims and sends what is due; the number of deliveries attempted.
  std::size_t Round();

  engine::Engine& engine_;
  WebhookSenderOptions options_;
  engine::CounterSeries& delivered_;
  engine::CounterSeries& retried_;
  engine::CounterSeries& failed_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gpuhub::http
