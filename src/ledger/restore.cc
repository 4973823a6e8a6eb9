// Ledger: rebuilding from stored transfers (all of history, or persisted totals with the open
// holds and the newest transfers), and forgetting transfers once they are durable.
#include "ledger/ledger.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ledger/ledger_internal.h"

namespace gpuhub::ledger {

namespace {

// The request that would have produced a stored record (its shape is checked like a request's).
TransferRequest RequestOf(const Transfer& t) {
  TransferRequest r;
  r.id = t.id;
  r.kind = t.kind;
  r.debit = t.debit;
  r.credit = t.credit;
  r.amount_micros = t.amount_micros;
  r.pending_id = t.pending_id;
  r.code = t.code;
  r.memo = t.memo;
  r.timestamp = t.timestamp;
  return r;
}

}  // namespace

Status Ledger::ReplayTransfer(Transfer t) {
  const std::string where =
      "transfer #" + std::to_string(LastSequence() + 1) + " (" + Quoted(t.id) + "): ";
  if (t.sequence != LastSequence() + 1) {
    return Status::Internal(where + "sequence " + std::to_string(t.sequence) + " out of order");
  }
  // The record must be something ApplyBatch could have produced: same shape rules as a request.
  std::string message;
  if (Validate(RequestOf(t), &message) != TransferResult::kOk) {
    return Status::Internal(where + message);
  }
  if (transfer_index_.contains(t.id)) return Status::Internal(where + "duplicate id");
  std::int64_t pending_sequence = 0;
  if (IsResolution(t.kind)) {
    auto it = transfer_index_.find(t.pending_id);
    if (it == transfer_index_.end()) {
      return Status::Internal(where + "pending transfer " + Quoted(t.pending_id) + " not found");
    }
    pending_sequence = it->second;
    const Transfer& p = At(pending_sequence);
    if (p.kind != TransferKind::kPending || p.state != TransferState::kPending) {
      return Status::Internal(where + "resolves " + Quoted(p.id) + ", which is not open");
    }
    if (p.debit != t.debit || p.credit != t.credit) {
      return Status::Internal(where + "accounts differ from its pending transfer");
    }
    if (t.kind == TransferKind::kPostPending ? t.amount_micros > p.amount_micros
                                             : t.amount_micros != p.amount_micros) {
      return Status::Internal(where + "amount does not fit its pending transfer");
    }
  } else {
    // Business limits are not re-checked, but int64 totals must not overflow.
    const AccountState* d = FindAccount(t.debit);
    const AccountState* c = FindAccount(t.credit);
    if (d &&
        Wide{d->balance.debits_posted} + d->balance.debits_pending + t.amount_micros > kInt64Max) {
      return Status::Internal(where + "debits overflow");
    }
    if (c && Wide{c->balance.credits_posted} + c->balance.credits_pending + t.amount_micros >
                 kInt64Max) {
      return Status::Internal(where + "credits overflow");
    }
  }
  t.state = InitialState(t.kind);
  Commit(std::move(t), pending_sequence, nullptr);
  return Status::Ok();
}

Result<Ledger> Ledger::Restore(std::vector<Transfer> transfers,
                               std::span<const FxRateChange> fx_changes) {
  Ledger ledger;
  for (const FxRateChange& change : fx_changes) {
    if (Status s = ledger.fx_.Apply(change); !s.ok()) {
      return Status::Internal("ledger restore: FX change #" + std::to_string(change.version) +
                              ": " + s.message());
    }
  }
  ledger.transfers_.reserve(transfers.size());
  for (Transfer& t : transfers) {
    if (Status s = ledger.ReplayTransfer(std::move(t)); !s.ok()) {
      return Status::Internal("ledger restore: " + s.message());
    }
  }
  if (Status s = ledger.CheckInvariants(); !s.ok()) {
    return Status::Internal("ledger restore: " + s.message());
  }
  if (Status s = ledger.CheckHistory(); !s.ok()) {
    return Status::Internal("ledger restore: " + s.message());
  }
  ledger.TakeChangedAccounts();  // as persisted
  return ledger;
}

// Totals as of an older checkpoint: the ledger as it was then (its holds open then: those still
// open that are older, and those the newer transfers resolve), then the newer transfers replayed
// onto it exactly as Restore replays history. Open holds must come out as the store lists them.
Result<Ledger> Ledger::RestoreFromCheckpoint(RestorePoint point, const TransferArchive* archive) {
  auto broken = [](const std::string& what) {
    return Status::Internal("ledger restore: " + what);
  };
  const std::int64_t through = point.accounts_through;
  const std::int64_t first =
      point.recent.empty() ? point.last_sequence + 1 : point.recent.front().sequence;
  if (through > point.last_sequence || through < first - 1) {
    return broken("the account totals (as of transfer #" + std::to_string(through) +
                  ") are not within the window of transfers #" + std::to_string(first) + "-#" +
                  std::to_string(point.last_sequence));
  }
  auto split = std::find_if(point.recent.begin(), point.recent.end(),
                            [&](const Transfer& t) { return t.sequence > through; });
  std::vector<Transfer> newer(std::make_move_iterator(split),
                              std::make_move_iterator(point.recent.end()));
  point.recent.erase(split, point.recent.end());
  std::unordered_map<std::string_view, const Transfer*> older_by_id;
  for (const Transfer& t : point.recent) older_by_id.emplace(t.id, &t);
  std::set<std::int64_t> open_now;
  RestorePoint then;
  then.last_sequence = through;
  then.accounts_through = through;
  then.accounts = std::move(point.accounts);
  then.fx_changes = point.fx_changes;
  for (Transfer& p : point.open_pending) {
    open_now.insert(p.sequence);
    if (p.sequence <= through) then.open_pending.push_back(std::move(p));
  }
  std::unordered_set<std::string_view> created_newer;
  for (const Transfer& t : newer) {
    created_newer.insert(t.id);
    if (!IsResolution(t.kind) || created_newer.contains(t.pending_id)) continue;
    Transfer pending;
    if (auto it = older_by_id.find(t.pending_id); it != older_by_id.end()) {
      pending = *it->second;
    } else {
      if (archive == nullptr) return broken("no archive to read " + Quoted(t.pending_id) + " from");
      GPUHUB_ASSIGN_OR_RETURN(std::optional<Transfer> archived, archive->Find(t.pending_id));
      if (!archived) return broken(Quoted(t.id) + " resolves an unknown " + Quoted(t.pending_id));
      pending = std::move(*archived);
    }
    pending.state = TransferState::kPending;
    then.open_pending.push_back(std::move(pending));
  }
  then.recent = std::move(point.recent);
  GPUHUB_ASSIGN_OR_RETURN(Ledger ledger, RestoreWindow(std::move(then), archive));
  for (Transfer& t : newer) {
    if (Status s = ledger.ReplayTransfer(std::move(t)); !s.ok()) return broken(s.message());
  }
  if (ledger.LastSequence() != point.last_sequence) {
    return broken("the recent transfers do not end at sequence " +
                  std::to_string(point.last_sequence));
  }
  std::set<std::int64_t> open_after(ledger.open_pending_.begin(), ledger.open_pending_.end());
  if (open_after != open_now) {
    return broken("the open holds after replaying transfers #" + std::to_string(through + 1) +
                  "-#" + std::to_string(point.last_sequence) + " are not those the store lists");
  }
  if (Status s = ledger.CheckInvariants(); !s.ok()) return broken(s.message());
  return ledger;
}

Result<Ledger> Ledger::RestoreWindow(RestorePoint point, const TransferArchive* archive) {
  auto broken = [](const std::string& what) {
    return Status::Internal("ledger restore: " + what);
  };
  if (point.accounts_through >= 0 && point.accounts_through != point.last_sequence) {
    return RestoreFromCheckpoint(std::move(point), archive);
  }
  Ledger ledger;
  for (const FxRateChange& change : point.fx_changes) {
    if (Status s = ledger.fx_.Apply(change); !s.ok()) {
      return broken("FX change #" + std::to_string(change.version) + ": " + s.message());
    }
  }
  if (point.last_sequence < 0) return broken("negative last sequence");
  for (const AccountBalance& b : point.accounts) {
    if (!ValidateAccountKey(b.key).ok()) return broken("invalid account " + AccountKeyName(b.key));
    auto [it, inserted] = ledger.account_index_.try_emplace(b.key, ledger.accounts_.size());
    if (!inserted) return broken("account " + AccountKeyName(b.key) + " twice");
    AccountState state;
    state.balance = b;
    ledger.accounts_.push_back(std::move(state));
  }
  // The window: contiguous records up to last_sequence, their states recomputed from it.
  ledger.first_sequence_ = point.recent.empty()
                               ? point.last_sequence + 1
                               : point.recent.front().sequence;
  if (ledger.first_sequence_ < 1 ||
      ledger.first_sequence_ + static_cast<std::int64_t>(point.recent.size()) - 1 !=
          point.last_sequence) {
    return broken("the recent transfers do not end at sequence " +
                  std::to_string(point.last_sequence));
  }
  ledger.transfers_ = std::move(point.recent);
  for (std::size_t i = 0; i < ledger.transfers_.size(); ++i) {
    Transfer& t = ledger.transfers_[i];
    const std::string where = "transfer " + Quoted(t.id) + ": ";
    if (t.sequence != ledger.first_sequence_ + static_cast<std::int64_t>(i)) {
      return broken(where + "sequence " + std::to_string(t.sequence) + " out of order");
    }
    std::string message;
    if (ledger.Validate(RequestOf(t), &message) != TransferResult::kOk) return broken(message);
    if (!ledger.transfer_index_.emplace(t.id, t.sequence).second) {
      return broken(where + "duplicate id");
    }
    auto d = ledger.account_index_.find(t.debit);
    auto c = ledger.account_index_.find(t.credit);
    if (d == ledger.account_index_.end() || c == ledger.account_index_.end()) {
      return broken(where + "names an account without totals");
    }
    ledger.accounts_[d->second].history.push_back(t.sequence);
    ledger.accounts_[c->second].history.push_back(t.sequence);
    if (t.debit.owner_id != 0) ledger.owner_history_[t.debit.owner_id].push_back(t.sequence);
    if (t.credit.owner_id != 0 && t.credit.owner_id != t.debit.owner_id) {
      ledger.owner_history_[t.credit.owner_id].push_back(t.sequence);
    }
    t.state = InitialState(t.kind);
    if (!IsResolution(t.kind)) continue;
    auto p = ledger.transfer_index_.find(t.pending_id);
    // One resolving a pending transfer older than the window is checked below: that one must not
    // be listed as open.
    if (p == ledger.transfer_index_.end()) continue;
    Transfer& pending = ledger.At(p->second);
    if (pending.kind != TransferKind::kPending || pending.state != TransferState::kPending ||
        pending.debit != t.debit || pending.credit != t.credit) {
      return broken(where + "resolves " + Quoted(pending.id) + ", which is not an open pending "
                    "transfer with the same accounts");
    }
    pending.state = t.kind == TransferKind::kPostPending ? TransferState::kPosted
                                                         : TransferState::kVoided;
  }
  // Open pending transfers: in the window (and still pending there) or pinned before it.
  std::unordered_set<std::string_view> resolved_ids;
  for (const Transfer& t : ledger.transfers_) {
    if (IsResolution(t.kind)) resolved_ids.insert(t.pending_id);
  }
  for (Transfer& p : point.open_pending) {
    const std::string where = "open pending transfer " + Quoted(p.id) + ": ";
    if (p.kind != TransferKind::kPending) return broken(where + "is not a pending transfer");
    if (p.sequence < 1 || p.sequence > point.last_sequence) return broken(where + "bad sequence");
    if (p.sequence >= ledger.first_sequence_) {
      const Transfer& in_window = ledger.At(p.sequence);
      if (in_window.id != p.id) return broken(where + "differs from the window's record");
      if (in_window.state != TransferState::kPending) {
        return broken(where + "was resolved by a newer transfer");
      }
      ledger.open_pending_.insert(p.sequence);
      continue;
    }
    if (resolved_ids.contains(p.id)) return broken(where + "was resolved by a newer transfer");
    if (!ValidateAccountKey(p.debit).ok() || !ValidateAccountKey(p.credit).ok() ||
        p.debit == p.credit || p.debit.currency != p.credit.currency || p.amount_micros <= 0) {
      return broken(where + "malformed");
    }
    if (!ledger.transfer_index_.emplace(p.id, p.sequence).second) {
      return broken(where + "duplicate id");
    }
    p.state = TransferState::kPending;
    ledger.open_pending_.insert(p.sequence);
    ledger.pinned_.emplace(p.sequence, std::move(p));
  }
  for (const Transfer& t : ledger.transfers_) {
    if (t.kind == TransferKind::kPending && t.state == TransferState::kPending &&
        !ledger.open_pending_.contains(t.sequence)) {
      return broken("pending transfer " + Quoted(t.id) +
                    " is neither resolved nor listed as open");
    }
  }
  if (Status s = ledger.CheckInvariants(); !s.ok()) return broken(s.message());
  ledger.archive_ = archive;
  return ledger;
}

std::size_t Ledger::Forget(std::size_t keep) {
  if (transfers_.size() <= keep) return 0;
  const std::size_t n = transfers_.size() - keep;
  for (auto it = pinned_.begin(); it != pinned_.end();) {
    if (it->second.state == TransferState::kPending) {
      ++it;
      continue;
    }
    transfer_index_.erase(it->second.id);
    it = pinned_.erase(it);
  }
  // Only the accounts and owners of the forgotten transfers hold sequences below the new start.
  std::unordered_set<std::size_t> accounts;
  std::unordered_set<std::int64_t> owners;
  for (std::size_t i = 0; i < n; ++i) {
    Transfer& t = transfers_[i];
    accounts.insert(account_index_.at(t.debit));
    accounts.insert(account_index_.at(t.credit));
    if (t.debit.owner_id != 0) owners.insert(t.debit.owner_id);
    if (t.credit.owner_id != 0) owners.insert(t.credit.owner_id);
    if (t.kind == TransferKind::kPending && t.state == TransferState::kPending) {
      const std::int64_t sequence = t.sequence;
      pinned_.emplace(sequence, std::move(t));
    } else {
      transfer_index_.erase(t.id);
    }
  }
  transfers_.erase(transfers_.begin(), transfers_.begin() + static_cast<std::ptrdiff_t>(n));
  first_sequence_ += static_cast<std::int64_t>(n);
  auto trim = [&](std::vector<std::int64_t>& history) {
    history.erase(history.begin(),
                  std::lower_bound(history.begin(), history.end(), first_sequence_));
  };
  for (std::size_t a : accounts) trim(accounts_[a].history);
  for (std::int64_t owner : owners) {
    auto it = owner_history_.find(owner);
    if (it == owner_history_.end()) continue;
    trim(it->second);
    if (it->second.empty()) owner_history_.erase(it);
  }
  return n;
}

}  // namespace gpuhub::ledger
