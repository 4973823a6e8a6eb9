// The ledger's archive in the store: the transfers Ledger::Forget dropped from memory are rows of
// ledger_transfers, read back by id, by sequence and by owner (indexes of migration 14).
//
// Contract: the store is the engine's (the writer thread's) and must outlive the archive; every
// call is one query on it, from the writer thread (the ledger's owner). Rows are read as
// WriteTransferRow wrote them.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "ledger/archive.h"
#include "ledger/ledger.h"
#include "store/store.h"

namespace gpuhub::store {
class ReadPool;
}

namespace gpuhub::engine {

// The columns of ledger_transfers, in the order TransferFromRow reads them.
const std::vector<std::string>& TransferColumns();
Result<ledger::Transfer> TransferFromRow(const store::Row& row);
// The columns of ledger_accounts (an account's persisted totals), in the order AccountFromRow
// reads them; the first three are the key.
const std::vector<std::string>& AccountColumns();
Result<ledger::AccountBalance> AccountFromRow(const store::Row& row);
// Queues the upsert of an account's totals.
void WriteAccountRow(store::WriteBatch& writes, const ledger::AccountBalance& account);

// Queues the row of `t` (insert: a new transfer; upsert: the whole row again).
void WriteTransferRow(store::WriteBatch& writes, const ledger::Transfer& t, bool upsert);
// Queues a stored pending transfer's new state (posted or voided), and nothing else of its row.
void WriteTransferState(store::WriteBatch& writes, const ledger::Transfer& t);

// The reads of the ledger's history (tests check their plans use the indexes of migration 14):
// start-up's open holds and newest transfers, one transfer by id, and one side (debit or credit)
// of an owner's or an account's page, newest first below before_sequence.
store::Select OpenPendingTransfersSelect();
store::Select TransfersAfterSelect(std::int64_t after_sequence);
store::Select TransferByIdSelect(std::string_view id);
store::Select OwnerSideSelect(std::string_view side, std::int64_t owner_id,
                              std::int64_t before_sequence, std::size_t limit);
store::Select AccountSideSelect(std::string_view side, const ledger::AccountKey& key,
                                std::int64_t before_sequence, std::size_t limit);

// One page of an owner's transfers (wallets and payables, both sides), newest first, with sequence
// < before_sequence (0: from the newest), read beside the writer (GET /v1/transfers): the same
// page as Ledger::ListOwnerTransfers.
Result<ledger::TransferPage> ReadOwnerTransfers(store::ReadPool& pool, std::int64_t owner_id,
                                                std::int64_t before_sequence, std::size_t limit);

class StoreTransferArchive : public ledger::TransferArchive {
 public:
  explicit StoreTransferArchive(store::Store& store) : store_(store) {}
  // Every read holds `store_mutex` (the engine's: its committer holds it for the length of a
  // commit on the same store, whose connection serves one caller at a time). Null: no lock.
  void SerializeWith(std::recursive_mutex* store_mutex) { store_mutex_ = store_mutex; }

  Result<std::optional<ledger::Transfer>> Find(std::string_view id) const override;
  Status ScanBefore(std::int64_t before_sequence,
                    const std::function<Status(const ledger::Transfer&)>& fn) const override;
  Result<std::vector<ledger::Transfer>> AccountPage(const ledger::AccountKey& key,
                                                    std::int64_t before_sequence,
                                                    std::size_t limit) const override;
  Result<std::vector<ledger::Transfer>> OwnerPage(std::int64_t owner_id,
                                                  std::int64_t before_sequence,
                                                  std::size_t limit) const override;

 private:
  std::unique_lock<std::recursive_mutex> LockStore() const {
    return store_mutex_ ? std::unique_lock<std::recursive_mutex>(*store_mutex_)
                        : std::unique_lock<std::recursive_mutex>();
  }
  store::Store& store_;
  std::recursive_mutex* store_mutex_ = nullptr;
};

}  // namespace gpuhub::engine
