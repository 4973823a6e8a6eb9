#include <gtest/gtest.h>

#include <string>

#include "billing/statement.h"
#include "documents/pdf_text_for_tests.h"
#include "documents/render.h"
#include "documents/view.h"

namespace gpuhub::documents {
namespace {

TimestampMicros At(const char* text) { return ParseTimestamp(text).value(); }

billing::Document Sample(std::size_t lines = 2) {
  billing::Document d;
  d.kind = billing::DocumentKind::kInvoice;
  d.number = "2026-000042";
  d.title = "Spot GPU usage, November 2026";
  d.issued_at = At("2026-12-01T00:00:05Z");
  d.supply_from = At("2026-11-01T00:00:00Z");
  d.supply_until = At("2026-12-01T00:00:00Z");
  d.seller = {"gpuhub Inc.", "1 Main St\nDover, DE 19901", "US", ""};
  d.buyer = {"ТОВ Київ <Tech> (kyiv)", "вул. Хрещатик 1\nКиїв", "UA", "UA1234567890"};
  for (std::size_t i = 0; i < lines; ++i) {
    d.lines.push_back(billing::TaxedLine("Spot lease " + std::to_string(i + 1) +
                                             ": 2 x H100 SXM at 2.885 USD/GPU-hour, hours from "
                                             "2026-11-03 10:00 to 2026-11-04 02:00 UTC",
                                         16, "lease-hour", 5'770'000,
                                         {"UA", 200'000, false, ""})
                          .value());
  }
  d.evidence = {"UA", "203.0.113.7", "UA", At("2026-11-03T10:00:00Z")};
  EXPECT_TRUE(billing::Seal(d).ok());
  return d;
}


TEST(View, AmountsKeepWhatWasChargedAndAtLeastCents) {
  EXPECT_EQ(Amount(20'000'000), "20.00");
  EXPECT_EQ(Amount(2'885'000), "2.885");
  EXPECT_EQ(Amount(548'150), "0.54815");
  EXPECT_EQ(Amount(0), "0.00");
  View v = MakeView(Sample());
  EXPECT_EQ(v.title, "Invoice 2026-000042");
  EXPECT_EQ(v.lines[0].quantity, "16 lease-hours");
  EXPECT_EQ(v.lines[0].net, "92.32");
  EXPECT_EQ(v.lines[0].tax, "18.464");
  EXPECT_EQ(v.lines[0].tax_rate, "20%");
  EXPECT_EQ(v.gross, "221.568");
  ASSERT_EQ(v.tax_groups.size(), 1u);
  EXPECT_EQ(v.tax_groups[0].first, "VAT 20% (UA) on 184.64");
  EXPECT_EQ(v.facts[2].second, "2026-11-01 to 2026-11-30");
}

TEST(Html, PrintsEveryFieldEscaped) {
  std::string html = RenderHtml(Sample());
  for (const char* needle :
       {"Invoice 2026-000042", "Issue date", "2026-12-01", "2026-11-01 to 2026-11-30",
        "gpuhub Inc.", "Dover, DE 19901", "ТОВ Київ &lt;Tech&gt; (kyiv)", "VAT id: UA1234567890",
        "Ukraine (UA)", "92.32", "18.464", "221.568 USD", "VAT 20% (UA) on 184.64",
        "203.0.113.7", "2026-000042.pdf"}) {
    EXPECT_NE(html.find(needle), std::string::npos) << needle;
  }
  EXPECT_EQ(html.find("<Tech>"), std::string::npos);  // never raw
  billing::Document rc = Sample(1);
  rc.lines[0] = billing::TaxedLine("x", 1, "term", 100'000'000, {"DE", 190'000, true, ""}).value();
  ASSERT_TRUE(billing::Seal(rc).ok());
  EXPECT_NE(RenderHtml(rc).find("Art. 196"), std::string::npos);
}

// Issue 29: a server without [billing] seller_address printed its configuration hint on the page.
TEST(Html, HasTheSiteNavigationAndNoConfigurationText) {
  billing::Document d = Sample(1);
  d.seller.address = "(address not configured: [billing] seller_address)";
  ASSERT_TRUE(billing::Seal(d).ok());
  View v = MakeView(d);
  EXPECT_EQ(v.seller.front(), "gpuhub Inc.");
  for (const auto& line : v.seller) EXPECT_EQ(line.find("not configured"), std::string::npos);
  std::string html = RenderHtml(d);
  EXPECT_EQ(html.find("not configured"), std::string::npos);
  EXPECT_NE(html.find("<nav class=\"site\" aria-label=\"Main\">"), std::string::npos);
  EXPECT_NE(html.find("href=\"/account/#billing\""), std::string::npos);
}

TEST(Pdf, ParsesAndHoldsTheSameNumbersAndNamesAsTheDocument) {
  if (!HavePdfToText()) GTEST_SKIP() << "pdftotext (poppler-utils) is not installed";
  billing::Document doc = Sample();
  auto pdf = RenderPdf(doc);
  ASSERT_TRUE(pdf.ok()) << pdf.status().ToString();
  EXPECT_EQ(pdf->rfind("%PDF-", 0), 0u);
  std::string text = PdfToText(*pdf);
  ASSERT_FALSE(text.empty());
  for (const char* needle :
       {"Invoice 2026-000042", "Invoice number:", "Issue date:", "2026-12-01",
        "Date of supply:", "2026-11-01 to 2026-11-30", "gpuhub Inc.", "1 Main St",
        "ТОВ Київ <Tech> (kyiv)", "вул. Хрещатик 1", "VAT id: UA1234567890", "16 lease-hours",
        "5.77", "92.32", "18.464", "110.784", "184.64 USD", "VAT 20% (UA) on 184.64",
        "36.928 USD", "221.568 USD", "203.0.113.7", "page 1 of 1"}) {
    EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
  }
}

TEST(Pdf, ManyLinesGoOnManyPagesAndAMissingFontFallsBack) {
  if (!HavePdfToText()) GTEST_SKIP() << "pdftotext (poppler-utils) is not installed";
  auto pdf = RenderPdf(Sample(150));
  ASSERT_TRUE(pdf.ok());
  std::string text = PdfToText(*pdf);
  EXPECT_NE(text.find("page 1 of "), std::string::npos);
  EXPECT_NE(text.find("Spot lease 150:"), std::string::npos);
  EXPECT_NE(text.find("16617.60 USD"), std::string::npos);  // 150 x 110.784 gross
  EXPECT_EQ(text.find("page 1 of 1\n"), std::string::npos);

  auto fallback = RenderPdf(Sample(), PdfOptions{"/nonexistent/font.ttf"});
  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  std::string latin = PdfToText(*fallback);
  EXPECT_NE(latin.find("221.568 USD"), std::string::npos);
  EXPECT_NE(latin.find("??? ???? <Tech> (kyiv)"), std::string::npos) << latin;
}

}  // namespace
}  // namespace gpuhub::documents
