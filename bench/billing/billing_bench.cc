// Issuing tax documents and rendering them.
//
//   BM_BuildStatement/rows     the pure part: a month's usage rows -> a sealed statement
//   BM_IssueStatements/accounts the engine's month-end tick on SQLite (synchronous=FULL): one
//                               statement per account, numbered and committed in one transaction
//                               (items/s = statements per second)
//   BM_RecordNewLeaseHour/leases one command recording the first hour of a new lease for an
//                               account that already ran `leases` leases this month (the engine's
//                               writer, no database: bench/null_store.h); flat in `leases`
//   BM_RenderPdf/lines          libharu, DejaVu Sans embedded (what GET /v1/invoices/N.pdf does)
//   BM_RenderHtml/lines         the printable page
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <filesystem>

#include "../null_store.h"
#include "billing/statement.h"
#include "documents/render.h"
#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "store/store.h"

namespace gpuhub {
namespace {

constexpr TimestampMicros kNov = 1'793'491'200'000'000;  // 2026-11-01T00:00:00Z

std::vector<billing::SpotUsage> Rows(int n) {
  std::vector<billing::SpotUsage> rows;
  for (int i = 0; i < n; ++i) {
    billing::SpotUsage u;
    u.lease_id = i + 1;
    u.gpu = "H100 SXM";
    u.gpus = 2;
    u.price_micros = 2'885'000;
    u.tax_country = "DE";
    u.rate_ppm = 190'000;
    u.hours = 100 + i;
    u.net_micros = u.hours * 5'770'000;
    u.tax_micros = u.hours * 1'096'300;
    u.first_hour_at = kNov + i * kMicrosPerHour;
    u.last_hour_at = u.first_hour_at + (u.hours - 1) * kMicrosPerHour;
    rows.push_back(u);
  }
  return rows;
}

billing::Document Statement(int lines) {
  billing::Month nov = billing::MonthOf(kNov);
  billing::Document d = billing::BuildSpotStatement(nov, Rows(lines), nov.end).value();
  d.number = "2026-000123";
  d.seller = {"gpuhub Inc.", "1 Main St\nDover, DE 19901", "US", ""};
  d.buyer = {"Rechenzentrum Müller GmbH (carl)", "Unter den Linden 1\n10117 Berlin", "DE",
             "DE123456789"};
  d.evidence = {"DE", "203.0.113.7", "DE", kNov};
  return d;
}

void BM_BuildStatement(benchmark::State& state) {
  billing::Month nov = billing::MonthOf(kNov);
  auto rows = Rows(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto doc = billing::BuildSpotStatement(nov, rows, nov.end);
    benchmark::DoNotOptimize(doc);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_BuildStatement)->Arg(1)->Arg(10)->Arg(100);

void BM_IssueStatements(benchmark::State& state) {
  const int accounts = static_cast<int>(state.range(0));
  auto dir = std::filesystem::temp_directory_path() /
             ("gpuhub_billing_bench_" + std::to_string(::getpid()));
  std::int64_t issued = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto store = store::OpenStore("sqlite:" + (dir / "bench.db").string()).value();
    if (!store->Migrate().ok()) return state.SkipWithError("migrate");
    ManualClock clock(kNov + 10 * kMicrosPerDay);
    engine::MetricsRegistry metrics;
    engine::EngineOptions options;
    options.run_periodic_ticks = false;
    engine::Engine e(std::move(store), clock, metrics, options);
    if (!e.Start().ok()) return state.SkipWithError("start");
    // Accounts with a month of lease-hours (3 leases each), recorded as the exchange reports them.
    auto setup = e.ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      std::vector<market::HourCharge> hours;
      for (int a = 0; a < accounts; ++a) {
        GPUHUB_ASSIGN_OR_RETURN(auto u, engine::CreateUser(txn, "u" + std::to_string(a), "h",
                                                           engine::kRoleCustomer));
        GPUHUB_RETURN_IF_ERROR(
            engine::SetBillingProfile(txn, u.id, {"DE", "", "", "Berlin"}).status());
        for (int lease = 0; lease < 3; ++lease) {
          for (int h = 0; h < 24; ++h) {
            hours.push_back({a * 3 + lease + 1, u.id, h + 1, kNov + h * kMicrosPerHour,
                             "H100 SXM", 2, 2'885'000, 5'770'000, 190'000, 1'096'300});
          }
        }
      }
      engine::RecordSpotHours(txn, hours);
      return 0;
    });
    if (!setup.ok()) return state.SkipWithError(setup.status().ToString().c_str());
    clock.Set(billing::MonthOf(kNov).end);
    state.ResumeTiming();
    auto n = e.ExecuteSync<std::size_t>([](engine::Txn& txn) {
      return engine::IssueDueStatements(txn);
    });
    state.PauseTiming();
    if (!n.ok() || static_cast<int>(*n) != std::min(accounts, 500)) {
      return state.SkipWithError("not every statement was issued");
    }
    issued += static_cast<std::int64_t>(*n);
    e.Stop();
    state.ResumeTiming();
  }
  std::filesystem::remove_all(dir);
  state.SetItemsProcessed(issued);
}
// Real time: the work happens on the engine's writer thread, not the benchmark's.
BENCHMARK(BM_IssueStatements)->Arg(1)->Arg(100)->Arg(500)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_RecordNewLeaseHour(benchmark::State& state) {
  const std::int64_t leases = state.range(0);
  ManualClock clock(kNov + 10 * kMicrosPerDay);
  engine::MetricsRegistry metrics;
  engine::EngineOptions options;
  options.run_periodic_ticks = false;
  engine::Engine e(std::make_unique<bench::NullStore>(), clock, metrics, options);
  if (!e.Start().ok()) return state.SkipWithError("start");
  auto hour = [](std::int64_t lease, std::int64_t user) {
    return market::HourCharge{lease, user, 1, kNov + (lease % 200) * kMicrosPerHour, "H100 SXM", 2,
                              2'885'000, 5'770'000, 190'000, 1'096'300};
  };
  auto user = e.ExecuteSync<std::int64_t>([&](engine::Txn& txn) -> Result<std::int64_t> {
    GPUHUB_ASSIGN_OR_RETURN(auto u, engine::CreateUser(txn, "u", "h", engine::kRoleCustomer));
    GPUHUB_RETURN_IF_ERROR(engine::SetBillingProfile(txn, u.id, {"DE", "", "", "Berlin"}).status());
    std::vector<market::HourCharge> hours;
    for (std::int64_t lease = 1; lease <= leases; ++lease) hours.push_back(hour(lease, u.id));
    engine::RecordSpotHours(txn, hours);
    txn.writes.Clear();
    return u.id;
  });
  if (!user.ok()) return state.SkipWithError(user.status().ToString().c_str());
  std::int64_t next = leases;
  for (auto _ : state) {
    auto r = e.ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      engine::RecordSpotHours(txn, {hour(++next, *user)});
      return 0;
    });
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
  }
  e.Stop();
  state.SetItemsProcessed(state.iterations());
}
// Real time: the work happens on the engine's writer thread. A fixed count: one setup per size.
BENCHMARK(BM_RecordNewLeaseHour)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Iterations(2'000)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void BM_RenderPdf(benchmark::State& state) {
  billing::Document doc = Statement(static_cast<int>(state.range(0)));
  std::size_t bytes = 0;
  for (auto _ : state) {
    auto pdf = documents::RenderPdf(doc);
    if (!pdf.ok()) return state.SkipWithError(pdf.status().ToString().c_str());
    bytes = pdf->size();
  }
  state.counters["pdf_bytes"] = static_cast<double>(bytes);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RenderPdf)->Arg(1)->Arg(20)->Arg(200)->Unit(benchmark::kMillisecond);

void BM_RenderHtml(benchmark::State& state) {
  billing::Document doc = Statement(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(documents::RenderHtml(doc));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RenderHtml)->Arg(1)->Arg(20)->Arg(200);

}  // namespace
}  // namespace gpuhub

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);  // one info line per statement would be the benchmark
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
