// Fleet: its configuration and the lookups every command starts from (cards, regions, prices,
// records). The rest of Fleet, one job a file: nodes.cc (admin), orders.cc (quotes and orders),
// customer_commands.cc, agent_reports.cc, queries.cc, lifecycle.cc (the time-driven lifecycle and
// the money), persistence.cc (restore and invariants).
#include "rentals/fleet.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

namespace gpuhub::rentals {

TaxBlock NoTax(std::int64_t net_micros) { return {net_micros, {}, 0, net_micros}; }

void Changes::Clear() { *this = Changes{}; }

void Changes::Normalize() {
  auto dedupe = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  dedupe(nodes);
  dedupe(rentals);
  dedupe(renewals);
}

bool Changes::empty() const {
  return transfers.empty() && nodes.empty() && rentals.empty() && renewals.empty() &&
         events.empty() && charges.empty() && notices.empty();
}

Fleet::Fleet(FleetConfig config) : config_(std::move(config)) {
  Status valid = ValidateFleetConfig(config_);
  GPUHUB_CHECK_MSG(valid.ok(), valid.message().c_str());
  for (std::size_t i = 0; i < config_.cards.size(); ++i) {
    card_by_key_.emplace(CardKey(config_.cards[i].name), static_cast<int>(i));
  }
  for (std::size_t i = 0; i < config_.regions.size(); ++i) {
    region_by_code_.emplace(config_.regions[i], static_cast<int>(i));
  }
  IndexCounts();
}

void Fleet::IndexCounts() {
  std::set<int> counts;
  for (const auto& card : config_.cards) counts.insert(card.counts.begin(), card.counts.end());
  all_counts_.assign(counts.begin(), counts.end());
  if (all_counts_.empty()) all_counts_ = {1};
  max_count_ = all_counts_.back();
}

Result<int> Fleet::CardIndex(std::string_view gpu, std::string_view field) const {
  auto it = card_by_key_.find(CardKey(gpu));
  if (it == card_by_key_.end() || gpu.size() > kMaxGpuNameBytes) {
    std::string names;
    for (const auto& c : config_.cards) {
      if (c.monthly_micros > 0) names += (names.empty() ? "" : ", ") + c.name;
    }
    return Status::InvalidArgument("unknown card '" + std::string(gpu.substr(0, 64)) +
                                   "'; the term fleet rents " + names)
        .WithField(std::string(field));
  }
  return it->second;
}

Result<int> Fleet::RegionIndex(std::string_view region, std::string_view field) const {
  auto code = CanonicalRegion(region);
  if (!code.ok()) return code.status().WithField(std::string(field));
  auto it = region_by_code_.find(*code);
  if (it == region_by_code_.end()) {
    std::string codes;
    for (const auto& r : config_.regions) codes += (codes.empty() ? "" : ", ") + r;
    return Status::InvalidArgument("unknown region '" + *code + "'; regions: " + codes)
        .WithField(std::string(field));
  }
  return it->second;
}

Result<std::string> Fleet::CardName(std::string_view gpu) const {
  auto it = card_by_key_.find(CardKey(gpu));
  if (it == card_by_key_.end()) return Status::NotFound("unknown card '" + std::string(gpu) + "'");
  return Card(it->second).name;
}

std::int64_t Fleet::DiscountPpm(int count) const {
  for (const auto& d : config_.discounts) {
    if (d.count == count) return d.ppm;
  }
  return 0;
}

Result<std::int64_t> Fleet::PriceMicros(std::int64_t list_micros, int count) const {
  std::int64_t subtotal = 0;
  if (!CheckedMul(list_micros, count, &subtotal)) {
    return Status::InvalidArgument("price out of range");
  }
  // list x count x (1 - discount), rounded once, half-even (catalog::SetPriceMicros' rule).
  return MulDivHalfEven(subtotal, kPpm - DiscountPpm(count), kPpm);
}

const Rental* Fleet::FindRental(RentalId id) const {
  auto it = rentals_.find(id);
  return it == rentals_.end() ? nullptr : &it->second.rental;
}

const Rental* Fleet::FindCustomerRental(UserId customer, RentalId id) const {
  const Rental* r = FindRental(id);
  return r != nullptr && r->customer_id == customer ? r : nullptr;
}

const Renewal* Fleet::FindRenewal(RentalId id, std::int64_t period) const {
  auto it = renewals_.find({id, period});
  return it == renewals_.end() ? nullptr : &it->second;
}

Fleet::RentalSlot& Fleet::Slot(RentalId id) { return rentals_.at(id); }

}  // namespace gpuhub::rentals
