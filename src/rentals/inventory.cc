#include "rentals/inventory.h"

#include <algorithm>
#include <bit>

namespace gpuhub::rentals {
namespace {

std::uint32_t BlockMask(int start, int count) {
  return ((count >= 32 ? 0xffffffffu : ((1u << count) - 1u)) << start);
}

int BlockIndex(int count) {
  for (std::size_t i = 0; i < kBlockSizes.size(); ++i) {
    if (kBlockSizes[i] == count) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

bool IsBlockSize(int count) { return BlockIndex(count) >= 0; }

int StockRow::Sets(int count) const {
  int i = BlockIndex(count);
  return i < 0 ? 0 : sets[static_cast<std::size_t>(i)];
}

int Inventory::FreeBlocks(std::uint32_t used, int cards, int count) {
  if (count < 1 || cards < count) return 0;
  int n = 0;
  for (int start = 0; start + count <= cards; start += count) {
    if ((used & BlockMask(start, count)) == 0) ++n;
  }
  return n;
}

std::optional<std::uint32_t> Inventory::BestBlock(std::uint32_t used, int cards, int count) {
  if (!IsBlockSize(count) || cards < count) return std::nullopt;
  std::optional<std::uint32_t> best;
  std::vector<int> best_score;
  for (int start = 0; start + count <= cards; start += count) {
    std::uint32_t block = BlockMask(start, count);
    if ((used & block) != 0) continue;
    // Used cards in each enclosing block (2n, 4n, ...): more is better (fill holes first). The
    // enclosing block is clipped to the node (a 7-card node has a partial top block).
    std::vector<int> score;
    for (int size = count * 2; size <= kMaxCardsPerNode; size *= 2) {
      int parent = (start / size) * size;
      int width = std::min(size, cards - parent);
      score.push_back(std::popcount(used & BlockMask(parent, width)));
    }
    if (!best || score > best_score) {
      best = block;
      best_score = std::move(score);
    }
  }
  return best;
}

Inventory::FreeKey Inventory::KeyOf(const Node& node, std::uint32_t used) {
  int free = node.cards - std::popcount(used);
  return {used == 0, free, node.id};
}

void Inventory::Account(const Node& node, const Slot& slot, int sign) {
  Group group{slot.card, slot.region};
  Counters& c = counters_[group];
  if (node.state == NodeState::kDraining) c.nodes_draining += sign;
  if (node.state != NodeState::kActive) return;
  int free = node.cards - std::popcount(slot.used);
  c.nodes += sign;
  c.cards += sign * node.cards;
  c.cards_free += sign * free;
  for (std::size_t i = 0; i < kBlockSizes.size(); ++i) {
    c.sets[i] += sign * FreeBlocks(slot.used, node.cards, kBlockSizes[i]);
  }
  if (free > 0) {
    if (sign > 0) {
      free_[group].insert(KeyOf(node, slot.used));
    } else {
      auto it = free_.find(group);
      GPUHUB_CHECK(it != free_.end() && it->second.erase(KeyOf(node, slot.used)) == 1);
      if (it->second.empty()) free_.erase(it);
    }
  }
}

void Inventory::Add(const Node& node, int card, int region) {
  GPUHUB_CHECK(nodes_.count(node.id) == 0);
  GPUHUB_CHECK(node.cards >= 1 && node.cards <= kMaxCardsPerNode);
  Slot slot{0, card, region, 0};
  nodes_.emplace(node.id, node);
  slots_.emplace(node.id, slot);
  Account(node, slot, +1);
}

void Inventory::Take(NodeId id, std::uint32_t mask) {
  auto n = nodes_.find(id);
  GPUHUB_CHECK(n != nodes_.end());
  Slot& slot = slots_.at(id);
  GPUHUB_CHECK_MSG((slot.used & mask) == 0, "a card would be in two live rentals");
  GPUHUB_CHECK((mask >> n->second.cards) == 0 && mask != 0);
  Account(n->second, slot, -1);
  slot.used |= mask;
  Account(n->second, slot, +1);
}

void Inventory::Free(NodeId id, std::uint32_t mask) {
  auto n = nodes_.find(id);
  GPUHUB_CHECK(n != nodes_.end());
  Slot& slot = slots_.at(id);
  GPUHUB_CHECK_MSG((slot.used & mask) == mask, "freeing cards that are not rented");
  Account(n->second, slot, -1);
  slot.used &= ~mask;
  Account(n->second, slot, +1);
}

void Inventory::SetState(NodeId id, NodeState state, TimestampMicros now) {
  auto n = nodes_.find(id);
  GPUHUB_CHECK(n != nodes_.end());
  const Slot& slot = slots_.at(id);
  Account(n->second, slot, -1);
  n->second.state = state;
  n->second.updated_at = now;
  Account(n->second, slot, +1);
}

void Inventory::TakeExtraNvme(NodeId id, std::int64_t gb) {
  GPUHUB_CHECK(gb >= 0 && gb <= ExtraNvmeFreeGb(id));
  slots_.at(id).extra_nvme_sold_gb += gb;
}

void Inventory::FreeExtraNvme(NodeId id, std::int64_t gb) {
  Slot& slot = slots_.at(id);
  GPUHUB_CHECK_MSG(gb >= 0 && gb <= slot.extra_nvme_sold_gb, "freeing extra NVMe never sold");
  slot.extra_nvme_sold_gb -= gb;
}

std::int64_t Inventory::ExtraNvmeFreeGb(NodeId id) const {
  const Node& node = nodes_.at(id);
  return std::min(node.nvme_extra_capacity_gb, kMaxExtraNvmeGbSoldPerNode) -
         slots_.at(id).extra_nvme_sold_gb;
}

std::int64_t Inventory::ExtraNvmeSoldGb(NodeId id) const {
  auto it = slots_.find(id);
  return it == slots_.end() ? 0 : it->second.extra_nvme_sold_gb;
}

std::optional<Placement> Inventory::Find(int card, int region, int count,
                                         std::int64_t extra_nvme_gb) const {
  if (!IsBlockSize(count)) return std::nullopt;
  std::optional<FreeKey> best;
  for (auto it = free_.lower_bound({card, region < 0 ? 0 : region});
       it != free_.end() && it->first.first == card; ++it) {
    if (region >= 0 && it->first.second != region) break;
    const std::set<FreeKey>& keys = it->second;
    // Partly used nodes with enough free cards first (fewest free first); a whole free node only
    // when none of them has a free aligned block.
    for (bool whole : {false, true}) {
      for (auto k = keys.lower_bound({whole, count, 0}); k != keys.end() && std::get<0>(*k) == whole;
           ++k) {
        if (best && *k >= *best) break;
        NodeId id = std::get<2>(*k);
        if (FreeBlocks(slots_.at(id).used, nodes_.at(id).cards, count) > 0 &&
            ExtraNvmeFreeGb(id) >= extra_nvme_gb) {
          best = *k;
          break;
        }
      }
    }
  }
  if (!best) return std::nullopt;
  NodeId id = std::get<2>(*best);
  auto mask = BestBlock(slots_.at(id).used, nodes_.at(id).cards, count);
  GPUHUB_CHECK(mask.has_value());
  return Placement{id, *mask};
}

const Node* Inventory::FindNode(NodeId id) const {
  auto it = nodes_.find(id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::uint32_t Inventory::Used(NodeId id) const {
  auto it = slots_.find(id);
  return it == slots_.end() ? 0 : it->second.used;
}

int Inventory::CardOf(NodeId id) const { return slots_.at(id).card; }
int Inventory::RegionOf(NodeId id) const { return slots_.at(id).region; }

StockRow Inventory::Stock(int card, int region) const {
  StockRow row;
  auto it = counters_.find({card, region});
  if (it == counters_.end()) return row;
  const Counters& c = it->second;
  row.nodes = c.nodes;
  row.nodes_draining = c.nodes_draining;
  row.cards = c.cards;
  row.cards_free = c.cards_free;
  row.sets = c.sets;
  return row;
}

Status Inventory::CheckConsistency() const {
  std::map<Group, Counters> counters;
  std::map<Group, std::set<FreeKey>> free;
  for (const auto& [id, node] : nodes_) {
    const Slot& slot = slots_.at(id);
    if ((slot.used >> node.cards) != 0) {
      return Status::Internal("node " + std::to_string(id) + " has rented cards past its last card");
    }
    if (node.state == NodeState::kRemoved && (slot.used != 0 || slot.extra_nvme_sold_gb != 0)) {
      return Status::Internal("removed node " + std::to_string(id) + " still has rented cards");
    }
    if (slot.extra_nvme_sold_gb < 0 || ExtraNvmeFreeGb(id) < 0) {
      return Status::Internal("node " + std::to_string(id) + "'s extra NVMe is oversold");
    }
    Group group{slot.card, slot.region};
    Counters& c = counters[group];
    if (node.state == NodeState::kDraining) ++c.nodes_draining;
    if (node.state != NodeState::kActive) continue;
    int free_cards = node.cards - std::popcount(slot.used);
    ++c.nodes;
    c.cards += node.cards;
    c.cards_free += free_cards;
    for (std::size_t i = 0; i < kBlockSizes.size(); ++i) {
      c.sets[i] += FreeBlocks(slot.used, node.cards, kBlockSizes[i]);
    }
    if (free_cards > 0) free[group].insert(KeyOf(node, slot.used));
  }
  for (const auto& [group, c] : counters_) {
    Counters expected;
    if (auto it = counters.find(group); it != counters.end()) expected = it->second;
    if (!(expected == c)) {
      return Status::Internal("stock counters of card " + std::to_string(group.first) +
                              " region " + std::to_string(group.second) +
                              " disagree with the nodes");
    }
  }
  for (const auto& [group, c] : counters) {
    if (!counters_.count(group) && !(c == Counters{})) {
      return Status::Internal("stock counters are missing a group");
    }
  }
  if (free != free_) return Status::Internal("the free-node index disagrees with the nodes");
  return Status::Ok();
}

}  // namespace gpuhub::rentals
