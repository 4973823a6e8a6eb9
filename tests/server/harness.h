// Test harness for the server's integration tests: a real `gpuhub serve` process on port 0 with a
// real database, a small blocking HTTP/1.1 client (raw sockets, so tests can also send malformed
// and oversized requests), and fresh SQLite/PostgreSQL databases.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpuhub::testing {

using json = nlohmann::json;

// A fresh empty directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// "sqlite:<dir>/gpuhub.db", or a new database in the cluster of GPUHUB_TEST_PG_URL ("" when that
// variable is unset).
std::string FreshDatabaseUrl(const std::string& backend, const TempDir& dir);

struct HttpResponse {
  int status = 0;                              // 0: no response (connection failed or closed)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  json Json() const;  // parsed body, or null when it is not JSON
  std::string Header(const std::string& lower) const;
};

// One keep-alive connection to 127.0.0.1:port; reconnects when the server closed it.
// `source`: the local address to connect from ("127.0.0.2": any of 127/8 reaches the server), so
// that one test can be several client addresses; empty: the kernel's choice (127.0.0.1).
class HttpClient {
 public:
  explicit HttpClient(int port, std::string source = "")
      : port_(port), source_(std::move(source)) {}
  ~HttpClient();
  HttpResponse Send(const std::string& method, const std::string& path,
                    const std::string& body = "",
                    const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Convenience: JSON body, optional bearer token and idempotency key.
  HttpResponse Call(const std::string& method, const std::string& path, const json& body = nullptr,
                    const std::string& token = "", const std::string& idempotency_key = "");
  // Sends raw bytes on a new connection and reads until the server closes it or `timeout_ms`.
  std::string Raw(const std::string& bytes, int timeout_ms = 5000);
  void Close();
  // How long a call waits for an answer before it gives up (status 0); 30 s unless set.
  void set_timeout_seconds(int seconds) { timeout_seconds_ = seconds; }

 private:
  bool Connect();
  int port_;
  std::string source_;
  int timeout_seconds_ = 30;
  int fd_ = -1;
};

struct ServerOptions {
  std::string db;
  std::string clock = "manual";
  std::string webhook_secret = "whsec_test_secret_0123456789abcdef";
  std::string env_webhook_secret;  // GPUHUB_WEBHOOK_SECRET for the server (unset when empty)
  // [auth] rate limits: generous by default so that load tests are not throttled.
  long long login_attempts_per_address = 100000;
  long long login_failures_per_username = 5;
  long long login_free_failures_per_address = 0;  // 0: the server's default (not written)
  long long signups_per_address = 100000;
  long long argon2_ops_limit = 1;           // fast hashing for tests...
  long long argon2_mem_limit_bytes = 8192;  // ...unless a test needs slow ones
  std::string server_extra;                 // lines for the [server] section
  std::string payments_extra;               // lines for the [payments] section (btcpay_url, ...)
  std::string config_extra;                 // whole sections at the end ("[webhooks]\n...")
  // --simulated-hosts: machines listed without an agent trade as if one ran them (most API tests
  // list a machine and buy on it); false for the production rule (nothing sold without an agent).
  bool simulated_hosts = true;
};

// A running `gpuhub serve`. The destructor kills it (SIGKILL) if it still runs.
class ServerProcess {
 public:
  ServerProcess(const TempDir& dir, ServerOptions options);
  ~ServerProcess();
  // Starts and waits for "listening on http://127.0.0.1:PORT"; false (with the log) on failure.
  bool Start();
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void Kill();  // SIGKILL, then reap
  // SIGTERM; returns the exit status (or -1 when it did not exit within the timeout).
  int Terminate(int timeout_ms = 20000);
  bool Running();
  std::string Log() const;  // everything the server wrote on stderr so far
  const std::string& config_path() const { return config_path_; }

 private:
  const TempDir& dir_;
  ServerOptions options_;
  std::string config_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// Polls `condition` every 50 ms until it holds or `timeout` passes; whether it held. Every effect
// another process or thread makes after the test's own call (a log line, a counter, a delivery, a
// file) is waited for with it: seeing one effect never implies that a later one happened yet.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Runs the gpuhub binary with `args`, feeding `stdin_text`; returns exit status and output.
struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};
CommandResult RunGpuhub(const std::vector<std::string>& args, const std::string& stdin_text);

// PostgreSQL: terminates every other connection to the database of `url` (as a failover or a
// database restart would); returns how many were terminated, -1 on error.
int TerminatePostgresConnections(const std::string& url);

// The administrator that CreateAdmin makes.
inline constexpr const char* kAdminUsername = "root";
inline constexpr const char* kAdminPassword = "admin password 123";

// Creates the administrator (kAdminUsername, kAdminPassword) on `options.db` with
// `gpuhub admin create-user`, reading the config file a ServerProcess with `options` writes. Run it
// before a server opens the database: a running server holds it.
CommandResult CreateAdmin(const TempDir& dir, const ServerOptions& options);

// Helpers over the API.
// Signs up (with `roles` when given, else the default customer role), logs in and sets the
// billing country US (no tax: a purchase needs a country); "" on failure.
std::string SignUpAndLogIn(HttpClient& client, const std::string& username,
                           const std::string& password = "correct horse battery staple",
                           const std::vector<std::string>& roles = {});
// PUT /v1/billing-profile with just the country; false unless 200.
bool SetBillingCountry(HttpClient& client, const std::string& token, const std::string& country);
std::string LogIn(HttpClient& client, const std::string& username,
                  const std::string& password = "correct horse battery staple");
// Logs in the administrator of CreateAdmin; "" on failure.
std::string LogInAdmin(HttpClient& client);
// The body of POST /v1/machines for a small machine: 8 vCPUs, 64 GB RAM, 100 GB disk.
json MachineJson(const std::string& gpu, int gpus, const std::string& region = "IAD-1");
// The body of POST /v1/asks offering every GPU of `machine_id` (min_gpus left to the default).
json AskJson(const json& machine_id, const json& price_usd_per_gpu_hour,
             const std::string& available_until);
// The wall clock `ahead` from now as the API writes times: "2026-01-31T12:00:00Z".
std::string UtcTimeFromNow(std::chrono::hours ahead);
// The BTCPay-Sig header value for a body.
std::string WebhookSignature(const std::string& secret, const std::string& body);
// Lower-case hex HMAC-SHA256 of `data` with `secret`.
std::string HmacSha256Hex(const std::string& secret, const std::string& data);

// A tiny HTTP receiver on 127.0.0.1 (port 0) for the platform's outgoing webhooks: it answers
// each request with the next of `statuses` (200 once they run out) and records what it received.
class WebhookReceiver {
 public:
  struct Received {
    std::string method;
    std::string target;                          // "/hook?k=1"
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
  };
  explicit WebhookReceiver(std::vector<int> statuses = {});
  ~WebhookReceiver();
  int port() const { return port_; }
  // Waits until at least `n` requests arrived or `timeout` passed; returns every one so far.
  std::vector<Received> WaitFor(std::size_t n, std::chrono::milliseconds timeout);

 private:
  void Serve();
  std::vector<int> statuses_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::size_t answered_ = 0;
  std::vector<Received> received_;
  std::thread thread_;
};
// Every transfer of the user, walking the pages.
std::vector<json> AllTransfers(HttpClient& client, const std::string& token);
// Micros from "12.500000".
long long Micros(const std::string& decimal);
// A series' value in the Prometheus text of /metrics (0 when absent), e.g.
// Metric(text, "gpuhub_engine_commits_total{result=\"ok\"}").
long long Metric(const std::string& text, const std::string& series);

}  // namespace gpuhub::testing
