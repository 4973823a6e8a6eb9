// The double-entry ledger: accounts, transfers (posted, pending, post/void), atomic batches, FX.
//
// Contract
// - Pure and deterministic: no I/O, no clock (timestamps are arguments), no threads. The same
//   commands in the same order give the same state, byte for byte.
// - Not thread-safe. The engine's single writer thread calls the mutating methods; const methods
//   may run concurrently with each other, never with a mutating call.
// - Expected failures (bad input, insufficient funds, conflicts) come back as result codes or
//   Status, never as a crash. A broken invariant after money moved is a programmer error and aborts
//   (GPUHUB_CHECK): it is better to stop than to keep going with wrong books.
//
// State = the ordered list of applied transfers + the list of FX table changes. Both are handed out
// as they are applied (BatchResult::transfers, SetFxRate's FxRateChange) for the engine to persist;
// Restore() rebuilds an identical ledger from them.
//
// Memory does not grow with history: the account totals, every open pending transfer and a window
// of the newest transfers stay in memory; Forget() drops older ones (the engine calls it once they
// are durable) and a TransferArchive (the store) answers for them: FindTransfer, the history pages
// and CheckHistory read it for what memory no longer holds. RestoreWindow() starts a ledger from
// persisted totals, the open pending transfers and the newest transfers, without reading history.
// TakeChangedAccounts() hands out the totals that changed, for the engine to persist beside the
// transfers in the same commit.
// A new id is checked for duplicates against the transfers in memory only (the archive is not asked
// on the write path): every id the product builds derives from a new domain id, and the store's
// UNIQUE(id) refuses the commit of one that slipped through (the engine then reloads).
//
// Holds are pending debits (TigerBeetle's two-phase transfers), not transfers into a hold account:
// a pending transfer reserves funds in the wallet itself (held = debits_pending), posting moves
// money straight to its destination in one step and releases any rest, voiding needs no reverse
// entry, and every hold stays attributable to one wallet and one purpose. When the destination is
// not known yet (a resting bid), the hold's credit account is the system `holds` account; the fill
// then voids the hold and pays the real legs in the same atomic batch:
//   [void "bid:7:hold", wallet->provider_payable (price - fee), wallet->platform_revenue (fee)]
//
// Typical batches (all legs of one batch apply together or not at all):
//   top-up:       deposits(USD) -> customer_wallet(u, USD)
//   lease hour:   customer_wallet(u, USD) -> provider_payable(p, USD)  price - fee
//                 customer_wallet(u, USD) -> platform_revenue(USD)     fee
//   FX lease hour (EUR wallet, USD price; q = Fx().ConvertTo(kEur, kUsd, price)):
//                 customer_wallet(u, EUR) -> fx_conversion(EUR)        q.from_micros
//                 fx_conversion(USD)      -> provider_payable(p, USD)  price - fee
//                 fx_conversion(USD)      -> platform_revenue(USD)     fee
//   payout:       pending provider_payable(p, USD) -> payouts(USD); post when paid, void if refused
//
// FX is converted once, when the settlement batch is built: the amounts are fixed in the transfers
// and a replay never converts again. A retried settlement must not re-quote (the rate may have
// changed, giving other amounts and exists_with_different_fields): look its id up first
// (FindTransfer) and quote only if it is not there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "ledger/archive.h"
#include "ledger/fx.h"
#include "ledger/limits.h"
#include "ledger/types.h"

namespace gpuhub::ledger {

// failed_index value for errors about the batch as a whole.
inline constexpr std::size_t kWholeBatch = static_cast<std::size_t>(-1);

// The outcome of ApplyBatch.
//   kOk:     every transfer was applied; `transfers` are the new records in request order, with
//            consecutive sequence numbers, `state` as of the end of the batch (a pending transfer
//            posted later in the same batch reads "posted"). Persist them (in order) before
//            acknowledging; a post/void record names the pending transfer it resolved.
//   kExists: every transfer already existed with identical fields (a resubmission); nothing
//            changed; `transfers` are the stored records (current state), in request order.
//   other:   nothing changed; `failed_index` is the request that failed (kWholeBatch for
//            kBatchEmpty / kBatchTooLarge), `message` says why in words, `transfers` is empty.
struct BatchResult {
  TransferResult result = TransferResult::kOk;
  std::size_t failed_index = kWholeBatch;
  std::string message;
  std::vector<Transfer> transfers;

  bool ok() const { return result == TransferResult::kOk || result == TransferResult::kExists; }
  // Ok for kOk/kExists; otherwise TransferResultStatusCode(result) with `message`.
  Status status() const;
};

// One page of history, newest first.
struct TransferPage {
  std::vector<Transfer> transfers;
  // Pass as before_sequence to get the next (older) page; 0 when there is none.
  std::int64_t next_before_sequence = 0;
};

class Ledger {
 public:
  Ledger() = default;
  // Value type: copies are independent ledgers (tests compare a restored copy with the original).

  // ----- Commands ------------------------------------------------------------------------------

  // Applies 1..kMaxTransfersPerBatch transfers atomically, in order: a later transfer sees the
  // effects of the earlier ones (it may post a pending transfer created earlier in the batch, or
  // spend money credited earlier in the batch). Idempotent by id: see BatchResult.
  // A failed id is not remembered: resubmitting it later is evaluated afresh (after a top-up, a
  // transfer refused for insufficient funds may succeed).
  BatchResult ApplyBatch(std::span<const TransferRequest> requests);
  BatchResult Apply(const TransferRequest& request) { return ApplyBatch({&request, 1}); }

  // Sets the mid rate and spread of the pair {base, quote} (see fx.h) and returns the change to
  // persist. Errors: invalid_argument (same currency, rate or spread out of range, timestamp <= 0).
  Result<FxRateChange> SetFxRate(Currency base, Currency quote, std::int64_t mid_rate_ppb,
                                 std::int32_t spread_bps, TimestampMicros now);
  // Removes the pair's rate; conversions between them then fail with failed_precondition.
  // Errors: invalid_argument (same currency, timestamp <= 0), not_found (no rate set).
  Result<FxRateChange> RemoveFxRate(Currency base, Currency quote, TimestampMicros now);

  // A spending limit on one owner's wallets while an API key's command runs (engine/api_keys.h:
  // a key with a daily cap, or without the wallet-spend scope, whose limit is 0). While set, the
  // single-phase and pending transfers of a batch that debit customer_wallet(owner_id, *) count
  // their amounts into spent_micros; a batch that would take spent_micros past limit_micros, or
  // that debits the owner's wallet in another currency than `currency`, fails whole with
  // kInsufficientFunds and `refusal` as its message (nothing applied). Posting or voiding a
  // pending transfer counts nothing: its hold was counted when it was made. Other owners' and
  // other kinds' debits (a provider's payable) are never limited. Transient: not part of the
  // ledger's state (never persisted, never compared), cleared by the caller after the command.
  struct SpendGuard {
    std::int64_t owner_id = 0;
    Currency currency = Currency::kUsd;
    std::int64_t limit_micros = 0;
    std::int64_t spent_micros = 0;
    std::string refusal;
  };
  void SetSpendGuard(std::optional<SpendGuard> guard) { spend_guard_ = std::move(guard); }
  const std::optional<SpendGuard>& spend_guard() const { return spend_guard_; }

  // ----- Queries -------------------------------------------------------------------------------

  // The account's totals; all zeros for a valid key never used. invalid_argument for a bad key.
  Result<AccountBalance> GetAccount(const AccountKey& key) const;
  // The user's wallets in USD, EUR, GBP (kAllCurrencies order), zeros where never used.
  // invalid_argument unless user_id > 0.
  Result<std::array<AccountBalance, kCurrencyCount>> Wallets(std::int64_t user_id) const;
  // not_found when no transfer has this id (in memory or, when set, in the archive); the archive's
  // errors as they are.
  Result<Transfer> FindTransfer(std::string_view id) const;
  // Transfers whose debit or credit is `key` (including post/void of its pending transfers), newest
  // first, with sequence < before_sequence (0 = start from the newest). limit: 1..
  // kMaxTransfersPageSize. invalid_argument for a bad key, cursor (< 0) or limit. Pages past the
  // window in memory come from the archive (without one they end there).
  Result<TransferPage> ListAccountTransfers(const AccountKey& key, std::int64_t before_sequence,
                                            std::size_t limit) const;
  // The same over every account owned by owner_id (> 0): wallets and payables in all currencies;
  // a transfer between two accounts of the owner appears once.
  Result<TransferPage> ListOwnerTransfers(std::int64_t owner_id, std::int64_t before_sequence,
                                          std::size_t limit) const;

  const FxTable& Fx() const { return fx_; }
  // Sequence of the newest transfer (0 when empty).
  std::int64_t LastSequence() const {
    return first_sequence_ - 1 + static_cast<std::int64_t>(transfers_.size());
  }
  // Sequence of the oldest transfer in the window (1 while nothing was forgotten).
  std::int64_t FirstSequence() const { return first_sequence_; }
  // The transfers in memory, in sequence order (transfers[i].sequence == FirstSequence() + i); all
  // of them while nothing was forgotten. Invalidated by any command.
  std::span<const Transfer> Transfers() const { return transfers_; }
  // Every transfer ever applied, in sequence order: the archive's (before FirstSequence()), then
  // the window's. failed_precondition when history was forgotten and no archive is set.
  Status ForEachTransfer(const std::function<Status(const Transfer&)>& fn) const;
  // Every account ever touched, ordered by key (the trial balance).
  std::vector<AccountBalance> Accounts() const;

  // ----- Persistence ---------------------------------------------------------------------------

  // Rebuilds a ledger from what it handed out: every applied transfer in sequence order (1..n,
  // records as returned by ApplyBatch; `state` is recomputed from the post/void records, so a row
  // persisted as "pending" and never updated is fine) and every FX change in version order.
  // Business rules (balances, idempotency) are not re-checked transfer by transfer - they were
  // checked when the transfers were first applied - but every record must be well-formed and
  // consistent (contiguous sequences, unique ids, post/void referencing an earlier, still-pending
  // transfer, amounts in range) and CheckInvariants() and CheckHistory() must pass at the end.
  // Any violation is `internal` (the store holds something this ledger never produced).
  static Result<Ledger> Restore(std::vector<Transfer> transfers,
                                std::span<const FxRateChange> fx_changes);

  // What RestoreWindow starts from: the persisted state as of last_sequence.
  struct RestorePoint {
    std::int64_t last_sequence = 0;
    // The sequence `accounts` are the totals as of (the engine persists them every few thousand
    // transfers, not in every commit): -1 means last_sequence. Older: the transfers of `recent`
    // after it are replayed onto them, so it must not be older than the window (>= the first
    // recent sequence - 1); holds those transfers resolve that are older than the window are read
    // from the archive.
    std::int64_t accounts_through = -1;
    std::vector<AccountBalance> accounts;  // every account's totals (any order)
    std::vector<Transfer> open_pending;    // every pending transfer not yet posted or voided
    std::vector<Transfer> recent;          // the newest transfers, contiguous, up to last_sequence
    std::vector<FxRateChange> fx_changes;  // in version order
  };
  // A ledger from persisted totals instead of a replay of history. Checked: account keys valid and
  // unique, `recent` contiguous and ending at last_sequence with well-formed records and unique
  // ids, every open pending transfer pending and not resolved by a recent transfer, every pending
  // transfer in `recent` either resolved there or listed as open, and CheckInvariants() (pending
  // totals equal the open pending transfers, debits equal credits per currency). Any violation is
  // `internal`. States of `recent` records are recomputed, not trusted. `archive` may be null.
  static Result<Ledger> RestoreWindow(RestorePoint point, const TransferArchive* archive);

  // The archive that answers for forgotten transfers (not owned; must outlive the ledger's use).
  void set_archive(const TransferArchive* archive) { archive_ = archive; }
  // Drops all but the newest `keep` transfers from memory (open pending ones stay, resolved pending
  // ones kept from earlier calls go). Only for transfers the archive holds: the engine calls it
  // after the commit that made them durable. Returns how many left the window.
  std::size_t Forget(std::size_t keep);
  // The totals of every account changed since the last call, in no particular order, and forgets
  // that they changed (a failed batch may leave an unchanged account in the list: harmless).
  std::vector<AccountBalance> TakeChangedAccounts();
  // Lists every account for the next TakeChangedAccounts (a rebuilt ledger whose totals must all
  // be persisted again).
  void MarkAllAccountsChanged() {
    for (std::size_t i = 0; i < accounts_.size(); ++i) MarkChanged(i);
  }

  // ----- Invariants ----------------------------------------------------------------------------

  // Cheap enough to run after every command in tests (O(accounts + open pending transfers)):
  // per currency, total debits == total credits (posted and pending separately); no wallet or
  // payable negative and their holds within their credits (debits_posted + debits_pending <=
  // credits_posted); each account's pending totals equal the sum of its open pending transfers;
  // ids unique (one id per transfer).
  Status CheckInvariants() const;
  // Thorough, O(transfers): replays the whole history (the archive's, then the window's) into fresh
  // totals and compares them with the live accounts, and checks sequences, the id index, post/void
  // links, the states in memory and the per-account histories of the window. Memory: O(accounts +
  // open pending transfers), whatever the length of history. failed_precondition when history was
  // forgotten and no archive is set.
  Status CheckHistory() const;

 private:
  struct AccountState {
    AccountBalance balance;
    std::vector<std::int64_t> history;  // sequences in the window touching the account, ascending
    bool changed = false;               // listed in changed_ since the last TakeChangedAccounts
  };
  // What a batch changed, so that a failure midway can put everything back.
  struct UndoLog {
    std::size_t transfers_before = 0;
    std::size_t accounts_before = 0;
    std::vector<std::pair<std::size_t, AccountBalance>> balances;  // before each change
    std::vector<std::size_t> history_appends;         // account index per history push_back
    std::vector<std::int64_t> owner_history_appends;  // owner id per owner-history push_back
    std::vector<std::int64_t> resolved_pending;       // sequences of pendings resolved in the batch
    void Reset(std::size_t transfers, std::size_t accounts) {
      transfers_before = transfers;
      accounts_before = accounts;
      balances.clear();
      history_appends.clear();
      owner_history_appends.clear();
      resolved_pending.clear();
    }
  };

  TransferResult Validate(const TransferRequest& request, std::string* message) const;
  TransferResult CheckExisting(const TransferRequest& request, const Transfer& existing,
                               std::string* message) const;
  TransferResult ApplyOne(const TransferRequest& request, std::string* message);
  // Moves the money of a checked record (pending_sequence: the transfer a post/void resolves) and
  // appends it; records what it changed in `undo` when given.
  void Commit(Transfer record, std::int64_t pending_sequence, UndoLog* undo);
  // The transfer in memory with this sequence (window or pinned); it must be there.
  Transfer& At(std::int64_t sequence);
  const Transfer& At(std::int64_t sequence) const;
  void MarkChanged(std::size_t account);
  void Rollback();
  void CheckBatchBalances() const;  // GPUHUB_CHECKs on the accounts the batch touched
  std::size_t AccountIndex(const AccountKey& key, UndoLog* undo);
  const AccountState* FindAccount(const AccountKey& key) const;
  Status ReplayTransfer(Transfer transfer);
  static Result<Ledger> RestoreFromCheckpoint(RestorePoint point, const TransferArchive* archive);
  // A page from the window's `history`, continued from the archive (`older`) past the window.
  Result<TransferPage> Page(const std::vector<std::int64_t>& history, std::int64_t before_sequence,
                            std::size_t limit,
                            const std::function<Result<std::vector<Transfer>>(
                                std::int64_t before, std::size_t limit)>& older) const;

  std::vector<Transfer> transfers_;  // the window: sequence = first_sequence_ + index
  std::int64_t first_sequence_ = 1;
  // Open pending transfers older than the window (and ones resolved since the last Forget).
  std::map<std::int64_t, Transfer> pinned_;
  std::unordered_map<std::string, std::int64_t> transfer_index_;  // id -> sequence (in memory)
  std::vector<AccountState> accounts_;
  std::unordered_map<AccountKey, std::size_t, AccountKeyHash> account_index_;
  std::unordered_map<std::int64_t, std::vector<std::int64_t>> owner_history_;  // window only
  // Sequences of pending transfers not yet posted or voided.
  std::unordered_set<std::int64_t> open_pending_;
  std::vector<std::size_t> changed_;  // accounts changed since TakeChangedAccounts
  const TransferArchive* archive_ = nullptr;
  FxTable fx_;
  UndoLog undo_;  // scratch of the batch being applied; kept to reuse its capacity
  std::optional<SpendGuard> spend_guard_;
};

}  // namespace gpuhub::ledger
