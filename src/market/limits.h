// Named limits of the spot exchange. Everything the market accepts has a bound; anything beyond it
// is refused with invalid_argument (or resource_exhausted for per-account counts), never truncated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/clock.h"

namespace gpuhub::market {

// Prices are USD per GPU-hour with a tick of 0.001 (spec: "tick 0.001"), i.e. 1,000 micro-USD.
inline constexpr std::int64_t kPriceTickMicros = 1'000;
inline constexpr int kPriceFractionDigits = 3;
// The highest price per GPU-hour accepted (a typo guard: the dearest card opens at 8.99).
inline constexpr std::int64_t kMaxPriceMicrosPerGpuHour = 1'000LL * 1'000'000;

// GPUs on one machine, and so in one bid (all N GPUs of a bid are on one machine). The book keeps
// a 32-bit mask of which GPUs of a machine are leased.
inline constexpr int kMaxGpusPerMachine = 16;

// Machine specifications (typo guards).
inline constexpr std::int64_t kMaxVcpusPerMachine = 4'096;
inline constexpr std::int64_t kMaxRamGbPerMachine = 65'536;
inline constexpr std::int64_t kMaxDiskGbPerMachine = 10'000'000;
// The host ports a machine's agent publishes a lease's extra container ports on (Jupyter 8888, an
// inference server 8000): a range the provider sets on the listing, unprivileged, with room for at
// least one lease's ports, and at most kMaxPortRangeSize ports (a typo guard).
inline constexpr int kDefaultPortRangeFirst = 41000;
inline constexpr int kDefaultPortRangeLast = 41999;
inline constexpr int kMinPortRangeFirst = 1024;
inline constexpr int kMinPortRangeSize = 4;
inline constexpr int kMaxPortRangeSize = 20'000;

// Per-account bounds: they keep one account from filling the book or the writer's memory.
inline constexpr std::size_t kMaxMachinesPerProvider = 10'000;
inline constexpr std::size_t kMaxOpenBidsPerCustomer = 1'000;
inline constexpr std::size_t kMaxActiveLeasesPerCustomer = 1'000;
inline constexpr std::size_t kMaxPendingPayoutsPerProvider = 20;

// An ask is offered until its available_until; leases are billed in whole hours, so an ask must be
// available for at least one hour from now, and at most this far ahead.
inline constexpr std::int64_t kMaxAskWindowMicros = 366 * kMicrosPerDay;
// A good-till-cancelled bid may carry an expiry at most this far ahead.
inline constexpr std::int64_t kMaxBidLifetimeMicros = 366 * kMicrosPerDay;

// Leases are billed per hour, in advance.
inline constexpr std::int64_t kLeaseHourMicros = kMicrosPerHour;
// A provisioning lease waits at most this long for its host (Exchange::SetStartTimeout).
inline constexpr std::int64_t kMaxLeaseStartTimeoutMicros = kMicrosPerDay;

// Platform fee in parts per million of each lease-hour (10% by default, configurable up to 50%).
inline constexpr std::int64_t kDefaultFeePpm = 100'000;
inline constexpr std::int64_t kMaxFeePpm = 500'000;
inline constexpr std::int64_t kPpm = 1'000'000;

// Payouts: at least 1.00 USD, with at most 6 decimals.
inline constexpr std::int64_t kMinPayoutMicros = 1'000'000;

// Market data: trades kept in memory per market for GET /v1/markets/{gpu}/trades (all trades are
// in the store), and the page sizes of the read endpoints.
inline constexpr std::size_t kRecentTradesPerMarket = 1'000;
inline constexpr std::size_t kDefaultPageSize = 50;
inline constexpr std::size_t kMaxPageSize = 500;
inline constexpr std::size_t kMaxBookLevels = 500;

// Why a machine's GPUs are held off the book (set by the control plane from its agent's reports).
inline constexpr std::size_t kMaxHoldReasonBytes = 512;

// Identifiers: GPU model names and region codes.
inline constexpr std::size_t kMaxGpuNameBytes = 64;
inline constexpr std::size_t kMaxRegionBytes = 32;
// Markets (GPU models) and regions one exchange knows; the book indexes regions with 16 bits.
inline constexpr std::size_t kMaxMarkets = 256;
inline constexpr std::size_t kMaxRegions = 1'024;

}  // namespace gpuhub::market
