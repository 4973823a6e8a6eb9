// The yardstick of bench/http/side_by_side.sh: a bare Boost.Beast HTTP/1.1 keep-alive server that
// answers every request on a path with a fixed body of a given size. It does what any HTTP server
// must (parse the request and read its body, keep the connection alive, send Content-Type and
// Content-Length) and nothing else: no routing beyond one lookup, no JSON, no logging, no metrics,
// no limits. gpuhub's figures are printed as ratios of this server's on the same loopback with the
// same wrk settings.
//
//   baseline_server --threads 2 --body /healthz=45 --body /v1/fit=4512 ...
// Prints "listening on http://127.0.0.1:PORT" once it accepts connections (port 0: any free one).
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

using Bodies = std::map<std::string, std::string, std::less<>>;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, const Bodies& bodies)
      : stream_(std::move(socket)), bodies_(bodies) {}
  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Read, shared_from_this()));
  }

 private:
  void Read() {
    request_ = {};
    bhttp::async_read(stream_, buffer_, request_,
                      beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }
  void OnRead(beast::error_code ec, std::size_t) {
    if (ec) return Close();
    auto raw = request_.target();
    std::string_view target(raw.data(), raw.size());
    target = target.substr(0, target.find('?'));
    auto it = bodies_.find(target);
    response_ = {};
    response_.version(request_.version());
    response_.result(it == bodies_.end() ? bhttp::status::not_found : bhttp::status::ok);
    response_.set(bhttp::field::server, "baseline");
    response_.set(bhttp::field::content_type, "application/json");
    response_.keep_alive(request_.keep_alive());
    if (it != bodies_.end()) response_.body() = it->second;
    response_.prepare_payload();
    bhttp::async_write(stream_, response_,
                       beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }
  void OnWrite(beast::error_code ec, std::size_t) {
    if (ec || !response_.keep_alive()) return Close();
    Read();
  }
  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> request_;
  bhttp::response<bhttp::string_body> response_;
  const Bodies& bodies_;
};

void Accept(tcp::acceptor& acceptor, net::io_context& ioc, const Bodies& bodies) {
  acceptor.async_accept(net::make_strand(ioc), [&](beast::error_code ec, tcp::socket socket) {
    if (!ec) std::make_shared<Session>(std::move(socket), bodies)->Start();
    Accept(acceptor, ioc, bodies);
  });
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  int port = 0;
  Bodies bodies;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (arg == "--body" && i + 1 < argc) {
      std::string spec = argv[++i];
      auto eq = spec.find('=');
      if (eq == std::string::npos || spec[0] != '/') {
        std::fprintf(stderr, "--body PATH=BYTES (got '%s')\n", spec.c_str());
        return 2;
      }
      std::size_t size = std::strtoull(spec.c_str() + eq + 1, nullptr, 10);
      // A JSON-looking body of exactly `size` bytes: {"x":"aaaa..."}.
      std::string body = "{\"x\":\"";
      std::string tail = "\"}";
      if (size < body.size() + tail.size()) {
        body = std::string(size, ' ');
      } else {
        body += std::string(size - body.size() - tail.size(), 'a') + tail;
      }
      bodies[spec.substr(0, eq)] = std::move(body);
    } else {
      std::fprintf(stderr, "usage: baseline_server [--threads N] [--port P] --body PATH=BYTES...\n");
      return 2;
    }
  }
  net::io_context ioc(threads);
  tcp::acceptor acceptor(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"),
                                            static_cast<unsigned short>(port)));
  net::signal_set signals(ioc, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) { ioc.stop(); });
  Accept(acceptor, ioc, bodies);
  std::printf("listening on http://127.0.0.1:%u\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back([&] { ioc.run(); });
  ioc.run();
  for (auto& t : pool) t.join();
  return 0;
}
