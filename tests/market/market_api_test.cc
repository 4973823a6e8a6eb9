// The spot exchange through HTTP: a real server with a manual clock on SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kPassword = kFixturePassword;

// `days` from now; far enough in a manual clock's future too (it starts at the real time).
std::string Later(int days) { return UtcTimeFromNow(std::chrono::hours(24 * days)); }

class MarketApiTest : public ServerFixture {
 protected:
  std::string Available(const std::string& token, const char* currency = "USD") {
    json wallets = Get("/v1/wallets", token);  // kept alive: the loop walks into it
    for (const auto& w : wallets["wallets"]) {
      if (w["currency"] == currency) return w["available"];
    }
    return "";
  }
  void ExpectBooksBalance() {
    json ledger = Get("/v1/admin/ledger", admin_);
    EXPECT_EQ(ledger["balanced"], true) << ledger.dump();
    EXPECT_EQ(ledger["invariants"], "ok");
    json market = Get("/v1/admin/market", admin_);
    EXPECT_EQ(market["invariants"], "ok") << market.dump();
    EXPECT_EQ(market["settlement"], "ok") << market.dump();
  }
};

// The issue's story: a provider lists a machine and an ask; a customer with a funded wallet buys
// 2 GPUs at market; the lease appears, an hour is charged and the provider credited minus the fee;
// advancing the clock bills each hour until the wallet runs dry and the GPUs return to the book;
// the books balance throughout, also across a restart.
TEST_P(MarketApiTest, MarketBuyIsBilledHourlyUntilTheWalletRunsDry) {
  std::string provider = User("paula", {"provider"});
  std::string customer = User("carl", {"customer"});
  auto machine = client_->Call("POST", "/v1/machines",
                               {{"gpu", "H100 SXM"},
                                {"gpus", 8},
                                {"region", "IAD-1"},
                                {"vcpus", 96},
                                {"ram_gb", 1024},
                                {"disk_gb", 8000}},
                               provider);
  ASSERT_EQ(machine.status, 201) << machine.body;
  EXPECT_EQ(machine.Json()["gpus_free"], 8);
  auto ask = client_->Call("POST", "/v1/asks",
                           {{"machine_id", machine.Json()["id"]},
                            {"price_usd_per_gpu_hour", "2.880"},
                            {"min_gpus", 1},
                            {"available_until", Later(30)}},
                           provider);
  ASSERT_EQ(ask.status, 201) << ask.body;
  EXPECT_EQ(ask.Json()["price_usd_per_gpu_hour"], "2.880");
  EXPECT_EQ(ask.Json()["gpus_offered"], 8);
  json markets = Get("/v1/markets");
  bool found = false;
  for (const auto& m : markets["markets"]) {
    if (m["gpu"] == "H100 SXM") {
      found = true;
      EXPECT_EQ(m["best_ask_usd_per_gpu_hour"], "2.880");
      EXPECT_EQ(m["gpus_on_offer"], 8);
    }
  }
  EXPECT_TRUE(found) << markets.dump();

  Credit("carl", "20");
  auto bid = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 2}, {"market", true}},
                           customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  json b = bid.Json();
  EXPECT_EQ(b["status"], "filled");
  ASSERT_TRUE(b["lease_id"].is_number());
  EXPECT_EQ(b["lease"]["price_usd_per_gpu_hour"], "2.880");
  EXPECT_EQ(b["lease"]["hourly_usd"], "5.760000");
  EXPECT_EQ(b["lease"]["gpu_indices"], json::array({0, 1}));
  EXPECT_EQ(Available(customer), "14.240000");
  json earnings = Get("/v1/earnings", provider);
  EXPECT_EQ(earnings["gross"], "5.760000");
  EXPECT_EQ(earnings["fees"], "0.576000");
  EXPECT_EQ(earnings["net"], "5.184000");
  EXPECT_EQ(earnings["available"], "5.184000");
  json leases = Get("/v1/leases", customer);
  ASSERT_EQ(leases["leases"].size(), 1u);
  EXPECT_EQ(leases["leases"][0]["status"], "active");
  json book = Get("/v1/markets/h100-sxm/book");
  EXPECT_EQ(book["asks"][0]["gpus"], 6);
  json trades = Get("/v1/markets/H100%20SXM/trades");
  ASSERT_EQ(trades["trades"].size(), 1u);
  EXPECT_EQ(trades["trades"][0]["gpus"], 2);
  ExpectBooksBalance();

  Advance(3600);  // hour 2
  EXPECT_EQ(Available(customer), "8.480000");
  Restart();
  admin_ = LogInAdmin(*client_);
  EXPECT_EQ(Available(customer), "8.480000");
  Advance(3600);  // hour 3
  EXPECT_EQ(Available(customer), "2.720000");
  Advance(7 * 24 * 3600);  // hour 4 cannot be paid: the lease ends at that boundary
  EXPECT_EQ(Available(customer), "2.720000");
  json lease = Get("/v1/leases/" + std::to_string(b["lease_id"].get<long long>()), customer);
  EXPECT_EQ(lease["status"], "ended");
  EXPECT_EQ(lease["end_reason"], "unpaid");
  EXPECT_EQ(lease["hours_paid"], 3);
  EXPECT_EQ(lease["charged_usd"], "17.280000");
  EXPECT_EQ(Get("/v1/markets/h100-sxm/book")["asks"][0]["gpus"], 8);  // back on the book
  earnings = Get("/v1/earnings", provider);
  EXPECT_EQ(earnings["net"], "15.552000");
  EXPECT_EQ(earnings["gpu_hours"], 6);
  // The provider asks for a payout to one of its payout destinations; an admin marks it paid.
  auto destination = client_->Call("POST", "/v1/payout-destinations",
                                   {{"kind", "btc"},
                                    {"address", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"},
                                    {"label", "cold"}},
                                   provider);
  ASSERT_EQ(destination.status, 201) << destination.body;
  auto payout =
      client_->Call("POST", "/v1/payouts",
                    {{"amount", "15.00"}, {"destination_id", destination.Json()["id"]}}, provider);
  ASSERT_EQ(payout.status, 201) << payout.body;
  EXPECT_EQ(payout.Json()["status"], "pending");
  EXPECT_EQ(payout.Json()["destination"]["address"], "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4");
  EXPECT_EQ(Get("/v1/earnings", provider)["available"], "0.552000");
  // In the provider's audit log (docs/api.md, "Audit log").
  json audit = Get("/v1/audit-log?limit=1", provider)["events"][0];
  EXPECT_EQ(audit["kind"], "payout_requested");
  EXPECT_EQ(audit["detail"]["payout_id"], payout.Json()["id"]);
  EXPECT_EQ(audit["detail"]["amount"], "15.000000");
  json pending = Get("/v1/admin/payouts", admin_);
  ASSERT_EQ(pending["payouts"].size(), 1u);
  EXPECT_EQ(pending["payouts"][0]["username"], "paula");
  EXPECT_EQ(pending["payouts"][0]["destination"]["label"], "cold");  // the admin sees where
  auto paid = client_->Call(
      "POST", "/v1/admin/payouts/" + std::to_string(payout.Json()["id"].get<long long>()) + "/paid",
      nullptr, admin_);
  ASSERT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(paid.Json()["status"], "paid");
  EXPECT_EQ(Get("/v1/earnings", provider)["paid_out"], "15.000000");
  ExpectBooksBalance();
}

// A EUR wallet pays each lease-hour at that hour's EUR/USD rate, so the rate cannot be deleted
// while a lease (or a resting bid) converts through it: 409 saying why; a new rate is fine; once
// nothing open pays from EUR the delete goes through. The lease never ends "unpaid" for it.
TEST_P(MarketApiTest, AnFxRateRunningLeasesConvertThroughIsNotDeleted) {
  std::string provider = User("paula", {"provider"});
  std::string customer = User("carl", {"customer"});
  auto rate = client_->Call("PUT", "/v1/admin/fx-rates/EUR/USD",
                            {{"rate", "1.08"}, {"spread_bps", 50}}, admin_);
  ASSERT_EQ(rate.status, 200) << rate.body;
  Credit("carl", "100", "EUR");
  auto m = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 2), provider);
  ASSERT_EQ(m.status, 201) << m.body;
  auto ask =
      client_->Call("POST", "/v1/asks", AskJson(m.Json()["id"], "2.880", Later(10)), provider);
  ASSERT_EQ(ask.status, 201) << ask.body;
  auto bid = client_->Call(
      "POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 2}, {"market", true}, {"currency", "EUR"}},
      customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  ASSERT_EQ(bid.Json()["status"], "filled") << bid.body;
  const std::string lease_path =
      "/v1/leases/" + std::to_string(bid.Json()["lease_id"].get<long long>());
  for (const char* pair : {"EUR/USD", "USD/EUR"}) {
    auto refused =
        client_->Call("DELETE", std::string("/v1/admin/fx-rates/") + pair, nullptr, admin_);
    EXPECT_EQ(refused.status, 409) << pair << ": " << refused.body;
    EXPECT_EQ(refused.Json()["error"]["code"], "failed_precondition") << refused.body;
    std::string message = refused.Json()["error"]["message"];
    EXPECT_NE(message.find("the EUR/USD rate cannot be removed: EUR wallets pay for 1 running "
                           "lease"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("set a new rate instead"), std::string::npos) << message;
  }
  EXPECT_EQ(Get("/v1/fx-rates", customer)["rates"].size(), 1u);
  Advance(3600);  // hour 2 converts at the rate that is still there
  json lease = Get(lease_path, customer);
  EXPECT_EQ(lease["status"], "active") << lease.dump();
  EXPECT_EQ(lease["hours_paid"], 2);
  // Replacing the rate is always allowed; hour 3 converts at the new one.
  rate = client_->Call("PUT", "/v1/admin/fx-rates/USD/EUR", {{"rate", "0.9"}, {"spread_bps", 0}},
                       admin_);
  ASSERT_EQ(rate.status, 200) << rate.body;
  Advance(3600);
  EXPECT_EQ(Get(lease_path, customer)["hours_paid"], 3);
  auto stop = client_->Call("POST", lease_path + "/stop", nullptr, customer);
  ASSERT_EQ(stop.status, 200) << stop.body;
  EXPECT_EQ(stop.Json()["end_reason"], "stopped");
  auto deleted = client_->Call("DELETE", "/v1/admin/fx-rates/EUR/USD", nullptr, admin_);
  EXPECT_EQ(deleted.status, 204) << deleted.body;
  EXPECT_EQ(Get("/v1/fx-rates", customer)["rates"].size(), 0u);
  // Without the rate a EUR bid cannot pay its first hour: 409, nothing happens.
  auto no_rate = client_->Call(
      "POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"currency", "EUR"}},
      customer);
  EXPECT_EQ(no_rate.status, 409) << no_rate.body;
  ExpectBooksBalance();
}

TEST_P(MarketApiTest, RestingBidsHoldAnHourAndFillWhenAnAskArrives) {
  std::string provider = User("paula", {"provider"});
  std::string customer = User("carl", {"customer"});
  Credit("carl", "50");
  auto bid = client_->Call("POST", "/v1/bids",
                           {{"gpu", "A100 SXM"},
                            {"gpus", 4},
                            {"region", "DFW-1"},
                            {"limit_usd_per_gpu_hour", "2.000"},
                            {"time_in_force", "gtc"}},
                           customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  EXPECT_EQ(bid.Json()["status"], "resting");
  EXPECT_EQ(bid.Json()["hold"], "8.000000");
  EXPECT_EQ(Available(customer), "42.000000");
  json book = Get("/v1/markets/A100%20SXM/book");
  ASSERT_EQ(book["bids"].size(), 1u);
  EXPECT_EQ(book["bids"][0]["price_usd_per_gpu_hour"], "2.000");
  EXPECT_EQ(book["bids"][0]["gpus"], 4);
  // A machine in another region does not fill it; one in DFW-1 at a lower price does, at the bid's
  // price (the resting order's).
  auto iad = client_->Call("POST", "/v1/machines", MachineJson("A100 SXM", 8, "IAD-1"), provider);
  auto ask1 =
      client_->Call("POST", "/v1/asks", AskJson(iad.Json()["id"], "1.500", Later(3)), provider);
  ASSERT_EQ(ask1.status, 201) << ask1.body;
  EXPECT_TRUE(ask1.Json()["filled_lease_ids"].empty());
  auto dfw = client_->Call("POST", "/v1/machines", MachineJson("a100-sxm", 8, "dfw-1"), provider);
  auto ask2 =
      client_->Call("POST", "/v1/asks", AskJson(dfw.Json()["id"], "1.800", Later(3)), provider);
  ASSERT_EQ(ask2.status, 201) << ask2.body;
  ASSERT_EQ(ask2.Json()["filled_lease_ids"].size(), 1u);
  json bids = Get("/v1/bids", customer);
  EXPECT_EQ(bids["bids"][0]["status"], "filled");
  json lease =
      Get("/v1/leases/" + std::to_string(bids["bids"][0]["lease_id"].get<long long>()), customer);
  EXPECT_EQ(lease["price_usd_per_gpu_hour"], "2.000");
  EXPECT_EQ(Available(customer), "42.000000");  // the hold became the first hour
  // The customer stops it; the paid hour is not refunded; the GPUs go back on the book.
  auto stop =
      client_->Call("POST", "/v1/leases/" + std::to_string(lease["id"].get<long long>()) + "/stop",
                    nullptr, customer);
  ASSERT_EQ(stop.status, 200) << stop.body;
  EXPECT_EQ(stop.Json()["end_reason"], "stopped");
  EXPECT_EQ(Available(customer), "42.000000");
  EXPECT_EQ(Get("/v1/markets/a100-sxm/book")["asks"][0]["gpus"], 8);
  // A second resting bid, cancelled: the hold is released.
  auto again = client_->Call(
      "POST", "/v1/bids", {{"gpu", "A100 SXM"}, {"gpus", 1}, {"limit_usd_per_gpu_hour", "1.000"}},
      customer);
  ASSERT_EQ(again.status, 201);
  EXPECT_EQ(again.Json()["status"], "resting");
  EXPECT_EQ(Available(customer), "41.000000");
  auto cancel =
      client_->Call("DELETE", "/v1/bids/" + std::to_string(again.Json()["id"].get<long long>()),
                    nullptr, customer);
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(cancel.Json()["status"], "cancelled");
  EXPECT_EQ(Available(customer), "42.000000");
  ExpectBooksBalance();
}

// An account that is provider and customer used to buy its own ask: a trade and a last price for
// the cost of the fee (wash trading). Its bids pass over its own asks and its asks over its own
// resting bids, also after a restart; other accounts trade with both.
TEST_P(MarketApiTest, AnAccountThatSellsAndBuysNeverTradesWithItself) {
  std::string wash = User("walt", {"provider", "customer"});
  std::string other = User("olga", {"provider"});
  std::string carl = User("carl", {"customer"});
  Credit("walt", "100");
  Credit("carl", "100");
  auto own = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), wash);
  ASSERT_EQ(own.status, 201) << own.body;
  auto own_ask =
      client_->Call("POST", "/v1/asks", AskJson(own.Json()["id"], "2.000", Later(5)), wash);
  ASSERT_EQ(own_ask.status, 201) << own_ask.body;
  auto buy_own =
      client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 2}, {"market", true}}, wash);
  ASSERT_EQ(buy_own.status, 201) << buy_own.body;
  EXPECT_EQ(buy_own.Json()["status"], "cancelled") << buy_own.body;
  EXPECT_EQ(buy_own.Json()["close_reason"], "no_match");
  EXPECT_EQ(Available(wash), "100.000000");
  for (const auto& m : Get("/v1/markets")["markets"]) {
    if (m["gpu"] == "H100 SXM") {
      EXPECT_TRUE(m["last_trade"].is_null()) << m.dump();
    }
  }
  // Another account's dearer ask is taken instead of the cheaper own one.
  auto theirs = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), other);
  auto their_ask =
      client_->Call("POST", "/v1/asks", AskJson(theirs.Json()["id"], "2.500", Later(5)), other);
  ASSERT_EQ(their_ask.status, 201) << their_ask.body;
  auto elsewhere =
      client_->Call("POST", "/v1/bids",
                    {{"gpu", "H100 SXM"}, {"gpus", 2}, {"limit_usd_per_gpu_hour", "3.000"}}, wash);
  ASSERT_EQ(elsewhere.status, 201) << elsewhere.body;
  ASSERT_EQ(elsewhere.Json()["status"], "filled");
  json lease =
      Get("/v1/leases/" + std::to_string(elsewhere.Json()["lease_id"].get<long long>()), wash);
  EXPECT_EQ(lease["price_usd_per_gpu_hour"], "2.500");
  EXPECT_EQ(lease["ask_id"], their_ask.Json()["id"]);
  // A resting bid above its own ask stays resting across a restart and a new own ask...
  auto resting = client_->Call("POST", "/v1/bids",
                               {{"gpu", "H100 SXM"},
                                {"gpus", 4},
                                {"limit_usd_per_gpu_hour", "2.400"},
                                {"time_in_force", "gtc"}},
                               wash);
  ASSERT_EQ(resting.status, 201) << resting.body;
  EXPECT_EQ(resting.Json()["status"], "resting");
  Restart();
  wash = LogIn(*client_, "walt", kPassword);
  carl = LogIn(*client_, "carl", kPassword);
  other = LogIn(*client_, "olga", kPassword);
  auto second = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), wash);
  auto second_ask =
      client_->Call("POST", "/v1/asks", AskJson(second.Json()["id"], "2.100", Later(5)), wash);
  ASSERT_EQ(second_ask.status, 201) << second_ask.body;
  EXPECT_TRUE(second_ask.Json()["filled_lease_ids"].empty()) << second_ask.body;
  json bids = Get("/v1/bids", wash);
  EXPECT_EQ(bids["bids"][0]["status"], "resting") << bids.dump();
  // ...while another account's orders trade with both sides.
  auto carls =
      client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, carl);
  ASSERT_EQ(carls.Json()["status"], "filled") << carls.body;
  auto third = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), other);
  auto third_ask =
      client_->Call("POST", "/v1/asks", AskJson(third.Json()["id"], "2.300", Later(5)), other);
  ASSERT_EQ(third_ask.Json()["filled_lease_ids"].size(), 1u) << third_ask.body;
  // No lease has the same account on both sides.
  for (const auto& l : Get("/v1/leases", wash)["leases"]) {
    EXPECT_NE(l["machine_id"], own.Json()["id"]) << l.dump();
    EXPECT_NE(l["machine_id"], second.Json()["id"]) << l.dump();
  }
  ExpectBooksBalance();
}

// History lists page with ?cursor= (keyset: the next_cursor of the page before): every row once,
// newest first, and a row that arrives between two pages neither shifts nor repeats the next one;
// a bad cursor is a 400 naming the field.
TEST_P(MarketApiTest, HistoryListsPageWithAKeysetCursor) {
  std::string customer = User("kim", {"customer"});
  Credit("kim", "50");
  std::vector<long long> placed;
  auto place = [&] {
    auto bid = client_->Call("POST", "/v1/bids",
                             {{"gpu", "A100 SXM"},
                              {"gpus", 1},
                              {"limit_usd_per_gpu_hour", "1.000"},
                              {"time_in_force", "ioc"}},
                             customer);
    ASSERT_EQ(bid.status, 201) << bid.body;
    placed.push_back(bid.Json()["id"].get<long long>());
  };
  for (int i = 0; i < 7; ++i) place();
  std::vector<long long> seen;
  std::string path = "/v1/bids?limit=3";
  int pages = 0;
  while (true) {
    json page = Get(path, customer);
    ++pages;
    for (const auto& b : page["bids"]) seen.push_back(b["id"].get<long long>());
    if (pages == 1) place();  // newer than every cursor: on no later page
    if (page["next_cursor"].is_null()) break;
    path = "/v1/bids?limit=3&cursor=" + page["next_cursor"].get<std::string>();
    ASSERT_LT(pages, 10) << "the cursor does not advance";
  }
  EXPECT_EQ(pages, 3);
  std::vector<long long> first_seven(placed.rbegin() + 1, placed.rend());
  EXPECT_EQ(seen, first_seven);
  EXPECT_EQ(Get("/v1/bids?limit=1", customer)["bids"][0]["id"].get<long long>(), placed.back());
  for (const char* bad : {"0", "-4", "abc", "1.5"}) {
    auto r = client_->Call("GET", std::string("/v1/bids?cursor=") + bad, nullptr, customer);
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(r.Json()["error"]["field"], "cursor") << r.body;
  }
  // Leases and trades take the same cursor.
  json leases = Get("/v1/leases?limit=1", customer);
  EXPECT_TRUE(leases["leases"].empty());
  EXPECT_TRUE(leases["next_cursor"].is_null());
  json trades = Get("/v1/markets/A100%20SXM/trades?limit=5&cursor=1");
  EXPECT_TRUE(trades["trades"].empty());
  EXPECT_TRUE(trades["next_cursor"].is_null());
  EXPECT_EQ(client_->Call("GET", "/v1/markets/A100%20SXM/trades?cursor=x").status, 400);
}

TEST_P(MarketApiTest, BadCallsGetClearErrors) {
  std::string provider = User("paula", {"provider"});
  std::string customer = User("carl", {"customer"});
  auto machine = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 4), provider);
  ASSERT_EQ(machine.status, 201);
  long long machine_id = machine.Json()["id"];
  struct Case {
    const char* name;
    const char* method;
    std::string path;
    json body;
    std::string token;
    int status;
    const char* code;
  };
  const Case cases[] = {
      {"no token", "POST", "/v1/bids", {{"gpu", "H100 SXM"}}, "", 401, "unauthenticated"},
      {"customer lists a machine",
       "POST",
       "/v1/machines",
       {{"gpu", "H100 SXM"},
        {"gpus", 1},
        {"region", "IAD-1"},
        {"vcpus", 1},
        {"ram_gb", 1},
        {"disk_gb", 1}},
       customer,
       403,
       "permission_denied"},
      {"unknown GPU",
       "POST",
       "/v1/machines",
       {{"gpu", "Voodoo 2"},
        {"gpus", 1},
        {"region", "IAD-1"},
        {"vcpus", 1},
        {"ram_gb", 1},
        {"disk_gb", 1}},
       provider,
       400,
       "invalid_argument"},
      {"unknown region",
       "POST",
       "/v1/machines",
       {{"gpu", "H100 SXM"},
        {"gpus", 1},
        {"region", "MARS-1"},
        {"vcpus", 1},
        {"ram_gb", 1},
        {"disk_gb", 1}},
       provider,
       400,
       "invalid_argument"},
      {"17 GPUs",
       "POST",
       "/v1/machines",
       {{"gpu", "H100 SXM"},
        {"gpus", 17},
        {"region", "IAD-1"},
        {"vcpus", 1},
        {"ram_gb", 1},
        {"disk_gb", 1}},
       provider,
       400,
       "invalid_argument"},
      {"price as a number", "POST", "/v1/asks", AskJson(machine_id, 2.88, Later(1)), provider, 400,
       "invalid_argument"},
      {"price off the tick", "POST", "/v1/asks", AskJson(machine_id, "2.8805", Later(1)), provider,
       400, "invalid_argument"},
      {"bad time", "POST", "/v1/asks", AskJson(machine_id, "2.880", "tomorrow"), provider, 400,
       "invalid_argument"},
      {"someone else's machine", "POST", "/v1/asks", AskJson(machine_id + 1000, "2.880", Later(1)),
       provider, 404, "not_found"},
      {"unknown field",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"colour", "red"}},
       customer,
       400,
       "invalid_argument"},
      {"neither limit nor market",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}},
       customer,
       400,
       "invalid_argument"},
      {"market and gtc",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"time_in_force", "gtc"}},
       customer,
       400,
       "invalid_argument"},
      {"bad time in force",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"time_in_force", "fok"}},
       customer,
       400,
       "invalid_argument"},
      {"bid without funds",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"limit_usd_per_gpu_hour", "3.000"}},
       customer,
       402,
       "insufficient_funds"},
      {"cancel an unknown bid", "DELETE", "/v1/bids/999", nullptr, customer, 404, "not_found"},
      {"cancel a bid called x", "DELETE", "/v1/bids/x", nullptr, customer, 404, "not_found"},
      {"stop an unknown lease", "POST", "/v1/leases/5/stop", nullptr, customer, 404, "not_found"},
      {"unknown market book", "GET", "/v1/markets/nope/book", nullptr, "", 404, "not_found"},
      {"book levels out of range", "GET", "/v1/markets/H100%20SXM/book?levels=0", nullptr, "", 400,
       "invalid_argument"},
      {"payout beyond earnings",
       "POST",
       "/v1/payouts",
       {{"amount", "5.00"}},
       provider,
       402,
       "insufficient_funds"},
      {"payout as a number",
       "POST",
       "/v1/payouts",
       {{"amount", 5}},
       provider,
       400,
       "invalid_argument"},
      {"payout paid by a provider", "POST", "/v1/admin/payouts/1/paid", nullptr, provider, 403,
       "permission_denied"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call(c.method, c.path, c.body, c.token);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["code"], c.code) << c.name << ": " << r.body;
    EXPECT_FALSE(r.Json()["error"]["message"].get<std::string>().empty()) << c.name;
  }
  auto ask = client_->Call("POST", "/v1/asks", AskJson(machine_id, "2.880", Later(1)), provider);
  ASSERT_EQ(ask.status, 201);
  auto twice = client_->Call("POST", "/v1/asks", AskJson(machine_id, "2.000", Later(1)), provider);
  EXPECT_EQ(twice.status, 409) << twice.body;
  auto cancel = client_->Call(
      "DELETE", "/v1/asks/" + std::to_string(ask.Json()["id"].get<long long>()), nullptr, provider);
  EXPECT_EQ(cancel.status, 200);
  EXPECT_EQ(cancel.Json()["status"], "cancelled");
  // The server is healthy and nothing above moved money.
  ExpectBooksBalance();
}

// Every refusal of a bad field names it ("field"), a body where none belongs is refused rather than
// ignored, list endpoints honour ?limit=, and the fit endpoints take JSON only, like every POST.
TEST_P(MarketApiTest, BadFieldsAreNamedAndNothingIsSilentlyIgnored) {
  std::string provider = User("pia", {"provider"});
  std::string customer = User("cleo", {"customer"});
  Credit("cleo", "100");
  auto machine = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 2), provider);
  ASSERT_EQ(machine.status, 201) << machine.body;
  long long machine_id = machine.Json()["id"];
  auto machine_with = [](json patch) {
    json m = MachineJson("H100 SXM", 2);
    m.merge_patch(patch);
    return m;
  };
  struct Case {
    const char* path;
    json body;
    std::string token;
    int status;
    const char* field;
  };
  const Case cases[] = {
      {"/v1/machines", machine_with({{"gpu", "Voodoo 2"}}), provider, 400, "gpu"},
      {"/v1/machines", machine_with({{"region", "MARS-1"}}), provider, 400, "region"},
      {"/v1/asks",
       {{"machine_id", machine_id},
        {"price_usd_per_gpu_hour", "2.000"},
        {"min_gpus", 3},
        {"available_until", Later(1)}},
       provider,
       400,
       "min_gpus"},
      {"/v1/asks", AskJson(machine_id, "2.000", Later(0)), provider, 400, "available_until"},
      {"/v1/asks", AskJson(machine_id, "2.000", Later(400)), provider, 400, "available_until"},
      {"/v1/payouts", {{"amount", "0"}}, provider, 400, "amount"},
      {"/v1/payouts", {{"amount", "0.50"}}, provider, 400, "amount"},
      {"/v1/payouts", {{"amount", "-5"}}, provider, 400, "amount"},
      {"/v1/payouts", {{"amount", "1.0000001"}}, provider, 400, "amount"},
      {"/v1/payouts", {{"amount", "5"}, {"currency", "EUR"}}, provider, 400, "currency"},
      {"/v1/admin/credits",
       {{"username", "cleo"}, {"amount", "1"}, {"currency", "USD"}, {"reason", " "}},
       admin_,
       400,
       "reason"},
      {"/v1/fit",
       {{"model", "70b"}, {"workload", "infer"}, {"prices", "cheap"}},
       "",
       400,
       "prices"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call("POST", c.path, c.body, c.token);
    EXPECT_EQ(r.status, c.status) << c.path << " " << c.body.dump() << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field)
        << c.path << " " << c.body.dump() << ": " << r.body;
  }
  auto ask = client_->Call("POST", "/v1/asks", AskJson(machine_id, "2.000", Later(2)), provider);
  ASSERT_EQ(ask.status, 201) << ask.body;
  auto bid = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                           customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  std::string stop =
      "/v1/leases/" + std::to_string(bid.Json()["lease_id"].get<long long>()) + "/stop";
  // A body on an endpoint that takes none is a mistake the caller must hear about.
  auto wrong = client_->Call("POST", stop, {{"refund", true}}, customer);
  EXPECT_EQ(wrong.status, 400) << wrong.body;
  EXPECT_EQ(wrong.Json()["error"]["field"], "refund") << wrong.body;
  EXPECT_EQ(Get("/v1/leases", customer)["leases"][0]["status"], "active");
  auto empty = client_->Call("POST", stop, json::object(), customer);
  EXPECT_EQ(empty.status, 200) << empty.body;
  EXPECT_EQ(empty.Json()["status"], "ended");
  // Lists honour ?limit= (1..500) and refuse nonsense.
  for (int i = 0; i < 3; ++i) {
    auto b = client_->Call("POST", "/v1/bids",
                           {{"gpu", "A100 SXM"}, {"gpus", 1}, {"limit_usd_per_gpu_hour", "0.010"}},
                           customer);
    ASSERT_EQ(b.status, 201) << b.body;
  }
  EXPECT_EQ(Get("/v1/bids?limit=2", customer)["bids"].size(), 2u);
  EXPECT_EQ(Get("/v1/bids", customer)["bids"].size(), 4u);
  EXPECT_EQ(Get("/v1/leases?as=customer&limit=1", customer)["leases"].size(), 1u);
  for (std::string path : {"/v1/bids?limit=0", "/v1/bids?limit=501", "/v1/asks?limit=x",
                           "/v1/leases?limit=-1", "/v1/machines?limit=0", "/v1/payouts?limit=0"}) {
    auto r = client_->Call(
        "GET", path, nullptr,
        path.find("bids") != std::string::npos || path.find("leases") != std::string::npos
            ? customer
            : provider);
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
  }
  // The fit endpoints take JSON like every other POST (docs/api.md, Conventions).
  for (const char* path : {"/v1/fit", "/v1/size"}) {
    auto r = client_->Send("POST", path, R"({"model":"70b","workload":"infer","prices":"market"})",
                           {{"Content-Type", "text/plain"}});
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
  }
  ExpectBooksBalance();
}

TEST_P(MarketApiTest, FitOnLivePricesThroughTheApiAndTheCli) {
  std::string provider = User("paula", {"provider"});
  auto offer = [&](const char* gpu, int gpus, const char* price) {
    auto m = client_->Call("POST", "/v1/machines", MachineJson(gpu, gpus), provider);
    ASSERT_EQ(m.status, 201) << m.body;
    auto a = client_->Call("POST", "/v1/asks", AskJson(m.Json()["id"], price, Later(10)), provider);
    ASSERT_EQ(a.status, 201) << a.body;
  };
  offer("H100 SXM", 8, "2.700");
  offer("A100 SXM", 4, "1.500");
  json offers = Get("/v1/offers");
  ASSERT_EQ(offers["offers"].size(), 2u);
  EXPECT_EQ(offers["offers"][0]["gpu"], "A100 SXM");  // cheapest first
  // 70B at FP8 needs an FP8 card: the A100 is cheaper but has none.
  auto fit = client_->Call(
      "POST", "/v1/fit",
      {{"model", "70b"}, {"workload", "infer"}, {"precision", "fp8"}, {"prices", "market"}});
  ASSERT_EQ(fit.status, 200) << fit.body;
  EXPECT_EQ(fit.Json()["best"]["gpu"], "H100 SXM");
  EXPECT_EQ(fit.Json()["best"]["exact"]["hourly_usd"], "2.700000");
  // Money as the rest of the market API writes it: the price per GPU-hour as GET /v1/offers quotes
  // it (three decimals), amounts with six; the documented numbers stay beside them.
  json best = fit.Json()["best"];
  json listed = offers["offers"][1];
  EXPECT_EQ(listed["price_usd_per_gpu_hour"], "2.700");
  EXPECT_EQ(best["exact"]["price_usd_per_gpu_hour"], listed["price_usd_per_gpu_hour"]);
  EXPECT_EQ(best["exact"]["monthly_equivalent_usd"], "1944.000000");
  EXPECT_TRUE(best["price_usd_per_gpu_hour"].is_number()) << best;
  EXPECT_TRUE(best["hourly_usd"].is_number()) << best;
  // An unknown card is a 400 naming the field, like every other bad field of the request.
  for (const char* prices : {"market", "list"}) {
    auto unknown = client_->Call(
        "POST", "/v1/fit",
        {{"model", "7b"}, {"workload", "infer"}, {"gpu", "H100"}, {"prices", prices}});
    EXPECT_EQ(unknown.status, 400) << prices << ": " << unknown.body;
    EXPECT_EQ(unknown.Json()["error"]["field"], "gpu") << prices << ": " << unknown.body;
  }
  auto bf16 = client_->Call("POST", "/v1/fit",
                            {{"model", "7b"}, {"workload", "infer"}, {"prices", "market"}});
  EXPECT_EQ(bf16.Json()["best"]["gpu"], "A100 SXM");
  auto list = client_->Call("POST", "/v1/fit", {{"model", "7b"}, {"workload", "infer"}});
  EXPECT_EQ(list.status, 200);
  EXPECT_TRUE(list.Json()["best"].contains("monthly_usd"));  // list prices as before
  auto bad = client_->Call("POST", "/v1/fit",
                           {{"model", "7b"}, {"workload", "infer"}, {"prices", "cheapest"}});
  EXPECT_EQ(bad.status, 400);
  // The CLI reads the same book.
  std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
  auto cli = RunGpuhub({"fit", "--model", "70b", "--workload", "infer", "--precision", "fp8",
                        "--prices", "market", "--server", url, "--json"},
                       "");
  ASSERT_EQ(cli.exit_code, 0) << cli.output;
  json out = json::parse(cli.output, nullptr, false);
  ASSERT_FALSE(out.is_discarded()) << cli.output;
  EXPECT_EQ(out["best"]["gpu"], "H100 SXM");
  EXPECT_EQ(out["best"]["ask_id"], fit.Json()["best"]["ask_id"]);
  EXPECT_EQ(out["best"]["exact"], fit.Json()["best"]["exact"]);
  EXPECT_EQ(out["best"]["exact"]["price_usd_per_gpu_hour"], "2.700");
  auto cli_unknown = RunGpuhub({"fit", "--model", "7b", "--workload", "infer", "--gpu", "H100",
                                "--prices", "market", "--server", url},
                               "");
  EXPECT_EQ(cli_unknown.exit_code, 2) << cli_unknown.output;
  EXPECT_NE(cli_unknown.output.find("unknown spot GPU 'H100'"), std::string::npos)
      << cli_unknown.output;
  auto text = RunGpuhub(
      {"fit", "--model", "7b", "--workload", "infer", "--prices", "market", "--server", url}, "");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("best: A100 SXM"), std::string::npos) << text.output;
  auto down = RunGpuhub({"fit", "--model", "7b", "--workload", "infer", "--prices", "market",
                         "--server", "http://127.0.0.1:1"},
                        "");
  EXPECT_EQ(down.exit_code, 1) << down.output;
  EXPECT_NE(down.output.find("cannot reach"), std::string::npos) << down.output;
}

// The production default (no --simulated-hosts): a machine listed without an agent is held with
// the reason, its ask offers nothing, a market bid finds nothing and no money moves.
// One server of its own (SQLite) with `options`, an admin, provider paula with a 1-GPU machine
// listed, and customer carl with 10 USD.
struct OneListedMachine {
  explicit OneListedMachine(ServerOptions opts) : options(std::move(opts)) {
    options.db = FreshDatabaseUrl("sqlite", dir);
    auto r = CreateAdmin(dir, options);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    server = std::make_unique<ServerProcess>(dir, options);
    started = server->Start();
    EXPECT_TRUE(started) << server->Log();
    if (!started) return;
    client = std::make_unique<HttpClient>(server->port());
    admin = LogInAdmin(*client);
    provider = SignUpAndLogIn(*client, "paula", kPassword, {"provider"});
    customer = SignUpAndLogIn(*client, "carl", kPassword);
    client->Call("POST", "/v1/admin/credits",
                 {{"username", "carl"}, {"amount", "10"}, {"currency", "USD"}, {"reason", "t"}},
                 admin);
    machine = client->Call("POST", "/v1/machines",
                           {{"gpu", "H100 SXM"},
                            {"gpus", 1},
                            {"region", "IAD-1"},
                            {"vcpus", 1},
                            {"ram_gb", 1},
                            {"disk_gb", 1}},
                           provider);
  }
  TempDir dir;
  ServerOptions options;
  std::unique_ptr<ServerProcess> server;
  bool started = false;
  std::unique_ptr<HttpClient> client;
  std::string admin, provider, customer;
  HttpResponse machine;
};

TEST(MarketHostTest, NothingIsSoldWithoutAnAgent) {
  ServerOptions options;
  options.simulated_hosts = false;
  OneListedMachine w(options);
  ASSERT_TRUE(w.started);
  HttpClient& client = *w.client;
  const std::string& provider = w.provider;
  const std::string& customer = w.customer;
  auto& m = w.machine;
  ASSERT_EQ(m.status, 201) << m.body;
  EXPECT_NE(m.Json()["hold_reason"].get<std::string>().find("no host agent runs this machine"),
            std::string::npos)
      << m.body;
  EXPECT_EQ(m.Json()["agent"]["status"], "none");
  auto a = client.Call("POST", "/v1/asks", AskJson(m.Json()["id"], "4.000", Later(2)), provider);
  ASSERT_EQ(a.status, 201) << a.body;
  EXPECT_EQ(a.Json()["gpus_offered"], 0) << a.body;
  auto offers = client.Call("GET", "/v1/offers", nullptr, customer).Json();
  EXPECT_TRUE(offers["offers"].empty()) << offers.dump();
  auto bid = client.Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                         customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  EXPECT_EQ(bid.Json()["close_reason"], "no_match") << bid.body;
  auto wallets = client.Call("GET", "/v1/wallets", nullptr, customer).Json();
  EXPECT_EQ(wallets["wallets"][0]["available"], "10.000000") << wallets.dump();
}

TEST(MarketFeeTest, ThePlatformFeeComesFromTheConfig) {
  ServerOptions options;
  options.server_extra = "[market]\nfee_percent = \"2.5\"\n";
  OneListedMachine w(options);
  ASSERT_TRUE(w.started);
  HttpClient& client = *w.client;
  const std::string& provider = w.provider;
  const std::string& customer = w.customer;
  auto& m = w.machine;
  auto a = client.Call("POST", "/v1/asks", AskJson(m.Json()["id"], "4.000", "2099-01-01T00:00:00Z"),
                       provider);
  EXPECT_EQ(a.status, 400) << a.body;  // more than 366 days ahead
  a = client.Call("POST", "/v1/asks", AskJson(m.Json()["id"], "4.000", Later(2)), provider);
  ASSERT_EQ(a.status, 201) << a.body;
  auto bid = client.Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                         customer);
  ASSERT_EQ(bid.status, 201) << bid.body;
  auto earnings = client.Call("GET", "/v1/earnings", nullptr, provider).Json();
  EXPECT_EQ(earnings["fees"], "0.100000");  // 2.5% of 4.00
  EXPECT_EQ(earnings["net"], "3.900000");
  EXPECT_EQ(earnings["fee_percent"], "2.50");
}

INSTANTIATE_TEST_SUITE_P(Backends, MarketApiTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
