#include "engine/alert_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace gpuhub::engine {
namespace {

TEST(AlertIndexTest, APriceAlertFiresWhenTheBestAskFallsToItAndReArmsAbove) {
  AlertIndex index;
  EXPECT_FALSE(index.AddPrice(1, "H100", 2'500'000, 3'000'000));
  EXPECT_FALSE(index.AddPrice(2, "H100", 2'000'000, 3'000'000));
  EXPECT_TRUE(index.BestAskChanged("H100", 2'600'000).empty());
  EXPECT_EQ(index.BestAskChanged("H100", 2'500'000), (std::vector<std::int64_t>{1}));  // at it
  EXPECT_TRUE(index.BestAskChanged("H100", 2'400'000).empty());  // still under: no second time
  EXPECT_TRUE(index.BestAskChanged("H100", 2'450'000).empty());
  EXPECT_TRUE(index.BestAskChanged("H100", std::nullopt).empty());  // no asks: re-armed
  EXPECT_EQ(index.BestAskChanged("H100", 1'000'000), (std::vector<std::int64_t>{2, 1}));
  EXPECT_TRUE(index.BestAskChanged("Other", 1).empty());  // not watched
  EXPECT_FALSE(index.WatchesMarket("Other"));
  index.RemovePrice(1, "H100", 2'500'000);
  index.RemovePrice(2, "H100", 2'000'000);
  EXPECT_FALSE(index.WatchesMarket("H100"));
  EXPECT_EQ(index.size(), 0u);
}

TEST(AlertIndexTest, AnyOfferMeetsAnAnyPriceAlertAndNothingMeetsAnEmptyBook) {
  AlertIndex index;
  EXPECT_FALSE(index.AddPrice(7, "B200", kAnyPriceMicros, std::nullopt));
  EXPECT_EQ(index.BestAskChanged("B200", 900'000'000), (std::vector<std::int64_t>{7}));
  EXPECT_TRUE(index.AddPrice(8, "B200", kAnyPriceMicros, 900'000'000));  // holds: fires at once
}

TEST(AlertIndexTest, AStockKeyFiresItsAlertsOnceWhenItsStockComesBack) {
  AlertIndex index;
  const StockKey dfw{"A40", "DFW-1", 2};
  const StockKey any{"A40", "", 2};
  EXPECT_FALSE(index.AddStock(1, dfw, false));
  EXPECT_FALSE(index.AddStock(2, dfw, false));
  EXPECT_FALSE(index.AddStock(3, any, false));
  EXPECT_TRUE(index.WatchesCard("A40"));
  EXPECT_FALSE(index.WatchesCard("L4"));
  // A change in DFW-1 touches the any-region key and DFW-1's; one in IAD-1 the any-region key.
  EXPECT_EQ(index.StockKeysFor("A40", "DFW-1"), (std::vector<StockKey>{any, dfw}));
  EXPECT_EQ(index.StockKeysFor("A40", "IAD-1"), (std::vector<StockKey>{any}));
  EXPECT_EQ(index.StockChanged(dfw, true), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(index.StockChanged(dfw, true).empty());
  EXPECT_TRUE(index.StockChanged(dfw, false).empty());
  EXPECT_EQ(index.StockChanged(dfw, true), (std::vector<std::int64_t>{1, 2}));
  index.RemoveStock(1, dfw);
  index.RemoveStock(2, dfw);
  index.RemoveStock(3, any);
  EXPECT_FALSE(index.WatchesCard("A40"));
  EXPECT_EQ(index.size(), 0u);
}

// Simulation: random alerts on three markets and a few stock keys, random best asks and stock,
// random cancellations. A naive model keeps every alert's own last condition and fires those that
// went false -> true; the index must fire exactly the same alerts, and each alert must have fired
// exactly as many times as its condition crossed from false to true (counting its creation when it
// held then).
TEST(AlertIndexTest, SimulationFiresExactlyOncePerCrossing) {
  std::mt19937_64 rng(20260529);
  const std::vector<std::string> markets = {"A", "B", "C"};
  const std::vector<StockKey> keys = {
      {"X", "", 1}, {"X", "R1", 1}, {"X", "R2", 1}, {"X", "R1", 2}, {"Y", "", 8}};
  struct Model {
    bool price = false;
    std::string market;
    std::int64_t threshold = 0;
    StockKey key;
    bool holds = false;
    int crossings = 0;
    int fired = 0;
  };
  std::map<std::int64_t, Model> alive;
  std::map<std::string, std::optional<std::int64_t>> best;
  std::map<StockKey, bool> stock;
  auto price_of = [&]() -> std::optional<std::int64_t> {
    if (rng() % 6 == 0) return std::nullopt;
    return static_cast<std::int64_t>(1 + rng() % 20) * 100'000;
  };
  AlertIndex index;
  std::int64_t next_id = 1;
  int total_fired = 0;
  for (int step = 0; step < 200'000; ++step) {
    const auto op = rng() % 10;
    std::vector<std::int64_t> fired;
    if (op == 0 || (op == 1 && alive.size() < 5)) {  // a new alert
      Model m;
      m.price = rng() % 2 == 0;
      const std::int64_t id = next_id++;
      bool fires;
      if (m.price) {
        m.market = markets[rng() % markets.size()];
        m.threshold =
            rng() % 10 == 0 ? kAnyPriceMicros : static_cast<std::int64_t>(1 + rng() % 20) * 100'000;
        m.holds = PriceHolds(best[m.market], m.threshold);
        fires = index.AddPrice(id, m.market, m.threshold, best[m.market]);
      } else {
        m.key = keys[rng() % keys.size()];
        m.holds = stock[m.key];
        fires = index.AddStock(id, m.key, stock[m.key]);
      }
      EXPECT_EQ(fires, m.holds);
      m.crossings = m.holds ? 1 : 0;
      if (fires) fired.push_back(id);
      alive[id] = m;
    } else if (op == 1) {  // cancel one
      auto it = std::next(alive.begin(), static_cast<long>(rng() % alive.size()));
      if (it->second.price) {
        index.RemovePrice(it->first, it->second.market, it->second.threshold);
      } else {
        index.RemoveStock(it->first, it->second.key);
      }
      EXPECT_EQ(it->second.fired, it->second.crossings) << "alert " << it->first;
      alive.erase(it);
    } else if (op < 6) {  // a book changes
      const std::string& market = markets[rng() % markets.size()];
      best[market] = price_of();
      fired = index.BestAskChanged(market, best[market]);
    } else {  // stock changes
      const StockKey& key = keys[rng() % keys.size()];
      stock[key] = rng() % 3 == 0;
      fired = index.StockChanged(key, stock[key]);
    }
    // The model: every alive alert whose own condition went false -> true.
    std::vector<std::int64_t> expected;
    for (auto& [id, m] : alive) {
      const bool now = m.price ? PriceHolds(best[m.market], m.threshold) : stock[m.key];
      if (!m.holds && now) {
        ++m.crossings;
        expected.push_back(id);
      }
      m.holds = now;
    }
    std::sort(fired.begin(), fired.end());
    // A new alert that holds at once is in `fired` but was counted at its creation above.
    std::vector<std::int64_t> fired_by_change;
    for (std::int64_t id : fired) {
      ++alive[id].fired;
      if (!(op == 0 || op == 1) || id != next_id - 1) fired_by_change.push_back(id);
    }
    ASSERT_EQ(fired_by_change, expected) << "step " << step;
    total_fired += static_cast<int>(fired.size());
    ASSERT_EQ(index.size(), alive.size());
  }
  for (const auto& [id, m] : alive) EXPECT_EQ(m.fired, m.crossings) << "alert " << id;
  EXPECT_GT(total_fired, 10'000);  // the walk did cross, many times
}

}  // namespace
}  // namespace gpuhub::engine
