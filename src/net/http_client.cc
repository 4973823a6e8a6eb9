#include "net/http_client.h"

#include <openssl/ssl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <poll.h>

#include <cctype>
#include <functional>

namespace gpuhub::net {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;
using UnixStream = beast::basic_stream<asio::local::stream_protocol>;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos ||
         text.find('\0') != std::string_view::npos;
}

// Runs one asynchronous operation to its end. The stream's own expiry (set by the caller) bounds
// it; `io` has nothing else to do, so run() returns once the handler ran.
template <typename Initiate>
beast::error_code Run(asio::io_context& io, Initiate&& initiate) {
  beast::error_code result = asio::error::would_block;
  initiate([&result](beast::error_code ec, auto&&...) { result = ec; });
  io.restart();
  io.run();
  return result;
}

std::string Describe(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return "timed out";
  return ec.message();
}

bool Idempotent(const Request& request) {
  for (std::string_view method : {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"}) {
    if (request.method == method) return true;
  }
  for (const Header& header : request.headers) {
    if (EqualsIgnoreCase(header.name, "Idempotency-Key")) return true;
  }
  return false;
}

// One open connection of some stream type.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual beast::error_code Connect(Deadline deadline) = 0;
  virtual beast::error_code Write(bhttp::request<bhttp::string_body>& request,
                                  Deadline deadline) = 0;
  virtual beast::error_code Read(beast::flat_buffer& buffer,
                                 bhttp::response_parser<bhttp::string_body>& parser,
                                 Deadline deadline) = 0;
  virtual void Close() = 0;
  // True when an idle connection has something to read: the server closed it (or sent what it
  // should not have). Either way it must not carry the next request.
  virtual bool Stale() = 0;
  // Set by Connect when ClientOptions::check_address refused a resolved address.
  Status refused;
};

using AddressCheck = std::function<Status(std::string_view numeric_address)>;

template <typename Stream>
class StreamConnection : public Connection {
 public:
  template <typename... Args>
  explicit StreamConnection(Args&&... args) : stream_(io_, std::forward<Args>(args)...) {}

  beast::error_code Write(bhttp::request<bhttp::string_body>& request,
                          Deadline deadline) override {
    beast::get_lowest_layer(stream_).expires_at(deadline);
    return Run(io_, [&](auto handler) { bhttp::async_write(stream_, request, handler); });
  }
  beast::error_code Read(beast::flat_buffer& buffer,
                         bhttp::response_parser<bhttp::string_body>& parser,
                         Deadline deadline) override {
    beast::get_lowest_layer(stream_).expires_at(deadline);
    return Run(io_, [&](auto handler) { bhttp::async_read(stream_, buffer, parser, handler); });
  }
  void Close() override {
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().shutdown(asio::socket_base::shutdown_both, ignored);
    beast::get_lowest_layer(stream_).socket().close(ignored);
  }
  bool Stale() override {
    pollfd idle{beast::get_lowest_layer(stream_).socket().native_handle(), POLLIN, 0};
    return ::poll(&idle, 1, 0) != 0;
  }

 protected:
  asio::io_context io_;
  Stream stream_;
};

// Resolves and connects a TCP stream before `deadline`. When `check` refuses one of the resolved
// addresses, nothing is connected: *refused holds why and the result is access_denied.
beast::error_code ConnectTcp(asio::io_context& io, beast::tcp_stream& stream, const Url& url,
                             Deadline deadline, const AddressCheck& check, Status* refused) {
  asio::ip::tcp::resolver resolver(io);
  beast::error_code ec = asio::error::would_block;
  asio::ip::tcp::resolver::results_type endpoints;
  resolver.async_resolve(url.host, url.port,
                         [&](beast::error_code e, asio::ip::tcp::resolver::results_type r) {
                           ec = e;
                           endpoints = std::move(r);
                         });
  io.restart();
  io.run_until(deadline);
  if (ec == asio::error::would_block) {
    resolver.cancel();
    io.restart();
    io.run();
    return beast::error::timeout;
  }
  if (ec) return ec;
  if (check) {
    for (const auto& entry : endpoints) {
      // No scope id ("fe80::1%2"): the check judges the address itself.
      asio::ip::address address = entry.endpoint().address();
      std::string text = address.is_v6()
                             ? asio::ip::address_v6(address.to_v6().to_bytes()).to_string()
                             : address.to_string();
      Status verdict = check(text);
      if (!verdict.ok()) {
        *refused = std::move(verdict);
        return asio::error::access_denied;
      }
    }
  }
  stream.expires_at(deadline);
  return Run(io, [&](auto handler) {
    stream.async_connect(endpoints, [handler](beast::error_code e, auto&&) mutable { handler(e); });
  });
}

class TcpConnection : public StreamConnection<beast::tcp_stream> {
 public:
  TcpConnection(Url url, AddressCheck check) : url_(std::move(url)), check_(std::move(check)) {}
  beast::error_code Connect(Deadline deadline) override {
    return ConnectTcp(io_, stream_, url_, deadline, check_, &refused);
  }

 private:
  Url url_;
  AddressCheck check_;
};

class UnixConnection : public StreamConnection<UnixStream> {
 public:
  explicit UnixConnection(Url url) : url_(std::move(url)) {}
  beast::error_code Connect(Deadline deadline) override {
    stream_.expires_at(deadline);
    asio::local::stream_protocol::endpoint endpoint(url_.socket_path);
    return Run(io_, [&](auto handler) { stream_.async_connect(endpoint, handler); });
  }

 private:
  Url url_;
};

class TlsConnection : public StreamConnection<TlsStream> {
 public:
  TlsConnection(Url url, asio::ssl::context& tls, AddressCheck check)
      : StreamConnection(tls), url_(std::move(url)), check_(std::move(check)) {}
  beast::error_code Connect(Deadline deadline) override {
    beast::error_code ec =
        ConnectTcp(io_, beast::get_lowest_layer(stream_), url_, deadline, check_, &refused);
    if (ec) return ec;
    // SNI, and the name the certificate must carry.
    if (!SSL_set_tlsext_host_name(stream_.native_handle(), url_.host.c_str())) {
      return beast::error_code(static_cast<int>(::ERR_get_error()),
                               asio::error::get_ssl_category());
    }
    stream_.set_verify_callback(asio::ssl::host_name_verification(url_.host));
    beast::get_lowest_layer(stream_).expires_at(deadline);
    return Run(io_, [&](auto handler) {
      stream_.async_handshake(asio::ssl::stream_base::client, handler);
    });
  }

 private:
  Url url_;
  AddressCheck check_;
};

}  // namespace

Request Request::Json(std::string method, std::string target, std::string body) {
  Request request;
  request.method = std::move(method);
  request.target = std::move(target);
  request.body = std::move(body);
  request.headers.push_back({"Content-Type", "application/json"});
  return request;
}

Request& Request::With(std::string name, std::string value) {
  headers.push_back({std::move(name), std::move(value)});
  return *this;
}

std::optional<std::string> Response::HeaderValue(std::string_view name) const {
  for (const Header& header : headers) {
    if (EqualsIgnoreCase(header.name, name)) return header.value;
  }
  return std::nullopt;
}

struct Client::Impl {
  Url url;
  ClientOptions options;
  std::unique_ptr<asio::ssl::context> tls;
  std::unique_ptr<Connection> connection;  // open, or null

  std::unique_ptr<Connection> NewConnection() const {
    switch (url.scheme) {
      case Scheme::kHttp:
        return std::make_unique<TcpConnection>(url, options.check_address);
      case Scheme::kUnix:
        return std::make_unique<UnixConnection>(url);
      case Scheme::kHttps:
        return std::make_unique<TlsConnection>(url, *tls, options.check_address);
    }
    return nullptr;
  }

  // One attempt. `*written` tells whether the request may have reached the server.
  Result<Response> Attempt(bhttp::request<bhttp::string_body>& request, bool head,
                           Deadline deadline, bool* written, bool* got_bytes) {
    *written = false;
    *got_bytes = false;
    const std::string where = url.ToString();
    if (connection && connection->Stale()) Drop();
    if (!connection) {
      auto fresh = NewConnection();
      beast::error_code ec = fresh->Connect(deadline);
      if (ec) {
        fresh->Close();
        if (!fresh->refused.ok()) return fresh->refused;
        if (ec.category() == asio::error::get_ssl_category()) {
          return Status::Unavailable("TLS handshake with " + where + " failed: " + Describe(ec));
        }
        return Status::Unavailable("cannot reach " + where + ": " + Describe(ec));
      }
      connection = std::move(fresh);
    }
    beast::error_code ec = connection->Write(request, deadline);
    if (ec) {
      Drop();
      return Status::Unavailable("cannot send to " + where + ": " + Describe(ec));
    }
    *written = true;
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(kMaxResponseHeaderBytes));
    parser.body_limit(options.max_response_bytes);
    if (head) parser.skip(true);
    ec = connection->Read(buffer, parser, deadline);
    *got_bytes = parser.got_some() || buffer.size() > 0;
    if (ec) {
      Drop();
      if (ec == bhttp::error::body_limit) {
        return Status::Unavailable("the answer of " + where + " is larger than " +
                                   std::to_string(options.max_response_bytes) + " bytes");
      }
      return Status::Unavailable("no answer from " + where + ": " + Describe(ec));
    }
    auto& message = parser.get();
    Response response;
    response.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      response.headers.push_back({std::string(field.name_string()), std::string(field.value())});
    }
    response.body = std::move(message.body());
    if (!message.keep_alive()) Drop();
    return response;
  }

  void Drop() {
    if (connection) connection->Close();
    connection.reset();
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() {
  if (impl_) impl_->Drop();
}

const Url& Client::url() const { return impl_->url; }

Result<std::unique_ptr<Client>> Client::Open(std::string_view base_url, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  GPUHUB_ASSIGN_OR_RETURN(impl->url, ParseUrl(base_url));
  impl->options = std::move(options);
  if (impl->url.scheme == Scheme::kHttps) {
    impl->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    impl->tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1);
    impl->tls->set_verify_mode(asio::ssl::verify_peer);
    beast::error_code ec;
    if (impl->options.ca_file.empty()) {
      impl->tls->set_default_verify_paths(ec);
    } else {
      impl->tls->load_verify_file(impl->options.ca_file, ec);
    }
    if (ec) {
      return Status::InvalidArgument("cannot load the TLS trust store" +
                                     (impl->options.ca_file.empty()
                                          ? std::string()
                                          : " '" + impl->options.ca_file + "'") +
                                     ": " + ec.message());
    }
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Result<Response> Client::Send(const Request& request) {
  Impl& impl = *impl_;
  if (!request.target.starts_with("/")) {
    return Status::InvalidArgument("a request target must start with '/'");
  }
  if (HasLineBreak(request.target) || request.target.find(' ') != std::string::npos ||
      HasLineBreak(request.method) || request.method.empty()) {
    return Status::InvalidArgument("bad request method or target");
  }
  bhttp::request<bhttp::string_body> message;
  message.version(11);
  message.method_string(request.method);
  message.target(impl.url.base_path + request.target);
  message.set(bhttp::field::host, impl.url.HostHeader());
  message.set(bhttp::field::user_agent, impl.options.user_agent);
  for (const Header& header : request.headers) {
    if (header.name.empty() || HasLineBreak(header.name) || HasLineBreak(header.value) ||
        header.name.find(':') != std::string::npos) {
      return Status::InvalidArgument("bad request header '" + header.name.substr(0, 64) + "'");
    }
    message.insert(header.name, header.value);
  }
  message.body() = request.body;
  const bool has_body = !request.body.empty() || request.method == "POST" ||
                        request.method == "PUT" || request.method == "PATCH";
  if (has_body) message.prepare_payload();
  message.keep_alive(true);

  const Deadline deadline = Clock::now() + impl.options.timeout;
  const bool reused = impl.connection != nullptr;
  bool written = false;
  bool got_bytes = false;
  auto response = impl.Attempt(message, request.method == "HEAD", deadline, &written, &got_bytes);
  // A keep-alive connection the server closed while idle fails at once with no byte of answer:
  // open a new one, when sending again cannot do anything twice.
  if (!response.ok() && reused && !got_bytes && (!written || Idempotent(request)) &&
      Clock::now() < deadline) {
    response = impl.Attempt(message, request.method == "HEAD", deadline, &written, &got_bytes);
  }
  return response;
}

Result<Response> Fetch(std::string_view base_url, const Request& request, ClientOptions options) {
  GPUHUB_ASSIGN_OR_RETURN(auto client, Client::Open(base_url, std::move(options)));
  return client->Send(request);
}

}  // namespace gpuhub::net
