// The Beast server itself, on port 0 with a router of test handlers: what a client gets when a
// handler misbehaves, what /metrics keeps per request, and that shutdown is not held up.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "engine/metrics.h"
#include "http/router.h"

namespace gpuhub::http {
namespace {

// Sends `bytes` on a new connection and reads until the server closes it or `timeout_ms` passes.
std::string RoundTrip(int port, const std::string& bytes, int timeout_ms = 5000) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(int shutdown_grace_seconds = 20) {
    ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.io_threads = 2;
    options.handle_signals = false;
    options.shutdown_grace_seconds = shutdown_grace_seconds;
    server_ = std::make_unique<Server>(options, router_, metrics_);
    ASSERT_TRUE(server_->Listen().ok());
    thread_ = std::thread([this] { server_->Run(nullptr); });
  }
  // Seconds Shutdown took until Run returned.
  double Stop() {
    auto started = std::chrono::steady_clock::now();
    server_->Shutdown();
    thread_.join();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  void TearDown() override {
    if (thread_.joinable()) Stop();
  }
  std::string Get(const std::string& method, const std::string& path) {
    return RoundTrip(server_->port(), method + " " + path +
                                          " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  }

  Router router_;
  engine::MetricsRegistry metrics_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

TEST_F(ServerTest, AHandlerThatThrowsIsAnswered500AndDoesNotHoldUpShutdown) {
  router_.Add("GET", "/throw",
              [](const Request&, Responder) { throw std::runtime_error("handler bug"); });
  Start(/*shutdown_grace_seconds=*/10);
  std::string reply = Get("GET", "/throw");
  EXPECT_EQ(reply.rfind("HTTP/1.1 500", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"internal\""), std::string::npos) << reply;
  EXPECT_EQ(reply.find("handler bug"), std::string::npos) << "no internals to the client";
  // Nothing is left in flight: shutdown does not wait for the grace period.
  EXPECT_LT(Stop(), 5.0);
}

TEST_F(ServerTest, AResponderDroppedWithoutAnAnswerDoesNotHoldUpShutdown) {
  router_.Add("GET", "/drop", [](const Request&, Responder) {});
  Start(/*shutdown_grace_seconds=*/10);
  std::string reply = Get("GET", "/drop");
  EXPECT_EQ(reply.rfind("HTTP/1.1 500", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"internal\""), std::string::npos) << reply;
  EXPECT_NE(metrics_.Render().find("gpuhub_http_requests_in_flight 0"), std::string::npos)
      << metrics_.Render();
  EXPECT_LT(Stop(), 5.0);
}

TEST_F(ServerTest, OnlyTheFirstOfTwoAnswersIsSent) {
  router_.Add("GET", "/twice", [](const Request&, Responder respond) {
    respond(Response::Json(200, "{\"first\":true}"));
    respond(Response::Json(201, "{\"second\":true}"));
  });
  Start();
  std::string reply = Get("GET", "/twice");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("first"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("second"), std::string::npos) << reply;
  EXPECT_EQ(reply.find("HTTP/1.1 201"), std::string::npos) << reply;
}

TEST_F(ServerTest, MetricsLabelOnlyKnownMethods) {
  router_.Add("GET", "/v1/ok", [](const Request&, Responder respond) {
    respond(Response::Json(200, "{}"));
  });
  Start();
  EXPECT_EQ(Get("GET", "/v1/ok").rfind("HTTP/1.1 200", 0), 0u);
  // A client chooses the method token: each new one must not become a new metric series.
  for (int i = 0; i < 20; ++i) {
    std::string reply = Get("XMETHOD" + std::to_string(i), "/v1/ok");
    EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << reply;
  }
  std::string text = metrics_.Render();
  EXPECT_EQ(text.find("XMETHOD"), std::string::npos) << text;
  EXPECT_NE(text.find("method=\"GET\",route=\"/v1/ok\",status=\"200\""), std::string::npos) << text;
  EXPECT_NE(text.find("method=\"other\",route=\"/v1/ok\",status=\"405\"} 20"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace gpuhub::http
