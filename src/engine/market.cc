#include "engine/market.h"

#include <spdlog/spdlog.h>

#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using market::Changes;

market::Exchange& X(Txn& txn) { return txn.state.market->exchange; }
ledger::Ledger& L(Txn& txn) { return txn.state.wallets->ledger; }

std::string Code(Currency c) { return std::string(CurrencyCode(c)); }

// Queues the rows of everything a command changed: parents before children (machines, asks, bids,
// leases, trades), and the ledger transfers first of all, in the order they were applied.
void Write(Txn& txn, Changes& changes) {
  changes.Normalize();
  const market::Exchange& x = X(txn);
  WriteTransfers(txn, changes.transfers);
  RecordSpotHours(txn, changes.hours);
  for (auto id : changes.machines) {
    const market::Machine& m = *x.FindMachine(id);
    txn.writes.Upsert("market_machines", {{"id", m.id},
                                          {"provider_id", m.provider_id},
                                          {"gpu", m.gpu},
                                          {"gpus", std::int64_t{m.gpus}},
                                          {"region", m.region},
                                          {"vcpus", m.vcpus},
                                          {"ram_gb", m.ram_gb},
                                          {"disk_gb", m.disk_gb},
                                          {"created_at_us", m.created_at},
                                          {"offline_since_us", m.offline_since},
                                          {"blocked_mask", std::int64_t{m.blocked_mask}},
                                          {"hold_reason", m.hold_reason}});
  }
  for (auto id : changes.asks) {
    const market::Ask& a = *x.FindAsk(id);
    txn.writes.Upsert("market_asks", {{"id", a.id},
                                      {"provider_id", a.provider_id},
                                      {"machine_id", a.machine_id},
                                      {"gpu", a.gpu},
                                      {"price_micros", a.price_micros},
                                      {"min_gpus", std::int64_t{a.min_gpus}},
                                      {"available_until_us", a.available_until},
                                      {"status", std::string(market::AskStatusName(a.status))},
                                      {"created_at_us", a.created_at},
                                      {"closed_at_us", a.closed_at}});
  }
  for (auto id : changes.bids) {
    const market::Bid& b = *x.FindBid(id);
    txn.writes.Upsert("market_bids",
                      {{"id", b.id},
                       {"customer_id", b.customer_id},
                       {"gpu", b.gpu},
                       {"gpus", std::int64_t{b.gpus}},
                       {"region", b.region},
                       {"is_market", std::int64_t{b.is_market ? 1 : 0}},
                       {"limit_micros", b.limit_micros},
                       {"time_in_force", std::string(market::TimeInForceName(b.time_in_force))},
                       {"expires_at_us", b.expires_at},
                       {"currency", Code(b.currency)},
                       {"status", std::string(market::BidStatusName(b.status))},
                       {"close_reason", std::string(market::BidCloseReasonName(b.close_reason))},
                       {"created_at_us", b.created_at},
                       {"closed_at_us", b.closed_at},
                       {"lease_id", b.lease_id},
                       {"hold_micros", b.hold_micros}});
  }
  for (auto id : changes.leases) {
    const market::Lease& l = *x.FindLease(id);
    txn.writes.Upsert("market_leases",
                      {{"id", l.id},
                       {"bid_id", l.bid_id},
                       {"ask_id", l.ask_id},
                       {"machine_id", l.machine_id},
                       {"provider_id", l.provider_id},
                       {"customer_id", l.customer_id},
                       {"gpu", l.gpu},
                       {"gpus", std::int64_t{l.gpus}},
                       {"gpu_mask", std::int64_t{l.gpu_mask}},
                       {"price_micros", l.price_micros},
                       {"fee_ppm", l.fee_ppm},
                       {"currency", Code(l.currency)},
                       {"started_at_us", l.started_at},
                       {"window_until_us", l.window_until},
                       {"hours_paid", l.hours_paid},
                       {"status", std::string(market::LeaseStatusName(l.status))},
                       {"ended_at_us", l.ended_at},
                       {"end_reason", std::string(market::LeaseEndReasonName(l.end_reason))},
                       {"paused_at_us", l.paused_at},
                       {"shift_us", l.shift_micros},
                       {"credited_micros", l.credited_micros},
                       {"credited_provider_micros", l.credited_provider_micros}});
  }
  for (const auto& t : changes.trades) {
    txn.writes.Insert("market_trades", {{"id", t.id},
                                        {"gpu", t.gpu},
                                        {"price_micros", t.price_micros},
                                        {"gpus", std::int64_t{t.gpus}},
                                        {"lease_id", t.lease_id},
                                        {"bid_id", t.bid_id},
                                        {"ask_id", t.ask_id},
                                        {"maker", std::string(market::SideName(t.maker))},
                                        {"created_at_us", t.created_at}});
  }
  for (auto id : changes.payouts) {
    const market::Payout& p = *x.FindPayout(id);
    txn.writes.Upsert("market_payouts",
                      {{"id", p.id},
                       {"provider_id", p.provider_id},
                       {"amount_micros", p.amount_micros},
                       {"status", std::string(market::PayoutStatusName(p.status))},
                       {"created_at_us", p.created_at},
                       {"updated_at_us", p.updated_at},
                       {"admin_id", p.admin_id}});
  }
}

// Runs an exchange command and queues its rows when it succeeds.
template <typename T, typename Fn>
Result<T> Run(Txn& txn, Fn&& fn) {
  Changes changes;
  Result<T> result = fn(changes);
  if (result.ok()) Write(txn, changes);
  return result;
}

}  // namespace

Result<market::Machine> AddMachine(Txn& txn, std::int64_t provider,
                                   const market::MachineSpec& spec) {
  return Run<market::Machine>(
      txn, [&](Changes& c) { return X(txn).AddMachine(provider, spec, txn.now, &c); });
}

Result<market::Ask> PlaceAsk(Txn& txn, std::int64_t provider, const market::AskSpec& spec) {
  return Run<market::Ask>(
      txn, [&](Changes& c) { return X(txn).PlaceAsk(provider, spec, L(txn), txn.now, &c); });
}

Result<market::Ask> CancelAsk(Txn& txn, std::int64_t provider, market::OrderId ask) {
  return Run<market::Ask>(txn,
                          [&](Changes& c) { return X(txn).CancelAsk(provider, ask, txn.now, &c); });
}

Result<market::BidResult> PlaceBid(Txn& txn, std::int64_t customer, const market::BidSpec& spec) {
  GPUHUB_RETURN_IF_ERROR(CheckCanPurchase(txn.state, customer));
  return Run<market::BidResult>(
      txn, [&](Changes& c) { return X(txn).PlaceBid(customer, spec, L(txn), txn.now, &c); });
}

Result<market::Bid> CancelBid(Txn& txn, std::int64_t customer, market::OrderId bid) {
  return Run<market::Bid>(
      txn, [&](Changes& c) { return X(txn).CancelBid(customer, bid, L(txn), txn.now, &c); });
}

Result<market::Machine> SetMachineCondition(Txn& txn, market::MachineId machine,
                                            const market::MachineCondition& condition) {
  return Run<market::Machine>(txn, [&](Changes& c) {
    return X(txn).SetMachineCondition(machine, condition, L(txn), txn.now, &c);
  });
}

Result<market::Lease> StopLease(Txn& txn, std::int64_t customer, market::LeaseId lease) {
  return Run<market::Lease>(
      txn, [&](Changes& c) { return X(txn).StopLease(customer, lease, L(txn), txn.now, &c); });
}

Result<market::Payout> RequestPayout(Txn& txn, std::int64_t provider, std::int64_t amount_micros) {
  return Run<market::Payout>(txn, [&](Changes& c) {
    return X(txn).RequestPayout(provider, amount_micros, L(txn), txn.now, &c);
  });
}

Result<market::Payout> ResolvePayout(Txn& txn, std::int64_t admin, market::PayoutId payout,
                                     bool paid) {
  return Run<market::Payout>(txn, [&](Changes& c) {
    return X(txn).ResolvePayout(admin, payout, paid, L(txn), txn.now, &c);
  });
}

Status AdvanceMarket(Txn& txn) {
  if (X(txn).NextEventAt() > txn.now) return Status::Ok();
  Changes changes;
  X(txn).AdvanceTo(L(txn), txn.now, &changes);
  Write(txn, changes);
  return Status::Ok();
}

void AddMarketTickHooks(Engine& engine) { engine.AddTickHook(AdvanceMarket); }

Status SeedDemoMarket(Engine& engine, const std::vector<DemoOffer>& offers,
                      const std::vector<std::string>& regions) {
  return engine
      .ExecuteSync<int>([&](Txn& txn) -> Result<int> {
        int placed = 0;
        std::size_t i = 0;
        for (const auto& offer : offers) {
          std::string key = market::GpuKey(offer.gpu);
          std::string name = ("demo-" + key).substr(0, 32);
          const User* user = FindUserByName(txn.state, name);
          std::int64_t provider = 0;
          if (user == nullptr) {
            // "!" is no Argon2 hash: nobody can log in as a demo provider.
            GPUHUB_ASSIGN_OR_RETURN(User created, CreateUser(txn, name, "!", kRoleProvider));
            provider = created.id;
            market::MachineSpec spec;
            spec.gpu = offer.gpu;
            spec.gpus = 8;
            spec.region = regions.empty() ? "IAD-1" : regions[i % regions.size()];
            spec.vcpus = 128;
            spec.ram_gb = 2048;
            spec.disk_gb = 16'000;
            GPUHUB_RETURN_IF_ERROR(AddMachine(txn, provider, spec).status());
          } else {
            provider = user->id;
          }
          ++i;
          // Every demo machine without an open ask gets one at the opening price (a restart after
          // an ask expired puts it back; a running one is left alone).
          for (const auto& view : X(txn).ListMachines(provider, 16)) {
            if (view.open_ask != 0) continue;
            market::AskSpec ask{view.machine.id, offer.price_micros, 1,
                                txn.now + 365 * kMicrosPerDay};
            GPUHUB_RETURN_IF_ERROR(PlaceAsk(txn, provider, ask).status());
            ++placed;
          }
        }
        return placed;
      })
      .status();
}

// ----- Loading
// ------------------------------------------------------------------------------------

Status LoadMarket(store::Store& store, const market::ExchangeConfig& config,
                  const ledger::Ledger& ledger, MarketState& state) {
  market::Snapshot s;
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "market_machines",
      {"id", "provider_id", "gpu", "gpus", "region", "vcpus", "ram_gb", "disk_gb", "created_at_us",
       "offline_since_us", "blocked_mask", "hold_reason"},
      "id", [&](const store::Row& row) -> Status {
        market::Machine m;
        GPUHUB_ASSIGN_OR_RETURN(m.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(m.provider_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(m.gpu, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(m.gpus, row.IntAs<int>(3));
        GPUHUB_ASSIGN_OR_RETURN(m.region, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(m.vcpus, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(m.ram_gb, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(m.disk_gb, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(m.created_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(m.offline_since, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(m.blocked_mask, row.IntAs<std::uint32_t>(10));
        GPUHUB_ASSIGN_OR_RETURN(m.hold_reason, row.Text(11));
        s.machines.push_back(std::move(m));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("market_asks",
                 {"id", "provider_id", "machine_id", "gpu", "price_micros", "min_gpus",
                  "available_until_us", "status", "created_at_us", "closed_at_us"},
                 "id", [&](const store::Row& row) -> Status {
                   market::Ask a;
                   GPUHUB_ASSIGN_OR_RETURN(a.id, row.Int(0));
                   GPUHUB_ASSIGN_OR_RETURN(a.provider_id, row.Int(1));
                   GPUHUB_ASSIGN_OR_RETURN(a.machine_id, row.Int(2));
                   GPUHUB_ASSIGN_OR_RETURN(a.gpu, row.Text(3));
                   GPUHUB_ASSIGN_OR_RETURN(a.price_micros, row.Int(4));
                   GPUHUB_ASSIGN_OR_RETURN(a.min_gpus, row.IntAs<int>(5));
                   GPUHUB_ASSIGN_OR_RETURN(a.available_until, row.Int(6));
                   GPUHUB_ASSIGN_OR_RETURN(a.status, row.Parsed(7, market::ParseAskStatus));
                   GPUHUB_ASSIGN_OR_RETURN(a.created_at, row.Int(8));
                   GPUHUB_ASSIGN_OR_RETURN(a.closed_at, row.Int(9));
                   s.asks.push_back(std::move(a));
                   return Status::Ok();
                 }));
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("market_bids",
                 {"id", "customer_id", "gpu", "gpus", "region", "is_market", "limit_micros",
                  "time_in_force", "expires_at_us", "currency", "status", "close_reason",
                  "created_at_us", "closed_at_us", "lease_id", "hold_micros"},
                 "id", [&](const store::Row& row) -> Status {
                   market::Bid b;
                   GPUHUB_ASSIGN_OR_RETURN(b.id, row.Int(0));
                   GPUHUB_ASSIGN_OR_RETURN(b.customer_id, row.Int(1));
                   GPUHUB_ASSIGN_OR_RETURN(b.gpu, row.Text(2));
                   GPUHUB_ASSIGN_OR_RETURN(b.gpus, row.IntAs<int>(3));
                   GPUHUB_ASSIGN_OR_RETURN(b.region, row.Text(4));
                   GPUHUB_ASSIGN_OR_RETURN(b.is_market, row.IntAs<bool>(5));
                   GPUHUB_ASSIGN_OR_RETURN(b.limit_micros, row.Int(6));
                   GPUHUB_ASSIGN_OR_RETURN(b.time_in_force,
                                           row.Parsed(7, market::ParseTimeInForce));
                   GPUHUB_ASSIGN_OR_RETURN(b.expires_at, row.Int(8));
                   GPUHUB_ASSIGN_OR_RETURN(b.currency, row.Parsed(9, ParseCurrency));
                   GPUHUB_ASSIGN_OR_RETURN(b.status, row.Parsed(10, market::ParseBidStatus));
                   GPUHUB_ASSIGN_OR_RETURN(b.close_reason,
                                           row.Parsed(11, market::ParseBidCloseReason));
                   GPUHUB_ASSIGN_OR_RETURN(b.created_at, row.Int(12));
                   GPUHUB_ASSIGN_OR_RETURN(b.closed_at, row.Int(13));
                   GPUHUB_ASSIGN_OR_RETURN(b.lease_id, row.Int(14));
                   GPUHUB_ASSIGN_OR_RETURN(b.hold_micros, row.Int(15));
                   s.bids.push_back(std::move(b));
                   return Status::Ok();
                 }));
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("market_leases",
                 {"id", "bid_id", "ask_id", "machine_id", "provider_id", "customer_id", "gpu",
                  "gpus", "gpu_mask", "price_micros", "fee_ppm", "currency", "started_at_us",
                  "window_until_us", "hours_paid", "status", "ended_at_us", "end_reason",
                  "paused_at_us", "shift_us", "credited_micros", "credited_provider_micros"},
                 "id", [&](const store::Row& row) -> Status {
                   market::Lease l;
                   GPUHUB_ASSIGN_OR_RETURN(l.id, row.Int(0));
                   GPUHUB_ASSIGN_OR_RETURN(l.bid_id, row.Int(1));
                   GPUHUB_ASSIGN_OR_RETURN(l.ask_id, row.Int(2));
                   GPUHUB_ASSIGN_OR_RETURN(l.machine_id, row.Int(3));
                   GPUHUB_ASSIGN_OR_RETURN(l.provider_id, row.Int(4));
                   GPUHUB_ASSIGN_OR_RETURN(l.customer_id, row.Int(5));
                   GPUHUB_ASSIGN_OR_RETURN(l.gpu, row.Text(6));
                   GPUHUB_ASSIGN_OR_RETURN(l.gpus, row.IntAs<int>(7));
                   GPUHUB_ASSIGN_OR_RETURN(l.gpu_mask, row.IntAs<std::uint32_t>(8));
                   GPUHUB_ASSIGN_OR_RETURN(l.price_micros, row.Int(9));
                   GPUHUB_ASSIGN_OR_RETURN(l.fee_ppm, row.Int(10));
                   GPUHUB_ASSIGN_OR_RETURN(l.currency, row.Parsed(11, ParseCurrency));
                   GPUHUB_ASSIGN_OR_RETURN(l.started_at, row.Int(12));
                   GPUHUB_ASSIGN_OR_RETURN(l.window_until, row.Int(13));
                   GPUHUB_ASSIGN_OR_RETURN(l.hours_paid, row.Int(14));
                   GPUHUB_ASSIGN_OR_RETURN(l.status, row.Parsed(15, market::ParseLeaseStatus));
                   GPUHUB_ASSIGN_OR_RETURN(l.ended_at, row.Int(16));
                   GPUHUB_ASSIGN_OR_RETURN(l.end_reason,
                                           row.Parsed(17, market::ParseLeaseEndReason));
                   GPUHUB_ASSIGN_OR_RETURN(l.paused_at, row.Int(18));
                   GPUHUB_ASSIGN_OR_RETURN(l.shift_micros, row.Int(19));
                   GPUHUB_ASSIGN_OR_RETURN(l.credited_micros, row.Int(20));
                   GPUHUB_ASSIGN_OR_RETURN(l.credited_provider_micros, row.Int(21));
                   s.leases.push_back(std::move(l));
                   return Status::Ok();
                 }));
  GPUHUB_RETURN_IF_ERROR(store.Scan("market_trades",
                                    {"id", "gpu", "price_micros", "gpus", "lease_id", "bid_id",
                                     "ask_id", "maker", "created_at_us"},
                                    "id", [&](const store::Row& row) -> Status {
                                      market::Trade t;
                                      GPUHUB_ASSIGN_OR_RETURN(t.id, row.Int(0));
                                      GPUHUB_ASSIGN_OR_RETURN(t.gpu, row.Text(1));
                                      GPUHUB_ASSIGN_OR_RETURN(t.price_micros, row.Int(2));
                                      GPUHUB_ASSIGN_OR_RETURN(t.gpus, row.IntAs<int>(3));
                                      GPUHUB_ASSIGN_OR_RETURN(t.lease_id, row.Int(4));
                                      GPUHUB_ASSIGN_OR_RETURN(t.bid_id, row.Int(5));
                                      GPUHUB_ASSIGN_OR_RETURN(t.ask_id, row.Int(6));
                                      GPUHUB_ASSIGN_OR_RETURN(t.maker,
                                                              row.Parsed(7, market::ParseSide));
                                      GPUHUB_ASSIGN_OR_RETURN(t.created_at, row.Int(8));
                                      s.trades.push_back(std::move(t));
                                      return Status::Ok();
                                    }));
  GPUHUB_RETURN_IF_ERROR(store.Scan("market_payouts",
                                    {"id", "provider_id", "amount_micros", "status",
                                     "created_at_us", "updated_at_us", "admin_id"},
                                    "id", [&](const store::Row& row) -> Status {
                                      market::Payout p;
                                      GPUHUB_ASSIGN_OR_RETURN(p.id, row.Int(0));
                                      GPUHUB_ASSIGN_OR_RETURN(p.provider_id, row.Int(1));
                                      GPUHUB_ASSIGN_OR_RETURN(p.amount_micros, row.Int(2));
                                      GPUHUB_ASSIGN_OR_RETURN(
                                          p.status, row.Parsed(3, market::ParsePayoutStatus));
                                      GPUHUB_ASSIGN_OR_RETURN(p.created_at, row.Int(4));
                                      GPUHUB_ASSIGN_OR_RETURN(p.updated_at, row.Int(5));
                                      GPUHUB_ASSIGN_OR_RETURN(p.admin_id, row.Int(6));
                                      s.payouts.push_back(std::move(p));
                                      return Status::Ok();
                                    }));
  GPUHUB_ASSIGN_OR_RETURN(state.exchange, market::Exchange::Restore(config, std::move(s)));
  return state.exchange.CheckInvariants(ledger);
}

}  // namespace gpuhub::engine
