// The daily storage billing tick: how long one tick takes when many volumes' days are due.
//
// - BM_DailyTickDomain/N: rentals::Storage alone (the pure domain with its ledger): N one-TB
//   volumes of 1,000 customers, all created at the same instant, so that every day boundary bills
//   all N at once (the worst case: in production each volume's day starts at its own creation
//   time). One iteration = AdvanceTo one day later = N day charges, each one ledger batch.
// - BM_DailyTickEngine/{memory,sqlite}: the same through the engine as the tick hook runs it (one
//   command, committed in one store transaction: per volume its row, its charge and its ledger
//   transfer), 10,000 volumes due at once.
// - BM_SpreadTickEngine/sqlite_{1s,1min}: 20,000 volumes whose days start spread over 24 hours, ticked every
//   second as the real clock does (about 0.23 bills per tick) and every minute.
//
//   build/bench/storage/storage_bench [--benchmark_filter=Domain]
#include <benchmark/benchmark.h>

#include <cstdio>

#include "engine/accounts.h"
#include "engine/engine.h"
#include "engine/storage.h"
#include "engine/wallets.h"
#include "ledger/ledger.h"
#include "rentals/storage.h"
#include "store/store.h"
#include "../bench_store.h"

namespace gpuhub {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr int kCustomers = 1'000;
const std::vector<std::string> kRegions = {"DFW-1", "IAD-1", "PDX-1"};

Result<rentals::TaxBlock> Untaxed(rentals::UserId, std::int64_t net, TimestampMicros) {
  return rentals::NoTax(net);
}

rentals::StorageConfig Config() {
  rentals::StorageConfig c;
  c.regions = kRegions;
  return c;
}

// Hosts enough for `volumes` one-TB volumes (3 replicas each) spread over the regions.
int HostsPerRegion(std::int64_t volumes) {
  return static_cast<int>(3 * volumes / 3 / 9'000) + 4;
}

void BM_DailyTickDomain(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  rentals::Storage storage(Config());
  ledger::Ledger ledger;
  rentals::StorageChanges changes;
  TimestampMicros now = kStart;
  for (const auto& region : kRegions) {
    for (int i = 0; i < HostsPerRegion(n); ++i) {
      if (!storage.AddHost({region, "", 9'000}, now, &changes).ok()) {
        return state.SkipWithError("hosts");
      }
    }
  }
  for (int c = 1; c <= kCustomers; ++c) {
    ledger::TransferRequest t;
    t.id = "topup:" + std::to_string(c);
    t.debit = ledger::AccountKey::System(ledger::AccountKind::kDeposits, Currency::kUsd);
    t.credit = ledger::AccountKey::Wallet(c, Currency::kUsd);
    t.amount_micros = 1'000'000 * kUsd;
    t.code = "topup";
    t.timestamp = now;
    if (!ledger.Apply(t).ok()) return state.SkipWithError("funds");
  }
  for (std::int64_t i = 0; i < n; ++i) {
    rentals::VolumeSpec spec{kRegions[static_cast<std::size_t>(i) % 3], 1, "", Currency::kUsd};
    auto v = storage.CreateVolume(1 + i % kCustomers, spec, ledger, Untaxed, now, &changes);
    if (!v.ok()) return state.SkipWithError(v.status().ToString().c_str());
  }
  std::int64_t charges = 0;
  for (auto _ : state) {
    changes.Clear();
    now += kMicrosPerDay;
    storage.AdvanceTo(ledger, Untaxed, now, &changes);
    charges += static_cast<std::int64_t>(changes.charges.size());
  }
  if (charges != n * state.iterations()) return state.SkipWithError("not every day was billed");
  state.SetItemsProcessed(charges);
  state.counters["volumes"] = static_cast<double>(n);
  state.counters["ns_per_volume"] = benchmark::Counter(
      static_cast<double>(n) * state.iterations(),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DailyTickDomain)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

std::unique_ptr<store::Store> OpenBenchStore(const std::string& backend) {
  return bench::OpenBenchStore(backend, "gpuhub_storage_bench");
}

// An engine with funded customers and `volumes` one-TB volumes, created `spacing` apart.
struct BenchEngine {
  BenchEngine(const std::string& backend, std::int64_t volumes, std::int64_t spacing)
      : clock(kStart) {
    engine::EngineOptions options;
    options.run_periodic_ticks = false;
    options.domains.rentals.regions = kRegions;
    options.domains.storage = Config();
    auto store = OpenBenchStore(backend);
    if (!store) return;
    engine = std::make_unique<engine::Engine>(std::move(store), clock, metrics, options);
    engine::AddStorageTickHooks(*engine);
    if (!engine->Start().ok()) return;
    auto setup = engine->ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      GPUHUB_ASSIGN_OR_RETURN(auto admin, engine::CreateUser(txn, "admin", "!", engine::kRoleAdmin));
      for (int i = 0; i < kCustomers; ++i) {
        GPUHUB_ASSIGN_OR_RETURN(auto u, engine::CreateUser(txn, "c" + std::to_string(i), "!",
                                                           engine::kRoleCustomer));
        customers.push_back(u.id);
        GPUHUB_RETURN_IF_ERROR(
            engine::ManualCredit(txn, admin.id, u.id, Currency::kUsd, 100'000 * kUsd, "bench")
                .status());
      }
      for (const auto& region : kRegions) {
        for (int i = 0; i < HostsPerRegion(volumes); ++i) {
          GPUHUB_RETURN_IF_ERROR(engine::AddStorageHost(txn, {region, "", 9'000}).status());
        }
      }
      return 0;
    });
    if (!setup.ok()) return;
    constexpr std::int64_t kPerCommand = 1'000;
    for (std::int64_t first = 0; first < volumes; first += kPerCommand) {
      auto r = engine->ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
        for (std::int64_t i = first; i < std::min(volumes, first + kPerCommand); ++i) {
          clock.Advance(spacing);
          txn.now = clock.NowMicros();
          rentals::VolumeSpec spec{kRegions[static_cast<std::size_t>(i) % 3], 1, "",
                                   Currency::kUsd};
          GPUHUB_RETURN_IF_ERROR(
              engine::CreateVolume(txn, customers[static_cast<std::size_t>(i) % kCustomers], spec)
                  .status());
        }
        return 0;
      });
      if (!r.ok()) {
        std::fprintf(stderr, "bench volumes: %s\n", r.status().ToString().c_str());
        return;
      }
    }
    ok = true;
  }
  ~BenchEngine() {
    if (engine) engine->Stop();
  }
  // One tick `step` later, as the real clock's tick or POST /v1/admin/clock/advance runs it;
  // returns the rows it wrote.
  Result<std::int64_t> Tick(std::int64_t step) {
    return engine->ExecuteSync<std::int64_t>([&](engine::Txn& txn) -> Result<std::int64_t> {
      clock.Advance(step);
      txn.now = clock.NowMicros();
      std::size_t before = txn.writes.size();
      GPUHUB_RETURN_IF_ERROR(engine->RunTickHooks(txn));
      return static_cast<std::int64_t>(txn.writes.size() - before);
    });
  }
  ManualClock clock;
  engine::MetricsRegistry metrics;
  std::unique_ptr<engine::Engine> engine;
  std::vector<std::int64_t> customers;
  bool ok = false;
};

void BM_DailyTickEngine(benchmark::State& state, const std::string& backend) {
  constexpr std::int64_t kVolumes = 10'000;
  BenchEngine b(backend, kVolumes, 0);
  if (!b.ok) return state.SkipWithError("setup failed");
  std::int64_t rows = 0;
  for (auto _ : state) {
    auto r = b.Tick(kMicrosPerDay);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    rows += *r;
  }
  state.SetItemsProcessed(kVolumes * state.iterations());
  state.counters["rows_per_tick"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kAvgIterations);
}
BENCHMARK_CAPTURE(BM_DailyTickEngine, memory, std::string("memory"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_DailyTickEngine, sqlite, std::string("sqlite"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

void BM_SpreadTickEngine(benchmark::State& state, std::int64_t step) {
  constexpr std::int64_t kVolumes = 20'000;
  BenchEngine b("sqlite", kVolumes, kMicrosPerDay / kVolumes);
  if (!b.ok) return state.SkipWithError("setup failed");
  std::int64_t rows = 0;
  for (auto _ : state) {
    auto r = b.Tick(step);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    rows += *r;
  }
  state.counters["volumes"] = static_cast<double>(kVolumes);
  state.counters["rows_per_tick"] =
      benchmark::Counter(static_cast<double>(rows), benchmark::Counter::kAvgIterations);
}
BENCHMARK_CAPTURE(BM_SpreadTickEngine, sqlite_1s, kMicrosPerSecond)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(300);
BENCHMARK_CAPTURE(BM_SpreadTickEngine, sqlite_1min, 60 * kMicrosPerSecond)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(60);

}  // namespace
}  // namespace gpuhub

BENCHMARK_MAIN();
