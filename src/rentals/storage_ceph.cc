// Storage on Ceph: what the storage reconciler has to do on a region's cluster (a pure function of
// the records) and the reports it makes back. Volumes of a Ceph region are provisioned before
// they are billed: pending -> creating (or cloning) -> ready, or failed; see storage.h.
#include <algorithm>

#include "rentals/format.h"
#include "rentals/storage.h"
#include "rentals/storage_item.h"

namespace gpuhub::rentals {
namespace {

bool InProgress(const Volume& v) {
  return v.provisioning == CephState::kPending || v.provisioning == CephState::kCreating ||
         v.provisioning == CephState::kCloning;
}

bool Attached(const Volume& v, RentalId r) {
  return std::binary_search(v.attachments.begin(), v.attachments.end(), r);
}

}  // namespace

const CephRegion* Storage::FindCephRegion(std::string_view region) const {
  for (const auto& c : config_.ceph) {
    if (c.region == region) return &c;
  }
  return nullptr;
}

Status Storage::CheckCephReady(const Volume& v, std::string_view field) {
  if (!InProgress(v)) return Status::Ok();
  Status s = Status::FailedPrecondition("volume " + std::to_string(v.id) + " is " +
                                        std::string(CephStateName(v.provisioning)) +
                                        " on Ceph: wait until it is ready");
  return field.empty() ? s : s.WithField(std::string(field));
}

std::optional<Storage::Schedule> Storage::NextDueOfVolume(const Volume& v) const {
  if (v.bill.state != StorageState::kDeleted && InProgress(v)) {
    return Schedule{v.provision_deadline, Due::kFail};
  }
  return NextDue(v.bill);
}

std::optional<Storage::Schedule> Storage::NextDueOf(Item item) const {
  return item.is_volume() ? NextDueOfVolume(item.volume->volume) : NextDue(item.bill());
}

StorageNext Storage::Next(const Volume& volume) const {
  if (volume.bill.state != StorageState::kDeleted && InProgress(volume)) {
    return {volume.provision_deadline, "fail"};
  }
  return Next(volume.bill);
}

Status Storage::CheckCephVolume(const Volume& v, const std::string& name) {
  if (v.provisioning == CephState::kNone) {
    if (!v.clients.empty() || !v.ceph_path.empty()) return Status::Internal(name + ": Ceph fields");
    return Status::Ok();
  }
  if (InProgress(v) && v.bill.state != StorageState::kDeleted &&
      (!v.attachments.empty() || v.bill.days_paid != 0 || v.provision_deadline <= 0)) {
    return Status::Internal(name + ": attached or billed before it is ready on Ceph");
  }
  if (v.provisioning == CephState::kFailed &&
      (v.bill.state != StorageState::kDeleted || v.bill.delete_reason != DeleteReason::kFailed ||
       v.bill.days_paid != 0)) {
    return Status::Internal(name + ": failed but not deleted at no charge");
  }
  if (v.provisioning == CephState::kReady && v.ceph_path.empty()) {
    return Status::Internal(name + ": ready without a subvolume path");
  }
  for (std::size_t i = 1; i < v.clients.size(); ++i) {
    if (v.clients[i - 1].rental_id >= v.clients[i].rental_id) {
      return Status::Internal(name + ": clients out of order");
    }
  }
  return Status::Ok();
}

bool Storage::HasLiveCephSnapshots(VolumeId id) const {
  const Volume& v = volumes_.at(id).volume;
  auto it = snapshots_by_customer_.find(v.customer_id);
  if (it == snapshots_by_customer_.end()) return false;
  for (SnapshotId s : it->second) {
    const DiskSnapshot& sn = snapshots_.at(s).snapshot;
    if (sn.ceph && sn.source_id == id && !sn.ceph_removed &&
        (sn.bill.state != StorageState::kDeleted || sn.ceph_taken)) {
      return true;
    }
  }
  return false;
}

CephVolumeWork Storage::CephWorkOf(const Volume& v) const {
  CephVolumeWork w;
  if (v.provisioning == CephState::kNone) return w;
  w.volume_id = v.id;
  w.region = v.region;
  w.size_tb = v.size_tb;
  w.path = v.ceph_path;
  if (v.bill.state == StorageState::kDeleted) {
    for (const auto& c : v.clients) w.deauthorize.push_back(c.rental_id);
    // Its subvolume stays while a snapshot of it lives (a snapshot outlives its volume).
    w.remove = !v.ceph_removed && v.clients.empty() && !HasLiveCephSnapshots(v.id);
    return w;
  }
  if (v.provisioning == CephState::kPending || v.provisioning == CephState::kCreating) {
    w.create = true;
    return w;
  }
  if (v.provisioning == CephState::kCloning) {
    const DiskSnapshot* s = FindSnapshot(v.restored_from);
    if (s == nullptr) return w;  // impossible: RestoreSnapshot checked it
    w.clone = true;
    w.clone_subvolume = CephSubvolumeName(s->source_id);
    w.clone_snapshot = CephSnapshotName(s->id);
    return w;
  }
  w.resize = v.ceph_quota_tb < v.size_tb;
  const bool read_only = v.bill.state != StorageState::kActive;
  for (RentalId r : v.attachments) {
    auto c = std::find_if(v.clients.begin(), v.clients.end(),
                          [r](const CephClient& x) { return x.rental_id == r; });
    if (c == v.clients.end() || c->read_only != read_only) w.authorize.push_back({r, read_only});
  }
  for (const auto& c : v.clients) {
    if (!Attached(v, c.rental_id)) w.deauthorize.push_back(c.rental_id);
  }
  return w;
}

CephWork Storage::CephWorkToDo(std::size_t limit) const {
  CephWork out;
  if (config_.ceph.empty()) return out;
  for (const auto& [id, slot] : volumes_) {
    if (out.volumes.size() >= limit) break;
    CephVolumeWork w = CephWorkOf(slot.volume);
    if (!w.empty()) out.volumes.push_back(std::move(w));
  }
  for (const auto& [id, slot] : snapshots_) {
    if (out.snapshots.size() >= limit) break;
    const DiskSnapshot& s = slot.snapshot;
    if (!s.ceph) continue;
    CephSnapshotWork w;
    w.snapshot_id = s.id;
    w.region = s.region;
    w.subvolume = CephSubvolumeName(s.source_id);
    w.take = s.bill.state != StorageState::kDeleted && !s.ceph_taken;
    w.remove = s.bill.state == StorageState::kDeleted && s.ceph_taken && !s.ceph_removed;
    if (w.take || w.remove) out.snapshots.push_back(std::move(w));
  }
  return out;
}

// ----- Reports -------------------------------------------------------------------------------

Status Storage::CephCreating(VolumeId id, TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  Volume& v = it->second.volume;
  if (v.provisioning != CephState::kPending || v.bill.state == StorageState::kDeleted) {
    return Status::Ok();
  }
  v.provisioning = CephState::kCreating;
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

Status Storage::CephReady(VolumeId id, const std::string& path, std::int64_t quota_tb,
                          TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  VolumeSlot& slot = it->second;
  Volume& v = slot.volume;
  if (v.provisioning == CephState::kNone) {
    return Status::FailedPrecondition("volume " + std::to_string(id) + " is not on Ceph");
  }
  if (path.empty() || quota_tb < 1) return Status::InvalidArgument("a subvolume path and quota");
  v.ceph_path = path;
  v.ceph_quota_tb = quota_tb;
  Item item = Item::Of(slot);
  if (v.bill.state != StorageState::kDeleted && InProgress(v)) {
    v.provisioning = CephState::kReady;
    // Billing starts now: day 1 is [now, now + 1 d), due at once (AdvanceTo pays it).
    v.bill.anchor = now;
    Record(item, StorageEventKind::kCreated, now,
           "ready on Ceph (" + std::to_string(quota_tb) + " TB quota); billed from now", changes);
    Reschedule(item);
  }
  Touch(item, now, changes);
  return Status::Ok();
}

void Storage::FailProvisioning(VolumeSlot& slot, const std::string& why, TimestampMicros at,
                               StorageChanges* changes) {
  Volume& v = slot.volume;
  GPUHUB_CHECK(InProgress(v) && v.bill.state != StorageState::kDeleted);
  v.provisioning = CephState::kFailed;
  v.provision_error = why;
  Item item = Item::Of(slot);
  Delete(item, DeleteReason::kFailed, at, changes);
  Notify(item, "storage.failed",
         "Your " + item.title() + " could not be created: " + why + ". Nothing was charged.",
         {{"error", why}}, at, changes);
  Reschedule(item);
}

Status Storage::CephFailed(VolumeId id, const std::string& error, TimestampMicros now,
                           StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  const Volume& v = it->second.volume;
  if (v.bill.state == StorageState::kDeleted || !InProgress(v)) return Status::Ok();
  FailProvisioning(it->second, error.substr(0, kMaxCephErrorBytes), now, changes);
  return Status::Ok();
}

Status Storage::CephRemoved(VolumeId id, TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  Volume& v = it->second.volume;
  if (v.bill.state != StorageState::kDeleted || v.ceph_removed) return Status::Ok();
  v.ceph_removed = true;
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

Status Storage::CephClientSet(VolumeId id, const CephClient& client, TimestampMicros now,
                              StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  Volume& v = it->second.volume;
  if (client.rental_id <= 0 || client.sealed_key.empty()) {
    return Status::InvalidArgument("a client needs a rental and a key");
  }
  auto at = std::lower_bound(
      v.clients.begin(), v.clients.end(), client.rental_id,
      [](const CephClient& c, RentalId r) { return c.rental_id < r; });
  if (at != v.clients.end() && at->rental_id == client.rental_id) {
    if (*at == client) return Status::Ok();
    *at = client;
  } else {
    v.clients.insert(at, client);
  }
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

Status Storage::CephClientRemoved(VolumeId id, RentalId rental, TimestampMicros now,
                                  StorageChanges* changes) {
  now = Now(now);
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return Status::NotFound("no volume " + std::to_string(id));
  Volume& v = it->second.volume;
  auto at = std::find_if(v.clients.begin(), v.clients.end(),
                         [rental](const CephClient& c) { return c.rental_id == rental; });
  if (at == v.clients.end()) return Status::Ok();
  v.clients.erase(at);
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

Status Storage::CephSnapshotTaken(SnapshotId id, TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return Status::NotFound("no snapshot " + std::to_string(id));
  DiskSnapshot& s = it->second.snapshot;
  if (!s.ceph || s.ceph_taken) return Status::Ok();
  s.ceph_taken = true;
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

Status Storage::CephSnapshotRemoved(SnapshotId id, TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return Status::NotFound("no snapshot " + std::to_string(id));
  DiskSnapshot& s = it->second.snapshot;
  if (!s.ceph || s.ceph_removed || s.bill.state != StorageState::kDeleted) return Status::Ok();
  s.ceph_removed = true;
  Touch(Item::Of(it->second), now, changes);
  return Status::Ok();
}

}  // namespace gpuhub::rentals
