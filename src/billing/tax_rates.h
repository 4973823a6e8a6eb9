// Tax rates: one table of periods per country (country, rate, valid from, valid until), so the
// rate of any moment can be told after the fact (an invoice states the rate of its date).
//
// Pure and deterministic: no clock, no I/O; times are given. Shipped with the standard VAT rates
// of the EU countries, the UK, Ukraine, Switzerland and Norway (DefaultRates; sources in
// docs/billing.md); other countries have no rate (0) unless an admin sets one.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::billing {

struct RatePeriod {
  std::string country;           // ISO 3166-1 alpha-2, upper case
  std::int64_t rate_ppm = 0;     // of the net amount
  TimestampMicros valid_from = 0;
  TimestampMicros valid_until = 0;  // exclusive; 0 = open
  std::string note;              // "standard VAT", an admin's reason
};

// "25.5" -> 255,000 ppm. invalid_argument (the message names the range) outside 0..100 or with
// more than 4 decimals.
Result<std::int64_t> ParseRatePercent(std::string_view text);
// 255,000 -> "25.5" (no trailing zeros).
std::string FormatRatePercent(std::int64_t rate_ppm);

class TaxRateTable {
 public:
  // The shipped table: every current standard rate from its effective date, with the rate it
  // replaced where that changed since 2024 (FI, SK, EE, RO, CH).
  static TaxRateTable Defaults();
  // Restores a table from stored periods (any order); internal error when periods of one country
  // overlap.
  static Result<TaxRateTable> FromPeriods(std::vector<RatePeriod> periods);

  // The rate of `country` at `at` (nullopt: none, i.e. 0).
  std::optional<RatePeriod> Find(std::string_view country, TimestampMicros at) const;
  // A new rate from `from` on: the period covering `from` ends there, periods starting later are
  // replaced (cut). invalid_argument for an unknown country code or a rate outside 0..100%.
  Result<RatePeriod> Set(std::string_view country, std::int64_t rate_ppm, TimestampMicros from,
                         std::string note);
  // Ends the period of `country` in force at `until` there, cutting the periods that start later:
  // from `until` on the country has no rate (0) until another is set. not_found when no period
  // is in force at `until`.
  Result<RatePeriod> Close(std::string_view country, TimestampMicros until);
  // Every period, by country then start.
  std::vector<RatePeriod> All() const;
  // The periods in force at `at`, by country.
  std::vector<RatePeriod> CurrentAt(TimestampMicros at) const;

 private:
  std::map<std::string, std::vector<RatePeriod>, std::less<>> by_country_;  // sorted by start
};

}  // namespace gpuhub::billing
