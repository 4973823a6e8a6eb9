#include "engine/alert_index.h"

namespace gpuhub::engine {

bool AlertIndex::AddStock(std::int64_t id, const StockKey& key, bool holds_now) {
  auto [it, inserted] = stock_.try_emplace(key);
  if (inserted) ++stock_cards_[key.gpu];
  it->second.holds = holds_now;
  if (it->second.ids.insert(id).second) ++size_;
  return holds_now;
}

void AlertIndex::RemoveStock(std::int64_t id, const StockKey& key) {
  auto it = stock_.find(key);
  if (it == stock_.end() || it->second.ids.erase(id) == 0) return;
  --size_;
  if (!it->second.ids.empty()) return;
  stock_.erase(it);
  auto card = stock_cards_.find(key.gpu);
  if (--card->second == 0) stock_cards_.erase(card);
}

std::vector<std::int64_t> AlertIndex::StockChanged(const StockKey& key, bool holds) {
  auto it = stock_.find(key);
  if (it == stock_.end()) return {};
  const bool was = it->second.holds;
  it->second.holds = holds;
  if (was || !holds) return {};
  return {it->second.ids.begin(), it->second.ids.end()};
}

bool AlertIndex::WatchesCard(const std::string& gpu) const { return stock_cards_.contains(gpu); }

std::vector<StockKey> AlertIndex::StockKeysFor(const std::string& gpu,
                                               const std::string& region) const {
  std::vector<StockKey> out;
  if (!WatchesCard(gpu)) return out;
  // Keys sort by (gpu, region, count): the any-region keys ("") first, then the region's.
  static const std::string kAnyRegion;
  for (const std::string* r : {&kAnyRegion, &region}) {
    for (auto it = stock_.lower_bound(StockKey{gpu, *r, 0});
         it != stock_.end() && it->first.gpu == gpu && it->first.region == *r; ++it) {
      out.push_back(it->first);
    }
    if (region.empty()) break;  // the same keys twice otherwise
  }
  return out;
}

std::optional<bool> AlertIndex::StockHolds(const StockKey& key) const {
  auto it = stock_.find(key);
  if (it == stock_.end()) return std::nullopt;
  return it->second.holds;
}

bool AlertIndex::AddPrice(std::int64_t id, const std::string& market, std::int64_t threshold_micros,
                          std::optional<std::int64_t> best_now) {
  PriceEntry& entry = price_[market];
  entry.best = best_now;
  if (entry.thresholds.emplace(threshold_micros, id).second) ++size_;
  return PriceHolds(best_now, threshold_micros);
}

void AlertIndex::RemovePrice(std::int64_t id, const std::string& market,
                             std::int64_t threshold_micros) {
  auto it = price_.find(market);
  if (it == price_.end() || it->second.thresholds.erase({threshold_micros, id}) == 0) return;
  --size_;
  if (it->second.thresholds.empty()) price_.erase(it);
}

std::vector<std::int64_t> AlertIndex::BestAskChanged(const std::string& market,
                                                     std::optional<std::int64_t> best) {
  auto it = price_.find(market);
  if (it == price_.end()) return {};
  const std::optional<std::int64_t> old = it->second.best;
  it->second.best = best;
  // Nothing crosses into "best <= threshold" unless there is a best ask and it fell.
  if (!best.has_value() || (old.has_value() && *best >= *old)) return {};
  const auto& set = it->second.thresholds;
  auto first = set.lower_bound({*best, std::numeric_limits<std::int64_t>::min()});
  // Thresholds at or above the old best ask held already; with no old best ask none did.
  auto last = old.has_value() ? set.lower_bound({*old, std::numeric_limits<std::int64_t>::min()})
                              : set.end();
  std::vector<std::int64_t> out;
  for (auto i = first; i != last; ++i) out.push_back(i->second);
  return out;
}

bool AlertIndex::WatchesMarket(const std::string& market) const { return price_.contains(market); }

std::optional<std::optional<std::int64_t>> AlertIndex::LastBestAsk(
    const std::string& market) const {
  auto it = price_.find(market);
  if (it == price_.end()) return std::nullopt;
  return it->second.best;
}

std::vector<std::string> AlertIndex::WatchedMarkets() const {
  std::vector<std::string> out;
  for (const auto& [market, entry] : price_) out.push_back(market);
  return out;
}

std::vector<StockKey> AlertIndex::WatchedStockKeys() const {
  std::vector<StockKey> out;
  for (const auto& [key, entry] : stock_) out.push_back(key);
  return out;
}

}  // namespace gpuhub::engine
