// For tests: a TransferArchive in memory that keeps what a ledger handed out the way the store does
// (every record once; a post/void also updates the state of the pending transfer it resolves), so
// that a ledger may Forget() and still answer for its history. Not for production code.
#pragma once

#include <map>
#include <string>
#include <unordered_map>

#include "ledger/archive.h"

namespace gpuhub::ledger {

class MemoryArchive : public TransferArchive {
 public:
  // Records handed out by ApplyBatch (kOk), in sequence order.
  void Add(const Transfer& t) {
    by_sequence_[t.sequence] = t;
    ids_[t.id] = t.sequence;
    if (t.kind == TransferKind::kPostPending || t.kind == TransferKind::kVoidPending) {
      by_sequence_.at(ids_.at(t.pending_id)).state =
          t.kind == TransferKind::kPostPending ? TransferState::kPosted : TransferState::kVoided;
    }
  }
  // Adds every transfer of `transfers` newer than the last one added.
  template <typename Range>
  void AddNewer(const Range& transfers) {
    for (const Transfer& t : transfers) {
      if (t.sequence > last_sequence()) Add(t);
    }
  }
  std::int64_t last_sequence() const {
    return by_sequence_.empty() ? 0 : by_sequence_.rbegin()->first;
  }
  const std::map<std::int64_t, Transfer>& all() const { return by_sequence_; }
  // How many times the ledger asked (any method).
  int asked() const { return asked_; }

  Result<std::optional<Transfer>> Find(std::string_view id) const override {
    ++asked_;
    auto it = ids_.find(std::string(id));
    if (it == ids_.end()) return std::optional<Transfer>();
    return std::optional<Transfer>(by_sequence_.at(it->second));
  }
  Status ScanBefore(std::int64_t before_sequence,
                    const std::function<Status(const Transfer&)>& fn) const override {
    ++asked_;
    for (auto it = by_sequence_.begin(); it != by_sequence_.end() && it->first < before_sequence;
         ++it) {
      GPUHUB_RETURN_IF_ERROR(fn(it->second));
    }
    return Status::Ok();
  }
  Result<std::vector<Transfer>> AccountPage(const AccountKey& key, std::int64_t before_sequence,
                                            std::size_t limit) const override {
    return Newest(before_sequence, limit,
                  [&](const Transfer& t) { return t.debit == key || t.credit == key; });
  }
  Result<std::vector<Transfer>> OwnerPage(std::int64_t owner_id, std::int64_t before_sequence,
                                          std::size_t limit) const override {
    return Newest(before_sequence, limit, [&](const Transfer& t) {
      return t.debit.owner_id == owner_id || t.credit.owner_id == owner_id;
    });
  }

 private:
  template <typename Match>
  std::vector<Transfer> Newest(std::int64_t before_sequence, std::size_t limit,
                               Match&& match) const {
    ++asked_;
    std::vector<Transfer> out;
    for (auto it = std::make_reverse_iterator(by_sequence_.lower_bound(before_sequence));
         it != by_sequence_.rend() && out.size() < limit; ++it) {
      if (match(it->second)) out.push_back(it->second);
    }
    return out;
  }

  std::map<std::int64_t, Transfer> by_sequence_;
  std::unordered_map<std::string, std::int64_t> ids_;
  mutable int asked_ = 0;
};

}  // namespace gpuhub::ledger
