// Money: integer micro-units (1e-6) of a named currency. Never a floating-point number.
//
// Contract: all arithmetic is checked; overflow and currency mismatch are errors (Result), never
// wrap-around. Decimal strings are the only external representation ("12.500000"): JSON carries
// amounts as strings, never as numbers. Rounding happens only in the MulDiv helpers below and only
// where a rule says so: half-even for fees at settlement, toward the platform for FX conversions
// (ledger/fx.h: what the customer receives rounded down, what the customer pays rounded up).
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub {

enum class Currency : std::uint8_t { kUsd = 0, kEur = 1, kGbp = 2 };
inline constexpr int kCurrencyCount = 3;
inline constexpr Currency kAllCurrencies[] = {Currency::kUsd, Currency::kEur, Currency::kGbp};

std::string_view CurrencyCode(Currency currency);  // "USD"
// Accepts "USD", "EUR", "GBP" (upper case only: codes are identifiers, not prose).
Result<Currency> ParseCurrency(std::string_view code);

inline constexpr std::int64_t kMicrosPerUnit = 1'000'000;
// Largest amount the platform handles in one figure: 10^12 units (a trillion dollars). Anything above
// is a typo or an attack; keeping far below INT64_MAX leaves room for sums of many amounts.
inline constexpr std::int64_t kMaxAmountMicros = 1'000'000'000'000LL * kMicrosPerUnit;

struct Money {
  std::int64_t micros = 0;
  Currency currency = Currency::kUsd;

  static Money Usd(std::int64_t micros) { return {micros, Currency::kUsd}; }
  friend bool operator==(const Money&, const Money&) = default;
};

// Parses a non-negative decimal amount with at most `max_fraction_digits` digits after the point
// ("100", "100.5", "0.000001"). Rejects signs, exponents, spaces, empty strings, more fraction
// digits than allowed (no silent rounding) and values above kMaxAmountMicros.
Result<std::int64_t> ParseDecimalMicros(std::string_view text, int max_fraction_digits = 6);

// Formats micros with exactly `fraction_digits` digits (6 by default): 12500000 -> "12.500000".
// With fewer digits the value must be representable exactly (checked); negative values get '-'.
std::string FormatMicros(std::int64_t micros, int fraction_digits = 6);

// Checked integer helpers: false on overflow.
bool CheckedAdd(std::int64_t a, std::int64_t b, std::int64_t* out);
bool CheckedSub(std::int64_t a, std::int64_t b, std::int64_t* out);
bool CheckedMul(std::int64_t a, std::int64_t b, std::int64_t* out);

// round_half_even(a * b / c), computed in 128 bits. c must be > 0. Errors on overflow of the result.
Result<std::int64_t> MulDivHalfEven(std::int64_t a, std::int64_t b, std::int64_t c);
// floor(a * b / c) and ceil(a * b / c) (toward -inf and +inf), computed in 128 bits. c must be > 0.
// Errors on overflow of the result.
Result<std::int64_t> MulDivFloor(std::int64_t a, std::int64_t b, std::int64_t c);
Result<std::int64_t> MulDivCeil(std::int64_t a, std::int64_t b, std::int64_t c);

Result<Money> Add(Money a, Money b);
Result<Money> Subtract(Money a, Money b);

}  // namespace gpuhub
