// Term rentals inside the engine: rentals::Fleet (src/rentals) plus the rows its commands change,
// written in the same group commit as the ledger transfers they apply, the notifications they
// raise and the charges billing hooks onto (rental_billing.h).
//
// Every function taking a Txn runs on the writer thread. Each command first runs the lifecycle up
// to txn.now (so it sees a rental that is due to stop as stopped), then forwards to the fleet with
// the wallets' ledger, the one tax function and txn.now; on success it queues the changed records
// (nodes, rentals, renewals upserted; events and charges inserted), records the notices
// (engine/notifications.h) and calls OnRentalCharged for each charge. The fleet validates before
// it mutates, so a failed command leaves memory untouched and its rows are dropped.
//
// Time: the tick hook (AddRentalsTickHooks) runs the lifecycle every second with the real clock
// and on every manual clock advance; each transition happens once, at its own time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "engine/topups.h"
#include "engine/wallets.h"
#include "rentals/fleet.h"

namespace gpuhub::engine {

struct RentalsState {
  explicit RentalsState(rentals::FleetConfig config) : fleet(std::move(config)) {}
  rentals::Fleet fleet;
};

// Admin.
Result<rentals::Node> AddRentalNode(Txn& txn, const rentals::NodeSpec& spec);
Result<rentals::Node> SetRentalNodeState(Txn& txn, rentals::NodeId id, rentals::NodeState state);

// Customers. customer 0 quotes anonymously.
Result<rentals::Quote> QuoteRental(Txn& txn, std::int64_t customer, const rentals::OrderSpec& spec);
// An order needs a billing country and a wallet not on hold (engine/billing.h CheckCanPurchase);
// its charge gets a tax invoice in the same command (engine/rental_billing.h). `origin` (the
// request's address and CDN country; null when none) is recorded as the country evidence that
// the invoice carries.
struct RequestOrigin;
Result<rentals::Rental> OrderRental(Txn& txn, std::int64_t customer,
                                    const rentals::OrderSpec& spec,
                                    const RequestOrigin* origin = nullptr);
Result<rentals::Renewal> PayRentalRenewal(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                          std::optional<Currency> currency,
                                          const RequestOrigin* origin = nullptr);
Result<rentals::Rental> ReleaseRental(Txn& txn, std::int64_t customer, rentals::RentalId id);
Result<rentals::Rental> SetRentalAutoRenew(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                           bool on);

// Extra local NVMe added to a running rental (rentals::Fleet::AddExtraNvme; issue 11).
Result<rentals::Rental> AddRentalExtraNvme(Txn& txn, std::int64_t customer, rentals::RentalId id,
                                           std::int64_t add_tb);

// The host agent (issue 12); admin endpoints until it exists.
Result<rentals::Rental> ReportRentalInstance(Txn& txn, rentals::RentalId id,
                                             const rentals::InstanceReport& report);
Result<rentals::Rental> RecordRentalWipe(Txn& txn, rentals::RentalId id);

// A wallet short of `needed_micros` for an order: how much is missing, and the top-up that covers
// it: the shortfall rounded up to the cent and to the smallest top-up (topup_micros; 0 with
// `topup_note` saying why when one top-up cannot carry it or the account has too many open), or
// an open invoice of exactly that amount to reuse (asking twice must not pile up invoices).
struct Shortfall {
  Currency currency = Currency::kUsd;
  std::int64_t available_micros = 0;
  std::int64_t needed_micros = 0;
  std::int64_t shortfall_micros = 0;  // needed - available, > 0
  std::int64_t topup_micros = 0;
  std::optional<Invoice> open_topup;
  std::string topup_note;
};
// internal when the wallet is not short.
Result<Shortfall> ComputeShortfall(const Txn& txn, std::int64_t user_id, Currency currency,
                                   std::int64_t needed_micros);

// Records the domain's notices as notifications (engine/notifications.h): the account's list and,
// with a webhook, its outbox. A notice the store refuses is logged, never a reason to undo the
// command (it is a bug of its wording, and money may have moved).
void RecordNotices(Txn& txn, std::vector<rentals::Notice>& notices);

// Time-driven work up to txn.now. Never fails.
Status AdvanceRentals(Txn& txn);
void AddRentalsTickHooks(Engine& engine);

// --demo: the published "free now" inventory as nodes, when the fleet has none: per card, nodes of
// its largest rentable count (8 for every card of the catalog), the remainder on one smaller node,
// spread round-robin over the card's regions. Idempotent: a fleet with any node is left alone.
struct DemoFleetCard {
  std::string gpu;
  int free_now = 0;
};
Status SeedDemoFleet(Engine& engine, const std::vector<DemoFleetCard>& cards);

// Loads every rental table and restores the fleet (rentals::Fleet::Restore), then checks it
// against the ledger (every charge's money is there): stored data that disagrees is `internal`.
Status LoadRentals(store::Store& store, const rentals::FleetConfig& config,
                   const ledger::Ledger& ledger, RentalsState& state);

}  // namespace gpuhub::engine
