// Stock and price alerts (issue 29): instead of a dead end ("none free", "no offers"), a person
// asks to be told:
//   stock: "when a rental of COUNT x CARD can be placed in REGION" (the term fleet; REGION "" =
//          any of the card's regions): the fleet's stock of that card, region and count is at
//          least one set (rentals::Fleet::FreeSets);
//   price: "when spot MARKET is offered at or under $X per GPU-hour" (the exchange's best ask;
//          no threshold = any offer at all).
//
// Firing: an alert fires when its condition goes from false to true, and re-arms when it goes
// false again: once per crossing, never once per change. One made while its condition already
// holds fires at once. A fired alert stays (listed with how often and when it last fired) until
// its owner cancels it. Delivery: a notification (engine/notifications.h: kind "alert.stock" or
// "alert.price", subject "alert:ID"), which also goes to the account's signed webhook when it
// has one; both are written in the same group commit as the change that crossed.
//
// Evaluation is driven by changes, never by a scan of the alerts: the rows written for the
// exchange (engine/market.cc) and the fleet (engine/rentals_rows.cc) note which market and which
// (card, region) changed, when an alert watches it (NoteMarketChanged, NoteStockChanged); after
// each command the engine's command hook (AddAlertHooks) looks at those only, and the index
// (engine/alert_index.h) yields the alerts that cross. A command that touches no watched market
// or card costs one check of an empty set.
//
// Limits: kMaxAlertsPerAccount alerts per account (engine/limits.h). Every function taking a Txn
// runs on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/alert_index.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

enum class AlertKind { kStock, kPrice };
std::string_view AlertKindName(AlertKind kind);           // "stock", "price"
Result<AlertKind> ParseAlertKind(std::string_view name);  // field "kind"

struct Alert {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  AlertKind kind = AlertKind::kStock;
  std::string gpu;     // stock: the term card; price: the spot market (canonical names)
  std::string region;  // stock: "" = any of the card's regions; price: ""
  int count = 0;       // stock: cards in one rental; price: 0
  // price: fires when the best ask is at or under it (micro-USD per GPU-hour); kAnyPriceMicros
  // for any offer. stock: 0.
  std::int64_t max_price_micros = 0;
  TimestampMicros created_at = 0;
  std::int64_t fired_count = 0;
  TimestampMicros last_fired_at = 0;  // 0: never
};

struct AlertSpec {
  AlertKind kind = AlertKind::kStock;
  std::string gpu;
  std::string region;
  int count = 0;
  std::optional<std::int64_t> max_price_micros;  // price only; none: any offer
};

struct AlertsState {
  std::map<std::int64_t, Alert> by_id;
  std::map<std::int64_t, std::set<std::int64_t>> by_user;
  AlertIndex index;
  // What changed since the hook last looked, among what alerts watch (NoteMarketChanged...).
  std::set<std::string> dirty_markets;
  std::set<std::pair<std::string, std::string>> dirty_stock;  // (card, region)
  std::int64_t next_id = 1;
};

// The condition of an alert in the state as it is (for the answer "holds now" and the checks).
bool AlertHoldsNow(const State& state, const Alert& alert);

// Validates (invalid_argument naming the field: an unknown kind, card, market or region, a count
// the card is not rented in, a price that is not positive or has more than three decimals, a
// field that does not belong to the kind), resource_exhausted beyond kMaxAlertsPerAccount, then
// stores it and fires it at once when its condition already holds.
Result<Alert> CreateAlert(Txn& txn, std::int64_t user_id, const AlertSpec& spec);
// not_found unless it exists and is the user's.
Status CancelAlert(Txn& txn, std::int64_t user_id, std::int64_t id);
std::vector<Alert> ListAlerts(const State& state, std::int64_t user_id);  // newest first
const Alert* FindAlert(const State& state, std::int64_t user_id, std::int64_t id);

// Called where the exchange's and the fleet's rows are written; cheap when nothing watches.
void NoteMarketChanged(State& state, const std::string& market);
void NoteStockChanged(State& state, const std::string& card, const std::string& region);

// Looks at what was noted and fires the alerts that crossed. Never fails (a notification the
// notifications domain refuses is logged).
void EvaluateAlerts(Txn& txn);
// The command hook and a tick hook (each step of a manual clock's long advance is looked at).
void AddAlertHooks(Engine& engine);

// Every watched market and stock key as last seen equals the state now, every alert is in the
// index once, and counts per account are within the limit: internal naming what differs.
Status CheckAlerts(const State& state);

// Reads the alerts and indexes them against the loaded exchange and fleet (their state now is
// what the last committed evaluation saw: evaluation commits with the change).
Status LoadAlerts(store::Store& store, State& state);

}  // namespace gpuhub::engine
