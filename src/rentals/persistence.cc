// Fleet: rebuilding from stored records, handing them out, and the invariants.
#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

#include "rentals/fleet.h"
#include "rentals/payment.h"

namespace gpuhub::rentals {
namespace {

Status Bad(const std::string& what) { return Status::Internal("stored rentals: " + what); }

std::string R(RentalId id) { return "rental " + std::to_string(id); }

}  // namespace

Result<Fleet> Fleet::Restore(FleetConfig config, Snapshot s) {
  // Cards and regions that stored records name but the catalog no longer lists keep working for
  // what exists (renewals pay their locked price) and take no new orders or nodes.
  auto add_region = [&](const std::string& code) {
    if (std::find(config.regions.begin(), config.regions.end(), code) == config.regions.end()) {
      config.regions.push_back(code);
    }
  };
  for (const auto& n : s.nodes) {
    auto code = CanonicalRegion(n.region);
    if (!code.ok() || *code != n.region) return Bad("node " + std::to_string(n.id) + " region");
    add_region(n.region);
  }
  Fleet f;
  f.config_ = std::move(config);
  for (const auto& n : s.nodes) {
    bool known = false;
    for (const auto& c : f.config_.cards) known = known || CardKey(c.name) == CardKey(n.gpu);
    if (!known) f.config_.cards.push_back(CardConfig{n.gpu, 0, 0, false, {}, {}, false, 0});
  }
  for (std::size_t i = 0; i < f.config_.cards.size(); ++i) {
    f.card_by_key_.emplace(CardKey(f.config_.cards[i].name), static_cast<int>(i));
  }
  for (std::size_t i = 0; i < f.config_.regions.size(); ++i) {
    f.region_by_code_.emplace(f.config_.regions[i], static_cast<int>(i));
  }
  f.IndexCounts();

  std::sort(s.nodes.begin(), s.nodes.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (const auto& n : s.nodes) {
    if (n.id <= 0 || f.inventory_.FindNode(n.id) != nullptr) {
      return Bad("node id " + std::to_string(n.id));
    }
    if (n.cards < 1 || n.cards > kMaxCardsPerNode || n.nvme_included_gb_per_card < 0 ||
        n.nvme_extra_capacity_gb < 0) {
      return Bad("node " + std::to_string(n.id) + " is malformed");
    }
    NodeState state = n.state;
    Node added = n;
    added.state = NodeState::kActive;  // rentals are placed first, then the state is set
    f.inventory_.Add(added, f.card_by_key_.at(CardKey(n.gpu)), f.region_by_code_.at(n.region));
    if (state != NodeState::kActive) f.inventory_.SetState(n.id, state, n.updated_at);
    f.next_node_id_ = std::max(f.next_node_id_, n.id + 1);
    f.now_ = std::max(f.now_, n.updated_at);
  }

  std::sort(s.rentals.begin(), s.rentals.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& r : s.rentals) {
    if (r.id <= 0 || f.rentals_.count(r.id)) return Bad("rental id " + std::to_string(r.id));
    const Node* node = f.inventory_.FindNode(r.node_id);
    if (node == nullptr) return Bad(R(r.id) + " is on unknown node " + std::to_string(r.node_id));
    if (CardKey(node->gpu) != CardKey(r.gpu) || r.count != std::popcount(r.card_mask) ||
        (r.card_mask >> node->cards) != 0 || r.customer_id <= 0 || r.period < 1) {
      return Bad(R(r.id) + " does not fit its node");
    }
    if (IsLive(r.state)) {
      if ((f.inventory_.Used(r.node_id) & r.card_mask) != 0) {
        return Bad("a card of node " + std::to_string(r.node_id) + " is in two live rentals (" +
                   R(r.id) + ")");
      }
      if (node->state == NodeState::kRemoved) return Bad(R(r.id) + " is live on a removed node");
      if (r.extra_nvme_gb < 0 || r.extra_nvme_gb % kGbPerTb != 0 ||
          r.extra_nvme_gb > f.inventory_.ExtraNvmeFreeGb(r.node_id)) {
        return Bad("node " + std::to_string(r.node_id) + "'s extra NVMe is oversold (" +
                   R(r.id) + ")");
      }
      // Take() works on any state; the stock counters follow the node's state.
      f.inventory_.Take(r.node_id, r.card_mask);
      f.inventory_.TakeExtraNvme(r.node_id, r.extra_nvme_gb);
      ++f.live_rentals_;
      ++f.live_by_customer_[r.customer_id];
    }
    f.rentals_by_customer_[r.customer_id].push_back(r.id);
    f.rentals_by_node_[r.node_id].push_back(r.id);
    f.next_rental_id_ = std::max(f.next_rental_id_, r.id + 1);
    f.now_ = std::max(f.now_, r.updated_at);
    f.rentals_.emplace(r.id, RentalSlot{std::move(r), {}, {}, std::nullopt});
  }
  for (auto& rn : s.renewals) {
    if (!f.rentals_.count(rn.rental_id) || rn.period < 2 ||
        f.renewals_.count({rn.rental_id, rn.period})) {
      return Bad("renewal of " + R(rn.rental_id) + " period " + std::to_string(rn.period));
    }
    f.renewals_.emplace(std::make_pair(rn.rental_id, rn.period), std::move(rn));
  }
  std::sort(s.charges.begin(), s.charges.end(), [](auto& a, auto& b) { return a.id < b.id; });
  for (auto& c : s.charges) {
    auto it = f.rentals_.find(c.rental_id);
    if (c.id <= 0 || f.charges_.count(c.id) || it == f.rentals_.end()) {
      return Bad("charge " + std::to_string(c.id));
    }
    it->second.charges.push_back(c.id);
    f.next_charge_id_ = std::max(f.next_charge_id_, c.id + 1);
    f.charges_.emplace(c.id, std::move(c));
  }
  std::sort(s.events.begin(), s.events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.rental_id, a.sequence) < std::tie(b.rental_id, b.sequence);
  });
  for (auto& e : s.events) {
    auto it = f.rentals_.find(e.rental_id);
    if (it == f.rentals_.end() || e.sequence < 1 || e.sequence > it->second.rental.events) {
      return Bad("event " + std::to_string(e.sequence) + " of " + R(e.rental_id));
    }
    auto& history = it->second.history;
    history.push_back(std::move(e));
    if (history.size() > kMaxEventsKeptPerRental) history.erase(history.begin());
  }
  for (auto& [id, slot] : f.rentals_) f.Reschedule(slot);
  GPUHUB_RETURN_IF_ERROR(f.CheckInvariants());
  return f;
}

Snapshot Fleet::Records() const {
  Snapshot s;
  for (const auto& [id, node] : inventory_.nodes()) s.nodes.push_back(node);
  for (const auto& [id, slot] : rentals_) {
    s.rentals.push_back(slot.rental);
    for (const auto& e : slot.history) s.events.push_back(e);
  }
  for (const auto& [key, renewal] : renewals_) s.renewals.push_back(renewal);
  for (const auto& [id, charge] : charges_) s.charges.push_back(charge);
  return s;
}

Status Fleet::CheckInvariants() const {
  GPUHUB_RETURN_IF_ERROR(inventory_.CheckConsistency());
  std::map<NodeId, std::uint32_t> used;
  std::map<NodeId, std::int64_t> nvme_sold;
  std::size_t live = 0;
  std::unordered_map<UserId, std::size_t> live_by_customer;
  std::size_t scheduled = 0;
  for (const auto& [id, slot] : rentals_) {
    const Rental& r = slot.rental;
    const Node* node = inventory_.FindNode(r.node_id);
    if (node == nullptr) return Bad(R(id) + " on an unknown node");
    if (IsLive(r.state)) {
      if ((used[r.node_id] & r.card_mask) != 0) {
        return Bad("a card of node " + std::to_string(r.node_id) + " is in two live rentals");
      }
      used[r.node_id] |= r.card_mask;
      nvme_sold[r.node_id] += r.extra_nvme_gb;
      ++live;
      ++live_by_customer[r.customer_id];
      if (node->state == NodeState::kRemoved) return Bad(R(id) + " is live on a removed node");
    }
    const Renewal* next = FindRenewal(id, r.period + 1);
    if (r.next_paid != (next != nullptr && next->status == RenewalStatus::kPaid)) {
      return Bad(R(id) + ": next_paid disagrees with its renewal");
    }
    if (r.renewal_invoiced_at != 0 && next == nullptr) {
      return Bad(R(id) + " was invoiced but has no renewal");
    }
    switch (r.state) {
      case RentalState::kProvisioning:
        if (r.instance.state != InstanceState::kProvisioning || r.term_start != 0 || r.next_paid) {
          return Bad(R(id) + ": provisioning but its instance or term says otherwise");
        }
        break;
      case RentalState::kActive:
        if (r.instance.state != InstanceState::kRunning || r.term_start <= 0 ||
            r.term_end - r.term_start != TermMicros(r.term)) {
          return Bad(R(id) + ": active but its instance or term says otherwise");
        }
        break;
      case RentalState::kStopped:
        if (r.instance.state != InstanceState::kStopped || r.next_paid || next == nullptr ||
            next->status != RenewalStatus::kOpen) {
          return Bad(R(id) + ": stopped without an open renewal or a stopped instance");
        }
        break;
      case RentalState::kReleased:
        if (r.instance.state != InstanceState::kErased || r.instance.key_destroyed_at == 0 ||
            r.released_at == 0 || r.release_reason == ReleaseReason::kNone) {
          return Bad(R(id) + ": released but its key is not destroyed");
        }
        break;
    }
    auto due = NextDue(r);
    if (due.has_value() != slot.scheduled.has_value() ||
        (due && (*slot.scheduled != due->at || !timeline_.count({due->at, id})))) {
      return Bad(R(id) + ": its next transition is not scheduled at its time");
    }
    if (due) ++scheduled;
  }
  if (scheduled != timeline_.size()) return Bad("the timeline has entries of no rental");
  for (const auto& [id, node] : inventory_.nodes()) {
    auto it = used.find(id);
    std::uint32_t expected = it == used.end() ? 0 : it->second;
    if (inventory_.Used(id) != expected) {
      return Bad("node " + std::to_string(id) + "'s rented cards are not its live rentals'");
    }
    // A node's NVMe is never oversold: what its live rentals hold is what it counts as sold, and
    // that is within min(its extra capacity, 30 TB).
    auto sold = nvme_sold.find(id);
    if (inventory_.ExtraNvmeSoldGb(id) != (sold == nvme_sold.end() ? 0 : sold->second) ||
        inventory_.ExtraNvmeFreeGb(id) < 0) {
      return Bad("node " + std::to_string(id) + "'s extra NVMe is oversold or miscounted");
    }
  }
  if (live != live_rentals_ || live_by_customer != live_by_customer_) {
    return Bad("live rental counters disagree with the rentals");
  }
  return Status::Ok();
}

Status Fleet::CheckSettlement(const ledger::Ledger& ledger) const {
  // (rental, period, add-on): how many times paid and refunded.
  std::map<std::tuple<RentalId, std::int64_t, std::int64_t>, int> paid, refunded;
  for (const auto& [id, c] : charges_) {
    const Rental* r = FindRental(c.rental_id);
    if (r == nullptr || r->customer_id != c.customer_id) return Bad("charge " + std::to_string(id));
    GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(c.amount));
    const bool refund = c.kind == ChargeKind::kRefund;
    if (!LegsMatch(ledger, ChargeTransferBase(c), refund ? "refund:" : "", c.amount,
                   c.paid_currency, c.paid_micros)) {
      return Bad("charge " + std::to_string(id) + ": its ledger legs are missing or wrong");
    }
    // An add-on pays its NVMe; a term its cards and NVMe; a refund mirrors what it returns.
    const bool addon = c.kind == ChargeKind::kExtraNvme || c.nvme_addon > 0;
    const std::int64_t expected_net =
        addon ? c.extra_nvme_micros : r->price_micros + c.extra_nvme_micros;
    if (c.amount.net_micros != expected_net || c.extra_nvme_micros < 0 ||
        c.extra_nvme_micros > c.amount.net_micros) {
      return Bad("charge " + std::to_string(id) + " is not the rental's locked price");
    }
    if (refund && c.refund_of != 0) {
      auto of = charges_.find(c.refund_of);
      if (of == charges_.end() || !Refunds(c, of->second) ||
          of->second.amount != c.amount || of->second.paid_micros != c.paid_micros) {
        return Bad("charge " + std::to_string(id) + " refunds what was not paid");
      }
    }
    auto& count = (refund ? refunded : paid)[{c.rental_id, c.period, c.nvme_addon}];
    if (++count > 1) return Bad("term " + std::to_string(c.period) + " of " + R(c.rental_id) +
                                " charged or refunded twice");
  }
  for (const auto& [key, n] : refunded) {
    if (!paid.count(key)) return Bad("a refund of a term never paid");
  }
  for (const auto& [id, slot] : rentals_) {
    const Rental& r = slot.rental;
    if (!paid.count({id, 1, 0})) return Bad(R(id) + " has no purchase charge");
    // Every term served was paid: 1..period (and period + 1 when paid ahead).
    for (std::int64_t p = 1; p <= r.period + (r.next_paid ? 1 : 0); ++p) {
      if (!paid.count({id, p, 0})) return Bad(R(id) + " term " + std::to_string(p) + " unpaid");
    }
  }
  for (const auto& [key, renewal] : renewals_) {
    if (renewal.status == RenewalStatus::kRefunded && !refunded.count({key.first, key.second, 0})) {
      return Bad(R(key.first) + ": a refunded renewal without its refund");
    }
    if (renewal.status != RenewalStatus::kPaid && renewal.status != RenewalStatus::kRefunded) {
      continue;
    }
    auto c = charges_.find(renewal.charge_id);
    if (c == charges_.end() || c->second.rental_id != key.first || c->second.period != key.second ||
        c->second.kind != ChargeKind::kRenewal) {
      return Bad(R(key.first) + ": a paid renewal without its charge");
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::rentals
