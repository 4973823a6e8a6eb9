// Monthly spot statements: every lease-hour an account bought on the spot exchange in one
// calendar month (UTC), on one invoice issued after the month ends.
//
// Pure. Spot hours are charged one by one, each with the tax of its moment (the buyer's rate at
// that hour, collected from the wallet with the hour: market/exchange.h); the statement only adds
// up what was charged: one line per lease and tax treatment (a rate change or a new billing
// country mid-month splits a lease into two lines), with the hours, the net and the tax that was
// collected (so the statement's tax is exactly what the ledger's tax legs moved).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "billing/document.h"
#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::billing {

// The lease-hours of one lease at one tax treatment within one month.
struct SpotUsage {
  std::int64_t lease_id = 0;
  std::string gpu;
  std::int64_t gpus = 0;
  std::int64_t price_micros = 0;  // USD per GPU-hour
  std::string tax_country;
  std::int64_t rate_ppm = 0;
  bool reverse_charge = false;
  std::int64_t hours = 0;
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  TimestampMicros first_hour_at = 0;  // the start of the first hour charged
  TimestampMicros last_hour_at = 0;   // the start of the last one

  friend bool operator==(const SpotUsage&, const SpotUsage&) = default;
};

// One charged hour.
struct SpotHour {
  std::int64_t lease_id = 0;
  std::string gpu;
  std::int64_t gpus = 0;
  std::int64_t price_micros = 0;
  TimestampMicros at = 0;
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  TaxDecision tax;
};

// The month an hour belongs to: its UTC calendar month, as [start, end).
struct Month {
  TimestampMicros start = 0;
  TimestampMicros end = 0;
  friend auto operator<=>(const Month&, const Month&) = default;
};
Month MonthOf(TimestampMicros at);
std::string MonthKey(const Month& month);    // "2026-11"
std::string MonthLabel(const Month& month);  // "November 2026"

// Adds an hour to its usage row (the caller finds the row by lease and tax treatment).
// invalid_argument when the hour does not belong to the row or the sums overflow.
Status AddHour(SpotUsage& usage, const SpotHour& hour);
SpotUsage UsageOf(const SpotHour& hour);  // a row holding just this hour
bool SameTreatment(const SpotUsage& usage, const SpotHour& hour);

// The statement of `month` (not numbered, without parties and evidence: the engine adds them):
// one line per usage row, by lease then first hour. invalid_argument for no rows.
Result<Document> BuildSpotStatement(const Month& month, std::vector<SpotUsage> usage,
                                    TimestampMicros issued_at);

}  // namespace gpuhub::billing
