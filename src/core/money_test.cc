#include "core/money.h"

#include <gtest/gtest.h>

namespace gpuhub {
namespace {

TEST(ParseDecimalMicros, AcceptsPlainDecimals) {
  struct Case {
    const char* text;
    std::int64_t micros;
  } cases[] = {
      {"0", 0},           {"1", 1'000'000},        {"100.00", 100'000'000}, {"12.5", 12'500'000},
      {"0.000001", 1},    {"2.880", 2'880'000},    {"999999.999999", 999'999'999'999},
  };
  for (const auto& c : cases) {
    auto r = ParseDecimalMicros(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.micros) << c.text;
  }
}

TEST(ParseDecimalMicros, RejectsEverythingElse) {
  for (const char* text : {"", "-1", "+1", "1e3", " 1", "1 ", "1.", ".5", "1.0000001", "abc",
                           "1,5", "nan", "10000000000000", "1..2", "0x10"}) {
    auto r = ParseDecimalMicros(text);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(ParseDecimalMicros, HonoursFractionDigitLimit) {
  EXPECT_TRUE(ParseDecimalMicros("2.880", 3).ok());
  EXPECT_FALSE(ParseDecimalMicros("2.8801", 3).ok());
  EXPECT_FALSE(ParseDecimalMicros("1.001", 2).ok());
}

TEST(FormatMicros, RoundTrips) {
  EXPECT_EQ(FormatMicros(12'500'000), "12.500000");
  EXPECT_EQ(FormatMicros(1), "0.000001");
  EXPECT_EQ(FormatMicros(-1), "-0.000001");
  EXPECT_EQ(FormatMicros(2'880'000, 3), "2.880");
  EXPECT_EQ(FormatMicros(0, 2), "0.00");
  EXPECT_EQ(FormatMicros(INT64_MIN), "-9223372036854.775808");
}

TEST(MulDivHalfEven, RoundsHalfToEven) {
  // 2.5 -> 2, 3.5 -> 4, -2.5 -> -2, 2.6 -> 3
  EXPECT_EQ(*MulDivHalfEven(5, 1, 2), 2);
  EXPECT_EQ(*MulDivHalfEven(7, 1, 2), 4);
  EXPECT_EQ(*MulDivHalfEven(-5, 1, 2), -2);
  EXPECT_EQ(*MulDivHalfEven(26, 1, 10), 3);
  EXPECT_EQ(*MulDivHalfEven(24, 1, 10), 2);
  // A 10% fee of 2.880000 USD is exactly 0.288000.
  EXPECT_EQ(*MulDivHalfEven(2'880'000, 10, 100), 288'000);
  // Products beyond 64 bits are fine as long as the result fits.
  EXPECT_EQ(*MulDivHalfEven(INT64_MAX, 4, 4), INT64_MAX);
  EXPECT_FALSE(MulDivHalfEven(INT64_MAX, 2, 1).ok());
  EXPECT_FALSE(MulDivHalfEven(1, 1, 0).ok());
}

TEST(MulDivFloorCeil, RoundTowardMinusAndPlusInfinity) {
  EXPECT_EQ(*MulDivFloor(5, 1, 2), 2);  // 2.5
  EXPECT_EQ(*MulDivCeil(5, 1, 2), 3);
  EXPECT_EQ(*MulDivFloor(29, 1, 10), 2);  // 2.9
  EXPECT_EQ(*MulDivCeil(21, 1, 10), 3);   // 2.1
  EXPECT_EQ(*MulDivFloor(-5, 1, 2), -3);  // -2.5
  EXPECT_EQ(*MulDivCeil(-5, 1, 2), -2);
  EXPECT_EQ(*MulDivFloor(5, -1, 2), -3);
  EXPECT_EQ(*MulDivFloor(6, 1, 2), 3);  // exact: no step
  EXPECT_EQ(*MulDivCeil(6, 1, 2), 3);
  EXPECT_EQ(*MulDivFloor(-6, 1, 2), -3);
  EXPECT_EQ(*MulDivFloor(0, 7, 3), 0);
  EXPECT_EQ(*MulDivCeil(0, 7, 3), 0);
  EXPECT_EQ(*MulDivCeil(1, 1, 1'000'000'000'000), 1);
  EXPECT_EQ(*MulDivFloor(INT64_MAX, 3, 3), INT64_MAX);
  EXPECT_EQ(*MulDivCeil(INT64_MAX, 3, 3), INT64_MAX);
  EXPECT_FALSE(MulDivCeil(INT64_MAX, 2, 1).ok());
  EXPECT_FALSE(MulDivFloor(INT64_MIN, 2, 1).ok());
  EXPECT_FALSE(MulDivFloor(1, 1, 0).ok());
  EXPECT_FALSE(MulDivCeil(1, 1, -1).ok());
}

TEST(Money, CheckedArithmetic) {
  Money a{5, Currency::kUsd}, b{7, Currency::kUsd}, e{1, Currency::kEur};
  EXPECT_EQ(Add(a, b)->micros, 12);
  EXPECT_EQ(Subtract(a, b)->micros, -2);
  EXPECT_FALSE(Add(a, e).ok());
  EXPECT_FALSE(Add(Money{INT64_MAX, Currency::kUsd}, Money{1, Currency::kUsd}).ok());
}

TEST(Currency, ParsesCodes) {
  EXPECT_EQ(*ParseCurrency("EUR"), Currency::kEur);
  EXPECT_EQ(CurrencyCode(Currency::kGbp), "GBP");
  EXPECT_FALSE(ParseCurrency("usd").ok());
  EXPECT_FALSE(ParseCurrency("BTC").ok());
}

}  // namespace
}  // namespace gpuhub
