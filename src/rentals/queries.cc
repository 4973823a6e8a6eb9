// Fleet: the reads: rentals, nodes, history, charges, stock and wipes that are overdue.
#include "rentals/fleet.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuhub::rentals {

std::vector<Rental> Fleet::ListRentals(UserId customer, std::size_t limit) const {
  std::vector<Rental> out;
  auto it = rentals_by_customer_.find(customer);
  if (it == rentals_by_customer_.end()) return out;
  for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
    out.push_back(rentals_.at(*id).rental);
  }
  return out;
}

std::vector<Node> Fleet::ListNodes(std::string_view gpu, std::string_view region, NodeId after,
                                   std::size_t limit) const {
  std::vector<Node> out;
  std::string key = CardKey(gpu);
  std::string code;
  if (!region.empty()) {
    auto canonical = CanonicalRegion(region);
    code = canonical.ok() ? *canonical : "?";  // a malformed region matches no node
  }
  for (auto it = inventory_.nodes().upper_bound(after);
       it != inventory_.nodes().end() && out.size() < limit; ++it) {
    const Node& node = it->second;
    if (!gpu.empty() && CardKey(node.gpu) != key) continue;
    if (!code.empty() && node.region != code) continue;
    out.push_back(node);
  }
  return out;
}

std::vector<Rental> Fleet::LiveRentalsOnNode(NodeId id) const {
  std::vector<Rental> out;
  auto it = rentals_by_node_.find(id);
  if (it == rentals_by_node_.end()) return out;
  for (RentalId r : it->second) {
    const Rental& rental = rentals_.at(r).rental;
    if (IsLive(rental.state)) out.push_back(rental);
  }
  return out;
}

std::vector<Rental> Fleet::UnwipedOnNode(NodeId id) const {
  std::vector<Rental> out;
  auto it = rentals_by_node_.find(id);
  if (it == rentals_by_node_.end()) return out;
  for (RentalId r : it->second) {
    const Rental& rental = rentals_.at(r).rental;
    if (rental.state == RentalState::kReleased && rental.instance.wiped_at == 0) {
      out.push_back(rental);
    }
  }
  return out;
}

std::vector<Event> Fleet::History(RentalId id) const {
  auto it = rentals_.find(id);
  return it == rentals_.end() ? std::vector<Event>{} : it->second.history;
}

std::vector<Charge> Fleet::ChargesOf(RentalId id) const {
  std::vector<Charge> out;
  auto it = rentals_.find(id);
  if (it == rentals_.end()) return out;
  for (ChargeId c : it->second.charges) out.push_back(charges_.at(c));
  return out;
}

std::vector<StockByCard> Fleet::Stock() const {
  std::vector<StockByCard> out;
  for (std::size_t i = 0; i < config_.cards.size(); ++i) {
    const CardConfig& card = config_.cards[i];
    if (card.counts.empty()) continue;  // no longer offered
    StockByCard s;
    s.gpu = card.name;
    s.counts = card.counts;
    for (const auto& r : card.regions) {
      StockRow row = inventory_.Stock(static_cast<int>(i), region_by_code_.at(r));
      row.gpu = card.name;
      row.region = r;
      s.regions.push_back(row);
    }
    out.push_back(std::move(s));
  }
  return out;
}

int Fleet::FreeSets(std::string_view gpu, std::string_view region, int count) const {
  auto card = card_by_key_.find(CardKey(gpu));
  if (card == card_by_key_.end()) return 0;
  int sets = 0;
  for (const auto& r : config_.cards[static_cast<std::size_t>(card->second)].regions) {
    if (!region.empty() && r != region) continue;
    sets += inventory_.Stock(card->second, region_by_code_.at(r)).Sets(count);
  }
  return sets;
}

std::vector<Rental> Fleet::OverdueWipes(TimestampMicros now, std::size_t limit) const {
  std::vector<Rental> out;
  for (const auto& [id, slot] : rentals_) {
    const Rental& r = slot.rental;
    if (r.state == RentalState::kReleased && r.instance.wiped_at == 0 &&
        r.instance.wipe_due_at <= now) {
      out.push_back(r);
    }
  }
  std::sort(out.begin(), out.end(), [](const Rental& a, const Rental& b) {
    return a.instance.wipe_due_at < b.instance.wipe_due_at;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace gpuhub::rentals
