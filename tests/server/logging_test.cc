// What `gpuhub serve` writes to its log and its metrics when things go wrong on a large scale: a
// flood of malformed requests, a database outage. A real server process, real HTTP, a real
// PostgreSQL (GPUHUB_TEST_PG_URL) for the outage.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"

namespace gpuhub::testing {
namespace {

std::vector<std::string> LogLines(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::size_t CountContaining(const std::vector<std::string>& lines, const std::string& what) {
  std::size_t n = 0;
  for (const auto& l : lines) n += l.find(what) != std::string::npos;
  return n;
}

// Protocol-level refusals (400 framing, 408, 413, 431, 501) were neither logged nor counted in
// gpuhub_http_requests_total: an operator saw nothing of a flood of them. They are counted with
// route="protocol" and logged, at most 20 lines a second.
TEST(LoggingTest, ProtocolRefusalsAreCountedAndLoggedAtABoundedRate) {
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl("sqlite", dir);
  ServerProcess server(dir, options);
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  const std::string big_header(20'000, 'h');
  struct Probe {
    std::string bytes;
    const char* status;
  } probes[] = {
      {"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + big_header + "\r\n\r\n", "431"},
      {"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", "413"},
      {"POST /v1/accounts HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
       "501"},
      {"POST /v1/accounts HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400"},
      {"GARBAGE\r\n\r\n", "400"},
  };
  for (const auto& p : probes) {
    std::string answer = client.Raw(p.bytes, 3000);
    EXPECT_EQ(answer.substr(9, 3), p.status) << answer.substr(0, 200);
  }
  std::string metrics = client.Send("GET", "/metrics").body;
  // The method is known when the headers were parsed (not for an oversized header block).
  auto refused = [&](const char* status) {
    long long n = 0;
    for (const char* method : {"GET", "POST", "unknown"}) {
      n += Metric(metrics, std::string("gpuhub_http_requests_total{method=\"") + method +
                               "\",route=\"protocol\",status=\"" + status + "\"}");
    }
    return n;
  };
  EXPECT_EQ(refused("431"), 1) << metrics;
  EXPECT_EQ(refused("413"), 1) << metrics;
  EXPECT_EQ(refused("501"), 1) << metrics;
  EXPECT_EQ(refused("400"), 2) << metrics;
  auto lines = LogLines(server.Log());
  EXPECT_EQ(CountContaining(lines, "event=protocol_refused"), 5u) << server.Log();
  EXPECT_EQ(CountContaining(lines, "status=413 method=unknown reason=\"request body is larger"), 1u)
      << server.Log();
  // A flood: all counted, at most 20 logged a second, the next line says how many were not.
  auto flood_started = std::chrono::steady_clock::now();
  for (int i = 0; i < 300; ++i) client.Raw("GARBAGE\r\n\r\n", 2000);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - flood_started).count();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  client.Raw("GARBAGE\r\n\r\n", 2000);
  metrics = client.Send("GET", "/metrics").body;
  EXPECT_EQ(refused("400"), 2 + 301) << metrics;
  lines = LogLines(server.Log());
  std::size_t logged = CountContaining(lines, "event=protocol_refused");
  EXPECT_LE(logged, 5 + 20 * (static_cast<std::size_t>(seconds) + 2)) << seconds << " s";
  EXPECT_LT(logged, 5u + 301u) << "every refusal of the flood was logged";
  EXPECT_GE(CountContaining(lines, "refusals_not_logged_before="), 1u) << server.Log();
}

// A PostgreSQL cluster of this test's own (scripts/pg-test-cluster.sh), so that stopping it does
// not touch the shared one other tests run against in parallel.
class OwnCluster {
 public:
  OwnCluster() {
    dir_ = dir_holder_.path() + "/pg";
    std::string out = Script("start");
    auto at = out.find("postgresql://");
    if (at != std::string::npos) url_ = out.substr(at, out.find_first_of("\r\n", at) - at);
  }
  ~OwnCluster() { Script("stop"); }
  const std::string& url() const { return url_; }
  bool Pause() { return Script("pause", true) == "ok"; }
  bool Resume() { return Script("resume", true) == "ok"; }

 private:
  std::string Script(const std::string& command, bool status_only = false) {
    std::string cmd = "bash '" + std::string(GPUHUB_SOURCE_DIR) + "/scripts/pg-test-cluster.sh' " +
                      command + " '" + dir_ + "' 2>&1";
    if (status_only) return std::system(cmd.c_str()) == 0 ? "ok" : "failed";
    std::string out;
    if (FILE* p = ::popen(cmd.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, p)) out += buf;
      ::pclose(p);
    }
    return out;
  }
  TempDir dir_holder_;
  std::string dir_;
  std::string url_;
};

// A 2 s PostgreSQL outage under load wrote 3,544 identical `state_reload_failed` lines, and
// libpq's multi-line messages ("server closed the connection unexpectedly\n\tThis probably
// means...") broke the one-event-per-line log. Each distinct error is written once per 10 s with a
// count of the rest, and every line is one event.
TEST(LoggingTest, ADatabaseOutageWritesEachErrorOnceAndEveryEventOnOneLine) {
  if (std::getenv("GPUHUB_TEST_PG_URL") == nullptr) {
    GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  }
  OwnCluster cluster;
  ASSERT_FALSE(cluster.url().empty()) << "could not start a PostgreSQL cluster";
  TempDir dir;
  ServerOptions options;
  options.db = cluster.url();
  options.clock = "real";
  ServerProcess server(dir, options);
  ASSERT_TRUE(server.Start()) << server.Log();
  std::atomic<bool> stop{false};
  std::atomic<int> unavailable{0}, ok{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      HttpClient c(server.port());
      for (int i = 0; !stop; ++i) {
        // A write each (a commit that meets the outage), then the writer's health.
        std::string name = "load" + std::to_string(t) + "_" + std::to_string(i);
        c.Call("POST", "/v1/accounts", {{"username", name}, {"password", "correct horse battery"}});
        int status = c.Send("GET", "/healthz").status;
        (status == 200 ? ok : unavailable) += 1;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  bool paused = cluster.Pause();  // every backend dies at once, as in a crash
  if (paused) std::this_thread::sleep_for(std::chrono::seconds(2));
  bool resumed = paused && cluster.Resume();
  // Recovered: the writer answers again.
  int ok_after = ok.load();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (resumed && ok.load() < ok_after + 50 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  for (auto& t : load) t.join();
  ASSERT_TRUE(paused && resumed) << "could not stop and start the cluster";
  EXPECT_GE(ok.load(), ok_after + 50) << "the server did not recover";
  EXPECT_GT(unavailable.load(), 100) << "the outage was not felt";
  ASSERT_EQ(server.Terminate(), 0) << server.Log();  // writes the open repeat counts

  auto lines = LogLines(server.Log());
  std::size_t broken = 0;
  for (const auto& line : lines) {
    if (line.rfind("ts=", 0) != 0) {
      ADD_FAILURE() << "an event broken over lines: '" << line << "'";
      if (++broken == 3) break;
    }
  }
  std::size_t reload_failed = CountContaining(lines, "event=state_reload_failed");
  std::size_t poll_failed = CountContaining(lines, "event=standby_poll_failed");
  std::size_t repeated = 0;
  long long held_back = 0;
  for (const auto& line : lines) {
    if (line.find("event=log_repeated") == std::string::npos) continue;
    ++repeated;
    held_back += std::atoll(line.c_str() + line.find("count=") + 6);
  }
  std::printf("outage: %d answers 503, %zu state_reload_failed and %zu standby_poll_failed lines, "
              "%zu log_repeated lines holding back %lld, %zu lines in all\n",
              unavailable.load(), reload_failed, poll_failed, repeated, held_back, lines.size());
  // The writer's session died with the cluster and its advisory lock with it: it steps down
  // (high availability) and polls the database as a standby, writing one line per distinct error
  // (refused, starting up, recovering), until it is the writer again. A commit failing on a
  // writer that still holds its lock reloads instead: a handful of distinct errors, each once per
  // 10 s window of the outage, everything else held back and counted.
  EXPECT_EQ(CountContaining(lines, "event=writer_stepped_down"), 1u);
  EXPECT_GE(reload_failed + poll_failed, 1u);
  EXPECT_LE(reload_failed + poll_failed, 30u) << "identical errors were not held back";
  if (reload_failed > 0) {
    EXPECT_GE(held_back, 10 * static_cast<long long>(reload_failed))
        << "the repeats were not counted";
  }
}

}  // namespace
}  // namespace gpuhub::testing
