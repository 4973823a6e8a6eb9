// Network volumes measured on the real thing: a real `gpuhub serve` whose [storage.regions.IAD-1]
// is a real Ceph cluster, the real `gpuhub agent` running a term rental in a REAL Docker engine and
// mounting its volumes with the real ceph-fuse. Stand-ins: the GPU (a fake nvidia-smi) and
// device-mapper under the rental's local disk (a loop device over a sparse file on this host's
// disk, fake_node_tools.h). Start the two throwaway engines first:
//
//   eval "$(CEPH_TEST_OSD_GB=8 bash scripts/ceph-test-cluster.sh start /tmp/cb)"  # CEPH_CONF=...
//   eval "$(bash scripts/docker-test-env.sh start /tmp/db)"                       # DOCKER_HOST=...
//   build/bench/storage/ceph_volume_bench
//
// BM_VolumePostToMountedInContainer: from the answer of POST /v1/volumes (1 TB) through its attach
//   to the running rental to the first `ssh ... grep /mnt/<name> /proc/mounts` that sees the
//   ceph-fuse mount (the agent makes the container again with the mount; ssh retried every 100 ms).
// BM_Snapshot1GB / BM_Restore1GB: a volume holding 1 GiB (written once from the container, fsynced):
//   POST /v1/snapshots until Ceph has it (`ceph.taken`), and POST /v1/snapshots/{id}/restore until
//   the clone is `ready` (Ceph copies the bytes: a clone is a full copy in CephFS); polled every
//   100 ms.
// BM_SequentialInContainer/0..2: 256 MiB written with dd (bs 4 MiB, conv=fsync) then read back
//   after the host dropped its page cache, inside the container: /mnt/big (the network volume: 3
//   replicas on 3 OSDs, which here share this host's one disk), /data/nvme0 (the rental's own
//   disk: ext4 on the loop device) and /root (the container's overlay2 root). dd's own MB/s.
//   ceph-fuse keeps a client cache of its own (200 MiB by default) that the host's drop does not
//   empty, so part of a volume read may come from it.
#include <benchmark/benchmark.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <thread>

#include "agent/inventory.h"
#include "agent/process.h"
#include "agent_process.h"
#include "fake_node_tools.h"
#include "harness.h"

namespace gpuhub::testing {
namespace {

using Steady = std::chrono::steady_clock;
constexpr const char* kPassword = "correct horse battery staple";
constexpr auto kStepLimit = std::chrono::seconds(300);

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

bool Until(const std::function<bool()>& condition, std::chrono::milliseconds every) {
  const auto deadline = Steady::now() + kStepLimit;
  while (Steady::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(every);
  }
  return false;
}

double Since(Steady::time_point t) { return std::chrono::duration<double>(Steady::now() - t).count(); }

// The server, the agent and one running rental, made once for all the benchmarks.
class World {
 public:
  // "" when ready, else why not.
  std::string Make() {
    const std::string docker_host = Env("DOCKER_HOST");
    const std::string image = Env("GPUHUB_TEST_SSHD_IMAGE", "gpuhub-test-sshd:bookworm");
    if (docker_host.rfind("unix://", 0) != 0) {
      return "DOCKER_HOST=unix://... is not set: scripts/docker-test-env.sh start DIR";
    }
    if (Env("CEPH_CONF").empty() || Env("CEPH_MON").empty()) {
      return "CEPH_CONF/CEPH_MON are not set: scripts/ceph-test-cluster.sh start DIR";
    }
    ServerOptions options;
    options.db = FreshDatabaseUrl("sqlite", dir_);
    options.clock = "real";
    options.config_extra =
        "[agents]\ndefault_image = \"" + image + "\"\n[rentals]\nprovisioning = \"agent\"\n" +
        "[storage.regions.IAD-1]\nceph_conf = \"" + Env("CEPH_CONF") + "\"\nceph_name = \"" +
        Env("CEPH_NAME", "client.admin") + "\"\nceph_keyring = \"" + Env("CEPH_KEYRING") +
        "\"\ncephfs = \"" + Env("CEPH_FS", "vols") + "\"\nmonitors = \"" + Env("CEPH_MON") + "\"\n";
    if (CreateAdmin(dir_, options).exit_code != 0) return "admin create failed";
    server_ = std::make_unique<ServerProcess>(dir_, options);
    if (!server_->Start()) return "gpuhub serve did not start";
    client_ = std::make_unique<HttpClient>(server_->port());
    const std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
    const std::string admin = LogInAdmin(*client_);
    customer_ = SignUpAndLogIn(*client_, "carl", kPassword, {"customer"});
    client_->Call("POST", "/v1/admin/credits",
                  {{"username", "carl"}, {"amount", "5000"}, {"currency", "USD"},
                   {"reason", "bench"}},
                  admin);
    key_ = dir_.path() + "/id_ed25519";
    auto keygen = agent::RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key_});
    if (!keygen.ok() || keygen->exit_code != 0) return "ssh-keygen failed";
    std::string pub;
    std::getline(std::ifstream(key_ + ".pub"), pub);
    if (client_->Call("POST", "/v1/ssh-keys", {{"public_key", pub}}, customer_).status != 201) {
      return "the SSH key was refused";
    }
    auto node = client_->Call("POST", "/v1/admin/nodes",
                              {{"gpu", "H100 SXM"}, {"region", "IAD-1"}, {"cards", 1}}, admin);
    if (node.status != 201) return "node: " + node.body;
    auto token = client_->Call("POST",
                               "/v1/admin/nodes/" +
                                   std::to_string(node.Json()["id"].get<long long>()) +
                                   "/enrolment-tokens",
                               nullptr, admin);
    if (token.status != 201) return "enrolment token: " + token.body;

    const std::string smi = dir_.path() + "/nvidia-smi";
    std::ofstream(smi) << "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) echo '"
                       << SmiLine(0, "GPU-5e11c0de-0000-4000-8000-000000000000")
                       << "' ;;\n  --query-remapped-rows=*) ;;\n  *) echo '| NVIDIA-SMI 550.54.15 "
                          "Driver Version: 550.54.15 CUDA Version: 12.4 |' ;;\nesac\n";
    ::chmod(smi.c_str(), 0755);
    const std::string tools = WriteFakeNodeTools(dir_.path(), dir_.path() + "/tools.log",
                                                 RealMapperDevices(dir_.path(), "2G"));
    const std::string config = dir_.path() + "/agent.toml";
    std::ofstream(config) << "state_dir = \"" << dir_.path() << "/agent-state\"\n"
                          << "public_host = \"127.0.0.1\"\n"
                          << "ssh_ports = \"19000-19009\"\n"
                          << "docker = \"unix:" << docker_host.substr(7) << "\"\n"
                          << "nvml_library = \"" << dir_.path() << "/no/libnvidia-ml.so.1\"\n"
                          << "nvidia_smi = \"" << smi << "\"\n"
                          << "disk_path = \"" << dir_.path() << "\"\n"
                          << "nvme_devices = [\"/dev/nvme0n1\"]\n[storage]\n"
                          << tools;
    auto enrolled = RunGpuhub({"agent", "enroll", "--server", url, "--token",
                               token.Json().value("token", ""), "--config", config},
                              "");
    if (enrolled.exit_code != 0) return "enrol: " + enrolled.output;
    agent_ = std::make_unique<AgentProcess>(config, dir_.path() + "/agent.log");
    if (!agent_->Start()) return "the agent did not start";

    auto order = client_->Call(
        "POST", "/v1/rentals",
        {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}, {"region", "IAD-1"}}, customer_);
    if (order.status != 201) return "rental: " + order.body;
    rental_ = order.Json()["id"];
    if (!Until([&] { return Run("true").first == 0; }, std::chrono::milliseconds(200))) {
      return "no SSH into the rental:\n" + agent_->Log();
    }
    return "";
  }
  ~World() {
    if (agent_) (void)agent_->Terminate();
    // Not the rental's loop device: the agent's release erases it; the test scripts' stop removes
    // the engines.
    RemoveRealMapperDevices(dir_.path());
  }

  json Get(const std::string& path) {
    return client_->Call("GET", path, nullptr, customer_).Json();
  }
  HttpResponse Post(const std::string& path, const json& body) {
    return client_->Call("POST", path, body, customer_);
  }
  HttpResponse Delete(const std::string& path) {
    return client_->Call("DELETE", path, nullptr, customer_);
  }
  // `ssh -p PORT root@127.0.0.1 COMMAND` into the rental: (exit code, stdout + stderr).
  std::pair<int, std::string> Run(const std::string& command) {
    json c = Get("/v1/rentals/" + std::to_string(rental_))["instance"]["connection"];
    if (!c["ssh"].is_string()) return {-1, "no SSH line yet"};
    const std::string line = c["ssh"];
    auto r = agent::RunProcess(
        {"ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
         "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR", "-i",
         key_, "-p", line.substr(7, line.find(' ', 7) - 7), "root@127.0.0.1", command},
        std::chrono::seconds(600));
    if (!r.ok()) return {-1, r.status().message()};
    return {r->exit_code, r->stdout_text + r->stderr_text};
  }
  bool Mounted(const std::string& name) {
    auto [code, out] = Run("grep -c ' /mnt/" + name + " fuse.ceph-fuse ' /proc/mounts");
    return code == 0 && out == "1\n";
  }
  // POST /v1/volumes then attach: the volume id, 0 on failure (with *error).
  long long CreateAndAttach(const std::string& name, std::string* error) {
    auto created = Post("/v1/volumes", {{"region", "IAD-1"}, {"size_tb", 1}, {"name", name}});
    if (created.status != 201) {
      *error = created.body;
      return 0;
    }
    const long long id = created.Json()["id"];
    // An attach is accepted once the volume is ready on Ceph.
    HttpResponse attached;
    if (!Until([&] {
          attached = Post("/v1/volumes/" + std::to_string(id) + "/attach", {{"rental_id", rental_}});
          return attached.status == 200;
        }, std::chrono::milliseconds(100))) {
      *error = "attach: " + attached.body;
      return 0;
    }
    return id;
  }
  void DetachAndDelete(long long id, const std::string& name) {
    Post("/v1/volumes/" + std::to_string(id) + "/detach", {{"rental_id", rental_}});
    Until([&] { return !Mounted(name) && Run("true").first == 0; }, std::chrono::milliseconds(200));
    Delete("/v1/volumes/" + std::to_string(id));
  }
  std::string AgentLog() { return agent_ ? agent_->Log() : ""; }

 private:
  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::unique_ptr<AgentProcess> agent_;
  std::string customer_, key_;
  long long rental_ = 0;
};

// Made by the first benchmark; destroyed at exit (the agent stopped).
std::unique_ptr<World> world;
std::string world_error;

bool Ready(benchmark::State& state) {
  if (world == nullptr && world_error.empty()) {
    world = std::make_unique<World>();
    world_error = world->Make();
  }
  if (!world_error.empty()) state.SkipWithError(world_error.c_str());
  return world_error.empty();
}

void BM_VolumePostToMountedInContainer(benchmark::State& state) {
  if (!Ready(state)) return;
  int n = 0;
  for (auto _ : state) {
    const std::string name = "m" + std::to_string(++n);
    const auto posted = Steady::now();
    std::string error;
    const long long id = world->CreateAndAttach(name, &error);
    if (id == 0) return state.SkipWithError(error.c_str());
    if (!Until([&] { return world->Mounted(name); }, std::chrono::milliseconds(100))) {
      return state.SkipWithError(("never mounted:\n" + world->AgentLog()).c_str());
    }
    state.SetIterationTime(Since(posted));
    world->DetachAndDelete(id, name);
  }
}

// The 1 GiB volume of the snapshot and sequential benchmarks, made once: its id.
long long BigVolume(benchmark::State& state) {
  static long long id = 0;
  if (id != 0) return id;
  std::string error;
  id = world->CreateAndAttach("big", &error);
  if (id == 0) {
    state.SkipWithError(error.c_str());
    return 0;
  }
  if (!Until([&] { return world->Mounted("big"); }, std::chrono::milliseconds(100))) {
    state.SkipWithError("/mnt/big never mounted");
    return id = 0;
  }
  auto [code, out] = world->Run(
      "dd if=/dev/urandom of=/mnt/big/gib bs=4M count=256 conv=fsync status=none");
  if (code != 0) {
    state.SkipWithError(("writing 1 GiB: " + out).c_str());
    return id = 0;
  }
  return id;
}

void SnapshotAndRestore(benchmark::State& state, bool restore) {
  if (!Ready(state)) return;
  const long long volume = BigVolume(state);
  if (volume == 0) return;
  for (auto _ : state) {
    auto t = Steady::now();
    auto snap = world->Post("/v1/snapshots", {{"volume_id", volume}});
    if (snap.status != 201) return state.SkipWithError(snap.body.c_str());
    const std::string path = "/v1/snapshots/" + std::to_string(snap.Json()["id"].get<long long>());
    if (!Until([&] { return world->Get(path)["ceph"]["taken"] == true; },
               std::chrono::milliseconds(100))) {
      return state.SkipWithError("the snapshot was never taken");
    }
    if (!restore) {
      state.SetIterationTime(Since(t));
      world->Delete(path);
      continue;
    }
    t = Steady::now();
    auto copy = world->Post(path + "/restore", {{"size_tb", 1}});
    if (copy.status != 201) return state.SkipWithError(copy.body.c_str());
    const std::string vpath = "/v1/volumes/" + std::to_string(copy.Json()["id"].get<long long>());
    if (!Until([&] { return world->Get(vpath)["provisioning"]["state"] == "ready"; },
               std::chrono::milliseconds(100))) {
      return state.SkipWithError("the clone never became ready");
    }
    state.SetIterationTime(Since(t));
    // Not timed (manual time): room on the OSDs for the next clone.
    world->Delete(vpath);
    world->Delete(path);
  }
}
void BM_Snapshot1GB(benchmark::State& state) { SnapshotAndRestore(state, false); }
void BM_Restore1GB(benchmark::State& state) { SnapshotAndRestore(state, true); }

// dd's "..., 1.23 s, 218 MB/s" as MB/s (decimal megabytes, as dd prints them).
double DdRate(const std::string& out) {
  static const std::regex rate(R"(copied, ([0-9.]+) s, ([0-9.]+) ([kMG]?B)/s)");
  std::smatch m;
  if (!std::regex_search(out, m, rate)) return -1;
  const double value = std::stod(m[2]);
  const std::string unit = m[3];
  return unit == "GB" ? value * 1000 : unit == "kB" ? value / 1000 : unit == "B" ? value / 1e6 : value;
}

void BM_SequentialInContainer(benchmark::State& state) {
  if (!Ready(state)) return;
  if (BigVolume(state) == 0) return;
  const char* dirs[] = {"/mnt/big", "/data/nvme0", "/root"};
  const std::string file = std::string(dirs[state.range(0)]) + "/seq";
  state.SetLabel(dirs[state.range(0)]);
  double write_sum = 0, read_sum = 0;
  for (auto _ : state) {
    auto [wc, wout] = world->Run("dd if=/dev/zero of=" + file + " bs=4M count=64 conv=fsync 2>&1");
    const double w = DdRate(wout);
    if (wc != 0 || w < 0) return state.SkipWithError(("write: " + wout).c_str());
    auto drop = agent::RunProcess({"sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"});
    (void)drop;
    auto [rc, rout] = world->Run("dd if=" + file + " of=/dev/null bs=4M 2>&1; rm -f " + file);
    const double r = DdRate(rout);
    if (rc != 0 || r < 0) return state.SkipWithError(("read: " + rout).c_str());
    write_sum += w;
    read_sum += r;
  }
  state.counters["write_MBps"] = write_sum / static_cast<double>(state.iterations());
  state.counters["read_MBps"] = read_sum / static_cast<double>(state.iterations());
}

BENCHMARK(BM_VolumePostToMountedInContainer)
    ->Iterations(5)
    ->UseManualTime()
    ->Unit(benchmark::kSecond);
BENCHMARK(BM_Snapshot1GB)->Iterations(3)->UseManualTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_Restore1GB)->Iterations(3)->UseManualTime()->Unit(benchmark::kSecond);
BENCHMARK(BM_SequentialInContainer)
    ->DenseRange(0, 2)
    ->Iterations(3)
    ->Unit(benchmark::kSecond);

}  // namespace
}  // namespace gpuhub::testing

BENCHMARK_MAIN();
