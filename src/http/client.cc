#include "http/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

#include "core/strings.h"

namespace gpuhub::http {
namespace {

namespace beast = boost::beast;
namespace asio = boost::asio;

constexpr std::size_t kMaxResponseBytes = 16 * 1024 * 1024;

Status ParseBaseUrl(std::string_view url, std::string* host, std::string* port) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Status::InvalidArgument(
        "--server must be an http:// URL such as http://127.0.0.1:8080, "
        "got '" +
        std::string(url.substr(0, 64)) + "'");
  }
  std::string_view rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("--server must be http://HOST[:PORT] without a path");
  }
  std::size_t colon = rest.rfind(':');
  if (rest.front() == '[') {  // [::1]:8080
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("--server: bad IPv6 host");
    *host = std::string(rest.substr(1, close - 1));
    *port = close + 1 < rest.size() && rest[close + 1] == ':' ? std::string(rest.substr(close + 2))
                                                              : "80";
  } else if (colon != std::string_view::npos) {
    *host = std::string(rest.substr(0, colon));
    *port = std::string(rest.substr(colon + 1));
  } else {
    *host = std::string(rest);
    *port = "80";
  }
  auto p = ParseInt64(*port, "--server port");
  if (host->empty() || !p.ok() || *p < 1 || *p > 65535) {
    return Status::InvalidArgument("--server must be http://HOST[:PORT] with a port 1..65535");
  }
  return Status::Ok();
}

}  // namespace

Result<ClientResponse> HttpGet(std::string_view base_url, std::string_view path,
                               int timeout_seconds) {
  std::string host, port;
  GPUHUB_RETURN_IF_ERROR(ParseBaseUrl(base_url, &host, &port));
  std::string where = std::string(base_url);
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(timeout_seconds));
    beast::error_code ec;
    auto endpoints = resolver.resolve(host, port, ec);
    if (ec) return Status::Unavailable("cannot resolve " + host + ": " + ec.message());
    stream.connect(endpoints, ec);
    if (ec) return Status::Unavailable("cannot reach " + where + ": " + ec.message());
    beast::http::request<beast::http::empty_body> request(beast::http::verb::get, std::string(path),
                                                          11);
    request.set(beast::http::field::host, host);
    request.set(beast::http::field::user_agent, "gpuhub-cli");
    request.set(beast::http::field::accept, "application/json");
    stream.expires_after(std::chrono::seconds(timeout_seconds));
    beast::http::write(stream, request, ec);
    if (ec) return Status::Unavailable("cannot send to " + where + ": " + ec.message());
    beast::flat_buffer buffer;
    beast::http::response_parser<beast::http::string_body> parser;
    parser.body_limit(kMaxResponseBytes);
    beast::http::read(stream, buffer, parser, ec);
    if (ec) return Status::Unavailable("no answer from " + where + ": " + ec.message());
    stream.socket().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    ClientResponse out;
    out.status = static_cast<int>(parser.get().result_int());
    out.body = std::move(parser.get().body());
    return out;
  } catch (const std::exception& e) {
    return Status::Unavailable("cannot talk to " + where + ": " + e.what());
  }
}

}  // namespace gpuhub::http
