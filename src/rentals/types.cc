#include "rentals/types.h"

#include <array>

#include "rentals/limits.h"

namespace gpuhub::rentals {
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
    if (names[i] == name && !names[i].empty()) return static_cast<E>(i);
  }
  if (name.empty() && N > 0 && names[0].empty()) return static_cast<E>(0);
  std::string list;
  for (auto n : names) {
    if (n.empty()) continue;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  return Status::InvalidArgument(std::string(what) + " must be one of " + list + ", got '" +
                                 std::string(name.substr(0, 32)) + "'");
}

constexpr std::array<std::string_view, 2> kTerm = {"week", "month"};
constexpr std::array<std::string_view, 3> kNodeState = {"active", "draining", "removed"};
constexpr std::array<std::string_view, 4> kRentalState = {"provisioning", "active", "stopped",
                                                          "released"};
constexpr std::array<std::string_view, 4> kReleaseReason = {"", "unpaid", "released_by_customer",
                                                            "provisioning_failed"};
constexpr std::array<std::string_view, 5> kInstanceState = {"provisioning", "running", "stopped",
                                                            "failed", "erased"};
constexpr std::array<std::string_view, 4> kRenewalStatus = {"open", "paid", "void", "refunded"};
constexpr std::array<std::string_view, 3> kChargeKind = {"purchase", "renewal", "refund"};
constexpr std::array<std::string_view, 15> kEventKind = {
    "created",          "provisioned",  "auto_renewed", "auto_renew_failed", "renewal_invoiced",
    "renewal_paid",     "extended",     "stopped",      "resumed",           "released",
    "key_destroyed",    "wiped",        "refunded",     "auto_renew_changed", "instance_failed"};

}  // namespace

std::string_view TermName(Term v) { return NameOf(kTerm, v); }
Result<Term> ParseTerm(std::string_view n) { return Parse<Term>(kTerm, n, "term"); }
std::int64_t TermMicros(Term term) { return term == Term::kWeek ? kWeekMicros : kMonthMicros; }

std::string_view NodeStateName(NodeState v) { return NameOf(kNodeState, v); }
Result<NodeState> ParseNodeState(std::string_view n) {
  return Parse<NodeState>(kNodeState, n, "node state");
}
std::string_view RentalStateName(RentalState v) { return NameOf(kRentalState, v); }
Result<RentalState> ParseRentalState(std::string_view n) {
  return Parse<RentalState>(kRentalState, n, "rental state");
}
std::string_view ReleaseReasonName(ReleaseReason v) { return NameOf(kReleaseReason, v); }
Result<ReleaseReason> ParseReleaseReason(std::string_view n) {
  return Parse<ReleaseReason>(kReleaseReason, n, "release reason");
}
std::string_view InstanceStateName(InstanceState v) { return NameOf(kInstanceState, v); }
Result<InstanceState> ParseInstanceState(std::string_view n) {
  return Parse<InstanceState>(kInstanceState, n, "instance state");
}
std::string_view RenewalStatusName(RenewalStatus v) { return NameOf(kRenewalStatus, v); }
Result<RenewalStatus> ParseRenewalStatus(std::string_view n) {
  return Parse<RenewalStatus>(kRenewalStatus, n, "renewal status");
}
std::string_view ChargeKindName(ChargeKind v) { return NameOf(kChargeKind, v); }
Result<ChargeKind> ParseChargeKind(std::string_view n) {
  return Parse<ChargeKind>(kChargeKind, n, "charge kind");
}
std::string_view EventKindName(EventKind v) { return NameOf(kEventKind, v); }
Result<EventKind> ParseEventKind(std::string_view n) {
  return Parse<EventKind>(kEventKind, n, "event kind");
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

std::string CardKey(std::string_view name) {
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
                                   " characters such as \"DFW-1\"");
  }
  std::string out;
  out.reserve(code.size());
  for (char c : code) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    bool ok = (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) {
      return Status::InvalidArgument("region must be letters, digits and '-' such as \"DFW-1\", got '" +
                                     std::string(code.substr(0, 32)) + "'");
    }
    out.push_back(c);
  }
  if (!(out[0] >= 'A' && out[0] <= 'Z')) {
    return Status::InvalidArgument("region must start with a letter, such as \"DFW-1\"");
  }
  return out;
}

}  // namespace gpuhub::rentals
