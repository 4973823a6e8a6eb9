#include "core/strings.h"

#include <gtest/gtest.h>

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
