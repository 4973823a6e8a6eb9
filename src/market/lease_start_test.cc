// Leases that wait for their host (Exchange::SetStartTimeout, ReportLeaseWorkload): worked
// examples with the figures computed by hand. 2 x H100 at 2.880 = 5.760/h, fee 10% = 0.576.
#include <gtest/gtest.h>

#include "market/exchange_test_fixture.h"

namespace gpuhub::market {
namespace {

using namespace testing;  // NOLINT: the fixture and its constants

constexpr TimestampMicros kMinute = 60 * kMicrosPerSecond;

class LeaseStartTest : public ExchangeTest {
 protected:
  LeaseStartTest() {
    // Machine 1 has a host agent (its leases wait up to 10 minutes); the others run at the fill.
    x_.SetStartTimeout([](MachineId m) { return m == 1 ? 10 * kMinute : 0; });
  }
  Result<Lease> Report(LeaseId lease, bool running) {
    auto r = x_.ReportLeaseWorkload(lease, running, ledger_, now_, &changes_);
    Check();
    return r;
  }
  int OnBook() {
    const std::vector<Offer> offers = x_.Offers("H100 SXM", now_).value();
    int gpus = 0;
    for (const auto& o : offers) gpus += o.free_gpus;
    return gpus;
  }
};

// Nothing is charged at the fill: the hour is held. The host reports it running 3 minutes later:
// the hold goes back and hour 1 is charged from that moment, so the customer gets a whole hour of
// a running machine; hour 2 is due an hour after the report, not after the fill.
TEST_F(LeaseStartTest, BilledFromTheMomentItsWorkloadRuns) {
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok()) << bid.status().ToString();
  const LeaseId lease = bid->lease->id;
  EXPECT_TRUE(bid->lease->Provisioning());
  EXPECT_EQ(bid->lease->hours_paid, 0);
  EXPECT_EQ(bid->lease->start_deadline, now_ + 10 * kMinute);
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 5.76));
  EXPECT_EQ(Held(kAlice), Usd(5.76));
  EXPECT_EQ(Payable(kProvider), 0);
  EXPECT_EQ(Revenue(), 0);
  EXPECT_EQ(OnBook(), 6) << "its GPUs are the lease's while it provisions";
  EXPECT_EQ(x_.ProviderEarnings(kProvider, ledger_).lease_hours, 0);

  Advance(3 * kMinute);
  EXPECT_TRUE(Report(lease, false).ok());  // "pulling": still provisioning
  EXPECT_TRUE(x_.FindLease(lease)->Provisioning());
  const TimestampMicros running_at = now_;
  auto started = Report(lease, true);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->hours_paid, 1);
  EXPECT_EQ(started->PaidUntil(), running_at + kHour);
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 5.76));
  EXPECT_EQ(Payable(kProvider), Usd(5.184));
  EXPECT_EQ(Revenue(), Usd(0.576));
  auto hour1 = ledger_.FindTransfer(LeaseHourTransferId(lease, 1, "provider"));
  ASSERT_TRUE(hour1.ok());
  EXPECT_EQ(hour1->timestamp, running_at);
  EXPECT_EQ(ledger_.FindTransfer(LeaseHoldTransferId(lease))->state,
            ledger::TransferState::kVoided);

  Advance(kHour - kMinute);  // the fill's hour would have ended 3 minutes ago: nothing due yet
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 1);
  Advance(kMinute);
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 2);
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 2 * 5.76));
}

// Not running within 10 minutes: the lease ends not_started and the buyer has exactly what it had
// before, in its own currency (a EUR wallet: the hold was in EUR and goes back in EUR); the
// provider's payable and the platform's revenue never had any of it. The GPUs go back on offer.
TEST_F(LeaseStartTest, NotRunningInTimeEndsWithEverythingBack) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, now_).ok());
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88));
  Fund(kAlice, Usd(100), Currency::kEur);
  auto bid = Buy(kAlice, 2, std::nullopt, TimeInForce::kIoc, "", 0, Currency::kEur);
  ASSERT_TRUE(bid.ok()) << bid.status().ToString();
  const LeaseId lease = bid->lease->id;
  EXPECT_GT(Held(kAlice, Currency::kEur), 0);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(100) - Held(kAlice, Currency::kEur));
  // Moving the rate changes nothing of what goes back.
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'500'000'000, 0, now_).ok());

  Advance(10 * kMinute - 1);
  EXPECT_TRUE(x_.FindLease(lease)->Provisioning());
  Advance(1);
  const Lease* l = x_.FindLease(lease);
  EXPECT_EQ(l->status, LeaseStatus::kEnded);
  EXPECT_EQ(l->end_reason, LeaseEndReason::kNotStarted);
  EXPECT_EQ(l->ended_at, l->start_deadline);
  EXPECT_EQ(l->hours_paid, 0);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(100));
  EXPECT_EQ(Held(kAlice, Currency::kEur), 0);
  EXPECT_EQ(Payable(kProvider), 0);
  EXPECT_EQ(Revenue(), 0);
  EXPECT_EQ(x_.ProviderEarnings(kProvider, ledger_).gross_micros, 0);
  EXPECT_EQ(OnBook(), 8);
  // A late "running" report of an ended lease changes nothing.
  auto late = Report(lease, true);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->status, LeaseStatus::kEnded);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(100));
}

// The customer stops a lease whose host never ran it: nothing is charged.
TEST_F(LeaseStartTest, StoppingBeforeItRunsCostsNothing) {
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, Usd(3.0), TimeInForce::kGtc);
  ASSERT_TRUE(bid.ok());
  Advance(2 * kMinute);
  auto stopped = x_.StopLease(kAlice, bid->lease->id, ledger_, now_, &changes_);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->end_reason, LeaseEndReason::kStopped);
  EXPECT_EQ(Wallet(kAlice), Usd(20));
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Payable(kProvider), 0);
}

// A machine without a host to wait for (machine 2) runs its leases from the fill, as always.
TEST_F(LeaseStartTest, AMachineWithoutAHostToWaitForBillsAtTheFill) {
  NewMachine(kProvider, 8);
  ASSERT_EQ(NewMachine(kProvider, 8), 2);
  AskOn(2, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok());
  EXPECT_FALSE(bid->lease->Provisioning());
  EXPECT_EQ(bid->lease->hours_paid, 1);
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Payable(kProvider), Usd(5.184));
}

// Its container stops 15 minutes into the paid hour: the lease is paused and the other 45 minutes
// are credited (5.760 x 45/60 = 4.320) as for an offline machine. The machine going offline and
// coming back meanwhile does not resume it (the workload is still down); the report that it runs
// again bills a new whole hour from then.
TEST_F(LeaseStartTest, AStoppedWorkloadPausesTheLeaseUntilItRunsAgain) {
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok());
  const LeaseId lease = bid->lease->id;
  ASSERT_TRUE(Report(lease, true).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(14.24));

  Advance(15 * kMinute);
  auto down = Report(lease, false);
  ASSERT_TRUE(down.ok());
  EXPECT_TRUE(down->workload_down);
  EXPECT_EQ(down->paused_at, now_);
  EXPECT_EQ(down->credited_micros, Usd(4.32));
  EXPECT_EQ(Wallet(kAlice), Usd(14.24 + 4.32));
  EXPECT_EQ(Payable(kProvider), Usd(5.184 - 3.888));
  auto credit = ledger_.FindTransfer(LeaseCreditTransferId(lease, 1, "provider"));
  ASSERT_TRUE(credit.ok());
  EXPECT_NE(credit->memo.find("workload stopped"), std::string::npos) << credit->memo;
  EXPECT_TRUE(Report(lease, false).ok());  // said again: nothing more
  EXPECT_EQ(x_.FindLease(lease)->credited_micros, Usd(4.32));

  Advance(2 * kHour);  // nothing billed while down
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 1);
  ASSERT_TRUE(x_.SetMachineCondition(1, {now_ - kMinute, 0, ""}, ledger_, now_, &changes_).ok());
  Advance(kMinute);
  ASSERT_TRUE(x_.SetMachineCondition(1, {}, ledger_, now_, &changes_).ok());
  Check();
  EXPECT_NE(x_.FindLease(lease)->paused_at, 0) << "back online, its workload still down";
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 1);

  auto back = Report(lease, true);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->workload_down);
  EXPECT_EQ(back->paused_at, 0);
  EXPECT_EQ(back->hours_paid, 2);
  EXPECT_EQ(back->PaidUntil(), now_ + kHour);
  EXPECT_EQ(Wallet(kAlice), Usd(18.56 - 5.76));
}

// An ask's last minutes: a lease filled 55 minutes before the ask's window ends cannot start a
// whole hour 10 minutes later: it ends window_ended with its hold back, nothing charged.
TEST_F(LeaseStartTest, AStartPastTheWindowEndsWithNothingCharged) {
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88), 1, now_ + kHour + 5 * kMinute);
  Fund(kAlice, Usd(20));
  Advance(3 * kMinute);
  auto bid = Buy(kAlice, 1, std::nullopt);
  ASSERT_TRUE(bid.ok()) << bid.status().ToString();
  Advance(5 * kMinute);
  auto r = Report(bid->lease->id, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, LeaseStatus::kEnded);
  EXPECT_EQ(r->end_reason, LeaseEndReason::kWindowEnded);
  EXPECT_EQ(Wallet(kAlice), Usd(20));
  EXPECT_EQ(Payable(kProvider), 0);
}

// A restored exchange holds the provisioning lease, its deadline and its hold as they were.
TEST_F(LeaseStartTest, ARestoreKeepsTheDeadline) {
  ASSERT_EQ(NewMachine(kProvider, 8), 1);
  AskOn(1, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok());
  auto restored = Exchange::Restore(Config(), x_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_TRUE(restored->CheckInvariants(ledger_).ok());
  EXPECT_EQ(restored->NextEventAt(), bid->lease->start_deadline);
  EXPECT_EQ(restored->Records().leases, x_.Records().leases);
}

}  // namespace
}  // namespace gpuhub::market
