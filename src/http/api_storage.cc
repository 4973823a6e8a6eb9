// Storage endpoints (issue 11). Amounts are decimal strings with 6 decimals, prices in USD (tax
// excluded), debits in the paying wallet's currency; sizes are whole TB (1 TB = 1,000 GB); times
// RFC 3339 UTC.
//
// Anyone:
//   GET  /v1/storage                  prices, formulas, and the room each region has now
// Customers (role customer):
//   POST   /v1/volumes {"region", "size_tb", "name"?, "currency"?}   -> 201 volume (first day paid)
//   GET    /v1/volumes[?limit=N], GET /v1/volumes/{id} (history, charges, what happens when)
//   POST   /v1/volumes/{id}/resize {"size_tb"}        grows only; pays the added TB for the day
//   POST   /v1/volumes/{id}/attach {"rental_id"}      a live rental of yours in the region
//   POST   /v1/volumes/{id}/detach {"rental_id"}
//   POST   /v1/volumes/{id}/pay                       unpaid -> pays every day missed, active again
//   DELETE /v1/volumes/{id}                           only detached; the day paid is not refunded
//   POST   /v1/snapshots {"volume_id" | "rental_id", "name"?, "currency"?}  -> 201 snapshot
//   GET    /v1/snapshots[?limit=N], GET /v1/snapshots/{id}
//   POST   /v1/snapshots/{id}/restore {"region"?, "size_tb"?, "name"?, "currency"?} -> 201 volume
//   POST   /v1/snapshots/{id}/pay, DELETE /v1/snapshots/{id}
//   POST   /v1/rentals/{id}/extra-nvme {"add_tb"}     extra local NVMe, prorated to the term end
// Admins:
//   POST /v1/admin/storage-hosts {"region", "capacity_tb", "hostname"?} -> 201 host
//   GET  /v1/admin/storage-hosts[?region=], POST /v1/admin/storage-hosts/{id}/drain | /undrain
//   POST /v1/admin/egress {"samples": [{"rental_id", "at", "bytes"}]}  usage samples until the
//        host agent posts them (POST /v1/agent/usage calls the same engine function)
//   GET  /v1/admin/storage               invariants (against the fleet) and settlement
#include <algorithm>

#include "engine/rentals.h"
#include "engine/storage.h"
#include "engine/wallets.h"
#include "http/api.h"
#include "http/storage_reconciler.h"
#include "rentals/limits.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;
using rentals::StorageBill;
using rentals::StorageState;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }
std::string Usd(std::int64_t micros) { return FormatMicros(micros); }

const rentals::Storage& Store(Txn& txn) { return txn.state.storage->storage; }
const rentals::Fleet& Fleet(Txn& txn) { return txn.state.rentals->fleet; }

// What a volume's or snapshot's bill says: the price and its formula, what is paid, what happens
// next and, when unpaid, when each step of the unpaid path happens and what restores it.
json BillJson(const rentals::Storage& storage, const StorageBill& b, std::int64_t size_tb,
              const std::string& pay_path, TimestampMicros now) {
  const std::int64_t next_day = rentals::Storage::DayMicros(b.price_micros_per_tb_month, size_tb,
                                                            b.days_paid + 1);
  const std::int64_t month = b.price_micros_per_tb_month * size_tb;
  json out = {
      {"price",
       {{"per_tb_month", Usd(b.price_micros_per_tb_month)},
        {"per_month", Usd(month)},
        {"next_day", Usd(next_day)},
        {"currency", "USD"},
        {"formula", std::to_string(size_tb) + " TB x " + Usd(b.price_micros_per_tb_month) +
                        " / 30 = " + Usd(MulDivHalfEven(month, 1, 30).value()) +
                        " per day (day n costs R(" + Usd(month) + " x n / 30) - R(" +
                        Usd(month) + " x (n-1) / 30), so 30 days cost exactly " + Usd(month) +
                        "); billed daily in advance, tax on top"}}},
      {"wallet", CurrencyCode(b.currency)},
      {"days_paid", b.days_paid},
      {"paid_through", b.state == StorageState::kDeleted ? json(nullptr) : Time(b.PaidThrough())},
  };
  rentals::StorageNext next = storage.Next(b);
  out["next"] = next.at == 0 ? json(nullptr) : json({{"at", FormatTimestamp(next.at)},
                                                      {"what", next.what}});
  if (b.state == StorageState::kReadOnly || b.state == StorageState::kDetached) {
    out["unpaid"] = {{"since", FormatTimestamp(b.unpaid_since)},
                     {"detach_at", FormatTimestamp(b.detach_at)},
                     {"delete_at", FormatTimestamp(b.delete_at)},
                     {"next_retry_at", Time(b.retry_at)},
                     {"due", Usd(storage.DueMicros(b, size_tb, now))},
                     {"due_currency", "USD"},
                     {"pay", pay_path}};
  } else {
    out["unpaid"] = nullptr;
  }
  out["deleted_at"] = Time(b.deleted_at);
  out["delete_reason"] = b.delete_reason == rentals::DeleteReason::kNone
                             ? json(nullptr)
                             : json(rentals::DeleteReasonName(b.delete_reason));
  return out;
}

// What happens when, in words (the pages show this list).
json ScheduleJson(const StorageBill& b, bool volume) {
  json steps = json::array();
  switch (b.state) {
    case StorageState::kActive:
      steps.push_back({{"at", FormatTimestamp(b.PaidThrough())},
                       {"what", "the next day is billed; if the wallet cannot pay it, the " +
                                    std::string(volume ? "volume turns read-only" :
                                                         "snapshot cannot be restored") +
                                    " at once, " +
                                    (volume ? "is detached 72 h later" : "is suspended 72 h later") +
                                    " and deleted 7 days after that"}});
      break;
    case StorageState::kReadOnly:
      steps.push_back({{"at", FormatTimestamp(b.detach_at)},
                       {"what", volume ? "detached from every instance unless paid before"
                                       : "suspended unless paid before"}});
      [[fallthrough]];
    case StorageState::kDetached:
      steps.push_back({{"at", FormatTimestamp(b.delete_at)},
                       {"what", "deleted for good, its data destroyed, unless paid before"}});
      break;
    case StorageState::kDeleted:
      break;
  }
  return steps;
}

json HostsJson(const rentals::Storage& storage, const std::vector<rentals::StorageHostId>& ids) {
  json out = json::array();
  for (auto id : ids) {
    const rentals::StorageHost* h = storage.FindHost(id);
    out.push_back({{"id", id}, {"hostname", h && !h->hostname.empty() ? json(h->hostname)
                                                                      : json(nullptr)}});
  }
  return out;
}

json EventsJson(const std::vector<rentals::StorageEvent>& events) {
  json out = json::array();
  for (const auto& e : events) {
    out.push_back({{"sequence", e.sequence},
                   {"at", FormatTimestamp(e.at)},
                   {"event", rentals::StorageEventKindName(e.kind)},
                   {"detail", e.detail}});
  }
  return out;
}

json StorageChargeJson(const rentals::StorageCharge& c) {
  json ids = json::array();
  for (const auto& id : c.transfer_ids) ids.push_back(id);
  json out = {{"id", c.id},
              {"kind", rentals::StorageChargeKindName(c.kind)},
              {"amount", TaxJson(c.amount)},
              {"paid", {{"amount", Usd(c.paid_micros)}, {"currency", CurrencyCode(c.paid_currency)}}},
              {"period_start", Time(c.period_start)},
              {"period_end", Time(c.period_end)},
              {"at", FormatTimestamp(c.at)},
              {"transfer_ids", ids}};
  switch (c.kind) {
    case rentals::StorageChargeKind::kVolumeDays:
    case rentals::StorageChargeKind::kSnapshotDays:
      out["size_tb"] = c.size_tb;
      out["days"] = {c.first_day, c.last_day};
      break;
    case rentals::StorageChargeKind::kVolumeGrowth:
      out["added_tb"] = c.size_tb;
      break;
    case rentals::StorageChargeKind::kEgress:
      out["rental_id"] = c.subject_id;
      out["term"] = c.period;
      out["gb"] = c.egress_gb;
      out["gb_from"] = c.egress_gb_from + 1;
      break;
  }
  return out;
}

// Where a volume stands on its region's Ceph cluster ("provisioning", "ceph"), and the cluster's
// replica count and health as the storage reconciler last read them. The key of a client is
// never shown here. An answer about a volume with Ceph work to do wakes the reconciler.
void AddCephJson(const ApiContext& api, Txn& txn, const rentals::Volume& v, json& out) {
  using rentals::CephState;
  if (v.provisioning == CephState::kNone) {
    out["provisioning"] = {{"state", "none"},
                           {"error", nullptr},
                           {"note", "not stored anywhere: demo/billing only (no Ceph cluster is "
                                    "configured for " + v.region + ")"}};
    out["ceph"] = nullptr;
    return;
  }
  const bool in_progress = v.provisioning == CephState::kPending ||
                           v.provisioning == CephState::kCreating ||
                           v.provisioning == CephState::kCloning;
  const bool deleted = v.bill.state == StorageState::kDeleted;
  out["provisioning"] = {
      {"state", rentals::CephStateName(v.provisioning)},
      {"error", v.provision_error.empty() ? json(nullptr) : json(v.provision_error)},
      {"ready_by", in_progress && !deleted ? json(FormatTimestamp(v.provision_deadline))
                                           : json(nullptr)}};
  if (in_progress || v.provisioning == CephState::kFailed) {
    out["state"] = rentals::CephStateName(v.provisioning);
    if (!v.provision_error.empty()) out["error"] = v.provision_error;
  }
  if (in_progress && !deleted) {
    const rentals::StorageNext next = Store(txn).Next(v);
    out["bill"]["next"] = {{"at", FormatTimestamp(next.at)}, {"what", next.what}};
    out["schedule"] = json::array(
        {{{"at", FormatTimestamp(v.provision_deadline)},
          {"what", "failed at no charge unless ready on Ceph before (billing starts then)"}}});
  }
  json ceph = {{"subvolume", rentals::CephSubvolumeName(v.id)},
               {"quota_tb", v.ceph_quota_tb},
               {"pool_size", nullptr},
               {"health", nullptr},
               {"reachable", nullptr}};
  if (api.storage_reconciler != nullptr) {
    if (auto st = api.storage_reconciler->RegionStatus(v.region)) {
      ceph["reachable"] = st->reachable;
      if (st->pool_size > 0) ceph["pool_size"] = st->pool_size;
      if (!st->health.empty()) ceph["health"] = st->health;
      if (!st->checks.empty()) ceph["checks"] = st->checks;
    }
    if (!Store(txn).CephWorkOf(v).empty()) api.storage_reconciler->Wake();
  }
  out["replicas"] = ceph["pool_size"];
  out["ceph"] = std::move(ceph);
}

json VolumeJson(const ApiContext& api, Txn& txn, const rentals::Volume& v) {
  const bool deleted = v.bill.state == StorageState::kDeleted;
  json attachments = json::array();
  for (auto id : v.attachments) {
    const rentals::Rental* r = Fleet(txn).FindRental(id);
    json a = {{"rental_id", id},
              {"gpu", r ? json(r->gpu) : json(nullptr)},
              {"count", r ? json(r->count) : json(nullptr)},
              {"state", r ? json(rentals::RentalStateName(r->state)) : json(nullptr)}};
    if (v.provisioning != rentals::CephState::kNone) {
      auto c = std::find_if(v.clients.begin(), v.clients.end(),
                            [id](const rentals::CephClient& x) { return x.rental_id == id; });
      a["client"] = c == v.clients.end()
                        ? json(nullptr)
                        : json({{"name", rentals::CephClientName(v.id, id)},
                                {"access", c->read_only ? "r" : "rw"}});
    }
    attachments.push_back(std::move(a));
  }
  const std::string id = std::to_string(v.id);
  json out = {{"id", v.id},
          {"name", v.name.empty() ? json(nullptr) : json(v.name)},
          {"region", v.region},
          {"size_tb", v.size_tb},
          {"state", rentals::StorageStateName(v.bill.state)},
          {"access", deleted || v.bill.state == StorageState::kDetached ? "none"
                     : v.bill.state == StorageState::kReadOnly        ? "read_only"
                                                                      : "read_write"},
          {"replicas", deleted ? 0 : rentals::kReplicas},
          {"hosts", HostsJson(Store(txn), v.hosts)},
          {"attachments", attachments},
          {"warning", v.attachments.size() > 1
                          ? json("attached to " + std::to_string(v.attachments.size()) +
                                 " instances: it is one shared filesystem, so concurrent writers "
                                 "must coordinate (a cluster filesystem, or one writer and "
                                 "readers); two instances writing the same files corrupt them")
                          : json(nullptr)},
          {"restored_from", v.restored_from == 0 ? json(nullptr) : json(v.restored_from)},
          {"bill", BillJson(Store(txn), v.bill, v.size_tb, "POST /v1/volumes/" + id + "/pay",
                            txn.now)},
          {"schedule", ScheduleJson(v.bill, true)},
          {"created_at", FormatTimestamp(v.created_at)},
          {"updated_at", FormatTimestamp(v.updated_at)}};
  AddCephJson(api, txn, v, out);
  return out;
}

json SnapshotJson(const ApiContext& api, Txn& txn, const rentals::DiskSnapshot& s) {
  const std::string id = std::to_string(s.id);
  json out = {{"id", s.id},
          {"name", s.name.empty() ? json(nullptr) : json(s.name)},
          {"region", s.region},
          {"size_tb", s.size_tb},
          {"source",
           {{"kind", rentals::SnapshotSourceName(s.source)},
            {s.source == rentals::SnapshotSource::kVolume ? "volume_id" : "rental_id",
             s.source_id}}},
          {"state", rentals::StorageStateName(s.bill.state)},
          {"restorable", s.bill.state == StorageState::kActive},
          {"replicas", s.bill.state == StorageState::kDeleted ? 0 : rentals::kReplicas},
          {"hosts", HostsJson(Store(txn), s.hosts)},
          {"bill", BillJson(Store(txn), s.bill, s.size_tb, "POST /v1/snapshots/" + id + "/pay",
                            txn.now)},
          {"schedule", ScheduleJson(s.bill, false)},
          {"restore", s.bill.state == StorageState::kActive
                          ? json("POST /v1/snapshots/" + id + "/restore (a new volume in " +
                                 s.region + ")")
                          : json(nullptr)},
          {"created_at", FormatTimestamp(s.created_at)},
          {"updated_at", FormatTimestamp(s.updated_at)}};
  if (s.ceph) {
    // Ceph 16.2's `snapshot info` reports no size: a snapshot is billed on its volume's size.
    out["ceph"] = {{"snapshot", rentals::CephSnapshotName(s.id)},
                   {"subvolume", rentals::CephSubvolumeName(s.source_id)},
                   {"taken", s.ceph_taken},
                   {"billed_size", "the volume's size (Ceph does not report a snapshot's own)"}};
    out["replicas"] = nullptr;
    if (s.bill.state == StorageState::kActive && !s.ceph_taken) out["restorable"] = false;
    const bool work = s.bill.state == StorageState::kDeleted ? s.ceph_taken && !s.ceph_removed
                                                             : !s.ceph_taken;
    if (work && api.storage_reconciler != nullptr) api.storage_reconciler->Wake();
  }
  return out;
}

json ChargesJson(const std::vector<rentals::StorageCharge>& charges) {
  json out = json::array();
  // Newest first, at most a page: a volume kept for a year has 365 of them.
  for (auto it = charges.rbegin(); it != charges.rend() && out.size() < rentals::kMaxPageSize;
       ++it) {
    out.push_back(StorageChargeJson(*it));
  }
  return out;
}

// The customer's daily cost of storage: every volume and snapshot that is billed.
json TotalsJson(Txn& txn, const std::vector<rentals::Volume>& volumes,
                const std::vector<rentals::DiskSnapshot>& snapshots) {
  std::int64_t day = 0;
  std::int64_t tb = 0;
  for (const auto& v : volumes) {
    if (v.bill.state == StorageState::kDeleted) continue;
    day += rentals::Storage::DayMicros(v.bill.price_micros_per_tb_month, v.size_tb,
                                       v.bill.days_paid + 1);
    tb += v.size_tb;
  }
  for (const auto& s : snapshots) {
    if (s.bill.state == StorageState::kDeleted) continue;
    day += rentals::Storage::DayMicros(s.bill.price_micros_per_tb_month, s.size_tb,
                                       s.bill.days_paid + 1);
    tb += s.size_tb;
  }
  (void)txn;
  return {{"next_day", Usd(day)}, {"tb", tb}, {"currency", "USD"}};
}

Result<rentals::VolumeSpec> ParseVolume(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"region", "size_tb", "name", "currency"}));
  rentals::VolumeSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(spec.region, RequiredString(body, "region"));
  GPUHUB_ASSIGN_OR_RETURN(spec.size_tb, RequiredInteger(body, "size_tb", 1, rentals::kMaxVolumeTb));
  GPUHUB_ASSIGN_OR_RETURN(auto name, OptionalString(body, "name"));
  if (name) spec.name = *name;
  GPUHUB_ASSIGN_OR_RETURN(spec.currency, OptionalCurrency(body, Currency::kUsd));
  return spec;
}

struct SnapshotInput {
  rentals::SnapshotSpec spec;
  std::string source_field;  // "volume_id" or "rental_id": where the domain's source_id errors go
};

Result<SnapshotInput> ParseSnapshot(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body,
                          ParseJsonObject(r, {"volume_id", "rental_id", "name", "currency"}));
  SnapshotInput in;
  const bool volume = body.contains("volume_id") && !body["volume_id"].is_null();
  const bool rental = body.contains("rental_id") && !body["rental_id"].is_null();
  if (volume == rental) {
    return Status::InvalidArgument(
               "give exactly one of 'volume_id' (a network volume) or 'rental_id' (the local "
               "NVMe of a running rental)")
        .WithField(volume ? "rental_id" : "volume_id");
  }
  in.source_field = volume ? "volume_id" : "rental_id";
  in.spec.source = volume ? rentals::SnapshotSource::kVolume : rentals::SnapshotSource::kLocalNvme;
  GPUHUB_ASSIGN_OR_RETURN(in.spec.source_id, RequiredInteger(body, in.source_field, 1, INT64_MAX));
  GPUHUB_ASSIGN_OR_RETURN(auto name, OptionalString(body, "name"));
  if (name) in.spec.name = *name;
  if (body.contains("currency")) {
    GPUHUB_ASSIGN_OR_RETURN(in.spec.currency, OptionalCurrency(body, Currency::kUsd));
  }
  return in;
}

Result<std::vector<rentals::EgressSample>> ParseEgress(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"samples"}));
  auto samples = body.find("samples");
  if (samples == body.end() || !samples->is_array() || samples->empty() ||
      samples->size() > rentals::kMaxEgressSamplesPerRequest) {
    return Status::InvalidArgument("samples must be an array of 1.." +
                                   std::to_string(rentals::kMaxEgressSamplesPerRequest) +
                                   " samples {\"rental_id\", \"at\", \"bytes\"}")
        .WithField("samples");
  }
  std::vector<rentals::EgressSample> out;
  for (std::size_t i = 0; i < samples->size(); ++i) {
    const json& s = (*samples)[i];
    const std::string where = "samples[" + std::to_string(i) + "]";
    if (!s.is_object()) return Status::InvalidArgument(where + " must be an object").WithField(where);
    for (const auto& [key, value] : s.items()) {
      if (key != "rental_id" && key != "at" && key != "bytes") {
        return Status::InvalidArgument(where + ": unknown field '" + key.substr(0, 32) + "'")
            .WithField(where + "." + key.substr(0, 32));
      }
    }
    rentals::EgressSample sample;
    auto in = [&](Status st) {
      return Status::InvalidArgument(where + "." + st.message()).WithField(where + "." + st.field());
    };
    auto rental = RequiredInteger(s, "rental_id", 1, INT64_MAX);
    if (!rental.ok()) return in(rental.status());
    auto bytes = RequiredInteger(s, "bytes", 0, rentals::kMaxEgressSampleBytes);
    if (!bytes.ok()) return in(bytes.status());
    auto at = RequiredString(s, "at");
    if (!at.ok()) return in(at.status());
    auto when = ParseTimestamp(*at);
    if (!when.ok()) {
      return Status::InvalidArgument(where + ".at must be an RFC 3339 time such as "
                                             "\"2026-12-01T10:00:00Z\"")
          .WithField(where + ".at");
    }
    sample.rental_id = *rental;
    sample.bytes = *bytes;
    sample.at = *when;
    out.push_back(sample);
  }
  return out;
}

Result<std::size_t> ListLimit(const Request& r) {
  return LimitQuery(r, "limit", rentals::kDefaultPageSize, rentals::kMaxPageSize);
}

json HostJson(Txn& txn, const rentals::StorageHost& h) {
  return {{"id", h.id},
          {"region", h.region},
          {"hostname", h.hostname.empty() ? json(nullptr) : json(h.hostname)},
          {"capacity_tb", h.capacity_tb},
          {"used_tb", Store(txn).HostUsedTb(h.id)},
          {"state", rentals::StorageHostStateName(h.state)},
          {"created_at", FormatTimestamp(h.created_at)},
          {"updated_at", FormatTimestamp(h.updated_at)}};
}

}  // namespace

json RentalStorageJson(const engine::State& state, std::int64_t rental_id, TimestampMicros now) {
  const rentals::Storage& storage = state.storage->storage;
  const rentals::Rental* r = state.rentals->fleet.FindRental(rental_id);
  json meters = json::array();
  json current = nullptr;
  for (const auto& m : storage.MetersOf(rental_id)) {
    const std::int64_t over = std::max<std::int64_t>(0, m.used_bytes - m.allowance_bytes);
    json meter = {{"term", m.period},
                  {"used_bytes", m.used_bytes},
                  {"included_bytes", m.allowance_bytes},
                  {"over_bytes", over},
                  {"billed_gb", m.billed_gb},
                  {"owed_gb", m.owed_gb},
                  {"samples", m.samples},
                  {"last_sample_at", Time(m.last_sample_at)}};
    if (r != nullptr && m.period == r->period) current = meter;
    meters.push_back(std::move(meter));
  }
  if (current.is_null() && r != nullptr) {
    current = {{"term", r->period},
               {"used_bytes", 0},
               {"included_bytes", storage.EgressAllowanceBytes(r->term)},
               {"over_bytes", 0},
               {"billed_gb", 0},
               {"owed_gb", 0},
               {"samples", 0},
               {"last_sample_at", nullptr}};
  }
  json volumes = json::array();
  for (const auto& v : storage.VolumesOfRental(rental_id)) {
    volumes.push_back({{"id", v.id},
                       {"name", v.name.empty() ? json(nullptr) : json(v.name)},
                       {"size_tb", v.size_tb},
                       {"access", v.bill.state == StorageState::kActive ? "read_write"
                                                                        : "read_only"}});
  }
  const std::int64_t per_gb = storage.config().egress_micros_per_tb / rentals::kGbPerTb;
  return {{"extra_nvme_tb", r ? r->extra_nvme_gb / rentals::kGbPerTb : 0},
          {"extra_nvme_free_tb_on_node",
           r ? state.rentals->fleet.ExtraNvmeFreeGb(r->node_id) / rentals::kGbPerTb : 0},
          {"egress",
           {{"current", current},
            {"terms", meters},
            {"price_per_gb", Usd(per_gb)},
            {"formula", "20 TB per 30-day term included (a week: 20 x 7/30 TB); beyond it each "
                        "whole GB (rounded up) costs " +
                            Usd(per_gb) + " USD, charged once as samples arrive"}}},
          {"volumes", volumes},
          {"as_of", FormatTimestamp(now)}};
}

void RegisterStorageRoutes(Router& router, ApiContext& api) {
  using engine::kRoleAdmin;
  using engine::kRoleCustomer;

  router.Add("GET", "/v1/storage", [&api](const Request& r, Responder respond) {
    RunAnonymous(api, r, std::move(respond), false, [](Txn& txn) -> Result<Reply> {
      const auto& c = Store(txn).config();
      json regions = json::array();
      for (const auto& region : c.regions) {
        const bool ceph = Store(txn).FindCephRegion(region) != nullptr;
        regions.push_back({{"region", region},
                           {"free_tb",
                            ceph ? json(nullptr) : json(Store(txn).RegionFreeTb(region))},
                           {"backend", ceph ? "ceph" : "none (demo/billing only)"}});
      }
      const std::int64_t nvme = Fleet(txn).config().extra_nvme_micros_per_tb_month;
      return Reply{
          200,
          {{"prices",
            {{"extra_nvme_per_tb_month", Usd(nvme)},
             {"extra_nvme_per_tb_week", Usd(Fleet(txn).ExtraNvmeMicros(1, rentals::Term::kWeek))},
             {"volume_per_tb_month", Usd(c.volume_micros_per_tb_month)},
             {"snapshot_per_tb_month", Usd(c.snapshot_micros_per_tb_month)},
             {"egress_per_tb", Usd(c.egress_micros_per_tb)},
             {"egress_included_tb_per_month", c.egress_included_bytes_per_month / rentals::kBytesPerTb},
             {"currency", "USD"},
             {"tax", "excluded"}}},
           {"rules",
            {{"extra_nvme", "whole TB, at most 30 TB per node, from the node's free NVMe; renews "
                            "and is released with the rental (a week pays 7/30 of the month)"},
             {"volumes", "whole TB 1..100, 3 copies on distinct storage hosts of the region, "
                         "attachable to several instances of the region, kept after every "
                         "release, grow but never shrink, billed daily in advance"},
             {"unpaid", "read-only at once, detached 72 h later, deleted 7 days after that; "
                        "paying before the deletion restores it"}}},
           {"regions", regions},
           {"as_of", FormatTimestamp(txn.now)}}};
    });
  });

  // ----- Volumes -----------------------------------------------------------------------------
  router.Add("POST", "/v1/volumes",
             Authenticated<rentals::VolumeSpec>(
                 api, kRoleCustomer, ParseVolume,
                 [&api](Txn& txn, const User& me,
                        const rentals::VolumeSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto v, engine::CreateVolume(txn, me.id, spec));
                   return Reply{201, VolumeJson(api, txn, v)};
                 }));
  router.Add("GET", "/v1/volumes?limit",
             Authenticated<std::size_t>(
                 api, kRoleCustomer, ListLimit,
                 [&api](Txn& txn, const User& me, const std::size_t& limit) -> Result<Reply> {
                   json list = json::array();
                   auto volumes = Store(txn).ListVolumes(me.id, limit);
                   for (const auto& v : volumes) list.push_back(VolumeJson(api, txn, v));
                   auto snapshots = Store(txn).ListSnapshots(me.id, rentals::kMaxSnapshotsPerCustomer);
                   return Reply{200,
                                {{"volumes", list},
                                 {"daily_cost", TotalsJson(txn, volumes, snapshots)},
                                 {"as_of", FormatTimestamp(txn.now)}}};
                 }));
  router.Add("GET", "/v1/volumes/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdParam(r, "volume"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   const rentals::Volume* v = Store(txn).FindVolume(id);
                   if (v == nullptr || v->customer_id != me.id) {
                     return Status::NotFound("no volume " + std::to_string(id) + " of yours");
                   }
                   json out = VolumeJson(api, txn, *v);
                   out["history"] = EventsJson(Store(txn).VolumeHistory(id));
                   out["charges"] = ChargesJson(Store(txn).ChargesOfVolume(id));
                   out["as_of"] = FormatTimestamp(txn.now);
                   return Reply{200, out};
                 }));
  router.Add("POST", "/v1/volumes/{id}/resize",
             Authenticated<IdAnd>(
                 api, kRoleCustomer,
                 [](const Request& r) -> Result<IdAnd> {
                   GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "volume", {"size_tb"}));
                   GPUHUB_RETURN_IF_ERROR(
                       RequiredInteger(in.body, "size_tb", 1, rentals::kMaxVolumeTb).status());
                   return in;
                 },
                 [&api](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(
                       auto v, engine::ResizeVolume(txn, me.id, in.id,
                                                    in.body["size_tb"].get<std::int64_t>()));
                   return Reply{200, VolumeJson(api, txn, v)};
                 }));
  for (bool attach : {true, false}) {
    router.Add(
        "POST", attach ? "/v1/volumes/{id}/attach" : "/v1/volumes/{id}/detach",
        Authenticated<IdAnd>(
            api, kRoleCustomer,
            [](const Request& r) -> Result<IdAnd> {
              GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "volume", {"rental_id"}));
              GPUHUB_RETURN_IF_ERROR(RequiredInteger(in.body, "rental_id", 1, INT64_MAX).status());
              return in;
            },
            [&api, attach](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
              const std::int64_t rental = in.body["rental_id"].get<std::int64_t>();
              GPUHUB_ASSIGN_OR_RETURN(auto v, attach
                                                  ? engine::AttachVolume(txn, me.id, in.id, rental)
                                                  : engine::DetachVolume(txn, me.id, in.id, rental));
              return Reply{200, VolumeJson(api, txn, v)};
            }));
  }
  router.Add("POST", "/v1/volumes/{id}/pay",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdOnly(r, "volume"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto v, engine::PayVolume(txn, me.id, id));
                   return Reply{200, VolumeJson(api, txn, v)};
                 }));
  router.Add("DELETE", "/v1/volumes/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdOnly(r, "volume"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto v, engine::DeleteVolume(txn, me.id, id));
                   return Reply{200, VolumeJson(api, txn, v)};
                 }));

  // ----- Snapshots ---------------------------------------------------------------------------
  router.Add("POST", "/v1/snapshots",
             Authenticated<SnapshotInput>(
                 api, kRoleCustomer, ParseSnapshot,
                 [&api](Txn& txn, const User& me, const SnapshotInput& in) -> Result<Reply> {
                   auto s = engine::CreateSnapshot(txn, me.id, in.spec);
                   if (!s.ok()) {
                     // The domain names its source "source_id"; the request named it.
                     Status st = s.status();
                     return st.field() == "source_id" ? st.WithField(in.source_field) : st;
                   }
                   return Reply{201, SnapshotJson(api, txn, *s)};
                 }));
  router.Add("GET", "/v1/snapshots?limit",
             Authenticated<std::size_t>(
                 api, kRoleCustomer, ListLimit,
                 [&api](Txn& txn, const User& me, const std::size_t& limit) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& s : Store(txn).ListSnapshots(me.id, limit)) {
                     list.push_back(SnapshotJson(api, txn, s));
                   }
                   return Reply{200, {{"snapshots", list}, {"as_of", FormatTimestamp(txn.now)}}};
                 }));
  router.Add("GET", "/v1/snapshots/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdParam(r, "snapshot"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   const rentals::DiskSnapshot* s = Store(txn).FindSnapshot(id);
                   if (s == nullptr || s->customer_id != me.id) {
                     return Status::NotFound("no snapshot " + std::to_string(id) + " of yours");
                   }
                   json out = SnapshotJson(api, txn, *s);
                   out["history"] = EventsJson(Store(txn).SnapshotHistory(id));
                   out["charges"] = ChargesJson(Store(txn).ChargesOfSnapshot(id));
                   out["as_of"] = FormatTimestamp(txn.now);
                   return Reply{200, out};
                 }));
  router.Add("POST", "/v1/snapshots/{id}/restore",
             Authenticated<IdAnd>(
                 api, kRoleCustomer,
                 [](const Request& r) -> Result<IdAnd> {
                   GPUHUB_ASSIGN_OR_RETURN(
                       IdAnd in, IdAndBody(r, "snapshot", {"region", "size_tb", "name", "currency"}));
                   if (in.body.contains("size_tb") && !in.body["size_tb"].is_null()) {
                     GPUHUB_RETURN_IF_ERROR(
                         RequiredInteger(in.body, "size_tb", 1, rentals::kMaxVolumeTb).status());
                   }
                   GPUHUB_RETURN_IF_ERROR(OptionalString(in.body, "region").status());
                   GPUHUB_RETURN_IF_ERROR(OptionalString(in.body, "name").status());
                   GPUHUB_RETURN_IF_ERROR(OptionalCurrency(in.body, Currency::kUsd).status());
                   return in;
                 },
                 [&api](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
                   rentals::RestoreSpec spec;
                   if (auto v = OptionalString(in.body, "region"); v.ok() && *v) spec.region = **v;
                   if (auto v = OptionalString(in.body, "name"); v.ok() && *v) spec.name = **v;
                   if (in.body.contains("size_tb") && !in.body["size_tb"].is_null()) {
                     spec.size_tb = in.body["size_tb"].get<std::int64_t>();
                   }
                   if (in.body.contains("currency") && !in.body["currency"].is_null()) {
                     spec.currency = *OptionalCurrency(in.body, Currency::kUsd);
                   }
                   GPUHUB_ASSIGN_OR_RETURN(auto v, engine::RestoreSnapshot(txn, me.id, in.id, spec));
                   return Reply{201, VolumeJson(api, txn, v)};
                 }));
  router.Add("POST", "/v1/snapshots/{id}/pay",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdOnly(r, "snapshot"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto s, engine::PaySnapshot(txn, me.id, id));
                   return Reply{200, SnapshotJson(api, txn, s)};
                 }));
  router.Add("DELETE", "/v1/snapshots/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdOnly(r, "snapshot"); },
                 [&api](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto s, engine::DeleteSnapshot(txn, me.id, id));
                   return Reply{200, SnapshotJson(api, txn, s)};
                 }));

  // ----- Extra NVMe on a running rental ------------------------------------------------------
  router.Add("POST", "/v1/rentals/{id}/extra-nvme",
             Authenticated<IdAnd>(
                 api, kRoleCustomer,
                 [](const Request& r) -> Result<IdAnd> {
                   GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "rental", {"add_tb"}));
                   GPUHUB_RETURN_IF_ERROR(
                       RequiredInteger(in.body, "add_tb", 1, rentals::kMaxExtraNvmeTbPerRental)
                           .status());
                   return in;
                 },
                 [&api](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
                   const std::int64_t before = static_cast<std::int64_t>(
                       Fleet(txn).ChargesOf(in.id).size());
                   GPUHUB_ASSIGN_OR_RETURN(
                       auto rental, engine::AddRentalExtraNvme(txn, me.id, in.id,
                                                               in.body["add_tb"].get<std::int64_t>()));
                   json charges = json::array();
                   auto all = Fleet(txn).ChargesOf(rental.id);
                   for (std::size_t i = static_cast<std::size_t>(before); i < all.size(); ++i) {
                     const auto& c = all[i];
                     charges.push_back({{"id", c.id},
                                        {"kind", rentals::ChargeKindName(c.kind)},
                                        {"term", c.period},
                                        {"amount", TaxJson(c.amount)},
                                        {"paid",
                                         {{"amount", Usd(c.paid_micros)},
                                          {"currency", CurrencyCode(c.paid_currency)}}},
                                        {"period_start", Time(c.period_start)},
                                        {"period_end", Time(c.period_end)}});
                   }
                   return Reply{200,
                                {{"rental_id", rental.id},
                                 {"extra_nvme_tb", rental.extra_nvme_gb / rentals::kGbPerTb},
                                 {"term_net", Usd(rental.price_micros + rental.extra_nvme_micros)},
                                 {"charges", charges},
                                 {"storage", RentalStorageJson(txn.state, rental.id, txn.now)}}};
                 }));

  // ----- Admins ------------------------------------------------------------------------------
  router.Add("POST", "/v1/admin/storage-hosts",
             Authenticated<rentals::StorageHostSpec>(
                 api, kRoleAdmin,
                 [](const Request& r) -> Result<rentals::StorageHostSpec> {
                   GPUHUB_ASSIGN_OR_RETURN(json body,
                                           ParseJsonObject(r, {"region", "capacity_tb", "hostname"}));
                   rentals::StorageHostSpec spec;
                   GPUHUB_ASSIGN_OR_RETURN(spec.region, RequiredString(body, "region"));
                   GPUHUB_ASSIGN_OR_RETURN(spec.capacity_tb, RequiredInteger(body, "capacity_tb", 1,
                                                                             rentals::kMaxStorageHostTb));
                   GPUHUB_ASSIGN_OR_RETURN(auto hostname, OptionalString(body, "hostname"));
                   if (hostname) spec.hostname = *hostname;
                   return spec;
                 },
                 [](Txn& txn, const User&, const rentals::StorageHostSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto h, engine::AddStorageHost(txn, spec));
                   return Reply{201, HostJson(txn, h)};
                 }));
  router.Add("GET", "/v1/admin/storage-hosts?region",
             Authenticated<std::string>(
                 api, kRoleAdmin,
                 [](const Request& r) -> Result<std::string> {
                   auto it = r.query.find("region");
                   if (it == r.query.end()) return std::string();
                   auto code = rentals::CanonicalRegion(it->second);
                   if (!code.ok()) return code.status().WithField("region");
                   return *code;
                 },
                 [](Txn& txn, const User&, const std::string& region) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& h : Store(txn).ListHosts(region)) list.push_back(HostJson(txn, h));
                   return Reply{200, {{"hosts", list}}};
                 }));
  for (auto [path, state] :
       {std::pair{"/v1/admin/storage-hosts/{id}/drain", rentals::StorageHostState::kDraining},
        std::pair{"/v1/admin/storage-hosts/{id}/undrain", rentals::StorageHostState::kActive}}) {
    router.Add("POST", path,
               Authenticated<std::int64_t>(
                   api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "storage host"); },
                   [state](Txn& txn, const User&, const std::int64_t& id) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(auto h, engine::SetStorageHostState(txn, id, state));
                     return Reply{200, HostJson(txn, h)};
                   }));
  }
  router.Add("POST", "/v1/admin/egress",
             Authenticated<std::vector<rentals::EgressSample>>(
                 api, kRoleAdmin, ParseEgress,
                 [](Txn& txn, const User&, const std::vector<rentals::EgressSample>& samples)
                     -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto results, engine::RecordEgressSamples(txn, samples));
                   json out = json::array();
                   std::int64_t recorded = 0;
                   for (std::size_t i = 0; i < results.size(); ++i) {
                     recorded += results[i].recorded ? 1 : 0;
                     out.push_back({{"rental_id", samples[i].rental_id},
                                    {"recorded", results[i].recorded},
                                    {"charged_gb", results[i].charged_gb},
                                    {"owed_gb", results[i].owed_gb}});
                   }
                   return Reply{200, {{"recorded", recorded}, {"results", out}}};
                 }));
  router.Add("GET", "/v1/admin/storage",
             Authenticated<Empty>(
                 api, kRoleAdmin, NoInput, [](Txn& txn, const User&, const Empty&) -> Result<Reply> {
                   Status invariants = Store(txn).CheckInvariants(Fleet(txn));
                   Status settlement = Store(txn).CheckSettlement(txn.state.wallets->ledger);
                   return Reply{200,
                                {{"invariants", invariants.ok() ? "ok" : invariants.ToString()},
                                 {"settlement", settlement.ok() ? "ok" : settlement.ToString()},
                                 {"volumes", Store(txn).volume_count()},
                                 {"snapshots", Store(txn).snapshot_count()},
                                 {"charges", Store(txn).charge_count()}}};
                 }));
}

}  // namespace gpuhub::http
