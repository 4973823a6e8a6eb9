// Term rentals under SIGKILL: customers order, renew, release and switch auto-renew while an admin
// moves the manual clock hours at a time (each advance runs the lifecycle: auto-renew debits,
// renewal invoices, stops, holds, releases, wipes); the server is killed mid-load, restarted on
// the same database, and that three times. After every restart:
//   - every acknowledged rental is there, for its customer, with what it was ordered with, in its
//     acknowledged state or a later one (a released one stays released);
//   - every acknowledged renewal payment is there (its term is paid, or already running);
//   - nothing happened twice: no term invoiced, extended, stopped or resumed twice, no rental
//     released or its key destroyed twice (histories), no term charged twice and every charge's
//     money in the ledger (GET /v1/admin/rentals settlement), the books balance;
//   - the manual clock is not behind any acknowledged advance, and the server keeps renting.
// On SQLite and PostgreSQL (skipped when GPUHUB_TEST_PG_URL is unset).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "harness.h"

namespace gpuhub::testing {
namespace {

constexpr int kCustomers = 4;
constexpr int kKills = 3;

struct AckedRental {
  std::string owner;  // username (tokens expire: the manual clock runs months)
  std::string gpu;
  int count = 0;
  std::string state;  // the state in the last acknowledged answer about it
};

struct Acknowledged {
  std::mutex mutex;
  std::map<long long, AckedRental> rentals;
  std::map<long long, long long> paid_period;  // rental -> the highest term acknowledged paid
  std::string clock;                           // the last acknowledged advance's "now"
  int operations = 0;
};

int Rank(const std::string& state) {
  return state == "released" ? 2 : state == "provisioning" ? 0 : 1;  // active and stopped alternate
}

class RentalsCrashTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RentalsCrashTest, NothingAcknowledgedIsLostAndNothingHappensTwice) {
  TempDir dir;
  std::string db = FreshDatabaseUrl(GetParam(), dir);
  if (db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  ServerOptions options;
  options.db = db;
  options.clock = "manual";
  auto created = CreateAdmin(dir, options);
  ASSERT_EQ(created.exit_code, 0) << created.output;
  auto server = std::make_unique<ServerProcess>(dir, options);
  ASSERT_TRUE(server->Start()) << server->Log();
  std::vector<std::string> customers;  // usernames
  {
    HttpClient setup(server->port());
    std::string admin = LogInAdmin(setup);
    ASSERT_FALSE(admin.empty());
    for (const char* region : {"DFW-1", "IAD-1", "PDX-1"}) {
      for (const char* gpu : {"A100 SXM", "A100 SXM", "H100 SXM"}) {
        ASSERT_EQ(setup.Call("POST", "/v1/admin/nodes", {{"gpu", gpu}, {"region", region}}, admin)
                      .status,
                  201);
      }
    }
    for (int i = 0; i < kCustomers; ++i) {
      std::string name = "cust" + std::to_string(i);
      ASSERT_FALSE(SignUpAndLogIn(setup, name).empty());
      customers.push_back(name);
      ASSERT_EQ(setup.Call("POST", "/v1/admin/credits",
                           {{"username", name}, {"amount", "60000"}, {"currency", "USD"},
                            {"reason", "load"}},
                           admin)
                    .status,
                201);
    }
  }
  Acknowledged ack;
  int total_operations = 0;
  std::map<std::string, int> transitions;  // events seen in the histories after the last restart
  for (int round = 0; round < kKills; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int c = 0; c < kCustomers; ++c) {
      threads.emplace_back([&, c, round] {
        HttpClient client(server->port());
        const std::string& name = customers[static_cast<std::size_t>(c)];
        std::string token = LogIn(client, name);
        std::mt19937_64 rng(static_cast<unsigned>(c * 7919 + round * 31 + 1));
        while (!stop.load()) {
          std::vector<long long> mine;
          {
            std::lock_guard<std::mutex> lock(ack.mutex);
            for (const auto& [id, r] : ack.rentals) {
              if (r.owner == name && r.state != "released") mine.push_back(id);
            }
          }
          int op = static_cast<int>(rng() % 10);
          HttpResponse r;
          if (op < 4 || mine.empty()) {
            const char* gpu = rng() % 3 ? "A100 SXM" : "H100 SXM";
            int counts[] = {1, 1, 2, 4};
            int count = counts[rng() % 4];
            r = client.Call("POST", "/v1/rentals",
                            {{"gpu", gpu}, {"count", count}, {"term", rng() % 4 ? "week" : "month"},
                             {"auto_renew", rng() % 2 == 0}},
                            token, "order-" + std::to_string(c) + "-" + std::to_string(rng()));
            if (r.status == 201) {
              json j = r.Json();
              std::lock_guard<std::mutex> lock(ack.mutex);
              ack.rentals[j["id"]] = {name, gpu, count, j["state"]};
              ++ack.operations;
            }
          } else {
            long long id = mine[rng() % mine.size()];
            std::string path = "/v1/rentals/" + std::to_string(id);
            if (op < 7) {
              r = client.Call("POST", path + "/renew", json::object(), token);
              if (r.status == 200) {
                json j = r.Json();
                std::lock_guard<std::mutex> lock(ack.mutex);
                long long& p = ack.paid_period[id];
                p = std::max(p, j["renewal"]["period"].get<long long>());
                ack.rentals[id].state = j["rental"]["state"];
                ++ack.operations;
              }
            } else if (op < 8 && rng() % 4 == 0) {
              // Rare: customers who release at once would leave the clock no rental to carry to
              // its invoice, stop and hold (the transitions the kills must fall between).
              r = client.Call("POST", path + "/release", {{"confirm", true}}, token);
              if (r.status == 200) {
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.rentals[id].state = "released";
                ++ack.operations;
              }
            } else {
              r = client.Call("POST", path + "/auto-renew", {{"enabled", rng() % 2 == 0}}, token);
              if (r.status == 200) {
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.rentals[id].state = r.Json()["state"];
                ++ack.operations;
              }
            }
          }
          if (r.status == 0) return;  // the server is gone
          if (r.status == 401) token = LogIn(client, name);  // 30 days of clock passed
        }
      });
    }
    threads.emplace_back([&] {
      HttpClient client(server->port());
      std::string admin = LogInAdmin(client);
      std::mt19937_64 rng(static_cast<unsigned>(round) + 99);
      while (!stop.load() && !admin.empty()) {
        long long hours = 1 + static_cast<long long>(rng() % 30);
        auto r = client.Call("POST", "/v1/admin/clock/advance", {{"seconds", hours * 3600}}, admin);
        if (r.status == 0) return;
        if (r.status == 401) admin = LogInAdmin(client);
        if (r.status == 200) {
          std::lock_guard<std::mutex> lock(ack.mutex);
          ack.clock = r.Json()["now"];  // RFC 3339 UTC with a fixed shape: compares as text
          ++ack.operations;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::lock_guard<std::mutex> lock(ack.mutex);
      if (ack.operations >= 150 * (round + 1) && i >= 20) break;
    }
    server->Kill();
    stop = true;
    for (auto& t : threads) t.join();

    server = std::make_unique<ServerProcess>(dir, options);
    ASSERT_TRUE(server->Start()) << server->Log();
    HttpClient client(server->port());
    std::string admin = LogInAdmin(client);
    ASSERT_FALSE(admin.empty());
    std::lock_guard<std::mutex> lock(ack.mutex);
    total_operations = ack.operations;
    std::map<std::string, std::string> tokens;
    for (const auto& name : customers) tokens[name] = LogIn(client, name);
    transitions.clear();
    for (auto& [id, acked] : ack.rentals) {
      auto r = client.Call("GET", "/v1/rentals/" + std::to_string(id), nullptr, tokens[acked.owner]);
      ASSERT_EQ(r.status, 200) << "acknowledged rental " << id << " is gone: " << r.body;
      json now = r.Json();
      EXPECT_EQ(now["gpu"], acked.gpu) << id;
      EXPECT_EQ(now["count"], acked.count) << id;
      std::string state = now["state"];
      EXPECT_GE(Rank(state), Rank(acked.state)) << "rental " << id << " went back from "
                                                 << acked.state << " to " << state;
      acked.state = state;
      if (auto paid = ack.paid_period.find(id); paid != ack.paid_period.end()) {
        long long period = now["period"];
        bool running = period >= paid->second;
        bool renewal_paid = !now["renewal"].is_null() &&
                            now["renewal"]["period"] == paid->second &&
                            (now["renewal"]["status"] == "paid" ||
                             now["renewal"]["status"] == "refunded");
        EXPECT_TRUE(running || renewal_paid)
            << "the acknowledged payment of term " << paid->second << " of rental " << id
            << " is gone: " << now.dump();
      }
      // Nothing twice: each term's transitions and each final step appear once in the history.
      std::set<std::string> seen;
      std::map<std::string, int> finals;
      for (const auto& e : now["history"]) {
        std::string event = e["event"];
        ++transitions[event];
        if (event == "renewal_invoiced" || event == "extended" || event == "stopped" ||
            event == "resumed" || event == "renewal_paid" || event == "auto_renewed") {
          std::string detail = e["detail"];
          std::string key = event + " " + detail.substr(0, detail.find(':'));
          if (event == "stopped") key = event + " " + std::string(e["at"]);
          EXPECT_TRUE(seen.insert(key).second)
              << "rental " << id << ": " << key << " happened twice: " << now["history"].dump();
        }
        if (event == "released" || event == "key_destroyed" || event == "provisioned" ||
            event == "wiped") {
          EXPECT_EQ(++finals[event], 1) << "rental " << id << ": " << event << " twice";
        }
      }
    }
    auto fleet = client.Call("GET", "/v1/admin/rentals", nullptr, admin);
    ASSERT_EQ(fleet.status, 200) << fleet.body;
    EXPECT_EQ(fleet.Json()["invariants"], "ok") << fleet.body;
    EXPECT_EQ(fleet.Json()["settlement"], "ok") << fleet.body;
    auto ledger = client.Call("GET", "/v1/admin/ledger", nullptr, admin);
    EXPECT_EQ(ledger.Json()["balanced"], true) << ledger.body;
    auto tick = client.Call("POST", "/v1/admin/clock/advance", {{"seconds", 1}}, admin);
    ASSERT_EQ(tick.status, 200);
    EXPECT_GT(std::string(tick.Json()["now"]), ack.clock) << "the clock went back";
    ack.clock = tick.Json()["now"];
    ASSERT_GT(ack.operations, 40 * (round + 1)) << "the load did too little to mean anything";
  }
  HttpClient client(server->port());
  auto order = client.Call("POST", "/v1/rentals",
                           {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}},
                           LogIn(client, customers[0]));
  EXPECT_TRUE(order.status == 201 || order.status == 409 || order.status == 402) << order.body;
  // The kills fell between real transitions, not only between orders.
  for (const char* kind : {"renewal_invoiced", "extended", "stopped", "released", "key_destroyed"}) {
    EXPECT_GT(transitions[kind], 0) << kind;
  }
  std::printf("rentals crash test: %d acknowledged operations over %d kills, %zu rentals;",
              total_operations, kKills, ack.rentals.size());
  for (const auto& [kind, n] : transitions) std::printf(" %s %d", kind.c_str(), n);
  std::printf("\n");
}

INSTANTIATE_TEST_SUITE_P(Backends, RentalsCrashTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
