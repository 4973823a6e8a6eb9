// The spot market's JSON (records as the API shows them) and its list paging, shared by the
// market routes (api_market.cc) and the history routes that read the store
// (api_market_history.cc). Internal to src/http.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/json_writer.h"
#include "engine/agents.h"
#include "engine/engine.h"
#include "http/api.h"
#include "market/exchange.h"

namespace gpuhub::http {

// An RFC 3339 time, or null for 0 (not yet).
json TimeOrNull(TimestampMicros t);
// A machine as its provider sees it, with what its host agent reported.
json MachineJson(const engine::State& state, TimestampMicros now, const market::Machine& m,
                 int leased, market::OrderId open_ask);
json AskJson(const market::Ask& a, int gpus_offered);
// A bid's members (the caller opens and closes the object, and may add its own), and a bid alone.
// `stored`: the launch specs a history page read for closed bids (an open bid's is in memory).
void WriteBidMembers(JsonWriter& w, const engine::State& state, const market::Bid& b,
                     const engine::StoredImages* stored = nullptr);
std::string BidBody(const engine::State& state, const market::Bid& b);
// A lease; `connection` says how the customer reaches the machine (the agent's report), `billing`
// whether hours are billed ("running") or not while the machine is offline ("paused").
json LeaseJson(const engine::State& state, const market::Lease& l, bool as_provider,
               const engine::StoredImages* stored = nullptr);
// A customer's lease with the tax its hours carry now (the hourly price is net).
json CustomerLeaseJson(const engine::Txn& txn, const market::Lease& l,
                       const engine::StoredImages* stored = nullptr);
// Market data is written with JsonWriter, not built as a tree (the hottest public reads).
void WriteTrade(JsonWriter& w, const market::Trade& t);
void WriteOptionalPrice(JsonWriter& w, const std::optional<std::int64_t>& p);
json PayoutJson(const market::Payout& p);
json OffersJson(const engine::State& state, const std::vector<market::Offer>& offers);

// Lists: `?limit=N` (1..kMaxPageSize), newest first; without it, the newest kMaxPageSize.
Result<std::size_t> ListLimit(const Request& r);

// A page of a history list (bids, leases, trades): `?limit=` and `?cursor=` (the `next_cursor`
// of the page before; keyset, so rows arriving meanwhile neither shift nor repeat a page).
struct Page {
  std::size_t limit = 0;
  std::int64_t before = 0;  // 0: from the newest
};
Result<Page> PageQuery(const Request& r, std::size_t default_limit = market::kMaxPageSize);

// Lists are read one row past the page: "next_cursor" is the id of the page's last row when more
// follow, else null.
template <typename T>
json TakePage(std::vector<T>& rows, std::size_t limit) {
  if (rows.size() <= limit) return nullptr;
  rows.resize(limit);
  return std::to_string(rows.back().id);
}

// The history lists and lookups of closed records, read from the store (api_market_history.cc);
// RegisterMarketRoutes calls it.
void RegisterMarketHistoryRoutes(Router& router, ApiContext& api);

}  // namespace gpuhub::http
