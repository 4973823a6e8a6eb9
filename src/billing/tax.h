// The tax of a sale: which rate applies to a buyer at a moment, and the amounts.
//
// Rules (gpuhub sells electronically supplied services and is the merchant of record):
// - a business in an EU country with a VAT id of that country, buying from a seller established
//   in another country (or outside the EU), accounts for the VAT itself: reverse charge, 0 with
//   the note (Art. 196 of Council Directive 2006/112/EC);
// - otherwise the rate of the buyer's billing country at that moment (0 when none is set).
// Prices are net; tax = round_half_even(net x rate), computed once per line.
#pragma once

#include <cstdint>
#include <string>

#include "billing/tax_rates.h"
#include "core/status.h"

namespace gpuhub::billing {

struct Buyer {
  std::string country;  // ISO code; required before the first purchase
  std::string business_name;
  std::string vat_id;  // normalised (NormalizeVatId), "" when none
};

struct Seller {
  std::string country = "US";
};

struct TaxDecision {
  std::string country;  // whose rate
  std::int64_t rate_ppm = 0;
  bool reverse_charge = false;
  std::string note;  // "VAT 19% (DE)", "Reverse charge: ...", "no tax configured for XX"
};

inline constexpr const char* kReverseChargeNote =
    "Reverse charge: VAT to be accounted for by the recipient (Art. 196, Council Directive "
    "2006/112/EC)";

TaxDecision DecideTax(const Seller& seller, const Buyer& buyer, const TaxRateTable& rates,
                      TimestampMicros at);
// round_half_even(net x rate / 1e6).
Result<std::int64_t> TaxMicros(std::int64_t net_micros, std::int64_t rate_ppm);

}  // namespace gpuhub::billing
