#include "ledger/fx.h"

#include <gtest/gtest.h>

#include "ledger/limits.h"

namespace gpuhub::ledger {
namespace {

constexpr TimestampMicros kT = 1'700'000'000'000'000;

TEST(ParseFxRatePpb, AcceptsExactDecimals) {
  struct Case {
    const char* text;
    std::int64_t ppb;
  } cases[] = {
      {"1", 1'000'000'000},        {"1.08", 1'080'000'000},
      {"0.000000001", 1},          {"0.857", 857'000'000},
      {"1000", 1'000'000'000'000}, {"1000.000000000", 1'000'000'000'000},
      {"0001.5", 1'500'000'000},   {"123.456789012", 123'456'789'012},
  };
  for (const Case& c : cases) {
    auto r = ParseFxRatePpb(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.ppb) << c.text;
  }
}

TEST(ParseFxRatePpb, RejectsEverythingElse) {
  for (
      const char* text :
      {"",    "0",    "0.0",          "0.0000000000",        "-1",   "+1",      "1e3", " 1",  "1 ",
       "1.",  ".5",   "1.0000000001", "1000.000000001",      "1001", "9999999", "abc", "1,5", "nan",
       "inf", "1..2", "0x10",         "99999999999999999999"}) {
    auto r = ParseFxRatePpb(text);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
    }
  }
}

TEST(FormatFxRatePpb, ExactAndTrimmed) {
  EXPECT_EQ(FormatFxRatePpb(1'080'000'000), "1.08");
  EXPECT_EQ(FormatFxRatePpb(1'000'000'000), "1");
  EXPECT_EQ(FormatFxRatePpb(1), "0.000000001");
  EXPECT_EQ(FormatFxRatePpb(123'456'789'012), "123.456789012");
  for (std::int64_t ppb : {1LL, 7LL, 1'080'000'000LL, 999'999'999LL, 1'000'000'000'000LL}) {
    auto back = ParseFxRatePpb(FormatFxRatePpb(ppb));
    ASSERT_TRUE(back.ok()) << ppb;
    EXPECT_EQ(*back, ppb);
  }
}

FxTable TableWith(Currency base, Currency quote, std::int64_t ppb, std::int32_t spread_bps) {
  FxTable table;
  Status s = table.Apply({1, base, quote, ppb, spread_bps, kT});
  EXPECT_TRUE(s.ok()) << s.ToString();
  return table;
}

TEST(FxTable, ApplyValidates) {
  struct Case {
    FxRateChange change;
    StatusCode code;
  } cases[] = {
      {{1, Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kT}, StatusCode::kOk},
      {{1, Currency::kEur, Currency::kEur, 1'000'000'000, 0, kT}, StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, -1, 0, kT}, StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, kMaxFxRatePpb + 1, 0, kT}, StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, kMaxFxRatePpb, kMaxFxSpreadBps, kT}, StatusCode::kOk},
      {{1, Currency::kEur, Currency::kUsd, 1'000'000'000, kMaxFxSpreadBps + 1, kT},
       StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, 1'000'000'000, -1, kT}, StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, 1'000'000'000, 0, 0}, StatusCode::kInvalidArgument},
      {{2, Currency::kEur, Currency::kUsd, 1'000'000'000, 0, kT}, StatusCode::kInvalidArgument},
      {{0, Currency::kEur, Currency::kUsd, 1'000'000'000, 0, kT}, StatusCode::kInvalidArgument},
      {{1, Currency::kEur, Currency::kUsd, 0, 0, kT}, StatusCode::kNotFound},  // nothing to remove
      {{1, Currency::kEur, static_cast<Currency>(7), 1'000'000'000, 0, kT},
       StatusCode::kInvalidArgument},
  };
  for (const Case& c : cases) {
    FxTable table;
    Status s = table.Apply(c.change);
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_EQ(table.Version(), s.ok() ? 1 : 0);
  }
}

// An operator's rate: 0.1 .. 10 and at most 25% from the current rate per update, either way,
// compared in the orientation of the update. 0.000000001 used to be accepted and made absurd
// balances until overflow stopped the conversions.
TEST(CheckFxRateUpdate, BoundsTheRateAndEachUpdatesMove) {
  FxTable empty;
  auto check = [](const FxTable& t, Currency base, Currency quote, std::int64_t ppb) {
    return CheckFxRateUpdate(t, base, quote, ppb);
  };
  EXPECT_TRUE(check(empty, Currency::kEur, Currency::kUsd, 1'080'000'000).ok());
  EXPECT_TRUE(check(empty, Currency::kEur, Currency::kUsd, kMinSettableFxRatePpb).ok());
  EXPECT_TRUE(check(empty, Currency::kEur, Currency::kUsd, kMaxSettableFxRatePpb).ok());
  for (std::int64_t absurd :
       {std::int64_t{1}, kMinSettableFxRatePpb - 1, kMaxSettableFxRatePpb + 1, kMaxFxRatePpb}) {
    Status s = check(empty, Currency::kEur, Currency::kUsd, absurd);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << absurd;
    EXPECT_EQ(s.field(), "rate");
    EXPECT_NE(s.message().find("outside 0.1 .. 10"), std::string::npos) << s.message();
  }
  FxTable table = TableWith(Currency::kEur, Currency::kUsd, 1'000'000'000, 50);
  // Same orientation: 0.75 .. 1.25 of 1.0, exactly at the edges.
  EXPECT_TRUE(check(table, Currency::kEur, Currency::kUsd, 1'250'000'000).ok());
  EXPECT_TRUE(check(table, Currency::kEur, Currency::kUsd, 750'000'000).ok());
  Status up = check(table, Currency::kEur, Currency::kUsd, 1'250'000'001);
  EXPECT_EQ(up.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(up.field(), "rate");
  EXPECT_NE(up.message().find("moves more than 25% from the current 1"), std::string::npos)
      << up.message();
  EXPECT_FALSE(check(table, Currency::kEur, Currency::kUsd, 749'999'999).ok());
  // The other orientation compares with the inverse: 1 EUR = 1.08 USD is 1 USD = 0.9259.. EUR,
  // so a USD/EUR update may be 0.75/1.08 .. 1.25/1.08 = 0.694444.. .. 1.157407..
  FxTable eur_usd = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 50);
  EXPECT_TRUE(check(eur_usd, Currency::kUsd, Currency::kEur, 925'925'926).ok());
  EXPECT_TRUE(check(eur_usd, Currency::kUsd, Currency::kEur, 1'157'407'407).ok());
  EXPECT_FALSE(check(eur_usd, Currency::kUsd, Currency::kEur, 1'157'407'408).ok());
  EXPECT_TRUE(check(eur_usd, Currency::kUsd, Currency::kEur, 694'444'445).ok());
  EXPECT_FALSE(check(eur_usd, Currency::kUsd, Currency::kEur, 694'444'444).ok());
  EXPECT_NE(check(eur_usd, Currency::kUsd, Currency::kEur, 500'000'000)
                .message()
                .find("from the current 1/1.08"),
            std::string::npos);
  // Another pair is not constrained by this one.
  EXPECT_TRUE(check(eur_usd, Currency::kGbp, Currency::kUsd, 2'000'000'000).ok());
}

TEST(FxTable, OneEntryPerPairAndRemoval) {
  FxTable table = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 50);
  ASSERT_TRUE(table.Find(Currency::kUsd, Currency::kEur).has_value());
  EXPECT_EQ(table.Find(Currency::kUsd, Currency::kEur)->base, Currency::kEur);
  EXPECT_FALSE(table.Find(Currency::kGbp, Currency::kUsd).has_value());
  // Quoting the pair the other way replaces the entry.
  ASSERT_TRUE(table.Apply({2, Currency::kUsd, Currency::kEur, 925'000'000, 0, kT}).ok());
  auto rate = table.Find(Currency::kEur, Currency::kUsd);
  ASSERT_TRUE(rate.has_value());
  EXPECT_EQ(rate->base, Currency::kUsd);
  EXPECT_EQ(rate->mid_rate_ppb, 925'000'000);
  EXPECT_EQ(rate->version, 2);
  EXPECT_EQ(table.All().size(), 1u);
  // A removal takes no spread, then removes.
  EXPECT_EQ(table.Apply({3, Currency::kEur, Currency::kUsd, 0, 10, kT}).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(table.Apply({3, Currency::kEur, Currency::kUsd, 0, 0, kT}).ok());
  EXPECT_FALSE(table.Find(Currency::kEur, Currency::kUsd).has_value());
  EXPECT_TRUE(table.All().empty());
  EXPECT_EQ(table.Version(), 3);
}

TEST(FxTable, ConvertsWithSpreadAgainstTheCustomer) {
  // 1 EUR = 1.08 USD, 0.5% spread: r_eff(EUR->USD) = 1.08 x 0.995 = 1.0746.
  FxTable table = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 50);
  auto q = table.ConvertFrom(Currency::kEur, Currency::kUsd, 100'000'000);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->to_micros, 107'460'000);
  EXPECT_EQ(q->from_micros, 100'000'000);
  EXPECT_EQ(q->mid_rate_ppb, 1'080'000'000);
  EXPECT_EQ(q->spread_bps, 50);
  EXPECT_EQ(q->rate_version, 1);
  // The other way through the same entry: 107.46 / 1.08 x 0.995 = 99.0025 EUR.
  auto back = table.ConvertFrom(Currency::kUsd, Currency::kEur, 107'460'000);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->to_micros, 99'002'500);
  // Delivering an exact target: 107.46 USD costs exactly 100 EUR.
  auto need = table.ConvertTo(Currency::kEur, Currency::kUsd, 107'460'000);
  ASSERT_TRUE(need.ok());
  EXPECT_EQ(need->from_micros, 100'000'000);
  EXPECT_EQ(need->to_micros, 107'460'000);
  // A 2.16 USD lease hour from a EUR wallet: 2.16 / 1.0746 = 2.01005025... -> 2.010050 EUR.
  auto hour = table.ConvertTo(Currency::kEur, Currency::kUsd, 2'160'000);
  ASSERT_TRUE(hour.ok());
  EXPECT_EQ(hour->from_micros, 2'010'050);
  // Paying USD for EUR: 10 EUR cost 10 x 1.08 / 0.995 = 10.854271... USD.
  auto usd = table.ConvertTo(Currency::kUsd, Currency::kEur, 10'000'000);
  ASSERT_TRUE(usd.ok());
  EXPECT_EQ(usd->from_micros, 10'854'271);
}

TEST(FxTable, RoundsHalfEvenOnce) {
  FxTable table = TableWith(Currency::kGbp, Currency::kUsd, 1'500'000'000, 0);
  struct Case {
    std::int64_t from;
    std::int64_t to;
  } cases[] = {{1, 2}, {3, 4}, {5, 8}, {7, 10}, {2, 3}};  // 1.5, 4.5, 7.5, 10.5, 3
  for (const Case& c : cases) {
    auto q = table.ConvertFrom(Currency::kGbp, Currency::kUsd, c.from);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->to_micros, c.to) << c.from;
  }
}

TEST(FxTable, ConvertToRoundsHalfEvenToo) {
  // 1 GBP = 2 USD: delivering n USD costs n / 2 GBP.
  FxTable table = TableWith(Currency::kGbp, Currency::kUsd, 2'000'000'000, 0);
  struct Case {
    std::int64_t to;
    std::int64_t from;
  } cases[] = {{3, 2}, {5, 2}, {7, 4}, {9, 4}, {4, 2}};  // 1.5, 2.5, 3.5, 4.5, 2
  for (const Case& c : cases) {
    auto q = table.ConvertTo(Currency::kGbp, Currency::kUsd, c.to);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->from_micros, c.from) << c.to;
  }
  // 0.5 rounds to the even 0: nothing to charge, so it is refused rather than given away.
  EXPECT_EQ(table.ConvertTo(Currency::kGbp, Currency::kUsd, 1).status().code(),
            StatusCode::kInvalidArgument);
  // Rounding up, not truncating: 1 micro at 1.0746 costs 0.93 -> 1 micro.
  FxTable eur = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 50);
  EXPECT_EQ(eur.ConvertTo(Currency::kEur, Currency::kUsd, 1)->from_micros, 1);
  EXPECT_EQ(eur.ConvertTo(Currency::kEur, Currency::kUsd, 2)->from_micros, 2);  // 1.86
  EXPECT_EQ(eur.ConvertTo(Currency::kUsd, Currency::kEur, 1)->from_micros, 1);  // 1.085
}

TEST(FxTable, Errors) {
  FxTable table = TableWith(Currency::kEur, Currency::kUsd, 1, 0);  // 1e-9
  auto missing = table.ConvertFrom(Currency::kGbp, Currency::kUsd, 1'000'000);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("GBP/USD"), std::string::npos);
  auto tiny = table.ConvertFrom(Currency::kEur, Currency::kUsd, 1'000);  // 1e-12 USD
  ASSERT_FALSE(tiny.ok());
  EXPECT_EQ(tiny.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(tiny.status().message().find("too small"), std::string::npos);
  auto huge = table.ConvertFrom(Currency::kUsd, Currency::kEur, kMaxTransferAmountMicros);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  for (std::int64_t bad : {std::int64_t{0}, std::int64_t{-5}, kMaxTransferAmountMicros + 1}) {
    EXPECT_EQ(table.ConvertFrom(Currency::kEur, Currency::kUsd, bad).status().code(),
              StatusCode::kInvalidArgument);
    EXPECT_EQ(table.ConvertTo(Currency::kEur, Currency::kUsd, bad).status().code(),
              StatusCode::kInvalidArgument);
  }
}

TEST(FxTable, SameCurrencyIsIdentity) {
  FxTable table;
  auto q = table.ConvertTo(Currency::kUsd, Currency::kUsd, 1'234'567);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->from_micros, 1'234'567);
  EXPECT_EQ(q->to_micros, 1'234'567);
  EXPECT_EQ(q->spread_bps, 0);
  EXPECT_EQ(q->rate_version, 0);
}

TEST(FxTable, ExtremesDoNotOverflow) {
  FxTable big = TableWith(Currency::kEur, Currency::kUsd, kMaxFxRatePpb, kMaxFxSpreadBps);
  auto a = big.ConvertTo(Currency::kUsd, Currency::kEur, kMaxTransferAmountMicros);
  EXPECT_FALSE(a.ok());  // would need 1000x the maximum
  auto b = big.ConvertTo(Currency::kEur, Currency::kUsd, kMaxTransferAmountMicros);
  ASSERT_TRUE(b.ok());
  // 1e18 / (1000 x 0.9) = 1.111...e15
  EXPECT_EQ(b->from_micros, 1'111'111'111'111'111);
}

}  // namespace
}  // namespace gpuhub::ledger
