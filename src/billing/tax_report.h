// The tax report of a period: what the documents issued in it charged and gave back, by country,
// rate and treatment. This is what a VAT return is filled from (the EU's OSS return asks for the
// net and the VAT per member state and rate each quarter; a reverse-charged row is the EC sales
// list's). Pure: the engine hands it the stored documents.
//
// Rules
// - A document counts in the period of its issue date (UTC), [from, until).
// - Invoice lines add, credit-note lines subtract (a credit note issued in the period corrects
//   that period, whatever the invoice's date): a row's net or tax may be negative.
// - Rows are sorted by country, then reverse charge, then rate; the totals are the sums of the
//   rows; nothing is rounded (the lines were, once each).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "billing/document.h"
#include "core/clock.h"

namespace gpuhub::billing {

struct TaxReportRow {
  std::string country;  // "" for lines no rate applied to
  std::int64_t rate_ppm = 0;
  bool reverse_charge = false;
  std::int64_t invoices = 0;      // documents with a line in this row
  std::int64_t credit_notes = 0;
  std::int64_t net_micros = 0;    // invoiced - credited
  std::int64_t tax_micros = 0;
  friend bool operator==(const TaxReportRow&, const TaxReportRow&) = default;
};

struct TaxReport {
  TimestampMicros from = 0;
  TimestampMicros until = 0;
  std::vector<TaxReportRow> rows;
  std::int64_t invoices = 0;
  std::int64_t credit_notes = 0;
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  std::string first_number;  // of each kind, the first and last number in the period ("" none)
  std::string last_number;
  std::string first_credit_note;
  std::string last_credit_note;
};

// Collects documents (any order) into the report of [from, until).
class TaxReportBuilder {
 public:
  TaxReportBuilder(TimestampMicros from, TimestampMicros until) : from_(from), until_(until) {}
  // Documents issued outside the period are ignored.
  void Add(const Document& doc);
  TaxReport Finish() const;

 private:
  using Key = std::tuple<std::string, bool, std::int64_t>;  // country, reverse charge, rate
  TimestampMicros from_, until_;
  std::map<Key, TaxReportRow> rows_;
  std::int64_t invoices_ = 0, credit_notes_ = 0;
  std::map<DocumentKind, std::pair<DocumentNumber, DocumentNumber>> range_;
};

}  // namespace gpuhub::billing
