// The fixture of the real-Docker-engine suites (agent_real_engine_test, agent_ceph_e2e_test):
// a throwaway dockerd of the test binary's own (scripts/docker-test-env.sh: Debian's docker.io,
// overlay2, a bridge network, published ports, an sshd image built from Debian packages) started
// once per suite, a real `gpuhub serve` (port 0, manual clock) and the real `gpuhub agent`. What
// is fake: the GPU alone — a fake nvidia-smi script and a stand-in
// `nvidia-container-runtime-hook` through which Docker's real `nvidia` device request passes (it
// records the NVIDIA_VISIBLE_DEVICES it was given). Customers log in with
// `ssh -p PORT root@127.0.0.1` and their own key (ssh-keygen'd here).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "agent/process.h"
#include "agent_fixture.h"
#include "core/strings.h"
#include "fake_node_tools.h"

namespace gpuhub::testing {

inline constexpr const char* kDockerCli = "/usr/bin/docker";  // Debian's; /usr/local/bin may differ

// The dockerd of this test binary, started once (SetUpTestSuite) by scripts/docker-test-env.sh.
struct Engine {
  std::string dir;
  std::string host;      // "unix:///tmp/dk.XXXX/docker.sock"
  std::string image;     // gpuhub-test-sshd:bookworm
  std::string hook_log;  // one line per container start: "<id> <NVIDIA_VISIBLE_DEVICES>"
  std::string skip;      // why no dockerd can run here (the script's exit 3)
  std::string error;     // why the environment could not be made (a failure, not a skip)
};
inline Engine* engine = nullptr;

inline std::string DockerTestEnvScript() {
  return std::string(GPUHUB_SOURCE_DIR) + "/scripts/docker-test-env.sh";
}

// Runs the docker CLI against this binary's dockerd; stdout (trimmed), or "" with the error in
// *error.
inline std::string Docker(const std::vector<std::string>& args, std::string* error = nullptr) {
  std::vector<std::string> argv = {kDockerCli, "-H", engine->host};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = agent::RunProcess(argv, std::chrono::seconds(60));
  if (!r.ok() || r->exit_code != 0) {
    if (error) *error = r.ok() ? r->stderr_text : r.status().message();
    return "";
  }
  std::string out = r->stdout_text;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

struct Ssh {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

inline std::vector<std::string> SshArgs(const std::string& key, int port) {
  return {"ssh",
          "-F",
          "/dev/null",
          "-i",
          key,
          "-p",
          std::to_string(port),
          "-o",
          "BatchMode=yes",
          "-o",
          "IdentitiesOnly=yes",
          "-o",
          "StrictHostKeyChecking=no",
          "-o",
          "UserKnownHostsFile=/dev/null",
          "-o",
          "ConnectTimeout=5",
          "-o",
          "LogLevel=ERROR",
          "root@127.0.0.1"};
}

// `ssh -p PORT root@127.0.0.1 COMMAND` with `key`.
inline Ssh RunSsh(const std::string& key, int port, const std::string& command) {
  auto argv = SshArgs(key, port);
  argv.push_back(command);
  auto r = agent::RunProcess(argv, std::chrono::seconds(30));
  if (!r.ok()) return {-1, r.status().message()};
  return {r->exit_code, r->stdout_text + r->stderr_text};
}

// An interactive SSH session running `cat` remotely: what is written comes back while the
// session lives.
class SshSession {
 public:
  SshSession(const std::string& key, int port) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(out[1], STDERR_FILENO);
      ::close(in[1]);
      ::close(out[0]);
      auto args = SshArgs(key, port);
      args.push_back("cat");
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp("ssh", argv.data());
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~SshSession() {
    if (to_ >= 0) ::close(to_);
    if (from_ >= 0) ::close(from_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // Sends `line` and waits (up to 20 s) for it to come back; what came back so far.
  std::string Echo(const std::string& line) {
    const std::string sent = line + "\n";
    if (::write(to_, sent.data(), sent.size()) != static_cast<ssize_t>(sent.size())) return "";
    std::string got;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.find(sent) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{from_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(from_, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    received_ += got;
    return got;
  }
  bool Alive() { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  const std::string& received() const { return received_; }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string received_;
};

// Starts this binary's dockerd (once per suite: SetUpTestSuite) into `engine`; a machine where
// none can start leaves engine->skip set, a broken environment engine->error.
inline void StartEngine() {
  engine = new Engine;
  char templ[] = "/tmp/dk.XXXXXX";  // short: a unix socket path has 108 bytes
  if (::mkdtemp(templ) == nullptr) {
    engine->error = "mkdtemp failed";
    return;
  }
  engine->dir = templ;
  auto r = agent::RunProcess({"bash", DockerTestEnvScript(), "start", engine->dir},
                             std::chrono::minutes(10));
  if (!r.ok()) {
    engine->error = r.status().message();
    return;
  }
  if (r->exit_code == 3) {
    engine->skip = r->stderr_text;
    return;
  }
  if (r->exit_code != 0) {
    engine->error =
        "docker-test-env.sh start exited " + std::to_string(r->exit_code) + ": " + r->stderr_text;
    return;
  }
  std::cerr << r->stderr_text;
  for (const auto& line : Split(r->stdout_text, '\n')) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "DOCKER_HOST") engine->host = value;
    if (key == "GPUHUB_TEST_SSHD_IMAGE") engine->image = value;
    if (key == "GPUHUB_TEST_HOOK_LOG") engine->hook_log = value;
  }
  if (engine->host.empty() || engine->image.empty() || engine->hook_log.empty()) {
    engine->error = "docker-test-env.sh printed no environment: " + r->stdout_text;
  }
}

inline void StopEngine() {
  if (engine != nullptr && !engine->dir.empty()) {
    (void)agent::RunProcess({"bash", DockerTestEnvScript(), "stop", engine->dir},
                            std::chrono::minutes(2));
  }
  delete engine;
  engine = nullptr;
}

class AgentRealEngineTest : public AgentFixture {
 public:
  static void SetUpTestSuite() { StartEngine(); }
  static void TearDownTestSuite() { StopEngine(); }

 protected:
  void Configure(ServerOptions& options) override {
    // Every lease and rental runs the sshd image unless its bid names one.
    options.config_extra =
        "[agents]\ndefault_image = \"" + engine->image + "\"\n" + agents_extra_ + agents_config_;
  }
  void SetUp() override {
    if (!engine->skip.empty()) {
      GTEST_SKIP() << "\n*** NO REAL DOCKER ENGINE: the real-engine suite is SKIPPED ***\n"
                   << engine->skip;
    }
    ASSERT_TRUE(engine->error.empty()) << engine->error;
    // Ports of our own: other test binaries' dockerds publish on this host too. Below the
    // kernel's ephemeral range (32768 and up), which outgoing connections take ports from.
    const int first = 20000 + static_cast<int>(::getpid() % 1000) * 10;
    ssh_ports_ = std::to_string(first) + "-" + std::to_string(first + 9);
    ssh_ready_ms_ = 60'000;  // "running" when the container's real sshd greets, as in production
    // Leftovers of an earlier test of this process (ids restart at 1 on a fresh database).
    RemoveManagedContainers();
    std::ofstream(engine->hook_log, std::ios::trunc).flush();
    AgentFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    carl_key_ = NewKey("carl");
    customer_key_ = PublicKey(carl_key_);
  }
  void TearDown() override {
    AgentFixture::TearDown();
    if (engine != nullptr && engine->error.empty() && engine->skip.empty()) {
      RemoveManagedContainers();
    }
  }
  std::string DockerUrl() override {
    return "unix:" + engine->host.substr(std::string("unix://").size());
  }

  void RemoveManagedContainers() {
    std::string ids = Docker({"ps", "-aq", "--filter", "label=io.gpuhub.managed"});
    for (const auto& id : Split(ids, '\n')) {
      if (!id.empty()) Docker({"rm", "-f", "-v", id});
    }
  }
  // A new ed25519 key pair in the test's directory; the private key's path.
  std::string NewKey(const std::string& who) {
    const std::string path = dir_.path() + "/" + who + "_key";
    auto r = agent::RunProcess(
        {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who + "@test", "-f", path});
    EXPECT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->stderr_text : r.status().message());
    return path;
  }
  std::string PublicKey(const std::string& key) {
    std::ifstream in(key + ".pub");
    std::string line;
    std::getline(in, line);
    return line;
  }
  // "<id> <state> <started at>" of the container named `name`, "" when there is none.
  std::string Inspect(const std::string& name) {
    return Docker({"inspect", "-f", "{{.Id}} {{.State.Status}} {{.State.StartedAt}}", name});
  }
  std::string ContainerId(const std::string& name) {
    std::string i = Inspect(name);
    return i.substr(0, i.find(' '));
  }
  bool ContainerRunning(const std::string& name) {
    return Split(Inspect(name), ' ').size() == 3 && Split(Inspect(name), ' ')[1] == "running";
  }
  bool ContainerGone(const std::string& name) {
    return Docker({"ps", "-aq", "--filter", "name=^/" + name + "$"}).empty();
  }
  // The stand-in hook's lines, by container id: the GPUs each start was given.
  std::vector<std::pair<std::string, std::string>> HookLog() {
    std::vector<std::pair<std::string, std::string>> out;
    std::ifstream in(engine->hook_log);
    std::string line;
    while (std::getline(in, line)) {
      auto sp = line.find(' ');
      out.emplace_back(line.substr(0, sp), sp == std::string::npos ? "" : line.substr(sp + 1));
    }
    return out;
  }
  // Waits for the lease's connection line and for sshd to let the customer in; the port.
  int WaitForSsh(long long lease, const std::string& key) {
    int port = 0;
    EXPECT_TRUE(WaitFor(
        [&] {
          json c = Lease(lease)["connection"];
          if (c["state"] != "running" || !c["port"].is_number()) return false;
          port = c["port"].get<int>();
          return true;
        },
        std::chrono::seconds(60)))
        << Lease(lease).dump() << Context();
    if (port == 0) return 0;
    EXPECT_EQ(Lease(lease)["connection"]["ssh"],
              "ssh -p " + std::to_string(port) + " root@203.0.113.7");
    Ssh last;
    EXPECT_TRUE(WaitFor(
        [&] {
          last = RunSsh(key, port, "true");
          return last.exit_code == 0;
        },
        std::chrono::seconds(60)))
        << "ssh -p " << port << ": " << last.output << Context();
    return port;
  }
  // A 2-GPU machine whose agent runs and one 1-GPU lease the customer can log in to.
  void OneRunningLease(long long* lease, int* port) {
    ListMachineAndEnrol(2);
    StartAgent();
    ASSERT_TRUE(WaitFor([&] { return Online(2); }, std::chrono::seconds(60))) << Context();
    *lease = Buy(1);
    ASSERT_GT(*lease, 0);
    *port = WaitForSsh(*lease, carl_key_);
    ASSERT_GT(*port, 0);
  }
  std::string LeaseUuid(long long lease) {
    json l = Lease(lease);
    return AgentTestUuid(l["gpu_indices"][0].get<int>());
  }
  static std::string Name(long long lease) { return "gpuhub-lease-" + std::to_string(lease); }

  std::string agents_extra_;  // more [agents] keys
  std::string carl_key_;
};

class AgentRealEngineRentalTest : public AgentRealEngineTest {
 protected:
  void SetUp() override {
    agents_config_ = "[rentals]\nprovisioning = \"agent\"\n";
    AgentRealEngineTest::SetUp();
  }
  void TearDown() override {
    AgentRealEngineTest::TearDown();  // the containers first: their volumes are unmounted
    RemoveRealMapperDevices(dir_.path());
  }
  // The fake-cryptsetup path of the fake-Docker rental test whose `open` gives a real block
  // device (fake_node_tools.h).
  std::map<std::string, std::string> RealMapperDevices() {
    return testing::RealMapperDevices(dir_.path());
  }
};

}  // namespace gpuhub::testing
