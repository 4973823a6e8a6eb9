#include "agent/ssh_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

namespace gpuhub::agent {
namespace {

// A listener on 127.0.0.1 that answers its first connection with `greeting` and then closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string greeting) : greeting_(std::move(greeting)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      if (!greeting_.empty()) (void)!::write(c, greeting_.data(), greeting_.size());
      ::close(c);
    });
  }
  ~OneShotServer() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  int port() const { return port_; }

 private:
  std::string greeting_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(SshProbeTest, AnSshBannerIsReady) {
  OneShotServer server("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n");
  EXPECT_TRUE(SshBannerAnswers(server.port(), std::chrono::seconds(2)));
}

TEST(SshProbeTest, LinesBeforeTheBannerAreSkipped) {
  OneShotServer server("welcome\r\nSSH-2.0-dropbear\r\n");
  EXPECT_TRUE(SshBannerAnswers(server.port(), std::chrono::seconds(2)));
}

TEST(SshProbeTest, AProxyThatAcceptsAndClosesIsNotReady) {
  // What Docker's userland proxy does while sshd in the container does not listen yet.
  OneShotServer server("");
  EXPECT_FALSE(SshBannerAnswers(server.port(), std::chrono::seconds(2)));
}

TEST(SshProbeTest, SomethingElseOnThePortIsNotReady) {
  OneShotServer server("HTTP/1.1 400 Bad Request\r\n\r\n");
  EXPECT_FALSE(SshBannerAnswers(server.port(), std::chrono::seconds(2)));
}

TEST(SshProbeTest, NothingListeningIsNotReady) {
  int port = 0;
  {
    OneShotServer gone("");
    port = gone.port();
  }
  EXPECT_FALSE(SshBannerAnswers(port, std::chrono::seconds(2)));
  EXPECT_FALSE(SshBannerAnswers(0, std::chrono::seconds(2)));
}

}  // namespace
}  // namespace gpuhub::agent
