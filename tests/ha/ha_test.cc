// High availability with real processes: a standby forwards the API to the writer and takes over
// when the writer is SIGKILLed; a writer whose database session is cut steps down and never
// commits under its old term; billing resumes at the hour the database says, with time never
// running backwards across a takeover. SQLite (several processes on one file: the flock is the
// election) and PostgreSQL (the advisory lock).
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <map>
#include <set>
#include <thread>

#include "cluster.h"

namespace gpuhub::testing {
namespace {

using Clock = std::chrono::steady_clock;

class HaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    options_.db = FreshDatabaseUrl(GetParam(), dir_);
    if (options_.db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL skipped";
    auto admin = CreateAdmin(dir_, options_);
    ASSERT_EQ(admin.exit_code, 0) << admin.output;
  }
  TempDir dir_;
  ServerOptions options_;
};

json Credit(const std::string& user, const std::string& amount, const std::string& reason) {
  return {{"username", user}, {"amount", amount}, {"currency", "USD"}, {"reason", reason}};
}

// Seconds since the epoch of "2026-01-31T12:00:00Z" (whole seconds; the manual clock's are).
long long ParseTime(const json& text) {
  std::tm tm{};
  ::strptime(text.get<std::string>().c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  return static_cast<long long>(::timegm(&tm));
}

constexpr const char* kDelivered = "gpuhub_webhook_deliveries_total{result=\"delivered\"}";

// How many of the user's transfers carry `memo` (a manual credit's reason).
int CountMemo(HttpClient& c, const std::string& token, const std::string& memo) {
  int n = 0;
  for (const auto& t : AllTransfers(c, token)) n += t["memo"] == memo;
  return n;
}

TEST_P(HaTest, AStandbyForwardsTheApiAndTakesOverAfterTheWriterIsKilled) {
  options_.clock = "real";
  Cluster cluster(dir_, options_);
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  ASSERT_EQ(cluster.Writer(), 0);
  EXPECT_EQ(Role(cluster.node(0).port()), "writer");
  EXPECT_EQ(Role(cluster.node(1).port()), "standby");
  HttpClient standby(cluster.node(1).port());
  HttpClient writer(cluster.node(0).port());
  auto health = standby.Call("GET", "/healthz").Json();
  // `gpuhub admin create-user` claimed the first term, the first server the second.
  int term = health["term"];
  EXPECT_EQ(term, 2);
  EXPECT_EQ(health["writer"], "127.0.0.1:" + std::to_string(cluster.node(0).port()));

  // Everything through the standby: sign-up, log-in, a keyed admin credit, reads.
  std::string alice = SignUpAndLogIn(standby, "alice");
  ASSERT_FALSE(alice.empty()) << cluster.Logs();
  std::string root = LogInAdmin(standby);
  ASSERT_FALSE(root.empty());
  auto first = standby.Call("POST", "/v1/admin/credits", Credit("alice", "10.00", "k1"), root, "k1");
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_EQ(writer.Call("GET", "/v1/wallets", nullptr, alice).body,
            standby.Call("GET", "/v1/wallets", nullptr, alice).body);
  // The same key at the writer itself replays: one state, whichever node answers.
  auto replay = writer.Call("POST", "/v1/admin/credits", Credit("alice", "10.00", "k1"), root, "k1");
  EXPECT_EQ(replay.body, first.body);
  EXPECT_EQ(replay.Header("idempotent-replayed"), "true");
  // Stateless reads are answered by the standby itself.
  EXPECT_EQ(standby.Call("GET", "/v1/catalog").status, 200);
  // A client cannot pose as a standby forwarding someone else's address (no proxy secret): the
  // header is dropped, the request still works.
  auto posing = writer.Send("GET", "/v1/wallets", "",
                            {{"Authorization", "Bearer " + alice},
                             {"X-Gpuhub-Client-Address", "203.0.113.9"},
                             {"X-Gpuhub-Proxy-Secret", "guess"}});
  EXPECT_EQ(posing.status, 200);
  // A request that already went through a standby is never forwarded again (no loops).
  auto looped = standby.Send("GET", "/v1/wallets", "",
                             {{"Authorization", "Bearer " + alice},
                              {"X-Gpuhub-Proxy-Secret", "from-another-standby"}});
  EXPECT_EQ(looped.status, 503);
  EXPECT_EQ(looped.Header("retry-after"), "1");

  auto killed = Clock::now();
  cluster.Kill(0);
  ASSERT_EQ(cluster.Writer(std::chrono::seconds(30)), 1) << cluster.Logs();
  double takeover_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - killed).count();
  auto after = standby.Call("GET", "/healthz").Json();
  EXPECT_EQ(after["role"], "writer");
  EXPECT_EQ(after["term"], term + 1);
  // The new writer has everything: the key replays, a new credit commits, the books balance.
  auto again = standby.Call("POST", "/v1/admin/credits", Credit("alice", "10.00", "k1"), root, "k1");
  EXPECT_EQ(again.body, first.body);
  ASSERT_EQ(
      standby.Call("POST", "/v1/admin/credits", Credit("alice", "5.00", "k2"), root, "k2").status,
      201);
  EXPECT_EQ(CountMemo(standby, alice, "k1"), 1);
  EXPECT_EQ(CountMemo(standby, alice, "k2"), 1);
  auto invariants = standby.Call("GET", "/v1/admin/invariants", nullptr, root);
  EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
  // A node started now is a standby of the new writer.
  int third = cluster.Add();
  ASSERT_GE(third, 0) << cluster.Logs();
  HttpClient late(cluster.node(third).port());
  EXPECT_EQ(late.Call("GET", "/healthz").Json()["writer"],
            "127.0.0.1:" + std::to_string(cluster.node(1).port()));
  EXPECT_EQ(late.Call("GET", "/v1/wallets", nullptr, alice).Json()["wallets"][0]["available"],
            "15.000000");
  std::printf("[ takeover ] %s: SIGKILL of the writer -> the standby answers /healthz/writer: "
              "%.0f ms\n",
              GetParam().c_str(), takeover_ms);
}

// Lease-hours billed by the old writer are not billed again, and the ones due while nobody
// wrote are billed by the new writer at their own hours; the manual clock carries over.
TEST_P(HaTest, BillingResumesWhereTheDatabaseSaysItStopped) {
  Cluster cluster(dir_, options_);  // --clock manual
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  HttpClient c(cluster.node(1).port());  // the standby, forwarding until it is the writer
  std::string root = LogInAdmin(c);
  std::string provider = SignUpAndLogIn(c, "paula", "correct horse battery staple", {"provider"});
  std::string customer = SignUpAndLogIn(c, "carl");
  ASSERT_FALSE(root.empty() || provider.empty() || customer.empty());
  ASSERT_EQ(c.Call("POST", "/v1/admin/credits", Credit("carl", "1000.00", "start"), root).status,
            201);
  auto machine = c.Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), provider);
  ASSERT_EQ(machine.status, 201) << machine.body;
  auto ask = c.Call("POST", "/v1/asks",
                    AskJson(machine.Json()["id"], "2.000", UtcTimeFromNow(std::chrono::hours(24 * 30))),
                    provider);
  ASSERT_EQ(ask.status, 201) << ask.body;
  auto bid = c.Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                    customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  long long lease = bid.Json()["lease_id"];
  auto advance = [&](int hours) {
    return c.Call("POST", "/v1/admin/clock/advance", {{"seconds", hours * 3600}}, root);
  };
  auto before = advance(2);
  ASSERT_EQ(before.status, 200) << before.body;
  auto get = [&] {
    return c.Call("GET", "/v1/leases/" + std::to_string(lease), nullptr, customer).Json();
  };
  EXPECT_EQ(get()["hours_paid"], 3);

  cluster.Kill(0);
  ASSERT_EQ(cluster.Writer(std::chrono::seconds(30)), 1) << cluster.Logs();
  auto resumed = advance(3);
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  // Time went on from the old writer's clock, not from the new process's start.
  auto t0 = ParseTime(before.Json()["now"]);
  auto t1 = ParseTime(resumed.Json()["now"]);
  EXPECT_EQ(t1 - t0, 3 * 3600) << before.body << " " << resumed.body;
  json now = get();
  EXPECT_EQ(now["hours_paid"], 6) << now;
  EXPECT_EQ(now["status"], "active");
  // Each hour 1..6 charged exactly once (a provider leg and a fee leg per hour).
  std::map<std::string, int> legs;
  for (const auto& t : AllTransfers(c, customer)) {
    std::string id = t["id"];
    if (id.rfind("lease:", 0) == 0) ++legs[id];
  }
  EXPECT_EQ(legs.size(), 12u);
  for (int h = 1; h <= 6; ++h) {
    for (const char* leg : {"provider", "fee"}) {
      std::string id = "lease:" + std::to_string(lease) + ":h" + std::to_string(h) + ":" + leg;
      EXPECT_EQ(legs[id], 1) << id;
    }
  }
  auto invariants = c.Call("GET", "/v1/admin/invariants", nullptr, root);
  EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
}

// Term rentals' lifecycle and the webhook outbox are the writer's work: a standby commits nothing
// and posts nothing; after the writer's SIGKILL the new writer renews at the hours the database
// says (each term charged once) and posts the notifications that came due.
TEST_P(HaTest, RentalsAndWebhooksRunOnTheWriterOnlyAndResumeAfterATakeover) {
  options_.config_extra = "[webhooks]\nallow_private_addresses = true\n";
  Cluster cluster(dir_, options_);  // --clock manual
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  HttpClient c(cluster.node(1).port());  // the standby, forwarding until it is the writer
  std::string root = LogInAdmin(c);
  std::string alice = SignUpAndLogIn(c, "alice");
  ASSERT_FALSE(root.empty() || alice.empty());
  ASSERT_EQ(c.Call("POST", "/v1/admin/nodes", {{"gpu", "A100 SXM"}, {"region", "DFW-1"}}, root)
                .status,
            201);
  ASSERT_EQ(c.Call("POST", "/v1/admin/credits", Credit("alice", "5000.00", "start"), root).status,
            201);
  WebhookReceiver receiver;
  std::string url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  ASSERT_EQ(c.Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, alice).status, 200);
  auto order = c.Call("POST", "/v1/rentals", {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}},
                      alice, "order-1");
  ASSERT_EQ(order.status, 201) << order.body;
  long long rental = order.Json()["id"];
  auto advance = [&](int days) {
    return c.Call("POST", "/v1/admin/clock/advance", {{"seconds", days * 86400}}, root);
  };
  // Day 5: past T - 72 h of the first week, auto-renew paid the second.
  ASSERT_EQ(advance(5).status, 200);
  ASSERT_EQ(receiver.WaitFor(2, std::chrono::seconds(30)).size(), 2u) << cluster.Logs();
  auto delivered = [&] {
    auto d = c.Call("GET", "/v1/accounts/me/webhook", nullptr, alice).Json()["deliveries"];
    int n = 0;
    for (const auto& x : d) n += x["status"] == "delivered";
    return n;
  };
  WaitFor([&] { return delivered() >= 2; });
  ASSERT_EQ(delivered(), 2);
  HttpClient writer(cluster.node(0).port());
  // The sender counts a delivery once its record committed, a moment after the API shows it
  // delivered: wait for the writer's counter too.
  std::string writer_metrics;
  WaitFor([&] {
    writer_metrics = writer.Send("GET", "/metrics").body;
    return Metric(writer_metrics, kDelivered) >= 2;
  });
  std::string standby_metrics = c.Send("GET", "/metrics").body;
  EXPECT_EQ(Metric(standby_metrics, "gpuhub_engine_commits_total{result=\"ok\"}"), 0)
      << "a standby commits nothing (no tick, no billing)";
  EXPECT_EQ(Metric(standby_metrics, kDelivered), 0);
  EXPECT_GT(Metric(writer_metrics, "gpuhub_engine_commits_total{result=\"ok\"}"), 0);
  EXPECT_EQ(Metric(writer_metrics, kDelivered), 2);

  cluster.Kill(0);
  ASSERT_EQ(cluster.Writer(std::chrono::seconds(30)), 1) << cluster.Logs();
  // Day 12: past T - 72 h of the second week (day 14): the new writer renews the third.
  ASSERT_EQ(advance(7).status, 200);
  auto got = receiver.WaitFor(3, std::chrono::seconds(30));
  ASSERT_EQ(got.size(), 3u) << cluster.Logs();
  std::set<std::string> types, ids;
  for (const auto& r : got) {
    types.insert(json::parse(r.body)["type"].get<std::string>());
    ids.insert(r.headers.at("gpuhub-delivery"));
  }
  EXPECT_EQ(types, (std::set<std::string>{"rental.active", "rental.renewed"}));
  EXPECT_EQ(ids.size(), 3u) << "each notification posted once";
  WaitFor([&] { return delivered() >= 3; });
  EXPECT_EQ(delivered(), 3);
  std::string new_writer_metrics;
  WaitFor([&] {
    new_writer_metrics = c.Send("GET", "/metrics").body;
    return Metric(new_writer_metrics, kDelivered) >= 1;
  });
  EXPECT_EQ(Metric(new_writer_metrics, kDelivered), 1);
  // Terms 1, 2 and 3 charged once each, nothing else.
  std::map<std::string, int> charged;
  for (const auto& t : AllTransfers(c, alice)) {
    std::string id = t["id"];
    if (id.rfind("rental:", 0) == 0) ++charged[id];
  }
  std::string prefix = "rental:" + std::to_string(rental) + ":p";
  EXPECT_EQ(charged, (std::map<std::string, int>{{prefix + "1:revenue", 1},
                                                  {prefix + "2:revenue", 1},
                                                  {prefix + "3:revenue", 1}}));
  auto invariants = c.Call("GET", "/v1/admin/invariants", nullptr, root);
  EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
}

// An API key works through a standby (which forwards to the writer, with the client's address
// for the key's allow-list) and stops there the moment it is revoked at the writer: no node but
// the writer holds the keys.
TEST_P(HaTest, AnApiKeyRevokedAtTheWriterStopsAtOnceOnTheStandby) {
  Cluster cluster(dir_, options_);
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  ASSERT_EQ(cluster.Writer(), 0);
  HttpClient writer(cluster.node(0).port());
  HttpClient standby(cluster.node(1).port());
  std::string alice = SignUpAndLogIn(writer, "alice");
  ASSERT_FALSE(alice.empty()) << cluster.Logs();
  auto created = standby.Call(
      "POST", "/v1/api-keys",
      {{"name", "ci"}, {"scopes", {"read"}}, {"allowed_cidrs", {"127.0.0.1/32"}}}, alice);
  ASSERT_EQ(created.status, 201) << created.body;
  std::string key = created.Json()["secret"];
  EXPECT_EQ(standby.Call("GET", "/v1/wallets", nullptr, key).status, 200);
  HttpClient elsewhere(cluster.node(1).port(), "127.0.0.2");
  EXPECT_EQ(elsewhere.Call("GET", "/v1/wallets", nullptr, key).status, 403);
  auto make = standby.Call("POST", "/v1/api-keys", {{"name", "x"}, {"scopes", {"read"}}}, key);
  EXPECT_EQ(make.status, 403) << make.body;
  ASSERT_EQ(writer.Call("DELETE", "/v1/api-keys/1", nullptr, alice).status, 204);
  EXPECT_EQ(standby.Call("GET", "/v1/wallets", nullptr, key).status, 401);
  EXPECT_EQ(writer.Call("GET", "/v1/wallets", nullptr, key).status, 401);
}

INSTANTIATE_TEST_SUITE_P(Backends, HaTest, ::testing::Values("sqlite", "postgresql"));

// The fence, end to end: the writer is frozen, its database session cut, a standby takes over and
// commits; when the old writer wakes up it must not commit anything under its term (its next
// commit or its next check fails, it steps down and forwards), so every keyed credit exists once.
TEST(HaFencingTest, AWriterWhoseSessionWasCutStepsDownAndNeverCommitsAgain) {
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl("postgresql", dir);
  if (options.db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL skipped";
  ASSERT_EQ(CreateAdmin(dir, options).exit_code, 0);
  Cluster cluster(dir, options);
  ASSERT_EQ(cluster.Add(), 0) << cluster.Logs();
  ASSERT_EQ(cluster.Add(), 1) << cluster.Logs();
  HttpClient old_writer(cluster.node(0).port());
  old_writer.set_timeout_seconds(5);
  HttpClient standby(cluster.node(1).port());
  std::string root = LogInAdmin(old_writer);
  std::string alice = SignUpAndLogIn(old_writer, "alice");
  ASSERT_FALSE(root.empty() || alice.empty());
  std::string term = QueryPostgres(options.db, "SELECT term FROM engine_writer");

  cluster.Freeze(0);
  ASSERT_EQ(TerminateWriterSession(options.db), 1);
  ASSERT_EQ(cluster.Writer(std::chrono::seconds(30)), 1) << cluster.Logs();
  ASSERT_EQ(
      standby.Call("POST", "/v1/admin/credits", Credit("alice", "1.00", "by-new"), root, "n1")
          .status,
      201);
  cluster.Thaw(0);
  // Straight to the old writer: it answers 503 (its commit failed) or, once it stepped down,
  // forwards to the new writer (0: its idle keep-alive connection had been closed meanwhile).
  // Retried with the same key until acknowledged.
  int status = 0;
  for (int attempt = 0; attempt < 50 && status != 201; ++attempt) {
    status = old_writer.Call("POST", "/v1/admin/credits", Credit("alice", "2.00", "by-old"), root,
                             "o1")
                 .status;
    EXPECT_TRUE(status == 201 || status == 503 || status == 0) << status;
    if (status != 201) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(status, 201) << cluster.Logs();
  EXPECT_EQ(Role(cluster.node(0).port()), "standby");
  EXPECT_EQ(Role(cluster.node(1).port()), "writer");
  std::string log = cluster.node(0).Log();
  EXPECT_NE(log.find("event=writer_stepped_down term=" + term), std::string::npos) << log;
  EXPECT_EQ(log.find("event=writer_term_claimed term=" + std::to_string(std::stoi(term) + 2)),
            std::string::npos)
      << "the old writer must not win the lock back from a live writer";
  EXPECT_EQ(CountMemo(standby, alice, "by-new"), 1);
  EXPECT_EQ(CountMemo(standby, alice, "by-old"), 1);
  EXPECT_EQ(QueryPostgres(options.db, "SELECT term FROM engine_writer"),
            std::to_string(std::stoi(term) + 1));
  auto invariants = standby.Call("GET", "/v1/admin/invariants", nullptr, root);
  EXPECT_EQ(invariants.Json()["ok"], true) << invariants.body;
}

}  // namespace
}  // namespace gpuhub::testing
