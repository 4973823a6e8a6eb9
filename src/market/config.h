// What an exchange is configured with: its markets (GPU models), the regions machines may be in,
// and the platform fee. Kept apart from exchange.h so that the engine's state header stays light.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "market/limits.h"

namespace gpuhub::market {

struct ExchangeConfig {
  // The markets providers may list machines in, as shown ("H100 SXM"): the spot-exchange cards of
  // the catalog. Markets found in stored data but no longer listed keep working for what exists
  // (leases, resting orders) and take no new machines.
  std::vector<std::string> gpus;
  // Region codes machines may be in ("IAD-1"); empty: any well-formed code.
  std::vector<std::string> regions;
  // Platform fee per lease-hour, parts per million (100'000 = 10%), 0..kMaxFeePpm.
  std::int64_t fee_ppm = kDefaultFeePpm;
};

// invalid_argument for a fee out of range, an empty, duplicated (by GpuKey) or overlong GPU name, a
// malformed or duplicated region, or more than kMaxMarkets / kMaxRegions entries.
Status ValidateExchangeConfig(const ExchangeConfig& config);

}  // namespace gpuhub::market
