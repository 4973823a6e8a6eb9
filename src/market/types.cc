#include "market/types.h"

#include <array>
#include <utility>

#include "core/names.h"
#include "market/limits.h"

namespace gpuhub::market {
namespace {

constexpr std::array<std::string_view, 2> kTimeInForce = {"ioc", "gtc"};
constexpr std::array<std::string_view, 3> kAskStatus = {"open", "cancelled", "expired"};
constexpr std::array<std::string_view, 4> kBidStatus = {"resting", "filled", "cancelled",
                                                        "expired"};
constexpr std::array<std::string_view, 7> kBidCloseReason = {
    "", "filled", "no_match", "cancelled_by_user", "expired", "insufficient_funds", "no_fx_rate"};
constexpr std::array<std::string_view, 2> kLeaseStatus = {"active", "ended"};
constexpr std::array<std::string_view, 6> kLeaseEndReason = {
    "", "stopped", "unpaid", "window_ended", "no_fx_rate", "not_started"};
constexpr std::array<std::string_view, 3> kPayoutStatus = {"pending", "paid", "rejected"};
constexpr std::array<std::string_view, 2> kSide = {"ask", "bid"};

}  // namespace

std::string_view TimeInForceName(TimeInForce v) { return EnumName(kTimeInForce, v); }
Result<TimeInForce> ParseTimeInForce(std::string_view n) {
  return ParseEnumName<TimeInForce>(kTimeInForce, n, "time_in_force");
}
std::string_view AskStatusName(AskStatus v) { return EnumName(kAskStatus, v); }
Result<AskStatus> ParseAskStatus(std::string_view n) {
  return ParseEnumName<AskStatus>(kAskStatus, n, "ask status");
}
std::string_view BidStatusName(BidStatus v) { return EnumName(kBidStatus, v); }
Result<BidStatus> ParseBidStatus(std::string_view n) {
  return ParseEnumName<BidStatus>(kBidStatus, n, "bid status");
}
std::string_view BidCloseReasonName(BidCloseReason v) { return EnumName(kBidCloseReason, v); }
Result<BidCloseReason> ParseBidCloseReason(std::string_view n) {
  return ParseEnumName<BidCloseReason>(kBidCloseReason, n, "bid close reason");
}
std::string_view LeaseStatusName(LeaseStatus v) { return EnumName(kLeaseStatus, v); }
Result<LeaseStatus> ParseLeaseStatus(std::string_view n) {
  return ParseEnumName<LeaseStatus>(kLeaseStatus, n, "lease status");
}
std::string_view LeaseEndReasonName(LeaseEndReason v) { return EnumName(kLeaseEndReason, v); }
Result<LeaseEndReason> ParseLeaseEndReason(std::string_view n) {
  return ParseEnumName<LeaseEndReason>(kLeaseEndReason, n, "lease end reason");
}
std::string_view PayoutStatusName(PayoutStatus v) { return EnumName(kPayoutStatus, v); }
Result<PayoutStatus> ParsePayoutStatus(std::string_view n) {
  return ParseEnumName<PayoutStatus>(kPayoutStatus, n, "payout status");
}
std::string_view SideName(Side v) { return EnumName(kSide, v); }
Result<Side> ParseSide(std::string_view n) { return ParseEnumName<Side>(kSide, n, "side"); }

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

std::string GpuKey(std::string_view name) { return NameKey(name); }

Result<std::string> CanonicalRegion(std::string_view code) {
  return CanonicalRegionCode(code, kMaxRegionBytes);
}

std::string BidHoldTransferId(OrderId bid) { return "bid:" + std::to_string(bid) + ":hold"; }
std::string BidVoidTransferId(OrderId bid) { return "bid:" + std::to_string(bid) + ":void"; }
std::string LeaseHourTransferId(LeaseId lease, std::int64_t hour, std::string_view leg) {
  return "lease:" + std::to_string(lease) + ":h" + std::to_string(hour) + ":" + std::string(leg);
}
std::string LeaseHoldTransferId(LeaseId lease) {
  return "lease:" + std::to_string(lease) + ":hold";
}

std::string LeaseHoldVoidTransferId(LeaseId lease) {
  return "lease:" + std::to_string(lease) + ":hold:void";
}

std::string LeaseCreditTransferId(LeaseId lease, std::int64_t hour, std::string_view leg) {
  return LeaseHourTransferId(lease, hour, "credit:" + std::string(leg));
}
std::string PayoutTransferId(PayoutId payout) { return "payout:" + std::to_string(payout); }

Status ValidatePortRange(int first, int last) {
  if (first < kMinPortRangeFirst || first > 65535) {
    return Status::InvalidArgument("port_range_first must be a port from " +
                                   std::to_string(kMinPortRangeFirst) + " to 65535")
        .WithField("port_range_first");
  }
  if (last > 65535 || last - first + 1 < kMinPortRangeSize ||
      last - first + 1 > kMaxPortRangeSize) {
    return Status::InvalidArgument("port_range_last must be at most 65535 and give a range of " +
                                   std::to_string(kMinPortRangeSize) + " to " +
                                   std::to_string(kMaxPortRangeSize) + " ports")
        .WithField("port_range_last");
  }
  return Status::Ok();
}

}  // namespace gpuhub::market
