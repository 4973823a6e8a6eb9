// The rows of term rentals (internal to src/engine): how the fleet's records become rows of the
// rental_* tables in a group commit, and back at start-up.
#pragma once

#include <string>
#include <vector>

#include "engine/engine.h"
#include "rentals/fleet.h"

namespace gpuhub::engine {

// Queues the rows of everything `changes` says changed: the ledger transfers first (in the order
// they were applied), then nodes, rentals, renewals (upserted), events and charges (inserted).
void WriteRentalRows(Txn& txn, const rentals::Fleet& fleet, const rentals::Changes& changes);

// Reads the rental tables into a snapshot.
Result<rentals::Snapshot> ReadRentalRows(store::Store& store);

// Shared with the storage rows: tax lines as a JSON array, and a list of ids as "a,b,c".
std::string TaxLinesJson(const std::vector<rentals::TaxLine>& lines);
Result<std::vector<rentals::TaxLine>> ParseTaxLines(const std::string& text);
std::string JoinIds(const std::vector<std::string>& ids);

}  // namespace gpuhub::engine
