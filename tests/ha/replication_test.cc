// PostgreSQL itself replicated: a primary and a synchronous streaming replica (two throwaway
// clusters, scripts/pg-test-cluster.sh start-replicated), gpuhub on the multi-host URL with
// target_session_attrs=read-write. Under keyed load the primary crashes and the replica is
// promoted; gpuhub's writer loses its session, steps down, finds the new primary through the same
// URL, claims a new term, reloads and goes on. Nothing acknowledged is lost: synchronous
// replication acknowledged nothing the replica had not flushed, and what was in doubt is retried
// with its key.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cluster.h"

namespace gpuhub::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Runs a command; its standard output (trimmed) and exit status.
std::pair<std::string, int> Shell(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return {"", -1};
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  int status = ::pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

class ReplicatedPostgres {
 public:
  explicit ReplicatedPostgres(std::string dir) : dir_(std::move(dir)) {}
  ~ReplicatedPostgres() { Run("stop"); }
  std::pair<std::string, int> Run(const std::string& verb) {
    return Shell("bash " GPUHUB_SOURCE_DIR "/scripts/pg-test-cluster.sh " + verb + " " + dir_);
  }

 private:
  std::string dir_;
};

TEST(ReplicationTest, APromotedSynchronousReplicaLosesNothingAcknowledged) {
  if (!std::getenv("GPUHUB_TEST_PG_URL")) {
    GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset (no PostgreSQL here): replication skipped";
  }
  TempDir dir;
  ReplicatedPostgres pg(dir.path() + "/pg");
  auto [url, rc] = pg.Run("start-replicated");
  ASSERT_EQ(rc, 0) << url;
  ASSERT_NE(url.find("target_session_attrs=read-write"), std::string::npos) << url;

  ServerOptions options;
  options.db = url;
  options.clock = "real";
  ASSERT_EQ(CreateAdmin(dir, options).exit_code, 0);
  Cluster cluster(dir, options);
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  HttpClient setup(cluster.node(0).port());
  std::string root = LogInAdmin(setup);
  ASSERT_FALSE(root.empty());
  constexpr int kUsers = 3;
  for (int u = 0; u < kUsers; ++u) {
    ASSERT_FALSE(SignUpAndLogIn(setup, "user" + std::to_string(u)).empty());
  }
  std::string primary_port = QueryPostgres(url, "SELECT inet_server_port()");

  std::mutex mutex;
  std::map<std::string, int> acknowledged;  // key -> user
  std::atomic<int> acks{0}, retries{0}, counter{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  const std::vector<int> ports = cluster.Ports();
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      while (!stop) {
        std::string key = "r" + std::to_string(counter++);
        int user = static_cast<int>(rng() % kUsers);
        json body = {{"username", "user" + std::to_string(user)},
                     {"amount", "2.00"},
                     {"currency", "USD"},
                     {"reason", key}};
        for (int attempt = 0; attempt < 3000; ++attempt) {
          HttpClient c(ports[rng() % ports.size()]);
          c.set_timeout_seconds(10);
          auto r = c.Call("POST", "/v1/admin/credits", body, root, key);
          if (r.status == 201) {
            std::lock_guard<std::mutex> lock(mutex);
            acknowledged[key] = user;
            ++acks;
            break;
          }
          ASSERT_TRUE(r.status == 0 || r.status == 503 || r.status == 409) << r.status << r.body;
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    });
  }
  auto stop_clients = [&] {
    stop = true;
    for (auto& c : clients) c.join();
  };
  if (!WaitFor([&] { return acks >= 150; }, std::chrono::seconds(120))) {
    stop_clients();
    FAIL() << "the load never got to 150 acknowledged credits\n" << cluster.Logs();
  }
  int writer = cluster.Writer(std::chrono::seconds(5));
  if (writer < 0) stop_clients();
  ASSERT_GE(writer, 0);
  int term = HttpClient(cluster.node(writer).port()).Call("GET", "/healthz").Json()["term"];
  int before = acks;
  auto crashed = SteadyClock::now();
  auto [failover_out, failover_rc] = pg.Run("fail-over");
  if (failover_rc != 0) stop_clients();
  ASSERT_EQ(failover_rc, 0) << failover_out;
  double promoted_ms =
      std::chrono::duration<double, std::milli>(SteadyClock::now() - crashed).count();
  double resumed_ms = -1;
  while (SteadyClock::now() - crashed < std::chrono::seconds(60) && resumed_ms < 0) {
    int w = cluster.Writer();
    if (w >= 0 &&
        HttpClient(cluster.node(w).port()).Call("GET", "/healthz").Json()["term"].get<int>() >
            term) {
      resumed_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - crashed).count();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (resumed_ms < 0) stop_clients();
  ASSERT_GE(resumed_ms, 0) << "gpuhub never resumed on the promoted replica\n" << cluster.Logs();
  int resumed_at = acks;
  bool went_on = WaitFor([&] { return acks >= resumed_at + 100; }, std::chrono::seconds(120));
  stop_clients();
  ASSERT_TRUE(went_on) << "fewer than 100 credits acknowledged after the failover\n"
                       << cluster.Logs();

  EXPECT_NE(QueryPostgres(url, "SELECT inet_server_port()"), primary_port)
      << "the URL must now lead to the promoted replica";
  int w = cluster.Writer(std::chrono::seconds(10));
  ASSERT_GE(w, 0);
  HttpClient c(cluster.node(w).port());
  std::map<std::string, int> found;
  for (int u = 0; u < kUsers; ++u) {
    std::string token = LogIn(c, "user" + std::to_string(u));
    ASSERT_FALSE(token.empty());
    for (const auto& t : AllTransfers(c, token)) ++found[t["memo"]];
  }
  for (const auto& [key, user] : acknowledged) {
    EXPECT_EQ(found[key], 1) << key << " (user" << user << ") was acknowledged";
  }
  EXPECT_EQ(found.size(), acknowledged.size()) << "credits that were never acknowledged";
  auto invariants = c.Call("GET", "/v1/admin/invariants", nullptr, root);
  EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
  std::printf("[ replica  ] %d credits acknowledged before the primary crashed, %zu in all, %d "
              "retries; replica promoted after %.0f ms, gpuhub writing again (new term) after "
              "%.0f ms\n",
              before, acknowledged.size(), retries.load(), promoted_ms, resumed_ms);
}

}  // namespace
}  // namespace gpuhub::testing
