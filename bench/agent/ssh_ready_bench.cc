// SSH in seconds, measured on the real thing: a real `gpuhub serve`, the real `gpuhub agent`
// binary and a REAL Docker engine with the sshd test image present (scripts/docker-test-env.sh
// starts one: DOCKER_HOST, GPUHUB_TEST_SSHD_IMAGE). The only stand-ins are the GPU (a fake
// nvidia-smi reporting one H100; the engine's nvidia hook is the stand-in script of that
// environment) and the customer's laptop (ssh on this machine).
//
// BM_PaidOrderToSshLogin: for each of 20 leases, from the answer of the paid order (POST /v1/bids,
// a market buy, filled) to the first successful `ssh -p PORT root@127.0.0.1 true` with the
// customer's key: the lease is polled for its SSH line every 50 ms and ssh retried every 100 ms
// once it shows. The agent runs with the server's intervals (heartbeat 15 s) and its defaults
// (long-poll 20 s, reconcile 1 s, sshd probe). Counters: p50_s, p95_s, max_s over the 20.
// Each lease is stopped, and its container gone, before the next is bought. Extra agent config
// lines from GPUHUB_BENCH_AGENT_CONFIG (a comparison: "desired_wait_seconds = 0").
//
//   eval "$(bash scripts/docker-test-env.sh start /tmp/dk)"   # DOCKER_HOST=..., image built
//   build/bench/agent/ssh_ready_bench
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "agent/docker.h"
#include "agent/inventory.h"
#include "agent/process.h"
#include "agent_process.h"
#include "harness.h"

namespace gpuhub::testing {
namespace {

using Steady = std::chrono::steady_clock;
constexpr int kLeases = 20;
constexpr const char* kPassword = "correct horse battery staple";
constexpr auto kStepLimit = std::chrono::seconds(120);

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p of the samples at or below it.
  std::size_t rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

bool Until(const std::function<bool()>& condition, std::chrono::milliseconds every) {
  const auto deadline = Steady::now() + kStepLimit;
  while (Steady::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(every);
  }
  return false;
}

void BM_PaidOrderToSshLogin(benchmark::State& state) {
  const std::string docker_host = Env("DOCKER_HOST");
  const std::string image = Env("GPUHUB_TEST_SSHD_IMAGE", "gpuhub-test-sshd:bookworm");
  if (docker_host.rfind("unix://", 0) != 0) {
    return state.SkipWithError("DOCKER_HOST=unix://... is not set: start a throwaway engine "
                               "with scripts/docker-test-env.sh start DIR");
  }
  const std::string docker_url = "unix:" + docker_host.substr(7);
  {
    auto docker = agent::DockerClient::Connect(docker_url);
    if (!docker.ok()) return state.SkipWithError(("no Docker engine at " + docker_url).c_str());
    auto present = (*docker)->ImagePresent(image);
    if (!present.ok() || !*present) {
      return state.SkipWithError(("the sshd image " + image + " is not in the engine").c_str());
    }
  }
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl("sqlite", dir);
  if (CreateAdmin(dir, options).exit_code != 0) return state.SkipWithError("admin create failed");
  ServerProcess server(dir, options);
  if (!server.Start()) return state.SkipWithError("gpuhub serve did not start");
  HttpClient client(server.port());
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  const std::string admin = LogInAdmin(client);
  const std::string provider = SignUpAndLogIn(client, "paula", kPassword, {"provider"});
  const std::string customer = SignUpAndLogIn(client, "carl", kPassword, {"customer"});
  client.Call("POST", "/v1/admin/credits",
              {{"username", "carl"}, {"amount", "1000"}, {"currency", "USD"}, {"reason", "bench"}},
              admin);
  const std::string key = dir.path() + "/id_ed25519";
  auto keygen = agent::RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key});
  if (!keygen.ok() || keygen->exit_code != 0) return state.SkipWithError("ssh-keygen failed");
  std::string pub;
  std::getline(std::ifstream(key + ".pub"), pub);
  if (client.Call("POST", "/v1/ssh-keys", {{"public_key", pub}}, customer).status != 201) {
    return state.SkipWithError("the SSH key was refused");
  }
  auto m = client.Call("POST", "/v1/machines",
                       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"region", "IAD-1"},
                        {"vcpus", agent::UsableCpus()}, {"ram_gb", 1}, {"disk_gb", 20}},
                       provider);
  if (m.status != 201) return state.SkipWithError(("machine: " + m.body).c_str());
  const long long machine = m.Json()["id"];
  client.Call("POST", "/v1/asks",
              AskJson(machine, "2.000", UtcTimeFromNow(std::chrono::hours(24 * 30))), provider);
  auto token = client.Call(
      "POST", "/v1/machines/" + std::to_string(machine) + "/enrolment-tokens", nullptr, provider);

  // The host: one GPU (a fake nvidia-smi), the real engine, ports of its own.
  const std::string smi = dir.path() + "/nvidia-smi";
  std::ofstream(smi) << "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) echo '"
                     << SmiLine(0, "GPU-5e11c0de-0000-4000-8000-000000000000")
                     << "' ;;\n  --query-remapped-rows=*) ;;\n  *) echo '| NVIDIA-SMI 550.54.15 "
                        "Driver Version: 550.54.15 CUDA Version: 12.4 |' ;;\nesac\n";
  ::chmod(smi.c_str(), 0755);
  const std::string config = dir.path() + "/agent.toml";
  std::ofstream(config) << "state_dir = \"" << dir.path() << "/agent-state\"\n"
                        << "public_host = \"127.0.0.1\"\n"
                        << "ssh_ports = \"41000-41019\"\n"
                        << "docker = \"" << docker_url << "\"\n"
                        << "nvml_library = \"" << dir.path() << "/no/libnvidia-ml.so.1\"\n"
                        << "nvidia_smi = \"" << smi << "\"\n"
                        << "disk_path = \"" << dir.path() << "\"\n"
                        // For a comparison: "desired_wait_seconds = 0" is heartbeats only.
                        << Env("GPUHUB_BENCH_AGENT_CONFIG") << "\n";
  auto enrolled = RunGpuhub({"agent", "enroll", "--server", url, "--token",
                             token.Json().value("token", ""), "--config", config},
                            "");
  if (enrolled.exit_code != 0) return state.SkipWithError(("enrol: " + enrolled.output).c_str());
  AgentProcess agent(config, dir.path() + "/agent.log");
  if (!agent.Start()) return state.SkipWithError("the agent did not start");
  auto online = [&] {
    json list = client.Call("GET", "/v1/machines", nullptr, provider).Json();
    for (const auto& x : list["machines"]) {
      if (x["id"] == machine && x["agent"]["status"] == "online" && x["hold_reason"].is_null()) {
        return true;
      }
    }
    return false;
  };
  if (!Until(online, std::chrono::milliseconds(100))) {
    return state.SkipWithError(("the machine never came online:\n" + agent.Log()).c_str());
  }

  std::vector<double> seconds;
  for (auto _ : state) {
    auto bid = client.Call("POST", "/v1/bids",
                           {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"image", image}},
                           customer);
    const auto paid = Steady::now();  // the paid order's answer
    if (bid.status != 201 || bid.Json()["status"] != "filled") {
      return state.SkipWithError(("the buy did not fill: " + bid.body).c_str());
    }
    const std::string lease = std::to_string(bid.Json()["lease_id"].get<long long>());
    std::string port;
    bool shown = Until([&] {
      json l = client.Call("GET", "/v1/leases/" + lease, nullptr, customer).Json();
      if (!l["connection"]["port"].is_number()) return false;
      port = std::to_string(l["connection"]["port"].get<int>());
      return true;
    }, std::chrono::milliseconds(50));
    bool logged_in = shown && Until([&] {
      auto ssh = agent::RunProcess(
          {"ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
           "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
           "-i", key, "-p", port, "root@127.0.0.1", "true"},
          std::chrono::seconds(10));
      return ssh.ok() && ssh->exit_code == 0;
    }, std::chrono::milliseconds(100));
    const double took = std::chrono::duration<double>(Steady::now() - paid).count();
    if (!logged_in) {
      return state.SkipWithError(("lease " + lease + ": no SSH login (line shown: " +
                                  (shown ? "yes" : "no") + ")\n" + agent.Log()).c_str());
    }
    state.SetIterationTime(took);
    seconds.push_back(took);
    // Not measured: the lease stops and its container goes before the next one.
    client.Call("POST", "/v1/leases/" + lease + "/stop", nullptr, customer);
    Until([&] {
      return client.Call("GET", "/v1/leases/" + lease, nullptr, customer)
                 .Json()["connection"]["state"] == "stopped";
    }, std::chrono::milliseconds(100));
  }
  state.counters["p50_s"] = Percentile(seconds, 0.50);
  state.counters["p95_s"] = Percentile(seconds, 0.95);
  state.counters["max_s"] = Percentile(seconds, 1.0);
  (void)agent.Terminate();
}

BENCHMARK(BM_PaidOrderToSshLogin)
    ->Iterations(kLeases)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gpuhub::testing

BENCHMARK_MAIN();
