// The term fleet's nodes as inventory: which cards of which node are rented, where a new rental
// goes, and the stock ("free now") per card model, region and card count.
//
// Allocation (all cards of a rental on ONE node):
// - A rental of n cards (n a power of two) takes an aligned block of n cards: cards k*n..k*n+n-1.
//   On HGX boards that keeps sets on the NVLink/NVSwitch topology's natural groups, and on bridged
//   cards (NVLink pairs) a 2-card rental gets a bridged pair. An 8-card rental takes a whole node.
// - Best fit across nodes: a node whose cards are all free is used only when no partly used node
//   has room (a small order never breaks a whole node while a partly used one fits); among the
//   others the node with the fewest free cards wins, then the lowest node id. Deterministic.
// - Best fit inside a node (buddy): the free block whose enclosing 2n-, 4n-, ... blocks are the
//   most used, then the lowest index: holes are filled before big blocks are split.
// Stock counts only active nodes (a draining node takes no new rentals): for each count n, how
// many n-card rentals could be placed now = the free aligned n-blocks over those nodes.
//
// Not thread-safe; pure (no I/O, no clock). Part of rentals::Fleet, which validates input first.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "rentals/limits.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

// Counts a rental may have: powers of two up to kMaxCardsPerNode (1, 2, 4, 8, 16).
inline constexpr std::array<int, 5> kBlockSizes = {1, 2, 4, 8, 16};
bool IsBlockSize(int count);

// What can be rented of one card model in one region now.
struct StockRow {
  std::string gpu;
  std::string region;
  int nodes = 0;           // active nodes
  int nodes_draining = 0;  // draining nodes (their free cards are not for sale)
  int cards = 0;           // cards on active nodes
  int cards_free = 0;      // free cards on active nodes
  // sets[i]: how many rentals of kBlockSizes[i] cards could be placed now.
  std::array<int, kBlockSizes.size()> sets{};
  int Sets(int count) const;  // 0 for a count that is not a block size
};

struct Placement {
  NodeId node_id = 0;
  std::uint32_t card_mask = 0;
};

class Inventory {
 public:
  // Free aligned blocks of `count` cards in a node of `cards` cards with `used` rented.
  static int FreeBlocks(std::uint32_t used, int cards, int count);
  // The best block of `count` free cards in one node (see above); nullopt when none.
  static std::optional<std::uint32_t> BestBlock(std::uint32_t used, int cards, int count);

  // Adds a node (its id must be new and the record valid: Fleet checks). `card` and `region`
  // index the fleet's cards and regions.
  void Add(const Node& node, int card, int region);
  // Marks `mask` rented / free on the node. Programmer errors (GPUHUB_CHECK): unknown node, cards
  // already rented (Take) or not rented (Free).
  void Take(NodeId node, std::uint32_t mask);
  void Free(NodeId node, std::uint32_t mask);
  // Changes the node's state (and so whether its cards count as stock).
  void SetState(NodeId node, NodeState state, TimestampMicros now);
  // Extra local NVMe sold on / returned by the node's rentals. Programmer errors (GPUHUB_CHECK):
  // more than ExtraNvmeFreeGb, or freeing more than is sold.
  void TakeExtraNvme(NodeId node, std::int64_t gb);
  void FreeExtraNvme(NodeId node, std::int64_t gb);
  // What the node can still sell: min(its extra capacity, kMaxExtraNvmeGbSoldPerNode) - sold.
  std::int64_t ExtraNvmeFreeGb(NodeId node) const;
  std::int64_t ExtraNvmeSoldGb(NodeId node) const;

  // Where a rental of `count` cards of card `card` in region `region` (-1: any) with
  // `extra_nvme_gb` of extra NVMe goes (the same best fit, over the nodes that can also sell that
  // NVMe); nullopt when no active node has such a block.
  std::optional<Placement> Find(int card, int region, int count,
                                std::int64_t extra_nvme_gb = 0) const;

  const Node* FindNode(NodeId id) const;
  std::uint32_t Used(NodeId id) const;
  int CardOf(NodeId id) const;
  int RegionOf(NodeId id) const;
  // Stock of (card, region), zeros when it has no node.
  StockRow Stock(int card, int region) const;
  const std::map<NodeId, Node>& nodes() const { return nodes_; }
  std::size_t size() const { return nodes_.size(); }

  // Recomputes every index and counter from the nodes and compares: internal on a mismatch.
  Status CheckConsistency() const;

 private:
  struct Slot {
    std::uint32_t used = 0;
    int card = 0;
    int region = 0;
    std::int64_t extra_nvme_sold_gb = 0;
  };
  struct Counters {
    int nodes = 0;
    int nodes_draining = 0;
    int cards = 0;
    int cards_free = 0;
    std::array<int, kBlockSizes.size()> sets{};
    friend bool operator==(const Counters&, const Counters&) = default;
  };
  // Nodes with free cards, ordered best-fit first: (whole node free, free cards, id).
  using FreeKey = std::tuple<bool, int, NodeId>;
  using Group = std::pair<int, int>;  // (card, region)

  void Account(const Node& node, const Slot& slot, int sign);  // counters and free index
  static FreeKey KeyOf(const Node& node, std::uint32_t used);

  std::map<NodeId, Node> nodes_;
  std::map<NodeId, Slot> slots_;
  std::map<Group, Counters> counters_;
  std::map<Group, std::set<FreeKey>> free_;  // active nodes with at least one free card
};

}  // namespace gpuhub::rentals
