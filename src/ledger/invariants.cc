// Ledger: the invariants of the state in memory and of the whole history, checked by replay.
#include "ledger/ledger.h"

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ledger/ledger_internal.h"

namespace gpuhub::ledger {

Status Ledger::CheckInvariants() const {
  auto broken = [](std::string what) { return Status::Internal("ledger invariant: " + what); };
  if (transfer_index_.size() != transfers_.size() + pinned_.size()) {
    return broken(std::to_string(transfers_.size() + pinned_.size()) + " transfers but " +
                  std::to_string(transfer_index_.size()) + " ids");
  }
  if (account_index_.size() != accounts_.size()) return broken("account index out of step");
  if (first_sequence_ < 1 ||
      (!transfers_.empty() && (transfers_.front().sequence != first_sequence_ ||
                               transfers_.back().sequence != LastSequence()))) {
    return broken("the window's sequences do not match its bounds");
  }
  if (!pinned_.empty() && pinned_.rbegin()->first >= first_sequence_) {
    return broken("a pinned pending transfer is inside the window");
  }

  // What the open pending transfers account for, per account.
  std::vector<std::pair<Wide, Wide>> open(accounts_.size());  // debits, credits
  for (std::int64_t sequence : open_pending_) {
    if (sequence > LastSequence() || (sequence < first_sequence_ && !pinned_.contains(sequence))) {
      return broken("open pending transfer #" + std::to_string(sequence) + " is not in memory");
    }
    const Transfer& p = At(sequence);
    if (p.kind != TransferKind::kPending || p.state != TransferState::kPending) {
      return broken("transfer " + Quoted(p.id) + " is listed as open but is not pending");
    }
    auto d = account_index_.find(p.debit);
    auto c = account_index_.find(p.credit);
    if (d == account_index_.end() || c == account_index_.end()) {
      return broken("pending transfer " + Quoted(p.id) + " names an unknown account");
    }
    open[d->second].first += p.amount_micros;
    open[c->second].second += p.amount_micros;
  }

  Wide debits_posted[kCurrencyCount] = {};
  Wide credits_posted[kCurrencyCount] = {};
  Wide debits_pending[kCurrencyCount] = {};
  Wide credits_pending[kCurrencyCount] = {};
  for (std::size_t i = 0; i < accounts_.size(); ++i) {
    const AccountBalance& b = accounts_[i].balance;
    auto name = [&] { return AccountKeyName(b.key); };
    if (!ValidateAccountKey(b.key).ok()) return broken("invalid account key " + name());
    if (b.debits_posted < 0 || b.credits_posted < 0 || b.debits_pending < 0 ||
        b.credits_pending < 0) {
      return broken(name() + " has a negative total");
    }
    if (Wide{b.debits_posted} + b.debits_pending > kInt64Max ||
        Wide{b.credits_posted} + b.credits_pending > kInt64Max) {
      return broken(name() + " totals overflow");
    }
    if (DebitsMustNotExceedCredits(b.key.kind)) {
      if (b.debits_posted > b.credits_posted) return broken(name() + " is below zero");
      if (Wide{b.debits_posted} + b.debits_pending > b.credits_posted) {
        return broken(name() + " holds " + FormatMicros(b.debits_pending) + " but only " +
                      FormatMicros(b.posted()) + " is there");
      }
    }
    if (open[i].first != b.debits_pending || open[i].second != b.credits_pending) {
      return broken(name() + " pending totals do not match its open pending transfers");
    }
    const auto c = static_cast<std::size_t>(b.key.currency);
    debits_posted[c] += b.debits_posted;
    credits_posted[c] += b.credits_posted;
    debits_pending[c] += b.debits_pending;
    credits_pending[c] += b.credits_pending;
  }
  for (int c = 0; c < kCurrencyCount; ++c) {
    const std::string code(CurrencyCode(kAllCurrencies[c]));
    if (debits_posted[c] != credits_posted[c]) {
      return broken(code + " posted debits differ from posted credits");
    }
    if (debits_pending[c] != credits_pending[c]) {
      return broken(code + " pending debits differ from pending credits");
    }
  }
  return Status::Ok();
}

Status Ledger::CheckHistory() const {
  auto broken = [](std::string what) { return Status::Internal("ledger history: " + what); };
  std::map<AccountKey, AccountBalance> totals;
  std::map<AccountKey, std::vector<std::int64_t>> histories;  // of the window
  std::map<std::int64_t, std::vector<std::int64_t>> owners;   // of the window
  // Pending transfers open at this point of the replay: memory is bounded by the open holds, not
  // by the length of history.
  struct Open {
    std::int64_t sequence;
    AccountKey debit, credit;
    std::int64_t amount_micros;
    TransferState recorded;  // the state its record says it ended in
  };
  std::unordered_map<std::string, Open> open;
  // The state each transfer in memory (window or pinned) must have, from the replay.
  std::unordered_map<std::int64_t, TransferState> derived;
  auto in_memory = [&](std::int64_t sequence) {
    return sequence >= first_sequence_ || pinned_.contains(sequence);
  };
  std::int64_t expected = 1;
  auto replay = [&](const Transfer& t) -> Status {
    const std::string where = "transfer " + Quoted(t.id) + ": ";
    if (t.sequence != expected++) return broken(where + "bad sequence");
    if (in_memory(t.sequence)) {
      auto idx = transfer_index_.find(t.id);
      if (idx == transfer_index_.end() || idx->second != t.sequence) {
        return broken(where + "not indexed");
      }
    }
    if (t.debit.currency != t.credit.currency || t.debit == t.credit || t.amount_micros < 0) {
      return broken(where + "malformed");
    }
    AccountBalance& d = totals[t.debit];
    AccountBalance& c = totals[t.credit];
    d.key = t.debit;
    c.key = t.credit;
    switch (t.kind) {
      case TransferKind::kSinglePhase:
        d.debits_posted += t.amount_micros;
        c.credits_posted += t.amount_micros;
        if (in_memory(t.sequence)) derived[t.sequence] = TransferState::kPosted;
        break;
      case TransferKind::kPending:
        d.debits_pending += t.amount_micros;
        c.credits_pending += t.amount_micros;
        if (in_memory(t.sequence)) derived[t.sequence] = TransferState::kPending;
        if (!open.emplace(t.id, Open{t.sequence, t.debit, t.credit, t.amount_micros, t.state})
                 .second) {
          return broken(where + "id used twice");
        }
        break;
      case TransferKind::kPostPending:
      case TransferKind::kVoidPending: {
        auto p = open.find(t.pending_id);
        if (p == open.end()) {
          return broken(where + "resolves a transfer that is not an earlier open pending one");
        }
        const Open& pending = p->second;
        if (pending.debit != t.debit || pending.credit != t.credit) {
          return broken(where + "accounts differ from its pending transfer");
        }
        const bool post = t.kind == TransferKind::kPostPending;
        if (post ? t.amount_micros > pending.amount_micros
                 : t.amount_micros != pending.amount_micros) {
          return broken(where + "amount does not fit its pending transfer");
        }
        d.debits_pending -= pending.amount_micros;
        c.credits_pending -= pending.amount_micros;
        if (post) {
          d.debits_posted += t.amount_micros;
          c.credits_posted += t.amount_micros;
        }
        const TransferState state = post ? TransferState::kPosted : TransferState::kVoided;
        if (in_memory(pending.sequence)) {
          derived[pending.sequence] = state;
        } else if (pending.recorded != state) {
          return broken("archived transfer " + Quoted(p->first) + " is recorded " +
                        std::string(TransferStateName(pending.recorded)) + ", history says " +
                        std::string(TransferStateName(state)));
        }
        if (in_memory(t.sequence)) derived[t.sequence] = state;
        open.erase(p);
        break;
      }
    }
    if (t.sequence >= first_sequence_) {
      histories[t.debit].push_back(t.sequence);
      histories[t.credit].push_back(t.sequence);
      if (t.debit.owner_id != 0) owners[t.debit.owner_id].push_back(t.sequence);
      if (t.credit.owner_id != 0 && t.credit.owner_id != t.debit.owner_id) {
        owners[t.credit.owner_id].push_back(t.sequence);
      }
    }
    return Status::Ok();
  };
  if (first_sequence_ > 1) {
    if (archive_ == nullptr) {
      return Status::FailedPrecondition("ledger history: transfers before sequence " +
                                        std::to_string(first_sequence_) +
                                        " are not in memory and no archive is set");
    }
    GPUHUB_RETURN_IF_ERROR(archive_->ScanBefore(first_sequence_, [&](const Transfer& t) -> Status {
      if (pinned_.contains(t.sequence) && pinned_.at(t.sequence).id != t.id) {
        return broken("pinned transfer #" + std::to_string(t.sequence) +
                      " differs from the archive");
      }
      return replay(t);
    }));
    if (expected != first_sequence_) return broken("the archive ends before the window starts");
  }
  for (const Transfer& t : transfers_) GPUHUB_RETURN_IF_ERROR(replay(t));
  for (const Transfer& t : transfers_) {
    if (t.state != derived.at(t.sequence)) {
      return broken("transfer " + Quoted(t.id) + " is " + std::string(TransferStateName(t.state)) +
                    ", history says " + std::string(TransferStateName(derived.at(t.sequence))));
    }
  }
  for (const auto& [sequence, t] : pinned_) {
    if (t.state != derived.at(sequence)) {
      return broken("pinned transfer " + Quoted(t.id) + " state");
    }
  }
  std::unordered_set<std::int64_t> still_open;
  for (const auto& [id, p] : open) {
    if (!in_memory(p.sequence) && p.recorded != TransferState::kPending) {
      return broken("archived transfer " + Quoted(id) + " is open but recorded " +
                    std::string(TransferStateName(p.recorded)));
    }
    still_open.insert(p.sequence);
  }
  if (still_open != open_pending_) return broken("open pending set differs from history");
  if (totals.size() != accounts_.size()) return broken("account count differs from history");
  for (const auto& [key, balance] : totals) {
    const AccountState* a = FindAccount(key);
    if (a == nullptr) return broken(AccountKeyName(key) + " missing");
    if (!(a->balance == balance))
      return broken(AccountKeyName(key) + " totals differ from history");
    auto h = histories.find(key);
    if (a->history != (h == histories.end() ? std::vector<std::int64_t>{} : h->second)) {
      return broken(AccountKeyName(key) + " history differs");
    }
  }
  if (owners.size() != owner_history_.size()) return broken("owner count differs from history");
  for (const auto& [owner, sequences] : owners) {
    auto it = owner_history_.find(owner);
    if (it == owner_history_.end() || it->second != sequences) {
      return broken("owner " + std::to_string(owner) + " history differs");
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::ledger
