// Where term rentals meet billing (issue 13). Two functions, and nothing else decides them:
//
// - RentalTax: the tax on a rental charge. Every quote, order, renewal invoice and renewal payment
//   (auto-renew included) gets its net / tax lines / gross from here. Today it returns no tax
//   (spec: "tax rate by billing country, default 0"); billing replaces the body with the rate of
//   the customer's billing profile. It must be deterministic and read only `state`.
// - OnRentalCharged: called exactly once for every charge (purchase, renewal, refund), inside the
//   command that moved its money, after the charge's row is queued: a tax invoice (or credit note
//   for a refund) written here commits atomically with the payment. Today it does nothing more
//   than the rental_charges row already records.
#pragma once

#include <cstdint>

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
// The same for storage (issue 11): called exactly once for every storage charge (days of a volume
// or snapshot, a volume's growth, egress), inside the command that moved its money. Its tax came
// from RentalTax like every rental charge's.
Status OnStorageCharged(Txn& txn, const rentals::StorageCharge& charge);

}  // namespace gpuhub::engine
