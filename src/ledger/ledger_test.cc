#include "ledger/ledger.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace gpuhub::ledger {
namespace {

constexpr TimestampMicros kT = 1'700'000'000'000'000;
constexpr std::int64_t kUnit = 1'000'000;  // one currency unit in micros

const AccountKey kDepositsUsd = AccountKey::System(AccountKind::kDeposits, Currency::kUsd);
const AccountKey kHoldsUsd = AccountKey::System(AccountKind::kHolds, Currency::kUsd);
const AccountKey kRevenueUsd = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
const AccountKey kPayoutsUsd = AccountKey::System(AccountKind::kPayouts, Currency::kUsd);
const AccountKey kWallet1 = AccountKey::Wallet(1, Currency::kUsd);
const AccountKey kWallet2 = AccountKey::Wallet(2, Currency::kUsd);
const AccountKey kPayable9 = AccountKey::Payable(9, Currency::kUsd);

TransferRequest Single(std::string id, AccountKey debit, AccountKey credit, std::int64_t amount,
                       std::string code = "test") {
  TransferRequest r;
  r.id = std::move(id);
  r.kind = TransferKind::kSinglePhase;
  r.debit = debit;
  r.credit = credit;
  r.amount_micros = amount;
  r.code = std::move(code);
  r.timestamp = kT;
  return r;
}

TransferRequest Pending(std::string id, AccountKey debit, AccountKey credit, std::int64_t amount) {
  TransferRequest r = Single(std::move(id), debit, credit, amount, "hold");
  r.kind = TransferKind::kPending;
  return r;
}

TransferRequest Post(std::string id, std::string pending_id, std::int64_t amount) {
  TransferRequest r;
  r.id = std::move(id);
  r.kind = TransferKind::kPostPending;
  r.pending_id = std::move(pending_id);
  r.amount_micros = amount;
  r.code = "post";
  r.timestamp = kT;
  return r;
}

TransferRequest Void(std::string id, std::string pending_id) {
  TransferRequest r = Post(std::move(id), std::move(pending_id), 0);
  r.kind = TransferKind::kVoidPending;
  r.code = "void";
  return r;
}

std::int64_t Available(const Ledger& ledger, const AccountKey& key) {
  return ledger.GetAccount(key)->available();
}

// A ledger where wallet 1 (USD) got 100, has an open hold of 30 ("hold"), a hold of 10 posted in
// full ("posted-hold") and a hold of 5 voided ("voided-hold"): available 60, held 30.
Ledger BaseLedger() {
  Ledger ledger;
  std::vector<TransferRequest> setup = {
      Single("fund", kDepositsUsd, kWallet1, 100 * kUnit, "topup"),
      Pending("hold", kWallet1, kHoldsUsd, 30 * kUnit),
      Pending("posted-hold", kWallet1, kHoldsUsd, 10 * kUnit),
      Post("posted-hold-post", "posted-hold", 10 * kUnit),
      Pending("voided-hold", kWallet1, kHoldsUsd, 5 * kUnit),
      Void("voided-hold-void", "voided-hold"),
  };
  for (const TransferRequest& r : setup) {
    BatchResult b = ledger.Apply(r);
    EXPECT_EQ(b.result, TransferResult::kOk) << r.id << ": " << b.message;
  }
  EXPECT_EQ(Available(ledger, kWallet1), 60 * kUnit);
  EXPECT_EQ(ledger.GetAccount(kWallet1)->held(), 30 * kUnit);
  return ledger;
}

struct Case {
  const char* name;
  std::function<TransferRequest()> request;
  TransferResult expected;
};

// A case's request: `base` with the one change the case is about.
std::function<TransferRequest()> With(TransferRequest base,
                                      std::function<void(TransferRequest&)> change) {
  return [base = std::move(base), change = std::move(change)] {
    TransferRequest r = base;
    change(r);
    return r;
  };
}

TEST(Ledger, EveryResultCodeOfOneTransfer) {
  const std::string long_id(kMaxTransferIdBytes + 1, 'a');
  // Valid requests that the cases below change (With) to break one rule each.
  const TransferRequest valid = Single("t", kDepositsUsd, kWallet1, 1);
  const TransferRequest fund = Single("fund", kDepositsUsd, kWallet1, 100 * kUnit, "topup");
  const TransferRequest void_hold = Void("t", "hold");
  const TransferRequest post_hold = Post("t", "hold", 1);
  const Case cases[] = {
      {"ok", [] { return Single("t", kWallet1, kPayable9, 60 * kUnit); }, TransferResult::kOk},
      {"ok pending up to available", [] { return Pending("t", kWallet1, kHoldsUsd, 60 * kUnit); },
       TransferResult::kOk},
      {"ok post less than held", [] { return Post("t", "hold", 1); }, TransferResult::kOk},
      {"ok void with amount", With(void_hold, [](auto& r) { r.amount_micros = 30 * kUnit; }),
       TransferResult::kOk},
      {"ok id charset", [] { return Single("topup:inv_123/a.b-c@x", kDepositsUsd, kWallet2, 1); },
       TransferResult::kOk},
      {"ok utf8 memo",
       With(Single("t", kDepositsUsd, kWallet2, 1),
            [](auto& r) { r.memo = "bank transfer \xe2\x82\xac 5 \xf0\x9f\x92\xb6"; }),
       TransferResult::kOk},
      {"exists", With(fund, [](auto& r) { r.timestamp = kT + 999; }), TransferResult::kExists},
      {"exists void without amount", [] { return Void("voided-hold-void", "voided-hold"); },
       TransferResult::kExists},
      {"id empty", [] { return Single("", kDepositsUsd, kWallet1, 1); },
       TransferResult::kIdMustNotBeEmpty},
      {"id too long", [&] { return Single(long_id, kDepositsUsd, kWallet1, 1); },
       TransferResult::kIdTooLong},
      {"id with space", [] { return Single("a b", kDepositsUsd, kWallet1, 1); },
       TransferResult::kIdHasInvalidCharacters},
      {"id non-ascii", [] { return Single("caf\xc3\xa9", kDepositsUsd, kWallet1, 1); },
       TransferResult::kIdHasInvalidCharacters},
      {"kind invalid", With(valid, [](auto& r) { r.kind = static_cast<TransferKind>(9); }),
       TransferResult::kKindInvalid},
      {"code empty", [] { return Single("t", kDepositsUsd, kWallet1, 1, ""); },
       TransferResult::kCodeMustNotBeEmpty},
      {"code too long",
       [] {
         return Single("t", kDepositsUsd, kWallet1, 1, std::string(kMaxTransferCodeBytes + 1, 'c'));
       },
       TransferResult::kCodeTooLong},
      {"code upper case", [] { return Single("t", kDepositsUsd, kWallet1, 1, "TopUp"); },
       TransferResult::kCodeHasInvalidCharacters},
      {"memo too long", With(valid, [](auto& r) { r.memo.assign(kMaxTransferMemoBytes + 1, 'm'); }),
       TransferResult::kMemoTooLong},
      {"memo newline", With(valid, [](auto& r) { r.memo = "a\nb"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"memo bad utf8", With(valid, [](auto& r) { r.memo = "\xff"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"memo overlong", With(valid, [](auto& r) { r.memo = "\xc0\xaf"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"memo surrogate", With(valid, [](auto& r) { r.memo = "\xed\xa0\x80"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"memo C1 control", With(valid, [](auto& r) { r.memo = "\xc2\x85"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"memo truncated", With(valid, [](auto& r) { r.memo = "ok \xe2\x82"; }),
       TransferResult::kMemoHasInvalidCharacters},
      {"timestamp zero", With(valid, [](auto& r) { r.timestamp = 0; }),
       TransferResult::kTimestampMustBePositive},
      {"debit missing", With(valid, [](auto& r) { r.debit.reset(); }),
       TransferResult::kDebitAccountRequired},
      {"credit missing", With(valid, [](auto& r) { r.credit.reset(); }),
       TransferResult::kCreditAccountRequired},
      {"debit invalid",
       [] { return Single("t", AccountKey::Wallet(0, Currency::kUsd), kWallet1, 1); },
       TransferResult::kDebitAccountInvalid},
      {"credit invalid",
       [] {
         return Single("t", kDepositsUsd, AccountKey{AccountKind::kDeposits, 5, Currency::kUsd}, 1);
       },
       TransferResult::kCreditAccountInvalid},
      {"same account", [] { return Single("t", kWallet1, kWallet1, 1); },
       TransferResult::kAccountsMustBeDifferent},
      {"currencies differ",
       [] { return Single("t", kWallet1, AccountKey::Payable(9, Currency::kEur), 1); },
       TransferResult::kAccountsMustHaveSameCurrency},
      {"amount zero", [] { return Single("t", kDepositsUsd, kWallet1, 0); },
       TransferResult::kAmountMustBePositive},
      {"amount negative", [] { return Single("t", kDepositsUsd, kWallet1, -1); },
       TransferResult::kAmountMustBePositive},
      {"post amount zero", [] { return Post("t", "hold", 0); },
       TransferResult::kAmountMustBePositive},
      {"void amount negative", With(void_hold, [](auto& r) { r.amount_micros = -1; }),
       TransferResult::kAmountMustNotBeNegative},
      {"amount over maximum",
       [] { return Single("t", kDepositsUsd, kWallet1, kMaxTransferAmountMicros + 1); },
       TransferResult::kAmountExceedsMaximum},
      {"pending id on single", With(valid, [](auto& r) { r.pending_id = "hold"; }),
       TransferResult::kPendingIdMustBeEmpty},
      {"post without pending id", [] { return Post("t", "", 1); },
       TransferResult::kPendingIdMustNotBeEmpty},
      {"pending id invalid", [] { return Post("t", "no such/ id", 1); },
       TransferResult::kPendingIdInvalid},
      {"pending id is own id", [] { return Post("t", "t", 1); },
       TransferResult::kPendingIdMustBeDifferent},
      {"exists with different amount",
       [] { return Single("fund", kDepositsUsd, kWallet1, 99 * kUnit, "topup"); },
       TransferResult::kExistsWithDifferentFields},
      {"exists with different kind", With(fund, [](auto& r) { r.kind = TransferKind::kPending; }),
       TransferResult::kExistsWithDifferentFields},
      {"exists with different memo", With(fund, [](auto& r) { r.memo = "x"; }),
       TransferResult::kExistsWithDifferentFields},
      {"exists with different pending", [] { return Post("posted-hold-post", "hold", 10 * kUnit); },
       TransferResult::kExistsWithDifferentFields},
      {"pending not found", [] { return Post("t", "nope", 1); },
       TransferResult::kPendingTransferNotFound},
      {"pending not pending", [] { return Post("t", "fund", 1); },
       TransferResult::kPendingTransferNotPending},
      {"pending other debit", With(post_hold, [](auto& r) { r.debit = kWallet2; }),
       TransferResult::kPendingTransferHasDifferentDebitAccount},
      {"pending other credit",
       With(post_hold,
            [](auto& r) {
              r.debit = kWallet1;
              r.credit = kRevenueUsd;
            }),
       TransferResult::kPendingTransferHasDifferentCreditAccount},
      {"void other amount", With(void_hold, [](auto& r) { r.amount_micros = 1; }),
       TransferResult::kPendingTransferHasDifferentAmount},
      {"post over held", [] { return Post("t", "hold", 30 * kUnit + 1); },
       TransferResult::kExceedsPendingTransferAmount},
      {"already posted", [] { return Post("t", "posted-hold", 1); },
       TransferResult::kPendingTransferAlreadyPosted},
      {"already voided", [] { return Void("t", "voided-hold"); },
       TransferResult::kPendingTransferAlreadyVoided},
      {"insufficient funds", [] { return Single("t", kWallet1, kPayable9, 60 * kUnit + 1); },
       TransferResult::kInsufficientFunds},
      {"insufficient funds for a hold",
       [] { return Pending("t", kWallet1, kHoldsUsd, 60 * kUnit + 1); },
       TransferResult::kInsufficientFunds},
      {"insufficient funds, never-used wallet", [] { return Single("t", kWallet2, kPayable9, 1); },
       TransferResult::kInsufficientFunds},
      {"payable cannot go negative", [] { return Single("t", kPayable9, kPayoutsUsd, 1); },
       TransferResult::kInsufficientFunds},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Ledger ledger = BaseLedger();
    const Ledger before = ledger;
    BatchResult b = ledger.Apply(c.request());
    EXPECT_EQ(b.result, c.expected) << TransferResultName(b.result) << ": " << b.message;
    EXPECT_TRUE(ledger.CheckInvariants().ok()) << ledger.CheckInvariants().ToString();
    EXPECT_TRUE(ledger.CheckHistory().ok()) << ledger.CheckHistory().ToString();
    if (c.expected == TransferResult::kOk) {
      ASSERT_EQ(b.transfers.size(), 1u);
      EXPECT_EQ(b.transfers[0].sequence, before.LastSequence() + 1);
      EXPECT_TRUE(b.status().ok());
    } else {
      // Nothing changed.
      EXPECT_EQ(ledger.LastSequence(), before.LastSequence());
      EXPECT_EQ(ledger.Accounts(), before.Accounts());
      if (c.expected == TransferResult::kExists) {
        ASSERT_EQ(b.transfers.size(), 1u);
        EXPECT_EQ(b.transfers[0], *before.FindTransfer(b.transfers[0].id));
        EXPECT_TRUE(b.status().ok());
      } else {
        EXPECT_TRUE(b.transfers.empty());
        EXPECT_EQ(b.failed_index, 0u);
        EXPECT_FALSE(b.message.empty());
        EXPECT_EQ(b.status().code(), TransferResultStatusCode(c.expected));
      }
    }
  }
}

TEST(Ledger, InsufficientFundsMessageSaysWhatIsThere) {
  Ledger ledger = BaseLedger();
  BatchResult b = ledger.Apply(Single("t", kWallet1, kPayable9, 61 * kUnit));
  EXPECT_EQ(b.status().code(), StatusCode::kInsufficientFunds);
  EXPECT_NE(b.message.find("60.000000 USD available"), std::string::npos) << b.message;
  EXPECT_NE(b.message.find("61.000000 USD needed"), std::string::npos) << b.message;
}

TEST(Ledger, OverflowsAreRefused) {
  Ledger ledger;
  const AccountKey fx = AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(ledger
                    .Apply(Single("big" + std::to_string(i), kDepositsUsd, kWallet2,
                                  kMaxTransferAmountMicros))
                    .ok());
  }
  EXPECT_EQ(ledger.Apply(Single("d", kDepositsUsd, kRevenueUsd, kMaxTransferAmountMicros)).result,
            TransferResult::kOverflowsDebits);
  EXPECT_EQ(ledger.Apply(Single("c", fx, kWallet2, kMaxTransferAmountMicros)).result,
            TransferResult::kOverflowsCredits);
  EXPECT_EQ(ledger.Apply(Pending("c", fx, kWallet2, kMaxTransferAmountMicros)).result,
            TransferResult::kOverflowsCredits);
  EXPECT_TRUE(ledger.CheckInvariants().ok());
  EXPECT_EQ(ledger.GetAccount(kDepositsUsd)->available(), -9 * kMaxTransferAmountMicros);
}

TEST(Ledger, BatchShape) {
  Ledger ledger;
  BatchResult empty = ledger.ApplyBatch({});
  EXPECT_EQ(empty.result, TransferResult::kBatchEmpty);
  EXPECT_EQ(empty.failed_index, kWholeBatch);
  std::vector<TransferRequest> big;
  for (std::size_t i = 0; i <= kMaxTransfersPerBatch; ++i) {
    big.push_back(Single("t" + std::to_string(i), kDepositsUsd, kWallet1, 1));
  }
  BatchResult too_large = ledger.ApplyBatch(big);
  EXPECT_EQ(too_large.result, TransferResult::kBatchTooLarge);
  EXPECT_EQ(too_large.status().code(), StatusCode::kInvalidArgument);
  big.pop_back();
  BatchResult max = ledger.ApplyBatch(big);
  EXPECT_EQ(max.result, TransferResult::kOk) << max.message;
  EXPECT_EQ(max.transfers.size(), kMaxTransfersPerBatch);
  EXPECT_EQ(Available(ledger, kWallet1), static_cast<std::int64_t>(kMaxTransfersPerBatch));

  std::vector<TransferRequest> dup = {Single("x", kDepositsUsd, kWallet1, 1),
                                      Single("y", kDepositsUsd, kWallet1, 1),
                                      Single("x", kDepositsUsd, kWallet1, 1)};
  BatchResult d = ledger.ApplyBatch(dup);
  EXPECT_EQ(d.result, TransferResult::kIdDuplicatedInBatch);
  EXPECT_EQ(d.failed_index, 2u);
  EXPECT_NE(d.message.find("transfer 3 of 3"), std::string::npos) << d.message;
}

TEST(Ledger, BatchIsAllOrNothing) {
  Ledger ledger = BaseLedger();
  const Ledger before = ledger;
  // Leg 1 would succeed, leg 2 posts the open hold, leg 3 overdraws: nothing may stay applied,
  // including the hold's state and the accounts leg 1 created.
  std::vector<TransferRequest> batch = {
      Single("a", kWallet1, AccountKey::Payable(77, Currency::kUsd), 10 * kUnit),
      Post("b", "hold", 30 * kUnit),
      Single("c", kWallet1, kRevenueUsd, 51 * kUnit),
  };
  BatchResult b = ledger.ApplyBatch(batch);
  EXPECT_EQ(b.result, TransferResult::kInsufficientFunds);
  EXPECT_EQ(b.failed_index, 2u);
  EXPECT_TRUE(b.transfers.empty());
  EXPECT_EQ(ledger.Accounts(), before.Accounts());
  EXPECT_EQ(ledger.LastSequence(), before.LastSequence());
  EXPECT_EQ(ledger.FindTransfer("hold")->state, TransferState::kPending);
  EXPECT_FALSE(ledger.FindTransfer("a").ok());
  EXPECT_TRUE(ledger.ListOwnerTransfers(77, 0, 10)->transfers.empty());
  EXPECT_TRUE(ledger.CheckInvariants().ok());
  EXPECT_TRUE(ledger.CheckHistory().ok()) << ledger.CheckHistory().ToString();
  // The failed ids are not remembered: with one leg less the batch goes through.
  batch[2].amount_micros = 50 * kUnit;
  BatchResult again = ledger.ApplyBatch(batch);
  ASSERT_EQ(again.result, TransferResult::kOk) << again.message;
  ASSERT_EQ(again.transfers.size(), 3u);
  EXPECT_EQ(again.transfers[0].sequence, before.LastSequence() + 1);
  EXPECT_EQ(again.transfers[2].sequence, before.LastSequence() + 3);
  EXPECT_EQ(again.transfers[1].debit, kWallet1);  // resolved from the pending transfer
  EXPECT_EQ(again.transfers[1].credit, kHoldsUsd);
  EXPECT_EQ(ledger.FindTransfer("hold")->state, TransferState::kPosted);
  EXPECT_EQ(Available(ledger, kWallet1), 0);
  EXPECT_EQ(ledger.GetAccount(kWallet1)->held(), 0);
}

TEST(Ledger, LaterLegsSeeEarlierOnes) {
  Ledger ledger;
  std::vector<TransferRequest> batch = {
      Single("in", kDepositsUsd, kWallet2, 5 * kUnit),
      Pending("h", kWallet2, kHoldsUsd, 5 * kUnit),
      Post("p", "h", 2 * kUnit),
      Single("out", kWallet2, kRevenueUsd, 3 * kUnit),
  };
  BatchResult b = ledger.ApplyBatch(batch);
  ASSERT_EQ(b.result, TransferResult::kOk) << b.message;
  EXPECT_EQ(b.transfers[1].state, TransferState::kPosted);  // as of the end of the batch
  EXPECT_EQ(Available(ledger, kWallet2), 0);
  // Order matters: spending before the money arrives fails.
  Ledger other;
  std::vector<TransferRequest> reversed = {Single("out", kWallet2, kRevenueUsd, 3 * kUnit),
                                           Single("in", kDepositsUsd, kWallet2, 5 * kUnit)};
  EXPECT_EQ(other.ApplyBatch(reversed).result, TransferResult::kInsufficientFunds);
}

TEST(Ledger, BatchResubmission) {
  Ledger ledger = BaseLedger();
  std::vector<TransferRequest> hour = {
      Single("lease:42:hour:7:provider", kWallet1, kPayable9, 2'250'000, "lease_hour"),
      Single("lease:42:hour:7:fee", kWallet1, kRevenueUsd, 250'000, "fee"),
  };
  BatchResult first = ledger.ApplyBatch(hour);
  ASSERT_EQ(first.result, TransferResult::kOk) << first.message;
  const auto accounts = ledger.Accounts();
  for (auto& r : hour) r.timestamp += kMicrosPerHour;  // a retry, later
  BatchResult again = ledger.ApplyBatch(hour);
  EXPECT_EQ(again.result, TransferResult::kExists);
  EXPECT_EQ(again.transfers, first.transfers);
  EXPECT_EQ(ledger.Accounts(), accounts);
  // Part of a stored batch plus something new is not a resubmission.
  std::vector<TransferRequest> mixed = {hour[0],
                                        Single("lease:42:hour:7:tip", kWallet1, kPayable9, 1)};
  BatchResult m = ledger.ApplyBatch(mixed);
  EXPECT_EQ(m.result, TransferResult::kBatchMixesExistingAndNewIds);
  EXPECT_EQ(m.status().code(), StatusCode::kConflict);
  EXPECT_EQ(m.failed_index, 0u);
  // A conflicting field anywhere wins over "exists".
  hour[1].amount_micros += 1;
  BatchResult c = ledger.ApplyBatch(hour);
  EXPECT_EQ(c.result, TransferResult::kExistsWithDifferentFields);
  EXPECT_EQ(c.failed_index, 1u);
  EXPECT_NE(c.message.find("different amount"), std::string::npos) << c.message;
}

TEST(Ledger, LeaseHourSettlementInUsd) {
  Ledger ledger = BaseLedger();
  // 2.50/h, 10% fee.
  std::vector<TransferRequest> hour = {
      Single("lease:1:hour:1:provider", kWallet1, kPayable9, 2'250'000, "lease_hour"),
      Single("lease:1:hour:1:fee", kWallet1, kRevenueUsd, 250'000, "fee"),
  };
  ASSERT_TRUE(ledger.ApplyBatch(hour).ok());
  EXPECT_EQ(Available(ledger, kWallet1), 57'500'000);
  EXPECT_EQ(Available(ledger, kPayable9), 2'250'000);
  EXPECT_EQ(Available(ledger, kRevenueUsd), 250'000);
}

TEST(Ledger, FxSettlementAcrossCurrencies) {
  Ledger ledger;
  auto change = ledger.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kT);
  ASSERT_TRUE(change.ok()) << change.status().ToString();
  EXPECT_EQ(change->version, 1);
  const AccountKey wallet_eur = AccountKey::Wallet(3, Currency::kEur);
  const AccountKey fx_eur = AccountKey::System(AccountKind::kFxConversion, Currency::kEur);
  const AccountKey fx_usd = AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
  ASSERT_TRUE(
      ledger
          .Apply(Single("topup:eur", AccountKey::System(AccountKind::kDeposits, Currency::kEur),
                        wallet_eur, 10 * kUnit))
          .ok());
  // A 2.16 USD hour (fee 0.216) paid from the EUR wallet: 2.16 / 1.0746 = 2.0100502.. rounds up.
  auto quote = ledger.Fx().ConvertTo(Currency::kEur, Currency::kUsd, 2'160'000);
  ASSERT_TRUE(quote.ok());
  EXPECT_EQ(quote->from_micros, 2'010'051);
  std::vector<TransferRequest> hour = {
      Single("h:eur", wallet_eur, fx_eur, quote->from_micros, "fx"),
      Single("h:provider", fx_usd, kPayable9, 1'944'000, "lease_hour"),
      Single("h:fee", fx_usd, kRevenueUsd, 216'000, "fee"),
  };
  BatchResult b = ledger.ApplyBatch(hour);
  ASSERT_EQ(b.result, TransferResult::kOk) << b.message;
  EXPECT_EQ(Available(ledger, wallet_eur), 10 * kUnit - 2'010'051);
  EXPECT_EQ(Available(ledger, fx_eur), 2'010'051);
  EXPECT_EQ(Available(ledger, fx_usd), -2'160'000);
  EXPECT_EQ(Available(ledger, kPayable9), 1'944'000);
  EXPECT_TRUE(ledger.CheckInvariants().ok());
  // Missing rate: failed_precondition before anything moves.
  auto none = ledger.Fx().ConvertTo(Currency::kGbp, Currency::kUsd, 1);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ledger.RemoveFxRate(Currency::kUsd, Currency::kEur, kT).ok());
  EXPECT_EQ(ledger.Fx().ConvertTo(Currency::kEur, Currency::kUsd, 1).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(ledger.RemoveFxRate(Currency::kUsd, Currency::kEur, kT).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(ledger.SetFxRate(Currency::kUsd, Currency::kUsd, 1, 0, kT).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.SetFxRate(Currency::kUsd, Currency::kEur, 0, 0, kT).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.Fx().Version(), 2);
}

TEST(Ledger, BidHoldThenFill) {
  Ledger ledger = BaseLedger();
  // A resting bid holds one hour at its limit (3.00) before anyone fills it.
  ASSERT_TRUE(ledger.Apply(Pending("bid:7:hold", kWallet1, kHoldsUsd, 3 * kUnit)).ok());
  EXPECT_EQ(Available(ledger, kWallet1), 57 * kUnit);
  // Filled at 2.50 (fee 0.25): release the hold and pay the legs, atomically.
  std::vector<TransferRequest> fill = {
      Void("bid:7:release", "bid:7:hold"),
      Single("lease:8:hour:1:provider", kWallet1, kPayable9, 2'250'000, "lease_hour"),
      Single("lease:8:hour:1:fee", kWallet1, kRevenueUsd, 250'000, "fee"),
  };
  ASSERT_EQ(ledger.ApplyBatch(fill).result, TransferResult::kOk);
  EXPECT_EQ(Available(ledger, kWallet1), 57'500'000);
  EXPECT_EQ(ledger.GetAccount(kWallet1)->held(), 30 * kUnit);
  EXPECT_EQ(ledger.GetAccount(kHoldsUsd)->credits_pending, 30 * kUnit);
  EXPECT_EQ(ledger.FindTransfer("bid:7:hold")->state, TransferState::kVoided);
}

TEST(Ledger, PayoutLifecycle) {
  Ledger ledger = BaseLedger();
  ASSERT_TRUE(ledger.Apply(Single("earn", kWallet1, kPayable9, 40 * kUnit)).ok());
  EXPECT_EQ(ledger.Apply(Pending("payout:1", kPayable9, kPayoutsUsd, 41 * kUnit)).result,
            TransferResult::kInsufficientFunds);
  ASSERT_TRUE(ledger.Apply(Pending("payout:1", kPayable9, kPayoutsUsd, 25 * kUnit)).ok());
  EXPECT_EQ(Available(ledger, kPayable9), 15 * kUnit);
  EXPECT_EQ(ledger.Apply(Pending("payout:2", kPayable9, kPayoutsUsd, 16 * kUnit)).result,
            TransferResult::kInsufficientFunds);
  ASSERT_TRUE(ledger.Apply(Post("payout:1:paid", "payout:1", 25 * kUnit)).ok());
  EXPECT_EQ(ledger.GetAccount(kPayable9)->posted(), 15 * kUnit);
  EXPECT_EQ(ledger.GetAccount(kPayoutsUsd)->credits_posted, 25 * kUnit);
}

TEST(Ledger, PostForLessReleasesTheRest) {
  Ledger ledger = BaseLedger();
  BatchResult b = ledger.Apply(Post("settle", "hold", 12 * kUnit));
  ASSERT_EQ(b.result, TransferResult::kOk) << b.message;
  EXPECT_EQ(b.transfers[0].amount_micros, 12 * kUnit);
  EXPECT_EQ(b.transfers[0].pending_id, "hold");
  EXPECT_EQ(b.transfers[0].state, TransferState::kPosted);
  auto wallet = *ledger.GetAccount(kWallet1);
  EXPECT_EQ(wallet.held(), 0);
  EXPECT_EQ(wallet.available(), 78 * kUnit);  // 100 - 10 - 12
  EXPECT_EQ(wallet.debits_posted, 22 * kUnit);
  auto holds = *ledger.GetAccount(kHoldsUsd);
  EXPECT_EQ(holds.credits_pending, 0);
  EXPECT_EQ(holds.credits_posted, 22 * kUnit);
  // The void record carries the released amount.
  Ledger other = BaseLedger();
  BatchResult v = other.Apply(Void("release", "hold"));
  ASSERT_EQ(v.result, TransferResult::kOk);
  EXPECT_EQ(v.transfers[0].amount_micros, 30 * kUnit);
  EXPECT_EQ(v.transfers[0].state, TransferState::kVoided);
  EXPECT_EQ(Available(other, kWallet1), 90 * kUnit);
}

TEST(Ledger, Queries) {
  Ledger ledger = BaseLedger();
  auto wallets = ledger.Wallets(1);
  ASSERT_TRUE(wallets.ok());
  EXPECT_EQ((*wallets)[0].key, kWallet1);
  EXPECT_EQ((*wallets)[0].available(), 60 * kUnit);
  EXPECT_EQ((*wallets)[1].key, AccountKey::Wallet(1, Currency::kEur));
  EXPECT_EQ((*wallets)[1].available(), 0);
  EXPECT_EQ((*wallets)[2].key.currency, Currency::kGbp);
  EXPECT_EQ(ledger.Wallets(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.GetAccount(AccountKey::Wallet(-1, Currency::kUsd)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.FindTransfer("nope").status().code(), StatusCode::kNotFound);
  auto hold = ledger.FindTransfer("posted-hold");
  ASSERT_TRUE(hold.ok());
  EXPECT_EQ(hold->state, TransferState::kPosted);
  EXPECT_EQ(hold->kind, TransferKind::kPending);
  EXPECT_EQ(ledger.Accounts().size(), 3u);  // deposits, wallet, holds
}

TEST(Ledger, PagesNewestFirst) {
  Ledger ledger = BaseLedger();  // wallet 1 is touched by all 6 transfers
  std::vector<std::int64_t> seen;
  std::int64_t cursor = 0;
  int pages = 0;
  do {
    auto page = ledger.ListAccountTransfers(kWallet1, cursor, 4);
    ASSERT_TRUE(page.ok());
    for (const Transfer& t : page->transfers) seen.push_back(t.sequence);
    cursor = page->next_before_sequence;
    ++pages;
  } while (cursor != 0 && pages < 10);
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(seen, (std::vector<std::int64_t>{6, 5, 4, 3, 2, 1}));
  auto exact = ledger.ListAccountTransfers(kWallet1, 0, 6);
  EXPECT_EQ(exact->transfers.size(), 6u);
  EXPECT_EQ(exact->next_before_sequence, 0);
  auto middle = ledger.ListAccountTransfers(kWallet1, 4, 2);
  ASSERT_EQ(middle->transfers.size(), 2u);
  EXPECT_EQ(middle->transfers[0].sequence, 3);
  EXPECT_EQ(middle->next_before_sequence, 2);
  EXPECT_TRUE(ledger.ListAccountTransfers(kWallet2, 0, 10)->transfers.empty());
  EXPECT_EQ(ledger.ListAccountTransfers(kDepositsUsd, 0, 10)->transfers.size(), 1u);
  EXPECT_EQ(ledger.ListAccountTransfers(kWallet1, 0, 0).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.ListAccountTransfers(kWallet1, 0, kMaxTransfersPageSize + 1).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ledger.ListAccountTransfers(kWallet1, -1, 5).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(ledger.ListAccountTransfers(kWallet1, 0, kMaxTransfersPageSize).ok());
}

TEST(Ledger, OwnerHistorySpansCurrenciesAndKinds) {
  Ledger ledger;
  const AccountKey eur = AccountKey::Wallet(5, Currency::kEur);
  const AccountKey payable = AccountKey::Payable(5, Currency::kUsd);
  ASSERT_TRUE(
      ledger.Apply(Single("a", kDepositsUsd, AccountKey::Wallet(5, Currency::kUsd), 10)).ok());
  ASSERT_TRUE(
      ledger.Apply(Single("b", AccountKey::System(AccountKind::kDeposits, Currency::kEur), eur, 10))
          .ok());
  ASSERT_TRUE(ledger.Apply(Single("c", kDepositsUsd, kWallet2, 10)).ok());
  // A user who is both customer and provider pays themselves: listed once.
  ASSERT_TRUE(ledger.Apply(Single("d", AccountKey::Wallet(5, Currency::kUsd), payable, 4)).ok());
  auto page = ledger.ListOwnerTransfers(5, 0, 10);
  ASSERT_TRUE(page.ok());
  std::vector<std::string> ids;
  for (const Transfer& t : page->transfers) ids.push_back(t.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"d", "b", "a"}));
  EXPECT_TRUE(ledger.ListOwnerTransfers(6, 0, 10)->transfers.empty());
  EXPECT_EQ(ledger.ListOwnerTransfers(0, 0, 10).status().code(), StatusCode::kInvalidArgument);
}

std::vector<Transfer> Rows(const Ledger& ledger) {
  return {ledger.Transfers().begin(), ledger.Transfers().end()};
}

TEST(Ledger, RestoreRebuildsTheSameLedger) {
  Ledger ledger = BaseLedger();
  std::vector<FxRateChange> fx;
  fx.push_back(*ledger.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kT));
  fx.push_back(*ledger.SetFxRate(Currency::kGbp, Currency::kUsd, 1'270'000'000, 25, kT));
  fx.push_back(*ledger.RemoveFxRate(Currency::kGbp, Currency::kUsd, kT));
  ASSERT_TRUE(ledger.Apply(Post("settle", "hold", 7 * kUnit)).ok());
  // The store persisted rows as handed out: "hold" still says pending in its row.
  std::vector<Transfer> rows;
  for (const Transfer& t : Rows(ledger)) {
    Transfer row = t;
    if (row.kind == TransferKind::kPending) row.state = TransferState::kPending;
    rows.push_back(row);
  }
  auto restored = Ledger::Restore(rows, fx);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->Accounts(), ledger.Accounts());
  EXPECT_EQ(Rows(*restored), Rows(ledger));
  EXPECT_EQ(restored->Fx(), ledger.Fx());
  EXPECT_EQ(restored->FindTransfer("hold")->state, TransferState::kPosted);
  EXPECT_EQ(restored->ListAccountTransfers(kWallet1, 0, 50)->transfers.size(), 7u);
  // It keeps working where the original left off.
  BatchResult next = restored->Apply(Single("next", kDepositsUsd, kWallet1, 1));
  ASSERT_EQ(next.result, TransferResult::kOk);
  EXPECT_EQ(next.transfers[0].sequence, ledger.LastSequence() + 1);
  EXPECT_EQ(restored->Apply(Single("fund", kDepositsUsd, kWallet1, 100 * kUnit, "topup")).result,
            TransferResult::kExists);
}

TEST(Ledger, RestoreRefusesCorruptRows) {
  Ledger ledger = BaseLedger();
  const std::vector<Transfer> good = Rows(ledger);
  struct Corruption {
    const char* name;
    std::function<void(std::vector<Transfer>&)> edit;
  } corruptions[] = {
      {"sequence gap", [](auto& rows) { rows.erase(rows.begin() + 1); }},
      {"sequence out of order", [](auto& rows) { std::swap(rows[0], rows[1]); }},
      {"duplicate id", [](auto& rows) { rows[1].id = "fund"; }},
      {"bad id", [](auto& rows) { rows[0].id = "a b"; }},
      {"same accounts", [](auto& rows) { rows[0].credit = rows[0].debit; }},
      {"negative amount", [](auto& rows) { rows[0].amount_micros = -5; }},
      {"unknown pending", [](auto& rows) { rows[3].pending_id = "nope"; }},
      {"post more than held", [](auto& rows) { rows[3].amount_micros += 1; }},
      {"void for less", [](auto& rows) { rows[5].amount_micros -= 1; }},
      {"post of other accounts", [](auto& rows) { rows[3].credit = kRevenueUsd; }},
      {"resolved twice", [](auto& rows) { rows[5].pending_id = "posted-hold"; }},
      {"wallet below zero", [](auto& rows) { rows[0].amount_micros = 1; }},
      {"kind out of range", [](auto& rows) { rows[0].kind = static_cast<TransferKind>(7); }},
      {"timestamp zero", [](auto& rows) { rows[2].timestamp = 0; }},
  };
  for (const Corruption& c : corruptions) {
    SCOPED_TRACE(c.name);
    std::vector<Transfer> rows = good;
    c.edit(rows);
    auto restored = Ledger::Restore(rows, {});
    ASSERT_FALSE(restored.ok());
    EXPECT_EQ(restored.status().code(), StatusCode::kInternal);
    EXPECT_NE(restored.status().message().find("ledger restore"), std::string::npos);
  }
  std::vector<FxRateChange> fx = {{2, Currency::kEur, Currency::kUsd, 1'000'000'000, 0, kT}};
  EXPECT_EQ(Ledger::Restore(good, fx).status().code(), StatusCode::kInternal);
  EXPECT_TRUE(Ledger::Restore(good, {}).ok());
  EXPECT_TRUE(Ledger::Restore({}, {}).ok());
}

TEST(Ledger, DeterministicAndCopyable) {
  Ledger a = BaseLedger();
  Ledger b = BaseLedger();
  EXPECT_EQ(Rows(a), Rows(b));
  Ledger copy = a;
  ASSERT_TRUE(copy.Apply(Single("only-in-copy", kDepositsUsd, kWallet1, 1)).ok());
  EXPECT_FALSE(a.FindTransfer("only-in-copy").ok());
  EXPECT_EQ(copy.LastSequence(), a.LastSequence() + 1);
}

// The spend guard of an API key's command (engine/api_keys.h): the owner's wallet debits of a
// batch count against the limit, a batch past it fails whole, posting a counted hold is free, and
// other owners and other currencies are as the guard says.
TEST(LedgerSpendGuard, LimitsOneOwnersWalletDebitsBatchByBatch) {
  Ledger ledger = BaseLedger();  // wallet 1: 60 available, hold "hold" of 30 open
  ASSERT_TRUE(ledger.Apply(Single("fund2", kDepositsUsd, kWallet2, 50 * kUnit, "topup")).ok());
  Ledger::SpendGuard guard;
  guard.owner_id = 1;
  guard.currency = Currency::kUsd;
  guard.limit_micros = 20 * kUnit;
  guard.refusal = "over the key's cap";
  ledger.SetSpendGuard(guard);

  EXPECT_TRUE(ledger.Apply(Single("pay1", kWallet1, kRevenueUsd, 8 * kUnit)).ok());
  EXPECT_TRUE(ledger.Apply(Pending("hold2", kWallet1, kHoldsUsd, 7 * kUnit)).ok());
  EXPECT_EQ(ledger.spend_guard()->spent_micros, 15 * kUnit);
  // Posting an existing hold counts nothing (it was counted, or made before the guard).
  EXPECT_TRUE(ledger.Apply(Post("post-hold", "hold", 30 * kUnit)).ok());
  // Another owner's debits are not limited.
  EXPECT_TRUE(ledger.Apply(Single("pay2", kWallet2, kRevenueUsd, 40 * kUnit)).ok());
  // 15 + 3 + 3 > 20: the whole batch fails, nothing moves.
  std::vector<TransferRequest> batch = {Single("a", kWallet1, kRevenueUsd, 3 * kUnit),
                                        Single("b", kWallet1, kRevenueUsd, 3 * kUnit)};
  BatchResult over = ledger.ApplyBatch(batch);
  EXPECT_EQ(over.result, TransferResult::kInsufficientFunds);
  EXPECT_EQ(over.message, "over the key's cap");
  EXPECT_EQ(Available(ledger, kWallet1), (60 - 8 - 7) * kUnit);
  EXPECT_FALSE(ledger.FindTransfer("a").ok());
  EXPECT_EQ(ledger.spend_guard()->spent_micros, 15 * kUnit);
  EXPECT_TRUE(ledger.Apply(Single("c", kWallet1, kRevenueUsd, 5 * kUnit)).ok());  // exactly 20
  EXPECT_EQ(ledger.Apply(Single("d", kWallet1, kRevenueUsd, 1)).result,
            TransferResult::kInsufficientFunds);
  // Another currency's wallet of the owner is refused while the guard names USD.
  ASSERT_TRUE(ledger
                  .Apply(Single("fund-eur",
                                AccountKey::System(AccountKind::kDeposits, Currency::kEur),
                                AccountKey::Wallet(1, Currency::kEur), 10 * kUnit, "topup"))
                  .ok());
  EXPECT_EQ(ledger
                .Apply(Single("eur", AccountKey::Wallet(1, Currency::kEur),
                              AccountKey::System(AccountKind::kPlatformRevenue, Currency::kEur),
                              kUnit))
                .result,
            TransferResult::kInsufficientFunds);
  ledger.SetSpendGuard(std::nullopt);
  EXPECT_TRUE(ledger.Apply(Single("e", kWallet1, kRevenueUsd, 5 * kUnit)).ok());
  EXPECT_TRUE(ledger.CheckInvariants().ok());
}

}  // namespace
}  // namespace gpuhub::ledger
