// Billing's start-up load of spot usage (issue 15), on SQLite and PostgreSQL:
// - the read of the rows not yet on a statement (engine::OpenSpotUsageSelect) is served by
//   migration 15's index: the databases' own plans name it and neither scans the table nor sorts,
//   with a table shaped like a real one (years of lease-months on statements, one open month);
// - a restart keeps the open usage: engines restarted every few days of a month issue exactly the
//   statements (numbers, lines, amounts) of an engine that ran the month through, and the usage
//   reloaded equals the usage the engine held before it stopped.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/billing.h"
#include "engine/billing_checks.h"
#include "engine/billing_rows.h"
#include "engine/engine.h"
#include "engine/market.h"
#include "engine/metrics.h"
#include "engine/wallets.h"
#include "store/read_pool.h"
#include "store/store.h"
#include "store/test_databases.h"
#include "store/test_plans.h"

namespace gpuhub::billing {
// Readable failures (gtest prints bytes otherwise).
void PrintTo(const SpotUsage& u, std::ostream* os) {
  *os << "{lease " << u.lease_id << " " << u.tax_country << " " << u.rate_ppm
      << (u.reverse_charge ? " reverse" : "") << " hours " << u.hours << " net " << u.net_micros
      << " tax " << u.tax_micros << " from " << u.first_hour_at << " to " << u.last_hour_at << "}";
}
}  // namespace gpuhub::billing

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr int kUsers = 200;
constexpr int kClosedMonths = 24;
constexpr int kLeasesPerUserMonth = 5;
constexpr int kOpenUsers = 20;  // accounts with usage in the open month

TimestampMicros At(const char* text) { return ParseTimestamp(text).value(); }

class SpotUsagePlanTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpotUsagePlanTest, StartUpReadsOnlyOpenUsageThroughTheIndexInItsOrder) {
  const std::string url = store::FreshDatabase(GetParam());
  if (url.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  auto opened = store::OpenStore(url);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<store::Store> db = std::move(opened).value();
  ASSERT_TRUE(db->Migrate().ok());
  store::WriteBatch batch;
  store::AddPlanTestUsers(batch, kUsers, "customer");
  ASSERT_TRUE(db->Apply(batch).ok());
  batch.Clear();
  // Two years of months on statements (document ids from 1), then the open month, whose rows are
  // written in an order unlike the index's (users descending) so that the order read is the
  // query's, not the insertion's.
  std::int64_t lease = 0, document = 0, open_rows = 0;
  for (int m = 0; m <= kClosedMonths; ++m) {
    const bool open = m == kClosedMonths;
    const TimestampMicros month =
        billing::MonthOf(At("2025-01-15T00:00:00Z") + std::int64_t{m} * 31 * kMicrosPerDay).start;
    for (int u = kUsers; u >= 1; --u) {
      if (open && u > kOpenUsers) continue;
      const std::int64_t doc = open ? 0 : ++document;
      for (int l = 0; l < kLeasesPerUserMonth; ++l) {
        ++lease;
        open_rows += open ? 1 : 0;
        batch.Upsert("spot_usage",
                     {{"user_id", std::int64_t{u}},
                      {"month_start_us", month},
                      {"lease_id", lease},
                      {"tax_country", std::string("DE")},
                      {"rate_ppm", std::int64_t{190'000}},
                      {"reverse_charge", std::int64_t{0}},
                      {"gpu", std::string("H100 SXM")},
                      {"gpus", std::int64_t{1}},
                      {"price_micros", std::int64_t{2'500'000}},
                      {"hours", std::int64_t{3}},
                      {"net_micros", std::int64_t{7'500'000}},
                      {"tax_micros", std::int64_t{1'425'000}},
                      {"first_hour_at_us", month},
                      {"last_hour_at_us", month + 2 * kMicrosPerHour},
                      {"document_id", doc}},
                     /*key_columns=*/6);
      }
    }
    ASSERT_TRUE(db->Apply(batch).ok());
    batch.Clear();
  }
  store::AnalyzeIfPostgres(GetParam(), url);

  const store::Select select = OpenSpotUsageSelect();
  store::ReadPool pool(url, 1);
  // Both start-up reads (the counts, then the rows) use the index and sort nothing.
  for (const store::Select& read : {OpenSpotUsageCountSelect(), select}) {
    store::ExpectPlanUsesIndex(GetParam(), url, read, "spot_usage_by_document_id",
                               /*bounded_sort_ok=*/false);
  }
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> counts;
  ASSERT_TRUE(pool.Query(OpenSpotUsageCountSelect(),
                         [&](const store::Row& row) -> Status {
                           counts[{row.Int(0).value(), row.Int(1).value()}] = row.Int(2).value();
                           return Status::Ok();
                         })
                  .ok());
  ASSERT_EQ(counts.size(), static_cast<std::size_t>(kOpenUsers));
  for (const auto& [key, n] : counts) EXPECT_EQ(n, kLeasesPerUserMonth) << "user " << key.second;

  // What it reads: the open rows only, by month, user, lease and first hour.
  std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> read, sorted;
  ASSERT_TRUE(pool.Query(select,
                         [&](const store::Row& row) -> Status {
                           read.emplace_back(row.Int(1).value(), row.Int(0).value(),
                                             row.Int(2).value());
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(static_cast<std::int64_t>(read.size()), open_rows);
  EXPECT_EQ(read.size(), static_cast<std::size_t>(kOpenUsers * kLeasesPerUserMonth));
  sorted = read;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(read, sorted);
  EXPECT_EQ(std::get<1>(read.front()), 1);  // user 1 first though written last
}

INSTANTIATE_TEST_SUITE_P(Backends, SpotUsagePlanTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

// One engine on its own database with its own manual clock, restartable.
class Runner {
 public:
  Runner(std::string url, TimestampMicros start) : url_(std::move(url)), clock_(start) {}
  ~Runner() { engine_.reset(); }

  void Open() {
    engine_.reset();
    auto store = store::OpenStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->Migrate().ok());
    EngineOptions options;
    // Billing of lease-hours on machines without an agent: a simulated host runs them.
    options.domains.agents->simulated_hosts = true;
    options.run_periodic_ticks = false;
    options.domains.market.gpus = {"H100 SXM"};
    options.domains.market.regions = {"IAD-1"};
    options.domains.seller = {"gpuhub Inc.", "1 Main St\nDover, DE 19901", "US", ""};
    metrics_ = std::make_unique<MetricsRegistry>();
    engine_ = std::make_unique<Engine>(std::move(store).value(), clock_, *metrics_, options);
    AddMarketTickHooks(*engine_);
    AddBillingTickHooks(*engine_);
    Status started = engine_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }

  template <typename T>
  T Run(std::function<Result<T>(Txn&)> fn) {
    auto r = engine_->ExecuteSync<T>(std::move(fn));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : T{};
  }

  // Moves the clock to `at` and runs the tick hooks (what the periodic tick does).
  void AdvanceTo(TimestampMicros at) {
    Run<int>([&](Txn& txn) -> Result<int> {
      clock_.Set(at);
      txn.now = at;
      GPUHUB_RETURN_IF_ERROR(engine_->RunTickHooks(txn));
      return 0;
    });
  }

  // The open usage as held in memory, each account-month's rows sorted.
  std::map<std::pair<TimestampMicros, std::int64_t>, std::vector<billing::SpotUsage>> OpenUsage() {
    using Map = std::map<std::pair<TimestampMicros, std::int64_t>, std::vector<billing::SpotUsage>>;
    return Run<Map>([](Txn& txn) -> Result<Map> {
      Map out;
      for (const auto& [key, usage] : txn.state.billing->open_usage) {
        auto rows = usage;
        std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
          return std::tie(a.lease_id, a.first_hour_at) < std::tie(b.lease_id, b.first_hour_at);
        });
        out[key] = rows;
      }
      return out;
    });
  }

  std::vector<billing::Document> Documents(std::int64_t user) {
    return Run<std::vector<billing::Document>>(
        [&](Txn& txn) -> Result<std::vector<billing::Document>> {
          // The list has totals; each document read whole (lines too) by its number.
          GPUHUB_ASSIGN_OR_RETURN(auto listed, ListDocuments(txn.state, user, 100));
          std::vector<billing::Document> whole;
          for (const auto& d : listed) {
            GPUHUB_ASSIGN_OR_RETURN(billing::Document full, GetDocument(txn.state, user, d.number));
            whole.push_back(std::move(full));
          }
          return whole;
        });
  }

  Status Invariants() {
    return engine_
        ->ExecuteSync<int>([](Txn& txn) -> Result<int> {
          GPUHUB_RETURN_IF_ERROR(CheckBillingInvariants(txn.state));
          return 0;
        })
        .status();
  }

 private:
  std::string url_;
  ManualClock clock_;
  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<Engine> engine_;
};

struct Ids {
  std::int64_t admin = 0, provider = 0, carl = 0, dora = 0, erin = 0;
};

// The same month of spot usage on each runner: three accounts (German consumer, French business
// reverse-charged, US consumer), a lease ended mid-month, another started mid-month, a German
// rate change on the 10th that splits carl's lease into two lines.
class SpotUsageRestartTest : public ::testing::TestWithParam<std::string> {
 protected:
  Ids SetUpAccounts(Runner& r) {
    return r.Run<Ids>([](Txn& txn) -> Result<Ids> {
      Ids ids;
      GPUHUB_ASSIGN_OR_RETURN(User admin, CreateUser(txn, "admin", "h", kRoleAdmin));
      GPUHUB_ASSIGN_OR_RETURN(User provider, CreateUser(txn, "paula", "h", kRoleProvider));
      GPUHUB_ASSIGN_OR_RETURN(User carl, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User dora, CreateUser(txn, "dora", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User erin, CreateUser(txn, "erin", "h", kRoleCustomer));
      ids = {admin.id, provider.id, carl.id, dora.id, erin.id};
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, carl.id, {"DE", "", "", "Berlin"}).status());
      GPUHUB_RETURN_IF_ERROR(
          SetBillingProfile(txn, dora.id, {"FR", "Dora SARL", "FR 12 345678901", "Paris"})
              .status());
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, erin.id, {"US", "", "", "Dallas"}).status());
      for (std::int64_t u : {carl.id, dora.id, erin.id}) {
        GPUHUB_RETURN_IF_ERROR(
            ManualCredit(txn, admin.id, u, Currency::kUsd, 20'000 * kUsd, "test").status());
      }
      for (int i = 0; i < 2; ++i) {
        GPUHUB_ASSIGN_OR_RETURN(
            auto m, AddMachine(txn, provider.id, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}));
        GPUHUB_RETURN_IF_ERROR(
            PlaceAsk(txn, provider.id,
                     {m.id, 2'500'000 + i * 500'000, 1, txn.now + 90 * kMicrosPerDay})
                .status());
      }
      GPUHUB_RETURN_IF_ERROR(
          ChangeTaxRate(txn, admin.id, "de", 210'000, At("2026-12-10T00:00:00Z"), "test").status());
      return ids;
    });
  }

  static Result<market::BidResult> Buy(Txn& txn, std::int64_t user, int gpus) {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = gpus;
    spec.is_market = true;
    return PlaceBid(txn, user, spec);
  }

  // Runs December on `r`, restarting it at every point of `restarts` (days of the month).
  std::map<std::int64_t, std::vector<billing::Document>> RunMonth(Runner& r, bool restart) {
    r.Open();
    Ids ids = SetUpAccounts(r);
    std::map<std::string, std::int64_t> leases;
    auto buy = [&](const char* name, std::int64_t user, int gpus) {
      leases[name] = r.Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
        GPUHUB_ASSIGN_OR_RETURN(market::BidResult b, Buy(txn, user, gpus));
        if (!b.lease) return Status::Internal("no lease");
        return b.lease->id;
      });
    };
    auto stop = [&](const char* name, std::int64_t user) {
      r.Run<int>([&](Txn& txn) -> Result<int> {
        GPUHUB_RETURN_IF_ERROR(StopLease(txn, user, leases.at(name)).status());
        return 0;
      });
    };
    auto maybe_restart = [&] {
      if (!restart) return;
      auto before = r.OpenUsage();
      r.Open();
      EXPECT_EQ(r.OpenUsage(), before) << "the open usage reloaded differs";
      EXPECT_FALSE(before.empty());
    };
    buy("carl", ids.carl, 2);
    buy("dora", ids.dora, 1);
    buy("erin short", ids.erin, 1);
    for (const char* day : {"2026-12-03T05:00:00Z", "2026-12-07T13:00:00Z"}) {
      r.AdvanceTo(At(day));
      maybe_restart();
    }
    stop("erin short", ids.erin);
    maybe_restart();
    for (const char* day : {"2026-12-12T08:00:00Z", "2026-12-20T00:00:00Z"}) {
      r.AdvanceTo(At(day));
      maybe_restart();
    }
    buy("erin late", ids.erin, 3);
    for (const char* day : {"2026-12-28T17:00:00Z", "2026-12-31T23:00:00Z"}) {
      r.AdvanceTo(At(day));
      maybe_restart();
    }
    r.AdvanceTo(At("2027-01-01T00:00:00Z"));
    EXPECT_TRUE(r.Invariants().ok()) << r.Invariants().ToString();
    std::map<std::int64_t, std::vector<billing::Document>> out;
    for (std::int64_t u : {ids.carl, ids.dora, ids.erin}) out[u] = r.Documents(u);
    return out;
  }
};

TEST_P(SpotUsageRestartTest, StatementsAfterRestartsEqualThoseOfAnEngineThatRanThrough) {
  const std::string straight_url = store::FreshDatabase(GetParam());
  if (straight_url.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  const std::string restarted_url = store::FreshDatabase(GetParam());
  const TimestampMicros start = At("2026-12-01T00:00:00Z");
  Runner straight(straight_url, start), restarted(restarted_url, start);
  auto expected = RunMonth(straight, /*restart=*/false);
  auto got = RunMonth(restarted, /*restart=*/true);
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_EQ(got, expected);
  // And they say what December was (the statements of the month, every hour charged once).
  std::int64_t lines = 0, hours = 0;
  for (const auto& [user, docs] : got) {
    ASSERT_EQ(docs.size(), 1u) << "user " << user;
    EXPECT_EQ(docs[0].supply_from, start);
    for (const auto& l : docs[0].lines) {
      ++lines;
      hours += l.quantity;
    }
  }
  // carl: one lease, split by the rate change; dora: one; erin: the short lease and the late one.
  EXPECT_EQ(lines, 2 + 1 + 2);
  const auto& carl = got.begin()->second[0];
  ASSERT_EQ(carl.lines.size(), 2u);
  EXPECT_EQ(carl.lines[0].quantity, 9 * 24);
  EXPECT_EQ(carl.lines[0].rate_ppm, 190'000);
  EXPECT_EQ(carl.lines[1].quantity, 22 * 24);
  EXPECT_EQ(carl.lines[1].rate_ppm, 210'000);
  EXPECT_GT(hours, 31 * 24 * 2);
}

INSTANTIATE_TEST_SUITE_P(Backends, SpotUsageRestartTest, ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::engine
