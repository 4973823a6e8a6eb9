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
#include "real_engine_fixture.h"

namespace gpuhub::testing {
namespace {

using agent::RunProcess;

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
  EXPECT_EQ(
      Docker({"inspect", "-f",
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
  ASSERT_EQ(
      client_->Call("POST", "/v1/ssh-keys", {{"public_key", PublicKey(laptop)}}, customer_).status,
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
  auto stop =
      client_->Call("POST", "/v1/leases/" + std::to_string(first) + "/stop", nullptr, customer_);
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
  ASSERT_TRUE(
      WaitFor([&] { return agent_->Log().find("event=agent_docker ") != std::string::npos; },
              std::chrono::seconds(60)))
      << Context();
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
  auto r =
      RunProcess({"bash", DockerTestEnvScript(), "restart", engine->dir}, std::chrono::minutes(2));
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
  EXPECT_TRUE(WaitFor(
      [&] {
        const std::string log = agent_->Log();
        return log.find("event=agent_docker ") != log.rfind("event=agent_docker ");
      },
      std::chrono::seconds(60)))
      << Context();
  AdvanceAndWaitForHeartbeat(5);
  EXPECT_EQ(Lease(lease)["connection"]["state"], "running");
  EXPECT_EQ(Lease(lease)["connection"]["port"], port);
}

// A term rental on a fleet node with an agent runs its container on the real engine: its disk (the
// fake-cryptsetup path, see RealMapperDevices) is an ext4 file system mounted at /data/nvme0 that
// the customer writes to over SSH, with exactly the card's GPU; release -> the container is
// removed, the disk erased (logged) and, 7 days later, discarded (logged): the rental says wiped.
TEST_P(AgentRealEngineRentalTest, ATermRentalRunsItsContainerWithItsDiskMounted) {
  AddNodeAndEnrol(RealMapperDevices());
  StartAgent();
  ASSERT_TRUE(WaitFor(
      [&] {
        json a = NodeAgent();
        return a["status"] == "online" && a["inventory"]["gpus"].size() == 2;
      },
      std::chrono::seconds(60)))
      << Context();
  const long long id = OrderWeekRental();
  ASSERT_GT(id, 0);
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
            std::string::npos)
      << Tools();

  auto release = client_->Call("POST", "/v1/rentals/" + std::to_string(id) + "/release",
                               {{"confirm", true}}, customer_);
  ASSERT_EQ(release.status, 200) << release.body;
  ASSERT_TRUE(WaitFor([&] { return ContainerGone(name); }, std::chrono::seconds(60))) << Context();
  ASSERT_TRUE(WaitFor(
      [&] {
        return Tools().find("cryptsetup luksErase --batch-mode /dev/nvme0n1") != std::string::npos;
      },
      std::chrono::seconds(60)))
      << Tools() << Context();
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
