#include "rentals/types.h"

#include <array>

#include "core/names.h"
#include "rentals/limits.h"

namespace gpuhub::rentals {
namespace {

constexpr std::array<std::string_view, 2> kTerm = {"week", "month"};
constexpr std::array<std::string_view, 3> kNodeState = {"active", "draining", "removed"};
constexpr std::array<std::string_view, 4> kRentalState = {"provisioning", "active", "stopped",
                                                          "released"};
constexpr std::array<std::string_view, 4> kReleaseReason = {"", "unpaid", "released_by_customer",
                                                            "provisioning_failed"};
constexpr std::array<std::string_view, 5> kInstanceState = {"provisioning", "running", "stopped",
                                                            "failed", "erased"};
constexpr std::array<std::string_view, 4> kRenewalStatus = {"open", "paid", "void", "refunded"};
constexpr std::array<std::string_view, 4> kChargeKind = {"purchase", "renewal", "refund",
                                                         "extra_nvme"};
constexpr std::array<std::string_view, 16> kEventKind = {
    "created",          "provisioned",  "auto_renewed", "auto_renew_failed", "renewal_invoiced",
    "renewal_paid",     "extended",     "stopped",      "resumed",           "released",
    "key_destroyed",    "wiped",        "refunded",     "auto_renew_changed", "instance_failed",
    "extra_nvme_added"};

}  // namespace

std::string_view TermName(Term v) { return EnumName(kTerm, v); }
Result<Term> ParseTerm(std::string_view n) { return ParseEnumName<Term>(kTerm, n, "term"); }
std::int64_t TermMicros(Term term) { return term == Term::kWeek ? kWeekMicros : kMonthMicros; }

std::string_view NodeStateName(NodeState v) { return EnumName(kNodeState, v); }
Result<NodeState> ParseNodeState(std::string_view n) {
  return ParseEnumName<NodeState>(kNodeState, n, "node state");
}
std::string_view RentalStateName(RentalState v) { return EnumName(kRentalState, v); }
Result<RentalState> ParseRentalState(std::string_view n) {
  return ParseEnumName<RentalState>(kRentalState, n, "rental state");
}
std::string_view ReleaseReasonName(ReleaseReason v) { return EnumName(kReleaseReason, v); }
Result<ReleaseReason> ParseReleaseReason(std::string_view n) {
  return ParseEnumName<ReleaseReason>(kReleaseReason, n, "release reason");
}
std::string_view InstanceStateName(InstanceState v) { return EnumName(kInstanceState, v); }
Result<InstanceState> ParseInstanceState(std::string_view n) {
  return ParseEnumName<InstanceState>(kInstanceState, n, "instance state");
}
std::string_view RenewalStatusName(RenewalStatus v) { return EnumName(kRenewalStatus, v); }
Result<RenewalStatus> ParseRenewalStatus(std::string_view n) {
  return ParseEnumName<RenewalStatus>(kRenewalStatus, n, "renewal status");
}
std::string_view ChargeKindName(ChargeKind v) { return EnumName(kChargeKind, v); }
Result<ChargeKind> ParseChargeKind(std::string_view n) {
  return ParseEnumName<ChargeKind>(kChargeKind, n, "charge kind");
}
std::string_view EventKindName(EventKind v) { return EnumName(kEventKind, v); }
Result<EventKind> ParseEventKind(std::string_view n) {
  return ParseEnumName<EventKind>(kEventKind, n, "event kind");
}

Status ValidateTaxBlock(const TaxBlock& block) {
  if (block.net_micros <= 0 || block.net_micros > kMaxAmountMicros) {
    return Status::InvalidArgument("tax block: net must be positive");
  }
  std::int64_t tax = 0;
  for (const auto& line : block.lines) {
    if (line.amount_micros < 0 || line.rate_ppm < 0 || line.rate_ppm > kPpm ||
        !CheckedAdd(tax, line.amount_micros, &tax)) {
      return Status::InvalidArgument("tax block: line '" + line.name.substr(0, 32) +
                                     "' is out of range");
    }
  }
  std::int64_t gross = 0;
  if (tax != block.tax_micros || !CheckedAdd(block.net_micros, tax, &gross) ||
      gross != block.gross_micros || gross > kMaxAmountMicros) {
    return Status::InvalidArgument("tax block: tax must be the sum of its lines and gross net + tax");
  }
  return Status::Ok();
}

std::string RentalTransferId(RentalId rental, std::int64_t period, std::string_view leg) {
  return "rental:" + std::to_string(rental) + ":p" + std::to_string(period) + ":" +
         std::string(leg);
}

std::string ChargeTransferBase(const Charge& c) {
  std::string base = "rental:" + std::to_string(c.rental_id) + ":p" + std::to_string(c.period);
  if (c.nvme_addon > 0) base += ":nvme" + std::to_string(c.nvme_addon);
  return base;
}

bool Refunds(const Charge& refund, const Charge& paid) {
  if (refund.kind != ChargeKind::kRefund || paid.kind == ChargeKind::kRefund ||
      refund.rental_id != paid.rental_id) {
    return false;
  }
  if (refund.refund_of != 0) return refund.refund_of == paid.id;
  return refund.period == paid.period && refund.nvme_addon == 0 && paid.nvme_addon == 0;
}

std::string CardKey(std::string_view name) { return NameKey(name); }

Result<std::string> CanonicalRegion(std::string_view code) {
  return CanonicalRegionCode(code, kMaxRegionBytes);
}

}  // namespace gpuhub::rentals
