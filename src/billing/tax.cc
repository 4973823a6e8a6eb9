#include "billing/tax.h"

#include "billing/countries.h"
#include "billing/limits.h"
#include "core/money.h"

namespace gpuhub::billing {

TaxDecision DecideTax(const Seller& seller, const Buyer& buyer, const TaxRateTable& rates,
                      TimestampMicros at) {
  TaxDecision d;
  d.country = buyer.country;
  if (IsEuCountry(buyer.country) && !buyer.vat_id.empty() && buyer.country != seller.country) {
    d.reverse_charge = true;
    d.note = kReverseChargeNote;
    return d;
  }
  if (auto rate = rates.Find(buyer.country, at)) {
    d.rate_ppm = rate->rate_ppm;
    d.note = "VAT " + FormatRatePercent(rate->rate_ppm) + "% (" + buyer.country + ")";
  } else {
    d.note = "no tax rate is configured for " + CountryName(buyer.country);
  }
  return d;
}

Result<std::int64_t> TaxMicros(std::int64_t net_micros, std::int64_t rate_ppm) {
  return MulDivHalfEven(net_micros, rate_ppm, kRateScalePpm);
}

}  // namespace gpuhub::billing
