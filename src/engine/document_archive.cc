#include "engine/document_archive.h"

#include <algorithm>
#include <map>

#include "engine/limits.h"

namespace gpuhub::engine {

using billing::Document;
using store::Condition;

namespace {

const std::vector<std::string>& DocumentColumns() {
  static const std::vector<std::string> kColumns = {"id",
                                                    "kind",
                                                    "number",
                                                    "year",
                                                    "sequence",
                                                    "user_id",
                                                    "source",
                                                    "title",
                                                    "issued_at_us",
                                                    "supply_from_us",
                                                    "supply_until_us",
                                                    "currency",
                                                    "seller_name",
                                                    "seller_address",
                                                    "seller_country",
                                                    "seller_vat_id",
                                                    "buyer_name",
                                                    "buyer_address",
                                                    "buyer_country",
                                                    "buyer_vat_id",
                                                    "net_micros",
                                                    "tax_micros",
                                                    "gross_micros",
                                                    "reverse_charge",
                                                    "tax_note",
                                                    "evidence_country",
                                                    "evidence_address",
                                                    "evidence_ip_country",
                                                    "evidence_at_us",
                                                    "corrects",
                                                    "reason"};
  return kColumns;
}

const std::vector<std::string>& LineColumns() {
  static const std::vector<std::string> kColumns = {
      "document_id",     "line",        "description", "quantity", "unit",
      "unit_net_micros", "net_micros",  "tax_country", "rate_ppm", "reverse_charge",
      "tax_micros",      "gross_micros"};
  return kColumns;
}

store::Select Documents(std::vector<Condition> where, std::string order_by = "id",
                        std::size_t limit = 0) {
  return {"tax_documents", DocumentColumns(), std::move(where), {}, std::move(order_by), limit};
}

}  // namespace

store::Select DocumentByNumberSelect(std::string_view number, std::int64_t through) {
  return Documents(
      {{"number", Condition::Op::kEq, std::string(number)}, {"id", Condition::Op::kLe, through}},
      "", 1);
}

store::Select DocumentBySourceSelect(std::string_view source, std::int64_t through) {
  return Documents(
      {{"source", Condition::Op::kEq, std::string(source)}, {"id", Condition::Op::kLe, through}},
      "", 1);
}

store::Select UserDocumentsSelect(std::int64_t user_id, std::int64_t before_id, std::size_t limit) {
  return Documents(
      {{"user_id", Condition::Op::kEq, user_id}, {"id", Condition::Op::kLt, before_id}}, "id DESC",
      limit);
}

store::Select CreditNotesOfSelect(std::string_view invoice_number, std::int64_t through) {
  // `kind` names the partial index's condition, so both planners may use it.
  return Documents({{"corrects", Condition::Op::kEq, std::string(invoice_number)},
                    {"kind", Condition::Op::kEq,
                     std::string(billing::DocumentKindName(billing::DocumentKind::kCreditNote))},
                    {"id", Condition::Op::kLe, through}},
                   "");  // any order: what they gave back is a sum
}

store::Select DocumentsIssuedSelect(TimestampMicros from, TimestampMicros until,
                                    std::int64_t through) {
  return {"tax_documents",
          {"min(id)", "max(id)"},
          {{"issued_at_us", Condition::Op::kGe, from},
           {"issued_at_us", Condition::Op::kLt, until},
           {"id", Condition::Op::kLe, through}},
          {},
          "",
          0};
}

store::Select DocumentRangeSelect(std::int64_t first_id, std::int64_t last_id) {
  return Documents({{"id", Condition::Op::kGe, first_id}, {"id", Condition::Op::kLe, last_id}});
}

store::Select LineRangeSelect(std::int64_t first_id, std::int64_t last_id) {
  return {
      "tax_document_lines",
      LineColumns(),
      {{"document_id", Condition::Op::kGe, first_id}, {"document_id", Condition::Op::kLe, last_id}},
      {},
      "document_id, line",
      0};
}

store::Select DocumentsAfterSelect(std::int64_t after_id) {
  return Documents({{"id", Condition::Op::kGt, after_id}});
}

store::Select LinesAfterSelect(std::int64_t after_id) {
  return {"tax_document_lines",
          LineColumns(),
          {{"document_id", Condition::Op::kGt, after_id}},
          {},
          "document_id, line",
          0};
}

store::Select LineCountsAfterSelect(std::int64_t after_id) {
  return {"tax_document_lines", {"document_id", "count(*)"},
          {{"document_id", Condition::Op::kGt, after_id}}, {"document_id"}, "document_id", 0};
}

store::Select SeriesSelect() {
  return {"tax_documents",
          {"kind", "year", "count(*)", "max(sequence)", "min(sequence)"},
          {},
          {"kind", "year"},
          "",
          0};
}

store::Select LastDocumentIdSelect() { return {"tax_documents", {"max(id)"}, {}, {}, "", 0}; }

void WriteDocumentRows(store::WriteBatch& writes, const Document& d) {
  writes.Insert("tax_documents",
                    {{"id", d.id},
                     {"kind", std::string(billing::DocumentKindName(d.kind))},
                     {"number", d.number},
                     {"year", d.year},
                     {"sequence", d.sequence},
                     {"user_id", d.user_id},
                     {"source", d.source},
                     {"title", d.title},
                     {"issued_at_us", d.issued_at},
                     {"supply_from_us", d.supply_from},
                     {"supply_until_us", d.supply_until},
                     {"currency", std::string(CurrencyCode(d.currency))},
                     {"seller_name", d.seller.name},
                     {"seller_address", d.seller.address},
                     {"seller_country", d.seller.country},
                     {"seller_vat_id", d.seller.vat_id},
                     {"buyer_name", d.buyer.name},
                     {"buyer_address", d.buyer.address},
                     {"buyer_country", d.buyer.country},
                     {"buyer_vat_id", d.buyer.vat_id},
                     {"net_micros", d.net_micros},
                     {"tax_micros", d.tax_micros},
                     {"gross_micros", d.gross_micros},
                     {"reverse_charge", std::int64_t{d.reverse_charge}},
                     {"tax_note", d.tax_note},
                     {"evidence_country", d.evidence.billing_country},
                     {"evidence_address", d.evidence.ip_address},
                     {"evidence_ip_country", d.evidence.ip_country},
                     {"evidence_at_us", d.evidence.at},
                     {"corrects", d.corrects},
                     {"reason", d.reason}});
  for (std::size_t i = 0; i < d.lines.size(); ++i) {
    const billing::Line& l = d.lines[i];
    writes.Insert("tax_document_lines", {{"document_id", d.id},
                                             {"line", static_cast<std::int64_t>(i + 1)},
                                             {"description", l.description},
                                             {"quantity", l.quantity},
                                             {"unit", l.unit},
                                             {"unit_net_micros", l.unit_net_micros},
                                             {"net_micros", l.net_micros},
                                             {"tax_country", l.tax_country},
                                             {"rate_ppm", l.rate_ppm},
                                             {"reverse_charge", std::int64_t{l.reverse_charge}},
                                             {"tax_micros", l.tax_micros},
                                             {"gross_micros", l.gross_micros}});
  }
}

Result<Document> DocumentFromRow(const store::Row& row) {
  Document d;
  GPUHUB_ASSIGN_OR_RETURN(d.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(d.kind, row.Parsed(1, billing::ParseDocumentKind));
  GPUHUB_ASSIGN_OR_RETURN(d.number, row.Text(2));
  GPUHUB_ASSIGN_OR_RETURN(d.year, row.Int(3));
  GPUHUB_ASSIGN_OR_RETURN(d.sequence, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(d.user_id, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(d.source, row.Text(6));
  GPUHUB_ASSIGN_OR_RETURN(d.title, row.Text(7));
  GPUHUB_ASSIGN_OR_RETURN(d.issued_at, row.Int(8));
  GPUHUB_ASSIGN_OR_RETURN(d.supply_from, row.Int(9));
  GPUHUB_ASSIGN_OR_RETURN(d.supply_until, row.Int(10));
  GPUHUB_ASSIGN_OR_RETURN(d.currency, row.Parsed(11, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(d.seller.name, row.Text(12));
  GPUHUB_ASSIGN_OR_RETURN(d.seller.address, row.Text(13));
  GPUHUB_ASSIGN_OR_RETURN(d.seller.country, row.Text(14));
  GPUHUB_ASSIGN_OR_RETURN(d.seller.vat_id, row.Text(15));
  GPUHUB_ASSIGN_OR_RETURN(d.buyer.name, row.Text(16));
  GPUHUB_ASSIGN_OR_RETURN(d.buyer.address, row.Text(17));
  GPUHUB_ASSIGN_OR_RETURN(d.buyer.country, row.Text(18));
  GPUHUB_ASSIGN_OR_RETURN(d.buyer.vat_id, row.Text(19));
  GPUHUB_ASSIGN_OR_RETURN(d.net_micros, row.Int(20));
  GPUHUB_ASSIGN_OR_RETURN(d.tax_micros, row.Int(21));
  GPUHUB_ASSIGN_OR_RETURN(d.gross_micros, row.Int(22));
  GPUHUB_ASSIGN_OR_RETURN(d.reverse_charge, row.IntAs<bool>(23));
  GPUHUB_ASSIGN_OR_RETURN(d.tax_note, row.Text(24));
  GPUHUB_ASSIGN_OR_RETURN(d.evidence.billing_country, row.Text(25));
  GPUHUB_ASSIGN_OR_RETURN(d.evidence.ip_address, row.Text(26));
  GPUHUB_ASSIGN_OR_RETURN(d.evidence.ip_country, row.Text(27));
  GPUHUB_ASSIGN_OR_RETURN(d.evidence.at, row.Int(28));
  GPUHUB_ASSIGN_OR_RETURN(d.corrects, row.Text(29));
  GPUHUB_ASSIGN_OR_RETURN(d.reason, row.Text(30));
  return d;
}

Result<billing::Line> LineFromRow(const store::Row& row) {
  billing::Line l;
  GPUHUB_ASSIGN_OR_RETURN(l.description, row.Text(2));
  GPUHUB_ASSIGN_OR_RETURN(l.quantity, row.Int(3));
  GPUHUB_ASSIGN_OR_RETURN(l.unit, row.Text(4));
  GPUHUB_ASSIGN_OR_RETURN(l.unit_net_micros, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(l.net_micros, row.Int(6));
  GPUHUB_ASSIGN_OR_RETURN(l.tax_country, row.Text(7));
  GPUHUB_ASSIGN_OR_RETURN(l.rate_ppm, row.Int(8));
  GPUHUB_ASSIGN_OR_RETURN(l.reverse_charge, row.IntAs<bool>(9));
  GPUHUB_ASSIGN_OR_RETURN(l.tax_micros, row.Int(10));
  GPUHUB_ASSIGN_OR_RETURN(l.gross_micros, row.Int(11));
  return l;
}

DocumentArchive::DocumentArchive(store::Store& store)
    : query_([&store](const store::Select& select,
                      const std::function<Status(const store::Row&)>& fn) {
        return store.Query(select, fn);
      }) {}

DocumentArchive::DocumentArchive(store::ReadPool& pool)
    : query_([&pool](const store::Select& select,
                     const std::function<Status(const store::Row&)>& fn) {
        return pool.Query(select, fn);
      }) {}

Result<std::int64_t> DocumentArchive::LastId() const {
  auto lock = LockStore();
  std::int64_t last = 0;
  GPUHUB_RETURN_IF_ERROR(query_(LastDocumentIdSelect(), [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(last, row.Int(0));
    return Status::Ok();
  }));
  return last;
}

Result<std::optional<Document>> DocumentArchive::One(const store::Select& select) const {
  auto lock = LockStore();
  std::optional<Document> found;
  GPUHUB_RETURN_IF_ERROR(query_(select, [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(found, DocumentFromRow(row));
    return Status::Ok();
  }));
  if (!found) return found;
  GPUHUB_RETURN_IF_ERROR(
      query_(LineRangeSelect(found->id, found->id), [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(billing::Line line, LineFromRow(row));
        found->lines.push_back(std::move(line));
        return Status::Ok();
      }));
  return found;
}

Result<std::optional<Document>> DocumentArchive::ByNumber(std::string_view number,
                                                          std::int64_t through) const {
  return One(DocumentByNumberSelect(number, through));
}

Result<std::optional<Document>> DocumentArchive::BySource(std::string_view source,
                                                          std::int64_t through) const {
  return One(DocumentBySourceSelect(source, through));
}

Result<std::vector<Document>> DocumentArchive::UserPage(std::int64_t user_id,
                                                        std::int64_t before_id,
                                                        std::size_t limit) const {
  std::vector<Document> page;
  if (limit == 0) return page;
  auto lock = LockStore();
  GPUHUB_RETURN_IF_ERROR(query_(UserDocumentsSelect(user_id, before_id, limit),
                                      [&](const store::Row& row) -> Status {
                                        GPUHUB_ASSIGN_OR_RETURN(Document d, DocumentFromRow(row));
                                        page.push_back(std::move(d));
                                        return Status::Ok();
                                      }));
  return page;
}

Result<std::vector<Document>> DocumentArchive::CreditNotesOf(std::string_view invoice_number,
                                                             std::int64_t through) const {
  std::vector<Document> notes;
  auto lock = LockStore();
  GPUHUB_RETURN_IF_ERROR(query_(CreditNotesOfSelect(invoice_number, through),
                                      [&](const store::Row& row) -> Status {
                                        GPUHUB_ASSIGN_OR_RETURN(Document d, DocumentFromRow(row));
                                        notes.push_back(std::move(d));
                                        return Status::Ok();
                                      }));
  return notes;
}

Status DocumentArchive::ScanRange(std::int64_t first, std::int64_t last,
                                  const std::function<bool(const Document&)>& keep,
                                  const std::function<Status(const Document&)>& fn) const {
  for (std::int64_t lo = first; lo <= last; lo += kDocumentArchiveChunk) {
    const std::int64_t hi = std::min(last, lo + kDocumentArchiveChunk - 1);
    std::map<std::int64_t, Document> chunk;
    {
      auto lock = LockStore();
      GPUHUB_RETURN_IF_ERROR(
          query_(DocumentRangeSelect(lo, hi), [&](const store::Row& row) -> Status {
            GPUHUB_ASSIGN_OR_RETURN(Document d, DocumentFromRow(row));
            if (keep(d)) chunk.emplace(d.id, std::move(d));
            return Status::Ok();
          }));
      if (chunk.empty()) continue;
      GPUHUB_RETURN_IF_ERROR(
          query_(LineRangeSelect(lo, hi), [&](const store::Row& row) -> Status {
            GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, row.Int(0));
            auto it = chunk.find(id);
            if (it == chunk.end()) return Status::Ok();  // a document `keep` left out
            GPUHUB_ASSIGN_OR_RETURN(billing::Line line, LineFromRow(row));
            it->second.lines.push_back(std::move(line));
            return Status::Ok();
          }));
    }
    for (const auto& [id, d] : chunk) GPUHUB_RETURN_IF_ERROR(fn(d));
  }
  return Status::Ok();
}

Status DocumentArchive::ScanIssued(TimestampMicros from, TimestampMicros until,
                                   std::int64_t through,
                                   const std::function<Status(const Document&)>& fn) const {
  std::int64_t first = 0, last = 0;
  {
    auto lock = LockStore();
    GPUHUB_RETURN_IF_ERROR(query_(DocumentsIssuedSelect(from, until, through),
                                        [&](const store::Row& row) -> Status {
                                          GPUHUB_ASSIGN_OR_RETURN(first, row.Int(0));
                                          GPUHUB_ASSIGN_OR_RETURN(last, row.Int(1));
                                          return Status::Ok();
                                        }));
  }
  if (first == 0) return Status::Ok();  // none in the period
  return ScanRange(
      first, last, [&](const Document& d) { return d.issued_at >= from && d.issued_at < until; },
      fn);
}

Status DocumentArchive::ScanAll(std::int64_t through,
                                const std::function<Status(const Document&)>& fn) const {
  return ScanRange(
      1, through, [](const Document&) { return true; }, fn);
}

}  // namespace gpuhub::engine
