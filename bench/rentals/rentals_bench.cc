// Term rentals: quotes per second and rentals created per second through the engine (the single
// writer, with group commit on SQLite or into a store that writes nothing), and the lifecycle tick
// over 100,000 live rentals (must stay under 50 ms: the real clock ticks every second).
//
// The fleet: 12,500 nodes of 8 cards (100,000 cards) over three regions, the catalog's H100 SXM
// and A100 SXM prices. The tick fleet holds 100,000 live one-card monthly rentals whose terms end
// spread evenly over 30 days, all with auto-renew on and wallets that can pay: every hour about
// 280 of them reach a transition (an auto-renew debit, a term that rolls over).
//
//   build/bench/rentals/rentals_bench [--benchmark_filter=Tick]
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdio>
#include <condition_variable>
#include <mutex>

#include "engine/accounts.h"
#include "engine/engine.h"
#include "engine/rentals.h"
#include "engine/wallets.h"
#include "ledger/ledger.h"
#include "rentals/fleet.h"
#include "store/store.h"
#include "../bench_store.h"

namespace gpuhub {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr int kNodes = 12'500;
constexpr int kCustomers = 100;

rentals::FleetConfig Config() {
  rentals::FleetConfig c;
  c.regions = {"DFW-1", "IAD-1", "PDX-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {{"H100 SXM", 1690 * kUsd, 475 * kUsd, false, {1, 2, 4, 8}, c.regions, true, 2000},
             {"A100 SXM", 990 * kUsd, 280 * kUsd, false, {1, 2, 4, 8}, c.regions, false, 1000}};
  return c;
}

std::unique_ptr<store::Store> OpenBenchStore(const std::string& backend) {
  return bench::OpenBenchStore(backend, "gpuhub_rentals_bench");
}

// An engine with the bench fleet's nodes, kCustomers funded customers, and nothing rented.
struct BenchEngine {
  explicit BenchEngine(const std::string& backend) : clock(kStart) {
    engine::EngineOptions options;
    options.run_periodic_ticks = false;
    options.domains.rentals = Config();
    auto store = OpenBenchStore(backend);
    if (!store) return;
    engine = std::make_unique<engine::Engine>(std::move(store), clock, metrics, options);
    engine::AddRentalsTickHooks(*engine);
    if (!engine->Start().ok()) return;
    auto setup = engine->ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      GPUHUB_ASSIGN_OR_RETURN(auto admin, engine::CreateUser(txn, "admin", "!", engine::kRoleAdmin));
      for (int i = 0; i < kCustomers; ++i) {
        GPUHUB_ASSIGN_OR_RETURN(auto u, engine::CreateUser(txn, "c" + std::to_string(i), "!",
                                                           engine::kRoleCustomer));
        customers.push_back(u.id);
        // Enough for 1,000 monthly rentals and their renewals (a credit is at most 1,000,000).
        for (int k = 0; k < 8; ++k) {
          GPUHUB_RETURN_IF_ERROR(engine::ManualCredit(txn, admin.id, u.id, Currency::kUsd,
                                                      1'000'000 * kUsd, "bench")
                                     .status());
        }
      }
      for (int i = 0; i < kNodes; ++i) {
        const char* regions[] = {"DFW-1", "IAD-1", "PDX-1"};
        GPUHUB_RETURN_IF_ERROR(
            engine::AddRentalNode(txn, {i % 2 ? "A100 SXM" : "H100 SXM", regions[i % 3], 8, "",
                                        std::nullopt, std::nullopt})
                .status());
      }
      return 0;
    });
    ok = setup.ok();
  }
  ~BenchEngine() {
    if (engine) engine->Stop();
  }
  ManualClock clock;
  engine::MetricsRegistry metrics;
  std::unique_ptr<engine::Engine> engine;
  std::vector<std::int64_t> customers;
  bool ok = false;
};

rentals::OrderSpec Spec(std::uint64_t i) {
  rentals::OrderSpec s;
  s.gpu = i % 2 ? "A100 SXM" : "H100 SXM";
  int counts[] = {1, 1, 1, 2, 4};
  s.count = counts[i % 5];
  s.term = i % 3 ? rentals::Term::kMonth : rentals::Term::kWeek;
  const char* regions[] = {"", "DFW-1", "IAD-1", "PDX-1"};
  s.region = regions[i % 4];
  return s;
}

// Submits `n` commands made by `make(i)` without waiting between them (like concurrent HTTP
// requests: the writer batches them), then waits for all.
template <typename T>
void Pipeline(engine::Engine& engine, std::int64_t n,
              const std::function<std::function<Result<T>(engine::Txn&)>(std::int64_t)>& make,
              std::atomic<std::int64_t>* failed) {
  std::mutex m;
  std::condition_variable cv;
  std::int64_t done = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    engine.Execute<T>(make(i), [&](Result<T> r) {
      if (!r.ok()) failed->fetch_add(1);
      std::lock_guard<std::mutex> lock(m);
      ++done;
      cv.notify_one();
    });
  }
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return done == n; });
}

void BM_QuotesThroughTheEngine(benchmark::State& state) {
  BenchEngine b("memory");
  if (!b.ok) return state.SkipWithError("setup failed");
  constexpr std::int64_t kPerIteration = 10'000;
  std::atomic<std::int64_t> failed{0};
  std::uint64_t n = 0;
  for (auto _ : state) {
    Pipeline<rentals::Quote>(
        *b.engine, kPerIteration,
        [&](std::int64_t) {
          rentals::OrderSpec spec = Spec(n++);
          std::int64_t who = b.customers[n % b.customers.size()];
          return [spec, who](engine::Txn& txn) { return engine::QuoteRental(txn, who, spec); };
        },
        &failed);
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  state.counters["failed"] = static_cast<double>(failed.load());
}
BENCHMARK(BM_QuotesThroughTheEngine)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_RentalsCreatedThroughTheEngine(benchmark::State& state, const std::string& backend) {
  BenchEngine b(backend);
  if (!b.ok) return state.SkipWithError("setup failed");
  constexpr std::int64_t kPerIteration = 2'000;
  std::atomic<std::int64_t> failed{0};
  std::uint64_t n = 0;
  for (auto _ : state) {
    Pipeline<rentals::Rental>(
        *b.engine, kPerIteration,
        [&](std::int64_t) {
          rentals::OrderSpec spec = Spec(n++);
          std::int64_t who = b.customers[n % b.customers.size()];
          return [spec, who](engine::Txn& txn) { return engine::OrderRental(txn, who, spec); };
        },
        &failed);
  }
  state.SetItemsProcessed(state.iterations() * kPerIteration);
  state.counters["failed"] = static_cast<double>(failed.load());
}
// 5 iterations x 2,000 orders: well within the fleet's 100,000 cards.
BENCHMARK_CAPTURE(BM_RentalsCreatedThroughTheEngine, memory, std::string("memory"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);
BENCHMARK_CAPTURE(BM_RentalsCreatedThroughTheEngine, sqlite, std::string("sqlite"))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(5);

// 100,000 live one-card monthly rentals whose terms end spread over 30 days: ordered at times
// spread over the 30 days before the benchmark's start.
std::unique_ptr<BenchEngine> TickFleet(const std::string& backend) {
  auto b = std::make_unique<BenchEngine>(backend);
  if (!b->ok) return nullptr;
  constexpr int kRentals = kNodes * 8;
  constexpr int kPerCommand = 1'000;
  const std::int64_t spacing = 30 * kMicrosPerDay / kRentals;
  for (int first = 0; first < kRentals; first += kPerCommand) {
    auto r = b->engine->ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      for (int i = first; i < first + kPerCommand; ++i) {
        b->clock.Advance(spacing);
        txn.now = b->clock.NowMicros();
        rentals::OrderSpec spec;
        spec.gpu = i % 2 ? "A100 SXM" : "H100 SXM";
        spec.count = 1;
        spec.term = rentals::Term::kMonth;
        GPUHUB_RETURN_IF_ERROR(
            engine::OrderRental(txn, b->customers[static_cast<std::size_t>(i) % kCustomers], spec)
                .status());
        GPUHUB_RETURN_IF_ERROR(engine::AdvanceRentals(txn));
      }
      return 0;
    });
    if (!r.ok()) {
      std::fprintf(stderr, "tick fleet: %s\n", r.status().ToString().c_str());
      return nullptr;
    }
  }
  return b;
}

// One tick: move the manual clock by `step` and run the tick hooks, as one command (what the
// real clock's tick and POST /v1/admin/clock/advance do), committed to the store.
void BM_LifecycleTick(benchmark::State& state, const std::string& backend, std::int64_t step) {
  auto b = TickFleet(backend);
  if (!b) return state.SkipWithError("setup failed");
  std::int64_t live = 0, transitions = 0;
  for (auto _ : state) {
    auto r = b->engine->ExecuteSync<std::int64_t>([&](engine::Txn& txn) -> Result<std::int64_t> {
      b->clock.Advance(step);
      txn.now = b->clock.NowMicros();
      std::size_t before = txn.writes.size();
      GPUHUB_RETURN_IF_ERROR(b->engine->RunTickHooks(txn));
      live = static_cast<std::int64_t>(txn.state.rentals->fleet.live_rental_count());
      return static_cast<std::int64_t>(txn.writes.size() - before);
    });
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    transitions += *r;
  }
  state.counters["live_rentals"] = static_cast<double>(live);
  state.counters["rows_per_tick"] =
      benchmark::Counter(static_cast<double>(transitions), benchmark::Counter::kAvgIterations);
}
BENCHMARK_CAPTURE(BM_LifecycleTick, memory_1s, std::string("memory"), kMicrosPerSecond)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(200);
BENCHMARK_CAPTURE(BM_LifecycleTick, memory_1h, std::string("memory"), kMicrosPerHour)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(48);
BENCHMARK_CAPTURE(BM_LifecycleTick, sqlite_1s, std::string("sqlite"), kMicrosPerSecond)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(200);
BENCHMARK_CAPTURE(BM_LifecycleTick, sqlite_1h, std::string("sqlite"), kMicrosPerHour)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(48);

}  // namespace
}  // namespace gpuhub

BENCHMARK_MAIN();
