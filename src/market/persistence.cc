// The exchange: forgetting records once they are durable, restoring from a snapshot, and the
// snapshot of all records.
#include "market/exchange.h"

#include <algorithm>
#include <bit>
#include <string>
#include <unordered_map>
#include <utility>

#include "market/exchange_internal.h"

namespace gpuhub::market {

namespace {

// Takes `id` out of an account's id set, and the account's entry once it is empty.
template <typename Map, typename Id>
void EraseId(Map& by_account, UserId account, Id id) {
  auto it = by_account.find(account);
  if (it == by_account.end()) return;
  it->second.erase(id);
  if (it->second.empty()) by_account.erase(it);
}

// Drops a per-account counter that went back to zero (an account with nothing open costs nothing).
void EraseIfZero(std::unordered_map<UserId, std::size_t>& counters, UserId account) {
  auto it = counters.find(account);
  if (it != counters.end() && it->second == 0) counters.erase(it);
}

}  // namespace

void Exchange::Forget(const Changes& changes) {
  for (OrderId id : changes.bids) {
    auto it = bids_.find(id);
    if (it == bids_.end() || it->second.bid.status == BidStatus::kResting) continue;
    const UserId customer = it->second.bid.customer_id;
    EraseId(bids_by_customer_, customer, id);
    EraseIfZero(open_bids_by_customer_, customer);
    EraseIfZero(active_leases_by_customer_, customer);  // PlaceBid's limit check made one
    bids_.erase(it);
  }
  for (LeaseId id : changes.leases) {
    auto it = leases_.find(id);
    if (it == leases_.end() || it->second.status == LeaseStatus::kActive) continue;
    const Lease& lease = it->second;
    EraseId(leases_by_customer_, lease.customer_id, id);
    EraseId(leases_by_provider_, lease.provider_id, id);
    EraseIfZero(active_leases_by_customer_, lease.customer_id);
    leases_.erase(it);
  }
  for (OrderId id : changes.asks) {
    auto it = asks_.find(id);
    if (it == asks_.end() || it->second.status == AskStatus::kOpen) continue;
    EraseId(asks_by_provider_, it->second.provider_id, id);
    asks_.erase(it);
  }
  for (PayoutId id : changes.payouts) {
    auto it = payouts_.find(id);
    if (it == payouts_.end() || it->second.status == PayoutStatus::kPending) continue;
    EraseId(payouts_by_provider_, it->second.provider_id, id);
    EraseIfZero(pending_payouts_by_provider_, it->second.provider_id);
    payouts_.erase(it);
  }
}

Result<Exchange> Exchange::Restore(ExchangeConfig config, Snapshot snapshot) {
  GPUHUB_RETURN_IF_ERROR(ValidateExchangeConfig(config));
  Exchange x(std::move(config));
  auto bad = [](const std::string& what) {
    return Status::Internal("stored market data is inconsistent: " + what);
  };
  auto market_of = [&](const std::string& gpu) -> Result<int> {
    if (GpuKey(gpu).empty()) return bad("a record without a GPU model");
    auto it = x.market_by_key_.find(GpuKey(gpu));
    if (it != x.market_by_key_.end()) return it->second;
    if (x.markets_.size() >= kMaxMarkets) return bad("too many markets");
    return x.AddMarket(gpu, /*listed=*/false);
  };

  std::sort(snapshot.machines.begin(), snapshot.machines.end(),
            [](const Machine& a, const Machine& b) { return a.id < b.id; });
  for (auto& m : snapshot.machines) {
    if (m.id <= 0 || m.provider_id <= 0 || m.gpus < 1 || m.gpus > kMaxGpusPerMachine ||
        (m.blocked_mask >> m.gpus) != 0 || m.offline_since < 0 ||
        m.hold_reason.size() > kMaxHoldReasonBytes) {
      return bad("machine " + std::to_string(m.id));
    }
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(m.gpu));
    auto region = CanonicalRegion(m.region);
    if (!region.ok()) return bad("machine " + std::to_string(m.id) + " region");
    MachineState state;
    state.machine = m;
    state.machine.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    state.market = market;
    state.region = x.InternRegion(*region);
    if (!x.machines_.emplace(m.id, state).second) return bad("machine id twice");
    x.machines_by_provider_[m.provider_id].push_back(m.id);
    x.next_machine_id_ = std::max(x.next_machine_id_, m.id + 1);
  }

  std::sort(snapshot.leases.begin(), snapshot.leases.end(),
            [](const Lease& a, const Lease& b) { return a.id < b.id; });
  for (auto& l : snapshot.leases) {
    auto mit = x.machines_.find(l.machine_id);
    if (l.id <= 0 || mit == x.machines_.end()) return bad("lease " + std::to_string(l.id));
    MachineState& machine = mit->second;
    if (l.provider_id != machine.machine.provider_id || l.gpus < 1 ||
        std::popcount(l.gpu_mask) != l.gpus || (l.gpu_mask >> machine.machine.gpus) != 0 ||
        l.hours_paid < (l.start_deadline != 0 ? 0 : 1) || l.price_micros <= 0 || l.fee_ppm < 0 ||
        l.fee_ppm > kMaxFeePpm || l.credited_micros < 0 || l.credited_provider_micros < 0 ||
        l.credited_provider_micros > l.credited_micros || l.hold_micros < 0 ||
        (l.hold_micros > 0) != (l.start_deadline != 0) ||
        (l.paused_at != 0 &&
         (l.status != LeaseStatus::kActive || l.hours_paid == 0 ||
          (machine.machine.offline_since == 0 && !l.workload_down)))) {
      return bad("lease " + std::to_string(l.id));
    }
    l.gpu = machine.machine.gpu;
    if (l.status == LeaseStatus::kActive) {
      if ((machine.leased_mask & l.gpu_mask) != 0) {
        return bad("a GPU of machine " + std::to_string(machine.machine.id) +
                   " is in two active leases");
      }
      if ((machine.machine.offline_since != 0 || l.workload_down) && l.paused_at == 0 &&
          l.hours_paid > 0) {
        return bad("lease " + std::to_string(l.id) + " is billed while its machine is offline "
                   "or its workload is down");
      }
      machine.leased_mask |= l.gpu_mask;
      machine.active_leases.insert(l.id);
      ++x.markets_[static_cast<std::size_t>(machine.market)].active_leases;
      ++x.active_leases_;
      ++x.active_leases_by_customer_[l.customer_id];
      ++x.totals_[l.provider_id].active_leases;
      if (l.hours_paid == 0) {
        x.timeline_.insert({l.start_deadline, kLeaseStart, l.id});
      } else if (l.paused_at == 0) {
        x.timeline_.insert({l.PaidUntil(), kLeaseHour, l.id});
      }
    }
    x.leases_by_customer_[l.customer_id].insert(l.id);
    x.leases_by_provider_[l.provider_id].insert(l.id);
    x.next_lease_id_ = std::max(x.next_lease_id_, l.id + 1);
    x.leases_.emplace(l.id, l);
  }

  std::sort(snapshot.asks.begin(), snapshot.asks.end(),
            [](const Ask& a, const Ask& b) { return a.id < b.id; });
  for (auto& a : snapshot.asks) {
    auto mit = x.machines_.find(a.machine_id);
    if (a.id <= 0 || mit == x.machines_.end() || mit->second.machine.provider_id != a.provider_id ||
        !ValidatePriceMicros(a.price_micros, "price").ok() || a.min_gpus < 1 ||
        a.min_gpus > mit->second.machine.gpus) {
      return bad("ask " + std::to_string(a.id));
    }
    a.gpu = mit->second.machine.gpu;
    if (a.status == AskStatus::kOpen) {
      if (mit->second.open_ask != 0) return bad("two open asks on one machine");
      mit->second.open_ask = a.id;
      x.timeline_.insert({AskUntil(a), kAskExpiry, a.id});
    }
    x.asks_by_provider_[a.provider_id].insert(a.id);
    x.next_order_id_ = std::max(x.next_order_id_, a.id + 1);
    if (!x.asks_.emplace(a.id, a).second) return bad("order id twice");
  }
  for (const auto& [id, machine] : x.machines_) x.SyncAsk(machine);

  std::sort(snapshot.bids.begin(), snapshot.bids.end(),
            [](const Bid& a, const Bid& b) { return a.id < b.id; });
  for (auto& b : snapshot.bids) {
    if (b.id <= 0 || b.customer_id <= 0 || b.gpus < 1 || b.gpus > kMaxGpusPerMachine ||
        x.asks_.count(b.id)) {
      return bad("bid " + std::to_string(b.id));
    }
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(b.gpu));
    BidState state;
    state.bid = b;
    state.bid.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    state.market = market;
    if (!b.region.empty()) {
      auto region = CanonicalRegion(b.region);
      if (!region.ok()) return bad("bid " + std::to_string(b.id) + " region");
      state.region = x.InternRegion(*region);
    }
    if (b.status == BidStatus::kResting) {
      if (b.is_market || !ValidatePriceMicros(b.limit_micros, "limit").ok() || b.hold_micros <= 0) {
        return bad("resting bid " + std::to_string(b.id));
      }
      x.markets_[static_cast<std::size_t>(market)].book.AddBid(
          {b.id, ToTicks(b.limit_micros), b.gpus, state.region,
           b.expires_at == 0 ? kNever : b.expires_at, x.InternOwner(b.customer_id)});
      if (b.expires_at != 0) x.timeline_.insert({b.expires_at, kBidExpiry, b.id});
      ++x.open_bids_by_customer_[b.customer_id];
    }
    x.bids_by_customer_[b.customer_id].insert(b.id);
    x.next_order_id_ = std::max(x.next_order_id_, b.id + 1);
    if (!x.bids_.emplace(b.id, std::move(state)).second) return bad("bid id twice");
  }

  std::sort(snapshot.trades.begin(), snapshot.trades.end(),
            [](const Trade& a, const Trade& b) { return a.id < b.id; });
  for (auto& t : snapshot.trades) {
    if (t.id <= 0) return bad("trade id");
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(t.gpu));
    t.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    x.RecordTrade(market, t);
    x.next_trade_id_ = std::max(x.next_trade_id_, t.id + 1);
  }

  std::sort(snapshot.payouts.begin(), snapshot.payouts.end(),
            [](const Payout& a, const Payout& b) { return a.id < b.id; });
  for (auto& p : snapshot.payouts) {
    if (p.id <= 0 || p.provider_id <= 0 || p.amount_micros <= 0) return bad("payout");
    if (p.status == PayoutStatus::kPending) {
      x.totals_[p.provider_id].pending_payout_micros += p.amount_micros;
      ++x.pending_payouts_by_provider_[p.provider_id];
      x.pending_payouts_.insert(p.id);
    }
    x.payouts_by_provider_[p.provider_id].insert(p.id);
    x.next_payout_id_ = std::max(x.next_payout_id_, p.id + 1);
    if (!x.payouts_.emplace(p.id, p).second) return bad("payout id twice");
  }
  // History: the totals as kept, not recomputed from whichever closed records were given.
  for (const auto& h : snapshot.providers) {
    if (h.provider_id <= 0 || h.gross_micros < 0 || h.fee_micros < 0 || h.gpu_hours < 0 ||
        h.lease_hours < 0 || h.credited_micros < 0 || h.paid_out_micros < 0) {
      return bad("history totals of provider " + std::to_string(h.provider_id));
    }
    ProviderTotals& t = x.totals_[h.provider_id];
    if (t.gross_micros != 0 || t.lease_hours != 0 || t.paid_out_micros != 0) {
      return bad("history totals of provider " + std::to_string(h.provider_id) + " twice");
    }
    t.gross_micros = h.gross_micros;
    t.fee_micros = h.fee_micros;
    t.gpu_hours = h.gpu_hours;
    t.lease_hours = h.lease_hours;
    t.credited_micros = h.credited_micros;
    t.paid_out_micros = h.paid_out_micros;
  }
  const LastIds& last = snapshot.last_ids;
  if (last.machine < 0 || last.order < 0 || last.lease < 0 || last.trade < 0 || last.payout < 0) {
    return bad("last ids");
  }
  x.next_machine_id_ = std::max(x.next_machine_id_, last.machine + 1);
  x.next_order_id_ = std::max(x.next_order_id_, last.order + 1);
  x.next_lease_id_ = std::max(x.next_lease_id_, last.lease + 1);
  x.next_trade_id_ = std::max(x.next_trade_id_, last.trade + 1);
  x.next_payout_id_ = std::max(x.next_payout_id_, last.payout + 1);
  // Checks that need the ledger (holds, hours) run in CheckInvariants / CheckSettlement.
  return x;
}

Snapshot Exchange::Records() const {
  Snapshot s;
  for (const auto& [id, m] : machines_) s.machines.push_back(m.machine);
  for (const auto& [id, a] : asks_) s.asks.push_back(a);
  for (const auto& [id, b] : bids_) s.bids.push_back(b.bid);
  for (const auto& [id, l] : leases_) s.leases.push_back(l);
  for (const auto& m : markets_) s.trades.insert(s.trades.end(), m.recent.begin(), m.recent.end());
  for (const auto& [id, p] : payouts_) s.payouts.push_back(p);
  std::sort(s.asks.begin(), s.asks.end(), [](const Ask& a, const Ask& b) { return a.id < b.id; });
  std::sort(s.bids.begin(), s.bids.end(), [](const Bid& a, const Bid& b) { return a.id < b.id; });
  std::sort(s.trades.begin(), s.trades.end(),
            [](const Trade& a, const Trade& b) { return a.id < b.id; });
  for (const auto& [provider, t] : totals_) {
    ProviderHistory h = History(provider);
    if (h != ProviderHistory{.provider_id = provider}) s.providers.push_back(h);
  }
  std::sort(s.providers.begin(), s.providers.end(),
            [](const ProviderHistory& a, const ProviderHistory& b) {
              return a.provider_id < b.provider_id;
            });
  s.last_ids = {next_machine_id_ - 1, next_order_id_ - 1, next_lease_id_ - 1, next_trade_id_ - 1,
                next_payout_id_ - 1};
  return s;
}

}  // namespace gpuhub::market
