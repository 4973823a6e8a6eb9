#include "market/book.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpuhub::market {
namespace {

constexpr RegionIndex kDfw = 1, kIad = 2;
constexpr TimestampMicros kNow = 1'000;

// ----- FindAsk: which ask a bid takes ---------------------------------------------------------

struct FindAskCase {
  const char* name;
  std::vector<BookAsk> asks;
  int gpus;
  RegionIndex region;
  Ticks max_price;
  OrderId expected;
};

TEST(OrderBookTest, FindAskTable) {
  const FindAskCase cases[] = {
      {"empty book", {}, 1, kAnyRegion, 10'000, 0},
      {"best price wins",
       {{1, 3000, 8, 1, kDfw, kNever}, {2, 2880, 8, 1, kDfw, kNever}},
       2,
       kAnyRegion,
       10'000,
       2},
      {"tie goes to the earlier ask",
       {{5, 2880, 8, 1, kDfw, kNever}, {3, 2880, 8, 1, kIad, kNever}},
       2,
       kAnyRegion,
       10'000,
       3},
      {"price above the limit", {{1, 3000, 8, 1, kDfw, kNever}}, 2, kAnyRegion, 2999, 0},
      {"price equal to the limit", {{1, 3000, 8, 1, kDfw, kNever}}, 2, kAnyRegion, 3000, 1},
      {"all N GPUs on one machine",
       {{1, 2000, 1, 1, kDfw, kNever}, {2, 2000, 1, 1, kDfw, kNever}},
       2,
       kAnyRegion,
       10'000,
       0},
      {"cheaper ask too small, dearer one fits",
       {{1, 2000, 1, 1, kDfw, kNever}, {2, 2500, 4, 1, kDfw, kNever}},
       2,
       kAnyRegion,
       10'000,
       2},
      {"min_gpus above the bid", {{1, 2000, 8, 4, kDfw, kNever}}, 2, kAnyRegion, 10'000, 0},
      {"min_gpus equal to the bid", {{1, 2000, 8, 4, kDfw, kNever}}, 4, kAnyRegion, 10'000, 1},
      {"region filter",
       {{1, 2000, 8, 1, kDfw, kNever}, {2, 2500, 8, 1, kIad, kNever}},
       2,
       kIad,
       10'000,
       2},
      {"region filter, none there", {{1, 2000, 8, 1, kDfw, kNever}}, 2, kIad, 10'000, 0},
      {"expired ask skipped (lazy)",
       {{1, 2000, 8, 1, kDfw, kNow}, {2, 2100, 8, 1, kDfw, kNow + 1}},
       1,
       kAnyRegion,
       10'000,
       2},
      {"market bid takes the best",
       {{1, 9000, 8, 1, kDfw, kNever}, {2, 8990, 8, 1, kDfw, kNever}},
       8,
       kAnyRegion,
       1'000'000,
       2},
      {"out-of-range quantity", {{1, 2000, 8, 1, kDfw, kNever}}, 17, kAnyRegion, 10'000, 0},
  };
  for (const auto& c : cases) {
    OrderBook book;
    for (const auto& a : c.asks) book.AddAsk(a);
    EXPECT_EQ(book.FindAsk(c.gpus, c.region, c.max_price, kNow), c.expected) << c.name;
    EXPECT_TRUE(book.CheckConsistency().ok()) << c.name;
  }
}

// ----- FindBid: which bid an ask fills --------------------------------------------------------

struct FindBidCase {
  const char* name;
  std::vector<BookBid> bids;
  int free;
  int min_gpus;
  RegionIndex region;
  Ticks min_price;
  OrderId expected;
};

TEST(OrderBookTest, FindBidTable) {
  const FindBidCase cases[] = {
      {"empty book", {}, 8, 1, kDfw, 1000, 0},
      {"highest bid wins",
       {{1, 2900, 2, kAnyRegion, kNever}, {2, 3000, 2, kAnyRegion, kNever}},
       8,
       1,
       kDfw,
       1000,
       2},
      {"tie goes to the earlier bid",
       {{4, 3000, 2, kAnyRegion, kNever}, {2, 3000, 2, kAnyRegion, kNever}},
       8,
       1,
       kDfw,
       1000,
       2},
      {"bid below the ask", {{1, 2800, 2, kAnyRegion, kNever}}, 8, 1, kDfw, 2880, 0},
      {"bid too large for the free GPUs",
       {{1, 3000, 8, kAnyRegion, kNever}, {2, 2900, 2, kAnyRegion, kNever}},
       4,
       1,
       kDfw,
       1000,
       2},
      {"bid below min_gpus",
       {{1, 3000, 1, kAnyRegion, kNever}, {2, 2900, 4, kAnyRegion, kNever}},
       8,
       2,
       kDfw,
       1000,
       2},
      {"bid in another region",
       {{1, 3000, 1, kIad, kNever}, {2, 2900, 1, kDfw, kNever}},
       8,
       1,
       kDfw,
       1000,
       2},
      {"bid in any region", {{1, 3000, 1, kAnyRegion, kNever}}, 8, 1, kIad, 1000, 1},
      {"expired bid skipped",
       {{1, 3000, 1, kAnyRegion, kNow}, {2, 2900, 1, kAnyRegion, kNever}},
       8,
       1,
       kDfw,
       1000,
       2},
      {"min_gpus above the free GPUs", {{1, 3000, 1, kAnyRegion, kNever}}, 2, 4, kDfw, 1000, 0},
  };
  for (const auto& c : cases) {
    OrderBook book;
    for (const auto& b : c.bids) book.AddBid(b);
    EXPECT_EQ(book.FindBid(c.free, c.min_gpus, c.region, c.min_price, kNow), c.expected) << c.name;
    EXPECT_TRUE(book.CheckConsistency().ok()) << c.name;
  }
}

TEST(OrderBookTest, AnAskWhoseGpusComeBackKeepsItsPlace) {
  OrderBook book;
  book.AddAsk({10, 2000, 8, 1, kDfw, kNever});
  book.AddAsk({20, 2000, 8, 1, kDfw, kNever});
  book.AddAsk({30, 2000, 8, 1, kDfw, kNever});
  EXPECT_EQ(book.FindAsk(1, kAnyRegion, 2000, kNow), 10);
  book.Remove(10);  // fully leased
  EXPECT_EQ(book.FindAsk(1, kAnyRegion, 2000, kNow), 20);
  book.AddAsk({10, 2000, 2, 1, kDfw, kNever});  // GPUs came back: first in line again
  EXPECT_EQ(book.FindAsk(1, kAnyRegion, 2000, kNow), 10);
  EXPECT_EQ(book.FindAsk(4, kAnyRegion, 2000, kNow), 20);
  book.SetAskFree(20, 1);
  EXPECT_EQ(book.FindAsk(2, kAnyRegion, 2000, kNow), 10);
  EXPECT_EQ(book.FindAsk(4, kAnyRegion, 2000, kNow), 30);
  EXPECT_TRUE(book.CheckConsistency().ok());
}

TEST(OrderBookTest, DepthByPriceLevel) {
  OrderBook book;
  book.AddAsk({1, 2880, 8, 1, kDfw, kNever});
  book.AddAsk({2, 2880, 4, 1, kIad, kNever});
  book.AddAsk({3, 3000, 2, 1, kIad, kNever});
  book.AddBid({4, 2500, 2, kAnyRegion, kNever});
  book.AddBid({5, 2700, 1, kAnyRegion, kNever});
  book.AddBid({6, 2700, 4, kAnyRegion, kNever});
  auto asks = book.AskLevels(10);
  ASSERT_EQ(asks.size(), 2u);
  EXPECT_EQ(asks[0].price, 2880);
  EXPECT_EQ(asks[0].gpus, 12);
  EXPECT_EQ(asks[0].orders, 2);
  EXPECT_EQ(asks[1].price, 3000);
  EXPECT_EQ(asks[1].gpus, 2);
  auto bids = book.BidLevels(1);
  ASSERT_EQ(bids.size(), 1u);
  EXPECT_EQ(bids[0].price, 2700);
  EXPECT_EQ(bids[0].gpus, 5);
  EXPECT_EQ(book.BestAskPrice(), 2880);
  EXPECT_EQ(book.BestBidPrice(), 2700);
  EXPECT_EQ(book.ask_gpus(), 14);
  EXPECT_EQ(book.bid_gpus(), 7);
  book.SetAskFree(1, 1);
  EXPECT_EQ(book.AskLevels(1)[0].gpus, 5);
  book.Remove(1);
  book.Remove(2);
  EXPECT_EQ(book.BestAskPrice(), 3000);
  EXPECT_EQ(book.ask_orders(), 1u);
  EXPECT_TRUE(book.CheckConsistency().ok());
}

// No self-trades: a search passes over the orders of the account on the other side, wherever they
// stand in price-time priority, and finds the next one of another account.
TEST(OrderBookTest, AnAccountsOwnOrdersArePassedOver) {
  constexpr OwnerTag kAlice = 1, kBob = 2;
  OrderBook book;
  book.AddAsk({1, 2000, 8, 1, kDfw, kNever, kAlice});  // cheapest: Alice's own
  book.AddAsk({2, 2500, 8, 1, kDfw, kNever, kAlice});
  book.AddAsk({3, 2500, 8, 1, kDfw, kNever, kBob});
  EXPECT_EQ(book.FindAsk(2, kAnyRegion, 3000, kNow), 1);
  EXPECT_EQ(book.FindAsk(2, kAnyRegion, 3000, kNow, kAlice), 3);
  EXPECT_EQ(book.FindAsk(2, kAnyRegion, 2400, kNow, kAlice), 0);  // only her own is that cheap
  EXPECT_EQ(book.FindAsk(2, kAnyRegion, 3000, kNow, kBob), 1);
  book.AddBid({4, 2600, 2, kAnyRegion, kNever, kBob});  // the best bid: Bob's
  book.AddBid({5, 2600, 2, kAnyRegion, kNever, kAlice});
  book.AddBid({6, 2550, 4, kAnyRegion, kNever, kAlice});
  EXPECT_EQ(book.FindBid(8, 1, kDfw, 2500, kNow), 4);
  EXPECT_EQ(book.FindBid(8, 1, kDfw, 2500, kNow, nullptr, kBob), 5);
  EXPECT_EQ(book.FindBid(8, 1, kDfw, 2500, kNow, nullptr, kAlice), 4);
  Ticks cursor = OrderBook::kBidCursorStart;
  EXPECT_EQ(book.FindBid(8, 1, kDfw, 2500, kNow, &cursor, kBob), 5);
  book.Remove(5);
  EXPECT_EQ(book.FindBid(6, 1, kDfw, 2500, kNow, &cursor, kBob), 6);
  book.Remove(6);
  EXPECT_EQ(book.FindBid(2, 1, kDfw, 2500, kNow, &cursor, kBob), 0);
  EXPECT_TRUE(book.CheckConsistency().ok());
}

// ----- Against a brute-force model ------------------------------------------------------------

struct ModelOrder {
  bool ask;
  Ticks price;
  int qty;
  int min_gpus;
  RegionIndex region;
  TimestampMicros until;
  OwnerTag owner = kNoOwner;
};

OrderId BruteFindAsk(const std::map<OrderId, ModelOrder>& orders, int gpus, RegionIndex region,
                     Ticks max_price, TimestampMicros now, OwnerTag skip = kSkipNoOwner) {
  OrderId best = 0;
  Ticks best_price = 0;
  for (const auto& [id, o] : orders) {  // ascending id: the first at a price is the earliest
    if (!o.ask || o.price > max_price || o.qty < gpus || o.min_gpus > gpus || now >= o.until ||
        o.owner == skip)
      continue;
    if (region != kAnyRegion && o.region != region) continue;
    if (best == 0 || o.price < best_price) {
      best = id;
      best_price = o.price;
    }
  }
  return best;
}

OrderId BruteFindBid(const std::map<OrderId, ModelOrder>& orders, int free, int min_gpus,
                     RegionIndex region, Ticks min_price, TimestampMicros now,
                     OwnerTag skip = kSkipNoOwner) {
  OrderId best = 0;
  Ticks best_price = 0;
  for (const auto& [id, o] : orders) {
    if (o.ask || o.price < min_price || o.qty > free || o.qty < min_gpus || now >= o.until ||
        o.owner == skip)
      continue;
    if (o.region != kAnyRegion && o.region != region) continue;
    if (best == 0 || o.price > best_price) {
      best = id;
      best_price = o.price;
    }
  }
  return best;
}

TEST(OrderBookTest, MatchesABruteForceModelUnderRandomChanges) {
  std::mt19937_64 rng(20261130);
  OrderBook book;
  std::map<OrderId, ModelOrder> model;
  OrderId next_id = 1;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int step = 0; step < 60'000; ++step) {
    int op = pick(0, 99);
    if (op < 35 || model.empty()) {
      ModelOrder o;
      o.ask = pick(0, 1) == 0;
      o.price = 2000 + pick(0, 40) * 10;
      o.qty = pick(1, kMaxGpusPerMachine);
      o.min_gpus = o.ask ? pick(1, 4) : 1;
      o.region = static_cast<RegionIndex>(pick(0, 3));
      if (o.ask && o.region == kAnyRegion) o.region = kDfw;
      o.until = pick(0, 9) == 0 ? kNow + pick(-5, 5) : kNever;
      // A few accounts own everything, on both sides: many searches meet their own orders.
      o.owner = static_cast<OwnerTag>(pick(1, 4));
      OrderId id = next_id++;
      if (o.ask) {
        book.AddAsk({id, o.price, o.qty, o.min_gpus, o.region, o.until, o.owner});
      } else {
        book.AddBid({id, o.price, o.qty, o.region, o.until, o.owner});
      }
      model[id] = o;
    } else if (op < 60) {
      auto it = model.begin();
      std::advance(it, pick(0, static_cast<int>(model.size()) - 1));
      book.Remove(it->first);
      model.erase(it);
    } else if (op < 70) {
      auto it = model.begin();
      std::advance(it, pick(0, static_cast<int>(model.size()) - 1));
      if (it->second.ask) {
        it->second.qty = pick(1, kMaxGpusPerMachine);
        book.SetAskFree(it->first, it->second.qty);
      }
    } else if (op < 85) {
      int gpus = pick(1, kMaxGpusPerMachine);
      auto region = static_cast<RegionIndex>(pick(0, 3));
      Ticks max_price = 2000 + pick(-5, 45) * 10;
      // The bidder: one of the owners (its asks are skipped) or nobody's (none skipped).
      OwnerTag skip = pick(0, 4) == 0 ? kSkipNoOwner : static_cast<OwnerTag>(pick(1, 4));
      ASSERT_EQ(book.FindAsk(gpus, region, max_price, kNow, skip),
                BruteFindAsk(model, gpus, region, max_price, kNow, skip))
          << "step " << step;
    } else {
      int free = pick(1, kMaxGpusPerMachine);
      int min_gpus = pick(1, 4);
      auto region = static_cast<RegionIndex>(pick(1, 3));
      Ticks min_price = 2000 + pick(-5, 45) * 10;
      OwnerTag skip = pick(0, 4) == 0 ? kSkipNoOwner : static_cast<OwnerTag>(pick(1, 4));
      ASSERT_EQ(book.FindBid(free, min_gpus, region, min_price, kNow, nullptr, skip),
                BruteFindBid(model, free, min_gpus, region, min_price, kNow, skip))
          << "step " << step;
    }
    if (step % 1000 == 0) {
      Status s = book.CheckConsistency();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  std::size_t asks = 0;
  for (const auto& [id, o] : model) asks += o.ask;
  EXPECT_EQ(book.ask_orders(), asks);
  EXPECT_EQ(book.bid_orders(), model.size() - asks);
  EXPECT_TRUE(book.CheckConsistency().ok());
}

TEST(OrderBookTest, ASmallOrderIsFoundBehindALongQueueOfLargeOnes) {
  OrderBook book;
  for (OrderId id = 1; id <= 200; ++id) book.AddBid({id, 2500, 8, kAnyRegion, kNever});
  book.AddBid({201, 2500, 2, kAnyRegion, kNever});
  book.AddBid({202, 2500, 1, kAnyRegion, kNever});
  book.AddBid({203, 2500, 2, kAnyRegion, kNever});
  EXPECT_EQ(book.FindBid(8, 1, kDfw, 2500, kNow), 1);
  EXPECT_EQ(book.FindBid(4, 1, kDfw, 2500, kNow), 201);  // the earliest that fits
  EXPECT_EQ(book.FindBid(4, 2, kDfw, 2500, kNow), 201);
  EXPECT_EQ(book.FindBid(1, 1, kDfw, 2500, kNow), 202);
  book.Remove(201);
  EXPECT_EQ(book.FindBid(4, 1, kDfw, 2500, kNow), 202);
  EXPECT_EQ(book.FindBid(4, 2, kDfw, 2500, kNow), 203);
  for (OrderId id = 300; id < 400; ++id) book.AddAsk({id, 2600, 4, 1, kDfw, kNever});
  book.AddAsk({400, 2600, 8, 1, kDfw, kNever});
  EXPECT_EQ(book.FindAsk(8, kAnyRegion, 2600, kNow), 400);
  EXPECT_EQ(book.FindAsk(4, kAnyRegion, 2600, kNow), 300);
  book.SetAskFree(400, 4);  // keeps its place by id: behind 300..399
  EXPECT_EQ(book.FindAsk(8, kAnyRegion, 2600, kNow), 0);
  book.SetAskFree(350, 8);
  EXPECT_EQ(book.FindAsk(5, kAnyRegion, 2600, kNow), 350);
  EXPECT_TRUE(book.CheckConsistency().ok());
}

// Asks whose free GPUs change or come back (old ids re-added) keep their place by id; ForEachAsk
// lists price then time. Checked against a model.
TEST(OrderBookTest, AsksKeepTheirPlaceWhenTheirGpusChangeOrComeBack) {
  std::mt19937_64 rng(20261201);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  OrderBook book;
  std::map<OrderId, ModelOrder> model;  // asks on the book
  std::map<OrderId, ModelOrder> off;    // asks taken off (fully leased), may come back
  OrderId next_id = 1;
  for (int step = 0; step < 30'000; ++step) {
    int op = pick(0, 99);
    if (op < 30 || model.empty()) {
      ModelOrder o{true, 2000 + pick(0, 5) * 10, pick(1, 8), pick(1, 2), kDfw, kNever};
      OrderId id = next_id++;
      book.AddAsk({id, o.price, o.qty, o.min_gpus, o.region, o.until});
      model[id] = o;
    } else if (op < 45 && !off.empty()) {
      auto it = off.begin();
      std::advance(it, pick(0, static_cast<int>(off.size()) - 1));
      it->second.qty = pick(1, 8);
      book.AddAsk({it->first, it->second.price, it->second.qty, it->second.min_gpus,
                   it->second.region, it->second.until});
      model.insert(*it);
      off.erase(it);
    } else if (op < 60) {
      auto it = model.begin();
      std::advance(it, pick(0, static_cast<int>(model.size()) - 1));
      book.Remove(it->first);
      off.insert(*it);
      model.erase(it);
    } else if (op < 80) {
      auto it = model.begin();
      std::advance(it, pick(0, static_cast<int>(model.size()) - 1));
      it->second.qty = pick(1, 8);
      book.SetAskFree(it->first, it->second.qty);
    } else {
      int gpus = pick(1, 8);
      Ticks max_price = 2000 + pick(0, 6) * 10;
      ASSERT_EQ(book.FindAsk(gpus, kAnyRegion, max_price, kNow),
                BruteFindAsk(model, gpus, kAnyRegion, max_price, kNow))
          << "step " << step;
    }
    if (step % 500 == 0) {
      std::vector<std::pair<Ticks, OrderId>> expected, listed;
      for (const auto& [id, o] : model) expected.push_back({o.price, id});
      std::sort(expected.begin(), expected.end());
      book.ForEachAsk([&](Ticks price, OrderId id) { listed.push_back({price, id}); });
      ASSERT_EQ(listed, expected) << "step " << step;
      Status s = book.CheckConsistency();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }
  EXPECT_EQ(book.ask_orders(), model.size());
}

// An ask filling bid after bid with the cursor finds the same bids as searching from the top
// each time.
TEST(OrderBookTest, TheBidCursorFindsWhatAFullSearchFinds) {
  std::mt19937_64 rng(20261202);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  OrderBook plain, resumed;
  OrderId next_id = 1;
  std::size_t fills = 0;
  for (int round = 0; round < 3'000; ++round) {
    for (int i = pick(0, 6); i > 0; --i) {
      BookBid b{next_id++,
                2000 + pick(0, 60) * 5,
                pick(1, 16),
                static_cast<RegionIndex>(pick(0, 3)),
                pick(0, 9) == 0 ? kNow + pick(-3, 3) : kNever,
                static_cast<OwnerTag>(pick(1, 3))};
      plain.AddBid(b);
      resumed.AddBid(b);
    }
    int free = pick(1, 16);
    int min_gpus = pick(1, 4);
    auto region = static_cast<RegionIndex>(pick(1, 3));
    Ticks min_price = 2000 + pick(0, 60) * 5;
    // The ask's own account's bids are passed over on every call of the loop.
    OwnerTag skip = pick(0, 3) == 0 ? kSkipNoOwner : static_cast<OwnerTag>(pick(1, 3));
    Ticks cursor = OrderBook::kBidCursorStart;
    std::vector<OrderId> a, b;
    for (int left = free; left >= min_gpus;) {
      OrderId id = plain.FindBid(left, min_gpus, region, min_price, kNow, nullptr, skip);
      ASSERT_EQ(resumed.FindBid(left, min_gpus, region, min_price, kNow, &cursor, skip), id)
          << "round " << round;
      if (id == 0) break;
      plain.Remove(id);
      resumed.Remove(id);
      left -= pick(1, left);  // the bid's GPUs (any amount that fit) leave the machine
      ++fills;
    }
  }
  EXPECT_GT(fills, 1'000u);
  EXPECT_TRUE(resumed.CheckConsistency().ok());
}

TEST(IdIndexTest, AgreesWithAHashMap) {
  std::mt19937_64 rng(7);
  detail::IdIndex index;
  std::unordered_map<std::int64_t, std::uint32_t> model;
  for (int i = 0; i < 200'000; ++i) {
    std::int64_t id = static_cast<std::int64_t>(rng() % 5000) + 1;
    if (rng() % 2) {
      auto v = static_cast<std::uint32_t>(rng());
      EXPECT_EQ(index.Insert(id, v), model.emplace(id, v).second);
    } else {
      EXPECT_EQ(index.Erase(id), model.erase(id) == 1);
    }
    std::int64_t probe = static_cast<std::int64_t>(rng() % 5000) + 1;
    auto it = model.find(probe);
    EXPECT_EQ(index.Find(probe), it == model.end() ? detail::IdIndex::kAbsent : it->second);
  }
  EXPECT_EQ(index.size(), model.size());
  for (const auto& [id, v] : model) EXPECT_EQ(index.Find(id), v);
}

}  // namespace
}  // namespace gpuhub::market
