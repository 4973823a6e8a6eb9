// How long a database goes without a writer when the writer's process dies: a writer and a
// standby on one database; the writer is SIGKILLed; the time is from the kill until the standby
// has acknowledged a new write (POST /v1/admin/credits, 201). Real processes and databases; the
// state the standby loads grows with the number of credits already committed (second argument).
//
//   build/bench/ha/takeover_bench                        # SQLite; PostgreSQL too with
//   GPUHUB_BENCH_PG_URL=postgresql://... build/bench/ha/takeover_bench   (or GPUHUB_TEST_PG_URL)
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "cluster.h"

namespace gpuhub::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

void BM_TakeoverAfterSigkill(benchmark::State& state, const std::string& backend) {
  const char* pg = std::getenv("GPUHUB_BENCH_PG_URL");
  if (pg && *pg) ::setenv("GPUHUB_TEST_PG_URL", pg, 1);
  const int preloaded = static_cast<int>(state.range(0));
  for (auto _ : state) {
    TempDir dir;
    ServerOptions options;
    options.clock = "real";
    options.db = FreshDatabaseUrl(backend, dir);
    if (options.db.empty()) {
      state.SkipWithError("set GPUHUB_BENCH_PG_URL (or GPUHUB_TEST_PG_URL) for PostgreSQL");
      return;
    }
    if (CreateAdmin(dir, options).exit_code != 0) {
      state.SkipWithError("gpuhub admin create-user failed");
      return;
    }
    Cluster cluster(dir, options);
    if (cluster.Add() != 0 || cluster.Add() != 1) {
      state.SkipWithError("the servers did not start");
      return;
    }
    HttpClient writer(cluster.node(0).port());
    std::string root = LogInAdmin(writer);
    SignUpAndLogIn(writer, "alice");
    json credit = {{"username", "alice"}, {"amount", "1.00"}, {"currency", "USD"}, {"reason", "x"}};
    for (int i = 0; i < preloaded; ++i) writer.Call("POST", "/v1/admin/credits", credit, root);
    HttpClient standby(cluster.node(1).port());
    standby.set_timeout_seconds(5);
    auto killed = SteadyClock::now();
    cluster.Kill(0);
    int status = 0;
    while (status != 201 && SteadyClock::now() - killed < std::chrono::seconds(60)) {
      status = standby.Call("POST", "/v1/admin/credits", credit, root, "after-kill").status;
    }
    state.SetIterationTime(std::chrono::duration<double>(SteadyClock::now() - killed).count());
    if (status != 201) {
      state.SkipWithError("the standby never took over");
      return;
    }
  }
  state.counters["preloaded_credits"] = preloaded;
}

BENCHMARK_CAPTURE(BM_TakeoverAfterSigkill, sqlite, std::string("sqlite"))
    ->Arg(0)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_TakeoverAfterSigkill, postgresql, std::string("postgresql"))
    ->Arg(0)
    ->Arg(5000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace gpuhub::testing

BENCHMARK_MAIN();
