// Host agents under load.
// - BM_Heartbeats/<backend>/<clients>: durable heartbeats per second through the engine, 1,000
//   hosts each with an 8-GPU machine and 4 running leases (unchanged inventory: the steady state),
//   `clients` heartbeats in flight (concurrent HTTP requests). One host reports every 15 s, so
//   N heartbeats/s serve 15 x N hosts.
// - BM_ReconcilePlan, BM_CreateBody, BM_ParseNvidiaSmi: what the agent does every second on a
//   16-GPU host with 16 workloads.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <mutex>

#include "agent/container.h"
#include "agent/inventory.h"
#include "agent/reconcile.h"
#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/engine.h"
#include "engine/market.h"
#include "engine/wallets.h"
#include "store/store.h"
#include "../null_store.h"

namespace gpuhub {
namespace {

using engine::Txn;

constexpr int kHosts = 1000;
constexpr std::int64_t kHeartbeatsPerIteration = 2000;

using bench::NullStore;

engine::HostInventory Gpus(int host) {
  engine::HostInventory inv;
  inv.source = "nvml";
  for (int i = 0; i < 8; ++i) {
    engine::GpuInventory g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(host) + "-" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.memory_mib = 81559;
    inv.gpus.push_back(g);
  }
  return inv;
}

void BM_Heartbeats(benchmark::State& state, const std::string& backend) {
  const int clients = static_cast<int>(state.range(0));
  std::unique_ptr<store::Store> store;
  if (backend == "memory") {
    store = std::make_unique<NullStore>();
  } else {
    auto dir = std::filesystem::temp_directory_path() /
               ("gpuhub_agent_bench_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto opened = store::OpenStore("sqlite:" + (dir / "bench.db").string());
    if (!opened.ok() || !(*opened)->Migrate().ok()) return state.SkipWithError("no sqlite");
    store = std::move(opened).value();
  }
  RealClock clock;
  engine::MetricsRegistry metrics;
  engine::EngineOptions options;
  options.run_periodic_ticks = false;
  options.domains.market.gpus = {"H100 SXM"};
  engine::Engine e(std::move(store), clock, metrics, options);
  if (!e.Start().ok()) return state.SkipWithError("engine start failed");
  // 1,000 providers' machines, each enrolled, each with 4 one-GPU leases.
  auto hosts = e.ExecuteSync<std::vector<std::int64_t>>(
      [](Txn& txn) -> Result<std::vector<std::int64_t>> {
        GPUHUB_ASSIGN_OR_RETURN(auto admin, CreateUser(txn, "admin", "h", engine::kRoleAdmin));
        // Four customers: one may hold at most 1,000 active leases.
        std::vector<std::int64_t> customers;
        for (int i = 0; i < 4; ++i) {
          GPUHUB_ASSIGN_OR_RETURN(auto c, CreateUser(txn, "carl" + std::to_string(i), "h",
                                                     engine::kRoleCustomer));
          GPUHUB_RETURN_IF_ERROR(engine::ManualCredit(txn, admin.id, c.id, Currency::kUsd,
                                                      1'000'000LL * 1'000'000, "bench")
                                     .status());
          customers.push_back(c.id);
        }
        std::vector<std::int64_t> ids;
        for (int h = 0; h < kHosts; ++h) {
          GPUHUB_ASSIGN_OR_RETURN(auto p, CreateUser(txn, "p" + std::to_string(h), "h",
                                                     engine::kRoleProvider));
          GPUHUB_ASSIGN_OR_RETURN(
              auto m, engine::AddMachine(txn, p.id, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}));
          GPUHUB_RETURN_IF_ERROR(
              engine::PlaceAsk(txn, p.id, {m.id, 2'000'000, 1, txn.now + 7 * kMicrosPerDay})
                  .status());
          for (int l = 0; l < 4; ++l) {
            market::BidSpec spec;
            spec.gpu = "H100 SXM";
            spec.gpus = 1;
            spec.is_market = true;
            GPUHUB_RETURN_IF_ERROR(
                engine::PlaceBid(txn, customers[static_cast<std::size_t>(l)], spec).status());
          }
          std::string token = engine::HashToken("t" + std::to_string(h));
          GPUHUB_RETURN_IF_ERROR(
              engine::CreateMachineEnrolmentToken(txn, p.id, m.id, token).status());
          GPUHUB_ASSIGN_OR_RETURN(
              auto host, engine::Enrol(txn, {token, "", engine::HashToken("c" + std::to_string(h)),
                                             "h", "v"}));
          engine::Heartbeat hb;
          hb.inventory = Gpus(h);
          GPUHUB_RETURN_IF_ERROR(engine::RecordHeartbeat(txn, host.id, hb).status());
          ids.push_back(host.id);
        }
        return ids;
      });
  if (!hosts.ok()) return state.SkipWithError(hosts.status().ToString().c_str());
  std::vector<engine::Heartbeat> beats(kHosts);
  for (int h = 0; h < kHosts; ++h) {
    beats[static_cast<std::size_t>(h)].public_host = "203.0.113.7";
    beats[static_cast<std::size_t>(h)].inventory = Gpus(h);
  }
  std::mutex m;
  std::condition_variable cv;
  std::int64_t done = 0, failed = 0, desired = 0;
  for (auto _ : state) {
    {
      std::lock_guard<std::mutex> lock(m);
      done = 0;
    }
    std::int64_t submitted = 0;
    while (submitted < kHeartbeatsPerIteration) {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return submitted - done < clients; });
      }
      const std::size_t h = static_cast<std::size_t>(submitted % kHosts);
      e.Execute<engine::HeartbeatReply>(
          [&, h](Txn& txn) { return engine::RecordHeartbeat(txn, (*hosts)[h], beats[h]); },
          [&](Result<engine::HeartbeatReply> r) {
            std::lock_guard<std::mutex> lock(m);
            ++done;
            if (!r.ok()) ++failed;
            else desired += static_cast<std::int64_t>(r->workloads.size());
            cv.notify_one();
          });
      ++submitted;
    }
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done == kHeartbeatsPerIteration; });
  }
  e.Stop();
  if (failed) return state.SkipWithError("heartbeats failed");
  if (desired != state.iterations() * kHeartbeatsPerIteration * 4) {
    return state.SkipWithError("a heartbeat did not answer its 4 workloads");
  }
  state.counters["heartbeats_per_s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * kHeartbeatsPerIteration),
      benchmark::Counter::kIsRate);
}

void BM_HeartbeatsInMemory(benchmark::State& s) { BM_Heartbeats(s, "memory"); }
void BM_HeartbeatsSqlite(benchmark::State& s) { BM_Heartbeats(s, "sqlite"); }
BENCHMARK(BM_HeartbeatsInMemory)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_HeartbeatsSqlite)->Arg(1)->Arg(64)->UseRealTime()->Unit(benchmark::kMillisecond);

std::vector<agent::WorkloadSpec> Workloads(int n) {
  std::vector<agent::WorkloadSpec> out;
  for (int i = 0; i < n; ++i) {
    agent::WorkloadSpec w;
    w.id = "lease-" + std::to_string(i + 1);
    w.image = "nvidia/cuda:12.4.1-base-ubuntu22.04";
    w.gpu_uuids = {"GPU-" + std::to_string(i)};
    w.ssh_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj c"};
    w.not_after = 1'900'000'000'000'000;
    w.cpus = 8;
    w.memory_gb = 64;
    out.push_back(std::move(w));
  }
  return out;
}

void BM_ReconcilePlan(benchmark::State& state) {
  agent::ReconcileInput in{Workloads(16), true, {}, 1'800'000'000'000'000};
  std::vector<agent::ActualContainer> actual;
  for (int i = 0; i < 16; ++i) {
    actual.push_back({"c" + std::to_string(i), "lease-" + std::to_string(i + 1), "running",
                      40000 + i, 1'900'000'000'000'000});
  }
  for (auto _ : state) benchmark::DoNotOptimize(agent::PlanReconcile(in, actual));
}
BENCHMARK(BM_ReconcilePlan);

void BM_CreateBody(benchmark::State& state) {
  auto w = Workloads(1)[0];
  for (auto _ : state) {
    benchmark::DoNotOptimize(agent::CreateBody(w, {40001, "/var/lib/gpuhub-agent/workloads/x/ssh"}));
  }
}
BENCHMARK(BM_CreateBody);

void BM_ParseNvidiaSmi(benchmark::State& state) {
  std::string csv;
  for (int i = 0; i < 16; ++i) {
    csv += std::to_string(i) + ", GPU-8f6c2a3e-1111-2222-3333-44445555" + std::to_string(1000 + i) +
           ", NVIDIA H100 80GB HBM3, 81559, 550.54.15, 5, 16, 34, 87, 0\n";
  }
  for (auto _ : state) benchmark::DoNotOptimize(agent::ParseNvidiaSmiGpus(csv, nullptr));
}
BENCHMARK(BM_ParseNvidiaSmi);

}  // namespace
}  // namespace gpuhub

BENCHMARK_MAIN();
