#include "engine/wallets.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"
#include "engine/limits.h"
#include "engine/ledger_archive.h"
#include "ledger/test_deposit.h"

namespace gpuhub::engine {
namespace {

class WalletsTest : public EngineOnSqliteTest {
 protected:
  WalletsTest() : EngineOnSqliteTest(1'700'000'000'000'000, "gpuhub_wallets") {}
  void SetUp() override {
    Open();
    user_ = Run<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, "wendy", "h", kRoleCustomer));
      GPUHUB_RETURN_IF_ERROR(CreateUser(txn, "admin", "h", kRoleAdmin).status());
      return u.id;
    });
  }
  void Open() { OpenEngine({}, AddTopupTickHooks); }
  std::int64_t Available(Currency c) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(auto w, txn.state.wallets->ledger.Wallets(user_));
      return w[static_cast<int>(c)].available();
    });
  }

  std::int64_t user_ = 0;
};

TEST_F(WalletsTest, ParsesTopupAmounts) {
  EXPECT_EQ(ParseTopupAmount("100.00").value(), 100'000'000);
  EXPECT_EQ(ParseTopupAmount("1").value(), 1'000'000);
  for (const char* bad : {"0.99", "100000.01", "1.001", "-1", "1e3", "", " 5"}) {
    EXPECT_EQ(ParseTopupAmount(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(WalletsTest, ASettledInvoiceCreditsOnceAndSurvivesARestart) {
  Invoice inv =
      Run<Invoice>([&](Txn& txn) { return CreateTopup(txn, user_, Currency::kEur, 25'500'000); });
  EXPECT_EQ(inv.id.size(), 4u + 24u);
  EXPECT_EQ(inv.status, InvoiceStatus::kNew);
  for (int i = 0; i < 3; ++i) {
    auto outcome = Run<PaymentEventOutcome>(
        [&](Txn& txn) { return ApplyPaymentEvent(txn, "InvoiceSettled", inv.id); });
    EXPECT_EQ(outcome.credited, i == 0);
    EXPECT_EQ(outcome.invoice.status, InvoiceStatus::kSettled);
  }
  EXPECT_EQ(Available(Currency::kEur), 25'500'000);
  Open();
  EXPECT_EQ(Available(Currency::kEur), 25'500'000);
  auto again = Run<PaymentEventOutcome>(
      [&](Txn& txn) { return ApplyPaymentEvent(txn, "InvoiceSettled", inv.id); });
  EXPECT_FALSE(again.credited);
  EXPECT_EQ(Available(Currency::kEur), 25'500'000);
  auto missing = engine_->ExecuteSync<PaymentEventOutcome>(
      [&](Txn& txn) { return ApplyPaymentEvent(txn, "InvoiceSettled", "inv_nope"); });
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// The account totals are written at checkpoints (here every 4 transfers: half of a window of 8),
// not in every commit; a start replays the transfers after the last checkpoint onto them.
TEST_F(WalletsTest, TotalsAreCheckpointedAndAStartReplaysTheTransfersAfterThem) {
  EngineOptions small;
  small.domains.ledger_transfers_in_memory = 8;
  OpenEngine(small, AddTopupTickHooks);
  auto marker = [&] { return StoredLedgerAccountsThrough(url_); };
  auto credit = [&](std::int64_t micros) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, 2, user_, Currency::kUsd, micros, "wire").status());
      return 0;
    });
  };
  std::int64_t total = 0;
  for (int i = 1; i <= 6; ++i) {
    credit(i * 1'000'000);
    total += i * 1'000'000;
    // Transfers 1-3 wait for the checkpoint at 4; 5 and 6 for the next one at 8.
    EXPECT_EQ(marker(), i < 4 ? -1 : 4) << "after transfer " << i;
  }
  OpenEngine(small, AddTopupTickHooks);
  EXPECT_EQ(Available(Currency::kUsd), total);
  // The replayed accounts are written at the next checkpoint, and a start from it agrees.
  credit(7'000'000);
  credit(8'000'000);
  total += 15'000'000;
  EXPECT_EQ(marker(), 8);
  OpenEngine(small, AddTopupTickHooks);
  EXPECT_EQ(Available(Currency::kUsd), total);
  auto ok = Run<std::string>([](Txn& txn) -> Result<std::string> {
    return txn.state.wallets->ledger.CheckInvariants().ToString();
  });
  EXPECT_EQ(ok, "ok");
}

TEST_F(WalletsTest, ConvertsAtTheRateWithSpreadAndRefusesOverdrafts) {
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(
        ManualCredit(txn, 2, user_, Currency::kUsd, 108'000'000, "wire").status());
    GPUHUB_RETURN_IF_ERROR(
        SetFxRate(txn, Currency::kEur, Currency::kUsd, 1'080'000'000, 100).status());
    return 0;
  });
  Conversion c = Run<Conversion>(
      [&](Txn& txn) { return Convert(txn, user_, Currency::kUsd, Currency::kEur, 54'000'000); });
  // 54 USD / 1.08 = 50 EUR, minus 1% = 49.5 EUR.
  EXPECT_EQ(c.quote.to_micros, 49'500'000);
  ASSERT_EQ(c.transfers.size(), 2u);
  EXPECT_EQ(c.transfers[0].id, "fx:2:out");
  EXPECT_EQ(c.transfers[1].id, "fx:2:in");
  EXPECT_EQ(Available(Currency::kUsd), 54'000'000);
  EXPECT_EQ(Available(Currency::kEur), 49'500'000);
  auto overdraft = engine_->ExecuteSync<Conversion>(
      [&](Txn& txn) { return Convert(txn, user_, Currency::kUsd, Currency::kEur, 55'000'000); });
  EXPECT_EQ(overdraft.status().code(), StatusCode::kInsufficientFunds);
  auto no_rate = engine_->ExecuteSync<Conversion>(
      [&](Txn& txn) { return Convert(txn, user_, Currency::kUsd, Currency::kGbp, 1'000'000); });
  EXPECT_EQ(no_rate.status().code(), StatusCode::kFailedPrecondition);
  Open();  // the FX table and the transfers come back
  EXPECT_EQ(Available(Currency::kEur), 49'500'000);
  EXPECT_TRUE(Run<int>([](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(txn.state.wallets->ledger.CheckHistory());
    return txn.state.wallets->ledger.Fx().Find(Currency::kUsd, Currency::kEur) ? 1 : 0;
  }));
}

TEST_F(WalletsTest, InvoicesExpireAndOpenOnesAreLimited) {
  for (std::size_t i = 0; i < kMaxOpenInvoicesPerUser; ++i) {
    Run<Invoice>([&](Txn& txn) { return CreateTopup(txn, user_, Currency::kUsd, 1'000'000); });
  }
  auto over = engine_->ExecuteSync<Invoice>(
      [&](Txn& txn) { return CreateTopup(txn, user_, Currency::kUsd, 1'000'000); });
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  clock_.Advance(kInvoiceLifetimeMicros);
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(engine_->RunTickHooks(txn));
    return 0;
  });
  auto list = Run<std::vector<Invoice>>(
      [&](Txn& txn) -> Result<std::vector<Invoice>> { return ListTopups(txn, user_, 100); });
  ASSERT_EQ(list.size(), kMaxOpenInvoicesPerUser);
  for (const auto& inv : list) EXPECT_EQ(inv.status, InvoiceStatus::kExpired);
  EXPECT_TRUE(engine_
                  ->ExecuteSync<Invoice>(
                      [&](Txn& txn) { return CreateTopup(txn, user_, Currency::kUsd, 1'000'000); })
                  .ok());
  // Other users cannot read the invoice.
  auto other =
      engine_->ExecuteSync<Invoice>([&](Txn& txn) { return GetTopup(txn, user_ + 1, list[0].id); });
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
}

// A database written before migration 14: pending transfers' rows still say "pending" after they
// were posted or voided, and no totals are stored. The migration computes the totals and the
// states from the history, and the next start takes the fast path (persisted totals) to the same
// books.
TEST(LedgerMigration, Migration14BuildsTheTotalsAndStatesFromHistory) {
  std::filesystem::path dir;
  const std::string url = FreshSqliteUrl("gpuhub_ledger_migration", "old.db", &dir);
  auto opened = store::OpenStore(url);
  ASSERT_TRUE(opened.ok());
  std::unique_ptr<store::Store> store = std::move(opened).value();
  ASSERT_TRUE(store->Migrate(13).ok());
  ledger::Ledger ledger;
  const TimestampMicros at = 1'700'000'000'000'000;
  store::WriteBatch rows;
  auto keep = [&](const ledger::BatchResult& r) {
    ASSERT_TRUE(r.ok()) << r.message;
    for (ledger::Transfer t : r.transfers) {
      if (t.kind == ledger::TransferKind::kPending) t.state = ledger::TransferState::kPending;
      WriteTransferRow(rows, t, false);  // as the old version wrote them: never updated
    }
  };
  using ledger::AccountKey;
  using ledger::TransferKind;
  for (std::int64_t user = 1; user <= 4; ++user) {
    keep(ledger::Deposit(ledger, user, 100'000'000 * user, Currency::kUsd,
                         "topup:" + std::to_string(user), at));
    keep(ledger::Deposit(ledger, user, 7'000'000, Currency::kEur,
                         "topup:eur:" + std::to_string(user), at));
    for (int h = 0; h < 3; ++h) {
      ledger::TransferRequest hold;
      hold.id = "hold:" + std::to_string(user) + ":" + std::to_string(h);
      hold.kind = TransferKind::kPending;
      hold.debit = AccountKey::Wallet(user, Currency::kUsd);
      hold.credit = AccountKey::System(ledger::AccountKind::kHolds, Currency::kUsd);
      hold.amount_micros = 3'000'000;
      hold.code = "bid_hold";
      hold.timestamp = at;
      keep(ledger.Apply(hold));
      if (h == 2) continue;  // stays open
      ledger::TransferRequest resolve;
      resolve.id = hold.id + ":done";
      resolve.kind = h == 0 ? TransferKind::kPostPending : TransferKind::kVoidPending;
      resolve.pending_id = hold.id;
      resolve.amount_micros = h == 0 ? 2'000'000 : 0;  // posted for less
      resolve.code = "bid_fill";
      resolve.timestamp = at;
      keep(ledger.Apply(resolve));
    }
  }
  ASSERT_TRUE(store->Apply(rows).ok());
  ASSERT_TRUE(store->Migrate().ok());

  std::vector<ledger::AccountBalance> stored;
  ASSERT_TRUE(store
                  ->Scan("ledger_accounts", AccountColumns(), "kind, owner_id, currency",
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(ledger::AccountBalance b, AccountFromRow(row));
                           stored.push_back(b);
                           return Status::Ok();
                         })
                  .ok());
  std::sort(stored.begin(), stored.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
  EXPECT_EQ(stored, ledger.Accounts());
  ASSERT_TRUE(store
                  ->Scan("ledger_transfers", TransferColumns(), "sequence",
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(auto t, TransferFromRow(row));
                           EXPECT_EQ(t.state, ledger.FindTransfer(t.id)->state) << t.id;
                           return Status::Ok();
                         })
                  .ok());
  auto state = LoadState(*store);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  const ledger::Ledger& loaded = (*state)->wallets->ledger;
  EXPECT_EQ(loaded.Accounts(), ledger.Accounts());
  EXPECT_EQ(loaded.LastSequence(), ledger.LastSequence());
  EXPECT_TRUE(loaded.CheckHistory().ok()) << loaded.CheckHistory().ToString();
  EXPECT_EQ(loaded.FindTransfer("hold:3:2")->state, ledger::TransferState::kPending);
  EXPECT_EQ(loaded.FindTransfer("hold:3:0")->state, ledger::TransferState::kPosted);
  state->reset();
  store.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace gpuhub::engine
