// Storage beside term rentals (issue 11, spec/market.md "Storage"): network volumes and snapshots
// billed daily from the wallet, with the unpaid path, replicated on a region's storage hosts and
// attached to the customer's rentals of that region; and each rental's egress meter. (Extra local
// NVMe is part of the rental itself: Fleet::AddExtraNvme, OrderSpec::extra_nvme_tb.)
//
// Contract
// - Pure and deterministic like Fleet: no I/O, no clock (every command takes `now`), no threads;
//   not thread-safe (the engine's single writer calls the mutating methods).
// - Commands validate first and change nothing when they fail; the money of one command moves in
//   ONE ledger batch (rentals/payment.h). Errors: invalid_argument with the field (bad input),
//   not_found (unknown id or someone else's: the field names which), failed_precondition (wrong
//   state, no room, another region: 409 or 400 with the field), insufficient_funds,
//   resource_exhausted (per-account limits).
// - Rentals are read from the Fleet passed in; the engine calls SyncRentals after every fleet
//   change so that a released rental's volumes are detached in the same commit.
// - Every command reports what it changed in StorageChanges (records to persist, ledger transfers
//   in order, history events, charges for billing, notices for the customer).
//
// Money (prices are micro-USD per TB per 30-day month, tax excluded, from StorageConfig):
// - A volume (size S TB) costs P = $14 per TB-month, a snapshot $6 per TB-month on its size,
//   billed by the day in advance: day n of the item costs R(P S n/30) - R(P S (n-1)/30), so every
//   30 consecutive days of one size cost exactly P S. The first day is paid at creation (nothing
//   is created when it cannot be); then each day is paid when it starts.
// - Growing a volume pays the added TB for the rest of the day already paid, pro rata to the
//   microsecond (half-even); the days after are billed at the new size. Volumes never shrink.
// - Deleting stops the bill; the day already paid is not refunded.
// - Egress: see EgressMeter. Charged from the rental's wallet.
//
// The unpaid path (each step once, at its time, in AdvanceTo; each with a notice that says when the
// next one happens; nothing is deleted before the time its read-only notice named):
//   T = the unpaid day's start: read_only at once (attached instances keep reading, writes are
//   refused by the host agent); retried every hour; T + 72 h: detached from every rental (a
//   snapshot: suspended); T + 72 h + 7 d: deleted, its replicas freed. Paying at any point before
//   (PayVolume / PaySnapshot, or an hourly retry after a top-up) pays every day from T up to the one
//   running now and makes it active again (a detached volume stays detached until attached again).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "rentals/fleet.h"
#include "rentals/limits.h"
#include "rentals/storage_types.h"

namespace gpuhub::rentals {

// A region whose network volumes are CephFS subvolumes of its Ceph cluster (docs/storage.md
// "Ceph-backed volumes"): the monitors are what the host agents mount from.
struct CephRegion {
  std::string region;
  std::string monitors;  // "10.0.0.1:6789,10.0.0.2:6789"
  friend bool operator==(const CephRegion&, const CephRegion&) = default;
};

struct StorageConfig {
  std::vector<std::string> regions;  // where storage is sold (the fleet's regions)
  // Regions (of `regions`) on Ceph; any other region's volumes are billing records only (demo).
  std::vector<CephRegion> ceph;
  std::int64_t ceph_ready_timeout_micros = kCephReadyTimeoutMicros;
  std::int64_t volume_micros_per_tb_month = 14'000'000;
  std::int64_t snapshot_micros_per_tb_month = 6'000'000;
  std::int64_t egress_micros_per_tb = 4'000'000;  // $4 per TB = 0.004 per GB
  // Egress included per rental per 30-day month; a week gets 7/30 of it.
  std::int64_t egress_included_bytes_per_month = 20 * kBytesPerTb;
};
// invalid_argument for malformed or duplicated regions or prices out of range.
Status ValidateStorageConfig(const StorageConfig& config);

// ----- Inputs ------------------------------------------------------------------------------------

struct StorageHostSpec {
  std::string region;
  std::string hostname;  // optional, [a-z0-9.-]
  std::int64_t capacity_tb = 0;
};

struct VolumeSpec {
  std::string region;
  std::int64_t size_tb = 0;
  std::string name;  // optional
  Currency currency = Currency::kUsd;
};

struct SnapshotSpec {
  SnapshotSource source = SnapshotSource::kVolume;
  std::int64_t source_id = 0;  // the volume, or the rental whose local NVMe is copied
  std::string name;
  std::optional<Currency> currency;  // default: the volume's / the rental's wallet
};

struct RestoreSpec {
  std::string region;                 // "" = the snapshot's; another region is refused
  std::optional<std::int64_t> size_tb;  // default and minimum: the snapshot's size
  std::string name;
  std::optional<Currency> currency;  // default: the snapshot's wallet
};

// One usage sample of a rental's instance: the bytes it sent out since the previous sample.
struct EgressSample {
  RentalId rental_id = 0;
  TimestampMicros at = 0;  // when measured; a sample at or before the last recorded is a resend
  std::int64_t bytes = 0;
};

// ----- Outputs -----------------------------------------------------------------------------------

// What storage tells a customer ("storage.read_only", subject "volume:7", ...): the same record as
// the rentals' notices, recorded the same way by the engine.
using StorageNotice = Notice;

struct StorageChanges {
  std::vector<ledger::Transfer> transfers;
  std::vector<StorageHostId> hosts;
  std::vector<VolumeId> volumes;
  std::vector<SnapshotId> snapshots;
  std::vector<std::pair<RentalId, std::int64_t>> meters;  // (rental, period)
  std::vector<StorageEvent> events;
  std::vector<StorageCharge> charges;
  std::vector<StorageNotice> notices;

  void Clear() { *this = StorageChanges{}; }
  void Normalize();  // sorts and deduplicates the id lists (events, charges, notices keep order)
  bool empty() const;
};

// What the storage reconciler has to do on the cluster for one volume of a Ceph region (a pure
// function of the records: CephWorkOf). Clients are authorized only on a ready volume, with the
// access its bill allows (r while read_only); a client whose rental is no longer attached (or of
// a deleted volume) is deauthorized; a deleted or failed volume's subvolume is removed once its
// clients are gone and no live snapshot of it remains.
struct CephVolumeWork {
  VolumeId volume_id = 0;
  std::string region;
  bool create = false;  // pending/creating: create the subvolume (or find it made before a crash)
  bool clone = false;   // cloning: clone clone_snapshot of clone_subvolume (or find it)
  std::string clone_subvolume;
  std::string clone_snapshot;
  std::int64_t size_tb = 0;  // the quota wanted
  bool resize = false;       // ready with a smaller quota on Ceph
  bool remove = false;
  std::string path;  // ready: the subvolume's path (what clients are restricted to)
  std::vector<std::pair<RentalId, bool>> authorize;  // (rental, read_only)
  std::vector<RentalId> deauthorize;
  bool empty() const {
    return !create && !clone && !resize && !remove && authorize.empty() && deauthorize.empty();
  }
};
// A snapshot of a Ceph volume to take or to remove.
struct CephSnapshotWork {
  SnapshotId snapshot_id = 0;
  std::string region;
  std::string subvolume;  // the volume's
  bool take = false;
  bool remove = false;
};
struct CephWork {
  std::vector<CephVolumeWork> volumes;
  std::vector<CephSnapshotWork> snapshots;
};

// What an egress sample did.
struct EgressResult {
  bool recorded = false;  // false: a resend (nothing changed)
  std::int64_t charged_gb = 0;
  std::int64_t owed_gb = 0;  // still unpaid after this sample
};

// What happens next to a volume or snapshot, and when.
struct StorageNext {
  TimestampMicros at = 0;  // 0: nothing
  std::string what;        // "bill", "retry", "detach", "delete"
};

struct StorageRecords {
  std::vector<StorageHost> hosts;
  std::vector<Volume> volumes;
  std::vector<DiskSnapshot> snapshots;
  std::vector<StorageCharge> charges;
  std::vector<StorageEvent> events;  // any order; the newest kMaxEventsKeptPerStorageItem kept
  std::vector<EgressMeter> meters;
};

class Storage {
 public:
  // `config` must be valid (ValidateStorageConfig): a programmer error otherwise.
  explicit Storage(StorageConfig config = {});

  // ----- Admin -------------------------------------------------------------------------------
  Result<StorageHost> AddHost(const StorageHostSpec& spec, TimestampMicros now,
                              StorageChanges* changes);
  // active <-> draining (a draining host keeps its replicas and takes no new ones).
  Result<StorageHost> SetHostState(StorageHostId id, StorageHostState state, TimestampMicros now,
                                   StorageChanges* changes);

  // ----- Volumes -----------------------------------------------------------------------------
  // Creates a volume and pays its first day. Errors: invalid_argument (region, size_tb, name,
  // currency); failed_precondition (field size_tb) when fewer than kReplicas hosts of the region
  // have room; insufficient_funds; resource_exhausted.
  Result<Volume> CreateVolume(UserId customer, const VolumeSpec& spec, ledger::Ledger& ledger,
                              const TaxFunction& tax, TimestampMicros now,
                              StorageChanges* changes);
  // Grows a volume to `size_tb` (larger than now) on its hosts, paying the added TB for the rest
  // of the paid day. invalid_argument (size_tb) for a smaller or equal size or beyond
  // kMaxVolumeTb; failed_precondition when unpaid or its hosts have not the room.
  Result<Volume> ResizeVolume(UserId customer, VolumeId id, std::int64_t size_tb,
                              ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                              StorageChanges* changes);
  // Attaches to a live rental of the same customer in the same region. not_found (field
  // rental_id) for an unknown or someone else's rental; failed_precondition (field rental_id) for
  // a released rental or one in another region; failed_precondition when the volume is not active.
  // Attaching twice is a no-op.
  Result<Volume> Attach(UserId customer, VolumeId id, RentalId rental, const Fleet& fleet,
                        TimestampMicros now, StorageChanges* changes);
  // not_found (field rental_id) when it is not attached there.
  Result<Volume> Detach(UserId customer, VolumeId id, RentalId rental, TimestampMicros now,
                        StorageChanges* changes);
  // Deletes now (no refund of the day paid). failed_precondition while attached.
  Result<Volume> DeleteVolume(UserId customer, VolumeId id, TimestampMicros now,
                              StorageChanges* changes);
  // Pays every unpaid day up to the one running now (read_only/detached -> active). An active
  // volume: nothing to pay, returned as is.
  Result<Volume> PayVolume(UserId customer, VolumeId id, ledger::Ledger& ledger,
                           const TaxFunction& tax, TimestampMicros now, StorageChanges* changes);

  // ----- Snapshots ---------------------------------------------------------------------------
  // Snapshots a volume (active or read_only) or the local NVMe (included + extra) of a live,
  // running rental, in its region, and pays the first day. Errors as CreateVolume; not_found
  // (field source_id) for someone else's or unknown source.
  Result<DiskSnapshot> CreateSnapshot(UserId customer, const SnapshotSpec& spec, const Fleet& fleet,
                                      ledger::Ledger& ledger, const TaxFunction& tax,
                                      TimestampMicros now, StorageChanges* changes);
  // A new volume from an active snapshot, in the snapshot's region (failed_precondition with
  // field region for another one), at least the snapshot's size (invalid_argument size_tb).
  Result<Volume> RestoreSnapshot(UserId customer, SnapshotId id, const RestoreSpec& spec,
                                 ledger::Ledger& ledger, const TaxFunction& tax,
                                 TimestampMicros now, StorageChanges* changes);
  Result<DiskSnapshot> DeleteSnapshot(UserId customer, SnapshotId id, TimestampMicros now,
                                      StorageChanges* changes);
  Result<DiskSnapshot> PaySnapshot(UserId customer, SnapshotId id, ledger::Ledger& ledger,
                                   const TaxFunction& tax, TimestampMicros now,
                                   StorageChanges* changes);

  // ----- Egress ------------------------------------------------------------------------------
  // Records one sample of a rental's egress in its current term's meter and charges the new
  // whole GB beyond the allowance (owed when the wallet cannot pay; retried hourly and with the
  // next sample). A sample at or before the last recorded one is a resend: nothing changes.
  // not_found (field rental_id); invalid_argument (bytes, at) for out-of-range values;
  // failed_precondition for a rental that never ran.
  Result<EgressResult> RecordEgress(const EgressSample& sample, const Fleet& fleet,
                                    ledger::Ledger& ledger, const TaxFunction& tax,
                                    TimestampMicros now, StorageChanges* changes);
  // The allowance of one term.
  std::int64_t EgressAllowanceBytes(Term term) const;

  // ----- Rentals and time --------------------------------------------------------------------
  // Detaches every volume from the rentals in `rentals` that are released now.
  void SyncRentals(const Fleet& fleet, const std::vector<RentalId>& rentals, TimestampMicros now,
                   StorageChanges* changes);
  // Runs every bill, retry, detach and deletion due at or before `now`, in time order.
  void AdvanceTo(ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                 StorageChanges* changes);
  TimestampMicros NextEventAt() const;
  static constexpr TimestampMicros kNever = INT64_MAX;

  // ----- Ceph regions (storage_ceph.cc) --------------------------------------------------------
  // Volumes of a Ceph region start pending (or cloning, restored from a snapshot) and take no
  // bill, attachment, resize or snapshot before they are ready. The storage reconciler reads
  // CephWorkToDo and reports what the cluster did with the Ceph* commands below; each applies
  // only where it still fits the record (a report about a volume deleted meanwhile changes only
  // what Ceph is known to hold), so a report repeated after a crash, or late, is harmless.
  // not_found for an unknown id.
  const CephRegion* FindCephRegion(std::string_view region) const;
  CephWork CephWorkToDo(std::size_t limit) const;
  // pending -> creating (the reconciler reached the cluster and is creating it).
  Status CephCreating(VolumeId id, TimestampMicros now, StorageChanges* changes);
  // The subvolume exists at `path` with a quota of `quota_tb`: pending/creating/cloning -> ready
  // (billing starts now: its first day is due at once, AdvanceTo pays it) or a grown quota.
  Status CephReady(VolumeId id, const std::string& path, std::int64_t quota_tb,
                   TimestampMicros now, StorageChanges* changes);
  // Could not be created (Ceph's words): failed and deleted (reason failed); nothing was charged.
  Status CephFailed(VolumeId id, const std::string& error, TimestampMicros now,
                    StorageChanges* changes);
  Status CephRemoved(VolumeId id, TimestampMicros now, StorageChanges* changes);
  // A client Ceph now holds (new, or its caps changed), or one it no longer holds.
  Status CephClientSet(VolumeId id, const CephClient& client, TimestampMicros now,
                       StorageChanges* changes);
  Status CephClientRemoved(VolumeId id, RentalId rental, TimestampMicros now,
                           StorageChanges* changes);
  Status CephSnapshotTaken(SnapshotId id, TimestampMicros now, StorageChanges* changes);
  Status CephSnapshotRemoved(SnapshotId id, TimestampMicros now, StorageChanges* changes);
  // What the reconciler has to do for one volume (empty outside Ceph regions).
  CephVolumeWork CephWorkOf(const Volume& v) const;

  // ----- Queries -----------------------------------------------------------------------------
  const StorageConfig& config() const { return config_; }
  const StorageHost* FindHost(StorageHostId id) const;
  const Volume* FindVolume(VolumeId id) const;
  const DiskSnapshot* FindSnapshot(SnapshotId id) const;
  // Newest first, at most `limit`, deleted ones included.
  std::vector<Volume> ListVolumes(UserId customer, std::size_t limit) const;
  std::vector<DiskSnapshot> ListSnapshots(UserId customer, std::size_t limit) const;
  std::vector<StorageHost> ListHosts(std::string_view region) const;
  std::int64_t HostUsedTb(StorageHostId id) const;
  // Volumes attached to a rental (not deleted), by id.
  std::vector<Volume> VolumesOfRental(RentalId rental) const;
  std::vector<StorageEvent> VolumeHistory(VolumeId id) const;
  std::vector<StorageEvent> SnapshotHistory(SnapshotId id) const;
  std::vector<StorageCharge> ChargesOfVolume(VolumeId id) const;
  std::vector<StorageCharge> ChargesOfSnapshot(SnapshotId id) const;
  const StorageCharge* FindCharge(StorageChargeId id) const;
  // The rental's meters, oldest term first.
  std::vector<EgressMeter> MetersOf(RentalId rental) const;
  StorageNext Next(const StorageBill& bill) const;
  // A volume's: a Ceph volume not ready yet fails at its provision_deadline ("fail").
  StorageNext Next(const Volume& volume) const;
  // What one day costs: day `day` of an item of `size_tb` at `price` per TB-month.
  static std::int64_t DayMicros(std::int64_t price_micros_per_tb_month, std::int64_t size_tb,
                                std::int64_t day);
  // What paying a volume/snapshot now would cost (0 when nothing is due) and until when.
  std::int64_t DueMicros(const StorageBill& bill, std::int64_t size_tb, TimestampMicros now) const;
  // How many TB a region can still place kReplicas times: the kReplicas-th largest free space
  // among its active hosts.
  std::int64_t RegionFreeTb(std::string_view region) const;

  std::size_t volume_count() const { return volumes_.size(); }
  std::size_t snapshot_count() const { return snapshots_.size(); }
  std::size_t charge_count() const { return charges_.size(); }

  // ----- Persistence -------------------------------------------------------------------------
  static Result<Storage> Restore(StorageConfig config, StorageRecords records);
  StorageRecords Records() const;

  // ----- Invariants --------------------------------------------------------------------------
  // O(items): every host's used space is its replicas' and within its capacity; each volume or
  // snapshot has kReplicas distinct hosts of its region (none when deleted); attachments only to
  // live rentals of the same customer and region, never on a volume detached or deleted; each
  // state agrees with its times (detach = unpaid + 72 h, delete = detach + 7 d, deleted never
  // before delete_at when unpaid); exactly the due transitions are scheduled.
  Status CheckInvariants(const Fleet& fleet) const;
  // O(charges): every charge's legs are in the ledger with its amounts, days are charged once
  // each (the days charges of an item tile 1..days_paid), GB of egress once each.
  Status CheckSettlement(const ledger::Ledger& ledger) const;

 private:
  enum class ItemKind : std::uint8_t { kVolume, kSnapshot, kEgress };
  using TimelineKey = std::tuple<TimestampMicros, ItemKind, std::int64_t>;
  enum class Due : std::uint8_t { kBill, kRetry, kDetach, kDelete, kFail };
  struct Schedule {
    TimestampMicros at = 0;
    Due due = Due::kBill;
  };
  struct VolumeSlot {
    Volume volume;
    std::vector<StorageEvent> history;
    std::vector<StorageChargeId> charges;
    std::optional<TimestampMicros> scheduled;
  };
  struct SnapshotSlot {
    DiskSnapshot snapshot;
    std::vector<StorageEvent> history;
    std::vector<StorageChargeId> charges;
    std::optional<TimestampMicros> scheduled;
  };
  struct Item;  // a volume or snapshot slot seen through its common parts (storage.cc)

  Result<std::string> Region(std::string_view region, std::string_view field) const;
  // The customer's volume / snapshot; not_found for an unknown id or someone else's.
  Result<VolumeSlot*> OwnVolume(UserId customer, VolumeId id);
  Result<SnapshotSlot*> OwnSnapshot(UserId customer, SnapshotId id);
  // failed_precondition unless it is active ("... is read_only: pay it first").
  static Status CheckActive(Item item);
  // Deletes it on request (failed_precondition when already deleted).
  Status DeleteOnRequest(Item item, TimestampMicros now, StorageChanges* changes);
  // Pays every unpaid day up to `now` and makes it active again; an active one is left as is.
  Status PayUnpaid(Item item, ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                   StorageChanges* changes);
  // kReplicas distinct active hosts of the region with `tb` free, most free first.
  Result<std::vector<StorageHostId>> Place(const std::string& region, std::int64_t tb,
                                           std::string_view field) const;
  std::optional<Schedule> NextDue(const StorageBill& bill) const;
  // The item's: a Ceph volume not ready yet is due to fail at its deadline, else its bill's.
  std::optional<Schedule> NextDueOf(Item item) const;
  std::optional<Schedule> NextDueOfVolume(const Volume& v) const;
  // The Ceph fields agree with the provisioning state (storage_ceph.cc).
  static Status CheckCephVolume(const Volume& v, const std::string& name);
  // failed_precondition unless a volume of a Ceph region is ready ("volume 7 is pending: ...").
  static Status CheckCephReady(const Volume& v, std::string_view field);
  // Fails a Ceph volume not ready yet and deletes it (reason failed).
  void FailProvisioning(VolumeSlot& slot, const std::string& why, TimestampMicros at,
                        StorageChanges* changes);
  bool HasLiveCephSnapshots(VolumeId id) const;
  void Reschedule(Item item);
  // Pays the days from days_paid + 1 through the one containing `through` (at least one) in one
  // batch and returns the charge, not yet stored (days_paid is not moved: the caller does).
  Result<StorageCharge> PayDays(Item item, TimestampMicros through, ledger::Ledger& ledger,
                                const TaxFunction& tax, TimestampMicros now,
                                StorageChanges* changes);
  void StoreCharge(StorageCharge charge, std::vector<StorageChargeId>* of,
                   StorageChanges* changes);
  void Record(Item item, StorageEventKind kind, TimestampMicros at, std::string detail,
              StorageChanges* changes);
  void Notify(Item item, std::string kind, std::string message,
              std::vector<std::pair<std::string, std::string>> data, TimestampMicros at,
              StorageChanges* changes);
  void Touch(Item item, TimestampMicros at, StorageChanges* changes);
  void RunDue(Item item, Due due, ledger::Ledger& ledger, const TaxFunction& tax,
              TimestampMicros at, StorageChanges* changes);
  void MarkUnpaid(Item item, const Status& why, TimestampMicros at, StorageChanges* changes);
  // Paid while unpaid: stores the charge (days_paid moves to its last day), active again.
  void Restored(Item item, StorageCharge charge, TimestampMicros at, StorageChanges* changes);
  void DetachAll(VolumeSlot& slot, const std::string& why, TimestampMicros at,
                 StorageChanges* changes);
  void Delete(Item item, DeleteReason reason, TimestampMicros at, StorageChanges* changes);
  void Free(const std::vector<StorageHostId>& hosts, std::int64_t tb);
  void Take(const std::vector<StorageHostId>& hosts, std::int64_t tb);
  Result<Volume> NewVolume(UserId customer, const std::string& region, std::int64_t size_tb,
                           const std::string& name, Currency currency, SnapshotId from,
                           ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                           StorageChanges* changes);
  Status CheckCustomerRoom(UserId customer, bool snapshot) const;
  // Egress: charges the meter's owed GB if the wallet can; returns what it charged.
  std::int64_t ChargeEgress(EgressMeter& meter, ledger::Ledger& ledger, const TaxFunction& tax,
                            TimestampMicros at, StorageChanges* changes);
  void RescheduleEgress(RentalId rental);
  TimestampMicros Now(TimestampMicros now) const { return now > now_ ? now : now_; }

  StorageConfig config_;
  std::map<StorageHostId, StorageHost> hosts_;
  std::map<StorageHostId, std::int64_t> host_used_tb_;
  std::map<VolumeId, VolumeSlot> volumes_;
  std::map<SnapshotId, SnapshotSlot> snapshots_;
  std::map<StorageChargeId, StorageCharge> charges_;
  std::map<std::pair<RentalId, std::int64_t>, EgressMeter> meters_;
  std::map<RentalId, std::vector<StorageChargeId>> egress_charges_;
  std::map<RentalId, TimestampMicros> egress_retry_;  // rentals with owed egress: next retry
  std::set<TimelineKey> timeline_;
  std::unordered_map<UserId, std::vector<VolumeId>> volumes_by_customer_;
  std::unordered_map<UserId, std::vector<SnapshotId>> snapshots_by_customer_;
  std::unordered_map<UserId, std::size_t> live_volumes_by_customer_;
  std::unordered_map<UserId, std::size_t> live_snapshots_by_customer_;
  std::unordered_map<RentalId, std::set<VolumeId>> volumes_by_rental_;
  StorageHostId next_host_id_ = 1;
  VolumeId next_volume_id_ = 1;
  SnapshotId next_snapshot_id_ = 1;
  StorageChargeId next_charge_id_ = 1;
  TimestampMicros now_ = 0;
};

}  // namespace gpuhub::rentals
