// Network volumes of a Ceph region, as worked examples: pending -> creating -> ready with billing
// from ready, the work the reconciler is given at each step (create, resize, clients for each
// attachment, read-only caps while unpaid, deauthorize, remove), the ready deadline failing a
// volume at no charge, late and repeated reports changing nothing, snapshots and clones, and
// restore from records.
#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "rentals/storage.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr UserId kAlice = 10;
const std::string kPath = "/volumes/_nogroup/vol-1/0f1e";

FleetConfig Fleet1() {
  FleetConfig c;
  c.regions = {"DFW-1", "IAD-1"};
  c.cards = {{"H100 SXM", 1'690'000'000, 475'000'000, false, {1, 2, 4, 8}, c.regions, true, 2000}};
  return c;
}

StorageConfig CephConfig() {
  StorageConfig c;
  c.regions = {"DFW-1", "IAD-1"};
  c.ceph = {{"IAD-1", "10.0.0.1:6789"}};
  return c;
}

Result<TaxBlock> Untaxed(UserId, std::int64_t net, TimestampMicros) { return NoTax(net); }

class StorageCephTest : public ::testing::Test {
 protected:
  StorageCephTest() : fleet_(Fleet1()), storage_(CephConfig()) {}
  void SetUp() override {
    Fund(100'000'000);
    ASSERT_TRUE(fleet_.AddNode({"H100 SXM", "IAD-1", 0, "", std::nullopt, std::nullopt}, now_,
                               &fc_)
                    .ok());
  }
  void TearDown() override { Check(); }
  void Check() {
    Status s = storage_.CheckInvariants(fleet_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = storage_.CheckSettlement(ledger_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void Fund(std::int64_t micros) {
    ledger::TransferRequest t;
    t.id = "topup:" + std::to_string(++topups_);
    t.debit = AccountKey::System(AccountKind::kDeposits, Currency::kUsd);
    t.credit = AccountKey::Wallet(kAlice, Currency::kUsd);
    t.amount_micros = micros;
    t.code = "topup";
    t.timestamp = now_;
    ASSERT_TRUE(ledger_.Apply(t).ok());
  }
  std::int64_t Wallet() {
    return ledger_.GetAccount(AccountKey::Wallet(kAlice, Currency::kUsd))->available();
  }
  Volume Create(std::int64_t tb, const std::string& name = "data") {
    auto v = storage_.CreateVolume(kAlice, {"IAD-1", tb, name, Currency::kUsd}, ledger_, Untaxed,
                                   now_, &sc_);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return v.ok() ? *v : Volume{};
  }
  RentalId Rent() {
    OrderSpec s;
    s.gpu = "H100 SXM";
    s.count = 1;
    s.term = Term::kMonth;
    s.region = "IAD-1";
    Fund(2'000'000'000);
    auto r = fleet_.Order(kAlice, s, ledger_, Untaxed, now_, &fc_);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : 0;
  }
  void Advance(std::int64_t micros) {
    now_ += micros;
    storage_.AdvanceTo(ledger_, Untaxed, now_, &sc_);
  }
  CephVolumeWork Work(VolumeId id) { return storage_.CephWorkOf(*storage_.FindVolume(id)); }
  const Volume& V(VolumeId id) { return *storage_.FindVolume(id); }
  void Ready(VolumeId id, std::int64_t tb) {
    ASSERT_TRUE(storage_.CephReady(id, kPath, tb, now_, &sc_).ok());
    storage_.AdvanceTo(ledger_, Untaxed, now_, &sc_);
  }

  Fleet fleet_;
  Storage storage_;
  ledger::Ledger ledger_;
  Changes fc_;
  StorageChanges sc_;
  TimestampMicros now_ = kStart;
  int topups_ = 0;
};

TEST_F(StorageCephTest, AVolumeIsBilledFromReadyAndItsClientsFollowItsAttachments) {
  const std::int64_t before = Wallet();
  Volume v = Create(1);
  EXPECT_EQ(v.provisioning, CephState::kPending);
  EXPECT_TRUE(v.hosts.empty()) << "Ceph's CRUSH places the replicas";
  EXPECT_EQ(v.bill.days_paid, 0);
  EXPECT_EQ(v.provision_deadline, now_ + kCephReadyTimeoutMicros);
  EXPECT_EQ(Wallet(), before) << "nothing is paid before it is ready";
  EXPECT_TRUE(storage_.ChargesOfVolume(v.id).empty());
  EXPECT_EQ(storage_.Next(v).what, "fail");
  CephVolumeWork w = Work(v.id);
  EXPECT_TRUE(w.create);
  EXPECT_EQ(w.size_tb, 1);
  EXPECT_EQ(storage_.CephWorkToDo(10).volumes.size(), 1u);
  // Not ready: no attachment, growth or snapshot yet.
  const RentalId r = Rent();
  auto attach = storage_.Attach(kAlice, v.id, r, fleet_, now_, &sc_);
  EXPECT_EQ(attach.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(attach.status().message().find("pending on Ceph"), std::string::npos);
  EXPECT_EQ(storage_.ResizeVolume(kAlice, v.id, 2, ledger_, Untaxed, now_, &sc_).status().field(),
            "size_tb");

  ASSERT_TRUE(storage_.CephCreating(v.id, now_, &sc_).ok());
  EXPECT_EQ(V(v.id).provisioning, CephState::kCreating);
  now_ += 90 * kMicrosPerSecond;
  const TimestampMicros ready_at = now_;
  const std::int64_t at_ready = Wallet();
  Ready(v.id, 1);
  EXPECT_EQ(V(v.id).provisioning, CephState::kReady);
  EXPECT_EQ(V(v.id).ceph_path, kPath);
  // Day 1 runs from ready: R(14/30) = 0.466667 paid now, the next day due a day after ready.
  ASSERT_EQ(storage_.ChargesOfVolume(v.id).size(), 1u);
  EXPECT_EQ(storage_.ChargesOfVolume(v.id)[0].period_start, ready_at);
  EXPECT_EQ(V(v.id).bill.PaidThrough(), ready_at + kMicrosPerDay);
  EXPECT_EQ(at_ready - Wallet(), 466'667);
  // A repeated ready report changes nothing (one charge).
  Ready(v.id, 1);
  EXPECT_EQ(storage_.ChargesOfVolume(v.id).size(), 1u);
  EXPECT_TRUE(Work(v.id).empty());

  // Attached: its client is to be authorized rw on the path, then nothing more.
  ASSERT_TRUE(storage_.Attach(kAlice, v.id, r, fleet_, now_, &sc_).ok());
  w = Work(v.id);
  ASSERT_EQ(w.authorize.size(), 1u);
  EXPECT_EQ(w.authorize[0], std::make_pair(r, false));
  EXPECT_EQ(w.path, kPath);
  ASSERT_TRUE(storage_.CephClientSet(v.id, {r, false, "v1:sealed"}, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).empty());
  EXPECT_EQ(CephClientName(v.id, r), "gpuhub-vol1-r" + std::to_string(r));

  // Grown: the quota to follow; reported, nothing more.
  ASSERT_TRUE(storage_.ResizeVolume(kAlice, v.id, 3, ledger_, Untaxed, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).resize);
  EXPECT_EQ(Work(v.id).size_tb, 3);
  Ready(v.id, 3);
  EXPECT_TRUE(Work(v.id).empty());
  EXPECT_EQ(V(v.id).ceph_quota_tb, 3);

  // Delete while attached names the field; detached: the client goes, then the subvolume.
  EXPECT_EQ(storage_.DeleteVolume(kAlice, v.id, now_, &sc_).status().field(), "attachments");
  ASSERT_TRUE(storage_.Detach(kAlice, v.id, r, now_, &sc_).ok());
  EXPECT_EQ(Work(v.id).deauthorize, std::vector<RentalId>{r});
  ASSERT_TRUE(storage_.DeleteVolume(kAlice, v.id, now_, &sc_).ok());
  EXPECT_FALSE(Work(v.id).remove) << "its client first";
  ASSERT_TRUE(storage_.CephClientRemoved(v.id, r, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).remove);
  ASSERT_TRUE(storage_.CephRemoved(v.id, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).empty());
  EXPECT_TRUE(storage_.CephWorkToDo(10).volumes.empty());
}

TEST_F(StorageCephTest, AVolumeNotReadyWithinTheDeadlineFailsAtNoCharge) {
  const std::int64_t before = Wallet();
  Volume v = Create(2);
  Advance(kCephReadyTimeoutMicros - 1);
  EXPECT_EQ(V(v.id).provisioning, CephState::kPending);
  sc_.Clear();
  Advance(1);
  EXPECT_EQ(V(v.id).provisioning, CephState::kFailed);
  EXPECT_EQ(V(v.id).bill.state, StorageState::kDeleted);
  EXPECT_EQ(V(v.id).bill.delete_reason, DeleteReason::kFailed);
  EXPECT_NE(V(v.id).provision_error.find("not ready within 600 s"), std::string::npos);
  EXPECT_EQ(Wallet(), before);
  EXPECT_TRUE(storage_.ChargesOfVolume(v.id).empty());
  ASSERT_EQ(sc_.notices.size(), 1u);
  EXPECT_EQ(sc_.notices[0].kind, "storage.failed");
  // Whatever Ceph made meanwhile is removed; a late ready report does not revive it.
  EXPECT_TRUE(Work(v.id).remove);
  Ready(v.id, 2);
  EXPECT_EQ(V(v.id).provisioning, CephState::kFailed);
  EXPECT_EQ(Wallet(), before);
  ASSERT_TRUE(storage_.CephRemoved(v.id, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).empty());
  // Ceph's refusal fails another at once, with its words.
  Volume w = Create(1, "");
  ASSERT_TRUE(storage_.CephFailed(w.id, "subvolume create: Error EINVAL: bad", now_, &sc_).ok());
  EXPECT_EQ(V(w.id).provision_error, "subvolume create: Error EINVAL: bad");
  EXPECT_EQ(storage_.CephFailed(99, "x", now_, &sc_).code(), StatusCode::kNotFound);
}

TEST_F(StorageCephTest, UnpaidClientsBecomeReadOnlyAndMountNamesAreChecked) {
  for (const char* bad : {"Data.1", "-data", "a_b"}) {
    EXPECT_EQ(storage_
                  .CreateVolume(kAlice, {"IAD-1", 1, bad, Currency::kUsd}, ledger_, Untaxed, now_,
                                &sc_)
                  .status()
                  .field(),
              "name")
        << bad;
  }
  Volume v = Create(1);
  Ready(v.id, 1);
  const RentalId r = Rent();
  ASSERT_TRUE(storage_.Attach(kAlice, v.id, r, fleet_, now_, &sc_).ok());
  ASSERT_TRUE(storage_.CephClientSet(v.id, {r, false, "v1:k"}, now_, &sc_).ok());
  // Empty the wallet: the next day is unpaid, read-only at once, the client's caps to r.
  ledger::TransferRequest t;
  t.id = "drain";
  t.debit = AccountKey::Wallet(kAlice, Currency::kUsd);
  t.credit = AccountKey::System(AccountKind::kDeposits, Currency::kUsd);
  t.amount_micros = Wallet();
  t.code = "topup";
  t.timestamp = now_;
  ASSERT_TRUE(ledger_.Apply(t).ok());
  Advance(kMicrosPerDay);
  EXPECT_EQ(V(v.id).bill.state, StorageState::kReadOnly);
  CephVolumeWork w = Work(v.id);
  ASSERT_EQ(w.authorize.size(), 1u);
  EXPECT_EQ(w.authorize[0], std::make_pair(r, true));
  ASSERT_TRUE(storage_.CephClientSet(v.id, {r, true, "v1:k"}, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).empty());
}

TEST_F(StorageCephTest, SnapshotsAreTakenOnCephAndRestoreAsClonesThatOutliveTheirVolume) {
  Volume v = Create(1);
  Ready(v.id, 1);
  auto s = storage_.CreateSnapshot(kAlice, {SnapshotSource::kVolume, v.id, "s", std::nullopt},
                                   fleet_, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_TRUE(s->ceph);
  EXPECT_TRUE(s->hosts.empty());
  CephWork work = storage_.CephWorkToDo(10);
  ASSERT_EQ(work.snapshots.size(), 1u);
  EXPECT_TRUE(work.snapshots[0].take);
  EXPECT_EQ(work.snapshots[0].subvolume, "vol-1");
  // Not taken yet: no restore.
  EXPECT_EQ(
      storage_.RestoreSnapshot(kAlice, s->id, {}, ledger_, Untaxed, now_, &sc_).status().code(),
      StatusCode::kFailedPrecondition);
  ASSERT_TRUE(storage_.CephSnapshotTaken(s->id, now_, &sc_).ok());
  EXPECT_TRUE(storage_.CephWorkToDo(10).snapshots.empty());
  // Smaller than the snapshot: refused, naming the field.
  RestoreSpec small;
  small.size_tb = 0;
  EXPECT_EQ(storage_.RestoreSnapshot(kAlice, s->id, small, ledger_, Untaxed, now_, &sc_)
                .status()
                .field(),
            "size_tb");
  RestoreSpec spec;
  spec.size_tb = 2;
  auto c = storage_.RestoreSnapshot(kAlice, s->id, spec, ledger_, Untaxed, now_, &sc_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->provisioning, CephState::kCloning);
  CephVolumeWork w = Work(c->id);
  EXPECT_TRUE(w.clone);
  EXPECT_EQ(w.clone_subvolume, "vol-1");
  EXPECT_EQ(w.clone_snapshot, "snap-" + std::to_string(s->id));
  EXPECT_EQ(w.size_tb, 2);
  Ready(c->id, 2);
  EXPECT_EQ(V(c->id).provisioning, CephState::kReady);
  // The source volume deleted: its subvolume stays while the snapshot lives.
  ASSERT_TRUE(storage_.DeleteVolume(kAlice, v.id, now_, &sc_).ok());
  EXPECT_FALSE(Work(v.id).remove);
  ASSERT_TRUE(storage_.DeleteSnapshot(kAlice, s->id, now_, &sc_).ok());
  work = storage_.CephWorkToDo(10);
  ASSERT_EQ(work.snapshots.size(), 1u);
  EXPECT_TRUE(work.snapshots[0].remove);
  EXPECT_FALSE(Work(v.id).remove) << "the snapshot first";
  ASSERT_TRUE(storage_.CephSnapshotRemoved(s->id, now_, &sc_).ok());
  EXPECT_TRUE(Work(v.id).remove);
}

TEST_F(StorageCephTest, RestoreFromRecordsKeepsTheCephState) {
  Volume v = Create(1);
  Ready(v.id, 1);
  const RentalId r = Rent();
  ASSERT_TRUE(storage_.Attach(kAlice, v.id, r, fleet_, now_, &sc_).ok());
  ASSERT_TRUE(storage_.CephClientSet(v.id, {r, false, "v1:k"}, now_, &sc_).ok());
  Volume pending = Create(1, "p");
  // The agent mounts at most kMaxCephVolumesPerRental: the next attach names the rental.
  for (std::size_t i = 1; i < kMaxCephVolumesPerRental; ++i) {
    Volume more = Create(1, "m" + std::to_string(i));
    Ready(more.id, 1);
    ASSERT_TRUE(storage_.Attach(kAlice, more.id, r, fleet_, now_, &sc_).ok());
  }
  Volume ninth = Create(1, "ninth");
  Ready(ninth.id, 1);
  auto refused = storage_.Attach(kAlice, ninth.id, r, fleet_, now_, &sc_);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().field(), "rental_id");
  auto restored = Storage::Restore(CephConfig(), storage_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(*restored->FindVolume(v.id), V(v.id));
  EXPECT_EQ(*restored->FindVolume(pending.id), V(pending.id));
  EXPECT_EQ(restored->NextEventAt(), storage_.NextEventAt());
  ASSERT_TRUE(restored->CheckInvariants(fleet_).ok());
}

}  // namespace
}  // namespace gpuhub::rentals
