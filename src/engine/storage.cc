#include "engine/storage.h"

#include <algorithm>
#include <set>

#include "engine/agent_watch.h"
#include "engine/limits.h"
#include "engine/rental_billing.h"
#include "engine/rentals.h"
#include "engine/storage_rows.h"
#include "engine/wallets.h"
#include "rentals/limits.h"

namespace gpuhub::engine {
namespace {

using rentals::StorageChanges;

rentals::Storage& S(Txn& txn) { return txn.state.storage->storage; }
const rentals::Fleet& F(Txn& txn) { return txn.state.rentals->fleet; }
ledger::Ledger& L(Txn& txn) { return txn.state.wallets->ledger; }

// Queues the rows of what changed, records the notices and hands every charge to billing.
Status Write(Txn& txn, StorageChanges& changes) {
  changes.Normalize();
  WriteStorageRows(txn, S(txn), changes);
  for (const auto& charge : changes.charges) {
    GPUHUB_RETURN_IF_ERROR(OnStorageCharged(txn, charge));
  }
  RecordNotices(txn, changes.notices);
  return Status::Ok();
}

template <typename T, typename Fn>
Result<T> Run(Txn& txn, Fn&& fn) {
  StorageChanges changes;
  Result<T> result = fn(changes);
  if (result.ok()) GPUHUB_RETURN_IF_ERROR(Write(txn, changes));
  return result;
}

void NoteRentalHost(Txn& txn, rentals::RentalId rental) {
  if (const rentals::Rental* r = F(txn).FindRental(rental); r != nullptr) {
    NoteNodeDesiredChanged(txn.state, r->node_id);
  }
}

}  // namespace

Result<rentals::StorageHost> AddStorageHost(Txn& txn, const rentals::StorageHostSpec& spec) {
  return Run<rentals::StorageHost>(
      txn, [&](StorageChanges& c) { return S(txn).AddHost(spec, txn.now, &c); });
}

Result<rentals::StorageHost> SetStorageHostState(Txn& txn, rentals::StorageHostId id,
                                                 rentals::StorageHostState state) {
  return Run<rentals::StorageHost>(
      txn, [&](StorageChanges& c) { return S(txn).SetHostState(id, state, txn.now, &c); });
}

Result<rentals::Volume> CreateVolume(Txn& txn, std::int64_t customer,
                                     const rentals::VolumeSpec& spec) {
  return Run<rentals::Volume>(txn, [&](StorageChanges& c) {
    return S(txn).CreateVolume(customer, spec, L(txn), RentalTaxFunction(txn.state), txn.now, &c);
  });
}

Result<rentals::Volume> ResizeVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     std::int64_t size_tb) {
  return Run<rentals::Volume>(txn, [&](StorageChanges& c) {
    return S(txn).ResizeVolume(customer, id, size_tb, L(txn), RentalTaxFunction(txn.state),
                               txn.now, &c);
  });
}

Result<rentals::Volume> AttachVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     rentals::RentalId rental) {
  return Run<rentals::Volume>(txn, [&](StorageChanges& c) {
    return S(txn).Attach(customer, id, rental, F(txn), txn.now, &c);
  });
}

Result<rentals::Volume> DetachVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id,
                                     rentals::RentalId rental) {
  auto out = Run<rentals::Volume>(
      txn, [&](StorageChanges& c) { return S(txn).Detach(customer, id, rental, txn.now, &c); });
  // The host stops mounting it at once (its client is removed by the reconciler after).
  if (out.ok()) NoteRentalHost(txn, rental);
  return out;
}

Result<rentals::Volume> DeleteVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id) {
  return Run<rentals::Volume>(
      txn, [&](StorageChanges& c) { return S(txn).DeleteVolume(customer, id, txn.now, &c); });
}

Result<rentals::Volume> PayVolume(Txn& txn, std::int64_t customer, rentals::VolumeId id) {
  return Run<rentals::Volume>(txn, [&](StorageChanges& c) {
    return S(txn).PayVolume(customer, id, L(txn), RentalTaxFunction(txn.state), txn.now, &c);
  });
}

Result<rentals::DiskSnapshot> CreateSnapshot(Txn& txn, std::int64_t customer,
                                             const rentals::SnapshotSpec& spec) {
  return Run<rentals::DiskSnapshot>(txn, [&](StorageChanges& c) {
    return S(txn).CreateSnapshot(customer, spec, F(txn), L(txn), RentalTaxFunction(txn.state),
                                 txn.now, &c);
  });
}

Result<rentals::Volume> RestoreSnapshot(Txn& txn, std::int64_t customer, rentals::SnapshotId id,
                                        const rentals::RestoreSpec& spec) {
  return Run<rentals::Volume>(txn, [&](StorageChanges& c) {
    return S(txn).RestoreSnapshot(customer, id, spec, L(txn), RentalTaxFunction(txn.state),
                                  txn.now, &c);
  });
}

Result<rentals::DiskSnapshot> DeleteSnapshot(Txn& txn, std::int64_t customer,
                                             rentals::SnapshotId id) {
  return Run<rentals::DiskSnapshot>(
      txn, [&](StorageChanges& c) { return S(txn).DeleteSnapshot(customer, id, txn.now, &c); });
}

Result<rentals::DiskSnapshot> PaySnapshot(Txn& txn, std::int64_t customer,
                                          rentals::SnapshotId id) {
  return Run<rentals::DiskSnapshot>(txn, [&](StorageChanges& c) {
    return S(txn).PaySnapshot(customer, id, L(txn), RentalTaxFunction(txn.state), txn.now, &c);
  });
}

Result<std::vector<rentals::EgressResult>> RecordEgressSamples(
    Txn& txn, const std::vector<rentals::EgressSample>& samples) {
  if (samples.empty() || samples.size() > rentals::kMaxEgressSamplesPerRequest) {
    return Status::InvalidArgument("samples must hold 1.." +
                                   std::to_string(rentals::kMaxEgressSamplesPerRequest) +
                                   " samples")
        .WithField("samples");
  }
  // Every sample is checked before any is recorded: one bad sample refuses the request.
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    const std::string field = "samples[" + std::to_string(i) + "].";
    const rentals::Rental* r = F(txn).FindRental(s.rental_id);
    if (r == nullptr) {
      return Status::NotFound("samples[" + std::to_string(i) + "]: no rental " +
                              std::to_string(s.rental_id))
          .WithField(field + "rental_id");
    }
    if (r->term_start == 0) {
      return Status::FailedPrecondition("rental " + std::to_string(r->id) +
                                        " never ran: it has no egress to meter")
          .WithField(field + "rental_id");
    }
    if (s.bytes < 0 || s.bytes > rentals::kMaxEgressSampleBytes) {
      return Status::InvalidArgument(field + "bytes must be 0.." +
                                     std::to_string(rentals::kMaxEgressSampleBytes))
          .WithField(field + "bytes");
    }
    if (s.at <= 0 || s.at > txn.now + rentals::kMaxEgressSampleAheadMicros) {
      return Status::InvalidArgument(field + "at must be no later than the server's clock")
          .WithField(field + "at");
    }
  }
  StorageChanges changes;
  std::vector<rentals::EgressResult> out;
  for (const auto& s : samples) {
    auto r = S(txn).RecordEgress(s, F(txn), L(txn), RentalTaxFunction(txn.state), txn.now,
                                 &changes);
    // Checked above: a failure here is a bug, and the whole command is dropped.
    if (!r.ok()) return Status::Internal("egress sample refused after its check: " + r.status().ToString());
    out.push_back(*r);
  }
  GPUHUB_RETURN_IF_ERROR(Write(txn, changes));
  return out;
}

Status MeterAgentEgress(Txn& txn, const std::vector<rentals::EgressSample>& samples) {
  std::vector<rentals::EgressSample> meterable;
  for (const auto& s : samples) {
    const rentals::Rental* r = F(txn).FindRental(s.rental_id);
    if (r == nullptr || r->term_start == 0 || s.bytes <= 0 || s.at <= 0 ||
        s.at > txn.now + rentals::kMaxEgressSampleAheadMicros) {
      continue;
    }
    rentals::EgressSample m = s;
    m.bytes = std::min(m.bytes, rentals::kMaxEgressSampleBytes);
    meterable.push_back(m);
  }
  for (std::size_t start = 0; start < meterable.size();
       start += rentals::kMaxEgressSamplesPerRequest) {
    const std::size_t end =
        std::min(meterable.size(), start + rentals::kMaxEgressSamplesPerRequest);
    std::vector<rentals::EgressSample> chunk(meterable.begin() + start, meterable.begin() + end);
    GPUHUB_RETURN_IF_ERROR(RecordEgressSamples(txn, chunk).status());
  }
  return Status::Ok();
}

// ----- The storage reconciler's reports -------------------------------------------------------

rentals::CephWork ReadCephWork(Txn& txn, std::size_t limit) {
  return S(txn).CephWorkToDo(limit);
}

Status ReportCephCreating(Txn& txn, rentals::VolumeId id) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephCreating(id, txn.now, &c));
  return Write(txn, c);
}

Status ReportCephReady(Txn& txn, rentals::VolumeId id, const std::string& path,
                       std::int64_t quota_tb) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephReady(id, path, quota_tb, txn.now, &c));
  // Its first day is due now: paid in this same command.
  S(txn).AdvanceTo(L(txn), RentalTaxFunction(txn.state), txn.now, &c);
  GPUHUB_RETURN_IF_ERROR(Write(txn, c));
  if (const rentals::Volume* v = S(txn).FindVolume(id)) {
    for (rentals::RentalId r : v->attachments) NoteRentalHost(txn, r);
  }
  return Status::Ok();
}

Status ReportCephFailed(Txn& txn, rentals::VolumeId id, const std::string& error) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephFailed(id, error, txn.now, &c));
  return Write(txn, c);
}

Status ReportCephRemoved(Txn& txn, rentals::VolumeId id) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephRemoved(id, txn.now, &c));
  return Write(txn, c);
}

Status ReportCephClient(Txn& txn, rentals::VolumeId id, const rentals::CephClient& client) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephClientSet(id, client, txn.now, &c));
  GPUHUB_RETURN_IF_ERROR(Write(txn, c));
  NoteRentalHost(txn, client.rental_id);
  return Status::Ok();
}

Status ReportCephClientRemoved(Txn& txn, rentals::VolumeId id, rentals::RentalId rental) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(S(txn).CephClientRemoved(id, rental, txn.now, &c));
  GPUHUB_RETURN_IF_ERROR(Write(txn, c));
  NoteRentalHost(txn, rental);
  return Status::Ok();
}

Status ReportCephSnapshot(Txn& txn, rentals::SnapshotId id, bool removed) {
  StorageChanges c;
  GPUHUB_RETURN_IF_ERROR(removed ? S(txn).CephSnapshotRemoved(id, txn.now, &c)
                                 : S(txn).CephSnapshotTaken(id, txn.now, &c));
  return Write(txn, c);
}

std::vector<RentalVolume> VolumesOfRental(const State& state, rentals::RentalId rental) {
  std::vector<RentalVolume> out;
  for (const auto& v : state.storage->storage.VolumesOfRental(rental)) {
    out.push_back({v.id, v.name, v.size_tb, v.bill.state != rentals::StorageState::kActive});
  }
  return out;
}

std::vector<DesiredNetworkVolume> NetworkVolumesOf(const State& state, rentals::RentalId rental) {
  std::vector<DesiredNetworkVolume> out;
  if (!state.storage) return out;
  const rentals::Storage& storage = state.storage->storage;
  std::set<std::string> mounts;  // two attached volumes of one name: the later by its id
  for (const auto& v : storage.VolumesOfRental(rental)) {
    const rentals::CephRegion* region = storage.FindCephRegion(v.region);
    if (region == nullptr || v.provisioning != rentals::CephState::kReady ||
        v.bill.state == rentals::StorageState::kDeleted) {
      continue;
    }
    for (const auto& c : v.clients) {
      if (c.rental_id != rental) continue;
      DesiredNetworkVolume n;
      n.id = v.id;
      n.name = v.name.empty() ? rentals::CephSubvolumeName(v.id) : v.name;
      n.mount = "/mnt/" + n.name;
      if (!mounts.insert(n.mount).second) {
        n.name = rentals::CephSubvolumeName(v.id);
        n.mount = "/mnt/" + n.name;
        mounts.insert(n.mount);
      }
      n.monitors = region->monitors;
      n.path = v.ceph_path;
      n.client = rentals::CephClientName(v.id, rental);
      n.sealed_key = c.sealed_key;
      n.read_only = c.read_only;
      out.push_back(std::move(n));
    }
  }
  return out;
}

Status SyncStorageWithRentals(Txn& txn, const std::vector<rentals::RentalId>& rentals) {
  if (rentals.empty()) return Status::Ok();
  StorageChanges changes;
  S(txn).SyncRentals(F(txn), rentals, txn.now, &changes);
  if (changes.empty()) return Status::Ok();
  return Write(txn, changes);
}

Status AdvanceStorage(Txn& txn) {
  if (S(txn).NextEventAt() > txn.now) return Status::Ok();
  StorageChanges changes;
  S(txn).AdvanceTo(L(txn), RentalTaxFunction(txn.state), txn.now, &changes);
  return Write(txn, changes);
}

void AddStorageTickHooks(Engine& engine) { engine.AddTickHook(AdvanceStorage); }

Status SeedDemoStorage(Engine& engine) {
  return engine
      .ExecuteSync<int>([](Txn& txn) -> Result<int> {
        if (!S(txn).ListHosts("").empty()) return 0;
        int added = 0;
        for (const auto& region : S(txn).config().regions) {
          std::string prefix;
          for (char ch : region) {
            if (ch != '-') prefix += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
          }
          for (int i = 1; i <= kDemoStorageHostsPerRegion; ++i) {
            rentals::StorageHostSpec spec{region, prefix + "-ceph-" + std::to_string(i),
                                          kDemoStorageHostTb};
            GPUHUB_RETURN_IF_ERROR(AddStorageHost(txn, spec).status());
            ++added;
          }
        }
        return added;
      })
      .status();
}

Status LoadStorage(store::Store& store, const rentals::StorageConfig& config,
                   const ledger::Ledger& ledger, const rentals::Fleet& fleet,
                   StorageState& state) {
  GPUHUB_ASSIGN_OR_RETURN(rentals::StorageRecords records, ReadStorageRows(store));
  GPUHUB_ASSIGN_OR_RETURN(state.storage, rentals::Storage::Restore(config, std::move(records)));
  GPUHUB_RETURN_IF_ERROR(state.storage.CheckInvariants(fleet));
  return state.storage.CheckSettlement(ledger);
}

}  // namespace gpuhub::engine
