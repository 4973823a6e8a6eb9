#include <gtest/gtest.h>

#include "billing/countries.h"
#include "billing/tax.h"
#include "billing/tax_rates.h"

namespace gpuhub::billing {
namespace {

TimestampMicros Day(int y, int m, int d) {
  return ParseTimestamp(std::to_string(y) + "-" + (m < 10 ? "0" : "") + std::to_string(m) + "-" +
                        (d < 10 ? "0" : "") + std::to_string(d) + "T00:00:00Z")
      .value();
}

TEST(TaxRateTable, ShipsTheStandardRatesOfEveryCountryWithTheirChanges) {
  TaxRateTable t = TaxRateTable::Defaults();
  TimestampMicros now = Day(2026, 1, 15);
  struct Case {
    const char* country;
    const char* percent;
  } cases[] = {{"AT", "20"}, {"BE", "21"}, {"BG", "20"}, {"HR", "25"}, {"CY", "19"},
               {"CZ", "21"}, {"DK", "25"}, {"EE", "24"}, {"FI", "25.5"}, {"FR", "20"},
               {"DE", "19"}, {"GR", "24"}, {"HU", "27"}, {"IE", "23"}, {"IT", "22"},
               {"LV", "21"}, {"LT", "21"}, {"LU", "17"}, {"MT", "18"}, {"NL", "21"},
               {"PL", "23"}, {"PT", "23"}, {"RO", "21"}, {"SK", "23"}, {"SI", "22"},
               {"ES", "21"}, {"SE", "25"}, {"GB", "20"}, {"UA", "20"}, {"CH", "8.1"},
               {"NO", "25"}};
  EXPECT_EQ(t.CurrentAt(now).size(), std::size(cases));
  for (const auto& c : cases) {
    auto rate = t.Find(c.country, now);
    ASSERT_TRUE(rate.has_value()) << c.country;
    EXPECT_EQ(FormatRatePercent(rate->rate_ppm), c.percent) << c.country;
  }
  EXPECT_EQ(t.Find("FI", Day(2024, 8, 31))->rate_ppm, 240'000);
  EXPECT_EQ(t.Find("EE", Day(2025, 6, 30))->rate_ppm, 220'000);
  EXPECT_EQ(t.Find("SK", Day(2024, 12, 31))->rate_ppm, 200'000);
  EXPECT_EQ(t.Find("RO", Day(2025, 7, 31))->rate_ppm, 190'000);
  EXPECT_FALSE(t.Find("US", now).has_value());
}

TEST(TaxRateTable, AnAdminChangeClosesThePeriodItReplaces) {
  TaxRateTable t = TaxRateTable::Defaults();
  auto set = t.Set("DE", 210'000, Day(2026, 7, 1), "test");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(t.Find("DE", Day(2026, 6, 30))->rate_ppm, 190'000);
  EXPECT_EQ(t.Find("DE", Day(2026, 7, 1))->rate_ppm, 210'000);
  ASSERT_TRUE(t.Set("DE", 200'000, Day(2026, 3, 1), "earlier").ok());  // cuts the later one
  EXPECT_EQ(t.Find("DE", Day(2026, 8, 1))->rate_ppm, 200'000);
  EXPECT_TRUE(t.Set("US", 0, Day(2026, 1, 1), "none").ok());
  EXPECT_EQ(t.Set("XX", 1, Day(2026, 1, 1), "").status().field(), "country");
  EXPECT_EQ(t.Set("DE", 1'000'001, Day(2026, 1, 1), "").status().field(), "rate");
  auto restored = TaxRateTable::FromPeriods(t.All());
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->Find("DE", Day(2026, 8, 1))->rate_ppm, 200'000);
}

TEST(ParseRatePercent, ZeroToHundredWithFourDecimals) {
  EXPECT_EQ(ParseRatePercent("19").value(), 190'000);
  EXPECT_EQ(ParseRatePercent("25.5").value(), 255'000);
  EXPECT_EQ(ParseRatePercent("8.1").value(), 81'000);
  EXPECT_EQ(ParseRatePercent("0").value(), 0);
  EXPECT_EQ(ParseRatePercent("100").value(), 1'000'000);
  for (const char* bad : {"100.0001", "-1", "101", "19.12345", "", "abc"}) {
    auto r = ParseRatePercent(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "rate");
  }
}

TEST(NormalizeVatId, ChecksTheShapeOfEachCountry) {
  EXPECT_EQ(NormalizeVatId("DE", "de 123 456 789").value(), "DE123456789");
  EXPECT_EQ(NormalizeVatId("DE", "123456789").value(), "DE123456789");
  EXPECT_EQ(NormalizeVatId("GR", "EL123456789").value(), "EL123456789");
  EXPECT_EQ(NormalizeVatId("NL", "NL123456789B01").value(), "NL123456789B01");
  EXPECT_EQ(NormalizeVatId("AT", "ATU12345678").value(), "ATU12345678");
  EXPECT_EQ(NormalizeVatId("GB", "GB 123 4567 89").value(), "GB123456789");
  EXPECT_EQ(NormalizeVatId("CH", "CHE-123.456.789 MWST").value(), "CHE123456789MWST");
  EXPECT_EQ(NormalizeVatId("NO", "NO123456789MVA").value(), "NO123456789MVA");
  EXPECT_EQ(NormalizeVatId("UA", "123456789012").value(), "UA123456789012");
  EXPECT_EQ(NormalizeVatId("US", "12-3456789").value(), "US123456789");
  EXPECT_EQ(NormalizeVatId("DE", "").value(), "");
  for (auto [country, bad] : std::vector<std::pair<const char*, const char*>>{
           {"DE", "DE12345678"}, {"DE", "FR12345678901"}, {"NL", "NL123456789"},
           {"AT", "AT12345678"}, {"CH", "CHE12345678"}, {"GB", "GB12345"}, {"FR", "FR1"},
           {"DE", "DE<script>"}}) {
    auto r = NormalizeVatId(country, bad);
    EXPECT_FALSE(r.ok()) << country << " " << bad;
    EXPECT_EQ(r.status().field(), "vat_id");
  }
}

TEST(DecideTax, ReverseChargeForEuBusinessesElseTheBuyersRate) {
  TaxRateTable t = TaxRateTable::Defaults();
  TimestampMicros now = Day(2026, 1, 15);
  Seller seller{"US"};
  auto consumer = DecideTax(seller, {"DE", "", ""}, t, now);
  EXPECT_EQ(consumer.rate_ppm, 190'000);
  EXPECT_FALSE(consumer.reverse_charge);
  EXPECT_EQ(consumer.note, "VAT 19% (DE)");
  auto business = DecideTax(seller, {"DE", "ACME GmbH", "DE123456789"}, t, now);
  EXPECT_TRUE(business.reverse_charge);
  EXPECT_EQ(business.rate_ppm, 0);
  EXPECT_NE(business.note.find("Reverse charge"), std::string::npos);
  // A business in the seller's own country pays its VAT.
  auto domestic = DecideTax(Seller{"DE"}, {"DE", "ACME GmbH", "DE123456789"}, t, now);
  EXPECT_FALSE(domestic.reverse_charge);
  EXPECT_EQ(domestic.rate_ppm, 190'000);
  // Outside the EU: the country's rate (a UK business included), or none.
  EXPECT_EQ(DecideTax(seller, {"GB", "Ltd", "GB123456789"}, t, now).rate_ppm, 200'000);
  EXPECT_EQ(DecideTax(seller, {"US", "", ""}, t, now).rate_ppm, 0);
  EXPECT_EQ(TaxMicros(2'880'000, 190'000).value(), 547'200);
  EXPECT_EQ(TaxMicros(5, 255'000).value(), 1);   // 1.275 -> 1
  EXPECT_EQ(TaxMicros(10, 255'000).value(), 3);  // 2.55 -> 3
}

}  // namespace
}  // namespace gpuhub::billing
