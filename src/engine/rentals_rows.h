// The rows of term rentals (internal to src/engine): how the fleet's records become rows of the
// rental_* tables in a group commit, and back at start-up.
#pragma once

#include "engine/engine.h"
#include "rentals/fleet.h"

namespace gpuhub::engine {

// Queues the rows of everything `changes` says changed: the ledger transfers first (in the order
// they were applied), then nodes, rentals, renewals (upserted), events and charges (inserted).
void WriteRentalRows(Txn& txn, const rentals::Fleet& fleet, const rentals::Changes& changes);

// Reads the rental tables into a snapshot.
Result<rentals::Snapshot> ReadRentalRows(store::Store& store);

}  // namespace gpuhub::engine
