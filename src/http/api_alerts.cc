// Stock and price alerts (engine/alerts.h).
//
//   POST   /v1/alerts {"kind": "stock", "gpu", "count", "region"?}
//                     {"kind": "price", "gpu", "max_usd_per_gpu_hour"?}   -> 201 alert
//   GET    /v1/alerts                  -> 200 {"alerts": [alert], "limit": N}   newest first
//   DELETE /v1/alerts/{id}             -> 204
// alert: {"id", "kind", "gpu", "region" (null: any region; price: null), "count" (price: null),
//         "max_usd_per_gpu_hour" (price with a threshold; else null), "holds_now", "fired_count",
//         "last_fired_at" (null: never), "created_at", "description"}
// A stock alert's `gpu` is a term card (GET /v1/catalog "term"), a price alert's a spot market
// (GET /v1/markets). An alert that holds when it is made fires at once (fired_count 1 in the
// answer). A firing is a notification of type "alert.stock" / "alert.price" (GET
// /v1/notifications, and the account's webhook).
// API keys: read (an alert moves no money and changes nothing but what the account is told);
// not in the audit log for the same reason.
#include "core/money.h"
#include "engine/alerts.h"
#include "engine/limits.h"
#include "http/api.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;

std::string Description(const engine::Alert& a) {
  if (a.kind == engine::AlertKind::kStock) {
    return (a.count == 1 ? "1 " : std::to_string(a.count) + " × ") + a.gpu + " free " +
           (a.region.empty() ? std::string("in any region") : "in " + a.region);
  }
  return "Spot " + a.gpu +
         (a.max_price_micros == engine::kAnyPriceMicros
              ? std::string(" offered at any price")
              : " at or under $" + FormatMicros(a.max_price_micros, 3) + "/h");
}

json AlertJson(const engine::State& state, const engine::Alert& a) {
  const bool stock = a.kind == engine::AlertKind::kStock;
  const bool any_price = a.max_price_micros == engine::kAnyPriceMicros;
  return {{"id", a.id},
          {"kind", std::string(engine::AlertKindName(a.kind))},
          {"gpu", a.gpu},
          {"region", a.region.empty() ? json(nullptr) : json(a.region)},
          {"count", stock ? json(a.count) : json(nullptr)},
          {"max_usd_per_gpu_hour",
           stock || any_price ? json(nullptr) : json(FormatMicros(a.max_price_micros, 3))},
          {"holds_now", engine::AlertHoldsNow(state, a)},
          {"fired_count", a.fired_count},
          {"last_fired_at",
           a.last_fired_at == 0 ? json(nullptr) : json(FormatTimestamp(a.last_fired_at))},
          {"created_at", FormatTimestamp(a.created_at)},
          {"description", Description(a)}};
}

Result<engine::AlertSpec> ParseAlert(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(
      json body, ParseJsonObject(r, {"kind", "gpu", "count", "region", "max_usd_per_gpu_hour"}));
  engine::AlertSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(std::string kind, RequiredString(body, "kind"));
  GPUHUB_ASSIGN_OR_RETURN(spec.kind, engine::ParseAlertKind(kind));
  GPUHUB_ASSIGN_OR_RETURN(spec.gpu, RequiredString(body, "gpu"));
  const auto present = [&](const char* field) {
    auto it = body.find(field);
    return it != body.end() && !it->is_null();
  };
  if (spec.kind == engine::AlertKind::kStock) {
    if (present("max_usd_per_gpu_hour")) {
      return Status::InvalidArgument(
                 "a stock alert names a card, a count and a region; a price is for kind \"price\"")
          .WithField("max_usd_per_gpu_hour");
    }
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t count, RequiredInteger(body, "count", 1, 64));
    spec.count = static_cast<int>(count);
    GPUHUB_ASSIGN_OR_RETURN(auto region, OptionalString(body, "region"));
    spec.region = region.value_or("");
    return spec;
  }
  for (const char* field : {"count", "region"}) {
    if (present(field)) {
      return Status::InvalidArgument(std::string("a price alert names a market and a price; ") +
                                     field + " is for kind \"stock\"")
          .WithField(field);
    }
  }
  if (present("max_usd_per_gpu_hour")) {
    GPUHUB_ASSIGN_OR_RETURN(spec.max_price_micros, PriceField(body, "max_usd_per_gpu_hour"));
  }
  return spec;
}

}  // namespace

void RegisterAlertRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/alerts",
             Authenticated<Empty>(
                 api, 0, NoInput, [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& a : engine::ListAlerts(txn.state, me.id)) {
                     list.push_back(AlertJson(txn.state, a));
                   }
                   return Reply{200, {{"alerts", list}, {"limit", engine::kMaxAlertsPerAccount}}};
                 }));
  router.Add("POST", "/v1/alerts",
             Authenticated<engine::AlertSpec>(
                 api, 0, ParseAlert,
                 [](Txn& txn, const User& me, const engine::AlertSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(engine::Alert a, engine::CreateAlert(txn, me.id, spec));
                   return Reply{201, AlertJson(txn.state, a)};
                 }));
  router.Add("DELETE", "/v1/alerts/{id}",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdOnly(r, "alert"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(engine::CancelAlert(txn, me.id, id));
                   return Reply{204, nullptr};
                 }));
}

}  // namespace gpuhub::http
