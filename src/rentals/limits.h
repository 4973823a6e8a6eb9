// Named limits and fixed durations of term rentals (spec/market.md "Term rentals"). Everything the
// rentals domain accepts has a bound; anything beyond it is refused with invalid_argument (or
// resource_exhausted for per-account counts), never truncated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/clock.h"

namespace gpuhub::rentals {

// ----- Terms and the lifecycle (spec: week = 7 days, month = 30 days) ---------------------------
inline constexpr std::int64_t kWeekMicros = 7 * kMicrosPerDay;
inline constexpr std::int64_t kMonthMicros = 30 * kMicrosPerDay;
// With auto-renew on, the wallet is debited this long before the term ends...
inline constexpr std::int64_t kAutoRenewLeadMicros = 72 * kMicrosPerHour;
// ...and a failed debit is retried this often...
inline constexpr std::int64_t kAutoRenewRetryMicros = 1 * kMicrosPerHour;
// ...until the renewal invoice is issued, this long before the term ends.
inline constexpr std::int64_t kRenewalInvoiceLeadMicros = 24 * kMicrosPerHour;
// Unpaid at the term end: the instance stops and its cards and disk are held this long.
inline constexpr std::int64_t kHoldMicros = 72 * kMicrosPerHour;
// The local NVMe of a released rental is physically wiped within this long after its use ended.
inline constexpr std::int64_t kWipeDeadlineMicros = 7 * kMicrosPerDay;
// An instance not running this long after the order is refunded in full.
inline constexpr std::int64_t kProvisioningDeadlineMicros = 1 * kMicrosPerHour;

// ----- Nodes ---------------------------------------------------------------------------------
// Cards on one node (a 16-bit mask of which cards are rented). HGX boards carry 8.
inline constexpr int kMaxCardsPerNode = 16;
// Nodes one fleet holds (removed nodes included: their records stay for history).
inline constexpr std::size_t kMaxNodes = 100'000;
// Local NVMe per node, included and extra (a typo guard: 1 PB).
inline constexpr std::int64_t kMaxNvmeGbPerNode = 1'000'000;
// Extra local NVMe a node offers by default (spec: "at most 30 TB per node").
inline constexpr std::int64_t kDefaultExtraNvmeGbPerNode = 30'000;
// A node's optional hostname ("dfw1-h100-07"): 1..63 bytes of [a-z0-9.-].
inline constexpr std::size_t kMaxHostnameBytes = 63;

// ----- Rentals -------------------------------------------------------------------------------
// Rentals one customer may hold at once (provisioning, active or held): one account must not be
// able to take the whole fleet by mistake or by a runaway script.
inline constexpr std::size_t kMaxLiveRentalsPerCustomer = 1'000;
// History events kept in memory per rental (all of them stay in the store); the API shows these.
inline constexpr std::size_t kMaxEventsKeptPerRental = 256;
// Auto-renew switches per term: each is a history event and a row, so a script flipping it must not
// grow them without bound. A term's other events are at most ~55 (48 hourly auto-renew attempts),
// so the term's switches are always among the events kept in memory.
inline constexpr std::size_t kMaxAutoRenewChangesPerTerm = 10;
// Connection details an agent may fill in (host, ssh_port, ssh_user, ...).
inline constexpr std::size_t kMaxConnectionFields = 16;
inline constexpr std::size_t kMaxConnectionKeyBytes = 32;
inline constexpr std::size_t kMaxConnectionValueBytes = 512;
// The text of an instance failure an agent reports.
inline constexpr std::size_t kMaxInstanceErrorBytes = 512;

// ----- Names and lists -----------------------------------------------------------------------
inline constexpr std::size_t kMaxGpuNameBytes = 64;
inline constexpr std::size_t kMaxRegionBytes = 32;
inline constexpr std::size_t kMaxCards = 256;    // card models in one fleet configuration
inline constexpr std::size_t kMaxRegions = 64;   // regions in one fleet configuration
inline constexpr std::size_t kDefaultPageSize = 50;
inline constexpr std::size_t kMaxPageSize = 500;

// Parts per million (discounts, tax rates).
inline constexpr std::int64_t kPpm = 1'000'000;

// ----- Storage (issue 11; spec/market.md "Storage") ------------------------------------------
// Storage is sold in whole TB of 1,000 GB (decimal, as disks are sold).
inline constexpr std::int64_t kGbPerTb = 1'000;
inline constexpr std::int64_t kBytesPerGb = 1'000'000'000;
inline constexpr std::int64_t kBytesPerTb = kGbPerTb * kBytesPerGb;
// Extra local NVMe: at most 30 TB sold per node (whatever capacity the node declares beyond it),
// so at most 30 TB on one rental.
inline constexpr std::int64_t kMaxExtraNvmeGbSoldPerNode = 30'000;
inline constexpr std::int64_t kMaxExtraNvmeTbPerRental = kMaxExtraNvmeGbSoldPerNode / kGbPerTb;
// Monthly storage prices apply pro rata to a weekly term: 7/30.
inline constexpr std::int64_t kDaysPerStorageMonth = 30;
// A network volume: whole TB, 1..100 (a typo guard: real workloads that need more use several).
inline constexpr std::int64_t kMaxVolumeTb = 100;
// Copies of a network volume or snapshot, each on a distinct storage host of its region.
inline constexpr int kReplicas = 3;
// Volumes (not deleted) one customer may hold, snapshots likewise, and attachments.
inline constexpr std::size_t kMaxVolumesPerCustomer = 100;
inline constexpr std::size_t kMaxSnapshotsPerCustomer = 200;
inline constexpr std::size_t kMaxAttachmentsPerVolume = 16;
inline constexpr std::size_t kMaxVolumesPerRental = 16;
// A volume's or snapshot's optional name: 0..64 bytes of [A-Za-z0-9._-].
inline constexpr std::size_t kMaxStorageNameBytes = 64;
// Storage hosts of the fleet and the capacity one may declare (10 PB: a typo guard).
inline constexpr std::size_t kMaxStorageHosts = 10'000;
inline constexpr std::int64_t kMaxStorageHostTb = 10'000;
// The unpaid path: read-only at once, detached 72 h later, deleted 7 days after that; while
// unpaid the day's bill is retried this often (a top-up restores within the hour; paying by hand
// restores at once).
inline constexpr std::int64_t kReadOnlyBeforeDetachMicros = 72 * kMicrosPerHour;
inline constexpr std::int64_t kDetachedBeforeDeleteMicros = 7 * kMicrosPerDay;
inline constexpr std::int64_t kUnpaidRetryMicros = 1 * kMicrosPerHour;
// Egress samples: at most this many bytes in one sample (10 PB: a typo or counter-wrap guard), at
// most this many samples in one request, and `at` no later than this after the server's clock.
inline constexpr std::int64_t kMaxEgressSampleBytes = 10'000 * kBytesPerTb;
inline constexpr std::size_t kMaxEgressSamplesPerRequest = 1'000;
inline constexpr std::int64_t kMaxEgressSampleAheadMicros = 5 * 60 * kMicrosPerSecond;
// A network volume of a Ceph region not ready this long after it was accepted fails (nothing was
// charged: billing starts when it is ready). StorageConfig::ceph_ready_timeout_micros overrides.
inline constexpr std::int64_t kCephReadyTimeoutMicros = 10 * 60 * kMicrosPerSecond;
// What the host agent mounts (agent/limits.h kMaxNetworkVolumesPerWorkload, agent/volumes.cc): at
// most this many Ceph volumes attached to one rental, names of at most this many bytes.
inline constexpr std::size_t kMaxCephVolumesPerRental = 8;
inline constexpr std::size_t kMaxCephMountNameBytes = 63;
// A Ceph error kept as a failed volume's reason (Ceph's words, cut to this).
inline constexpr std::size_t kMaxCephErrorBytes = 1024;
// Volumes one storage reconciler pass reads (the rest wait for the next pass).
inline constexpr std::size_t kMaxCephWorkPerPass = 256;
// History kept in memory per volume or snapshot (every event stays in the store).
inline constexpr std::size_t kMaxEventsKeptPerStorageItem = 64;

}  // namespace gpuhub::rentals
