#include "core/clock.h"

#include <gtest/gtest.h>

namespace gpuhub {
namespace {

TEST(Timestamp, FormatsAndParses) {
  EXPECT_EQ(FormatTimestamp(0), "1970-01-01T00:00:00Z");
  auto t = ParseTimestamp("2026-11-30T12:34:56Z");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 1796042096LL * kMicrosPerSecond);
  EXPECT_EQ(FormatTimestamp(*t), "2026-11-30T12:34:56Z");
  EXPECT_EQ(FormatTimestamp(*t + 1500), "2026-11-30T12:34:56.001500Z");
  EXPECT_EQ(*ParseTimestamp("2026-11-30T14:34:56+02:00"), *t);
  EXPECT_EQ(*ParseTimestamp("2026-11-30T12:34:56.0015Z"), *t + 1500);
  EXPECT_EQ(*ParseTimestamp("2024-02-29T00:00:00Z") + kMicrosPerDay,
            *ParseTimestamp("2024-03-01T00:00:00Z"));
}

TEST(Timestamp, RejectsMalformed) {
  for (const char* text : {"", "2026-11-30", "2026-11-30 12:00:00Z", "2026-13-01T00:00:00Z",
                           "2025-02-29T00:00:00Z", "2026-11-30T24:00:00Z", "2026-11-30T12:00:00",
                           "2026-11-30T12:00:00Zjunk", "2026-11-30T12:00:00.Z"}) {
    EXPECT_FALSE(ParseTimestamp(text).ok()) << text;
  }
}

TEST(ManualClock, MovesOnlyWhenTold) {
  ManualClock clock(1000);
  EXPECT_EQ(clock.NowMicros(), 1000);
  clock.Advance(kMicrosPerHour);
  EXPECT_EQ(clock.NowMicros(), 1000 + kMicrosPerHour);
  clock.Set(clock.NowMicros() + 1);
  EXPECT_EQ(clock.NowMicros(), 1001 + kMicrosPerHour);
  EXPECT_DEATH(clock.Advance(-1), "never runs backwards");
}

}  // namespace
}  // namespace gpuhub

namespace gpuhub {
namespace {

TEST(CivilDate, RoundTripsMonthStartsAcrossYearsAndLeapDays) {
  TimestampMicros t = ParseTimestamp("2028-02-29T23:59:59Z").value();
  CivilDate d = CivilDateOf(t);
  EXPECT_EQ(d.year, 2028);
  EXPECT_EQ(d.month, 2u);
  EXPECT_EQ(d.day, 29u);
  EXPECT_EQ(TimestampOfDate(2028, 3, 1), ParseTimestamp("2028-03-01T00:00:00Z").value());
  EXPECT_EQ(TimestampOfDate(2026, 13, 1), ParseTimestamp("2027-01-01T00:00:00Z").value());
  EXPECT_EQ(CivilDateOf(TimestampOfDate(2026, 12, 1) - 1).month, 11u);
  EXPECT_EQ(CivilDateOf(-1).year, 1969);
}

}  // namespace
}  // namespace gpuhub
