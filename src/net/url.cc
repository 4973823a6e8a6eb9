#include "net/url.h"

#include <charconv>

#include "net/limits.h"

namespace gpuhub::net {
namespace {

std::string_view Clip(std::string_view text) { return text.substr(0, 80); }

Status Bad(std::string_view text, std::string_view why) {
  return Status::InvalidArgument("bad URL '" + std::string(Clip(text)) + "': " + std::string(why));
}

bool IsPort(std::string_view text) {
  if (text.empty() || text.size() > 5) return false;
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  return ec == std::errc() && end == text.data() + text.size() && port >= 1 && port <= 65535;
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

}  // namespace

std::string Url::ToString() const {
  if (scheme == Scheme::kUnix) return "unix:" + socket_path;
  std::string out = scheme == Scheme::kHttps ? "https://" : "http://";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (scheme == Scheme::kHttps ? "443" : "80")) out += ":" + port;
  return out + base_path;
}

std::string Url::HostHeader() const {
  if (scheme == Scheme::kUnix) return "localhost";
  std::string out = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (scheme == Scheme::kHttps ? "443" : "80")) out += ":" + port;
  return out;
}

Result<Url> ParseUrl(std::string_view text) {
  if (text.size() > kMaxUrlBytes) {
    return Bad(text, "longer than " + std::to_string(kMaxUrlBytes) + " bytes");
  }
  for (char c : text) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Bad(text, "spaces and control characters are not allowed");
    }
  }
  Url url;
  std::string_view rest;
  if (text.starts_with("unix:")) {
    url.scheme = Scheme::kUnix;
    rest = text.substr(5);
    if (rest.starts_with("//")) rest.remove_prefix(2);
    if (!rest.starts_with("/") || rest.size() < 2) {
      return Bad(text, "a unix socket URL is unix:/absolute/path");
    }
    url.socket_path = std::string(rest);
    return url;
  }
  if (text.starts_with("http://")) {
    url.scheme = Scheme::kHttp;
    url.port = "80";
    rest = text.substr(7);
  } else if (text.starts_with("https://")) {
    url.scheme = Scheme::kHttps;
    url.port = "443";
    rest = text.substr(8);
  } else {
    return Bad(text, "the scheme must be http://, https:// or unix:");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return Bad(text, "a base URL has no query or fragment");
  }
  std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? "" : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    return Bad(text, "credentials in the URL are not allowed");
  }
  std::string_view port;
  if (authority.starts_with("[")) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return Bad(text, "unclosed IPv6 address");
    url.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(":")) return Bad(text, "junk after the IPv6 address");
      port = after.substr(1);
    }
    for (char c : url.host) {
      if (!(IsHostChar(c) || c == ':')) return Bad(text, "bad IPv6 address");
    }
    if (url.host.empty()) return Bad(text, "empty host");
  } else {
    std::size_t colon = authority.find(':');
    url.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
    if (url.host.empty()) return Bad(text, "empty host");
    for (char c : url.host) {
      if (!IsHostChar(c)) return Bad(text, "bad character in the host name");
    }
  }
  if (!port.empty() || authority.ends_with(":")) {
    if (!IsPort(port)) return Bad(text, "the port must be 1..65535");
    url.port = std::string(port);
  }
  while (path.ends_with("/")) path.remove_suffix(1);
  url.base_path = std::string(path);
  return url;
}

}  // namespace gpuhub::net
