// Where term rentals meet billing (issue 13). Two functions, and nothing else decides them:
//
// - RentalTax: the tax on a rental charge. Every quote, order, renewal invoice and renewal payment
//   (auto-renew included) gets its net / tax lines / gross from here: the rate of the customer's
//   billing country at that moment, or reverse charge (a 0% line saying so), from
//   engine::DecideTaxFor (engine/billing.h). An anonymous quote (customer 0) and an account
//   without a billing country carry no tax. Deterministic; reads only `state`.
// - OnRentalCharged: called exactly once for every charge (purchase, renewal, refund), inside the
//   command that moved its money: a purchase, renewal or extra NVMe add-on gets its tax invoice
//   (one line: what it paid for, the net and the tax the charge carried), a refund its own credit
//   note against the invoice of the very charge it refunds (Charge::refund_of), in full: that
//   charge's net, tax and gross (no money moves here: the refund already did). A renewal and an
//   extra NVMe add-on of the same term are two charges with two invoices, refunded by two credit
//   notes. Both commit atomically with the payment. It never fails the payment: a document that
//   cannot be issued (nothing should ever stop one) is logged at error level for an admin, and
//   the billing check (engine/billing_checks.h) names the charge.
//   It is the only issuer of rental documents, in charge order (the billing check relies on it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "billing/document.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "rentals/fleet.h"
#include "rentals/storage_types.h"

namespace gpuhub::engine {

// customer_id 0: an anonymous quote (no billing profile is known).
Result<rentals::TaxBlock> RentalTax(const State& state, std::int64_t customer_id,
                                    std::int64_t net_micros, TimestampMicros at);
// RentalTax bound to `state`, as the rentals domain takes it.
rentals::TaxFunction RentalTaxFunction(const State& state);

Status OnRentalCharged(Txn& txn, const rentals::Charge& charge);
// The source of a rental charge's document, "rental:12:charge:3" (unique: one per charge).
std::string ChargeSource(const rentals::Charge& charge);
// The charge `refund` gives back (by refund_of; records before issue 11 name none, and refund the
// term charge of their period); nullopt when the fleet has none.
std::optional<rentals::Charge> RefundedCharge(const rentals::Fleet& fleet,
                                              const rentals::Charge& refund);
// The same for storage (issue 11): called exactly once for every storage charge (days of a volume
// or snapshot, a volume's growth, egress), inside the command that moved its money. Its tax came
// from RentalTax like every rental charge's.
Status OnStorageCharged(Txn& txn, const rentals::StorageCharge& charge);

// Whether an admin may credit `invoice` (with money back): not when it is the invoice of a rental
// term that has not started yet (the rentals domain refunds such a term in full when the rental
// is released, with its own credit note: crediting it here too would pay it back twice).
// failed_precondition saying so; ok for every other document.
Status CheckAdminMayCredit(const State& state, const billing::Document& invoice, TimestampMicros now);

}  // namespace gpuhub::engine
