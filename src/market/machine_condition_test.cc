// A machine offline, held or with blocked GPUs (Exchange::SetMachineCondition): worked examples
// of the downtime credit with the figures computed by hand.
#include <gtest/gtest.h>

#include "market/exchange_test_fixture.h"

namespace gpuhub::market {
namespace {

using namespace testing;  // NOLINT: the fixture and its constants

constexpr TimestampMicros kMinute = 60 * kMicrosPerSecond;

class MachineConditionTest : public ExchangeTest {
 protected:
  Result<Machine> Set(MachineId m, TimestampMicros offline_since, std::uint32_t blocked = 0,
                      std::string hold = "") {
    auto r = x_.SetMachineCondition(m, {offline_since, blocked, std::move(hold)}, ledger_, now_,
                                    &changes_);
    Check();
    return r;
  }
  int OnBook() {
    auto offers = x_.Offers("H100 SXM", now_).value();
    int gpus = 0;
    for (const auto& o : offers) gpus += o.free_gpus;
    return gpus;
  }
};

// 2 x H100 at 2.880 = 5.760/h, fee 10% = 0.576. Last seen 15 min into the hour, so 45 min of the
// paid hour are credited: 5.760 x 45/60 = 4.320 (fee part 0.432 from revenue, 3.888 from the
// provider's payable). No hour is billed while offline; back online, a new whole hour is billed
// from that moment and the ask returns to the book.
TEST_F(MachineConditionTest, OfflineCreditsTheUnusedPartOfTheHourAndPausesBilling) {
  MachineId m = NewMachine(kProvider, 8);
  AskOn(m, Usd(2.88));
  Fund(kAlice, Usd(20));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok()) << bid.status().ToString();
  const LeaseId lease = bid->lease->id;
  const TimestampMicros started = now_;
  EXPECT_EQ(Wallet(kAlice), Usd(14.24));
  EXPECT_EQ(OnBook(), 6);

  Advance(20 * kMinute);  // the agent stopped reporting at minute 15; noticed at minute 20
  ASSERT_TRUE(Set(m, started + 15 * kMinute).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(14.24 + 4.32));
  EXPECT_EQ(Payable(kProvider), Usd(5.184 - 3.888));
  EXPECT_EQ(Revenue(), Usd(0.576 - 0.432));
  const Lease* l = x_.FindLease(lease);
  EXPECT_EQ(l->status, LeaseStatus::kActive);
  EXPECT_EQ(l->paused_at, started + 15 * kMinute);
  EXPECT_EQ(l->credited_micros, Usd(4.32));
  EXPECT_EQ(l->credited_provider_micros, Usd(3.888));
  EXPECT_EQ(OnBook(), 0) << "an offline machine offers nothing";
  EXPECT_EQ(x_.ProviderEarnings(kProvider, ledger_).net_micros, Usd(1.296));
  EXPECT_EQ(x_.ProviderEarnings(kProvider, ledger_).credited_micros, Usd(3.888));
  // The credit is in the ledger under the lease's hour, with the hour's id.
  auto credit = ledger_.FindTransfer(LeaseCreditTransferId(lease, 1, "provider"));
  ASSERT_TRUE(credit.ok());
  EXPECT_EQ(credit->amount_micros, Usd(3.888));
  EXPECT_EQ(credit->code, "downtime_credit");

  Advance(3 * kHour);  // nothing billed while offline
  EXPECT_EQ(Wallet(kAlice), Usd(18.56));
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 1);

  ASSERT_TRUE(Set(m, 0).ok());  // back: hour 2 is billed now, for a whole hour
  EXPECT_EQ(Wallet(kAlice), Usd(18.56 - 5.76));
  l = x_.FindLease(lease);
  EXPECT_EQ(l->paused_at, 0);
  EXPECT_EQ(l->hours_paid, 2);
  EXPECT_EQ(l->PaidUntil(), now_ + kHour);
  EXPECT_EQ(OnBook(), 6);
  Advance(kHour);  // hour 3 on the moved grid
  EXPECT_EQ(Wallet(kAlice), Usd(18.56 - 2 * 5.76));
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 3);
}

// A second outage credits the hour running then, and no hour is ever credited twice.
TEST_F(MachineConditionTest, EachOutageCreditsItsOwnHour) {
  MachineId m = NewMachine(kProvider, 4);
  AskOn(m, Usd(2.0));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 4, std::nullopt).ok());
  Advance(30 * kMinute);
  ASSERT_TRUE(Set(m, now_).ok());  // half of 8.00 back
  EXPECT_EQ(Wallet(kAlice), Usd(100 - 8 + 4));
  Advance(10 * kMinute);
  ASSERT_TRUE(Set(m, now_ - kMinute).ok());  // still offline: a new last-seen time, no new credit
  EXPECT_EQ(Wallet(kAlice), Usd(96));
  ASSERT_TRUE(Set(m, 0).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(88));
  Advance(kHour + 45 * kMinute);  // hour 3 billed 60 min after the resume; 15 min left of it
  EXPECT_EQ(Wallet(kAlice), Usd(80));
  ASSERT_TRUE(Set(m, now_).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(82));  // 15 of 60 minutes of 8.00
  EXPECT_EQ(x_.FindLease(1)->credited_micros, Usd(6));
}

// A customer may stop a paused lease: it ends, nothing more is billed, the credit stays.
TEST_F(MachineConditionTest, StoppingAPausedLeaseEndsIt) {
  MachineId m = NewMachine(kProvider, 2);
  AskOn(m, Usd(1.0));
  Fund(kAlice, Usd(10));
  auto bid = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(bid.ok());
  Advance(kHour / 2);
  ASSERT_TRUE(Set(m, now_).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(9));
  ASSERT_TRUE(x_.StopLease(kAlice, bid->lease->id, ledger_, now_, &changes_).ok());
  Check();
  ASSERT_TRUE(Set(m, 0).ok());
  EXPECT_EQ(Wallet(kAlice), Usd(9));
  EXPECT_EQ(x_.FindLease(bid->lease->id)->end_reason, LeaseEndReason::kStopped);
  EXPECT_EQ(OnBook(), 2);
}

// Back online after the ask's window: no hour fits any more and the lease ends "window_ended";
// a wallet that cannot pay the new hour ends it "unpaid". Both at the moment of the resume.
TEST_F(MachineConditionTest, AResumeEndsLeasesThatCannotGoOn) {
  MachineId m = NewMachine(kProvider, 2);
  AskOn(m, Usd(3.0), 1, now_ + 3 * kHour);
  Fund(kAlice, Usd(6.5));
  auto a = Buy(kAlice, 1, std::nullopt);
  ASSERT_TRUE(a.ok());
  Fund(kBob, Usd(3.5));
  auto b = Buy(kBob, 1, std::nullopt);
  ASSERT_TRUE(b.ok());
  Advance(kHour / 2);
  ASSERT_TRUE(Set(m, now_).ok());  // each gets 1.50 back
  EXPECT_EQ(Wallet(kAlice), Usd(5.0));
  EXPECT_EQ(Wallet(kBob), Usd(2.0));
  Advance(kHour);
  ASSERT_TRUE(Set(m, 0).ok());  // 1.5 h after the start: Alice pays hour 2, Bob cannot
  EXPECT_EQ(Wallet(kAlice), Usd(2.0));
  EXPECT_EQ(x_.FindLease(b->lease->id)->end_reason, LeaseEndReason::kUnpaid);
  EXPECT_EQ(x_.FindLease(b->lease->id)->ended_at, now_);
  Advance(30 * kMinute);
  ASSERT_TRUE(Set(m, now_).ok());
  Advance(kHour);  // 3 h after the start: the window leaves no whole hour
  ASSERT_TRUE(Set(m, 0).ok());
  EXPECT_EQ(x_.FindLease(a->lease->id)->end_reason, LeaseEndReason::kWindowEnded);
}

// The provider already asked to be paid out everything: the payable cannot give its share back,
// so the platform advances it from revenue; the payable never goes below zero.
TEST_F(MachineConditionTest, WhatThePayableCannotCoverThePlatformAdvances) {
  MachineId m = NewMachine(kProvider, 1);
  AskOn(m, Usd(10.0));
  Fund(kAlice, Usd(50));
  ASSERT_TRUE(Buy(kAlice, 1, std::nullopt).ok());
  ASSERT_TRUE(x_.RequestPayout(kProvider, Usd(8.0), ledger_, now_, &changes_).ok());
  EXPECT_EQ(Payable(kProvider), Usd(1.0));  // 9.00 earned, 8.00 held for the payout
  Advance(6 * kMinute);
  ASSERT_TRUE(Set(m, now_).ok());  // 54 of 60 minutes: 9.00 back (fee part 0.90, provider 8.10)
  EXPECT_EQ(Wallet(kAlice), Usd(49.0));
  EXPECT_EQ(Payable(kProvider), 0);
  EXPECT_EQ(ledger_.FindTransfer(LeaseCreditTransferId(1, 1, "provider"))->amount_micros, Usd(1));
  EXPECT_EQ(ledger_.FindTransfer(LeaseCreditTransferId(1, 1, "advance"))->amount_micros,
            Usd(7.1));
  EXPECT_EQ(Revenue(), -Usd(7.0));  // 1.00 of fees - 0.90 - 7.10
  EXPECT_EQ(x_.FindLease(1)->credited_provider_micros, Usd(1));
}

// A EUR wallet gets back the same fraction of the euros it paid for the hour, whatever the rate
// is by then.
TEST_F(MachineConditionTest, AEuroWalletIsCreditedInEuros) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, now_).ok());
  MachineId m = NewMachine(kProvider, 1);
  AskOn(m, Usd(2.16));
  Fund(kAlice, Usd(100), Currency::kEur);
  ASSERT_TRUE(Buy(kAlice, 1, std::nullopt, TimeInForce::kIoc, "", 0, Currency::kEur).ok());
  const std::int64_t paid = Usd(100) - Wallet(kAlice, Currency::kEur);
  ASSERT_GT(paid, Usd(2.0));
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'500'000'000, 0, now_).ok());
  Advance(15 * kMinute);
  ASSERT_TRUE(Set(m, now_).ok());
  EXPECT_EQ(Wallet(kAlice, Currency::kEur),
            Usd(100) - paid + MulDivHalfEven(paid, 45, 60).value());
  EXPECT_EQ(x_.FindLease(1)->credited_micros, Usd(1.62));  // USD value: 2.16 x 3/4
}

// Blocked GPUs (unhealthy, or not found on the host) are never sold; a held machine sells
// nothing, and clearing the hold fills a resting bid at once. Running leases are left alone.
TEST_F(MachineConditionTest, BlockedGpusAndHeldMachinesAreNotSold) {
  MachineId m = NewMachine(kProvider, 4);
  AskOn(m, Usd(2.0));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Set(m, 0, 0b0101).ok());
  EXPECT_EQ(OnBook(), 2);
  auto a = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->lease->gpu_mask, 0b1010u) << "GPUs 1 and 3: the healthy ones";
  EXPECT_EQ(OnBook(), 0);
  EXPECT_EQ(Buy(kAlice, 1, std::nullopt)->bid.close_reason, BidCloseReason::kNoMatch);
  // GPU 1 goes bad under a running lease: the lease goes on.
  ASSERT_TRUE(Set(m, 0, 0b0111).ok());
  EXPECT_EQ(x_.FindLease(a->lease->id)->status, LeaseStatus::kActive);

  ASSERT_TRUE(Set(m, 0, 0, "the host reports 2 GPUs, the listing says 4").ok());
  EXPECT_EQ(OnBook(), 0);
  EXPECT_EQ(x_.FindMachine(m)->hold_reason, "the host reports 2 GPUs, the listing says 4");
  auto resting = Buy(kAlice, 2, Usd(2.5), TimeInForce::kGtc);
  ASSERT_TRUE(resting.ok());
  EXPECT_EQ(resting->bid.status, BidStatus::kResting);
  ASSERT_TRUE(Set(m, 0).ok());
  EXPECT_EQ(x_.FindBid(resting->bid.id)->status, BidStatus::kFilled);
  EXPECT_EQ(x_.FindLease(x_.FindBid(resting->bid.id)->lease_id)->gpu_mask, 0b0101u);
}

TEST_F(MachineConditionTest, RefusalsChangeNothing) {
  MachineId m = NewMachine(kProvider, 2);
  AskOn(m, Usd(2.0));
  const Snapshot before = x_.Records();
  EXPECT_EQ(Set(m + 7, 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Set(m, now_ + 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Set(m, 0, 0b100).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Set(m, 0, 0, std::string(kMaxHoldReasonBytes + 1, 'x')).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(x_.Records().machines, before.machines);
  EXPECT_EQ(OnBook(), 2);
}

// Paused leases and machine conditions survive a restore, and both exchanges go on alike.
TEST_F(MachineConditionTest, RestoreKeepsPausesAndConditions) {
  MachineId m = NewMachine(kProvider, 4);
  MachineId m2 = NewMachine(kProvider, 4);
  AskOn(m, Usd(2.0));
  AskOn(m2, Usd(2.5));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 2, std::nullopt).ok());
  Advance(10 * kMinute);
  ASSERT_TRUE(Set(m, now_ - kMinute, 0b1000).ok());
  ASSERT_TRUE(Set(m2, 0, 0b0001, "held").ok());
  auto restored = Exchange::Restore(Config(), x_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  ASSERT_TRUE(restored->CheckInvariants(ledger_).ok());
  EXPECT_EQ(restored->Records().machines, x_.Records().machines);
  EXPECT_EQ(restored->Records().leases, x_.Records().leases);
  ledger::Ledger copy = ledger_;
  Changes c1, c2;
  ASSERT_TRUE(x_.SetMachineCondition(m, {}, ledger_, now_ + kHour, &c1).ok());
  ASSERT_TRUE(restored->SetMachineCondition(m, {}, copy, now_ + kHour, &c2).ok());
  EXPECT_EQ(restored->Records().leases, x_.Records().leases);
  EXPECT_EQ(ledger_.Accounts(), copy.Accounts());
  // A restore refuses a lease billed on an offline machine.
  Snapshot broken = x_.Records();
  broken.machines[0].offline_since = now_;
  EXPECT_EQ(Exchange::Restore(Config(), broken).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace gpuhub::market
