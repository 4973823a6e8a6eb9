// What a term fleet is configured with: the cards it rents (list prices, the counts they are rented
// in, their regions), the multi-card discounts, the regions, and how instances get provisioned.
// The engine builds it from the catalog (data/catalog.toml): the rentals domain does not read the
// catalog itself (DESIGN.md: catalog and rentals are separate branches of the component graph).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuhub::rentals {

struct CardConfig {
  std::string name;                 // "H100 SXM"
  std::int64_t monthly_micros = 0;  // list price per card per 30-day term, USD, tax excluded
  std::int64_t weekly_micros = 0;   // per card per 7-day term
  bool weekly_derived = false;      // not published: derived from the fleet's weekly/monthly ratio
  std::vector<int> counts;          // the card counts it is rented in, ascending ({2, 4, 8} for B200)
  std::vector<std::string> regions;  // where it is offered
  bool fp8 = false;                  // the hardware runs FP8
  std::int64_t nvme_included_gb_per_card = 0;  // local NVMe included with each card (0: none)
};

struct DiscountConfig {
  int count = 0;
  std::int64_t ppm = 0;  // 50'000 = 5%
};

// How an instance goes from provisioning to running.
enum class Provisioning : std::uint8_t {
  // No host agent (today): the instance counts as running the moment the order is paid, and the
  // physical wipe of a released rental is recorded at its due time.
  kImmediate,
  // The host agent (issue 12) reports running (with connection details) or failed, and the wipe;
  // an instance not running within kProvisioningDeadlineMicros is refunded in full.
  kAgent,
};

struct FleetConfig {
  std::vector<CardConfig> cards;
  // Extra local NVMe per TB per 30-day month, USD micro-units, tax excluded (spec: $9); a week
  // pays 7/30 of it.
  std::int64_t extra_nvme_micros_per_tb_month = 9'000'000;
  std::vector<DiscountConfig> discounts;  // counts above 1; a count without an entry gets none
  std::vector<std::string> regions;       // region codes nodes may be in
  Provisioning provisioning = Provisioning::kImmediate;
};

// invalid_argument for an empty, duplicated (by CardKey) or overlong card name, a non-positive
// price, counts that are empty, not ascending or outside 1..kMaxCardsPerNode, a region a card names
// that is not in `regions`, a malformed or duplicated region, a discount outside 0..100% or for a
// count below 2, and more than kMaxCards / kMaxRegions entries.
Status ValidateFleetConfig(const FleetConfig& config);

}  // namespace gpuhub::rentals
