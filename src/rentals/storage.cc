// Storage: configuration, hosts and placement, the customer's commands on volumes and snapshots,
// and the queries. The daily bill, the unpaid path, egress and time are in storage_lifecycle.cc;
// restore and invariants in storage_persistence.cc.
#include "rentals/storage.h"

#include <algorithm>
#include <set>

#include "rentals/format.h"
#include "rentals/payment.h"
#include "rentals/storage_item.h"

namespace gpuhub::rentals {
namespace {

Status ValidateName(std::string_view name, std::string_view field) {
  if (name.size() > kMaxStorageNameBytes) {
    return Status::InvalidArgument(std::string(field) + " must be at most " +
                                   std::to_string(kMaxStorageNameBytes) + " characters")
        .WithField(std::string(field));
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) {
      return Status::InvalidArgument(std::string(field) +
                                     " is letters, digits, '-', '_' and '.' such as "
                                     "\"llama-70b-ckpt\"")
          .WithField(std::string(field));
    }
  }
  return Status::Ok();
}

Status ValidateHostname(std::string_view name) {
  if (name.size() > kMaxHostnameBytes) {
    return Status::InvalidArgument("hostname must be at most " +
                                   std::to_string(kMaxHostnameBytes) + " characters")
        .WithField("hostname");
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) {
      return Status::InvalidArgument(
                 "hostname must be lower-case letters, digits, '-' and '.' such as "
                 "\"dfw1-ceph-01\"")
          .WithField("hostname");
    }
  }
  return Status::Ok();
}

// A Ceph volume is mounted at /mnt/<name> in the containers: the name must be a path component
// the host agent takes (1..kMaxCephMountNameBytes of [a-z0-9-], not starting with '-').
Status ValidateMountName(std::string_view name) {
  if (name.size() > kMaxCephMountNameBytes || (!name.empty() && name.front() == '-')) {
    return Status::InvalidArgument("name must be at most " +
                                   std::to_string(kMaxCephMountNameBytes) +
                                   " characters and not start with '-' in a Ceph region")
        .WithField("name");
  }
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
      return Status::InvalidArgument(
                 "name must be lower-case letters, digits and '-' in a Ceph region (the volume "
                 "is mounted at /mnt/<name>), such as \"llama-ckpt\"")
          .WithField("name");
    }
  }
  return Status::Ok();
}

Status SizeField(std::int64_t size_tb, std::string_view field) {
  if (size_tb < 1 || size_tb > kMaxVolumeTb) {
    return Status::InvalidArgument(std::string(field) + " must be a whole number of TB, 1.." +
                                   std::to_string(kMaxVolumeTb))
        .WithField(std::string(field));
  }
  return Status::Ok();
}

std::string Ids(const std::vector<RentalId>& ids) {
  std::string out;
  for (RentalId id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

}  // namespace

Status ValidateStorageConfig(const StorageConfig& config) {
  if (config.regions.size() > kMaxRegions) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxRegions) + " regions");
  }
  std::set<std::string> seen;
  for (const auto& r : config.regions) {
    GPUHUB_ASSIGN_OR_RETURN(std::string code, CanonicalRegion(r));
    if (code != r || !seen.insert(code).second) {
      return Status::InvalidArgument("storage region '" + r + "' is not canonical or twice");
    }
  }
  std::set<std::string> ceph;
  for (const auto& c : config.ceph) {
    if (!seen.count(c.region) || !ceph.insert(c.region).second || c.monitors.empty()) {
      return Status::InvalidArgument("Ceph region '" + c.region +
                                     "' is not a storage region, is twice or has no monitors");
    }
  }
  if (config.ceph_ready_timeout_micros < kMicrosPerSecond) {
    return Status::InvalidArgument("the Ceph ready timeout must be at least a second");
  }
  // A day of 1 TB must cost at least a micro; 30 days of the largest volume must be an amount.
  for (std::int64_t p : {config.volume_micros_per_tb_month, config.snapshot_micros_per_tb_month}) {
    if (p < kDaysPerStorageMonth || p > kMaxAmountMicros / kMaxVolumeTb / 1000) {
      return Status::InvalidArgument("storage prices per TB-month are out of range");
    }
  }
  if (config.egress_micros_per_tb < kGbPerTb || config.egress_micros_per_tb % kGbPerTb != 0 ||
      config.egress_micros_per_tb > kMaxAmountMicros / 1000) {
    return Status::InvalidArgument("the egress price must be a whole micro-dollar per GB");
  }
  if (config.egress_included_bytes_per_month < 0 ||
      config.egress_included_bytes_per_month > 1000 * kBytesPerTb * 1000) {
    return Status::InvalidArgument("the included egress is out of range");
  }
  return Status::Ok();
}

void StorageChanges::Normalize() {
  auto dedupe = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  dedupe(hosts);
  dedupe(volumes);
  dedupe(snapshots);
  dedupe(meters);
}

bool StorageChanges::empty() const {
  return transfers.empty() && hosts.empty() && volumes.empty() && snapshots.empty() &&
         meters.empty() && events.empty() && charges.empty() && notices.empty();
}

Storage::Storage(StorageConfig config) : config_(std::move(config)) {
  Status valid = ValidateStorageConfig(config_);
  GPUHUB_CHECK_MSG(valid.ok(), valid.message().c_str());
}

// ----- Hosts and placement -------------------------------------------------------------------

Result<std::string> Storage::Region(std::string_view region, std::string_view field) const {
  auto code = CanonicalRegion(region);
  if (!code.ok()) return code.status().WithField(std::string(field));
  if (std::find(config_.regions.begin(), config_.regions.end(), *code) == config_.regions.end()) {
    std::string codes;
    for (const auto& r : config_.regions) codes += (codes.empty() ? "" : ", ") + r;
    return Status::InvalidArgument("unknown region '" + *code + "'; storage is sold in " + codes)
        .WithField(std::string(field));
  }
  return *code;
}

Result<StorageHost> Storage::AddHost(const StorageHostSpec& spec, TimestampMicros now,
                                     StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(std::string region, Region(spec.region, "region"));
  GPUHUB_RETURN_IF_ERROR(ValidateHostname(spec.hostname));
  if (spec.capacity_tb < 1 || spec.capacity_tb > kMaxStorageHostTb) {
    return Status::InvalidArgument("capacity_tb must be a whole number of TB, 1.." +
                                   std::to_string(kMaxStorageHostTb))
        .WithField("capacity_tb");
  }
  if (!spec.hostname.empty()) {
    for (const auto& [id, h] : hosts_) {
      if (h.hostname == spec.hostname) {
        return Status::Conflict("storage host " + std::to_string(id) + " already has hostname '" +
                                spec.hostname + "'")
            .WithField("hostname");
      }
    }
  }
  if (hosts_.size() >= kMaxStorageHosts) {
    return Status::ResourceExhausted("at most " + std::to_string(kMaxStorageHosts) +
                                     " storage hosts");
  }
  StorageHost h;
  h.id = next_host_id_++;
  h.region = region;
  h.hostname = spec.hostname;
  h.capacity_tb = spec.capacity_tb;
  h.created_at = h.updated_at = now;
  hosts_.emplace(h.id, h);
  host_used_tb_[h.id] = 0;
  changes->hosts.push_back(h.id);
  return h;
}

Result<StorageHost> Storage::SetHostState(StorageHostId id, StorageHostState state,
                                          TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  auto it = hosts_.find(id);
  if (it == hosts_.end()) return Status::NotFound("no storage host " + std::to_string(id));
  if (it->second.state != state) {
    it->second.state = state;
    it->second.updated_at = now;
    changes->hosts.push_back(id);
  }
  return it->second;
}

Result<std::vector<StorageHostId>> Storage::Place(const std::string& region, std::int64_t tb,
                                                  std::string_view field) const {
  // Ceph's CRUSH places a Ceph region's replicas (its pool size is reported instead).
  if (FindCephRegion(region) != nullptr) return std::vector<StorageHostId>{};
  std::vector<std::pair<std::int64_t, StorageHostId>> room;  // (free, id)
  for (const auto& [id, h] : hosts_) {
    if (h.region != region || h.state != StorageHostState::kActive) continue;
    std::int64_t free = h.capacity_tb - host_used_tb_.at(id);
    if (free >= tb) room.push_back({free, id});
  }
  if (room.size() < static_cast<std::size_t>(kReplicas)) {
    Status s = Status::FailedPrecondition(
        region + " has room for at most " + std::to_string(RegionFreeTb(region)) + " TB now (" +
        std::to_string(kReplicas) + " copies on distinct storage hosts); " +
        std::to_string(tb) + " TB asked");
    return field.empty() ? s : s.WithField(std::string(field));
  }
  // Most free space first (spreads the load), then the lowest id: deterministic.
  std::sort(room.begin(), room.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<StorageHostId> out;
  for (int i = 0; i < kReplicas; ++i) out.push_back(room[static_cast<std::size_t>(i)].second);
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t Storage::RegionFreeTb(std::string_view region) const {
  std::vector<std::int64_t> free;
  for (const auto& [id, h] : hosts_) {
    if (h.region == region && h.state == StorageHostState::kActive) {
      free.push_back(h.capacity_tb - host_used_tb_.at(id));
    }
  }
  if (free.size() < static_cast<std::size_t>(kReplicas)) return 0;
  std::sort(free.rbegin(), free.rend());
  return std::max<std::int64_t>(0, free[kReplicas - 1]);
}

void Storage::Take(const std::vector<StorageHostId>& hosts, std::int64_t tb) {
  for (StorageHostId h : hosts) {
    std::int64_t& used = host_used_tb_.at(h);
    used += tb;
    GPUHUB_CHECK_MSG(used <= hosts_.at(h).capacity_tb, "a storage host is overfull");
  }
}

void Storage::Free(const std::vector<StorageHostId>& hosts, std::int64_t tb) {
  for (StorageHostId h : hosts) {
    std::int64_t& used = host_used_tb_.at(h);
    used -= tb;
    GPUHUB_CHECK(used >= 0);
  }
}

Status Storage::CheckCustomerRoom(UserId customer, bool snapshot) const {
  const auto& live = snapshot ? live_snapshots_by_customer_ : live_volumes_by_customer_;
  const std::size_t cap = snapshot ? kMaxSnapshotsPerCustomer : kMaxVolumesPerCustomer;
  auto it = live.find(customer);
  if (it != live.end() && it->second >= cap) {
    return Status::ResourceExhausted("an account holds at most " + std::to_string(cap) +
                                     (snapshot ? " snapshots" : " volumes") +
                                     " at once; delete some first");
  }
  return Status::Ok();
}

// ----- Volumes -------------------------------------------------------------------------------

Result<Volume> Storage::CreateVolume(UserId customer, const VolumeSpec& spec,
                                     ledger::Ledger& ledger, const TaxFunction& tax,
                                     TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(std::string region, Region(spec.region, "region"));
  GPUHUB_RETURN_IF_ERROR(SizeField(spec.size_tb, "size_tb"));
  GPUHUB_RETURN_IF_ERROR(ValidateName(spec.name, "name"));
  if (FindCephRegion(region) != nullptr) GPUHUB_RETURN_IF_ERROR(ValidateMountName(spec.name));
  return NewVolume(customer, region, spec.size_tb, spec.name, spec.currency, 0, ledger, tax, now,
                   changes);
}

Result<Volume> Storage::NewVolume(UserId customer, const std::string& region,
                                  std::int64_t size_tb, const std::string& name, Currency currency,
                                  SnapshotId from, ledger::Ledger& ledger, const TaxFunction& tax,
                                  TimestampMicros now, StorageChanges* changes) {
  if (customer <= 0) return Status::InvalidArgument("customer id must be positive");
  GPUHUB_RETURN_IF_ERROR(CheckCustomerRoom(customer, false));
  GPUHUB_ASSIGN_OR_RETURN(auto hosts, Place(region, size_tb, "size_tb"));
  VolumeSlot slot;
  Volume& v = slot.volume;
  v.id = next_volume_id_;
  v.customer_id = customer;
  v.name = name;
  v.region = region;
  v.size_tb = size_tb;
  v.hosts = std::move(hosts);
  v.restored_from = from;
  v.bill.currency = currency;
  v.bill.price_micros_per_tb_month = config_.volume_micros_per_tb_month;
  v.bill.anchor = now;
  v.created_at = v.updated_at = now;
  if (FindCephRegion(region) != nullptr) {
    // On Ceph: nothing is paid until the subvolume is ready (CephReady starts the bill).
    v.provisioning = from ? CephState::kCloning : CephState::kPending;
    v.provision_deadline = now + config_.ceph_ready_timeout_micros;
    ++next_volume_id_;
    VolumeSlot& stored = volumes_.emplace(v.id, std::move(slot)).first->second;
    volumes_by_customer_[customer].push_back(stored.volume.id);
    ++live_volumes_by_customer_[customer];
    Record(Item::Of(stored), StorageEventKind::kCreated, now,
           std::to_string(size_tb) + " TB in " + region + " on Ceph" +
               (from ? " from snapshot " + std::to_string(from) : "") +
               "; billed from when it is ready (by " +
               FormatTimestamp(stored.volume.provision_deadline) +
               ", else failed at no charge)",
           changes);
    Reschedule(Item::Of(stored));
    return stored.volume;
  }
  GPUHUB_ASSIGN_OR_RETURN(StorageCharge charge,
                          PayDays(Item::Of(slot), now, ledger, tax, now, changes));

  // The money moved: from here on nothing can fail.
  ++next_volume_id_;
  VolumeSlot& stored = volumes_.emplace(v.id, std::move(slot)).first->second;
  Item item = Item::Of(stored);
  stored.volume.bill.days_paid = charge.last_day;
  Take(stored.volume.hosts, size_tb);
  volumes_by_customer_[customer].push_back(stored.volume.id);
  ++live_volumes_by_customer_[customer];
  Record(item, StorageEventKind::kCreated, now,
         std::to_string(size_tb) + " TB in " + region + " on storage hosts " +
             Ids(stored.volume.hosts) + (from ? " from snapshot " + std::to_string(from) : "") +
             "; first day paid: " + AmountText(charge.paid_micros, charge.paid_currency),
         changes);
  StoreCharge(std::move(charge), &stored.charges, changes);
  Reschedule(item);
  return stored.volume;
}

Result<Volume> Storage::ResizeVolume(UserId customer, VolumeId id, std::int64_t size_tb,
                                     ledger::Ledger& ledger, const TaxFunction& tax,
                                     TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(VolumeSlot * own, OwnVolume(customer, id));
  VolumeSlot& slot = *own;
  Volume& v = slot.volume;
  GPUHUB_RETURN_IF_ERROR(SizeField(size_tb, "size_tb"));
  if (size_tb <= v.size_tb) {
    return Status::InvalidArgument("volumes grow but never shrink: size_tb must be more than " +
                                   std::to_string(v.size_tb) + " TB")
        .WithField("size_tb");
  }
  GPUHUB_RETURN_IF_ERROR(CheckActive(Item::Of(slot)));
  GPUHUB_RETURN_IF_ERROR(CheckCephReady(v, "size_tb"));
  const std::int64_t added = size_tb - v.size_tb;
  for (StorageHostId h : v.hosts) {
    std::int64_t free = hosts_.at(h).capacity_tb - host_used_tb_.at(h);
    if (free < added) {
      return Status::FailedPrecondition("storage host " + std::to_string(h) + " of volume " +
                                        std::to_string(id) + " has room for " +
                                        std::to_string(free) + " more TB; " +
                                        std::to_string(added) + " TB asked")
          .WithField("size_tb");
    }
  }
  // The added TB for the rest of the day already paid, pro rata to the microsecond.
  const TimestampMicros paid_through = v.bill.PaidThrough();
  const std::int64_t net =
      MulDivHalfEven(added * v.bill.price_micros_per_tb_month, paid_through - now,
                     kDaysPerStorageMonth * kMicrosPerDay)
          .value();
  std::optional<StorageCharge> charge;
  if (net > 0) {
    StorageCharge c;
    c.customer_id = customer;
    c.kind = StorageChargeKind::kVolumeGrowth;
    c.subject_id = id;
    c.size_tb = added;
    c.first_day = c.last_day = v.bill.days_paid;
    c.growth = v.grows + 1;
    GPUHUB_ASSIGN_OR_RETURN(c.amount, tax(customer, net, now));
    if (c.amount.net_micros != net) return Status::Internal("the tax function changed the net");
    c.paid_currency = v.bill.currency;
    c.period_start = now;
    c.period_end = paid_through;
    c.at = now;
    PaymentPart part{c.amount, StorageChargeTransferBase(c), "storage_volume_growth", "storage",
                     "volume " + std::to_string(id) + ": +" + std::to_string(added) +
                         " TB until " + FormatTimestamp(paid_through)};
    GPUHUB_ASSIGN_OR_RETURN(auto paid, PayParts(ledger, customer, v.bill.currency, {&part, 1},
                                                now, "this growth", &changes->transfers));
    c.paid_micros = paid[0].paid_micros;
    c.transfer_ids = std::move(paid[0].transfer_ids);
    charge = std::move(c);
  }
  // The money moved: from here on nothing can fail.
  Take(v.hosts, added);
  const std::int64_t before = v.size_tb;
  v.size_tb = size_tb;
  ++v.grows;
  Item item = Item::Of(slot);
  Record(item, StorageEventKind::kResized,
         now,
         std::to_string(before) + " TB -> " + std::to_string(size_tb) + " TB" +
             (charge ? "; the rest of the day paid: " +
                           AmountText(charge->paid_micros, charge->paid_currency)
                     : std::string()),
         changes);
  if (charge) StoreCharge(std::move(*charge), &slot.charges, changes);
  Reschedule(item);
  return v;
}

Result<Volume> Storage::Attach(UserId customer, VolumeId id, RentalId rental_id,
                               const Fleet& fleet, TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(VolumeSlot * own, OwnVolume(customer, id));
  VolumeSlot& slot = *own;
  Volume& v = slot.volume;
  const Rental* rental = fleet.FindCustomerRental(customer, rental_id);
  if (rental == nullptr) {
    return Status::NotFound("no rental " + std::to_string(rental_id) + " of yours")
        .WithField("rental_id");
  }
  if (rental->state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(rental_id) + " was released")
        .WithField("rental_id");
  }
  if (rental->region != v.region) {
    return Status::InvalidArgument("volume " + std::to_string(id) + " is in " + v.region +
                                   " and rental " + std::to_string(rental_id) + " in " +
                                   rental->region +
                                   ": a network volume attaches only to instances of its region")
        .WithField("rental_id");
  }
  GPUHUB_RETURN_IF_ERROR(CheckActive(Item::Of(slot)));
  GPUHUB_RETURN_IF_ERROR(CheckCephReady(v, ""));
  if (std::find(v.attachments.begin(), v.attachments.end(), rental_id) != v.attachments.end()) {
    return v;
  }
  if (v.attachments.size() >= kMaxAttachmentsPerVolume) {
    return Status::ResourceExhausted("a volume attaches to at most " +
                                     std::to_string(kMaxAttachmentsPerVolume) + " instances")
        .WithField("rental_id");
  }
  auto& of_rental = volumes_by_rental_[rental_id];
  const std::size_t cap =
      FindCephRegion(v.region) != nullptr ? kMaxCephVolumesPerRental : kMaxVolumesPerRental;
  if (of_rental.size() >= cap) {
    return Status::ResourceExhausted("an instance has at most " + std::to_string(cap) +
                                     " volumes attached")
        .WithField("rental_id");
  }
  v.attachments.insert(std::upper_bound(v.attachments.begin(), v.attachments.end(), rental_id),
                       rental_id);
  of_rental.insert(id);
  Record(Item::Of(slot), StorageEventKind::kAttached, now,
         "attached to " + RentalName(*rental) +
             (v.attachments.size() > 1 ? " (now on " + std::to_string(v.attachments.size()) +
                                             " instances: concurrent writers must coordinate)"
                                       : ""),
         changes);
  return v;
}

Result<Volume> Storage::Detach(UserId customer, VolumeId id, RentalId rental_id,
                               TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(VolumeSlot * own, OwnVolume(customer, id));
  VolumeSlot& slot = *own;
  Volume& v = slot.volume;
  auto at = std::find(v.attachments.begin(), v.attachments.end(), rental_id);
  if (at == v.attachments.end()) {
    return Status::NotFound("volume " + std::to_string(id) + " is not attached to rental " +
                            std::to_string(rental_id))
        .WithField("rental_id");
  }
  v.attachments.erase(at);
  volumes_by_rental_[rental_id].erase(id);
  if (volumes_by_rental_[rental_id].empty()) volumes_by_rental_.erase(rental_id);
  Record(Item::Of(slot), StorageEventKind::kDetached, now,
         "detached from rental " + std::to_string(rental_id), changes);
  return v;
}

Result<Volume> Storage::DeleteVolume(UserId customer, VolumeId id, TimestampMicros now,
                                     StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(VolumeSlot * slot, OwnVolume(customer, id));
  if (!slot->volume.attachments.empty() && slot->volume.bill.state != StorageState::kDeleted) {
    return Status::FailedPrecondition("volume " + std::to_string(id) +
                                      " is attached to rental(s) " + Ids(slot->volume.attachments) +
                                      "; detach it first")
        .WithField("attachments");
  }
  GPUHUB_RETURN_IF_ERROR(DeleteOnRequest(Item::Of(*slot), now, changes));
  return slot->volume;
}

Result<Volume> Storage::PayVolume(UserId customer, VolumeId id, ledger::Ledger& ledger,
                                  const TaxFunction& tax, TimestampMicros now,
                                  StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(VolumeSlot * slot, OwnVolume(customer, id));
  GPUHUB_RETURN_IF_ERROR(PayUnpaid(Item::Of(*slot), ledger, tax, now, changes));
  return slot->volume;
}

Result<Storage::VolumeSlot*> Storage::OwnVolume(UserId customer, VolumeId id) {
  auto it = volumes_.find(id);
  if (it == volumes_.end() || it->second.volume.customer_id != customer) {
    return Status::NotFound("no volume " + std::to_string(id) + " of yours");
  }
  return &it->second;
}

Result<Storage::SnapshotSlot*> Storage::OwnSnapshot(UserId customer, SnapshotId id) {
  auto it = snapshots_.find(id);
  if (it == snapshots_.end() || it->second.snapshot.customer_id != customer) {
    return Status::NotFound("no snapshot " + std::to_string(id) + " of yours");
  }
  return &it->second;
}

Status Storage::CheckActive(Item item) {
  const StorageState state = item.bill().state;
  if (state == StorageState::kActive) return Status::Ok();
  return Status::FailedPrecondition(std::string(item.noun()) + " " + std::to_string(item.id()) +
                                    " is " + std::string(StorageStateName(state)) +
                                    (state == StorageState::kDeleted ? "" : ": pay it first"));
}

Status Storage::DeleteOnRequest(Item item, TimestampMicros now, StorageChanges* changes) {
  if (item.bill().state == StorageState::kDeleted) {
    return Status::FailedPrecondition(std::string(item.noun()) + " " + std::to_string(item.id()) +
                                      " was already deleted at " +
                                      FormatTimestamp(item.bill().deleted_at));
  }
  Delete(item, DeleteReason::kCustomer, now, changes);
  Reschedule(item);
  return Status::Ok();
}

Status Storage::PayUnpaid(Item item, ledger::Ledger& ledger, const TaxFunction& tax,
                          TimestampMicros now, StorageChanges* changes) {
  if (item.bill().state == StorageState::kDeleted) {
    return Status::FailedPrecondition(std::string(item.noun()) + " " + std::to_string(item.id()) +
                                      " was deleted at " +
                                      FormatTimestamp(item.bill().deleted_at));
  }
  if (item.bill().state == StorageState::kActive) return Status::Ok();
  GPUHUB_ASSIGN_OR_RETURN(StorageCharge charge, PayDays(item, now, ledger, tax, now, changes));
  Restored(item, std::move(charge), now, changes);
  Reschedule(item);
  return Status::Ok();
}

// ----- Snapshots -----------------------------------------------------------------------------

Result<DiskSnapshot> Storage::CreateSnapshot(UserId customer, const SnapshotSpec& spec,
                                             const Fleet& fleet, ledger::Ledger& ledger,
                                             const TaxFunction& tax, TimestampMicros now,
                                             StorageChanges* changes) {
  now = Now(now);
  if (customer <= 0) return Status::InvalidArgument("customer id must be positive");
  GPUHUB_RETURN_IF_ERROR(ValidateName(spec.name, "name"));
  SnapshotSlot slot;
  DiskSnapshot& s = slot.snapshot;
  s.source = spec.source;
  s.source_id = spec.source_id;
  Currency currency = Currency::kUsd;
  std::string what;
  if (spec.source == SnapshotSource::kVolume) {
    const Volume* v = FindVolume(spec.source_id);
    if (v == nullptr || v->customer_id != customer) {
      return Status::NotFound("no volume " + std::to_string(spec.source_id) + " of yours")
          .WithField("source_id");
    }
    GPUHUB_RETURN_IF_ERROR(CheckActive(Item::Of(volumes_.at(v->id))).WithField("source_id"));
    GPUHUB_RETURN_IF_ERROR(CheckCephReady(*v, "source_id"));
    s.ceph = FindCephRegion(v->region) != nullptr;
    s.region = v->region;
    s.size_tb = v->size_tb;
    currency = v->bill.currency;
    what = "volume " + std::to_string(v->id);
  } else {
    const Rental* r = fleet.FindCustomerRental(customer, spec.source_id);
    if (r == nullptr) {
      return Status::NotFound("no rental " + std::to_string(spec.source_id) + " of yours")
          .WithField("source_id");
    }
    if (r->state != RentalState::kActive) {
      return Status::FailedPrecondition("rental " + std::to_string(r->id) + " is " +
                                        std::string(RentalStateName(r->state)) +
                                        ": only a running instance's local NVMe can be copied")
          .WithField("source_id");
    }
    const std::int64_t gb = r->instance.nvme_gb + r->extra_nvme_gb;
    if (gb <= 0) {
      return Status::FailedPrecondition("rental " + std::to_string(r->id) + " has no local NVMe")
          .WithField("source_id");
    }
    s.region = r->region;
    s.size_tb = (gb + kGbPerTb - 1) / kGbPerTb;
    currency = r->currency;
    what = "the local NVMe of rental " + std::to_string(r->id);
  }
  GPUHUB_RETURN_IF_ERROR(CheckCustomerRoom(customer, true));
  GPUHUB_ASSIGN_OR_RETURN(s.hosts, Place(s.region, s.size_tb, ""));
  s.id = next_snapshot_id_;
  s.customer_id = customer;
  s.name = spec.name;
  s.bill.currency = spec.currency.value_or(currency);
  s.bill.price_micros_per_tb_month = config_.snapshot_micros_per_tb_month;
  s.bill.anchor = now;
  s.created_at = s.updated_at = now;
  GPUHUB_ASSIGN_OR_RETURN(StorageCharge charge,
                          PayDays(Item::Of(slot), now, ledger, tax, now, changes));

  // The money moved: from here on nothing can fail.
  ++next_snapshot_id_;
  SnapshotSlot& stored = snapshots_.emplace(s.id, std::move(slot)).first->second;
  Item item = Item::Of(stored);
  stored.snapshot.bill.days_paid = charge.last_day;
  Take(stored.snapshot.hosts, stored.snapshot.size_tb);
  snapshots_by_customer_[customer].push_back(stored.snapshot.id);
  ++live_snapshots_by_customer_[customer];
  Record(item, StorageEventKind::kCreated, now,
         "copy of " + what + ", " + std::to_string(stored.snapshot.size_tb) + " TB in " +
             stored.snapshot.region + "; first day paid: " +
             AmountText(charge.paid_micros, charge.paid_currency),
         changes);
  StoreCharge(std::move(charge), &stored.charges, changes);
  Reschedule(item);
  return stored.snapshot;
}

Result<Volume> Storage::RestoreSnapshot(UserId customer, SnapshotId id, const RestoreSpec& spec,
                                        ledger::Ledger& ledger, const TaxFunction& tax,
                                        TimestampMicros now, StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(SnapshotSlot * slot, OwnSnapshot(customer, id));
  const DiskSnapshot* s = &slot->snapshot;
  if (!spec.region.empty()) {
    GPUHUB_ASSIGN_OR_RETURN(std::string region, Region(spec.region, "region"));
    if (region != s->region) {
      return Status::InvalidArgument("snapshot " + std::to_string(id) + " is in " + s->region +
                                     ": it restores as a volume of " + s->region + " only")
          .WithField("region");
    }
  }
  const std::int64_t size_tb = spec.size_tb.value_or(s->size_tb);
  GPUHUB_RETURN_IF_ERROR(SizeField(size_tb, "size_tb"));
  if (size_tb < s->size_tb) {
    return Status::InvalidArgument("size_tb must be at least the snapshot's " +
                                   std::to_string(s->size_tb) + " TB")
        .WithField("size_tb");
  }
  GPUHUB_RETURN_IF_ERROR(ValidateName(spec.name, "name"));
  GPUHUB_RETURN_IF_ERROR(CheckActive(Item::Of(*slot)));
  if (FindCephRegion(s->region) != nullptr) {
    GPUHUB_RETURN_IF_ERROR(ValidateMountName(spec.name));
    if (!s->ceph || !s->ceph_taken) {
      return Status::FailedPrecondition(
          "snapshot " + std::to_string(id) +
          (s->ceph ? " is not taken on Ceph yet: restore it once it is"
                   : " is a copy of local NVMe, which Ceph does not hold: it cannot be restored"));
    }
  }
  return NewVolume(customer, s->region, size_tb, spec.name,
                   spec.currency.value_or(s->bill.currency), id, ledger, tax, now, changes);
}

Result<DiskSnapshot> Storage::DeleteSnapshot(UserId customer, SnapshotId id, TimestampMicros now,
                                             StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(SnapshotSlot * slot, OwnSnapshot(customer, id));
  GPUHUB_RETURN_IF_ERROR(DeleteOnRequest(Item::Of(*slot), now, changes));
  return slot->snapshot;
}

Result<DiskSnapshot> Storage::PaySnapshot(UserId customer, SnapshotId id, ledger::Ledger& ledger,
                                          const TaxFunction& tax, TimestampMicros now,
                                          StorageChanges* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(SnapshotSlot * slot, OwnSnapshot(customer, id));
  GPUHUB_RETURN_IF_ERROR(PayUnpaid(Item::Of(*slot), ledger, tax, now, changes));
  return slot->snapshot;
}

// ----- Queries -------------------------------------------------------------------------------

const StorageHost* Storage::FindHost(StorageHostId id) const {
  auto it = hosts_.find(id);
  return it == hosts_.end() ? nullptr : &it->second;
}

const Volume* Storage::FindVolume(VolumeId id) const {
  auto it = volumes_.find(id);
  return it == volumes_.end() ? nullptr : &it->second.volume;
}

const DiskSnapshot* Storage::FindSnapshot(SnapshotId id) const {
  auto it = snapshots_.find(id);
  return it == snapshots_.end() ? nullptr : &it->second.snapshot;
}

const StorageCharge* Storage::FindCharge(StorageChargeId id) const {
  auto it = charges_.find(id);
  return it == charges_.end() ? nullptr : &it->second;
}

std::vector<Volume> Storage::ListVolumes(UserId customer, std::size_t limit) const {
  std::vector<Volume> out;
  auto it = volumes_by_customer_.find(customer);
  if (it == volumes_by_customer_.end()) return out;
  for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
    out.push_back(volumes_.at(*id).volume);
  }
  return out;
}

std::vector<DiskSnapshot> Storage::ListSnapshots(UserId customer, std::size_t limit) const {
  std::vector<DiskSnapshot> out;
  auto it = snapshots_by_customer_.find(customer);
  if (it == snapshots_by_customer_.end()) return out;
  for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
    out.push_back(snapshots_.at(*id).snapshot);
  }
  return out;
}

std::vector<StorageHost> Storage::ListHosts(std::string_view region) const {
  std::vector<StorageHost> out;
  for (const auto& [id, h] : hosts_) {
    if (region.empty() || h.region == region) out.push_back(h);
  }
  return out;
}

std::int64_t Storage::HostUsedTb(StorageHostId id) const {
  auto it = host_used_tb_.find(id);
  return it == host_used_tb_.end() ? 0 : it->second;
}

std::vector<Volume> Storage::VolumesOfRental(RentalId rental) const {
  std::vector<Volume> out;
  auto it = volumes_by_rental_.find(rental);
  if (it == volumes_by_rental_.end()) return out;
  for (VolumeId id : it->second) out.push_back(volumes_.at(id).volume);
  return out;
}

std::vector<StorageEvent> Storage::VolumeHistory(VolumeId id) const {
  auto it = volumes_.find(id);
  return it == volumes_.end() ? std::vector<StorageEvent>{} : it->second.history;
}

std::vector<StorageEvent> Storage::SnapshotHistory(SnapshotId id) const {
  auto it = snapshots_.find(id);
  return it == snapshots_.end() ? std::vector<StorageEvent>{} : it->second.history;
}

std::vector<StorageCharge> Storage::ChargesOfVolume(VolumeId id) const {
  std::vector<StorageCharge> out;
  auto it = volumes_.find(id);
  if (it == volumes_.end()) return out;
  for (StorageChargeId c : it->second.charges) out.push_back(charges_.at(c));
  return out;
}

std::vector<StorageCharge> Storage::ChargesOfSnapshot(SnapshotId id) const {
  std::vector<StorageCharge> out;
  auto it = snapshots_.find(id);
  if (it == snapshots_.end()) return out;
  for (StorageChargeId c : it->second.charges) out.push_back(charges_.at(c));
  return out;
}

std::vector<EgressMeter> Storage::MetersOf(RentalId rental) const {
  std::vector<EgressMeter> out;
  for (auto it = meters_.lower_bound({rental, 0}); it != meters_.end() && it->first.first == rental;
       ++it) {
    out.push_back(it->second);
  }
  return out;
}

}  // namespace gpuhub::rentals
