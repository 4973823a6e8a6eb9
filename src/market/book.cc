#include "market/book.h"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <iterator>
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
  // The counters and the queues of 1, 2, 4, 8 and 16 GPUs share the first cache line of a level.
  static_assert(sizeof(Queue) == 8 && offsetof(Level, queue) + 5 * sizeof(Queue) == 64);
  static_assert(sizeof(Node) == 48, "a node fills 3 of 4 nodes per 64-byte pair of lines");
  asks_.is_ask = true;
  bids_.is_ask = false;
}

void OrderBook::Reserve(std::size_t orders) {
  nodes_.reserve(orders);
  free_nodes_.reserve(orders);
  index_.Reserve(orders);
}

void OrderBook::Link(Level& level, std::uint32_t n) {
  Node& node = nodes_[n];
  Queue& q = level.QueueFor(node.qty);
  const std::uint32_t bit = 1u << node.qty;
  if ((level.qty_mask & bit) == 0) {  // an empty queue's head and tail are stale: start it
    node.prev = node.next = kNone;
    q.head = q.tail = n;
    level.qty_mask |= bit;
    return;
  }
  // `after`: the last node of the queue with a lower id (kNone: n goes first).
  std::uint32_t after;
  if (nodes_[q.tail].id < node.id) {
    after = q.tail;  // the usual case: the newest order
  } else if (nodes_[q.head].id > node.id) {
    after = kNone;
  } else {
    // Inside the queue (an ask whose GPUs changed or came back keeps its place): walk from both
    // ends at once, so a place near either end is found in a few steps. head.id < id < tail.id,
    // so neither walk runs off the queue.
    std::uint32_t forward = q.head;   // id below node.id
    std::uint32_t backward = q.tail;  // id above node.id
    for (;;) {
      std::uint32_t f = nodes_[forward].next;
      if (nodes_[f].id > node.id) {
        after = forward;
        break;
      }
      forward = f;
      std::uint32_t b = nodes_[backward].prev;
      if (nodes_[b].id < node.id) {
        after = b;
        break;
      }
      backward = b;
    }
  }
  node.prev = after;
  node.next = after == kNone ? q.head : nodes_[after].next;
  if (node.prev == kNone) {
    q.head = n;
  } else {
    nodes_[node.prev].next = n;
  }
  if (node.next == kNone) {
    q.tail = n;
  } else {
    nodes_[node.next].prev = n;
  }
}

void OrderBook::Unlink(Level& level, std::uint32_t n) {
  Node& node = nodes_[n];
  Queue& q = level.QueueFor(node.qty);
  if (node.prev == kNone) {
    q.head = node.next;
  } else {
    nodes_[node.prev].next = node.next;
  }
  if (node.next == kNone) {
    q.tail = node.prev;
  } else {
    nodes_[node.next].prev = node.prev;
  }
  if (q.head == kNone) level.qty_mask &= ~(1u << node.qty);
  node.prev = node.next = kNone;
}

std::uint32_t OrderBook::LevelFor(Side& side, Ticks price) {
  Ticks key = side.Key(price);
  auto it = std::lower_bound(side.sorted.begin(), side.sorted.end(), key,
                             [](const SortedLevel& entry, Ticks k) { return entry.key < k; });
  if (it != side.sorted.end() && it->key == key) return it->level;
  std::uint32_t index;
  if (!free_levels_.empty()) {
    index = free_levels_.back();
    free_levels_.pop_back();
    // Only the counters: a queue is read only while its mask bit is set (Link starts it).
    levels_[index].qty = 0;
    levels_[index].orders = 0;
    levels_[index].qty_mask = 0;
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
                             [](const SortedLevel& entry, Ticks k) { return entry.key < k; });
  GPUHUB_CHECK(it != side.sorted.end() && it->level == level);
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
  nodes_[n] = node;
  // Time priority by id: new orders go to the tail; an ask whose GPUs came back walks to its place.
  Link(level, n);
  level.qty += node.qty;
  ++level.orders;
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
  node.owner = ask.owner;
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
  node.owner = bid.owner;
  GPUHUB_CHECK(bid.gpus >= 1 && bid.gpus <= kMaxGpusPerMachine);
  Add(bids_, node);
}

void OrderBook::Remove(OrderId id) {
  std::uint32_t n = index_.Find(id);
  GPUHUB_CHECK_MSG(n != detail::IdIndex::kAbsent, "order not on the book");
  Node& node = nodes_[n];
  Side& side = node.is_ask ? asks_ : bids_;
  Level& level = levels_[node.level];
  Unlink(level, n);
  level.qty -= node.qty;
  --level.orders;
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
  if (free == node.qty) return;
  Level& level = levels_[node.level];
  Unlink(level, n);
  level.qty += free - node.qty;
  ask_gpus_ += free - node.qty;
  node.qty = static_cast<std::int16_t>(free);
  Link(level, n);
}

OrderId OrderBook::FindAsk(int gpus, RegionIndex region, Ticks max_price, TimestampMicros now,
                           OwnerTag skip_owner) const {
  if (gpus < 1 || gpus > kMaxGpusPerMachine) return 0;
  const std::uint32_t wanted = ~((1u << gpus) - 1);  // queues of asks with >= gpus free
  for (auto it = asks_.sorted.rbegin(); it != asks_.sorted.rend(); ++it) {
    const Level& level = levels_[it->level];
    if (level.price > max_price) break;
    // The earliest eligible ask at this price: the lowest id among each fitting queue's first.
    OrderId best = 0;
    for (std::uint32_t m = level.qty_mask & wanted; m != 0; m &= m - 1) {
      const Queue& q = level.QueueFor(std::countr_zero(m));
      for (std::uint32_t n = q.head; n != kNone; n = nodes_[n].next) {
        const Node& a = nodes_[n];
        if (best != 0 && a.id > best) break;  // later than one already found
        if (a.min_gpus <= gpus && (region == kAnyRegion || a.region == region) && now < a.until &&
            a.owner != skip_owner) {
          best = a.id;
          break;
        }
      }
    }
    if (best != 0) return best;
  }
  return 0;
}

OrderId OrderBook::FindBid(int free, int min_gpus, RegionIndex region, Ticks min_price,
                           TimestampMicros now, Ticks* cursor, OwnerTag skip_owner) const {
  if (free < 1 || min_gpus > free) return 0;
  if (free > kMaxGpusPerMachine) free = kMaxGpusPerMachine;
  if (min_gpus < 1) min_gpus = 1;
  const std::uint32_t wanted = ((2u << free) - 1) & ~((1u << min_gpus) - 1);
  const auto& sorted = bids_.sorted;  // by price ascending (a bid's key is its price)
  auto start = sorted.rbegin();
  if (cursor != nullptr && !sorted.empty() && *cursor < sorted.back().key) {
    // Resume at the highest level priced at or below the cursor.
    start = std::make_reverse_iterator(
        std::upper_bound(sorted.begin(), sorted.end(), *cursor,
                         [](Ticks price, const SortedLevel& entry) { return price < entry.key; }));
  }
  for (auto it = start; it != sorted.rend(); ++it) {
    if (it->key < min_price) break;
    const Level& level = levels_[it->level];
    OrderId best = 0;
    for (std::uint32_t m = level.qty_mask & wanted; m != 0; m &= m - 1) {
      const Queue& q = level.QueueFor(std::countr_zero(m));
      for (std::uint32_t n = q.head; n != kNone; n = nodes_[n].next) {
        const Node& b = nodes_[n];
        if (best != 0 && b.id > best) break;
        if ((b.region == kAnyRegion || b.region == region) && now < b.until &&
            b.owner != skip_owner) {
          best = b.id;
          break;
        }
      }
    }
    if (best != 0) {
      if (cursor != nullptr) *cursor = level.price;
      return best;
    }
  }
  return 0;
}

Ticks OrderBook::BestAskPrice() const {
  GPUHUB_CHECK(!asks_.sorted.empty());
  return levels_[asks_.sorted.back().level].price;
}

Ticks OrderBook::BestBidPrice() const {
  GPUHUB_CHECK(!bids_.sorted.empty());
  return levels_[bids_.sorted.back().level].price;
}

std::vector<BookLevel> OrderBook::Levels(const Side& side, std::size_t max_levels) const {
  std::vector<BookLevel> out;
  out.reserve(std::min(max_levels, side.sorted.size()));
  for (auto it = side.sorted.rbegin(); it != side.sorted.rend() && out.size() < max_levels; ++it) {
    const Level& level = levels_[it->level];
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
    if (i > 0 && side.sorted[i - 1].key >= key) return fail("levels out of order");
    if (index >= levels_.size()) return fail("level index out of range");
    const Level& level = levels_[index];
    if (side.Key(level.price) != key) return fail("level key does not match its price");
    std::int32_t count = 0;
    std::int64_t qty = 0;
    std::uint32_t mask = 0;
    if ((level.qty_mask & 1u) != 0) return fail("a queue of 0 GPUs");
    for (int q = 1; q <= kMaxGpusPerMachine; ++q) {
      if ((level.qty_mask & (1u << q)) == 0) continue;  // an empty queue (head and tail stale)
      const Queue& queue = level.QueueFor(q);
      if (queue.head == kNone) return fail("queue marked non-empty is empty");
      std::uint32_t prev = kNone;
      OrderId prev_id = 0;
      for (std::uint32_t n = queue.head; n != kNone; n = nodes_[n].next) {
        const Node& node = nodes_[n];
        if (node.prev != prev) return fail("broken prev link");
        if (node.level != index || node.price != level.price || node.is_ask != side.is_ask) {
          return fail("node in the wrong level");
        }
        if (node.qty != q) return fail("node in the wrong queue");
        if (node.id <= prev_id)
          return fail("time priority broken at order " + std::to_string(node.id));
        if (index_.Find(node.id) != n) return fail("index does not point at the node");
        if (node.qty < 1 || node.qty > kMaxGpusPerMachine) return fail("quantity out of range");
        prev_id = node.id;
        prev = n;
        ++count;
        qty += node.qty;
        mask |= 1u << q;
        if (count > static_cast<std::int32_t>(nodes_.size())) return fail("cycle in a level");
      }
      if (queue.tail != prev) return fail("tail does not match the last node");
    }
    if (count == 0) return fail("empty level kept");
    if (count != level.orders || qty != level.qty) {
      return fail("level counters disagree with its orders");
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
