#include "engine/topups.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include "engine/billing.h"
#include "engine/limits.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferKind;
using ledger::TransferRequest;

bool IsOpen(InvoiceStatus s) { return s == InvoiceStatus::kNew || s == InvoiceStatus::kProcessing; }

Result<InvoiceStatus> ParseInvoiceStatus(std::string_view name) {
  for (auto s : {InvoiceStatus::kNew, InvoiceStatus::kProcessing, InvoiceStatus::kSettled,
                 InvoiceStatus::kExpired, InvoiceStatus::kInvalid}) {
    if (InvoiceStatusName(s) == name) return s;
  }
  return Status::Internal("unknown invoice status '" + std::string(name) + "'");
}

Result<PaymentCreditState> ParseCreditState(std::string_view name) {
  for (auto s : {PaymentCreditState::kCredited, PaymentCreditState::kHeld,
                 PaymentCreditState::kReleased, PaymentCreditState::kRefused,
                 PaymentCreditState::kReversed, PaymentCreditState::kReversalPending,
                 PaymentCreditState::kWrittenOff}) {
    if (PaymentCreditStateName(s) == name) return s;
  }
  return Status::Internal("unknown payment credit state '" + std::string(name) + "'");
}

void WriteInvoice(Txn& txn, const Invoice& inv) {
  txn.writes.Upsert("invoices", {{"id", inv.id},
                                 {"user_id", inv.user_id},
                                 {"currency", std::string(CurrencyCode(inv.currency))},
                                 {"amount_micros", inv.amount_micros},
                                 {"status", std::string(InvoiceStatusName(inv.status))},
                                 {"created_at_us", inv.created_at},
                                 {"updated_at_us", inv.updated_at},
                                 {"transfer_id", inv.transfer_id},
                                 {"processor", inv.processor},
                                 {"processor_invoice_id", inv.processor_invoice_id},
                                 {"checkout_url", inv.checkout_url},
                                 {"additional_status", inv.additional_status},
                                 {"credited_micros", inv.credited_micros},
                                 {"held_micros", inv.held_micros},
                                 {"expires_at_us", inv.expires_at}});
}

void WritePayment(Txn& txn, const Invoice& inv, const InvoicePayment& p) {
  txn.writes.Upsert("invoice_payments",
                    {{"invoice_id", inv.id},
                     {"payment_id", p.payment_id},
                     {"seq", p.seq},
                     {"payment_method", p.payment_method},
                     {"fiat_micros", p.fiat_micros},
                     {"state", std::string(PaymentCreditStateName(p.state))},
                     {"transfer_id", p.transfer_id},
                     {"source", p.source},
                     {"created_at_us", p.created_at},
                     {"updated_at_us", p.updated_at},
                     {"decided_by", p.decided_by},
                     {"decision_reason", p.decision_reason}},
                    2);
}

Result<std::vector<ledger::Transfer>> ApplyAndWrite(Txn& txn,
                                                    const std::vector<TransferRequest>& batch) {
  ledger::BatchResult result = txn.state.wallets->ledger.ApplyBatch(batch);
  if (!result.ok()) return result.status();
  if (result.result == ledger::TransferResult::kOk) WriteTransfers(txn, result.transfers);
  return result.transfers;
}

void SetStatus(Txn& txn, Invoice& inv, InvoiceStatus status) {
  TopupsState& t = *txn.state.topups;
  if (IsOpen(inv.status) && !IsOpen(status)) {
    t.open_by_age.erase({inv.created_at, inv.id});
    if (--t.open_per_user[inv.user_id] == 0) t.open_per_user.erase(inv.user_id);
  } else if (!IsOpen(inv.status) && IsOpen(status)) {
    t.open_by_age.insert({inv.created_at, inv.id});
    ++t.open_per_user[inv.user_id];
  }
  inv.status = status;
}

InvoiceStatus FromProcessorStatus(std::string_view s) {
  if (s == "Processing") return InvoiceStatus::kProcessing;
  if (s == "Settled") return InvoiceStatus::kSettled;
  if (s == "Expired") return InvoiceStatus::kExpired;
  if (s == "Invalid") return InvoiceStatus::kInvalid;
  return InvoiceStatus::kNew;
}

std::string Memo(const Invoice& inv, std::string_view what) {
  return std::string(what) + " of top-up invoice " + inv.id + " (BTCPay " +
         inv.processor_invoice_id.substr(0, 64) + ")";
}

// Credits (posted) or holds (pending) `fiat` for a new payment entry.
InvoicePayment* AddEntry(Txn& txn, Invoice& inv, const std::string& payment_id,
                                 const std::string& method, std::int64_t fiat, bool hold,
                                 const std::string& source) {
  InvoicePayment p;
  p.payment_id = payment_id;
  p.seq = static_cast<std::int64_t>(inv.payments.size()) + 1;
  p.payment_method = method.substr(0, 64);
  p.fiat_micros = fiat;
  p.state = hold ? PaymentCreditState::kHeld : PaymentCreditState::kCredited;
  p.transfer_id = "btcpay:" + inv.id + ":" + std::to_string(p.seq);
  p.source = source;
  p.created_at = p.updated_at = txn.now;
  if (fiat > 0) {
    TransferRequest credit;
    credit.id = p.transfer_id;
    credit.kind = hold ? TransferKind::kPending : TransferKind::kSinglePhase;
    credit.debit = AccountKey::System(AccountKind::kDeposits, inv.currency);
    credit.credit = AccountKey::Wallet(inv.user_id, inv.currency);
    credit.amount_micros = fiat;
    credit.code = hold ? "topup_held" : "topup";
    credit.memo = Memo(inv, hold ? "held payment" : "payment");
    credit.timestamp = txn.now;
    // A credit from deposits cannot fail: the amount was checked (<= kMaxAmountMicros) and
    // deposits has no floor. Failing here would leave memory ahead of the batch.
    Status applied = ApplyAndWrite(txn, {credit}).status();
    GPUHUB_CHECK_MSG(applied.ok(), applied.ToString().c_str());
  } else {
    p.transfer_id.clear();  // nothing moved (a zero-value payment)
  }
  if (hold) {
    inv.held_micros += fiat;
    txn.state.topups->held.insert({inv.id, p.seq});
  } else {
    inv.credited_micros += fiat;
  }
  inv.payments.push_back(p);
  WritePayment(txn, inv, inv.payments.back());
  return &inv.payments.back();
}

void Release(Txn& txn, Invoice& inv, InvoicePayment& p, bool post, std::int64_t admin,
               const std::string& reason, const std::string& source) {
  if (p.fiat_micros > 0) {
    TransferRequest r;
    r.id = p.transfer_id + (post ? ":release" : ":refuse");
    r.kind = post ? TransferKind::kPostPending : TransferKind::kVoidPending;
    r.pending_id = p.transfer_id;
    r.amount_micros = post ? p.fiat_micros : 0;
    r.code = post ? "topup_released" : "topup_refused";
    r.memo = Memo(inv, post ? "released payment" : "refused payment");
    r.timestamp = txn.now;
    Status applied = ApplyAndWrite(txn, {r}).status();
    GPUHUB_CHECK_MSG(applied.ok(), applied.ToString().c_str());  // a held credit is pending
  }
  inv.held_micros -= p.fiat_micros;
  if (post) inv.credited_micros += p.fiat_micros;
  p.state = post ? PaymentCreditState::kReleased : PaymentCreditState::kRefused;
  p.decided_by = admin;
  p.decision_reason = reason;
  p.source = source;
  p.updated_at = txn.now;
  txn.state.topups->held.erase({inv.id, p.seq});
  WritePayment(txn, inv, p);
}

std::int64_t WalletAvailable(const Txn& txn, std::int64_t user, Currency currency) {
  auto account = txn.state.wallets->ledger.GetAccount(AccountKey::Wallet(user, currency));
  return account.ok() ? account->available() : 0;
}

// Takes a reversed payment back from the wallet (wallet -> deposits), or leaves it pending.
// Nothing here fails: the debit is tried only when the available balance covers it.
bool DebitBack(Txn& txn, Invoice& inv, InvoicePayment& p) {
  if (p.fiat_micros > 0 && WalletAvailable(txn, inv.user_id, inv.currency) < p.fiat_micros) {
    return false;
  }
  if (p.fiat_micros > 0) {
    TransferRequest r;
    r.id = p.transfer_id + ":reversal";
    r.kind = TransferKind::kSinglePhase;
    r.debit = AccountKey::Wallet(inv.user_id, inv.currency);
    r.credit = AccountKey::System(AccountKind::kDeposits, inv.currency);
    r.amount_micros = p.fiat_micros;
    r.code = "payment_reversal";
    r.memo = Memo(inv, "reversed payment " + p.payment_id.substr(0, 64));
    r.timestamp = txn.now;
    Status applied = ApplyAndWrite(txn, {r}).status();
    GPUHUB_CHECK_MSG(applied.ok(), applied.ToString().c_str());  // the balance was checked
  }
  inv.credited_micros -= p.fiat_micros;
  p.state = PaymentCreditState::kReversed;
  return true;
}

std::string HoldReason(const Invoice& inv, const InvoicePayment& p) {
  return "payment " + p.payment_id.substr(0, 64) + " of top-up " + inv.id + " (" +
         FormatMicros(p.fiat_micros, 2) + " " + std::string(CurrencyCode(inv.currency)) +
         ") was credited, then reversed by the payment processor, and your balance cannot "
         "cover it";
}

// A credited payment BTCPay now calls Invalid: debited back, or pending with the wallet on hold.
void Reverse(Txn& txn, Invoice& inv, InvoicePayment& p, const std::string& source) {
  if (!DebitBack(txn, inv, p)) {
    p.state = PaymentCreditState::kReversalPending;
    txn.state.topups->reversal_pending.insert({inv.id, p.seq});
    PlaceWalletHold(txn, inv.user_id, HoldReason(inv, p));
  }
  p.source = source;
  p.updated_at = txn.now;
  WritePayment(txn, inv, p);
}

bool HasPendingReversal(const TopupsState& t, std::int64_t user) {
  for (const auto& [id, seq] : t.reversal_pending) {
    if (t.invoices.at(id).user_id == user) return true;
  }
  return false;
}

void Unwatch(TopupsState& t, const Invoice& inv) { t.watched_by_age.erase({inv.created_at, inv.id}); }

// A BTCPay invoice needs no more reading once it is settled with nothing still processing, or
// invalid (its held credits wait for an admin, not for BTCPay).
bool Finished(const ProcessorReport& report) {
  if (report.status == "Invalid") return true;
  if (report.status != "Settled") return false;
  for (const auto& p : report.payments) {
    if (p.state == ReportedPayment::State::kProcessing) return false;
  }
  return true;
}

}  // namespace

std::string_view InvoiceStatusName(InvoiceStatus status) {
  switch (status) {
    case InvoiceStatus::kNew:
      return "new";
    case InvoiceStatus::kProcessing:
      return "processing";
    case InvoiceStatus::kSettled:
      return "settled";
    case InvoiceStatus::kExpired:
      return "expired";
    case InvoiceStatus::kInvalid:
      return "invalid";
  }
  return "new";
}

std::string_view PaymentCreditStateName(PaymentCreditState s) {
  switch (s) {
    case PaymentCreditState::kCredited:
      return "credited";
    case PaymentCreditState::kHeld:
      return "held";
    case PaymentCreditState::kReleased:
      return "released";
    case PaymentCreditState::kRefused:
      return "refused";
    case PaymentCreditState::kReversed:
      return "reversed";
    case PaymentCreditState::kReversalPending:
      return "reversal_pending";
    case PaymentCreditState::kWrittenOff:
      return "written_off";
  }
  return "credited";
}

Result<std::int64_t> ParseTopupAmount(std::string_view text) {
  auto amount = ParseDecimalMicros(text, kTopupFractionDigits);
  if (!amount.ok()) {
    return Status::InvalidArgument(
        "amount must be a positive decimal string with at most 2 decimals, such as \"100.00\" (" +
        amount.status().message() + ")");
  }
  if (*amount < kMinTopupMicros || *amount > kMaxTopupMicros) {
    return Status::InvalidArgument("amount must be between " + FormatMicros(kMinTopupMicros, 2) +
                                   " and " + FormatMicros(kMaxTopupMicros, 2));
  }
  return *amount;
}

std::string NewInvoiceId() {
  unsigned char buf[12];
  randombytes_buf(buf, sizeof buf);
  char hex[sizeof buf * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, buf, sizeof buf);
  return std::string("inv_") + hex;
}

Status CheckCanOpenTopup(const Txn& txn, std::int64_t user_id) {
  const TopupsState& t = *txn.state.topups;
  auto open = t.open_per_user.find(user_id);
  if (open != t.open_per_user.end() && open->second >= kMaxOpenInvoicesPerUser) {
    return Status::ResourceExhausted("you have " + std::to_string(kMaxOpenInvoicesPerUser) +
                                     " unpaid top-ups open; pay or let them expire first");
  }
  return Status::Ok();
}

Result<Invoice> CreateTopup(Txn& txn, std::int64_t user_id, Currency currency,
                            std::int64_t amount_micros, const ProcessorLink* link) {
  TopupsState& t = *txn.state.topups;
  if (amount_micros < kMinTopupMicros || amount_micros > kMaxTopupMicros) {
    return Status::InvalidArgument("top-up amount out of range");
  }
  GPUHUB_RETURN_IF_ERROR(CheckCanOpenTopup(txn, user_id));
  Invoice inv;
  if (link) {
    if (link->invoice_id.empty() || t.invoices.count(link->invoice_id) ||
        link->processor_invoice_id.empty() || t.by_processor_id.count(link->processor_invoice_id)) {
      return Status::Conflict("this invoice is already recorded; create a new one");
    }
    inv.id = link->invoice_id;
    inv.processor = "btcpay";
    inv.processor_invoice_id = link->processor_invoice_id;
    inv.checkout_url = link->checkout_url;
    inv.expires_at = link->expires_at;
  } else {
    do {
      inv.id = NewInvoiceId();
    } while (t.invoices.count(inv.id));
  }
  inv.user_id = user_id;
  inv.currency = currency;
  inv.amount_micros = amount_micros;
  inv.status = InvoiceStatus::kNew;
  inv.created_at = inv.updated_at = txn.now;
  t.invoices[inv.id] = inv;
  t.invoices_by_user[user_id].push_back(inv.id);
  t.open_by_age.insert({inv.created_at, inv.id});
  ++t.open_per_user[user_id];
  if (link) {
    t.by_processor_id[inv.processor_invoice_id] = inv.id;
    t.watched_by_age.insert({inv.created_at, inv.id});
  }
  WriteInvoice(txn, inv);
  return inv;
}

Result<Invoice> GetTopup(const Txn& txn, std::int64_t user_id, const std::string& invoice_id) {
  const TopupsState& t = *txn.state.topups;
  auto it = t.invoices.find(invoice_id);
  if (it == t.invoices.end() || it->second.user_id != user_id) {
    return Status::NotFound("no top-up '" + invoice_id.substr(0, 64) + "'");
  }
  return it->second;
}

std::vector<Invoice> ListTopups(const Txn& txn, std::int64_t user_id, std::size_t limit) {
  std::vector<Invoice> out;
  const TopupsState& t = *txn.state.topups;
  auto it = t.invoices_by_user.find(user_id);
  if (it == t.invoices_by_user.end()) return out;
  for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
    out.push_back(t.invoices.at(*id));
  }
  return out;
}

std::vector<std::string> WatchedProcessorInvoices(const Txn& txn, std::size_t limit) {
  std::vector<std::string> out;
  const TopupsState& t = *txn.state.topups;
  for (const auto& [at, id] : t.watched_by_age) {
    if (out.size() >= limit) break;
    out.push_back(t.invoices.at(id).processor_invoice_id);
  }
  return out;
}

Result<PaymentEventOutcome> ApplyPaymentEvent(Txn& txn, const std::string& type,
                                              const std::string& invoice_id) {
  TopupsState& t = *txn.state.topups;
  auto it = t.invoices.find(invoice_id);
  if (it == t.invoices.end() || it->second.processor != "demo") {
    return Status::NotFound("no invoice '" + invoice_id.substr(0, 64) + "'");
  }
  Invoice& inv = it->second;
  PaymentEventOutcome outcome;
  InvoiceStatus before = inv.status;
  if (type == "InvoiceSettled") {
    if (inv.status != InvoiceStatus::kSettled) {
      TransferRequest credit;
      credit.id = "topup:" + inv.id;
      credit.kind = TransferKind::kSinglePhase;
      credit.debit = AccountKey::System(AccountKind::kDeposits, inv.currency);
      credit.credit = AccountKey::Wallet(inv.user_id, inv.currency);
      credit.amount_micros = inv.amount_micros;
      credit.code = "topup";
      credit.memo = "top-up invoice " + inv.id;
      credit.timestamp = txn.now;
      GPUHUB_RETURN_IF_ERROR(ApplyAndWrite(txn, {credit}).status());
      inv.transfer_id = credit.id;
      inv.credited_micros = inv.amount_micros;
      SetStatus(txn, inv, InvoiceStatus::kSettled);
      outcome.credited = true;
    }
  } else if (type == "InvoiceProcessing" || type == "InvoiceReceivedPayment") {
    if (inv.status == InvoiceStatus::kNew) SetStatus(txn, inv, InvoiceStatus::kProcessing);
  } else if (type == "InvoiceExpired") {
    if (IsOpen(inv.status)) SetStatus(txn, inv, InvoiceStatus::kExpired);
  } else if (type == "InvoiceInvalid") {
    if (inv.status != InvoiceStatus::kSettled) SetStatus(txn, inv, InvoiceStatus::kInvalid);
  } else {
    outcome.ignored = true;
  }
  if (inv.status != before) {
    inv.updated_at = txn.now;
    WriteInvoice(txn, inv);
  }
  outcome.invoice = inv;
  return outcome;
}

Result<ReportOutcome> ApplyProcessorReport(Txn& txn, const ProcessorReport& report,
                                           const std::string& source) {
  TopupsState& t = *txn.state.topups;
  auto by = t.by_processor_id.find(report.processor_invoice_id);
  if (by == t.by_processor_id.end()) {
    return Status::NotFound("no invoice for BTCPay invoice '" +
                            report.processor_invoice_id.substr(0, 64) + "'");
  }
  Invoice& inv = t.invoices.at(by->second);
  if (report.currency != inv.currency || report.amount_micros != inv.amount_micros) {
    return Status::FailedPrecondition(
        "BTCPay invoice " + report.processor_invoice_id.substr(0, 64) + " says " +
        FormatMicros(report.amount_micros, 2) + " " + std::string(CurrencyCode(report.currency)) +
        " but gpuhub created it for " + FormatMicros(inv.amount_micros, 2) + " " +
        std::string(CurrencyCode(inv.currency)) + "; nothing credited");
  }
  const bool invalid = report.status == "Invalid";
  const bool settled = report.status == "Settled";
  // Validate before anything changes: a report that cannot be applied whole changes nothing.
  std::size_t new_entries = 2;  // room for a rounding or marked entry
  for (const ReportedPayment& p : report.payments) {
    if (p.fiat_micros < 0 || p.fiat_micros > kMaxTopupPaymentMicros) {
      return Status::FailedPrecondition("BTCPay reported a payment of an impossible amount");
    }
    new_entries += 1;
  }
  if (inv.payments.size() + new_entries > kMaxPaymentsPerTopup) {
    return Status::ResourceExhausted("invoice " + inv.id + " has too many payments to record");
  }
  ReportOutcome outcome;
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < inv.payments.size(); ++i) index[inv.payments[i].payment_id] = i;
  for (const ReportedPayment& p : report.payments) {
    if (p.id.empty() || p.id.front() == '(') continue;  // ids of our own entries are not BTCPay's
    const bool accounted = p.state != ReportedPayment::State::kInvalid;
    auto known = index.find(p.id);
    if (known != index.end()) {
      InvoicePayment& entry = inv.payments[known->second];
      if (entry.state == PaymentCreditState::kHeld && settled &&
          p.state == ReportedPayment::State::kSettled) {
        // BTCPay settled an invoice it had called invalid (marked by hand there): its payment
        // stands.
        Release(txn, inv, entry, true, 0, "BTCPay settled the invoice", source);
        outcome.changes.push_back({entry.payment_id, entry.fiat_micros, entry.state,
                                   entry.transfer_id});
      } else if (!accounted && (entry.state == PaymentCreditState::kCredited ||
                                entry.state == PaymentCreditState::kReleased)) {
        Reverse(txn, inv, entry, source);
        outcome.changes.push_back({entry.payment_id, entry.fiat_micros, entry.state,
                                   entry.transfer_id});
        ++outcome.reversed_after_credit;
      }
      continue;
    }
    bool hold = invalid && accounted;
    if (!hold && p.state != ReportedPayment::State::kSettled) continue;  // not confirmed yet
    InvoicePayment* entry = AddEntry(txn, inv, p.id, p.payment_method, p.fiat_micros, hold, source);
    index[p.id] = inv.payments.size() - 1;
    outcome.changes.push_back({entry->payment_id, entry->fiat_micros, entry->state,
                               entry->transfer_id});
  }
  // Settled in full: exactly the invoice's amount, whatever per-payment rounding left.
  std::int64_t arrived = inv.credited_micros + inv.held_micros;
  if (settled && !index.count("(rounding)") && !index.count("(marked)")) {
    std::int64_t short_by = inv.amount_micros - arrived;
    std::size_t paid = 0;
    for (const auto& e : inv.payments) paid += e.payment_id.front() != '(' ? 1 : 0;
    if (report.additional_status == "None" && short_by > 0 && paid > 0 &&
        short_by <= static_cast<std::int64_t>(paid) * kRoundingMicrosPerPayment) {
      InvoicePayment* entry = AddEntry(txn, inv, "(rounding)", "rounding", short_by, false, source);
      outcome.changes.push_back({entry->payment_id, entry->fiat_micros, entry->state,
                                 entry->transfer_id});
    } else if (report.additional_status == "Marked" && short_by > 0) {
      // Marked paid at BTCPay without the payments to show for it: an admin here decides.
      InvoicePayment* entry = AddEntry(txn, inv, "(marked)", "marked", short_by, true, source);
      outcome.changes.push_back({entry->payment_id, entry->fiat_micros, entry->state,
                                 entry->transfer_id});
    }
  }
  InvoiceStatus status = FromProcessorStatus(report.status);
  std::string additional = report.additional_status == "None" ? "" : report.additional_status;
  bool changed = !outcome.changes.empty() || status != inv.status ||
                 additional != inv.additional_status;
  if (status != inv.status) SetStatus(txn, inv, status);
  inv.additional_status = additional;
  if (Finished(report)) Unwatch(t, inv);
  if (changed) {
    inv.updated_at = txn.now;
    WriteInvoice(txn, inv);
  }
  outcome.invoice = inv;
  return outcome;
}

namespace {

// The payment an admin decides: not_found unless it exists; failed_precondition unless it is in
// state `want` (`what` says which, for the message).
Result<std::pair<Invoice*, InvoicePayment*>> PaymentAwaiting(TopupsState& t,
                                                             const std::string& invoice_id,
                                                             std::int64_t seq,
                                                             PaymentCreditState want,
                                                             const char* what) {
  auto it = t.invoices.find(invoice_id);
  if (it == t.invoices.end() || seq < 1 ||
      seq > static_cast<std::int64_t>(it->second.payments.size())) {
    return Status::NotFound("no payment " + std::to_string(seq) + " of invoice '" +
                            invoice_id.substr(0, 64) + "'");
  }
  Invoice& inv = it->second;
  InvoicePayment& p = inv.payments[static_cast<std::size_t>(seq - 1)];
  if (p.state != want) {
    return Status::FailedPrecondition("payment " + std::to_string(seq) + " of invoice " + inv.id +
                                      " is " + std::string(PaymentCreditStateName(p.state)) +
                                      ", not " + what);
  }
  return std::pair{&inv, &p};
}

}  // namespace

Result<InvoicePayment> DecideHeldPayment(Txn& txn, std::int64_t admin_id,
                                         const std::string& invoice_id, std::int64_t seq,
                                         bool release, const std::string& reason) {
  GPUHUB_ASSIGN_OR_RETURN(auto found,
                          PaymentAwaiting(*txn.state.topups, invoice_id, seq,
                                          PaymentCreditState::kHeld,
                                          "held: it was decided already"));
  Invoice& inv = *found.first;
  InvoicePayment& p = *found.second;
  Release(txn, inv, p, release, admin_id, reason, "admin:" + std::to_string(admin_id));
  inv.updated_at = txn.now;
  WriteInvoice(txn, inv);
  return p;
}

Result<InvoicePayment> DecideReversal(Txn& txn, std::int64_t admin_id,
                                      const std::string& invoice_id, std::int64_t seq, bool debit,
                                      const std::string& reason) {
  TopupsState& t = *txn.state.topups;
  GPUHUB_ASSIGN_OR_RETURN(auto found,
                          PaymentAwaiting(t, invoice_id, seq, PaymentCreditState::kReversalPending,
                                          "a pending reversal"));
  Invoice& inv = *found.first;
  InvoicePayment& p = *found.second;
  if (debit) {
    std::int64_t available = WalletAvailable(txn, inv.user_id, inv.currency);
    if (!DebitBack(txn, inv, p)) {
      return Status::InsufficientFunds(
          "the wallet has " + FormatMicros(available, 2) + " " +
          std::string(CurrencyCode(inv.currency)) + " available, less than the " +
          FormatMicros(p.fiat_micros, 2) + " to debit; write it off or wait for a top-up");
    }
  } else {
    p.state = PaymentCreditState::kWrittenOff;
  }
  p.decided_by = admin_id;
  p.decision_reason = reason;
  p.source = "admin:" + std::to_string(admin_id);
  p.updated_at = txn.now;
  t.reversal_pending.erase({inv.id, p.seq});
  WritePayment(txn, inv, p);
  inv.updated_at = txn.now;
  WriteInvoice(txn, inv);
  if (!HasPendingReversal(t, inv.user_id)) LiftWalletHold(txn, inv.user_id);
  return p;
}

std::vector<HeldPayment> ListHeldPayments(const Txn& txn, std::size_t limit) {
  std::vector<HeldPayment> out;
  const TopupsState& t = *txn.state.topups;
  std::vector<std::pair<std::string, std::int64_t>> waiting(t.held.begin(), t.held.end());
  waiting.insert(waiting.end(), t.reversal_pending.begin(), t.reversal_pending.end());
  for (const auto& [id, seq] : waiting) {
    if (out.size() >= limit) break;
    const Invoice& inv = t.invoices.at(id);
    HeldPayment h;
    h.invoice = inv;
    h.invoice.payments.clear();
    h.payment = inv.payments[static_cast<std::size_t>(seq - 1)];
    out.push_back(std::move(h));
  }
  return out;
}

void AddTopupTickHooks(Engine& engine) {
  engine.AddTickHook([](Txn& txn) -> Status {
    TopupsState& t = *txn.state.topups;
    while (!t.open_by_age.empty() &&
           t.open_by_age.begin()->first + kInvoiceLifetimeMicros <= txn.now) {
      Invoice& inv = t.invoices.at(t.open_by_age.begin()->second);
      SetStatus(txn, inv, InvoiceStatus::kExpired);
      inv.updated_at = txn.now;
      WriteInvoice(txn, inv);
    }
    while (!t.watched_by_age.empty() &&
           t.watched_by_age.begin()->first + kPaymentWatchMicros <= txn.now) {
      t.watched_by_age.erase(t.watched_by_age.begin());
    }
    return Status::Ok();
  });
}

Status LoadTopups(store::Store& store, TopupsState& state) {
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "invoices",
      {"id", "user_id", "currency", "amount_micros", "status", "created_at_us", "updated_at_us",
       "transfer_id", "processor", "processor_invoice_id", "checkout_url", "additional_status",
       "credited_micros", "held_micros", "expires_at_us"},
      "created_at_us, id", [&](const store::Row& row) -> Status {
        Invoice inv;
        GPUHUB_ASSIGN_OR_RETURN(inv.id, row.Text(0));
        GPUHUB_ASSIGN_OR_RETURN(inv.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(inv.currency, row.Parsed(2, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(inv.amount_micros, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(inv.status, row.Parsed(4, ParseInvoiceStatus));
        GPUHUB_ASSIGN_OR_RETURN(inv.created_at, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(inv.updated_at, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(inv.transfer_id, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(inv.processor, row.Text(8));
        GPUHUB_ASSIGN_OR_RETURN(inv.processor_invoice_id, row.Text(9));
        GPUHUB_ASSIGN_OR_RETURN(inv.checkout_url, row.Text(10));
        GPUHUB_ASSIGN_OR_RETURN(inv.additional_status, row.Text(11));
        GPUHUB_ASSIGN_OR_RETURN(inv.credited_micros, row.Int(12));
        GPUHUB_ASSIGN_OR_RETURN(inv.held_micros, row.Int(13));
        GPUHUB_ASSIGN_OR_RETURN(inv.expires_at, row.Int(14));
        if (inv.processor == "demo" && !inv.transfer_id.empty()) {
          inv.credited_micros = inv.amount_micros;  // rows from before the column existed
        }
        state.invoices_by_user[inv.user_id].push_back(inv.id);
        if (IsOpen(inv.status)) {
          state.open_by_age.insert({inv.created_at, inv.id});
          ++state.open_per_user[inv.user_id];
        }
        if (!inv.processor_invoice_id.empty()) {
          state.by_processor_id[inv.processor_invoice_id] = inv.id;
          // Watched again after a restart; the tick drops it past the window and the next pass
          // drops what is finished.
          if (inv.status != InvoiceStatus::kInvalid) {
            state.watched_by_age.insert({inv.created_at, inv.id});
          }
        }
        state.invoices[inv.id] = std::move(inv);
        return Status::Ok();
      }));
  return store.Scan(
      "invoice_payments",
      {"invoice_id", "payment_id", "seq", "payment_method", "fiat_micros", "state", "transfer_id",
       "source", "created_at_us", "updated_at_us", "decided_by", "decision_reason"},
      "invoice_id, seq", [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::string invoice_id, row.Text(0));
        auto it = state.invoices.find(invoice_id);
        if (it == state.invoices.end()) {
          return Status::Internal("payment of unknown invoice '" + invoice_id + "'");
        }
        InvoicePayment p;
        GPUHUB_ASSIGN_OR_RETURN(p.payment_id, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(p.seq, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(p.payment_method, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(p.fiat_micros, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(p.state, row.Parsed(5, ParseCreditState));
        GPUHUB_ASSIGN_OR_RETURN(p.transfer_id, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(p.source, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(p.created_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(p.updated_at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(p.decided_by, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(p.decision_reason, row.Text(11));
        if (p.seq != static_cast<std::int64_t>(it->second.payments.size()) + 1) {
          return Status::Internal("payments of invoice '" + invoice_id + "' are not numbered 1..n");
        }
        if (p.state == PaymentCreditState::kHeld) state.held.insert({invoice_id, p.seq});
        if (p.state == PaymentCreditState::kReversalPending) {
          state.reversal_pending.insert({invoice_id, p.seq});
        }
        it->second.payments.push_back(std::move(p));
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
