#include "http/server.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/limits.h"
#include "http/static_files.h"

namespace gpuhub::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string NewRequestId() {
  unsigned char bytes[8];
  randombytes_buf(bytes, sizeof bytes);
  char hex[sizeof bytes * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, bytes, sizeof bytes);
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
        accept_failures(m.Counter("gpuhub_http_accept_failures_total",
                                  "accept() calls that failed (e.g. out of file descriptors)")) {
    if (!options.max_connections) options.max_connections = kMaxConnections;
    if (!options.max_header_bytes) options.max_header_bytes = kMaxHeaderBytes;
    if (!options.max_body_bytes) options.max_body_bytes = kMaxBodyBytes;
    if (!options.read_timeout_seconds) options.read_timeout_seconds = kReadTimeoutSeconds;
    if (!options.shutdown_grace_seconds) options.shutdown_grace_seconds = kShutdownGraceSeconds;
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

  // Counts one more open connection from `key` (AddressKey) unless the address already holds
  // max_connections_per_address; false then. Each true is undone by exactly one ReleaseAddress.
  bool AcquireAddress(const std::string& key) {
    std::lock_guard lock(address_mutex);
    // A new entry starts at 0, below the cap (callers only come here when there is one).
    std::size_t& count = address_connections[key];
    if (count >= options.max_connections_per_address) return false;
    ++count;
    return true;
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
  // Open connections per client address (only when max_connections_per_address is set): touched
  // when a connection is accepted and when it is destroyed. Addresses at 0 are erased, so the map
  // holds at most one entry per open connection.
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
  engine::CounterSeries& accept_failures;
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

  // Counts this connection against its client address (max_connections_per_address); false when
  // the address already holds that many. Called once, by the accept handler before Start or Refuse.
  bool CountAgainstAddress() {
    if (server_.options.max_connections_per_address == 0) return true;
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    // The peer is gone already (reset before accept returned): the first read fails and closes it.
    if (ec) return true;
    address_key_ = AddressKey(endpoint.address());
    address_counted_ = server_.AcquireAddress(address_key_);
    return address_counted_;
  }

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Connection::ReadHeader, shared_from_this()));
  }

  // Answers 503 and closes: a connection limit is reached.
  void Refuse(std::string message) {
    auto self = shared_from_this();
    net::dispatch(stream_.get_executor(), [self, message = std::move(message)] {
      self->WriteProtocolError(Response::Error(503, "unavailable", message));
    });
  }

 private:
  void ReadHeader() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    timed_out_ = false;
    stream_.expires_never();
    timer_.expires_after(std::chrono::seconds(server_.options.read_timeout_seconds));
    auto self = shared_from_this();
    timer_.async_wait([self](beast::error_code ec) {
      if (ec) return;  // cancelled: the request arrived
      self->timed_out_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Connection::OnHeader, self));
  }

  void OnHeader(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    // Beast frames a request by Content-Length when Transfer-Encoding does not end in "chunked"
    // (or reads no body at all), where a proxy in front may frame it otherwise: the bytes it
    // sees as this body would be our next request (smuggling). RFC 9112 6.3: 400 and close.
    // Only "chunked" alone is decoded here: another coding before it is 501.
    auto& header = parser_->get();
    if (header.count(bhttp::field::transfer_encoding) != 0 && header.version() < 11) {
      // RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 message is faulty framing, whatever
      // Content-Length says (a 1.0 proxy in front would not have framed it by chunks).
      timer_.cancel();
      return WriteProtocolError(
          Response::Error(400, "invalid_argument",
                          "malformed HTTP request: Transfer-Encoding is not allowed in HTTP/1.0"));
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
        timer_.cancel();
        return WriteProtocolError(
            Response::Error(400, "invalid_argument",
                            "malformed HTTP request: Transfer-Encoding must end with chunked"));
      }
      if (list.size() != 1) {
        timer_.cancel();
        return WriteProtocolError(Response::Error(
            501, "invalid_argument", "only Transfer-Encoding: chunked is supported"));
      }
    }
    auto length = parser_->content_length();
    if (length && *length > server_.options.max_body_bytes) {
      timer_.cancel();
      return WriteProtocolError(Response::Error(413, "payload_too_large",
                                                "request body is larger than " +
                                                    std::to_string(server_.options.max_body_bytes) +
                                                    " bytes"));
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
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&Connection::OnBody, shared_from_this()));
  }

  void OnBody(beast::error_code ec, std::size_t) {
    if (ec) return OnReadError(ec);
    timer_.cancel();
    Handle();
  }

  void OnReadError(beast::error_code ec) {
    timer_.cancel();
    if (timed_out_) {
      if (parser_->got_some()) {
        return WriteProtocolError(
            Response::Error(408, "invalid_argument",
                            "the request did not arrive within " +
                                std::to_string(server_.options.read_timeout_seconds) + " s"));
      }
      return Close();  // an idle keep-alive connection
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted ||
        ec == net::error::broken_pipe) {
      return Close();
    }
    if (ec == bhttp::error::header_limit) {
      return WriteProtocolError(
          Response::Error(431, "payload_too_large",
                          "request headers are larger than " +
                              std::to_string(server_.options.max_header_bytes) + " bytes"));
    }
    if (ec == bhttp::error::buffer_overflow) {
      // A header line, chunk-size line (extensions) or trailer longer than the read buffer.
      if (!parser_->is_header_done()) {
        return WriteProtocolError(
            Response::Error(431, "payload_too_large",
                            "request headers are larger than " +
                                std::to_string(server_.options.max_header_bytes) + " bytes"));
      }
      return WriteProtocolError(Response::Error(
          413, "payload_too_large",
          "a chunk-size line or the trailer of the chunked body is longer than " +
              std::to_string(kMaxReadBufferSlackBytes) + " bytes"));
    }
    if (ec == bhttp::error::body_limit) {
      return WriteProtocolError(Response::Error(413, "payload_too_large",
                                                "request body is larger than " +
                                                    std::to_string(server_.options.max_body_bytes) +
                                                    " bytes"));
    }
    WriteProtocolError(
        Response::Error(400, "invalid_argument", "malformed HTTP request: " + ec.message()));
  }

  void Handle() {
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    Request request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    head_ = request.method == "HEAD";
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    request.remote_address = ec ? "unknown" : endpoint.address().to_string();
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
    if (!bad.ok()) return WriteProtocolError(Response::Error(bad));
    if (server_.draining) {
      Response r = Response::Error(503, "unavailable", "the server is shutting down");
      r.close = true;
      return WriteProtocolError(std::move(r));
    }
    ++server_.in_flight;
    counted_ = true;
    auto self = shared_from_this();
    server_.Dispatch(std::move(request), [self](Response response) {
      net::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Write(std::move(response));
      });
    });
  }

  void WriteProtocolError(Response response) {
    response.close = true;
    keep_alive_ = false;
    if (!version_) version_ = 11;
    Write(std::move(response));
  }

  void Write(Response response) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(
        static_cast<bhttp::status>(response.status), version_ ? version_ : 11);
    res->set(bhttp::field::server, "gpuhub");
    if (!response.content_type.empty() && response.status != 204 && response.status != 304) {
      res->set(bhttp::field::content_type, response.content_type);
    }
    res->set("X-Content-Type-Options", "nosniff");
    for (const auto& [name, value] : response.headers) res->set(name, value);
    bool keep = keep_alive_ && !response.close && !server_.draining;
    res->keep_alive(keep);
    if (response.status == 204 || response.status == 304) {
      // no body, no Content-Length
    } else if (head_) {
      res->content_length(response.body.size());
    } else {
      res->body() = std::move(response.body);
      res->prepare_payload();
    }
    stream_.expires_after(std::chrono::seconds(kWriteTimeoutSeconds));
    auto self = shared_from_this();
    bhttp::async_write(stream_, *res, [self, res, keep](beast::error_code ec, std::size_t) {
      if (self->counted_) {
        self->counted_ = false;
        --self->server_.in_flight;
      }
      if (ec || !keep) return self->Close();
      self->ReadHeader();
    });
  }

  void Close() {
    timer_.cancel();
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
  bool counted_ = false;
  unsigned version_ = 0;
  std::string address_key_;       // set by CountAgainstAddress
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
      if (connections.load() > options.max_connections || draining) {
        refused.Add();
        connection->Refuse("too many open connections; retry shortly");
      } else if (!connection->CountAgainstAddress()) {
        refused_per_address.Add();
        connection->Refuse("too many open connections from this address; retry shortly");
      } else {
        connection->Start();
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
    metrics
        .Counter(
            "gpuhub_http_requests_total", "HTTP requests by route and status",
            {{"method", MethodLabel(method)},
             {"route", route},
             {"status", std::to_string(response.status)}})
        .Add();
    metrics
        .Histogram("gpuhub_http_request_duration_seconds", "HTTP request latency by route",
                   engine::MetricsRegistry::LatencyBounds(), {{"route", route}})
        .Observe(seconds);
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
    threads.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->ioc.run();
  for (auto& t : threads) t.join();
  spdlog::info("event=stopped");
}

}  // namespace gpuhub::http
