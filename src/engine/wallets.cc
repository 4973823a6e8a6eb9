#include "engine/wallets.h"

#include <spdlog/spdlog.h>

#include <span>

#include "engine/limits.h"
#include "engine/market.h"

namespace gpuhub::engine {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferKind;
using ledger::TransferRequest;

void WriteFxChange(Txn& txn, const ledger::FxRateChange& c) {
  txn.writes.Insert("fx_rate_changes", {{"version", c.version},
                                        {"base", std::string(CurrencyCode(c.base))},
                                        {"quote", std::string(CurrencyCode(c.quote))},
                                        {"mid_rate_ppb", c.mid_rate_ppb},
                                        {"spread_bps", std::int64_t{c.spread_bps}},
                                        {"timestamp_us", c.timestamp}});
}

// Applies a batch and queues its new transfers for the commit.
Result<std::vector<ledger::Transfer>> ApplyAndWrite(Txn& txn,
                                                    const std::vector<TransferRequest>& batch) {
  ledger::BatchResult result = txn.state.wallets->ledger.ApplyBatch(batch);
  if (!result.ok()) return result.status();
  if (result.result == ledger::TransferResult::kOk) WriteTransfers(txn, result.transfers);
  return result.transfers;
}

}  // namespace

void WriteTransfers(Txn& txn, const std::vector<ledger::Transfer>& transfers) {
  const ledger::Ledger& ledger = txn.state.wallets->ledger;
  for (const auto& t : transfers) {
    WriteTransferRow(txn.writes, t, false);
    if (t.kind == ledger::TransferKind::kPostPending ||
        t.kind == ledger::TransferKind::kVoidPending) {
      // The pending transfer's row says how it ended: start-up reads only the open ones. Its
      // state alone: the row's other columns, and the indexes on them, do not change.
      auto pending = ledger.FindTransfer(t.pending_id);
      GPUHUB_CHECK_MSG(pending.ok(), "a resolved pending transfer is in memory");
      WriteTransferState(txn.writes, *pending);
    }
  }
}

void PersistChangedAccounts(State& state, store::WriteBatch& writes) {
  WalletsState& w = *state.wallets;
  for (const ledger::Transfer& t : w.stale_rows) WriteTransferRow(writes, t, true);
  w.stale_rows.clear();
  const std::int64_t last = w.ledger.LastSequence();
  if (!w.accounts_checkpoint_due &&
      last - w.accounts_persisted_through < w.accounts_checkpoint_every) {
    return;
  }
  for (const ledger::AccountBalance& a : w.ledger.TakeChangedAccounts()) WriteAccountRow(writes, a);
  writes.Upsert("engine_meta", {{"name", std::string(kLedgerAccountsThrough)}, {"value", last}});
  // A failed commit reloads the state from the store, and with it these two.
  w.accounts_persisted_through = last;
  w.accounts_checkpoint_due = false;
}

void ForgetDurableTransfers(State& state, std::size_t keep) {
  ledger::Ledger& ledger = state.wallets->ledger;
  if (ledger.Transfers().size() > keep + keep / 5) ledger.Forget(keep);
}

Result<ledger::Transfer> ManualCredit(Txn& txn, std::int64_t admin_id, std::int64_t user_id,
                                      Currency currency, std::int64_t amount_micros,
                                      const std::string& reason) {
  WalletsState& w = *txn.state.wallets;
  if (amount_micros <= 0 || amount_micros > kMaxManualCreditMicros) {
    return Status::InvalidArgument("a manual credit must be between 0.000001 and " +
                                   FormatMicros(kMaxManualCreditMicros));
  }
  TransferRequest credit;
  credit.id = "manual:" + std::to_string(w.ledger.LastSequence() + 1);
  credit.kind = TransferKind::kSinglePhase;
  credit.debit = AccountKey::System(AccountKind::kDeposits, currency);
  credit.credit = AccountKey::Wallet(user_id, currency);
  credit.amount_micros = amount_micros;
  credit.code = "manual_credit";
  credit.memo = reason;
  credit.timestamp = txn.now;
  GPUHUB_ASSIGN_OR_RETURN(auto transfers, ApplyAndWrite(txn, {credit}));
  txn.writes.Insert("manual_credits", {{"transfer_id", credit.id},
                                       {"admin_user_id", admin_id},
                                       {"user_id", user_id},
                                       {"reason", reason},
                                       {"created_at_us", txn.now}});
  return transfers.front();
}

Result<Conversion> Convert(Txn& txn, std::int64_t user_id, Currency from, Currency to,
                           std::int64_t amount_micros) {
  WalletsState& w = *txn.state.wallets;
  if (from == to) return Status::InvalidArgument("'from' and 'to' must be different currencies");
  if (amount_micros < kMinConversionMicros) {
    return Status::InvalidArgument("the smallest conversion is " +
                                   FormatMicros(kMinConversionMicros, 2));
  }
  GPUHUB_ASSIGN_OR_RETURN(ledger::FxQuote quote,
                          w.ledger.Fx().ConvertFrom(from, to, amount_micros));
  std::string id = "fx:" + std::to_string(w.ledger.LastSequence() + 1);
  std::string memo = "convert " + FormatMicros(quote.from_micros) + " " +
                     std::string(CurrencyCode(from)) + " to " + FormatMicros(quote.to_micros) +
                     " " + std::string(CurrencyCode(to));
  TransferRequest out;
  out.id = id + ":out";
  out.debit = AccountKey::Wallet(user_id, from);
  out.credit = AccountKey::System(AccountKind::kFxConversion, from);
  out.amount_micros = quote.from_micros;
  out.code = "fx";
  out.memo = memo;
  out.timestamp = txn.now;
  TransferRequest in = out;
  in.id = id + ":in";
  in.debit = AccountKey::System(AccountKind::kFxConversion, to);
  in.credit = AccountKey::Wallet(user_id, to);
  in.amount_micros = quote.to_micros;
  GPUHUB_ASSIGN_OR_RETURN(auto transfers, ApplyAndWrite(txn, {out, in}));
  return Conversion{quote, std::move(transfers)};
}

Result<ledger::FxRateChange> SetFxRate(Txn& txn, Currency base, Currency quote,
                                       std::int64_t mid_rate_ppb, std::int32_t spread_bps) {
  GPUHUB_RETURN_IF_ERROR(
      ledger::CheckFxRateUpdate(txn.state.wallets->ledger.Fx(), base, quote, mid_rate_ppb));
  GPUHUB_ASSIGN_OR_RETURN(auto change, txn.state.wallets->ledger.SetFxRate(
                                           base, quote, mid_rate_ppb, spread_bps, txn.now));
  WriteFxChange(txn, change);
  return change;
}

Result<ledger::FxRateChange> RemoveFxRate(Txn& txn, Currency base, Currency quote) {
  // The exchange decides: a rate that running leases or resting bids will convert through stays
  // (market::Exchange::RemoveFxRate).
  GPUHUB_ASSIGN_OR_RETURN(auto change, txn.state.market->exchange.RemoveFxRate(
                                           base, quote, txn.state.wallets->ledger, txn.now));
  WriteFxChange(txn, change);
  return change;
}

Status SeedDemoData(Engine& engine) {
  return engine
      .ExecuteSync<int>([](Txn& txn) -> Result<int> {
        if (txn.state.wallets->ledger.Fx().Version() != 0) return 0;
        GPUHUB_RETURN_IF_ERROR(
            SetFxRate(txn, Currency::kEur, Currency::kUsd, 1'080'000'000, 50).status());
        GPUHUB_RETURN_IF_ERROR(
            SetFxRate(txn, Currency::kGbp, Currency::kUsd, 1'270'000'000, 50).status());
        GPUHUB_RETURN_IF_ERROR(
            SetFxRate(txn, Currency::kEur, Currency::kGbp, 850'000'000, 50).status());
        return 3;
      })
      .status();
}

namespace {

// The whole history replayed (Ledger::Restore): when the persisted totals are not in step with
// the transfers (a database written by a version without them and not migrated through 14, or
// rows added beside the engine). Every account is then persisted again with the next commit.
Result<ledger::Ledger> RebuildFromHistory(store::Store& store,
                                          std::span<const ledger::FxRateChange> fx,
                                          WalletsState& state) {
  std::vector<ledger::Transfer> transfers;
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("ledger_transfers", TransferColumns(), "sequence",
                 [&](const store::Row& row) -> Status {
                   GPUHUB_ASSIGN_OR_RETURN(ledger::Transfer t, TransferFromRow(row));
                   transfers.push_back(std::move(t));
                   return Status::Ok();
                 }));
  std::vector<ledger::Transfer> stored_states;
  for (const auto& t : transfers) {
    if (t.kind == ledger::TransferKind::kPending) stored_states.push_back(t);
  }
  GPUHUB_ASSIGN_OR_RETURN(ledger::Ledger ledger, ledger::Ledger::Restore(std::move(transfers), fx));
  for (const ledger::Transfer& stored : stored_states) {
    auto now = ledger.FindTransfer(stored.id);
    if (now.ok() && now->state != stored.state) state.stale_rows.push_back(*now);
  }
  return ledger;
}

}  // namespace

Status LoadWallets(store::Store& store, const DomainConfig& config, WalletsState& state) {
  std::vector<ledger::FxRateChange> fx;
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "fx_rate_changes", {"version", "base", "quote", "mid_rate_ppb", "spread_bps", "timestamp_us"},
      "version", [&](const store::Row& row) -> Status {
        ledger::FxRateChange c;
        GPUHUB_ASSIGN_OR_RETURN(c.version, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(c.base, row.Parsed(1, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(c.quote, row.Parsed(2, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(c.mid_rate_ppb, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(c.spread_bps, row.IntAs<std::int32_t>(4));
        GPUHUB_ASSIGN_OR_RETURN(c.timestamp, row.Int(5));
        fx.push_back(c);
        return Status::Ok();
      }));
  using store::Condition;
  // A missing row reads `missing` (a database without transfers has no marker yet).
  auto one_int = [&](store::Select select, std::int64_t missing = 0) -> Result<std::int64_t> {
    std::int64_t value = missing;
    GPUHUB_RETURN_IF_ERROR(store.Query(select, [&](const store::Row& row) -> Status {
      GPUHUB_ASSIGN_OR_RETURN(value, row.Int(0));
      return Status::Ok();
    }));
    return value;
  };
  GPUHUB_ASSIGN_OR_RETURN(
      std::int64_t last,
      one_int({"ledger_transfers", {"max(sequence)"}, {}, {}, "", 0}));
  GPUHUB_ASSIGN_OR_RETURN(
      std::int64_t through,
      one_int({"engine_meta",
               {"value"},
               {{"name", Condition::Op::kEq, std::string(kLedgerAccountsThrough)}},
               {},
               "",
               1},
              last == 0 ? 0 : -1));
  state.archive = std::make_unique<StoreTransferArchive>(store);
  const auto keep = static_cast<std::int64_t>(config.ledger_transfers_in_memory);
  state.accounts_checkpoint_every =
      std::max<std::int64_t>(1, std::min<std::int64_t>(kLedgerAccountsCheckpointTransfers, keep / 2));
  // The totals must be a checkpoint inside the window read below (the transfers after it are
  // replayed onto them); anything else (rows written beside the engine, no marker) is rebuilt.
  if (through < 0 || through > last || last - through > keep) {
    spdlog::warn("event=ledger_rebuild reason=accounts_not_in_step accounts_through={} "
                 "last_transfer={}",
                 through, last);
    GPUHUB_ASSIGN_OR_RETURN(state.ledger, RebuildFromHistory(store, fx, state));
    state.ledger.set_archive(state.archive.get());
    state.ledger.MarkAllAccountsChanged();
    state.accounts_persisted_through = last;
    state.accounts_checkpoint_due = true;
    return Status::Ok();
  }
  ledger::Ledger::RestorePoint point;
  point.last_sequence = last;
  point.accounts_through = through;
  state.accounts_persisted_through = through;
  point.fx_changes = std::move(fx);
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "ledger_accounts", AccountColumns(), "kind, owner_id, currency",
      [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(ledger::AccountBalance b, AccountFromRow(row));
        point.accounts.push_back(b);
        return Status::Ok();
      }));
  auto rows_into = [&](std::vector<ledger::Transfer>& out) {
    return [&out](const store::Row& row) -> Status {
      GPUHUB_ASSIGN_OR_RETURN(ledger::Transfer t, TransferFromRow(row));
      out.push_back(std::move(t));
      return Status::Ok();
    };
  };
  GPUHUB_RETURN_IF_ERROR(store.Query(OpenPendingTransfersSelect(), rows_into(point.open_pending)));
  GPUHUB_RETURN_IF_ERROR(store.Query(TransfersAfterSelect(last - keep), rows_into(point.recent)));
  GPUHUB_ASSIGN_OR_RETURN(state.ledger,
                          ledger::Ledger::RestoreWindow(std::move(point), state.archive.get()));
  return Status::Ok();
}

}  // namespace gpuhub::engine
