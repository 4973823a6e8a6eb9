// The vocabulary of storage beside term rentals (issue 11, spec/market.md "Storage"): the storage
// hosts of a region, network volumes and snapshots with their daily bill and unpaid path, their
// charges, history and notices, and each rental's egress meter. Plain records: what the engine
// persists and the API shows. Names of states (the *Name functions) are stored and shown in JSON.
//
// Money is int64 micro-units: prices micro-USD (tax excluded), debits in the paying wallet's
// currency. Sizes are whole TB of 1,000 GB. Times are TimestampMicros from the caller's clock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

using StorageHostId = std::int64_t;
using VolumeId = std::int64_t;
using SnapshotId = std::int64_t;
using StorageChargeId = std::int64_t;

enum class StorageHostState : std::uint8_t {
  kActive,    // takes new replicas
  kDraining,  // keeps its replicas, takes no new ones
};
std::string_view StorageHostStateName(StorageHostState s);  // "active", "draining"
Result<StorageHostState> ParseStorageHostState(std::string_view name);

// Where a volume or snapshot stands. Paid -> active. Its next day unpaid -> read_only at once
// (attached instances keep reading), detached 72 h later, deleted 7 days after that; paying before
// the deletion makes it active again. A snapshot has nothing to write or detach: read_only and
// detached mean it cannot be restored until paid.
enum class StorageState : std::uint8_t { kActive, kReadOnly, kDetached, kDeleted };
std::string_view StorageStateName(StorageState s);  // "active", "read_only", "detached", "deleted"
Result<StorageState> ParseStorageState(std::string_view name);

// kFailed: a Ceph volume that could not be created (CephState::kFailed).
enum class DeleteReason : std::uint8_t { kNone, kCustomer, kUnpaid, kFailed };
// "", "deleted_by_customer", "unpaid", "failed"
std::string_view DeleteReasonName(DeleteReason r);
Result<DeleteReason> ParseDeleteReason(std::string_view name);

// Where a network volume of a Ceph region stands on its cluster (docs/storage.md "Ceph-backed
// volumes"): accepted (pending: Ceph not reached yet) -> creating (the subvolume being made) or
// cloning (restored from a snapshot) -> ready (billing starts), or failed with the reason
// (Ceph's words, or not ready within StorageConfig::ceph_ready_timeout_micros: nothing was
// charged). A volume of a region without Ceph is kNone: a billing record not stored anywhere.
enum class CephState : std::uint8_t { kNone, kPending, kCreating, kCloning, kReady, kFailed };
// "", "pending", "creating", "cloning", "ready", "failed"
std::string_view CephStateName(CephState p);
Result<CephState> ParseCephState(std::string_view name);

enum class SnapshotSource : std::uint8_t { kVolume, kLocalNvme };
std::string_view SnapshotSourceName(SnapshotSource s);  // "volume", "local_nvme"
Result<SnapshotSource> ParseSnapshotSource(std::string_view name);

enum class StorageChargeKind : std::uint8_t {
  kVolumeDays,    // one or more days of a network volume, in advance
  kVolumeGrowth,  // the TB added by a resize, for the rest of the day already paid
  kSnapshotDays,  // one or more days of a snapshot, in advance
  kEgress,        // egress beyond a rental's allowance, whole GB
};
// "volume_days", "volume_growth", "snapshot_days", "egress"
std::string_view StorageChargeKindName(StorageChargeKind k);
Result<StorageChargeKind> ParseStorageChargeKind(std::string_view name);

enum class StorageEventKind : std::uint8_t {
  kCreated,    // created (a volume: also restored from a snapshot) and its first day paid
  kResized,    // a volume grew
  kAttached,   // a volume attached to a rental
  kDetached,   // ... detached (by the customer, its rental released, or unpaid)
  kReadOnly,   // its next day could not be paid
  kSuspended,  // 72 h unpaid: detached (a volume) / suspended (a snapshot)
  kRestored,   // paid while unpaid: active again
  kDeleted,    // deleted (by the customer, or 7 days after it was detached unpaid)
};
// "created", "resized", "attached", "detached", "read_only", "suspended", "restored", "deleted"
// (the daily payments are the item's charges, not events)
std::string_view StorageEventKindName(StorageEventKind k);
Result<StorageEventKind> ParseStorageEventKind(std::string_view name);

// ----- Records ----------------------------------------------------------------------------------

// A storage host of a region's replicated cluster (Ceph OSD host). Volumes and snapshots keep
// their kReplicas copies on distinct hosts of their region.
struct StorageHost {
  StorageHostId id = 0;
  std::string region;
  std::string hostname;  // optional
  std::int64_t capacity_tb = 0;
  StorageHostState state = StorageHostState::kActive;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  friend bool operator==(const StorageHost&, const StorageHost&) = default;
};

// The daily bill of a volume or snapshot and where it stands on the unpaid path. Day n (1, 2, ...)
// covers [anchor + (n-1) d, anchor + n d); days 1..days_paid are paid, so the next is due at
// paid_through = anchor + days_paid d. A day costs R(P S n / 30) - R(P S (n-1) / 30) with P the
// price per TB-month, S the size in TB and R half-even to the micro: any 30 consecutive days of
// the same size cost exactly P S.
struct StorageBill {
  Currency currency = Currency::kUsd;       // the wallet that pays
  std::int64_t price_micros_per_tb_month = 0;  // locked at creation
  TimestampMicros anchor = 0;
  std::int64_t days_paid = 0;
  StorageState state = StorageState::kActive;
  TimestampMicros unpaid_since = 0;  // the first unpaid day's start (0 while paid)
  TimestampMicros detach_at = 0;     // unpaid_since + 72 h
  TimestampMicros delete_at = 0;     // detach_at + 7 d
  TimestampMicros retry_at = 0;      // the next automatic attempt while unpaid
  TimestampMicros deleted_at = 0;
  DeleteReason delete_reason = DeleteReason::kNone;
  TimestampMicros PaidThrough() const { return anchor + days_paid * kMicrosPerDay; }
  friend bool operator==(const StorageBill&, const StorageBill&) = default;
};

// One attachment's cephx client as the cluster holds it (recorded when the storage reconciler
// authorized it): restricted to the volume's subvolume path, rw, or r while the volume is unpaid.
struct CephClient {
  RentalId rental_id = 0;
  bool read_only = false;  // the caps Ceph holds
  std::string sealed_key;  // the client's key sealed by the server (never in clear here)
  friend bool operator==(const CephClient&, const CephClient&) = default;
};
// The names on the cluster: subvolume "vol-7", snapshot "snap-4", client "gpuhub-vol7-r3".
std::string CephSubvolumeName(VolumeId id);
std::string CephSnapshotName(SnapshotId id);
std::string CephClientName(VolumeId volume, RentalId rental);

struct Volume {
  VolumeId id = 0;
  UserId customer_id = 0;
  std::string name;
  std::string region;
  std::int64_t size_tb = 0;
  std::vector<StorageHostId> hosts;  // kReplicas distinct hosts of the region
  std::vector<RentalId> attachments;  // rentals of the customer in the region, ascending
  SnapshotId restored_from = 0;       // the snapshot it was restored from (0: created empty)
  std::int64_t grows = 0;             // resizes so far (the growth charges' ids)
  StorageBill bill;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  std::int64_t events = 0;  // history events recorded so far
  // Ceph regions only (else kNone and the rest empty). Hosts stay empty there: Ceph's CRUSH
  // places the replicas.
  CephState provisioning = CephState::kNone;
  std::string provision_error;             // failed: why
  TimestampMicros provision_deadline = 0;  // not ready by then: failed
  std::string ceph_path;                   // the subvolume's path, once ready
  std::int64_t ceph_quota_tb = 0;          // the quota Ceph confirmed (< size_tb: a resize due)
  bool ceph_removed = false;               // deleted or failed: the subvolume is confirmed gone
  std::vector<CephClient> clients;         // by rental id, ascending
  friend bool operator==(const Volume&, const Volume&) = default;
};

struct DiskSnapshot {
  SnapshotId id = 0;
  UserId customer_id = 0;
  std::string name;
  std::string region;
  std::int64_t size_tb = 0;  // the source's size (a local NVMe: rounded up to whole TB)
  SnapshotSource source = SnapshotSource::kVolume;
  std::int64_t source_id = 0;  // the volume, or the rental whose local NVMe it copies
  std::vector<StorageHostId> hosts;
  StorageBill bill;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  std::int64_t events = 0;
  // A snapshot of a volume of a Ceph region is a subvolume snapshot (CephSnapshotName) of the
  // volume's subvolume, which outlives the volume's deletion until its last snapshot is gone.
  bool ceph = false;
  bool ceph_taken = false;    // Ceph confirmed it exists
  bool ceph_removed = false;  // deleted: Ceph confirmed it is gone
  friend bool operator==(const DiskSnapshot&, const DiskSnapshot&) = default;
};

// Money that moved for storage: the domain event billing (issue 13) turns into a tax invoice.
// Emitted exactly once, in the command that moved its money.
struct StorageCharge {
  StorageChargeId id = 0;  // 1, 2, ... across the platform
  UserId customer_id = 0;
  StorageChargeKind kind = StorageChargeKind::kVolumeDays;
  std::int64_t subject_id = 0;  // the volume, snapshot, or (egress) rental
  std::int64_t size_tb = 0;     // volume/snapshot size billed (growth: the TB added)
  std::int64_t first_day = 0;   // days charges: the days first_day..last_day (growth: the day)
  std::int64_t last_day = 0;
  std::int64_t growth = 0;      // growth: the volume's 1st, 2nd, ... resize
  std::int64_t egress_gb = 0;  // egress: the GB charged (gb_from + 1 .. gb_from + egress_gb)
  std::int64_t egress_gb_from = 0;
  std::int64_t period = 0;  // egress: the rental's term it was metered in
  TaxBlock amount;          // USD
  Currency paid_currency = Currency::kUsd;
  std::int64_t paid_micros = 0;
  TimestampMicros period_start = 0;  // what it pays for
  TimestampMicros period_end = 0;
  TimestampMicros at = 0;
  std::vector<std::string> transfer_ids;
  friend bool operator==(const StorageCharge&, const StorageCharge&) = default;
};
// The prefix of its ledger transfer ids, derived from what it pays so that nothing is paid twice:
// "volume:7:d12" (days from 12), "volume:7:grow3" (its third resize), "snapshot:4:d2",
// "egress:12:p1:gb20001" (GB 20,001 onwards of term 1).
std::string StorageChargeTransferBase(const StorageCharge& charge);

// One history event of a volume or snapshot.
struct StorageEvent {
  bool snapshot = false;  // of a snapshot (else a volume)
  std::int64_t subject_id = 0;
  std::int64_t sequence = 0;  // 1, 2, ... per volume / snapshot
  TimestampMicros at = 0;
  StorageEventKind kind = StorageEventKind::kCreated;
  std::string detail;
  friend bool operator==(const StorageEvent&, const StorageEvent&) = default;
};

// A rental's egress in one term: bytes from usage samples against the term's allowance (20 TB
// for a month, 20 x 7/30 TB for a week, rounded up to the byte), the excess billed in whole GB
// rounded up: after each sample, ceil(excess / 1 GB) - GB already billed are charged, so each GB is
// charged once and a resent sample (at or before the last one recorded) changes nothing.
struct EgressMeter {
  RentalId rental_id = 0;
  std::int64_t period = 0;  // the rental's term
  UserId customer_id = 0;
  Currency currency = Currency::kUsd;  // the rental's wallet, which pays the excess
  std::int64_t allowance_bytes = 0;
  std::int64_t used_bytes = 0;
  std::int64_t billed_gb = 0;  // GB charged (paid)
  std::int64_t owed_gb = 0;    // GB over the allowance not yet paid (the wallet could not)
  TimestampMicros retry_at = 0;  // while owed: the next attempt (hourly, and with each sample)
  std::int64_t samples = 0;
  TimestampMicros last_sample_at = 0;
  TimestampMicros updated_at = 0;
  friend bool operator==(const EgressMeter&, const EgressMeter&) = default;
};

}  // namespace gpuhub::rentals
