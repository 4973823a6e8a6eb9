// The exchange: reading machines, orders, leases, payouts, books, trades, offers and earnings.
#include "market/exchange.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <string_view>
#include <utility>
#include <vector>

#include "market/exchange_internal.h"

namespace gpuhub::market {

namespace {

// Newest `limit` records of an ascending id list (a vector in creation order or a set), newest
// first.
template <typename Ids, typename Id, typename Fn>
void NewestFirst(const Ids& ids, std::size_t limit, Id before, Fn&& fn) {
  // Ids ascend, so the keyset start is a binary search.
  auto end = ids.end();
  if (before > 0) {
    if constexpr (requires { ids.lower_bound(before); }) {
      end = ids.lower_bound(before);
    } else {
      end = std::lower_bound(ids.begin(), ids.end(), before);
    }
  }
  std::size_t n = 0;
  for (auto it = std::make_reverse_iterator(end); it != ids.rend() && n < limit; ++it, ++n) {
    fn(*it);
  }
}
template <typename Ids, typename Fn>
void NewestFirst(const Ids& ids, std::size_t limit, Fn&& fn) {
  NewestFirst(ids, limit, typename Ids::value_type{0}, std::forward<Fn>(fn));
}

}  // namespace

const Machine* Exchange::FindMachine(MachineId id) const {
  auto it = machines_.find(id);
  return it == machines_.end() ? nullptr : &it->second.machine;
}
const Ask* Exchange::FindAsk(OrderId id) const {
  auto it = asks_.find(id);
  return it == asks_.end() ? nullptr : &it->second;
}
const Bid* Exchange::FindBid(OrderId id) const {
  auto it = bids_.find(id);
  return it == bids_.end() ? nullptr : &it->second.bid;
}
const Lease* Exchange::FindLease(LeaseId id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : &it->second;
}
const Payout* Exchange::FindPayout(PayoutId id) const {
  auto it = payouts_.find(id);
  return it == payouts_.end() ? nullptr : &it->second;
}
int Exchange::FreeGpus(MachineId id) const {
  auto it = machines_.find(id);
  return it == machines_.end() ? 0 : it->second.Free();
}

std::vector<Lease> Exchange::ActiveLeasesOn(MachineId id) const {
  std::vector<Lease> out;
  auto it = machines_.find(id);
  if (it == machines_.end()) return out;
  for (LeaseId lease : it->second.active_leases) out.push_back(leases_.at(lease));
  return out;
}

std::vector<MachineView> Exchange::ListMachines(UserId provider, std::size_t limit) const {
  std::vector<MachineView> out;
  auto it = machines_by_provider_.find(provider);
  if (it == machines_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](MachineId id) {
    const MachineState& m = machines_.at(id);
    out.push_back({m.machine, std::popcount(m.leased_mask), m.open_ask});
  });
  return out;
}

std::vector<Ask> Exchange::ListAsks(UserId provider, std::size_t limit) const {
  std::vector<Ask> out;
  auto it = asks_by_provider_.find(provider);
  if (it == asks_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](OrderId id) { out.push_back(asks_.at(id)); });
  return out;
}

std::vector<Bid> Exchange::ListBids(UserId customer, std::size_t limit, OrderId before) const {
  std::vector<Bid> out;
  auto it = bids_by_customer_.find(customer);
  if (it == bids_by_customer_.end()) return out;
  NewestFirst(it->second, limit, before, [&](OrderId id) { out.push_back(bids_.at(id).bid); });
  return out;
}

std::vector<Lease> Exchange::ListCustomerLeases(UserId customer, std::size_t limit,
                                                LeaseId before) const {
  std::vector<Lease> out;
  auto it = leases_by_customer_.find(customer);
  if (it == leases_by_customer_.end()) return out;
  NewestFirst(it->second, limit, before, [&](LeaseId id) { out.push_back(leases_.at(id)); });
  return out;
}

std::vector<Lease> Exchange::ListProviderLeases(UserId provider, std::size_t limit,
                                                LeaseId before) const {
  std::vector<Lease> out;
  auto it = leases_by_provider_.find(provider);
  if (it == leases_by_provider_.end()) return out;
  NewestFirst(it->second, limit, before, [&](LeaseId id) { out.push_back(leases_.at(id)); });
  return out;
}

std::vector<Payout> Exchange::ListPayouts(UserId provider, std::size_t limit) const {
  std::vector<Payout> out;
  auto it = payouts_by_provider_.find(provider);
  if (it == payouts_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](PayoutId id) { out.push_back(payouts_.at(id)); });
  return out;
}

std::vector<Payout> Exchange::ListPendingPayouts(std::size_t limit) const {
  std::vector<Payout> out;
  for (PayoutId id : pending_payouts_) {
    if (out.size() >= limit) break;
    out.push_back(payouts_.at(id));
  }
  return out;
}

std::vector<OrderId> Exchange::OpenBidIds() const {
  std::vector<OrderId> ids;
  ids.reserve(bids_.size() + leases_.size());
  for (const auto& [id, state] : bids_) ids.push_back(id);
  for (const auto& [id, lease] : leases_) ids.push_back(lease.bid_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::size_t Exchange::resting_bid_count() const {
  std::size_t n = 0;
  for (const auto& m : markets_) n += m.book.bid_orders();
  return n;
}

std::size_t Exchange::open_ask_count() const {
  std::size_t n = 0;
  for (const auto& [id, m] : machines_) n += m.open_ask != 0;
  return n;
}

std::vector<MarketSummary> Exchange::Markets() const {
  std::vector<MarketSummary> out;
  for (const auto& m : markets_) {
    if (!m.listed && !m.book.HasAsks() && !m.book.HasBids() && m.active_leases == 0) continue;
    MarketSummary s;
    s.gpu = m.name;
    s.listed = m.listed;
    if (m.book.HasAsks()) s.best_ask_micros = m.book.BestAskPrice() * kPriceTickMicros;
    if (m.book.HasBids()) s.best_bid_micros = m.book.BestBidPrice() * kPriceTickMicros;
    s.gpus_on_offer = m.book.ask_gpus();
    s.gpus_bid = m.book.bid_gpus();
    s.asks = m.book.ask_orders();
    s.bids = m.book.bid_orders();
    if (!m.recent.empty()) s.last_trade = m.recent.back();
    out.push_back(std::move(s));
  }
  return out;
}

Result<BookDepth> Exchange::Book(std::string_view gpu, std::size_t max_levels) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  const MarketState& m = markets_[static_cast<std::size_t>(index)];
  BookDepth depth;
  depth.gpu = m.name;
  depth.asks = m.book.AskLevels(max_levels);
  depth.bids = m.book.BidLevels(max_levels);
  for (auto& level : depth.asks) level.price *= kPriceTickMicros;
  for (auto& level : depth.bids) level.price *= kPriceTickMicros;
  return depth;
}

Result<std::vector<Trade>> Exchange::Trades(std::string_view gpu, std::size_t limit,
                                            TradeId before) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  const MarketState& m = markets_[static_cast<std::size_t>(index)];
  std::vector<Trade> out;
  for (auto it = m.recent.rbegin(); it != m.recent.rend() && out.size() < limit; ++it) {
    if (before == 0 || it->id < before) out.push_back(*it);
  }
  return out;
}

Result<bool> Exchange::HoldsAllTrades(std::string_view gpu) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  // The list only drops a trade once it holds kRecentTradesPerMarket (a restore loads at most
  // that many), so a list that is not full is the whole history.
  return markets_[static_cast<std::size_t>(index)].recent.size() < kRecentTradesPerMarket;
}

Result<std::optional<std::int64_t>> Exchange::BestAsk(std::string_view gpu) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  const OrderBook& book = markets_[static_cast<std::size_t>(index)].book;
  if (!book.HasAsks()) return std::optional<std::int64_t>();
  return std::optional<std::int64_t>(book.BestAskPrice() * kPriceTickMicros);
}

Result<std::vector<Offer>> Exchange::Offers(std::string_view gpu, TimestampMicros now) const {
  std::vector<int> markets;
  if (gpu.empty()) {
    for (std::size_t i = 0; i < markets_.size(); ++i) markets.push_back(static_cast<int>(i));
  } else {
    GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
    markets.push_back(index);
  }
  std::vector<Offer> out;
  for (int index : markets) {
    markets_[static_cast<std::size_t>(index)].book.ForEachAsk([&](Ticks, OrderId id) {
      const Ask& ask = asks_.at(id);
      if (now >= AskUntil(ask)) return;
      const MachineState& m = machines_.at(ask.machine_id);
      out.push_back({ask.id, m.machine.id, m.machine.gpu, m.machine.region, m.Free(), ask.min_gpus,
                     ask.price_micros, ask.available_until, m.machine.vcpus, m.machine.ram_gb,
                     m.machine.disk_gb});
    });
  }
  std::stable_sort(out.begin(), out.end(), [](const Offer& a, const Offer& b) {
    if (a.price_micros != b.price_micros) return a.price_micros < b.price_micros;
    return a.ask_id < b.ask_id;
  });
  return out;
}

Earnings Exchange::ProviderEarnings(UserId provider, const ledger::Ledger& ledger) const {
  Earnings e;
  auto it = totals_.find(provider);
  if (it != totals_.end()) {
    const ProviderTotals& t = it->second;
    e.gross_micros = t.gross_micros;
    e.fee_micros = t.fee_micros;
    e.net_micros = t.gross_micros - t.fee_micros;
    e.gpu_hours = t.gpu_hours;
    e.lease_hours = t.lease_hours;
    e.active_leases = t.active_leases;
    e.pending_payout_micros = t.pending_payout_micros;
    e.paid_out_micros = t.paid_out_micros;
    e.credited_micros = t.credited_micros;
    e.net_micros -= t.credited_micros;
  }
  auto payable = ledger.GetAccount(AccountKey::Payable(provider, Currency::kUsd));
  if (payable.ok()) e.available_micros = payable->available();
  return e;
}

ProviderHistory Exchange::History(UserId provider) const {
  ProviderHistory h;
  h.provider_id = provider;
  auto it = totals_.find(provider);
  if (it == totals_.end()) return h;
  const ProviderTotals& t = it->second;
  h.gross_micros = t.gross_micros;
  h.fee_micros = t.fee_micros;
  h.gpu_hours = t.gpu_hours;
  h.lease_hours = t.lease_hours;
  h.credited_micros = t.credited_micros;
  h.paid_out_micros = t.paid_out_micros;
  return h;
}

std::int64_t Exchange::lease_hours_sold() const {
  std::int64_t hours = 0;
  for (const auto& [provider, t] : totals_) hours += t.lease_hours;
  return hours;
}

}  // namespace gpuhub::market
