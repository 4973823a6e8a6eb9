// Top-ups: invoices that turn a payment through the processor into wallet credit.
//
// Two processors:
// - "btcpay": the invoice was created at BTCPay Server (its id and checkout link are kept). What
//   BTCPay reports for it (ApplyProcessorReport: its status and EVERY payment with its fiat value,
//   fetched back from BTCPay by the HTTP layer after a signed webhook or by the reconciliation
//   pass) is the only source of credits:
//     * each payment is credited once, keyed by (invoice id, BTCPay payment id), when BTCPay says
//       it is Settled, whatever the invoice's status (partial, over, after expiry): money that
//       arrived is never refused;
//     * an invoice BTCPay calls Invalid holds every payment that arrived (Settled or Processing) as
//       a pending credit (deposits -> wallet, not spendable) until an admin releases (posts) or
//       refuses (voids) it (DecideHeldPayment); the same for the part of an invoice marked
//       Settled by hand at BTCPay that no payment covers;
//     * a payment credited (or released) that BTCPay later calls Invalid (a double spend, a
//       reorg, a chargeback of a card-backed rail) is taken back: debited from the wallet at once
//       when its available balance covers it ("reversed"); otherwise nothing is debited, the
//       payment waits as "reversal_pending" and the account's wallet is put on hold (no purchase,
//       engine/billing.h) until an admin debits it (when the balance allows) or writes it off
//       (DecideReversal); the hold lifts when no reversal of the account is pending. Logged at
//       error level and shown to the account (GET /v1/billing-profile: wallet_hold);
//     * an invoice BTCPay calls Settled without any exception is credited exactly its amount:
//       per-payment rounding to cents that leaves it short by at most a cent per payment is made
//       up by one "rounding" credit.
//   Transfer ids are "btcpay:<invoice id>:<n>" (n = 1, 2, ... in the order payments were first
//   seen), so a replay can never move money twice.
// - "demo": without BTCPay configuration (make run), the signed webhook's InvoiceSettled credits
//   the whole amount once (ApplyPaymentEvent), as before real payments existed.
//
// All functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/money.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

enum class InvoiceStatus { kNew, kProcessing, kSettled, kExpired, kInvalid };
std::string_view InvoiceStatusName(InvoiceStatus status);  // "new", "processing", ...

// What happened to one payment of a BTCPay invoice.
enum class PaymentCreditState {
  kCredited,         // posted to the wallet
  kHeld,             // pending credit, waiting for an admin
  kReleased,         // an admin posted the held credit
  kRefused,          // an admin voided the held credit
  kReversed,         // credited, then BTCPay called it Invalid: debited back from the wallet
  kReversalPending,  // ... but the wallet could not cover it: the wallet is on hold for an admin
  kWrittenOff,       // an admin let a pending reversal go (the platform bears the loss)
};
std::string_view PaymentCreditStateName(PaymentCreditState s);  // "credited", "held", ...

struct InvoicePayment {
  std::string payment_id;  // BTCPay's ("(rounding)" / "(marked)" for the engine's own entries)
  std::int64_t seq = 0;    // 1, 2, ... per invoice: names the transfer
  std::string payment_method;
  std::int64_t fiat_micros = 0;
  PaymentCreditState state = PaymentCreditState::kCredited;
  std::string transfer_id;
  std::string source;  // "webhook:<delivery id>", "reconciliation", "admin:<user id>"
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  std::int64_t decided_by = 0;  // the admin's user id for released/refused
  std::string decision_reason;
};

struct Invoice {
  std::string id;  // "inv_" + 24 hex digits (random: the checkout URL must not be guessable)
  std::int64_t user_id = 0;
  Currency currency = Currency::kUsd;
  std::int64_t amount_micros = 0;
  InvoiceStatus status = InvoiceStatus::kNew;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  std::string transfer_id;  // demo: set once settled
  std::string processor = "demo";  // "demo" | "btcpay"
  std::string processor_invoice_id;
  std::string checkout_url;  // btcpay: BTCPay's checkoutLink; demo: empty (the config's base + id)
  std::string additional_status;  // BTCPay's ("PaidPartial", ...); "" for none
  std::int64_t credited_micros = 0;  // posted to the wallet so far
  std::int64_t held_micros = 0;      // pending, waiting for an admin
  TimestampMicros expires_at = 0;    // BTCPay's checkout expiry (0: unknown / demo)
  std::vector<InvoicePayment> payments;
};

struct TopupsState {
  std::map<std::string, Invoice> invoices;
  std::map<std::string, std::string> by_processor_id;  // BTCPay invoice id -> our id
  std::map<std::int64_t, std::vector<std::string>> invoices_by_user;  // oldest first
  // Invoices still open (new or processing), for expiry and the per-user limit.
  std::set<std::pair<TimestampMicros, std::string>> open_by_age;
  std::map<std::int64_t, std::size_t> open_per_user;
  // BTCPay invoices the reconciliation pass still reads back: created less than
  // kPaymentWatchMicros ago and not finished (settled with nothing processing, or refused).
  std::set<std::pair<TimestampMicros, std::string>> watched_by_age;
  std::set<std::pair<std::string, std::int64_t>> held;  // (invoice id, seq) waiting for an admin
  // Credited payments BTCPay reversed that the wallet could not cover: (invoice id, seq).
  std::set<std::pair<std::string, std::int64_t>> reversal_pending;
};

// The amounts of a top-up request ("100.00"): 1.00 .. 100,000.00 with at most 2 decimals.
Result<std::int64_t> ParseTopupAmount(std::string_view text);
// A fresh random invoice id ("inv_" + 24 hex digits); callable from any thread.
std::string NewInvoiceId();

// resource_exhausted when the user has kMaxOpenInvoicesPerUser open invoices.
Status CheckCanOpenTopup(const Txn& txn, std::int64_t user_id);

// Where a BTCPay invoice lives (GreenfieldClient::CreateInvoice's answer).
struct ProcessorLink {
  std::string invoice_id;  // ours, sent to BTCPay as metadata.orderId
  std::string processor_invoice_id;
  std::string checkout_url;
  TimestampMicros expires_at = 0;
};
// A demo invoice (link == nullptr) or the record of one created at BTCPay.
Result<Invoice> CreateTopup(Txn& txn, std::int64_t user_id, Currency currency,
                            std::int64_t amount_micros, const ProcessorLink* link = nullptr);
// not_found unless the invoice exists AND belongs to user_id (never tells others' invoices apart
// from missing ones).
Result<Invoice> GetTopup(const Txn& txn, std::int64_t user_id, const std::string& invoice_id);
std::vector<Invoice> ListTopups(const Txn& txn, std::int64_t user_id, std::size_t limit);
// The BTCPay invoice ids the reconciliation pass reads now (oldest first, at most `limit`).
std::vector<std::string> WatchedProcessorInvoices(const Txn& txn, std::size_t limit);

struct PaymentEventOutcome {
  Invoice invoice;
  bool credited = false;  // this delivery moved money (false for a redelivery)
  bool ignored = false;   // an event type that changes nothing
};
// Demo invoices only: "InvoiceSettled" credits the wallet exactly once;
// "InvoiceProcessing"/"InvoiceReceivedPayment" mark it processing; "InvoiceExpired" and
// "InvoiceInvalid" close it unless it is settled; others are ignored. not_found for an unknown
// invoice or one of BTCPay's (whose webhook body is never trusted).
Result<PaymentEventOutcome> ApplyPaymentEvent(Txn& txn, const std::string& type,
                                              const std::string& invoice_id);

// What BTCPay says about one invoice (payments::ProcessorInvoice, as the HTTP layer maps it).
struct ReportedPayment {
  enum class State { kProcessing, kSettled, kInvalid };
  std::string id;
  std::string payment_method;
  State state = State::kProcessing;
  std::int64_t fiat_micros = 0;  // in the invoice's currency, whole cents
};
struct ProcessorReport {
  std::string processor_invoice_id;
  std::string status;             // "New", "Processing", "Expired", "Invalid", "Settled"
  std::string additional_status;  // "None", "PaidPartial", "PaidOver", "PaidLate", "Marked", ...
  Currency currency = Currency::kUsd;
  std::int64_t amount_micros = 0;
  std::vector<ReportedPayment> payments;
};
struct CreditLine {
  std::string payment_id;
  std::int64_t fiat_micros = 0;
  PaymentCreditState state = PaymentCreditState::kCredited;
  std::string transfer_id;
};
struct ReportOutcome {
  Invoice invoice;
  std::vector<CreditLine> changes;  // credits, holds and releases made by this report
  std::size_t reversed_after_credit = 0;  // credited payments BTCPay now calls Invalid (alert)
};
// Applies a report: see the header comment for the rules. not_found for an invoice gpuhub does not
// know (the webhook answers 200 and ignores it); failed_precondition when BTCPay's currency or
// amount contradicts ours (logged; nothing credited); `source` is recorded with each change.
Result<ReportOutcome> ApplyProcessorReport(Txn& txn, const ProcessorReport& report,
                                           const std::string& source);

// An admin releases (posts) or refuses (voids) a held payment credit; failed_precondition when it
// is not held (decided already); the reason is kept with the decision.
Result<InvoicePayment> DecideHeldPayment(Txn& txn, std::int64_t admin_id,
                                         const std::string& invoice_id, std::int64_t seq,
                                         bool release, const std::string& reason);
// An admin decides a pending reversal: `debit` takes the payment back from the wallet now
// (insufficient_funds while its available balance cannot cover it), otherwise it is written off.
// failed_precondition when the payment is not reversal_pending. Lifts the wallet hold once no
// reversal of the account is pending.
Result<InvoicePayment> DecideReversal(Txn& txn, std::int64_t admin_id,
                                      const std::string& invoice_id, std::int64_t seq, bool debit,
                                      const std::string& reason);
struct HeldPayment {
  Invoice invoice;  // without its payments
  InvoicePayment payment;
};
// Payments waiting for an admin: held credits, then pending reversals.
std::vector<HeldPayment> ListHeldPayments(const Txn& txn, std::size_t limit);

// Tick hook: expires open invoices nobody paid after kInvoiceLifetimeMicros and stops watching
// BTCPay invoices after kPaymentWatchMicros.
void AddTopupTickHooks(Engine& engine);
Status LoadTopups(store::Store& store, TopupsState& state);

}  // namespace gpuhub::engine
