#include "core/strings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

namespace gpuhub {
namespace {

TEST(ParseInt64, IsStrict) {
  EXPECT_EQ(*ParseInt64("8192", "--context"), 8192);
  EXPECT_EQ(*ParseInt64("-3", "x"), -3);
  for (const char* bad : {"", "12a", " 1", "1 ", "+1", "1.5", "99999999999999999999"}) {
    auto r = ParseInt64(bad, "--context");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--context"), std::string::npos);
  }
}

TEST(ParseDouble, RejectsNonFinite) {
  EXPECT_DOUBLE_EQ(*ParseDouble("3643.2", "x"), 3643.2);
  for (const char* bad : {"", "nan", "inf", "1e400", "1,5", "abc"}) {
    EXPECT_FALSE(ParseDouble(bad, "x").ok()) << bad;
  }
}

TEST(Strings, Helpers) {
  EXPECT_EQ(ToLower("H100 SXM"), "h100 sxm");
  EXPECT_EQ(Trim("  a b \n"), "a b");
  EXPECT_EQ(Split("a,b,,c", ','), (std::vector<std::string>{"a", "b", "", "c"}));
  EXPECT_EQ(FormatFixed(74.684, 2), "74.68");
}

// FormatFixed is printf's "%.*f" (it used to call it): the same text for any value and precision,
// halfway cases, huge values beyond its buffer, infinities and NaN included.
TEST(Strings, FormatFixedIsPrintfFixed) {
  auto printf_fixed = [](double v, int d) {
    std::vector<char> buf(512);
    std::snprintf(buf.data(), buf.size(), "%.*f", d, v);
    return std::string(buf.data());
  };
  std::mt19937_64 rng(7);
  std::vector<double> values = {
      0.0,         -0.0,       0.5,   1.5,   2.5,
      0.125,       1e15 + 0.5, 1e22,  1e300, -1e-300,
      5e-324,      74.685,     0.045, 1.005, std::numeric_limits<double>::infinity(),
      std::nan("")};
  for (int i = 0; i < 20000; ++i) {
    values.push_back(static_cast<double>(rng() % 100000000) / std::pow(10.0, rng() % 9));
  }
  for (double v : values) {
    for (int d : {0, 1, 2, 3, 6, 9})
      ASSERT_EQ(FormatFixed(v, d), printf_fixed(v, d)) << v << " " << d;
  }
}

TEST(JsonNestingWithin, CountsBracketsOutsideStrings) {
  EXPECT_TRUE(JsonNestingWithin("", 0));
  EXPECT_TRUE(JsonNestingWithin("{\"a\": [1, {\"b\": 2}]}", 3));
  EXPECT_FALSE(JsonNestingWithin("{\"a\": [1, {\"b\": 2}]}", 2));
  EXPECT_TRUE(JsonNestingWithin("[[], [], []]", 2));  // siblings do not add up
  // Brackets inside strings, escaped quotes included, are text.
  EXPECT_TRUE(JsonNestingWithin("{\"k\": \"[[[{{{\\\"[[[\"}", 1));
  EXPECT_FALSE(JsonNestingWithin(std::string(33, '['), 32));
  EXPECT_TRUE(JsonNestingWithin(std::string(32, '['), 32));
}

}  // namespace
}  // namespace gpuhub
