// Internal to src/http: the state one HTTP server shares between server.cc (accepting, routing a
// request to its handler, shutdown, the I/O threads) and connection.cc (one connection: reading
// and parsing its requests, writing the answers, its deadlines). Boost.Asio types in here: include
// it from those .cc files only.
#pragma once

#include <spdlog/spdlog.h>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/metrics.h"
#include "http/limits.h"
#include "http/router.h"
#include "http/server.h"

namespace gpuhub::http {

namespace server_internal {
namespace net = boost::asio;
using tcp = net::ip::tcp;
}  // namespace server_internal

// The method as a metric label: the client chooses the token (any word is a valid HTTP method), so
// only the methods this server knows become labels; everything else is "other". Otherwise each new
// word would add a series to /metrics that lives as long as the process.
std::string MethodLabel(const std::string& method);

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
                                  "accept() calls that failed (e.g. out of file descriptors)")),
        handler_exceptions(m.Counter(
            "gpuhub_http_handler_exceptions_total",
            "Exceptions caught at a connection's boundary or around a route's handler (a bug or "
            "a library limit): that request got a 500 or its connection was closed")) {
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
    m.Gauge("gpuhub_http_open_agent_connections",
            "Open HTTP connections of authenticated host agents (not in max_connections)",
            [this] { return static_cast<double>(agent_connections.load()); });
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
    metrics.Gauge("gpuhub_http_open_agent_connections",
                  "Open HTTP connections of authenticated host agents (not in max_connections)",
                  nullptr);
    metrics.Gauge("gpuhub_http_requests_in_flight", "Requests being handled", nullptr);
    metrics.Gauge("gpuhub_http_connection_addresses", "Client addresses with open HTTP connections",
                  nullptr);
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

  // An exception caught at a connection's boundary (Connection::Guarded), around a route's
  // handler (Dispatch) or out of io_context::run (Run): counted, and logged once each, at most
  // kMaxProtocolRefusalLogsPerSecond lines a second (a client that can trigger one must not be
  // able to flood the log with it).
  void CountException(std::string_view where, const std::string& remote, std::string_view what) {
    handler_exceptions.Add();
    {
      std::lock_guard lock(refusal_log_mutex);
      auto second = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
      if (second != exception_log_second) {
        exception_log_second = second;
        exceptions_logged_this_second = 0;
      }
      if (exceptions_logged_this_second >= kMaxProtocolRefusalLogsPerSecond) return;
      ++exceptions_logged_this_second;
    }
    spdlog::error("event=http_exception where={} remote={} error=\"{}\"", where, remote,
                  LogSafe(what));
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
  std::atomic<std::size_t> agent_connections{0};  // moved out of `connections` (host_agent_id)
  std::mutex agent_mutex;
  std::unordered_map<std::int64_t, std::size_t> agent_connections_by_host;  // at most one per
                                                                             // agent connection
  // Takes an agent slot for `host` (false: the limits are reached); undone by ReleaseAgent.
  bool AdmitAgent(std::int64_t host) {
    std::lock_guard lock(agent_mutex);
    std::size_t& held = agent_connections_by_host[host];
    if (held >= kMaxAgentConnectionsPerHost || agent_connections.load() >= kMaxAgentConnections) {
      if (held == 0) agent_connections_by_host.erase(host);
      return false;
    }
    ++held;
    ++agent_connections;
    return true;
  }
  void ReleaseAgent(std::int64_t host) {
    std::lock_guard lock(agent_mutex);
    auto it = agent_connections_by_host.find(host);
    if (it != agent_connections_by_host.end() && --it->second == 0) {
      agent_connections_by_host.erase(it);
    }
    --agent_connections;
  }
  std::atomic<std::size_t> in_flight{0};
  // Open connections per client address: touched when a connection is accepted and when it is
  // destroyed. Addresses at 0 are erased, so the map holds at most one entry per open connection.
  std::mutex address_mutex;
  std::unordered_map<std::string, std::size_t> address_connections;
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  server_internal::net::io_context ioc;
  server_internal::tcp::acceptor acceptor;
  server_internal::net::signal_set signals;
  // After a failed accept (EMFILE, ENFILE, ENOBUFS: the error repeats at once while the connection
  // waits in the backlog) the next one waits kAcceptRetryMilliseconds instead of spinning.
  server_internal::net::steady_timer accept_retry;
  std::optional<server_internal::net::steady_timer> drain_timer;
  std::function<void()> before_stop;
  engine::CounterSeries& refused;
  engine::CounterSeries& refused_per_address;
  engine::CounterSeries& refused_reserved;
  engine::CounterSeries& accept_failures;
  engine::CounterSeries& handler_exceptions;
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
  std::int64_t exception_log_second = 0;  // CountException, under refusal_log_mutex
  int exceptions_logged_this_second = 0;
  bool accept_failing = false;  // only touched by the accept chain (one handler at a time)
  int bound_port = 0;
};

// Serves one accepted connection (connection.cc): admits it against the connection limits, or
// answers 503 and closes, then reads and answers its requests until it closes.
void ServeConnection(server_internal::tcp::socket socket, Server::Impl& server);

}  // namespace gpuhub::http
