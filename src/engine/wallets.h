// Wallets: the double-entry ledger inside the engine, top-up invoices paid through the payment
// processor, admin manual credits, FX rates and customer conversions.
//
// Money moves only through ledger batches (ledger/ledger.h); every transfer a batch applies is
// written to `ledger_transfers` in the same group commit, and LoadWallets rebuilds the ledger with
// Ledger::Restore. Transfer ids are derived from what they do, so a retry can never move money
// twice: "topup:<invoice id>", "manual:<sequence>", "fx:<sequence>:out" / ":in".
//
// All functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/money.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "ledger/ledger.h"

namespace gpuhub::engine {

enum class InvoiceStatus { kNew, kProcessing, kSettled, kExpired, kInvalid };
std::string_view InvoiceStatusName(InvoiceStatus status);  // "new", "processing", ...

struct Invoice {
  std::string id;  // "inv_" + 24 hex digits (random: the checkout URL must not be guessable)
  std::int64_t user_id = 0;
  Currency currency = Currency::kUsd;
  std::int64_t amount_micros = 0;
  InvoiceStatus status = InvoiceStatus::kNew;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  std::string transfer_id;  // set once settled
};

struct WalletsState {
  ledger::Ledger ledger;
  std::map<std::string, Invoice> invoices;
  std::map<std::int64_t, std::vector<std::string>> invoices_by_user;  // oldest first
  // Invoices still open (new or processing), for expiry and the per-user limit.
  std::set<std::pair<TimestampMicros, std::string>> open_by_age;
  std::map<std::int64_t, std::size_t> open_per_user;
};

// The amounts of a top-up request ("100.00"): 1.00 .. 100,000.00 with at most 2 decimals.
Result<std::int64_t> ParseTopupAmount(std::string_view text);

Result<Invoice> CreateTopup(Txn& txn, std::int64_t user_id, Currency currency,
                            std::int64_t amount_micros);
// not_found unless the invoice exists AND belongs to user_id (never tells others' invoices apart
// from missing ones).
Result<Invoice> GetTopup(const Txn& txn, std::int64_t user_id, const std::string& invoice_id);
std::vector<Invoice> ListTopups(const Txn& txn, std::int64_t user_id, std::size_t limit);

struct PaymentEventOutcome {
  Invoice invoice;
  bool credited = false;  // this delivery moved money (false for a redelivery)
  bool ignored = false;   // an event type that changes nothing
};
// A processor event for an invoice: "InvoiceSettled" credits the wallet exactly once;
// "InvoiceProcessing"/"InvoiceReceivedPayment" mark it processing; "InvoiceExpired" and
// "InvoiceInvalid" close it unless it is settled; others are ignored. not_found for an unknown
// invoice.
Result<PaymentEventOutcome> ApplyPaymentEvent(Txn& txn, const std::string& type,
                                              const std::string& invoice_id);

// An admin's credit (a bank transfer): deposits -> the user's wallet, with the reason as memo.
Result<ledger::Transfer> ManualCredit(Txn& txn, std::int64_t admin_id, std::int64_t user_id,
                                      Currency currency, std::int64_t amount_micros,
                                      const std::string& reason);

struct Conversion {
  ledger::FxQuote quote;
  std::vector<ledger::Transfer> transfers;
};
// The customer pays amount_micros of `from` and receives the converted amount in `to` (rate and
// spread of the FX table, rounded half-even once).
Result<Conversion> Convert(Txn& txn, std::int64_t user_id, Currency from, Currency to,
                           std::int64_t amount_micros);

Result<ledger::FxRateChange> SetFxRate(Txn& txn, Currency base, Currency quote,
                                       std::int64_t mid_rate_ppb, std::int32_t spread_bps);
// failed_precondition while the spot exchange still converts through the rate (running leases or
// resting bids paying from wallets of the pair's non-USD currency; market::Exchange::RemoveFxRate).
Result<ledger::FxRateChange> RemoveFxRate(Txn& txn, Currency base, Currency quote);

// Queues the rows of applied ledger transfers (ledger_transfers), in order. Every domain that moves
// money writes its transfers with this, in the same group commit as its own rows.
void WriteTransfers(Txn& txn, const std::vector<ledger::Transfer>& transfers);

// Tick hooks of this domain (expires invoices nobody paid).
void AddWalletTickHooks(Engine& engine);
// --demo: FX rates (EUR/USD 1.08, GBP/USD 1.27, EUR/GBP 0.85, spread 0.5%) when none are set.
Status SeedDemoData(Engine& engine);

}  // namespace gpuhub::engine
