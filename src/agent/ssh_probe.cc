#include "agent/ssh_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace gpuhub::agent {
namespace {

constexpr std::size_t kMaxBannerBytes = 1024;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int MillisLeft(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

}  // namespace

bool SshBannerAnswers(int port, std::chrono::milliseconds timeout) {
  if (port <= 0 || port > 65535) return false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Fd s{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return false;
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, MillisLeft(deadline)) != 1) return false;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) return false;
  }
  std::string got;
  while (got.size() < kMaxBannerBytes) {
    pollfd p{s.fd, POLLIN, 0};
    if (::poll(&p, 1, MillisLeft(deadline)) != 1) return false;
    char buf[256];
    ssize_t n = ::read(s.fd, buf, sizeof buf);
    if (n <= 0) return false;  // closed (Docker's proxy before sshd listens) or an error
    got.append(buf, static_cast<std::size_t>(n));
    // RFC 4253 4.2: other lines may come first; the identification line starts "SSH-".
    std::size_t start = 0;
    while (true) {
      if (got.compare(start, 4, "SSH-") == 0) return true;
      std::size_t nl = got.find('\n', start);
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
  }
  return false;
}

}  // namespace gpuhub::agent
