// Exchange::CheckLeasesPaidUp: paused leases are not billed, and that is not a skipped hour; a
// skipped hour still is.
#include <gtest/gtest.h>

#include "market/exchange_test_fixture.h"

namespace gpuhub::market {
namespace {

using namespace testing;  // NOLINT: the fixture and its constants

constexpr TimestampMicros kMinute = 60 * kMicrosPerSecond;

class LeaseChecksTest : public ExchangeTest {
 protected:
  void SetUp() override {
    machine_ = NewMachine(kProvider, 8);
    AskOn(machine_, Usd(2.88));
    Fund(kAlice, Usd(50));
    auto bid = Buy(kAlice, 1, std::nullopt);
    ASSERT_TRUE(bid.ok()) << bid.status().ToString();
    lease_ = bid->lease->id;
  }
  Status Offline(TimestampMicros since) {
    return x_.SetMachineCondition(machine_, {since, 0, ""}, ledger_, now_, &changes_).status();
  }
  const Lease& L() const { return *x_.FindLease(lease_); }

  MachineId machine_ = 0;
  LeaseId lease_ = 0;
};

// The host goes silent 15 min into the first hour and stays away 5 h: the lease is paused with
// its paid hour ending long before now, and the check says ok all along; back online, billing
// resumes with a new hour from that moment and the check still says ok.
TEST_F(LeaseChecksTest, APausedLeaseIsNotASkippedHour) {
  Advance(20 * kMinute);
  ASSERT_TRUE(Offline(kStart + 15 * kMinute).ok());
  EXPECT_EQ(L().paused_at, kStart + 15 * kMinute);
  EXPECT_TRUE(x_.CheckLeasesPaidUp(now_).ok());
  Advance(5 * kHour);
  EXPECT_EQ(L().hours_paid, 1) << "nothing billed while paused";
  ASSERT_LT(L().PaidUntil(), now_) << "what the check used to call a skipped hour";
  Status paused = x_.CheckLeasesPaidUp(now_);
  EXPECT_TRUE(paused.ok()) << paused.ToString();

  ASSERT_TRUE(Offline(0).ok());  // back
  EXPECT_EQ(L().paused_at, 0);
  EXPECT_EQ(L().hours_paid, 2);
  EXPECT_EQ(L().PaidUntil(), now_ + kHour) << "a new whole hour from the resume";
  EXPECT_EQ(L().shift_micros, 5 * kHour + 20 * kMinute - kHour);
  EXPECT_TRUE(x_.CheckLeasesPaidUp(now_).ok());
  Advance(3 * kHour + 1);
  EXPECT_EQ(L().hours_paid, 5);
  EXPECT_TRUE(x_.CheckLeasesPaidUp(now_).ok());
}

// The check can fail: an hour that fell due without a tick is caught, before a pause and after a
// resume (whose moved grid it follows), to the microsecond.
TEST_F(LeaseChecksTest, AGenuinelySkippedHourIsStillCaught) {
  EXPECT_TRUE(x_.CheckLeasesPaidUp(now_ + kHour - 1).ok());
  Status skipped = x_.CheckLeasesPaidUp(now_ + kHour);
  EXPECT_EQ(skipped.code(), StatusCode::kInternal);
  EXPECT_EQ(skipped.message(),
            "active lease " + std::to_string(lease_) +
                " is paid only until 2027-01-15T09:00:00Z, before 2027-01-15T09:00:00Z: an hour "
                "was skipped");
  Advance(30 * kMinute);
  ASSERT_TRUE(Offline(now_).ok());
  Advance(2 * kHour);
  ASSERT_TRUE(Offline(0).ok());  // resumed at 10:30: paid until 11:30
  EXPECT_TRUE(x_.CheckLeasesPaidUp(now_ + kHour - 1).ok());
  EXPECT_FALSE(x_.CheckLeasesPaidUp(now_ + kHour).ok());
  EXPECT_NE(x_.CheckLeasesPaidUp(now_ + kHour).message().find("until 2027-01-15T11:30:00Z"),
            std::string::npos);
}

// Records no exchange makes, restored as a corrupt store would hand them back: a pause that began
// before the last paid hour or after it ended (the time between was never billed), and an hour
// sold past the lease's window.
TEST_F(LeaseChecksTest, APauseOutsideTheLastPaidHourOrAnHourPastTheWindowFails) {
  Advance(10 * kMinute);
  ASSERT_TRUE(Offline(now_).ok());
  const Snapshot paused = x_.Records();
  ASSERT_EQ(paused.leases.size(), 1u);
  ASSERT_EQ(paused.leases[0].paused_at, kStart + 10 * kMinute);
  for (TimestampMicros at : {kStart - 1, kStart + kHour + 1}) {
    Snapshot bad = paused;
    bad.leases[0].paused_at = at;
    auto restored = Exchange::Restore(Config(), bad);
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    Status s = restored->CheckLeasesPaidUp(now_);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_NE(s.message().find("outside its last paid hour (until 2027-01-15T09:00:00Z)"),
              std::string::npos)
        << s.message();
  }
  for (TimestampMicros at : {kStart, kStart + kHour}) {  // the bounds of the paid hour
    Snapshot edge = paused;
    edge.leases[0].paused_at = at;
    EXPECT_TRUE(Exchange::Restore(Config(), edge)->CheckLeasesPaidUp(now_).ok());
  }

  ASSERT_TRUE(Offline(0).ok());
  Snapshot late = x_.Records();
  late.leases[0].window_until = late.leases[0].PaidUntil() - 1;
  auto restored = Exchange::Restore(Config(), late);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  Status s = restored->CheckLeasesPaidUp(now_);
  EXPECT_NE(s.message().find("past its window"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace gpuhub::market
