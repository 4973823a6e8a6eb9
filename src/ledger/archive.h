// Where the transfers the ledger no longer keeps in memory are found again.
//
// The ledger keeps the newest transfers and every open pending transfer in memory; Ledger::Forget
// drops the older ones once they are durable. In production the archive is the store (every
// transfer is a row of ledger_transfers, engine/ledger_archive.h); tests use an in-memory fake.
//
// Contract
// - Read-only, and consistent with the ledger: it holds every transfer the ledger forgot, with its
//   current state (a pending transfer resolved since reads "posted" or "voided").
// - Errors are the archive's own (a database that went away: `unavailable`); the ledger passes them
//   on, it never guesses.
// - Called only from the thread that owns the ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "ledger/types.h"

namespace gpuhub::ledger {

class TransferArchive {
 public:
  virtual ~TransferArchive() = default;

  // The transfer with this id, or nullopt.
  virtual Result<std::optional<Transfer>> Find(std::string_view id) const = 0;
  // Every transfer with sequence < before_sequence, ascending, to `fn`; stops at its first error.
  virtual Status ScanBefore(std::int64_t before_sequence,
                            const std::function<Status(const Transfer&)>& fn) const = 0;
  // Newest first, sequence < before_sequence, at most `limit`: the transfers whose debit or credit
  // is `key` (AccountPage), or whose debit or credit belongs to owner_id (OwnerPage; a transfer
  // between two accounts of the owner once).
  virtual Result<std::vector<Transfer>> AccountPage(const AccountKey& key,
                                                    std::int64_t before_sequence,
                                                    std::size_t limit) const = 0;
  virtual Result<std::vector<Transfer>> OwnerPage(std::int64_t owner_id,
                                                  std::int64_t before_sequence,
                                                  std::size_t limit) const = 0;
};

}  // namespace gpuhub::ledger
