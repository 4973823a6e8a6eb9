// The term fleet's configuration from the catalog (data/catalog.toml): its regions, multi-card
// discounts and term cards (list prices, derived weekly prices, rentable counts, regions, FP8,
// included local NVMe per card). Built only with the catalog (GPUHUB_HAVE_FIT builds).
#pragma once

#include "catalog/catalog.h"
#include "rentals/config.h"

namespace gpuhub::http {

rentals::FleetConfig RentalsFleetConfig(const catalog::Catalog& fleet);

}  // namespace gpuhub::http
