// The spot exchange inside the engine: market::Exchange (src/market) plus the rows its commands
// change, written in the same group commit as the ledger transfers they apply.
//
// Every function taking a Txn runs on the writer thread and forwards to the exchange with the
// wallets' ledger and txn.now; on success it queues the changed records (machines, asks, bids,
// leases and payouts upserted, trades and ledger transfers inserted). The exchange validates
// before it mutates, so a failed command leaves memory untouched and its rows are dropped.
//
// Time: the tick hook (AddMarketTickHooks) runs Exchange::AdvanceTo(txn.now) every second with the
// real clock and on every manual clock advance, so lease-hours are billed and expiries happen in
// time order, each at its own timestamp (a week of manual clock is replayed hour by hour).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "market/exchange.h"

namespace gpuhub::engine {

struct MarketState {
  explicit MarketState(market::ExchangeConfig config) : exchange(std::move(config)) {}
  market::Exchange exchange;
};

// A machine without a host agent is held off the book from the start (HoldUnhostedMachine),
// unless [agents] simulated_hosts stands in for its host.
Result<market::Machine> AddMachine(Txn& txn, std::int64_t provider,
                                   const market::MachineSpec& spec);
Result<market::Ask> PlaceAsk(Txn& txn, std::int64_t provider, const market::AskSpec& spec);
Result<market::Ask> CancelAsk(Txn& txn, std::int64_t provider, market::OrderId ask);
// Needs a billing country and a wallet that is not on hold (engine/billing.h CheckCanPurchase).
Result<market::BidResult> PlaceBid(Txn& txn, std::int64_t customer, const market::BidSpec& spec);
Result<market::Bid> CancelBid(Txn& txn, std::int64_t customer, market::OrderId bid);
Result<market::Lease> StopLease(Txn& txn, std::int64_t customer, market::LeaseId lease);
// The host agent's view of a machine (engine/agents.cc): offline, held, blocked GPUs.
Result<market::Machine> SetMachineCondition(Txn& txn, market::MachineId machine,
                                            const market::MachineCondition& condition);
// What the lease's host reports of its workload (engine/agents.cc): running or not
// (market::Exchange::ReportLeaseWorkload: provisioning -> billed, down -> paused, back -> billed).
Result<market::Lease> ReportLeaseWorkload(Txn& txn, market::LeaseId lease, bool running);
Result<market::Payout> RequestPayout(Txn& txn, std::int64_t provider, std::int64_t amount_micros);
Result<market::Payout> ResolvePayout(Txn& txn, std::int64_t admin, market::PayoutId payout,
                                     bool paid);

// Time-driven work up to txn.now (billing, expiries). Never fails.
Status AdvanceMarket(Txn& txn);
void AddMarketTickHooks(Engine& engine);

// --demo: one demo provider per listed market ("demo-<gpu>", an account nobody can log in to) with
// an 8-GPU machine in each region and an ask at that market's opening price, so every page shows
// live "from" prices out of the box. Idempotent: a market whose demo provider exists is skipped.
struct DemoOffer {
  std::string gpu;
  std::int64_t price_micros = 0;  // per GPU-hour
};
Status SeedDemoMarket(Engine& engine, const std::vector<DemoOffer>& offers,
                      const std::vector<std::string>& regions);

// Loads every market table and restores the exchange (market::Exchange::Restore), then checks it
// against the ledger (holds and lease-hours must be there): stored data that disagrees is
// `internal`.
Status LoadMarket(store::Store& store, const market::ExchangeConfig& config,
                  const ledger::Ledger& ledger, MarketState& state);

}  // namespace gpuhub::engine
