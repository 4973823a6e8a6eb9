// The rows of storage (internal to src/engine): how rentals::Storage's records become rows of the
// storage_* and egress_meters tables in a group commit, and back at start-up.
#pragma once

#include "engine/engine.h"
#include "rentals/storage.h"

namespace gpuhub::engine {

// Queues the rows of everything `changes` says changed: the ledger transfers first (in the order
// they were applied), then hosts, volumes, snapshots and meters (upserted), events and charges
// (inserted).
void WriteStorageRows(Txn& txn, const rentals::Storage& storage,
                      const rentals::StorageChanges& changes);

Result<rentals::StorageRecords> ReadStorageRows(store::Store& store);

}  // namespace gpuhub::engine
