#include "market/types.h"

#include <gtest/gtest.h>

#include "market/limits.h"

namespace gpuhub::market {
namespace {

TEST(PriceTest, ParsesDecimalStringsOnTheTick) {
  struct Case {
    const char* text;
    std::int64_t micros;  // -1: invalid
  };
  const Case cases[] = {
      {"2.880", 2'880'000},
      {"2.88", 2'880'000},
      {"3", 3'000'000},
      {"0.001", 1'000},
      {"1000", 1'000'000'000},
      {"1000.001", -1},
      {"0", -1},
      {"0.000", -1},
      {"2.8805", -1},
      {"-1", -1},
      {"+1", -1},
      {"1e3", -1},
      {"", -1},
      {" 2.88", -1},
      {"2.88 ", -1},
      {"abc", -1},
  };
  for (const auto& c : cases) {
    auto r = ParsePriceMicros(c.text, "price");
    if (c.micros < 0) {
      EXPECT_FALSE(r.ok()) << c.text;
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      }
    } else {
      ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
      EXPECT_EQ(*r, c.micros) << c.text;
    }
  }
}

TEST(PriceTest, ValidatesTheTick) {
  EXPECT_TRUE(ValidatePriceMicros(2'880'000, "p").ok());
  EXPECT_FALSE(ValidatePriceMicros(2'880'500, "p").ok());
  EXPECT_FALSE(ValidatePriceMicros(0, "p").ok());
  EXPECT_FALSE(ValidatePriceMicros(-1'000, "p").ok());
  EXPECT_FALSE(ValidatePriceMicros(kMaxPriceMicrosPerGpuHour + kPriceTickMicros, "p").ok());
  EXPECT_NE(ValidatePriceMicros(2'880'500, "limit_usd_per_gpu_hour").message().find("0.001 tick"),
            std::string::npos);
}

TEST(PriceTest, FormatsThreeDecimals) {
  EXPECT_EQ(FormatPrice(2'880'000), "2.880");
  EXPECT_EQ(FormatPrice(1'000), "0.001");
  EXPECT_EQ(FormatPrice(8'990'000), "8.990");
  EXPECT_EQ(FormatPrice(1'234'567), "1.234567");  // not on the tick: every digit, never rounded
}

TEST(NamesTest, GpuKeyIgnoresCaseSpacesAndDashes) {
  EXPECT_EQ(GpuKey("H100 SXM"), "h100sxm");
  EXPECT_EQ(GpuKey("h100-sxm"), "h100sxm");
  EXPECT_EQ(GpuKey("H100_SXM"), "h100sxm");
  EXPECT_EQ(GpuKey("  "), "");
}

TEST(NamesTest, CanonicalRegion) {
  EXPECT_EQ(CanonicalRegion("iad-1").value(), "IAD-1");
  EXPECT_EQ(CanonicalRegion("DFW-1").value(), "DFW-1");
  EXPECT_FALSE(CanonicalRegion("").ok());
  EXPECT_FALSE(CanonicalRegion("1AD").ok());
  EXPECT_FALSE(CanonicalRegion("IAD 1").ok());
  EXPECT_FALSE(CanonicalRegion(std::string(kMaxRegionBytes + 1, 'A')).ok());
}

TEST(NamesTest, EnumsRoundTrip) {
  for (auto v :
       {BidStatus::kResting, BidStatus::kFilled, BidStatus::kCancelled, BidStatus::kExpired}) {
    EXPECT_EQ(ParseBidStatus(BidStatusName(v)).value(), v);
  }
  for (auto v : {BidCloseReason::kNone, BidCloseReason::kFilled, BidCloseReason::kNoMatch,
                 BidCloseReason::kCancelledByUser, BidCloseReason::kExpired,
                 BidCloseReason::kInsufficientFunds, BidCloseReason::kNoFxRate}) {
    EXPECT_EQ(ParseBidCloseReason(BidCloseReasonName(v)).value(), v);
  }
  for (auto v : {LeaseEndReason::kNone, LeaseEndReason::kStopped, LeaseEndReason::kUnpaid,
                 LeaseEndReason::kWindowEnded, LeaseEndReason::kNoFxRate}) {
    EXPECT_EQ(ParseLeaseEndReason(LeaseEndReasonName(v)).value(), v);
  }
  EXPECT_EQ(ParseTimeInForce("gtc").value(), TimeInForce::kGtc);
  EXPECT_EQ(ParseTimeInForce("ioc").value(), TimeInForce::kIoc);
  auto bad = ParseTimeInForce("fok");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "time_in_force must be one of ioc, gtc, got 'fok'");
  EXPECT_EQ(AskStatusName(AskStatus::kExpired), "expired");
  EXPECT_EQ(LeaseEndReasonName(LeaseEndReason::kNoFxRate), "no_fx_rate");
  EXPECT_EQ(BidCloseReasonName(BidCloseReason::kNoFxRate), "no_fx_rate");
  EXPECT_EQ(PayoutStatusName(PayoutStatus::kPaid), "paid");
  EXPECT_EQ(SideName(Side::kBid), "bid");
}

TEST(NamesTest, TransferIds) {
  EXPECT_EQ(BidHoldTransferId(7), "bid:7:hold");
  EXPECT_EQ(BidVoidTransferId(7), "bid:7:void");
  EXPECT_EQ(LeaseHourTransferId(3, 12, "provider"), "lease:3:h12:provider");
  EXPECT_EQ(PayoutTransferId(5), "payout:5");
}

TEST(LeaseTest, HourAndPaidUntil) {
  Lease l;
  l.price_micros = 2'880'000;
  l.gpus = 2;
  l.started_at = 1'000;
  l.hours_paid = 3;
  EXPECT_EQ(l.HourMicros(), 5'760'000);
  EXPECT_EQ(l.PaidUntil(), 1'000 + 3 * kMicrosPerHour);
}

}  // namespace
}  // namespace gpuhub::market
