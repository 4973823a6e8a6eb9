// Named limits of the HTTP server. Each is answered with its own status code when exceeded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuhub::http {

// Request line + headers: beyond this, 431 Request Header Fields Too Large.
inline constexpr std::size_t kMaxHeaderBytes = 16 * 1024;
// Request body: beyond this, 413 Content Too Large (checked against Content-Length before the
// body is read, and while reading a chunked body).
inline constexpr std::size_t kMaxBodyBytes = 1024 * 1024;
// A request must arrive completely within this time once its first byte did: 408 otherwise.
// An idle keep-alive connection is closed after the same time.
inline constexpr int kReadTimeoutSeconds = 15;
inline constexpr int kWriteTimeoutSeconds = 30;
// Open connections at once: beyond this new connections get 503 and are closed.
inline constexpr std::size_t kMaxConnections = 1024;
// Open connections at once from one client address (the TCP peer's IP; an IPv4-mapped IPv6 address
// counts as its IPv4 address): beyond this that address's new connections get 503 and are closed,
// so that one client holding idle sockets cannot take all of kMaxConnections. 0 in the config file
// means no per-address cap (behind a reverse proxy every client has the proxy's address).
inline constexpr std::size_t kMaxConnectionsPerAddress = 256;
// Bytes of a connection's read buffer beyond the headers: chunk-size lines with their extensions and
// the trailer of a chunked body must fit in it (a longer one is 413), so that no line the parser
// waits for can grow without bound. The body itself streams through it (kMaxBodyBytes).
inline constexpr std::size_t kMaxReadBufferSlackBytes = 64 * 1024;
// After accept() fails (out of file descriptors: the same error repeats at once), the next try
// waits this long instead of spinning on the CPU and the log.
inline constexpr int kAcceptRetryMilliseconds = 100;
// JSON bodies nested deeper than this are refused (400) before parsing.
inline constexpr int kMaxJsonDepth = 32;
// Password hashes waiting for a worker: beyond this signups and logins get 503 (Argon2id uses
// tens of MiB each; an unbounded queue is a memory exhaustion attack).
inline constexpr std::size_t kMaxQueuedPasswordHashes = 256;
// On SIGTERM: how long in-flight requests may take to finish before the server stops anyway.
inline constexpr int kShutdownGraceSeconds = 20;
// Pages of GET /v1/transfers and similar lists.
inline constexpr std::size_t kDefaultPageSize = 50;
// ?limit= of GET /v1/topups: 1..500, as the market lists (market::kMaxPageSize).
inline constexpr std::size_t kMaxListPageSize = 500;
// The payment webhook's shared secret (HMAC-SHA256 key): at least this long, or `serve` refuses to
// start. A short one can be guessed offline from one signed delivery; 32 bytes is the key size of
// HMAC-SHA256 (BTCPay Server generates longer ones).
inline constexpr std::size_t kMinWebhookSecretBytes = 32;
// Longest X-Request-Id accepted from a client (longer or odd ones are replaced).
inline constexpr std::size_t kMaxRequestIdBytes = 64;

}  // namespace gpuhub::http
