// The rows of the spot market's tables (market_machines, _asks, _bids, _leases, _trades, _payouts):
// their columns and how a row becomes a record. Shared by start-up (LoadMarket) and the history
// reads that page through the store (src/http), so that both read a row the same way.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "market/types.h"
#include "store/store.h"

namespace gpuhub::engine {

// The columns each *FromRow reads, in its order.
const std::vector<std::string>& MachineColumns();
const std::vector<std::string>& AskColumns();
const std::vector<std::string>& BidColumns();
const std::vector<std::string>& LeaseColumns();
const std::vector<std::string>& TradeColumns();
const std::vector<std::string>& PayoutColumns();

// A row of the matching *Columns(); an error when a value does not parse (the store holds
// something no engine wrote).
Result<market::Machine> MachineFromRow(const store::Row& row);
Result<market::Ask> AskFromRow(const store::Row& row);
Result<market::Bid> BidFromRow(const store::Row& row);
Result<market::Lease> LeaseFromRow(const store::Row& row);
Result<market::Trade> TradeFromRow(const store::Row& row);
Result<market::Payout> PayoutFromRow(const store::Row& row);

// The rows of `table` with `status` (the open ones: start-up loads nothing else), in no
// particular order; served by the (status) indexes of migration 13.
store::Select OpenRowsSelect(const char* table, const std::vector<std::string>& columns,
                             std::string status);
// A page of a history list: the newest rows of `table` whose `owner_column` is `owner` (an
// account id; a market's name for trades), with ids
// below `before` (0: from the newest), at most `limit`, newest first. Served by the
// (owner_column, id) indexes of migration 13 without a sort.
store::Select HistoryPageSelect(const char* table, const std::vector<std::string>& columns,
                                const char* owner_column, store::Value owner, std::int64_t before,
                                std::size_t limit);
// The same for a market's trades, by the (gpu, id) index. `gpu` is the market's name.
store::Select TradePageSelect(const std::string& gpu, std::int64_t before, std::size_t limit);

}  // namespace gpuhub::engine
