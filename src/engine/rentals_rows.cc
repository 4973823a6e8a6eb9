#include "engine/rentals_rows.h"

#include <nlohmann/json.hpp>

#include "core/json_writer.h"
#include "core/strings.h"
#include "engine/alerts.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using json = nlohmann::ordered_json;
using namespace rentals;

std::string Code(Currency c) { return std::string(CurrencyCode(c)); }
std::string Dump(const json& j) { return DumpJson(j); }

std::string ConnectionJson(const std::vector<std::pair<std::string, std::string>>& fields) {
  json out = json::object();
  for (const auto& [k, v] : fields) out[k] = v;
  return Dump(out);
}

Result<std::vector<std::pair<std::string, std::string>>> ParseConnection(const std::string& text) {
  json in = json::parse(text, nullptr, false);
  if (in.is_discarded() || !in.is_object()) return Status::Internal("connection is not an object");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : in.items()) {
    if (!v.is_string()) return Status::Internal("connection values are strings");
    out.emplace_back(k, v.get<std::string>());
  }
  return out;
}

}  // namespace

std::string TaxLinesJson(const std::vector<TaxLine>& lines) {
  json out = json::array();
  for (const auto& l : lines) {
    out.push_back({{"name", l.name}, {"rate_ppm", l.rate_ppm}, {"amount_micros", l.amount_micros}});
  }
  return Dump(out);
}

Result<std::vector<TaxLine>> ParseTaxLines(const std::string& text) {
  json in = json::parse(text, nullptr, false);
  if (in.is_discarded() || !in.is_array()) return Status::Internal("tax lines are not a JSON array");
  std::vector<TaxLine> out;
  for (const auto& l : in) {
    if (!l.is_object() || !l.contains("name") || !l.contains("rate_ppm") ||
        !l.contains("amount_micros") || !l["name"].is_string() ||
        !l["rate_ppm"].is_number_integer() || !l["amount_micros"].is_number_integer()) {
      return Status::Internal("malformed tax line");
    }
    out.push_back({l["name"].get<std::string>(), l["rate_ppm"].get<std::int64_t>(),
                   l["amount_micros"].get<std::int64_t>()});
  }
  return out;
}

std::string JoinIds(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

void WriteRentalRows(Txn& txn, const Fleet& fleet, const Changes& changes) {
  WriteTransfers(txn, changes.transfers);
  for (NodeId id : changes.nodes) {
    const Node& n = *fleet.FindNode(id);
    NoteStockChanged(txn.state, n.gpu, n.region);  // a node added, drained or back (alerts.h)
    txn.writes.Upsert("rental_nodes", {{"id", n.id},
                                       {"gpu", n.gpu},
                                       {"region", n.region},
                                       {"cards", std::int64_t{n.cards}},
                                       {"hostname", n.hostname},
                                       {"nvme_included_gb_per_card", n.nvme_included_gb_per_card},
                                       {"nvme_extra_capacity_gb", n.nvme_extra_capacity_gb},
                                       {"state", std::string(NodeStateName(n.state))},
                                       {"created_at_us", n.created_at},
                                       {"updated_at_us", n.updated_at}});
  }
  for (RentalId id : changes.rentals) {
    const Rental& r = *fleet.FindRental(id);
    NoteStockChanged(txn.state, r.gpu, r.region);  // its cards taken or back in stock
    txn.writes.Upsert(
        "rentals",
        {{"id", r.id},
         {"customer_id", r.customer_id},
         {"gpu", r.gpu},
         {"count", std::int64_t{r.count}},
         {"region", r.region},
         {"node_id", r.node_id},
         {"card_mask", std::int64_t{r.card_mask}},
         {"term", std::string(TermName(r.term))},
         {"list_micros", r.list_micros},
         {"discount_ppm", r.discount_ppm},
         {"price_micros", r.price_micros},
         {"currency", Code(r.currency)},
         {"auto_renew", std::int64_t{r.auto_renew ? 1 : 0}},
         {"state", std::string(RentalStateName(r.state))},
         {"release_reason", std::string(ReleaseReasonName(r.release_reason))},
         {"period", r.period},
         {"next_paid", std::int64_t{r.next_paid ? 1 : 0}},
         {"term_start_us", r.term_start},
         {"term_end_us", r.term_end},
         {"created_at_us", r.created_at},
         {"updated_at_us", r.updated_at},
         {"released_at_us", r.released_at},
         {"auto_renew_attempted_at_us", r.auto_renew_attempted_at},
         {"auto_renew_failures", r.auto_renew_failures},
         {"renewal_invoiced_at_us", r.renewal_invoiced_at},
         {"extra_nvme_gb", r.extra_nvme_gb},
         {"extra_nvme_micros", r.extra_nvme_micros},
         {"nvme_addons", r.nvme_addons},
         {"events", r.events},
         {"instance_state", std::string(InstanceStateName(r.instance.state))},
         {"nvme_gb", r.instance.nvme_gb},
         {"provisioning_deadline_us", r.instance.provisioning_deadline},
         {"connection_json", ConnectionJson(r.instance.connection)},
         {"instance_error", r.instance.error},
         {"key_destroyed_at_us", r.instance.key_destroyed_at},
         {"wipe_due_at_us", r.instance.wipe_due_at},
         {"wiped_at_us", r.instance.wiped_at}});
  }
  for (const auto& key : changes.renewals) {
    const Renewal& r = *fleet.FindRenewal(key.first, key.second);
    txn.writes.Upsert("rental_renewals",
                      {{"rental_id", r.rental_id},
                       {"period", r.period},
                       {"customer_id", r.customer_id},
                       {"net_micros", r.amount.net_micros},
                       {"tax_micros", r.amount.tax_micros},
                       {"gross_micros", r.amount.gross_micros},
                       {"tax_lines_json", TaxLinesJson(r.amount.lines)},
                       {"status", std::string(RenewalStatusName(r.status))},
                       {"by_auto_renew", std::int64_t{r.by_auto_renew ? 1 : 0}},
                       {"issued_at_us", r.issued_at},
                       {"due_at_us", r.due_at},
                       {"paid_at_us", r.paid_at},
                       {"updated_at_us", r.updated_at},
                       {"paid_currency", Code(r.paid_currency)},
                       {"paid_micros", r.paid_micros},
                       {"charge_id", r.charge_id}},
                      2);
  }
  for (const Event& e : changes.events) {
    txn.writes.Insert("rental_events", {{"rental_id", e.rental_id},
                                        {"sequence", e.sequence},
                                        {"at_us", e.at},
                                        {"kind", std::string(EventKindName(e.kind))},
                                        {"detail", e.detail}});
  }
  for (const Charge& c : changes.charges) {
    store::WriteBatch::Columns cols = {{"id", c.id},
                                       {"rental_id", c.rental_id},
                                       {"customer_id", c.customer_id},
                                       {"period", c.period},
                                       {"kind", std::string(ChargeKindName(c.kind))},
                                       {"extra_nvme_gb", c.extra_nvme_gb},
                                       {"extra_nvme_micros", c.extra_nvme_micros},
                                       {"nvme_addon", c.nvme_addon},
                                       {"refund_of", c.refund_of}};
    AddChargeMoney(cols, c);
    txn.writes.Insert("rental_charges", std::move(cols));
  }
}

Result<Snapshot> ReadRentalRows(store::Store& store) {
  Snapshot s;
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_nodes",
      {"id", "gpu", "region", "cards", "hostname", "nvme_included_gb_per_card",
       "nvme_extra_capacity_gb", "state", "created_at_us", "updated_at_us"},
      "id", [&](const store::Row& row) -> Status {
        Node n;
        GPUHUB_ASSIGN_OR_RETURN(n.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(n.gpu, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(n.region, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(n.cards, row.IntAs<int>(3));
        GPUHUB_ASSIGN_OR_RETURN(n.hostname, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(n.nvme_included_gb_per_card, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(n.nvme_extra_capacity_gb, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(n.state, row.Parsed(7, ParseNodeState));
        GPUHUB_ASSIGN_OR_RETURN(n.created_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(n.updated_at, row.Int(9));
        s.nodes.push_back(std::move(n));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rentals",
      {"id", "customer_id", "gpu", "count", "region", "node_id", "card_mask", "term",
       "list_micros", "discount_ppm", "price_micros", "currency", "auto_renew", "state",
       "release_reason", "period", "next_paid", "term_start_us", "term_end_us", "created_at_us",
       "updated_at_us", "released_at_us", "auto_renew_attempted_at_us", "auto_renew_failures",
       "renewal_invoiced_at_us", "extra_nvme_gb", "events", "instance_state", "nvme_gb",
       "provisioning_deadline_us", "connection_json", "instance_error", "key_destroyed_at_us",
       "wipe_due_at_us", "wiped_at_us", "extra_nvme_micros", "nvme_addons"},
      "id", [&](const store::Row& row) -> Status {
        Rental r;
        GPUHUB_ASSIGN_OR_RETURN(r.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(r.customer_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(r.gpu, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(r.count, row.IntAs<int>(3));
        GPUHUB_ASSIGN_OR_RETURN(r.region, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(r.node_id, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(r.card_mask, row.IntAs<std::uint32_t>(6));
        GPUHUB_ASSIGN_OR_RETURN(r.term, row.Parsed(7, ParseTerm));
        GPUHUB_ASSIGN_OR_RETURN(r.list_micros, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(r.discount_ppm, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(r.price_micros, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(r.currency, row.Parsed(11, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(r.auto_renew, row.IntAs<bool>(12));
        GPUHUB_ASSIGN_OR_RETURN(r.state, row.Parsed(13, ParseRentalState));
        GPUHUB_ASSIGN_OR_RETURN(r.release_reason, row.Parsed(14, ParseReleaseReason));
        GPUHUB_ASSIGN_OR_RETURN(r.period, row.Int(15));
        GPUHUB_ASSIGN_OR_RETURN(r.next_paid, row.IntAs<bool>(16));
        GPUHUB_ASSIGN_OR_RETURN(r.term_start, row.Int(17));
        GPUHUB_ASSIGN_OR_RETURN(r.term_end, row.Int(18));
        GPUHUB_ASSIGN_OR_RETURN(r.created_at, row.Int(19));
        GPUHUB_ASSIGN_OR_RETURN(r.updated_at, row.Int(20));
        GPUHUB_ASSIGN_OR_RETURN(r.released_at, row.Int(21));
        GPUHUB_ASSIGN_OR_RETURN(r.auto_renew_attempted_at, row.Int(22));
        GPUHUB_ASSIGN_OR_RETURN(r.auto_renew_failures, row.Int(23));
        GPUHUB_ASSIGN_OR_RETURN(r.renewal_invoiced_at, row.Int(24));
        GPUHUB_ASSIGN_OR_RETURN(r.extra_nvme_gb, row.Int(25));
        GPUHUB_ASSIGN_OR_RETURN(r.events, row.Int(26));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.state, row.Parsed(27, ParseInstanceState));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.nvme_gb, row.Int(28));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.provisioning_deadline, row.Int(29));
        GPUHUB_ASSIGN_OR_RETURN(std::string connection, row.Text(30));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.connection, ParseConnection(connection));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.error, row.Text(31));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.key_destroyed_at, row.Int(32));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.wipe_due_at, row.Int(33));
        GPUHUB_ASSIGN_OR_RETURN(r.instance.wiped_at, row.Int(34));
        GPUHUB_ASSIGN_OR_RETURN(r.extra_nvme_micros, row.Int(35));
        GPUHUB_ASSIGN_OR_RETURN(r.nvme_addons, row.Int(36));
        s.rentals.push_back(std::move(r));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_renewals",
      {"rental_id", "period", "customer_id", "net_micros", "tax_micros", "gross_micros",
       "tax_lines_json", "status", "by_auto_renew", "issued_at_us", "due_at_us", "paid_at_us",
       "updated_at_us", "paid_currency", "paid_micros", "charge_id"},
      "rental_id, period", [&](const store::Row& row) -> Status {
        Renewal r;
        GPUHUB_ASSIGN_OR_RETURN(r.rental_id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(r.period, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(r.customer_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(r.amount.net_micros, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(r.amount.tax_micros, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(r.amount.gross_micros, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(std::string lines, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(r.amount.lines, ParseTaxLines(lines));
        GPUHUB_ASSIGN_OR_RETURN(r.status, row.Parsed(7, ParseRenewalStatus));
        GPUHUB_ASSIGN_OR_RETURN(r.by_auto_renew, row.IntAs<bool>(8));
        GPUHUB_ASSIGN_OR_RETURN(r.issued_at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(r.due_at, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(r.paid_at, row.Int(11));
        GPUHUB_ASSIGN_OR_RETURN(r.updated_at, row.Int(12));
        GPUHUB_ASSIGN_OR_RETURN(r.paid_currency, row.Parsed(13, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(r.paid_micros, row.Int(14));
        GPUHUB_ASSIGN_OR_RETURN(r.charge_id, row.Int(15));
        s.renewals.push_back(std::move(r));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_events", {"rental_id", "sequence", "at_us", "kind", "detail"}, "rental_id, sequence",
      [&](const store::Row& row) -> Status {
        Event e;
        GPUHUB_ASSIGN_OR_RETURN(e.rental_id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(e.sequence, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(e.at, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(e.kind, row.Parsed(3, ParseEventKind));
        GPUHUB_ASSIGN_OR_RETURN(e.detail, row.Text(4));
        s.events.push_back(std::move(e));
        return Status::Ok();
      }));
  std::vector<std::string> charge_columns = {"id",     "rental_id",     "customer_id",
                                             "period", "kind",          "extra_nvme_gb",
                                             "extra_nvme_micros", "nvme_addon", "refund_of"};
  charge_columns.insert(charge_columns.end(), ChargeMoneyColumns().begin(),
                        ChargeMoneyColumns().end());
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_charges", charge_columns, "id", [&](const store::Row& row) -> Status {
        Charge c;
        GPUHUB_ASSIGN_OR_RETURN(c.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(c.rental_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(c.customer_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(c.period, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(c.kind, row.Parsed(4, ParseChargeKind));
        GPUHUB_ASSIGN_OR_RETURN(c.extra_nvme_gb, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(c.extra_nvme_micros, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(c.nvme_addon, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(c.refund_of, row.Int(8));
        GPUHUB_RETURN_IF_ERROR(ReadChargeMoney(row, 9, &c));
        s.charges.push_back(std::move(c));
        return Status::Ok();
      }));
  return s;
}

}  // namespace gpuhub::engine
