// The agents' long-poll of their desired state (GET /v1/agent/desired, http/desired_waiters.h)
// against a real server on SQLite and PostgreSQL: answered at once when the agent is behind,
// parked otherwise and answered the moment a lease is bought, a key is added or the lease stops,
// answered unchanged when its wait passes, replaced by a second poll of the same host, refused
// with the field named for bad input, and never seen by another host's credential.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <regex>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kPassword = "correct horse battery staple";
constexpr const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj carl@laptop";
constexpr const char* kOtherKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINikQRq8AzYxyfEDNW1+9VRurMwpy8Pu32iRrAM3UinY olga@desk";

class DesiredPollTest : public ServerFixture {
 protected:
  std::string User(const std::string& name, const std::vector<std::string>& roles) {
    return SignUpAndLogIn(*client_, name, kPassword, roles);
  }
  // A provider's listed 2-GPU machine with an ask, its host enrolled and reporting both GPUs.
  void SetUpHost() {
    provider_ = User("paula", {"provider"});
    customer_ = User("carl", {"customer"});
    Credit("carl", "100");
    auto m = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 2), provider_);
    ASSERT_EQ(m.status, 201) << m.body;
    machine_ = m.Json()["id"];
    auto a = client_->Call("POST", "/v1/asks",
                           AskJson(machine_, "2.000", UtcTimeFromNow(std::chrono::hours(24 * 7))),
                           provider_);
    ASSERT_EQ(a.status, 201) << a.body;
    auto t = client_->Call("POST", "/v1/machines/" + std::to_string(machine_) + "/enrolment-tokens",
                           nullptr, provider_);
    ASSERT_EQ(t.status, 201) << t.body;
    auto e = client_->Call("POST", "/v1/agent/enroll", {{"token", t.Json()["token"]}});
    ASSERT_EQ(e.status, 201) << e.body;
    credential_ = e.Json()["credential"];
    json gpus = json::array();
    for (int i = 0; i < 2; ++i) {
      gpus.push_back({{"index", i},
                      {"uuid", "GPU-" + std::to_string(i)},
                      {"name", "NVIDIA H100 80GB HBM3"}});
    }
    auto hb = client_->Call("POST", "/v1/agent/heartbeat",
                            {{"hostname", "h"},
                             {"public_host", "198.51.100.1"},
                             {"inventory", {{"source", "nvidia-smi"}, {"gpus", gpus}}}},
                            credential_);
    ASSERT_EQ(hb.status, 200) << hb.body;
    heartbeat_ = hb.Json();
  }
  HttpResponse Poll(HttpClient& client, const std::string& version, int wait_seconds,
                    const std::string& credential = "") {
    std::string path = "/v1/agent/desired?wait_seconds=" + std::to_string(wait_seconds);
    if (!version.empty()) path += "&version=" + version;
    return client.Call("GET", path, nullptr, credential.empty() ? credential_ : credential);
  }
  // A poll on a connection of its own, answered later.
  std::future<HttpResponse> PollLater(const std::string& version, int wait_seconds) {
    return std::async(std::launch::async, [this, version, wait_seconds] {
      HttpClient client(server_->port());
      return Poll(client, version, wait_seconds);
    });
  }
  double Waiters() {
    auto r = client_->Call("GET", "/metrics");
    std::smatch m;
    static const std::regex line("\ngpuhub_agent_desired_waiters ([0-9.e+]+)");
    return std::regex_search(r.body, m, line) ? std::stod(m[1]) : -1;
  }
  // Until the poll is parked on the server (so what follows wakes it rather than being read by
  // the poll's own command).
  void UntilParked(double n = 1) { ASSERT_TRUE(WaitFor([&] { return Waiters() == n; })); }
  long long Buy() {
    auto bid = client_->Call("POST", "/v1/bids",
                             {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, customer_);
    EXPECT_EQ(bid.status, 201) << bid.body;
    return bid.Json().value("lease_id", 0LL);
  }

  std::string provider_, customer_, credential_;
  long long machine_ = 0;
  json heartbeat_;
};

TEST_P(DesiredPollTest, APollIsAnsweredTheMomentALeaseIsBoughtAndUnchangedWhenItsWaitPasses) {
  SetUpHost();
  // Behind (no version yet): answered at once with the current state, nothing to run.
  auto first = Poll(*client_, "", 20);
  ASSERT_EQ(first.status, 200) << first.body;
  json j = first.Json();
  EXPECT_EQ(j["changed"], true);
  EXPECT_EQ(j["workloads"], json::array());
  const std::string empty = j["version"];
  EXPECT_TRUE(std::regex_match(empty, std::regex("[0-9a-f]{16}"))) << empty;
  EXPECT_EQ(heartbeat_["desired_version"], empty) << "the heartbeat names the same version";
  EXPECT_EQ(j["desired_epoch"], heartbeat_["desired_epoch"]);
  EXPECT_GT(j["desired_seq"].get<long long>(), heartbeat_["desired_seq"].get<long long>())
      << "answers are numbered in the order they were read";

  // Up to date: parked, then woken by the purchase with the lease's workload.
  auto waiting = PollLater(empty, 20);
  UntilParked();
  long long lease = Buy();
  ASSERT_GT(lease, 0);
  auto woken = waiting.get();
  ASSERT_EQ(woken.status, 200) << woken.body;
  j = woken.Json();
  ASSERT_EQ(j["changed"], true) << j.dump();
  ASSERT_EQ(j["workloads"].size(), 1u) << j.dump();
  EXPECT_EQ(j["workloads"][0]["id"], "lease-" + std::to_string(lease));
  EXPECT_EQ(j["workloads"][0]["gpu_uuids"], json({"GPU-0"}));
  EXPECT_EQ(j["workloads"][0]["ssh_authorized_keys"], json::array());
  const std::string with_lease = j["version"];
  EXPECT_NE(with_lease, empty);
  EXPECT_EQ(Waiters(), 0);

  // Nothing changes: answered unchanged once the wait passes, with the version it held.
  auto quiet = Poll(*client_, with_lease, 1);
  ASSERT_EQ(quiet.status, 200) << quiet.body;
  EXPECT_EQ(quiet.Json(), json({{"changed", false}, {"version", with_lease}, {"wait_seconds", 1}}));

  // A key the customer adds reaches the host at once.
  waiting = PollLater(with_lease, 20);
  UntilParked();
  auto key = client_->Call("POST", "/v1/ssh-keys", {{"public_key", kKey}}, customer_);
  ASSERT_EQ(key.status, 201) << key.body;
  j = waiting.get().Json();
  ASSERT_EQ(j["changed"], true) << j.dump();
  EXPECT_EQ(j["workloads"][0]["ssh_authorized_keys"], json({kKey}));
  const std::string with_key = j["version"];

  // Stopping the lease empties the host's desired state at once.
  waiting = PollLater(with_key, 20);
  UntilParked();
  auto stop = client_->Call("POST", "/v1/leases/" + std::to_string(lease) + "/stop", nullptr,
                            customer_);
  ASSERT_EQ(stop.status, 200) << stop.body;
  j = waiting.get().Json();
  ASSERT_EQ(j["changed"], true) << j.dump();
  EXPECT_EQ(j["workloads"], json::array());
  EXPECT_EQ(j["version"], empty) << "the same state, the same version";
}

TEST_P(DesiredPollTest, AChangeThatIsNotTheHostsLeavesItsPollParked) {
  SetUpHost();
  const std::string version = Poll(*client_, "", 0).Json()["version"];
  auto waiting = PollLater(version, 2);
  UntilParked();
  // Another customer's key, with no lease on this host: nothing for this host to do.
  std::string other = User("olga", {"customer"});
  ASSERT_EQ(client_->Call("POST", "/v1/ssh-keys", {{"public_key", kOtherKey}}, other).status, 201);
  auto r = waiting.get();
  EXPECT_EQ(r.Json(), json({{"changed", false}, {"version", version}, {"wait_seconds", 2}}));
}

TEST_P(DesiredPollTest, ASecondPollOfTheSameHostReplacesTheFirst) {
  SetUpHost();
  const std::string version = Poll(*client_, "", 0).Json()["version"];
  auto first = PollLater(version, 20);
  UntilParked();
  auto second = PollLater(version, 20);
  // The first is answered unchanged at once ("wait_seconds": 0: the server did not wait it out).
  auto r = first.get();
  EXPECT_EQ(r.Json(), json({{"changed", false}, {"version", version}, {"wait_seconds", 0}}));
  UntilParked(1);  // the second one waits, alone
  long long lease = Buy();
  ASSERT_GT(lease, 0);
  json j = second.get().Json();
  EXPECT_EQ(j["changed"], true) << j.dump();
  EXPECT_EQ(j["workloads"][0]["id"], "lease-" + std::to_string(lease));
}

TEST_P(DesiredPollTest, BadInputIsRefusedNamingTheFieldAndOtherCredentialsAreNot) {
  SetUpHost();
  auto r = Poll(*client_, "", 26);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["field"], "wait_seconds");
  r = Poll(*client_, "not-hex", 1);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["field"], "version");
  r = client_->Call("GET", "/v1/agent/desired?wait_seconds=1&user=victim", nullptr, credential_);
  EXPECT_EQ(r.status, 400) << r.body;
  r = client_->Call("GET", "/v1/agent/desired", nullptr, "");
  EXPECT_EQ(r.status, 401) << r.body;
  r = Poll(*client_, "", 0, "gha_" + std::string(64, '0'));
  EXPECT_EQ(r.status, 401) << r.body;
  // A customer's session token is not a host credential.
  r = Poll(*client_, "", 0, customer_);
  EXPECT_EQ(r.status, 401) << r.body;
}

// Tight customer limits: 2 connections per client address, no reserve for new addresses.
class DesiredPollLimitsTest : public DesiredPollTest {
 protected:
  void Configure(ServerOptions& options) override {
    options.server_extra =
        "max_connections = 16\nmax_connections_per_address = 2\n"
        "connections_reserved_for_new_addresses = 0\n";
  }
  double Gauge(const std::string& name) {
    auto r = client_->Call("GET", "/metrics");
    std::smatch m;
    const std::regex line("\n" + name + " ([0-9.e+]+)");
    return std::regex_search(r.body, m, line) ? std::stod(m[1]) : -1;
  }
};

// A fleet's connections (heartbeats, parked long-polls) are counted apart from the customers':
// a host's connections from one address, one of them parked, leave that address's customer
// connections free; at most kMaxAgentConnectionsPerHost (4) per host; a credential that is not a
// host's stays under the customers' limits.
TEST_P(DesiredPollLimitsTest, HostConnectionsLeaveTheCustomersLimitsAlone) {
  SetUpHost();  // its heartbeat went through client_: that connection is the host's first
  std::vector<std::unique_ptr<HttpClient>> hosts;
  std::string version;
  for (int i = 0; i < 3; ++i) {
    hosts.push_back(std::make_unique<HttpClient>(server_->port(), "127.0.0.2"));
    auto answered = Poll(*hosts.back(), "", 0);
    ASSERT_EQ(answered.status, 200) << i << ": " << answered.body;
    version = answered.Json()["version"];
  }
  EXPECT_EQ(Gauge("gpuhub_http_open_agent_connections"), 4);
  // A fifth connection of the same host is answered but counts as a customer's.
  HttpClient fifth(server_->port(), "127.0.0.4");
  EXPECT_EQ(Poll(fifth, "", 0).status, 200);
  EXPECT_EQ(Gauge("gpuhub_http_open_agent_connections"), 4);
  auto waiting = std::async(std::launch::async, [&] { return Poll(*hosts[0], version, 20); });
  UntilParked();
  // The same address still gets its customer connections (its cap is 2).
  HttpClient customer_a(server_->port(), "127.0.0.2");
  HttpClient customer_b(server_->port(), "127.0.0.2");
  EXPECT_EQ(customer_a.Call("GET", "/healthz").status, 200);
  EXPECT_EQ(customer_b.Call("GET", "/healthz").status, 200);
  HttpClient third(server_->port(), "127.0.0.2");
  EXPECT_EQ(third.Call("GET", "/healthz").status, 503) << "its customer cap still holds";
  // Claiming to be a host is not enough: refused credentials stay with the customers' limits.
  const std::string fake = "gha_" + std::string(64, '0');
  HttpClient forged_a(server_->port(), "127.0.0.3");
  HttpClient forged_b(server_->port(), "127.0.0.3");
  EXPECT_EQ(Poll(forged_a, "", 0, fake).status, 401);
  EXPECT_EQ(Poll(forged_b, "", 0, fake).status, 401);
  HttpClient forged_c(server_->port(), "127.0.0.3");
  EXPECT_EQ(forged_c.Call("GET", "/healthz").status, 503);
  EXPECT_EQ(Gauge("gpuhub_http_open_agent_connections"), 4);
  // The parked poll is answered as usual when its host's state changes.
  ASSERT_GT(Buy(), 0);
  auto woken = waiting.get();
  ASSERT_EQ(woken.status, 200) << woken.body;
  EXPECT_EQ(woken.Json()["changed"], true);
}

INSTANTIATE_TEST_SUITE_P(Backends, DesiredPollTest, ::testing::Values("sqlite", "postgresql"));
INSTANTIATE_TEST_SUITE_P(Backends, DesiredPollLimitsTest,
                         ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
