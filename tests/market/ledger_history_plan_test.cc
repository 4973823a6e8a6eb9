// The ledger's reads of history use their indexes, on SQLite and PostgreSQL: start-up's open holds
// and newest transfers, a forgotten transfer by id, and both sides of an owner's or an account's
// history page (migration 14). The database's own plan is read (SQLite EXPLAIN QUERY PLAN,
// PostgreSQL EXPLAIN) on a table filled like a real one (40,000 transfers of 400 owners, a few
// holds open) and analyzed; no planner setting is changed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ledger_archive.h"
#include "store/read_pool.h"
#include "store/store.h"
#include "store/test_databases.h"
#include "store/test_plans.h"

namespace gpuhub::engine {
namespace {

constexpr int kOwners = 400;
constexpr int kTransfers = 40'000;
constexpr int kOpenEvery = 997;

class LedgerHistoryPlanTest : public store::FreshDatabaseTest {
 protected:
  void SetUp() override {
    store::FreshDatabaseTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    store::WriteBatch batch;
    for (int i = 1; i <= kTransfers; ++i) {
      ledger::Transfer t;
      t.sequence = i;
      t.id = "t:" + std::to_string(i);
      const bool hold = i % 3 == 0;
      t.kind = hold ? ledger::TransferKind::kPending : ledger::TransferKind::kSinglePhase;
      t.state = hold && i % kOpenEvery != 0 ? ledger::TransferState::kVoided
                : hold                      ? ledger::TransferState::kPending
                                            : ledger::TransferState::kPosted;
      t.debit = ledger::AccountKey::Wallet(1 + i % kOwners, Currency::kUsd);
      t.credit = hold ? ledger::AccountKey::System(ledger::AccountKind::kHolds, Currency::kUsd)
                      : ledger::AccountKey::Payable(1 + (i * 7) % kOwners, Currency::kUsd);
      t.amount_micros = 1'000'000;
      t.code = "lease_hour";
      t.timestamp = i;
      WriteTransferRow(batch, t, false);
      if (i % 5'000 == 0) {
        ASSERT_TRUE(store_->Apply(batch).ok());
        batch.Clear();
      }
    }
    store::AnalyzeIfPostgres(GetParam(), url_);
  }

  // The plan names the index (SQLite's or PostgreSQL's name for it), scans no table and sorts
  // nothing (plan_checks.h); the query returns `rows` rows.
  void ExpectIndexed(const store::Select& select, const std::string& sqlite_index,
                     const std::string& postgres_index, int rows) {
    EXPECT_EQ(store::ExpectPlanUsesIndex(GetParam(), url_, select,
                                         GetParam() == "sqlite" ? sqlite_index : postgres_index),
              rows);
  }

};

TEST_P(LedgerHistoryPlanTest, StartUpReadsOnlyOpenHoldsAndTheNewestTransfers) {
  // A partial index of the open holds only (migration 16): walking it reads just them.
  EXPECT_EQ(store::ExpectPlanUsesIndex(GetParam(), url_, OpenPendingTransfersSelect(),
                                       "ledger_transfers_open", true, /*partial=*/true),
            kTransfers / (3 * kOpenEvery));
  ExpectIndexed(TransfersAfterSelect(kTransfers - 100), "sqlite_autoindex_ledger_transfers_1",
                "ledger_transfers_pkey", 100);
}

TEST_P(LedgerHistoryPlanTest, ForgottenTransfersAndHistoryPagesWalkTheirIndexes) {
  ExpectIndexed(TransferByIdSelect("t:12345"), "sqlite_autoindex_ledger_transfers_2",
                "ledger_transfers_id_key", 1);
  ExpectIndexed(OwnerSideSelect("debit", 7, kTransfers / 2, 50), "ledger_transfers_by_debit_owner",
                "ledger_transfers_by_debit_owner", 50);
  ExpectIndexed(OwnerSideSelect("credit", 7, kTransfers, 50), "ledger_transfers_by_credit_owner",
                "ledger_transfers_by_credit_owner", 50);
  ExpectIndexed(
      AccountSideSelect("debit", ledger::AccountKey::Wallet(7, Currency::kUsd), kTransfers, 20),
      "ledger_transfers_by_debit_owner", "ledger_transfers_by_debit_owner", 20);
}

INSTANTIATE_TEST_SUITE_P(Databases, LedgerHistoryPlanTest,
                         ::testing::Values("sqlite", "postgresql"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace gpuhub::engine
