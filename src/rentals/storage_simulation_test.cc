// A simulation of storage beside term rentals on a manual clock: thousands of random orders with
// extra NVMe, NVMe added to running rentals, volumes created, grown, attached, detached and
// deleted, snapshots of volumes and of local NVMe, restores, egress samples (and resends), top-ups,
// payments by hand, early releases, node drains and storage host drains, clock jumps of minutes to
// days, and restarts (fleet and storage rebuilt from their own records). After every step:
//   - a node's extra NVMe is never oversold: recounted here from the live rentals, against
//     min(its capacity, 30 TB), and the fleet's own invariants;
//   - a network volume is attached only to live rentals of its owner in its region, and every
//     replica set is 3 distinct hosts of the region within their capacity (Storage invariants,
//     and recounted here);
//   - nothing is deleted before its notified time: each unpaid deletion happens at exactly the
//     delete_at its read-only notice named, after that notice and the detach notice;
//   - the ledger balances (every currency, no wallet below zero) and, every few hundred steps and
//     at the end, every charge's money is in the ledger exactly once and every day of every
//     volume/snapshot is paid once (settlement of both the fleet and storage).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "ledger/ledger.h"
#include "rentals/storage.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr std::int64_t kHour = kMicrosPerHour;
const std::vector<std::string> kRegions = {"DFW-1", "IAD-1", "PDX-1"};

FleetConfig FleetCfg() {
  FleetConfig c;
  c.regions = kRegions;
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {
      {"H100 SXM", 1'690'000'000, 475'000'000, false, {1, 2, 4, 8}, c.regions, true, 2000},
      {"A100 SXM", 990'000'000, 280'000'000, false, {1, 2, 4, 8}, c.regions, false, 1000},
  };
  return c;
}

// With `ceph`, PDX-1's volumes are CephFS subvolumes provisioned by a simulated reconciler.
StorageConfig StorageCfg(bool ceph = false) {
  StorageConfig c;
  c.regions = kRegions;
  if (ceph) c.ceph = {{"PDX-1", "10.0.0.1:6789"}};
  return c;
}

Result<TaxBlock> Taxed(UserId customer, std::int64_t net, TimestampMicros) {
  if (customer % 3 != 0) return NoTax(net);
  std::int64_t tax = MulDivHalfEven(net, 200'000, kPpm).value();
  return TaxBlock{net, {{"VAT 20%", 200'000, tax}}, tax, net + tax};
}

// What the notices said about one volume or snapshot.
struct Promise {
  TimestampMicros read_only_at = 0;
  std::string delete_at;  // as notified (RFC 3339)
  bool detach_notified = false;
};

class Simulation {
 public:
  explicit Simulation(std::uint32_t seed, bool ceph = false)
      : fleet_(FleetCfg()), storage_(StorageCfg(ceph)), rng_(seed), ceph_(ceph) {}

  void Run(int steps) {
    ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, now_).ok());
    for (int i = 0; i < 10; ++i) AddNode();
    for (const auto& region : kRegions) {
      for (int i = 0; i < 4; ++i) {
        auto h = storage_.AddHost({region, "", 150 + Pick(250)}, now_, &sc_);
        ASSERT_TRUE(h.ok());
        hosts_.push_back(h->id);
      }
    }
    for (int step = 0; step < steps; ++step) {
      Step();
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "at step " << step;
        return;
      }
      CheckAll(step % 400 == 0);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "at step " << step;
        return;
      }
    }
    CheckAll(true);
  }

  std::size_t orders_with_nvme = 0, nvme_added = 0, volumes = 0, grown = 0, attached = 0,
              snapshots = 0, restores = 0, paid_by_hand = 0, read_only = 0, detached = 0,
              deleted_unpaid = 0, restored = 0, egress_charged_gb = 0, resends = 0,
              restarts = 0, releases = 0, synced_detaches = 0, refused_cross_region = 0;
  std::size_t ceph_ready = 0, ceph_failed = 0, ceph_timeouts = 0, ceph_clients = 0,
              ceph_read_only_clients = 0, ceph_removed = 0, ceph_clones = 0, ceph_down = 0;

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  UserId Customer() { return 100 + Pick(10); }

  void AddNode() {
    const char* gpus[] = {"H100 SXM", "A100 SXM"};
    std::optional<std::int64_t> extra;
    if (Pick(3) == 0) extra = std::int64_t{Pick(45)} * 1000;  // some above 30 TB, some small
    auto n = fleet_.AddNode({gpus[Pick(2)], kRegions[static_cast<std::size_t>(Pick(3))], 0, "",
                             std::nullopt, extra},
                            now_, &fc_);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nodes_.push_back(n->id);
  }

  void Fund(UserId user, std::int64_t micros, Currency c) {
    ledger::TransferRequest t;
    t.id = "topup:" + std::to_string(++topups_);
    t.debit = AccountKey::System(AccountKind::kDeposits, c);
    t.credit = AccountKey::Wallet(user, c);
    t.amount_micros = micros;
    t.code = "topup";
    t.timestamp = now_;
    ASSERT_TRUE(ledger_.Apply(t).ok());
  }

  RentalId AnyRental() {
    if (fleet_.rental_count() == 0) return 0;
    RentalId newest = static_cast<RentalId>(fleet_.rental_count());
    return std::max<RentalId>(1, newest - Pick(30));
  }
  VolumeId AnyVolume() {
    if (storage_.volume_count() == 0) return 0;
    VolumeId newest = static_cast<VolumeId>(storage_.volume_count());
    return std::max<VolumeId>(1, newest - Pick(25));
  }
  SnapshotId AnySnapshot() {
    if (storage_.snapshot_count() == 0) return 0;
    SnapshotId newest = static_cast<SnapshotId>(storage_.snapshot_count());
    return std::max<SnapshotId>(1, newest - Pick(15));
  }

  void Step() {
    fc_.Clear();
    sc_.Clear();
    int op = Pick(100);
    if (op < 11) {  // an order, often with extra NVMe
      OrderSpec spec;
      spec.gpu = Pick(2) ? "H100 SXM" : "A100 SXM";
      int counts[] = {1, 1, 2, 4, 8};
      spec.count = counts[Pick(5)];
      spec.term = Pick(2) ? Term::kWeek : Term::kMonth;
      spec.region = Pick(3) == 0 ? "" : kRegions[static_cast<std::size_t>(Pick(3))];
      spec.extra_nvme_tb = Pick(2) ? Pick(16) : 0;
      spec.currency = Pick(6) == 0 ? Currency::kEur : Currency::kUsd;
      spec.auto_renew = Pick(3) != 0;
      auto r = fleet_.Order(Customer(), spec, ledger_, Taxed, now_, &fc_);
      if (r.ok() && spec.extra_nvme_tb > 0) ++orders_with_nvme;
    } else if (op < 21) {
      Fund(Customer(), std::int64_t{10 + Pick(3000)} * 1'000'000,
           Pick(6) == 0 ? Currency::kEur : Currency::kUsd);
    } else if (op < 24) {  // extra NVMe added to a running rental
      const Rental* r = fleet_.FindRental(AnyRental());
      if (r == nullptr) return;
      if (fleet_.AddExtraNvme(r->customer_id, r->id, 1 + Pick(8), ledger_, Taxed, now_, &fc_)
              .ok()) {
        ++nvme_added;
      }
    } else if (op < 27) {  // renewals paid by hand
      const Rental* r = fleet_.FindRental(AnyRental());
      if (r == nullptr) return;
      (void)fleet_.PayRenewal(r->customer_id, r->id, std::nullopt, ledger_, Taxed, now_, &fc_);
    } else if (op < 29) {
      const Rental* r = fleet_.FindRental(AnyRental());
      if (r == nullptr) return;
      if (fleet_.Release(r->customer_id, r->id, ledger_, now_, &fc_).ok()) ++releases;
    } else if (op < 37) {  // a volume
      VolumeSpec spec{kRegions[static_cast<std::size_t>(Pick(3))], 1 + Pick(8), "",
                      Pick(6) == 0 ? Currency::kEur : Currency::kUsd};
      if (storage_.CreateVolume(Customer(), spec, ledger_, Taxed, now_, &sc_).ok()) ++volumes;
    } else if (op < 40) {
      const Volume* v = storage_.FindVolume(AnyVolume());
      if (v == nullptr) return;
      if (storage_.ResizeVolume(v->customer_id, v->id, v->size_tb + 1 + Pick(4), ledger_, Taxed,
                                now_, &sc_)
              .ok()) {
        ++grown;
      }
    } else if (op < 49) {  // attach to a rental of the owner (sometimes another's, or elsewhere)
      const Volume* v = storage_.FindVolume(AnyVolume());
      const Rental* r = fleet_.FindRental(AnyRental());
      if (v == nullptr || r == nullptr) return;
      // Mostly one of the owner's live rentals (in any region), sometimes any rental at all.
      for (RentalId id = static_cast<RentalId>(fleet_.rental_count()), n = 0;
           Pick(4) != 0 && id >= 1 && n < 80; --id, ++n) {
        const Rental* mine = fleet_.FindRental(id);
        if (mine->customer_id == v->customer_id && IsLive(mine->state)) {
          r = mine;
          break;
        }
      }
      UserId who = Pick(4) == 0 ? r->customer_id : v->customer_id;
      auto a = storage_.Attach(who, v->id, r->id, fleet_, now_, &sc_);
      if (a.ok()) {
        ++attached;
        ASSERT_EQ(r->region, v->region);
        ASSERT_EQ(r->customer_id, v->customer_id);
      } else if (who == v->customer_id && r->customer_id == who && r->region != v->region) {
        ASSERT_EQ(a.status().field(), "rental_id");
        ++refused_cross_region;
      }
    } else if (op < 52) {
      const Volume* v = storage_.FindVolume(AnyVolume());
      if (v == nullptr || v->attachments.empty()) return;
      ASSERT_TRUE(
          storage_.Detach(v->customer_id, v->id, v->attachments.front(), now_, &sc_).ok());
    } else if (op < 54) {
      const Volume* v = storage_.FindVolume(AnyVolume());
      if (v == nullptr) return;
      (void)storage_.DeleteVolume(v->customer_id, v->id, now_, &sc_);
    } else if (op < 59) {  // snapshots of volumes and of local NVMe
      SnapshotSpec spec;
      UserId who = 0;
      if (Pick(2)) {
        const Volume* v = storage_.FindVolume(AnyVolume());
        if (v == nullptr) return;
        spec = {SnapshotSource::kVolume, v->id, "", std::nullopt};
        who = v->customer_id;
      } else {
        const Rental* r = fleet_.FindRental(AnyRental());
        if (r == nullptr) return;
        spec = {SnapshotSource::kLocalNvme, r->id, "", std::nullopt};
        who = r->customer_id;
      }
      if (storage_.CreateSnapshot(who, spec, fleet_, ledger_, Taxed, now_, &sc_).ok()) {
        ++snapshots;
      }
    } else if (op < 63) {
      const DiskSnapshot* s = storage_.FindSnapshot(AnySnapshot());
      if (s == nullptr) return;
      RestoreSpec spec;
      if (Pick(5) == 0) spec.region = kRegions[static_cast<std::size_t>(Pick(3))];
      if (Pick(3) == 0) spec.size_tb = s->size_tb + Pick(3);
      auto v = storage_.RestoreSnapshot(s->customer_id, s->id, spec, ledger_, Taxed, now_, &sc_);
      if (v.ok()) {
        ++restores;
        ASSERT_EQ(v->region, s->region);
        ASSERT_GE(v->size_tb, s->size_tb);
      } else if (!spec.region.empty() && spec.region != s->region) {
        ASSERT_EQ(v.status().field(), "region");
      }
    } else if (op < 64) {
      const DiskSnapshot* s = storage_.FindSnapshot(AnySnapshot());
      if (s == nullptr) return;
      (void)storage_.DeleteSnapshot(s->customer_id, s->id, now_, &sc_);
    } else if (op < 68) {  // paying unpaid storage by hand
      const Volume* v = storage_.FindVolume(AnyVolume());
      if (v != nullptr && v->bill.state != StorageState::kActive &&
          v->bill.state != StorageState::kDeleted) {
        Fund(v->customer_id, 50'000'000, v->bill.currency);
        if (storage_.PayVolume(v->customer_id, v->id, ledger_, Taxed, now_, &sc_).ok()) {
          ++paid_by_hand;
        }
      }
      const DiskSnapshot* s = storage_.FindSnapshot(AnySnapshot());
      if (s != nullptr && s->bill.state != StorageState::kActive &&
          s->bill.state != StorageState::kDeleted) {
        if (storage_.PaySnapshot(s->customer_id, s->id, ledger_, Taxed, now_, &sc_).ok()) {
          ++paid_by_hand;
        }
      }
    } else if (op < 74) {  // egress samples, some resent, some out of order
      const Rental* r = fleet_.FindRental(AnyRental());
      if (r == nullptr || r->term_start == 0) return;
      TimestampMicros at = now_ - Pick(3) * kMicrosPerSecond;
      std::int64_t bytes = std::int64_t{Pick(800)} * 1'000'000'000 + Pick(1'000'000'000);
      if (Pick(20) == 0) bytes *= 20;  // a burst: terabytes
      auto e = storage_.RecordEgress({r->id, at, bytes}, fleet_, ledger_, Taxed, now_, &sc_);
      ASSERT_TRUE(e.ok()) << e.status().ToString();
      egress_charged_gb += static_cast<std::size_t>(e->charged_gb);
      auto again = storage_.RecordEgress({r->id, at, bytes}, fleet_, ledger_, Taxed, now_, &sc_);
      ASSERT_TRUE(again.ok());
      ASSERT_FALSE(again->recorded) << "a resent sample was recorded";
      ++resends;
    } else if (op < 77) {  // drains: a node or a storage host, either way
      if (Pick(2)) {
        NodeId id = nodes_[static_cast<std::size_t>(Pick(static_cast<int>(nodes_.size())))];
        NodeState states[] = {NodeState::kActive, NodeState::kDraining};
        (void)fleet_.SetNodeState(id, states[Pick(2)], now_, &fc_);
      } else {
        StorageHostId id = hosts_[static_cast<std::size_t>(Pick(static_cast<int>(hosts_.size())))];
        StorageHostState states[] = {StorageHostState::kActive, StorageHostState::kDraining};
        ASSERT_TRUE(storage_.SetHostState(id, states[Pick(2)], now_, &sc_).ok());
      }
    } else if (op < 78) {
      if (fleet_.node_count() < 40) AddNode();
    } else if (op < 79) {
      Restart();
      return;
    } else if (ceph_ && op < 86) {
      Reconcile();
    } else {
      // The reconciler runs every second: mostly before the clock jumps past a deadline.
      if (ceph_ && Pick(4) != 0) Reconcile();
      std::int64_t step = Pick(8) == 0 ? std::int64_t{1 + Pick(72)} * kHour
                                       : std::int64_t{1 + Pick(120)} * 60 * kMicrosPerSecond;
      now_ += step;
      fleet_.AdvanceTo(ledger_, Taxed, now_, &fc_);
    }
    // As the engine does after every fleet change: released rentals lose their volumes.
    fc_.Normalize();
    std::size_t before = sc_.events.size();
    storage_.SyncRentals(fleet_, fc_.rentals, now_, &sc_);
    synced_detaches += sc_.events.size() - before;
    storage_.AdvanceTo(ledger_, Taxed, now_, &sc_);
    Replay();
  }

  // The storage reconciler against a simulated cluster: sometimes down (nothing done), sometimes
  // reaching only part of the work, refusing some creations, repeating some reports (as after a
  // crash between a Ceph call and its report).
  void Reconcile() {
    CephWork work = storage_.CephWorkToDo(kMaxCephWorkPerPass);
    if (Pick(5) == 0) {
      ++ceph_down;
      return;
    }
    for (const CephVolumeWork& w : work.volumes) {
      if (Pick(4) == 0) continue;
      const std::string path = "/volumes/_nogroup/vol-" + std::to_string(w.volume_id) + "/u";
      if (w.create || w.clone) {
        if (Pick(12) == 0) {
          ASSERT_TRUE(storage_.CephFailed(w.volume_id, "Error EINVAL", now_, &sc_).ok());
          ++ceph_failed;
          continue;
        }
        if (Pick(3) == 0) {
          ASSERT_TRUE(storage_.CephCreating(w.volume_id, now_, &sc_).ok());
        }
        const int times = Pick(4) == 0 ? 2 : 1;
        for (int i = 0; i < times; ++i) {
          ASSERT_TRUE(storage_.CephReady(w.volume_id, path, w.size_tb, now_, &sc_).ok());
        }
        ready_at_[w.volume_id] = now_;
        ++ceph_ready;
        if (w.clone) ++ceph_clones;
        continue;
      }
      if (w.resize) {
        ASSERT_TRUE(storage_.CephReady(w.volume_id, path, w.size_tb, now_, &sc_).ok());
      }
      for (const auto& [rental, read_only] : w.authorize) {
        ASSERT_TRUE(storage_.CephClientSet(w.volume_id, {rental, read_only, "v1:k"}, now_, &sc_)
                        .ok());
        ++(read_only ? ceph_read_only_clients : ceph_clients);
      }
      for (RentalId rental : w.deauthorize) {
        ASSERT_TRUE(storage_.CephClientRemoved(w.volume_id, rental, now_, &sc_).ok());
      }
      if (w.remove) {
        ASSERT_TRUE(storage_.CephRemoved(w.volume_id, now_, &sc_).ok());
        ++ceph_removed;
      }
    }
    for (const CephSnapshotWork& w : work.snapshots) {
      if (Pick(4) == 0) continue;
      ASSERT_TRUE((w.take ? storage_.CephSnapshotTaken(w.snapshot_id, now_, &sc_)
                          : storage_.CephSnapshotRemoved(w.snapshot_id, now_, &sc_))
                      .ok());
    }
  }

  // Ceph volumes: never on storage hosts; nothing charged before ready (a failed one never
  // charged); billing from the moment it became ready; attached only when ready; clients only of
  // attachments once the reconciler caught up (checked where the work says nothing is left).
  // Every volume the step changed (all of them when `thorough`).
  void CheckCeph(bool thorough) {
    std::vector<VolumeId> ids = sc_.volumes;
    if (thorough) {
      ids.clear();
      for (VolumeId id = 1; id <= static_cast<VolumeId>(storage_.volume_count()); ++id) {
        ids.push_back(id);
      }
    }
    for (VolumeId id : ids) {
      const Volume* v = storage_.FindVolume(id);
      const bool ceph = v->region == "PDX-1";
      ASSERT_EQ(ceph, v->provisioning != CephState::kNone) << "volume " << id;
      if (!ceph) continue;
      ASSERT_TRUE(v->hosts.empty());
      const auto charges = storage_.ChargesOfVolume(id);
      if (v->provisioning != CephState::kReady) {
        ASSERT_TRUE(charges.empty()) << "volume " << id << " charged before it was ready";
        ASSERT_TRUE(v->attachments.empty());
      } else if (!charges.empty()) {
        ASSERT_EQ(charges.front().first_day, 1);
        ASSERT_EQ(charges.front().period_start, v->bill.anchor);
        auto it = ready_at_.find(id);
        ASSERT_TRUE(it != ready_at_.end());
        ASSERT_EQ(v->bill.anchor, it->second) << "billing starts when it is ready";
      }
      if (v->provisioning == CephState::kFailed) {
        if (v->provision_error.find("not ready within") != std::string::npos) {
          timed_out_.insert(id);
          ceph_timeouts = timed_out_.size();
        }
        ASSERT_EQ(v->bill.state, StorageState::kDeleted);
      }
      const CephVolumeWork w = storage_.CephWorkOf(*v);
      if (w.authorize.empty() && w.deauthorize.empty() && v->provisioning == CephState::kReady) {
        ASSERT_EQ(v->clients.size(), v->attachments.size()) << "volume " << id;
      }
    }
  }

  void Restart() {
    ++restarts;
    auto fleet = Fleet::Restore(FleetCfg(), fleet_.Records());
    ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
    auto storage = Storage::Restore(StorageCfg(ceph_), storage_.Records());
    ASSERT_TRUE(storage.ok()) << storage.status().ToString();
    ASSERT_EQ(storage->NextEventAt(), storage_.NextEventAt());
    fleet_ = std::move(fleet).value();
    storage_ = std::move(storage).value();
  }

  // The step's notices and events, in order, against what earlier notices promised.
  void Replay() {
    for (const StorageNotice& n : sc_.notices) {
      Promise& p = promises_[n.subject];
      std::map<std::string, std::string> data(n.data.begin(), n.data.end());
      if (n.kind == "storage.read_only") {
        ++read_only;
        p = Promise{};
        p.read_only_at = n.at;
        p.delete_at = data["delete_at"];
        ASSERT_EQ(data["detach_at"], FormatTimestamp(n.at + kReadOnlyBeforeDetachMicros));
        ASSERT_FALSE(p.delete_at.empty());
      } else if (n.kind == "storage.detached") {
        ++detached;
        ASSERT_NE(p.read_only_at, 0) << n.subject << " detached without a read-only notice";
        ASSERT_EQ(n.at, p.read_only_at + kReadOnlyBeforeDetachMicros);
        ASSERT_EQ(data["delete_at"], p.delete_at) << "the deletion time moved";
        p.detach_notified = true;
      } else if (n.kind == "storage.deleted") {
        ++deleted_unpaid;
        // Nothing is deleted before its notified time, nor without both earlier notices.
        ASSERT_TRUE(p.detach_notified) << n.subject;
        ASSERT_EQ(FormatTimestamp(n.at), p.delete_at) << n.subject;
        ASSERT_EQ(n.at, p.read_only_at + kReadOnlyBeforeDetachMicros + kDetachedBeforeDeleteMicros);
        promises_.erase(n.subject);
      } else if (n.kind == "storage.restored") {
        ++restored;
        ASSERT_NE(p.read_only_at, 0);
        promises_.erase(n.subject);
      }
    }
    for (const StorageEvent& e : sc_.events) {
      if (e.kind != StorageEventKind::kDeleted) continue;
      const StorageBill& b = e.snapshot ? storage_.FindSnapshot(e.subject_id)->bill
                                        : storage_.FindVolume(e.subject_id)->bill;
      if (b.delete_reason == DeleteReason::kUnpaid) {
        ASSERT_GE(e.at, b.delete_at);
      }
    }
  }

  void CheckAll(bool thorough) {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = storage_.CheckInvariants(fleet_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (ceph_) CheckCeph(thorough);
    // A node's extra NVMe, recounted from the live rentals.
    std::map<NodeId, std::int64_t> sold;
    for (RentalId id = 1; id <= static_cast<RentalId>(fleet_.rental_count()); ++id) {
      const Rental* r = fleet_.FindRental(id);
      if (IsLive(r->state)) sold[r->node_id] += r->extra_nvme_gb;
    }
    for (NodeId id : nodes_) {
      const Node* n = fleet_.FindNode(id);
      ASSERT_LE(sold[id], std::min(n->nvme_extra_capacity_gb, kMaxExtraNvmeGbSoldPerNode))
          << "node " << id << " oversold";
      ASSERT_EQ(fleet_.ExtraNvmeSoldGb(id), sold[id]);
    }
    // Replicas within their hosts, recounted; attachments within the region.
    std::map<StorageHostId, std::int64_t> used;
    for (VolumeId id = 1; id <= static_cast<VolumeId>(storage_.volume_count()); ++id) {
      const Volume* v = storage_.FindVolume(id);
      for (auto h : v->hosts) used[h] += v->size_tb;
      for (RentalId r : v->attachments) {
        ASSERT_EQ(fleet_.FindRental(r)->region, v->region);
        ASSERT_TRUE(IsLive(fleet_.FindRental(r)->state));
      }
    }
    for (SnapshotId id = 1; id <= static_cast<SnapshotId>(storage_.snapshot_count()); ++id) {
      const DiskSnapshot* sn = storage_.FindSnapshot(id);
      for (auto h : sn->hosts) used[h] += sn->size_tb;
    }
    for (StorageHostId h : hosts_) {
      ASSERT_EQ(storage_.HostUsedTb(h), used[h]);
      ASSERT_LE(used[h], storage_.FindHost(h)->capacity_tb);
    }
    if (thorough) {
      s = fleet_.CheckSettlement(ledger_);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = storage_.CheckSettlement(ledger_);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = ledger_.CheckHistory();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  Fleet fleet_;
  Storage storage_;
  ledger::Ledger ledger_;
  Changes fc_;
  StorageChanges sc_;
  std::mt19937 rng_;
  TimestampMicros now_ = kStart;
  std::vector<NodeId> nodes_;
  std::vector<StorageHostId> hosts_;
  std::map<std::string, Promise> promises_;
  int topups_ = 0;
  bool ceph_ = false;
  std::map<VolumeId, TimestampMicros> ready_at_;  // when each Ceph volume was reported ready
  std::set<VolumeId> timed_out_;
};

TEST(StorageSimulationTest, RandomStorageLifecyclesKeepEveryInvariant) {
  Simulation sim(20'261'201);
  sim.Run(15'000);
  std::printf(
      "orders with extra NVMe %zu, NVMe added %zu, volumes %zu (grown %zu, attached %zu, "
      "cross-region refused %zu), snapshots %zu, restores %zu, read-only %zu, detached %zu, "
      "deleted unpaid %zu, restored %zu (by hand %zu), egress GB charged %zu, resends %zu, "
      "releases %zu, detached by a release %zu, restarts %zu\n",
      sim.orders_with_nvme, sim.nvme_added, sim.volumes, sim.grown, sim.attached,
      sim.refused_cross_region, sim.snapshots, sim.restores, sim.read_only, sim.detached,
      sim.deleted_unpaid, sim.restored, sim.paid_by_hand, sim.egress_charged_gb, sim.resends,
      sim.releases, sim.synced_detaches, sim.restarts);
  // The run exercised what it claims to.
  EXPECT_GT(sim.orders_with_nvme, 100u);
  EXPECT_GT(sim.nvme_added, 50u);
  EXPECT_GT(sim.volumes, 300u);
  EXPECT_GT(sim.attached, 50u);
  EXPECT_GT(sim.refused_cross_region, 100u);
  EXPECT_GT(sim.snapshots, 100u);
  EXPECT_GT(sim.restores, 100u);
  EXPECT_GT(sim.read_only, 500u);
  EXPECT_GT(sim.detached, 200u);
  EXPECT_GT(sim.deleted_unpaid, 100u);
  EXPECT_GT(sim.restored, 300u);
  EXPECT_GT(sim.egress_charged_gb, 1000u);
  EXPECT_GT(sim.synced_detaches, 20u);
  EXPECT_GT(sim.restarts, 50u);
}

// The same with PDX-1 on Ceph: its volumes wait for the simulated reconciler (sometimes down,
// sometimes partial, refusing some, repeating reports), fail at their deadline at no charge, and
// are billed from when they are ready.
TEST(StorageSimulationTest, CephVolumesAreBilledFromReadyAndFailAtTheirDeadlineAtNoCharge) {
  Simulation sim(20'261'204, true);
  sim.Run(15'000);
  std::printf(
      "volumes %zu, ceph ready %zu (clones %zu), failed by Ceph %zu, timed-out volumes seen "
      "%zu, clients rw %zu / r %zu, removed %zu, passes with Ceph down %zu\n",
      sim.volumes, sim.ceph_ready, sim.ceph_clones, sim.ceph_failed, sim.ceph_timeouts,
      sim.ceph_clients, sim.ceph_read_only_clients, sim.ceph_removed, sim.ceph_down);
  EXPECT_GT(sim.ceph_ready, 200u);
  EXPECT_GT(sim.ceph_clones, 50u);
  EXPECT_GT(sim.ceph_failed, 10u);
  EXPECT_GT(sim.ceph_timeouts, 100u);
  EXPECT_GT(sim.ceph_clients, 15u);
  EXPECT_GT(sim.ceph_read_only_clients, 1u);
  EXPECT_GT(sim.ceph_removed, 200u);
  EXPECT_GT(sim.ceph_down, 200u);
}

}  // namespace
}  // namespace gpuhub::rentals
