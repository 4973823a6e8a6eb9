// Moving a customer's money for the term fleet's products (rentals, extra NVMe, volumes,
// snapshots, egress): one wallet pays one or more priced parts in ONE atomic ledger batch, and a
// refund returns exactly what a part moved. Internal to src/rentals (Fleet and Storage use it).
//
// Legs of a part whose transfer ids start with `id_base` ("rental:12:p3", "volume:7:d12"):
//   USD wallet:      wallet(USD) -> platform_revenue(USD)  net     id_base:revenue
//                    wallet(USD) -> tax_payable(USD)       tax     id_base:tax (only when > 0)
//   EUR/GBP wallet:  wallet(EUR) -> fx_conversion(EUR)     gross converted at the current rate,
//                                                          half-even, once      id_base:fx
//                    fx_conversion(USD) -> revenue / tax payable as above
// A refund mirrors them under id_base:refund:revenue|tax|fx, returning the wallet exactly what it
// paid (no second conversion). Transfer ids are derived from what is paid, so the ledger itself
// refuses to move the same money twice (a second batch with the same ids is a no-op kExists, which
// the callers treat as a programmer error: their state machines never pay the same thing twice).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

struct PaymentPart {
  TaxBlock amount;      // USD; must pass ValidateTaxBlock
  std::string id_base;  // unique per thing paid: "rental:12:p3", "volume:7:d12"
  std::string code;     // ledger code of the revenue leg: "rental", "storage_volume", ...
  std::string family;   // the fx and tax legs' codes are family + "_fx" / "_tax" ("": code)
  std::string memo;     // for people: what is paid
};

struct PaidPart {
  std::int64_t paid_micros = 0;           // what the wallet was debited for this part
  std::vector<std::string> transfer_ids;  // its legs, in the order applied
};

// Debits `customer`'s `currency` wallet for every part in one batch and appends the applied
// transfers to `applied`. Errors (nothing moved): failed_precondition with field "currency" when
// no FX rate to USD is set, insufficient_funds ("the USD wallet holds 3.00 USD; <what> costs
// 14.00 USD", what = "this term", "this day of volume 7", ...), or the ledger's error.
Result<std::vector<PaidPart>> PayParts(ledger::Ledger& ledger, UserId customer, Currency currency,
                                       std::span<const PaymentPart> parts, TimestampMicros at,
                                       std::string_view what,
                                       std::vector<ledger::Transfer>* applied);

// Returns what one paid part moved (`amount` as charged, `paid_micros` from `currency`'s wallet)
// under id_base:refund:*. Refunds move money out of system accounts, which have no floor: an error
// here is a programmer error of the caller (refunding twice, or what was never paid).
Result<PaidPart> RefundPart(ledger::Ledger& ledger, UserId customer, Currency currency,
                            const TaxBlock& amount, std::int64_t paid_micros,
                            const std::string& id_base, const std::string& code,
                            const std::string& memo, TimestampMicros at,
                            std::vector<ledger::Transfer>* applied);

// Whether the ledger holds exactly the legs of a part paid as described: revenue = net, tax = tax
// (absent when 0), fx = paid (absent for USD, where paid must equal gross). `prefix` is "" for a
// payment and "refund:" for a refund. Used by the settlement checks.
bool LegsMatch(const ledger::Ledger& ledger, const std::string& id_base, const std::string& prefix,
               const TaxBlock& amount, Currency currency, std::int64_t paid_micros);

}  // namespace gpuhub::rentals
