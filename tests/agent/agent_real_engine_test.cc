// The host agent on the real Docker engine, end to end: a real `gpuhub serve` (port 0, manual
// clock), the real `gpuhub agent` binary and a throwaway dockerd of this test binary's own
// (scripts/docker-test-env.sh: Debian's docker.io, overlay2, a bridge network, published ports, an
// sshd image built from Debian packages). What is fake: the GPU alone — a fake nvidia-smi script
// and a stand-in `nvidia-container-runtime-hook` through which Docker's real `nvidia` device
// request passes (it records the NVIDIA_VISIBLE_DEVICES it was given). Customers log in with
// `ssh -p PORT root@127.0.0.1` and their own key (ssh-keygen'd here).
//
// Each test binary starts its own dockerd (the agent removes the managed containers it does not
// want: two agents never share one); skipped, loudly, only where no dockerd can start.
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

namespace gpuhub::testing {
namespace {

using agent::RunProcess;

constexpr const char* kDockerCli = "/usr/bin/docker";  // Debian's; /usr/local/bin may differ

// The dockerd of this test binary, started once (SetUpTestSuite) by scripts/docker-test-env.sh.
struct Engine {
  std::string dir;
  std::string host;      // "unix:///tmp/dk.XXXX/docker.sock"
  std::string image;     // gpuhub-test-sshd:bookworm
  std::string hook_log;  // one line per container start: "<id> <NVIDIA_VISIBLE_DEVICES>"
  std::string skip;      // why no dockerd can run here (the script's exit 3)
  std::string error;     // why the environment could not be made (a failure, not a skip)
};
Engine* engine = nullptr;

std::string Script() { return std::string(GPUHUB_SOURCE_DIR) + "/scripts/docker-test-env.sh"; }

// Runs the docker CLI against this binary's dockerd; stdout (trimmed), or "" with the error in
// *error.
std::string Docker(const std::vector<std::string>& args, std::string* error = nullptr) {
  std::vector<std::string> argv = {kDockerCli, "-H", engine->host};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunProcess(argv, std::chrono::seconds(60));
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

std::vector<std::string> SshArgs(const std::string& key, int port) {
  return {"ssh", "-F", "/dev/null", "-i", key, "-p", std::to_string(port), "-o", "BatchMode=yes",
          "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o",
          "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
          "root@127.0.0.1"};
}

// `ssh -p PORT root@127.0.0.1 COMMAND` with `key`.
Ssh RunSsh(const std::string& key, int port, const std::string& command) {
  auto argv = SshArgs(key, port);
  argv.push_back(command);
  auto r = RunProcess(argv, std::chrono::seconds(30));
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

class AgentRealEngineTest : public AgentFixture {
 public:
  static void SetUpTestSuite() {
    engine = new Engine;
    char templ[] = "/tmp/dk.XXXXXX";  // short: a unix socket path has 108 bytes
    if (::mkdtemp(templ) == nullptr) {
      engine->error = "mkdtemp failed";
      return;
    }
    engine->dir = templ;
    auto r = RunProcess({"bash", Script(), "start", engine->dir}, std::chrono::minutes(10));
    if (!r.ok()) {
      engine->error = r.status().message();
      return;
    }
    if (r->exit_code == 3) {
      engine->skip = r->stderr_text;
      return;
    }
    if (r->exit_code != 0) {
      engine->error = "docker-test-env.sh start exited " + std::to_string(r->exit_code) + ": " +
                      r->stderr_text;
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
  static void TearDownTestSuite() {
    if (engine != nullptr && !engine->dir.empty()) {
      (void)RunProcess({"bash", Script(), "stop", engine->dir}, std::chrono::minutes(2));
    }
    delete engine;
    engine = nullptr;
  }

 protected:
  void Configure(ServerOptions& options) override {
    // Every lease and rental runs the sshd image unless its bid names one.
    options.config_extra = "[agents]\ndefault_image = \"" + engine->image + "\"\n" +
                           agents_extra_ + agents_config_;
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
  std::string DockerUrl() override { return "unix:" + engine->host.substr(std::string("unix://").size()); }

  void RemoveManagedContainers() {
    std::string ids = Docker({"ps", "-aq", "--filter", "label=io.gpuhub.managed"});
    for (const auto& id : Split(ids, '\n')) {
      if (!id.empty()) Docker({"rm", "-f", "-v", id});
    }
  }
  // A new ed25519 key pair in the test's directory; the private key's path.
  std::string NewKey(const std::string& who) {
    const std::string path = dir_.path() + "/" + who + "_key";
    auto r = RunProcess({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who + "@test", "-f",
                         path});
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

// enrol; buy 1 of 2 GPUs at market; SSH in with the customer's key; the GPU Docker's nvidia
// device request was given (the hook) and the container's /etc/environment are exactly the
// leased one; a second lease gets the other GPU and its own port; a stranger's key is refused; a
// key added later works without a restart; stop -> the container is removed and SSH refused.
TEST_P(AgentRealEngineTest, ACustomerLogsInOverSshAndSeesExactlyTheLeasedGpu) {
  ListMachineAndEnrol(2);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); }, std::chrono::seconds(60))) << Context();
  EXPECT_TRUE(Machine()["hold_reason"].is_null()) << Machine().dump();

  const long long first = Buy(1);
  ASSERT_GT(first, 0);
  const int port = WaitForSsh(first, carl_key_);
  ASSERT_GT(port, 0);
  const std::string uuid = LeaseUuid(first);
  Ssh login = RunSsh(carl_key_, port, "hostname; grep ^NVIDIA_VISIBLE_DEVICES= /etc/environment");
  ASSERT_EQ(login.exit_code, 0) << login.output;
  EXPECT_EQ(login.output, Name(first) + "\nNVIDIA_VISIBLE_DEVICES=" + uuid + "\n");
  EXPECT_EQ(Lease(first)["image"], engine->image);
  const std::string id = ContainerId(Name(first));
  ASSERT_FALSE(id.empty());
  auto hook = HookLog();
  ASSERT_EQ(hook.size(), 1u) << "one start, through Docker's nvidia device request";
  EXPECT_EQ(hook[0], std::make_pair(id, uuid));
  // What the real engine made of the agent's create body.
  EXPECT_EQ(Docker({"inspect", "-f",
                    "{{.HostConfig.Privileged}} {{.HostConfig.RestartPolicy.Name}} "
                    "{{range .HostConfig.DeviceRequests}}{{.Driver}}={{join .DeviceIDs \",\"}}{{end}}",
                    id}),
            "false unless-stopped nvidia=" + uuid);
  EXPECT_EQ(Docker({"port", id, "22/tcp"}).substr(0, 8), "0.0.0.0:");

  // A second lease on the same host: the other GPU, its own port, its own container.
  const long long second = Buy(1);
  ASSERT_GT(second, 0);
  const int port2 = WaitForSsh(second, carl_key_);
  ASSERT_GT(port2, 0);
  EXPECT_NE(port2, port);
  const std::string uuid2 = LeaseUuid(second);
  EXPECT_NE(uuid2, uuid);
  EXPECT_EQ(std::set<std::string>({uuid, uuid2}),
            std::set<std::string>({AgentTestUuid(0), AgentTestUuid(1)}));
  Ssh login2 = RunSsh(carl_key_, port2, "grep ^NVIDIA_VISIBLE_DEVICES= /etc/environment");
  EXPECT_EQ(login2.output, "NVIDIA_VISIBLE_DEVICES=" + uuid2 + "\n");
  hook = HookLog();
  ASSERT_EQ(hook.size(), 2u);
  EXPECT_EQ(hook[1], std::make_pair(ContainerId(Name(second)), uuid2));

  // Another customer's key is refused.
  const std::string eve_key = NewKey("eve");
  const std::string eve = User("eve", {"customer"});
  ASSERT_EQ(client_->Call("POST", "/v1/ssh-keys", {{"public_key", PublicKey(eve_key)}}, eve).status,
            201);
  Ssh refused = RunSsh(eve_key, port, "true");
  EXPECT_EQ(refused.exit_code, 255);
  EXPECT_NE(refused.output.find("Permission denied (publickey)"), std::string::npos)
      << refused.output;

  // A key the customer adds later works in the running container, no restart.
  const std::string laptop = NewKey("carl-laptop");
  EXPECT_EQ(RunSsh(laptop, port, "true").exit_code, 255) << "not yet added";
  ASSERT_EQ(client_->Call("POST", "/v1/ssh-keys", {{"public_key", PublicKey(laptop)}}, customer_)
                .status,
            201);
  Ssh with_new;
  EXPECT_TRUE(WaitFor(
      [&] {
        with_new = RunSsh(laptop, port, "echo in");
        return with_new.exit_code == 0;
      },
      std::chrono::seconds(60)))
      << with_new.output << Context();
  EXPECT_EQ(with_new.output, "in\n");
  EXPECT_EQ(ContainerId(Name(first)), id) << "the same container";
  EXPECT_EQ(HookLog().size(), 2u) << "not restarted";

  // Stop: the container is removed and SSH refused; the other lease is untouched.
  auto stop = client_->Call("POST", "/v1/leases/" + std::to_string(first) + "/stop", nullptr,
                            customer_);
  ASSERT_EQ(stop.status, 200) << stop.body;
  ASSERT_TRUE(WaitFor([&] { return ContainerGone(Name(first)); }, std::chrono::seconds(60)))
      << Context();
  Ssh after = RunSsh(carl_key_, port, "true");
  EXPECT_EQ(after.exit_code, 255);
  EXPECT_NE(after.output.find("Connection refused"), std::string::npos) << after.output;
  ASSERT_TRUE(WaitFor([&] { return Lease(first)["connection"]["state"] == "stopped"; }))
      << Lease(first).dump();
  EXPECT_EQ(RunSsh(carl_key_, port2, "echo still").output, "still\n");
  ExpectBooksBalance();
  EXPECT_EQ(agent_->Terminate(), 0) << Context();
}

// The agent is SIGKILLed and started again: it adopts the running container (same id, never
// restarted) and the customer's open SSH session goes on.
TEST_P(AgentRealEngineTest, ARestartedAgentAdoptsTheContainerAndAnOpenSessionSurvives) {
  long long lease = 0;
  int port = 0;
  OneRunningLease(&lease, &port);
  ASSERT_FALSE(HasFatalFailure());
  const std::string before = Inspect(Name(lease));
  SshSession session(carl_key_, port);
  ASSERT_NE(session.Echo("before").find("before\n"), std::string::npos) << session.received();

  agent_->Kill();
  StartAgent();
  ASSERT_TRUE(WaitFor([&] {
    return agent_->Log().find("event=agent_docker ") != std::string::npos;
  }, std::chrono::seconds(60))) << Context();
  // Two heartbeats answered after the restart: the new agent has reconciled against them.
  AdvanceAndWaitForHeartbeat(5);
  AdvanceAndWaitForHeartbeat(5);
  EXPECT_EQ(Inspect(Name(lease)), before) << "the same container, not restarted";
  EXPECT_EQ(HookLog().size(), 1u);
  EXPECT_TRUE(session.Alive());
  EXPECT_NE(session.Echo("after").find("after\n"), std::string::npos) << session.received();
  EXPECT_EQ(Lease(lease)["connection"]["state"], "running");
  EXPECT_EQ(Docker({"ps", "-aq", "--filter", "label=io.gpuhub.managed"}),
            ContainerId(Name(lease)).substr(0, 12))
      << "one container";
}

class AgentRealEngineServerDownTest : public AgentRealEngineTest {
 protected:
  void SetUp() override {
    // An hour passes in one step of the manual clock; the agent must not go offline meanwhile.
    agents_extra_ = "offline_after_seconds = 3600\n";
    AgentRealEngineTest::SetUp();
  }
};

// The server is SIGKILLed a few seconds before the paid hour ends: the agent asks it once more at
// not_after, gets no answer, and stops the container alone; SSH is refused after.
TEST_P(AgentRealEngineServerDownTest, TheAgentStopsTheContainerAloneWhenItsPaidHourEnds) {
  long long lease = 0;
  int port = 0;
  OneRunningLease(&lease, &port);
  ASSERT_FALSE(HasFatalFailure());
  AdvanceAndWaitForHeartbeat(3600 - 4);
  ASSERT_TRUE(ContainerRunning(Name(lease))) << "still paid: running";
  server_->Kill();
  ASSERT_TRUE(WaitFor([&] { return ContainerGone(Name(lease)); }, std::chrono::seconds(60)))
      << agent_->Log();
  EXPECT_TRUE(WaitFor([&] {
    return agent_->Log().find("why=not_after_passed_server_unreachable") != std::string::npos;
  })) << agent_->Log();
  Ssh after = RunSsh(carl_key_, port, "true");
  EXPECT_EQ(after.exit_code, 255);
  EXPECT_NE(after.output.find("Connection refused"), std::string::npos) << after.output;
}

// dockerd itself restarts (as on a host's reboot): the container comes back by its restart
// policy — the same container, started again through the nvidia hook with the same GPU — the
// agent reconnects, reports it running, and the customer logs in again.
TEST_P(AgentRealEngineTest, ARestartedDockerdBringsTheContainerBackAndTheAgentReportsIt) {
  long long lease = 0;
  int port = 0;
  OneRunningLease(&lease, &port);
  ASSERT_FALSE(HasFatalFailure());
  const std::string id = ContainerId(Name(lease));
  const std::string uuid = LeaseUuid(lease);
  auto r = RunProcess({"bash", Script(), "restart", engine->dir}, std::chrono::minutes(2));
  ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->stderr_text : r.status().message());
  ASSERT_TRUE(WaitFor([&] { return ContainerRunning(Name(lease)); }, std::chrono::seconds(60)))
      << Inspect(Name(lease));
  EXPECT_EQ(ContainerId(Name(lease)), id) << "brought back, not created again";
  auto hook = HookLog();
  ASSERT_EQ(hook.size(), 2u) << "started twice, both times through the nvidia device request";
  EXPECT_EQ(hook[1], std::make_pair(id, uuid));
  Ssh back;
  EXPECT_TRUE(WaitFor(
      [&] {
        back = RunSsh(carl_key_, port, "grep ^NVIDIA_VISIBLE_DEVICES= /etc/environment");
        return back.exit_code == 0;
      },
      std::chrono::seconds(60)))
      << back.output;
  EXPECT_EQ(back.output, "NVIDIA_VISIBLE_DEVICES=" + uuid + "\n");
  // The agent noticed: it connected to Docker again and its next heartbeats say running.
  EXPECT_TRUE(WaitFor([&] {
    const std::string log = agent_->Log();
    return log.find("event=agent_docker ") != log.rfind("event=agent_docker ");
  }, std::chrono::seconds(60))) << Context();
  AdvanceAndWaitForHeartbeat(5);
  EXPECT_EQ(Lease(lease)["connection"]["state"], "running");
  EXPECT_EQ(Lease(lease)["connection"]["port"], port);
}

class AgentRealEngineRentalTest : public AgentRealEngineTest {
 protected:
  void SetUp() override {
    agents_config_ = "[rentals]\nprovisioning = \"agent\"\n";
    AgentRealEngineTest::SetUp();
  }
  void TearDown() override {
    AgentRealEngineTest::TearDown();  // the containers first: their volumes are unmounted
    // The stand-in mapper devices of this test: symlinks in /dev/mapper to our loop devices.
    (void)RunProcess({"sh", "-c",
                      "for img in " + dir_.path() + "/mapped-*.img; do [ -f \"$img\" ] || continue; "
                      "for l in $(losetup -j \"$img\" | cut -d: -f1); do "
                      "for m in /dev/mapper/*; do [ \"$(readlink \"$m\")\" = \"$l\" ] && rm -f \"$m\"; "
                      "done; losetup -d \"$l\"; done; done; true"});
  }
  // The fake-cryptsetup path of the fake-Docker rental test (device-mapper is missing on this
  // kernel), except that what `open` gives is a real block device: a loop device over a file of
  // the test, linked as /dev/mapper/<name>, on which the real mkfs.ext4 makes the file system that
  // the real engine's `local` volume driver mounts. It stands for the decrypted view; the LUKS
  // format and erase are only logged.
  std::map<std::string, std::string> RealMapperDevices() {
    const std::string img = dir_.path() + "/mapped-$7.img";
    return {
        {"cryptsetup",
         "case \"$1\" in\n"
         "  open) [ -e \"/dev/mapper/$7\" ] && { echo \"/dev/mapper/$7 exists\" >&2; exit 5; }\n"
         "    truncate -s 64M " + img + " && l=$(losetup -f --show " + img + ") || exit 1\n"
         "    mkdir -p /dev/mapper && ln -s \"$l\" \"/dev/mapper/$7\" && exit 0; exit 1 ;;\n"
         "  close) l=$(readlink \"/dev/mapper/$2\"); rm -f \"/dev/mapper/$2\"\n"
         "    [ -n \"$l\" ] && losetup -d \"$l\"; exit 0 ;;\n"
         "  status) [ -L \"/dev/mapper/$2\" ] && exit 0 ;;\n"
         "esac\n"},
        {"mkfs", "exec mkfs.ext4 -q -F \"$2\"\n"},
    };
  }
};

// A term rental on a fleet node with an agent runs its container on the real engine: its disk (the
// fake-cryptsetup path, see RealMapperDevices) is an ext4 file system mounted at /data/nvme0 that
// the customer writes to over SSH, with exactly the card's GPU; release -> the container is
// removed, the disk erased (logged) and, 7 days later, discarded (logged): the rental says wiped.
TEST_P(AgentRealEngineRentalTest, ATermRentalRunsItsContainerWithItsDiskMounted) {
  AddNodeAndEnrol(RealMapperDevices());
  StartAgent();
  ASSERT_TRUE(WaitFor([&] {
    json a = NodeAgent();
    return a["status"] == "online" && a["inventory"]["gpus"].size() == 2;
  }, std::chrono::seconds(60))) << Context();
  auto order = client_->Call("POST", "/v1/rentals",
                             {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}, {"region", "IAD-1"}},
                             customer_);
  ASSERT_EQ(order.status, 201) << order.body;
  const long long id = order.Json()["id"].get<long long>();
  const std::string name = "gpuhub-rental-" + std::to_string(id);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["state"] == "active"; }, std::chrono::seconds(60)))
      << Rental(id).dump() << Context();
  json r = Rental(id);
  EXPECT_EQ(r["instance"]["state"], "running");
  const std::string line = r["instance"]["connection"]["ssh"].get<std::string>();
  ASSERT_EQ(line.rfind("ssh -p ", 0), 0u) << r.dump();
  const int port = std::stoi(line.substr(7));
  Ssh login;
  ASSERT_TRUE(WaitFor(
      [&] {
        login = RunSsh(carl_key_, port,
                       "grep ' /data/nvme0 ' /proc/mounts | cut -d' ' -f3; "
                       "echo kept > /data/nvme0/f && cat /data/nvme0/f; "
                       "grep ^NVIDIA_VISIBLE_DEVICES= /etc/environment");
        return login.exit_code == 0;
      },
      std::chrono::seconds(60)))
      << login.output << Context();
  EXPECT_EQ(login.output, "ext4\nkept\nNVIDIA_VISIBLE_DEVICES=" + AgentTestUuid(0) + "\n")
      << "card 0's disk and GPU";
  auto hook = HookLog();
  ASSERT_EQ(hook.size(), 1u);
  EXPECT_EQ(hook[0], std::make_pair(ContainerId(name), AgentTestUuid(0)));
  EXPECT_NE(Tools().find("cryptsetup luksFormat --type luks2 --batch-mode --key-file"),
            std::string::npos) << Tools();

  auto release = client_->Call("POST", "/v1/rentals/" + std::to_string(id) + "/release",
                               {{"confirm", true}}, customer_);
  ASSERT_EQ(release.status, 200) << release.body;
  ASSERT_TRUE(WaitFor([&] { return ContainerGone(name); }, std::chrono::seconds(60))) << Context();
  ASSERT_TRUE(WaitFor([&] {
    return Tools().find("cryptsetup luksErase --batch-mode /dev/nvme0n1") != std::string::npos;
  }, std::chrono::seconds(60))) << Tools() << Context();
  Advance(7 * 24 * 3600);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["instance"]["wiped_at"].is_string(); },
                      std::chrono::seconds(60)))
      << Rental(id).dump() << Context();
  EXPECT_NE(Tools().find("blkdiscard -f /dev/nvme0n1"), std::string::npos) << Tools();
}

// The real engine is what matters here, not the database: SQLite only.
INSTANTIATE_TEST_SUITE_P(Sqlite, AgentRealEngineTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Sqlite, AgentRealEngineServerDownTest, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Sqlite, AgentRealEngineRentalTest, ::testing::Values("sqlite"));

}  // namespace
}  // namespace gpuhub::testing
