// Wallets: the double-entry ledger inside the engine, admin manual credits, FX rates and customer
// conversions. Top-up invoices are in engine/topups.h.
//
// Money moves only through ledger batches (ledger/ledger.h); every transfer a batch applies is
// written to `ledger_transfers` in the same group commit (a post/void also rewrites the state of the
// pending transfer it resolves). The totals of the accounts changed since the last checkpoint are
// written every kLedgerAccountsCheckpointTransfers transfers (`ledger_accounts`, with engine_meta
// kLedgerAccountsThrough = the last sequence they include), not in every commit: at 256 clients
// they were over a quarter of all rows written. LoadWallets starts the ledger from those totals,
// the open holds and the newest transfers, replaying the transfers after the checkpoint onto the
// totals (Ledger::RestoreWindow); after each commit the ledger forgets what is beyond its window, and
// StoreTransferArchive reads it back when asked for (engine/ledger_archive.h). Memory and start-up
// therefore do not grow with history. Transfer ids are derived from what they do, so a retry can never move money
// twice: "topup:<invoice id>", "manual:<sequence>", "fx:<sequence>:out" / ":in".
//
// All functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/money.h"
#include "engine/engine.h"
#include "engine/ledger_archive.h"
#include "engine/state.h"
#include "engine/topups.h"
#include "ledger/ledger.h"

namespace gpuhub::engine {

struct WalletsState {
  ledger::Ledger ledger;
  std::unique_ptr<StoreTransferArchive> archive;  // the ledger's (null in a state never loaded)
  // Rows to rewrite with the next commit: pending transfers whose stored state a full rebuild
  // found stale (LoadWallets' fallback).
  std::vector<ledger::Transfer> stale_rows;
  // The sequence the stored ledger_accounts include, and how many transfers may follow it before
  // the next checkpoint writes the totals again (at most half the window LoadWallets reads, so
  // that a start-up always finds the transfers to replay in it).
  std::int64_t accounts_persisted_through = 0;
  std::int64_t accounts_checkpoint_every = 1;
  bool accounts_checkpoint_due = false;  // a rebuilt ledger: persist every account at once
};

// engine_meta: the last transfer sequence the persisted ledger_accounts include (no row: none).
inline constexpr const char* kLedgerAccountsThrough = "ledger_accounts_through";

// Before a commit: queues the stale rows, and at a checkpoint (accounts_checkpoint_every transfers
// since the last one, or due) the totals of every account changed since the last checkpoint with
// the marker, so that they commit with the transfers up to the marker.
void PersistChangedAccounts(State& state, store::WriteBatch& writes);
// After a successful commit: trims the ledger's window back to `keep` once it has grown by a fifth.
void ForgetDurableTransfers(State& state, std::size_t keep);

// An admin's credit (a bank transfer): deposits -> the user's wallet, with the reason as memo.
Result<ledger::Transfer> ManualCredit(Txn& txn, std::int64_t admin_id, std::int64_t user_id,
                                      Currency currency, std::int64_t amount_micros,
                                      const std::string& reason);

struct Conversion {
  ledger::FxQuote quote;
  std::vector<ledger::Transfer> transfers;
};
// The customer pays amount_micros of `from` and receives the converted amount in `to` (rate and
// spread of the FX table, rounded down once: ledger/fx.h).
Result<Conversion> Convert(Txn& txn, std::int64_t user_id, Currency from, Currency to,
                           std::int64_t amount_micros);

// What an operator sets: the rate must pass ledger::CheckFxRateUpdate (a sane range, at most 25%
// from the current rate per update; invalid_argument naming "rate").
Result<ledger::FxRateChange> SetFxRate(Txn& txn, Currency base, Currency quote,
                                       std::int64_t mid_rate_ppb, std::int32_t spread_bps);
// failed_precondition while the spot exchange still converts through the rate (running leases or
// resting bids paying from wallets of the pair's non-USD currency; market::Exchange::RemoveFxRate).
Result<ledger::FxRateChange> RemoveFxRate(Txn& txn, Currency base, Currency quote);

// Queues the rows of applied ledger transfers (ledger_transfers), in order. Every domain that moves
// money writes its transfers with this, in the same group commit as its own rows.
void WriteTransfers(Txn& txn, const std::vector<ledger::Transfer>& transfers);

// --demo: FX rates (EUR/USD 1.08, GBP/USD 1.27, EUR/GBP 0.85, spread 0.5%) when none are set.
Status SeedDemoData(Engine& engine);

}  // namespace gpuhub::engine
