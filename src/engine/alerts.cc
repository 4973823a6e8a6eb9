#include "engine/alerts.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/money.h"
#include "engine/limits.h"
#include "engine/market.h"
#include "engine/notifications.h"
#include "engine/rentals.h"
#include "market/types.h"

namespace gpuhub::engine {
namespace {

AlertsState& A(State& state) { return *state.alerts; }
const market::Exchange& X(const State& state) { return state.market->exchange; }
const rentals::Fleet& F(const State& state) { return state.rentals->fleet; }

StockKey KeyOf(const Alert& a) { return {a.gpu, a.region, a.count}; }

std::optional<std::int64_t> BestAskNow(const State& state, const std::string& market) {
  auto best = X(state).BestAsk(market);
  return best.ok() ? *best : std::nullopt;
}

bool StockHoldsNow(const State& state, const StockKey& key) {
  return F(state).FreeSets(key.gpu, key.region, key.count) > 0;
}

void WriteAlert(Txn& txn, const Alert& a) {
  txn.writes.Upsert("alerts", {{"id", a.id},
                               {"user_id", a.user_id},
                               {"kind", std::string(AlertKindName(a.kind))},
                               {"gpu", a.gpu},
                               {"region", a.region},
                               {"count", std::int64_t{a.count}},
                               {"max_price_micros", a.max_price_micros},
                               {"created_at_us", a.created_at},
                               {"fired_count", a.fired_count},
                               {"last_fired_at_us", a.last_fired_at}});
}

std::string Usd3(std::int64_t micros) { return "$" + FormatMicros(micros, 3); }

// The notification of one firing: words for people, fields for machines (the webhook's "data").
NotificationInput FiringOf(const State& state, const Alert& a) {
  NotificationInput n;
  n.user_id = a.user_id;
  n.subject = "alert:" + std::to_string(a.id);
  n.data = {{"alert_id", std::to_string(a.id)},
            {"kind", std::string(AlertKindName(a.kind))},
            {"gpu", a.gpu}};
  if (a.kind == AlertKind::kStock) {
    const int sets = F(state).FreeSets(a.gpu, a.region, a.count);
    const std::string what = (a.count == 1 ? "1 " : std::to_string(a.count) + " × ") + a.gpu;
    n.kind = "alert.stock";
    n.message = what + " can be rented now" +
                (a.region.empty() ? std::string() : " in " + a.region) + " (" +
                std::to_string(sets) + (sets == 1 ? " set" : " sets") + " free; alert " +
                std::to_string(a.id) + ")";
    n.data.push_back({"region", a.region});
    n.data.push_back({"count", std::to_string(a.count)});
    n.data.push_back({"sets_free", std::to_string(sets)});
  } else {
    const std::optional<std::int64_t> best = BestAskNow(state, a.gpu);
    const std::string price = best ? Usd3(*best) : std::string("?");
    n.kind = "alert.price";
    n.message =
        "Spot " + a.gpu + " is offered at " + price + " per GPU-hour" +
        (a.max_price_micros == kAnyPriceMicros ? std::string()
                                               : ", at or under your " + Usd3(a.max_price_micros)) +
        " (alert " + std::to_string(a.id) + ")";
    n.data.push_back({"best_ask_usd_per_gpu_hour", best ? FormatMicros(*best, 3) : ""});
    n.data.push_back({"max_usd_per_gpu_hour", a.max_price_micros == kAnyPriceMicros
                                                  ? std::string()
                                                  : FormatMicros(a.max_price_micros, 3)});
  }
  return n;
}

void Fire(Txn& txn, std::int64_t id) {
  Alert& a = A(txn.state).by_id.at(id);
  ++a.fired_count;
  a.last_fired_at = txn.now;
  WriteAlert(txn, a);
  auto n = Notify(txn, FiringOf(txn.state, a));
  if (!n.ok())
    spdlog::error("event=alert_notification_refused error=\"{}\"", n.status().ToString());
}

void Unindex(AlertsState& s, const Alert& a) {
  if (a.kind == AlertKind::kStock) {
    s.index.RemoveStock(a.id, KeyOf(a));
  } else {
    s.index.RemovePrice(a.id, a.gpu, a.max_price_micros);
  }
}

// Validates the spec against the exchange or the fleet; returns the alert to store (no id yet).
Result<Alert> CheckSpec(const State& state, const AlertSpec& spec) {
  Alert a;
  a.kind = spec.kind;
  if (spec.kind == AlertKind::kPrice) {
    if (!spec.region.empty() || spec.count != 0) {
      return Status::InvalidArgument(
                 "a price alert names a market and a price, not a region or a count")
          .WithField(spec.region.empty() ? "count" : "region");
    }
    auto name = X(state).MarketName(spec.gpu);
    if (!name.ok()) return Status::InvalidArgument(name.status().message()).WithField("gpu");
    a.gpu = *name;
    a.max_price_micros = spec.max_price_micros.value_or(kAnyPriceMicros);
    if (spec.max_price_micros) {
      GPUHUB_RETURN_IF_ERROR(
          market::ValidatePriceMicros(*spec.max_price_micros, "max_usd_per_gpu_hour")
              .WithField("max_usd_per_gpu_hour"));
    }
    return a;
  }
  if (spec.max_price_micros) {
    return Status::InvalidArgument("a stock alert names a card, a count and a region, not a price")
        .WithField("max_usd_per_gpu_hour");
  }
  const rentals::Fleet& fleet = F(state);
  auto name = fleet.CardName(spec.gpu);
  if (!name.ok()) {
    std::string cards;
    for (const auto& c : fleet.config().cards) {
      if (!c.counts.empty()) cards += (cards.empty() ? "" : ", ") + c.name;
    }
    return Status::InvalidArgument("unknown card '" + spec.gpu.substr(0, 64) +
                                   "'; the term fleet rents " + cards)
        .WithField("gpu");
  }
  a.gpu = *name;
  const rentals::CardConfig* card = nullptr;
  for (const auto& c : fleet.config().cards) {
    if (c.name == a.gpu) card = &c;
  }
  if (!card || card->counts.empty()) {
    return Status::InvalidArgument(a.gpu + " is no longer rented by the term").WithField("gpu");
  }
  if (std::find(card->counts.begin(), card->counts.end(), spec.count) == card->counts.end()) {
    std::string counts;
    for (int c : card->counts) counts += (counts.empty() ? "" : ", ") + std::to_string(c);
    return Status::InvalidArgument("count must be one of the counts " + a.gpu +
                                   " is rented in: " + counts)
        .WithField("count");
  }
  a.count = spec.count;
  if (!spec.region.empty()) {
    auto code = rentals::CanonicalRegion(spec.region);
    if (!code.ok()) return code.status().WithField("region");
    auto region = std::find(card->regions.begin(), card->regions.end(), *code);
    if (region == card->regions.end()) {
      std::string regions;
      for (const auto& r : card->regions) regions += (regions.empty() ? "" : ", ") + r;
      return Status::InvalidArgument(a.gpu + " is not rented in '" + spec.region.substr(0, 32) +
                                     "'; its regions: " + regions)
          .WithField("region");
    }
    a.region = *code;
  }
  return a;
}

}  // namespace

std::string_view AlertKindName(AlertKind kind) {
  return kind == AlertKind::kStock ? "stock" : "price";
}

Result<AlertKind> ParseAlertKind(std::string_view name) {
  if (name == "stock") return AlertKind::kStock;
  if (name == "price") return AlertKind::kPrice;
  return Status::InvalidArgument("kind must be \"stock\" or \"price\"").WithField("kind");
}

bool AlertHoldsNow(const State& state, const Alert& alert) {
  if (alert.kind == AlertKind::kStock) return StockHoldsNow(state, KeyOf(alert));
  return PriceHolds(BestAskNow(state, alert.gpu), alert.max_price_micros);
}

Result<Alert> CreateAlert(Txn& txn, std::int64_t user_id, const AlertSpec& spec) {
  GPUHUB_ASSIGN_OR_RETURN(Alert a, CheckSpec(txn.state, spec));
  AlertsState& s = A(txn.state);
  auto mine = s.by_user.find(user_id);
  if (mine != s.by_user.end() && mine->second.size() >= kMaxAlertsPerAccount) {
    return Status::ResourceExhausted("an account holds at most " +
                                     std::to_string(kMaxAlertsPerAccount) +
                                     " alerts: cancel one first");
  }
  // What changed earlier in this command is looked at first, so that the new alert's "holds now"
  // and the index's last values agree.
  EvaluateAlerts(txn);
  a.id = s.next_id++;
  a.user_id = user_id;
  a.created_at = txn.now;
  s.by_user[user_id].insert(a.id);
  s.by_id[a.id] = a;
  const bool fires =
      a.kind == AlertKind::kStock
          ? s.index.AddStock(a.id, KeyOf(a), StockHoldsNow(txn.state, KeyOf(a)))
          : s.index.AddPrice(a.id, a.gpu, a.max_price_micros, BestAskNow(txn.state, a.gpu));
  WriteAlert(txn, a);
  if (fires) Fire(txn, a.id);
  return s.by_id.at(a.id);
}

Status CancelAlert(Txn& txn, std::int64_t user_id, std::int64_t id) {
  AlertsState& s = A(txn.state);
  auto it = s.by_id.find(id);
  if (it == s.by_id.end() || it->second.user_id != user_id) {
    return Status::NotFound("no alert " + std::to_string(id) + " of yours");
  }
  Unindex(s, it->second);
  auto mine = s.by_user.find(user_id);
  mine->second.erase(id);
  if (mine->second.empty()) s.by_user.erase(mine);
  s.by_id.erase(it);
  txn.writes.Delete("alerts", {{"id", id}});
  return Status::Ok();
}

std::vector<Alert> ListAlerts(const State& state, std::int64_t user_id) {
  std::vector<Alert> out;
  const AlertsState& s = *state.alerts;
  auto mine = s.by_user.find(user_id);
  if (mine == s.by_user.end()) return out;
  for (auto id = mine->second.rbegin(); id != mine->second.rend(); ++id) {
    out.push_back(s.by_id.at(*id));
  }
  return out;
}

const Alert* FindAlert(const State& state, std::int64_t user_id, std::int64_t id) {
  const AlertsState& s = *state.alerts;
  auto it = s.by_id.find(id);
  return it == s.by_id.end() || it->second.user_id != user_id ? nullptr : &it->second;
}

void NoteMarketChanged(State& state, const std::string& market) {
  AlertsState& s = A(state);
  if (s.index.WatchesMarket(market)) s.dirty_markets.insert(market);
}

void NoteStockChanged(State& state, const std::string& card, const std::string& region) {
  AlertsState& s = A(state);
  if (s.index.WatchesCard(card)) s.dirty_stock.emplace(card, region);
}

void EvaluateAlerts(Txn& txn) {
  AlertsState& s = A(txn.state);
  if (s.dirty_markets.empty() && s.dirty_stock.empty()) return;
  std::vector<std::int64_t> firing;
  for (const std::string& market : s.dirty_markets) {
    auto fired = s.index.BestAskChanged(market, BestAskNow(txn.state, market));
    firing.insert(firing.end(), fired.begin(), fired.end());
  }
  for (const auto& [card, region] : s.dirty_stock) {
    for (const StockKey& key : s.index.StockKeysFor(card, region)) {
      auto fired = s.index.StockChanged(key, StockHoldsNow(txn.state, key));
      firing.insert(firing.end(), fired.begin(), fired.end());
    }
  }
  s.dirty_markets.clear();
  s.dirty_stock.clear();
  for (std::int64_t id : firing) Fire(txn, id);
}

void AddAlertHooks(Engine& engine) {
  engine.AddCommandHook(EvaluateAlerts);
  engine.AddTickHook([](Txn& txn) {
    EvaluateAlerts(txn);
    return Status::Ok();
  });
}

Status CheckAlerts(const State& state) {
  const AlertsState& s = *state.alerts;
  for (const std::string& market : s.index.WatchedMarkets()) {
    if (*s.index.LastBestAsk(market) != BestAskNow(state, market)) {
      return Status::Internal("alerts: the best ask of " + market +
                              " as last seen differs from the book's");
    }
  }
  for (const StockKey& key : s.index.WatchedStockKeys()) {
    if (*s.index.StockHolds(key) != StockHoldsNow(state, key)) {
      return Status::Internal("alerts: the stock of " + std::to_string(key.count) + " x " +
                              key.gpu + " in '" + key.region +
                              "' as last seen differs from the fleet's");
    }
  }
  if (s.index.size() != s.by_id.size()) {
    return Status::Internal("alerts: " + std::to_string(s.index.size()) + " indexed, " +
                            std::to_string(s.by_id.size()) + " stored");
  }
  std::size_t listed = 0;
  for (const auto& [user, ids] : s.by_user) {
    if (ids.size() > kMaxAlertsPerAccount) {
      return Status::Internal("alerts: account " + std::to_string(user) + " holds " +
                              std::to_string(ids.size()));
    }
    listed += ids.size();
  }
  if (listed != s.by_id.size()) return Status::Internal("alerts: by_user disagrees with by_id");
  return Status::Ok();
}

Status LoadAlerts(store::Store& store, State& state) {
  AlertsState& s = A(state);
  std::vector<Alert> loaded;
  GPUHUB_RETURN_IF_ERROR(
      store.Scan("alerts",
                 {"id", "user_id", "kind", "gpu", "region", "count", "max_price_micros",
                  "created_at_us", "fired_count", "last_fired_at_us"},
                 "id", [&](const store::Row& row) -> Status {
                   Alert a;
                   GPUHUB_ASSIGN_OR_RETURN(a.id, row.Int(0));
                   GPUHUB_ASSIGN_OR_RETURN(a.user_id, row.Int(1));
                   GPUHUB_ASSIGN_OR_RETURN(std::string kind, row.Text(2));
                   GPUHUB_ASSIGN_OR_RETURN(a.kind, ParseAlertKind(kind));
                   GPUHUB_ASSIGN_OR_RETURN(a.gpu, row.Text(3));
                   GPUHUB_ASSIGN_OR_RETURN(a.region, row.Text(4));
                   GPUHUB_ASSIGN_OR_RETURN(std::int64_t count, row.Int(5));
                   a.count = static_cast<int>(count);
                   GPUHUB_ASSIGN_OR_RETURN(a.max_price_micros, row.Int(6));
                   GPUHUB_ASSIGN_OR_RETURN(a.created_at, row.Int(7));
                   GPUHUB_ASSIGN_OR_RETURN(a.fired_count, row.Int(8));
                   GPUHUB_ASSIGN_OR_RETURN(a.last_fired_at, row.Int(9));
                   loaded.push_back(std::move(a));
                   return Status::Ok();
                 }));
  for (Alert& a : loaded) {
    if (a.kind == AlertKind::kStock) {
      s.index.AddStock(a.id, KeyOf(a), StockHoldsNow(state, KeyOf(a)));
    } else {
      s.index.AddPrice(a.id, a.gpu, a.max_price_micros, BestAskNow(state, a.gpu));
    }
    s.by_user[a.user_id].insert(a.id);
    s.next_id = std::max(s.next_id, a.id + 1);
    s.by_id[a.id] = std::move(a);
  }
  return Status::Ok();
}

}  // namespace gpuhub::engine
