// Every invariant of the platform's state in one place, for whoever must know that the books and
// the markets are sound: `gpuhub admin verify` on a backup, GET /v1/admin/invariants on the live
// writer, and the crash, chaos and backup tests. The domains' own checks (Ledger::CheckInvariants
// and CheckHistory, Exchange::CheckInvariants and CheckSettlement, Fleet::CheckInvariants and
// CheckSettlement) are what the simulation tests run after every step; this adds the cross-checks
// those tests did beside them. A new domain adds its checks here.
//
// Billing (engine/billing_checks.h): billing.memory (the document window's indexes, open spot
// usage), billing.documents (every document valid, each series gapless, credit notes within their
// invoices) and billing.charge_documents (every rental charge its document with its amounts, every
// refund its own credit note against the invoice of the charge it refunds, one to one).
//
// Reads the state, never changes it. O(transfers + lease-hours + documents): the ledger's
// forgotten history and the documents that left memory are read back from the store
// (ledger/archive.h, engine/document_archive.h) unless the caller asks not to (below).
#pragma once

#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "engine/state.h"

namespace gpuhub::engine {

struct InvariantCheck {
  std::string name;  // "ledger.invariants", "market.settlement", ...
  Status status;
};

struct InvariantReport {
  std::vector<InvariantCheck> checks;
  // Checks not run, with why ("ledger.history: ..."); they do not make the report fail.
  std::vector<std::string> skipped;
  bool ok() const;
  // "ledger.invariants ok\nmarket.settlement FAILED: ..." one line per check.
  std::string ToString() const;
};

// `now`: when not 0, also that every active lease is paid up as of `now`
// (Exchange::CheckLeasesPaidUp: one that bills is paid past `now`, the writer's tick having billed
// every hour that started; one paused while its machine is offline owes nothing until it is back);
// 0 for a backup, whose tick may have been a moment behind.
// `replay_stored_history` false: the two checks that replay every transfer ever made
// (ledger.history, market.lease_hours_once) run only while the whole history is in memory; once
// the ledger forgot part of it they are listed in `skipped` instead of reading all of it from the
// store (the live endpoint runs on the writer thread: a replay of 10M orders' history there would
// hold every write for tens of seconds; `gpuhub admin verify` replays it beside the server). The
// same for billing once memory forgot documents: billing.documents is skipped, and
// billing.charge_documents matches what memory holds and lists, in `skipped`, how many charges it
// could not match because their documents may be in the store only (never a failure for that).
InvariantReport CheckStateInvariants(const State& state, TimestampMicros now = 0,
                                     bool replay_stored_history = true);

}  // namespace gpuhub::engine
