// Storage under SIGKILL: customers create volumes (with Idempotency-Keys), grow, attach, detach,
// snapshot, restore, pay and delete them, rent and release instances, while an admin posts egress
// samples (each sent twice) and moves the manual clock hours to days at a time (each advance bills
// days and runs the unpaid path: some wallets run dry). The server is killed mid-load, restarted on
// the same database, and that three times. After every restart:
//   - every acknowledged volume and snapshot is there, for its owner, in its region, never smaller
//     than acknowledged, never back from deleted; an acknowledged deletion stays deleted;
//   - every acknowledged egress sample is in its meter (used bytes at least their sum), and sending
//     them all again records none of them (nothing charged twice, also across the crash);
//   - nothing was charged twice: GET /v1/admin/storage's settlement (each day of each volume and
//     snapshot paid exactly once, each GB of egress once, every charge's legs in the ledger) and
//     invariants (replicas within capacity, attachments only to live rentals of the region), the
//     fleet's too, and the books balance;
//   - the manual clock is not behind any acknowledged advance.
// On SQLite and PostgreSQL (skipped when GPUHUB_TEST_PG_URL is unset).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "harness.h"

namespace gpuhub::testing {
namespace {

constexpr int kCustomers = 4;
constexpr int kKills = 3;

struct AckedVolume {
  std::string owner;
  std::string region;
  long long size_tb = 0;
  bool deleted = false;
  std::string key;  // the Idempotency-Key that created it ("" for a restore)
};

struct AckedSample {
  long long rental_id = 0;
  std::string at;
  long long bytes = 0;
};

struct Acknowledged {
  std::mutex mutex;
  std::map<long long, AckedVolume> volumes;
  std::map<long long, std::string> snapshots;  // id -> owner
  std::map<std::string, std::vector<long long>> rentals;  // owner -> rentals
  std::vector<AckedSample> samples;
  std::string clock;
  int operations = 0;
};

class StorageCrashTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StorageCrashTest, NothingAcknowledgedIsLostAndNothingIsChargedTwice) {
  TempDir dir;
  std::string db = FreshDatabaseUrl(GetParam(), dir);
  if (db.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  ServerOptions options;
  options.db = db;
  auto created = CreateAdmin(dir, options);
  ASSERT_EQ(created.exit_code, 0) << created.output;
  auto server = std::make_unique<ServerProcess>(dir, options);
  ASSERT_TRUE(server->Start()) << server->Log();
  std::vector<std::string> customers;
  {
    HttpClient setup(server->port());
    std::string admin = LogInAdmin(setup);
    ASSERT_FALSE(admin.empty());
    for (const char* region : {"DFW-1", "IAD-1"}) {
      for (int i = 0; i < 4; ++i) {
        ASSERT_EQ(setup.Call("POST", "/v1/admin/storage-hosts",
                             {{"region", region}, {"capacity_tb", 2000}}, admin)
                      .status,
                  201);
      }
      for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(setup.Call("POST", "/v1/admin/nodes", {{"gpu", "A100 SXM"}, {"region", region}},
                             admin)
                      .status,
                  201);
      }
    }
    for (int i = 0; i < kCustomers; ++i) {
      std::string name = "cust" + std::to_string(i);
      ASSERT_FALSE(SignUpAndLogIn(setup, name).empty());
      customers.push_back(name);
      // Some customers have little: their storage goes down the unpaid path.
      ASSERT_EQ(setup.Call("POST", "/v1/admin/credits",
                           {{"username", name}, {"amount", i % 2 ? "3000" : "400"},
                            {"currency", "USD"}, {"reason", "load"}},
                           admin)
                    .status,
                201);
    }
  }
  Acknowledged ack;
  const char* regions[] = {"DFW-1", "IAD-1"};
  for (int round = 0; round < kKills; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    for (int c = 0; c < kCustomers; ++c) {
      threads.emplace_back([&, c, round] {
        HttpClient client(server->port());
        const std::string& name = customers[static_cast<std::size_t>(c)];
        std::string token = LogIn(client, name);
        std::mt19937_64 rng(static_cast<unsigned>(c * 7919 + round * 31 + 5));
        while (!stop.load()) {
          std::vector<long long> mine, live, snaps, rentals;
          {
            std::lock_guard<std::mutex> lock(ack.mutex);
            for (const auto& [id, v] : ack.volumes) {
              if (v.owner != name) continue;
              mine.push_back(id);
              if (!v.deleted) live.push_back(id);
            }
            for (const auto& [id, owner] : ack.snapshots) {
              if (owner == name) snaps.push_back(id);
            }
            rentals = ack.rentals[name];
          }
          int op = static_cast<int>(rng() % 12);
          HttpResponse r;
          if (op < 3 || live.empty()) {
            std::string region = regions[rng() % 2];
            long long tb = 1 + static_cast<long long>(rng() % 6);
            std::string key = "vol-" + std::to_string(c) + "-" + std::to_string(rng());
            r = client.Call("POST", "/v1/volumes", {{"region", region}, {"size_tb", tb}}, token,
                            key);
            if (r.status == 201) {
              std::lock_guard<std::mutex> lock(ack.mutex);
              ack.volumes[r.Json()["id"]] = {name, region, tb, false, key};
              ++ack.operations;
            }
          } else if (op < 4) {
            r = client.Call("POST", "/v1/rentals",
                            {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"},
                             {"region", regions[rng() % 2]}, {"auto_renew", false}},
                            token, "rent-" + std::to_string(c) + "-" + std::to_string(rng()));
            if (r.status == 201) {
              std::lock_guard<std::mutex> lock(ack.mutex);
              ack.rentals[name].push_back(r.Json()["id"]);
              ++ack.operations;
            }
          } else {
            long long id = live[rng() % live.size()];
            std::string path = "/v1/volumes/" + std::to_string(id);
            if (op < 6) {
              long long to;
              {
                std::lock_guard<std::mutex> lock(ack.mutex);
                to = ack.volumes[id].size_tb + 1;
              }
              r = client.Call("POST", path + "/resize", {{"size_tb", to}}, token);
              if (r.status == 200) {
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.volumes[id].size_tb = std::max(ack.volumes[id].size_tb,
                                                   r.Json()["size_tb"].get<long long>());
                ++ack.operations;
              }
            } else if (op < 8 && !rentals.empty()) {
              long long rental = rentals[rng() % rentals.size()];
              r = client.Call("POST", path + (rng() % 3 ? "/attach" : "/detach"),
                              {{"rental_id", rental}}, token);
            } else if (op < 9) {
              r = client.Call("POST", "/v1/snapshots", {{"volume_id", id}}, token);
              if (r.status == 201) {
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.snapshots[r.Json()["id"]] = name;
                ++ack.operations;
              }
            } else if (op < 10 && !snaps.empty()) {
              long long snap = snaps[rng() % snaps.size()];
              r = client.Call("POST", "/v1/snapshots/" + std::to_string(snap) + "/restore",
                              json::object(), token);
              if (r.status == 201) {
                json v = r.Json();
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.volumes[v["id"]] = {name, v["region"], v["size_tb"], false, ""};
                ++ack.operations;
              }
            } else if (op < 11) {
              r = client.Call("POST", path + "/pay", nullptr, token);
            } else {
              r = client.Call("DELETE", path, nullptr, token);
              if (r.status == 200) {
                std::lock_guard<std::mutex> lock(ack.mutex);
                ack.volumes[id].deleted = true;
                ++ack.operations;
              }
            }
          }
          if (r.status == 0) return;  // the server is gone
          if (r.status == 401) token = LogIn(client, name);
        }
      });
    }
    // The admin: egress samples (each sent twice) and the clock.
    threads.emplace_back([&, round] {
      HttpClient client(server->port());
      std::string admin = LogInAdmin(client);
      std::mt19937_64 rng(static_cast<unsigned>(round) + 77);
      int n = 0;
      while (!stop.load() && !admin.empty()) {
        std::vector<long long> rentals;
        {
          std::lock_guard<std::mutex> lock(ack.mutex);
          for (const auto& [owner, ids] : ack.rentals) rentals.insert(rentals.end(), ids.begin(), ids.end());
        }
        HttpResponse r;
        if (!rentals.empty() && rng() % 2) {
          // Samples carry distinct times well in the past: a later one never hides an earlier.
          AckedSample s{rentals[rng() % rentals.size()],
                        "2020-01-01T00:00:00." + std::to_string(100000 + round * 30000 + ++n) + "Z",
                        static_cast<long long>(rng() % 3000) * 1'000'000'000LL};
          json body = {{"samples", {{{"rental_id", s.rental_id}, {"at", s.at}, {"bytes", s.bytes}}}}};
          r = client.Call("POST", "/v1/admin/egress", body, admin);
          if (r.status == 200) {
            std::lock_guard<std::mutex> lock(ack.mutex);
            ack.samples.push_back(s);
            ++ack.operations;
          }
          auto again = client.Call("POST", "/v1/admin/egress", body, admin);
          if (again.status == 200) {
            EXPECT_EQ(again.Json()["recorded"], 0) << again.body;
          }
        } else {
          long long hours = 1 + static_cast<long long>(rng() % 40);
          r = client.Call("POST", "/v1/admin/clock/advance", {{"seconds", hours * 3600}}, admin);
          if (r.status == 200) {
            std::lock_guard<std::mutex> lock(ack.mutex);
            ack.clock = r.Json()["now"];
            ++ack.operations;
          }
        }
        if (r.status == 0) return;
        if (r.status == 401) admin = LogInAdmin(client);
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
      }
    });
    for (int i = 0; i < 100; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::lock_guard<std::mutex> lock(ack.mutex);
      if (ack.operations >= 120 * (round + 1) && i >= 20) break;
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
    std::map<std::string, std::string> tokens;
    for (const auto& name : customers) tokens[name] = LogIn(client, name);
    for (auto& [id, acked] : ack.volumes) {
      auto r = client.Call("GET", "/v1/volumes/" + std::to_string(id), nullptr, tokens[acked.owner]);
      ASSERT_EQ(r.status, 200) << "acknowledged volume " << id << " is gone: " << r.body;
      json v = r.Json();
      EXPECT_EQ(v["region"], acked.region);
      EXPECT_GE(v["size_tb"].get<long long>(), acked.size_tb) << "volume " << id << " shrank";
      if (acked.deleted) {
        EXPECT_EQ(v["state"], "deleted") << "volume " << id << " came back";
      }
      acked.deleted = v["state"] == "deleted";
      acked.size_tb = v["size_tb"];
    }
    for (const auto& [id, owner] : ack.snapshots) {
      auto r = client.Call("GET", "/v1/snapshots/" + std::to_string(id), nullptr, tokens[owner]);
      EXPECT_EQ(r.status, 200) << "acknowledged snapshot " << id << " is gone: " << r.body;
    }
    std::map<long long, long long> acked_bytes;
    json all = json::array();
    for (const auto& s : ack.samples) {
      acked_bytes[s.rental_id] += s.bytes;
      all.push_back({{"rental_id", s.rental_id}, {"at", s.at}, {"bytes", s.bytes}});
    }
    for (const auto& [owner, ids] : ack.rentals) {
      for (long long id : ids) {
        auto r = client.Call("GET", "/v1/rentals/" + std::to_string(id), nullptr, tokens[owner]);
        ASSERT_EQ(r.status, 200) << r.body;
        long long used = 0;
        // Held by name: a range-for over a member of the temporary r.Json() would dangle.
        const json rental = r.Json();
        for (const auto& m : rental["storage"]["egress"]["terms"]) used += m["used_bytes"].get<long long>();
        EXPECT_GE(used, acked_bytes[id]) << "acknowledged egress of rental " << id << " is lost";
      }
    }
    for (std::size_t i = 0; i < all.size(); i += 500) {
      json page = json::array();
      for (std::size_t k = i; k < std::min(all.size(), i + 500); ++k) page.push_back(all[k]);
      auto again = client.Call("POST", "/v1/admin/egress", {{"samples", page}}, admin);
      ASSERT_EQ(again.status, 200) << again.body;
      EXPECT_EQ(again.Json()["recorded"], 0) << "an acknowledged sample was recorded again";
    }
    for (const char* path : {"/v1/admin/storage", "/v1/admin/rentals"}) {
      auto check = client.Call("GET", path, nullptr, admin);
      ASSERT_EQ(check.status, 200) << check.body;
      EXPECT_EQ(check.Json()["invariants"], "ok") << path << ": " << check.body;
      EXPECT_EQ(check.Json()["settlement"], "ok") << path << ": " << check.body;
    }
    auto ledger = client.Call("GET", "/v1/admin/ledger", nullptr, admin);
    EXPECT_EQ(ledger.Json()["balanced"], true) << ledger.body;
    auto tick = client.Call("POST", "/v1/admin/clock/advance", {{"seconds", 1}}, admin);
    ASSERT_EQ(tick.status, 200);
    EXPECT_GT(std::string(tick.Json()["now"]), ack.clock) << "the clock went back";
    ack.clock = tick.Json()["now"];
    ASSERT_GT(ack.operations, 40 * (round + 1)) << "the load did too little to mean anything";
  }
  HttpClient client(server->port());
  std::string admin = LogInAdmin(client);
  json totals = client.Call("GET", "/v1/admin/storage", nullptr, admin).Json();
  long long deleted = 0, volumes = 0;
  for (const auto& [id, v] : ack.volumes) {
    ++volumes;
    deleted += v.deleted ? 1 : 0;
  }
  std::printf("storage crash test: %d acknowledged operations over %d kills: %lld volumes (%lld "
              "deleted), %zu snapshots, %zu egress samples; %s charges in all\n",
              ack.operations, kKills, volumes, deleted, ack.snapshots.size(), ack.samples.size(),
              totals["charges"].dump().c_str());
}

INSTANTIATE_TEST_SUITE_P(Backends, StorageCrashTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
