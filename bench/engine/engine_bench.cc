// Engine throughput: commands per second through the single writer, in memory (a store that
// writes nothing) and durable with group commit on SQLite (synchronous=FULL) and PostgreSQL.
//
// One command = one admin manual credit: a ledger transfer plus its rows (ledger_transfers,
// manual_credits). `clients` commands are kept in flight at once (like concurrent HTTP requests);
// batch:1 disables group commit to show what it buys.
//
// PostgreSQL runs when GPUHUB_BENCH_PG_URL or GPUHUB_TEST_PG_URL names a database (its tables are
// created by migration if missing; the benchmark truncates nothing: use a scratch database).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "engine/accounts.h"
#include "engine/engine.h"
#include "engine/wallets.h"
#include "store/store.h"
#include "../null_store.h"

namespace gpuhub::engine {
namespace {

using bench::NullStore;

std::unique_ptr<store::Store> OpenStore(const std::string& backend, benchmark::State& state) {
  if (backend == "memory") return std::make_unique<NullStore>();
  std::string url;
  if (backend == "sqlite") {
    auto dir = std::filesystem::temp_directory_path() /
               ("gpuhub_engine_bench_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    url = "sqlite:" + (dir / "bench.db").string();
  } else {
    const char* pg = std::getenv("GPUHUB_BENCH_PG_URL");
    if (!pg || !*pg) pg = std::getenv("GPUHUB_TEST_PG_URL");
    if (!pg || !*pg) {
      state.SkipWithError(
          "set GPUHUB_BENCH_PG_URL (or GPUHUB_TEST_PG_URL) to benchmark PostgreSQL");
      return nullptr;
    }
    url = pg;
  }
  auto store = store::OpenStore(url);
  if (!store.ok() || !(*store)->Migrate().ok()) {
    state.SkipWithError(("cannot open " + url).c_str());
    return nullptr;
  }
  return std::move(store).value();
}

constexpr std::int64_t kCommandsPerIteration = 1000;

void RunCredits(benchmark::State& state, const std::string& backend) {
  const int clients = static_cast<int>(state.range(0));
  const std::size_t batch = static_cast<std::size_t>(state.range(1));
  auto store = OpenStore(backend, state);
  if (!store) return;
  RealClock clock;
  MetricsRegistry metrics;
  EngineOptions options;
  options.run_periodic_ticks = false;
  options.max_commands_per_batch = batch;
  Engine engine(std::move(store), clock, metrics, options);
  if (!engine.Start().ok()) {
    state.SkipWithError("engine start failed");
    return;
  }
  // Two users (the credit's admin and its beneficiary) so that foreign keys hold.
  auto users = engine.ExecuteSync<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
    std::int64_t base = txn.state.accounts.next_user_id;
    std::string suffix = std::to_string(base);
    GPUHUB_RETURN_IF_ERROR(CreateUser(txn, "bench_admin_" + suffix, "h", kRoleAdmin).status());
    GPUHUB_RETURN_IF_ERROR(CreateUser(txn, "bench_user_" + suffix, "h", kRoleCustomer).status());
    return base;
  });
  if (!users.ok()) {
    state.SkipWithError(users.status().ToString().c_str());
    return;
  }
  const std::int64_t admin = *users, user = *users + 1;

  std::mutex m;
  std::condition_variable cv;
  std::int64_t done = 0, failed = 0;
  std::int64_t submitted = 0;
  auto submit = [&] {
    engine.Execute<int>(
        [&](Txn& txn) -> Result<int> {
          GPUHUB_RETURN_IF_ERROR(
              ManualCredit(txn, admin, user, Currency::kUsd, 1'000'000, "bench").status());
          return 0;
        },
        [&](Result<int> r) {
          std::lock_guard<std::mutex> lock(m);
          ++done;
          if (!r.ok()) ++failed;
          cv.notify_one();
        });
  };
  for (auto _ : state) {
    // Keep `clients` commands in flight: each completion lets one more in.
    const std::int64_t target = kCommandsPerIteration;
    {
      std::lock_guard<std::mutex> lock(m);
      done = 0;
    }
    submitted = 0;
    while (submitted < target) {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return submitted - done < clients; });
      }
      submit();
      ++submitted;
    }
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done == target; });
  }
  engine.Stop();
  if (failed) state.SkipWithError("some commands failed");
  state.SetItemsProcessed(state.iterations() * kCommandsPerIteration);
  state.counters["commands_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kCommandsPerIteration), benchmark::Counter::kIsRate);
}

void BM_EngineInMemory(benchmark::State& state) { RunCredits(state, "memory"); }
void BM_EngineSqlite(benchmark::State& state) { RunCredits(state, "sqlite"); }
void BM_EnginePostgres(benchmark::State& state) { RunCredits(state, "postgresql"); }

// Args: {clients in flight, max commands per batch}. Both databases get the same runs.
void DatabaseRuns(benchmark::internal::Benchmark* b) {
  b->Args({1, 1024})->Args({64, 1})->Args({64, 1024})->Args({256, 1024});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}
BENCHMARK(BM_EngineInMemory)
    ->Args({1, 1024})
    ->Args({64, 1024})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EngineSqlite)->Apply(DatabaseRuns);
BENCHMARK(BM_EnginePostgres)->Apply(DatabaseRuns);

}  // namespace
}  // namespace gpuhub::engine

BENCHMARK_MAIN();
