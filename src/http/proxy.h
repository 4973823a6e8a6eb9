// A standby forwards the API to the writer (high availability, docs/operations.md).
//
// Why forward rather than answer from the database: the writer's memory is the one source of truth
// (reads are answered by the writer after every earlier command committed), so a standby that
// forwards gives the same answers, read-your-writes included, with no second implementation of
// any read and nothing to keep in sync; and a client or load balancer may send anything to any
// node. The price is one extra hop for requests that reach a standby (a load balancer that routes
// by /healthz/writer avoids it). Stateless reads (catalog, size, fit on list prices, guide,
// models), /healthz, /metrics and the web pages are answered by every node itself.
//
// The writer trusts the client address a standby forwards (X-Gpuhub-Client-Address, used by the
// per-address rate limits) only with the writer's current proxy secret (X-Gpuhub-Proxy-Secret),
// which both nodes read from engine_writer and which changes with every term. A standby never
// forwards a request that was already forwarded (no loops while the writer role moves): it answers
// 503 and the client retries.
//
// Thread-safety: Forward is thread-safe; the blocking exchanges (net/http_client.h, one keep-alive
// connection per proxy thread) run on the proxy's own threads
// (never an I/O thread or the engine's writer).
#pragma once

#include <string>

#include "http/rate_limit.h"
#include "http/router.h"

namespace gpuhub::http {

inline constexpr const char* kClientAddressHeader = "x-gpuhub-client-address";
inline constexpr const char* kProxySecretHeader = "x-gpuhub-proxy-secret";

class WriterProxy {
 public:
  WriterProxy(int threads, std::size_t max_queued, int timeout_seconds);

  // Sends `request` to the writer at `address` (HOST:PORT) with `secret` and answers `respond` with
  // the writer's response (status, body and end-to-end headers). 503 with Retry-After when the
  // writer does not answer, when the request was already forwarded once, or when the queue is
  // full.
  void Forward(const Request& request, const std::string& address, const std::string& secret,
               Responder respond);
  // Finishes the exchanges already queued, then joins the threads. Idempotent.
  void Stop() { pool_.Stop(); }

 private:
  WorkerPool pool_;
  int timeout_seconds_;
};

// 503 "the writer is changing": Retry-After: 1, for a client to try again (any node).
Response RetryShortly(std::string_view message);

}  // namespace gpuhub::http
