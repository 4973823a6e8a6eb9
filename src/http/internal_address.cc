#include "http/internal_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>

namespace gpuhub::http {
namespace {

bool InV4(std::uint32_t a, std::uint32_t net, int bits) {
  std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
  return (a & mask) == (net & mask);
}

bool InternalV4(std::uint32_t a) {
  return InV4(a, 0x00000000, 8) || InV4(a, 0x0a000000, 8) || InV4(a, 0x64400000, 10) ||
         InV4(a, 0x7f000000, 8) || InV4(a, 0xa9fe0000, 16) || InV4(a, 0xac100000, 12) ||
         InV4(a, 0xc0000000, 24) || InV4(a, 0xc0000200, 24) || InV4(a, 0xc0586300, 24) ||
         InV4(a, 0xc0a80000, 16) || InV4(a, 0xc6120000, 15) || InV4(a, 0xc6336400, 24) ||
         InV4(a, 0xcb007100, 24) ||
         InV4(a, 0xe0000000, 3);  // multicast and reserved up to 255.255.255.255
}

std::uint32_t V4At(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         b[3];
}

bool AllZero(const unsigned char* b, int from, int to) {
  for (int i = from; i < to; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

bool InternalV6(const unsigned char* b) {
  // The forms that carry an IPv4 address: a packet to them ends up at that IPv4 address (the
  // kernel for mapped/compatible, a translator or relay for the others), so the IPv4 decides.
  if (AllZero(b, 0, 10) && b[10] == 0xff && b[11] == 0xff) {  // ::ffff:a.b.c.d mapped
    return InternalV4(V4At(b + 12));
  }
  if (AllZero(b, 0, 12)) return InternalV4(V4At(b + 12));  // ::a.b.c.d compatible, :: and ::1
  if (AllZero(b, 0, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0) {
    return InternalV4(V4At(b + 12));  // ::ffff:0:a.b.c.d translated (SIIT)
  }
  if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
    if (AllZero(b, 4, 12)) return InternalV4(V4At(b + 12));  // 64:ff9b::/96 well-known NAT64
    return true;  // 64:ff9b:1::/48 local-use NAT64 and the unassigned rest of 64:ff9b::/32
  }
  if (b[0] == 0x20 && b[1] == 0x02) return InternalV4(V4At(b + 2));  // 2002::/16 6to4
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00) return true;  // Teredo
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return true;  // documentation
  if (b[0] == 0x01 && AllZero(b, 1, 8)) return true;                  // 100::/64 discard
  if ((b[0] & 0xfe) == 0xfc) return true;                             // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return true;             // fe80::/10 link-local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return true;             // fec0::/10 site-local
  if (b[0] == 0xff) return true;                                      // multicast
  return false;
}

}  // namespace

bool IsInternalAddress(std::string_view numeric) {
  std::string text(numeric);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return InternalV4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return true;  // not an address: refuse
  return InternalV6(v6.s6_addr);
}

std::optional<std::string> LiteralAddress(std::string_view host) {
  std::string text(host);
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  // The resolver's own reading, so that "127.1" or "0x7f000001" (inet_aton forms that
  // getaddrinfo accepts and connects to) count as the literals they are.
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(text.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return std::nullopt;
  }
  char out[INET6_ADDRSTRLEN] = {};
  const void* addr =
      found->ai_family == AF_INET
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr);
  const char* written = ::inet_ntop(found->ai_family, addr, out, sizeof out);
  ::freeaddrinfo(found);
  if (written == nullptr) return std::string("invalid");  // a literal we cannot print: refuse
  return std::string(out);
}

}  // namespace gpuhub::http
