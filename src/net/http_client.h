// A small blocking HTTP/1.1 client for everything gpuhub calls out to: its own server (the CLI
// with --server, the host agent), BTCPay Server's Greenfield API, customers' webhook endpoints,
// and the Docker Engine API on its unix socket. Boost.Beast and OpenSSL stay inside http_client.cc.
//
// Contract:
// - Every exchange has a deadline (ClientOptions::timeout) covering name resolution, connect, the
//   TLS handshake, writing the request and reading the whole response: a peer that stops answering
//   costs at most that long (the error is `unavailable`, "timed out").
// - https:// verifies the peer's certificate chain (the system's trust store, or `ca_file`) and
//   that the certificate names the URL's host; SNI is sent. There is no switch to turn
//   verification off: a test uses its own CA through `ca_file`.
// - Responses larger than `max_response_bytes` are refused (`unavailable`), whatever the peer
//   says in Content-Length or sends chunked.
// - Errors: invalid_argument for a bad URL or request (a target not starting with '/', a header
//   with CR/LF); unavailable for everything the network or the peer did (resolve, connect, TLS,
//   timeout, malformed or oversized response). An HTTP error status (404, 500...) is NOT an error
//   here: it is a Response with that status. An address that ClientOptions::check_address refuses
//   ends the exchange with the Status it returned, before anything is connected.
// - Thread-safety: a Client is used by one thread at a time; separate Clients are independent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "net/limits.h"
#include "net/url.h"

namespace gpuhub::net {

struct Header {
  std::string name;
  std::string value;
};

struct Request {
  std::string method = "GET";
  // Path and query, appended to the base URL's path ("/v1/offers?limit=5"); must start with '/'.
  std::string target;
  std::vector<Header> headers;
  // Sent with Content-Length (also when empty for POST, PUT and PATCH).
  std::string body;

  // Convenience for JSON APIs: sets the method, target, body and Content-Type: application/json.
  static Request Json(std::string method, std::string target, std::string body);
  Request& With(std::string name, std::string value);
};

struct Response {
  int status = 0;
  std::vector<Header> headers;
  std::string body;

  // The first header of that name (case-insensitive), if any.
  std::optional<std::string> HeaderValue(std::string_view name) const;
  bool ok() const { return status >= 200 && status < 300; }
};

struct ClientOptions {
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::size_t max_response_bytes = kDefaultMaxResponseBytes;
  // https: a PEM file of CA certificates to trust instead of the system's store.
  std::string ca_file;
  std::string user_agent = "gpuhub";
  // http(s): called with every address the host resolves to (inet_ntop's form, "10.0.0.1",
  // "::ffff:10.0.0.1") before connecting; when it refuses any of them, nothing is connected and
  // the exchange fails with its Status. Checking the very addresses connected to (not a second
  // lookup of the name) leaves a DNS answer that changes between the two no room.
  std::function<Status(std::string_view numeric_address)> check_address;
};

class Client {
 public:
  // Checks the URL (and, for https, loads the trust store); connects lazily on the first Send.
  static Result<std::unique_ptr<Client>> Open(std::string_view base_url,
                                              ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one request and reads its response. Keeps the connection open for the next call when
  // the server allows it. A reused connection that the server had already closed is reopened and
  // the request resent only when resending cannot do anything twice: the request was not written
  // yet, or it is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, or it carries an Idempotency-Key).
  Result<Response> Send(const Request& request);

  const Url& url() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One request on a fresh connection.
Result<Response> Fetch(std::string_view base_url, const Request& request,
                       ClientOptions options = {});

}  // namespace gpuhub::net
