// Fleet: quoting an order (price, stock, placement) and placing it, paid in one ledger batch.
#include "rentals/fleet.h"

#include <algorithm>
#include <string>
#include <utility>

#include "rentals/format.h"
#include "rentals/payment.h"

namespace gpuhub::rentals {

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
    return why_not(
        "not_in_region", "region",
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

}  // namespace gpuhub::rentals
