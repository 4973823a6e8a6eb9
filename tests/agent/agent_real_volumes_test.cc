// Network volumes on a REAL Ceph cluster in REAL Docker containers, through the real agent binary:
// a throwaway one-host Ceph 16.2 cluster (scripts/ceph-test-cluster.sh: 1 mon, 1 mgr, 3 OSDs, 1
// MDS, CephFS `vols` of size 3), a throwaway dockerd (scripts/docker-test-env.sh, as
// agent_real_engine_test) and `gpuhub agent run` mounting with the real ceph-fuse. The customer
// logs in with `ssh -p PORT root@127.0.0.1` and writes under /mnt/<name>.
//
// What is fake: the control plane. The server side of network volumes (the subvolume, the cephx
// client of each attachment, the desired workload carrying it) is being built beside this work,
// so a small HTTP server in this test answers the agent's heartbeats with desired workloads the
// test writes, and the test makes the subvolume and the path-restricted cephx clients itself with
// the `ceph` CLI, as the server will. The GPU is the stand-in of docker-test-env.sh.
//
// Skipped, loudly, where no Ceph cluster or no dockerd can start (the scripts' exit 3).
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "agent/config.h"
#include "agent/process.h"
#include "agent_process.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/strings.h"
#include "engine/metrics.h"
#include "harness.h"
#include "http/router.h"
#include "http/server.h"

namespace gpuhub::testing {
namespace {

using agent::RunProcess;

constexpr const char* kDockerCli = "/usr/bin/docker";
constexpr const char* kUuid = "GPU-00000000-aaaa-bbbb-cccc-dddddddddddd";

std::string Source() { return std::string(GPUHUB_SOURCE_DIR); }

struct Env {
  std::string ceph_dir, ceph_conf, ceph_keyring, ceph_mon, ceph_fs;
  std::string docker_dir, docker_host, image;
  std::string skip, error;
};
Env* env = nullptr;

std::map<std::string, std::string> Lines(const std::string& out) {
  std::map<std::string, std::string> m;
  for (const auto& line : Split(out, '\n')) {
    auto eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// Runs a start script; the lines it printed, or the skip/error recorded in env.
std::map<std::string, std::string> StartScript(const std::string& script, const std::string& dir) {
  auto r = RunProcess({"bash", Source() + "/scripts/" + script, "start", dir},
                      std::chrono::minutes(10));
  if (!r.ok()) {
    env->error = script + ": " + r.status().message();
  } else if (r->exit_code == 3) {
    env->skip += r->stderr_text;
  } else if (r->exit_code != 0) {
    env->error = script + " exited " + std::to_string(r->exit_code) + ": " + r->stderr_text;
  } else {
    std::cerr << r->stderr_text;
    return Lines(r->stdout_text);
  }
  return {};
}

// /proc/self/mountinfo (core's ReadFile trusts st_size, which /proc files give as 0).
std::string MountInfo() {
  std::ifstream in("/proc/self/mountinfo");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// `ceph` as client.admin of the test cluster; stdout, or "" with a test failure.
std::string Ceph(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"ceph", "--conf", env->ceph_conf, "--name", "client.admin",
                                   "--keyring", env->ceph_keyring, "--connect-timeout", "20"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunProcess(argv, std::chrono::seconds(60));
  std::string words;
  for (const auto& a : args) words += a + " ";
  EXPECT_TRUE(r.ok() && r->exit_code == 0)
      << words << ": " << (r.ok() ? r->stderr_text : r.status().message());
  return r.ok() && r->exit_code == 0 ? Trim(r->stdout_text) : "";
}

std::string Docker(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kDockerCli, "-H", env->docker_host};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunProcess(argv, std::chrono::seconds(60));
  return r.ok() && r->exit_code == 0 ? Trim(r->stdout_text) : "";
}

struct Ssh {
  int exit_code = -1;
  std::string output;
};
Ssh RunSsh(const std::string& key, int port, const std::string& command) {
  auto r = RunProcess({"ssh", "-F", "/dev/null", "-i", key, "-p", std::to_string(port), "-o",
                       "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o",
                       "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o",
                       "ConnectTimeout=5", "-o", "LogLevel=ERROR", "root@127.0.0.1", command},
                      std::chrono::seconds(30));
  if (!r.ok()) return {-1, r.status().message()};
  return {r->exit_code, r->stdout_text + r->stderr_text};
}

// The control plane as the agent sees it: POST /v1/agent/heartbeat answered with the desired
// workloads the test sets (and the states the agent reported kept), POST /v1/agent/usage.
class FakeControlPlane {
 public:
  FakeControlPlane() {
    router_.Add("POST", "/v1/agent/heartbeat", [this](const http::Request& r,
                                                      http::Responder respond) {
      std::lock_guard<std::mutex> lock(mu_);
      json body = json::parse(r.body, nullptr, false);
      if (body.is_object()) {
        for (const auto& w : body["workloads"]) states_[w["id"].get<std::string>()] = w;
      }
      ++heartbeats_;
      json answer = {{"host_id", 1},
                     {"server_time", FormatTimestamp(RealClock().NowMicros())},
                     {"heartbeat_interval_seconds", 1},
                     {"workloads", workloads_}};
      respond(http::Response::Json(200, answer.dump()));
    });
    router_.Add("POST", "/v1/agent/usage", [](const http::Request&, http::Responder respond) {
      respond(http::Response::Json(200, "{}"));
    });
    http::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.handle_signals = false;
    server_ = std::make_unique<http::Server>(options, router_, metrics_);
    ok_ = server_->Listen().ok();
    if (ok_) thread_ = std::thread([this] { server_->Run(nullptr); });
  }
  ~FakeControlPlane() {
    if (ok_) {
      server_->Shutdown();
      thread_.join();
    }
  }
  bool ok() const { return ok_; }
  int port() const { return server_->port(); }
  void SetWorkloads(json workloads) {
    std::lock_guard<std::mutex> lock(mu_);
    workloads_ = std::move(workloads);
  }
  json State(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = states_.find(id);
    return it == states_.end() ? json() : it->second;
  }
  long long heartbeats() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }

 private:
  http::Router router_;
  engine::MetricsRegistry metrics_;
  std::unique_ptr<http::Server> server_;
  std::thread thread_;
  bool ok_ = false;
  std::mutex mu_;
  json workloads_ = json::array();
  std::map<std::string, json> states_;
  long long heartbeats_ = 0;
};

class AgentRealVolumesTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    spdlog::set_level(spdlog::level::warn);  // not the fake control plane's request lines
    env = new Env;
    char ceph[] = "/tmp/cv.XXXXXX", docker[] = "/tmp/dv.XXXXXX";  // short: socket paths
    if (::mkdtemp(ceph) == nullptr || ::mkdtemp(docker) == nullptr) {
      env->error = "mkdtemp failed";
      return;
    }
    env->ceph_dir = ceph;
    env->docker_dir = docker;
    auto c = StartScript("ceph-test-cluster.sh", env->ceph_dir);
    if (!env->skip.empty() || !env->error.empty()) return;
    env->ceph_conf = c["CEPH_CONF"];
    env->ceph_keyring = c["CEPH_KEYRING"];
    env->ceph_mon = c["CEPH_MON"];
    env->ceph_fs = c["CEPH_FS"];
    auto d = StartScript("docker-test-env.sh", env->docker_dir);
    if (!env->skip.empty() || !env->error.empty()) return;
    env->docker_host = d["DOCKER_HOST"];
    env->image = d["GPUHUB_TEST_SSHD_IMAGE"];
    if (env->ceph_mon.empty() || env->docker_host.empty() || env->image.empty()) {
      env->error = "the scripts printed no environment";
    }
  }
  static void TearDownTestSuite() {
    if (env == nullptr) return;
    if (!env->docker_dir.empty()) {
      (void)RunProcess({"bash", Source() + "/scripts/docker-test-env.sh", "stop", env->docker_dir},
                       std::chrono::minutes(2));
    }
    if (!env->ceph_dir.empty()) {
      (void)RunProcess({"bash", Source() + "/scripts/ceph-test-cluster.sh", "stop", env->ceph_dir},
                       std::chrono::minutes(2));
    }
    delete env;
    env = nullptr;
  }

 protected:
  void SetUp() override {
    if (!env->skip.empty()) {
      GTEST_SKIP() << "\n*** NO CEPH CLUSTER OR NO DOCKER ENGINE: the real-volumes suite is "
                      "SKIPPED ***\n"
                   << env->skip;
    }
    ASSERT_TRUE(env->error.empty()) << env->error;
    ASSERT_TRUE(plane_.ok());
    state_ = dir_.path() + "/agent-state";
    volumes_ = state_ + "/volumes";
    key_ = dir_.path() + "/carl_key";
    auto k = RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "carl", "-f", key_});
    ASSERT_TRUE(k.ok() && k->exit_code == 0);
    std::ifstream pub(key_ + ".pub");
    std::getline(pub, public_key_);
    // The fake nvidia-smi: one GPU.
    const std::string smi = dir_.path() + "/nvidia-smi";
    std::ofstream(dir_.path() + "/gpus.csv") << SmiLine(0, kUuid);
    std::ofstream(smi) << "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) cat " << dir_.path()
                       << "/gpus.csv ;;\n  --query-remapped-rows=*) ;;\n  *) echo '| NVIDIA-SMI "
                          "550.54.15 Driver Version: 550.54.15 CUDA Version: 12.4 |' ;;\nesac\n";
    ::chmod(smi.c_str(), 0755);
    // Below 20000: clear of the kernel's ephemeral range (32768 and up), of the Ceph daemons' (30000
    // and up) and of agent_real_engine_test's (20000-29999).
    const int first = 10000 + static_cast<int>(::getpid() % 1000) * 10;
    config_ = dir_.path() + "/agent.toml";
    std::ofstream(config_) << "state_dir = \"" << state_ << "\"\n"
                           << "server = \"http://127.0.0.1:" << plane_.port() << "\"\n"
                           << "public_host = \"127.0.0.1\"\n"
                           << "ssh_ports = \"" << first << "-" << first + 9 << "\"\n"
                           << "docker = \"unix:"
                           << env->docker_host.substr(std::string("unix://").size()) << "\"\n"
                           << "nvml_library = \"" << dir_.path() << "/no/libnvidia-ml.so.1\"\n"
                           << "nvidia_smi = \"" << smi << "\"\n"
                           << "disk_path = \"" << dir_.path() << "\"\n"
                           << "heartbeat_interval_ms = 200\n"
                           << "desired_wait_seconds = 0\n"
                           << "ssh_ready_timeout_ms = 60000\n"
                           << "usage_interval_ms = 60000\n"
                           << "reconcile_interval_ms = 100\n";
    ASSERT_TRUE(agent::WriteCredential(state_, {"http://127.0.0.1:" + std::to_string(plane_.port()),
                                                "gha_" + std::string(64, 'a'), 1, "machine", 1})
                    .ok());
  }
  void TearDown() override {
    if (agent_) agent_->Kill();
    if (env == nullptr || !env->skip.empty() || !env->error.empty()) return;
    const std::string ids = Docker({"ps", "-aq", "--filter", "label=io.gpuhub.managed"});
    for (const auto& id : Split(ids, '\n')) {
      if (!id.empty()) Docker({"rm", "-f", id});
    }
    // While the cluster still runs: a ceph-fuse whose cluster is gone does not end.
    for (const auto& [name, point] : Mounts()) {
      auto r = RunProcess({"umount", point});
      if (!r.ok() || r->exit_code != 0) (void)RunProcess({"umount", "-l", point});
    }
  }

  void StartAgent() {
    agent_ = std::make_unique<AgentProcess>(config_, dir_.path() + "/agent.log");
    ASSERT_TRUE(agent_->Start());
  }
  std::string Log() { return agent_ ? agent_->Log() : ""; }

  // A subvolume of `bytes` (its quota); its path.
  std::string Volume(const std::string& name, long long bytes) {
    Ceph({"fs", "subvolume", "create", env->ceph_fs, name, "--size", std::to_string(bytes)});
    return Ceph({"fs", "subvolume", "getpath", env->ceph_fs, name});
  }
  // A cephx client restricted to `path`, as the server makes one per attachment; its key.
  std::string Authorize(const std::string& client, const std::string& path) {
    Ceph({"fs", "authorize", env->ceph_fs, "client." + client, path, "rw"});
    return Ceph({"auth", "get-key", "client." + client});
  }
  static json NetworkVolume(long long id, const std::string& name, const std::string& path,
                            const std::string& client, const std::string& key, bool ro) {
    std::string mon = env->ceph_mon;
    return {{"id", id},         {"name", name}, {"mount", "/mnt/" + name},
            {"monitors", mon},  {"path", path}, {"client", client},
            {"key", key},       {"read_only", ro}};
  }
  json Workload(const std::string& id, json volumes) {
    return {{"id", id},
            {"image", env->image},
            {"gpu_uuids", {kUuid}},
            {"ssh_authorized_keys", {public_key_}},
            {"not_after", FormatTimestamp(RealClock().NowMicros() + 3600LL * 1'000'000)},
            {"cpus", 1},
            {"memory_gb", 1},
            {"network_volumes", std::move(volumes)}};
  }
  // Waits until the agent reports `id` running and its sshd lets the customer in; the port.
  int WaitForSsh(const std::string& id) {
    int port = 0;
    EXPECT_TRUE(WaitFor(
        [&] {
          json s = plane_.State(id);
          if (!s.is_object() || s["state"] != "running" || s["ssh_port"].get<int>() == 0) {
            return false;
          }
          port = s["ssh_port"].get<int>();
          return RunSsh(key_, port, "true").exit_code == 0;
        },
        std::chrono::seconds(90)))
        << id << ": " << plane_.State(id).dump() << "\nagent log:\n" << Log();
    return port;
  }
  std::string ContainerId(const std::string& workload) {
    return Docker({"inspect", "-f", "{{.Id}}", "gpuhub-" + workload});
  }
  // The Ceph mounts under the agent's volumes directory: dir name -> mount point.
  std::map<std::string, std::string> Mounts() {
    std::map<std::string, std::string> out;
    for (const auto& line : Split(MountInfo(), '\n')) {
      auto f = Split(line, ' ');
      if (f.size() < 10 || f[4].rfind(volumes_ + "/", 0) != 0) continue;
      if (line.find(" - fuse.ceph-fuse ") == std::string::npos) continue;
      out[f[4].substr(volumes_.size() + 1)] = f[4];
    }
    return out;
  }
  bool MountedReadOnly(const std::string& dir) {
    for (const auto& line : Split(MountInfo(), '\n')) {
      auto f = Split(line, ' ');
      if (f.size() > 5 && f[4] == volumes_ + "/" + dir) return f[5].rfind("ro,", 0) == 0;
    }
    return false;
  }
  // The pids of the ceph-fuse processes serving `dir`.
  std::vector<std::string> FusePids(const std::string& dir) {
    std::vector<std::string> out;
    auto r = RunProcess({"pgrep", "-f", "ceph-fuse.* " + volumes_ + "/" + dir + "$"});
    if (r.ok()) {
      for (const auto& p : Split(Trim(r->stdout_text), '\n')) {
        if (!p.empty()) out.push_back(p);
      }
    }
    return out;
  }
  // The agent's own figures: after_ms of each event=network_volume_mounted line.
  void PrintMountTimes() {
    std::string out;
    for (const auto& line : Split(Log(), '\n')) {
      if (line.find("event=network_volume_mounted") == std::string::npos) continue;
      auto at = line.find("after_ms=");
      if (at != std::string::npos) out += " " + line.substr(at + 9) + " ms";
    }
    std::cerr << "ceph-fuse mounts (the agent's after_ms):" << out << "\n";
  }
  int Count(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  TempDir dir_;
  FakeControlPlane plane_;
  std::unique_ptr<AgentProcess> agent_;
  std::string state_, volumes_, config_, key_, public_key_;
};

// The life of a shared volume: written by one customer container, read by a second attached to
// it, read-only for the second (a write fails), the agent SIGKILLed and restarted (it adopts the
// mounts and containers, mounts nothing twice), detached from the first (the mount leaves the
// host and the container), and a mount Ceph refuses reported with its words.
TEST_F(AgentRealVolumesTest, AVolumeIsSharedMadeReadOnlyAdoptedAndDetached) {
  const std::string path = Volume("vol-7", 1LL << 30);
  ASSERT_EQ(path.rfind("/volumes/_nogroup/vol-7/", 0), 0u) << path;
  const std::string key1 = Authorize("gpuhub-vol7-l1", path);
  const std::string key2 = Authorize("gpuhub-vol7-l2", path);
  ASSERT_FALSE(key1.empty());
  ASSERT_FALSE(key2.empty());

  // 1. lease-1 with the volume read-write: the customer writes a file under /mnt/data.
  plane_.SetWorkloads(
      {Workload("lease-1", {NetworkVolume(7, "data", path, "gpuhub-vol7-l1", key1, false)})});
  const auto started = std::chrono::steady_clock::now();
  StartAgent();
  int port1 = WaitForSsh("lease-1");
  ASSERT_GT(port1, 0);
  std::cerr << "agent start to a login with the volume mounted: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - started)
                   .count()
            << " ms\n";
  for (const auto& line : Split(Log(), '\n')) {
    if (line.find("event=workload_failed") != std::string::npos) std::cerr << line << "\n";
  }
  Ssh w = RunSsh(key_, port1, "echo written-by-lease-1 > /mnt/data/hello && cat /mnt/data/hello "
                              "&& grep ' /mnt/data ' /proc/self/mountinfo | grep -c ceph-fuse");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_EQ(w.output, "written-by-lease-1\n1\n");
  EXPECT_EQ(Mounts(), (std::map<std::string, std::string>{
                          {"7-gpuhub-vol7-l1", volumes_ + "/7-gpuhub-vol7-l1"}}));
  // The key: in a 0600 keyring only; not in desired.json, the agent's log or Docker's records.
  struct stat st {};
  ASSERT_EQ(::stat((volumes_ + "/7-gpuhub-vol7-l1.keyring").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto cache = ReadFile(state_ + "/desired.json", 1 << 20);
  ASSERT_TRUE(cache.ok());
  EXPECT_NE(cache->find(path), std::string::npos);
  EXPECT_EQ(cache->find(key1), std::string::npos) << *cache;
  EXPECT_EQ(Log().find(key1), std::string::npos);
  EXPECT_EQ(Docker({"inspect", "gpuhub-lease-1"}).find(key1), std::string::npos);
  EXPECT_EQ(Docker({"inspect", "-f", "{{index .Config.Labels \"io.gpuhub.volumes\"}}",
                    "gpuhub-lease-1"}),
            "7:gpuhub-vol7-l1:rw");
  // The data is in Ceph: the subvolume's used bytes count it.
  EXPECT_NE(Ceph({"fs", "subvolume", "info", env->ceph_fs, "vol-7"}).find("\"bytes_quota\": "
                                                                          "1073741824"),
            std::string::npos);

  // 2. lease-2, another container attached to the same volume with a client of its own, reads it.
  json both = {
      Workload("lease-1", {NetworkVolume(7, "data", path, "gpuhub-vol7-l1", key1, false)}),
      Workload("lease-2", {NetworkVolume(7, "data", path, "gpuhub-vol7-l2", key2, false)})};
  plane_.SetWorkloads(both);
  int port2 = WaitForSsh("lease-2");
  ASSERT_GT(port2, 0);
  Ssh r = RunSsh(key_, port2, "cat /mnt/data/hello && echo from-lease-2 > /mnt/data/reply");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "written-by-lease-1\n");
  EXPECT_EQ(RunSsh(key_, port1, "cat /mnt/data/reply").output, "from-lease-2\n");
  EXPECT_EQ(Mounts().size(), 2u);

  // 3. Read-only for lease-2: its container is made again on a read-only mount; a write fails.
  const std::string id2 = ContainerId("lease-2");
  both[1]["network_volumes"][0]["read_only"] = true;
  plane_.SetWorkloads(both);
  ASSERT_TRUE(WaitFor([&] { return !ContainerId("lease-2").empty() &&
                                   ContainerId("lease-2") != id2; },
                      std::chrono::seconds(60)))
      << Log();
  port2 = WaitForSsh("lease-2");
  Ssh ro = RunSsh(key_, port2, "cat /mnt/data/hello; touch /mnt/data/nope");
  EXPECT_NE(ro.exit_code, 0) << ro.output;
  EXPECT_NE(ro.output.find("written-by-lease-1\n"), std::string::npos) << ro.output;
  EXPECT_NE(ro.output.find("Read-only file system"), std::string::npos) << ro.output;
  EXPECT_TRUE(MountedReadOnly("7-gpuhub-vol7-l2"));
  EXPECT_FALSE(MountedReadOnly("7-gpuhub-vol7-l1"));
  EXPECT_EQ(Docker({"inspect", "-f", "{{index .Config.Labels \"io.gpuhub.volumes\"}}",
                    "gpuhub-lease-2"}),
            "7:gpuhub-vol7-l2:ro");
  EXPECT_EQ(RunSsh(key_, port1, "echo still-rw > /mnt/data/rw && cat /mnt/data/rw").output,
            "still-rw\n")
      << "lease-1 keeps its read-write mount";

  // 4. The agent SIGKILLed and restarted: same containers, the same ceph-fuse processes, no mount.
  const std::string id1 = ContainerId("lease-1");
  const std::string id2ro = ContainerId("lease-2");
  const auto fuse1 = FusePids("7-gpuhub-vol7-l1");
  const auto fuse2 = FusePids("7-gpuhub-vol7-l2");
  EXPECT_EQ(fuse1.size(), 1u);
  EXPECT_EQ(fuse2.size(), 1u);
  agent_->Kill();
  const int mounted_before = Count(Log(), "event=network_volume_mounted");
  const long long beats = plane_.heartbeats();
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return plane_.heartbeats() > beats + 10; }, std::chrono::seconds(30)));
  EXPECT_EQ(ContainerId("lease-1"), id1);
  EXPECT_EQ(ContainerId("lease-2"), id2ro);
  EXPECT_EQ(FusePids("7-gpuhub-vol7-l1"), fuse1);
  EXPECT_EQ(FusePids("7-gpuhub-vol7-l2"), fuse2);
  EXPECT_EQ(Count(Log(), "event=network_volume_mounted"), mounted_before) << Log();
  EXPECT_EQ(RunSsh(key_, port1, "cat /mnt/data/hello").output, "written-by-lease-1\n");

  // 5. Detached from lease-1: its container is made again without it, and its mount leaves the
  // host (keyring and mount point too); lease-2 still reads.
  both[0]["network_volumes"] = json::array();
  plane_.SetWorkloads(both);
  ASSERT_TRUE(WaitFor([&] { return !Mounts().count("7-gpuhub-vol7-l1"); },
                      std::chrono::seconds(60)))
      << Log();
  port1 = WaitForSsh("lease-1");
  EXPECT_NE(ContainerId("lease-1"), id1);
  Ssh gone = RunSsh(key_, port1, "ls /mnt/data/hello");
  EXPECT_NE(gone.exit_code, 0) << gone.output;
  EXPECT_NE(::access((volumes_ + "/7-gpuhub-vol7-l1.keyring").c_str(), F_OK), 0);
  EXPECT_NE(::access((volumes_ + "/7-gpuhub-vol7-l1").c_str(), F_OK), 0);
  EXPECT_TRUE(FusePids("7-gpuhub-vol7-l1").empty()) << "its ceph-fuse ended";
  EXPECT_EQ(RunSsh(key_, port2, "cat /mnt/data/hello").output, "written-by-lease-1\n");

  // 6. A mount Ceph refuses (a client not allowed that path): lease-3 failed with Ceph's words,
  // no container; the others untouched. Then lease-2 released: its mount goes with it.
  const std::string other = Volume("vol-8", 1LL << 30);
  json three = both;
  three.push_back(
      Workload("lease-3", {NetworkVolume(8, "other", other, "gpuhub-vol7-l2", key2, false)}));
  plane_.SetWorkloads(three);
  ASSERT_TRUE(WaitFor([&] { return plane_.State("lease-3")["state"] == "failed"; },
                      std::chrono::seconds(60)))
      << Log();
  const std::string detail = plane_.State("lease-3")["detail"];
  EXPECT_NE(detail.find("mounting network volume 8 failed"), std::string::npos) << detail;
  EXPECT_NE(detail.find("Operation not permitted"), std::string::npos) << detail;
  EXPECT_TRUE(ContainerId("lease-3").empty());
  EXPECT_FALSE(Mounts().count("8-gpuhub-vol7-l2"));
  plane_.SetWorkloads({three[0]});
  ASSERT_TRUE(WaitFor([&] { return Mounts().empty() && ContainerId("lease-2").empty(); },
                      std::chrono::seconds(60)))
      << Log();
  EXPECT_EQ(Log().find(key2), std::string::npos);
  // The data stays in Ceph: a new attachment would read it (the volume outlives its leases).
  const std::string key3 = Authorize("gpuhub-vol7-l3", path);
  plane_.SetWorkloads({three[0], Workload("lease-4", {NetworkVolume(7, "data", path,
                                                                    "gpuhub-vol7-l3", key3,
                                                                    true)})});
  int port4 = WaitForSsh("lease-4");
  EXPECT_EQ(RunSsh(key_, port4, "cat /mnt/data/hello /mnt/data/reply").output,
            "written-by-lease-1\nfrom-lease-2\n");
  PrintMountTimes();
}

// The subvolume's size is enforced inside the container (ceph-fuse's client quota: EDQUOT), and
// a ceph-fuse that dies under a running container (its mount answers ENOTCONN) makes the agent
// build the container again on a fresh mount, where the data is still there.
TEST_F(AgentRealVolumesTest, AFullVolumeRefusesWritesAndALostMountIsMadeAgain) {
  const std::string path = Volume("vol-9", 8LL << 20);
  const std::string key = Authorize("gpuhub-vol9-l1", path);
  ASSERT_FALSE(key.empty());
  plane_.SetWorkloads(
      {Workload("lease-1", {NetworkVolume(9, "small", path, "gpuhub-vol9-l1", key, false)})});
  StartAgent();
  int port = WaitForSsh("lease-1");
  ASSERT_GT(port, 0);
  Ssh full = RunSsh(key_, port, "echo kept > /mnt/small/kept; "
                                "dd if=/dev/zero of=/mnt/small/big bs=1M count=32 2>&1; sync");
  EXPECT_NE(full.output.find("Disk quota exceeded"), std::string::npos) << full.output;
  EXPECT_EQ(RunSsh(key_, port, "rm /mnt/small/big && cat /mnt/small/kept").output, "kept\n");

  const std::string id = ContainerId("lease-1");
  const auto pids = FusePids("9-gpuhub-vol9-l1");
  ASSERT_EQ(pids.size(), 1u);
  ASSERT_EQ(::kill(std::stoi(pids[0]), SIGKILL), 0);
  ASSERT_TRUE(WaitFor([&] { return !ContainerId("lease-1").empty() &&
                                   ContainerId("lease-1") != id; },
                      std::chrono::seconds(60)))
      << Log();
  port = WaitForSsh("lease-1");
  // The file's caps are held by the dead client's session: the MDS hands them over once that
  // session goes stale (mds session_timeout, 60 s), so the first read may wait that long.
  const auto killed = std::chrono::steady_clock::now();
  Ssh read;
  EXPECT_TRUE(WaitFor(
      [&] {
        read = RunSsh(key_, port, "timeout 20 cat /mnt/small/kept");
        return read.output == "kept\n";
      },
      std::chrono::seconds(150)))
      << read.output;
  std::cerr << "the first read on the new mount after ceph-fuse was killed: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - killed)
                   .count()
            << " ms\n";
  const auto now = FusePids("9-gpuhub-vol9-l1");
  EXPECT_EQ(now.size(), 1u);
  EXPECT_NE(now, pids);
  EXPECT_NE(Log().find("why=network_volumes_changed"), std::string::npos) << Log();
  PrintMountTimes();
}

}  // namespace
}  // namespace gpuhub::testing
