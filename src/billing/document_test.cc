#include <gtest/gtest.h>

#include <random>

#include "billing/document.h"
#include "billing/limits.h"
#include "billing/profile.h"
#include "billing/statement.h"
#include "billing/tax_rates.h"

namespace gpuhub::billing {
namespace {

TimestampMicros At(const char* text) { return ParseTimestamp(text).value(); }

TEST(BillingProfile, NormalisesAndNamesTheFieldOfEveryMistake) {
  auto p = ValidateProfile({" de ", " Acme GmbH ", "de 123.456.789", "Hauptstr. 1\n10115 Berlin"});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->country, "DE");
  EXPECT_EQ(p->business_name, "Acme GmbH");
  EXPECT_EQ(p->vat_id, "DE123456789");
  EXPECT_EQ(p->address, "Hauptstr. 1\n10115 Berlin");
  EXPECT_TRUE(ValidateProfile({"us", "", "", ""}).ok());

  struct Case {
    ProfileInput in;
    const char* field;
  } cases[] = {
      {{"", "", "", ""}, "billing_country"},
      {{"XX", "", "", ""}, "billing_country"},
      {{"Germany", "", "", ""}, "billing_country"},
      {{"DE", "", "DE12345", ""}, "vat_id"},          // 5 digits, DE has 9
      {{"DE", "Acme", "FR12345678901", ""}, "vat_id"},  // another country's id
      {{"DE", "", "DE123456789", ""}, "business_name"},  // a VAT id needs the business
      {{"DE", std::string(kMaxBusinessNameBytes + 1, 'a'), "", ""}, "business_name"},
      {{"DE", "Acme\tGmbH", "", ""}, "business_name"},
      {{"DE", "", "", std::string(kMaxAddressBytes + 1, 'a')}, "address"},
      {{"DE", "", "", "1\n2\n3\n4\n5\n6\n7"}, "address"},
      {{"DE", "", "", "a\x01b"}, "address"},
  };
  for (const auto& c : cases) {
    auto r = ValidateProfile(c.in);
    ASSERT_FALSE(r.ok()) << c.in.country << "/" << c.in.vat_id;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field) << r.status().message();
  }
}

TEST(BillingProfile, KeepsOnlyACountryLikeCdnHeader) {
  EXPECT_EQ(CleanIpCountry("de"), "DE");
  EXPECT_EQ(CleanIpCountry(" XX "), "XX");
  EXPECT_EQ(CleanIpCountry("T1"), "T1");
  EXPECT_EQ(CleanIpCountry("DEU"), "");
  EXPECT_EQ(CleanIpCountry("<b"), "");
  EXPECT_EQ(CleanIpCountry(""), "");
  EXPECT_TRUE(EvidenceAgrees({"DE", "203.0.113.1", "DE", 1}));
  EXPECT_TRUE(EvidenceAgrees({"DE", "203.0.113.1", "", 1}));    // no CDN
  EXPECT_TRUE(EvidenceAgrees({"DE", "203.0.113.1", "XX", 1}));  // unknown to the CDN
  EXPECT_FALSE(EvidenceAgrees({"DE", "203.0.113.1", "US", 1}));
}

TEST(TaxedLine, TaxesOnceHalfEvenAndReverseChargesAtZero) {
  TaxDecision de{"DE", 190'000, false, ""};
  auto line = TaxedLine("GPU", 3, "term", 333'333'333, de);  // 999.999999 net
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(line->net_micros, 999'999'999);
  EXPECT_EQ(line->tax_micros, 190'000'000);  // 189.99999981 -> 190.000000
  EXPECT_EQ(line->gross_micros, 1'189'999'999);
  TaxDecision rc{"FR", 200'000, true, kReverseChargeNote};
  auto r = TaxedLine("GPU", 1, "term", 100'000'000, rc);
  EXPECT_EQ(r->tax_micros, 0);
  EXPECT_EQ(r->rate_ppm, 0);
  EXPECT_TRUE(r->reverse_charge);
  EXPECT_FALSE(TaxedLine("x", 0, "term", 1, de).ok());
  EXPECT_FALSE(TaxedLine("x", 2, "term", kMaxAmountMicros, de).ok());
}

Document TwoRateInvoice() {
  Document d;
  d.title = "t";
  d.issued_at = At("2026-12-01T00:00:00Z");
  d.supply_from = At("2026-11-01T00:00:00Z");
  d.supply_until = d.issued_at;
  d.lines.push_back(TaxedLine("a", 10, "lease-hour", 2'500'000, {"DE", 190'000, false, ""}).value());
  d.lines.push_back(TaxedLine("b", 5, "lease-hour", 1'000'000, {"DE", 210'000, false, ""}).value());
  d.lines.push_back(TaxedLine("c", 1, "item", 3'000'000, {"DE", 190'000, false, ""}).value());
  EXPECT_TRUE(Seal(d).ok());
  return d;
}

TEST(Document, SealAddsUpTheLinesAndGroupsTaxByRate) {
  Document d = TwoRateInvoice();
  EXPECT_EQ(d.net_micros, 25'000'000 + 5'000'000 + 3'000'000);
  EXPECT_EQ(d.tax_micros, 4'750'000 + 1'050'000 + 570'000);
  EXPECT_EQ(d.gross_micros, d.net_micros + d.tax_micros);
  auto groups = TaxByRates(d);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (TaxByRate{"DE", 190'000, false, 28'000'000, 5'320'000}));
  EXPECT_EQ(groups[1], (TaxByRate{"DE", 210'000, false, 5'000'000, 1'050'000}));
  EXPECT_EQ(d.tax_note, "VAT 19% (DE); VAT 21% (DE)");
  EXPECT_TRUE(CheckDocument(d).ok());

  Document broken = d;
  broken.lines[0].tax_micros += 1;
  EXPECT_FALSE(CheckDocument(broken).ok());  // gross != net + tax
  broken = d;
  broken.net_micros += 1;
  EXPECT_FALSE(CheckDocument(broken).ok());
  broken = d;
  broken.lines.clear();
  EXPECT_FALSE(Seal(broken).ok());
  broken = d;
  broken.kind = DocumentKind::kCreditNote;
  EXPECT_FALSE(CheckDocument(broken).ok());  // names nothing it corrects
}

TEST(DocumentNumber, FormatsParsesAndRefusesOtherSpellings) {
  EXPECT_EQ(FormatDocumentNumber({DocumentKind::kInvoice, 2026, 1}), "2026-000001");
  EXPECT_EQ(FormatDocumentNumber({DocumentKind::kCreditNote, 2027, 123456}), "CN-2027-123456");
  auto n = ParseDocumentNumber("CN-2027-123456");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, (DocumentNumber{DocumentKind::kCreditNote, 2027, 123456}));
  for (const char* bad : {"", "2026-1", "2026-0000001", "2026-000000", "2026_000001",
                          "cn-2026-000001", "XX-2026-000001", "2026-00000a", "../etc/passwd"}) {
    EXPECT_FALSE(ParseDocumentNumber(bad).ok()) << bad;
  }
}

TEST(NumberSeries, OneGaplessSeriesPerKindAndYear) {
  NumberSeries s;
  TimestampMicros dec31 = At("2026-12-31T23:59:59Z");
  TimestampMicros jan1 = At("2027-01-01T00:00:00Z");
  EXPECT_EQ(FormatDocumentNumber(s.Take(DocumentKind::kInvoice, dec31)), "2026-000001");
  EXPECT_EQ(FormatDocumentNumber(s.Take(DocumentKind::kInvoice, dec31)), "2026-000002");
  EXPECT_EQ(FormatDocumentNumber(s.Take(DocumentKind::kCreditNote, dec31)), "CN-2026-000001");
  EXPECT_EQ(FormatDocumentNumber(s.Take(DocumentKind::kInvoice, jan1)), "2027-000001");
  EXPECT_EQ(FormatDocumentNumber(s.Peek(DocumentKind::kInvoice, dec31).value()), "2026-000003");
  EXPECT_TRUE(s.CheckGapless().ok());

  NumberSeries restored;
  for (auto n : {DocumentNumber{DocumentKind::kInvoice, 2026, 2},
                 DocumentNumber{DocumentKind::kInvoice, 2026, 1}}) {
    restored.Observe(n);
  }
  EXPECT_TRUE(restored.CheckGapless().ok());
  EXPECT_EQ(restored.Peek(DocumentKind::kInvoice, dec31)->sequence, 3);
  restored.Observe({DocumentKind::kInvoice, 2026, 4});  // 3 is missing
  EXPECT_EQ(restored.CheckGapless().code(), StatusCode::kInternal);
}

TEST(CreditNote, InFullMirrorsTheLinesOnceAndPartialNeverOverCredits) {
  Document inv = TwoRateInvoice();
  inv.number = "2026-000007";
  auto full = BuildCreditNote(inv, {}, std::nullopt, "duplicate charge", inv.issued_at);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_EQ(full->kind, DocumentKind::kCreditNote);
  EXPECT_EQ(full->corrects, "2026-000007");
  EXPECT_EQ(full->lines, inv.lines);
  EXPECT_EQ(full->gross_micros, inv.gross_micros);
  EXPECT_EQ(full->source, "credit:2026-000007:1");
  // Several rates: no partial credit, and no second one.
  EXPECT_EQ(BuildCreditNote(inv, {}, 1'000'000, "x", 0).status().field(), "amount");
  Credited all{inv.net_micros, inv.tax_micros, inv.gross_micros, 1};
  EXPECT_EQ(BuildCreditNote(inv, all, std::nullopt, "x", 0).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(BuildCreditNote(inv, {}, std::nullopt, "  ", 0).status().field(), "reason");

  // One rate: partial credits add up to exactly the invoice, tax included, whatever rounding.
  Document one;
  one.title = "t";
  one.number = "2026-000008";
  one.lines.push_back(TaxedLine("a", 1, "term", 100'000'001, {"DE", 190'000, false, ""}).value());
  ASSERT_TRUE(Seal(one).ok());
  Credited c;
  for (std::int64_t part : {33'333'333, 33'333'333}) {
    auto note = BuildCreditNote(one, c, part, "goodwill", 0);
    ASSERT_TRUE(note.ok()) << note.status().ToString();
    c.Add(*note);
  }
  EXPECT_EQ(BuildCreditNote(one, c, one.net_micros, "too much", 0).status().field(), "amount");
  auto rest = BuildCreditNote(one, c, std::nullopt, "the rest", 0);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(c.net_micros + rest->net_micros, one.net_micros);
  EXPECT_EQ(c.tax_micros + rest->tax_micros, one.tax_micros);
  EXPECT_EQ(rest->source, "credit:2026-000008:3");
}

TEST(SpotStatement, AddsUpEveryHourPerLeaseAndTreatment) {
  Month nov = MonthOf(At("2026-11-17T05:00:00Z"));
  EXPECT_EQ(nov.start, At("2026-11-01T00:00:00Z"));
  EXPECT_EQ(nov.end, At("2026-12-01T00:00:00Z"));
  EXPECT_EQ(MonthKey(nov), "2026-11");
  EXPECT_EQ(MonthLabel(nov), "November 2026");

  // 10 hours of lease 4 at 19%, then 5 at 21% (an admin change), 3 of lease 2 reverse charged.
  std::vector<SpotUsage> rows;
  auto add = [&](std::int64_t lease, TimestampMicros at, TaxDecision tax) {
    SpotHour h{lease, "H100 SXM", 2, 2'500'000, at, 5'000'000, 0, tax};
    h.tax_micros = tax.reverse_charge ? 0 : TaxMicros(h.net_micros, tax.rate_ppm).value();
    for (auto& r : rows) {
      if (SameTreatment(r, h)) {
        ASSERT_TRUE(AddHour(r, h).ok());
        return;
      }
    }
    rows.push_back(UsageOf(h));
  };
  TimestampMicros t = At("2026-11-03T10:00:00Z");
  for (int i = 0; i < 10; ++i) add(4, t + i * kMicrosPerHour, {"DE", 190'000, false, ""});
  for (int i = 10; i < 15; ++i) add(4, t + i * kMicrosPerHour, {"DE", 210'000, false, ""});
  for (int i = 0; i < 3; ++i) add(2, t + i * kMicrosPerHour, {"DE", 0, true, ""});
  SpotHour other{4, "H100 SXM", 2, 2'500'000, At("2026-12-01T00:00:00Z"), 5'000'000, 950'000,
                 {"DE", 190'000, false, ""}};
  EXPECT_FALSE(AddHour(rows[0], other).ok());  // December is another statement

  auto doc = BuildSpotStatement(nov, rows, At("2026-12-01T00:00:00Z"));
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  ASSERT_EQ(doc->lines.size(), 3u);
  EXPECT_EQ(doc->lines[0].quantity, 3);  // lease 2 first
  EXPECT_TRUE(doc->lines[0].reverse_charge);
  EXPECT_EQ(doc->lines[1].quantity, 10);
  EXPECT_EQ(doc->lines[1].tax_micros, 9'500'000);
  EXPECT_EQ(doc->lines[2].quantity, 5);
  EXPECT_EQ(doc->lines[2].tax_micros, 5'250'000);
  EXPECT_EQ(doc->lines[1].description,
            "Spot lease 4: 2 x H100 SXM at 2.500 USD/GPU-hour, hours from 2026-11-03 10:00 to "
            "2026-11-03 20:00 UTC");
  EXPECT_EQ(doc->net_micros, 18 * 5'000'000);
  EXPECT_EQ(doc->tax_micros, 9'500'000 + 5'250'000);
  EXPECT_TRUE(doc->reverse_charge);
  EXPECT_NE(doc->tax_note.find("Art. 196"), std::string::npos);
  EXPECT_EQ(doc->source, "spot:2026-11");
  EXPECT_FALSE(BuildSpotStatement(nov, {}, 0).ok());
}

TEST(TaxRateTable, ClosingAPeriodLeavesTheCountryWithoutARate) {
  TaxRateTable t = TaxRateTable::Defaults();
  TimestampMicros july = At("2026-07-01T00:00:00Z");
  ASSERT_TRUE(t.Set("DE", 210'000, At("2026-09-01T00:00:00Z"), "later").ok());
  auto closed = t.Close("DE", july);
  ASSERT_TRUE(closed.ok());
  EXPECT_EQ(closed->valid_until, july);
  EXPECT_EQ(t.Find("DE", july - 1)->rate_ppm, 190'000);
  EXPECT_FALSE(t.Find("DE", july).has_value());
  EXPECT_FALSE(t.Find("DE", At("2026-10-01T00:00:00Z")).has_value());  // the later one is cut
  EXPECT_EQ(t.Close("DE", july).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(t.Close("US", july).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(TaxRateTable::FromPeriods(t.All()).ok());
}

}  // namespace
}  // namespace gpuhub::billing
