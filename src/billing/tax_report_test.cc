#include "billing/tax_report.h"

#include <gtest/gtest.h>

namespace gpuhub::billing {
namespace {

TimestampMicros At(const char* text) { return ParseTimestamp(text).value(); }

// A sealed document of one line of `net` taxed as `decision`, numbered `sequence`.
Document Doc(DocumentKind kind, std::int64_t sequence, const char* issued, std::int64_t net,
             const TaxDecision& decision) {
  Document d;
  d.kind = kind;
  d.year = 2026;
  d.sequence = sequence;
  d.number = FormatDocumentNumber({kind, 2026, sequence});
  d.issued_at = At(issued);
  d.supply_from = d.issued_at;
  d.supply_until = d.issued_at;
  d.lines.push_back(TaxedLine("GPU", 1, "term", net, decision).value());
  if (kind == DocumentKind::kCreditNote) {
    d.corrects = "2026-000001";
    d.reason = "refund";
  }
  EXPECT_TRUE(Seal(d).ok());
  return d;
}

// The December report: DE and FR rows, a reverse-charged row, a credit note that corrects an
// invoice of another month (it counts in December, negative), and what lies outside is left out.
TEST(TaxReport, SumsThePeriodsDocumentsByCountryRateAndTreatment) {
  const TaxDecision de{"DE", 190'000, false, ""}, fr{"FR", 200'000, false, ""};
  const TaxDecision rc{"FR", 0, true, ""};
  TaxReportBuilder b(At("2026-12-01T00:00:00Z"), At("2027-01-01T00:00:00Z"));
  b.Add(Doc(DocumentKind::kInvoice, 1, "2026-11-30T23:59:59Z", 1'000'000'000, de));  // November
  b.Add(Doc(DocumentKind::kInvoice, 3, "2026-12-20T10:00:00Z", 475'000'000, fr));
  b.Add(Doc(DocumentKind::kInvoice, 2, "2026-12-01T00:00:00Z", 475'000'000, de));
  b.Add(Doc(DocumentKind::kInvoice, 4, "2026-12-31T23:00:00Z", 100'000'000, rc));
  b.Add(Doc(DocumentKind::kCreditNote, 1, "2026-12-05T00:00:00Z", 100'000'000, de));
  b.Add(Doc(DocumentKind::kInvoice, 5, "2027-01-01T00:00:00Z", 5'000'000, de));  // January
  TaxReport r = b.Finish();
  ASSERT_EQ(r.rows.size(), 3u);
  EXPECT_EQ(r.rows[0], (TaxReportRow{"DE", 190'000, false, 1, 1, 375'000'000, 71'250'000}));
  EXPECT_EQ(r.rows[1], (TaxReportRow{"FR", 200'000, false, 1, 0, 475'000'000, 95'000'000}));
  EXPECT_EQ(r.rows[2], (TaxReportRow{"FR", 0, true, 1, 0, 100'000'000, 0}));
  EXPECT_EQ(r.invoices, 3);
  EXPECT_EQ(r.credit_notes, 1);
  EXPECT_EQ(r.net_micros, 950'000'000);
  EXPECT_EQ(r.tax_micros, 166'250'000);
  EXPECT_EQ(r.first_number, "2026-000002");
  EXPECT_EQ(r.last_number, "2026-000004");
  EXPECT_EQ(r.first_credit_note, "CN-2026-000001");
  EXPECT_EQ(r.last_credit_note, "CN-2026-000001");

  TaxReport empty = TaxReportBuilder(At("2025-01-01T00:00:00Z"), At("2025-02-01T00:00:00Z")).Finish();
  EXPECT_TRUE(empty.rows.empty());
  EXPECT_EQ(empty.first_number, "");
}

}  // namespace
}  // namespace gpuhub::billing
