// Base URLs of the peers gpuhub talks to: its own server (CLI, host agent), BTCPay Server,
// customers' webhook endpoints, and the Docker Engine API on a unix socket.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub::net {

enum class Scheme { kHttp, kHttps, kUnix };

struct Url {
  Scheme scheme = Scheme::kHttp;
  std::string host;         // http(s): a name, an IPv4 address or an IPv6 address without brackets
  std::string port;         // http(s): "80", "443" or the explicit port
  std::string socket_path;  // unix: the socket's file path
  std::string base_path;    // "" or "/api" (no trailing slash): every request target goes under it

  // The URL as it was meant, normalised ("https://example.com:8443/api"); never holds credentials
  // (ParseUrl refuses them), so it is safe to log.
  std::string ToString() const;
  // The value of the Host header: host[:port] (the port when it is not the scheme's default);
  // "localhost" for a unix socket (Docker wants some Host header).
  std::string HostHeader() const;
};

// Parses "http://HOST[:PORT][/PATH]", "https://HOST[:PORT][/PATH]" and "unix:/path/to.sock" or
// "unix:///path/to.sock". Refuses (invalid_argument, with a message naming what is wrong) other
// schemes, user:password@ credentials, a query or fragment, ports outside 1..65535, control
// characters and spaces, and anything longer than kMaxUrlBytes.
Result<Url> ParseUrl(std::string_view text);

}  // namespace gpuhub::net
