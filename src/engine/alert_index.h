// The index behind stock and price alerts (engine/alerts.h): which alerts a change can make
// fire, found without looking at any other alert.
//
// - Stock alerts are keyed by (card, region, count): every alert of one key has the same
//   condition ("a rental of `count` cards of `card` can be placed now in `region`", region ""
//   meaning any of the card's regions), so the key remembers whether it held when last told and a
//   change of stock fires exactly the alerts of the keys that went from false to true.
// - Price alerts are kept per spot market as a set ordered by (threshold, id), with the market's
//   best ask as last told. An alert's condition is "best ask <= threshold"; when the best ask falls
//   from `old` to `now`, the alerts that cross are exactly those with now <= threshold < old: one
//   range of the ordered set. A rise crosses nothing upwards: the alerts above it are re-armed by
//   the same comparison the next time the price falls. A market without asks has no best ask,
//   which is above every threshold.
// So an alert fires once per crossing of its condition from false to true, and re-arms when the
// condition goes false again; nothing else is stored per alert. An alert added while its condition
// already holds is reported by Add* (the caller fires it then: the person wants to know now).
//
// Pure: no clock, no I/O, no knowledge of where the stock or the best ask come from. Not
// thread-safe (the engine's writer owns it).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpuhub::engine {

// A price alert's threshold that any offer meets ("tell me when anything is offered").
inline constexpr std::int64_t kAnyPriceMicros = std::numeric_limits<std::int64_t>::max();

struct StockKey {
  std::string gpu;     // the term card's canonical name
  std::string region;  // "" = any of the card's regions
  int count = 0;       // cards in one rental
  auto operator<=>(const StockKey&) const = default;
};

class AlertIndex {
 public:
  // ----- Stock ---------------------------------------------------------------------------------
  // Adds alert `id` under `key`. `holds_now`: the key's condition now (it must agree with what
  // the key was last told when the key is already watched). Returns whether the alert fires at
  // once (its condition holds now).
  bool AddStock(std::int64_t id, const StockKey& key, bool holds_now);
  void RemoveStock(std::int64_t id, const StockKey& key);
  // The key's condition is now `holds`: the alerts that fire (false -> true), ascending; none
  // when the key is not watched or nothing crossed.
  std::vector<std::int64_t> StockChanged(const StockKey& key, bool holds);
  // Whether any stock alert names `gpu` (so that a change of its stock needs a look).
  bool WatchesCard(const std::string& gpu) const;
  // The watched keys a change of `gpu`'s stock in `region` can touch: those of that region and
  // those of any region, in order.
  std::vector<StockKey> StockKeysFor(const std::string& gpu, const std::string& region) const;
  // The condition a watched key was last told; nullopt when the key is not watched.
  std::optional<bool> StockHolds(const StockKey& key) const;

  // ----- Price ---------------------------------------------------------------------------------
  // Adds alert `id` on `market` at `threshold_micros` (kAnyPriceMicros: any offer). `best_now`:
  // the market's best ask now (nullopt: no asks). Returns whether it fires at once.
  bool AddPrice(std::int64_t id, const std::string& market, std::int64_t threshold_micros,
                std::optional<std::int64_t> best_now);
  void RemovePrice(std::int64_t id, const std::string& market, std::int64_t threshold_micros);
  // The market's best ask is now `best`: the alerts that fire, cheapest threshold first.
  std::vector<std::int64_t> BestAskChanged(const std::string& market,
                                           std::optional<std::int64_t> best);
  bool WatchesMarket(const std::string& market) const;
  // The best ask a watched market was last told (nullopt inside: no asks); nullopt outside when
  // the market is not watched.
  std::optional<std::optional<std::int64_t>> LastBestAsk(const std::string& market) const;

  // Every watched market and stock key (invariant checks walk them).
  std::vector<std::string> WatchedMarkets() const;
  std::vector<StockKey> WatchedStockKeys() const;
  std::size_t size() const { return size_; }

 private:
  struct StockEntry {
    bool holds = false;
    std::set<std::int64_t> ids;
  };
  struct PriceEntry {
    std::optional<std::int64_t> best;
    std::set<std::pair<std::int64_t, std::int64_t>> thresholds;  // (threshold, id)
  };
  std::map<StockKey, StockEntry> stock_;
  std::map<std::string, int> stock_cards_;  // card -> watched keys naming it
  std::map<std::string, PriceEntry> price_;
  std::size_t size_ = 0;
};

// Whether `threshold` is met by `best` (a market without asks meets none).
inline bool PriceHolds(std::optional<std::int64_t> best, std::int64_t threshold_micros) {
  return best.has_value() && *best <= threshold_micros;
}

}  // namespace gpuhub::engine
