#include "billing/tax_report.h"

#include <set>

namespace gpuhub::billing {

void TaxReportBuilder::Add(const Document& doc) {
  if (doc.issued_at < from_ || doc.issued_at >= until_) return;
  const bool credit = doc.kind == DocumentKind::kCreditNote;
  (credit ? credit_notes_ : invoices_) += 1;
  std::set<Key> touched;
  for (const Line& l : doc.lines) {
    Key key{l.tax_country, l.reverse_charge, l.rate_ppm};
    TaxReportRow& row = rows_[key];
    row.country = l.tax_country;
    row.reverse_charge = l.reverse_charge;
    row.rate_ppm = l.rate_ppm;
    row.net_micros += credit ? -l.net_micros : l.net_micros;
    row.tax_micros += credit ? -l.tax_micros : l.tax_micros;
    if (touched.insert(key).second) (credit ? row.credit_notes : row.invoices) += 1;
  }
  DocumentNumber n{doc.kind, doc.year, doc.sequence};
  auto [it, fresh] = range_.try_emplace(doc.kind, n, n);
  if (!fresh) {
    if (n < it->second.first) it->second.first = n;
    if (it->second.second < n) it->second.second = n;
  }
}

TaxReport TaxReportBuilder::Finish() const {
  TaxReport r;
  r.from = from_;
  r.until = until_;
  r.invoices = invoices_;
  r.credit_notes = credit_notes_;
  for (const auto& [key, row] : rows_) {
    r.rows.push_back(row);
    r.net_micros += row.net_micros;
    r.tax_micros += row.tax_micros;
  }
  if (auto it = range_.find(DocumentKind::kInvoice); it != range_.end()) {
    r.first_number = FormatDocumentNumber(it->second.first);
    r.last_number = FormatDocumentNumber(it->second.second);
  }
  if (auto it = range_.find(DocumentKind::kCreditNote); it != range_.end()) {
    r.first_credit_note = FormatDocumentNumber(it->second.first);
    r.last_credit_note = FormatDocumentNumber(it->second.second);
  }
  return r;
}

}  // namespace gpuhub::billing
