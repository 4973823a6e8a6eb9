#include "engine/invariants.h"

#include <map>
#include <set>

#include "engine/alerts.h"
#include "engine/billing_checks.h"
#include "engine/market.h"
#include "engine/quote_requests.h"
#include "engine/rentals.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

// Every lease-hour leg in the ledger belongs to an hour the providers' history totals count as
// sold, once: the leg count equals the lease-hours sold, and per provider the legs credited to its
// payable add up to its gross minus fees. The totals are running counters that outlive the closed
// leases (Exchange::Forget), so this checks them against the ledger independently of
// Exchange::CheckSettlement, which walks the leases in memory.
Status LeaseHoursChargedOnce(const market::Exchange& exchange, const ledger::Ledger& ledger) {
  const std::int64_t hours = exchange.lease_hours_sold();
  // Ids are unique (the ledger in memory, the store's UNIQUE(id) for what it forgot), so counting
  // legs is counting hours; the whole history is read, from the store for the forgotten part.
  std::map<std::int64_t, std::int64_t> credited;  // provider -> sum of its lease_hour legs
  std::int64_t legs = 0;
  GPUHUB_RETURN_IF_ERROR(ledger.ForEachTransfer([&](const ledger::Transfer& t) -> Status {
    if (t.code != "lease_hour") return Status::Ok();
    ++legs;
    credited[t.credit.owner_id] += t.amount_micros;
    return Status::Ok();
  }));
  if (legs != hours) {
    return Status::Internal("the ledger holds " + std::to_string(legs) +
                            " lease-hour charges but the providers' totals count " +
                            std::to_string(hours) + " sold hours");
  }
  for (const auto& [provider, sum] : credited) {
    const market::ProviderHistory h = exchange.History(provider);
    if (sum != h.gross_micros - h.fee_micros) {
      return Status::Internal("provider " + std::to_string(provider) + " was credited " +
                              std::to_string(sum) + " micros for lease-hours but its totals say " +
                              std::to_string(h.gross_micros - h.fee_micros));
    }
  }
  return Status::Ok();
}

Status SessionsBelongToUsers(const AccountsState& accounts) {
  for (const auto& [hash, session] : accounts.sessions) {
    if (!accounts.users.count(session.user_id)) {
      return Status::Internal("a session of unknown user " + std::to_string(session.user_id));
    }
  }
  return Status::Ok();
}

// Billing: what memory holds, the documents' rules and every rental charge against its document.
// On the writer (no replay) with part of the documents in the store only, the rules (gapless
// series, credit notes within their invoices) need the whole history and are skipped, and the
// charges whose documents may have left memory are counted, not failed.
void AddBillingChecks(const State& state, bool replay_stored_history, InvariantReport& report) {
  if (state.billing == nullptr) return;
  const BillingState& billing = *state.billing;
  report.checks.push_back({"billing.memory", CheckBillingMemory(state)});
  const bool all_in_memory = billing.archive == nullptr || billing.documents_forgotten_through == 0;
  if (replay_stored_history || all_in_memory) {
    AllDocumentsCheck all = CheckAllDocuments(state);
    report.checks.push_back({"billing.documents", all.rules});
    report.checks.push_back({"billing.charge_documents", all.charges});
    return;
  }
  const std::string where = " (documents up to #" +
                            std::to_string(billing.documents_forgotten_through) +
                            " are in the store only); GET /v1/admin/billing and `gpuhub admin "
                            "verify` check them all";
  report.skipped.push_back("billing.documents: the rules of every document not walked here" +
                           where);
  if (state.rentals == nullptr) return;
  ChargeDocumentIndex memory = MemoryChargeDocuments(billing);
  ChargeDocumentCounts counts;
  Status matched = CheckChargeDocuments(state.rentals->fleet, {&memory},
                                        ChargesUnmatchedInMemoryThrough(state, memory), &counts);
  report.checks.push_back({"billing.charge_documents", matched});
  if (matched.ok() && counts.unmatched > 0) {
    report.skipped.push_back("billing.charge_documents: " + std::to_string(counts.unmatched) +
                             " rental charges not matched to their documents" + where);
  }
}

}  // namespace

bool InvariantReport::ok() const {
  for (const auto& c : checks) {
    if (!c.status.ok()) return false;
  }
  return true;
}

std::string InvariantReport::ToString() const {
  std::string out;
  for (const auto& c : checks) {
    out += c.name + (c.status.ok() ? " ok" : " FAILED: " + c.status.message()) + "\n";
  }
  return out;
}

InvariantReport CheckStateInvariants(const State& state, TimestampMicros now,
                                     bool replay_stored_history) {
  const ledger::Ledger& ledger = state.wallets->ledger;
  const market::Exchange& exchange = state.market->exchange;
  InvariantReport report;
  report.checks.push_back({"accounts.sessions", SessionsBelongToUsers(state.accounts)});
  // Balanced books: posted and pending debits equal credits per currency; no wallet below zero.
  report.checks.push_back({"ledger.invariants", ledger.CheckInvariants()});
  const bool replay = replay_stored_history || ledger.FirstSequence() == 1;
  const std::string not_replayed =
      ": not replayed here (transfers before #" + std::to_string(ledger.FirstSequence()) +
      " are in the store only); `gpuhub admin verify` replays them";
  if (replay) {
    report.checks.push_back({"ledger.history", ledger.CheckHistory()});
  } else {
    report.skipped.push_back("ledger.history" + not_replayed);
  }
  report.checks.push_back({"market.invariants", exchange.CheckInvariants(ledger)});
  report.checks.push_back({"market.settlement", exchange.CheckSettlement(ledger)});
  if (replay) {
    report.checks.push_back({"market.lease_hours_once", LeaseHoursChargedOnce(exchange, ledger)});
  } else {
    report.skipped.push_back("market.lease_hours_once" + not_replayed);
  }
  // Paused leases (their machine offline) are not billed while paused: the exchange's check knows.
  if (now != 0) {
    report.checks.push_back({"market.leases_paid_up", exchange.CheckLeasesPaidUp(now)});
  }
  // Term rentals: no card in two live rentals, stock recounts, due transitions scheduled; every
  // charge in the ledger with its amounts, one per paid term.
  report.checks.push_back({"rentals.invariants", state.rentals->fleet.CheckInvariants()});
  report.checks.push_back({"rentals.settlement", state.rentals->fleet.CheckSettlement(ledger)});
  AddBillingChecks(state, replay_stored_history, report);
  // Alerts: what the index last saw of each watched market and stock is the state now (every
  // change was looked at in the command that made it).
  report.checks.push_back({"alerts.index", CheckAlerts(state)});
  report.checks.push_back({"quote_requests.indexes", CheckQuoteRequests(state)});
  return report;
}

}  // namespace gpuhub::engine
