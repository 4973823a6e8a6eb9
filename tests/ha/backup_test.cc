// Backups under write load, end to end with the real binary: `gpuhub admin backup` runs while a
// server acknowledges keyed credits as fast as four clients can send them; the backup is verified
// (`gpuhub admin verify`), restored into a fresh database (`gpuhub admin restore`, which verifies
// again) and served. Then every credit acknowledged before the backup began is there exactly once,
// none sent after it ended is, and the books balance. SQLite (online backup API) and PostgreSQL
// (one snapshot; and pg_dump), restored into the same backend and across.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include "cluster.h"

namespace gpuhub::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr int kUsers = 3;
constexpr int kClients = 4;

struct Sent {
  int user = 0;
  SteadyClock::time_point sent;
  SteadyClock::time_point acknowledged;
  bool ok = false;
};

class BackupTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(BackupTest, ABackupUnderLoadRestoresEveryAcknowledgedOperationAndBalancedBooks) {
  auto [backend, format] = GetParam();
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl(backend, dir);
  if (options.db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL skipped";
  options.clock = "real";
  ASSERT_EQ(CreateAdmin(dir, options).exit_code, 0);
  ServerProcess server(dir, options);
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient setup(server.port());
  std::string root = LogInAdmin(setup);
  ASSERT_FALSE(root.empty());
  for (int u = 0; u < kUsers; ++u) ASSERT_FALSE(SignUpAndLogIn(setup, "user" + std::to_string(u)).empty());

  std::mutex mutex;
  std::map<std::string, Sent> sent;  // key (= the credit's reason) -> what happened
  std::atomic<bool> stop{false};
  std::atomic<int> acknowledged{0};
  std::atomic<int> counter{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      HttpClient c(server.port());
      while (!stop) {
        std::string key = "b" + std::to_string(counter++);
        int user = (t + counter) % kUsers;
        Sent s{user, SteadyClock::now(), {}, false};
        auto r = c.Call("POST", "/v1/admin/credits",
                        {{"username", "user" + std::to_string(user)},
                         {"amount", "1.50"},
                         {"currency", "USD"},
                         {"reason", key}},
                        root, key);
        s.acknowledged = SteadyClock::now();
        s.ok = r.status == 201;
        if (s.ok) ++acknowledged;
        std::lock_guard<std::mutex> lock(mutex);
        sent[key] = s;
      }
    });
  }
  if (!WaitFor([&] { return acknowledged >= 200; }, std::chrono::seconds(120))) {
    stop = true;
    for (auto& c : clients) c.join();
    FAIL() << "the load never got to 200 acknowledged credits:\n" << server.Log();
  }
  std::string file = dir.path() + (format == "pg_dump" ? "/backup.dump" : "/backup.db");
  auto began = SteadyClock::now();
  int at_begin = acknowledged;
  auto backup = RunGpuhub({"admin", "backup", "--db", options.db, "--out", file, "--format", format},
                          "");
  auto ended = SteadyClock::now();
  int at_end = acknowledged;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  for (auto& c : clients) c.join();
  ASSERT_EQ(backup.exit_code, 0) << backup.output;
  EXPECT_GT(at_end, at_begin) << "the server kept acknowledging while the backup ran";

  if (format == "gpuhub") {
    auto verified = RunGpuhub({"admin", "verify", file}, "");
    ASSERT_EQ(verified.exit_code, 0) << verified.output;
    EXPECT_NE(verified.output.find("verified: backup " + file), std::string::npos)
        << verified.output;
    EXPECT_NE(verified.output.find("market.settlement: ok"), std::string::npos);
  }
  // Restored into a fresh database of each backend (a pg_dump archive only into PostgreSQL).
  std::vector<std::string> targets = {"postgresql"};
  if (format == "gpuhub") targets.push_back("sqlite");
  for (const std::string& target_backend : targets) {
    SCOPED_TRACE("restored into " + target_backend);
    TempDir target_dir;
    ServerOptions restored = options;
    restored.db = FreshDatabaseUrl(target_backend, target_dir);
    if (restored.db.empty()) continue;  // no PostgreSQL for the cross restore
    auto restore = RunGpuhub({"admin", "restore", "--from", file, "--db", restored.db}, "");
    ASSERT_EQ(restore.exit_code, 0) << restore.output;
    EXPECT_NE(restore.output.find("verified: the restored database"), std::string::npos)
        << restore.output;
    // Never over existing data.
    auto twice = RunGpuhub({"admin", "restore", "--from", file, "--db", restored.db}, "");
    EXPECT_EQ(twice.exit_code, 2) << twice.output;
    EXPECT_NE(twice.output.find("not empty"), std::string::npos) << twice.output;

    ServerProcess second(target_dir, restored);
    ASSERT_TRUE(second.Start()) << second.Log();
    HttpClient c(second.port());
    std::string admin = LogInAdmin(c);
    ASSERT_FALSE(admin.empty());
    std::map<std::string, int> found;  // reason -> transfers
    for (int u = 0; u < kUsers; ++u) {
      std::string token = LogIn(c, "user" + std::to_string(u));
      ASSERT_FALSE(token.empty());
      for (const auto& t : AllTransfers(c, token)) ++found[t["memo"]];
    }
    int before = 0, after = 0, between = 0;
    for (const auto& [key, s] : sent) {
      if (s.ok && s.acknowledged < began) {
        EXPECT_EQ(found[key], 1) << key << " was acknowledged before the backup began";
        ++before;
      } else if (s.sent > ended) {
        EXPECT_EQ(found[key], 0) << key << " was sent after the backup ended";
        ++after;
      } else {
        EXPECT_LE(found[key], 1) << key;
        ++between;
      }
    }
    for (const auto& [key, n] : found) {
      EXPECT_TRUE(sent.count(key)) << "a credit nobody sent: " << key;
    }
    EXPECT_GE(before, 200);
    EXPECT_GT(after, 0);
    auto invariants = c.Call("GET", "/v1/admin/invariants", nullptr, admin);
    EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
    auto ledger = c.Call("GET", "/v1/admin/ledger", nullptr, admin);
    EXPECT_EQ(ledger.Json()["balanced"], true);
    std::printf("[ backup   ] %s (%s) -> %s: %d credits acknowledged before the backup, %d while "
                "it ran, %d after it; backup took %.0f ms\n",
                backend.c_str(), format.c_str(), target_backend.c_str(), before, between, after,
                std::chrono::duration<double, std::milli>(ended - began).count());
    EXPECT_EQ(second.Terminate(), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BackupTest,
                         ::testing::Values(std::pair{"sqlite", "gpuhub"},
                                           std::pair{"postgresql", "gpuhub"},
                                           std::pair{"postgresql", "pg_dump"}));

}  // namespace
}  // namespace gpuhub::testing
