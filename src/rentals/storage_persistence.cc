// Storage: rebuilding from stored records, handing them out, and the invariants.
#include <algorithm>
#include <map>
#include <set>

#include "rentals/payment.h"
#include "rentals/storage.h"
#include "rentals/storage_item.h"

namespace gpuhub::rentals {
namespace {

Status Bad(const std::string& what) { return Status::Internal("stored storage: " + what); }

// What a bill's state says about its times (the same for volumes and snapshots).
// A volume of a Ceph region is billed from when it is ready: it may have no day paid.
Status CheckBill(const StorageBill& b, const std::string& name, bool ceph) {
  if (b.days_paid < (ceph ? 0 : 1) || b.anchor <= 0 || b.price_micros_per_tb_month <= 0) {
    return Bad(name + ": no day paid");
  }
  switch (b.state) {
    case StorageState::kActive:
      if (b.unpaid_since || b.detach_at || b.delete_at || b.retry_at || b.deleted_at) {
        return Bad(name + ": active with unpaid times");
      }
      break;
    case StorageState::kReadOnly:
    case StorageState::kDetached:
      if (b.unpaid_since != b.PaidThrough() || b.detach_at < b.unpaid_since + kReadOnlyBeforeDetachMicros ||
          b.delete_at != b.detach_at + kDetachedBeforeDeleteMicros || b.retry_at <= 0 ||
          b.deleted_at != 0) {
        return Bad(name + ": unpaid but its times disagree");
      }
      break;
    case StorageState::kDeleted:
      if (b.deleted_at <= 0 || b.delete_reason == DeleteReason::kNone) {
        return Bad(name + ": deleted without a time or reason");
      }
      // Nothing is deleted for lack of payment before the time its read-only notice named.
      if (b.delete_reason == DeleteReason::kUnpaid &&
          (b.delete_at <= 0 || b.deleted_at < b.delete_at)) {
        return Bad(name + ": deleted unpaid before its notified time");
      }
      break;
  }
  return Status::Ok();
}

}  // namespace

Result<Storage> Storage::Restore(StorageConfig config, StorageRecords rec) {
  for (const auto& h : rec.hosts) {
    auto code = CanonicalRegion(h.region);
    if (!code.ok() || *code != h.region) return Bad("host " + std::to_string(h.id) + " region");
    if (std::find(config.regions.begin(), config.regions.end(), h.region) ==
        config.regions.end()) {
      config.regions.push_back(h.region);  // a region no longer configured keeps what it has
    }
  }
  Storage s(std::move(config));
  std::sort(rec.hosts.begin(), rec.hosts.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& h : rec.hosts) {
    if (h.id <= 0 || s.hosts_.count(h.id) || h.capacity_tb < 1) {
      return Bad("host " + std::to_string(h.id));
    }
    s.next_host_id_ = std::max(s.next_host_id_, h.id + 1);
    s.now_ = std::max(s.now_, h.updated_at);
    s.host_used_tb_[h.id] = 0;
    s.hosts_.emplace(h.id, std::move(h));
  }
  auto place = [&](const std::vector<StorageHostId>& hosts, const std::string& region,
                   std::int64_t tb, StorageState state, const std::string& name,
                   bool ceph) -> Status {
    if (state == StorageState::kDeleted || ceph) {
      return hosts.empty() ? Status::Ok() : Bad(name + ": deleted but holds replicas");
    }
    std::set<StorageHostId> distinct(hosts.begin(), hosts.end());
    if (hosts.size() != static_cast<std::size_t>(kReplicas) || distinct.size() != hosts.size()) {
      return Bad(name + ": not on " + std::to_string(kReplicas) + " distinct hosts");
    }
    for (StorageHostId h : hosts) {
      auto it = s.hosts_.find(h);
      if (it == s.hosts_.end() || it->second.region != region) {
        return Bad(name + ": a replica on a host of another region");
      }
      s.host_used_tb_[h] += tb;
      if (s.host_used_tb_[h] > it->second.capacity_tb) return Bad("host " + std::to_string(h) + " overfull");
    }
    return Status::Ok();
  };
  std::sort(rec.volumes.begin(), rec.volumes.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& v : rec.volumes) {
    const std::string name = "volume " + std::to_string(v.id);
    if (v.id <= 0 || s.volumes_.count(v.id) || v.customer_id <= 0 || v.size_tb < 1 ||
        !std::is_sorted(v.attachments.begin(), v.attachments.end())) {
      return Bad(name);
    }
    const bool ceph = v.provisioning != CephState::kNone;
    GPUHUB_RETURN_IF_ERROR(CheckBill(v.bill, name, ceph));
    GPUHUB_RETURN_IF_ERROR(place(v.hosts, v.region, v.size_tb, v.bill.state, name, ceph));
    s.volumes_by_customer_[v.customer_id].push_back(v.id);
    if (v.bill.state != StorageState::kDeleted) ++s.live_volumes_by_customer_[v.customer_id];
    for (RentalId r : v.attachments) s.volumes_by_rental_[r].insert(v.id);
    s.next_volume_id_ = std::max(s.next_volume_id_, v.id + 1);
    s.now_ = std::max(s.now_, v.updated_at);
    const VolumeId id = v.id;
    s.volumes_.emplace(id, VolumeSlot{std::move(v), {}, {}, std::nullopt});
  }
  std::sort(rec.snapshots.begin(), rec.snapshots.end(),
            [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& sn : rec.snapshots) {
    const std::string name = "snapshot " + std::to_string(sn.id);
    if (sn.id <= 0 || s.snapshots_.count(sn.id) || sn.customer_id <= 0 || sn.size_tb < 1) {
      return Bad(name);
    }
    const bool ceph = sn.ceph || s.FindCephRegion(sn.region) != nullptr;
    GPUHUB_RETURN_IF_ERROR(CheckBill(sn.bill, name, false));
    GPUHUB_RETURN_IF_ERROR(place(sn.hosts, sn.region, sn.size_tb, sn.bill.state, name, ceph));
    s.snapshots_by_customer_[sn.customer_id].push_back(sn.id);
    if (sn.bill.state != StorageState::kDeleted) ++s.live_snapshots_by_customer_[sn.customer_id];
    s.next_snapshot_id_ = std::max(s.next_snapshot_id_, sn.id + 1);
    s.now_ = std::max(s.now_, sn.updated_at);
    const SnapshotId id = sn.id;
    s.snapshots_.emplace(id, SnapshotSlot{std::move(sn), {}, {}, std::nullopt});
  }
  std::sort(rec.charges.begin(), rec.charges.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& c : rec.charges) {
    if (c.id <= 0 || s.charges_.count(c.id)) return Bad("charge " + std::to_string(c.id));
    std::vector<StorageChargeId>* of = nullptr;
    switch (c.kind) {
      case StorageChargeKind::kVolumeDays:
      case StorageChargeKind::kVolumeGrowth:
        if (auto it = s.volumes_.find(c.subject_id); it != s.volumes_.end()) {
          of = &it->second.charges;
        }
        break;
      case StorageChargeKind::kSnapshotDays:
        if (auto it = s.snapshots_.find(c.subject_id); it != s.snapshots_.end()) {
          of = &it->second.charges;
        }
        break;
      case StorageChargeKind::kEgress:
        of = &s.egress_charges_[c.subject_id];
        break;
    }
    if (of == nullptr) return Bad("charge " + std::to_string(c.id) + " of nothing");
    of->push_back(c.id);
    s.next_charge_id_ = std::max(s.next_charge_id_, c.id + 1);
    s.now_ = std::max(s.now_, c.at);
    s.charges_.emplace(c.id, std::move(c));
  }
  std::sort(rec.events.begin(), rec.events.end(), [](const auto& a, const auto& b) {
    return std::tie(a.snapshot, a.subject_id, a.sequence) <
           std::tie(b.snapshot, b.subject_id, b.sequence);
  });
  for (auto& e : rec.events) {
    std::vector<StorageEvent>* history = nullptr;
    std::int64_t recorded = 0;
    if (e.snapshot) {
      if (auto it = s.snapshots_.find(e.subject_id); it != s.snapshots_.end()) {
        history = &it->second.history;
        recorded = it->second.snapshot.events;
      }
    } else if (auto it = s.volumes_.find(e.subject_id); it != s.volumes_.end()) {
      history = &it->second.history;
      recorded = it->second.volume.events;
    }
    if (history == nullptr || e.sequence < 1 || e.sequence > recorded) {
      return Bad("event " + std::to_string(e.sequence) + " of nothing");
    }
    history->push_back(std::move(e));
    if (history->size() > kMaxEventsKeptPerStorageItem) history->erase(history->begin());
  }
  for (auto& m : rec.meters) {
    auto key = std::make_pair(m.rental_id, m.period);
    if (m.rental_id <= 0 || m.period < 1 || s.meters_.count(key)) {
      return Bad("egress meter of rental " + std::to_string(m.rental_id));
    }
    s.now_ = std::max(s.now_, m.updated_at);
    s.meters_.emplace(key, std::move(m));
  }
  for (auto& [id, slot] : s.volumes_) s.Reschedule(Item::Of(slot));
  for (auto& [id, slot] : s.snapshots_) s.Reschedule(Item::Of(slot));
  std::set<RentalId> metered;
  for (const auto& [key, m] : s.meters_) metered.insert(key.first);
  for (RentalId r : metered) s.RescheduleEgress(r);
  return s;
}

StorageRecords Storage::Records() const {
  StorageRecords r;
  for (const auto& [id, h] : hosts_) r.hosts.push_back(h);
  for (const auto& [id, slot] : volumes_) {
    r.volumes.push_back(slot.volume);
    r.events.insert(r.events.end(), slot.history.begin(), slot.history.end());
  }
  for (const auto& [id, slot] : snapshots_) {
    r.snapshots.push_back(slot.snapshot);
    r.events.insert(r.events.end(), slot.history.begin(), slot.history.end());
  }
  for (const auto& [id, c] : charges_) r.charges.push_back(c);
  for (const auto& [key, m] : meters_) r.meters.push_back(m);
  return r;
}

Status Storage::CheckInvariants(const Fleet& fleet) const {
  std::map<StorageHostId, std::int64_t> used;
  std::unordered_map<UserId, std::size_t> live_volumes, live_snapshots;
  std::unordered_map<RentalId, std::set<VolumeId>> by_rental;
  std::size_t scheduled = 0;
  auto check_item = [&](const StorageBill& b, const std::vector<StorageHostId>& hosts,
                        const std::string& region, std::int64_t size_tb,
                        const std::optional<TimestampMicros>& at, const std::string& name,
                        ItemKind kind, std::int64_t id, bool ceph,
                        std::optional<Schedule> due) -> Status {
    GPUHUB_RETURN_IF_ERROR(CheckBill(b, name, ceph && kind == ItemKind::kVolume));
    if (ceph) {
      if (!hosts.empty()) return Bad(name + ": on storage hosts in a Ceph region");
    } else if (b.state == StorageState::kDeleted) {
      if (!hosts.empty()) return Bad(name + ": deleted but holds replicas");
    } else {
      std::set<StorageHostId> distinct(hosts.begin(), hosts.end());
      if (hosts.size() != static_cast<std::size_t>(kReplicas) || distinct.size() != hosts.size()) {
        return Bad(name + ": not on " + std::to_string(kReplicas) + " distinct hosts");
      }
      for (StorageHostId h : hosts) {
        const StorageHost* host = FindHost(h);
        if (host == nullptr || host->region != region) {
          return Bad(name + ": a replica outside its region");
        }
        used[h] += size_tb;
      }
    }
    if (due.has_value() != at.has_value() ||
        (due && (*at != due->at || !timeline_.count({due->at, kind, id})))) {
      return Bad(name + ": its next step is not scheduled at its time");
    }
    if (due) ++scheduled;
    return Status::Ok();
  };
  for (const auto& [id, slot] : volumes_) {
    const Volume& v = slot.volume;
    const std::string name = "volume " + std::to_string(id);
    const bool ceph = v.provisioning != CephState::kNone;
    GPUHUB_RETURN_IF_ERROR(check_item(v.bill, v.hosts, v.region, v.size_tb, slot.scheduled, name,
                                      ItemKind::kVolume, id, ceph, NextDueOfVolume(v)));
    GPUHUB_RETURN_IF_ERROR(CheckCephVolume(v, name));
    if (v.bill.state != StorageState::kDeleted) ++live_volumes[v.customer_id];
    if (!v.attachments.empty() && v.bill.state != StorageState::kActive &&
        v.bill.state != StorageState::kReadOnly) {
      return Bad(name + ": attached while " + std::string(StorageStateName(v.bill.state)));
    }
    for (RentalId r : v.attachments) {
      const Rental* rental = fleet.FindRental(r);
      // A network volume is attached only within its region, to its owner's live rentals.
      if (rental == nullptr || rental->state == RentalState::kReleased ||
          rental->customer_id != v.customer_id || rental->region != v.region) {
        return Bad(name + ": attached to rental " + std::to_string(r) +
                   " (released, someone else's, or in another region)");
      }
      by_rental[r].insert(id);
    }
  }
  for (const auto& [id, slot] : snapshots_) {
    const DiskSnapshot& sn = slot.snapshot;
    GPUHUB_RETURN_IF_ERROR(check_item(sn.bill, sn.hosts, sn.region, sn.size_tb, slot.scheduled,
                                      "snapshot " + std::to_string(id), ItemKind::kSnapshot, id,
                                      sn.ceph || FindCephRegion(sn.region) != nullptr,
                                      NextDue(sn.bill)));
    if (sn.bill.state != StorageState::kDeleted) ++live_snapshots[sn.customer_id];
  }
  for (const auto& [id, h] : hosts_) {
    auto it = used.find(id);
    std::int64_t expected = it == used.end() ? 0 : it->second;
    if (host_used_tb_.at(id) != expected || expected > h.capacity_tb) {
      return Bad("storage host " + std::to_string(id) + " is overfull or miscounted");
    }
  }
  if (live_volumes != live_volumes_by_customer_ || live_snapshots != live_snapshots_by_customer_) {
    return Bad("per-customer counters disagree with the records");
  }
  if (by_rental != volumes_by_rental_) return Bad("the rental -> volumes index disagrees");
  std::size_t egress_scheduled = 0;
  std::map<RentalId, TimestampMicros> owed;
  for (const auto& [key, m] : meters_) {
    const std::int64_t excess = std::max<std::int64_t>(0, m.used_bytes - m.allowance_bytes);
    if (m.billed_gb + m.owed_gb != (excess + kBytesPerGb - 1) / kBytesPerGb || m.owed_gb < 0 ||
        (m.owed_gb > 0) != (m.retry_at > 0)) {
      return Bad("egress meter of rental " + std::to_string(key.first) + " miscounts its GB");
    }
    if (m.owed_gb > 0) {
      auto [it, fresh] = owed.emplace(key.first, m.retry_at);
      if (!fresh) it->second = std::min(it->second, m.retry_at);
    }
  }
  for (const auto& [rental, at] : owed) {
    auto it = egress_retry_.find(rental);
    if (it == egress_retry_.end() || it->second != at ||
        !timeline_.count({at, ItemKind::kEgress, rental})) {
      return Bad("owed egress of rental " + std::to_string(rental) + " is not retried");
    }
    ++egress_scheduled;
  }
  if (egress_retry_.size() != owed.size() || timeline_.size() != scheduled + egress_scheduled) {
    return Bad("the timeline has entries of nothing");
  }
  return Status::Ok();
}

Status Storage::CheckSettlement(const ledger::Ledger& ledger) const {
  // Days charges of each item, by first day; egress charges of each (rental, term), by first GB.
  std::map<std::pair<int, std::int64_t>, std::map<std::int64_t, const StorageCharge*>> days;
  std::map<std::pair<RentalId, std::int64_t>, std::map<std::int64_t, const StorageCharge*>> gb;
  std::map<VolumeId, std::set<std::int64_t>> growths;
  for (const auto& [id, c] : charges_) {
    const std::string name = "storage charge " + std::to_string(id);
    GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(c.amount));
    if (!LegsMatch(ledger, StorageChargeTransferBase(c), "", c.amount, c.paid_currency,
                   c.paid_micros)) {
      return Bad(name + ": its ledger legs are missing or wrong");
    }
    switch (c.kind) {
      case StorageChargeKind::kVolumeDays:
      case StorageChargeKind::kSnapshotDays: {
        const bool volume = c.kind == StorageChargeKind::kVolumeDays;
        const StorageBill* bill = nullptr;
        if (volume) {
          const Volume* v = FindVolume(c.subject_id);
          if (v != nullptr && v->customer_id == c.customer_id) bill = &v->bill;
        } else {
          const DiskSnapshot* s = FindSnapshot(c.subject_id);
          if (s != nullptr && s->customer_id == c.customer_id) bill = &s->bill;
        }
        if (bill == nullptr || c.first_day < 1 || c.last_day < c.first_day) return Bad(name);
        const std::int64_t p = bill->price_micros_per_tb_month;
        const std::int64_t net = MulDivHalfEven(p * c.size_tb, c.last_day, kDaysPerStorageMonth)
                                     .value() -
                                 MulDivHalfEven(p * c.size_tb, c.first_day - 1,
                                                kDaysPerStorageMonth)
                                     .value();
        if (c.amount.net_micros != net) return Bad(name + " is not the days' price");
        auto& of = days[{volume ? 0 : 1, c.subject_id}];
        if (!of.emplace(c.first_day, &c).second) return Bad(name + ": a day charged twice");
        break;
      }
      case StorageChargeKind::kVolumeGrowth: {
        const Volume* v = FindVolume(c.subject_id);
        if (v == nullptr || c.growth < 1 || c.growth > v->grows ||
            !growths[c.subject_id].insert(c.growth).second) {
          return Bad(name + ": a growth charged twice or of nothing");
        }
        break;
      }
      case StorageChargeKind::kEgress: {
        if (c.egress_gb < 1 ||
            c.amount.net_micros != c.egress_gb * (config_.egress_micros_per_tb / kGbPerTb)) {
          return Bad(name + " is not its GB's price");
        }
        if (!gb[{c.subject_id, c.period}].emplace(c.egress_gb_from, &c).second) {
          return Bad(name + ": egress GB charged twice");
        }
        break;
      }
    }
  }
  // The days charges of each item tile 1..days_paid: every day paid exactly once.
  auto tile_days = [&](int kind, std::int64_t id, const StorageBill& bill) -> Status {
    std::int64_t next = 1;
    for (const auto& [first, c] : days[{kind, id}]) {
      if (first != next) return Bad("day " + std::to_string(next) + " charged twice or never");
      next = c->last_day + 1;
    }
    if (next != bill.days_paid + 1) return Bad("days paid disagree with the charges");
    return Status::Ok();
  };
  for (const auto& [id, slot] : volumes_) {
    GPUHUB_RETURN_IF_ERROR(tile_days(0, id, slot.volume.bill).WithContext("volume " + std::to_string(id)));
  }
  for (const auto& [id, slot] : snapshots_) {
    GPUHUB_RETURN_IF_ERROR(
        tile_days(1, id, slot.snapshot.bill).WithContext("snapshot " + std::to_string(id)));
  }
  for (const auto& [key, m] : meters_) {
    std::int64_t next = 0;
    for (const auto& [from, c] : gb[key]) {
      if (from != next) return Bad("egress GB of rental " + std::to_string(key.first) + " gap");
      next = from + c->egress_gb;
    }
    if (next != m.billed_gb) {
      return Bad("egress of rental " + std::to_string(key.first) + " billed != charged");
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::rentals
