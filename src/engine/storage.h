// Storage inside the engine (issue 11): rentals::Storage (src/rentals/storage.h) plus the rows its
// commands change, written in the same group commit as the ledger transfers they apply, the
// notifications they raise and the charges billing hooks onto (OnStorageCharged,
// rental_billing.h). Extra local NVMe added to a running rental is a fleet command
// (AddRentalExtraNvme) kept here with the rest of storage.
//
// Every function taking a Txn runs on the writer thread. Commands forward to the domain with the
// wallets' ledger, the one tax function (RentalTax) and txn.now; on success they queue the
// changed records and record the notices. A failed command leaves memory untouched (the domain
// validates before it mutates) and its rows are dropped.
//
// Rentals and storage stay in step: every fleet change (engine/rentals.cc) calls
// SyncStorageWithRentals in the same command, so a released rental's volumes are detached in the
// commit that released it. Time: the tick hook runs the daily bills and the unpaid path every
// second with the real clock and on every manual clock advance.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/agents.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "rentals/fleet.h"
#include "rentals/storage.h"

namespace gpuhub::engine {

struct StorageState {
  explicit StorageState(rentals::StorageConfig config) : storage(std::move(config)) {}
  rentals::Storage storage;
};

// Admin: the storage hosts of each region.
Result<rentals::StorageHost> AddStorageHost(Txn& txn, const rentals::StorageHostSpec& spec);
Result<rentals::StorageHost> SetStorageHostState(Txn& txn, rentals::StorageHostId id,
                                                 rentals::StorageHostState state);

// Customers.
Result<rentals::Volume> CreateVolume(Txn& txn, std::int64_t customer,
                                     const rentals::VolumeSpec& spec);
Result<rentals::Volume> ResizeVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     std::int64_t size_tb);
Result<rentals::Volume> AttachVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     rentals::RentalId rental);
Result<rentals::Volume> DetachVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     rentals::RentalId rental);
Result<rentals::Volume> DeleteVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id);
Result<rentals::Volume> PayVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id);
Result<rentals::DiskSnapshot> CreateSnapshot(Txn& txn, std::int64_t customer,
                                             const rentals::SnapshotSpec& spec);
Result<rentals::Volume> RestoreSnapshot(Txn& txn, std::int64_t customer, rentals::SnapshotId id,
                                        const rentals::RestoreSpec& spec);
Result<rentals::DiskSnapshot> DeleteSnapshot(Txn& txn, std::int64_t customer,
                                             rentals::SnapshotId id);
Result<rentals::DiskSnapshot> PaySnapshot(Txn& txn, std::int64_t customer,
                                          rentals::SnapshotId id);
Result<rentals::Rental> AddRentalExtraNvme(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                           std::int64_t add_tb);

// Egress samples of rentals' instances: the host agent's usage endpoint (issue 12) and the admin
// endpoint that stands in for it call this. Every sample is checked first: one bad sample refuses
// the whole request (invalid_argument / not_found naming "samples[i].<field>") and records
// nothing. A resent sample (at or before the last recorded for its rental) is skipped. Returns one
// result per sample, in order.
Result<std::vector<rentals::EgressResult>> RecordEgressSamples(
    Txn& txn, const std::vector<rentals::EgressSample>& samples);
// The same fed by the host agent's usage samples (POST /v1/agent/usage, already validated and
// de-duplicated there): each sample is the bytes a rental's instance sent since its previous
// sample. Samples of rentals that never ran are skipped, as is one the meter would refuse (its
// time beyond the server's clock): the agent's own usage rows still hold them.
Status MeterAgentEgress(Txn& txn, const std::vector<rentals::EgressSample>& samples);

// The volumes attached to a rental and whether each is writable (read_only while unpaid): what
// the host agent maps on the rental's instance.
struct RentalVolume {
  rentals::VolumeId id = 0;
  std::string name;
  std::int64_t size_tb = 0;
  bool read_only = false;
};
std::vector<RentalVolume> VolumesOfRental(const State& state, rentals::RentalId rental);
// The network volumes a rental's instance mounts (DesiredWorkload::network_volumes): attached,
// ready on Ceph and with that attachment's client authorized, by volume id.
std::vector<DesiredNetworkVolume> NetworkVolumesOf(const State& state, rentals::RentalId rental);

// ----- The storage reconciler (http/storage_reconciler.h) ----------------------------------------
// What the Ceph clusters must do now (rentals::Storage::CephWorkToDo): read in a command of its
// own, applied by the reconciler off the writer, and reported back with the commands below, each
// idempotent (a repeated or late report changes nothing more). A report that changes what a
// host's agent mounts (ready, a client set or removed) wakes that host's long-poll.
rentals::CephWork ReadCephWork(Txn& txn, std::size_t limit);
Status ReportCephCreating(Txn& txn, rentals::VolumeId id);
// Ready (or grown): billing starts in this command (its first day is paid now, or the volume
// goes the unpaid path at once when the wallet cannot pay it).
Status ReportCephReady(Txn& txn, rentals::VolumeId id, const std::string& path,
                       std::int64_t quota_tb);
Status ReportCephFailed(Txn& txn, rentals::VolumeId id, const std::string& error);
Status ReportCephRemoved(Txn& txn, rentals::VolumeId id);
Status ReportCephClient(Txn& txn, rentals::VolumeId id, const rentals::CephClient& client);
Status ReportCephClientRemoved(Txn& txn, rentals::VolumeId id, rentals::RentalId rental);
Status ReportCephSnapshot(Txn& txn, rentals::SnapshotId id, bool removed);

// Called by every fleet change (engine/rentals.cc) with the rentals it touched.
Status SyncStorageWithRentals(Txn& txn, const std::vector<rentals::RentalId>& rentals);

// Time-driven work up to txn.now. Never fails.
Status AdvanceStorage(Txn& txn);
void AddStorageTickHooks(Engine& engine);

// --demo: kDemoStorageHostsPerRegion storage hosts of kDemoStorageHostTb in each storage region
// that has none. Idempotent.
Status SeedDemoStorage(Engine& engine);

// Loads the storage tables and restores rentals::Storage, then checks it against the fleet and the
// ledger: stored data that disagrees is `internal`.
Status LoadStorage(store::Store& store, const rentals::StorageConfig& config,
                   const ledger::Ledger& ledger, const rentals::Fleet& fleet, StorageState& state);

}  // namespace gpuhub::engine
