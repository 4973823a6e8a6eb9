#include "engine/agents.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/engine_test_fixture.h"
#include "engine/invariants.h"
#include "engine/market.h"
#include "engine/ssh_keys.h"
#include "engine/wallets.h"
#include "store/read_pool.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr TimestampMicros kStart = 1'800'000'000'000'000;
const char* kEd25519 =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj carl@laptop";

TEST(GpuNameMatchTest, MeasuredNamesAgainstMarkets) {
  struct Case {
    const char* measured;
    const char* market;
    bool match;
  };
  const Case cases[] = {
      {"NVIDIA H100 80GB HBM3", "H100 SXM", true},
      {"NVIDIA H100 SXM5 80GB", "H100 SXM", true},
      {"NVIDIA H100 PCIe", "H100 SXM", false},
      {"NVIDIA H100 NVL", "H100 SXM", false},
      {"NVIDIA H100 NVL", "H100 NVL", true},
      {"NVIDIA H100 80GB HBM3", "H100 NVL", false},
      {"NVIDIA H200", "H200", true},
      {"NVIDIA H200 NVL", "H200", false},
      {"NVIDIA A100-SXM4-80GB", "A100 SXM", true},
      {"NVIDIA A100-SXM4-40GB", "A100 PCIe", false},
      {"NVIDIA A100 80GB PCIe", "A100 PCIe", true},
      {"NVIDIA A100-PCIE-40GB", "A100 PCIe", true},
      {"NVIDIA B200", "B200", true},
      {"NVIDIA GeForce RTX 4090", "RTX 4090", true},
      {"NVIDIA GeForce RTX 4090", "RTX 5090", false},
      {"NVIDIA L40S", "L40S", true},
      {"NVIDIA L40S", "L40", false},
      {"NVIDIA H100 80GB HBM3", "MI300X", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(GpuNameMatchesMarket(c.measured, c.market), c.match)
        << c.measured << " vs " << c.market;
  }
}

HostInventory Gpus(int n, const char* name = "NVIDIA H100 80GB HBM3") {
  HostInventory inv;
  inv.source = "nvidia-smi";
  for (int i = 0; i < n; ++i) {
    GpuInventory g;
    g.index = i;
    g.uuid = "GPU-0000000" + std::to_string(i);
    g.name = name;
    g.memory_mib = 81559;
    inv.gpus.push_back(g);
  }
  return inv;
}

market::MachineCondition Condition(const market::Machine& listing, const HostInventory& inv) {
  return MachineConditionFor(listing, inv, BindListing(listing, inv, {}, false), 0);
}

TEST(MachineConditionForTest, FewerOrOtherGpusHoldUnhealthyOnesBlock) {
  market::Machine listing;
  listing.gpu = "H100 SXM";
  listing.gpus = 8;
  auto held = Condition(listing, Gpus(4));
  EXPECT_EQ(held.hold_reason,
            "the host reports 4 GPUs (4 x NVIDIA H100 80GB HBM3), 4 of them H100 SXM, but the "
            "listing says 8 x H100 SXM: its asks are off the book until the host reports them or "
            "the listing is corrected");
  auto other = Condition(listing, Gpus(8, "NVIDIA A100-SXM4-80GB"));
  EXPECT_NE(other.hold_reason.find("0 of them H100 SXM"), std::string::npos) << other.hold_reason;
  HostInventory none;
  none.error = "nvidia-smi: not found";
  EXPECT_EQ(Condition(listing, none).hold_reason,
            "the host's agent found no NVIDIA GPU (nvidia-smi: not found) but the listing says 8 "
            "x H100 SXM");
  HostInventory sick = Gpus(8);
  sick.gpus[2].healthy = false;
  sick.gpus[7].healthy = false;
  auto c = Condition(listing, sick);
  EXPECT_EQ(c.hold_reason, "");
  EXPECT_EQ(c.blocked_mask, 0b1000'0100u);
  // Listing GPU i is the i-th GPU of the listed model: a mixed host maps around the others.
  listing.gpus = 2;
  HostInventory mixed = Gpus(3);
  mixed.gpus[0].name = "NVIDIA GeForce RTX 4090";
  auto mapped = ListingGpus(listing, mixed);
  ASSERT_EQ(mapped.size(), 2u);
  EXPECT_EQ(mapped[0]->index, 1);
  EXPECT_EQ(mapped[1]->index, 2);
}

// A GPU drops out of the report while the machine is leased: the others keep their listing
// index (no lease moves to another physical GPU), the gone one is blocked and the machine held.
TEST(MachineConditionForTest, ALeasedMachineKeepsItsBindingWhenAGpuDisappears) {
  market::Machine listing;
  listing.gpu = "H100 SXM";
  listing.gpus = 4;
  std::vector<std::string> bound = BindListing(listing, Gpus(4), {}, false);
  ASSERT_EQ(bound, (std::vector<std::string>{"GPU-00000000", "GPU-00000001", "GPU-00000002",
                                             "GPU-00000003"}));
  HostInventory three = Gpus(4);
  three.gpus.erase(three.gpus.begin() + 1);  // GPU 1 fell off the bus
  for (int i = 0; i < 3; ++i) three.gpus[static_cast<std::size_t>(i)].index = i;  // re-enumerated
  EXPECT_EQ(BindListing(listing, three, bound, /*leased=*/true), bound);
  auto c = MachineConditionFor(listing, three, bound, 0);
  EXPECT_EQ(c.blocked_mask, 0b0010u);
  EXPECT_EQ(c.hold_reason,
            "the host no longer reports the listing's GPU 1 (GPU-00000001), which running leases "
            "use: its asks are off the book until it is back");
  // Not leased: the binding follows the report (and is short: held as fewer GPUs).
  EXPECT_EQ(BindListing(listing, three, bound, /*leased=*/false).size(), 3u);
}

// The report that started it: a listing of 8 vCPUs on a 2-CPU host had every container create
// refused by Docker ("Range of CPUs is from 0.01 to 2.00") while the lease was billed as running.
TEST(MachineConditionForTest, ClaimingMoreCpusOrRamThanMeasuredHoldsTheListing) {
  market::Machine listing;
  listing.gpu = "H100 SXM";
  listing.gpus = 2;
  listing.vcpus = 8;
  listing.ram_gb = 16;
  HostInventory inv = Gpus(2);
  inv.vcpus = 2;
  inv.ram_mib = 15'890;  // a 16 GiB host's MemTotal
  EXPECT_EQ(Condition(listing, inv).hold_reason,
            "the listing says 8 vCPUs but the host has 2 vCPUs: its asks are off the book until "
            "the listing is corrected");
  listing.vcpus = 2;
  EXPECT_EQ(Condition(listing, inv).hold_reason, "") << "16 GB listed on 16 GiB of DIMMs";
  EXPECT_EQ(MeasuredRamGb(inv), 17);  // 15,890 MiB = 16.66 GB, +5% = 17.49
  listing.ram_gb = 18;
  EXPECT_EQ(Condition(listing, inv).hold_reason,
            "the listing says 18 GB of RAM but the host has 15890 MiB (16 GB): its asks are off "
            "the book until the listing is corrected");
  // A GPU shortfall is said first: it is the one the provider must fix before the rest matters.
  listing.gpus = 4;
  EXPECT_NE(Condition(listing, inv).hold_reason.find("but the listing says 4 x H100 SXM"),
            std::string::npos);
  // An agent that could not measure (0) holds nothing on that count.
  listing.gpus = 2;
  inv.vcpus = 0;
  inv.ram_mib = 0;
  listing.vcpus = 512;
  EXPECT_EQ(Condition(listing, inv).hold_reason, "");
}

// Disk: the listing's disk_gb against the size of the host's disk (not its free space, which falls
// as containers write and would take a machine off the book for its own customers' data).
TEST(MachineConditionForTest, ClaimingMoreDiskThanTheHostHasHoldsTheListing) {
  market::Machine listing;
  listing.gpu = "H100 SXM";
  listing.gpus = 2;
  listing.disk_gb = 2000;
  HostInventory inv = Gpus(2);
  inv.disk_total_gb = 252;
  inv.nvme_free_gb = 74;
  EXPECT_EQ(Condition(listing, inv).hold_reason,
            "the listing says 2000 GB of disk but the host's disk is 252 GB: its asks are off the "
            "book until the listing is corrected");
  listing.disk_gb = 200;
  EXPECT_EQ(Condition(listing, inv).hold_reason, "") << "more than is free, not more than it has";
  listing.disk_gb = 252;
  EXPECT_EQ(Condition(listing, inv).hold_reason, "");
  inv.disk_total_gb = 0;  // not reported
  listing.disk_gb = 1'000'000;
  EXPECT_EQ(Condition(listing, inv).hold_reason, "");
}

TEST(MachineConditionForTest, AContainersShareNeverExceedsWhatTheHostHas) {
  market::Machine listing;
  listing.gpus = 8;
  listing.vcpus = 64;
  listing.ram_gb = 512;
  HostInventory inv;
  inv.vcpus = 2;
  inv.ram_mib = 16'000;  // 16.7 GB
  EXPECT_EQ(WorkloadCpus(listing, inv, 8), 2);
  EXPECT_EQ(WorkloadCpus(listing, inv, 1), 1) << "at least one CPU";
  EXPECT_EQ(WorkloadMemoryGb(listing, inv, 8), 16);
  EXPECT_EQ(WorkloadMemoryGb(listing, inv, 4), 8);
  inv.vcpus = 128;
  inv.ram_mib = 1'048'576;  // 1 TiB
  EXPECT_EQ(WorkloadCpus(listing, inv, 4), 32) << "the listing's share when the host has more";
  EXPECT_EQ(WorkloadMemoryGb(listing, inv, 2), 128);
  inv = HostInventory{};  // not measured: the listing's share
  EXPECT_EQ(WorkloadCpus(listing, inv, 2), 16);
}

TEST(AgentChecksTest, ImagesHostsAndWorkloadIds) {
  EXPECT_TRUE(ValidateImageRef("nvidia/cuda:12.4.1-base-ubuntu22.04").ok());
  const std::string digest(64, 'a');
  for (std::string good :
       {std::string("ubuntu"), std::string("pytorch/pytorch:2.4.1-cuda12.4-cudnn9-runtime"),
        std::string("ghcr.io/org/img@sha256:") + digest, std::string("localhost:5000/a/b:v1"),
        std::string("registry.example.com:5000/team/my_img__x--y.z:V1.0_rc"),
        std::string("quay.io/jupyter/pytorch-notebook:cuda12-latest"),
        std::string("img:tag@sha256:") + digest}) {
    EXPECT_TRUE(ValidateImageRef(good).ok()) << good;
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "-rm", "img; rm -rf /", "img name", "img\n", "$(x)", "a/../../containers/json",
        "a//b", "a/.hidden", "img:", "img/", "upper/Case", "ghcr.io/org/img@sha256:abc123",
        "img@md5:" + digest, "a..b", "a_-b", "a___b", "bad_host.io-/x", ".io/x", "host:po/x",
        "img:" + std::string(129, 't'), "img:-tag", "ghcr.io/", "img-", std::string(256, 'a')}) {
    EXPECT_EQ(ValidateImageRef(bad).field(), "image") << bad;
  }
  EXPECT_TRUE(ValidateContainerPorts({}).ok());
  EXPECT_TRUE(ValidateContainerPorts({8888, 8000, 6006, 65535}).ok());
  for (const std::vector<int>& bad : std::vector<std::vector<int>>{
           {22}, {0}, {65536}, {8888, 8888}, {1, 2, 3, 4, 5}, {-1}}) {
    EXPECT_EQ(ValidateContainerPorts(bad).field(), "ports") << bad.size();
  }
  EXPECT_EQ(FormatPublishedPorts({{8888, 41000}, {8000, 41001}}), "8888:41000,8000:41001");
  EXPECT_EQ(ParsePublishedPorts("8888:41000,8000:41001"),
            (std::vector<PublishedPort>{{8888, 41000}, {8000, 41001}}));
  EXPECT_TRUE(ParsePublishedPorts("8888").empty());
  EXPECT_TRUE(ParsePublishedPorts("").empty());
  EXPECT_TRUE(ValidatePublicHost("203.0.113.7").ok());
  EXPECT_TRUE(ValidatePublicHost("gpu-7.example.com").ok());
  EXPECT_TRUE(ValidatePublicHost("2001:db8::7").ok());
  for (const char* bad : {"", "-oProxyCommand=x", "a b", "host;reboot", "h\n"}) {
    EXPECT_EQ(ValidatePublicHost(bad).field(), "public_host") << bad;
  }
  EXPECT_EQ(LeaseOfWorkload("lease-17"), 17);
  for (const char* bad : {"lease-", "lease-0", "lease-017", "lease-1x", "rental-3", "lease--1"}) {
    EXPECT_EQ(LeaseOfWorkload(bad), 0) << bad;
  }
}

class AgentsEngineTest : public EngineOnSqliteTest {
 protected:
  AgentsEngineTest() : EngineOnSqliteTest(kStart, "gpuhub_agents") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      GPUHUB_ASSIGN_OR_RETURN(User p, CreateUser(txn, "paula", "h", kRoleProvider));
      GPUHUB_ASSIGN_OR_RETURN(User c, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      // A buyer needs a billing country; US has no rate, so the figures here stay net.
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, c.id, {"US", "", "", ""}).status());
      GPUHUB_RETURN_IF_ERROR(ManualCredit(txn, a.id, c.id, Currency::kUsd, 100 * kUsd, "t").status());
      GPUHUB_ASSIGN_OR_RETURN(auto m, AddMachine(txn, p.id, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}));
      GPUHUB_RETURN_IF_ERROR(
          PlaceAsk(txn, p.id, {m.id, 2'000'000, 1, txn.now + 7 * kMicrosPerDay}).status());
      GPUHUB_RETURN_IF_ERROR(
          AddSshKey(txn, c.id, "", ParseSshPublicKey(kEd25519).value()).status());
      return std::vector<std::int64_t>{p.id, c.id, a.id, m.id};
    });
    provider_ = ids[0];
    customer_ = ids[1];
    machine_ = ids[3];
  }
  void Open() {
    EngineOptions options;
    options.domains.market.gpus = {"H100 SXM", "A100 SXM"};
    OpenEngine(options, [](Engine& e) {
      AddMarketTickHooks(e);
      AddAgentTickHooks(e);
    });
  }
  // Enrols the machine's host; returns its id.
  std::int64_t EnrolHost(const std::string& credential = "gha_cred") {
    std::string token = NewEnrolmentToken();
    Run<EnrolmentToken>([&](Txn& txn) {
      return CreateMachineEnrolmentToken(txn, provider_, machine_, HashToken(token));
    });
    return Run<AgentHost>([&](Txn& txn) {
             return Enrol(txn, {HashToken(token), "", HashToken(credential), "gpu-7", "0.1.0"});
           })
        .id;
  }
  Result<HeartbeatReply> Beat(std::int64_t host, HostInventory inv,
                              std::vector<WorkloadReport> workloads = {}) {
    Heartbeat hb;
    hb.hostname = "gpu-7";
    hb.public_host = "203.0.113.7";
    hb.agent_version = "0.1.0";
    hb.inventory = std::move(inv);
    hb.workloads = std::move(workloads);
    return engine_->ExecuteSync<HeartbeatReply>(
        [&](Txn& txn) { return RecordHeartbeat(txn, host, hb); });
  }
  market::BidResult BuyAtMarket(int gpus, const std::string& image = "") {
    return Run<market::BidResult>([&](Txn& txn) -> Result<market::BidResult> {
      market::BidSpec spec;
      spec.gpu = "H100 SXM";
      spec.gpus = gpus;
      spec.is_market = true;
      GPUHUB_ASSIGN_OR_RETURN(auto r, PlaceBid(txn, customer_, spec));
      if (!image.empty()) GPUHUB_RETURN_IF_ERROR(RecordLaunchSpec(txn, r.bid.id, image));
      return r;
    });
  }
  market::Machine Machine() {
    return Run<market::Machine>([&](Txn& txn) -> Result<market::Machine> {
      return *txn.state.market->exchange.FindMachine(machine_);
    });
  }
  std::int64_t Wallet() {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      return txn.state.wallets->ledger.Wallets(customer_)->front().available();
    });
  }

  std::int64_t provider_ = 0, customer_ = 0, machine_ = 0;
};

TEST_F(AgentsEngineTest, AHeartbeatAnswersTheLeasesGpusByUuidWithTheCustomersKeys) {
  std::int64_t host = EnrolHost();
  auto hb = Beat(host, Gpus(8));
  ASSERT_TRUE(hb.ok()) << hb.status().ToString();
  EXPECT_TRUE(hb->workloads.empty());
  auto bid = BuyAtMarket(2, "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime");
  ASSERT_TRUE(bid.lease.has_value());
  hb = Beat(host, Gpus(8));
  ASSERT_TRUE(hb.ok());
  ASSERT_EQ(hb->workloads.size(), 1u);
  const DesiredWorkload w = hb->workloads[0];  // a copy: hb is reassigned below
  EXPECT_EQ(w.id, "lease-" + std::to_string(bid.lease->id));
  EXPECT_EQ(w.gpu_uuids, (std::vector<std::string>{"GPU-00000000", "GPU-00000001"}));
  EXPECT_EQ(w.ssh_authorized_keys, std::vector<std::string>{kEd25519});
  EXPECT_EQ(w.image, "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime");
  // Provisioning: nothing charged yet; the agent may run it for the hour its hold covers.
  EXPECT_TRUE(bid.lease->Provisioning());
  EXPECT_EQ(w.not_after, bid.lease->start_deadline + kMicrosPerHour);
  EXPECT_EQ(w.cpus, 16);       // 64 vCPUs x 2/8
  EXPECT_EQ(w.memory_gb, 128);  // 512 GB x 2/8
  // The agent reports it running; the connection line follows.
  hb = Beat(host, Gpus(8), {{w.id, "running", 40001, ""}});
  ASSERT_TRUE(hb.ok());
  // Billed from this report: its first hour runs from now.
  auto running = Run<market::Lease>([&](Txn& txn) -> Result<market::Lease> {
    return *txn.state.market->exchange.FindLease(bid.lease->id);
  });
  EXPECT_EQ(running.hours_paid, 1);
  EXPECT_EQ(running.PaidUntil(), clock_.NowMicros() + kMicrosPerHour);
  EXPECT_EQ(hb->workloads.at(0).not_after, running.PaidUntil());
  auto line = Run<std::string>([&](Txn& txn) -> Result<std::string> {
    return ConnectionLine(*FindHost(txn.state, host), *FindWorkload(txn.state, w.id));
  });
  EXPECT_EQ(line, "ssh -p 40001 root@203.0.113.7");
  // Stopped: gone from the desired set.
  Run<market::Lease>([&](Txn& txn) { return StopLease(txn, customer_, bid.lease->id); });
  hb = Beat(host, Gpus(8));
  ASSERT_TRUE(hb.ok());
  EXPECT_TRUE(hb->workloads.empty());
}

// A launch spec lives in memory as long as its bid is open business (resting, or its lease live):
// the tick drops the others, a restart loads only the open ones, and the store keeps every one
// (history pages read it by primary key).
TEST_F(AgentsEngineTest, LaunchSpecsOfClosedBidsLeaveMemoryAndStayInTheStore) {
  auto images = [&] {
    return Run<std::map<std::int64_t, std::string>>(
        [](Txn& txn) -> Result<std::map<std::int64_t, std::string>> {
          return txn.state.agents->image_by_bid;
        });
  };
  auto forget = [&] {
    Run<int>([](Txn& txn) -> Result<int> {
      ForgetClosedLaunchSpecs(txn.state);
      return 0;
    });
  };
  ASSERT_TRUE(Beat(EnrolHost(), Gpus(8)).ok());  // a host runs the machine: it is on the book
  auto bought = BuyAtMarket(1, "ghcr.io/acme/train:1");  // filled: its lease is live
  ASSERT_TRUE(bought.lease.has_value());
  auto resting = Run<market::BidResult>([&](Txn& txn) -> Result<market::BidResult> {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = 1;
    spec.limit_micros = 1'000'000;  // under the ask: it rests
    spec.time_in_force = market::TimeInForce::kGtc;
    GPUHUB_ASSIGN_OR_RETURN(auto r, PlaceBid(txn, customer_, spec));
    GPUHUB_RETURN_IF_ERROR(RecordLaunchSpec(txn, r.bid.id, "ghcr.io/acme/serve:2"));
    return r;
  });
  ASSERT_EQ(resting.bid.status, market::BidStatus::kResting);
  forget();
  EXPECT_EQ(images().size(), 2u);  // both still open
  Run<market::Lease>([&](Txn& txn) { return StopLease(txn, customer_, bought.lease->id); });
  forget();
  EXPECT_EQ(images(), (std::map<std::int64_t, std::string>{{resting.bid.id, "ghcr.io/acme/serve:2"}}));
  // The ended lease still names its image when a page hands in what it read from the store.
  StoredImages read;
  {
    store::ReadPool pool(url_, 1);  // as a history page reads it, beside the writer
    ASSERT_TRUE(pool.Query(LaunchSpecSelect(bought.bid.id), [&](const store::Row& row) -> Status {
                      GPUHUB_ASSIGN_OR_RETURN(read[bought.bid.id], row.Text(1));
                      return Status::Ok();
                    })
                    .ok());
  }
  auto stored = Run<std::string>([&](Txn& txn) -> Result<std::string> {
    EXPECT_EQ(BidImage(txn.state, bought.bid.id), "nvidia/cuda:12.4.1-base-ubuntu22.04");
    return BidImage(txn.state, bought.bid.id, &read);
  });
  EXPECT_EQ(stored, "ghcr.io/acme/train:1");
  Open();  // a restart loads only the open bid's spec
  EXPECT_EQ(images(), (std::map<std::int64_t, std::string>{{resting.bid.id, "ghcr.io/acme/serve:2"}}));
  Run<market::Bid>([&](Txn& txn) { return CancelBid(txn, customer_, resting.bid.id); });
  forget();
  EXPECT_TRUE(images().empty());
}

TEST_F(AgentsEngineTest, MeasuredInventoryHoldsAndBlocksTheListing) {
  std::int64_t host = EnrolHost();
  auto hb = Beat(host, Gpus(4));
  ASSERT_TRUE(hb.ok());
  EXPECT_NE(Machine().hold_reason.find("the host reports 4 GPUs"), std::string::npos);
  EXPECT_NE(hb->condition.hold_reason, "");
  auto none = Run<market::BidResult>([&](Txn& txn) {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = 1;
    spec.is_market = true;
    return PlaceBid(txn, customer_, spec);
  });
  EXPECT_EQ(none.bid.close_reason, market::BidCloseReason::kNoMatch) << "held: nothing to buy";
  HostInventory sick = Gpus(8);
  sick.gpus[0].healthy = false;
  sick.gpus[0].health = {"XID 79: GPU has fallen off the bus"};
  ASSERT_TRUE(Beat(host, sick).ok());
  EXPECT_EQ(Machine().hold_reason, "");
  EXPECT_EQ(Machine().blocked_mask, 1u);
  auto bid = BuyAtMarket(2);
  EXPECT_EQ(bid.lease->gpu_mask, 0b110u) << "GPU 0 is unhealthy: never sold";
  // A restart keeps the stored inventory (health included).
  Open();
  auto reasons = Run<std::vector<std::string>>([&](Txn& txn) -> Result<std::vector<std::string>> {
    return FindHost(txn.state, host)->inventory.gpus[0].health;
  });
  EXPECT_EQ(reasons, std::vector<std::string>{"XID 79: GPU has fallen off the bus"});
}

// Three leases take GPUs 0, 1 and 2; GPU 1 falls off the bus and the others are re-enumerated:
// the lease on GPU 2 still gets GPU 2's UUID (never GPU 3's, which no lease has), GPU 1's lease is
// not started anywhere else, and the machine is held.
TEST_F(AgentsEngineTest, LeasesKeepTheirPhysicalGpusWhenOneDisappears) {
  std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  std::vector<std::int64_t> leases;
  for (int i = 0; i < 3; ++i) leases.push_back(BuyAtMarket(1).lease->id);
  HostInventory seven = Gpus(8);
  seven.gpus.erase(seven.gpus.begin() + 1);
  for (int i = 0; i < 7; ++i) seven.gpus[static_cast<std::size_t>(i)].index = i;
  auto hb = Beat(host, seven);
  ASSERT_TRUE(hb.ok());
  std::map<std::string, std::vector<std::string>> uuids;
  for (const auto& w : hb->workloads) uuids[w.id] = w.gpu_uuids;
  EXPECT_EQ(uuids.size(), 2u) << "the lease on the gone GPU is not placed elsewhere";
  EXPECT_EQ(uuids["lease-" + std::to_string(leases[0])], std::vector<std::string>{"GPU-00000000"});
  EXPECT_EQ(uuids["lease-" + std::to_string(leases[2])], std::vector<std::string>{"GPU-00000002"});
  EXPECT_NE(Machine().hold_reason.find("no longer reports the listing's GPU 1"), std::string::npos);
  EXPECT_EQ(Machine().blocked_mask, 0b10u);
  // The binding survives a restart.
  Open();
  hb = Beat(host, seven);
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->workloads.size(), 2u);
  EXPECT_EQ(hb->workloads.back().gpu_uuids, std::vector<std::string>{"GPU-00000002"});
}

TEST_F(AgentsEngineTest, ASilentHostGoesOfflineItsLeasesArePausedAndCreditedThenResume) {
  std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  auto bid = BuyAtMarket(1);  // 2.00/h, held until the host runs it
  EXPECT_EQ(Wallet(), 98 * kUsd);
  const std::vector<WorkloadReport> running = {
      {LeaseWorkloadId(bid.lease->id), "running", 40001, ""}};
  ASSERT_TRUE(Beat(host, Gpus(8), running).ok());  // charged from now (kStart)
  EXPECT_EQ(Wallet(), 98 * kUsd);
  Advance(10 * kMicrosPerSecond);
  ASSERT_TRUE(Beat(host, Gpus(8), running).ok());  // last seen at +10 s
  Advance(45 * kMicrosPerSecond);          // +55 s: 45 s since, not more
  EXPECT_EQ(Machine().offline_since, 0);
  Advance(1 * kMicrosPerSecond);  // +56 s: silent for 46 s
  EXPECT_EQ(Machine().offline_since, kStart + 10 * kMicrosPerSecond);
  // Credited from the last heartbeat: 3590 of 3600 s of 2.00 = 1.994444 (half-even).
  EXPECT_EQ(Wallet(), 98 * kUsd + 1'994'444);
  Advance(2 * kMicrosPerHour);
  EXPECT_EQ(Wallet(), 98 * kUsd + 1'994'444) << "nothing billed while offline";
  auto hb = Beat(host, Gpus(8), running);  // back: a new hour is billed, desired again
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(Machine().offline_since, 0);
  EXPECT_EQ(Wallet(), 96 * kUsd + 1'994'444);
  ASSERT_EQ(hb->workloads.size(), 1u);
  EXPECT_EQ(hb->workloads[0].not_after, clock_.NowMicros() + kMicrosPerHour);
}

// Nothing sold without a machine, and billed only while it runs: listed, the machine is held until
// its agent reports; a lease that never runs ends at the deadline with the wallet whole; one whose
// container stops is paused and credited, and a heartbeat that no longer lists it counts as
// stopped; a host that comes back with the container still down does not bill it.
TEST_F(AgentsEngineTest, NothingIsSoldWithoutARunningMachine) {
  EXPECT_EQ(Machine().hold_reason, kNoAgentHoldReason);
  EXPECT_FALSE(BuyAtMarket(1).lease.has_value()) << "no agent: nothing on the book";
  std::int64_t host = EnrolHost();
  EXPECT_EQ(Machine().hold_reason, kEnrolledHoldReason);
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  EXPECT_EQ(Machine().hold_reason, "");

  // Never runs: 10 minutes later the lease ends not_started and the 2.00 held is back.
  auto never = BuyAtMarket(1);
  ASSERT_TRUE(never.lease.has_value());
  EXPECT_EQ(Wallet(), 98 * kUsd);
  ASSERT_TRUE(Beat(host, Gpus(8), {{LeaseWorkloadId(never.lease->id), "pulling", 0, ""}}).ok());
  Advance(kLeaseStartTimeoutMicros);
  auto ended = Run<std::vector<market::Lease>>([&](Txn& txn) -> Result<std::vector<market::Lease>> {
    return txn.state.market->exchange.ListCustomerLeases(customer_, 10);
  });
  EXPECT_TRUE(ended.empty()) << "the lease that never ran has ended";
  EXPECT_EQ(Wallet(), 100 * kUsd);

  // Runs, then its container exits 15 minutes in: 45 minutes of 2.00 = 1.50 back.
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());  // back in contact after the silent 10 minutes
  auto bid = BuyAtMarket(1);
  ASSERT_TRUE(bid.lease.has_value());
  const std::string id = LeaseWorkloadId(bid.lease->id);
  ASSERT_TRUE(Beat(host, Gpus(8), {{id, "running", 40001, ""}}).ok());
  EXPECT_EQ(Wallet(), 98 * kUsd);
  for (int i = 0; i < 30; ++i) {  // heartbeats every 30 s: the host stays online
    Advance(30 * kMicrosPerSecond);
    ASSERT_TRUE(Beat(host, Gpus(8), {{id, "running", 40001, ""}}).ok());
  }
  auto hb = Beat(host, Gpus(8), {{id, "failed", 0, "exited with code 137"}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(Wallet(), 98 * kUsd + 1'500'000);
  ASSERT_EQ(hb->workloads.size(), 1u) << "still desired: the agent starts it again";
  ASSERT_TRUE(Beat(host, Gpus(8), {{id, "running", 40001, ""}}).ok());  // a new whole hour
  EXPECT_EQ(Wallet(), 96 * kUsd + 1'500'000);
  // A heartbeat that no longer lists it: gone, so paused (the whole new hour back).
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  EXPECT_EQ(Wallet(), 98 * kUsd + 1'500'000);
  EXPECT_EQ(Run<std::string>([](Txn& txn) -> Result<std::string> {
              InvariantReport report = CheckStateInvariants(txn.state, txn.now);
              return report.ok() ? std::string("ok") : report.ToString();
            }),
            "ok");
}

// A host silent from 10 s into the lease's first hour: whatever the steps of the manual clock,
// the machine goes offline when the 45 s limit passes (+55 s), the lease is paused and credited
// from the last heartbeat, and no hour after the first is billed. The invariants hold throughout
// (a paused lease owes no hour), and back online a new hour is billed. `advance_day` moves the
// clock 24 h in steps of its choice.
class AgentsSilenceTest : public AgentsEngineTest {
 protected:
  void ExpectASilentDayBillsOneHour(std::int64_t host, const std::function<void()>& advance_day) {
    auto lease_hour_legs = [&] {
      return Run<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
        std::int64_t legs = 0;
        GPUHUB_RETURN_IF_ERROR(txn.state.wallets->ledger.ForEachTransfer(
            [&](const ledger::Transfer& x) -> Status {
              if (x.code == "lease_hour") ++legs;
              return Status::Ok();
            }));
        return legs;
      });
    };
    auto invariants = [&] {
      return Run<std::string>([](Txn& txn) -> Result<std::string> {
        return CheckStateInvariants(txn.state, txn.now).ToString();
      });
    };
    auto bid = BuyAtMarket(1);  // 2.00/h
    ASSERT_TRUE(bid.lease.has_value());
    const std::vector<WorkloadReport> running = {
        {LeaseWorkloadId(bid.lease->id), "running", 40001, ""}};
    ASSERT_TRUE(Beat(host, Gpus(8), running).ok());  // billed from now (kStart)
    Advance(10 * kMicrosPerSecond);
    ASSERT_TRUE(Beat(host, Gpus(8), running).ok());  // last seen at +10 s
    advance_day();
    EXPECT_EQ(clock_.NowMicros(), kStart + 10 * kMicrosPerSecond + kMicrosPerDay);
    EXPECT_EQ(Machine().offline_since, kStart + 10 * kMicrosPerSecond);
    auto lease = Run<market::Lease>([&](Txn& txn) -> Result<market::Lease> {
      return *txn.state.market->exchange.FindLease(bid.lease->id);
    });
    EXPECT_EQ(lease.hours_paid, 1) << "no hour billed after the silence limit";
    EXPECT_EQ(lease.paused_at, kStart + 10 * kMicrosPerSecond);
    EXPECT_EQ(lease.credited_micros, 1'994'444) << "3590 of 3600 s of 2.00, half-even";
    EXPECT_EQ(lease_hour_legs(), 1);
    EXPECT_EQ(Wallet(), 98 * kUsd + 1'994'444);
    EXPECT_EQ(invariants().find("FAILED"), std::string::npos) << invariants();
    ASSERT_TRUE(Beat(host, Gpus(8), running).ok());  // back: a new whole hour
    EXPECT_EQ(Wallet(), 96 * kUsd + 1'994'444);
    EXPECT_EQ(lease_hour_legs(), 2);
    EXPECT_EQ(invariants().find("FAILED"), std::string::npos) << invariants();
  }
};

TEST_F(AgentsSilenceTest, OneDayLongAdvanceTakesASilentHostOfflineAtItsLimit) {
  const std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  ExpectASilentDayBillsOneHour(host, [&] { Advance(kMicrosPerDay); });
}

TEST_F(AgentsSilenceTest, ManySmallAdvancesBillASilentHostTheSameAsOneLongOne) {
  const std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  ExpectASilentDayBillsOneHour(host, [&] {
    for (int i = 0; i < 96; ++i) Advance(15 * 60 * kMicrosPerSecond);
  });
}

// Two hosts fall silent at different times inside one advance: each machine goes offline at its
// own limit, so the host that was seen later is billed up to its own limit and not beyond.
TEST_F(AgentsEngineTest, OneAdvanceTakesEachSilentHostOfflineInTurn) {
  const std::int64_t first = EnrolHost();
  ASSERT_TRUE(Beat(first, Gpus(8)).ok());
  auto second_machine = Run<market::Machine>([&](Txn& txn) -> Result<market::Machine> {
    GPUHUB_ASSIGN_OR_RETURN(auto m,
                            AddMachine(txn, provider_, {"A100 SXM", 1, "IAD-1", 16, 128, 500}));
    GPUHUB_RETURN_IF_ERROR(
        PlaceAsk(txn, provider_, {m.id, 1'000'000, 1, txn.now + 7 * kMicrosPerDay}).status());
    return m;
  });
  std::string token = NewEnrolmentToken();
  Run<EnrolmentToken>([&](Txn& txn) {
    return CreateMachineEnrolmentToken(txn, provider_, second_machine.id, HashToken(token));
  });
  const std::int64_t second = Run<AgentHost>([&](Txn& txn) {
                                return Enrol(txn, {HashToken(token), "", HashToken("gha_two"),
                                                   "gpu-8", "0.1.0"});
                              }).id;
  HostInventory a100 = Gpus(1, "NVIDIA A100-SXM4-80GB");
  a100.gpus[0].uuid = "GPU-a1000000";
  ASSERT_TRUE(Beat(second, a100).ok());
  auto a100_lease = Run<market::BidResult>([&](Txn& txn) -> Result<market::BidResult> {
    market::BidSpec spec;
    spec.gpu = "A100 SXM";
    spec.gpus = 1;
    spec.is_market = true;
    return PlaceBid(txn, customer_, spec);
  });
  ASSERT_TRUE(a100_lease.lease.has_value());
  // Its host runs it at once (billed from now) and keeps reporting it for 3 h 30 min (steps under
  // its limit); the first host does not report at all.
  const std::vector<WorkloadReport> running = {
      {LeaseWorkloadId(a100_lease.lease->id), "running", 40001, ""}};
  ASSERT_TRUE(Beat(second, a100, running).ok());
  for (int i = 0; i < 2 * (3 * 60 + 30); ++i) {
    Advance(30 * kMicrosPerSecond);
    ASSERT_TRUE(Beat(second, a100, running).ok());
  }
  EXPECT_EQ(Machine().offline_since, kStart);
  const TimestampMicros second_seen = clock_.NowMicros();
  Advance(2 * kMicrosPerDay);
  auto m2 = Run<market::Machine>([&](Txn& txn) -> Result<market::Machine> {
    return *txn.state.market->exchange.FindMachine(second_machine.id);
  });
  EXPECT_EQ(m2.offline_since, second_seen);
  auto l2 = Run<market::Lease>([&](Txn& txn) -> Result<market::Lease> {
    return *txn.state.market->exchange.FindLease(a100_lease.lease->id);
  });
  // Billed at 0, 1, 2 and 3 h; silent from 3 h 30 min: half of the fourth hour comes back.
  EXPECT_EQ(l2.hours_paid, 4);
  EXPECT_EQ(l2.paused_at, second_seen);
  EXPECT_EQ(l2.credited_micros, 500'000);
  EXPECT_EQ(Wallet(), 100 * kUsd - 4 * kUsd + 500'000);
}

TEST_F(AgentsEngineTest, AServerRestartGivesHostsAGraceInsteadOfTakingThemOffline) {
  std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  clock_.Advance(10 * 60 * kMicrosPerSecond);  // the server was down ten minutes
  Open();
  Advance(30 * kMicrosPerSecond);
  EXPECT_EQ(Machine().offline_since, 0) << "within the grace after the start";
  Advance(16 * kMicrosPerSecond);
  EXPECT_EQ(Machine().offline_since, kStart) << "still silent: offline from its last heartbeat";
}

TEST_F(AgentsEngineTest, CredentialsEnrolmentAndRevocation) {
  std::string token = NewEnrolmentToken();
  EXPECT_EQ(token.rfind("ghe_", 0), 0u);
  EXPECT_EQ(token.size(), 68u);
  // Only the machine's provider can make a token for it.
  auto stranger = engine_->ExecuteSync<EnrolmentToken>([&](Txn& txn) {
    return CreateMachineEnrolmentToken(txn, customer_, machine_, HashToken(token));
  });
  EXPECT_EQ(stranger.status().code(), StatusCode::kNotFound);
  Run<EnrolmentToken>([&](Txn& txn) {
    return CreateMachineEnrolmentToken(txn, provider_, machine_, HashToken(token));
  });
  auto enrol = [&](const std::string& nonce, const std::string& cred) {
    return engine_->ExecuteSync<AgentHost>([&](Txn& txn) {
      return Enrol(txn, {HashToken(token), nonce.empty() ? "" : HashToken(nonce), HashToken(cred),
                         "h", "v"});
    });
  };
  ASSERT_TRUE(enrol("n1", "gha_one").ok());
  // One-time: a second use fails, unless it is the same agent retrying within 10 minutes.
  EXPECT_EQ(enrol("n2", "gha_two").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(enrol("", "gha_two").status().code(), StatusCode::kUnauthenticated);
  ASSERT_TRUE(enrol("n1", "gha_three").ok());
  auto auth = [&](const std::string& cred) {
    return engine_->ExecuteSync<AgentHost>(
        [&](Txn& txn) { return AuthenticateHost(txn, HashToken(cred)); });
  };
  EXPECT_EQ(auth("gha_one").status().code(), StatusCode::kUnauthenticated) << "replaced";
  ASSERT_TRUE(auth("gha_three").ok());
  clock_.Advance(11 * 60 * kMicrosPerSecond);
  EXPECT_EQ(enrol("n1", "gha_four").status().code(), StatusCode::kUnauthenticated);
  // A session token is no host credential.
  EXPECT_EQ(auth(NewSessionToken()).status().code(), StatusCode::kUnauthenticated);
  // Revoked: refused at once, the machine offline at once.
  std::int64_t host = auth("gha_three")->id;
  Run<AgentHost>([&](Txn& txn) { return RevokeHost(txn, host); });
  EXPECT_EQ(auth("gha_three").status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Machine().offline_since, clock_.NowMicros());
  EXPECT_EQ(Beat(host, Gpus(8)).status().code(), StatusCode::kUnauthenticated);
  // Enrolled again with a new token: the same host, a new credential, back online on its beat.
  EXPECT_EQ(EnrolHost("gha_five"), host);
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  EXPECT_EQ(Machine().offline_since, 0);
}

TEST_F(AgentsEngineTest, ReportsAndUsageAreTakenOnlyForTheHostsOwnWorkloads) {
  std::int64_t host = EnrolHost();
  ASSERT_TRUE(Beat(host, Gpus(8)).ok());
  auto bid = BuyAtMarket(1);
  const std::string mine = "lease-" + std::to_string(bid.lease->id);
  // Another provider's machine and lease.
  auto other_lease = Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
    GPUHUB_ASSIGN_OR_RETURN(User q, CreateUser(txn, "quinn", "h", kRoleProvider));
    GPUHUB_ASSIGN_OR_RETURN(auto m, AddMachine(txn, q.id, {"A100 SXM", 1, "IAD-1", 8, 64, 100}));
    GPUHUB_RETURN_IF_ERROR(PlaceAsk(txn, q.id, {m.id, 1'000'000, 1, txn.now + kMicrosPerDay}).status());
    // Its own host runs it (nothing is sold without one).
    const std::string token = NewEnrolmentToken();
    GPUHUB_RETURN_IF_ERROR(CreateMachineEnrolmentToken(txn, q.id, m.id, HashToken(token)).status());
    GPUHUB_ASSIGN_OR_RETURN(AgentHost h, Enrol(txn, {HashToken(token), "", HashToken("gha_q"),
                                                     "gpu-q", "0.1.0"}));
    Heartbeat beat;
    beat.inventory = Gpus(1, "NVIDIA A100-SXM4-80GB");
    beat.inventory.gpus[0].uuid = "GPU-a1000000";
    GPUHUB_RETURN_IF_ERROR(RecordHeartbeat(txn, h.id, beat).status());
    market::BidSpec spec;
    spec.gpu = "A100 SXM";
    spec.gpus = 1;
    spec.is_market = true;
    GPUHUB_ASSIGN_OR_RETURN(auto r, PlaceBid(txn, customer_, spec));
    if (!r.lease) return Status::Internal("the A100 bid did not fill");
    return r.lease->id;
  });
  const std::string theirs = "lease-" + std::to_string(other_lease);
  auto hb = Beat(host, Gpus(8), {{theirs, "running", 40002, ""}, {"lease-999", "running", 1, ""}});
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(hb->unknown_workloads, (std::vector<std::string>{theirs, "lease-999"}));
  EXPECT_EQ(Run<int>([&](Txn& txn) -> Result<int> {
              return FindWorkload(txn.state, theirs) == nullptr ? 1 : 0;
            }),
            1)
      << "nothing recorded for another host's workload";
  const TimestampMicros t = clock_.NowMicros();
  auto usage = [&](std::vector<UsageSample> samples) {
    return engine_->ExecuteSync<std::int64_t>(
        [&](Txn& txn) { return RecordUsage(txn, host, samples); });
  };
  auto refused = usage({{mine, t, 50, 1000}, {theirs, t, 50, 1000}});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "samples[1].workload_id");
  // Cumulative counters: 1000, 5000, then a resend of 5000 (ignored), then 700 after a restart of
  // the container: 1000 + 4000 + 700 bytes.
  EXPECT_EQ(*usage({{mine, t - 120 * kMicrosPerSecond, 40, 1000}, {mine, t - 60 * kMicrosPerSecond, 60, 5000}}), 2);
  EXPECT_EQ(*usage({{mine, t - 60 * kMicrosPerSecond, 60, 5000}}), 0);
  EXPECT_EQ(*usage({{mine, t, 80, 700}}), 1);
  auto egress = Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
    return FindWorkload(txn.state, mine)->egress_bytes;
  });
  EXPECT_EQ(egress, 5700);
  Open();  // survives a restart
  auto hours = Run<std::vector<std::pair<TimestampMicros, UsageHour>>>([&](Txn& txn) {
    return Result<std::vector<std::pair<TimestampMicros, UsageHour>>>(WorkloadUsage(txn.state, mine));
  });
  std::int64_t total = 0, samples = 0, util = 0;
  for (const auto& [hour, u] : hours) {
    total += u.egress_bytes;
    samples += u.samples;
    util += u.gpu_utilization_sum;
  }
  EXPECT_EQ(total, 5700);
  EXPECT_EQ(samples, 3);
  EXPECT_EQ(util, 180);
}

}  // namespace
}  // namespace gpuhub::engine
