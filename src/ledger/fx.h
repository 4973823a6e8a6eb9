// Foreign exchange: the rate table an admin sets, and conversions computed from it.
//
// One mid rate per currency pair, quoted like a market quote: (base EUR, quote USD, 1.08) means
// 1 EUR = 1.08 USD at mid. The same entry converts both ways; setting (USD, EUR) replaces the
// (EUR, USD) entry. Rates are exact decimals with up to 9 fraction digits, stored as integer parts
// per billion (1.08 -> 1'080'000'000). A spread in basis points is charged against the customer:
// the customer always pays in `from` and receives `to`, at the effective rate
//   r_eff = r_mid(from -> to) x (1 - spread_bps / 10000).
// Every conversion is one rational expression rounded once, in the platform's favour whatever the
// spread, in 128-bit integer arithmetic (no floating point anywhere): what the customer receives is
// rounded down, what the customer pays is rounded up. So a conversion never hands out more than
// its input is worth at mid, exactly:  to_micros x den_mid <= from_micros x num_mid, and no loop
// of conversions through one pair (or through pairs whose mid rates multiply to 1 around the
// loop) ends with more than it started. (Mid rates that an operator sets inconsistently around a
// triangle are an arbitrage no rounding can close: the spread has to cover it.)
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuhub::ledger {

// Parses a rate such as "1.08" or "0.000000001": digits, an optional point and 1..9 fraction
// digits, > 0 and <= 1000. Everything else (signs, exponents, spaces, 10 fraction digits, "0") is
// invalid_argument. Returns parts per billion.
Result<std::int64_t> ParseFxRatePpb(std::string_view text);
// 1'080'000'000 -> "1.08"; 1'000'000'000 -> "1"; trailing zeros trimmed, exact.
std::string FormatFxRatePpb(std::int64_t rate_ppb);

class FxTable;

// Whether an operator may set the pair (base, quote) to `rate_ppb` now: the rate within
// [kMinSettableFxRatePpb, kMaxSettableFxRatePpb], and, when `table` has a rate for the pair
// (quoted either way), within kMaxFxRateChangePercent of it, compared exactly in the same
// orientation. invalid_argument naming the field "rate" otherwise. Pure.
Status CheckFxRateUpdate(const FxTable& table, Currency base, Currency quote,
                         std::int64_t rate_ppb);

struct FxRate {
  Currency base = Currency::kEur;
  Currency quote = Currency::kUsd;
  std::int64_t mid_rate_ppb = 0;  // units of quote per unit of base, x 1e9
  std::int32_t spread_bps = 0;    // 0..kMaxFxSpreadBps
  std::int64_t version = 0;       // the FxRateChange that set it
  friend bool operator==(const FxRate&, const FxRate&) = default;
};

// One change of the table, as the ledger hands it out for persistence. Versions are 1, 2, 3, ...
// A change with mid_rate_ppb == 0 removes the pair (RemoveFxRate); otherwise it sets it.
struct FxRateChange {
  std::int64_t version = 0;
  Currency base = Currency::kEur;
  Currency quote = Currency::kUsd;
  std::int64_t mid_rate_ppb = 0;
  std::int32_t spread_bps = 0;
  TimestampMicros timestamp = 0;
  friend bool operator==(const FxRateChange&, const FxRateChange&) = default;
};

// The result of a conversion: the customer pays from_micros of `from` and receives to_micros of
// `to`. from == to is the identity (rate 1, no spread) so callers need no special case.
struct FxQuote {
  Currency from = Currency::kEur;
  Currency to = Currency::kUsd;
  std::int64_t from_micros = 0;  // > 0
  std::int64_t to_micros = 0;    // > 0
  // The rate entry used, as stored (so an invoice can print "1 EUR = 1.08 USD, spread 0.50%").
  Currency base = Currency::kEur;
  Currency quote = Currency::kUsd;
  std::int64_t mid_rate_ppb = 0;
  std::int32_t spread_bps = 0;
  std::int64_t rate_version = 0;  // 0 for the identity
  friend bool operator==(const FxQuote&, const FxQuote&) = default;
};

// The rate table. Pure value type; the Ledger owns one and persists its changes.
class FxTable {
 public:
  // Validates and applies a change (set or remove). Errors (invalid_argument): base == quote,
  // unknown currency, rate outside [kMinFxRatePpb, kMaxFxRatePpb] (or 0 with a non-zero spread for
  // a removal), spread outside [0, kMaxFxSpreadBps], timestamp <= 0, version != Version() + 1.
  // Removing a pair that has no rate is not_found.
  Status Apply(const FxRateChange& change);

  // The entry for the unordered pair {a, b}, whichever way it was quoted.
  std::optional<FxRate> Find(Currency a, Currency b) const;
  // All entries, ordered by (base, quote).
  std::vector<FxRate> All() const;
  // Number of changes applied so far (0 for a new table).
  std::int64_t Version() const { return version_; }

  // Customer pays exactly from_micros of `from`: to = from_micros x r_eff, rounded down.
  // Errors: from_micros outside 1..kMaxTransferAmountMicros or a result outside that range
  // (invalid_argument: "too small to convert" when it rounds to 0); no rate for the pair
  // (failed_precondition).
  Result<FxQuote> ConvertFrom(Currency from, Currency to, std::int64_t from_micros) const;
  // Customer must deliver exactly to_micros of `to`: from = to_micros / r_eff, rounded up.
  // Same errors as ConvertFrom. Used at settlement: a USD-priced lease hour paid from a EUR wallet
  // debits ConvertTo(EUR, USD, price).from_micros.
  Result<FxQuote> ConvertTo(Currency from, Currency to, std::int64_t to_micros) const;

  friend bool operator==(const FxTable&, const FxTable&) = default;

 private:
  // Unordered pair -> slot (min * N + max); the other half of the array stays empty.
  static std::size_t PairIndex(Currency a, Currency b);
  std::array<std::optional<FxRate>, kCurrencyCount * kCurrencyCount> rates_{};
  std::int64_t version_ = 0;
};

}  // namespace gpuhub::ledger
