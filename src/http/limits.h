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
// The request line and headers must arrive within this time: from accept on a new connection,
// from the first byte of the request on a kept-alive one. 408 when some arrived, a quiet close
// when none did. Shorter than the body's deadline: a client that trickles headers (slowloris)
// holds a connection slot for seconds, not for the whole read timeout.
inline constexpr int kHeaderTimeoutSeconds = 5;
// The body must arrive within this time once the headers did (408 otherwise). An idle keep-alive
// connection is closed quietly after the same time.
inline constexpr int kReadTimeoutSeconds = 15;
inline constexpr int kWriteTimeoutSeconds = 30;
// Open connections at once: beyond this new connections get 503 and are closed.
inline constexpr std::size_t kMaxConnections = 1024;
// The last max_connections / kNewAddressReserveDivisor connection slots (64 of 1024) are kept for
// client addresses that hold no connection yet: an address that already has one gets 503 there,
// so clients holding many slots from a few addresses cannot lock everyone else out.
inline constexpr std::size_t kNewAddressReserveDivisor = 16;
// Open connections at once from one client address (the TCP peer's IP; an IPv4-mapped IPv6 address
// counts as its IPv4 address): beyond this that address's new connections get 503 and are closed,
// so that one client holding idle sockets cannot take all of kMaxConnections. 0 in the config file
// means no per-address cap (behind a reverse proxy every client has the proxy's address).
inline constexpr std::size_t kMaxConnectionsPerAddress = 256;
// A chunk-size line with its extensions, and the last chunk's line with the whole trailer (every
// field of it together), must each fit in this many bytes (413 otherwise), so that nothing the
// parser waits for can grow without bound, and no trailer field can reach Beast's 64 KiB limit
// of one field (which it reports by throwing). The body itself streams (kMaxBodyBytes).
inline constexpr std::size_t kMaxChunkLineBytes = 64 * 1024;
// Bytes of a connection's read buffer beyond the headers' limit: room for kMaxChunkLineBytes.
inline constexpr std::size_t kMaxReadBufferSlackBytes = kMaxChunkLineBytes;
// After accept() fails (out of file descriptors: the same error repeats at once), the next try
// waits this long instead of spinning on the CPU and the log.
inline constexpr int kAcceptRetryMilliseconds = 100;
// JSON bodies nested deeper than this are refused (400) before parsing.
inline constexpr int kMaxJsonDepth = 32;
// Password hashes waiting for a worker: beyond this signups and logins get 503 (Argon2id uses
// tens of MiB each; an unbounded queue is a memory exhaustion attack).
inline constexpr std::size_t kMaxQueuedPasswordHashes = 256;
// Invoice PDFs/pages waiting for the renderer (one thread; a PDF takes tens of milliseconds):
// beyond this the request gets 503 instead of an unbounded queue.
inline constexpr std::size_t kMaxQueuedRenders = 64;
// History reads (store pages of closed market records) waiting for a reader thread; beyond this a
// request gets 503 rather than queueing without bound behind a slow database.
inline constexpr std::size_t kMaxQueuedHistoryReads = 256;
// Admin requests (http/api.h AdminOnly) authorized and waiting for their handler's thread; beyond
// this 503.
inline constexpr std::size_t kMaxQueuedAdminRequests = 256;
// Retries of one Idempotency-Key that may wait for its first request (a BTCPay top-up) at once;
// beyond this a retry gets 409 at once.
inline constexpr std::size_t kMaxWaitersPerKey = 32;
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
// [metrics] bearer_token: at least this long (a scraper's token is as guessable as any secret).
inline constexpr std::size_t kMinMetricsTokenBytes = 32;
// A warning or error identical to one written less than this ago is counted, not written again
// (http/log_sink.h); the count is written when the window ends.
inline constexpr int kLogRepeatWindowSeconds = 10;
// Protocol-level refusals (400 framing, 408, 413, 431, 501, connection-limit 503s) logged per
// second at most; the rest are counted in the next line that is written (they are all counted in
// gpuhub_http_requests_total{route="protocol"}).
inline constexpr int kMaxProtocolRefusalLogsPerSecond = 20;
// A standby forwarding the API to the writer (proxy.h): exchanges at once, waiting beyond them
// (then 503), and how long one may take.
inline constexpr int kProxyThreads = 8;
inline constexpr std::size_t kMaxQueuedProxyRequests = 1024;
inline constexpr int kProxyTimeoutSeconds = 30;
// A server that finds the writer lock taken at start asks again for this long before it starts
// as a standby: the holder may be a process that just died or exited (a CLI verb, the crashed
// server being restarted) whose database session the server has not ended yet.
inline constexpr int kStartupWriterLockWaitMilliseconds = 1000;
// Longest X-Request-Id accepted from a client (longer or odd ones are replaced).
inline constexpr std::size_t kMaxRequestIdBytes = 64;
// GET /healthz answers at once while the engine's writer is known to be serving (Engine::Serving:
// no batch and no queued command waiting longer than this); otherwise it asks the writer with a
// no-op command, as it always did, and answers what the writer says.
inline constexpr int kHealthzMaxBatchMilliseconds = 2000;

// Host agents (api_agent.cc): requests per second one host credential may make (an agent makes
// one heartbeat every 15 s and one usage report a minute; a host beyond this is broken or hostile
// and must not starve the writer), and enrolment attempts per client address per minute.
inline constexpr std::int64_t kMaxAgentRequestsPerSecond = 20;
inline constexpr std::int64_t kMaxEnrolmentsPerAddressPerMinute = 30;
// A customer's registry credential (registry_auth.h) and the curated image list ([agents] images).
inline constexpr std::size_t kMaxRegistryUsernameBytes = 256;
inline constexpr std::size_t kMaxRegistryPasswordBytes = 1024;
inline constexpr std::size_t kMaxCuratedImages = 32;
// A [storage.regions.<REGION>] setting (a path, a name, the monitors' list).
inline constexpr std::size_t kMaxCephSettingBytes = 1024;
// The storage reconciler: how often it looks for work, and how often it reads each region's
// pool size and health.
inline constexpr int kStorageReconcileIntervalMillis = 1000;
inline constexpr int kCephStatusIntervalSeconds = 30;
inline constexpr std::size_t kMaxCuratedImageNameBytes = 32;
inline constexpr std::size_t kMaxCuratedImageDescriptionBytes = 300;
// The agents' long-poll of their desired state (GET /v1/agent/desired, desired_waiters.h): parked
// polls at most (one per host; each also holds a connection of kMaxConnections), the longest wait
// a poll may ask (below kProxyTimeoutSeconds and the agent's own request timeout, so neither a
// standby's forward nor the agent cuts it), the hosts one re-read command covers, how soon a
// re-read the engine's queue refused is tried again, and how often the waiters' thread looks
// for a drain.
inline constexpr std::size_t kMaxDesiredWaiters = 10'000;
// Connections of authenticated host agents (Response::host_agent_id) at once, beside
// max_connections, in all and per host (its heartbeats, its long-poll, its usage reports, one
// spare). Beyond either an agent's connection stays counted with the customers'.
inline constexpr std::size_t kMaxAgentConnections = 2 * kMaxDesiredWaiters;
inline constexpr std::size_t kMaxAgentConnectionsPerHost = 4;
inline constexpr int kMaxDesiredWaitSeconds = 25;
inline constexpr std::size_t kMaxHostsPerDesiredCheck = 1'000;
inline constexpr int kDesiredCheckRetryMilliseconds = 100;
inline constexpr int kDesiredWaiterTickMilliseconds = 250;

}  // namespace gpuhub::http
