// The vocabulary of term rentals: nodes of the term fleet, rentals on them, their instances,
// renewals, history events, charges and notices, as plain records (what the engine persists and
// the API shows), their states, and the names those states have in storage and JSON.
//
// Money is int64 micro-units: prices are micro-USD (the fleet is priced in USD, tax excluded),
// debits are in the paying wallet's currency. Times are TimestampMicros from the caller's clock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuhub::rentals {

using NodeId = std::int64_t;
using RentalId = std::int64_t;
using UserId = std::int64_t;
using ChargeId = std::int64_t;

// ----- States -----------------------------------------------------------------------------------
// Names (the *Name functions) are stable: they are stored and shown in JSON.

enum class Term : std::uint8_t { kWeek, kMonth };
std::string_view TermName(Term term);  // "week", "month"
Result<Term> ParseTerm(std::string_view name);
std::int64_t TermMicros(Term term);  // 7 or 30 days

enum class NodeState : std::uint8_t {
  kActive,    // takes new rentals
  kDraining,  // keeps its rentals, takes no new ones
  kRemoved,   // out of the fleet (only once no live rental and no pending wipe is on it)
};
std::string_view NodeStateName(NodeState s);  // "active", "draining", "removed"
Result<NodeState> ParseNodeState(std::string_view name);

enum class RentalState : std::uint8_t {
  kProvisioning,  // paid, cards allocated, the instance is being set up (at most 1 h)
  kActive,        // the term runs
  kStopped,       // unpaid at the term end: instance stopped, cards and disk held 72 h
  kReleased,      // over: the cards are back in stock, the disk's key destroyed
};
std::string_view RentalStateName(RentalState s);  // "provisioning", "active", "stopped", "released"
Result<RentalState> ParseRentalState(std::string_view name);
// Provisioning, active and stopped rentals hold their cards.
inline bool IsLive(RentalState s) { return s != RentalState::kReleased; }

enum class ReleaseReason : std::uint8_t {
  kNone,
  kUnpaid,              // the renewal was not paid by the end of the hold
  kCustomer,            // released early by the customer (no refund of the term)
  kProvisioningFailed,  // the instance could not be provisioned within 1 h (refunded in full)
};
// "", "unpaid", "released_by_customer", "provisioning_failed"
std::string_view ReleaseReasonName(ReleaseReason r);
Result<ReleaseReason> ParseReleaseReason(std::string_view name);

enum class InstanceState : std::uint8_t {
  kProvisioning,  // being set up (by the host agent, or at once without one)
  kRunning,
  kStopped,  // the rental is on hold: the instance is stopped, its disk kept
  kFailed,   // could not be provisioned (the rental is refunded)
  kErased,   // the disk's encryption key is destroyed: the data is unrecoverable
};
// "provisioning", "running", "stopped", "failed", "erased"
std::string_view InstanceStateName(InstanceState s);
Result<InstanceState> ParseInstanceState(std::string_view name);

enum class RenewalStatus : std::uint8_t {
  kOpen,  // issued 24 h before the term end, payable until the hold ends
  kPaid,
  kVoid,      // the rental was released before it was paid
  kRefunded,  // paid, then refunded because the rental was released before the term started
};
std::string_view RenewalStatusName(RenewalStatus s);  // "open", "paid", "void", "refunded"
Result<RenewalStatus> ParseRenewalStatus(std::string_view name);

// kExtraNvme: extra local NVMe added to a running rental, prorated to its term's end (and, when
// the next term is already paid, that whole term of it as a second charge).
enum class ChargeKind : std::uint8_t { kPurchase, kRenewal, kRefund, kExtraNvme };
// "purchase", "renewal", "refund", "extra_nvme"
std::string_view ChargeKindName(ChargeKind k);
Result<ChargeKind> ParseChargeKind(std::string_view name);

// What happened to a rental, in its history. Each lifecycle transition is one event, recorded once
// at the time it was due.
enum class EventKind : std::uint8_t {
  kCreated,            // ordered and paid; cards allocated
  kProvisioned,        // the instance runs; the term starts
  kAutoRenewed,        // the next term was debited by auto-renew
  kAutoRenewFailed,    // an auto-renew attempt could not debit the wallet (retried hourly)
  kRenewalInvoiced,    // the renewal invoice was issued (24 h before the end)
  kRenewalPaid,        // the customer paid the next term
  kExtended,           // the term rolled over into the paid next term
  kStopped,            // unpaid at the term end: instance stopped, cards held
  kResumed,            // paid during the hold: active again, the new term counted from T
  kReleased,           // cards back in stock (detail: the reason)
  kKeyDestroyed,       // crypto-erase: the instance's disk key is destroyed
  kWiped,              // the local NVMe was physically wiped
  kRefunded,           // money returned (provisioning failure, unstarted prepaid term)
  kAutoRenewChanged,   // auto-renew switched on or off
  kInstanceFailed,     // the agent reported that the instance cannot be provisioned
  kExtraNvmeAdded,     // extra local NVMe added to the running rental (issue 11)
};
std::string_view EventKindName(EventKind k);  // "created", "provisioned", ...
Result<EventKind> ParseEventKind(std::string_view name);

// ----- Records ----------------------------------------------------------------------------------

struct Node {
  NodeId id = 0;
  std::string gpu;     // the card model, canonical ("H100 SXM")
  std::string region;  // "DFW-1"
  int cards = 0;       // 1..kMaxCardsPerNode
  std::string hostname;  // optional, for operators and the host agent
  std::int64_t nvme_included_gb_per_card = 0;  // local NVMe included with each rented card
  std::int64_t nvme_extra_capacity_gb = 0;     // NVMe the node can add to its rentals (issue 11)
  NodeState state = NodeState::kActive;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  friend bool operator==(const Node&, const Node&) = default;
};

// The machine side of a rental. The host agent drives provisioning -> running and reports
// failures and the physical wipe; without an agent the engine does it at once (Provisioning).
struct Instance {
  InstanceState state = InstanceState::kProvisioning;
  std::int64_t nvme_gb = 0;  // included local NVMe: per-card allowance x count
  TimestampMicros provisioning_deadline = 0;  // refunded in full if not running by then
  // Filled by the agent (host, ssh_port, ssh_user, ...); empty until then.
  std::vector<std::pair<std::string, std::string>> connection;
  std::string error;                   // the last failure the agent reported
  TimestampMicros key_destroyed_at = 0;  // crypto-erase
  TimestampMicros wipe_due_at = 0;       // the physical wipe is due by then (0: not scheduled)
  TimestampMicros wiped_at = 0;          // recorded when done
  friend bool operator==(const Instance&, const Instance&) = default;
};

struct Rental {
  RentalId id = 0;
  UserId customer_id = 0;
  std::string gpu;  // canonical card name
  int count = 0;
  std::string region;
  NodeId node_id = 0;
  std::uint32_t card_mask = 0;  // bit i = card i of the node
  Term term = Term::kMonth;
  // The locked price (renewals pay the same): list price per card per term, the multi-card
  // discount, and the net price of one term: list x count x (1 - discount), half-even.
  std::int64_t list_micros = 0;
  std::int64_t discount_ppm = 0;
  std::int64_t price_micros = 0;
  Currency currency = Currency::kUsd;  // the wallet that pays
  bool auto_renew = true;
  RentalState state = RentalState::kProvisioning;
  ReleaseReason release_reason = ReleaseReason::kNone;
  std::int64_t period = 1;         // the term being served (1 = the first, paid at the order)
  bool next_paid = false;          // period + 1 is paid (by auto-renew or by the customer)
  TimestampMicros term_start = 0;  // 0 until provisioned
  TimestampMicros term_end = 0;    // T
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  TimestampMicros released_at = 0;
  // Auto-renew attempts of the current term: the last one (0: none yet) and how many failed.
  TimestampMicros auto_renew_attempted_at = 0;
  std::int64_t auto_renew_failures = 0;
  TimestampMicros renewal_invoiced_at = 0;  // 0: no invoice issued for period + 1 yet
  // Extra local NVMe (issue 11): whole TB beyond the included NVMe, from the node's extra
  // capacity, renewed and released with the rental. extra_nvme_micros is its net price per term
  // (locked like the cards': $9 per TB-month, 7/30 of it for a week); a term costs
  // price_micros + extra_nvme_micros. nvme_addons counts the add-on charges (their ids).
  std::int64_t extra_nvme_gb = 0;
  std::int64_t extra_nvme_micros = 0;
  std::int64_t nvme_addons = 0;
  Instance instance;
  std::int64_t events = 0;  // history events recorded so far (the next one's sequence - 1)

  friend bool operator==(const Rental&, const Rental&) = default;
};

struct TaxLine {
  std::string name;             // "VAT DE 19%"
  std::int64_t rate_ppm = 0;    // 190'000 = 19%
  std::int64_t amount_micros = 0;
  friend bool operator==(const TaxLine&, const TaxLine&) = default;
};

// Net, tax and gross of one charge, in USD micro-units. gross = net + sum(lines).
struct TaxBlock {
  std::int64_t net_micros = 0;
  std::vector<TaxLine> lines;
  std::int64_t tax_micros = 0;
  std::int64_t gross_micros = 0;
  friend bool operator==(const TaxBlock&, const TaxBlock&) = default;
};
// invalid_argument unless net > 0, every line's amount >= 0, tax = sum of the lines and
// gross = net + tax (all within kMaxAmountMicros). A tax function must return such a block.
Status ValidateTaxBlock(const TaxBlock& block);

// The bill for the next term of a rental: issued 24 h before the term end (or created paid when
// auto-renew or the customer pays earlier). One per (rental, period).
struct Renewal {
  RentalId rental_id = 0;
  std::int64_t period = 0;  // the term it pays (>= 2)
  UserId customer_id = 0;
  TaxBlock amount;          // USD
  RenewalStatus status = RenewalStatus::kOpen;
  bool by_auto_renew = false;
  TimestampMicros issued_at = 0;  // 0 when it was paid before an invoice was due
  TimestampMicros due_at = 0;     // the term end T
  TimestampMicros paid_at = 0;
  TimestampMicros updated_at = 0;
  Currency paid_currency = Currency::kUsd;
  std::int64_t paid_micros = 0;  // what the wallet was debited
  ChargeId charge_id = 0;        // the charge that paid it
  friend bool operator==(const Renewal&, const Renewal&) = default;
};

// One history event.
struct Event {
  RentalId rental_id = 0;
  std::int64_t sequence = 0;  // 1, 2, ... per rental
  TimestampMicros at = 0;
  EventKind kind = EventKind::kCreated;
  std::string detail;  // for people: "renewed until 2026-12-01T00:00:00Z (auto-renew)"
  friend bool operator==(const Event&, const Event&) = default;
};

// Money that moved for a rental: a purchase, a renewal or a refund. This is the domain event that
// billing (issue 13) turns into a tax invoice or credit note: every charge is emitted exactly once,
// in the command that moved its money.
struct Charge {
  ChargeId id = 0;  // 1, 2, ... across the fleet
  RentalId rental_id = 0;
  UserId customer_id = 0;
  std::int64_t period = 0;  // the term paid (or refunded)
  ChargeKind kind = ChargeKind::kPurchase;
  TaxBlock amount;  // USD; a refund repeats the amounts it returns (positive)
  Currency paid_currency = Currency::kUsd;
  std::int64_t paid_micros = 0;            // debited from (refund: credited to) the wallet
  // The term it pays; 0 for a purchase paid before provisioning started the term (agent mode:
  // the rental's term_start says when it started). Charges never change once emitted.
  TimestampMicros period_start = 0;
  TimestampMicros period_end = 0;
  TimestampMicros at = 0;
  std::vector<std::string> transfer_ids;  // the ledger transfers that moved it
  // Extra local NVMe this charge pays for (GB) and its part of the net: on a purchase or renewal
  // the rental's extra NVMe for that term; on an extra_nvme charge the TB added.
  std::int64_t extra_nvme_gb = 0;
  std::int64_t extra_nvme_micros = 0;
  std::int64_t nvme_addon = 0;  // extra_nvme charges: 1, 2, ... per rental (0 otherwise)
  ChargeId refund_of = 0;       // refunds: the charge returned (0 in records before issue 11)
  friend bool operator==(const Charge&, const Charge&) = default;
};
// The prefix of a charge's ledger transfer ids: "rental:12:p3" for a term (and its refund's
// "rental:12:p3:refund:*"), "rental:12:p3:nvme2" for the second extra NVMe add-on.
std::string ChargeTransferBase(const Charge& charge);
// Whether `refund` is the refund of `paid` (by refund_of; records before issue 11 name no charge
// and refund the term charge of their period).
bool Refunds(const Charge& refund, const Charge& paid);

// Something a customer must be told (the engine records it in the notifications store and, when
// the account has a webhook, in its outbox). `data` are extra fields for machines (strings).
struct Notice {
  UserId user_id = 0;
  std::string kind;     // "rental.renewal_invoice", "rental.stopped", ...
  std::string subject;  // "rental:12"
  std::string message;  // for people
  std::vector<std::pair<std::string, std::string>> data;
  TimestampMicros at = 0;
  friend bool operator==(const Notice&, const Notice&) = default;
};

// ----- Ids and names ----------------------------------------------------------------------------

// Ledger transfer ids of a rental, derived from the rental, the period and the leg so that no
// term can be charged (or refunded) twice: "rental:12:p3:revenue", "rental:12:p3:tax",
// "rental:12:p3:fx", "rental:12:p1:refund:revenue".
std::string RentalTransferId(RentalId rental, std::int64_t period, std::string_view leg);

// The key under which card names are compared: lower case without spaces, dashes, underscores or
// dots ("H100 SXM", "h100-sxm" and "h100sxm" are one card).
std::string CardKey(std::string_view name);
// invalid_argument unless 1..kMaxRegionBytes of [A-Z0-9-] starting with a letter; lower case is
// folded ("dfw-1" -> "DFW-1").
Result<std::string> CanonicalRegion(std::string_view code);

}  // namespace gpuhub::rentals
