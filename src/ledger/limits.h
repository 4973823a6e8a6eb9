// Named limits of the ledger. Everything the ledger accepts has a bound; anything beyond it is
// refused with a result code, never truncated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/money.h"

namespace gpuhub::ledger {

// Transfers in one atomic batch (a linked chain). A lease hour is 2-3 legs, an FX settlement 3-4;
// 256 leaves room for settling many leases at once while bounding the work of one command.
inline constexpr std::size_t kMaxTransfersPerBatch = 256;

// Caller-chosen transfer id ("topup:inv_123", "lease:42:hour:7"): 1..128 bytes of
// [A-Za-z0-9] and ':' '_' '-' '.' '/' '@'.
inline constexpr std::size_t kMaxTransferIdBytes = 128;
// Machine-readable reason ("topup", "lease_hour", "fee", "fx", "payout"): 1..64 bytes of
// [a-z0-9] and '_' '-' '.' ':'.
inline constexpr std::size_t kMaxTransferCodeBytes = 64;
// Free-text note for people ("bank transfer ref 2026-118"): 0..256 bytes of valid UTF-8 without
// control characters.
inline constexpr std::size_t kMaxTransferMemoBytes = 256;

// One transfer moves at most this much (10^12 units): the same bound as every parsed amount, so
// anything core/money.h parses is a valid transfer amount.
inline constexpr std::int64_t kMaxTransferAmountMicros = kMaxAmountMicros;

// Pages of transfer history.
inline constexpr std::size_t kDefaultTransfersPageSize = 50;
inline constexpr std::size_t kMaxTransfersPageSize = 200;

// FX: mid rates are exact decimals with up to 9 fraction digits, stored as parts per billion.
inline constexpr int kFxRateFractionDigits = 9;
inline constexpr std::int64_t kFxRateScale = 1'000'000'000;  // 1.0 == 1'000'000'000 ppb
// 1e-9 .. 1000 units of quote currency per unit of base currency.
inline constexpr std::int64_t kMinFxRatePpb = 1;
inline constexpr std::int64_t kMaxFxRatePpb = 1000 * kFxRateScale;
// What an operator may set (CheckFxRateUpdate; the table itself accepts the wider range above, so
// that rates stored by earlier versions still load): USD, EUR and GBP have traded within 0.5..2.5
// of each other for decades, so 0.1 .. 10 leaves room for anything real and refuses a rate that
// would turn a cent into millions.
inline constexpr std::int64_t kMinSettableFxRatePpb = kFxRateScale / 10;
inline constexpr std::int64_t kMaxSettableFxRatePpb = 10 * kFxRateScale;
// One update moves a pair's rate by at most this much relative to its current rate, either way (a
// typo such as 1.8 for 1.08 is refused; a real correction of more takes several updates).
inline constexpr std::int64_t kMaxFxRateChangePercent = 25;
// Spread charged against the customer, in basis points (1 bp = 0.01%). At most 10%.
inline constexpr std::int32_t kMaxFxSpreadBps = 1000;
inline constexpr std::int32_t kBpsScale = 10'000;

}  // namespace gpuhub::ledger
