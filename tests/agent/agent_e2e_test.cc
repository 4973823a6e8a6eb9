// The host agent end to end, as the issue asks: a real `gpuhub serve` on port 0 (manual clock)
// on SQLite and PostgreSQL, the real `gpuhub agent` binary, a fake Docker Engine API on a unix
// socket that records every call, and a fake nvidia-smi (a script whose CSV the test rewrites).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <thread>

#include "agent/docker.h"
#include "agent/inventory.h"
#include "agent/testing/fake_docker.h"
#include "agent_fixture.h"
#include "store/store.h"

namespace gpuhub::testing {
namespace {

using agent::UsableCpus;
using agent::testing::FakeDocker;

constexpr const char* kKey = kAgentTestKey;
constexpr const char* kImage = "nvidia/cuda:12.4.1-base-ubuntu22.04";

std::string Uuid(int i) { return AgentTestUuid(i); }

// The agent against the fake Docker Engine API (which records every call).
class AgentE2eTest : public AgentFixture {
 protected:
  void SetUp() override {
    AgentFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    docker_ = std::make_unique<FakeDocker>(dir_.path() + "/docker.sock");
    ASSERT_TRUE(docker_->Start());
  }
  void TearDown() override {
    AgentFixture::TearDown();
    if (docker_) docker_->Stop();
  }
  std::string DockerUrl() override { return docker_->url(); }
  std::vector<FakeDocker::Container> Running(const std::string& name) {
    std::vector<FakeDocker::Container> out;
    for (const auto& c : docker_->Containers()) {
      if (c.name == name && c.state == "running") out.push_back(c);
    }
    return out;
  }
  // A 2-GPU machine with its agent running and one 1-GPU lease whose container runs; its name.
  std::string OneRunningLease(long long* lease) {
    ListMachineAndEnrol(2);
    docker_->AddImage(kImage);
    StartAgent();
    EXPECT_TRUE(WaitFor([&] { return Online(2); })) << Context();
    *lease = Buy(1);
    const std::string name = "gpuhub-lease-" + std::to_string(*lease);
    EXPECT_TRUE(WaitFor([&] { return Running(name).size() == 1; })) << Context();
    return name;
  }

  std::unique_ptr<FakeDocker> docker_;
};

// enrol -> heartbeat with the measured inventory -> a market buy -> the container is created with
// exactly the leased GPU's UUID and the customer's key, sshd published -> the connection line on
// the lease -> egress from the stats API -> stop -> the container is removed.
TEST_P(AgentE2eTest, AMarketBuyBecomesAContainerTheCustomerCanReachAndStopRemovesIt) {
  ListMachineAndEnrol(2);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); })) << Machine().dump() << Context();
  json m = Machine();
  EXPECT_EQ(m["agent"]["inventory"]["source"], "nvidia-smi");
  EXPECT_EQ(m["agent"]["inventory"]["cuda_version"], "12.4");
  EXPECT_EQ(m["agent"]["inventory"]["gpus"][1]["uuid"], Uuid(1));
  EXPECT_EQ(m["agent"]["public_host"], "203.0.113.7");
  EXPECT_TRUE(m["hold_reason"].is_null());

  long long lease = Buy(1, kImage);
  ASSERT_GT(lease, 0);
  const std::string name = "gpuhub-lease-" + std::to_string(lease);
  ASSERT_TRUE(WaitFor([&] { return Running(name).size() == 1; })) << Context();
  // The image was pulled first (the fake daemon did not have it).
  auto pulls = docker_->CallsTo("POST", "/images/create");
  ASSERT_EQ(pulls.size(), 1u);
  EXPECT_EQ(pulls[0].query, "fromImage=nvidia%2Fcuda&tag=12.4.1-base-ubuntu22.04");
  auto creates = docker_->CallsTo("POST", "/containers/create");
  ASSERT_EQ(creates.size(), 1u);
  EXPECT_EQ(creates[0].query, "name=" + name);
  json body = json::parse(creates[0].body);
  const json& host = body["HostConfig"];
  EXPECT_EQ(host["DeviceRequests"][0]["DeviceIDs"], json({Uuid(0)})) << "exactly the leased GPU";
  EXPECT_EQ(host["DeviceRequests"][0]["Driver"], "nvidia");
  EXPECT_EQ(host["Privileged"], false);
  EXPECT_EQ(host["CapDrop"], json({"ALL"}));
  EXPECT_EQ(host["SecurityOpt"], json({"no-new-privileges"}));
  EXPECT_TRUE(docker_->DaemonLog().empty()) << "no deprecation warning in the daemon's log";
  EXPECT_EQ(host["PortBindings"]["22/tcp"][0]["HostPort"], "40000");
  EXPECT_EQ(host["NanoCpus"], std::max<std::int64_t>(1, UsableCpus() / 2) * 1'000'000'000LL)
      << "half the listing's vCPUs (1 of 2 GPUs), at least one";
  EXPECT_EQ(host["NetworkMode"], "gpuhub");
  EXPECT_EQ(docker_->Network("gpuhub")["Options"]["com.docker.network.bridge.enable_icc"], "false")
      << "two customers' containers on one host cannot reach each other";
  EXPECT_EQ(body["Image"], kImage);
  EXPECT_NE(std::find(body["Env"].begin(), body["Env"].end(), "NVIDIA_VISIBLE_DEVICES=" + Uuid(0)),
            body["Env"].end());
  // The customer's key, in the directory mounted read-only as the container's authorized_keys.
  std::string bind = host["Binds"][0];
  std::string keys_dir = bind.substr(0, bind.find(':'));
  std::ifstream keys(keys_dir + "/authorized_keys");
  std::string line;
  std::getline(keys, line);
  EXPECT_EQ(line, kKey);
  EXPECT_EQ(bind.substr(bind.find(':')), ":/etc/gpuhub/ssh:ro");

  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["ssh"] == "ssh -p 40000 root@203.0.113.7"; }))
      << Lease(lease).dump() << Context();
  json l = Lease(lease);
  EXPECT_EQ(l["connection"]["state"], "running");
  EXPECT_EQ(l["image"], kImage);
  EXPECT_EQ(l["billing"], "running");

  // Egress from the container's cumulative transmit counter (Docker's stats).
  docker_->SetTxBytes(Running(name)[0].id, 5'000'000);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["egress_bytes"] == 5'000'000; }))
      << Lease(lease).dump() << Context();

  auto stop = client_->Call("POST", "/v1/leases/" + std::to_string(lease) + "/stop", nullptr, customer_);
  ASSERT_EQ(stop.status, 200) << stop.body;
  ASSERT_TRUE(WaitFor([&] { return docker_->Containers().empty(); })) << Context();
  EXPECT_EQ(docker_->CallsTo("DELETE", "/containers/").size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "stopped"; }))
      << Lease(lease).dump();
  ExpectBooksBalance();
  EXPECT_EQ(agent_->Terminate(), 0) << Context();
}

// A listing that claims one vCPU more than the host has is held off the book with the reason, as
// for missing GPUs: the report was 8 vCPUs listed on a 2-CPU host, every create refused by Docker
// while the lease was billed.
TEST_P(AgentE2eTest, ClaimedCpusBeyondTheHostKeepTheAskOffTheBook) {
  const std::int64_t cpus = UsableCpus();
  ListMachineAndEnrol(2, cpus + 1);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); })) << Context();
  ASSERT_TRUE(WaitFor([&] { return Machine()["hold_reason"].is_string(); })) << Machine().dump();
  EXPECT_EQ(Machine()["hold_reason"],
            "the listing says " + std::to_string(cpus + 1) + " vCPUs but the host has " +
                std::to_string(cpus) + (cpus == 1 ? " vCPU" : " vCPUs") +
                ": its asks are off the book until the listing is corrected");
  EXPECT_EQ(Machine()["agent"]["inventory"]["vcpus"], cpus);
  EXPECT_TRUE(Get("/v1/offers?gpu=H100%20SXM", "")["offers"].empty());
  auto none = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, customer_);
  EXPECT_EQ(none.Json()["close_reason"], "no_match") << none.body;
  EXPECT_TRUE(docker_->CallsTo("POST", "/containers/create").empty());
}

// Listing says 8 GPUs, the host reports 4: the ask leaves the book with the reason shown to the
// provider; once the host reports 8 the ask is back. An unhealthy GPU is never sold.
TEST_P(AgentE2eTest, MeasuredGpusDecideWhatIsSold) {
  SetGpus(4);
  ListMachineAndEnrol(8);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(4); })) << Context();
  ASSERT_TRUE(WaitFor([&] { return Machine()["hold_reason"].is_string(); })) << Machine().dump();
  EXPECT_EQ(Machine()["hold_reason"],
            "the host reports 4 GPUs (4 x NVIDIA H100 80GB HBM3), 4 of them H100 SXM, but the "
            "listing says 8 x H100 SXM: its asks are off the book until the host reports them or "
            "the listing is corrected");
  EXPECT_TRUE(Get("/v1/offers?gpu=H100%20SXM", "")["offers"].empty());
  auto none = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, customer_);
  EXPECT_EQ(none.Json()["close_reason"], "no_match") << none.body;
  json asks = Get("/v1/asks", provider_);
  EXPECT_EQ(asks["asks"][0]["status"], "open");
  EXPECT_EQ(asks["asks"][0]["gpus_offered"], 0);

  SetGpus(8, /*unhealthy_index=*/0);
  ASSERT_TRUE(WaitFor([&] { return Machine()["hold_reason"].is_null(); })) << Machine().dump();
  EXPECT_EQ(Machine()["blocked_gpus"], json({0}));
  EXPECT_EQ(Get("/v1/offers?gpu=H100%20SXM", "")["offers"][0]["gpus_free"], 7);
  long long lease = Buy(1);
  EXPECT_EQ(Lease(lease)["gpu_indices"], json({1})) << "GPU 0 has uncorrected ECC errors";
  ASSERT_TRUE(WaitFor([&] { return Running("gpuhub-lease-" + std::to_string(lease)).size() == 1; }))
      << Context();
  json body = json::parse(docker_->CallsTo("POST", "/containers/create")[0].body);
  EXPECT_EQ(body["HostConfig"]["DeviceRequests"][0]["DeviceIDs"], json({Uuid(1)}));
  json unhealthy = Machine()["agent"]["inventory"]["gpus"][0];
  EXPECT_EQ(unhealthy["healthy"], false);
  EXPECT_EQ(unhealthy["health"][0], "2 uncorrected ECC errors since the driver loaded");
}

// The agent dies (SIGKILL) and misses three heartbeats: the machine is offline, its ask leaves the
// book, the lease stops billing and the unused part of the hour is credited back. The agent comes
// back: billing resumes with a new hour, and the restarted agent adopts the running container
// instead of starting a second one.
TEST_P(AgentE2eTest, MissedHeartbeatsPauseAndCreditTheLeaseARestartedAgentAdoptsItsContainer) {
  long long lease = 0;
  const std::string name = OneRunningLease(&lease);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(Wallet(), "98.000000");
  // 400 s of the hour pass with the agent reporting (steps shorter than the 45 s limit).
  for (int i = 0; i < 10; ++i) AdvanceAndWaitForHeartbeat(40);
  agent_->Kill();
  Advance(46);
  json m = Machine();
  EXPECT_EQ(m["agent"]["status"], "offline");
  EXPECT_EQ(m["offline_since"], m["agent"]["last_seen"]);
  EXPECT_TRUE(Get("/v1/offers?gpu=H100%20SXM", "")["offers"].empty()) << "asks leave the book";
  json l = Lease(lease);
  EXPECT_EQ(l["billing"], "paused");
  // Credited from the last heartbeat, 400 s into the hour: 2.000 x 3200/3600 = 1.777778.
  EXPECT_EQ(l["downtime_credit_usd"], "1.777778");
  EXPECT_EQ(Wallet(), "99.777778");
  Advance(3 * 3600);
  EXPECT_EQ(Wallet(), "99.777778") << "nothing billed while offline";
  ExpectBooksBalance();
  // Its paid hour ended hours ago, and that is no skipped hour: the lease is paused.
  json invariants = Get("/v1/admin/invariants", admin_);
  EXPECT_EQ(invariants["ok"], true) << invariants.dump();

  const auto creates_before = docker_->CallsTo("POST", "/containers/create").size();
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["billing"] == "running"; })) << Context();
  EXPECT_EQ(Wallet(), "97.777778") << "a new whole hour from the moment it is back";
  EXPECT_FALSE(Get("/v1/offers?gpu=H100%20SXM", "")["offers"].empty()) << "the ask is back";
  // Let the restarted agent run a while: still exactly one container, never created again.
  const auto lists = docker_->CallsTo("GET", "/containers/json").size();
  ASSERT_TRUE(WaitFor([&] { return docker_->CallsTo("GET", "/containers/json").size() > lists + 10; }));
  EXPECT_EQ(Running(name).size(), 1u);
  EXPECT_EQ(docker_->Containers().size(), 1u);
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), creates_before);
  ExpectBooksBalance();
}

// What the real engine does behind the agent's back (moby v20.10.24): a paused or dead container
// answers 409 to a start, so it is removed and created again, the second time after a back-off,
// never started in a loop.
TEST_P(AgentE2eTest, AContainerDockerWillNotStartIsRecreated) {
  long long lease = 0;
  const std::string name = OneRunningLease(&lease);
  ASSERT_FALSE(HasFailure());
  const std::string first = Running(name)[0].id;
  ASSERT_TRUE(docker_->SetState(first, "paused"));
  ASSERT_TRUE(WaitFor([&] { return Running(name).size() == 1 && Running(name)[0].id != first; }))
      << Context();
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/" + first + "/start").size(), 1u)
      << "started once, at its creation; never while paused";
  EXPECT_EQ(docker_->CallsTo("DELETE", "/containers/" + first).size(), 1u);
  EXPECT_EQ(docker_->Containers().size(), 1u);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "running"; }));
  const std::string second = Running(name)[0].id;
  ASSERT_TRUE(docker_->SetState(second, "dead"));
  // Recreated again, no sooner than kRecreateBackoffFirst (5 s) after the first (meanwhile the
  // lease says "Docker will not start its container (dead): recreating it in N s").
  ASSERT_TRUE(WaitFor([&] { return Running(name).size() == 1 && Running(name)[0].id != second; }))
      << Context();
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/" + second + "/start").size(), 1u);
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 3u);
  const std::string workload = "workload=lease-" + std::to_string(lease);
  EXPECT_TRUE(WaitFor([&] {
    const std::string log = agent_->Log();
    return log.find("event=container_recreate " + workload + " container=" + first.substr(0, 12) +
                    " state=paused recreates=1 ok=true") != std::string::npos &&
           log.find("event=container_recreate " + workload + " container=" +
                    second.substr(0, 12) + " state=dead recreates=2 ok=true") != std::string::npos;
  })) << agent_->Log();
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "running"; }));
  ExpectBooksBalance();
}

// The customer ran `shutdown` (PID 1 exited): Docker's restart policy brings the container back;
// the agent reports it down meanwhile and neither starts nor recreates it. Its network counter
// starts again from zero: egress goes on adding up. A container stopped by someone else (not
// restarted by Docker) is started again by the agent.
TEST_P(AgentE2eTest, AContainerThatExitsByItselfIsReportedAndComesBack) {
  long long lease = 0;
  const std::string name = OneRunningLease(&lease);
  ASSERT_FALSE(HasFailure());
  const std::string id = Running(name)[0].id;
  docker_->SetTxBytes(id, 5'000);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["egress_bytes"] == 5'000; }))
      << Lease(lease).dump() << Context();
  ASSERT_TRUE(docker_->Exit(id, 0));
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "restarting"; }))
      << Lease(lease).dump() << Context();
  json c = Lease(lease)["connection"];
  EXPECT_TRUE(c["ssh"].is_null()) << "no SSH line while it is down";
  EXPECT_EQ(Lease(lease)["billing"], "paused") << "not billed while its container is down";
  EXPECT_EQ(c["detail"], "the container exited by itself (Docker: Restarting (0) Less than a "
                         "second ago); Docker's restart policy brings it back");
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/" + id + "/start").size(), 1u);
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 1u);
  ASSERT_TRUE(docker_->FinishRestart(id));
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "running"; }))
      << Context();
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["billing"] == "running"; })) << Lease(lease).dump();
  docker_->SetTxBytes(id, 700);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["egress_bytes"] == 5'700; }))
      << Lease(lease).dump() << Context();
  // Stopped by someone on the host (`docker stop`): Docker leaves it; the agent starts it.
  ASSERT_TRUE(docker_->SetState(id, "exited"));
  ASSERT_TRUE(WaitFor([&] {
    return docker_->CallsTo("POST", "/containers/" + id + "/start").size() == 2u &&
           Running(name).size() == 1;
  })) << Context();
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 1u) << "the same container";
  EXPECT_NE(agent_->Log().find("event=container_exited"), std::string::npos);
}

// Docker without the NVIDIA toolkit's hook refuses the start (500, its words): the lease says so,
// the created container is removed, nothing is retried in a loop.
TEST_P(AgentE2eTest, AStartTheEngineRefusesIsReportedWithItsWords) {
  ListMachineAndEnrol(2);
  docker_->AddImage(kImage);
  docker_->SetNvidiaDriver(false);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); })) << Context();
  long long lease = Buy(1);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["state"] == "failed"; }))
      << Lease(lease).dump() << Context();
  const std::string detail = Lease(lease)["connection"]["detail"];
  EXPECT_EQ(detail.rfind("start container ", 0), 0u) << detail;
  EXPECT_NE(detail.find(": Docker answered 500: could not select device driver \"nvidia\" with "
                        "capabilities: [[gpu]]"),
            std::string::npos)
      << detail;
  ASSERT_TRUE(WaitFor([&] { return docker_->Containers().empty(); })) << Context();
  // Never running: nothing billed, its first hour held; past the start deadline (10 min by
  // default) the lease ends and the hold comes back in full.
  json l = Lease(lease);
  EXPECT_EQ(l["billing"], "provisioning") << l.dump();
  EXPECT_EQ(l["hours_paid"], 0) << l.dump();
  EXPECT_EQ(l["held"], "2.000000") << l.dump();
  EXPECT_EQ(Wallet(), "98.000000") << "the first hour held";
  AdvanceAndWaitForHeartbeat(601);
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["status"] != "active"; })) << Lease(lease).dump();
  EXPECT_EQ(Lease(lease)["hours_paid"], 0) << Lease(lease).dump();
  EXPECT_EQ(Wallet(), "100.000000") << "refunded in full";
}

class AgentServerDownTest : public AgentE2eTest {
 protected:
  void SetUp() override {
    // An hour passes in one step of the manual clock; the agent must not go offline meanwhile.
    agents_config_ = "[agents]\noffline_after_seconds = 3600\n";
    AgentE2eTest::SetUp();
  }
};

// The server goes away (SIGKILL) a few seconds before the paid hour ends: the agent asks it once
// more at not_after, gets no answer, and stops the workload alone.
TEST_P(AgentServerDownTest, TheAgentStopsAWorkloadAloneWhenItsPaidHourEnds) {
  long long lease = 0;
  const std::string name = OneRunningLease(&lease);
  ASSERT_FALSE(HasFailure());
  AdvanceAndWaitForHeartbeat(3600 - 4);
  ASSERT_EQ(Running(name).size(), 1u) << "still paid: running";
  server_->Kill();
  ASSERT_TRUE(WaitFor([&] { return docker_->Containers().empty(); }, std::chrono::seconds(30)))
      << Context();
  // The agent logs the removal once Docker's DELETE has answered, after the fake daemon dropped
  // the container: wait for the line too.
  EXPECT_TRUE(WaitFor([&] {
    return agent_->Log().find("why=not_after_passed_server_unreachable") != std::string::npos;
  })) << agent_->Log();
}

class AgentRentalE2eTest : public AgentE2eTest {
 protected:
  void SetUp() override {
    agents_config_ = "[rentals]\nprovisioning = \"agent\"\n";
    AgentE2eTest::SetUp();
  }
};

// A term rental on a node with an agent: provisioning -> the agent formats the card slot's NVMe as
// LUKS2 with a key made on the host, starts the container with the card's GPU and the disk ->
// the term starts with the SSH line on the rental; the agent SIGKILLed and restarted adopts it
// (no second container, no second format); release -> container removed -> luksErase -> 7 days
// later blkdiscard -> the rental says wiped.
TEST_P(AgentRentalE2eTest, ARentalRunsOnItsNodeWithAnEncryptedDiskReleaseErasesThenWipesIt) {
  AddNodeAndEnrol();
  docker_->AddImage(kImage);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] {
    json a = NodeAgent();
    return a["status"] == "online" && a["inventory"]["gpus"].size() == 2;
  })) << Context();
  auto order = client_->Call("POST", "/v1/rentals",
                             {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}, {"region", "IAD-1"}},
                             customer_);
  ASSERT_EQ(order.status, 201) << order.body;
  EXPECT_EQ(order.Json()["state"], "provisioning");
  const long long id = order.Json()["id"].get<long long>();
  const std::string workload = "rental-" + std::to_string(id);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["state"] == "active"; })) << Rental(id).dump() << Context();
  json r = Rental(id);
  EXPECT_EQ(r["instance"]["state"], "running");
  EXPECT_EQ(r["instance"]["connection"]["ssh"], "ssh -p 40000 root@203.0.113.7") << r.dump();
  auto creates = docker_->CallsTo("POST", "/containers/create");
  ASSERT_EQ(creates.size(), 1u);
  EXPECT_EQ(creates[0].query, "name=gpuhub-" + workload);
  json host = json::parse(creates[0].body)["HostConfig"];
  EXPECT_EQ(host["DeviceRequests"][0]["DeviceIDs"], json({Uuid(0)})) << "card 0 of the node";
  EXPECT_EQ(host["Privileged"], false);
  json mount = host["Mounts"][0];
  EXPECT_EQ(mount["Target"], "/data/nvme0");
  EXPECT_EQ(mount["VolumeOptions"]["DriverConfig"]["Options"]["device"],
            "/dev/mapper/" + workload + "-0");
  ASSERT_EQ(docker_->Volumes().count("gpuhub-" + workload + "-0"), 1u);
  EXPECT_EQ(docker_->Volumes()["gpuhub-" + workload + "-0"].labels["io.gpuhub.workload"], workload);
  const std::string key = dir_.path() + "/agent-state/keys/" + workload + "-0.key";
  EXPECT_NE(Tools().find("cryptsetup luksFormat --type luks2 --batch-mode --key-file " + key +
                         " /dev/nvme0n1"),
            std::string::npos)
      << Tools();
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0) << "the key stays on the host";
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 64);

  // The agent is SIGKILLed and the node stays silent for 2 h: back, the rental is credited 2 h at
  // the term's hourly rate (475.00 / 168 h x 2 h x 1), and the restarted agent adopts the
  // container.
  EXPECT_EQ(Wallet(), "1525.000000");
  agent_->Kill();
  Advance(2 * 3600);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["downtime_credit"]["total_usd"] == "5.654762"; }))
      << Rental(id).dump() << Context();
  EXPECT_EQ(Wallet(), "1530.654762");
  EXPECT_EQ(Rental(id)["downtime_credit"]["credits"][0]["formula"],
            "475.000000 USD / 168 h x 2.000000 h x 1.000000 = 5.654762 USD");
  const auto lists = docker_->CallsTo("GET", "/containers/json").size();
  ASSERT_TRUE(WaitFor([&] { return docker_->CallsTo("GET", "/containers/json").size() > lists + 10; }));
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 1u) << "adopted, not created again";
  EXPECT_EQ(Running("gpuhub-" + workload).size(), 1u);

  auto release = client_->Call("POST", "/v1/rentals/" + std::to_string(id) + "/release",
                               {{"confirm", true}}, customer_);
  ASSERT_EQ(release.status, 200) << release.body;
  ASSERT_TRUE(WaitFor([&] { return docker_->Containers().empty(); })) << Context();
  // Docker keeps a named volume when it removes the container (`v=1`: anonymous ones only).
  ASSERT_TRUE(WaitFor([&] { return docker_->Volumes().empty(); }))
      << "the volume gpuhub-" << workload << "-0 leaked" << Context();
  ASSERT_TRUE(WaitFor([&] {
    return Tools().find("cryptsetup luksErase --batch-mode /dev/nvme0n1") != std::string::npos;
  })) << Tools() << Context();
  // The fake cryptsetup logs luksErase before the agent unlinks the key: wait for the unlink.
  EXPECT_TRUE(WaitFor([&] { return ::stat(key.c_str(), &st) != 0; })) << "the key file is gone";
  EXPECT_EQ(Tools().find("blkdiscard"), std::string::npos) << "the wipe is due in 7 days";
  EXPECT_TRUE(Rental(id)["instance"]["wiped_at"].is_null());
  Advance(7 * 24 * 3600);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["instance"]["wiped_at"].is_string(); }))
      << Rental(id).dump() << Context();
  const std::string tools = Tools();
  EXPECT_LT(tools.find("luksErase"), tools.find("blkdiscard -f /dev/nvme0n1")) << tools;
  EXPECT_EQ(Tools().find("luksFormat", Tools().find("luksFormat") + 1), std::string::npos)
      << "formatted once";
}

// Nothing can start the instance (no NVMe device for its card slot): the agent reports the
// failure and the rental is refunded in full at once.
TEST_P(AgentRentalE2eTest, AnInstanceTheAgentCannotProvisionIsRefunded) {
  AddNodeAndEnrol();
  WriteAgentConfig("nvme_devices = []\n");
  docker_->AddImage(kImage);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return NodeAgent()["status"] == "online"; })) << Context();
  const long long id = OrderWeekRental();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["state"] == "released"; })) << Rental(id).dump() << Context();
  json r = Rental(id);
  EXPECT_EQ(r["release_reason"], "provisioning_failed");
  EXPECT_NE(r["instance"]["error"].get<std::string>().find("card slot 0 has no NVMe device"),
            std::string::npos) << r.dump();
  EXPECT_EQ(Wallet(), "2000.000000") << "refunded in full";
  EXPECT_TRUE(docker_->Containers().empty());
}

// The host port the agent chose is taken (another program holds it; Docker: "port is already
// allocated"): not a failure of the rental, which runs at once on the next port of the range.
TEST_P(AgentRentalE2eTest, AHostPortThatIsTakenIsSkippedNotAFailure) {
  AddNodeAndEnrol();
  docker_->AddImage(kImage);
  docker_->FailStarts(1);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return NodeAgent()["status"] == "online"; })) << Context();
  const long long id = OrderWeekRental();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["state"] == "active"; })) << Rental(id).dump() << Context();
  EXPECT_EQ(Rental(id)["instance"]["connection"]["ssh"], "ssh -p 40001 root@203.0.113.7")
      << "40000 was taken";
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 2u);
  EXPECT_NE(agent_->Log().find("event=port_taken"), std::string::npos) << Context();
  EXPECT_EQ(agent_->Log().find("event=workload_failed"), std::string::npos) << Context();
}

// Stands for a container's published sshd on 127.0.0.1:port (the fake Docker publishes nothing):
// closes each connection at once, as Docker's proxy does before sshd listens, until Ready(); then
// greets each with an SSH banner.
class SshStandIn {
 public:
  // Listens on a port the kernel picks: a fixed one clashed with the other backend's run of the
  // same test under ctest -j2 (CI: "port 40100 is taken").
  SshStandIn() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = 0;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
             ::listen(fd_, 16) == 0 &&
             ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        ++connections_;
        if (ready_) (void)!::write(c, "SSH-2.0-OpenSSH_9.2p1\r\n", 23);
        ::close(c);
      }
    });
  }
  ~SshStandIn() {
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  bool bound() const { return bound_; }
  int port() const { return port_; }
  void Ready() { ready_ = true; }
  int connections() const { return connections_; }

 private:
  int fd_ = -1;
  bool bound_ = false;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// SSH in seconds: with heartbeats ten minutes apart, the agent learns of the purchase through its
// long-poll, creates the container, reports "starting" at once while sshd does not answer, and
// "ready" (the connection line) the moment sshd greets; the lease shows each step.
TEST_P(AgentE2eTest, ANewLeaseRunsWithoutWaitingForAHeartbeatAndIsReadyWhenSshdAnswers) {
  SshStandIn sshd;
  ASSERT_TRUE(sshd.bound()) << "no loopback port to listen on";
  const std::string port = std::to_string(sshd.port());
  ssh_ports_ = port + "-" + port;
  heartbeat_ms_ = 600'000;  // the first heartbeat at start, the next one long after this test
  ssh_ready_ms_ = 60'000;
  ListMachineAndEnrol(2);
  docker_->AddImage(kImage);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); })) << Context();

  long long lease = Buy(1);
  ASSERT_GT(lease, 0);
  const std::string name = "gpuhub-lease-" + std::to_string(lease);
  ASSERT_TRUE(WaitFor([&] { return Running(name).size() == 1; })) << Context();
  // Reported at once, but not "ready": sshd does not answer yet.
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["provisioning"]["step"] == "starting"; }))
      << Lease(lease).dump() << Context();
  json l = Lease(lease);
  EXPECT_TRUE(l["connection"]["ssh"].is_null()) << l.dump();
  EXPECT_EQ(l["provisioning"]["detail"], "waiting for sshd to answer on port " + port);
  ASSERT_TRUE(WaitFor([&] { return sshd.connections() > 0; })) << "the agent probes the port";

  sshd.Ready();
  ASSERT_TRUE(WaitFor([&] {
    return Lease(lease)["connection"]["ssh"] == "ssh -p " + port + " root@203.0.113.7";
  })) << Lease(lease).dump() << Context();
  l = Lease(lease);
  EXPECT_EQ(l["provisioning"]["step"], "ready");
  std::vector<std::string> steps;
  for (const auto& st : l["provisioning"]["steps"]) {
    steps.push_back(st["step"]);
    EXPECT_TRUE(st["at"].is_string()) << st.dump();
  }
  EXPECT_EQ(steps, (std::vector<std::string>{"waiting_for_host", "starting", "ready"}));
  // The order of events: the long-poll brought the lease (no heartbeat was due, and none is
  // forced before a workload has a state), then the container was created.
  const std::string log = agent_->Log();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("event=agent_desired_changed version=[0-9a-f]+ "
                                                   "workloads=1")))
      << log;
  const auto changed = static_cast<std::size_t>(m.position(0));
  const auto started = log.find("event=container_started");
  ASSERT_NE(started, std::string::npos) << log;
  EXPECT_LT(changed, started) << log;
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 1u);
}

// The rental's disk does not mount (moby: 500 "error while mounting volume ..."): the instance
// failed, the rental is refunded in full, no container and no volume are left behind.
TEST_P(AgentRentalE2eTest, ADiskThatDoesNotMountFailsTheInstanceAndLeavesNothing) {
  AddNodeAndEnrol();
  docker_->AddImage(kImage);
  docker_->FailMounts("/dev/mapper/", "invalid argument");
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return NodeAgent()["status"] == "online"; })) << Context();
  const long long id = OrderWeekRental();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Rental(id)["state"] == "released"; }))
      << Rental(id).dump() << Context();
  json r = Rental(id);
  EXPECT_EQ(r["release_reason"], "provisioning_failed");
  EXPECT_NE(r["instance"]["error"].get<std::string>().find(
                "Docker answered 500: error while mounting volume "
                "'/var/lib/docker/volumes/gpuhub-rental-" + std::to_string(id) +
                "-0/_data': failed to mount local volume: mount /dev/mapper/rental-" +
                std::to_string(id) + "-0:"),
            std::string::npos)
      << r.dump();
  EXPECT_EQ(Wallet(), "2000.000000") << "refunded in full";
  ASSERT_TRUE(WaitFor([&] { return docker_->Containers().empty() && docker_->Volumes().empty(); }))
      << Context();
}

// An image of the customer's choice from a private registry, with extra ports: the credential goes
// to the host only in its desired workload and to Docker only as X-Registry-Auth; it is stored
// sealed, never in clear, and no GET shows it; the ports are published on the listing's host port
// range, labelled (a restarted agent adopts them) and shown with the SSH line.
TEST_P(AgentE2eTest, APrivateImageWithExtraPortsIsPulledWithItsCredentialAndPublished) {
  constexpr const char* kPrivate = "ghcr.io/acme/train:v2";
  constexpr const char* kSecret = "s3cret-token-XYZ-0001";
  ListMachineAndEnrol(2);
  docker_->RequireAuth(kPrivate, "carl-bot", kSecret);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return Online(2); })) << Context();
  json images = Get("/v1/images");
  bool has_pytorch = false;
  for (const auto& i : images["images"]) has_pytorch = has_pytorch || i["name"] == "pytorch";
  EXPECT_TRUE(has_pytorch) << images.dump();
  EXPECT_EQ(images["default"], kImage);

  // Bad orders are refused naming the field, before anything is bought.
  json base = {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}};
  for (const auto& [change, field] : std::vector<std::pair<json, std::string>>{
           {{{"image", "Not An Image"}}, "image"},
           {{{"ports", {22}}}, "ports"},
           {{{"ports", {1, 2, 3, 4, 5}}}, "ports"},
           {{{"ports", "8888"}}, "ports"},
           {{{"registry_auth", {{"username", ""}, {"password", "x"}}}}, "registry_auth.username"},
           {{{"registry_auth", {{"username", "u"}, {"password", "x"}, {"token", "y"}}}},
            "registry_auth.token"}}) {
    json body = base;
    body.update(change);
    auto r = client_->Call("POST", "/v1/bids", body, customer_);
    EXPECT_EQ(r.status, 400) << body.dump() << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], field) << r.body;
  }

  json body = base;
  body["image"] = kPrivate;
  body["ports"] = {8888, 8000};
  body["registry_auth"] = {{"username", "carl-bot"}, {"password", kSecret}};
  auto bid = client_->Call("POST", "/v1/bids", body, customer_);
  ASSERT_EQ(bid.status, 201) << bid.body;
  EXPECT_EQ(bid.body.find(kSecret), std::string::npos) << bid.body;
  const long long lease = bid.Json()["lease_id"].get<long long>();
  const std::string name = "gpuhub-lease-" + std::to_string(lease);
  ASSERT_TRUE(WaitFor([&] { return Running(name).size() == 1; })) << Context();

  // The pull carried the credential as Docker's header: base64url JSON.
  auto pulls = docker_->CallsTo("POST", "/images/create");
  ASSERT_EQ(pulls.size(), 1u);
  EXPECT_EQ(pulls[0].query, "fromImage=ghcr.io%2Facme%2Ftrain&tag=v2");
  EXPECT_EQ(pulls[0].registry_auth,
            agent::RegistryAuthHeader("carl-bot", kSecret, "ghcr.io"));
  // The ports, on the listing's default range 41000-41999, labelled for adoption.
  json create = json::parse(docker_->CallsTo("POST", "/containers/create")[0].body);
  EXPECT_EQ(create["HostConfig"]["PortBindings"]["8888/tcp"][0]["HostPort"], "41000");
  EXPECT_EQ(create["HostConfig"]["PortBindings"]["8000/tcp"][0]["HostPort"], "41001");
  EXPECT_EQ(create["HostConfig"]["PortBindings"]["22/tcp"][0]["HostPort"], "40000");
  EXPECT_TRUE(create["ExposedPorts"].contains("8888/tcp"));
  EXPECT_EQ(create["Labels"]["io.gpuhub.ports"], "8888:41000,8000:41001");
  const json want_ports = json::parse(R"([
    {"container": 8888, "host": 41000, "address": "203.0.113.7:41000"},
    {"container": 8000, "host": 41001, "address": "203.0.113.7:41001"}])");
  ASSERT_TRUE(WaitFor([&] { return Lease(lease)["connection"]["ports"] == want_ports; }))
      << Lease(lease).dump() << Context();
  json l = Lease(lease);
  EXPECT_EQ(l["connection"]["ssh"], "ssh -p 40000 root@203.0.113.7");
  EXPECT_EQ(l["image"], kPrivate);
  EXPECT_EQ(l["ports"], json({8888, 8000}));
  EXPECT_EQ(l["registry_credential"], true);

  // A curated name runs its reference; its host ports do not collide with the first lease's.
  long long second = Buy(1, "cuda");
  EXPECT_EQ(Lease(second)["image"], kImage);

  // No answer shows the secret, nor does the database, nor any log.
  for (const std::string& path : {std::string("/v1/leases"), "/v1/leases/" + std::to_string(lease),
                                  std::string("/v1/bids")}) {
    auto r = client_->Call("GET", path, nullptr, customer_);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.body.find(kSecret), std::string::npos) << path << ": " << r.body;
  }
  auto provider_view = client_->Call("GET", "/v1/leases?as=provider", nullptr, provider_);
  EXPECT_EQ(provider_view.body.find(kSecret), std::string::npos) << provider_view.body;
  auto opened = store::OpenStore(db_);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  int rows = 0;
  ASSERT_TRUE((*opened)
                  ->Scan("launch_specs", {"image", "ports", "registry_auth"}, "bid_id",
                         [&](const store::Row& row) -> Status {
                           std::string image = *row.Text(0), auth = *row.Text(2);
                           if (image != kPrivate) return Status::Ok();
                           ++rows;
                           EXPECT_EQ(*row.Text(1), "8888,8000");
                           EXPECT_EQ(auth.rfind("v1:", 0), 0u) << auth;
                           EXPECT_EQ(auth.find(kSecret), std::string::npos) << auth;
                           EXPECT_EQ(auth.find("carl-bot"), std::string::npos) << auth;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(rows, 1);
  opened->reset();
  if (GetParam() == "sqlite") {
    // Every byte the database holds, with its write-ahead log.
    for (const std::string& file : {db_.substr(7), db_.substr(7) + "-wal"}) {
      std::ifstream in(file, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_EQ(bytes.find(kSecret), std::string::npos) << file;
    }
  }
  std::ifstream cache(dir_.path() + "/agent-state/desired.json");
  std::string cached((std::istreambuf_iterator<char>(cache)), std::istreambuf_iterator<char>());
  EXPECT_NE(cached.find(kPrivate), std::string::npos);
  EXPECT_EQ(cached.find(kSecret), std::string::npos) << "the agent's cache holds no credential";

  // A restarted agent adopts the container and its ports: nothing created again.
  agent_->Kill();
  StartAgent();
  // Two heartbeats of the new agent: its reconciler has run (it runs first, every 100 ms).
  AdvanceAndWaitForHeartbeat(1);
  AdvanceAndWaitForHeartbeat(1);
  EXPECT_EQ(Running(name).size(), 1u);
  EXPECT_EQ(docker_->CallsTo("POST", "/containers/create").size(), 2u) << "adopted, not recreated";
  EXPECT_EQ(Lease(lease)["connection"]["ports"], want_ports);
  EXPECT_EQ(agent_->Log().find(kSecret), std::string::npos);
  EXPECT_EQ(server_->Log().find(kSecret), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, AgentE2eTest, ::testing::Values("sqlite", "postgresql"));
INSTANTIATE_TEST_SUITE_P(Backends, AgentServerDownTest, ::testing::Values("sqlite", "postgresql"));
INSTANTIATE_TEST_SUITE_P(Backends, AgentRentalE2eTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
