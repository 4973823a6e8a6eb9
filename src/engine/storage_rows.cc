#include "engine/storage_rows.h"

#include <algorithm>
#include <string_view>

#include "core/strings.h"
#include "engine/rentals_rows.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using namespace rentals;

std::string Code(Currency c) { return std::string(CurrencyCode(c)); }

template <typename Id>
std::string IdList(const std::vector<Id>& ids) {
  std::string out;
  for (Id id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

Result<std::vector<std::int64_t>> ParseIds(const std::string& text) {
  std::vector<std::int64_t> out;
  if (text.empty()) return out;
  for (const auto& part : Split(text, ',')) {
    std::int64_t id = 0;
    for (char c : part) {
      if (c < '0' || c > '9' || id > (INT64_MAX - 9) / 10) {
        return Status::Internal("malformed id list '" + text.substr(0, 64) + "'");
      }
      id = id * 10 + (c - '0');
    }
    if (part.empty()) return Status::Internal("malformed id list");
    out.push_back(id);
  }
  return out;
}

// The bill's columns, the same in storage_volumes and storage_snapshots.
void AddBill(store::WriteBatch::Columns& cols, const StorageBill& b) {
  cols.insert(cols.end(), {{"currency", Code(b.currency)},
                           {"price_micros_per_tb_month", b.price_micros_per_tb_month},
                           {"anchor_us", b.anchor},
                           {"days_paid", b.days_paid},
                           {"state", std::string(StorageStateName(b.state))},
                           {"unpaid_since_us", b.unpaid_since},
                           {"detach_at_us", b.detach_at},
                           {"delete_at_us", b.delete_at},
                           {"retry_at_us", b.retry_at},
                           {"deleted_at_us", b.deleted_at},
                           {"delete_reason", std::string(DeleteReasonName(b.delete_reason))}});
}

const std::vector<std::string> kBillColumns = {
    "currency",     "price_micros_per_tb_month", "anchor_us",     "days_paid",
    "state",        "unpaid_since_us",           "detach_at_us",  "delete_at_us",
    "retry_at_us",  "deleted_at_us",             "delete_reason"};

Status ReadBill(const store::Row& row, std::size_t first, StorageBill* b) {
  GPUHUB_ASSIGN_OR_RETURN(b->currency, row.Parsed(first, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(b->price_micros_per_tb_month, row.Int(first + 1));
  GPUHUB_ASSIGN_OR_RETURN(b->anchor, row.Int(first + 2));
  GPUHUB_ASSIGN_OR_RETURN(b->days_paid, row.Int(first + 3));
  GPUHUB_ASSIGN_OR_RETURN(b->state, row.Parsed(first + 4, ParseStorageState));
  GPUHUB_ASSIGN_OR_RETURN(b->unpaid_since, row.Int(first + 5));
  GPUHUB_ASSIGN_OR_RETURN(b->detach_at, row.Int(first + 6));
  GPUHUB_ASSIGN_OR_RETURN(b->delete_at, row.Int(first + 7));
  GPUHUB_ASSIGN_OR_RETURN(b->retry_at, row.Int(first + 8));
  GPUHUB_ASSIGN_OR_RETURN(b->deleted_at, row.Int(first + 9));
  GPUHUB_ASSIGN_OR_RETURN(b->delete_reason, row.Parsed(first + 10, ParseDeleteReason));
  return Status::Ok();
}

// "3:rw:<sealed>;4:r:<sealed>" (a sealed key is "v1:" + base64: no ';').
std::string ClientList(const std::vector<rentals::CephClient>& clients) {
  std::string out;
  for (const auto& c : clients) {
    if (!out.empty()) out += ';';
    out += std::to_string(c.rental_id) + (c.read_only ? ":r:" : ":rw:") + c.sealed_key;
  }
  return out;
}

Result<std::vector<rentals::CephClient>> ParseClients(std::string_view text) {
  std::vector<rentals::CephClient> out;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(';'), text.size());
    std::string_view part = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const std::size_t a = part.find(':');
    const std::size_t b = a == std::string_view::npos ? a : part.find(':', a + 1);
    if (b == std::string_view::npos) return Status::Internal("malformed Ceph client list");
    rentals::CephClient c;
    GPUHUB_ASSIGN_OR_RETURN(auto ids, ParseIds(std::string(part.substr(0, a))));
    if (ids.size() != 1) return Status::Internal("malformed Ceph client list");
    c.rental_id = ids[0];
    const std::string_view access = part.substr(a + 1, b - a - 1);
    if (access != "r" && access != "rw") return Status::Internal("malformed Ceph client access");
    c.read_only = access == "r";
    c.sealed_key = std::string(part.substr(b + 1));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<std::string> With(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace

void WriteStorageRows(Txn& txn, const Storage& storage, const StorageChanges& changes) {
  WriteTransfers(txn, changes.transfers);
  for (StorageHostId id : changes.hosts) {
    const StorageHost& h = *storage.FindHost(id);
    txn.writes.Upsert("storage_hosts", {{"id", h.id},
                                        {"region", h.region},
                                        {"hostname", h.hostname},
                                        {"capacity_tb", h.capacity_tb},
                                        {"state", std::string(StorageHostStateName(h.state))},
                                        {"created_at_us", h.created_at},
                                        {"updated_at_us", h.updated_at}});
  }
  for (VolumeId id : changes.volumes) {
    const Volume& v = *storage.FindVolume(id);
    store::WriteBatch::Columns cols = {{"id", v.id},
                                       {"customer_id", v.customer_id},
                                       {"name", v.name},
                                       {"region", v.region},
                                       {"size_tb", v.size_tb},
                                       {"hosts", IdList(v.hosts)},
                                       {"attachments", IdList(v.attachments)},
                                       {"restored_from", v.restored_from},
                                       {"grows", v.grows},
                                       {"created_at_us", v.created_at},
                                       {"updated_at_us", v.updated_at},
                                       {"events", v.events},
                                       {"provisioning", std::string(CephStateName(v.provisioning))},
                                       {"provision_error", v.provision_error},
                                       {"provision_deadline_us", v.provision_deadline},
                                       {"ceph_path", v.ceph_path},
                                       {"ceph_quota_tb", v.ceph_quota_tb},
                                       {"ceph_removed", std::int64_t{v.ceph_removed}},
                                       {"ceph_clients", ClientList(v.clients)}};
    AddBill(cols, v.bill);
    txn.writes.Upsert("storage_volumes", std::move(cols));
  }
  for (SnapshotId id : changes.snapshots) {
    const DiskSnapshot& s = *storage.FindSnapshot(id);
    store::WriteBatch::Columns cols = {{"id", s.id},
                                       {"customer_id", s.customer_id},
                                       {"name", s.name},
                                       {"region", s.region},
                                       {"size_tb", s.size_tb},
                                       {"source", std::string(SnapshotSourceName(s.source))},
                                       {"source_id", s.source_id},
                                       {"hosts", IdList(s.hosts)},
                                       {"created_at_us", s.created_at},
                                       {"updated_at_us", s.updated_at},
                                       {"events", s.events},
                                       {"ceph", std::int64_t{s.ceph}},
                                       {"ceph_taken", std::int64_t{s.ceph_taken}},
                                       {"ceph_removed", std::int64_t{s.ceph_removed}}};
    AddBill(cols, s.bill);
    txn.writes.Upsert("storage_snapshots", std::move(cols));
  }
  for (const auto& key : changes.meters) {
    for (const EgressMeter& m : storage.MetersOf(key.first)) {
      if (m.period != key.second) continue;
      txn.writes.Upsert("egress_meters",
                        {{"rental_id", m.rental_id},
                         {"period", m.period},
                         {"customer_id", m.customer_id},
                         {"currency", Code(m.currency)},
                         {"allowance_bytes", m.allowance_bytes},
                         {"used_bytes", m.used_bytes},
                         {"billed_gb", m.billed_gb},
                         {"owed_gb", m.owed_gb},
                         {"retry_at_us", m.retry_at},
                         {"samples", m.samples},
                         {"last_sample_at_us", m.last_sample_at},
                         {"updated_at_us", m.updated_at}},
                        2);
    }
  }
  for (const StorageEvent& e : changes.events) {
    txn.writes.Insert("storage_events", {{"item", std::string(e.snapshot ? "snapshot" : "volume")},
                                         {"subject_id", e.subject_id},
                                         {"sequence", e.sequence},
                                         {"at_us", e.at},
                                         {"kind", std::string(StorageEventKindName(e.kind))},
                                         {"detail", e.detail}});
  }
  for (const StorageCharge& c : changes.charges) {
    store::WriteBatch::Columns cols = {{"id", c.id},
                                       {"customer_id", c.customer_id},
                                       {"kind", std::string(StorageChargeKindName(c.kind))},
                                       {"subject_id", c.subject_id},
                                       {"size_tb", c.size_tb},
                                       {"first_day", c.first_day},
                                       {"last_day", c.last_day},
                                       {"growth", c.growth},
                                       {"egress_gb", c.egress_gb},
                                       {"egress_gb_from", c.egress_gb_from},
                                       {"period", c.period}};
    AddChargeMoney(cols, c);
    txn.writes.Insert("storage_charges", std::move(cols));
  }
}

Result<StorageRecords> ReadStorageRows(store::Store& store) {
  StorageRecords r;
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "storage_hosts",
      {"id", "region", "hostname", "capacity_tb", "state", "created_at_us", "updated_at_us"}, "id",
      [&](const store::Row& row) -> Status {
        StorageHost h;
        GPUHUB_ASSIGN_OR_RETURN(h.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(h.region, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(h.hostname, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(h.capacity_tb, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(h.state, row.Parsed(4, ParseStorageHostState));
        GPUHUB_ASSIGN_OR_RETURN(h.created_at, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(h.updated_at, row.Int(6));
        r.hosts.push_back(std::move(h));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "storage_volumes",
      With({"id", "customer_id", "name", "region", "size_tb", "hosts", "attachments",
            "restored_from", "grows", "created_at_us", "updated_at_us", "events", "provisioning",
            "provision_error", "provision_deadline_us", "ceph_path", "ceph_quota_tb",
            "ceph_removed", "ceph_clients"},
           kBillColumns),
      "id", [&](const store::Row& row) -> Status {
        Volume v;
        GPUHUB_ASSIGN_OR_RETURN(v.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(v.customer_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(v.name, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(v.region, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(v.size_tb, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(std::string hosts, row.Text(5));
        GPUHUB_ASSIGN_OR_RETURN(v.hosts, ParseIds(hosts));
        GPUHUB_ASSIGN_OR_RETURN(std::string attachments, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(v.attachments, ParseIds(attachments));
        GPUHUB_ASSIGN_OR_RETURN(v.restored_from, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(v.grows, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(v.created_at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(v.updated_at, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(v.events, row.Int(11));
        GPUHUB_ASSIGN_OR_RETURN(v.provisioning, row.Parsed(12, ParseCephState));
        GPUHUB_ASSIGN_OR_RETURN(v.provision_error, row.Text(13));
        GPUHUB_ASSIGN_OR_RETURN(v.provision_deadline, row.Int(14));
        GPUHUB_ASSIGN_OR_RETURN(v.ceph_path, row.Text(15));
        GPUHUB_ASSIGN_OR_RETURN(v.ceph_quota_tb, row.Int(16));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t removed, row.Int(17));
        v.ceph_removed = removed != 0;
        GPUHUB_ASSIGN_OR_RETURN(std::string clients, row.Text(18));
        GPUHUB_ASSIGN_OR_RETURN(v.clients, ParseClients(clients));
        GPUHUB_RETURN_IF_ERROR(ReadBill(row, 19, &v.bill));
        r.volumes.push_back(std::move(v));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "storage_snapshots",
      With({"id", "customer_id", "name", "region", "size_tb", "source", "source_id", "hosts",
            "created_at_us", "updated_at_us", "events", "ceph", "ceph_taken", "ceph_removed"},
           kBillColumns),
      "id", [&](const store::Row& row) -> Status {
        DiskSnapshot s;
        GPUHUB_ASSIGN_OR_RETURN(s.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(s.customer_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(s.name, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(s.region, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(s.size_tb, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(s.source, row.Parsed(5, ParseSnapshotSource));
        GPUHUB_ASSIGN_OR_RETURN(s.source_id, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(std::string hosts, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(s.hosts, ParseIds(hosts));
        GPUHUB_ASSIGN_OR_RETURN(s.created_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(s.updated_at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(s.events, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t ceph, row.Int(11));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t taken, row.Int(12));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t removed, row.Int(13));
        s.ceph = ceph != 0;
        s.ceph_taken = taken != 0;
        s.ceph_removed = removed != 0;
        GPUHUB_RETURN_IF_ERROR(ReadBill(row, 14, &s.bill));
        r.snapshots.push_back(std::move(s));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "egress_meters",
      {"rental_id", "period", "customer_id", "currency", "allowance_bytes", "used_bytes",
       "billed_gb", "owed_gb", "retry_at_us", "samples", "last_sample_at_us", "updated_at_us"},
      "rental_id, period", [&](const store::Row& row) -> Status {
        EgressMeter m;
        GPUHUB_ASSIGN_OR_RETURN(m.rental_id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(m.period, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(m.customer_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(m.currency, row.Parsed(3, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(m.allowance_bytes, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(m.used_bytes, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(m.billed_gb, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(m.owed_gb, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(m.retry_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(m.samples, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(m.last_sample_at, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(m.updated_at, row.Int(11));
        r.meters.push_back(std::move(m));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "storage_events", {"item", "subject_id", "sequence", "at_us", "kind", "detail"},
      "item, subject_id, sequence", [&](const store::Row& row) -> Status {
        StorageEvent e;
        GPUHUB_ASSIGN_OR_RETURN(std::string item, row.Text(0));
        if (item != "volume" && item != "snapshot") return Status::Internal("storage event item");
        e.snapshot = item == "snapshot";
        GPUHUB_ASSIGN_OR_RETURN(e.subject_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(e.sequence, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(e.at, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(e.kind, row.Parsed(4, ParseStorageEventKind));
        GPUHUB_ASSIGN_OR_RETURN(e.detail, row.Text(5));
        r.events.push_back(std::move(e));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "storage_charges",
      With({"id", "customer_id", "kind", "subject_id", "size_tb", "first_day", "last_day", "growth",
            "egress_gb", "egress_gb_from", "period"},
           ChargeMoneyColumns()),
      "id", [&](const store::Row& row) -> Status {
        StorageCharge c;
        GPUHUB_ASSIGN_OR_RETURN(c.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(c.customer_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(c.kind, row.Parsed(2, ParseStorageChargeKind));
        GPUHUB_ASSIGN_OR_RETURN(c.subject_id, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(c.size_tb, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(c.first_day, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(c.last_day, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(c.growth, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(c.egress_gb, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(c.egress_gb_from, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(c.period, row.Int(10));
        GPUHUB_RETURN_IF_ERROR(ReadChargeMoney(row, 11, &c));
        r.charges.push_back(std::move(c));
        return Status::Ok();
      }));
  return r;
}

}  // namespace gpuhub::engine
