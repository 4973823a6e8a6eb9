// Fleet: the time-driven lifecycle (what is due when, and each transition) and the money (one
// atomic ledger batch per charge or refund).
//
// Scheduling: each rental has at most one entry in the timeline, the next transition its record
// says is due (NextDue, a pure function of the record). Every command and transition that changes
// a rental reschedules it. So the timeline can always be rebuilt from the records (Restore), and a
// transition cannot happen twice: it changes the record so that it is no longer due.
#include <algorithm>

#include "rentals/fleet.h"
#include "rentals/format.h"
#include "rentals/payment.h"

namespace gpuhub::rentals {
namespace {

// The paid next term starts where the current one ends (at a roll-over, or a payment during the
// hold: the new term is counted from T either way); its renewal starts from scratch.
void StartNextTerm(Rental& r) {
  const TimestampMicros t = r.term_end;
  r.period += 1;
  r.term_start = t;
  r.term_end = t + TermMicros(r.term);
  r.next_paid = false;
  r.renewal_invoiced_at = 0;
  r.auto_renew_attempted_at = 0;
  r.auto_renew_failures = 0;
}

}  // namespace

// ----- Scheduling ----------------------------------------------------------------------------

std::optional<Fleet::Schedule> Fleet::NextDue(const Rental& r) const {
  switch (r.state) {
    case RentalState::kProvisioning:
      return Schedule{r.instance.provisioning_deadline, Due::kProvisioningDeadline};
    case RentalState::kActive: {
      const TimestampMicros t = r.term_end;
      if (r.next_paid) return Schedule{t, Due::kTermEnd};
      Schedule next{t, Due::kTermEnd};
      if (r.renewal_invoiced_at == 0) {
        next = {t - kRenewalInvoiceLeadMicros, Due::kRenewalInvoice};
        if (r.auto_renew) {
          TimestampMicros attempt = r.auto_renew_attempted_at == 0
                                        ? t - kAutoRenewLeadMicros
                                        : r.auto_renew_attempted_at + kAutoRenewRetryMicros;
          if (attempt < t - kRenewalInvoiceLeadMicros) next = {attempt, Due::kAutoRenew};
        }
      }
      return next;
    }
    case RentalState::kStopped:
      return Schedule{r.term_end + kHoldMicros, Due::kHoldEnd};
    case RentalState::kReleased:
      if (config_.provisioning == Provisioning::kImmediate && r.instance.wiped_at == 0 &&
          r.instance.wipe_due_at > 0) {
        return Schedule{r.instance.wipe_due_at, Due::kWipe};
      }
      return std::nullopt;
  }
  return std::nullopt;
}

void Fleet::Reschedule(RentalSlot& slot) {
  if (slot.scheduled) {
    timeline_.erase({*slot.scheduled, slot.rental.id});
    slot.scheduled.reset();
  }
  if (auto next = NextDue(slot.rental)) {
    timeline_.insert({next->at, slot.rental.id});
    slot.scheduled = next->at;
  }
}

TimestampMicros Fleet::NextEventAt() const {
  return timeline_.empty() ? kNever : timeline_.begin()->first;
}

NextTransition Fleet::Next(const Rental& r) const {
  auto next = NextDue(r);
  if (!next) return {};
  switch (next->due) {
    case Due::kProvisioningDeadline:
      return {next->at, "refund_unless_provisioned"};
    case Due::kAutoRenew:
      return {next->at, "auto_renew"};
    case Due::kRenewalInvoice:
      return {next->at, "renewal_invoice"};
    case Due::kTermEnd:
      return {next->at, r.next_paid ? "renews" : "stops"};
    case Due::kHoldEnd:
      return {next->at, "released"};
    case Due::kWipe:
      return {next->at, "wipe_due"};
  }
  return {};
}

void Fleet::AdvanceTo(ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                      Changes* changes) {
  while (!timeline_.empty() && timeline_.begin()->first <= now) {
    auto [due_at, id] = *timeline_.begin();
    // A transition that came due while time stood still (a command made it due in the past, such
    // as auto-renew switched on 50 h before the end) happens now, never before the latest time
    // already seen: history never runs backwards.
    TimestampMicros at = std::max(due_at, now_);
    now_ = at;
    RentalSlot& slot = Slot(id);
    auto due = NextDue(slot.rental);
    GPUHUB_CHECK(due.has_value() && due->at == due_at);
    RunDue(slot, due->due, ledger, tax, at, changes);
    Reschedule(slot);
  }
  now_ = std::max(now_, now);
}

void Fleet::RunDue(RentalSlot& slot, Due due, ledger::Ledger& ledger, const TaxFunction& tax,
                   TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  switch (due) {
    case Due::kProvisioningDeadline:
      r.instance.state = InstanceState::kFailed;
      r.instance.error = "not running within 1 h of the order";
      Record(slot, EventKind::kInstanceFailed, at, r.instance.error, changes);
      ReleaseNow(slot, ReleaseReason::kProvisioningFailed, ledger, at, changes);
      return;
    case Due::kAutoRenew:
      TryAutoRenew(slot, ledger, tax, at, changes);
      return;
    case Due::kRenewalInvoice:
      IssueInvoice(slot, tax, at, changes);
      return;
    case Due::kTermEnd:
      EndTerm(slot, at, changes);
      return;
    case Due::kHoldEnd:
      ReleaseNow(slot, ReleaseReason::kUnpaid, ledger, at, changes);
      return;
    case Due::kWipe:
      r.instance.wiped_at = at;
      Record(slot, EventKind::kWiped, at, "local NVMe wiped", changes);
      Touch(slot, at, changes);
      return;
  }
}

// ----- Money ---------------------------------------------------------------------------------

Result<Charge> Fleet::Debit(const Rental& r, std::int64_t period, ChargeKind kind,
                            Currency currency, ledger::Ledger& ledger, const TaxFunction& tax,
                            TimestampMicros at, Changes* changes) const {
  const std::int64_t net = r.price_micros + r.extra_nvme_micros;
  GPUHUB_ASSIGN_OR_RETURN(TaxBlock amount, tax(r.customer_id, net, at));
  GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(amount));
  if (amount.net_micros != net) {
    return Status::Internal("the tax function changed the net price");
  }
  Charge c;
  c.rental_id = r.id;
  c.customer_id = r.customer_id;
  c.period = period;
  c.kind = kind;
  c.amount = std::move(amount);
  c.paid_currency = currency;
  c.extra_nvme_gb = r.extra_nvme_gb;
  c.extra_nvme_micros = r.extra_nvme_micros;
  PaymentPart part{c.amount, ChargeTransferBase(c),
                   kind == ChargeKind::kPurchase ? "rental" : "rental_renewal", "rental",
                   RentalName(r) + " term " + std::to_string(period) + ": " +
                       std::string(TermName(r.term)) + " at " + UsdText(net) + " USD net"};
  GPUHUB_ASSIGN_OR_RETURN(auto paid, PayParts(ledger, r.customer_id, currency, {&part, 1}, at,
                                              "this term", &changes->transfers));
  c.paid_micros = paid[0].paid_micros;
  c.transfer_ids = std::move(paid[0].transfer_ids);
  if (kind == ChargeKind::kRenewal) {
    c.period_start = r.term_end;
    c.period_end = r.term_end + TermMicros(r.term);
  }
  c.at = at;
  return c;
}

Result<Charge> Fleet::Refund(const Charge& paid, ledger::Ledger& ledger, TimestampMicros at,
                             Changes* changes) const {
  const Rental& r = rentals_.at(paid.rental_id).rental;
  GPUHUB_ASSIGN_OR_RETURN(
      PaidPart refund,
      RefundPart(ledger, r.customer_id, paid.paid_currency, paid.amount, paid.paid_micros,
                 ChargeTransferBase(paid), "rental_refund",
                 "refund of " + RentalName(r) + " term " + std::to_string(paid.period) +
                     (paid.kind == ChargeKind::kExtraNvme ? " (extra NVMe)" : ""),
                 at, &changes->transfers));
  Charge c = paid;
  c.id = 0;
  c.kind = ChargeKind::kRefund;
  c.refund_of = paid.id;
  c.at = at;
  c.transfer_ids = std::move(refund.transfer_ids);
  return c;
}

void Fleet::StoreCharge(RentalSlot& slot, Charge charge, Changes* changes) {
  charge.id = next_charge_id_++;
  slot.charges.push_back(charge.id);
  changes->charges.push_back(charge);
  charges_.emplace(charge.id, std::move(charge));
}

// ----- Records of what happened --------------------------------------------------------------

void Fleet::Record(RentalSlot& slot, EventKind kind, TimestampMicros at, std::string detail,
                   Changes* changes) {
  Event e{slot.rental.id, ++slot.rental.events, at, kind, std::move(detail)};
  changes->events.push_back(e);
  slot.history.push_back(std::move(e));
  if (slot.history.size() > kMaxEventsKeptPerRental) slot.history.erase(slot.history.begin());
  Touch(slot, at, changes);
}

void Fleet::Notify(const Rental& r, std::string kind, std::string message,
                   std::vector<std::pair<std::string, std::string>> data, TimestampMicros at,
                   Changes* changes) {
  data.insert(data.begin(), {"rental_id", std::to_string(r.id)});
  data.push_back({"state", std::string(RentalStateName(r.state))});
  changes->notices.push_back({r.customer_id, std::move(kind), "rental:" + std::to_string(r.id),
                              std::move(message), std::move(data), at});
}

void Fleet::Touch(RentalSlot& slot, TimestampMicros at, Changes* changes) {
  slot.rental.updated_at = std::max(slot.rental.updated_at, at);
  changes->rentals.push_back(slot.rental.id);
}

// ----- Transitions ---------------------------------------------------------------------------

void Fleet::Activate(RentalSlot& slot, TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  GPUHUB_CHECK(r.state == RentalState::kProvisioning);
  r.state = RentalState::kActive;
  r.instance.state = InstanceState::kRunning;
  r.term_start = at;
  r.term_end = at + TermMicros(r.term);
  Record(slot, EventKind::kProvisioned, at, "running; term 1 until " + FormatTimestamp(r.term_end),
         changes);
  Notify(r, "rental.active",
         "Your " + std::to_string(r.count) + "x " + r.gpu + " in " + r.region +
             " is running until " + FormatTimestamp(r.term_end) + ".",
         {{"term_end", FormatTimestamp(r.term_end)}}, at, changes);
}

void Fleet::MarkRenewalPaid(RentalSlot& slot, const Charge& charge, bool by_auto_renew,
                            TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  GPUHUB_CHECK(!r.next_paid && charge.period == r.period + 1);
  Renewal& renewal = renewals_[{r.id, charge.period}];
  if (renewal.period == 0) {  // paid before an invoice was due
    renewal.rental_id = r.id;
    renewal.period = charge.period;
    renewal.customer_id = r.customer_id;
    renewal.due_at = r.term_end;
  }
  renewal.amount = charge.amount;
  renewal.status = RenewalStatus::kPaid;
  renewal.by_auto_renew = by_auto_renew;
  renewal.paid_at = at;
  renewal.updated_at = at;
  renewal.paid_currency = charge.paid_currency;
  renewal.paid_micros = charge.paid_micros;
  renewal.charge_id = charge.id;
  changes->renewals.push_back({r.id, charge.period});
  r.next_paid = true;
  std::string paid = AmountText(charge.paid_micros, charge.paid_currency);
  Record(slot, by_auto_renew ? EventKind::kAutoRenewed : EventKind::kRenewalPaid, at,
         "term " + std::to_string(charge.period) + " paid: " + paid +
             (by_auto_renew ? " (auto-renew)" : ""),
         changes);
  if (r.state == RentalState::kStopped) {
    // Paid during the hold: active again, the new term counted from the old end T.
    const TimestampMicros t = r.term_end;
    r.state = RentalState::kActive;
    r.instance.state = InstanceState::kRunning;
    StartNextTerm(r);
    Record(slot, EventKind::kResumed, at,
           "running again; term " + std::to_string(r.period) + " counted from " +
               FormatTimestamp(t) + " until " + FormatTimestamp(r.term_end),
           changes);
    Notify(r, "rental.resumed",
           RentalName(r) + " is running again until " + FormatTimestamp(r.term_end) + " (" + paid +
               " paid).",
           {{"term_end", FormatTimestamp(r.term_end)}}, at, changes);
    return;
  }
  Notify(r, "rental.renewed",
         RentalName(r) + ": the next term is paid (" + paid + (by_auto_renew ? ", auto-renew" : "") +
             "); it runs from " + FormatTimestamp(r.term_end) + " until " +
             FormatTimestamp(r.term_end + TermMicros(r.term)) + ".",
         {{"period", std::to_string(charge.period)},
          {"amount", FormatMicros(charge.paid_micros)},
          {"currency", std::string(CurrencyCode(charge.paid_currency))},
          {"term_end", FormatTimestamp(r.term_end + TermMicros(r.term))}},
         at, changes);
}

void Fleet::TryAutoRenew(RentalSlot& slot, ledger::Ledger& ledger, const TaxFunction& tax,
                         TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  r.auto_renew_attempted_at = at;
  auto charge = Debit(r, r.period + 1, ChargeKind::kRenewal, r.currency, ledger, tax, at, changes);
  if (charge.ok()) {
    StoreCharge(slot, std::move(charge).value(), changes);
    MarkRenewalPaid(slot, charges_.at(slot.charges.back()), /*by_auto_renew=*/true, at, changes);
    return;
  }
  ++r.auto_renew_failures;
  TimestampMicros invoice_at = r.term_end - kRenewalInvoiceLeadMicros;
  Record(slot, EventKind::kAutoRenewFailed, at,
         charge.status().message() + (at + kAutoRenewRetryMicros < invoice_at
                                          ? "; retried hourly until " + FormatTimestamp(invoice_at)
                                          : ""),
         changes);
  if (r.auto_renew_failures == 1) {
    Notify(r, "rental.auto_renew_failed",
           RentalName(r) + ": auto-renew could not pay the next term (" +
               charge.status().message() + "). It is retried every hour until " +
               FormatTimestamp(invoice_at) + "; top up the " +
               std::string(CurrencyCode(r.currency)) + " wallet, or pay the renewal yourself.",
           {{"retry_until", FormatTimestamp(invoice_at)},
            {"term_end", FormatTimestamp(r.term_end)}},
           at, changes);
  }
}

void Fleet::IssueInvoice(RentalSlot& slot, const TaxFunction& tax, TimestampMicros at,
                         Changes* changes) {
  Rental& r = slot.rental;
  const std::int64_t net = r.price_micros + r.extra_nvme_micros;
  auto amount = tax(r.customer_id, net, at);
  TaxBlock block = amount.ok() && ValidateTaxBlock(*amount).ok() ? *amount : NoTax(net);
  Renewal renewal;
  renewal.rental_id = r.id;
  renewal.period = r.period + 1;
  renewal.customer_id = r.customer_id;
  renewal.amount = block;
  renewal.status = RenewalStatus::kOpen;
  renewal.issued_at = at;
  renewal.due_at = r.term_end;
  renewal.updated_at = at;
  renewals_[{r.id, renewal.period}] = renewal;
  changes->renewals.push_back({r.id, renewal.period});
  r.renewal_invoiced_at = at;
  std::string gross = UsdText(block.gross_micros) + " USD";
  Record(slot, EventKind::kRenewalInvoiced, at,
         "term " + std::to_string(renewal.period) + ": " + gross + " due by " +
             FormatTimestamp(r.term_end),
         changes);
  Notify(r, "rental.renewal_invoice",
         "Renewal invoice for " + RentalName(r) + ": " + gross + " for the next " +
             std::string(TermName(r.term)) + ", due by " + FormatTimestamp(r.term_end) +
             ". Unpaid then, the instance stops; its data is destroyed at " +
             FormatTimestamp(r.term_end + kHoldMicros) + " unless paid before.",
         {{"period", std::to_string(renewal.period)},
          {"amount", FormatMicros(block.gross_micros)},
          {"currency", "USD"},
          {"due_at", FormatTimestamp(r.term_end)},
          {"destroyed_at", FormatTimestamp(r.term_end + kHoldMicros)}},
         at, changes);
}

void Fleet::EndTerm(RentalSlot& slot, TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  const TimestampMicros t = r.term_end;
  if (r.next_paid) {
    StartNextTerm(r);
    Record(slot, EventKind::kExtended, at,
           "term " + std::to_string(r.period) + " until " + FormatTimestamp(r.term_end), changes);
    return;
  }
  r.state = RentalState::kStopped;
  r.instance.state = InstanceState::kStopped;
  Record(slot, EventKind::kStopped, at,
         "unpaid at the term end: instance stopped, cards and disk held until " +
             FormatTimestamp(t + kHoldMicros),
         changes);
  Notify(r, "rental.stopped",
         RentalName(r) + " stopped: the renewal was not paid. Its cards and disk are held until " +
             FormatTimestamp(t + kHoldMicros) +
             "; pay the renewal before then to run again (the new term counts from " +
             FormatTimestamp(t) + "). After that the disk's key is destroyed and the data is gone.",
         {{"destroyed_at", FormatTimestamp(t + kHoldMicros)}}, at, changes);
}

void Fleet::ReleaseNow(RentalSlot& slot, ReleaseReason reason, ledger::Ledger& ledger,
                       TimestampMicros at, Changes* changes) {
  Rental& r = slot.rental;
  GPUHUB_CHECK(IsLive(r.state));
  // Money first: what was paid for a term that never started comes back.
  std::vector<const Charge*> to_refund;
  for (ChargeId id : slot.charges) {
    const Charge& c = charges_.at(id);
    bool started = c.period < r.period || (c.period == r.period && r.state != RentalState::kProvisioning);
    bool refunded = std::any_of(slot.charges.begin(), slot.charges.end(), [&](ChargeId other) {
      return Refunds(charges_.at(other), c);
    });
    if (c.kind != ChargeKind::kRefund && !started && !refunded) to_refund.push_back(&c);
  }
  std::vector<Charge> refunds;
  for (const Charge* c : to_refund) {
    auto refund = Refund(*c, ledger, at, changes);
    // Refunds move money out of system accounts, which have no floor: they cannot be refused.
    GPUHUB_CHECK_MSG(refund.ok(), refund.status().message().c_str());
    refunds.push_back(std::move(refund).value());
  }
  for (auto& refund : refunds) {
    Record(slot, EventKind::kRefunded, at,
           "term " + std::to_string(refund.period) + " refunded: " +
               AmountText(refund.paid_micros, refund.paid_currency),
           changes);
    StoreCharge(slot, std::move(refund), changes);
  }
  if (auto it = renewals_.find({r.id, r.period + 1});
      it != renewals_.end() && it->second.status != RenewalStatus::kVoid) {
    it->second.status =
        it->second.status == RenewalStatus::kPaid ? RenewalStatus::kRefunded : RenewalStatus::kVoid;
    it->second.updated_at = at;
    changes->renewals.push_back(it->first);
  }
  inventory_.Free(r.node_id, r.card_mask);
  inventory_.FreeExtraNvme(r.node_id, r.extra_nvme_gb);
  --live_rentals_;
  if (--live_by_customer_[r.customer_id] == 0) live_by_customer_.erase(r.customer_id);
  const TimestampMicros use_ended = r.term_end > 0 ? std::min(at, r.term_end) : at;
  r.state = RentalState::kReleased;
  r.release_reason = reason;
  r.released_at = at;
  r.next_paid = false;
  r.instance.state = InstanceState::kErased;
  r.instance.key_destroyed_at = at;
  r.instance.wipe_due_at = use_ended + kWipeDeadlineMicros;
  Record(slot, EventKind::kReleased, at,
         std::string(ReleaseReasonName(reason)) + ": cards " + CardList(r.card_mask) + " of node " +
             std::to_string(r.node_id) + " back in stock",
         changes);
  Record(slot, EventKind::kKeyDestroyed, at,
         "disk encryption key destroyed: the data is unrecoverable; physical wipe due by " +
             FormatTimestamp(r.instance.wipe_due_at),
         changes);
  std::string why = reason == ReleaseReason::kUnpaid ? "the renewal was not paid during the hold"
                    : reason == ReleaseReason::kCustomer ? "you released it"
                                                         : "its instance could not be provisioned "
                                                           "(refunded in full)";
  Notify(r, "rental.released",
         RentalName(r) + " was released: " + why +
             ". Its disk's encryption key was destroyed; the data cannot be recovered.",
         {{"reason", std::string(ReleaseReasonName(reason))}}, at, changes);
}

}  // namespace gpuhub::rentals
