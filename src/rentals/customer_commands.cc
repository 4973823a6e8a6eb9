// Fleet: the customer's commands on a rental: paying a renewal, releasing, auto-renew, and
// extra local NVMe added to a running rental.
#include "rentals/fleet.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rentals/format.h"
#include "rentals/payment.h"

namespace gpuhub::rentals {

Result<Renewal> Fleet::PayRenewal(UserId customer, RentalId id, std::optional<Currency> currency,
                                  ledger::Ledger& ledger, const TaxFunction& tax,
                                  TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  if (r.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was released at " +
                                      FormatTimestamp(r.released_at) +
                                      "; order a new rental instead");
  }
  if (r.state == RentalState::kProvisioning) {
    return Status::FailedPrecondition(
        "rental " + std::to_string(id) +
        " is still being provisioned; its first term has not started");
  }
  if (r.next_paid) return renewals_.at({id, r.period + 1});  // the same answer, no second charge
  GPUHUB_ASSIGN_OR_RETURN(Charge charge, Debit(r, r.period + 1, ChargeKind::kRenewal,
                                               currency.value_or(r.currency), ledger, tax, now,
                                               changes));
  std::int64_t paid_period = r.period + 1;
  StoreCharge(slot, charge, changes);
  MarkRenewalPaid(slot, charges_.at(slot.charges.back()), /*by_auto_renew=*/false, now, changes);
  Reschedule(slot);
  return renewals_.at({id, paid_period});
}

Result<Rental> Fleet::Release(UserId customer, RentalId id, ledger::Ledger& ledger,
                              TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  if (slot.rental.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was already released at " +
                                      FormatTimestamp(slot.rental.released_at));
  }
  ReleaseNow(slot, ReleaseReason::kCustomer, ledger, now, changes);
  Reschedule(slot);
  return slot.rental;
}

Result<Rental> Fleet::SetAutoRenew(UserId customer, RentalId id, bool on, TimestampMicros now,
                                   Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  if (slot.rental.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was released");
  }
  if (slot.rental.auto_renew == on) return slot.rental;
  Rental& r = slot.rental;
  const TimestampMicros term_began = r.term_start > 0 ? r.term_start : r.created_at;
  std::size_t changes_this_term = 0;
  for (const Event& e : slot.history) {
    changes_this_term += e.kind == EventKind::kAutoRenewChanged && e.at >= term_began;
  }
  if (changes_this_term >= kMaxAutoRenewChangesPerTerm) {
    return Status::ResourceExhausted("auto-renew was switched " +
                                     std::to_string(kMaxAutoRenewChangesPerTerm) +
                                     " times this term; it can be switched again next term")
        .WithField("enabled");
  }
  r.auto_renew = on;
  if (on && r.state == RentalState::kActive && !r.next_paid && r.renewal_invoiced_at == 0) {
    // Switched on after its first attempt was due (T - 72 h): the next attempt is now, not in the
    // past (history never runs backwards) and not an hour from now.
    TimestampMicros next = r.auto_renew_attempted_at == 0
                               ? r.term_end - kAutoRenewLeadMicros
                               : r.auto_renew_attempted_at + kAutoRenewRetryMicros;
    if (next < now) r.auto_renew_attempted_at = now - kAutoRenewRetryMicros;
  }
  Record(slot, EventKind::kAutoRenewChanged, now, on ? "auto-renew on" : "auto-renew off", changes);
  Touch(slot, now, changes);
  Reschedule(slot);
  return slot.rental;
}

std::int64_t Fleet::ExtraNvmeMicros(std::int64_t tb, Term term) const {
  const std::int64_t days = TermMicros(term) / kMicrosPerDay;
  // tb <= kMaxExtraNvmeTbPerRental and the price is bounded by ValidateFleetConfig: no overflow.
  return MulDivHalfEven(tb * config_.extra_nvme_micros_per_tb_month, days, kDaysPerStorageMonth)
      .value();
}

std::int64_t Fleet::ExtraNvmeFreeGb(NodeId id) const {
  return inventory_.FindNode(id) == nullptr ? 0 : inventory_.ExtraNvmeFreeGb(id);
}

Result<Rental> Fleet::AddExtraNvme(UserId customer, RentalId id, std::int64_t add_tb,
                                   ledger::Ledger& ledger, const TaxFunction& tax,
                                   TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  const std::int64_t has_tb = r.extra_nvme_gb / kGbPerTb;
  if (add_tb < 1 || add_tb > kMaxExtraNvmeTbPerRental - has_tb) {
    return Status::InvalidArgument(
               "add_tb must be a whole number of TB, 1.." +
               std::to_string(std::max<std::int64_t>(1, kMaxExtraNvmeTbPerRental - has_tb)) +
               ": a rental has at most " + std::to_string(kMaxExtraNvmeTbPerRental) +
               " TB of extra NVMe and this one has " + std::to_string(has_tb) + " TB")
        .WithField("add_tb");
  }
  if (r.state != RentalState::kActive) {
    return Status::FailedPrecondition(
        "rental " + std::to_string(id) + " is " + std::string(RentalStateName(r.state)) +
        (r.state == RentalState::kProvisioning
             ? ": extra NVMe can be added once it runs"
             : r.state == RentalState::kStopped ? ": pay its renewal first" : ""));
  }
  const std::int64_t free_gb = inventory_.ExtraNvmeFreeGb(r.node_id);
  if (add_tb * kGbPerTb > free_gb) {
    return Status::FailedPrecondition("node " + std::to_string(r.node_id) + " has " +
                                      std::to_string(free_gb / kGbPerTb) +
                                      " TB of extra NVMe free")
        .WithField("add_tb");
  }
  const std::int64_t per_term = ExtraNvmeMicros(add_tb, r.term);
  const std::int64_t term = TermMicros(r.term);
  // The rest of the current term, pro rata to the microsecond, half-even.
  const std::int64_t now_part = MulDivHalfEven(per_term, r.term_end - now, term).value();
  struct Piece {
    std::int64_t period;
    std::int64_t net;
    TimestampMicros start, end;
  };
  std::vector<Piece> pieces;
  if (now_part > 0) pieces.push_back({r.period, now_part, now, r.term_end});
  if (r.next_paid) pieces.push_back({r.period + 1, per_term, r.term_end, r.term_end + term});
  std::vector<Charge> charges;
  std::vector<PaymentPart> parts;
  for (const Piece& p : pieces) {
    Charge c;
    c.rental_id = r.id;
    c.customer_id = r.customer_id;
    c.period = p.period;
    c.kind = ChargeKind::kExtraNvme;
    GPUHUB_ASSIGN_OR_RETURN(c.amount, tax(r.customer_id, p.net, now));
    GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(c.amount));
    if (c.amount.net_micros != p.net) return Status::Internal("the tax function changed the net");
    c.paid_currency = r.currency;
    c.period_start = p.start;
    c.period_end = p.end;
    c.at = now;
    c.extra_nvme_gb = add_tb * kGbPerTb;
    c.extra_nvme_micros = p.net;
    c.nvme_addon = r.nvme_addons + 1 + static_cast<std::int64_t>(charges.size());
    parts.push_back({c.amount, ChargeTransferBase(c), "rental_extra_nvme", "rental",
                     RentalName(r) + " term " + std::to_string(p.period) + ": " +
                         std::to_string(add_tb) + " TB extra NVMe until " +
                         FormatTimestamp(p.end)});
    charges.push_back(std::move(c));
  }
  if (!parts.empty()) {
    GPUHUB_ASSIGN_OR_RETURN(auto paid, PayParts(ledger, r.customer_id, r.currency, parts, now,
                                                "this extra NVMe", &changes->transfers));
    for (std::size_t i = 0; i < charges.size(); ++i) {
      charges[i].paid_micros = paid[i].paid_micros;
      charges[i].transfer_ids = paid[i].transfer_ids;
    }
  }
  // The money moved: from here on nothing can fail.
  inventory_.TakeExtraNvme(r.node_id, add_tb * kGbPerTb);
  r.extra_nvme_gb += add_tb * kGbPerTb;
  r.extra_nvme_micros += per_term;
  r.nvme_addons += static_cast<std::int64_t>(charges.size());
  std::int64_t paid_total = 0;
  for (const auto& c : charges) paid_total += c.paid_micros;
  for (auto& c : charges) StoreCharge(slot, std::move(c), changes);
  if (auto it = renewals_.find({r.id, r.period + 1});
      it != renewals_.end() && it->second.status == RenewalStatus::kOpen) {
    // The open invoice is for the term as it will be: with the added NVMe.
    auto amount = tax(r.customer_id, r.price_micros + r.extra_nvme_micros, now);
    if (amount.ok() && ValidateTaxBlock(*amount).ok()) {
      it->second.amount = *amount;
      it->second.updated_at = now;
      changes->renewals.push_back(it->first);
    }
  }
  Record(slot, EventKind::kExtraNvmeAdded, now,
         std::to_string(add_tb) + " TB extra NVMe added (now " +
             std::to_string(r.extra_nvme_gb / kGbPerTb) + " TB), paid " +
             AmountText(paid_total, r.currency) + "; each term from the next on costs " +
             UsdText(r.price_micros + r.extra_nvme_micros) + " USD net",
         changes);
  Reschedule(slot);
  return r;
}

}  // namespace gpuhub::rentals
