// The host agent on a node of the term fleet: a rental's instance is provisioned by the node's
// agent (its GPUs by UUID, one LUKS volume per card slot, the customer's keys), the term starts
// when the agent reports it running with the SSH line, a failure is refunded, and a release is
// followed by the crypto-erase and then the wipe of its slots, each reported back.
#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/billing.h"
#include "engine/engine_test_fixture.h"
#include "engine/rentals.h"
#include "engine/ssh_keys.h"
#include "engine/storage.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr TimestampMicros kStart = 1'800'000'000'000'000;
const char* kKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj carl@laptop";

HostInventory Gpus(int n, const std::string& prefix = "GPU-A") {
  HostInventory inv;
  inv.source = "nvml";
  inv.vcpus = 128;
  inv.ram_mib = 1024 * 1024;
  for (int i = 0; i < n; ++i) {
    GpuInventory g;
    g.index = i;
    g.uuid = prefix + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.memory_mib = 81559;
    inv.gpus.push_back(g);
  }
  return inv;
}

class AgentRentalsTest : public EngineOnSqliteTest {
 protected:
  AgentRentalsTest() : EngineOnSqliteTest(kStart, "gpuhub_agent_rentals") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      GPUHUB_ASSIGN_OR_RETURN(User c, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      // A buyer needs a billing country; US has no rate, so the figures here stay net.
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, c.id, {"US", "", "", ""}).status());
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, a.id, c.id, Currency::kUsd, 5000 * kUsd, "t").status());
      GPUHUB_RETURN_IF_ERROR(AddSshKey(txn, c.id, "", ParseSshPublicKey(kKey).value()).status());
      GPUHUB_ASSIGN_OR_RETURN(auto n1, AddRentalNode(txn, {"H100 SXM", "DFW-1", 8, "dfw-a", {}, {}}));
      GPUHUB_ASSIGN_OR_RETURN(auto n2, AddRentalNode(txn, {"H100 SXM", "IAD-1", 8, "iad-a", {}, {}}));
      return std::vector<std::int64_t>{c.id, a.id, n1.id, n2.id};
    });
    customer_ = ids[0];
    admin_ = ids[1];
    node_ = ids[2];
    other_node_ = ids[3];
  }
  void Open() {
    EngineOptions options;
    rentals::FleetConfig c;
    c.regions = {"DFW-1", "IAD-1"};
    c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
    c.cards = {{"H100 SXM", 1690 * kUsd, 475 * kUsd, false, {1, 2, 4, 8}, c.regions, true, 2000}};
    c.provisioning = rentals::Provisioning::kAgent;
    options.domains.rentals = c;
    options.domains.market.gpus = {"H100 SXM"};
    OpenEngine(options, [](Engine& e) {
      AddRentalsTickHooks(e);
      AddAgentTickHooks(e);
    });
  }
  std::int64_t EnrolNode(std::int64_t node, const std::string& credential) {
    std::string token = NewEnrolmentToken();
    Run<EnrolmentToken>([&](Txn& txn) {
      return CreateNodeEnrolmentToken(txn, admin_, node, HashToken(token));
    });
    return Run<AgentHost>([&](Txn& txn) {
             return Enrol(txn, {HashToken(token), "", HashToken(credential), "dfw-a", "0.1.0"});
           })
        .id;
  }
  Result<HeartbeatReply> Beat(std::int64_t host, std::vector<WorkloadReport> workloads = {},
                              HostInventory inv = Gpus(8)) {
    Heartbeat hb;
    hb.hostname = "dfw-a";
    hb.public_host = "198.51.100.4";
    hb.agent_version = "0.1.0";
    hb.inventory = std::move(inv);
    hb.workloads = std::move(workloads);
    return engine_->ExecuteSync<HeartbeatReply>(
        [&](Txn& txn) { return RecordHeartbeat(txn, host, hb); });
  }
  rentals::Rental Order(int count) {
    return Run<rentals::Rental>([&](Txn& txn) {
      rentals::OrderSpec s;
      s.gpu = "H100 SXM";
      s.count = count;
      s.region = "DFW-1";
      s.term = rentals::Term::kWeek;
      return OrderRental(txn, customer_, s);
    });
  }
  rentals::Rental Rental(std::int64_t id) {
    return Run<rentals::Rental>([&](Txn& txn) -> Result<rentals::Rental> {
      return *txn.state.rentals->fleet.FindRental(id);
    });
  }
  std::vector<RentalDowntimeCredit> Credits(std::int64_t rental) {
    return Run<std::vector<RentalDowntimeCredit>>(
        [&](Txn& txn) -> Result<std::vector<RentalDowntimeCredit>> {
          return RentalDowntimeCredits(txn.state, rental);
        });
  }
  std::int64_t Wallet() {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      return txn.state.wallets->ledger.Wallets(customer_)->front().available();
    });
  }
  void CheckAll() {
    Run<int>([](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(txn.state.wallets->ledger.CheckHistory());
      GPUHUB_RETURN_IF_ERROR(txn.state.rentals->fleet.CheckInvariants());
      GPUHUB_RETURN_IF_ERROR(txn.state.rentals->fleet.CheckSettlement(txn.state.wallets->ledger));
      return 0;
    });
  }

  std::int64_t customer_ = 0, admin_ = 0, node_ = 0, other_node_ = 0;
};

TEST_F(AgentRentalsTest, TheNodesAgentProvisionsTheRentalAndTheTermStartsWhenItRuns) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  ASSERT_TRUE(Beat(host).ok());
  rentals::Rental r = Order(2);
  ASSERT_EQ(r.state, rentals::RentalState::kProvisioning);
  ASSERT_EQ(r.node_id, node_);
  auto hb = Beat(host);
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  ASSERT_EQ(hb->workloads.size(), 1u);
  const DesiredWorkload w = hb->workloads[0];
  EXPECT_EQ(w.id, "rental-" + std::to_string(r.id));
  EXPECT_EQ(w.gpu_uuids, (std::vector<std::string>{"GPU-A0", "GPU-A1"}));  // cards 0-1 of the node
  ASSERT_EQ(w.volumes.size(), 2u);
  EXPECT_EQ(w.volumes[0].name, w.id + "-0");
  EXPECT_EQ(w.volumes[1].slot, 1);
  EXPECT_EQ(w.ssh_authorized_keys, std::vector<std::string>{kKey});
  EXPECT_EQ(w.not_after, r.instance.provisioning_deadline);  // refunded unless running by then
  EXPECT_EQ(w.cpus, 32);         // 128 x 2/8
  EXPECT_EQ(w.memory_gb, 256);   // 1024 GiB x 2/8
  EXPECT_TRUE(hb->disk_actions.empty());

  Advance(90 * kMicrosPerSecond);
  ASSERT_TRUE(Beat(host, {{w.id, "running", 40002, ""}}).ok());
  r = Rental(r.id);
  EXPECT_EQ(r.state, rentals::RentalState::kActive);
  EXPECT_EQ(r.term_start, kStart + 90 * kMicrosPerSecond);  // from the moment it runs
  EXPECT_EQ(r.term_end, r.term_start + 7 * kMicrosPerDay);
  EXPECT_EQ(r.instance.state, rentals::InstanceState::kRunning);
  ASSERT_FALSE(r.instance.connection.empty());
  EXPECT_EQ(r.instance.connection[0],
            (std::pair<std::string, std::string>{"ssh", "ssh -p 40002 root@198.51.100.4"}));
  // Active: not_after is the paid term's end.
  hb = Beat(host, {{w.id, "running", 40002, ""}});
  ASSERT_EQ(hb->workloads.size(), 1u);
  EXPECT_EQ(hb->workloads[0].not_after, r.term_end);
  // The agent restarted it on another port: the connection follows.
  ASSERT_TRUE(Beat(host, {{w.id, "running", 40007, ""}}).ok());
  EXPECT_EQ(Rental(r.id).instance.connection[0].second, "ssh -p 40007 root@198.51.100.4");
  CheckAll();
}

// The agent's usage samples meter the rental's egress: the container's cumulative transmit
// counter becomes bytes sent since the previous sample; beyond the term's allowance (a week:
// 20 TB x 7/30) each started GB is charged from the wallet; a resent sample counts nothing.
TEST_F(AgentRentalsTest, TheAgentsUsageSamplesMeterTheRentalsEgress) {
  constexpr std::int64_t kTb = 1'000'000'000'000;
  std::int64_t host = EnrolNode(node_, "gha_node");
  ASSERT_TRUE(Beat(host).ok());
  rentals::Rental r = Order(1);
  const std::string w = "rental-" + std::to_string(r.id);
  ASSERT_TRUE(Beat(host, {{w, "running", 40002, ""}}).ok());
  ASSERT_EQ(Rental(r.id).state, rentals::RentalState::kActive);
  auto usage = [&](TimestampMicros at, std::int64_t tx) {
    return engine_->ExecuteSync<std::int64_t>(
        [&](Txn& txn) { return RecordUsage(txn, host, {{w, at, 50, tx}}); });
  };
  auto meter = [&] {
    return Run<rentals::EgressMeter>([&](Txn& txn) -> Result<rentals::EgressMeter> {
      auto meters = txn.state.storage->storage.MetersOf(r.id);
      if (meters.size() != 1) return Status::NotFound("meters: " + std::to_string(meters.size()));
      return meters[0];
    });
  };
  const std::int64_t before = Wallet();
  Advance(60 * kMicrosPerSecond);
  ASSERT_EQ(usage(clock_.NowMicros(), 1 * kTb).value(), 1);
  EXPECT_EQ(meter().used_bytes, 1 * kTb);
  EXPECT_EQ(meter().billed_gb, 0);
  EXPECT_EQ(Wallet(), before);
  Advance(60 * kMicrosPerSecond);
  const TimestampMicros second = clock_.NowMicros();
  ASSERT_EQ(usage(second, 6 * kTb).value(), 1);
  // 6 TB against 4.666666666666 TB (20 TB x 7 / 30): 1,333.333... GB over, 1,334 started GB.
  EXPECT_EQ(meter().used_bytes, 6 * kTb);
  EXPECT_EQ(meter().billed_gb, 1334);
  EXPECT_EQ(Wallet(), before - 1334 * 4'000) << "4.00 USD per TB: 0.004 USD per GB";
  // The same sample again (a retry after a lost reply) changes nothing.
  ASSERT_EQ(usage(second, 6 * kTb).value(), 0);
  EXPECT_EQ(meter().used_bytes, 6 * kTb);
  EXPECT_EQ(Wallet(), before - 1334 * 4'000);
  // The container restarted: its counter starts again from zero and counts in full.
  Advance(60 * kMicrosPerSecond);
  ASSERT_EQ(usage(clock_.NowMicros(), 2'000'000'000).value(), 1);
  EXPECT_EQ(meter().used_bytes, 6 * kTb + 2'000'000'000);
  EXPECT_EQ(meter().billed_gb, 1336);
  CheckAll();
}

TEST_F(AgentRentalsTest, AnotherNodesCredentialNeitherSeesNorMovesTheRental) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  std::int64_t other = EnrolNode(other_node_, "gha_other");
  rentals::Rental r = Order(1);
  auto hb = Beat(other, {{"rental-" + std::to_string(r.id), "running", 40000, ""},
                         {"rental-999", "failed", 0, "x"}, {"lease-1", "running", 40001, ""}});
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->workloads.empty());
  EXPECT_EQ(hb->unknown_workloads.size(), 3u);
  EXPECT_EQ(Rental(r.id).state, rentals::RentalState::kProvisioning);
  EXPECT_EQ(Beat(host)->workloads.size(), 1u);
  // A machine's enrolment token for a node is refused to a non-admin / for a missing node.
  auto refused = engine_->ExecuteSync<EnrolmentToken>([&](Txn& txn) {
    return CreateNodeEnrolmentToken(txn, admin_, 999, HashToken("ghe_x"));
  });
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound);
}

TEST_F(AgentRentalsTest, AFailureWhileProvisioningIsRefundedInFull) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  const std::int64_t before = Wallet();
  rentals::Rental r = Order(1);
  EXPECT_EQ(Wallet(), before - 475 * kUsd);
  ASSERT_TRUE(Beat(host, {{"rental-" + std::to_string(r.id), "failed", 0,
                           "pull nvidia/cuda: manifest unknown"}})
                  .ok());
  r = Rental(r.id);
  EXPECT_EQ(r.state, rentals::RentalState::kReleased);
  EXPECT_EQ(r.release_reason, rentals::ReleaseReason::kProvisioningFailed);
  EXPECT_EQ(r.instance.error, "pull nvidia/cuda: manifest unknown");
  EXPECT_EQ(Wallet(), before);
  CheckAll();
}

TEST_F(AgentRentalsTest, ReleaseErasesThenWipesTheSlotsBeforeTheyAreFormattedAgain) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  rentals::Rental r = Order(2);
  const std::string id = "rental-" + std::to_string(r.id);
  ASSERT_TRUE(Beat(host, {{id, "running", 40000, ""}}).ok());
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, r.id); });
  r = Rental(r.id);
  ASSERT_EQ(r.state, rentals::RentalState::kReleased);
  EXPECT_NE(r.instance.key_destroyed_at, 0);
  auto hb = Beat(host, {{id, "running", 40000, ""}});
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->workloads.empty());  // stop it
  ASSERT_EQ(hb->disk_actions.size(), 1u);
  EXPECT_EQ(hb->disk_actions[0].id, id);
  EXPECT_EQ(hb->disk_actions[0].action, "erase");
  ASSERT_EQ(hb->disk_actions[0].volumes.size(), 2u);
  EXPECT_EQ(hb->disk_actions[0].volumes[1].name, id + "-1");
  // Stopped and erased: the wipe is not due yet (7 days) and nobody needs the slots.
  hb = Beat(host, {{id, "erased", 0, ""}});
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->disk_actions.empty());
  // Restart: the erase is remembered.
  Open();
  EXPECT_TRUE(Beat(host)->disk_actions.empty());
  // A new rental takes the same slots: the wipe comes first, in the same answer.
  rentals::Rental next = Order(2);
  ASSERT_EQ(next.card_mask, r.card_mask);
  hb = Beat(host);
  ASSERT_EQ(hb->disk_actions.size(), 1u);
  EXPECT_EQ(hb->disk_actions[0].action, "wipe");
  ASSERT_EQ(hb->workloads.size(), 1u);
  EXPECT_EQ(hb->workloads[0].id, "rental-" + std::to_string(next.id));
  hb = Beat(host, {{id, "wiped", 0, ""}});
  EXPECT_TRUE(hb->disk_actions.empty());
  EXPECT_NE(Rental(r.id).instance.wiped_at, 0);
  CheckAll();
}

TEST_F(AgentRentalsTest, TheWipeIsAskedForWhenDueWithoutANewRental) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  rentals::Rental r = Order(1);
  const std::string id = "rental-" + std::to_string(r.id);
  ASSERT_TRUE(Beat(host, {{id, "running", 40000, ""}}).ok());
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, r.id); });
  ASSERT_TRUE(Beat(host, {{id, "erased", 0, ""}}).ok());
  Advance(7 * kMicrosPerDay - kMicrosPerSecond);
  EXPECT_TRUE(Beat(host, {{id, "erased", 0, ""}})->disk_actions.empty());
  Advance(kMicrosPerSecond);
  auto hb = Beat(host, {{id, "erased", 0, ""}});
  ASSERT_EQ(hb->disk_actions.size(), 1u);
  EXPECT_EQ(hb->disk_actions[0].action, "wipe");
}

TEST(DowntimeCreditTest, TheHourlyRateTimesTheHoursDownTimesTheMultiplier) {
  const std::int64_t month = 30 * kMicrosPerDay, week = 7 * kMicrosPerDay, hour = kMicrosPerHour;
  // 8 x H100 SXM for a month, 12,168.00: 16.90 an hour (/720); 2 h down = 33.80.
  EXPECT_EQ(DowntimeCreditMicros(12'168 * kUsd, month, 2 * hour, 1'000'000), 33'800'000);
  EXPECT_EQ(DowntimeCreditMicros(12'168 * kUsd, month, 2 * hour, 1'500'000), 50'700'000);
  // 1 x H100 SXM for a week, 475.00: /168 an hour; 2 h = 5.654761904... -> half-even 5.654762.
  EXPECT_EQ(DowntimeCreditMicros(475 * kUsd, week, 2 * hour, 1'000'000), 5'654'762);
  // To the second; nothing for nothing; never more than the term.
  EXPECT_EQ(DowntimeCreditMicros(475 * kUsd, week, 999'999, 1'000'000), 0);
  EXPECT_EQ(DowntimeCreditMicros(475 * kUsd, week, 2 * hour, 0), 0);
  EXPECT_EQ(DowntimeCreditMicros(475 * kUsd, week, 3 * week, 1'000'000), 475 * kUsd);
}

TEST_F(AgentRentalsTest, ASilentNodesRentalsAreCreditedForTheDowntimeWhenItIsBack) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  rentals::Rental r = Order(1);
  const std::string id = "rental-" + std::to_string(r.id);
  ASSERT_TRUE(Beat(host, {{id, "running", 40000, ""}}).ok());
  const std::int64_t paid = Wallet();
  // Silent for 2 h (the tick notices nothing for a node: no machine to take off the book).
  Advance(2 * kMicrosPerHour);
  ASSERT_TRUE(Beat(host, {{id, "running", 40000, ""}}).ok());
  EXPECT_EQ(Wallet(), paid + 5'654'762) << "475.00 / 168 h x 2 h";
  auto credits = Credits(r.id);
  ASSERT_EQ(credits.size(), 1u);
  EXPECT_EQ(credits[0].from, kStart);
  EXPECT_EQ(credits[0].to, kStart + 2 * kMicrosPerHour);
  EXPECT_EQ(credits[0].usd_micros, 5'654'762);
  CheckAll();
  // Heartbeats within the limit credit nothing more; a restart keeps the credit, once.
  Advance(30 * kMicrosPerSecond);
  ASSERT_TRUE(Beat(host).ok());
  Open();
  ASSERT_TRUE(Beat(host).ok());
  EXPECT_EQ(Wallet(), paid + 5'654'762);
  credits = Credits(r.id);
  EXPECT_EQ(credits.size(), 1u);
  CheckAll();
}

TEST_F(AgentRentalsTest, ARentalReleasedDuringTheSilenceIsCreditedUntilItsRelease) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  rentals::Rental r = Order(1);
  ASSERT_TRUE(Beat(host, {{"rental-" + std::to_string(r.id), "running", 40000, ""}}).ok());
  rentals::Rental never = Order(1);  // provisioning when the node went silent: never ran
  Advance(kMicrosPerHour);
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, r.id); });
  Advance(5 * kMicrosPerHour);  // the silent one is refunded after 1 h
  EXPECT_EQ(Rental(never.id).release_reason, rentals::ReleaseReason::kProvisioningFailed);
  const std::int64_t before = Wallet();
  ASSERT_TRUE(Beat(host).ok());
  EXPECT_EQ(Wallet(), before + 2'827'381) << "1 h of 475.00 / 168 h, not 6";
  CheckAll();
}

// Attacks and accidents from the node's side: "erased" reported before the release does not skip
// the erase; a card dropping out of a report does not remove a running instance (a new one is not
// placed on it); a machine's workload id from a node is unknown.
TEST_F(AgentRentalsTest, EarlyErasedReportsAndVanishingCardsChangeNothing) {
  std::int64_t host = EnrolNode(node_, "gha_node");
  rentals::Rental r = Order(2);
  const std::string id = "rental-" + std::to_string(r.id);
  ASSERT_TRUE(Beat(host, {{id, "running", 40000, ""}}).ok());
  ASSERT_TRUE(Beat(host, {{id, "erased", 0, ""}, {"lease-1", "wiped", 0, ""}}).ok());
  EXPECT_EQ(Rental(r.id).state, rentals::RentalState::kActive);
  // Card 1 (GPU-A1) drops out of the report: the running rental keeps both cards.
  HostInventory seven = Gpus(8);
  seven.gpus.erase(seven.gpus.begin() + 1);
  auto hb = Beat(host, {{id, "running", 40000, ""}}, seven);
  ASSERT_EQ(hb->workloads.size(), 1u);
  EXPECT_EQ(hb->workloads[0].gpu_uuids, (std::vector<std::string>{"GPU-A0", "GPU-A1"}));
  Advance(kMicrosPerSecond);
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, r.id); });
  hb = Beat(host, {{id, "stopped", 0, ""}});
  ASSERT_EQ(hb->disk_actions.size(), 1u);
  EXPECT_EQ(hb->disk_actions[0].action, "erase") << "the early 'erased' does not count";
  // A new 2-card rental goes on cards 0-1 again (best fit), but card 1 is not reported: not placed.
  rentals::Rental next = Order(2);
  hb = Beat(host, {{id, "erased", 0, ""}}, seven);
  for (const auto& w : hb->workloads) EXPECT_NE(w.id, "rental-" + std::to_string(next.id));
  EXPECT_EQ(Rental(next.id).state, rentals::RentalState::kProvisioning);
}

}  // namespace
}  // namespace gpuhub::engine
