// Term rentals: the fleet's nodes, rentals of whole weeks or months on them, their instances, and
// the renewal lifecycle, paid through the double-entry ledger (spec/market.md "Term rentals").
//
// Contract
// - Pure and deterministic: no I/O, no clock (every command takes `now`), no threads. The same
//   commands at the same times against the same ledger give the same state.
// - Not thread-safe: the engine's single writer calls the mutating methods; const methods may run
//   concurrently with each other only.
// - Commands validate first and change nothing when they fail; the money of one operation moves in
//   ONE atomic ledger batch. Expected failures are Status codes: invalid_argument (bad input, with
//   the field), not_found (unknown id, or one that belongs to someone else), failed_precondition
//   (wrong state, no stock: 409), insufficient_funds (the wallet cannot pay), resource_exhausted
//   (per-account limits).
// - Each command reports what it changed in `Changes`: records to persist, ledger transfers in the
//   order they were applied, new history events, charges (the domain events billing builds tax
//   invoices from) and notices for the customer. The engine writes them in the same group commit.
//
// Prices (spec/sizing.md §5-6): the price of a term is list x count x (1 - discount at count),
// half-even to the micro-dollar (the same rule as catalog::SetPriceMicros), locked for every renewal
// of the rental. Tax comes from the TaxFunction the caller passes (the engine's one tax function;
// zero until billing countries exist); the wallet pays the gross, converted at the current FX rate
// when it is not a USD wallet (rounded once, half-even, at the moment of payment).
//
// Lifecycle of a rental (T = the end of the current term; every transition happens once, at its own
// time, in AdvanceTo, also when the clock jumps past several of them):
//   order (paid) -> provisioning -> active: the term runs from the moment the instance runs.
//     Provisioning::kImmediate: at once. kAgent: when ReportInstance says running; not running
//     after kProvisioningDeadlineMicros (1 h) -> refunded in full and released.
//   T - 72 h  auto-renew (when on): debit the next term if the wallet holds it; a failed attempt is
//             retried every hour until T - 24 h.
//   T - 24 h  the renewal invoice is issued (unless the next term is already paid).
//   T         next term paid -> the term extends from T. Unpaid -> stopped: the instance stops and
//             the cards and disk are held 72 h; paying during the hold -> active again, the new term
//             counted from T (not from the payment).
//   T + 72 h  still unpaid -> released: cards back in stock, the disk's encryption key destroyed
//             (crypto-erase) at that moment, the physical NVMe wipe due by T + 7 d.
//   Early release by the customer: at once, no refund of the term that runs (a next term already
//   paid but not started is refunded), the same key destruction; wipe due 7 d later.
//   Without an agent the wipe is recorded at its due time; with one, the agent records it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "rentals/config.h"
#include "rentals/inventory.h"
#include "rentals/limits.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

// The tax on a charge of `net_micros` USD to `customer` (0 for an anonymous quote) at `at`.
// Must be deterministic and return a block that ValidateTaxBlock accepts; an error fails the
// charge (and is reported as the operation's error).
using TaxFunction =
    std::function<Result<TaxBlock>(UserId customer, std::int64_t net_micros, TimestampMicros at)>;
// No tax: net = gross. What the engine passes until billing countries exist.
TaxBlock NoTax(std::int64_t net_micros);

// ----- Inputs ------------------------------------------------------------------------------------

struct NodeSpec {
  std::string gpu;
  std::string region;
  int cards = 0;          // 0: the card's largest rentable count (8 for the HGX-style cards)
  std::string hostname;   // optional
  std::optional<std::int64_t> nvme_included_gb_per_card;  // default: the card's
  std::optional<std::int64_t> nvme_extra_capacity_gb;     // default: kDefaultExtraNvmeGbPerNode
};

struct OrderSpec {
  std::string gpu;
  int count = 0;
  std::string region;  // "" = any region
  Term term = Term::kMonth;
  Currency currency = Currency::kUsd;  // the wallet that pays
  bool require_fp8 = false;            // refuse cards without FP8
  bool auto_renew = true;
  // Extra local NVMe in whole TB (0..kMaxExtraNvmeTbPerRental), from the node's free extra
  // capacity: the rental goes on a node that has both the cards and this NVMe free.
  std::int64_t extra_nvme_tb = 0;
};

// What an instance's agent reports (issue 12).
struct InstanceReport {
  InstanceState state = InstanceState::kRunning;  // running or failed
  std::vector<std::pair<std::string, std::string>> connection;  // when running
  std::string error;                                            // when failed
};

// ----- Outputs -----------------------------------------------------------------------------------

struct Changes {
  std::vector<ledger::Transfer> transfers;
  std::vector<NodeId> nodes;
  std::vector<RentalId> rentals;
  std::vector<std::pair<RentalId, std::int64_t>> renewals;  // (rental, period)
  std::vector<Event> events;
  std::vector<Charge> charges;
  std::vector<Notice> notices;

  void Clear();
  void Normalize();  // sorts and deduplicates the id lists (events, charges, notices keep order)
  bool empty() const;
};

struct RegionStock {
  std::string region;
  int cards_free = 0;
  int sets = 0;  // rentals of the quoted count that fit now
};

// The exact price of an order before anything is bought, and whether it can be served now.
struct Quote {
  std::string gpu;  // canonical
  int count = 0;
  Term term = Term::kMonth;
  std::string region_requested;  // "" = any
  std::int64_t list_micros = 0;  // per card per term
  bool list_derived = false;     // weekly price derived, not published
  std::int64_t subtotal_micros = 0;  // list x count
  std::int64_t discount_ppm = 0;
  std::int64_t discount_micros = 0;  // subtotal - net
  std::int64_t cards_net_micros = 0;  // the cards' net: subtotal - discount
  // Extra local NVMe: TB x $9 per TB-month (x 7/30 for a week), no discount.
  std::int64_t extra_nvme_tb = 0;
  std::int64_t extra_nvme_micros_per_tb = 0;  // per TB per term
  std::int64_t extra_nvme_micros = 0;
  TaxBlock amount;  // net (cards + extra NVMe), tax lines, gross (USD)
  Currency currency = Currency::kUsd;
  std::int64_t charge_micros = 0;    // what the wallet would be debited (gross, converted)
  std::optional<ledger::FxQuote> fx;  // when the wallet is not USD (nullopt: no rate, see reason)
  TimestampMicros term_start = 0;     // if ordered now and provisioned at once
  TimestampMicros term_end = 0;
  bool available = false;
  std::string region;  // where it would be placed ("" when not available)
  // Why not, when not available: code ("no_stock", "not_in_region", "count_not_allowed",
  // "needs_fp8", "no_fx_rate", "too_many_rentals", "no_nvme"), the request field it concerns, and
  // words.
  std::string reason_code;
  std::string reason_field;
  std::string reason;
  std::vector<RegionStock> stock;  // the card's regions, for this count
  Placement placement;             // where it would go (internal)
};

// What happens next to a rental, and when.
struct NextTransition {
  TimestampMicros at = 0;  // 0: nothing scheduled
  // "refund_unless_provisioned", "auto_renew", "renewal_invoice", "renews", "stops", "released",
  // "wipe_due"
  std::string what;
};

struct StockByCard {
  std::string gpu;
  std::vector<int> counts;        // the counts the card is rented in
  std::vector<StockRow> regions;  // the card's regions, in configuration order
};

// Everything the fleet persists; Restore rebuilds an identical fleet from it.
struct Snapshot {
  std::vector<Node> nodes;
  std::vector<Rental> rentals;
  std::vector<Renewal> renewals;
  std::vector<Event> events;  // any order; only the newest kMaxEventsKeptPerRental per rental kept
  std::vector<Charge> charges;
};

class Fleet {
 public:
  // `config` must be valid (ValidateFleetConfig): a programmer error otherwise.
  explicit Fleet(FleetConfig config = {});

  // ----- Admin -------------------------------------------------------------------------------
  Result<Node> AddNode(const NodeSpec& spec, TimestampMicros now, Changes* changes);
  // active <-> draining; removed only once no live rental and no pending wipe is on the node
  // (failed_precondition otherwise). A removed node stays removed.
  Result<Node> SetNodeState(NodeId id, NodeState state, TimestampMicros now, Changes* changes);

  // ----- Customers ---------------------------------------------------------------------------
  // invalid_argument (with the field) for an unknown card or region, a count that no card is
  // rented in; otherwise a Quote that says whether and where it can be served.
  Result<Quote> QuoteOrder(UserId customer, const OrderSpec& spec, const ledger::Ledger& ledger,
                           const TaxFunction& tax, TimestampMicros now) const;
  // Pays the first term and allocates the cards. Errors: the quote's; invalid_argument (field
  // count) for a count the card is not rented in; failed_precondition when it is not available
  // (no stock, not in that region, no FP8, no FX rate); insufficient_funds; resource_exhausted.
  Result<Rental> Order(UserId customer, const OrderSpec& spec, ledger::Ledger& ledger,
                       const TaxFunction& tax, TimestampMicros now, Changes* changes);
  // Pays the next term (period + 1) from `currency`'s wallet (default: the rental's) while the
  // rental is active or stopped. Already paid: returns that renewal and changes nothing (no
  // second charge). failed_precondition when provisioning or released.
  Result<Renewal> PayRenewal(UserId customer, RentalId id, std::optional<Currency> currency,
                             ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                             Changes* changes);
  // Ends the rental now (see the lifecycle). failed_precondition when already released.
  Result<Rental> Release(UserId customer, RentalId id, ledger::Ledger& ledger, TimestampMicros now,
                         Changes* changes);
  Result<Rental> SetAutoRenew(UserId customer, RentalId id, bool on, TimestampMicros now,
                              Changes* changes);
  // Adds `add_tb` whole TB of extra local NVMe to an active rental, from its node's free extra
  // capacity, paid from the rental's wallet in one batch: the TB for the rest of the current term
  // (price per term x time left / term, half-even; an extra_nvme charge) and, when the next term
  // is already paid, that whole term of it too (a second charge, refunded like the term if the
  // rental is released before it starts). From the next renewal on, the term's price includes
  // it; an open renewal invoice is re-issued at the new amount. Errors: not_found (not the
  // customer's rental); invalid_argument (field add_tb) for 0, or beyond
  // kMaxExtraNvmeTbPerRental in all; failed_precondition (field add_tb) when the node has not that
  // much free, or the rental is not active; insufficient_funds.
  Result<Rental> AddExtraNvme(UserId customer, RentalId id, std::int64_t add_tb,
                              ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                              Changes* changes);
  // The net price of `tb` TB of extra NVMe for one term: tb x monthly price x days / 30, half-even.
  std::int64_t ExtraNvmeMicros(std::int64_t tb, Term term) const;

  // ----- The host agent (issue 12); an admin endpoint until then -----------------------------
  // provisioning -> running (the term starts) or failed (refunded in full, released). Running
  // again with new connection details updates them. failed_precondition in other states.
  Result<Rental> ReportInstance(RentalId id, const InstanceReport& report, ledger::Ledger& ledger,
                                TimestampMicros now, Changes* changes);
  // The physical wipe of a released rental's local NVMe is done. Idempotent.
  Result<Rental> RecordWipe(RentalId id, TimestampMicros now, Changes* changes);

  // ----- Time --------------------------------------------------------------------------------
  // Runs every transition due at or before `now`, in time order, each at its own time.
  void AdvanceTo(ledger::Ledger& ledger, const TaxFunction& tax, TimestampMicros now,
                 Changes* changes);
  TimestampMicros NextEventAt() const;  // kNever when nothing is scheduled
  static constexpr TimestampMicros kNever = INT64_MAX;

  // ----- Queries -----------------------------------------------------------------------------
  const FleetConfig& config() const { return config_; }
  const Node* FindNode(NodeId id) const { return inventory_.FindNode(id); }
  const Rental* FindRental(RentalId id) const;
  // The rental when it belongs to `customer`, else nullptr (others' ids look missing).
  const Rental* FindCustomerRental(UserId customer, RentalId id) const;
  const Renewal* FindRenewal(RentalId id, std::int64_t period) const;
  // Newest first, at most `limit`.
  std::vector<Rental> ListRentals(UserId customer, std::size_t limit) const;
  // Nodes (optionally only one card / region) with id > `after`, by id, at most `limit`.
  std::vector<Node> ListNodes(std::string_view gpu, std::string_view region, NodeId after = 0,
                              std::size_t limit = SIZE_MAX) const;
  std::vector<Rental> LiveRentalsOnNode(NodeId id) const;
  // Released rentals of the node whose local NVMe is not wiped yet, oldest first (the host agent
  // erases and wipes them).
  std::vector<Rental> UnwipedOnNode(NodeId id) const;
  std::uint32_t RentedCards(NodeId id) const { return inventory_.Used(id); }
  // Extra NVMe of the node sold to live rentals, and what it can still sell.
  std::int64_t ExtraNvmeSoldGb(NodeId id) const { return inventory_.ExtraNvmeSoldGb(id); }
  std::int64_t ExtraNvmeFreeGb(NodeId id) const;
  // Oldest first, the newest kMaxEventsKeptPerRental.
  std::vector<Event> History(RentalId id) const;
  NextTransition Next(const Rental& rental) const;
  std::vector<Charge> ChargesOf(RentalId id) const;
  // Every charge of the fleet, by id (the billing check walks them without copying).
  const std::map<ChargeId, Charge>& Charges() const { return charges_; }
  // Stock per card (configuration order) and region.
  std::vector<StockByCard> Stock() const;
  // How many rentals of `count` cards of `gpu` could be placed now in `region` ("" = summed over
  // the card's regions): the free aligned sets of the stock. 0 for an unknown card, region or
  // count. O(regions) map lookups.
  int FreeSets(std::string_view gpu, std::string_view region, int count) const;
  // The canonical name of a configured card; not_found when unknown.
  Result<std::string> CardName(std::string_view gpu) const;
  // Released rentals whose wipe is past due and not recorded (agent mode), oldest first.
  std::vector<Rental> OverdueWipes(TimestampMicros now, std::size_t limit) const;

  std::size_t node_count() const { return inventory_.size(); }
  std::size_t rental_count() const { return rentals_.size(); }
  std::size_t live_rental_count() const { return live_rentals_; }

  // ----- Persistence -------------------------------------------------------------------------
  // Records that contradict each other (a card in two live rentals, a live rental on an unknown
  // node, a paid renewal without its charge, ...) are `internal`.
  static Result<Fleet> Restore(FleetConfig config, Snapshot snapshot);
  Snapshot Records() const;

  // ----- Invariants --------------------------------------------------------------------------
  // Cheap enough to run after every command in tests (O(nodes + live rentals)): no card in two
  // live rentals and every node's rented cards are the union of its live rentals; the stock
  // counters equal a recount (stock = nodes - live rentals); each rental's state, instance and
  // renewal agree; exactly the due transitions are scheduled, each at the time the rules give.
  Status CheckInvariants() const;
  // Thorough, O(charges): every charge's transfers are in the ledger with its amounts (net to
  // revenue, tax to tax payable, gross converted from the wallet), every paid renewal and every
  // rental's first term has exactly one charge, refunds mirror what they return.
  Status CheckSettlement(const ledger::Ledger& ledger) const;

 private:
  enum class Due : std::uint8_t {
    kProvisioningDeadline,
    kAutoRenew,
    kRenewalInvoice,
    kTermEnd,
    kHoldEnd,
    kWipe,
  };
  struct Schedule {
    TimestampMicros at = 0;
    Due due = Due::kTermEnd;
  };
  struct RentalSlot {
    Rental rental;
    std::vector<Event> history;  // newest kMaxEventsKeptPerRental
    std::vector<ChargeId> charges;
    std::optional<TimestampMicros> scheduled;  // its entry in timeline_
  };

  void IndexCounts();  // all_counts_, max_count_ from the configuration
  Result<int> CardIndex(std::string_view gpu, std::string_view field) const;
  Result<int> RegionIndex(std::string_view region, std::string_view field) const;
  const CardConfig& Card(int index) const { return config_.cards[static_cast<std::size_t>(index)]; }
  std::int64_t DiscountPpm(int count) const;
  Result<std::int64_t> PriceMicros(std::int64_t list_micros, int count) const;
  std::optional<Schedule> NextDue(const Rental& rental) const;
  void Reschedule(RentalSlot& slot);
  RentalSlot& Slot(RentalId id);

  // Money. Debit: one batch wallet -> revenue (+ tax, + FX) for a term (the cards and the
  // rental's extra NVMe), returns the charge (not yet stored).
  Result<Charge> Debit(const Rental& rental, std::int64_t period, ChargeKind kind,
                       Currency currency, ledger::Ledger& ledger, const TaxFunction& tax,
                       TimestampMicros at, Changes* changes) const;
  // Returns exactly what `paid` moved, in one batch (a refund charge, not yet stored).
  Result<Charge> Refund(const Charge& paid, ledger::Ledger& ledger, TimestampMicros at,
                        Changes* changes) const;
  void StoreCharge(RentalSlot& slot, Charge charge, Changes* changes);

  // Lifecycle steps (money already moved where they need it; they cannot fail).
  void Record(RentalSlot& slot, EventKind kind, TimestampMicros at, std::string detail,
              Changes* changes);
  void Notify(const Rental& rental, std::string kind, std::string message,
              std::vector<std::pair<std::string, std::string>> data, TimestampMicros at,
              Changes* changes);
  void Touch(RentalSlot& slot, TimestampMicros at, Changes* changes);
  void Activate(RentalSlot& slot, TimestampMicros at, Changes* changes);
  void ReleaseNow(RentalSlot& slot, ReleaseReason reason, ledger::Ledger& ledger,
                  TimestampMicros at, Changes* changes);
  void TryAutoRenew(RentalSlot& slot, ledger::Ledger& ledger, const TaxFunction& tax,
                    TimestampMicros at, Changes* changes);
  void IssueInvoice(RentalSlot& slot, const TaxFunction& tax, TimestampMicros at,
                    Changes* changes);
  void EndTerm(RentalSlot& slot, TimestampMicros at, Changes* changes);
  void MarkRenewalPaid(RentalSlot& slot, const Charge& charge, bool by_auto_renew,
                       TimestampMicros at, Changes* changes);
  void RunDue(RentalSlot& slot, Due due, ledger::Ledger& ledger, const TaxFunction& tax,
              TimestampMicros at, Changes* changes);
  // Time never runs backwards inside: a command at an earlier time than one already seen is
  // taken to happen at the later one.
  TimestampMicros Now(TimestampMicros now) const { return now > now_ ? now : now_; }

  FleetConfig config_;
  std::unordered_map<std::string, int> card_by_key_;
  std::unordered_map<std::string, int> region_by_code_;
  std::vector<int> all_counts_;  // every count some card is rented in, ascending
  int max_count_ = 1;
  Inventory inventory_;
  std::map<RentalId, RentalSlot> rentals_;
  std::map<std::pair<RentalId, std::int64_t>, Renewal> renewals_;
  std::map<ChargeId, Charge> charges_;
  std::set<std::pair<TimestampMicros, RentalId>> timeline_;
  std::unordered_map<UserId, std::vector<RentalId>> rentals_by_customer_;
  std::unordered_map<NodeId, std::vector<RentalId>> rentals_by_node_;  // every rental ever on it
  std::unordered_map<UserId, std::size_t> live_by_customer_;
  std::size_t live_rentals_ = 0;
  NodeId next_node_id_ = 1;
  RentalId next_rental_id_ = 1;
  ChargeId next_charge_id_ = 1;
  TimestampMicros now_ = 0;
};

}  // namespace gpuhub::rentals
