#include "rentals/config.h"

#include <set>

#include "rentals/inventory.h"
#include "rentals/limits.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

Status ValidateFleetConfig(const FleetConfig& config) {
  if (config.cards.size() > kMaxCards) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxCards) + " cards");
  }
  if (config.regions.size() > kMaxRegions) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxRegions) + " regions");
  }
  std::set<std::string> regions;
  for (const auto& r : config.regions) {
    GPUHUB_ASSIGN_OR_RETURN(std::string code, CanonicalRegion(r));
    if (code != r) return Status::InvalidArgument("region '" + r + "' is not canonical");
    if (!regions.insert(code).second) {
      return Status::InvalidArgument("region '" + r + "' is listed twice");
    }
  }
  std::set<std::string> keys;
  for (const auto& card : config.cards) {
    std::string key = CardKey(card.name);
    if (key.empty() || card.name.size() > kMaxGpuNameBytes) {
      return Status::InvalidArgument("card names must be 1.." + std::to_string(kMaxGpuNameBytes) +
                                     " characters");
    }
    if (!keys.insert(key).second) {
      return Status::InvalidArgument("card '" + card.name + "' is listed twice");
    }
    if (card.monthly_micros <= 0 || card.weekly_micros <= 0 ||
        card.monthly_micros > kMaxAmountMicros || card.weekly_micros > kMaxAmountMicros) {
      return Status::InvalidArgument(card.name + ": prices must be positive");
    }
    if (card.counts.empty()) return Status::InvalidArgument(card.name + ": no card counts");
    int previous = 0;
    for (int n : card.counts) {
      if (!IsBlockSize(n) || n <= previous) {
        return Status::InvalidArgument(card.name +
                                       ": counts must be ascending powers of two up to " +
                                       std::to_string(kMaxCardsPerNode));
      }
      previous = n;
    }
    for (const auto& r : card.regions) {
      if (!regions.count(r)) {
        return Status::InvalidArgument(card.name + ": unknown region '" + r + "'");
      }
    }
    if (card.nvme_included_gb_per_card < 0 || card.nvme_included_gb_per_card > kMaxNvmeGbPerNode) {
      return Status::InvalidArgument(card.name + ": included NVMe out of range");
    }
  }
  // A whole TB for 30 days must stay within an amount, and 7/30 of a TB must cost something.
  if (config.extra_nvme_micros_per_tb_month < kDaysPerStorageMonth ||
      config.extra_nvme_micros_per_tb_month > kMaxAmountMicros / kMaxExtraNvmeTbPerRental) {
    return Status::InvalidArgument("the extra NVMe price per TB-month is out of range");
  }
  std::set<int> counts;
  for (const auto& d : config.discounts) {
    if (d.count < 2 || d.ppm < 0 || d.ppm >= kPpm || !counts.insert(d.count).second) {
      return Status::InvalidArgument("discounts are for counts of 2 or more, 0..100%, once each");
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::rentals
