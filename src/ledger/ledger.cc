#include "ledger/ledger.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace gpuhub::ledger {

namespace {

using Wide = __int128;
constexpr Wide kInt64Max = std::numeric_limits<std::int64_t>::max();

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ':' ||
         c == '_' || c == '-' || c == '.' || c == '/' || c == '@';
}

bool IsCodeChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

bool AllOf(std::string_view text, bool (*pred)(char)) {
  return std::all_of(text.begin(), text.end(), pred);
}

// Well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF) without C0/C1 control characters
// or DEL: a memo ends up in JSON, logs and web pages.
bool IsCleanUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto b0 = static_cast<unsigned char>(text[i]);
    if (b0 < 0x80) {
      if (b0 < 0x20 || b0 == 0x7F) return false;
      ++i;
      continue;
    }
    int extra;
    std::uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      extra = 1;
      cp = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      extra = 2;
      cp = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      extra = 3;
      cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(extra) >= text.size()) return false;  // truncated
    for (int k = 1; k <= extra; ++k) {
      auto b = static_cast<unsigned char>(text[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 48;
  std::string out = "'";
  for (char c : text.substr(0, kShown)) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  if (text.size() > kShown) out += "...";
  out += "'";
  return out;
}

// "transfer 'id': " in front of a message, built only when a message is (failures are rare).
struct Prefix {
  const std::string& id;
  friend std::string operator+(const Prefix& p, std::string_view rest) {
    std::string out = "transfer " + Quoted(p.id) + ": ";
    out += rest;
    return out;
  }
};

bool IsKnownTransferKind(TransferKind kind) {
  return static_cast<int>(kind) <= 3;  // uint8_t: never negative
}

bool IsResolution(TransferKind kind) {
  return kind == TransferKind::kPostPending || kind == TransferKind::kVoidPending;
}

TransferState InitialState(TransferKind kind) {
  switch (kind) {
    case TransferKind::kPending:
      return TransferState::kPending;
    case TransferKind::kVoidPending:
      return TransferState::kVoided;
    case TransferKind::kSinglePhase:
    case TransferKind::kPostPending:
      return TransferState::kPosted;
  }
  return TransferState::kPosted;
}

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

std::string Amount(std::int64_t micros, Currency c) {
  return FormatMicros(micros) + " " + std::string(CurrencyCode(c));
}

}  // namespace

Status BatchResult::status() const {
  if (ok()) return Status::Ok();
  return Status(TransferResultStatusCode(result), message);
}

// ---------------------------------------------------------------------------------------------
// Validation

TransferResult Ledger::Validate(const TransferRequest& r, std::string* message) const {
  auto fail = [&](TransferResult result, std::string why) {
    *message = std::move(why);
    return result;
  };
  if (r.id.empty()) return fail(TransferResult::kIdMustNotBeEmpty, "transfer id is empty");
  if (r.id.size() > kMaxTransferIdBytes) {
    return fail(TransferResult::kIdTooLong, "transfer id " + Quoted(r.id) + " is longer than " +
                                                std::to_string(kMaxTransferIdBytes) + " bytes");
  }
  if (!AllOf(r.id, IsIdChar)) {
    return fail(TransferResult::kIdHasInvalidCharacters,
                "transfer id " + Quoted(r.id) + " may only contain A-Z a-z 0-9 : _ - . / @");
  }
  const Prefix in{r.id};
  if (!IsKnownTransferKind(r.kind)) {
    return fail(TransferResult::kKindInvalid,
                in + "unknown kind " + std::to_string(static_cast<int>(r.kind)));
  }
  if (r.code.empty()) return fail(TransferResult::kCodeMustNotBeEmpty, in + "code is empty");
  if (r.code.size() > kMaxTransferCodeBytes) {
    return fail(TransferResult::kCodeTooLong,
                in + "code is longer than " + std::to_string(kMaxTransferCodeBytes) + " bytes");
  }
  if (!AllOf(r.code, IsCodeChar)) {
    return fail(TransferResult::kCodeHasInvalidCharacters,
                in + "code " + Quoted(r.code) + " may only contain a-z 0-9 _ - . :");
  }
  if (r.memo.size() > kMaxTransferMemoBytes) {
    return fail(TransferResult::kMemoTooLong,
                in + "memo is longer than " + std::to_string(kMaxTransferMemoBytes) + " bytes");
  }
  if (!IsCleanUtf8(r.memo)) {
    return fail(TransferResult::kMemoHasInvalidCharacters,
                in + "memo must be UTF-8 text without control characters");
  }
  if (r.timestamp <= 0) {
    return fail(TransferResult::kTimestampMustBePositive, in + "timestamp must be > 0");
  }
  const bool resolution = IsResolution(r.kind);
  if (!resolution) {
    if (!r.debit) return fail(TransferResult::kDebitAccountRequired, in + "debit account missing");
    if (!r.credit) {
      return fail(TransferResult::kCreditAccountRequired, in + "credit account missing");
    }
  }
  if (r.debit) {
    if (Status s = ValidateAccountKey(*r.debit); !s.ok()) {
      return fail(TransferResult::kDebitAccountInvalid, in + "debit account: " + s.message());
    }
  }
  if (r.credit) {
    if (Status s = ValidateAccountKey(*r.credit); !s.ok()) {
      return fail(TransferResult::kCreditAccountInvalid, in + "credit account: " + s.message());
    }
  }
  if (!resolution) {
    if (*r.debit == *r.credit) {
      return fail(TransferResult::kAccountsMustBeDifferent,
                  in + "debit and credit are the same account " + AccountKeyName(*r.debit));
    }
    if (r.debit->currency != r.credit->currency) {
      return fail(TransferResult::kAccountsMustHaveSameCurrency,
                  in + "debit " + AccountKeyName(*r.debit) + " and credit " +
                      AccountKeyName(*r.credit) + " have different currencies");
    }
  }
  if (r.kind == TransferKind::kVoidPending) {
    if (r.amount_micros < 0) {
      return fail(TransferResult::kAmountMustNotBeNegative, in + "amount must not be negative");
    }
  } else if (r.amount_micros <= 0) {
    return fail(TransferResult::kAmountMustBePositive,
                in + "amount must be positive, got " + FormatMicros(r.amount_micros));
  }
  if (r.amount_micros > kMaxTransferAmountMicros) {
    return fail(TransferResult::kAmountExceedsMaximum,
                in + "amount " + FormatMicros(r.amount_micros) + " exceeds the maximum " +
                    FormatMicros(kMaxTransferAmountMicros));
  }
  if (!resolution) {
    if (!r.pending_id.empty()) {
      return fail(TransferResult::kPendingIdMustBeEmpty,
                  in + "pending_id is only for post_pending and void_pending");
    }
  } else {
    if (r.pending_id.empty()) {
      return fail(TransferResult::kPendingIdMustNotBeEmpty,
                  in + std::string(TransferKindName(r.kind)) + " needs a pending_id");
    }
    if (r.pending_id.size() > kMaxTransferIdBytes || !AllOf(r.pending_id, IsIdChar)) {
      return fail(TransferResult::kPendingIdInvalid,
                  in + "pending_id " + Quoted(r.pending_id) + " is not a valid transfer id");
    }
    if (r.pending_id == r.id) {
      return fail(TransferResult::kPendingIdMustBeDifferent,
                  in + "pending_id must name another transfer");
    }
  }
  return TransferResult::kOk;
}

TransferResult Ledger::CheckExisting(const TransferRequest& r, const Transfer& existing,
                                     std::string* message) const {
  const char* field = nullptr;
  if (r.kind != existing.kind) {
    field = "kind";
  } else if (r.debit && *r.debit != existing.debit) {
    field = "debit account";
  } else if (r.credit && *r.credit != existing.credit) {
    field = "credit account";
  } else if (r.kind == TransferKind::kVoidPending
                 ? (r.amount_micros != 0 && r.amount_micros != existing.amount_micros)
                 : r.amount_micros != existing.amount_micros) {
    field = "amount";
  } else if (r.pending_id != existing.pending_id) {
    field = "pending_id";
  } else if (r.code != existing.code) {
    field = "code";
  } else if (r.memo != existing.memo) {
    field = "memo";
  }
  if (field == nullptr) return TransferResult::kExists;
  *message = "transfer " + Quoted(r.id) + " already exists (sequence " +
             std::to_string(existing.sequence) + ") with a different " + field;
  return TransferResult::kExistsWithDifferentFields;
}

// ---------------------------------------------------------------------------------------------
// Applying

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

// ---------------------------------------------------------------------------------------------
// FX

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

// ---------------------------------------------------------------------------------------------
// Queries

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

// ---------------------------------------------------------------------------------------------
// Restore

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

// ---------------------------------------------------------------------------------------------
// Invariants

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
        return broken("pinned transfer #" + std::to_string(t.sequence) + " differs from the archive");
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
    if (t.state != derived.at(sequence)) return broken("pinned transfer " + Quoted(t.id) + " state");
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
