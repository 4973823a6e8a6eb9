// The fixture of the agent's end-to-end suites, whichever Docker engine they drive (the fake
// Docker Engine API of src/agent/testing in agent_e2e_test.cc, a real dockerd in
// agent_real_engine_test.cc): a real `gpuhub serve` on port 0 (manual clock), a fake nvidia-smi
// (a script whose CSV the test rewrites), accounts, a listed machine or fleet node enrolled with
// the real `gpuhub agent enroll`, the real `gpuhub agent run`, and the API reads the tests assert
// on. A subclass says where Docker is (DockerUrl) and may change the agent's SSH port range.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/inventory.h"
#include "agent_process.h"
#include "fake_node_tools.h"
#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {

inline constexpr const char* kAgentTestPassword = "correct horse battery staple";
inline constexpr const char* kAgentTestKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj carl@laptop";

// The fake nvidia-smi's GPU i.
inline std::string AgentTestUuid(int i) {
  return "GPU-0000000" + std::to_string(i) + "-aaaa-bbbb-cccc-dddddddddddd";
}

class AgentFixture : public ServerFixture {
 protected:
  void Configure(ServerOptions& options) override { options.config_extra = agents_config_; }
  void SetUp() override {
    ServerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    smi_csv_ = dir_.path() + "/gpus.csv";
    SetGpus(2);
    smi_ = dir_.path() + "/nvidia-smi";
    std::ofstream(smi_) << "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) cat " << smi_csv_
                        << " ;;\n  --query-remapped-rows=*) ;;\n  *) echo '| NVIDIA-SMI 550.54.15 "
                           "Driver Version: 550.54.15 CUDA Version: 12.4 |' ;;\nesac\n";
    ::chmod(smi_.c_str(), 0755);
  }
  void TearDown() override {
    if (agent_) agent_->Kill();
  }
  // Where the agent finds Docker: "unix:/path/docker.sock".
  virtual std::string DockerUrl() = 0;

  void SetGpus(int n, int unhealthy_index = -1) {
    std::ofstream out(smi_csv_ + ".tmp");
    for (int i = 0; i < n; ++i) {
      out << SmiLine(i, AgentTestUuid(i), "NVIDIA H100 80GB HBM3", i == unhealthy_index ? 2 : 0);
    }
    out.close();
    std::rename((smi_csv_ + ".tmp").c_str(), smi_csv_.c_str());
  }
  std::string User(const std::string& name, const std::vector<std::string>& roles) {
    return SignUpAndLogIn(*client_, name, kAgentTestPassword, roles);
  }
  // Moves the server's clock, then waits for the agent's next heartbeat at the new time.
  void AdvanceAndWaitForHeartbeat(long long seconds) {
    Advance(seconds);
    std::string now = Get("/v1/markets", "")["as_of"];
    ASSERT_TRUE(WaitFor([&] { return Machine()["agent"]["last_seen"] == now; })) << Context();
  }
  // A provider with a listed machine and an ask, a customer with funds and an SSH key, and the
  // machine's agent enrolled with the real binary.
  // The listing claims `listed_vcpus` (default: what this host has, so it is sold) and 1 GB of RAM.
  void ListMachineAndEnrol(int listed_gpus, std::int64_t listed_vcpus = agent::UsableCpus()) {
    provider_ = User("paula", {"provider"});
    customer_ = User("carl", {"customer"});
    Credit("carl", "100");
    auto key = client_->Call("POST", "/v1/ssh-keys", {{"public_key", customer_key_}}, customer_);
    ASSERT_EQ(key.status, 201) << key.body;
    auto m = client_->Call("POST", "/v1/machines",
                           {{"gpu", "H100 SXM"}, {"gpus", listed_gpus}, {"region", "IAD-1"},
                            {"vcpus", listed_vcpus}, {"ram_gb", 1}, {"disk_gb", 20}},
                           provider_);
    ASSERT_EQ(m.status, 201) << m.body;
    machine_ = m.Json()["id"].get<long long>();
    auto ask = client_->Call("POST", "/v1/asks",
                             AskJson(machine_, "2.000", UtcTimeFromNow(std::chrono::hours(24 * 30))),
                             provider_);
    ASSERT_EQ(ask.status, 201) << ask.body;
    auto token = client_->Call("POST", "/v1/machines/" + std::to_string(machine_) + "/enrolment-tokens",
                               nullptr, provider_);
    ASSERT_EQ(token.status, 201) << token.body;
    WriteAgentConfig("");
    EnrolWith(token.Json()["token"]);
  }
  // The agent's config: Docker at DockerUrl(), nvidia-smi and the state directory under the
  // test's directory; `extra` is appended.
  void WriteAgentConfig(const std::string& extra) {
    config_ = dir_.path() + "/agent.toml";
    std::ofstream(config_) << "state_dir = \"" << dir_.path() << "/agent-state\"\n"
                           << "public_host = \"203.0.113.7\"\n"
                           << "ssh_ports = \"" << ssh_ports_ << "\"\n"
                           << "docker = \"" << DockerUrl() << "\"\n"
                           << "nvml_library = \"" << dir_.path() << "/no/libnvidia-ml.so.1\"\n"
                           << "nvidia_smi = \"" << smi_ << "\"\n"
                           << "disk_path = \"" << dir_.path() << "\"\n"
                           << "heartbeat_interval_ms = " << heartbeat_ms_ << "\n"
                           // 0: "running" at the start (the fake Docker publishes no sshd); the
                           // real engine's suite waits for its sshd's banner.
                           << "ssh_ready_timeout_ms = " << ssh_ready_ms_ << "\n"
                           << "usage_interval_ms = 300\n"
                           << "reconcile_interval_ms = 100\n"
                           << extra;
  }
  // `gpuhub agent enroll` with the one-time token; checks the credential file and that the token
  // cannot be used twice.
  void EnrolWith(const std::string& token) {
    const std::string url = "http://127.0.0.1:" + std::to_string(server_->port());
    auto enrolled = RunGpuhub({"agent", "enroll", "--server", url, "--token", token, "--config",
                               config_},
                              "");
    ASSERT_EQ(enrolled.exit_code, 0) << enrolled.output;
    EXPECT_NE(enrolled.output.find("enrolled as host"), std::string::npos) << enrolled.output;
    struct stat st {};
    ASSERT_EQ(::stat((dir_.path() + "/agent-state/credential").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    // The token was one-time.
    auto again = RunGpuhub({"agent", "enroll", "--server", url, "--token", token, "--state-dir",
                            dir_.path() + "/other-state"},
                           "");
    EXPECT_EQ(again.exit_code, 2) << again.output;
    EXPECT_NE(again.output.find("not valid"), std::string::npos) << again.output;
  }
  void StartAgent() {
    agent_ = std::make_unique<AgentProcess>(config_, dir_.path() + "/agent.log");
    ASSERT_TRUE(agent_->Start());
  }
  json Machine() {
    json list = Get("/v1/machines", provider_);
    for (const auto& m : list["machines"]) {
      if (m["id"] == machine_) return m;
    }
    return nullptr;
  }
  bool Online(std::size_t gpus) {
    json m = Machine();
    return m.is_object() && m["agent"]["status"] == "online" &&
           m["agent"]["inventory"]["gpus"].size() == gpus;
  }
  json Lease(long long id) { return Get("/v1/leases/" + std::to_string(id), customer_); }
  long long Buy(int gpus, const std::string& image = "") {
    json body = {{"gpu", "H100 SXM"}, {"gpus", gpus}, {"market", true}};
    if (!image.empty()) body["image"] = image;
    auto bid = client_->Call("POST", "/v1/bids", body, customer_);
    EXPECT_EQ(bid.status, 201) << bid.body;
    EXPECT_EQ(bid.Json()["status"], "filled") << bid.body;
    return bid.Json()["lease_id"].is_number() ? bid.Json()["lease_id"].get<long long>() : 0;
  }
  // The customer's order of one H100 SXM for a week in IAD-1: the rental's id (0 when refused).
  long long OrderWeekRental() {
    auto order = client_->Call(
        "POST", "/v1/rentals",
        {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}, {"region", "IAD-1"}}, customer_);
    EXPECT_EQ(order.status, 201) << order.body;
    return order.status == 201 ? order.Json()["id"].get<long long>() : 0;
  }
  std::string Wallet() {
    json wallets = Get("/v1/wallets", customer_);  // kept alive: the loop walks into it
    for (const auto& w : wallets["wallets"]) {
      if (w["currency"] == "USD") return w["available"];
    }
    return "";
  }
  void ExpectBooksBalance() {
    json market = Get("/v1/admin/market", admin_);
    EXPECT_EQ(market["invariants"], "ok") << market.dump();
    EXPECT_EQ(market["settlement"], "ok") << market.dump();
    EXPECT_EQ(market["ledger"], "ok") << market.dump();
  }
  std::string Context() {
    return "\nagent log:\n" + (agent_ ? agent_->Log() : "") + "\nserver log:\n" + server_->Log();
  }

  // Term rentals on a fleet node ([rentals] provisioning = "agent").
  // A fleet node of `cards` H100 SXM cards whose agent the admin enrols, with an NVMe device per card
  // slot and fake cryptsetup, mkfs and blkdiscard that append their arguments to tools.log.
  // `tools_extra`: shell lines a fake tool (by name) runs after logging, with $1.. its
  // arguments (e.g. to make an opened volume a real block device for a real Docker engine).
  // `cards`: the node's (and the fake nvidia-smi's) card count; `credit_usd`: the customer's funds.
  void AddNodeAndEnrol(const std::map<std::string, std::string>& tools_extra = {}, int cards = 2,
                       const std::string& credit_usd = "2000") {
    customer_ = User("carl", {"customer"});
    Credit("carl", credit_usd);
    SetGpus(cards);
    ASSERT_EQ(client_->Call("POST", "/v1/ssh-keys", {{"public_key", customer_key_}}, customer_).status,
              201);
    auto node = client_->Call("POST", "/v1/admin/nodes",
                              {{"gpu", "H100 SXM"}, {"region", "IAD-1"}, {"cards", cards}}, admin_);
    ASSERT_EQ(node.status, 201) << node.body;
    node_ = node.Json()["id"].get<long long>();
    const std::string tokens = "/v1/admin/nodes/" + std::to_string(node_) + "/enrolment-tokens";
    EXPECT_EQ(client_->Call("POST", tokens, nullptr, customer_).status, 403) << "admins only";
    auto token = client_->Call("POST", tokens, nullptr, admin_);
    ASSERT_EQ(token.status, 201) << token.body;
    tools_log_ = dir_.path() + "/tools.log";
    const std::string tools = WriteFakeNodeTools(dir_.path(), tools_log_, tools_extra);
    std::string nvme;
    for (int i = 0; i < cards; ++i) {
      nvme += (i ? ", " : "") + std::string("\"/dev/nvme") + std::to_string(i) + "n1\"";
    }
    WriteAgentConfig("nvme_devices = [" + nvme + "]\n[storage]\n" + tools);
    EnrolWith(token.Json()["token"]);
  }
  json NodeAgent() {
    return Get("/v1/admin/nodes/" + std::to_string(node_) + "/agent", admin_)["agent"];
  }
  json Rental(long long id) { return Get("/v1/rentals/" + std::to_string(id), customer_); }
  std::string Tools() {
    std::ifstream in(tools_log_);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string agents_config_;
  std::string ssh_ports_ = "40000-40009";
  long long heartbeat_ms_ = 200;
  long long ssh_ready_ms_ = 0;
  std::string customer_key_ = kAgentTestKey;
  std::unique_ptr<AgentProcess> agent_;
  std::string provider_, customer_, config_, smi_, smi_csv_;
  long long machine_ = 0;
  long long node_ = 0;
  std::string tools_log_;
};

}  // namespace gpuhub::testing
