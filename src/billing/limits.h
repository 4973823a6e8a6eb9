// Named limits of billing (tax rates, billing profiles).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuhub::billing {

// A tax rate is parts per million of the net amount: 100% = 1,000,000 (admins may set 0..100%
// with up to 4 decimals of a percent, e.g. "25.5" or "8.1").
inline constexpr std::int64_t kRateScalePpm = 1'000'000;
inline constexpr std::int64_t kMaxRatePpm = kRateScalePpm;
inline constexpr int kRatePercentFractionDigits = 4;
// Rate periods kept per country (each admin change closes one and opens another).
inline constexpr std::size_t kMaxRatePeriodsPerCountry = 200;
// Billing profile fields.
inline constexpr std::size_t kMaxBusinessNameBytes = 200;
inline constexpr std::size_t kMaxVatIdBytes = 20;

}  // namespace gpuhub::billing
