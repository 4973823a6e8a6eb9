#include "market/types.h"

#include <array>
#include <utility>

#include "market/limits.h"

namespace gpuhub::market {
namespace {

// One table per enum: the name of each value, in enum order.
template <typename E, std::size_t N>
std::string_view NameOf(const std::array<std::string_view, N>& names, E value) {
  auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : std::string_view("?");
}

template <typename E, std::size_t N>
Result<E> Parse(const std::array<std::string_view, N>& names, std::string_view name,
                std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  std::string list;
  for (auto n : names) {
    if (n.empty()) continue;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  return Status::InvalidArgument(std::string(what) + " must be one of " + list + ", got '" +
                                 std::string(name.substr(0, 32)) + "'");
}

constexpr std::array<std::string_view, 2> kTimeInForce = {"ioc", "gtc"};
constexpr std::array<std::string_view, 3> kAskStatus = {"open", "cancelled", "expired"};
constexpr std::array<std::string_view, 4> kBidStatus = {"resting", "filled", "cancelled",
                                                        "expired"};
constexpr std::array<std::string_view, 7> kBidCloseReason = {
    "", "filled", "no_match", "cancelled_by_user", "expired", "insufficient_funds", "no_fx_rate"};
constexpr std::array<std::string_view, 2> kLeaseStatus = {"active", "ended"};
constexpr std::array<std::string_view, 5> kLeaseEndReason = {"", "stopped", "unpaid",
                                                             "window_ended", "no_fx_rate"};
constexpr std::array<std::string_view, 3> kPayoutStatus = {"pending", "paid", "rejected"};
constexpr std::array<std::string_view, 2> kSide = {"ask", "bid"};

}  // namespace

std::string_view TimeInForceName(TimeInForce v) { return NameOf(kTimeInForce, v); }
Result<TimeInForce> ParseTimeInForce(std::string_view n) {
  return Parse<TimeInForce>(kTimeInForce, n, "time_in_force");
}
std::string_view AskStatusName(AskStatus v) { return NameOf(kAskStatus, v); }
Result<AskStatus> ParseAskStatus(std::string_view n) {
  return Parse<AskStatus>(kAskStatus, n, "ask status");
}
std::string_view BidStatusName(BidStatus v) { return NameOf(kBidStatus, v); }
Result<BidStatus> ParseBidStatus(std::string_view n) {
  return Parse<BidStatus>(kBidStatus, n, "bid status");
}
std::string_view BidCloseReasonName(BidCloseReason v) { return NameOf(kBidCloseReason, v); }
Result<BidCloseReason> ParseBidCloseReason(std::string_view n) {
  return Parse<BidCloseReason>(kBidCloseReason, n, "bid close reason");
}
std::string_view LeaseStatusName(LeaseStatus v) { return NameOf(kLeaseStatus, v); }
Result<LeaseStatus> ParseLeaseStatus(std::string_view n) {
  return Parse<LeaseStatus>(kLeaseStatus, n, "lease status");
}
std::string_view LeaseEndReasonName(LeaseEndReason v) { return NameOf(kLeaseEndReason, v); }
Result<LeaseEndReason> ParseLeaseEndReason(std::string_view n) {
  return Parse<LeaseEndReason>(kLeaseEndReason, n, "lease end reason");
}
std::string_view PayoutStatusName(PayoutStatus v) { return NameOf(kPayoutStatus, v); }
Result<PayoutStatus> ParsePayoutStatus(std::string_view n) {
  return Parse<PayoutStatus>(kPayoutStatus, n, "payout status");
}
std::string_view SideName(Side v) { return NameOf(kSide, v); }
Result<Side> ParseSide(std::string_view n) { return Parse<Side>(kSide, n, "side"); }

Status ValidatePriceMicros(std::int64_t price, std::string_view field) {
  if (price <= 0 || price > kMaxPriceMicrosPerGpuHour) {
    return Status::InvalidArgument(std::string(field) + " must be between 0.001 and " +
                                   FormatPrice(kMaxPriceMicrosPerGpuHour) + " USD per GPU-hour");
  }
  if (price % kPriceTickMicros != 0) {
    return Status::InvalidArgument(std::string(field) +
                                   " must be a multiple of the 0.001 tick (at most 3 decimals)");
  }
  return Status::Ok();
}

Result<std::int64_t> ParsePriceMicros(std::string_view text, std::string_view field) {
  auto micros = ParseDecimalMicros(text, kPriceFractionDigits);
  if (!micros.ok()) {
    return Status::InvalidArgument(std::string(field) +
                                   " must be a decimal string with at most 3 decimals, such as "
                                   "\"2.880\", got '" +
                                   std::string(text.substr(0, 32)) + "'");
  }
  GPUHUB_RETURN_IF_ERROR(ValidatePriceMicros(*micros, field));
  return *micros;
}

std::string FormatPrice(std::int64_t price_micros) {
  // Prices are multiples of the tick, so three decimals are exact; anything else (a computed
  // average) is printed with all six.
  return FormatMicros(price_micros,
                      price_micros % kPriceTickMicros == 0 ? kPriceFractionDigits : 6);
}

std::string GpuKey(std::string_view name) {
  std::string key;
  key.reserve(name.size());
  for (char c : name) {
    if (c == ' ' || c == '-' || c == '_' || c == '.') continue;
    key.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c);
  }
  return key;
}

Result<std::string> CanonicalRegion(std::string_view code) {
  if (code.empty() || code.size() > kMaxRegionBytes) {
    return Status::InvalidArgument("region must be 1.." + std::to_string(kMaxRegionBytes) +
                                   " characters such as \"IAD-1\"");
  }
  std::string out;
  out.reserve(code.size());
  for (char c : code) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return Status::InvalidArgument(
          "region must be letters, digits and '-' such as \"IAD-1\", "
          "got '" +
          std::string(code.substr(0, 32)) + "'");
    }
    out.push_back(c);
  }
  if (!(out[0] >= 'A' && out[0] <= 'Z')) {
    return Status::InvalidArgument("region must start with a letter, such as \"IAD-1\"");
  }
  return out;
}

std::string BidHoldTransferId(OrderId bid) { return "bid:" + std::to_string(bid) + ":hold"; }
std::string BidVoidTransferId(OrderId bid) { return "bid:" + std::to_string(bid) + ":void"; }
std::string LeaseHourTransferId(LeaseId lease, std::int64_t hour, std::string_view leg) {
  return "lease:" + std::to_string(lease) + ":h" + std::to_string(hour) + ":" + std::string(leg);
}
std::string PayoutTransferId(PayoutId payout) { return "payout:" + std::to_string(payout); }

}  // namespace gpuhub::market
