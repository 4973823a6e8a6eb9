#include "ledger/types.h"

#include <string>

namespace gpuhub::ledger {

namespace {

constexpr AccountKind kAllAccountKinds[] = {
    AccountKind::kCustomerWallet,  AccountKind::kProviderPayable, AccountKind::kDeposits,
    AccountKind::kPlatformRevenue, AccountKind::kFxConversion,    AccountKind::kPayouts,
    AccountKind::kHolds,           AccountKind::kTaxPayable,
};
static_assert(std::size(kAllAccountKinds) == kAccountKindCount);

bool IsKnownKind(AccountKind kind) {
  return static_cast<int>(kind) < kAccountKindCount;  // uint8_t: never negative
}

bool IsKnownCurrency(Currency c) {
  return static_cast<int>(c) < kCurrencyCount;  // uint8_t: never negative
}

}  // namespace

std::string_view AccountKindName(AccountKind kind) {
  switch (kind) {
    case AccountKind::kCustomerWallet:
      return "customer_wallet";
    case AccountKind::kProviderPayable:
      return "provider_payable";
    case AccountKind::kDeposits:
      return "deposits";
    case AccountKind::kPlatformRevenue:
      return "platform_revenue";
    case AccountKind::kFxConversion:
      return "fx_conversion";
    case AccountKind::kPayouts:
      return "payouts";
    case AccountKind::kHolds:
      return "holds";
    case AccountKind::kTaxPayable:
      return "tax_payable";
  }
  return "unknown";
}

Result<AccountKind> ParseAccountKind(std::string_view name) {
  for (AccountKind kind : kAllAccountKinds) {
    if (AccountKindName(kind) == name) return kind;
  }
  return Status::InvalidArgument("unknown account kind '" + std::string(name.substr(0, 40)) + "'");
}

bool IsPerUserKind(AccountKind kind) {
  return kind == AccountKind::kCustomerWallet || kind == AccountKind::kProviderPayable;
}

bool DebitsMustNotExceedCredits(AccountKind kind) {
  return kind == AccountKind::kCustomerWallet || kind == AccountKind::kProviderPayable;
}

Status ValidateAccountKey(const AccountKey& key) {
  if (!IsKnownKind(key.kind)) {
    return Status::InvalidArgument("unknown account kind " +
                                   std::to_string(static_cast<int>(key.kind)));
  }
  if (!IsKnownCurrency(key.currency)) {
    return Status::InvalidArgument("unknown currency " +
                                   std::to_string(static_cast<int>(key.currency)));
  }
  if (IsPerUserKind(key.kind)) {
    if (key.owner_id <= 0) {
      return Status::InvalidArgument(std::string(AccountKindName(key.kind)) +
                                     " needs an owner id > 0, got " + std::to_string(key.owner_id));
    }
  } else if (key.owner_id != 0) {
    return Status::InvalidArgument("system account " + std::string(AccountKindName(key.kind)) +
                                   " has no owner (owner id must be 0, got " +
                                   std::to_string(key.owner_id) + ")");
  }
  return Status::Ok();
}

std::string AccountKeyName(const AccountKey& key) {
  std::string out(AccountKindName(key.kind));
  if (IsPerUserKind(key.kind) || key.owner_id != 0) {
    out += ':';
    out += std::to_string(key.owner_id);
  }
  out += ':';
  out += IsKnownCurrency(key.currency) ? std::string(CurrencyCode(key.currency)) : "???";
  return out;
}

std::size_t AccountKeyHash::operator()(const AccountKey& k) const noexcept {
  // Owner ids are dense small integers; mix them so that neighbouring users spread over buckets.
  std::uint64_t h = static_cast<std::uint64_t>(k.owner_id) * 0x9E3779B97F4A7C15ULL;
  h ^= (static_cast<std::uint64_t>(k.kind) << 8 | static_cast<std::uint64_t>(k.currency)) +
       0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2);
  return static_cast<std::size_t>(h ^ (h >> 29));
}

std::string_view TransferKindName(TransferKind kind) {
  switch (kind) {
    case TransferKind::kSinglePhase:
      return "single_phase";
    case TransferKind::kPending:
      return "pending";
    case TransferKind::kPostPending:
      return "post_pending";
    case TransferKind::kVoidPending:
      return "void_pending";
  }
  return "unknown";
}

Result<TransferKind> ParseTransferKind(std::string_view name) {
  for (TransferKind kind : {TransferKind::kSinglePhase, TransferKind::kPending,
                            TransferKind::kPostPending, TransferKind::kVoidPending}) {
    if (TransferKindName(kind) == name) return kind;
  }
  return Status::InvalidArgument("unknown transfer kind '" + std::string(name.substr(0, 40)) + "'");
}

std::string_view TransferStateName(TransferState state) {
  switch (state) {
    case TransferState::kPending:
      return "pending";
    case TransferState::kPosted:
      return "posted";
    case TransferState::kVoided:
      return "voided";
  }
  return "unknown";
}

Result<TransferState> ParseTransferState(std::string_view name) {
  for (TransferState state :
       {TransferState::kPending, TransferState::kPosted, TransferState::kVoided}) {
    if (TransferStateName(state) == name) return state;
  }
  return Status::InvalidArgument("unknown transfer state '" + std::string(name.substr(0, 40)) +
                                 "'");
}

std::string_view TransferResultName(TransferResult result) {
  switch (result) {
    case TransferResult::kOk:
      return "ok";
    case TransferResult::kExists:
      return "exists";
    case TransferResult::kBatchEmpty:
      return "batch_empty";
    case TransferResult::kBatchTooLarge:
      return "batch_too_large";
    case TransferResult::kIdMustNotBeEmpty:
      return "id_must_not_be_empty";
    case TransferResult::kIdTooLong:
      return "id_too_long";
    case TransferResult::kIdHasInvalidCharacters:
      return "id_has_invalid_characters";
    case TransferResult::kIdDuplicatedInBatch:
      return "id_duplicated_in_batch";
    case TransferResult::kKindInvalid:
      return "kind_invalid";
    case TransferResult::kCodeMustNotBeEmpty:
      return "code_must_not_be_empty";
    case TransferResult::kCodeTooLong:
      return "code_too_long";
    case TransferResult::kCodeHasInvalidCharacters:
      return "code_has_invalid_characters";
    case TransferResult::kMemoTooLong:
      return "memo_too_long";
    case TransferResult::kMemoHasInvalidCharacters:
      return "memo_has_invalid_characters";
    case TransferResult::kTimestampMustBePositive:
      return "timestamp_must_be_positive";
    case TransferResult::kDebitAccountRequired:
      return "debit_account_required";
    case TransferResult::kCreditAccountRequired:
      return "credit_account_required";
    case TransferResult::kDebitAccountInvalid:
      return "debit_account_invalid";
    case TransferResult::kCreditAccountInvalid:
      return "credit_account_invalid";
    case TransferResult::kAccountsMustBeDifferent:
      return "accounts_must_be_different";
    case TransferResult::kAccountsMustHaveSameCurrency:
      return "accounts_must_have_same_currency";
    case TransferResult::kAmountMustBePositive:
      return "amount_must_be_positive";
    case TransferResult::kAmountMustNotBeNegative:
      return "amount_must_not_be_negative";
    case TransferResult::kAmountExceedsMaximum:
      return "amount_exceeds_maximum";
    case TransferResult::kPendingIdMustBeEmpty:
      return "pending_id_must_be_empty";
    case TransferResult::kPendingIdMustNotBeEmpty:
      return "pending_id_must_not_be_empty";
    case TransferResult::kPendingIdInvalid:
      return "pending_id_invalid";
    case TransferResult::kPendingIdMustBeDifferent:
      return "pending_id_must_be_different";
    case TransferResult::kExistsWithDifferentFields:
      return "exists_with_different_fields";
    case TransferResult::kBatchMixesExistingAndNewIds:
      return "batch_mixes_existing_and_new_ids";
    case TransferResult::kPendingTransferNotFound:
      return "pending_transfer_not_found";
    case TransferResult::kPendingTransferNotPending:
      return "pending_transfer_not_pending";
    case TransferResult::kPendingTransferHasDifferentDebitAccount:
      return "pending_transfer_has_different_debit_account";
    case TransferResult::kPendingTransferHasDifferentCreditAccount:
      return "pending_transfer_has_different_credit_account";
    case TransferResult::kPendingTransferHasDifferentAmount:
      return "pending_transfer_has_different_amount";
    case TransferResult::kExceedsPendingTransferAmount:
      return "exceeds_pending_transfer_amount";
    case TransferResult::kPendingTransferAlreadyPosted:
      return "pending_transfer_already_posted";
    case TransferResult::kPendingTransferAlreadyVoided:
      return "pending_transfer_already_voided";
    case TransferResult::kInsufficientFunds:
      return "insufficient_funds";
    case TransferResult::kOverflowsDebits:
      return "overflows_debits";
    case TransferResult::kOverflowsCredits:
      return "overflows_credits";
  }
  return "unknown";
}

StatusCode TransferResultStatusCode(TransferResult result) {
  switch (result) {
    case TransferResult::kOk:
    case TransferResult::kExists:
      return StatusCode::kOk;
    case TransferResult::kBatchEmpty:
    case TransferResult::kBatchTooLarge:
    case TransferResult::kIdMustNotBeEmpty:
    case TransferResult::kIdTooLong:
    case TransferResult::kIdHasInvalidCharacters:
    case TransferResult::kIdDuplicatedInBatch:
    case TransferResult::kKindInvalid:
    case TransferResult::kCodeMustNotBeEmpty:
    case TransferResult::kCodeTooLong:
    case TransferResult::kCodeHasInvalidCharacters:
    case TransferResult::kMemoTooLong:
    case TransferResult::kMemoHasInvalidCharacters:
    case TransferResult::kTimestampMustBePositive:
    case TransferResult::kDebitAccountRequired:
    case TransferResult::kCreditAccountRequired:
    case TransferResult::kDebitAccountInvalid:
    case TransferResult::kCreditAccountInvalid:
    case TransferResult::kAccountsMustBeDifferent:
    case TransferResult::kAccountsMustHaveSameCurrency:
    case TransferResult::kAmountMustBePositive:
    case TransferResult::kAmountMustNotBeNegative:
    case TransferResult::kAmountExceedsMaximum:
    case TransferResult::kPendingIdMustBeEmpty:
    case TransferResult::kPendingIdMustNotBeEmpty:
    case TransferResult::kPendingIdInvalid:
    case TransferResult::kPendingIdMustBeDifferent:
    case TransferResult::kPendingTransferHasDifferentDebitAccount:
    case TransferResult::kPendingTransferHasDifferentCreditAccount:
    case TransferResult::kPendingTransferHasDifferentAmount:
    case TransferResult::kExceedsPendingTransferAmount:
      return StatusCode::kInvalidArgument;
    case TransferResult::kExistsWithDifferentFields:
    case TransferResult::kBatchMixesExistingAndNewIds:
      return StatusCode::kConflict;
    case TransferResult::kPendingTransferNotFound:
      return StatusCode::kNotFound;
    case TransferResult::kPendingTransferNotPending:
    case TransferResult::kPendingTransferAlreadyPosted:
    case TransferResult::kPendingTransferAlreadyVoided:
    case TransferResult::kOverflowsDebits:
    case TransferResult::kOverflowsCredits:
      return StatusCode::kFailedPrecondition;
    case TransferResult::kInsufficientFunds:
      return StatusCode::kInsufficientFunds;
  }
  return StatusCode::kInternal;
}

}  // namespace gpuhub::ledger
