// Admin-only endpoints that are not about money (those live in api_wallets.cc):
//   POST /v1/admin/clock/advance {"seconds": N}   (only with --clock manual; runs the Tick hooks at
//                                                 each due time inside the step, then at its end)
//   GET  /v1/admin/invariants                     every invariant of the live state
//                                                 (engine/invariants.h), as `gpuhub admin verify`
//                                                 checks a backup
#include "engine/invariants.h"
#include "engine/limits.h"
#include "http/api.h"

namespace gpuhub::http {

void RegisterAdminRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/admin/invariants",
             RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                     // With the real clock the tick bills a lease-hour up to one period late.
                     // On the writer: no replay of the history the ledger keeps in the store only.
                     engine::InvariantReport report = engine::CheckStateInvariants(
                         txn.state, txn.now - 2 * engine::kTickIntervalMicros,
                         /*replay_stored_history=*/false);
                     json checks = json::array();
                     for (const auto& c : report.checks) {
                       json check = {{"name", c.name}, {"ok", c.status.ok()}};
                       if (!c.status.ok()) check["message"] = c.status.message();
                       checks.push_back(std::move(check));
                     }
                     return Reply{200,
                                  {{"ok", report.ok()}, {"checks", checks}, {"skipped", report.skipped}}};
                   });
             }));
  router.Add(
      "POST", "/v1/admin/clock/advance", RequireBearer([&api](const Request& r, Responder respond) {
        if (!api.manual_clock) {
          return respond(
              Response::Error(404, "not_found",
                              "the clock is real; this endpoint exists only with --clock manual"));
        }
        auto body = ParseJsonObject(r, {"seconds"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        auto seconds = RequiredInteger(*body, "seconds", 1, 366 * 24 * 3600);
        if (!seconds.ok()) return respond(Response::Error(seconds.status()));
        ManualClock* clock = api.manual_clock;
        engine::Engine* engine = &api.engine;
        RunAuthenticated(api, r, std::move(respond), engine::kRoleAdmin,
                         [clock, engine, seconds = *seconds](engine::Txn& txn,
                                                             const engine::User&) -> Result<Reply> {
                           // The writer is the only thread that reads time for commands, so moving
                           // the clock here is ordered with every command before and after.
                           clock->Advance(seconds * kMicrosPerSecond);
                           const TimestampMicros to = clock->NowMicros();
                           txn.state.meta[engine::kManualClockMeta] = to;
                           txn.writes.Upsert(
                               "engine_meta",
                               {{"name", std::string(engine::kManualClockMeta)}, {"value", to}});
                           // Each due event at its own time inside the step (a silent host goes
                           // offline when its limit passes), as the real clock would have run.
                           GPUHUB_RETURN_IF_ERROR(engine->AdvanceClockTo(txn, to));
                           return Reply{200, {{"now", FormatTimestamp(txn.now)}}};
                         });
      }));
}

}  // namespace gpuhub::http
