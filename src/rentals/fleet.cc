// Fleet: configuration, admin commands, quotes and orders, the customer's commands, the agent's
// reports and the queries. The time-driven lifecycle and the money are in lifecycle.cc; restore
// and invariants in persistence.cc.
#include "rentals/fleet.h"

#include <algorithm>
#include <bit>
#include <set>

#include "rentals/format.h"
#include "rentals/payment.h"

namespace gpuhub::rentals {
namespace {

std::string CountList(const std::vector<int>& counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) out += i + 1 == counts.size() ? " or " : ", ";
    out += std::to_string(counts[i]);
  }
  return out;
}

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

Status ValidateConnection(const std::vector<std::pair<std::string, std::string>>& fields) {
  if (fields.size() > kMaxConnectionFields) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxConnectionFields) +
                                   " connection fields")
        .WithField("connection");
  }
  for (const auto& [key, value] : fields) {
    bool ok = !key.empty() && key.size() <= kMaxConnectionKeyBytes;
    for (char c : key) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!ok) {
      return Status::InvalidArgument("connection keys are 1.." +
                                     std::to_string(kMaxConnectionKeyBytes) +
                                     " characters of [a-z0-9_] such as \"ssh_host\"")
          .WithField("connection");
    }
    ok = value.size() <= kMaxConnectionValueBytes;
    for (unsigned char c : value) ok = ok && c >= 0x20 && c != 0x7f;
    if (!ok) {
      return Status::InvalidArgument("connection value of '" + key + "' must be at most " +
                                     std::to_string(kMaxConnectionValueBytes) +
                                     " printable characters")
          .WithField("connection");
    }
  }
  return Status::Ok();
}

}  // namespace

TaxBlock NoTax(std::int64_t net_micros) { return {net_micros, {}, 0, net_micros}; }

void Changes::Clear() { *this = Changes{}; }

void Changes::Normalize() {
  auto dedupe = [](auto& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  };
  dedupe(nodes);
  dedupe(rentals);
  dedupe(renewals);
}

bool Changes::empty() const {
  return transfers.empty() && nodes.empty() && rentals.empty() && renewals.empty() &&
         events.empty() && charges.empty() && notices.empty();
}

Fleet::Fleet(FleetConfig config) : config_(std::move(config)) {
  Status valid = ValidateFleetConfig(config_);
  GPUHUB_CHECK_MSG(valid.ok(), valid.message().c_str());
  for (std::size_t i = 0; i < config_.cards.size(); ++i) {
    card_by_key_.emplace(CardKey(config_.cards[i].name), static_cast<int>(i));
  }
  for (std::size_t i = 0; i < config_.regions.size(); ++i) {
    region_by_code_.emplace(config_.regions[i], static_cast<int>(i));
  }
  IndexCounts();
}

void Fleet::IndexCounts() {
  std::set<int> counts;
  for (const auto& card : config_.cards) counts.insert(card.counts.begin(), card.counts.end());
  all_counts_.assign(counts.begin(), counts.end());
  if (all_counts_.empty()) all_counts_ = {1};
  max_count_ = all_counts_.back();
}

// ----- Lookups -------------------------------------------------------------------------------

Result<int> Fleet::CardIndex(std::string_view gpu, std::string_view field) const {
  auto it = card_by_key_.find(CardKey(gpu));
  if (it == card_by_key_.end() || gpu.size() > kMaxGpuNameBytes) {
    std::string names;
    for (const auto& c : config_.cards) {
      if (c.monthly_micros > 0) names += (names.empty() ? "" : ", ") + c.name;
    }
    return Status::InvalidArgument("unknown card '" + std::string(gpu.substr(0, 64)) +
                                   "'; the term fleet rents " + names)
        .WithField(std::string(field));
  }
  return it->second;
}

Result<int> Fleet::RegionIndex(std::string_view region, std::string_view field) const {
  auto code = CanonicalRegion(region);
  if (!code.ok()) return code.status().WithField(std::string(field));
  auto it = region_by_code_.find(*code);
  if (it == region_by_code_.end()) {
    std::string codes;
    for (const auto& r : config_.regions) codes += (codes.empty() ? "" : ", ") + r;
    return Status::InvalidArgument("unknown region '" + *code + "'; regions: " + codes)
        .WithField(std::string(field));
  }
  return it->second;
}

Result<std::string> Fleet::CardName(std::string_view gpu) const {
  auto it = card_by_key_.find(CardKey(gpu));
  if (it == card_by_key_.end()) return Status::NotFound("unknown card '" + std::string(gpu) + "'");
  return Card(it->second).name;
}

std::int64_t Fleet::DiscountPpm(int count) const {
  for (const auto& d : config_.discounts) {
    if (d.count == count) return d.ppm;
  }
  return 0;
}

Result<std::int64_t> Fleet::PriceMicros(std::int64_t list_micros, int count) const {
  std::int64_t subtotal = 0;
  if (!CheckedMul(list_micros, count, &subtotal)) {
    return Status::InvalidArgument("price out of range");
  }
  // list x count x (1 - discount), rounded once, half-even (catalog::SetPriceMicros' rule).
  return MulDivHalfEven(subtotal, kPpm - DiscountPpm(count), kPpm);
}

const Rental* Fleet::FindRental(RentalId id) const {
  auto it = rentals_.find(id);
  return it == rentals_.end() ? nullptr : &it->second.rental;
}

const Rental* Fleet::FindCustomerRental(UserId customer, RentalId id) const {
  const Rental* r = FindRental(id);
  return r != nullptr && r->customer_id == customer ? r : nullptr;
}

const Renewal* Fleet::FindRenewal(RentalId id, std::int64_t period) const {
  auto it = renewals_.find({id, period});
  return it == renewals_.end() ? nullptr : &it->second;
}

Fleet::RentalSlot& Fleet::Slot(RentalId id) { return rentals_.at(id); }

// ----- Admin ---------------------------------------------------------------------------------

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

// ----- Quotes and orders ---------------------------------------------------------------------

Result<Quote> Fleet::QuoteOrder(UserId customer, const OrderSpec& spec,
                                const ledger::Ledger& ledger, const TaxFunction& tax,
                                TimestampMicros now) const {
  now = Now(now);
  GPUHUB_ASSIGN_OR_RETURN(int card_index, CardIndex(spec.gpu, "gpu"));
  const CardConfig& card = Card(card_index);
  if (card.counts.empty()) {
    return Status::InvalidArgument(card.name + " is no longer offered").WithField("gpu");
  }
  if (!IsBlockSize(spec.count) || spec.count > max_count_) {
    return Status::InvalidArgument("count must be " + CountList(all_counts_) +
                                   " cards (all on one node)")
        .WithField("count");
  }
  int region_index = -1;
  if (!spec.region.empty()) {
    GPUHUB_ASSIGN_OR_RETURN(region_index, RegionIndex(spec.region, "region"));
  }
  Quote q;
  q.gpu = card.name;
  q.count = spec.count;
  q.term = spec.term;
  q.region_requested =
      region_index < 0 ? "" : config_.regions[static_cast<std::size_t>(region_index)];
  q.list_micros = spec.term == Term::kWeek ? card.weekly_micros : card.monthly_micros;
  q.list_derived = spec.term == Term::kWeek && card.weekly_derived;
  if (!CheckedMul(q.list_micros, spec.count, &q.subtotal_micros)) {
    return Status::InvalidArgument("price out of range").WithField("count");
  }
  q.discount_ppm = DiscountPpm(spec.count);
  GPUHUB_ASSIGN_OR_RETURN(q.cards_net_micros, PriceMicros(q.list_micros, spec.count));
  q.discount_micros = q.subtotal_micros - q.cards_net_micros;
  if (spec.extra_nvme_tb < 0 || spec.extra_nvme_tb > kMaxExtraNvmeTbPerRental) {
    return Status::InvalidArgument("extra_nvme_tb must be a whole number of TB, 0.." +
                                   std::to_string(kMaxExtraNvmeTbPerRental) +
                                   " (at most 30 TB of extra NVMe per node)")
        .WithField("extra_nvme_tb");
  }
  q.extra_nvme_tb = spec.extra_nvme_tb;
  q.extra_nvme_micros_per_tb = ExtraNvmeMicros(1, spec.term);
  q.extra_nvme_micros = ExtraNvmeMicros(spec.extra_nvme_tb, spec.term);
  GPUHUB_ASSIGN_OR_RETURN(q.amount,
                          tax(customer, q.cards_net_micros + q.extra_nvme_micros, now));
  GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(q.amount));
  q.currency = spec.currency;
  q.charge_micros = q.amount.gross_micros;
  bool fx_missing = false;
  if (spec.currency != Currency::kUsd) {
    auto fx = ledger.Fx().ConvertTo(spec.currency, Currency::kUsd, q.amount.gross_micros);
    if (fx.ok()) {
      q.fx = *fx;
      q.charge_micros = fx->from_micros;
    } else {
      fx_missing = true;
      q.charge_micros = 0;
    }
  }
  q.term_start = now;
  q.term_end = now + TermMicros(spec.term);
  for (const auto& r : card.regions) {
    StockRow row = inventory_.Stock(card_index, region_by_code_.at(r));
    q.stock.push_back({r, row.cards_free, row.Sets(spec.count)});
  }

  auto why_not = [&](std::string code, std::string field, std::string reason) {
    q.available = false;
    q.reason_code = std::move(code);
    q.reason_field = std::move(field);
    q.reason = std::move(reason);
    return q;
  };
  if (std::find(card.counts.begin(), card.counts.end(), spec.count) == card.counts.end()) {
    return why_not("count_not_allowed", "count",
                   card.name + " is rented in sets of " + CountList(card.counts) + " cards");
  }
  if (spec.require_fp8 && !card.fp8) {
    return why_not("needs_fp8", "fp8", card.name + " has no FP8 support");
  }
  if (!q.region_requested.empty() &&
      std::find(card.regions.begin(), card.regions.end(), q.region_requested) ==
          card.regions.end()) {
    std::string where;
    for (const auto& r : card.regions) where += (where.empty() ? "" : ", ") + r;
    return why_not("not_in_region", "region",
                   card.name + " is not offered in " + q.region_requested + " (only " + where + ")");
  }
  if (customer != 0) {
    auto live = live_by_customer_.find(customer);
    if (live != live_by_customer_.end() && live->second >= kMaxLiveRentalsPerCustomer) {
      return why_not("too_many_rentals", "",
                     "an account holds at most " + std::to_string(kMaxLiveRentalsPerCustomer) +
                         " rentals at once");
    }
  }
  if (fx_missing) {
    return why_not("no_fx_rate", "currency",
                   "no exchange rate between " + std::string(CurrencyCode(spec.currency)) +
                       " and USD is set; pay from the USD wallet");
  }
  const std::int64_t nvme_gb = spec.extra_nvme_tb * kGbPerTb;
  auto placement = inventory_.Find(card_index, region_index, spec.count, nvme_gb);
  if (!placement && nvme_gb > 0 && inventory_.Find(card_index, region_index, spec.count)) {
    std::int64_t most = 0;
    for (const auto& [id, node] : inventory_.nodes()) {
      if (inventory_.CardOf(id) != card_index || node.state != NodeState::kActive) continue;
      if (region_index >= 0 && inventory_.RegionOf(id) != region_index) continue;
      if (Inventory::FreeBlocks(inventory_.Used(id), node.cards, spec.count) == 0) continue;
      most = std::max(most, inventory_.ExtraNvmeFreeGb(id));
    }
    return why_not("no_nvme", "extra_nvme_tb",
                   "no node with a free " + std::to_string(spec.count) + "-card set of " +
                       card.name + " has " + std::to_string(spec.extra_nvme_tb) +
                       " TB of extra NVMe free now (at most " + std::to_string(most / kGbPerTb) +
                       " TB on one of them)");
  }
  if (!placement) {
    std::string where = q.region_requested.empty() ? "in any region" : "in " + q.region_requested;
    std::string others;
    for (const auto& s : q.stock) {
      others += (others.empty() ? "" : ", ") + s.region + " " + std::to_string(s.sets);
    }
    return why_not("no_stock", q.region_requested.empty() ? "count" : "region",
                   "no " + std::to_string(spec.count) + "-card set of " + card.name +
                       " is free " + where + " now (sets free: " + others + ")");
  }
  q.available = true;
  q.placement = *placement;
  q.region = inventory_.FindNode(placement->node_id)->region;
  return q;
}

Result<Rental> Fleet::Order(UserId customer, const OrderSpec& spec, ledger::Ledger& ledger,
                            const TaxFunction& tax, TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (customer <= 0) return Status::InvalidArgument("customer id must be positive");
  GPUHUB_ASSIGN_OR_RETURN(Quote q, QuoteOrder(customer, spec, ledger, tax, now));
  if (!q.available) {
    Status refused = q.reason_code == "count_not_allowed"  ? Status::InvalidArgument(q.reason)
                     : q.reason_code == "too_many_rentals" ? Status::ResourceExhausted(q.reason)
                                                           : Status::FailedPrecondition(q.reason);
    return q.reason_field.empty() ? refused : refused.WithField(q.reason_field);
  }
  const Node& node = *inventory_.FindNode(q.placement.node_id);
  Rental r;
  r.id = next_rental_id_;
  r.customer_id = customer;
  r.gpu = q.gpu;
  r.count = q.count;
  r.region = node.region;
  r.node_id = node.id;
  r.card_mask = q.placement.card_mask;
  r.term = spec.term;
  r.list_micros = q.list_micros;
  r.discount_ppm = q.discount_ppm;
  r.price_micros = q.cards_net_micros;
  r.extra_nvme_gb = q.extra_nvme_tb * kGbPerTb;
  r.extra_nvme_micros = q.extra_nvme_micros;
  r.currency = spec.currency;
  r.auto_renew = spec.auto_renew;
  r.state = RentalState::kProvisioning;
  r.period = 1;
  r.created_at = r.updated_at = now;
  r.instance.state = InstanceState::kProvisioning;
  r.instance.nvme_gb = node.nvme_included_gb_per_card * q.count;
  r.instance.provisioning_deadline = now + kProvisioningDeadlineMicros;
  GPUHUB_ASSIGN_OR_RETURN(Charge charge, Debit(r, 1, ChargeKind::kPurchase, spec.currency, ledger,
                                               tax, now, changes));

  // The money moved: from here on nothing can fail.
  ++next_rental_id_;
  inventory_.Take(node.id, r.card_mask);
  inventory_.TakeExtraNvme(node.id, r.extra_nvme_gb);
  ++live_rentals_;
  ++live_by_customer_[customer];
  rentals_by_customer_[customer].push_back(r.id);
  rentals_by_node_[node.id].push_back(r.id);
  RentalSlot& slot = rentals_.emplace(r.id, RentalSlot{r, {}, {}, std::nullopt}).first->second;
  Record(slot, EventKind::kCreated, now,
         std::to_string(r.count) + "x " + r.gpu + " on node " + std::to_string(node.id) + " (" +
             node.region + ", cards " + CardList(r.card_mask) + "), " +
             (r.extra_nvme_gb > 0
                  ? std::to_string(r.extra_nvme_gb / kGbPerTb) + " TB extra NVMe, "
                  : std::string()) +
             std::string(TermName(r.term)) + " at " +
             UsdText(r.price_micros + r.extra_nvme_micros) + " USD net, paid " +
             AmountText(charge.paid_micros, charge.paid_currency),
         changes);
  if (config_.provisioning == Provisioning::kImmediate) Activate(slot, now, changes);
  if (slot.rental.state == RentalState::kActive) {
    charge.period_start = slot.rental.term_start;
    charge.period_end = slot.rental.term_end;
  }
  StoreCharge(slot, std::move(charge), changes);
  Reschedule(slot);
  changes->rentals.push_back(r.id);
  return slot.rental;
}

// ----- The customer's commands ---------------------------------------------------------------

Result<Renewal> Fleet::PayRenewal(UserId customer, RentalId id, std::optional<Currency> currency,
                                  ledger::Ledger& ledger, const TaxFunction& tax,
                                  TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  if (r.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was released at " +
                                      FormatTimestamp(r.released_at) +
                                      "; order a new rental instead");
  }
  if (r.state == RentalState::kProvisioning) {
    return Status::FailedPrecondition("rental " + std::to_string(id) +
                                      " is still being provisioned; its first term has not started");
  }
  if (r.next_paid) return renewals_.at({id, r.period + 1});  // the same answer, no second charge
  GPUHUB_ASSIGN_OR_RETURN(Charge charge, Debit(r, r.period + 1, ChargeKind::kRenewal,
                                               currency.value_or(r.currency), ledger, tax, now,
                                               changes));
  std::int64_t paid_period = r.period + 1;
  StoreCharge(slot, charge, changes);
  MarkRenewalPaid(slot, charges_.at(slot.charges.back()), /*by_auto_renew=*/false, now, changes);
  Reschedule(slot);
  return renewals_.at({id, paid_period});
}

Result<Rental> Fleet::Release(UserId customer, RentalId id, ledger::Ledger& ledger,
                              TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  if (slot.rental.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was already released at " +
                                      FormatTimestamp(slot.rental.released_at));
  }
  ReleaseNow(slot, ReleaseReason::kCustomer, ledger, now, changes);
  Reschedule(slot);
  return slot.rental;
}

Result<Rental> Fleet::SetAutoRenew(UserId customer, RentalId id, bool on, TimestampMicros now,
                                   Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  if (slot.rental.state == RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) + " was released");
  }
  if (slot.rental.auto_renew == on) return slot.rental;
  Rental& r = slot.rental;
  const TimestampMicros term_began = r.term_start > 0 ? r.term_start : r.created_at;
  std::size_t changes_this_term = 0;
  for (const Event& e : slot.history) {
    changes_this_term += e.kind == EventKind::kAutoRenewChanged && e.at >= term_began;
  }
  if (changes_this_term >= kMaxAutoRenewChangesPerTerm) {
    return Status::ResourceExhausted("auto-renew was switched " +
                                     std::to_string(kMaxAutoRenewChangesPerTerm) +
                                     " times this term; it can be switched again next term")
        .WithField("enabled");
  }
  r.auto_renew = on;
  if (on && r.state == RentalState::kActive && !r.next_paid && r.renewal_invoiced_at == 0) {
    // Switched on after its first attempt was due (T - 72 h): the next attempt is now, not in the
    // past (history never runs backwards) and not an hour from now.
    TimestampMicros next = r.auto_renew_attempted_at == 0
                               ? r.term_end - kAutoRenewLeadMicros
                               : r.auto_renew_attempted_at + kAutoRenewRetryMicros;
    if (next < now) r.auto_renew_attempted_at = now - kAutoRenewRetryMicros;
  }
  Record(slot, EventKind::kAutoRenewChanged, now, on ? "auto-renew on" : "auto-renew off", changes);
  Touch(slot, now, changes);
  Reschedule(slot);
  return slot.rental;
}

std::int64_t Fleet::ExtraNvmeMicros(std::int64_t tb, Term term) const {
  const std::int64_t days = TermMicros(term) / kMicrosPerDay;
  // tb <= kMaxExtraNvmeTbPerRental and the price is bounded by ValidateFleetConfig: no overflow.
  return MulDivHalfEven(tb * config_.extra_nvme_micros_per_tb_month, days, kDaysPerStorageMonth)
      .value();
}

std::int64_t Fleet::ExtraNvmeFreeGb(NodeId id) const {
  return inventory_.FindNode(id) == nullptr ? 0 : inventory_.ExtraNvmeFreeGb(id);
}

Result<Rental> Fleet::AddExtraNvme(UserId customer, RentalId id, std::int64_t add_tb,
                                   ledger::Ledger& ledger, const TaxFunction& tax,
                                   TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindCustomerRental(customer, id) == nullptr) {
    return Status::NotFound("no rental " + std::to_string(id) + " of yours");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  const std::int64_t has_tb = r.extra_nvme_gb / kGbPerTb;
  if (add_tb < 1 || add_tb > kMaxExtraNvmeTbPerRental - has_tb) {
    return Status::InvalidArgument(
               "add_tb must be a whole number of TB, 1.." +
               std::to_string(std::max<std::int64_t>(1, kMaxExtraNvmeTbPerRental - has_tb)) +
               ": a rental has at most " + std::to_string(kMaxExtraNvmeTbPerRental) +
               " TB of extra NVMe and this one has " + std::to_string(has_tb) + " TB")
        .WithField("add_tb");
  }
  if (r.state != RentalState::kActive) {
    return Status::FailedPrecondition(
        "rental " + std::to_string(id) + " is " + std::string(RentalStateName(r.state)) +
        (r.state == RentalState::kProvisioning
             ? ": extra NVMe can be added once it runs"
             : r.state == RentalState::kStopped ? ": pay its renewal first" : ""));
  }
  const std::int64_t free_gb = inventory_.ExtraNvmeFreeGb(r.node_id);
  if (add_tb * kGbPerTb > free_gb) {
    return Status::FailedPrecondition("node " + std::to_string(r.node_id) + " has " +
                                      std::to_string(free_gb / kGbPerTb) +
                                      " TB of extra NVMe free")
        .WithField("add_tb");
  }
  const std::int64_t per_term = ExtraNvmeMicros(add_tb, r.term);
  const std::int64_t term = TermMicros(r.term);
  // The rest of the current term, pro rata to the microsecond, half-even.
  const std::int64_t now_part = MulDivHalfEven(per_term, r.term_end - now, term).value();
  struct Piece {
    std::int64_t period;
    std::int64_t net;
    TimestampMicros start, end;
  };
  std::vector<Piece> pieces;
  if (now_part > 0) pieces.push_back({r.period, now_part, now, r.term_end});
  if (r.next_paid) pieces.push_back({r.period + 1, per_term, r.term_end, r.term_end + term});
  std::vector<Charge> charges;
  std::vector<PaymentPart> parts;
  for (const Piece& p : pieces) {
    Charge c;
    c.rental_id = r.id;
    c.customer_id = r.customer_id;
    c.period = p.period;
    c.kind = ChargeKind::kExtraNvme;
    GPUHUB_ASSIGN_OR_RETURN(c.amount, tax(r.customer_id, p.net, now));
    GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(c.amount));
    if (c.amount.net_micros != p.net) return Status::Internal("the tax function changed the net");
    c.paid_currency = r.currency;
    c.period_start = p.start;
    c.period_end = p.end;
    c.at = now;
    c.extra_nvme_gb = add_tb * kGbPerTb;
    c.extra_nvme_micros = p.net;
    c.nvme_addon = r.nvme_addons + 1 + static_cast<std::int64_t>(charges.size());
    parts.push_back({c.amount, ChargeTransferBase(c), "rental_extra_nvme", "rental",
                     RentalName(r) + " term " + std::to_string(p.period) + ": " +
                         std::to_string(add_tb) + " TB extra NVMe until " +
                         FormatTimestamp(p.end)});
    charges.push_back(std::move(c));
  }
  if (!parts.empty()) {
    GPUHUB_ASSIGN_OR_RETURN(auto paid, PayParts(ledger, r.customer_id, r.currency, parts, now,
                                                "this extra NVMe", &changes->transfers));
    for (std::size_t i = 0; i < charges.size(); ++i) {
      charges[i].paid_micros = paid[i].paid_micros;
      charges[i].transfer_ids = paid[i].transfer_ids;
    }
  }
  // The money moved: from here on nothing can fail.
  inventory_.TakeExtraNvme(r.node_id, add_tb * kGbPerTb);
  r.extra_nvme_gb += add_tb * kGbPerTb;
  r.extra_nvme_micros += per_term;
  r.nvme_addons += static_cast<std::int64_t>(charges.size());
  std::int64_t paid_total = 0;
  for (const auto& c : charges) paid_total += c.paid_micros;
  for (auto& c : charges) StoreCharge(slot, std::move(c), changes);
  if (auto it = renewals_.find({r.id, r.period + 1});
      it != renewals_.end() && it->second.status == RenewalStatus::kOpen) {
    // The open invoice is for the term as it will be: with the added NVMe.
    auto amount = tax(r.customer_id, r.price_micros + r.extra_nvme_micros, now);
    if (amount.ok() && ValidateTaxBlock(*amount).ok()) {
      it->second.amount = *amount;
      it->second.updated_at = now;
      changes->renewals.push_back(it->first);
    }
  }
  Record(slot, EventKind::kExtraNvmeAdded, now,
         std::to_string(add_tb) + " TB extra NVMe added (now " +
             std::to_string(r.extra_nvme_gb / kGbPerTb) + " TB), paid " +
             AmountText(paid_total, r.currency) + "; each term from the next on costs " +
             UsdText(r.price_micros + r.extra_nvme_micros) + " USD net",
         changes);
  Reschedule(slot);
  return r;
}

// ----- The agent -----------------------------------------------------------------------------

Result<Rental> Fleet::ReportInstance(RentalId id, const InstanceReport& report,
                                     ledger::Ledger& ledger, TimestampMicros now,
                                     Changes* changes) {
  now = Now(now);
  if (FindRental(id) == nullptr) return Status::NotFound("no rental " + std::to_string(id));
  GPUHUB_RETURN_IF_ERROR(ValidateConnection(report.connection));
  if (report.error.size() > kMaxInstanceErrorBytes) {
    return Status::InvalidArgument("error must be at most " +
                                   std::to_string(kMaxInstanceErrorBytes) + " bytes")
        .WithField("error");
  }
  RentalSlot& slot = Slot(id);
  Rental& r = slot.rental;
  if (report.state == InstanceState::kRunning) {
    if (r.state == RentalState::kProvisioning) {
      r.instance.connection = report.connection;
      Activate(slot, now, changes);
    } else if (r.state == RentalState::kActive) {
      r.instance.connection = report.connection;  // the agent moved or restarted it
      Touch(slot, now, changes);
    } else {
      return Status::FailedPrecondition("rental " + std::to_string(id) + " is " +
                                        std::string(RentalStateName(r.state)) +
                                        ": its instance must not run");
    }
  } else if (report.state == InstanceState::kFailed) {
    if (r.state != RentalState::kProvisioning) {
      return Status::FailedPrecondition("only an instance being provisioned can fail; rental " +
                                        std::to_string(id) + " is " +
                                        std::string(RentalStateName(r.state)));
    }
    r.instance.state = InstanceState::kFailed;
    r.instance.error = report.error;
    Record(slot, EventKind::kInstanceFailed, now, report.error.empty() ? "failed" : report.error,
           changes);
    ReleaseNow(slot, ReleaseReason::kProvisioningFailed, ledger, now, changes);
  } else {
    return Status::InvalidArgument("an agent reports running or failed").WithField("state");
  }
  Reschedule(slot);
  return slot.rental;
}

Result<Rental> Fleet::RecordWipe(RentalId id, TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (FindRental(id) == nullptr) return Status::NotFound("no rental " + std::to_string(id));
  RentalSlot& slot = Slot(id);
  if (slot.rental.state != RentalState::kReleased) {
    return Status::FailedPrecondition("rental " + std::to_string(id) +
                                      " is not released: its disk is in use");
  }
  if (slot.rental.instance.wiped_at != 0) return slot.rental;
  slot.rental.instance.wiped_at = now;
  Record(slot, EventKind::kWiped, now, "local NVMe wiped", changes);
  Touch(slot, now, changes);
  Reschedule(slot);
  return slot.rental;
}

// ----- Queries -------------------------------------------------------------------------------

std::vector<Rental> Fleet::ListRentals(UserId customer, std::size_t limit) const {
  std::vector<Rental> out;
  auto it = rentals_by_customer_.find(customer);
  if (it == rentals_by_customer_.end()) return out;
  for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
    out.push_back(rentals_.at(*id).rental);
  }
  return out;
}

std::vector<Node> Fleet::ListNodes(std::string_view gpu, std::string_view region, NodeId after,
                                   std::size_t limit) const {
  std::vector<Node> out;
  std::string key = CardKey(gpu);
  std::string code;
  if (!region.empty()) {
    auto canonical = CanonicalRegion(region);
    code = canonical.ok() ? *canonical : "?";  // a malformed region matches no node
  }
  for (auto it = inventory_.nodes().upper_bound(after);
       it != inventory_.nodes().end() && out.size() < limit; ++it) {
    const Node& node = it->second;
    if (!gpu.empty() && CardKey(node.gpu) != key) continue;
    if (!code.empty() && node.region != code) continue;
    out.push_back(node);
  }
  return out;
}

std::vector<Rental> Fleet::LiveRentalsOnNode(NodeId id) const {
  std::vector<Rental> out;
  auto it = rentals_by_node_.find(id);
  if (it == rentals_by_node_.end()) return out;
  for (RentalId r : it->second) {
    const Rental& rental = rentals_.at(r).rental;
    if (IsLive(rental.state)) out.push_back(rental);
  }
  return out;
}

std::vector<Rental> Fleet::UnwipedOnNode(NodeId id) const {
  std::vector<Rental> out;
  auto it = rentals_by_node_.find(id);
  if (it == rentals_by_node_.end()) return out;
  for (RentalId r : it->second) {
    const Rental& rental = rentals_.at(r).rental;
    if (rental.state == RentalState::kReleased && rental.instance.wiped_at == 0) {
      out.push_back(rental);
    }
  }
  return out;
}

std::vector<Event> Fleet::History(RentalId id) const {
  auto it = rentals_.find(id);
  return it == rentals_.end() ? std::vector<Event>{} : it->second.history;
}

std::vector<Charge> Fleet::ChargesOf(RentalId id) const {
  std::vector<Charge> out;
  auto it = rentals_.find(id);
  if (it == rentals_.end()) return out;
  for (ChargeId c : it->second.charges) out.push_back(charges_.at(c));
  return out;
}

std::vector<StockByCard> Fleet::Stock() const {
  std::vector<StockByCard> out;
  for (std::size_t i = 0; i < config_.cards.size(); ++i) {
    const CardConfig& card = config_.cards[i];
    if (card.counts.empty()) continue;  // no longer offered
    StockByCard s;
    s.gpu = card.name;
    s.counts = card.counts;
    for (const auto& r : card.regions) {
      StockRow row = inventory_.Stock(static_cast<int>(i), region_by_code_.at(r));
      row.gpu = card.name;
      row.region = r;
      s.regions.push_back(row);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Rental> Fleet::OverdueWipes(TimestampMicros now, std::size_t limit) const {
  std::vector<Rental> out;
  for (const auto& [id, slot] : rentals_) {
    const Rental& r = slot.rental;
    if (r.state == RentalState::kReleased && r.instance.wiped_at == 0 &&
        r.instance.wipe_due_at <= now) {
      out.push_back(r);
    }
  }
  std::sort(out.begin(), out.end(), [](const Rental& a, const Rental& b) {
    return a.instance.wipe_due_at < b.instance.wipe_due_at;
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace gpuhub::rentals
