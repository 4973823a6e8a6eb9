#include "engine/market.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "engine/accounts.h"
#include "engine/agent_watch.h"
#include "engine/alerts.h"
#include "engine/agents.h"
#include "engine/billing.h"
#include "engine/market_rows.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using market::Changes;

market::Exchange& X(Txn& txn) { return txn.state.market->exchange; }
ledger::Ledger& L(Txn& txn) { return txn.state.wallets->ledger; }

std::string Code(Currency c) { return std::string(CurrencyCode(c)); }

// Queues the rows of everything a command changed: parents before children (machines, asks, bids,
// leases, trades), and the ledger transfers first of all, in the order they were applied. Then the
// records that closed leave memory: their final rows are in this batch (a failed commit reloads
// the state from the store, so nothing is lost when it does not commit).
// `first_new_order`: the first order id the command could have made. A bid made by an earlier
// command has its row already (this batch or a committed one), and what changes on a bid after it
// is made is its outcome: only those columns are written, so the row's owner index is not touched
// (a cancel on the durable-orders path, issue 15).
void Write(Txn& txn, Changes& changes, market::OrderId first_new_order) {
  changes.Normalize();
  market::Exchange& x = X(txn);
  WriteTransfers(txn, changes.transfers);
  RecordSpotHours(txn, changes.hours);
  // The best ask of a market moves with its asks, its machines' condition and its leases (GPUs
  // taken or back): alerts watching it look again after the command (alerts.h).
  for (auto id : changes.machines) {
    const market::Machine& m = *x.FindMachine(id);
    NoteMarketChanged(txn.state, m.gpu);
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
                                          {"hold_reason", m.hold_reason},
                                          {"port_range_first", std::int64_t{m.port_range_first}},
                                          {"port_range_last", std::int64_t{m.port_range_last}}});
  }
  for (auto id : changes.asks) {
    const market::Ask& a = *x.FindAsk(id);
    NoteMarketChanged(txn.state, a.gpu);
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
    if (id < first_new_order) {
      txn.writes.Update(
          "market_bids",
          {{"id", b.id},
           {"status", std::string(market::BidStatusName(b.status))},
           {"close_reason", std::string(market::BidCloseReasonName(b.close_reason))},
           {"closed_at_us", b.closed_at},
           {"lease_id", b.lease_id},
           {"hold_micros", b.hold_micros}});
      continue;
    }
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
    NoteMarketChanged(txn.state, l.gpu);
    NoteMachineDesiredChanged(txn.state, l.machine_id);  // its host's long-poll (agent_watch.h)
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
                       {"credited_provider_micros", l.credited_provider_micros},
                       {"start_deadline_us", l.start_deadline},
                       {"hold_micros", l.hold_micros},
                       {"workload_down", std::int64_t{l.workload_down ? 1 : 0}}});
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
  for (auto id : changes.providers) {
    const market::ProviderHistory h = x.History(id);
    txn.writes.Upsert("market_provider_totals", {{"provider_id", h.provider_id},
                                                 {"gross_micros", h.gross_micros},
                                                 {"fee_micros", h.fee_micros},
                                                 {"gpu_hours", h.gpu_hours},
                                                 {"lease_hours", h.lease_hours},
                                                 {"credited_micros", h.credited_micros},
                                                 {"paid_out_micros", h.paid_out_micros}});
  }
  x.Forget(changes);
}

// Runs an exchange command and queues its rows when it succeeds.
template <typename T, typename Fn>
Result<T> Run(Txn& txn, Fn&& fn) {
  Changes changes;
  const market::OrderId first_new_order = X(txn).next_order_id();
  Result<T> result = fn(changes);
  if (result.ok()) Write(txn, changes, first_new_order);
  return result;
}

}  // namespace

Result<market::Machine> AddMachine(Txn& txn, std::int64_t provider,
                                   const market::MachineSpec& spec) {
  GPUHUB_ASSIGN_OR_RETURN(market::Machine machine,
                          Run<market::Machine>(txn, [&](Changes& c) {
                            return X(txn).AddMachine(provider, spec, txn.now, &c);
                          }));
  GPUHUB_RETURN_IF_ERROR(HoldUnhostedMachine(txn, machine.id));
  return *X(txn).FindMachine(machine.id);
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

Result<market::Lease> ReportLeaseWorkload(Txn& txn, market::LeaseId lease, bool running) {
  return Run<market::Lease>(txn, [&](Changes& c) {
    return X(txn).ReportLeaseWorkload(lease, running, L(txn), txn.now, &c);
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
  const market::OrderId first_new_order = X(txn).next_order_id();
  X(txn).AdvanceTo(L(txn), txn.now, &changes);
  Write(txn, changes, first_new_order);
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

namespace {

using store::Condition;

// Calls `fn` for every row of `table` with `status` (start-up reads the open rows only, however
// long the history: OpenRowsSelect).
template <typename Fn>
Status ForEachWithStatus(store::Store& store, const char* table,
                         const std::vector<std::string>& columns, std::string status, Fn&& fn) {
  return store.Query(OpenRowsSelect(table, columns, std::move(status)), fn);
}

// The highest id of `table` (0 when empty): new ids continue after closed records too.
Result<std::int64_t> MaxId(store::Store& store, const char* table) {
  store::Select select;
  select.table = table;
  select.columns = {"max(id)"};
  std::int64_t max = 0;
  GPUHUB_RETURN_IF_ERROR(store.Query(select, [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(max, row.Int(0));
    return Status::Ok();
  }));
  return max;
}

}  // namespace

Status LoadMarket(store::Store& store, const market::ExchangeConfig& config,
                  const ledger::Ledger& ledger, MarketState& state) {
  market::Snapshot s;
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("market_machines", MachineColumns(), "id", [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(auto m, MachineFromRow(row));
        s.machines.push_back(std::move(m));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(
      ForEachWithStatus(store, "market_asks", AskColumns(),
                        std::string(market::AskStatusName(market::AskStatus::kOpen)),
                        [&](const store::Row& row) -> Status {
                          GPUHUB_ASSIGN_OR_RETURN(auto a, AskFromRow(row));
                          s.asks.push_back(std::move(a));
                          return Status::Ok();
                        }));
  GPUHUB_RETURN_IF_ERROR(
      ForEachWithStatus(store, "market_bids", BidColumns(),
                        std::string(market::BidStatusName(market::BidStatus::kResting)),
                        [&](const store::Row& row) -> Status {
                          GPUHUB_ASSIGN_OR_RETURN(auto b, BidFromRow(row));
                          s.bids.push_back(std::move(b));
                          return Status::Ok();
                        }));
  // Paused leases are active ones (paused_at != 0).
  GPUHUB_RETURN_IF_ERROR(
      ForEachWithStatus(store, "market_leases", LeaseColumns(),
                        std::string(market::LeaseStatusName(market::LeaseStatus::kActive)),
                        [&](const store::Row& row) -> Status {
                          GPUHUB_ASSIGN_OR_RETURN(auto l, LeaseFromRow(row));
                          s.leases.push_back(std::move(l));
                          return Status::Ok();
                        }));
  GPUHUB_RETURN_IF_ERROR(
      ForEachWithStatus(store, "market_payouts", PayoutColumns(),
                        std::string(market::PayoutStatusName(market::PayoutStatus::kPending)),
                        [&](const store::Row& row) -> Status {
                          GPUHUB_ASSIGN_OR_RETURN(auto p, PayoutFromRow(row));
                          s.payouts.push_back(std::move(p));
                          return Status::Ok();
                        }));
  // The newest trades of each market (market data); every trade was on a listed machine, so the
  // machines name every market that has any.
  std::set<std::string> markets;
  for (const auto& m : s.machines) markets.insert(m.gpu);
  for (const auto& gpu : markets) {
    store::Select select;
    select.table = "market_trades";
    select.columns = TradeColumns();
    select.where = {{"gpu", Condition::Op::kEq, gpu}};
    select.order_by = "id DESC";
    select.limit = market::kRecentTradesPerMarket;
    GPUHUB_RETURN_IF_ERROR(store.Query(select, [&](const store::Row& row) -> Status {
      GPUHUB_ASSIGN_OR_RETURN(auto t, TradeFromRow(row));
      s.trades.push_back(std::move(t));
      return Status::Ok();
    }));
  }
  GPUHUB_RETURN_IF_ERROR(store.Scan("market_provider_totals",
                                    {"provider_id", "gross_micros", "fee_micros", "gpu_hours",
                                     "lease_hours", "credited_micros", "paid_out_micros"},
                                    "provider_id", [&](const store::Row& row) -> Status {
                                      market::ProviderHistory h;
                                      GPUHUB_ASSIGN_OR_RETURN(h.provider_id, row.Int(0));
                                      GPUHUB_ASSIGN_OR_RETURN(h.gross_micros, row.Int(1));
                                      GPUHUB_ASSIGN_OR_RETURN(h.fee_micros, row.Int(2));
                                      GPUHUB_ASSIGN_OR_RETURN(h.gpu_hours, row.Int(3));
                                      GPUHUB_ASSIGN_OR_RETURN(h.lease_hours, row.Int(4));
                                      GPUHUB_ASSIGN_OR_RETURN(h.credited_micros, row.Int(5));
                                      GPUHUB_ASSIGN_OR_RETURN(h.paid_out_micros, row.Int(6));
                                      s.providers.push_back(h);
                                      return Status::Ok();
                                    }));
  market::LastIds& last = s.last_ids;
  GPUHUB_ASSIGN_OR_RETURN(last.machine, MaxId(store, "market_machines"));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t last_ask, MaxId(store, "market_asks"));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t last_bid, MaxId(store, "market_bids"));
  last.order = std::max(last_ask, last_bid);  // one sequence
  GPUHUB_ASSIGN_OR_RETURN(last.lease, MaxId(store, "market_leases"));
  GPUHUB_ASSIGN_OR_RETURN(last.trade, MaxId(store, "market_trades"));
  GPUHUB_ASSIGN_OR_RETURN(last.payout, MaxId(store, "market_payouts"));
  GPUHUB_ASSIGN_OR_RETURN(state.exchange, market::Exchange::Restore(config, std::move(s)));
  return state.exchange.CheckInvariants(ledger);
}

}  // namespace gpuhub::engine
