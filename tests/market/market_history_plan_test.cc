// The spot market's history reads use their indexes, on SQLite and PostgreSQL: the database's own
// plan (SQLite EXPLAIN QUERY PLAN, PostgreSQL EXPLAIN) of every history page and every start-up
// load of open rows names the index of migration 13 and neither scans the table nor sorts.
//
// The tables are filled with a history shaped like a real one (tens of thousands of closed rows,
// a few open ones, accounts with thousands of rows each) and analyzed, so that the planners choose
// with statistics, as they would in production; no planner setting is changed (no
// enable_seqscan=off).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/money.h"
#include "engine/market_rows.h"
#include "store/read_pool.h"
#include "store/store.h"
#include "store/test_databases.h"
#include "store/test_plans.h"

namespace gpuhub::engine {
namespace {

// Many accounts, each a small part of the table (a planner walks the primary key backwards and
// filters when one owner holds a large share of the rows: the newest page is then as cheap that
// way), and ten markets, market "GPU 3" a small one (1% of the trades).
constexpr int kCustomers = 200;
constexpr int kProviders = 200;
constexpr int kMarkets = 10;
constexpr int kPayouts = 10'000;
constexpr int kBids = 40'000;    // every 3rd filled: a lease and a trade
constexpr int kAsks = 8'000;     // one open, the rest expired
constexpr int kOpenEvery = 997;  // a few resting bids among them

class MarketHistoryPlanTest : public store::FreshDatabaseTest {
 protected:
  void SetUp() override {
    store::FreshDatabaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    Fill();
    Analyze();
  }

  void Fill() {
    store::WriteBatch batch;
    store::AddPlanTestUsers(batch, kCustomers + kProviders, "customer,provider");
    for (int m = 1; m <= kProviders; ++m) {
      batch.Upsert("market_machines", {{"id", std::int64_t{m}},
                                       {"provider_id", std::int64_t{kCustomers + m}},
                                       {"gpu", std::string(m % 2 ? "H100 SXM" : "A100 SXM")},
                                       {"gpus", std::int64_t{8}},
                                       {"region", std::string("IAD-1")},
                                       {"vcpus", std::int64_t{64}},
                                       {"ram_gb", std::int64_t{512}},
                                       {"disk_gb", std::int64_t{1000}},
                                       {"created_at_us", std::int64_t{1}}});
    }
    for (int a = 1; a <= kAsks; ++a) {
      const std::int64_t machine = 1 + a % kProviders;  // one machine per provider
      batch.Upsert("market_asks", {{"id", std::int64_t{1'000'000 + a}},
                                   {"provider_id", kCustomers + machine},
                                   {"machine_id", machine},
                                   {"gpu", std::string(machine % 2 ? "H100 SXM" : "A100 SXM")},
                                   {"price_micros", std::int64_t{2'000'000}},
                                   {"min_gpus", std::int64_t{1}},
                                   {"available_until_us", std::int64_t{9}},
                                   {"status", std::string(a == kAsks ? "open" : "expired")},
                                   {"created_at_us", std::int64_t{1}},
                                   {"closed_at_us", std::int64_t{0}}});
    }
    ASSERT_TRUE(store_->Apply(batch).ok());
    batch.Clear();
    std::int64_t lease = 0;
    for (int i = 1; i <= kBids; ++i) {
      const std::int64_t id = 100 + i;
      const std::int64_t customer = 1 + i % kCustomers;
      const bool open = i % kOpenEvery == 0;
      const bool filled = !open && i % 3 == 0;
      const std::string gpu = "GPU " + std::to_string(i % 100 == 0 ? 3 : 4 + i % (kMarkets - 4));
      batch.Upsert("market_bids", {{"id", id},
                                   {"customer_id", customer},
                                   {"gpu", gpu},
                                   {"gpus", std::int64_t{1}},
                                   {"region", std::string()},
                                   {"is_market", std::int64_t{0}},
                                   {"limit_micros", std::int64_t{2'000'000}},
                                   {"time_in_force", std::string(open ? "gtc" : "ioc")},
                                   {"expires_at_us", std::int64_t{0}},
                                   {"currency", std::string("USD")},
                                   {"status", std::string(open     ? "resting"
                                                          : filled ? "filled"
                                                                   : "cancelled")},
                                   {"close_reason", std::string(open ? "" : "no_match")},
                                   {"created_at_us", id},
                                   {"closed_at_us", id},
                                   {"lease_id", filled ? lease + 1 : 0},
                                   {"hold_micros", std::int64_t{0}}});
      if (filled) {
        ++lease;
        const std::int64_t machine = 1 + lease % kProviders;
        batch.Upsert("market_leases",
                     {{"id", lease},
                      {"bid_id", id},
                      {"ask_id", machine},
                      {"machine_id", machine},
                      {"provider_id", kCustomers + machine},
                      {"customer_id", customer},
                      {"gpu", gpu},
                      {"gpus", std::int64_t{1}},
                      {"gpu_mask", std::int64_t{1}},
                      {"price_micros", std::int64_t{2'000'000}},
                      {"fee_ppm", std::int64_t{100'000}},
                      {"currency", std::string("USD")},
                      {"started_at_us", id},
                      {"window_until_us", id},
                      {"hours_paid", std::int64_t{1}},
                      {"status", std::string(lease % 500 == 0 ? "active" : "ended")},
                      {"ended_at_us", id},
                      {"end_reason", std::string("stopped")}});
        batch.Insert("market_trades", {{"id", lease},
                                       {"gpu", gpu},
                                       {"price_micros", std::int64_t{2'000'000}},
                                       {"gpus", std::int64_t{1}},
                                       {"lease_id", lease},
                                       {"bid_id", id},
                                       {"ask_id", machine},
                                       {"maker", std::string("ask")},
                                       {"created_at_us", id}});
      }
      if (i % 5'000 == 0) {
        ASSERT_TRUE(store_->Apply(batch).ok());
        batch.Clear();
      }
    }
    for (int p = 1; p <= kPayouts; ++p) {
      batch.Upsert("market_payouts",
                   {{"id", std::int64_t{p}},
                    {"provider_id", std::int64_t{kCustomers + 1 + p % kProviders}},
                    {"amount_micros", std::int64_t{1'000'000}},
                    {"status", std::string(p % 100 == 0 ? "pending" : "paid")},
                    {"created_at_us", std::int64_t{p}},
                    {"updated_at_us", std::int64_t{p}},
                    {"admin_id", std::int64_t{0}}});
    }
    ASSERT_TRUE(store_->Apply(batch).ok());
  }

  // Statistics, as a database that has been running has them (autovacuum; SQLite's ANALYZE).
  void Analyze() { store::AnalyzeIfPostgres(GetParam(), url_); }

  void ExpectIndexed(const store::Select& select, const std::string& index,
                     bool partial = false) {
    const int rows = store::ExpectPlanUsesIndex(GetParam(), url_, select, index,
                                                /*bounded_sort_ok=*/true, partial);
    if (select.limit > 0) {
      EXPECT_LE(rows, static_cast<int>(select.limit));
    }
  }

};

TEST_P(MarketHistoryPlanTest, HistoryPagesWalkTheOwnerIndexNewestFirst) {
  // The first page, then a page from a cursor in the middle of each table's ids.
  for (bool paged : {false, true}) {
    SCOPED_TRACE(paged ? "from a cursor" : "first page");
    auto at = [paged](std::int64_t middle) { return paged ? middle : 0; };
    ExpectIndexed(HistoryPageSelect("market_bids", BidColumns(), "customer_id", 3, at(20'000), 51),
                  "market_bids_by_customer_id");
    ExpectIndexed(
        HistoryPageSelect("market_leases", LeaseColumns(), "customer_id", 3, at(6'000), 51),
        "market_leases_by_customer_id");
    ExpectIndexed(HistoryPageSelect("market_leases", LeaseColumns(), "provider_id", kCustomers + 2,
                                    at(6'000), 51),
                  "market_leases_by_provider_id");
    ExpectIndexed(HistoryPageSelect("market_asks", AskColumns(), "provider_id", kCustomers + 2,
                                    at(1'000'000 + kAsks / 2), 51),
                  "market_asks_by_provider_id");
    ExpectIndexed(HistoryPageSelect("market_payouts", PayoutColumns(), "provider_id",
                                    kCustomers + 2, at(kPayouts / 2), 51),
                  "market_payouts_by_provider_id");
    ExpectIndexed(TradePageSelect("GPU 3", at(6'000), 51),  // a small market
                  "market_trades_by_gpu_id");
  }
}

TEST_P(MarketHistoryPlanTest, StartUpReadsOnlyOpenRowsThroughPartialIndexesOfOpenRows) {
  // Each index holds only the open rows: walking all of it reads what start-up wants.
  ExpectIndexed(OpenRowsSelect("market_bids", BidColumns(), "resting"), "market_bids_resting",
                /*partial=*/true);
  ExpectIndexed(OpenRowsSelect("market_leases", LeaseColumns(), "active"), "market_leases_active",
                /*partial=*/true);
  ExpectIndexed(OpenRowsSelect("market_asks", AskColumns(), "open"), "market_asks_open",
                /*partial=*/true);
  ExpectIndexed(OpenRowsSelect("market_payouts", PayoutColumns(), "pending"),
                "market_payouts_pending", /*partial=*/true);
  // What they read: the open rows and nothing else.
  store::ReadPool pool(url_, 1);
  int resting = 0;
  ASSERT_TRUE(pool.Query(OpenRowsSelect("market_bids", {"status"}, "resting"),
                         [&](const store::Row& row) {
                           EXPECT_EQ(row.Text(0).value(), "resting");
                           ++resting;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(resting, kBids / kOpenEvery);
}

INSTANTIATE_TEST_SUITE_P(Backends, MarketHistoryPlanTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::engine

namespace gpuhub::engine {
namespace {

// Migration 13 backfills each provider's history totals from the leases and paid payouts that a
// database of schema 12 already holds, with the fee of each hour rounded half-even exactly as
// the exchange rounds it (MulDivHalfEven): ties to even, both directions.
class MarketHistoryMigrationTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MarketHistoryMigrationTest, TotalsAreBackfilledExactlyAsTheExchangeCountsThem) {
  const std::string url = store::FreshDatabase(GetParam());
  if (url.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  auto opened = store::OpenStore(url);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<store::Store> db = std::move(opened).value();
  ASSERT_TRUE(db->Migrate(12).ok());
  store::WriteBatch batch;
  store::AddPlanTestUsers(batch, 3, "provider");
  batch.Upsert("market_machines", {{"id", std::int64_t{1}},
                                   {"provider_id", std::int64_t{1}},
                                   {"gpu", std::string("H100 SXM")},
                                   {"gpus", std::int64_t{8}},
                                   {"region", std::string("IAD-1")},
                                   {"vcpus", std::int64_t{8}},
                                   {"ram_gb", std::int64_t{8}},
                                   {"disk_gb", std::int64_t{8}},
                                   {"created_at_us", std::int64_t{1}}});
  // (provider, hourly price per GPU, gpus, fee ppm, hours, credited to the provider)
  struct L {
    std::int64_t provider, price, gpus, fee_ppm, hours, credited;
  };
  const std::vector<L> leases = {
      {1, 5, 1, 100'000, 3, 0},           // fee 0.5 -> 0 (tie, even)
      {1, 15, 1, 100'000, 2, 7},          // 1.5 -> 2 (tie, odd goes up)
      {1, 25, 1, 100'000, 1, 0},          // 2.5 -> 2
      {1, 26, 1, 100'000, 4, 0},          // 2.6 -> 3
      {2, 2'880'000, 8, 125'000, 5, 11},  // 2,880,000 exactly
      {2, 1'234'567, 3, 333'333, 2, 0},   // 1,234,565.7 -> 1,234,566
  };
  std::int64_t id = 0;
  for (const auto& l : leases) {
    ++id;
    batch.Upsert("market_leases", {{"id", id},
                                   {"bid_id", id},
                                   {"ask_id", std::int64_t{1}},
                                   {"machine_id", std::int64_t{1}},
                                   {"provider_id", l.provider},
                                   {"customer_id", std::int64_t{3}},
                                   {"gpu", std::string("H100 SXM")},
                                   {"gpus", l.gpus},
                                   {"gpu_mask", std::int64_t{1}},
                                   {"price_micros", l.price},
                                   {"fee_ppm", l.fee_ppm},
                                   {"currency", std::string("USD")},
                                   {"started_at_us", std::int64_t{1}},
                                   {"window_until_us", std::int64_t{2}},
                                   {"hours_paid", l.hours},
                                   {"status", std::string("ended")},
                                   {"ended_at_us", std::int64_t{2}},
                                   {"end_reason", std::string("stopped")},
                                   {"credited_provider_micros", l.credited}});
  }
  for (auto [pid, status, amount] : {std::tuple{1, "paid", 40}, std::tuple{2, "rejected", 50},
                                     std::tuple{3, "pending", 60}, std::tuple{4, "paid", 9}}) {
    batch.Upsert("market_payouts", {{"id", std::int64_t{pid}},
                                    {"provider_id", std::int64_t{pid == 4 ? 2 : 1}},
                                    {"amount_micros", std::int64_t{amount}},
                                    {"status", std::string(status)},
                                    {"created_at_us", std::int64_t{1}},
                                    {"updated_at_us", std::int64_t{1}},
                                    {"admin_id", std::int64_t{0}}});
  }
  ASSERT_TRUE(db->Apply(batch).ok());
  ASSERT_TRUE(db->Migrate().ok());

  std::map<std::int64_t, std::vector<std::int64_t>> expected;
  for (const auto& l : leases) {
    auto& e = expected[l.provider];
    e.resize(6);
    const std::int64_t hour = l.price * l.gpus;
    e[0] += hour * l.hours;
    e[1] += MulDivHalfEven(hour, l.fee_ppm, 1'000'000).value() * l.hours;
    e[2] += l.gpus * l.hours;
    e[3] += l.hours;
    e[4] += l.credited;
  }
  expected[1][5] = 40;
  expected[2][5] = 9;
  std::map<std::int64_t, std::vector<std::int64_t>> stored;
  ASSERT_TRUE(db->Scan("market_provider_totals",
                       {"provider_id", "gross_micros", "fee_micros", "gpu_hours", "lease_hours",
                        "credited_micros", "paid_out_micros"},
                       "provider_id",
                       [&](const store::Row& row) -> Status {
                         auto& v = stored[row.Int(0).value()];
                         for (std::size_t i = 1; i <= 6; ++i) v.push_back(row.Int(i).value());
                         return Status::Ok();
                       })
                  .ok());
  EXPECT_EQ(stored, expected);
  EXPECT_EQ(expected[1][1], 0 * 3 + 2 * 2 + 2 * 1 + 3 * 4);  // the ties as the comments say
}

INSTANTIATE_TEST_SUITE_P(Backends, MarketHistoryMigrationTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::engine
