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
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/thread_name.h"
#include "engine/api_keys.h"
#include "http/limits.h"
#include "http/server_impl.h"
#include "http/static_files.h"

namespace gpuhub::http {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// 16 hex digits: a random 32-bit prefix drawn once per process, then a counter. Unique within the
// process and (with overwhelming likelihood) across restarts; nothing relies on ids being
// unguessable. Drawing 8 random bytes per request was a getrandom(2) call per request.
std::string NewRequestId() {
  static const std::uint32_t prefix = randombytes_random();
  static std::atomic<std::uint32_t> counter{randombytes_random()};
  std::uint64_t id =
      (static_cast<std::uint64_t>(prefix) << 32) | counter.fetch_add(1, std::memory_order_relaxed);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, id >>= 4) hex[static_cast<std::size_t>(i)] = kHex[id & 0xf];
  return hex;
}

Response InternalError() {
  return Response::Error(500, "internal", "the server failed to answer this request");
}

// A request is answered exactly once. The first answer is sent and later ones are dropped; a
// handler that throws, or whose Responder is destroyed without being called, gets the client a 500
// instead of a connection that hangs until its timeout and a request that stays "in flight" through
// shutdown.
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

}  // namespace
std::string MethodLabel(const std::string& method) {
  for (const char* known : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    if (method == known) return method;
  }
  return "other";
}

std::string LogSafe(std::string_view text, std::size_t max_bytes) {
  std::string out;
  for (char c : text.substr(0, max_bytes)) {
    unsigned char u = static_cast<unsigned char>(c);
    out.push_back(u < 0x20 || u == 0x7f || c == '"' || c == '\\' ? '?' : c);
  }
  if (text.size() > max_bytes) out += "...";
  return out;
}

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
    // An exception here must not end the accept chain (the server would stop taking connections).
    try {
      ServeConnection(std::move(socket), *this);
    } catch (const std::exception& e) {
      CountException("accept", "unknown", e.what());
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
  // A request made with an API key names the key (its id, never its secret) in its log line; the
  // id is what the secret claims, so a 401 line shows which key someone tried.
  std::int64_t api_key = engine::ApiKeyIdOf(request.BearerToken());
  auto finish = [this, send = std::move(send), started, route, method = request.method,
                 path = request.path, id = request.request_id, remote = request.remote_address,
                 credentialed, api_key](Response response) {
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
                "status={} duration_ms={:.3f}{}",
                id, remote, LogSafe(method, 16), LogSafe(path), LogSafe(route), response.status,
                seconds * 1000, api_key > 0 ? " api_key=" + std::to_string(api_key) : "");
    send(std::move(response));
  };
  if (match.handler) {
    request.path_params = std::move(match.params);
    request.route = match.route;
    auto once = std::make_shared<AnswerOnce>(std::move(finish), request.request_id);
    try {
      (*match.handler)(request, [once](Response response) { once->Answer(std::move(response)); });
    } catch (const std::exception& e) {
      // A handler bug must not take the server down nor leave the client waiting.
      CountException("handler " + route + " request_id=" + request.request_id,
                     request.remote_address, e.what());
      once->Answer(InternalError());
    } catch (...) {
      CountException("handler " + route + " request_id=" + request.request_id,
                     request.remote_address, "an exception that is not a std::exception");
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
  // The last line of defence: a handler that is not the connection's own (Beast's write operation,
  // the accept chain) may still throw into run(). Asio lets run() be called again after that; the
  // connection whose handler threw is dropped with it.
  auto run = [impl = impl_.get()] {
    for (;;) {
      try {
        impl->ioc.run();
        return;
      } catch (const std::exception& e) {
        impl->CountException("io_context", "unknown", e.what());
      } catch (...) {
        impl->CountException("io_context", "unknown", "an exception that is not a std::exception");
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < impl_->options.io_threads; ++i) {
    threads.emplace_back([run] {
      NameThisThread("gpuhub-http");
      run();
    });
  }
  run();
  for (auto& t : threads) t.join();
  spdlog::info("event=stopped");
}

}  // namespace gpuhub::http
