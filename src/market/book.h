// The order book of one market: the matching structure, nothing else (no money, no users).
//
// Semantics (spec: "Spot exchange"):
//  - An ask offers the free GPUs of one machine at a price per GPU-hour; a bid wants N GPUs, all on
//    one machine. A bid matches an ask when the ask's free GPUs >= N, the ask's min_gpus <= N, the
//    regions agree (a bid without a region takes any) and the prices cross.
//  - Price-time priority on both sides: best price first, then the order that reached the book
//    first (lowest id: asks and bids share one id sequence, and an ask whose GPUs come back keeps
//    its place).
//  - Orders stop matching at `until` (exclusive) without being removed: expiry is lazy, so a query
//    never mutates and the exchange removes expired orders when its clock reaches them.
//
// Layout (after exchange-core's and the usual limit-order books): prices are integer ticks; each
// side keeps its price levels in a sorted vector (best at the back, so the common changes near
// the top of the book move little memory) of indices into a pool of levels; an open-addressing
// hash index maps order id -> node. A level holds one intrusive doubly-linked FIFO per quantity
// (queue q: the orders with q GPUs, by id) and a bit mask of the non-empty queues. A search looks
// only at the queues whose quantity fits and takes the lowest id among their first eligible
// orders, so a 4-GPU ask does not walk past a hundred 8-GPU bids at its price (with one FIFO per
// level it did, and a book holding long same-size levels had twice liquibook's p99.9 per command:
// docs/market.md). In steady state nothing allocates: nodes and levels are recycled through free
// lists.
//
// Not thread-safe; the exchange's single writer owns it.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "market/limits.h"
#include "market/types.h"

namespace gpuhub::market {

using Ticks = std::int64_t;  // a price in ticks of 0.001 USD per GPU-hour
using RegionIndex = std::uint16_t;
inline constexpr RegionIndex kAnyRegion = 0;
inline constexpr TimestampMicros kNever = std::numeric_limits<TimestampMicros>::max();

// Which account placed an order, as the exchange tags accounts (small dense numbers, so that a
// node stays 48 bytes). Matching skips the orders of the account on the other side (no
// self-trades: an account that buys its own offer only prints a trade and a price).
using OwnerTag = std::uint32_t;
inline constexpr OwnerTag kNoOwner = 0;  // an order placed without an owner (the book's own tests)
// FindAsk / FindBid: skip nobody's orders (no order carries this tag).
inline constexpr OwnerTag kSkipNoOwner = std::numeric_limits<OwnerTag>::max();

struct BookAsk {
  OrderId id = 0;
  Ticks price = 0;
  int free = 0;      // 1..kMaxGpusPerMachine (an ask with no free GPU is not on the book)
  int min_gpus = 1;  // 1..kMaxGpusPerMachine
  RegionIndex region = kAnyRegion;
  TimestampMicros until = kNever;  // matches while now < until
  OwnerTag owner = kNoOwner;
};

struct BookBid {
  OrderId id = 0;
  Ticks price = 0;
  int gpus = 0;                     // 1..kMaxGpusPerMachine
  RegionIndex region = kAnyRegion;  // kAnyRegion: any
  TimestampMicros until = kNever;
  OwnerTag owner = kNoOwner;
};

// One price level as market data shows it.
struct BookLevel {
  Ticks price = 0;
  std::int64_t gpus = 0;  // asks: free GPUs offered; bids: GPUs wanted
  std::int32_t orders = 0;
};

namespace detail {

// Open addressing (linear probing, backward-shift deletion) from positive ids to 32-bit values.
class IdIndex {
 public:
  static constexpr std::uint32_t kAbsent = std::numeric_limits<std::uint32_t>::max();
  IdIndex();
  void Reserve(std::size_t n);
  bool Insert(std::int64_t id, std::uint32_t value);  // false when present
  std::uint32_t Find(std::int64_t id) const;          // kAbsent when absent
  bool Erase(std::int64_t id);
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    std::int64_t key = 0;  // 0 = empty (ids are positive)
    std::uint32_t value = 0;
  };
  std::size_t Home(std::int64_t id) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ull) >>
                                    shift_);
  }
  void Rehash(std::size_t capacity);
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
  std::size_t size_ = 0;
};

}  // namespace detail

class OrderBook {
 public:
  OrderBook();
  // Pre-sizes the pools for `orders` resting orders (optional; they grow on demand).
  void Reserve(std::size_t orders);

  // ----- Changes (programmer errors abort: the exchange checks its input first) ------------------
  // The id must not be on the book; quantities and min_gpus within 1..kMaxGpusPerMachine.
  void AddAsk(const BookAsk& ask);
  void AddBid(const BookBid& bid);
  // The order must be on the book.
  void Remove(OrderId id);
  // Sets an ask's free GPUs (1..kMaxGpusPerMachine); it keeps its place in time priority.
  void SetAskFree(OrderId id, int free);
  bool Contains(OrderId id) const { return index_.Find(id) != detail::IdIndex::kAbsent; }

  // ----- Matching (read-only) ------------------------------------------------------------------
  // The ask a bid for `gpus` GPUs takes: the lowest price <= max_price, then the lowest id, among
  // asks with free >= gpus, min_gpus <= gpus, the region asked for (kAnyRegion: any),
  // now < until and an owner other than `skip_owner` (the bidder's own asks are passed over, so a
  // cheaper own ask never hides another account's). 0 when there is none.
  OrderId FindAsk(int gpus, RegionIndex region, Ticks max_price, TimestampMicros now,
                  OwnerTag skip_owner = kSkipNoOwner) const;
  // The bid an ask with `free` GPUs (and `min_gpus`, in `region`) fills: the highest price >=
  // min_price, then the lowest id, among bids with min_gpus <= gpus <= free, region kAnyRegion or
  // `region`, now < until and an owner other than `skip_owner`. 0 when there is none.
  //
  // `cursor` (optional) serves an ask that fills bid after bid: start it at kBidCursorStart and
  // pass it to each call of the loop; each call records the price of the bid it found, and the
  // next skips the price levels above it (which held nothing that fit then, and cannot now).
  // Valid while the ask's `free` only shrinks, its other arguments stay the same and no bid is
  // added between the calls.
  static constexpr Ticks kBidCursorStart = std::numeric_limits<Ticks>::max();
  OrderId FindBid(int free, int min_gpus, RegionIndex region, Ticks min_price, TimestampMicros now,
                  Ticks* cursor = nullptr, OwnerTag skip_owner = kSkipNoOwner) const;

  // ----- Market data ---------------------------------------------------------------------------
  bool HasAsks() const { return !asks_.sorted.empty(); }
  bool HasBids() const { return !bids_.sorted.empty(); }
  Ticks BestAskPrice() const;  // HasAsks() must be true
  Ticks BestBidPrice() const;  // HasBids() must be true
  // Up to `max_levels` levels per side, best first.
  std::vector<BookLevel> AskLevels(std::size_t max_levels) const;
  std::vector<BookLevel> BidLevels(std::size_t max_levels) const;
  std::size_t ask_orders() const { return ask_orders_; }
  std::size_t bid_orders() const { return bid_orders_; }
  std::int64_t ask_gpus() const { return ask_gpus_; }  // free GPUs offered in total
  std::int64_t bid_gpus() const { return bid_gpus_; }
  // Calls fn(price, id) for every ask, best first (price, then time).
  template <typename Fn>
  void ForEachAsk(Fn&& fn) const {
    for (auto it = asks_.sorted.rbegin(); it != asks_.sorted.rend(); ++it) {
      const Level& level = levels_[it->level];
      // Merge the level's queues by id.
      std::array<std::uint32_t, kMaxGpusPerMachine + 1> cursor;
      cursor.fill(kNone);
      for (std::uint32_t m = level.qty_mask; m != 0; m &= m - 1) {
        auto q = static_cast<std::size_t>(std::countr_zero(m));
        cursor[q] = level.QueueFor(static_cast<int>(q)).head;
      }
      for (;;) {
        std::size_t first = cursor.size();
        for (std::uint32_t m = level.qty_mask; m != 0; m &= m - 1) {
          auto q = static_cast<std::size_t>(std::countr_zero(m));
          if (cursor[q] != kNone &&
              (first == cursor.size() || nodes_[cursor[q]].id < nodes_[cursor[first]].id)) {
            first = q;
          }
        }
        if (first == cursor.size()) break;
        fn(level.price, nodes_[cursor[first]].id);
        cursor[first] = nodes_[cursor[first]].next;
      }
    }
  }

  // Walks every structure and checks that the lists, counters, masks, sort order and index agree.
  // O(orders); for tests and the exchange's invariant checks.
  Status CheckConsistency() const;

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

  struct Node {
    OrderId id = 0;
    Ticks price = 0;
    TimestampMicros until = kNever;
    std::uint32_t prev = kNone;
    std::uint32_t next = kNone;
    std::uint32_t level = kNone;
    std::int16_t qty = 0;       // ask: free GPUs; bid: GPUs wanted
    std::int16_t min_gpus = 1;  // asks only
    RegionIndex region = kAnyRegion;
    bool is_ask = false;
    OwnerTag owner = kNoOwner;  // in the padding: a node is 48 bytes with or without it
  };
  struct Queue {
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
  };
  // One cache line holds the counters and the queues of 1, 2, 4, 8 and 16 GPUs (the usual
  // machine and bid sizes), so matching and book changes at a level usually touch only that line.
  struct alignas(64) Level {
    Ticks price = 0;
    std::int64_t qty = 0;
    std::int32_t orders = 0;
    std::uint32_t qty_mask = 0;  // bit q set when the queue of q GPUs is not empty
    // The queue of q GPUs is queue[kSlot[q]]; it is meaningful only while bit q of qty_mask is
    // set: an emptied queue keeps stale links, and a level taken from the free list resets only
    // its counters.
    std::array<Queue, kMaxGpusPerMachine> queue{};
    static_assert(kMaxGpusPerMachine == 16, "kSlot lists a slot for each of 1..16 GPUs");
    static constexpr std::array<std::uint8_t, kMaxGpusPerMachine + 1> kSlot = {
        0, 0, 1, 5, 2, 6, 7, 8, 3, 9, 10, 11, 12, 13, 14, 15, 4};
    Queue& QueueFor(int q) { return queue[kSlot[static_cast<std::size_t>(q)]]; }
    const Queue& QueueFor(int q) const { return queue[kSlot[static_cast<std::size_t>(q)]]; }
  };
  // Trivially copyable, so inserting and erasing in the sorted vector is one memmove.
  struct SortedLevel {
    Ticks key;
    std::uint32_t level;
  };
  // Levels of one side sorted so that the best is at the back: by key ascending, where the key is
  // -price for asks (lowest price best) and price for bids.
  struct Side {
    bool is_ask = false;
    std::vector<SortedLevel> sorted;
    Ticks Key(Ticks price) const { return is_ask ? -price : price; }
  };

  void Add(Side& side, Node node);
  std::uint32_t LevelFor(Side& side, Ticks price);
  void DropLevel(Side& side, std::uint32_t level);
  // Puts node n into its level's queue for its quantity, at its place by id / takes it out.
  void Link(Level& level, std::uint32_t n);
  void Unlink(Level& level, std::uint32_t n);
  std::vector<BookLevel> Levels(const Side& side, std::size_t max_levels) const;
  Status CheckSide(const Side& side, std::size_t* orders) const;

  std::vector<Node> nodes_;
  std::vector<std::uint32_t> free_nodes_;
  std::vector<Level> levels_;
  std::vector<std::uint32_t> free_levels_;
  Side asks_;
  Side bids_;
  detail::IdIndex index_;
  std::size_t ask_orders_ = 0;
  std::size_t bid_orders_ = 0;
  std::int64_t ask_gpus_ = 0;
  std::int64_t bid_gpus_ = 0;
};

}  // namespace gpuhub::market
