// The store reads of billing's start-up that tests check the plans of (engine/billing.cc).
#pragma once

#include "store/store.h"

namespace gpuhub::engine {

// The spot usage not yet on a statement (document_id 0), in the order the engine keeps it (month,
// account, lease, first hour): served by migration 15's index spot_usage_by_document_id on both
// databases, so start-up neither scans a table that keeps every lease-month ever billed nor sorts.
store::Select OpenSpotUsageSelect();
// How many of those rows each (month, account) has: read first, so that each account-month's rows
// are allocated once at their size (growing by doubling left up to half of the largest vector
// unused, and copied it at each step: at 10M history_gen orders, 1.1M rows in one vector).
// Served by the same index (its first three columns).
store::Select OpenSpotUsageCountSelect();

}  // namespace gpuhub::engine
