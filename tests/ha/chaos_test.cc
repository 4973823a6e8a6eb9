// Chaos: three `gpuhub serve` processes on one database under concurrent load, the writer killed
// ten times (SIGKILL; on PostgreSQL every other round its database session cut instead). Clients
// send every write with an Idempotency-Key and retry it, with the same key, against whichever node
// answers until it is acknowledged (or refused for good, a 4xx). After every round:
//   - every acknowledged operation is there exactly once: each credit key is one transfer, the
//     bids are exactly the acknowledged ones (no duplicate from a retry);
//   - the books balance and every market invariant holds (GET /v1/admin/invariants: ledger
//     invariants and history, settlement, every lease-hour charged once, leases paid up);
//   - a replayed key answers what it answered the first time.
// Time is the manual clock, advanced an hour at a time by the load itself, so leases are billed
// while writers die. Prints the takeover times (kill -> a node answers /healthz/writer with a new
// term). Sized for CI: about a minute per backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cluster.h"

namespace gpuhub::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr int kRounds = 10;
constexpr int kNodes = 3;
constexpr int kClients = 4;
constexpr int kCustomers = 6;
constexpr int kMachines = 4;
constexpr int kOperationsPerRound = 60;      // acknowledged before the kill
constexpr int kMaxOperationsPerRound = 150;  // then the clients wait (bids stay under one page)
// Clock advances of one hour per round: leases are billed while writers die, and the whole test
// stays inside the 24 hours an Idempotency-Key lives (a retry must find its key).
constexpr int kAdvancesPerRound = 2;

struct Outcome {
  int status = 0;
  std::string body;
};

struct Book {
  std::mutex mutex;
  std::map<std::string, Outcome> done;                   // key -> final answer
  std::map<std::string, std::pair<int, json>> requests;  // key -> (kind, body) as sent
  std::map<int, std::set<long long>> bids_by_customer;   // acknowledged bid ids
  std::map<int, std::set<std::string>> credits_by_customer;
  std::map<int, std::set<long long>> stopped_by_customer;  // leases whose stop was acknowledged
  int acknowledged = 0;
  std::atomic<int> retries{0};
};

enum Kind { kCredit, kBid, kStop, kAdvance };

// The term a /healthz answer names; -1 when it names none (an error, or no answer at all).
int TermOf(const HttpResponse& r) {
  json h = json::parse(r.body, nullptr, false);
  return h.is_object() && h.contains("term") && h["term"].is_number_integer() ? h["term"].get<int>()
                                                                               : -1;
}

class ChaosTest : public ::testing::TestWithParam<std::string> {
 protected:
  // Sends a keyed request until some node gives a final answer (not 0, 503, or "in flight").
  Outcome UntilAnswered(const std::string& method, const std::string& path, const json& body,
                        const std::string& token, const std::string& key, std::mt19937& rng) {
    for (int attempt = 0; attempt < 2000; ++attempt) {
      std::vector<int> ports;
      {
        std::lock_guard<std::mutex> lock(ports_mutex_);
        ports = ports_;
      }
      HttpClient c(ports[rng() % ports.size()]);
      c.set_timeout_seconds(10);
      auto r = c.Call(method, path, body, token, key);
      bool in_flight = r.status == 409 &&
                       r.body.find("still being processed") != std::string::npos;
      if (r.status != 0 && r.status != 503 && !in_flight) return {r.status, r.body};
      if (attempt > 0) ++book_.retries;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return {};
  }

  void SetPorts(std::vector<int> ports) {
    std::lock_guard<std::mutex> lock(ports_mutex_);
    ports_ = std::move(ports);
  }

  std::mutex ports_mutex_;
  std::vector<int> ports_;
  Book book_;
};

TEST_P(ChaosTest, EveryAcknowledgedOperationSurvivesTenWriterKillsExactlyOnce) {
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl(GetParam(), dir);
  if (options.db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL skipped";
  const bool postgres = GetParam() == "postgresql";
  ASSERT_EQ(CreateAdmin(dir, options).exit_code, 0);
  Cluster cluster(dir, options);
  for (int i = 0; i < kNodes; ++i) ASSERT_GE(cluster.Add(), 0) << cluster.Logs();
  SetPorts(cluster.Ports());

  HttpClient setup(cluster.node(0).port());
  const std::string root = LogInAdmin(setup);
  const std::string provider =
      SignUpAndLogIn(setup, "prov", "correct horse battery staple", {"provider"});
  ASSERT_FALSE(root.empty() || provider.empty());
  std::vector<std::string> customers;
  for (int i = 0; i < kCustomers; ++i) {
    customers.push_back(SignUpAndLogIn(setup, "cust" + std::to_string(i)));
    ASSERT_FALSE(customers.back().empty());
  }
  for (int m = 0; m < kMachines; ++m) {
    auto machine = setup.Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), provider);
    ASSERT_EQ(machine.status, 201) << machine.body;
    auto ask = setup.Call(
        "POST", "/v1/asks",
        AskJson(machine.Json()["id"], "2.000", UtcTimeFromNow(std::chrono::hours(24 * 365))),
        provider);
    ASSERT_EQ(ask.status, 201) << ask.body;
  }

  std::atomic<int> key_counter{0};
  std::vector<double> takeovers_ms;
  int kills = 0, cuts = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<int> round_acks{0};
    std::atomic<int> advances{0};
    std::vector<std::thread> clients;
    // An ASSERT below returns while the clients run: stop and join them on the way out, so the
    // failure is reported instead of std::terminate (a joinable thread destroyed) swallowing it.
    struct JoinOnExit {
      std::atomic<bool>& stop;
      std::vector<std::thread>& threads;
      ~JoinOnExit() {
        stop = true;
        for (auto& t : threads) {
          if (t.joinable()) t.join();
        }
      }
    } join_on_exit{stop, clients};
    for (int t = 0; t < kClients; ++t) {
      clients.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(round * 100 + t));
        while (!stop) {
          if (round_acks >= kMaxOperationsPerRound) {
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            continue;
          }
          int u = static_cast<int>(rng() % kCustomers);
          std::string key = "k" + std::to_string(key_counter++);
          int dice = static_cast<int>(rng() % 20);
          Kind kind = dice < 6 ? kCredit : dice < 16 ? kBid : dice < 19 ? kStop : kAdvance;
          if (kind == kAdvance && advances++ >= kAdvancesPerRound) kind = kCredit;
          json body;
          std::string method = "POST", path, token = root;
          if (kind == kCredit) {
            path = "/v1/admin/credits";
            body = {{"username", "cust" + std::to_string(u)},
                    {"amount", std::to_string(50 + rng() % 50) + ".00"},
                    {"currency", "USD"},
                    {"reason", key}};
          } else if (kind == kBid) {
            path = "/v1/bids";
            token = customers[static_cast<std::size_t>(u)];
            body = {{"gpu", "H100 SXM"}, {"gpus", 1 + static_cast<int>(rng() % 2)}};
            if (rng() % 2) {
              body["market"] = true;
            } else {
              body["limit_usd_per_gpu_hour"] = rng() % 2 ? "2.500" : "1.500";
              body["time_in_force"] = "gtc";
            }
          } else if (kind == kStop) {
            token = customers[static_cast<std::size_t>(u)];
            long long lease = 0;
            // A lease of this customer, from whichever node answers.
            Outcome list = UntilAnswered("GET", "/v1/leases", nullptr, token, "", rng);
            json leases = json::parse(list.body, nullptr, false);
            if (!leases.is_discarded()) {
              for (const auto& l : leases["leases"]) {
                if (l["status"] == "active") lease = l["id"];
              }
            }
            if (lease == 0) continue;
            path = "/v1/leases/" + std::to_string(lease) + "/stop";
          } else {
            path = "/v1/admin/clock/advance";
            body = {{"seconds", 3600}};
          }
          {
            std::lock_guard<std::mutex> lock(book_.mutex);
            book_.requests[key] = {kind, body};
          }
          Outcome out = UntilAnswered(method, path, body, token, key, rng);
          std::lock_guard<std::mutex> lock(book_.mutex);
          book_.done[key] = out;
          if (out.status >= 200 && out.status < 300) {
            ++book_.acknowledged;
            ++round_acks;
            json j = json::parse(out.body, nullptr, false);
            if (kind == kBid) book_.bids_by_customer[u].insert(j["id"].get<long long>());
            if (kind == kCredit) book_.credits_by_customer[u].insert(key);
            if (kind == kStop) book_.stopped_by_customer[u].insert(j["id"].get<long long>());
          }
        }
      });
    }
    // Load, then the kill.
    for (int i = 0; i < 1000 && round_acks < kOperationsPerRound; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    int writer = cluster.Writer(std::chrono::seconds(10));
    ASSERT_GE(writer, 0) << cluster.Logs();
    // The writer's term (a node that stops being the writer between the two calls answers without
    // one: ask again).
    int term = -1;
    for (auto until = SteadyClock::now() + std::chrono::seconds(10);
         term < 0 && SteadyClock::now() < until;) {
      term = TermOf(HttpClient(cluster.node(writer).port()).Call("GET", "/healthz"));
      if (term < 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        writer = cluster.Writer(std::chrono::seconds(10));
        ASSERT_GE(writer, 0) << cluster.Logs();
      }
    }
    ASSERT_GE(term, 0) << "the writer names no term\n" << cluster.Logs();
    bool cut = postgres && round % 2 == 1;
    auto killed = SteadyClock::now();
    if (cut) {
      ASSERT_EQ(TerminateWriterSession(options.db), 1);
      ++cuts;
    } else {
      cluster.Kill(writer);
      ++kills;
    }
    // A node with a newer term answers /healthz/writer.
    double took = -1;
    while (SteadyClock::now() - killed < std::chrono::seconds(30) && took < 0) {
      int now = cluster.Writer();
      if (now >= 0) {
        // A writer whose session was just cut may still say so, then answer an error: no term.
        if (TermOf(HttpClient(cluster.node(now).port()).Call("GET", "/healthz")) > term) {
          took = std::chrono::duration<double, std::milli>(SteadyClock::now() - killed).count();
        }
      }
      if (took < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(took, 0) << "no takeover in round " << round << "\n" << cluster.Logs();
    takeovers_ms.push_back(took);
    if (!cut) {
      ASSERT_GE(cluster.Add(), 0) << cluster.Logs();  // the killed node comes back as a standby
      SetPorts(cluster.Ports());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // load on the new writer
    stop = true;
    for (auto& c : clients) c.join();

    // ----- After the round: exactly once, balanced, billed once per hour.
    int w = cluster.Writer(std::chrono::seconds(10));
    ASSERT_GE(w, 0);
    HttpClient c(cluster.node(w).port());
    std::lock_guard<std::mutex> lock(book_.mutex);
    for (const auto& [key, out] : book_.done) {
      ASSERT_NE(out.status, 0) << key << " was never answered";
      ASSERT_LT(out.status, 500) << key << ": " << out.body;
    }
    for (int u = 0; u < kCustomers; ++u) {
      const std::string& token = customers[static_cast<std::size_t>(u)];
      std::map<std::string, int> memo;
      for (const auto& t : AllTransfers(c, token)) {
        if (t["code"] == "manual_credit") ++memo[t["memo"]];
      }
      for (const auto& key : book_.credits_by_customer[u]) {
        ASSERT_EQ(memo[key], 1) << "round " << round << ": credit " << key;
      }
      ASSERT_EQ(memo.size(), book_.credits_by_customer[u].size())
          << "round " << round << ": a credit nobody got acknowledged";
      auto bids = c.Call("GET", "/v1/bids?limit=500", nullptr, token);
      ASSERT_EQ(bids.status, 200) << bids.body;
      std::set<long long> stored;
      json listed = bids.Json();
      for (const auto& b : listed["bids"]) stored.insert(b["id"].get<long long>());
      ASSERT_LT(stored.size(), 500u) << "the test outgrew one page of bids";
      ASSERT_EQ(stored, book_.bids_by_customer[u])
          << "round " << round << ": the bids are not exactly the acknowledged ones";
      auto leases = c.Call("GET", "/v1/leases?limit=500", nullptr, token);
      json lease_list = leases.Json();
      std::map<long long, json> by_id;
      for (const auto& l : lease_list["leases"]) by_id[l["id"].get<long long>()] = l;
      for (long long id : book_.stopped_by_customer[u]) {
        ASSERT_TRUE(by_id.count(id)) << "round " << round << ": stopped lease " << id;
        ASSERT_NE(by_id[id]["status"], "active") << "round " << round << ": lease " << id;
      }
    }
    auto invariants = c.Call("GET", "/v1/admin/invariants", nullptr, root);
    ASSERT_EQ(invariants.Json()["ok"], true) << "round " << round << ": " << invariants.body;
    // A few keys replayed: the first answer, word for word.
    int replayed = 0;
    for (const auto& [key, out] : book_.done) {
      if (out.status != 201 || replayed >= 5) continue;
      const auto& [kind, body] = book_.requests[key];
      if (kind != kCredit) continue;
      auto again = c.Call("POST", "/v1/admin/credits", body, root, key);
      ASSERT_EQ(again.body, out.body) << key;
      ASSERT_EQ(again.Header("idempotent-replayed"), "true");
      ++replayed;
    }
  }
  auto books = HttpClient(cluster.node(cluster.Writer(std::chrono::seconds(10))).port())
                   .Call("GET", "/v1/admin/market", nullptr, root);
  std::sort(takeovers_ms.begin(), takeovers_ms.end());
  std::printf("[ chaos    ] %s: %d rounds (%d SIGKILL, %d cut sessions), %d acknowledged "
              "operations, %d retries; takeover ms: median %.0f, max %.0f; market %s\n",
              GetParam().c_str(), kRounds, kills, cuts, book_.acknowledged, book_.retries.load(),
              takeovers_ms[takeovers_ms.size() / 2], takeovers_ms.back(),
              books.body.substr(0, 300).c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, ChaosTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
