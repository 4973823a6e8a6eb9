#include "ledger/types.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace gpuhub::ledger {
namespace {

TEST(AccountKind, NamesRoundTrip) {
  std::set<std::string> names;
  for (int i = 0; i < kAccountKindCount; ++i) {
    auto kind = static_cast<AccountKind>(i);
    std::string name(AccountKindName(kind));
    EXPECT_NE(name, "unknown");
    names.insert(name);
    auto parsed = ParseAccountKind(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(kAccountKindCount));
  EXPECT_EQ(AccountKindName(AccountKind::kCustomerWallet), "customer_wallet");
  EXPECT_EQ(AccountKindName(AccountKind::kFxConversion), "fx_conversion");
  for (const char* bad : {"", "wallet", "Customer_Wallet", "deposits ", "holds\n"}) {
    auto parsed = ParseAccountKind(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(AccountKind, Rules) {
  EXPECT_TRUE(IsPerUserKind(AccountKind::kCustomerWallet));
  EXPECT_TRUE(IsPerUserKind(AccountKind::kProviderPayable));
  EXPECT_FALSE(IsPerUserKind(AccountKind::kDeposits));
  EXPECT_FALSE(IsPerUserKind(AccountKind::kHolds));
  EXPECT_TRUE(DebitsMustNotExceedCredits(AccountKind::kCustomerWallet));
  EXPECT_TRUE(DebitsMustNotExceedCredits(AccountKind::kProviderPayable));
  EXPECT_FALSE(DebitsMustNotExceedCredits(AccountKind::kDeposits));
  EXPECT_FALSE(DebitsMustNotExceedCredits(AccountKind::kFxConversion));
  EXPECT_FALSE(DebitsMustNotExceedCredits(AccountKind::kPlatformRevenue));
}

TEST(AccountKey, Validation) {
  struct Case {
    AccountKey key;
    bool ok;
  } cases[] = {
      {AccountKey::Wallet(1, Currency::kUsd), true},
      {AccountKey::Wallet(0, Currency::kUsd), false},
      {AccountKey::Wallet(-5, Currency::kEur), false},
      {AccountKey::Payable(9'000'000'000LL, Currency::kGbp), true},
      {AccountKey::System(AccountKind::kDeposits, Currency::kUsd), true},
      {AccountKey{AccountKind::kDeposits, 3, Currency::kUsd}, false},
      {AccountKey{static_cast<AccountKind>(8), 0, Currency::kUsd}, false},
      {AccountKey{AccountKind::kHolds, 0, static_cast<Currency>(3)}, false},
  };
  for (const Case& c : cases) {
    Status s = ValidateAccountKey(c.key);
    EXPECT_EQ(s.ok(), c.ok) << AccountKeyName(c.key) << ": " << s.ToString();
    if (!c.ok) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(AccountKey, NamesAndOrder) {
  EXPECT_EQ(AccountKeyName(AccountKey::Wallet(42, Currency::kUsd)), "customer_wallet:42:USD");
  EXPECT_EQ(AccountKeyName(AccountKey::Payable(7, Currency::kGbp)), "provider_payable:7:GBP");
  EXPECT_EQ(AccountKeyName(AccountKey::System(AccountKind::kDeposits, Currency::kEur)),
            "deposits:EUR");
  EXPECT_LT(AccountKey::Wallet(1, Currency::kGbp), AccountKey::Wallet(2, Currency::kUsd));
  EXPECT_NE(AccountKeyHash{}(AccountKey::Wallet(1, Currency::kUsd)),
            AccountKeyHash{}(AccountKey::Wallet(2, Currency::kUsd)));
}

TEST(AccountBalance, DerivedFigures) {
  AccountBalance b;
  b.credits_posted = 100;
  b.debits_posted = 30;
  b.debits_pending = 20;
  b.credits_pending = 7;
  EXPECT_EQ(b.available(), 50);
  EXPECT_EQ(b.held(), 20);
  EXPECT_EQ(b.posted(), 70);
}

TEST(TransferKindAndState, NamesRoundTrip) {
  for (TransferKind kind : {TransferKind::kSinglePhase, TransferKind::kPending,
                            TransferKind::kPostPending, TransferKind::kVoidPending}) {
    auto parsed = ParseTransferKind(TransferKindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_EQ(TransferKindName(TransferKind::kPostPending), "post_pending");
  EXPECT_FALSE(ParseTransferKind("posted").ok());
  for (TransferState state :
       {TransferState::kPending, TransferState::kPosted, TransferState::kVoided}) {
    auto parsed = ParseTransferState(TransferStateName(state));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, state);
  }
  EXPECT_EQ(TransferStateName(TransferState::kVoided), "voided");
  EXPECT_FALSE(ParseTransferState("void").ok());
}

TEST(TransferResult, EveryCodeHasAUniqueNameAndAStatus) {
  std::set<std::string> names;
  const int last = static_cast<int>(TransferResult::kInsufficientFunds);
  for (int i = 0; i <= last; ++i) {
    auto result = static_cast<TransferResult>(i);
    std::string name(TransferResultName(result));
    EXPECT_NE(name, "unknown") << i;
    names.insert(name);
    StatusCode code = TransferResultStatusCode(result);
    EXPECT_NE(code, StatusCode::kInternal) << name;
    EXPECT_EQ(code == StatusCode::kOk,
              result == TransferResult::kOk || result == TransferResult::kExists)
        << name;
  }
  EXPECT_EQ(names.size(), static_cast<std::size_t>(last + 1));
}

TEST(TransferResult, StatusMapping) {
  struct Case {
    TransferResult result;
    StatusCode code;
    const char* name;
  } cases[] = {
      {TransferResult::kOk, StatusCode::kOk, "ok"},
      {TransferResult::kExists, StatusCode::kOk, "exists"},
      {TransferResult::kInsufficientFunds, StatusCode::kInsufficientFunds, "insufficient_funds"},
      {TransferResult::kExistsWithDifferentFields, StatusCode::kConflict,
       "exists_with_different_fields"},
      {TransferResult::kBatchMixesExistingAndNewIds, StatusCode::kConflict,
       "batch_mixes_existing_and_new_ids"},
      {TransferResult::kPendingTransferNotFound, StatusCode::kNotFound,
       "pending_transfer_not_found"},
      {TransferResult::kPendingTransferAlreadyPosted, StatusCode::kFailedPrecondition,
       "pending_transfer_already_posted"},
      {TransferResult::kAmountMustBePositive, StatusCode::kInvalidArgument,
       "amount_must_be_positive"},
      {TransferResult::kOverflowsCredits, StatusCode::kFailedPrecondition, "overflows_credits"},
      {TransferResult::kBatchTooLarge, StatusCode::kInvalidArgument, "batch_too_large"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TransferResultStatusCode(c.result), c.code) << c.name;
    EXPECT_EQ(TransferResultName(c.result), c.name);
  }
}

}  // namespace
}  // namespace gpuhub::ledger
