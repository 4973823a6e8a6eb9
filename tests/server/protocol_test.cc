// What `gpuhub serve` does with requests a browser, a proxy or an attacker may send besides the
// well-formed ones: media types, bytes after the JSON value, HTTP/1.0 framing, caching of private
// answers, what the answers reveal about the server. A real server process, real HTTP.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "harness.h"

namespace gpuhub::testing {
namespace {

class ProtocolTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}) {
    if (options.db.empty()) options.db = FreshDatabaseUrl("sqlite", dir_);
    server_ = std::make_unique<ServerProcess>(dir_, options);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  HttpResponse SignUp(const std::string& body, const std::string& content_type) {
    std::vector<std::pair<std::string, std::string>> headers;
    if (!content_type.empty()) headers.emplace_back("Content-Type", content_type);
    return client_->Send("POST", "/v1/accounts", body, headers);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
};

std::string SignUpBody(const std::string& username) {
  return R"({"username":")" + username + R"(","password":"correct horse battery"})";
}

// JSON POSTs without a Content-Type, or with application/jsonx or application/json-patch+json,
// used to be accepted: a cross-site no-cors fetch (a Blob body sends no Content-Type and needs no
// preflight) could sign up accounts. The media type must be exactly application/json.
TEST_F(ProtocolTest, AJsonBodyNeedsExactlyTheJsonMediaType) {
  StartServer();
  int n = 0;
  for (const char* refused : {"", "application/jsonx", "application/json-patch+json", "text/plain",
                              "application/x-www-form-urlencoded", "json", "application/json2"}) {
    auto r = SignUp(SignUpBody("refused" + std::to_string(n++)), refused);
    EXPECT_EQ(r.status, 400) << "'" << refused << "': " << r.body;
    EXPECT_NE(r.body.find("Content-Type must be application/json"), std::string::npos) << r.body;
  }
  for (const char* accepted : {"application/json", "application/json; charset=utf-8",
                               "Application/JSON", "application/json ;charset=UTF-8"}) {
    auto r = SignUp(SignUpBody("accepted" + std::to_string(n++)), accepted);
    EXPECT_EQ(r.status, 201) << "'" << accepted << "': " << r.body;
  }
  // The read API's POSTs too.
  auto size = client_->Send("POST", "/v1/size", R"({"model":"7b","workload":"infer"})");
  EXPECT_EQ(size.status, 400) << size.body;
  auto fit = client_->Send("POST", "/v1/fit", R"({"model":"7b","workload":"infer"})",
                           {{"Content-Type", "application/jsonx"}});
  EXPECT_EQ(fit.status, 400) << fit.body;
  EXPECT_EQ(client_
                ->Send("POST", "/v1/size", R"({"model":"7b","workload":"infer"})",
                       {{"Content-Type", "application/json"}})
                .status,
            200);
}

// `{...}\0garbage` used to be accepted (the JSON parser stops at a NUL byte) while `{...}garbage`
// was refused: bytes after the value are refused either way; trailing whitespace is fine.
TEST_F(ProtocolTest, BytesAfterTheJsonValueAreRefusedWhetherOrNotANulPrecedesThem) {
  StartServer();
  const std::string json = "application/json";
  for (const std::string& body :
       {SignUpBody("nul1") + std::string("\0garbage", 8), SignUpBody("nul2") + std::string(1, '\0'),
        SignUpBody("plain1") + "garbage", std::string("\0", 1) + SignUpBody("nul3")}) {
    auto r = SignUp(body, json);
    EXPECT_EQ(r.status, 400) << r.body;
  }
  for (const char* path : {"/v1/size", "/v1/fit", "/v1/plan"}) {
    auto r = client_->Send("POST", path, std::string(R"({"model":"7b","workload":"infer"})") + '\0' + "x",
                           {{"Content-Type", json}});
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
  }
  EXPECT_EQ(SignUp(SignUpBody("spaces") + " \r\n\t ", json).status, 201);
  // None of the refused ones made an account.
  for (const char* name : {"nul1", "nul2", "nul3", "plain1"}) {
    EXPECT_EQ(LogIn(*client_, name, "correct horse battery"), "") << name;
  }
}

// Private answers (wallets, transfers, accounts/me, top-ups, bids, leases) carried no
// Cache-Control, so a shared cache or the browser's disk could keep them: no-store now. Public
// data keeps its own caching.
TEST_F(ProtocolTest, PrivateAnswersAreNeverStoredByCaches) {
  StartServer();
  std::string token = SignUpAndLogIn(*client_, "private_pat");
  ASSERT_FALSE(token.empty());
  for (const char* path : {"/v1/wallets", "/v1/transfers", "/v1/accounts/me", "/v1/topups",
                           "/v1/bids", "/v1/leases"}) {
    auto r = client_->Call("GET", path, nullptr, token);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    EXPECT_EQ(r.Header("cache-control"), "no-store") << path;
  }
  // A refused one too (someone else's id or a stale token says nothing a cache should keep).
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, "ghs_stale").Header("cache-control"),
            "no-store");
  // Public data: the catalog keeps its own max-age, with or without credentials.
  EXPECT_EQ(client_->Call("GET", "/v1/catalog", nullptr, token).Header("cache-control"),
            "public, max-age=60");
}

// RFC 9112 6.1: Transfer-Encoding in an HTTP/1.0 request is faulty framing (a 1.0 proxy in front
// frames it otherwise): 400 and close, instead of decoding the chunks.
TEST_F(ProtocolTest, Http10WithTransferEncodingIsRefusedAsFaultyFraming) {
  StartServer();
  std::string body = SignUpBody("chunky");
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  std::string out = client_->Raw(
      "POST /v1/accounts HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n" +
      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(out.substr(0, 12), "HTTP/1.1 400") << out;  // our version (RFC 9110 6.2)
  EXPECT_NE(out.find("Transfer-Encoding is not allowed in HTTP/1.0"), std::string::npos) << out;
  EXPECT_EQ(LogIn(*client_, "chunky", "correct horse battery"), "");
  // HTTP/1.1 chunked still works.
  std::string ok = client_->Raw(
      "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
      std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(ok.substr(0, 12), "HTTP/1.1 201") << ok;
}

// GET /v1/catalog and the model of size/fit answers showed the server's absolute file paths
// ("source": "/srv/.../data/catalog.toml"): logical names only.
TEST_F(ProtocolTest, AnswersNameTheirSourcesWithoutTheServersPaths) {
  StartServer();
  auto catalog = client_->Send("GET", "/v1/catalog");
  ASSERT_EQ(catalog.status, 200) << catalog.body;
  EXPECT_EQ(catalog.Json()["source"], "catalog.toml");
  const std::vector<std::pair<std::string, std::string>> json = {
      {"Content-Type", "application/json"}};
  auto size = client_->Send("POST", "/v1/size",
                            R"({"model":"meta-llama/Llama-3.1-8B","workload":"infer"})", json);
  ASSERT_EQ(size.status, 200) << size.body;
  EXPECT_EQ(size.Json()["model"]["source"], "bundled");
  auto fit = client_->Send("POST", "/v1/fit",
                           R"({"model":"meta-llama/Llama-3.1-8B","workload":"infer"})", json);
  ASSERT_EQ(fit.status, 200) << fit.body;
  EXPECT_EQ(fit.Json()["model"]["source"], "bundled");
  auto preset = client_->Send("POST", "/v1/size", R"({"model":"7b","workload":"infer"})", json);
  EXPECT_EQ(preset.Json()["model"]["source"], "preset");
  for (const auto* r : {&catalog, &size, &fit}) {
    EXPECT_EQ(r->body.find("/data/"), std::string::npos) << r->body.substr(0, 300);
    EXPECT_EQ(r->body.find(".json\""), std::string::npos) << r->body.substr(0, 300);
  }
}

// A connection from `source` (a 127/8 address) that sent `bytes`; -1 on failure.
int HalfSent(int port, const char* source, const std::string& bytes) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{}, remote{};
  local.sin_family = remote.sin_family = AF_INET;
  remote.sin_port = htons(static_cast<std::uint16_t>(port));
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::inet_pton(AF_INET, source, &local.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0 ||
      ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

// What arrives on `fd` until the server closes it or `timeout_ms` passes.
std::string ReadUntilClosed(int fd, int timeout_ms) {
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// 1,100 half-sent requests from five addresses (each under its per-address cap) filled
// max_connections, and a sixth client got 503 until the 15 s read timeout, again and again as the
// attacker reconnected. Now the last max_connections / 16 slots are kept for addresses without a
// connection, and headers have a 5 s deadline of their own.
TEST_F(ProtocolTest, HalfSentRequestsFromAFewAddressesNeitherLockOutANewClientNorLast) {
  ServerOptions options;
  options.server_extra = "max_connections = 48\n";  // 3 slots kept for new addresses
  StartServer(options);
  const int port = server_->port();
  auto started = std::chrono::steady_clock::now();
  std::vector<int> held;
  int refused = 0;
  for (const char* attacker : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"}) {
    for (int i = 0; i < 10; ++i) {
      int fd = HalfSent(port, attacker, "POST /v1/accounts HTTP/1.1\r\nHost: x\r\nX-Slow: 1");
      ASSERT_GE(fd, 0);
      held.push_back(fd);
    }
  }
  // 50 attempts for 48 slots: the attackers got at most 45, the rest were answered 503 at once.
  for (int fd : held) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      std::string answer = ReadUntilClosed(fd, 1000);
      refused += answer.rfind("HTTP/1.1 503", 0) == 0;
    }
  }
  EXPECT_GE(refused, 5);
  // A sixth address is served.
  HttpClient newcomer(port, "127.0.0.7");
  auto health = newcomer.Send("GET", "/healthz");
  EXPECT_EQ(health.status, 200) << health.body;
  // The half-sent requests end with 408 after the header deadline (5 s), not the 15 s read
  // timeout.
  std::string answer = ReadUntilClosed(held.front(), 12'000);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_LT(waited, 9.0);
  for (int fd : held) ::close(fd);
}

}  // namespace
}  // namespace gpuhub::testing
