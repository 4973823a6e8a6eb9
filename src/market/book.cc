#include "market/book.h"

#include <algorithm>
#include <bit>
#include <string>

namespace gpuhub::market {
namespace detail {

IdIndex::IdIndex() { Rehash(64); }

void IdIndex::Rehash(std::size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != 0) Insert(s.key, s.value);
  }
}

void IdIndex::Reserve(std::size_t n) {
  std::size_t capacity = slots_.size();
  while (n * 2 > capacity) capacity *= 2;
  if (capacity != slots_.size()) Rehash(capacity);
}

bool IdIndex::Insert(std::int64_t id, std::uint32_t value) {
  GPUHUB_CHECK(id > 0);
  if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
  for (std::size_t i = Home(id);; i = (i + 1) & mask_) {
    if (slots_[i].key == id) return false;
    if (slots_[i].key == 0) {
      slots_[i] = {id, value};
      ++size_;
      return true;
    }
  }
}

std::uint32_t IdIndex::Find(std::int64_t id) const {
  if (id <= 0) return kAbsent;
  for (std::size_t i = Home(id);; i = (i + 1) & mask_) {
    if (slots_[i].key == id) return slots_[i].value;
    if (slots_[i].key == 0) return kAbsent;
  }
}

bool IdIndex::Erase(std::int64_t id) {
  if (id <= 0) return false;
  std::size_t i = Home(id);
  for (;; i = (i + 1) & mask_) {
    if (slots_[i].key == id) break;
    if (slots_[i].key == 0) return false;
  }
  // Backward-shift: pull later entries of the probe run into the hole when their home slot does
  // not lie cyclically in (hole, position], so every key stays reachable without tombstones.
  std::size_t hole = i;
  for (std::size_t j = (i + 1) & mask_; slots_[j].key != 0; j = (j + 1) & mask_) {
    std::size_t home = Home(slots_[j].key);
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole] = Slot{};
  --size_;
  return true;
}

}  // namespace detail

OrderBook::OrderBook() {
  asks_.is_ask = true;
  bids_.is_ask = false;
}

void OrderBook::Reserve(std::size_t orders) {
  nodes_.reserve(orders);
  free_nodes_.reserve(orders);
  index_.Reserve(orders);
}

void OrderBook::Count(Level& level, int qty, int delta) {
  level.qty += qty * delta;
  level.orders += delta;
  std::int32_t& n = level.count_by_qty[static_cast<std::size_t>(qty)];
  n += delta;
  if (n > 0) {
    level.qty_mask |= 1u << qty;
  } else {
    level.qty_mask &= ~(1u << qty);
  }
}

std::uint32_t OrderBook::LevelFor(Side& side, Ticks price) {
  Ticks key = side.Key(price);
  auto it = std::lower_bound(side.sorted.begin(), side.sorted.end(), key,
                             [](const auto& entry, Ticks k) { return entry.first < k; });
  if (it != side.sorted.end() && it->first == key) return it->second;
  std::uint32_t index;
  if (!free_levels_.empty()) {
    index = free_levels_.back();
    free_levels_.pop_back();
    levels_[index] = Level{};
  } else {
    index = static_cast<std::uint32_t>(levels_.size());
    levels_.emplace_back();
  }
  levels_[index].price = price;
  side.sorted.insert(it, {key, index});
  return index;
}

void OrderBook::DropLevel(Side& side, std::uint32_t level) {
  Ticks key = side.Key(levels_[level].price);
  auto it = std::lower_bound(side.sorted.begin(), side.sorted.end(), key,
                             [](const auto& entry, Ticks k) { return entry.first < k; });
  GPUHUB_CHECK(it != side.sorted.end() && it->second == level);
  side.sorted.erase(it);
  free_levels_.push_back(level);
}

void OrderBook::Add(Side& side, Node node) {
  GPUHUB_CHECK(node.id > 0);
  GPUHUB_CHECK(node.qty >= 1 && node.qty <= kMaxGpusPerMachine);
  GPUHUB_CHECK(node.min_gpus >= 1 && node.min_gpus <= kMaxGpusPerMachine);
  GPUHUB_CHECK(node.price > 0);
  std::uint32_t n;
  if (!free_nodes_.empty()) {
    n = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    n = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  GPUHUB_CHECK_MSG(index_.Insert(node.id, n), "order already on the book");
  node.level = LevelFor(side, node.price);
  Level& level = levels_[node.level];
  // Time priority by id: new orders go to the tail; an ask whose GPUs came back walks to its place.
  std::uint32_t after = level.tail;
  while (after != kNone && nodes_[after].id > node.id) after = nodes_[after].prev;
  node.prev = after;
  node.next = after == kNone ? level.head : nodes_[after].next;
  nodes_[n] = node;
  if (node.prev == kNone) {
    level.head = n;
  } else {
    nodes_[node.prev].next = n;
  }
  if (node.next == kNone) {
    level.tail = n;
  } else {
    nodes_[node.next].prev = n;
  }
  Count(level, node.qty, +1);
  if (node.is_ask) {
    ++ask_orders_;
    ask_gpus_ += node.qty;
  } else {
    ++bid_orders_;
    bid_gpus_ += node.qty;
  }
}

void OrderBook::AddAsk(const BookAsk& ask) {
  Node node;
  node.id = ask.id;
  node.price = ask.price;
  node.until = ask.until;
  node.qty = static_cast<std::int16_t>(ask.free);
  node.min_gpus = static_cast<std::int16_t>(ask.min_gpus);
  node.region = ask.region;
  node.is_ask = true;
  GPUHUB_CHECK(ask.free >= 1 && ask.free <= kMaxGpusPerMachine);
  Add(asks_, node);
}

void OrderBook::AddBid(const BookBid& bid) {
  Node node;
  node.id = bid.id;
  node.price = bid.price;
  node.until = bid.until;
  node.qty = static_cast<std::int16_t>(bid.gpus);
  node.region = bid.region;
  node.is_ask = false;
  GPUHUB_CHECK(bid.gpus >= 1 && bid.gpus <= kMaxGpusPerMachine);
  Add(bids_, node);
}

void OrderBook::Remove(OrderId id) {
  std::uint32_t n = index_.Find(id);
  GPUHUB_CHECK_MSG(n != detail::IdIndex::kAbsent, "order not on the book");
  Node& node = nodes_[n];
  Side& side = node.is_ask ? asks_ : bids_;
  Level& level = levels_[node.level];
  if (node.prev == kNone) {
    level.head = node.next;
  } else {
    nodes_[node.prev].next = node.next;
  }
  if (node.next == kNone) {
    level.tail = node.prev;
  } else {
    nodes_[node.next].prev = node.prev;
  }
  Count(level, node.qty, -1);
  if (node.is_ask) {
    --ask_orders_;
    ask_gpus_ -= node.qty;
  } else {
    --bid_orders_;
    bid_gpus_ -= node.qty;
  }
  if (level.orders == 0) DropLevel(side, node.level);
  index_.Erase(id);
  node = Node{};
  free_nodes_.push_back(n);
}

void OrderBook::SetAskFree(OrderId id, int free) {
  GPUHUB_CHECK(free >= 1 && free <= kMaxGpusPerMachine);
  std::uint32_t n = index_.Find(id);
  GPUHUB_CHECK_MSG(n != detail::IdIndex::kAbsent, "order not on the book");
  Node& node = nodes_[n];
  GPUHUB_CHECK(node.is_ask);
  Level& level = levels_[node.level];
  Count(level, node.qty, -1);
  ask_gpus_ += free - node.qty;
  node.qty = static_cast<std::int16_t>(free);
  Count(level, node.qty, +1);
}

OrderId OrderBook::FindAsk(int gpus, RegionIndex region, Ticks max_price,
                           TimestampMicros now) const {
  if (gpus < 1 || gpus > kMaxGpusPerMachine) return 0;
  for (auto it = asks_.sorted.rbegin(); it != asks_.sorted.rend(); ++it) {
    const Level& level = levels_[it->second];
    if (level.price > max_price) break;
    if ((level.qty_mask >> gpus) == 0) continue;  // no ask at this price has `gpus` free
    for (std::uint32_t n = level.head; n != kNone; n = nodes_[n].next) {
      const Node& a = nodes_[n];
      if (a.qty >= gpus && a.min_gpus <= gpus && (region == kAnyRegion || a.region == region) &&
          now < a.until) {
        return a.id;
      }
    }
  }
  return 0;
}

OrderId OrderBook::FindBid(int free, int min_gpus, RegionIndex region, Ticks min_price,
                           TimestampMicros now) const {
  if (free < 1 || min_gpus > free) return 0;
  if (free > kMaxGpusPerMachine) free = kMaxGpusPerMachine;
  if (min_gpus < 1) min_gpus = 1;
  const std::uint32_t wanted = ((2u << free) - 1) & ~((1u << min_gpus) - 1);
  for (auto it = bids_.sorted.rbegin(); it != bids_.sorted.rend(); ++it) {
    const Level& level = levels_[it->second];
    if (level.price < min_price) break;
    if ((level.qty_mask & wanted) == 0) continue;
    for (std::uint32_t n = level.head; n != kNone; n = nodes_[n].next) {
      const Node& b = nodes_[n];
      if (b.qty >= min_gpus && b.qty <= free && (b.region == kAnyRegion || b.region == region) &&
          now < b.until) {
        return b.id;
      }
    }
  }
  return 0;
}

Ticks OrderBook::BestAskPrice() const {
  GPUHUB_CHECK(!asks_.sorted.empty());
  return levels_[asks_.sorted.back().second].price;
}

Ticks OrderBook::BestBidPrice() const {
  GPUHUB_CHECK(!bids_.sorted.empty());
  return levels_[bids_.sorted.back().second].price;
}

std::vector<BookLevel> OrderBook::Levels(const Side& side, std::size_t max_levels) const {
  std::vector<BookLevel> out;
  out.reserve(std::min(max_levels, side.sorted.size()));
  for (auto it = side.sorted.rbegin(); it != side.sorted.rend() && out.size() < max_levels; ++it) {
    const Level& level = levels_[it->second];
    out.push_back({level.price, level.qty, level.orders});
  }
  return out;
}

std::vector<BookLevel> OrderBook::AskLevels(std::size_t max_levels) const {
  return Levels(asks_, max_levels);
}

std::vector<BookLevel> OrderBook::BidLevels(std::size_t max_levels) const {
  return Levels(bids_, max_levels);
}

Status OrderBook::CheckSide(const Side& side, std::size_t* orders) const {
  auto fail = [&](const std::string& what) {
    return Status::Internal(std::string(side.is_ask ? "asks" : "bids") + ": " + what);
  };
  for (std::size_t i = 0; i < side.sorted.size(); ++i) {
    auto [key, index] = side.sorted[i];
    if (i > 0 && side.sorted[i - 1].first >= key) return fail("levels out of order");
    if (index >= levels_.size()) return fail("level index out of range");
    const Level& level = levels_[index];
    if (side.Key(level.price) != key) return fail("level key does not match its price");
    std::int32_t count = 0;
    std::int64_t qty = 0;
    std::array<std::int32_t, kMaxGpusPerMachine + 1> by_qty{};
    std::uint32_t prev = kNone;
    OrderId prev_id = 0;
    for (std::uint32_t n = level.head; n != kNone; n = nodes_[n].next) {
      const Node& node = nodes_[n];
      if (node.prev != prev) return fail("broken prev link");
      if (node.level != index || node.price != level.price || node.is_ask != side.is_ask) {
        return fail("node in the wrong level");
      }
      if (node.id <= prev_id)
        return fail("time priority broken at order " + std::to_string(node.id));
      if (index_.Find(node.id) != n) return fail("index does not point at the node");
      if (node.qty < 1 || node.qty > kMaxGpusPerMachine) return fail("quantity out of range");
      prev_id = node.id;
      prev = n;
      ++count;
      qty += node.qty;
      ++by_qty[static_cast<std::size_t>(node.qty)];
      if (count > static_cast<std::int32_t>(nodes_.size())) return fail("cycle in a level");
    }
    if (level.tail != prev) return fail("tail does not match the last node");
    if (count == 0) return fail("empty level kept");
    if (count != level.orders || qty != level.qty || by_qty != level.count_by_qty) {
      return fail("level counters disagree with its orders");
    }
    std::uint32_t mask = 0;
    for (std::size_t q = 0; q < by_qty.size(); ++q) {
      if (by_qty[q] > 0) mask |= 1u << q;
    }
    if (mask != level.qty_mask) return fail("quantity mask disagrees with its orders");
    *orders += static_cast<std::size_t>(count);
  }
  return Status::Ok();
}

Status OrderBook::CheckConsistency() const {
  std::size_t asks = 0, bids = 0;
  GPUHUB_RETURN_IF_ERROR(CheckSide(asks_, &asks));
  GPUHUB_RETURN_IF_ERROR(CheckSide(bids_, &bids));
  if (asks != ask_orders_ || bids != bid_orders_) return Status::Internal("order counts disagree");
  if (asks + bids != index_.size()) return Status::Internal("index size disagrees with the book");
  std::int64_t ask_gpus = 0, bid_gpus = 0;
  for (const auto& [key, index] : asks_.sorted) ask_gpus += levels_[index].qty;
  for (const auto& [key, index] : bids_.sorted) bid_gpus += levels_[index].qty;
  if (ask_gpus != ask_gpus_ || bid_gpus != bid_gpus_)
    return Status::Internal("GPU totals disagree");
  if (nodes_.size() != asks + bids + free_nodes_.size()) return Status::Internal("node pool leaks");
  return Status::Ok();
}

}  // namespace gpuhub::market
