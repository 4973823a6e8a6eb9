#include "http/server.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/thread_name.h"
#include "http/limits.h"
#include "http/static_files.h"

namespace gpuhub::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

// 16 hex digits: a random 32-bit prefix drawn once per process, then a counter. Unique within the
// process and (with overwhelming likelihood) across restarts; nothing relies on ids being
// unguessable. Drawing 8 random bytes per request was a getrandom(2) call per request.
std::string NewRequestId() {
  static const std::uint32_t prefix = randombytes_random();
  static std::atomic<std::uint32_t> counter{randombytes_random()};
  std::uint64_t id = (static_cast<std::uint64_t>(prefix) << 32) |
                     counter.fetch_add(1, std::memory_order_relaxed);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, id >>= 4) hex[static_cast<std::size_t>(i)] = kHex[id & 0xf];
  return hex;
}

// The method as a metric label: the client chooses the token (any word is a valid HTTP method), so
// only the methods this server knows become labels; everything else is "other". Otherwise each new
// word would add a series to /metrics that lives as long as the process.
std::string MethodLabel(const std::string& method) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == known) return method;
  }
  return "other";
}

Response InternalError() {
  return Response::Error(500, "internal", "the server failed to answer this request");
}

// A request is answered exactly once. The first answer is sent and later ones are dropped; a handler
// that throws, or whose Responder is destroyed without being called, gets the client a 500 instead
// of a connection that hangs until its timeout and a request that stays "in flight" through shutdown.
class AnswerOnce {
 public:
  AnswerOnce(std::function<void(Response)> send, std::string request_id)
      : send_(std::move(send)), request_id_(std::move(request_id)) {}
  AnswerOnce(const AnswerOnce&) = delete;
  AnswerOnce& operator=(const AnswerOnce&) = delete;
  ~AnswerOnce() {
    if (answered_.exchange(true)) return;
    try {
      spdlog::error("event=handler_no_answer request_id={}", request_id_);
      send_(InternalError());
    } catch (...) {
      // a destructor must not throw; the connection's own timeout closes it
    }
  }
  void Answer(Response response) {
    if (answered_.exchange(true)) {
      spdlog::warn("event=handler_second_answer request_id={} status={}", request_id_,
                   response.status);
      return;
    }
    send_(std::move(response));
  }

 private:
  std::function<void(Response)> send_;
  std::string request_id_;
  std::atomic<bool> answered_{false};
};

bool SaneRequestId(const std::string& id) {
  if (id.empty() || id.size() > kMaxRequestIdBytes) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// The key of a client address in the per-address connection count: its bytes, with an IPv4-mapped
// IPv6 address (a dual-stack listener) as its IPv4 address.
std::string AddressKey(const net::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return AddressKey(net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6()));
  }
  if (address.is_v4()) {
    auto bytes = address.to_v4().to_bytes();
    return std::string(bytes.begin(), bytes.end());
  }
  auto bytes = address.to_v6().to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

std::string LogSafe(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (char c : text.substr(0, max_bytes)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f || c == '"' || c == '\\' ? '?' : c);
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

struct Server::Impl {
  Impl(ServerOptions o, const Router& r, engine::MetricsRegistry& m)
      : options(std::move(o)),
        router(r),
        metrics(m),
        ioc(options.io_threads),
        acceptor(ioc),
        signals(ioc),
        accept_retry(ioc),
        refused(m.Counter("gpuhub_http_connections_refused_total",
                          "Connections refused because of the connection limit")),
        refused_per_address(m.Counter(
            "gpuhub_http_connections_refused_per_address_total",
            "Connections refused because their client address reached its connection limit")),
        refused_reserved(m.Counter(
            "gpuhub_http_connections_refused_reserved_total",
            "Connections refused because their address already had one and only the slots kept "
            "for new client addresses were left")),
        accept_failures(m.Counter("gpuhub_http_accept_failures_total",
                                  "accept() calls that failed (e.g. out of file descriptors)")) {
    if (!options.max_connections) options.max_connections = kMaxConnections;
    if (!options.max_header_bytes) options.max_header_bytes = kMaxHeaderBytes;
    if (!options.max_body_bytes) options.max_body_bytes = kMaxBodyBytes;
    if (!options.read_timeout_seconds) options.read_timeout_seconds = kReadTimeoutSeconds;
    if (!options.header_timeout_seconds) {
      options.header_timeout_seconds =
          std::min(kHeaderTimeoutSeconds, options.read_timeout_seconds);
    }
    if (options.connections_reserved_for_new_addresses < 0) {
      // Behind a reverse proxy (no per-address cap) every connection has the proxy's address:
      // there are no new addresses to keep slots for.
      options.connections_reserved_for_new_addresses =
          options.max_connections_per_address == 0
              ? 0
              : static_cast<std::ptrdiff_t>(options.max_connections / kNewAddressReserveDivisor);
    }
    reserved_slots =
        std::min(static_cast<std::size_t>(options.connections_reserved_for_new_addresses),
                 options.max_connections - 1);
    if (!options.shutdown_grace_seconds) options.shutdown_grace_seconds = kShutdownGraceSeconds;
    timer_tick = std::chrono::seconds(
        std::max(1, std::min({options.header_timeout_seconds, options.read_timeout_seconds,
                              kWriteTimeoutSeconds})));
    if (options.io_threads < 1) options.io_threads = 1;
    m.Gauge("gpuhub_http_open_connections", "Open HTTP connections",
            [this] { return static_cast<double>(connections.load()); });
    m.Gauge("gpuhub_http_requests_in_flight", "Requests being handled",
            [this] { return static_cast<double>(in_flight.load()); });
    m.Gauge("gpuhub_http_connection_addresses", "Client addresses with open HTTP connections",
            [this] {
              std::lock_guard lock(address_mutex);
              return static_cast<double>(address_connections.size());
            });
  }

  ~Impl() {
    // The gauges read this object: leave them reading nothing once it is gone.
    metrics.Gauge("gpuhub_http_open_connections", "Open HTTP connections", nullptr);
    metrics.Gauge("gpuhub_http_requests_in_flight", "Requests being handled", nullptr);
    metrics.Gauge("gpuhub_http_connection_addresses",
                  "Client addresses with open HTTP connections", nullptr);
  }

  enum class Admission { kAdmitted, kFull, kAddressFull, kReservedForNewAddresses };
  // Whether one more connection (already in `connections`) from `key` (AddressKey) may stay: at
  // most max_connections in all and max_connections_per_address (when set) from one address, and
  // the last reserved_slots only for an address that holds none. kAdmitted counts it against the
  // address; each is undone by exactly one ReleaseAddress.
  Admission Admit(const std::string& key) {
    std::size_t open = connections.load();
    if (open > options.max_connections) return Admission::kFull;
    std::lock_guard lock(address_mutex);
    auto it = address_connections.find(key);
    std::size_t held = it == address_connections.end() ? 0 : it->second;
    if (options.max_connections_per_address != 0 && held >= options.max_connections_per_address) {
      return Admission::kAddressFull;
    }
    if (held > 0 && open > options.max_connections - reserved_slots) {
      return Admission::kReservedForNewAddresses;
    }
    ++address_connections[key];
    return Admission::kAdmitted;
  }

  // A refusal before routing (framing, limits, timeouts, connection limits): counted with
  // route="protocol", and logged at most kMaxProtocolRefusalLogsPerSecond times a second, the
  // next logged line saying how many were left out.
  void CountProtocolRefusal(const std::string& method, int status, const std::string& remote,
                            const std::string& message) {
    metrics
        .Counter("gpuhub_http_requests_total", "HTTP requests by route and status",
                 {{"method", method}, {"route", "protocol"}, {"status", std::to_string(status)}})
        .Add();
    std::size_t left_out = 0;
    {
      std::lock_guard lock(refusal_log_mutex);
      auto second = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
      if (second != refusal_log_second) {
        refusal_log_second = second;
        refusals_logged_this_second = 0;
      }
      if (refusals_logged_this_second >= kMaxProtocolRefusalLogsPerSecond) {
        ++refusals_left_out;
        return;
      }
      ++refusals_logged_this_second;
      left_out = std::exchange(refusals_left_out, 0);
    }
    spdlog::info("event=protocol_refused remote={} status={} method={} reason=\"{}\"{}", remote,
                 status, method, LogSafe(message),
                 left_out ? " refusals_not_logged_before=" + std::to_string(left_out) : "");
  }
  // One answered request in gpuhub_http_requests_total and the route's latency histogram. The
  // series are looked up in the registry once per route, method and status (a registry lookup
  // renders the labels and walks its maps under its lock) and kept here: routes are the router's
  // patterns plus "unmatched" and "static", methods the known ones plus "other", statuses the
  // ones handlers answer, so this stays small.
  void CountRequest(const std::string& method, const std::string& route, int status,
                    double seconds) {
    engine::HistogramSeries* duration = nullptr;
    engine::CounterSeries* counter = nullptr;
    {
      std::lock_guard lock(route_series_mutex);
      RouteSeries& series = route_series[route];
      duration = series.duration;
      for (const auto& c : series.counters) {
        if (c.status == status && c.method == method) counter = c.series;
      }
    }
    if (!duration) {
      duration = &metrics.Histogram("gpuhub_http_request_duration_seconds",
                                    "HTTP request latency by route",
                                    engine::MetricsRegistry::LatencyBounds(), {{"route", route}});
      std::lock_guard lock(route_series_mutex);
      route_series[route].duration = duration;
    }
    if (!counter) {
      counter = &metrics.Counter(
          "gpuhub_http_requests_total", "HTTP requests by route and status",
          {{"method", method}, {"route", route}, {"status", std::to_string(status)}});
      std::lock_guard lock(route_series_mutex);
      route_series[route].counters.push_back({method, status, counter});
    }
    counter->Add();
    duration->Observe(seconds);
  }

  void ReleaseAddress(const std::string& key) {
    std::lock_guard lock(address_mutex);
    auto it = address_connections.find(key);
    if (it == address_connections.end()) return;  // unreachable: every release follows an acquire
    if (--it->second == 0) address_connections.erase(it);
  }

  void Accept();
  void Dispatch(Request request, std::function<void(Response)> send);
  void BeginShutdown();
  void WaitForDrain(std::chrono::steady_clock::time_point deadline);

  ServerOptions options;
  const Router& router;
  engine::MetricsRegistry& metrics;
  // Declared before the io_context: connections still queued in it are destroyed with it and
  // decrement these.
  std::atomic<std::size_t> connections{0};
  std::atomic<std::size_t> in_flight{0};
  // Open connections per client address: touched when a connection is accepted and when it is
  // destroyed. Addresses at 0 are erased, so the map holds at most one entry per open connection.
  std::mutex address_mutex;
  std::unordered_map<std::string, std::size_t> address_connections;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::signal_set signals;
  // After a failed accept (EMFILE, ENFILE, ENOBUFS: the error repeats at once while the connection
  // waits in the backlog) the next one waits kAcceptRetryMilliseconds instead of spinning.
  net::steady_timer accept_retry;
  std::optional<net::steady_timer> drain_timer;
  std::function<void()> before_stop;
  engine::CounterSeries& refused;
  engine::CounterSeries& refused_per_address;
  engine::CounterSeries& refused_reserved;
  engine::CounterSeries& accept_failures;
  std::size_t reserved_slots = 0;  // of max_connections, for addresses without a connection
  // The longest a connection's timer waits before it looks at its deadline again: the shortest
  // phase timeout (Connection::Arm).
  std::chrono::steady_clock::duration timer_tick = std::chrono::seconds(1);
  struct RouteSeries {
    struct Count {
      std::string method;
      int status;
      engine::CounterSeries* series;
    };
    engine::HistogramSeries* duration = nullptr;
    std::vector<Count> counters;
  };
  std::mutex route_series_mutex;
  std::unordered_map<std::string, RouteSeries> route_series;  // by route (CountRequest)
  std::mutex refusal_log_mutex;
  std::int64_t refusal_log_second = 0;
  int refusals_logged_this_second = 0;
  std::size_t refusals_left_out = 0;
  bool accept_failing = false;  // only touched by the accept chain (one handler at a time)
  int bound_port = 0;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket&& socket, Server::Impl& server)
      : stream_(std::move(socket)),
        timer_(stream_.get_executor()),
        buffer_(server.options.max_header_bytes + kMaxReadBufferSlackBytes),
        server_(server) {
    ++server_.connections;
  }
  // The one place a connection stops counting, whichever way it ended (each path closes the socket
  // and drops its handlers' references; queued handlers are dropped with the io_context).
  ~Connection() {
    if (address_counted_) server_.ReleaseAddress(address_key_);
    --server_.connections;
  }

  // Whether this connection may stay (the connection limits); counts it against its client
  // address when it may. Called once, by the accept handler before Start or Refuse.
  Server::Impl::Admission Admit() {
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (ec) {
      // The peer is gone already (reset before accept returned): the first read fails and closes.
      return server_.connections.load() > server_.options.max_connections
                 ? Server::Impl::Admission::kFull
                 : Server::Impl::Admission::kAdmitted;
    }
    remote_ = endpoint.address().to_string();
    address_key_ = AddressKey(endpoint.address());
    auto admission = server_.Admit(address_key_);
    address_counted_ = admission == Server::Impl::Admission::kAdmitted;
    return admission;
  }

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Connection::ReadHeader, shared_from_this()));
  }

  // Answers 503 and closes: a connection limit is reached.
  void Refuse(std::string message) {
    auto self = shared_from_this();
    net::dispatch(stream_.get_executor(), [self, message = std::move(message)] {
      self->RefuseRequest(503, "unavailable", message);
    });
  }

 private:
  // Starts the deadline of the current phase (reading a request's headers or body, waiting idle
  // for the next one, writing an answer): when it passes, the pending operation is cancelled and
  // its handler sees timed_out_. Disarm ends it.
  //
  // The deadline is a number; the timer is touched only when it would otherwise fire too late.
  // Its wait never ends more than timer_tick past when it was set, and every phase is at least
  // timer_tick long, so a new phase's deadline is never before the pending wait ends: when the
  // wait ends it waits again until the deadline (or times the phase out). Setting and cancelling
  // the timer in every phase (idle, headers, body, write: four waits, three cancels, each cancel a
  // completion through the strand) was a tenth of a cheap request's instructions.
  void Arm(int seconds) {
    timed_out_ = false;
    deadline_ = Now() + std::chrono::seconds(seconds);
    if (wait_ends_ <= deadline_) return;  // a wait is pending and ends first (OnTimer)
    WaitUntil(deadline_);
  }
  void Disarm() { deadline_ = kNoDeadline; }
  static constexpr std::size_t kIdleReadBytes = 16 * 1024;  // at most, per read of a new request
  static constexpr std::chrono::steady_clock::time_point kNoDeadline =
      std::chrono::steady_clock::time_point::max();
  static std::chrono::steady_clock::time_point Now() { return std::chrono::steady_clock::now(); }
  void WaitUntil(std::chrono::steady_clock::time_point when) {
    wait_ends_ = std::min(when, Now() + server_.timer_tick);
    std::uint64_t generation = ++timer_generation_;
    timer_.expires_at(wait_ends_);  // cancels a pending wait: its handler sees an old generation
    auto self = shared_from_this();
    timer_.async_wait([self, generation](beast::error_code ec) {
      if (ec || generation != self->timer_generation_) return;  // cancelled or superseded
      self->OnTimer();
    });
  }
  void OnTimer() {
    wait_ends_ = kNoDeadline;
    if (deadline_ == kNoDeadline) return;  // disarmed: the next Arm waits again
    if (Now() < deadline_) return WaitUntil(deadline_);
    deadline_ = kNoDeadline;
    timed_out_ = true;
    beast::error_code ignored;
    stream_.socket().cancel(ignored);
  }
  // Closing: the pending wait holds the connection; it goes now, not when the wait ends.
  void StopTimer() {
    deadline_ = kNoDeadline;
    wait_ends_ = kNoDeadline;
    ++timer_generation_;
    timer_.cancel();
  }

  // The next request: a new connection has the header deadline from accept on; a kept-alive one
  // may stay idle for the read timeout, and has the header deadline from the first byte on.
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    reading_body_ = false;
    if (fresh_ || buffer_.size() > 0) return ReadHeaderNow();
    Arm(server_.options.read_timeout_seconds);
    // Idle until the next request's first bytes: they are read here (waiting for readiness and
    // then reading was two passes through the scheduler per request).
    auto self = shared_from_this();
    stream_.async_read_some(buffer_.prepare(beast::read_size(buffer_, kIdleReadBytes)),
                            [self](beast::error_code ec, std::size_t bytes) {
                              if (ec || self->timed_out_)
                                return self->Close();  // idle for the read timeout, or gone
                              self->buffer_.commit(bytes);
                              self->ReadHeaderNow();
                            });
  }

  void ReadHeaderNow() {
    fresh_ = false;
    Arm(server_.options.header_timeout_seconds);
    // Headers already in the buffer are parsed here; the rest is read as before (errors are those
    // async_read_header gives).
    while (!parser_->is_header_done() && buffer_.size() > 0) {
      beast::error_code ec;
      std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) break;
      if (ec) return OnHeader(ec, 0);
      if (used == 0) break;
    }
    if (parser_->is_header_done()) return OnHeader({}, 0);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Connection::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    // The headers are in: the body has the (longer) read timeout.
    Disarm();
    reading_body_ = true;
    Arm(server_.options.read_timeout_seconds);
    // Beast frames a request by Content-Length when Transfer-Encoding does not end in "chunked"
    // (or reads no body at all), where a proxy in front may frame it otherwise: the bytes it
    // sees as this body would be our next request (smuggling). RFC 9112 6.3: 400 and close.
    // Only "chunked" alone is decoded here: another coding before it is 501.
    auto& header = parser_->get();
    if (header.count(bhttp::field::transfer_encoding) != 0 && header.version() < 11) {
      // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing, whatever
      // Content-Length says (a 1.0 proxy in front would not have framed it by chunks).
      Disarm();
      return RefuseRequest(400, "invalid_argument",
                           "malformed HTTP request: Transfer-Encoding is not allowed in HTTP/1.0");
    }
    if (header.count(bhttp::field::transfer_encoding) != 0) {
      std::string codings;
      auto range = header.equal_range(bhttp::field::transfer_encoding);
      for (auto it = range.first; it != range.second; ++it) {
        codings += (codings.empty() ? "" : ",") + std::string(it->value());
      }
      std::vector<std::string> list;
      for (auto coding : bhttp::token_list(codings)) list.emplace_back(coding);
      bool chunked_last = !list.empty() && beast::iequals(list.back(), "chunked");
      if (!chunked_last || !parser_->chunked()) {
        Disarm();
        return RefuseRequest(400, "invalid_argument",
                             "malformed HTTP request: Transfer-Encoding must end with chunked");
      }
      if (list.size() != 1) {
        Disarm();
        return RefuseRequest(501, "invalid_argument",
                             "only Transfer-Encoding: chunked is supported");
      }
    }
    auto length = parser_->content_length();
    if (length && *length > server_.options.max_body_bytes) {
      Disarm();
      return RefuseRequest(413, "payload_too_large",
                           "request body is larger than " +
                               std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    auto& req = parser_->get();
    auto expect = req[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue")) {
      auto self = shared_from_this();
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                       req.version());
      bhttp::async_write(stream_, *cont, [self, cont](beast::error_code ec2, std::size_t) {
        if (ec2) return self->Close();
        self->ReadBody();
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    // A request without a body, or whose body came in the same packets as its headers, is
    // complete already: parsed here rather than by an async_read that has nothing to read and
    // still completes through the scheduler (a pass through the strand per request). What this
    // loop leaves (a body still on its way) is read as before; errors are those async_read gives.
    while (!parser_->is_done() && buffer_.size() > 0) {
      beast::error_code ec;
      std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) break;
      if (ec) return OnBody(ec, 0);
      if (used == 0) break;
    }
    if (parser_->is_done()) return OnBody({}, 0);
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Connection::OnBody, shared_from_this()));
  }

  void OnBody(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    Disarm();
    Handle();
  }

  void OnReadError(beast::error_code ec) {
    Disarm();
    if (timed_out_) {
      if (reading_body_) {
        return RefuseRequest(408, "invalid_argument",
                             "the request body did not arrive within " +
                                 std::to_string(server_.options.read_timeout_seconds) + " s");
      }
      if (parser_->got_some()) {
        return RefuseRequest(408, "invalid_argument",
                             "the request headers did not arrive within " +
                                 std::to_string(server_.options.header_timeout_seconds) + " s");
      }
      return Close();  // a new connection that sent nothing
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::error::broken_pipe) {
      return Close();
    }
    if (ec == bhttp::error::header_limit) {
      return RefuseRequest(431, "payload_too_large",
                           "request headers are larger than " +
                               std::to_string(server_.options.max_header_bytes) + " bytes");
    }
    if (ec == bhttp::error::buffer_overflow) {
      // A header line, chunk-size line (extensions) or trailer longer than the read buffer.
      if (!parser_->is_header_done()) {
        return RefuseRequest(431, "payload_too_large",
                             "request headers are larger than " +
                                 std::to_string(server_.options.max_header_bytes) + " bytes");
      }
      return RefuseRequest(413, "payload_too_large",
                           "a chunk-size line or the trailer of the chunked body is longer than " +
                               std::to_string(kMaxReadBufferSlackBytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      return RefuseRequest(413, "payload_too_large",
                           "request body is larger than " +
                               std::to_string(server_.options.max_body_bytes) + " bytes");
    }
    RefuseRequest(400, "invalid_argument", "malformed HTTP request: " + ec.message());
  }

  void Handle() {
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    Request request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    head_ = request.method == "HEAD";
    request.remote_address = remote_;  // read once by Admit (a getpeername(2) per request was)
    for (const auto& field : req) {
      std::string name(field.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto [it, inserted] = request.headers.emplace(name, std::string(field.value()));
      if (!inserted) it->second += ", " + std::string(field.value());
    }
    request.body = std::move(req.body());
    std::string_view target = request.target;
    auto question = target.find('?');
    auto path = UrlDecode(target.substr(0, question), false);
    Status bad;
    if (!path.ok()) {
      bad = path.status();
    } else {
      request.path = *path;
      if (request.path.empty() || request.path[0] != '/') {
        bad = Status::InvalidArgument("the request target must be an absolute path");
      }
    }
    if (bad.ok() && question != std::string_view::npos) {
      auto query = ParseQuery(target.substr(question + 1));
      if (query.ok()) {
        request.query = std::move(query).value();
      } else {
        bad = query.status();
      }
    }
    if (!bad.ok()) return RefuseRequest(bad);
    if (server_.draining) return RefuseRequest(503, "unavailable", "the server is shutting down");
    ++server_.in_flight;
    counted_ = true;
    auto self = shared_from_this();
    // An answer given on this connection's strand (a handler that answers at once) is written
    // there and then; one from another thread (the engine's writer) is queued to the strand.
    // Posting every answer cost a pass through the scheduler and often a wake-up of the other I/O
    // thread (perf: context switches were the largest cost of GET /healthz under wrk).
    server_.Dispatch(std::move(request), [self](Response response) {
      net::dispatch(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Write(std::move(response));
      });
    });
  }

  // Answers a request (or a connection) the server refuses before any route sees it, and closes:
  // counted in gpuhub_http_requests_total{route="protocol"} and logged (rate-limited).
  void RefuseRequest(int status, std::string_view code, const std::string& message) {
    RefuseRequest(status, Response::Error(status, code, message), message);
  }
  void RefuseRequest(const Status& bad) {
    RefuseRequest(HttpStatusOf(bad.code()), Response::Error(bad), bad.message());
  }
  void RefuseRequest(int status, Response response, const std::string& message) {
    bool header_done = parser_ && parser_->is_header_done();
    std::string method =
        header_done ? MethodLabel(std::string(parser_->get().method_string())) : "unknown";
    server_.CountProtocolRefusal(method, status, remote_, message);
    response.close = true;
    keep_alive_ = false;
    if (!version_) version_ = 11;
    Write(std::move(response));
  }

  // The answer's head, written here rather than by Beast's serializer (which walks its field list
  // as a chain of buffer sequences on every write: ~15k of GET /healthz's ~60k instructions,
  // callgrind). The bytes are those Beast wrote (ServerTest.AnswersAreWrittenByteForByte): the
  // status line, Server, Content-Type, X-Content-Type-Options, the handler's headers (each
  // replacing an earlier field of the same name, as Beast's set did), Connection where it is
  // not the version's default, and Content-Length (none for 204 and 304).
  struct Outgoing {
    std::string head;
    std::string body;
  };
  static std::string_view ReasonPhrase(int status) {
    auto reason = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
    return std::string_view(reason.data(), reason.size());
  }

  void Write(Response response) {
    const unsigned version = version_ ? version_ : 11;
    const bool no_body = response.status == 204 || response.status == 304;
    const bool keep = keep_alive_ && !response.close && !server_.draining;
    std::vector<std::pair<std::string_view, std::string_view>> fields;
    fields.reserve(4 + response.headers.size());
    auto set = [&fields](std::string_view name, std::string_view value) {
      std::erase_if(fields, [name](const auto& f) {
        return beast::iequals(beast::string_view(f.first.data(), f.first.size()),
                              beast::string_view(name.data(), name.size()));
      });
      fields.emplace_back(name, value);
    };
    fields.emplace_back("Server", "gpuhub");
    if (!response.content_type.empty() && !no_body) {
      fields.emplace_back("Content-Type", response.content_type);
    }
    fields.emplace_back("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) set(name, value);
    if (version >= 11 && !keep) set("Connection", "close");
    if (version < 11 && keep) set("Connection", "keep-alive");
    char length[24];
    if (!no_body) {
      auto [end, ec] = std::to_chars(length, length + sizeof length, response.body.size());
      (void)ec;
      set("Content-Length", std::string_view(length, static_cast<std::size_t>(end - length)));
    }
    auto out = std::make_shared<Outgoing>();
    std::string& head = out->head;
    head.reserve(160 + 64 * fields.size());
    head += version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
    head += std::to_string(response.status);
    head += ' ';
    head += ReasonPhrase(response.status);
    head += "\r\n";
    for (const auto& [name, value] : fields) {
      head += name;
      head += ": ";
      head += value;
      head += "\r\n";
    }
    head += "\r\n";
    if (!no_body && !head_) out->body = std::move(response.body);
    Arm(kWriteTimeoutSeconds);
    auto self = shared_from_this();
    std::array<net::const_buffer, 2> buffers{net::buffer(out->head), net::buffer(out->body)};
    net::async_write(stream_, buffers, [self, out, keep](beast::error_code ec, std::size_t) {
      self->Disarm();
      if (self->counted_) {
        self->counted_ = false;
        --self->server_.in_flight;
      }
      if (ec || !keep) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    StopTimer();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  net::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Server::Impl& server_;
  bool keep_alive_ = false;
  bool head_ = false;
  bool timed_out_ = false;
  std::uint64_t timer_generation_ = 0;  // WaitUntil: which wait is the current one
  std::chrono::steady_clock::time_point deadline_ = kNoDeadline;   // of the current phase (Arm)
  std::chrono::steady_clock::time_point wait_ends_ = kNoDeadline;  // of the pending wait, if any
  bool fresh_ = true;                   // no request read yet: the header deadline runs from accept
  bool reading_body_ = false;           // which deadline a timeout is: the header's or the body's
  bool counted_ = false;
  unsigned version_ = 0;
  std::string remote_ = "unknown";  // the peer's address, for the log (set by Admit)
  std::string address_key_;         // set by Admit
  bool address_counted_ = false;  // whether the destructor gives the address's slot back
};

}  // namespace

void Server::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      accept_failures.Add();
      // One line per streak of failures, not one per retry.
      if (!accept_failing) spdlog::warn("event=accept_failed error=\"{}\"", ec.message());
      accept_failing = true;
      if (draining) return;
      accept_retry.expires_after(std::chrono::milliseconds(kAcceptRetryMilliseconds));
      accept_retry.async_wait([this](beast::error_code timer_ec) {
        if (timer_ec || draining || !acceptor.is_open()) return;
        Accept();
      });
      return;
    }
    if (accept_failing) {
      spdlog::info("event=accept_recovered");
      accept_failing = false;
    }
    {
      auto connection = std::make_shared<Connection>(std::move(socket), *this);
      switch (draining ? Admission::kFull : connection->Admit()) {
        case Admission::kAdmitted:
          connection->Start();
          break;
        case Admission::kFull:
          refused.Add();
          connection->Refuse("too many open connections; retry shortly");
          break;
        case Admission::kAddressFull:
          refused_per_address.Add();
          connection->Refuse("too many open connections from this address; retry shortly");
          break;
        case Admission::kReservedForNewAddresses:
          refused_reserved.Add();
          connection->Refuse(
              "too many open connections; the last ones are kept for new clients; retry shortly");
          break;
      }
    }
    if (!draining) Accept();
  });
}

void Server::Impl::Dispatch(Request request, std::function<void(Response)> send) {
  auto started = std::chrono::steady_clock::now();
  const std::string& offered = request.Header("x-request-id");
  request.request_id = SaneRequestId(offered) ? offered : NewRequestId();
  Router::Match match = router.Find(request.method, request.path);
  std::string route = match.route;
  if (!match.handler && match.allowed_methods.empty()) {
    bool api = request.path == "/v1" || request.path.rfind("/v1/", 0) == 0;
    route = api ? "unmatched" : "static";
  }
  // An answer for a signed-in caller is private: no cache (a shared proxy's or the browser's disk)
  // may keep it, unless its handler said otherwise (public data, the same for everyone).
  bool credentialed = !request.Header("authorization").empty() || !request.Header("cookie").empty();
  auto finish = [this, send = std::move(send), started, route, method = request.method,
                 path = request.path, id = request.request_id, remote = request.remote_address,
                 credentialed](Response response) {
    response.headers.emplace_back("X-Request-Id", id);
    if (credentialed) {
      bool has_cache_control = false;
      for (const auto& [name, value] : response.headers) {
        has_cache_control = has_cache_control || beast::iequals(name, "cache-control");
      }
      if (!has_cache_control) response.headers.emplace_back("Cache-Control", "no-store");
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    CountRequest(MethodLabel(method), route, response.status, seconds);
    auto level = response.status >= 500 ? spdlog::level::warn : spdlog::level::info;
    spdlog::log(level,
                "event=request request_id={} remote={} method={} path=\"{}\" route=\"{}\" "
                "status={} duration_ms={:.3f}",
                id, remote, LogSafe(method, 16), LogSafe(path), LogSafe(route), response.status,
                seconds * 1000);
    send(std::move(response));
  };
  if (match.handler) {
    request.path_params = std::move(match.params);
    auto once = std::make_shared<AnswerOnce>(std::move(finish), request.request_id);
    try {
      (*match.handler)(request, [once](Response response) { once->Answer(std::move(response)); });
    } catch (const std::exception& e) {
      // A handler bug must not take the server down nor leave the client waiting.
      spdlog::error("event=handler_exception request_id={} error=\"{}\"", request.request_id,
                    LogSafe(e.what()));
      once->Answer(InternalError());
    }
    return;
  }
  if (!match.allowed_methods.empty()) {
    Response r = Response::Error(405, "invalid_argument",
                                 request.method + " is not allowed on " + match.route);
    std::string allow;
    for (const auto& m : match.allowed_methods) allow += (allow.empty() ? "" : ", ") + m;
    r.headers.emplace_back("Allow", allow);
    return finish(std::move(r));
  }
  if (route == "unmatched") {
    return finish(Response::Error(404, "not_found", "no such endpoint: " + request.path));
  }
  if (request.method != "GET" && request.method != "HEAD") {
    Response r = Response::Error(405, "invalid_argument", "static files are read with GET");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return finish(std::move(r));
  }
  finish(ServeStaticFile(options.web_dir, request));
}

void Server::Impl::BeginShutdown() {
  if (draining.exchange(true)) return;
  spdlog::info("event=shutdown_started in_flight={}", in_flight.load());
  beast::error_code ec;
  acceptor.close(ec);
  signals.cancel(ec);
  drain_timer.emplace(ioc);
  WaitForDrain(std::chrono::steady_clock::now() +
               std::chrono::seconds(options.shutdown_grace_seconds));
}

void Server::Impl::WaitForDrain(std::chrono::steady_clock::time_point deadline) {
  if (in_flight.load() == 0 || std::chrono::steady_clock::now() >= deadline) {
    if (in_flight.load() != 0) {
      spdlog::warn("event=shutdown_grace_expired in_flight={}", in_flight.load());
    }
    // Runs on an I/O thread while the others keep serving the last writes; the engine commits
    // and answers everything it still has queued.
    if (before_stop) before_stop();
    // Let the responses that before_stop produced reach their sockets.
    drain_timer->expires_after(std::chrono::milliseconds(50));
    drain_timer->async_wait([this](beast::error_code) {
      stopped = true;
      ioc.stop();
    });
    return;
  }
  drain_timer->expires_after(std::chrono::milliseconds(10));
  drain_timer->async_wait([this, deadline](beast::error_code ec) {
    if (!ec) WaitForDrain(deadline);
  });
}

Server::Server(ServerOptions options, const Router& router, engine::MetricsRegistry& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), router, metrics)) {}

Server::~Server() = default;

Status Server::Listen() {
  beast::error_code ec;
  auto address = net::ip::make_address(impl_->options.host, ec);
  if (ec)
    return Status::InvalidArgument("--listen: '" + impl_->options.host + "' is not an IP address");
  tcp::endpoint endpoint(address, static_cast<unsigned short>(impl_->options.port));
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("cannot listen on " + impl_->options.host + ":" +
                               std::to_string(impl_->options.port) + ": " + ec.message());
  }
  impl_->bound_port = acceptor.local_endpoint().port();
  return Status::Ok();
}

int Server::port() const { return impl_->bound_port; }

bool Server::draining() const { return impl_->draining; }

void Server::Shutdown() {
  net::post(impl_->ioc, [impl = impl_.get()] { impl->BeginShutdown(); });
}

void Server::Run(std::function<void()> before_stop) {
  impl_->before_stop = std::move(before_stop);
  if (impl_->options.handle_signals) {
    impl_->signals.add(SIGINT);
    impl_->signals.add(SIGTERM);
    impl_->signals.async_wait([impl = impl_.get()](beast::error_code ec, int signal_number) {
      if (ec) return;
      spdlog::info("event=signal signal={}", signal_number);
      impl->BeginShutdown();
    });
  }
  impl_->Accept();
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i) {
    threads.emplace_back([this] {
      NameThisThread("gpuhub-http");
      impl_->ioc.run();
    });
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  spdlog::info("event=stopped");
}

}  // namespace gpuhub::http
