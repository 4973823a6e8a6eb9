// What stock and price alerts cost (engine/alerts.h, docs/market.md "Alerts").
//
// - BM_AlertIndexBestAskNoCrossing: one market watched by N price alerts (thresholds spread
//   below the price); the best ask moves up and down by a tick without crossing any: the work a
//   book change does for N alerts (a logarithmic lookup, not a walk of N).
// - BM_AlertIndexBestAskCrossing: the same, the best ask falling past K thresholds and back: K
//   alerts fire each time (the walk is the K that cross).
// - BM_EngineAskCycle: one command placing an ask and one cancelling it on the writer's state in
//   memory (no store), with N price alerts on the same market that never cross, and with N = 0:
//   what alerts add to a command that changes the book.
#include <benchmark/benchmark.h>

#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/alert_index.h"
#include "engine/alerts.h"
#include "engine/market.h"
#include "engine/state.h"
#include "store/store.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kTick = 1'000;  // micro-USD: the book's 0.001

void BM_AlertIndexBestAskNoCrossing(benchmark::State& state) {
  const auto n = state.range(0);
  AlertIndex index;
  for (std::int64_t i = 0; i < n; ++i) {
    index.AddPrice(i + 1, "H100 SXM", 1'000'000 + (i % 1000) * kTick, 3'000'000);
  }
  std::int64_t best = 3'000'000;
  std::size_t fired = 0;
  for (auto _ : state) {
    best = best == 3'000'000 ? 3'001'000 : 3'000'000;
    fired += index.BestAskChanged("H100 SXM", best).size();
  }
  if (fired != 0) state.SkipWithError("an alert crossed");
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AlertIndexBestAskNoCrossing)->Arg(0)->Arg(1'000)->Arg(100'000);

void BM_AlertIndexBestAskCrossing(benchmark::State& state) {
  const auto crossing = state.range(0);
  AlertIndex index;
  // 100,000 alerts; `crossing` of them between $2.000 and $2.999.
  for (std::int64_t i = 0; i < 100'000; ++i) {
    const std::int64_t threshold =
        i < crossing ? 2'000'000 + (i % 1000) * kTick : 1'000'000 + (i % 900) * kTick;
    index.AddPrice(i + 1, "H100 SXM", threshold, 3'000'000);
  }
  std::size_t fired = 0;
  for (auto _ : state) {
    fired += index.BestAskChanged("H100 SXM", 2'000'000).size();
    index.BestAskChanged("H100 SXM", 3'000'000);
  }
  state.counters["fired_per_fall"] =
      static_cast<double>(fired) / static_cast<double>(state.iterations());
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_AlertIndexBestAskCrossing)->Arg(1)->Arg(100)->Arg(10'000);

// The writer's state with one market and a provider's machine, built without a store.
struct Bench {
  std::unique_ptr<State> state = std::make_unique<State>();
  store::WriteBatch writes;
  std::int64_t provider = 0;
  market::MachineId machine = 0;

  Bench() {
    market::ExchangeConfig config;
    config.gpus = {"H100 SXM"};
    config.regions = {"IAD-1"};
    state->market = std::make_unique<MarketState>(config);
    state->agents->config.simulated_hosts = true;
    Txn txn(*state, writes, 1'800'000'000'000'000);
    provider = CreateUser(txn, "paula", "h", kRoleProvider)->id;
    machine = AddMachine(txn, provider, {"H100 SXM", 8, "IAD-1", 64, 512, 2000})->id;
    // An ask that stays: the best ask the alerts see.
    PlaceAsk(txn, provider, {machine, 3'000'000, 1, txn.now + 30 * kMicrosPerDay}).value();
  }
};

void BM_EngineAskCycle(benchmark::State& state) {
  const auto n = state.range(0);
  Bench b;
  {
    Txn txn(*b.state, b.writes, 1'800'000'000'000'000);
    std::int64_t user = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      if (i % 25 == 0) user = CreateUser(txn, "u" + std::to_string(i), "h", kRoleCustomer)->id;
      // $1.000 .. $1.999: under every ask of the cycle, so none crosses.
      if (!CreateAlert(txn, user,
                       {AlertKind::kPrice, "H100 SXM", "", 0, 1'000'000 + (i % 1000) * kTick})
               .ok()) {
        state.SkipWithError("alert refused");
        return;
      }
    }
  }
  // A second machine whose ask is placed and cancelled each iteration, above and below the
  // standing one (the best ask moves both ways).
  Txn setup(*b.state, b.writes, 1'800'000'000'000'000);
  const auto second = AddMachine(setup, b.provider, {"H100 SXM", 8, "IAD-1", 64, 512, 2000})->id;
  std::int64_t price = 2'500'000;
  for (auto _ : state) {
    b.writes = store::WriteBatch();
    Txn txn(*b.state, b.writes, 1'800'000'000'000'000);
    auto ask = PlaceAsk(txn, b.provider, {second, price, 1, txn.now + kMicrosPerDay});
    EvaluateAlerts(txn);  // what the command hook does after the command
    Txn cancel(*b.state, b.writes, 1'800'000'000'000'000);
    CancelAsk(cancel, b.provider, ask->id).value();
    EvaluateAlerts(cancel);
    price = price == 2'500'000 ? 3'500'000 : 2'500'000;
  }
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_EngineAskCycle)->Arg(0)->Arg(10'000);

}  // namespace
}  // namespace gpuhub::engine

BENCHMARK_MAIN();
