// Fleet: the admin's commands on nodes: adding one and changing its state (draining, removed).
#include "rentals/fleet.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "rentals/format.h"

namespace gpuhub::rentals {

namespace {

Status ValidateHostname(std::string_view name) {
  if (name.size() > kMaxHostnameBytes) {
    return Status::InvalidArgument("hostname must be at most " +
                                   std::to_string(kMaxHostnameBytes) + " characters")
        .WithField("hostname");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    if (!ok) {
      return Status::InvalidArgument(
                 "hostname must be lower-case letters, digits, '-' and '.' such as "
                 "\"dfw1-h100-07\"")
          .WithField("hostname");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Node> Fleet::AddNode(const NodeSpec& spec, TimestampMicros now, Changes* changes) {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(int card_index, CardIndex(spec.gpu, "gpu"));
  const CardConfig& card = Card(card_index);
  if (card.counts.empty()) {
    return Status::InvalidArgument(card.name + " is no longer in the catalog").WithField("gpu");
  }
  GPUHUB_ASSIGN_OR_RETURN(int region_index, RegionIndex(spec.region, "region"));
  const std::string& region = config_.regions[static_cast<std::size_t>(region_index)];
  if (std::find(card.regions.begin(), card.regions.end(), region) == card.regions.end()) {
    std::string where;
    for (const auto& r : card.regions) where += (where.empty() ? "" : ", ") + r;
    return Status::InvalidArgument(card.name + " is offered in " + where + " only (the catalog)")
        .WithField("region");
  }
  int cards = spec.cards == 0 ? card.counts.back() : spec.cards;
  if (cards < card.counts.front() || cards > kMaxCardsPerNode) {
    return Status::InvalidArgument("cards must be " + std::to_string(card.counts.front()) + ".." +
                                   std::to_string(kMaxCardsPerNode) + " for " + card.name +
                                   " (it is rented in sets of " + CountList(card.counts) + ")")
        .WithField("cards");
  }
  GPUHUB_RETURN_IF_ERROR(ValidateHostname(spec.hostname));
  if (!spec.hostname.empty()) {
    for (const auto& [id, node] : inventory_.nodes()) {
      if (node.hostname == spec.hostname && node.state != NodeState::kRemoved) {
        return Status::Conflict("node " + std::to_string(id) + " already has hostname '" +
                                spec.hostname + "'")
            .WithField("hostname");
      }
    }
  }
  std::int64_t per_card = spec.nvme_included_gb_per_card.value_or(card.nvme_included_gb_per_card);
  if (per_card < 0 || per_card * cards > kMaxNvmeGbPerNode) {
    return Status::InvalidArgument("nvme_included_gb_per_card must be 0.." +
                                   std::to_string(kMaxNvmeGbPerNode / cards))
        .WithField("nvme_included_gb_per_card");
  }
  std::int64_t extra = spec.nvme_extra_capacity_gb.value_or(kDefaultExtraNvmeGbPerNode);
  if (extra < 0 || extra > kMaxNvmeGbPerNode) {
    return Status::InvalidArgument("nvme_extra_capacity_gb must be 0.." +
                                   std::to_string(kMaxNvmeGbPerNode))
        .WithField("nvme_extra_capacity_gb");
  }
  if (inventory_.size() >= kMaxNodes) {
    return Status::ResourceExhausted("the fleet holds at most " + std::to_string(kMaxNodes) +
                                     " nodes");
  }
  Node node;
  node.id = next_node_id_++;
  node.gpu = card.name;
  node.region = region;
  node.cards = cards;
  node.hostname = spec.hostname;
  node.nvme_included_gb_per_card = per_card;
  node.nvme_extra_capacity_gb = extra;
  node.state = NodeState::kActive;
  node.created_at = node.updated_at = now;
  inventory_.Add(node, card_index, region_index);
  changes->nodes.push_back(node.id);
  return node;
}

Result<Node> Fleet::SetNodeState(NodeId id, NodeState state, TimestampMicros now,
                                 Changes* changes) {
  now = Now(now);
  const Node* node = inventory_.FindNode(id);
  if (node == nullptr) return Status::NotFound("no node " + std::to_string(id));
  if (node->state == state) return *node;
  if (node->state == NodeState::kRemoved) {
    return Status::FailedPrecondition("node " + std::to_string(id) + " was removed");
  }
  if (state == NodeState::kRemoved) {
    std::size_t live = 0;
    TimestampMicros wipe_due = 0;
    for (RentalId r : rentals_by_node_[id]) {
      const Rental& rental = rentals_.at(r).rental;
      if (IsLive(rental.state)) ++live;
      if (rental.state == RentalState::kReleased && rental.instance.wiped_at == 0) {
        wipe_due = std::max(wipe_due, rental.instance.wipe_due_at);
      }
    }
    if (live > 0) {
      return Status::FailedPrecondition(
          "node " + std::to_string(id) + " has " + std::to_string(live) +
          " live rental(s); drain it and wait for them to end (or be released) first");
    }
    if (wipe_due > 0) {
      return Status::FailedPrecondition("node " + std::to_string(id) +
                                        " still has local NVMe to wipe (due by " +
                                        FormatTimestamp(wipe_due) + ")");
    }
  }
  inventory_.SetState(id, state, now);
  changes->nodes.push_back(id);
  return *inventory_.FindNode(id);
}

}  // namespace gpuhub::rentals
