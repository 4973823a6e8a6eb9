#include "core/money.h"

#include <limits>

namespace gpuhub {

std::string_view CurrencyCode(Currency currency) {
  switch (currency) {
    case Currency::kUsd: return "USD";
    case Currency::kEur: return "EUR";
    case Currency::kGbp: return "GBP";
  }
  return "???";
}

Result<Currency> ParseCurrency(std::string_view code) {
  for (Currency c : kAllCurrencies) {
    if (CurrencyCode(c) == code) return c;
  }
  return Status::InvalidArgument("unknown currency '" + std::string(code) +
                                 "' (expected USD, EUR or GBP)");
}

Result<std::int64_t> ParseDecimalMicros(std::string_view text, int max_fraction_digits) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("amount '" + std::string(text.substr(0, 40)) + "' " +
                                   std::string(why));
  };
  if (text.empty()) return bad("is empty");
  if (max_fraction_digits < 0 || max_fraction_digits > 6) max_fraction_digits = 6;
  std::int64_t whole = 0;
  std::size_t i = 0;
  int whole_digits = 0;
  for (; i < text.size() && text[i] != '.'; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return bad("must be a plain decimal number like 12.50");
    if (++whole_digits > 13) return bad("is too large");
    whole = whole * 10 + (c - '0');
  }
  if (whole_digits == 0) return bad("must have digits before the decimal point");
  std::int64_t fraction = 0;
  int fraction_digits = 0;
  if (i < text.size()) {  // text[i] == '.'
    ++i;
    if (i == text.size()) return bad("must have digits after the decimal point");
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (c < '0' || c > '9') return bad("must be a plain decimal number like 12.50");
      if (++fraction_digits > max_fraction_digits) {
        return bad("has more than " + std::to_string(max_fraction_digits) +
                   " digits after the decimal point");
      }
      fraction = fraction * 10 + (c - '0');
    }
  }
  for (int d = fraction_digits; d < 6; ++d) fraction *= 10;
  std::int64_t micros = whole * kMicrosPerUnit + fraction;
  if (micros > kMaxAmountMicros) return bad("is too large");
  return micros;
}

std::string FormatMicros(std::int64_t micros, int fraction_digits) {
  if (fraction_digits < 0 || fraction_digits > 6) fraction_digits = 6;
  bool negative = micros < 0;
  // Work in unsigned to format INT64_MIN without overflow.
  std::uint64_t magnitude = negative ? (~static_cast<std::uint64_t>(micros) + 1)
                                     : static_cast<std::uint64_t>(micros);
  std::uint64_t whole = magnitude / kMicrosPerUnit;
  std::uint64_t fraction = magnitude % kMicrosPerUnit;
  std::string out = negative ? "-" : "";
  out += std::to_string(whole);
  if (fraction_digits == 0) return out;
  std::string frac = std::to_string(fraction);
  frac.insert(0, 6 - frac.size(), '0');
  out += '.';
  out += frac.substr(0, fraction_digits);
  return out;
}

bool CheckedAdd(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
bool CheckedSub(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_sub_overflow(a, b, out);
}
bool CheckedMul(std::int64_t a, std::int64_t b, std::int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

Result<std::int64_t> MulDivHalfEven(std::int64_t a, std::int64_t b, std::int64_t c) {
  if (c <= 0) return Status::InvalidArgument("division by a non-positive number");
  __int128 product = static_cast<__int128>(a) * b;
  bool negative = product < 0;
  if (negative) product = -product;
  __int128 quotient = product / c;
  __int128 remainder = product % c;
  __int128 twice = remainder * 2;
  if (twice > c || (twice == c && (quotient & 1) != 0)) ++quotient;
  if (negative) quotient = -quotient;
  if (quotient > std::numeric_limits<std::int64_t>::max() ||
      quotient < std::numeric_limits<std::int64_t>::min()) {
    return Status::InvalidArgument("amount overflows");
  }
  return static_cast<std::int64_t>(quotient);
}

namespace {

enum class Toward { kFloor, kCeil };

Result<std::int64_t> MulDivDirected(std::int64_t a, std::int64_t b, std::int64_t c, Toward toward) {
  if (c <= 0) return Status::InvalidArgument("division by a non-positive number");
  __int128 product = static_cast<__int128>(a) * b;
  // C++ division truncates toward zero; step once more where that is the wrong way.
  __int128 quotient = product / c;
  __int128 remainder = product % c;
  if (remainder != 0) {
    if (toward == Toward::kFloor && remainder < 0) --quotient;
    if (toward == Toward::kCeil && remainder > 0) ++quotient;
  }
  if (quotient > std::numeric_limits<std::int64_t>::max() ||
      quotient < std::numeric_limits<std::int64_t>::min()) {
    return Status::InvalidArgument("amount overflows");
  }
  return static_cast<std::int64_t>(quotient);
}

}  // namespace

Result<std::int64_t> MulDivFloor(std::int64_t a, std::int64_t b, std::int64_t c) {
  return MulDivDirected(a, b, c, Toward::kFloor);
}

Result<std::int64_t> MulDivCeil(std::int64_t a, std::int64_t b, std::int64_t c) {
  return MulDivDirected(a, b, c, Toward::kCeil);
}

Result<Money> Add(Money a, Money b) {
  if (a.currency != b.currency) return Status::InvalidArgument("currency mismatch");
  Money out{0, a.currency};
  if (!CheckedAdd(a.micros, b.micros, &out.micros)) return Status::InvalidArgument("amount overflows");
  return out;
}

Result<Money> Subtract(Money a, Money b) {
  if (a.currency != b.currency) return Status::InvalidArgument("currency mismatch");
  Money out{0, a.currency};
  if (!CheckedSub(a.micros, b.micros, &out.micros)) return Status::InvalidArgument("amount overflows");
  return out;
}

}  // namespace gpuhub
