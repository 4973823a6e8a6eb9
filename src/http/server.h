// The HTTP/1.1 server (Boost.Beast inside server.cc only).
//
// - Keep-alive; every named limit of http/limits.h answered with its status: 431 (headers), 413
//   (body, checked on Content-Length before reading it), 408 (headers not complete within the
//   header timeout, or a body not within the read timeout), 400 (malformed HTTP), 503 (too many
//   connections in all, from one client address, or from an address that already has one while
//   only the slots reserved for new addresses are left; shutting down). An idle keep-alive
//   connection is closed quietly after the read timeout, a new one that sent nothing after the
//   header timeout.
// - Those protocol-level answers are counted in gpuhub_http_requests_total with route="protocol"
//   and logged as event=protocol_refused (at most kMaxProtocolRefusalLogsPerSecond lines a second;
//   the next line says how many were left out).
// - `Expect: 100-continue` is answered before the body is read.
// - Transfer-Encoding: only "chunked" alone, and never in HTTP/1.0 (400, RFC 9112 6.1).
// - An answer to a request with credentials (Authorization or Cookie) carries `Cache-Control:
//   no-store` unless its handler set a Cache-Control of its own.
// - Every response carries X-Request-Id (the client's when it is sane, else a new one); every
//   request is counted in /metrics (by route pattern and status) and logged (method, route, status,
//   duration; never bodies, tokens or passwords).
// - Shutdown (SIGTERM/SIGINT or Shutdown()): stop accepting, refuse new requests with 503, wait for
//   in-flight requests to be answered (at most kShutdownGraceSeconds), call `before_stop` (the
//   engine commits what it has queued), then stop.
//
// Routes come from a Router; paths outside /v1/, /healthz and /metrics fall back to static files
// from `web_dir`.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/metrics.h"
#include "http/limits.h"
#include "http/router.h"

namespace gpuhub::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port (see Server::port())
  std::size_t max_connections = 0;  // 0: kMaxConnections
  // Open connections from one client address; 0: no per-address cap (behind a reverse proxy).
  std::size_t max_connections_per_address = kMaxConnectionsPerAddress;
  // Slots of max_connections only addresses without a connection may take; -1: max_connections /
  // kNewAddressReserveDivisor.
  std::ptrdiff_t connections_reserved_for_new_addresses = -1;
  std::size_t max_header_bytes = 0;  // 0: kMaxHeaderBytes
  std::size_t max_body_bytes = 0;    // 0: kMaxBodyBytes
  int header_timeout_seconds = 0;    // 0: kHeaderTimeoutSeconds, or the read timeout if shorter
  int read_timeout_seconds = 0;      // 0: kReadTimeoutSeconds
  int shutdown_grace_seconds = 0;    // 0: kShutdownGraceSeconds
  int io_threads = 2;
  std::string web_dir;  // static files; empty: none
  bool handle_signals = true;
};

class Server {
 public:
  Server(ServerOptions options, const Router& router, engine::MetricsRegistry& metrics);
  ~Server();

  // Binds and listens. unavailable when the address is taken or invalid.
  Status Listen();
  // The bound port (after Listen).
  int port() const;
  // Serves until shutdown; returns once stopped. `before_stop` runs after the last in-flight
  // request was answered and before the I/O threads stop.
  void Run(std::function<void()> before_stop);
  // Starts a graceful shutdown; thread-safe.
  void Shutdown();
  bool draining() const;

  struct Impl;  // server.cc (public only so that its connection class can name it)

 private:
  std::unique_ptr<Impl> impl_;
};

// Replaces control characters so that a value cannot forge log lines.
std::string LogSafe(std::string_view text, std::size_t max_bytes = 200);

}  // namespace gpuhub::http
