// The spot market's history through HTTP, now that closed records leave the engine's memory: a
// real server on SQLite and PostgreSQL serves closed bids, ended leases, cancelled asks and paid
// payouts from the store, with the owner checks of before (someone else's id is 404, a command on
// one's own closed record 409), pages them while fills happen, and keeps every total and list
// across a clean restart and a SIGKILL.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

std::string Later(int days) { return UtcTimeFromNow(std::chrono::hours(24 * days)); }

class MarketHistoryTest : public ServerFixture {
 protected:
  long long Machine(const std::string& provider) {
    auto m = client_->Call("POST", "/v1/machines",
                           {{"gpu", "H100 SXM"},
                            {"gpus", 8},
                            {"region", "IAD-1"},
                            {"vcpus", 96},
                            {"ram_gb", 1024},
                            {"disk_gb", 8000}},
                           provider);
    EXPECT_EQ(m.status, 201) << m.body;
    return m.Json()["id"].get<long long>();
  }
  long long Ask(const std::string& provider, long long machine, const char* price) {
    auto a = client_->Call("POST", "/v1/asks",
                           {{"machine_id", machine},
                            {"price_usd_per_gpu_hour", price},
                            {"available_until", Later(30)}},
                           provider);
    EXPECT_EQ(a.status, 201) << a.body;
    return a.Json()["id"].get<long long>();
  }
  json Bid(const std::string& customer, json body) {
    auto b = client_->Call("POST", "/v1/bids", body, customer);
    EXPECT_EQ(b.status, 201) << b.body;
    return b.Json();
  }
  // Everything a restart must keep: the lists (without the live parts: connection, tax) and the
  // totals.
  json Everything(const std::string& provider, const std::string& customer) {
    json out;
    out["earnings"] = Get("/v1/earnings", provider);
    out["bids"] = Get("/v1/bids", customer)["bids"];
    out["leases"] = Get("/v1/leases", customer)["leases"];
    out["provided"] = Get("/v1/leases?as=provider", provider)["leases"];
    out["asks"] = Get("/v1/asks", provider)["asks"];
    out["payouts"] = Get("/v1/payouts", provider)["payouts"];
    out["trades"] = Get("/v1/markets/H100%20SXM/trades?limit=500")["trades"];
    for (const char* list : {"leases", "provided"}) {
      for (auto& l : out[list]) {
        l.erase("connection");
        l.erase("tax");
      }
    }
    return out;
  }
};

TEST_P(MarketHistoryTest, ClosedRecordsAreReadFromTheStoreWithTheirOwnersChecks) {
  std::string provider = User("paula", {"provider"});
  std::string carl = User("carl", {"customer"});
  std::string dora = User("dora", {"customer"});
  Credit("carl", "100");
  Credit("dora", "100");
  long long machine = Machine(provider);
  long long ask = Ask(provider, machine, "2.000");
  json filled = Bid(carl, {{"gpu", "H100 SXM"}, {"gpus", 2}, {"market", true}});
  ASSERT_EQ(filled["status"], "filled");
  const long long carls_lease = filled["lease_id"].get<long long>();
  json doras = Bid(dora, {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}});
  const long long doras_lease = doras["lease_id"].get<long long>();
  json missed = Bid(carl, {{"gpu", "H100 SXM"},
                           {"gpus", 1},
                           {"limit_usd_per_gpu_hour", "1.000"},
                           {"time_in_force", "ioc"}});
  ASSERT_EQ(missed["status"], "cancelled");
  auto stop =
      client_->Call("POST", "/v1/leases/" + std::to_string(carls_lease) + "/stop", nullptr, carl);
  ASSERT_EQ(stop.status, 200) << stop.body;

  // The ended lease, by id: its customer and its provider see it, nobody else does.
  json ended = Get("/v1/leases/" + std::to_string(carls_lease), carl);
  EXPECT_EQ(ended["status"], "ended");
  EXPECT_EQ(ended["end_reason"], "stopped");
  EXPECT_EQ(ended["hours_paid"], 1);
  EXPECT_EQ(ended["charged_usd"], "4.000000");
  json as_provider = Get("/v1/leases/" + std::to_string(carls_lease), provider);
  EXPECT_EQ(as_provider["earned_usd"], "3.600000");  // 4.00 less the 10% fee
  for (auto [id, token] :
       {std::pair{carls_lease, dora}, std::pair{doras_lease, carl}, std::pair{999'999LL, carl}}) {
    auto r = client_->Call("GET", "/v1/leases/" + std::to_string(id), nullptr, token);
    EXPECT_EQ(r.status, 404) << id << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["code"], "not_found");
  }
  // Commands on one's own closed record: 409 saying so; on someone else's: 404, as before.
  const std::string bid_path = "/v1/bids/" + std::to_string(filled["id"].get<long long>());
  auto again = client_->Call("DELETE", bid_path, nullptr, carl);
  EXPECT_EQ(again.status, 409) << again.body;
  EXPECT_NE(again.Json()["error"]["message"].get<std::string>().find("already filled"),
            std::string::npos)
      << again.body;
  EXPECT_EQ(client_->Call("DELETE", bid_path, nullptr, dora).status, 404);
  const std::string stop_path = "/v1/leases/" + std::to_string(carls_lease) + "/stop";
  auto twice = client_->Call("POST", stop_path, nullptr, carl);
  EXPECT_EQ(twice.status, 409) << twice.body;
  EXPECT_NE(twice.Json()["error"]["message"].get<std::string>().find("has already ended"),
            std::string::npos);
  EXPECT_EQ(client_->Call("POST", stop_path, nullptr, dora).status, 404);
  // A retry under one Idempotency-Key answers what the first try did: 409 both times (the 404 the
  // engine gives before the store lookup is not what is kept under the key).
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto keyed = client_->Call("POST", stop_path, nullptr, carl, "stop-ended-lease");
    EXPECT_EQ(keyed.status, 409) << "attempt " << attempt << ": " << keyed.body;
  }
  ASSERT_EQ(client_->Call("DELETE", "/v1/asks/" + std::to_string(ask), nullptr, provider).status,
            200);
  auto cancelled = client_->Call("DELETE", "/v1/asks/" + std::to_string(ask), nullptr, provider);
  EXPECT_EQ(cancelled.status, 409) << cancelled.body;
  EXPECT_EQ(client_->Call("DELETE", "/v1/asks/" + std::to_string(ask), nullptr, carl).status, 403);

  // The lists hold open and closed records alike, newest first.
  json bids = Get("/v1/bids", carl)["bids"];
  ASSERT_EQ(bids.size(), 2u) << bids.dump();
  EXPECT_EQ(bids[0]["status"], "cancelled");
  EXPECT_EQ(bids[0]["close_reason"], "no_match");
  EXPECT_EQ(bids[1]["status"], "filled");
  EXPECT_EQ(bids[1]["lease_id"], carls_lease);
  json leases = Get("/v1/leases", carl)["leases"];
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0]["status"], "ended");
  json provided = Get("/v1/leases?as=provider", provider)["leases"];
  ASSERT_EQ(provided.size(), 2u);
  EXPECT_EQ(provided[0]["id"], doras_lease);
  EXPECT_EQ(provided[0]["status"], "active");
  EXPECT_EQ(provided[1]["id"], carls_lease);
  json asks = Get("/v1/asks", provider)["asks"];
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0]["status"], "cancelled");
  // A payout paid leaves memory too; the provider still lists it, the admin cannot pay it twice.
  auto payout = client_->Call("POST", "/v1/payouts", {{"amount", "1.00"}}, provider);
  ASSERT_EQ(payout.status, 201) << payout.body;
  const std::string paid_path =
      "/v1/admin/payouts/" + std::to_string(payout.Json()["id"].get<long long>()) + "/paid";
  ASSERT_EQ(client_->Call("POST", paid_path, nullptr, admin_).status, 200);
  auto paid_twice = client_->Call("POST", paid_path, nullptr, admin_);
  EXPECT_EQ(paid_twice.status, 409) << paid_twice.body;
  json payouts = Get("/v1/payouts", provider)["payouts"];
  ASSERT_EQ(payouts.size(), 1u);
  EXPECT_EQ(payouts[0]["status"], "paid");
  json earnings = Get("/v1/earnings", provider);
  EXPECT_EQ(earnings["gross"], "6.000000");  // 2 GPUs + 1 GPU, one hour each, at 2.00
  EXPECT_EQ(earnings["paid_out"], "1.000000");
  EXPECT_EQ(earnings["lease_hours"], 2);
  json market = Get("/v1/admin/market", admin_);
  EXPECT_EQ(market["invariants"], "ok") << market.dump();
  EXPECT_EQ(market["active_leases"], 1);
}

// Pages while fills happen: every row once, no row twice, newest first; rows that arrive during
// the walk are on the first page of the next walk.
TEST_P(MarketHistoryTest, PagesStayExactWhileFillsHappen) {
  std::string provider = User("paula", {"provider"});
  std::string carl = User("carl", {"customer"});
  Credit("carl", "1000");
  long long machine = Machine(provider);
  Ask(provider, machine, "1.000");
  for (int i = 0; i < 40; ++i) {
    Bid(carl, {{"gpu", "H100 SXM"},
               {"gpus", 1},
               {"limit_usd_per_gpu_hour", "0.500"},
               {"time_in_force", "ioc"}});
  }
  std::atomic<bool> stop{false};
  std::atomic<int> placed{0};
  std::thread buyer([&] {
    HttpClient client(server_->port());
    while (!stop && placed < 200) {
      // Fills that end at once (stopped): bids, leases and trades keep arriving and closing.
      auto b = client.Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                           carl);
      if (b.status != 201) continue;
      ++placed;
      if (b.Json()["lease_id"].is_number()) {
        client.Call("POST",
                    "/v1/leases/" + std::to_string(b.Json()["lease_id"].get<long long>()) + "/stop",
                    nullptr, carl);
      }
    }
  });
  // The walk starts once fills are under way.
  for (int i = 0; i < 500 && placed.load() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (placed.load() == 0) {
    stop = true;
    buyer.join();
    FAIL() << "no fill happened";
  }
  std::vector<long long> seen;
  std::string path = "/v1/bids?limit=7";
  long long first = 0;
  for (int pages = 0;; ++pages) {
    if (pages >= 100) {
      stop = true;
      buyer.join();
      FAIL() << "the cursor does not advance";
    }
    json page = Get(path, carl);
    for (const auto& b : page["bids"]) seen.push_back(b["id"].get<long long>());
    if (pages == 0 && !seen.empty()) first = seen.front();
    if (page["next_cursor"].is_null()) break;
    path = "/v1/bids?limit=7&cursor=" + page["next_cursor"].get<std::string>();
  }
  stop = true;
  buyer.join();
  // Strictly descending (no repeat, nothing out of order) and nothing older than the first page's
  // newest missing: every id from it down is there.
  for (std::size_t i = 1; i < seen.size(); ++i) ASSERT_GT(seen[i - 1], seen[i]);
  json all = Get("/v1/bids?limit=500", carl)["bids"];
  std::vector<long long> expected;
  for (const auto& b : all) {
    if (b["id"].get<long long>() <= first) expected.push_back(b["id"].get<long long>());
  }
  EXPECT_EQ(seen, expected);
  EXPECT_GE(seen.size(), 40u);
}

// Start-up reads only open rows plus the totals: a clean restart and a SIGKILL both come back with
// the same lists, totals and trades, and with ids that continue after the closed records.
TEST_P(MarketHistoryTest, TotalsAndListsSurviveARestartAndASigkill) {
  std::string provider = User("paula", {"provider"});
  std::string carl = User("carl", {"customer"});
  Credit("carl", "500");
  long long machine = Machine(provider);
  Ask(provider, machine, "2.500");
  for (int i = 0; i < 6; ++i) {
    json b = Bid(carl, {{"gpu", "H100 SXM"}, {"gpus", 1 + i % 3}, {"market", true}});
    ASSERT_EQ(b["status"], "filled");
    if (i % 2 == 0) {
      ASSERT_EQ(client_
                    ->Call("POST",
                           "/v1/leases/" + std::to_string(b["lease_id"].get<long long>()) + "/stop",
                           nullptr, carl)
                    .status,
                200);
    }
  }
  Bid(carl, {{"gpu", "H100 SXM"},
             {"gpus", 1},
             {"limit_usd_per_gpu_hour", "1.000"},
             {"time_in_force", "gtc"}});  // rests
  Advance(3 * 3600);                      // the running leases are billed hours 2..4
  auto payout = client_->Call("POST", "/v1/payouts", {{"amount", "5.00"}}, provider);
  ASSERT_EQ(payout.status, 201) << payout.body;
  ASSERT_EQ(client_
                ->Call("POST",
                       "/v1/admin/payouts/" + std::to_string(payout.Json()["id"].get<long long>()) +
                           "/paid",
                       nullptr, admin_)
                .status,
            200);
  const json before = Everything(provider, carl);
  EXPECT_EQ(before["earnings"]["lease_hours"], 15);  // 6 first hours + 3 running leases x 3 more
  Restart();
  json after = Everything(provider, carl);
  EXPECT_EQ(after, before);
  server_->Kill();
  Start();
  after = Everything(provider, carl);
  EXPECT_EQ(after, before);
  // New ids continue after the closed records.
  json next = Bid(carl, {{"gpu", "H100 SXM"},
                         {"gpus", 1},
                         {"limit_usd_per_gpu_hour", "0.900"},
                         {"time_in_force", "ioc"}});
  EXPECT_GT(next["id"].get<long long>(), before["bids"][0]["id"].get<long long>());
  json market = Get("/v1/admin/market", admin_);
  EXPECT_EQ(market["invariants"], "ok") << market.dump();
  EXPECT_EQ(market["settlement"], "ok") << market.dump();
  EXPECT_EQ(market["resting_bids"], 1);
  EXPECT_EQ(market["active_leases"], 3);
}

INSTANTIATE_TEST_SUITE_P(Backends, MarketHistoryTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
