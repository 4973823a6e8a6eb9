#include "net/http_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

namespace gpuhub::net {
namespace {

TEST(ParseUrl, AcceptsTheFormsWeUse) {
  struct Case {
    const char* text;
    Scheme scheme;
    const char* host;
    const char* port;
    const char* base_path;
    const char* normalised;
  } cases[] = {
      {"http://127.0.0.1:8080", Scheme::kHttp, "127.0.0.1", "8080", "", "http://127.0.0.1:8080"},
      {"http://example.com/", Scheme::kHttp, "example.com", "80", "", "http://example.com"},
      {"https://pay.example.com/btcpay/", Scheme::kHttps, "pay.example.com", "443", "/btcpay",
       "https://pay.example.com/btcpay"},
      {"https://[::1]:8443", Scheme::kHttps, "::1", "8443", "", "https://[::1]:8443"},
      {"http://[::1]", Scheme::kHttp, "::1", "80", "", "http://[::1]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto url = ParseUrl(c.text);
    ASSERT_TRUE(url.ok()) << url.status().ToString();
    EXPECT_EQ(url->scheme, c.scheme);
    EXPECT_EQ(url->host, c.host);
    EXPECT_EQ(url->port, c.port);
    EXPECT_EQ(url->base_path, c.base_path);
    EXPECT_EQ(url->ToString(), c.normalised);
  }
  auto unix_url = ParseUrl("unix:///var/run/docker.sock");
  ASSERT_TRUE(unix_url.ok());
  EXPECT_EQ(unix_url->scheme, Scheme::kUnix);
  EXPECT_EQ(unix_url->socket_path, "/var/run/docker.sock");
  EXPECT_EQ(unix_url->HostHeader(), "localhost");
  EXPECT_EQ(ParseUrl("unix:/run/x.sock")->socket_path, "/run/x.sock");
  EXPECT_EQ(ParseUrl("http://h:81")->HostHeader(), "h:81");
  EXPECT_EQ(ParseUrl("https://h")->HostHeader(), "h");
}

TEST(ParseUrl, RefusesWhatIsNotABaseUrl) {
  for (const char* text :
       {"", "ftp://x", "example.com", "http://", "http://user:pw@host", "http://host:0",
        "http://host:65536", "http://host:80x", "http://host:", "http://host/a?b=c",
        "http://host/#frag", "http://ho st", "http://host\r\nX: y", "unix:", "unix:relative.sock",
        "http://[::1", "http://[::1]x", "http://ex ample.com", "http://exa%mple.com"}) {
    SCOPED_TRACE(text);
    auto url = ParseUrl(text);
    ASSERT_FALSE(url.ok());
    EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_FALSE(ParseUrl("http://h/" + std::string(kMaxUrlBytes, 'a')).ok());
  EXPECT_NE(ParseUrl("http://u:secret@h").status().message().find("credentials"),
            std::string::npos);
}

// A scripted HTTP server on a TCP or unix socket: reads each request (headers + Content-Length
// body), records it, and answers with what `answer` returns for it (raw bytes; "" = say nothing
// and keep the connection open until the test ends; "<close>" = close without a word).
class ScriptedServer {
 public:
  using Answer = std::function<std::string(const std::string& request, int index)>;

  static std::unique_ptr<ScriptedServer> Tcp(Answer answer) {
    auto server = std::unique_ptr<ScriptedServer>(new ScriptedServer(std::move(answer)));
    server->listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(server->listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    ::getsockname(server->listener_, reinterpret_cast<sockaddr*>(&address), &length);
    server->url_ = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    server->Start();
    return server;
  }

  static std::unique_ptr<ScriptedServer> Unix(const std::string& path, Answer answer) {
    auto server = std::unique_ptr<ScriptedServer>(new ScriptedServer(std::move(answer)));
    server->listener_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::snprintf(address.sun_path, sizeof address.sun_path, "%s", path.c_str());
    ::unlink(path.c_str());
    EXPECT_EQ(::bind(server->listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    server->url_ = "unix:" + path;
    server->Start();
    return server;
  }

  ~ScriptedServer() {
    stopping_ = true;
    ::shutdown(listener_, SHUT_RDWR);
    ::close(listener_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    thread_.join();
    for (auto& worker : workers_) worker.join();
  }

  const std::string& url() const { return url_; }
  int accepted() const { return accepted_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mutex_);
    return requests_;
  }

 private:
  explicit ScriptedServer(Answer answer) : answer_(std::move(answer)) {}

  void Start() {
    ::listen(listener_, 16);
    thread_ = std::thread([this] {
      while (!stopping_) {
        int fd = ::accept(listener_, nullptr, nullptr);
        if (fd < 0) return;
        ++accepted_;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          open_.push_back(fd);
        }
        workers_.emplace_back([this, fd] { Serve(fd); });
      }
    });
  }

  void Serve(int fd) {
    std::string pending;
    char chunk[4096];
    while (true) {
      std::size_t end = pending.find("\r\n\r\n");
      while (end == std::string::npos) {
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          ::close(fd);
          return;
        }
        pending.append(chunk, static_cast<std::size_t>(n));
        end = pending.find("\r\n\r\n");
      }
      std::size_t body_bytes = 0;
      std::size_t at = pending.find("Content-Length: ");
      if (at != std::string::npos && at < end) body_bytes = std::stoul(pending.substr(at + 16));
      while (pending.size() < end + 4 + body_bytes) {
        ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          ::close(fd);
          return;
        }
        pending.append(chunk, static_cast<std::size_t>(n));
      }
      std::string request = pending.substr(0, end + 4 + body_bytes);
      pending.erase(0, request.size());
      int index;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        requests_.push_back(request);
        index = static_cast<int>(requests_.size()) - 1;
      }
      std::string reply = answer_(request, index);
      if (reply == "<close>") {
        ::close(fd);
        return;
      }
      if (reply.empty()) {
        while (::recv(fd, chunk, sizeof chunk, 0) > 0) {
        }
        ::close(fd);
        return;
      }
      ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    }
  }

  Answer answer_;
  int listener_ = -1;
  std::string url_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::vector<int> open_;
  std::vector<std::string> requests_;
};

std::string Ok(std::string_view body, std::string_view extra_headers = "") {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + std::string(extra_headers) +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + std::string(body);
}

TEST(HttpClient, SendsTheRequestAndReadsTheAnswer) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) {
    return Ok(R"({"ok":true})", "X-Delivery: d-17\r\n");
  });
  auto client = Client::Open(server->url() + "/api/");
  ASSERT_TRUE(client.ok());
  auto response = (*client)->Send(
      Request::Json("POST", "/v1/stores/S1/invoices?x=1", R"({"amount":"10.00"})")
          .With("Authorization", "token abc"));
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, R"({"ok":true})");
  EXPECT_EQ(response->HeaderValue("x-delivery"), "d-17");
  EXPECT_FALSE(response->HeaderValue("X-Missing").has_value());
  auto seen = server->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].starts_with("POST /api/v1/stores/S1/invoices?x=1 HTTP/1.1\r\n")) << seen[0];
  EXPECT_NE(seen[0].find("Authorization: token abc\r\n"), std::string::npos);
  EXPECT_NE(seen[0].find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(seen[0].find("Content-Length: 18\r\n"), std::string::npos);
  EXPECT_TRUE(seen[0].ends_with("\r\n\r\n{\"amount\":\"10.00\"}"));
}

TEST(HttpClient, AnErrorStatusIsAResponseNotAnError) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) {
    return std::string("HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}");
  });
  auto response = Fetch(server->url(), Request{"GET", "/", {}, ""});
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 404);
  EXPECT_FALSE(response->ok());
}

TEST(HttpClient, ReusesTheConnectionAndReopensOneTheServerClosed) {
  auto server = ScriptedServer::Tcp([](const std::string&, int index) {
    // The second answer closes the connection afterwards.
    return Ok(std::to_string(index), index == 1 ? "Connection: close\r\n" : "");
  });
  auto client = Client::Open(server->url());
  ASSERT_TRUE(client.ok());
  Request get;
  get.target = "/a";
  EXPECT_EQ((*client)->Send(get)->body, "0");
  EXPECT_EQ((*client)->Send(get)->body, "1");
  EXPECT_EQ(server->accepted(), 1);
  // A POST without an Idempotency-Key is never sent twice, but it may go on a new connection.
  auto third = (*client)->Send(Request::Json("POST", "/b", "{}"));
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(third->body, "2");
  EXPECT_EQ(server->accepted(), 2);
  EXPECT_EQ(server->requests().size(), 3u);
}

TEST(HttpClient, APeerThatStopsClosingIdleConnectionsIsNoticed) {
  // The server closes every connection right after its answer without saying so.
  std::atomic<int> answers{0};
  auto server = ScriptedServer::Tcp([&](const std::string&, int index) {
    ++answers;
    return index % 2 == 0 ? Ok("x") : std::string("<close>");
  });
  auto client = Client::Open(server->url());
  Request get;
  get.target = "/";
  ASSERT_TRUE((*client)->Send(get).ok());
  // Index 1 closes without an answer: a GET is resent once on a new connection (index 2).
  auto second = (*client)->Send(get);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(answers.load(), 3);
}

TEST(HttpClient, APostIsNotResentWhenTheServerMayHaveSeenIt) {
  auto server = ScriptedServer::Tcp([&](const std::string&, int index) {
    return index == 0 ? Ok("x") : std::string("<close>");
  });
  auto client = Client::Open(server->url());
  Request get;
  get.target = "/";
  ASSERT_TRUE((*client)->Send(get).ok());
  auto post = (*client)->Send(Request::Json("POST", "/pay", "{}"));
  ASSERT_FALSE(post.ok());
  EXPECT_EQ(post.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server->requests().size(), 2u);  // sent once, never twice
}

TEST(HttpClient, ASilentPeerCostsTheTimeoutAndNoMore) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) { return std::string(); });
  ClientOptions options;
  options.timeout = std::chrono::milliseconds(300);
  auto response = Fetch(server->url(), Request{"GET", "/slow", {}, ""}, options);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("timed out"), std::string::npos)
      << response.status().message();
}

TEST(HttpClient, AnOversizedAnswerIsRefused) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) {
    return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + std::string(1024, 'a') +
           "\r\n400\r\n" + std::string(1024, 'b') + "\r\n0\r\n\r\n";
  });
  ClientOptions options;
  options.max_response_bytes = 1500;
  auto response = Fetch(server->url(), Request{"GET", "/big", {}, ""}, options);
  ASSERT_FALSE(response.ok());
  EXPECT_NE(response.status().message().find("larger than 1500 bytes"), std::string::npos)
      << response.status().message();
  options.max_response_bytes = 4096;
  auto fine = Fetch(server->url(), Request{"GET", "/big", {}, ""}, options);
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->body.size(), 2048u);
}

TEST(HttpClient, RefusesHeaderInjectionAndBadTargets) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) { return Ok("{}"); });
  auto client = Client::Open(server->url());
  Request bad_header;
  bad_header.target = "/";
  bad_header.With("X-A", "1\r\nX-Injected: 2");
  EXPECT_EQ((*client)->Send(bad_header).status().code(), StatusCode::kInvalidArgument);
  Request bad_target;
  bad_target.target = "no-slash";
  EXPECT_EQ((*client)->Send(bad_target).status().code(), StatusCode::kInvalidArgument);
  bad_target.target = "/a b";
  EXPECT_EQ((*client)->Send(bad_target).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(server->requests().empty());
}

TEST(HttpClient, AnAddressTheCheckRefusesIsNeverConnectedTo) {
  auto server = ScriptedServer::Tcp([](const std::string&, int) { return Ok("{}"); });
  std::vector<std::string> seen;
  ClientOptions options;
  options.check_address = [&](std::string_view address) {
    seen.emplace_back(address);
    return Status::PermissionDenied("no loopback");
  };
  auto refused = Fetch(server->url(), Request{"GET", "/", {}, ""}, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status().message(), "no loopback");
  EXPECT_EQ(seen, std::vector<std::string>{"127.0.0.1"});
  // The resolver's reading of a short literal is what is checked.
  std::string port = server->url().substr(server->url().rfind(':'));
  seen.clear();
  EXPECT_FALSE(Fetch("http://127.1" + port, Request{"GET", "/", {}, ""}, options).ok());
  EXPECT_EQ(seen, std::vector<std::string>{"127.0.0.1"});
  EXPECT_EQ(server->accepted(), 0);
  // Allowed: connected as usual.
  options.check_address = [](std::string_view) { return Status::Ok(); };
  auto allowed = Fetch(server->url(), Request{"GET", "/", {}, ""}, options);
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(server->accepted(), 1);
}

TEST(HttpClient, SaysWhenNothingListens) {
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(probe);  // the port is free now: nothing listens there
  auto response =
      Fetch("http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)), Request{"GET", "/", {}, ""});
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(response.status().message().find("cannot reach http://127.0.0.1:"), std::string::npos);
}

TEST(HttpClient, TalksToAUnixSocket) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("gpuhub-net-" + std::to_string(::getpid()) + ".sock"))
                         .string();
  auto server = ScriptedServer::Unix(path, [](const std::string&, int) {
    return Ok(R"({"ApiVersion":"1.43"})");
  });
  auto response = Fetch(server->url(), Request{"GET", "/v1.43/version", {}, ""});
  ASSERT_TRUE(response.ok()) << response.status().ToString();
  EXPECT_EQ(response->body, R"({"ApiVersion":"1.43"})");
  auto seen = server->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].starts_with("GET /v1.43/version HTTP/1.1\r\n"));
  EXPECT_NE(seen[0].find("Host: localhost\r\n"), std::string::npos);
  ::unlink(path.c_str());
}

// A CA and a server certificate made with the openssl command for this test only.
class TlsFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() /
            ("gpuhub-net-tls-" + std::to_string(::getpid())))
               .string();
    std::filesystem::create_directories(dir_);
    const std::string d = dir_;
    const std::string script =
        "set -e; cd " + d +
        "; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=gpuhub-test-ca 2>/dev/null"
        "; openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
        "-subj /CN=localhost 2>/dev/null"
        "; printf 'subjectAltName=DNS:localhost\\n' > san.ext"
        "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile san.ext 2>/dev/null";
    ready_ = std::system(("bash -c \"" + script + "\"").c_str()) == 0;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  // Serves `connections` TLS connections with one fixed answer each.
  void ServeTls(int connections) {
    namespace asio = boost::asio;
    context_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    context_->use_certificate_chain_file(dir_ + "/server.pem");
    context_->use_private_key_file(dir_ + "/server.key", asio::ssl::context::pem);
    acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(
        io_, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port_ = acceptor_->local_endpoint().port();
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) {
        asio::ssl::stream<asio::ip::tcp::socket> stream(io_, *context_);
        boost::system::error_code ec;
        acceptor_->accept(stream.lowest_layer(), ec);
        if (ec) return;
        stream.handshake(asio::ssl::stream_base::server, ec);
        if (ec) continue;  // the client refused our certificate
        char buffer[4096];
        std::string request;
        while (request.find("\r\n\r\n") == std::string::npos) {
          std::size_t n = stream.read_some(asio::buffer(buffer), ec);
          if (ec) break;
          request.append(buffer, n);
        }
        std::string reply = Ok(R"({"tls":true})", "Connection: close\r\n");
        asio::write(stream, asio::buffer(reply), ec);
        stream.shutdown(ec);
      }
    });
  }
  void TearDown() override {
    if (thread_.joinable()) thread_.join();
  }

  static inline std::string dir_;
  static inline bool ready_ = false;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ssl::context> context_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(TlsFixture, VerifiesTheChainAndTheName) {
  ASSERT_TRUE(ready_) << "could not make test certificates with the openssl command";
  ServeTls(3);
  ClientOptions trusted;
  trusted.ca_file = dir_ + "/ca.pem";
  Request get{"GET", "/", {}, ""};
  auto ok = Fetch("https://localhost:" + std::to_string(port_), get, trusted);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->body, R"({"tls":true})");

  // The system's trust store does not know our CA.
  auto untrusted = Fetch("https://localhost:" + std::to_string(port_), get);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(untrusted.status().message().find("TLS handshake"), std::string::npos)
      << untrusted.status().message();

  // A trusted certificate for another name: 127.0.0.1 is not in its subjectAltName.
  auto wrong_name = Fetch("https://127.0.0.1:" + std::to_string(port_), get, trusted);
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_NE(wrong_name.status().message().find("TLS handshake"), std::string::npos)
      << wrong_name.status().message();
}

TEST(HttpClient, AMissingTrustStoreIsABadConfiguration) {
  ClientOptions options;
  options.ca_file = "/nonexistent/ca.pem";
  auto client = Client::Open("https://example.com", options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuhub::net
