// Raw bytes to the HTTP server's socket-level read path, in-process: a Server on a loopback port
// (started once) with a router of test handlers; each input is sent on a new connection, the
// write side is shut, and every byte the server answers is read until it closes.
//
// Fails (abort) when the process dies (an exception out of io_context::run ends it), when the
// server writes something that is not an HTTP/1.x response, or when an exception had to be caught
// at a connection's boundary (gpuhub_http_handler_exceptions_total: the class of bug of issue 25,
// now survived but still a bug).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "engine/metrics.h"
#include "http/router.h"
#include "http/server.h"

namespace {

using gpuhub::http::Request;
using gpuhub::http::Responder;
using gpuhub::http::Response;

struct Fixture {
  gpuhub::engine::MetricsRegistry metrics;
  gpuhub::http::Router router;
  std::unique_ptr<gpuhub::http::Server> server;
  std::thread thread;
  gpuhub::engine::CounterSeries* exceptions = nullptr;

  Fixture() {
    spdlog::set_level(spdlog::level::off);
    router.Add("POST", "/v1/size", [](const Request& r, Responder respond) {
      respond(Response::Json(200, "{\"bytes\":" + std::to_string(r.body.size()) + "}"));
    });
    router.Add("GET", "/v1/items/{id}", [](const Request& r, Responder respond) {
      respond(Response::Json(200, "{\"n\":" + std::to_string(r.path_params.size()) + "}"));
    });
    router.Add("PUT", "/v1/later", [](const Request&, Responder respond) {
      std::thread([respond] { respond(Response::Json(202, "{}")); }).detach();
    });
    gpuhub::http::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.io_threads = 2;
    options.handle_signals = false;
    options.header_timeout_seconds = 1;
    options.read_timeout_seconds = 1;
    server = std::make_unique<gpuhub::http::Server>(options, router, metrics);
    if (!server->Listen().ok()) std::abort();
    thread = std::thread([this] { server->Run(nullptr); });
    exceptions = &metrics.Counter("gpuhub_http_handler_exceptions_total", "");
  }
};

bool SendAll(int fd, const std::uint8_t* data, std::size_t size) {
  std::size_t sent = 0;
  while (sent < size) {
    ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture* fixture = new Fixture();  // lives as long as the process
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(fixture->server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return 0;
  }
  SendAll(fd, data, size);  // the server may close early (a refusal): its answer is still read
  ::shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[16 * 1024];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) {
      std::fprintf(stderr, "the server neither answered nor closed within 5 s\n");
      std::abort();
    }
    ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    if (answer.size() < 64) answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (!answer.empty() && answer.rfind("HTTP/1.", 0) != 0) {
    std::fprintf(stderr, "not an HTTP response: %.64s\n", answer.c_str());
    std::abort();
  }
  if (fixture->exceptions->value() != 0) {
    std::fprintf(stderr, "an exception was caught at a connection's boundary\n");
    std::abort();
  }
  return 0;
}
