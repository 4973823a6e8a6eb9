#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace gpuhub::testing {
namespace {

// The gpuhub under test: this build's, or GPUHUB_TEST_BINARY (to show that a new test fails on an
// older binary).
std::string Binary() {
  const char* other = std::getenv("GPUHUB_TEST_BINARY");
  return other && *other ? other : GPUHUB_BINARY;
}

std::string RandomSuffix() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  return std::to_string(rng() % 1'000'000'000'000ULL);
}

bool WriteAll(int fd, const std::string& data) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

TempDir::TempDir() {
  path_ =
      (std::filesystem::temp_directory_path() / ("gpuhub_server_test_" + RandomSuffix())).string();
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!std::getenv("GPUHUB_KEEP_TEST_DIRS")) std::filesystem::remove_all(path_, ec);
}

std::string FreshDatabaseUrl(const std::string& backend, const TempDir& dir) {
  if (backend == "sqlite") return "sqlite:" + dir.path() + "/gpuhub.db";
  const char* base = std::getenv("GPUHUB_TEST_PG_URL");
  if (!base || !*base) return "";
  std::string name = "gpuhub_it_" + RandomSuffix();
  PGconn* conn = PQconnectdb(base);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string error = PQerrorMessage(conn);
    PQfinish(conn);
    throw std::runtime_error("cannot connect to GPUHUB_TEST_PG_URL: " + error);
  }
  PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string error = PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  if (!ok) throw std::runtime_error("CREATE DATABASE failed: " + error);
  std::string url = base;
  auto slash = url.rfind('/');
  auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + name + (query == std::string::npos ? "" : url.substr(query));
}

int TerminatePostgresConnections(const std::string& url) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    PQfinish(conn);
    return -1;
  }
  PGresult* r =
      PQexec(conn,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname "
             "= current_database() AND pid <> pg_backend_pid()");
  int n = PQresultStatus(r) == PGRES_TUPLES_OK ? std::atoi(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  PQfinish(conn);
  return n;
}

json HttpResponse::Json() const {
  json j = json::parse(body, nullptr, false);
  return j.is_discarded() ? json(nullptr) : j;
}

std::string HttpResponse::Header(const std::string& lower) const {
  auto it = headers.find(lower);
  return it == headers.end() ? "" : it->second;
}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HttpClient::Connect() {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{timeout_seconds_, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (!source_.empty()) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source_.c_str(), &local.sin_addr) != 1 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      Close();
      return false;
    }
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    Close();
    return false;
  }
  return true;
}

namespace {

// Reads one response from fd; status 0 when the connection failed.
HttpResponse ReadResponse(int fd, bool head) {
  HttpResponse response;
  std::string buffer;
  char chunk[65536];
  std::size_t header_end = std::string::npos;
  while ((header_end = buffer.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return response;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  std::istringstream head_stream(buffer.substr(0, header_end));
  std::string line;
  std::getline(head_stream, line);
  if (line.size() < 12) return response;
  int status = std::atoi(line.substr(9, 3).c_str());
  while (std::getline(head_stream, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    response.headers[name] = value;
  }
  std::size_t length = 0;
  if (!head && response.headers.count("content-length")) {
    length = std::stoul(response.headers["content-length"]);
  }
  std::string body = buffer.substr(header_end + 4);
  while (body.size() < length) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return response;
    body.append(chunk, static_cast<std::size_t>(n));
  }
  response.status = status;
  response.body = body.substr(0, length);
  return response;
}

}  // namespace

HttpResponse HttpClient::Send(const std::string& method, const std::string& path,
                              const std::string& body,
                              const std::vector<std::pair<std::string, std::string>>& headers) {
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& [name, value] : headers) request += name + ": " + value + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  // One retry on a fresh connection: the server may have closed an idle keep-alive connection.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0 && !Connect()) return {};
    bool fresh = attempt > 0;
    if (!WriteAll(fd_, request)) {
      Close();
      if (fresh) return {};
      continue;
    }
    HttpResponse r = ReadResponse(fd_, method == "HEAD");
    if (r.status == 0) {
      Close();
      // Retrying a request that may have been received is only safe for reads.
      if (fresh || (method != "GET" && method != "HEAD")) return r;
      continue;
    }
    if (r.Header("connection") == "close") Close();
    return r;
  }
  return {};
}

HttpResponse HttpClient::Call(const std::string& method, const std::string& path, const json& body,
                              const std::string& token, const std::string& idempotency_key) {
  std::vector<std::pair<std::string, std::string>> headers;
  std::string text;
  if (!body.is_null()) {
    text = body.dump();
    headers.emplace_back("Content-Type", "application/json");
  }
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  if (!idempotency_key.empty()) headers.emplace_back("Idempotency-Key", idempotency_key);
  return Send(method, path, text, headers);
}

std::string HttpClient::Raw(const std::string& bytes, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  WriteAll(fd, bytes);
  std::string out;
  char chunk[65536];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (::poll(&p, 1, std::max(1, left)) <= 0) break;
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    out.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

ServerProcess::ServerProcess(const TempDir& dir, ServerOptions options)
    : dir_(dir), options_(std::move(options)) {
  std::string suffix = RandomSuffix();
  config_path_ = dir_.path() + "/gpuhub-" + suffix + ".toml";
  log_path_ = dir_.path() + "/server-" + suffix + ".log";
  std::ofstream config(config_path_);
  config << "[server]\nshutdown_grace_seconds = 10\n" << options_.server_extra << "\n";
  config << "[auth]\nargon2_ops_limit = " << options_.argon2_ops_limit << "\n";
  config << "argon2_mem_limit_bytes = " << options_.argon2_mem_limit_bytes << "\n";
  config << "login_attempts_per_address = " << options_.login_attempts_per_address << "\n";
  config << "login_failures_per_username = " << options_.login_failures_per_username << "\n";
  if (options_.login_free_failures_per_address > 0) {
    config << "login_free_failures_per_address = " << options_.login_free_failures_per_address
           << "\n";
  }
  config << "signups_per_address = " << options_.signups_per_address << "\n";
  config << "[payments]\n" << options_.payments_extra << "\n";
  if (!options_.webhook_secret.empty()) {
    config << "webhook_secret = \"" << options_.webhook_secret << "\"\n";
  }
  config << options_.config_extra << "\n";
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
}

bool ServerProcess::Start() {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return false;
  pid_ = ::fork();
  if (pid_ == 0) {
    int log = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    if (options_.env_webhook_secret.empty()) {
      ::unsetenv("GPUHUB_WEBHOOK_SECRET");
    } else {
      ::setenv("GPUHUB_WEBHOOK_SECRET", options_.env_webhook_secret.c_str(), 1);
    }
    std::vector<std::string> args = {Binary(),  "serve",       "--listen", "127.0.0.1:0",
                                     "--db",    options_.db,   "--config", config_path_,
                                     "--clock", options_.clock};
    if (options_.simulated_hosts) args.push_back("--simulated-hosts");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(out[1]);
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const std::string marker = "listening on http://127.0.0.1:";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      char buf[256];
      ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
      auto at = text.find(marker);
      if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
        port_ = std::atoi(text.c_str() + at + marker.size());
        // Keep the pipe open would need a reader; the server prints nothing else on stdout.
        ::close(out[0]);
        return port_ > 0;
      }
    }
    if (!Running()) break;
  }
  ::close(out[0]);
  return false;
}

bool ServerProcess::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int ServerProcess::Terminate(int timeout_ms) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return -1;
}

std::string ServerProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CommandResult RunGpuhub(const std::vector<std::string>& args, const std::string& stdin_text) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    std::vector<std::string> all = {Binary()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::size_t written = 0;
  while (written < stdin_text.size()) {
    ssize_t w = ::write(in[1], stdin_text.data() + written, stdin_text.size() - written);
    if (w <= 0) break;
    written += static_cast<std::size_t>(w);
  }
  ::close(in[1]);
  CommandResult result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    result.output.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

CommandResult CreateAdmin(const TempDir& dir, const ServerOptions& options) {
  ServerProcess probe(dir, options);  // not started: only its config file is wanted
  return RunGpuhub({"admin", "create-user", "--username", kAdminUsername, "--role", "admin", "--db",
                    options.db, "--config", probe.config_path()},
                   std::string(kAdminPassword) + "\n");
}

std::string LogIn(HttpClient& client, const std::string& username, const std::string& password) {
  // Concurrent logins of one (username, address) pair count as failures while in flight (the
  // login throttle), so tests that log one user in from several threads at once can be told to
  // wait: a short Retry-After is honoured as a real client would, a long one (a throttled
  // guesser) is a failure.
  constexpr int kMaxTries = 5;
  constexpr long long kMaxWaitSeconds = 5;
  for (int attempt = 1;; ++attempt) {
    auto r = client.Call("POST", "/v1/sessions", {{"username", username}, {"password", password}});
    if (r.status == 201) return r.Json().value("token", "");
    if (r.status != 429 || attempt == kMaxTries) return "";
    long long wait = std::atoll(r.Header("retry-after").c_str());
    if (wait > kMaxWaitSeconds) return "";
    std::this_thread::sleep_for(std::chrono::seconds(std::max(wait, 1LL)));
  }
}

std::string LogInAdmin(HttpClient& client) { return LogIn(client, kAdminUsername, kAdminPassword); }

std::string SignUpAndLogIn(HttpClient& client, const std::string& username,
                           const std::string& password, const std::vector<std::string>& roles) {
  json body = {{"username", username}, {"password", password}};
  if (!roles.empty()) body["roles"] = roles;
  auto r = client.Call("POST", "/v1/accounts", body);
  if (r.status != 201) return "";
  std::string token = LogIn(client, username, password);
  // A purchase needs a billing country; US has no rate, so every figure stays net.
  if (!token.empty() && !SetBillingCountry(client, token, "US")) return "";
  return token;
}

bool SetBillingCountry(HttpClient& client, const std::string& token, const std::string& country) {
  return client.Call("PUT", "/v1/billing-profile", {{"billing_country", country}}, token).status ==
         200;
}

json MachineJson(const std::string& gpu, int gpus, const std::string& region) {
  return {{"gpu", gpu}, {"gpus", gpus}, {"region", region},
          {"vcpus", 8}, {"ram_gb", 64}, {"disk_gb", 100}};
}

json AskJson(const json& machine_id, const json& price_usd_per_gpu_hour,
             const std::string& available_until) {
  return {{"machine_id", machine_id},
          {"price_usd_per_gpu_hour", price_usd_per_gpu_hour},
          {"available_until", available_until}};
}

std::string UtcTimeFromNow(std::chrono::hours ahead) {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now() + ahead);
  std::tm utc{};
  ::gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string HmacSha256Hex(const std::string& secret, const std::string& data) {
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(data.data()),
                                data.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char hex[sizeof mac * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  return hex;
}

std::string WebhookSignature(const std::string& secret, const std::string& body) {
  return "sha256=" + HmacSha256Hex(secret, body);
}

WebhookReceiver::WebhookReceiver(std::vector<int> statuses) : statuses_(std::move(statuses)) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 16) != 0) {
    throw std::runtime_error("WebhookReceiver: cannot listen");
  }
  socklen_t len = sizeof addr;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { Serve(); });
}

WebhookReceiver::~WebhookReceiver() {
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

void WebhookReceiver::Serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    std::string data;
    char buf[4096];
    std::size_t header_end = std::string::npos;
    std::size_t length = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd c{conn, POLLIN, 0};
      if (::poll(&c, 1, 50) <= 0) continue;
      ssize_t n = ::recv(conn, buf, sizeof buf, 0);
      if (n <= 0) break;
      data.append(buf, static_cast<std::size_t>(n));
      if (header_end == std::string::npos) {
        header_end = data.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          std::string lower = data.substr(0, header_end);
          for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          std::size_t cl = lower.find("content-length:");
          if (cl != std::string::npos) length = std::stoul(lower.substr(cl + 15));
        }
      }
      if (header_end != std::string::npos && data.size() >= header_end + 4 + length) break;
    }
    Received r;
    std::istringstream head(data.substr(0, header_end));
    std::string line;
    std::getline(head, line);
    std::istringstream request_line(line);
    std::string version;
    request_line >> r.method >> r.target >> version;
    while (std::getline(head, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      std::size_t v = line.find_first_not_of(' ', colon + 1);
      r.headers[name] = v == std::string::npos ? "" : line.substr(v);
    }
    if (header_end != std::string::npos) r.body = data.substr(header_end + 4, length);
    int status = 200;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (answered_ < statuses_.size()) status = statuses_[answered_];
      ++answered_;
      received_.push_back(r);
    }
    std::string reply = "HTTP/1.1 " + std::to_string(status) +
                        " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    ::send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::close(conn);
  }
}

std::vector<WebhookReceiver::Received> WebhookReceiver::WaitFor(std::size_t n,
                                                                std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (received_.size() >= n || std::chrono::steady_clock::now() >= deadline) return received_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

long long Metric(const std::string& text, const std::string& series) {
  auto at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::atoll(text.c_str() + at + series.size() + 2);
}

std::vector<json> AllTransfers(HttpClient& client, const std::string& token) {
  std::vector<json> out;
  std::string cursor;
  for (int page = 0; page < 10000; ++page) {
    std::string path = "/v1/transfers?limit=200" + (cursor.empty() ? "" : "&cursor=" + cursor);
    auto r = client.Call("GET", path, nullptr, token);
    if (r.status != 200) break;
    json body = r.Json();
    for (auto& t : body["transfers"]) out.push_back(t);
    if (body["next_cursor"].is_null()) break;
    cursor = body["next_cursor"].get<std::string>();
  }
  return out;
}

long long Micros(const std::string& decimal) {
  bool negative = !decimal.empty() && decimal[0] == '-';
  std::string d = negative ? decimal.substr(1) : decimal;
  auto dot = d.find('.');
  long long whole = std::stoll(d.substr(0, dot));
  std::string frac = dot == std::string::npos ? "" : d.substr(dot + 1);
  frac.resize(6, '0');
  long long v = whole * 1000000 + std::stoll(frac);
  return negative ? -v : v;
}

}  // namespace gpuhub::testing
