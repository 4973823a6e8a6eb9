#include "engine/wallets.h"

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
  for (const auto& t : transfers) {
    txn.writes.Insert("ledger_transfers",
                      {{"sequence", t.sequence},
                       {"id", t.id},
                       {"kind", std::string(ledger::TransferKindName(t.kind))},
                       {"debit_kind", std::string(ledger::AccountKindName(t.debit.kind))},
                       {"debit_owner", t.debit.owner_id},
                       {"debit_currency", std::string(CurrencyCode(t.debit.currency))},
                       {"credit_kind", std::string(ledger::AccountKindName(t.credit.kind))},
                       {"credit_owner", t.credit.owner_id},
                       {"credit_currency", std::string(CurrencyCode(t.credit.currency))},
                       {"amount_micros", t.amount_micros},
                       {"pending_id", t.pending_id},
                       {"code", t.code},
                       {"memo", t.memo},
                       {"timestamp_us", t.timestamp},
                       {"state", std::string(ledger::TransferStateName(t.state))}});
  }
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

Status LoadWallets(store::Store& store, WalletsState& state) {
  std::vector<ledger::Transfer> transfers;
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("ledger_transfers",
                 {"sequence", "id", "kind", "debit_kind", "debit_owner", "debit_currency",
                  "credit_kind", "credit_owner", "credit_currency", "amount_micros", "pending_id",
                  "code", "memo", "timestamp_us", "state"},
                 "sequence", [&](const store::Row& row) -> Status {
                   ledger::Transfer t;
                   GPUHUB_ASSIGN_OR_RETURN(t.sequence, row.Int(0));
                   GPUHUB_ASSIGN_OR_RETURN(t.id, row.Text(1));
                   GPUHUB_ASSIGN_OR_RETURN(t.kind, row.Parsed(2, ledger::ParseTransferKind));
                   GPUHUB_ASSIGN_OR_RETURN(t.debit.kind, row.Parsed(3, ledger::ParseAccountKind));
                   GPUHUB_ASSIGN_OR_RETURN(t.debit.owner_id, row.Int(4));
                   GPUHUB_ASSIGN_OR_RETURN(t.debit.currency, row.Parsed(5, ParseCurrency));
                   GPUHUB_ASSIGN_OR_RETURN(t.credit.kind, row.Parsed(6, ledger::ParseAccountKind));
                   GPUHUB_ASSIGN_OR_RETURN(t.credit.owner_id, row.Int(7));
                   GPUHUB_ASSIGN_OR_RETURN(t.credit.currency, row.Parsed(8, ParseCurrency));
                   GPUHUB_ASSIGN_OR_RETURN(t.amount_micros, row.Int(9));
                   GPUHUB_ASSIGN_OR_RETURN(t.pending_id, row.Text(10));
                   GPUHUB_ASSIGN_OR_RETURN(t.code, row.Text(11));
                   GPUHUB_ASSIGN_OR_RETURN(t.memo, row.Text(12));
                   GPUHUB_ASSIGN_OR_RETURN(t.timestamp, row.Int(13));
                   GPUHUB_ASSIGN_OR_RETURN(t.state, row.Parsed(14, ledger::ParseTransferState));
                   transfers.push_back(std::move(t));
                   return Status::Ok();
                 }));
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
  GPUHUB_ASSIGN_OR_RETURN(state.ledger, ledger::Ledger::Restore(std::move(transfers), fx));
  return Status::Ok();
}

}  // namespace gpuhub::engine
