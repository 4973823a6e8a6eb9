// The ledger's vocabulary: accounts, transfers and result codes.
//
// Model (after TigerBeetle): every movement of money is a Transfer that debits one account and
// credits another account of the same currency by the same amount. Accounts never hold a "balance"
// field; they hold four running totals (debits/credits, posted/pending) from which balances derive.
// Amounts are int64 micro-units (1e-6) of the account's currency.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuhub::ledger {

// ---------------------------------------------------------------------------------------------
// Accounts

// What an account is for. Per-user kinds have owner_id > 0 (the user's id); system kinds have
// owner_id == 0. Names (AccountKindName) are stable: they are stored and shown in JSON.
enum class AccountKind : std::uint8_t {
  // Per user. A customer's prepaid balance, credit-normal; may never go below zero
  // (debits_posted + debits_pending <= credits_posted).
  kCustomerWallet = 0,
  // Per user. What the platform owes a provider, credit-normal; may never go below zero, so a
  // provider can never be paid out more than was earned.
  kProviderPayable = 1,
  // System. Money received from the payment processor or the bank: debited by top-ups and manual
  // credits (debit-normal; its debit balance is the cash the platform holds for users).
  kDeposits = 2,
  // System. The platform's fees, credit-normal.
  kPlatformRevenue = 3,
  // System. The FX position, one per currency: a conversion debits a customer in currency A into
  // fx_conversion(A) and pays out of fx_conversion(B) in currency B. The spread accumulates here.
  kFxConversion = 4,
  // System. Money paid out to providers: credited when a payout (provider_payable -> payouts) is
  // requested as a pending transfer and posted once an admin marks it paid.
  kPayouts = 5,
  // System. Counterparty of holds whose final destination is not known yet (a resting bid holds one
  // hour of its limit price before it knows which provider will fill it). See "Holds" below.
  kHolds = 6,
  // System. Tax collected on behalf of tax authorities (rate by billing country, default 0).
  kTaxPayable = 7,
};
inline constexpr int kAccountKindCount = 8;

// "customer_wallet", "provider_payable", "deposits", "platform_revenue", "fx_conversion",
// "payouts", "holds", "tax_payable".
std::string_view AccountKindName(AccountKind kind);
Result<AccountKind> ParseAccountKind(std::string_view name);
// True for customer_wallet and provider_payable.
bool IsPerUserKind(AccountKind kind);
// True for the kinds whose debits (posted + pending) may never exceed their posted credits:
// customer_wallet and provider_payable.
bool DebitsMustNotExceedCredits(AccountKind kind);

// An account is identified by what it is, whose it is and its currency. Accounts exist implicitly:
// the first transfer touching a key creates it; a key never touched reads as all zeros.
struct AccountKey {
  AccountKind kind = AccountKind::kCustomerWallet;
  std::int64_t owner_id = 0;  // > 0 for per-user kinds, 0 for system kinds
  Currency currency = Currency::kUsd;

  static AccountKey Wallet(std::int64_t user_id, Currency c) {
    return {AccountKind::kCustomerWallet, user_id, c};
  }
  static AccountKey Payable(std::int64_t user_id, Currency c) {
    return {AccountKind::kProviderPayable, user_id, c};
  }
  static AccountKey System(AccountKind kind, Currency c) { return {kind, 0, c}; }

  friend auto operator<=>(const AccountKey&, const AccountKey&) = default;
};

// invalid_argument unless kind and currency are known values and owner_id fits the kind.
Status ValidateAccountKey(const AccountKey& key);
// "customer_wallet:42:USD", "deposits:USD".
std::string AccountKeyName(const AccountKey& key);

struct AccountKeyHash {
  std::size_t operator()(const AccountKey& k) const noexcept;
};

// The four running totals of an account (all >= 0, and debits_posted + debits_pending and
// credits_posted + credits_pending each fit in int64: the ledger refuses transfers that would
// overflow them).
struct AccountBalance {
  AccountKey key;
  std::int64_t debits_posted = 0;
  std::int64_t credits_posted = 0;
  std::int64_t debits_pending = 0;
  std::int64_t credits_pending = 0;

  // Credit-normal view (wallets, payables, revenue): what may still be spent.
  // available = credits_posted - debits_posted - debits_pending; never < 0 for the kinds of
  // DebitsMustNotExceedCredits. Negative for a debit-normal account such as deposits.
  std::int64_t available() const { return credits_posted - (debits_posted + debits_pending); }
  // Money reserved by pending debits (holds).
  std::int64_t held() const { return debits_pending; }
  // Posted balance, credit-normal: credits_posted - debits_posted.
  std::int64_t posted() const { return credits_posted - debits_posted; }

  friend bool operator==(const AccountBalance&, const AccountBalance&) = default;
};

// ---------------------------------------------------------------------------------------------
// Transfers

// What a transfer does. Names (TransferKindName) are stable: "single_phase", "pending",
// "post_pending", "void_pending".
enum class TransferKind : std::uint8_t {
  // Moves `amount` from debit to credit now (posted).
  kSinglePhase = 0,
  // Reserves `amount`: adds it to debits_pending of the debit account and credits_pending of the
  // credit account. Nothing is spendable by the credit side until it is posted. This is a hold.
  kPending = 1,
  // Resolves a pending transfer (pending_id) by posting `amount` (1..the pending amount) from its
  // debit account to its credit account; the rest of the hold is released.
  kPostPending = 2,
  // Resolves a pending transfer (pending_id) by releasing all of it; nothing moves.
  kVoidPending = 3,
};
std::string_view TransferKindName(TransferKind kind);
Result<TransferKind> ParseTransferKind(std::string_view name);

// State of a stored transfer: single_phase and post_pending transfers are "posted", void_pending
// ones "voided"; a pending transfer is "pending" until a later post_pending/void_pending resolves
// it, then "posted" or "voided" (exactly once).
enum class TransferState : std::uint8_t { kPending = 0, kPosted = 1, kVoided = 2 };
std::string_view TransferStateName(TransferState state);  // "pending", "posted", "voided"
Result<TransferState> ParseTransferState(std::string_view name);

// What a caller asks the ledger to do. Field rules by kind:
//
//   field       single_phase / pending          post_pending                 void_pending
//   id          required (limits.h charset)     required                     required
//   debit       required                        optional: must match         optional: must match
//   credit      required, != debit, same ccy    optional: must match         optional: must match
//   amount      1..kMaxTransferAmountMicros     1..pending amount (exact:    0 or the pending
//                                               the amount that is posted)   amount
//   pending_id  must be empty                   required, != id              required, != id
//   code        required                        required                     required
//   memo        optional                        optional                     optional
//   timestamp   > 0                             > 0                          > 0
//
// Posting never means "the full amount" implicitly: a computed amount of 0 is an error, not a
// silent full charge. To release everything, void.
struct TransferRequest {
  std::string id;
  TransferKind kind = TransferKind::kSinglePhase;
  std::optional<AccountKey> debit;
  std::optional<AccountKey> credit;
  std::int64_t amount_micros = 0;
  std::string pending_id;
  std::string code;
  std::string memo;
  // When the ledger applies it (the engine's clock). Not compared on resubmission: a retry made
  // later is still the same transfer. The ledger orders by sequence, never by timestamp, so a
  // clock that steps back does not matter.
  TimestampMicros timestamp = 0;
};

// A transfer as the ledger stores it: immutable except `state` of a pending transfer.
// For post/void, debit and credit are the pending transfer's accounts; amount is what was posted
// (post_pending) or released (void_pending, == the pending amount).
struct Transfer {
  std::int64_t sequence = 0;  // 1, 2, 3, ... in the order transfers were applied; never reused
  std::string id;
  TransferKind kind = TransferKind::kSinglePhase;
  AccountKey debit;
  AccountKey credit;
  std::int64_t amount_micros = 0;
  std::string pending_id;  // post_pending / void_pending only
  std::string code;
  std::string memo;
  TimestampMicros timestamp = 0;
  TransferState state = TransferState::kPosted;

  Currency currency() const { return debit.currency; }
  friend bool operator==(const Transfer&, const Transfer&) = default;
};

// ---------------------------------------------------------------------------------------------
// Result codes

// Every outcome of applying a transfer or a batch. Exhaustive: each refusal has its own code, so a
// caller can switch on it. Within a transfer, checks run in the order listed (the first that
// applies is reported). TransferResultStatusCode maps each to a Status code.
enum class TransferResult : std::uint8_t {
  kOk = 0,  // applied
  kExists,  // every transfer of the batch already exists with identical fields; nothing applied

  // Batch shape (invalid_argument).
  kBatchEmpty,
  kBatchTooLarge,  // more than kMaxTransfersPerBatch

  // Stateless checks of one request (invalid_argument).
  kIdMustNotBeEmpty,
  kIdTooLong,
  kIdHasInvalidCharacters,
  kIdDuplicatedInBatch,
  kKindInvalid,
  kCodeMustNotBeEmpty,
  kCodeTooLong,
  kCodeHasInvalidCharacters,
  kMemoTooLong,
  kMemoHasInvalidCharacters,  // control characters or invalid UTF-8
  kTimestampMustBePositive,
  kDebitAccountRequired,
  kCreditAccountRequired,
  kDebitAccountInvalid,  // unknown kind/currency, or owner_id does not fit the kind
  kCreditAccountInvalid,
  kAccountsMustBeDifferent,
  kAccountsMustHaveSameCurrency,
  kAmountMustBePositive,      // single_phase, pending, post_pending
  kAmountMustNotBeNegative,   // void_pending
  kAmountExceedsMaximum,      // > kMaxTransferAmountMicros
  kPendingIdMustBeEmpty,      // single_phase, pending
  kPendingIdMustNotBeEmpty,   // post_pending, void_pending
  kPendingIdInvalid,          // too long or invalid characters
  kPendingIdMustBeDifferent,  // pending_id == id

  // Idempotency (conflict). The timestamp is never compared.
  kExistsWithDifferentFields,
  kBatchMixesExistingAndNewIds,  // some ids exist, others do not: not a resubmission of one batch

  // Post/void against the pending transfer.
  kPendingTransferNotFound,    // not_found
  kPendingTransferNotPending,  // it is not a pending-kind transfer (failed_precondition)
  kPendingTransferHasDifferentDebitAccount,   // invalid_argument
  kPendingTransferHasDifferentCreditAccount,  // invalid_argument
  kPendingTransferHasDifferentAmount,         // void amount neither 0 nor the pending amount
  kExceedsPendingTransferAmount,              // post amount > pending amount (invalid_argument)
  kPendingTransferAlreadyPosted,              // failed_precondition
  kPendingTransferAlreadyVoided,              // failed_precondition

  // Balances.
  kOverflowsDebits,   // debits_posted + debits_pending would not fit in int64 (failed_precondition)
  kOverflowsCredits,  // credits_posted + credits_pending would not fit in int64
  kInsufficientFunds,  // the debit account's debits would exceed its credits (insufficient_funds)
};

// "ok", "exists", "insufficient_funds", ... (snake_case of the enumerator).
std::string_view TransferResultName(TransferResult result);
// ok/exists -> kOk; see the enum for the rest.
StatusCode TransferResultStatusCode(TransferResult result);

}  // namespace gpuhub::ledger
