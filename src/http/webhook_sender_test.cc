#include "http/webhook_sender.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gpuhub::http {
namespace {

TEST(WebhookSenderTest, TheSignatureIsHmacSha256OfTimestampDotBody) {
  // openssl: printf '%s' '1767225600.{"id":1}' | openssl dgst -sha256 -hmac whsec_test
  EXPECT_EQ(WebhookSignatureHeader("whsec_test", 1767225600, "{\"id\":1}"),
            "t=1767225600,v1=c288d7ec0b1747de22e35fbdbabba9772c8e0d64b7db67e546bc92b86c005ab8");
}

// An HTTP listener on 127.0.0.1, port 0: records each request's head and answers every one with
// `answer` (then closes the connection).
class Listener {
 public:
  explicit Listener(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    ::listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~Listener() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stop_) {
      int client = ::accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      ++connections_;
      std::string got;
      char chunk[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = ::recv(client, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        got.append(chunk, static_cast<std::size_t>(n));
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(got.substr(0, got.find("\r\n\r\n")));
      }
      ::send(client, answer_.data(), answer_.size(), MSG_NOSIGNAL);
      ::shutdown(client, SHUT_WR);
      while (::recv(client, chunk, sizeof chunk, 0) > 0) {
      }
      ::close(client);
    }
  }

  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::mutex mutex_;
  std::vector<std::string> requests_;
  std::thread thread_;
};

WebhookSenderOptions LoopbackAllowed() {
  WebhookSenderOptions options;
  options.allow_private_addresses = true;  // the listeners are on loopback
  options.timeout = std::chrono::milliseconds(5000);
  return options;
}

TEST(WebhookSenderTest, ARedirectIsAFailedAttemptAndNeverFollowed) {
  Listener target("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  for (int status : {301, 302, 303, 307, 308}) {
    SCOPED_TRACE(status);
    Listener redirector("HTTP/1.1 " + std::to_string(status) + " Moved\r\nLocation: " +
                        target.url() +
                        "/internal\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    WebhookAttempt a = PostWebhook(redirector.url() + "/hook", "{\"id\":1}", "whsec_test", 7,
                                   LoopbackAllowed());
    EXPECT_FALSE(a.delivered);
    EXPECT_EQ(a.status_code, status);
    EXPECT_EQ(a.error, "answered " + std::to_string(status) + "; redirects are not followed");
    EXPECT_FALSE(a.permanent);  // retried on the schedule, like any other non-2xx
    auto seen = redirector.requests();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_TRUE(seen[0].starts_with("POST /hook HTTP/1.1\r\n")) << seen[0];
    EXPECT_NE(seen[0].find("Gpuhub-Delivery: 7"), std::string::npos) << seen[0];
  }
  // Give a follow-up connection time to arrive if one had been made.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(target.connections(), 0);
  EXPECT_TRUE(target.requests().empty());
}

TEST(WebhookSenderTest, A2xxIsDelivered) {
  Listener receiver("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
  WebhookAttempt a = PostWebhook(receiver.url() + "?k=1", "{}", "whsec_test", 1, LoopbackAllowed());
  EXPECT_TRUE(a.delivered) << a.error;
  EXPECT_EQ(a.status_code, 204);
  EXPECT_EQ(a.error, "");
  ASSERT_EQ(receiver.requests().size(), 1u);
  EXPECT_TRUE(receiver.requests()[0].starts_with("POST /?k=1 HTTP/1.1\r\n"));
}

TEST(WebhookSenderTest, InternalAddressesAreRefusedWithoutConnecting) {
  Listener receiver("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  std::string base = receiver.url();
  std::string p = base.substr(base.rfind(':'));
  WebhookSenderOptions options = LoopbackAllowed();
  options.allow_private_addresses = false;
  // The literal, a short form of it, an embedded form (mapped), and a name that resolves to it.
  for (std::string url : {base, "http://127.1" + p, "http://[::ffff:127.0.0.1]" + p,
                          "http://localhost" + p}) {
    SCOPED_TRACE(url);
    WebhookAttempt a = PostWebhook(url + "/hook", "{}", "whsec_test", 1, options);
    EXPECT_FALSE(a.delivered);
    EXPECT_TRUE(a.permanent);
    EXPECT_EQ(a.status_code, 0);
    EXPECT_NE(a.error.find("resolves to an internal address"), std::string::npos) << a.error;
  }
  EXPECT_EQ(receiver.connections(), 0);
}

}  // namespace
}  // namespace gpuhub::http
