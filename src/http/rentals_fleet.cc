#include "http/rentals_fleet.h"

#include "core/money.h"

namespace gpuhub::http {

rentals::FleetConfig RentalsFleetConfig(const catalog::Catalog& fleet) {
  rentals::FleetConfig config;
  for (const auto& region : fleet.regions) config.regions.push_back(region.code);
  for (const auto& d : fleet.discounts) config.discounts.push_back({d.count, d.ppm});
  for (const auto& card : fleet.term) {
    rentals::CardConfig c;
    c.name = card.name;
    c.monthly_micros = card.monthly_micros;
    c.weekly_micros = card.weekly_micros;
    c.weekly_derived = card.weekly_derived;
    c.counts = card.counts;
    c.regions = card.regions;
    c.fp8 = card.fp8;
    if (card.local_nvme_tb) {
      // "2" or "0.5" TB per card, exact (parsed as a decimal), in GB (1 TB = 1000 GB).
      auto micros = ParseDecimalMicros(*card.local_nvme_tb, 6);
      if (micros.ok()) c.nvme_included_gb_per_card = *micros / 1000;
    }
    config.cards.push_back(std::move(c));
  }
  return config;
}

}  // namespace gpuhub::http
