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
inline constexpr std::size_t kMaxAddressBytes = 300;
inline constexpr std::size_t kMaxAddressLines = 6;
// Tax documents (invoices, credit notes): lines per document (a monthly spot statement has one
// line per lease and rate: kMaxStatementLines leases is far more than any account runs in a
// month), the text of a line, and the numbers of one series in one year ("2026-000001": six
// digits; a seventh would still sort and parse, but no year of gpuhub comes near a million).
inline constexpr std::size_t kMaxLinesPerDocument = 5000;
inline constexpr std::size_t kMaxLineDescriptionBytes = 300;
inline constexpr std::int64_t kMaxDocumentsPerSeriesYear = 999'999;
// A credit note's reason (kept with it and printed on it).
inline constexpr std::size_t kMaxCreditReasonBytes = 500;
// The longest period one tax report covers (a year, leap or not): a return is monthly, quarterly
// or yearly, and the report walks every stored document.
inline constexpr std::int64_t kMaxTaxReportDays = 366;

}  // namespace gpuhub::billing
