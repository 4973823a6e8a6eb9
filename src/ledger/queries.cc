// Ledger: reading balances, transfers and history pages (from memory, else the archive).
#include "ledger/ledger.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ledger/ledger_internal.h"

namespace gpuhub::ledger {

Result<AccountBalance> Ledger::GetAccount(const AccountKey& key) const {
  GPUHUB_RETURN_IF_ERROR(ValidateAccountKey(key));
  if (const AccountState* a = FindAccount(key)) return a->balance;
  AccountBalance zero;
  zero.key = key;
  return zero;
}

Result<std::array<AccountBalance, kCurrencyCount>> Ledger::Wallets(std::int64_t user_id) const {
  if (user_id <= 0) {
    return Status::InvalidArgument("user id must be > 0, got " + std::to_string(user_id));
  }
  std::array<AccountBalance, kCurrencyCount> out;
  for (int i = 0; i < kCurrencyCount; ++i) {
    GPUHUB_ASSIGN_OR_RETURN(out[i], GetAccount(AccountKey::Wallet(user_id, kAllCurrencies[i])));
  }
  return out;
}

Result<Transfer> Ledger::FindTransfer(std::string_view id) const {
  auto it = transfer_index_.find(std::string(id));
  if (it != transfer_index_.end()) return At(it->second);
  if (archive_ != nullptr) {
    GPUHUB_ASSIGN_OR_RETURN(std::optional<Transfer> archived, archive_->Find(id));
    if (archived) return std::move(*archived);
  }
  return Status::NotFound("no transfer with id " + Quoted(id));
}

Result<TransferPage> Ledger::Page(
    const std::vector<std::int64_t>& history, std::int64_t before_sequence, std::size_t limit,
    const std::function<Result<std::vector<Transfer>>(std::int64_t, std::size_t)>& older) const {
  if (before_sequence < 0) {
    return Status::InvalidArgument("cursor must be >= 0, got " + std::to_string(before_sequence));
  }
  if (limit == 0 || limit > kMaxTransfersPageSize) {
    return Status::InvalidArgument("page size must be 1.." + std::to_string(kMaxTransfersPageSize) +
                                   ", got " + std::to_string(limit));
  }
  auto end = before_sequence == 0
                 ? history.end()
                 : std::lower_bound(history.begin(), history.end(), before_sequence);
  const auto available = static_cast<std::size_t>(end - history.begin());
  const std::size_t count = std::min(limit, available);
  TransferPage page;
  page.transfers.reserve(count);
  for (std::size_t k = 0; k < count; ++k) {
    page.transfers.push_back(At(*(end - 1 - static_cast<std::ptrdiff_t>(k))));
  }
  bool more = available > count;
  if (!more && first_sequence_ > 1 && archive_ != nullptr) {
    // The window is exhausted: the rest (one more than needed, to know whether a page follows)
    // is in the archive, below the window and below the cursor.
    const std::int64_t below =
        before_sequence == 0 ? first_sequence_ : std::min(before_sequence, first_sequence_);
    GPUHUB_ASSIGN_OR_RETURN(std::vector<Transfer> rest, older(below, limit - count + 1));
    more = rest.size() > limit - count;
    for (std::size_t k = 0; k < rest.size() && page.transfers.size() < limit; ++k) {
      page.transfers.push_back(std::move(rest[k]));
    }
  }
  if (more) page.next_before_sequence = page.transfers.back().sequence;
  return page;
}

Result<TransferPage> Ledger::ListAccountTransfers(const AccountKey& key,
                                                  std::int64_t before_sequence,
                                                  std::size_t limit) const {
  GPUHUB_RETURN_IF_ERROR(ValidateAccountKey(key));
  static const std::vector<std::int64_t> kNone;
  const AccountState* a = FindAccount(key);
  return Page(a ? a->history : kNone, before_sequence, limit,
              [&](std::int64_t before, std::size_t n) {
                return archive_->AccountPage(key, before, n);
              });
}

Result<TransferPage> Ledger::ListOwnerTransfers(std::int64_t owner_id, std::int64_t before_sequence,
                                                std::size_t limit) const {
  if (owner_id <= 0) {
    return Status::InvalidArgument("owner id must be > 0, got " + std::to_string(owner_id));
  }
  static const std::vector<std::int64_t> kNone;
  auto it = owner_history_.find(owner_id);
  return Page(it == owner_history_.end() ? kNone : it->second, before_sequence, limit,
              [&](std::int64_t before, std::size_t n) {
                return archive_->OwnerPage(owner_id, before, n);
              });
}

std::vector<AccountBalance> Ledger::Accounts() const {
  std::vector<AccountBalance> out;
  out.reserve(accounts_.size());
  for (const AccountState& a : accounts_) out.push_back(a.balance);
  std::sort(out.begin(), out.end(),
            [](const AccountBalance& x, const AccountBalance& y) { return x.key < y.key; });
  return out;
}

Status Ledger::ForEachTransfer(const std::function<Status(const Transfer&)>& fn) const {
  if (first_sequence_ > 1) {
    if (archive_ == nullptr) {
      return Status::FailedPrecondition("transfers before sequence " +
                                        std::to_string(first_sequence_) +
                                        " are not in memory and no archive is set");
    }
    GPUHUB_RETURN_IF_ERROR(archive_->ScanBefore(first_sequence_, fn));
  }
  for (const Transfer& t : transfers_) GPUHUB_RETURN_IF_ERROR(fn(t));
  return Status::Ok();
}

}  // namespace gpuhub::ledger
