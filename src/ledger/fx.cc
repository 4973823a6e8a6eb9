#include "ledger/fx.h"

#include <algorithm>
#include <string>
#include <utility>

#include "ledger/limits.h"

namespace gpuhub::ledger {

namespace {

bool IsKnownCurrency(Currency c) {
  return static_cast<int>(c) < kCurrencyCount;  // uint8_t: never negative
}

std::string PairName(Currency base, Currency quote) {
  return std::string(CurrencyCode(base)) + "/" + std::string(CurrencyCode(quote));
}

Status CheckConvertible(Currency from, Currency to, std::int64_t micros, const char* what) {
  if (!IsKnownCurrency(from) || !IsKnownCurrency(to)) {
    return Status::InvalidArgument("unknown currency");
  }
  if (micros <= 0) {
    return Status::InvalidArgument(std::string(what) + " must be positive, got " +
                                   FormatMicros(micros));
  }
  if (micros > kMaxTransferAmountMicros) {
    return Status::InvalidArgument(std::string(what) + " " + FormatMicros(micros) +
                                   " exceeds the maximum " +
                                   FormatMicros(kMaxTransferAmountMicros));
  }
  return Status::Ok();
}

Result<std::int64_t> CheckConverted(Result<std::int64_t> converted, std::int64_t input,
                                    Currency in_currency) {
  if (!converted.ok() || *converted > kMaxTransferAmountMicros) {
    return Status::InvalidArgument(FormatMicros(input) + " " +
                                   std::string(CurrencyCode(in_currency)) +
                                   " converts to more than the maximum amount");
  }
  if (*converted <= 0) {
    return Status::InvalidArgument(FormatMicros(input) + " " +
                                   std::string(CurrencyCode(in_currency)) +
                                   " is too small to convert (rounds to zero)");
  }
  return converted;
}

FxQuote QuoteFor(const FxRate& rate, Currency from, Currency to) {
  FxQuote q;
  q.from = from;
  q.to = to;
  q.base = rate.base;
  q.quote = rate.quote;
  q.mid_rate_ppb = rate.mid_rate_ppb;
  q.spread_bps = rate.spread_bps;
  q.rate_version = rate.version;
  return q;
}

}  // namespace

Result<std::int64_t> ParseFxRatePpb(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("FX rate '" + std::string(text.substr(0, 40)) + "' " +
                                   std::string(why));
  };
  if (text.empty()) return bad("is empty");
  std::int64_t whole = 0;
  int whole_digits = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] != '.'; ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return bad("must be a plain decimal number like 1.08");
    // Leading zeros are harmless; only significant digits can overflow.
    if (whole != 0 || c != '0') ++whole_digits;
    if (whole_digits > 6) return bad("is too large (at most 1000)");
    whole = whole * 10 + (c - '0');
  }
  if (i == 0) return bad("must have digits before the decimal point");
  std::int64_t fraction = 0;
  int fraction_digits = 0;
  if (i < text.size()) {
    ++i;  // the '.'
    if (i == text.size()) return bad("must have digits after the decimal point");
    for (; i < text.size(); ++i) {
      char c = text[i];
      if (c < '0' || c > '9') return bad("must be a plain decimal number like 1.08");
      if (++fraction_digits > kFxRateFractionDigits) {
        return bad("has more than 9 digits after the decimal point");
      }
      fraction = fraction * 10 + (c - '0');
    }
  }
  for (int d = fraction_digits; d < kFxRateFractionDigits; ++d) fraction *= 10;
  std::int64_t ppb = whole * kFxRateScale + fraction;
  if (ppb < kMinFxRatePpb) return bad("must be greater than zero");
  if (ppb > kMaxFxRatePpb) return bad("is too large (at most 1000)");
  return ppb;
}

std::string FormatFxRatePpb(std::int64_t rate_ppb) {
  bool negative = rate_ppb < 0;
  std::uint64_t magnitude =
      negative ? (~static_cast<std::uint64_t>(rate_ppb) + 1) : static_cast<std::uint64_t>(rate_ppb);
  std::string out = negative ? "-" : "";
  out += std::to_string(magnitude / kFxRateScale);
  std::uint64_t fraction = magnitude % kFxRateScale;
  if (fraction != 0) {
    std::string digits = std::to_string(fraction);
    digits.insert(0, kFxRateFractionDigits - digits.size(), '0');
    while (digits.back() == '0') digits.pop_back();
    out += '.';
    out += digits;
  }
  return out;
}

Status CheckFxRateUpdate(const FxTable& table, Currency base, Currency quote,
                         std::int64_t rate_ppb) {
  std::string pair = std::string(CurrencyCode(base)) + "/" + std::string(CurrencyCode(quote));
  if (rate_ppb < kMinSettableFxRatePpb || rate_ppb > kMaxSettableFxRatePpb) {
    return Status::InvalidArgument("rate " + FormatFxRatePpb(rate_ppb) + " for " + pair +
                                   " is outside " + FormatFxRatePpb(kMinSettableFxRatePpb) +
                                   " .. " + FormatFxRatePpb(kMaxSettableFxRatePpb))
        .WithField("rate");
  }
  std::optional<FxRate> current = table.Find(base, quote);
  if (!current) return Status::Ok();
  // The current rate in the orientation of the update, as a fraction cur_num / cur_den (ppb):
  // stored the same way it is mid / 1e9, stored inverted it is 1e9 / mid. The new rate
  // rate_ppb / 1e9 must be within [1 - p, 1 + p] x current, i.e. in integers
  //   100 x rate_ppb x cur_den  within  [(100 - p), (100 + p)] x cur_num x 1e9.
  using Wide = __int128;
  Wide cur_num = current->mid_rate_ppb, cur_den = kFxRateScale;
  if (current->base != base) std::swap(cur_num, cur_den);
  Wide lhs = Wide{100} * rate_ppb * cur_den;
  Wide scaled = cur_num * kFxRateScale;
  if (lhs < (100 - kMaxFxRateChangePercent) * scaled ||
      lhs > (100 + kMaxFxRateChangePercent) * scaled) {
    std::string now = current->base == base ? FormatFxRatePpb(current->mid_rate_ppb)
                                            : "1/" + FormatFxRatePpb(current->mid_rate_ppb);
    return Status::InvalidArgument("rate " + FormatFxRatePpb(rate_ppb) + " for " + pair +
                                   " moves more than " + std::to_string(kMaxFxRateChangePercent) +
                                   "% from the current " + now +
                                   " in one update (set it in steps if the move is real)")
        .WithField("rate");
  }
  return Status::Ok();
}

std::size_t FxTable::PairIndex(Currency a, Currency b) {
  auto lo = static_cast<std::size_t>(std::min(a, b));
  auto hi = static_cast<std::size_t>(std::max(a, b));
  return lo * kCurrencyCount + hi;
}

Status FxTable::Apply(const FxRateChange& change) {
  if (!IsKnownCurrency(change.base) || !IsKnownCurrency(change.quote)) {
    return Status::InvalidArgument("unknown currency in FX rate");
  }
  if (change.base == change.quote) {
    return Status::InvalidArgument("an FX rate needs two different currencies, got " +
                                   PairName(change.base, change.quote));
  }
  if (change.timestamp <= 0) {
    return Status::InvalidArgument("FX rate change needs a timestamp > 0");
  }
  if (change.version != version_ + 1) {
    return Status::InvalidArgument("FX rate change version " + std::to_string(change.version) +
                                   " out of order (expected " + std::to_string(version_ + 1) + ")");
  }
  std::optional<FxRate>& slot = rates_[PairIndex(change.base, change.quote)];
  if (change.mid_rate_ppb == 0) {
    if (change.spread_bps != 0) {
      return Status::InvalidArgument("removing an FX rate takes no spread");
    }
    if (!slot) {
      return Status::NotFound("no FX rate for " + PairName(change.base, change.quote));
    }
    slot.reset();
  } else {
    if (change.mid_rate_ppb < kMinFxRatePpb || change.mid_rate_ppb > kMaxFxRatePpb) {
      return Status::InvalidArgument("FX rate " + FormatFxRatePpb(change.mid_rate_ppb) +
                                     " out of range (0.000000001 .. 1000)");
    }
    if (change.spread_bps < 0 || change.spread_bps > kMaxFxSpreadBps) {
      return Status::InvalidArgument("FX spread " + std::to_string(change.spread_bps) +
                                     " bps out of range (0 .. " + std::to_string(kMaxFxSpreadBps) +
                                     ")");
    }
    slot =
        FxRate{change.base, change.quote, change.mid_rate_ppb, change.spread_bps, change.version};
  }
  version_ = change.version;
  return Status::Ok();
}

std::optional<FxRate> FxTable::Find(Currency a, Currency b) const {
  if (!IsKnownCurrency(a) || !IsKnownCurrency(b) || a == b) return std::nullopt;
  return rates_[PairIndex(a, b)];
}

std::vector<FxRate> FxTable::All() const {
  std::vector<FxRate> out;
  for (const auto& slot : rates_) {
    if (slot) out.push_back(*slot);
  }
  std::sort(out.begin(), out.end(), [](const FxRate& x, const FxRate& y) {
    return std::pair(x.base, x.quote) < std::pair(y.base, y.quote);
  });
  return out;
}

namespace {

enum class Given { kFrom, kTo };

// With keep = 10000 - spread_bps and m = mid_rate_ppb (quote per base x 1e9), the effective rate
// r_eff = num / den is
//   from == base:  m/1e9 x keep/1e4 = (m x keep) / (1e9 x 1e4)
//   from == quote: 1e9/m x keep/1e4 = (1e9 x keep) / (m x 1e4)
// and to = from x num / den (ConvertFrom, rounded down), from = to x den / num (ConvertTo, rounded
// up). Rounding goes the platform's way on both sides because half-even does not: at spread 0 it
// rounds up as often as down, and a customer looping USD -> EUR -> USD picked the amounts where it
// rounded up and made 0.000001 a trip. Bounds: amounts <= 1e18, m <= 1e12, keep <= 1e4, so num
// and den stay below 1e16 (int64) and amount x num below 1e34 (int128).
Result<FxQuote> Convert(const FxTable& table, Currency from, Currency to, Given given,
                        std::int64_t given_micros) {
  const bool from_given = given == Given::kFrom;
  GPUHUB_RETURN_IF_ERROR(CheckConvertible(from, to, given_micros,
                                          from_given ? "amount to convert" : "amount to deliver"));
  if (from == to) {
    return FxQuote{from, to, given_micros, given_micros, from, to, kFxRateScale, 0, 0};
  }
  std::optional<FxRate> rate = table.Find(from, to);
  if (!rate) return Status::FailedPrecondition("no FX rate for " + PairName(from, to));
  const bool from_base = from == rate->base;
  const std::int64_t keep = kBpsScale - rate->spread_bps;
  const std::int64_t num = (from_base ? rate->mid_rate_ppb : kFxRateScale) * keep;
  const std::int64_t den = (from_base ? kFxRateScale : rate->mid_rate_ppb) * kBpsScale;
  Result<std::int64_t> converted =
      from_given ? MulDivFloor(given_micros, num, den) : MulDivCeil(given_micros, den, num);
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t other_micros,
                          CheckConverted(converted, given_micros, from_given ? from : to));
  FxQuote q = QuoteFor(*rate, from, to);
  q.from_micros = from_given ? given_micros : other_micros;
  q.to_micros = from_given ? other_micros : given_micros;
  return q;
}

}  // namespace

Result<FxQuote> FxTable::ConvertFrom(Currency from, Currency to, std::int64_t from_micros) const {
  return Convert(*this, from, to, Given::kFrom, from_micros);
}

Result<FxQuote> FxTable::ConvertTo(Currency from, Currency to, std::int64_t to_micros) const {
  return Convert(*this, from, to, Given::kTo, to_micros);
}

}  // namespace gpuhub::ledger
