#include "ledger/fx.h"

#include <gtest/gtest.h>

#include <random>

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
  // A 2.16 USD lease hour from a EUR wallet: 2.16 / 1.0746 = 2.01005025... -> 2.010051 EUR (what
  // the customer pays rounds up).
  auto hour = table.ConvertTo(Currency::kEur, Currency::kUsd, 2'160'000);
  ASSERT_TRUE(hour.ok());
  EXPECT_EQ(hour->from_micros, 2'010'051);
  // Paying USD for EUR: 10 EUR cost 10 x 1.08 / 0.995 = 10.854271... -> 10.854272 USD.
  auto usd = table.ConvertTo(Currency::kUsd, Currency::kEur, 10'000'000);
  ASSERT_TRUE(usd.ok());
  EXPECT_EQ(usd->from_micros, 10'854'272);
}

TEST(FxTable, ConvertFromRoundsWhatTheCustomerReceivesDown) {
  FxTable table = TableWith(Currency::kGbp, Currency::kUsd, 1'500'000'000, 0);
  struct Case {
    std::int64_t from;
    std::int64_t to;
  } cases[] = {{1, 1}, {3, 4}, {5, 7}, {7, 10}, {2, 3}};  // 1.5, 4.5, 7.5, 10.5, 3
  for (const Case& c : cases) {
    auto q = table.ConvertFrom(Currency::kGbp, Currency::kUsd, c.from);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->to_micros, c.to) << c.from;
  }
}

TEST(FxTable, ConvertToRoundsWhatTheCustomerPaysUp) {
  // 1 GBP = 2 USD: delivering n USD costs n / 2 GBP.
  FxTable table = TableWith(Currency::kGbp, Currency::kUsd, 2'000'000'000, 0);
  struct Case {
    std::int64_t to;
    std::int64_t from;
  } cases[] = {{1, 1}, {3, 2}, {5, 3}, {7, 4}, {9, 5}, {4, 2}};  // 0.5, 1.5, 2.5, 3.5, 4.5, 2
  for (const Case& c : cases) {
    auto q = table.ConvertTo(Currency::kGbp, Currency::kUsd, c.to);
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->from_micros, c.from) << c.to;
  }
  // 1 micro at 1.0746 costs 0.93 -> 1 micro.
  FxTable eur = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 50);
  EXPECT_EQ(eur.ConvertTo(Currency::kEur, Currency::kUsd, 1)->from_micros, 1);
  EXPECT_EQ(eur.ConvertTo(Currency::kEur, Currency::kUsd, 2)->from_micros, 2);  // 1.86
  EXPECT_EQ(eur.ConvertTo(Currency::kUsd, Currency::kEur, 1)->from_micros, 2);  // 1.085
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
  // 1e18 / (1000 x 0.9) = 1.111...e15, rounded up
  EXPECT_EQ(b->from_micros, 1'111'111'111'111'112);
}

// The report: at 0 bps half-even rounding let USD -> EUR -> USD make money. 1.000019 USD is
// 0.92594351... EUR, which rounded up to 0.925944, and 0.925944 EUR is 1.00001952 USD, which
// rounded up again to 1.000020: 0.000001 per trip. Rounded down both times it ends at 1.000018.
TEST(FxTable, AZeroSpreadRoundTripMakesNoMoney) {
  FxTable table = TableWith(Currency::kEur, Currency::kUsd, 1'080'000'000, 0);
  auto eur = table.ConvertFrom(Currency::kUsd, Currency::kEur, 1'000'019);
  ASSERT_TRUE(eur.ok());
  EXPECT_EQ(eur->to_micros, 925'943);
  auto usd = table.ConvertFrom(Currency::kEur, Currency::kUsd, eur->to_micros);
  ASSERT_TRUE(usd.ok());
  EXPECT_EQ(usd->to_micros, 1'000'018);
  // A thousand trips from there: never above where it started.
  std::int64_t amount = 1'000'019;
  for (int trip = 0; trip < 1000; ++trip) {
    std::int64_t there = table.ConvertFrom(Currency::kUsd, Currency::kEur, amount)->to_micros;
    std::int64_t back = table.ConvertFrom(Currency::kEur, Currency::kUsd, there)->to_micros;
    ASSERT_LE(back, amount) << "trip " << trip;
    amount = back;
  }
  EXPECT_LE(amount, 1'000'018);
}

// Exact value at mid, in nano-micros of one reference currency, of each currency's micro.
struct MidValues {
  std::array<__int128, kCurrencyCount> per_micro{};
  __int128 Of(Currency c, std::int64_t micros) const {
    return per_micro[static_cast<int>(c)] * micros;
  }
};

std::string Str(__int128 v) {
  if (v == 0) return "0";
  bool negative = v < 0;
  std::string out;
  for (; v != 0; v /= 10) {
    int digit = static_cast<int>(v % 10);
    out.insert(out.begin(), static_cast<char>('0' + (negative ? -digit : digit)));
  }
  return negative ? "-" + out : out;
}

// Applies q to `held` after checking, exactly, that what it hands out is worth no more at mid than
// what it takes; returns false (with a failure) otherwise.
bool ApplyChecked(const FxQuote& q, const MidValues& mid, std::array<std::int64_t, 3>& held) {
  EXPECT_TRUE(mid.Of(q.to, q.to_micros) <= mid.Of(q.from, q.from_micros))
      << FormatMicros(q.from_micros) << " " << CurrencyCode(q.from) << " -> "
      << FormatMicros(q.to_micros) << " " << CurrencyCode(q.to) << " at "
      << FormatFxRatePpb(q.mid_rate_ppb) << ", " << q.spread_bps << " bps";
  if (mid.Of(q.to, q.to_micros) > mid.Of(q.from, q.from_micros)) return false;
  held[static_cast<int>(q.from)] -= q.from_micros;
  held[static_cast<int>(q.to)] += q.to_micros;
  return true;
}

__int128 Total(const MidValues& mid, const std::array<std::int64_t, 3>& held) {
  __int128 total = 0;
  for (Currency c : kAllCurrencies) total += mid.Of(c, held[static_cast<int>(c)]);
  return total;
}

// Awkward amounts: tiny, just over a power of ten, primes, random up to a billion units.
std::int64_t AwkwardAmount(std::mt19937_64& rng) {
  static constexpr std::int64_t kFixed[] = {1,         2,         3,         7,
                                            999'999,   1'000'001, 1'000'019, 10'010,
                                            9'999'991, 123'457,   kMaxTransferAmountMicros / 7};
  switch (rng() % 3) {
    case 0:
      return kFixed[rng() % std::size(kFixed)];
    case 1:
      return 1 + static_cast<std::int64_t>(rng() % 100'000'000);
    default:
      return 1 + static_cast<std::int64_t>(rng() % 1'000'000'000'000'000);
  }
}

std::int32_t SomeSpread(std::mt19937_64& rng) {
  static constexpr std::int32_t kSpreads[] = {0, 0, 0, 1, 3, 25, 50, 333, kMaxFxSpreadBps};
  return kSpreads[rng() % std::size(kSpreads)];
}

// Any pair of USD/EUR/GBP, quoted either way, any rate the table takes, any spread: conversions
// back and forth (ConvertFrom and ConvertTo mixed, whole balances and parts) never raise the
// holdings' value at mid, and converting everything back ends with no more than the start.
TEST(FxTable, NoLoopThroughOnePairEndsWithMore) {
  std::mt19937_64 rng(20250125);
  for (int trial = 0; trial < 2000; ++trial) {
    Currency base = kAllCurrencies[rng() % kCurrencyCount];
    Currency quote = kAllCurrencies[rng() % kCurrencyCount];
    if (base == quote) quote = kAllCurrencies[(static_cast<int>(base) + 1) % kCurrencyCount];
    // Rates from 0.1 to 10 with all nine decimals, and sometimes the table's own extremes.
    std::int64_t ppb = trial % 10 == 0 ? (trial % 20 == 0 ? kMinFxRatePpb : kMaxFxRatePpb)
                                       : 100'000'000 + static_cast<std::int64_t>(
                                                           rng() % 9'900'000'001);
    std::int32_t spread = SomeSpread(rng);
    SCOPED_TRACE(std::string(CurrencyCode(base)) + "/" + std::string(CurrencyCode(quote)) + " " +
                 FormatFxRatePpb(ppb) + " " + std::to_string(spread) + " bps, trial " +
                 std::to_string(trial));
    FxTable table = TableWith(base, quote, ppb, spread);
    // 1 micro of base is worth ppb nano-micros of quote; 1 micro of quote, 1e9.
    MidValues mid;
    mid.per_micro[static_cast<int>(base)] = ppb;
    mid.per_micro[static_cast<int>(quote)] = kFxRateScale;
    Currency start = rng() % 2 == 0 ? base : quote;
    Currency other = start == base ? quote : base;
    std::array<std::int64_t, 3> held{};
    const std::int64_t start_micros = AwkwardAmount(rng);
    held[static_cast<int>(start)] = start_micros;
    __int128 value = Total(mid, held);
    for (int step = 0; step < 40; ++step) {
      Currency from = rng() % 2 == 0 ? start : other;
      Currency to = from == start ? other : start;
      std::int64_t have = held[static_cast<int>(from)];
      if (have == 0) std::swap(from, to), have = held[static_cast<int>(from)];
      Result<FxQuote> q = Status::Internal("none");
      switch (rng() % 3) {
        case 0:  // all of it
          q = table.ConvertFrom(from, to, have);
          break;
        case 1:  // a part
          q = table.ConvertFrom(from, to, 1 + static_cast<std::int64_t>(rng() % have));
          break;
        default: {  // an exact amount to receive, when affordable
          auto worth = table.ConvertFrom(from, to, have);
          if (!worth.ok()) continue;
          q = table.ConvertTo(from, to, 1 + static_cast<std::int64_t>(rng() % worth->to_micros));
          if (q.ok() && q->from_micros > have) continue;
        }
      }
      if (!q.ok()) continue;  // too small or too large to convert: nothing moved
      ASSERT_TRUE(ApplyChecked(*q, mid, held)) << "step " << step;
      __int128 now = Total(mid, held);
      ASSERT_TRUE(now <= value) << "step " << step << ": " << Str(now) << " > " << Str(value);
      value = now;
    }
    if (held[static_cast<int>(other)] > 0) {
      auto home = table.ConvertFrom(other, start, held[static_cast<int>(other)]);
      if (home.ok()) {
        ASSERT_TRUE(ApplyChecked(*home, mid, held));
      }
    }
    EXPECT_LE(held[static_cast<int>(start)], start_micros);
  }
}

// The same round trips, many in a row, at 0 bps and at other spreads: the amount never grows.
TEST(FxTable, ManyRoundTripsNeverGrow) {
  std::mt19937_64 rng(7);
  for (std::int32_t spread : {0, 1, 50, kMaxFxSpreadBps}) {
    for (int pair = 0; pair < 30; ++pair) {
      std::int64_t ppb = 100'000'000 + static_cast<std::int64_t>(rng() % 9'900'000'001);
      Currency a = kAllCurrencies[pair % kCurrencyCount];
      Currency b = kAllCurrencies[(pair + 1) % kCurrencyCount];
      FxTable table = TableWith(a, b, ppb, spread);
      const std::int64_t start = AwkwardAmount(rng);
      std::int64_t amount = start;
      for (int trip = 0; trip < 200; ++trip) {
        auto there = table.ConvertFrom(b, a, amount);
        if (!there.ok()) break;
        auto back = table.ConvertFrom(a, b, there->to_micros);
        if (!back.ok()) break;
        ASSERT_LE(back->to_micros, amount)
            << FormatFxRatePpb(ppb) << " " << spread << " bps, trip " << trip;
        amount = back->to_micros;
      }
      EXPECT_LE(amount, start);
    }
  }
}

// USD, EUR and GBP with mid rates that agree around the triangle (EUR/USD = EUR/GBP x GBP/USD
// exactly): random walks through all three pairs, at random spreads, never raise the holdings'
// value at mid, in USD nano-micros, exactly.
TEST(FxTable, NoWalkThroughThreeConsistentPairsEndsWithMore) {
  std::mt19937_64 rng(424242);
  for (int trial = 0; trial < 1000; ++trial) {
    // GBP/USD with 4 decimals (m / 1e4) and EUR/GBP with 5 (n / 1e5): their product has 9.
    std::int64_t m = 1'000 + static_cast<std::int64_t>(rng() % 99'001);     // 0.1 .. 10
    std::int64_t n = 10'000 + static_cast<std::int64_t>(rng() % 990'001);   // 0.1 .. 10
    std::int64_t gbp_usd = m * 100'000, eur_gbp = n * 10'000, eur_usd = m * n;
    if (eur_usd < kMinFxRatePpb || eur_usd > kMaxFxRatePpb) continue;
    FxTable table;
    ASSERT_TRUE(
        table.Apply({1, Currency::kGbp, Currency::kUsd, gbp_usd, SomeSpread(rng), kT}).ok());
    ASSERT_TRUE(
        table.Apply({2, Currency::kEur, Currency::kGbp, eur_gbp, SomeSpread(rng), kT}).ok());
    ASSERT_TRUE(
        table.Apply({3, Currency::kEur, Currency::kUsd, eur_usd, SomeSpread(rng), kT}).ok());
    SCOPED_TRACE("GBP/USD " + FormatFxRatePpb(gbp_usd) + ", EUR/GBP " + FormatFxRatePpb(eur_gbp) +
                 ", EUR/USD " + FormatFxRatePpb(eur_usd) + ", trial " + std::to_string(trial));
    MidValues mid;
    mid.per_micro[static_cast<int>(Currency::kUsd)] = kFxRateScale;
    mid.per_micro[static_cast<int>(Currency::kEur)] = eur_usd;
    mid.per_micro[static_cast<int>(Currency::kGbp)] = gbp_usd;
    std::array<std::int64_t, 3> held{};
    const std::int64_t start_micros = AwkwardAmount(rng);
    held[static_cast<int>(Currency::kUsd)] = start_micros;
    __int128 value = Total(mid, held);
    for (int step = 0; step < 30; ++step) {
      Currency from = kAllCurrencies[rng() % kCurrencyCount];
      Currency to = kAllCurrencies[(static_cast<int>(from) + 1 + rng() % 2) % kCurrencyCount];
      std::int64_t have = held[static_cast<int>(from)];
      if (have == 0) continue;
      auto q = rng() % 2 == 0
                   ? table.ConvertFrom(from, to, have)
                   : table.ConvertFrom(from, to, 1 + static_cast<std::int64_t>(rng() % have));
      if (!q.ok()) continue;
      ASSERT_TRUE(ApplyChecked(*q, mid, held)) << "step " << step;
      __int128 now = Total(mid, held);
      ASSERT_TRUE(now <= value) << "step " << step << ": " << Str(now) << " > " << Str(value);
      value = now;
    }
    for (Currency c : {Currency::kEur, Currency::kGbp}) {
      if (held[static_cast<int>(c)] == 0) continue;
      auto home = table.ConvertFrom(c, Currency::kUsd, held[static_cast<int>(c)]);
      if (home.ok()) {
        ASSERT_TRUE(ApplyChecked(*home, mid, held));
      }
    }
    EXPECT_LE(held[static_cast<int>(Currency::kUsd)], start_micros);
  }
}

}  // namespace
}  // namespace gpuhub::ledger
