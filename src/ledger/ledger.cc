// Ledger: applying batches atomically (all transfers or none), the account totals they change,
// and the FX table's changes.
#include "ledger/ledger.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ledger/ledger_internal.h"

namespace gpuhub::ledger {

namespace {

std::string Amount(std::int64_t micros, Currency c) {
  return FormatMicros(micros) + " " + std::string(CurrencyCode(c));
}

}  // namespace

Status BatchResult::status() const {
  if (ok()) return Status::Ok();
  return Status(TransferResultStatusCode(result), message);
}

BatchResult Ledger::ApplyBatch(std::span<const TransferRequest> requests) {
  BatchResult out;
  auto fail = [&](TransferResult result, std::size_t index, std::string message) {
    out.result = result;
    out.failed_index = index;
    // Messages already name the transfer by id; in a batch, also say which leg it was.
    out.message = index == kWholeBatch || requests.size() == 1
                      ? std::move(message)
                      : "transfer " + std::to_string(index + 1) + " of " +
                            std::to_string(requests.size()) + ": " + std::move(message);
    return std::move(out);
  };
  if (requests.empty()) return fail(TransferResult::kBatchEmpty, kWholeBatch, "batch is empty");
  if (requests.size() > kMaxTransfersPerBatch) {
    return fail(TransferResult::kBatchTooLarge, kWholeBatch,
                "batch has " + std::to_string(requests.size()) + " transfers, at most " +
                    std::to_string(kMaxTransfersPerBatch) + " allowed");
  }

  // Pass 1, no state changes: shape of every request, duplicates, resubmissions.
  std::string message;
  std::size_t existing_count = 0;
  std::size_t first_existing = kWholeBatch;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const TransferRequest& r = requests[i];
    if (TransferResult v = Validate(r, &message); v != TransferResult::kOk) {
      return fail(v, i, std::move(message));
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (requests[j].id == r.id) {
        return fail(TransferResult::kIdDuplicatedInBatch, i,
                    "transfer id " + Quoted(r.id) + " appears twice in the batch");
      }
    }
    auto it = transfer_index_.find(r.id);
    if (it != transfer_index_.end()) {
      TransferResult e = CheckExisting(r, At(it->second), &message);
      if (e != TransferResult::kExists) return fail(e, i, std::move(message));
      if (existing_count++ == 0) first_existing = i;
    }
  }
  if (existing_count == requests.size()) {
    out.result = TransferResult::kExists;
    out.transfers.reserve(requests.size());
    for (const TransferRequest& r : requests) {
      out.transfers.push_back(At(transfer_index_.at(r.id)));
    }
    return out;
  }
  if (existing_count > 0) {
    return fail(TransferResult::kBatchMixesExistingAndNewIds, first_existing,
                "transfer " + Quoted(requests[first_existing].id) +
                    " already exists but other transfers of the batch do not: a batch is "
                    "resubmitted whole or not at all");
  }

  // Pass 2: apply in order; undo everything on the first failure.
  undo_.Reset(transfers_.size(), accounts_.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    TransferResult result = ApplyOne(requests[i], &message);
    if (result != TransferResult::kOk) {
      Rollback();
      return fail(result, i, std::move(message));
    }
  }
  if (spend_guard_) {
    std::int64_t spent = 0;
    bool other_currency = false, overflow = false;
    for (const TransferRequest& r : requests) {
      bool debits = r.kind == TransferKind::kSinglePhase || r.kind == TransferKind::kPending;
      if (!debits || !r.debit || r.debit->kind != AccountKind::kCustomerWallet ||
          r.debit->owner_id != spend_guard_->owner_id) {
        continue;
      }
      if (r.debit->currency != spend_guard_->currency) other_currency = true;
      overflow = overflow || __builtin_add_overflow(spent, r.amount_micros, &spent);
    }
    const std::int64_t left = spend_guard_->limit_micros - spend_guard_->spent_micros;
    if (other_currency || overflow || spent > left) {
      Rollback();
      return fail(TransferResult::kInsufficientFunds, kWholeBatch, spend_guard_->refusal);
    }
    spend_guard_->spent_micros += spent;
  }
  CheckBatchBalances();
  out.result = TransferResult::kOk;
  out.transfers.assign(transfers_.begin() + static_cast<std::ptrdiff_t>(undo_.transfers_before),
                       transfers_.end());
  return out;
}

TransferResult Ledger::ApplyOne(const TransferRequest& r, std::string* message) {
  const Prefix in{r.id};
  Transfer record;
  record.id = r.id;
  record.kind = r.kind;
  record.code = r.code;
  record.memo = r.memo;
  record.timestamp = r.timestamp;
  record.state = InitialState(r.kind);
  std::int64_t pending_sequence = 0;

  if (!IsResolution(r.kind)) {
    record.debit = *r.debit;
    record.credit = *r.credit;
    record.amount_micros = r.amount_micros;
    static const AccountState kEmpty{};
    const AccountState* d = FindAccount(record.debit);
    const AccountState* c = FindAccount(record.credit);
    const AccountBalance& db = d ? d->balance : kEmpty.balance;
    const AccountBalance& cb = c ? c->balance : kEmpty.balance;
    const Wide debits = Wide{db.debits_posted} + db.debits_pending + r.amount_micros;
    if (debits > kInt64Max) {
      *message = in + "debits of " + AccountKeyName(record.debit) + " would overflow";
      return TransferResult::kOverflowsDebits;
    }
    if (Wide{cb.credits_posted} + cb.credits_pending + r.amount_micros > kInt64Max) {
      *message = in + "credits of " + AccountKeyName(record.credit) + " would overflow";
      return TransferResult::kOverflowsCredits;
    }
    if (DebitsMustNotExceedCredits(record.debit.kind) && debits > db.credits_posted) {
      *message = in + AccountKeyName(record.debit) + " has " +
                 Amount(std::max<std::int64_t>(db.available(), 0), record.debit.currency) +
                 " available, " + Amount(r.amount_micros, record.debit.currency) + " needed";
      return TransferResult::kInsufficientFunds;
    }
  } else {
    auto it = transfer_index_.find(r.pending_id);
    std::optional<Transfer> archived;
    if (it == transfer_index_.end() && archive_ != nullptr) {
      // Open pending transfers are always in memory: one found only in the archive was resolved
      // long ago, and says so below.
      auto found = archive_->Find(r.pending_id);
      if (!found.ok()) {
        *message = in + "pending transfer " + Quoted(r.pending_id) +
                   " could not be looked up: " + found.status().message();
        return TransferResult::kPendingTransferNotFound;
      }
      archived = std::move(found).value();
    }
    if (it == transfer_index_.end() && !archived) {
      *message = in + "pending transfer " + Quoted(r.pending_id) + " not found";
      return TransferResult::kPendingTransferNotFound;
    }
    if (it != transfer_index_.end()) pending_sequence = it->second;
    const Transfer& p = archived ? *archived : At(pending_sequence);
    if (p.kind != TransferKind::kPending) {
      *message = in + "transfer " + Quoted(p.id) + " is " + std::string(TransferKindName(p.kind)) +
                 ", not pending";
      return TransferResult::kPendingTransferNotPending;
    }
    if (r.debit && *r.debit != p.debit) {
      *message = in + "pending transfer debits " + AccountKeyName(p.debit) + ", not " +
                 AccountKeyName(*r.debit);
      return TransferResult::kPendingTransferHasDifferentDebitAccount;
    }
    if (r.credit && *r.credit != p.credit) {
      *message = in + "pending transfer credits " + AccountKeyName(p.credit) + ", not " +
                 AccountKeyName(*r.credit);
      return TransferResult::kPendingTransferHasDifferentCreditAccount;
    }
    if (r.kind == TransferKind::kPostPending && r.amount_micros > p.amount_micros) {
      *message = in + "cannot post " + Amount(r.amount_micros, p.currency()) + " of a hold of " +
                 Amount(p.amount_micros, p.currency());
      return TransferResult::kExceedsPendingTransferAmount;
    }
    if (r.kind == TransferKind::kVoidPending && r.amount_micros != 0 &&
        r.amount_micros != p.amount_micros) {
      *message = in + "void amount must be 0 or the pending amount " +
                 Amount(p.amount_micros, p.currency());
      return TransferResult::kPendingTransferHasDifferentAmount;
    }
    if (p.state == TransferState::kPosted) {
      *message = in + "pending transfer " + Quoted(p.id) + " was already posted";
      return TransferResult::kPendingTransferAlreadyPosted;
    }
    if (p.state == TransferState::kVoided) {
      *message = in + "pending transfer " + Quoted(p.id) + " was already voided";
      return TransferResult::kPendingTransferAlreadyVoided;
    }
    record.debit = p.debit;
    record.credit = p.credit;
    record.amount_micros = r.kind == TransferKind::kPostPending ? r.amount_micros : p.amount_micros;
    record.pending_id = r.pending_id;
    // Posting <= the held amount only shrinks debits_pending + debits_posted: no overflow, and the
    // debit account's limit holds because it held at least this much already.
    if (archived) {  // not reachable: an archived pending is never open (see above)
      *message = in + "pending transfer " + Quoted(r.pending_id) + " is not open";
      return TransferResult::kPendingTransferNotFound;
    }
  }
  Commit(std::move(record), pending_sequence, &undo_);
  return TransferResult::kOk;
}

std::size_t Ledger::AccountIndex(const AccountKey& key, UndoLog* undo) {
  auto [it, inserted] = account_index_.try_emplace(key, accounts_.size());
  if (inserted) {
    AccountState state;
    state.balance.key = key;
    accounts_.push_back(std::move(state));
  }
  (void)undo;  // new accounts are undone by truncation (their index is >= accounts_before)
  return it->second;
}

const Ledger::AccountState* Ledger::FindAccount(const AccountKey& key) const {
  auto it = account_index_.find(key);
  return it == account_index_.end() ? nullptr : &accounts_[it->second];
}

Transfer& Ledger::At(std::int64_t sequence) {
  if (sequence >= first_sequence_) {
    return transfers_[static_cast<std::size_t>(sequence - first_sequence_)];
  }
  return pinned_.at(sequence);
}

const Transfer& Ledger::At(std::int64_t sequence) const {
  return const_cast<Ledger*>(this)->At(sequence);
}

void Ledger::MarkChanged(std::size_t account) {
  if (accounts_[account].changed) return;
  accounts_[account].changed = true;
  changed_.push_back(account);
}

std::vector<AccountBalance> Ledger::TakeChangedAccounts() {
  std::vector<AccountBalance> out;
  out.reserve(changed_.size());
  for (std::size_t account : changed_) {
    if (account >= accounts_.size() || !accounts_[account].changed) continue;
    accounts_[account].changed = false;
    out.push_back(accounts_[account].balance);
  }
  changed_.clear();
  return out;
}

void Ledger::Commit(Transfer record, std::int64_t pending_sequence, UndoLog* undo) {
  const std::size_t d = AccountIndex(record.debit, undo);
  const std::size_t c = AccountIndex(record.credit, undo);
  MarkChanged(d);
  MarkChanged(c);
  AccountBalance& db = accounts_[d].balance;
  AccountBalance& cb = accounts_[c].balance;
  if (undo) {
    undo->balances.emplace_back(d, db);
    undo->balances.emplace_back(c, cb);
  }
  const std::int64_t amount = record.amount_micros;
  switch (record.kind) {
    case TransferKind::kSinglePhase:
      db.debits_posted += amount;
      cb.credits_posted += amount;
      break;
    case TransferKind::kPending:
      db.debits_pending += amount;
      cb.credits_pending += amount;
      break;
    case TransferKind::kPostPending:
    case TransferKind::kVoidPending: {
      Transfer& pending = At(pending_sequence);
      db.debits_pending -= pending.amount_micros;
      cb.credits_pending -= pending.amount_micros;
      if (record.kind == TransferKind::kPostPending) {
        db.debits_posted += amount;
        cb.credits_posted += amount;
        pending.state = TransferState::kPosted;
      } else {
        pending.state = TransferState::kVoided;
      }
      open_pending_.erase(pending_sequence);
      if (undo) undo->resolved_pending.push_back(pending_sequence);
      break;
    }
  }
  record.sequence = LastSequence() + 1;
  const std::int64_t sequence = record.sequence;
  transfer_index_.emplace(record.id, sequence);
  if (record.kind == TransferKind::kPending) open_pending_.insert(sequence);

  accounts_[d].history.push_back(sequence);
  accounts_[c].history.push_back(sequence);
  if (undo) {
    undo->history_appends.push_back(d);
    undo->history_appends.push_back(c);
  }
  const std::int64_t debit_owner = record.debit.owner_id;
  const std::int64_t credit_owner = record.credit.owner_id;
  if (debit_owner != 0) {
    owner_history_[debit_owner].push_back(sequence);
    if (undo) undo->owner_history_appends.push_back(debit_owner);
  }
  if (credit_owner != 0 && credit_owner != debit_owner) {
    owner_history_[credit_owner].push_back(sequence);
    if (undo) undo->owner_history_appends.push_back(credit_owner);
  }
  transfers_.push_back(std::move(record));
}

void Ledger::Rollback() {
  UndoLog& undo = undo_;
  for (auto it = undo.balances.rbegin(); it != undo.balances.rend(); ++it) {
    accounts_[it->first].balance = it->second;
  }
  for (auto it = undo.history_appends.rbegin(); it != undo.history_appends.rend(); ++it) {
    accounts_[*it].history.pop_back();
  }
  for (auto it = undo.owner_history_appends.rbegin(); it != undo.owner_history_appends.rend();
       ++it) {
    auto owner = owner_history_.find(*it);
    owner->second.pop_back();
    if (owner->second.empty()) owner_history_.erase(owner);
  }
  for (std::int64_t sequence : undo.resolved_pending) {
    At(sequence).state = TransferState::kPending;
    open_pending_.insert(sequence);
  }
  for (std::size_t i = undo.transfers_before; i < transfers_.size(); ++i) {
    transfer_index_.erase(transfers_[i].id);
    open_pending_.erase(transfers_[i].sequence);
  }
  transfers_.resize(undo.transfers_before);
  for (std::size_t i = undo.accounts_before; i < accounts_.size(); ++i) {
    account_index_.erase(accounts_[i].balance.key);
  }
  accounts_.resize(undo.accounts_before);
  std::erase_if(changed_, [&](std::size_t a) { return a >= undo.accounts_before; });
}

void Ledger::CheckBatchBalances() const {
  // The batch as a whole must net to zero per currency (double entry), and every account it
  // touched must be within its limits. The first snapshot of each account is its pre-batch state.
  Wide debits_posted[kCurrencyCount] = {};
  Wide credits_posted[kCurrencyCount] = {};
  Wide debits_pending[kCurrencyCount] = {};
  Wide credits_pending[kCurrencyCount] = {};
  for (std::size_t i = 0; i < undo_.balances.size(); ++i) {
    const std::size_t account = undo_.balances[i].first;
    bool seen = false;
    for (std::size_t j = 0; j < i && !seen; ++j) seen = undo_.balances[j].first == account;
    if (seen) continue;
    const AccountBalance& before = undo_.balances[i].second;
    const AccountBalance& now = accounts_[account].balance;
    const auto ccy = static_cast<std::size_t>(now.key.currency);
    debits_posted[ccy] += Wide{now.debits_posted} - before.debits_posted;
    credits_posted[ccy] += Wide{now.credits_posted} - before.credits_posted;
    debits_pending[ccy] += Wide{now.debits_pending} - before.debits_pending;
    credits_pending[ccy] += Wide{now.credits_pending} - before.credits_pending;
    GPUHUB_CHECK(now.debits_posted >= 0 && now.credits_posted >= 0 && now.debits_pending >= 0 &&
                 now.credits_pending >= 0);
    GPUHUB_CHECK(Wide{now.debits_posted} + now.debits_pending <= kInt64Max);
    GPUHUB_CHECK(Wide{now.credits_posted} + now.credits_pending <= kInt64Max);
    if (DebitsMustNotExceedCredits(now.key.kind)) {
      GPUHUB_CHECK_MSG(Wide{now.debits_posted} + now.debits_pending <= now.credits_posted,
                       "a wallet or payable went below zero");
    }
  }
  for (int c = 0; c < kCurrencyCount; ++c) {
    GPUHUB_CHECK_MSG(debits_posted[c] == credits_posted[c], "posted debits != credits");
    GPUHUB_CHECK_MSG(debits_pending[c] == credits_pending[c], "pending debits != credits");
  }
}

Result<FxRateChange> Ledger::SetFxRate(Currency base, Currency quote, std::int64_t mid_rate_ppb,
                                       std::int32_t spread_bps, TimestampMicros now) {
  if (mid_rate_ppb <= 0) {
    return Status::InvalidArgument("FX rate must be greater than zero");
  }
  FxRateChange change{fx_.Version() + 1, base, quote, mid_rate_ppb, spread_bps, now};
  GPUHUB_RETURN_IF_ERROR(fx_.Apply(change));
  return change;
}

Result<FxRateChange> Ledger::RemoveFxRate(Currency base, Currency quote, TimestampMicros now) {
  FxRateChange change{fx_.Version() + 1, base, quote, 0, 0, now};
  GPUHUB_RETURN_IF_ERROR(fx_.Apply(change));
  return change;
}

}  // namespace gpuhub::ledger
