// The audit log (engine/audit_log.h), read from the store like the other history lists:
//
//   GET /v1/audit-log?before=ID&limit=N&account_id=ID|all
//     -> 200 {"events": [{"id", "at", "account_id", "actor", "kind", "remote_address",
//             "user_agent", "request_id", "detail": {...}}], "next_cursor": "ID" | null}
//
// Newest first; `before` is the next_cursor of the page before (events with a smaller id), so a
// page never skips or repeats an event while new ones arrive. Everyone reads their own account;
// an admin (a session, or a key with the admin scope) may name another account (`account_id=N`,
// 0 for the events of no account) or every account (`account_id=all`). An API key needs the
// read scope (api_key_scopes.h: every GET), and sees only its own account without admin.
//
// How it runs: authenticate on the writer (a cheap command that writes nothing but a key's first
// use), read the page on a history reader thread through api.history, answer from there: the JSON
// needs nothing of the engine's state. The engine acknowledges a command only after its batch
// (and its events) committed, so a read issued after an answer sees that answer's events.
#include <optional>

#include "core/json_writer.h"
#include "core/strings.h"
#include "engine/audit_log.h"
#include "engine/limits.h"
#include "http/api.h"
#include "http/history_reads.h"
#include "store/read_pool.h"

namespace gpuhub::http {
namespace {

struct AuditQuery {
  std::size_t limit = engine::kDefaultAuditPageLimit;
  std::int64_t before = 0;
  bool all_accounts = false;
  std::optional<std::int64_t> account_id;  // named by the caller
};

Result<AuditQuery> ParseAuditQuery(const Request& r) {
  AuditQuery q;
  auto limit = LimitQuery(r, "limit", engine::kDefaultAuditPageLimit, engine::kMaxAuditPageLimit);
  if (!limit.ok()) return limit.status().WithField("limit");
  q.limit = *limit;
  if (auto it = r.query.find("before"); it != r.query.end()) {
    auto before = ParseInt64(it->second, "before");
    if (!before.ok() || *before < 1) {
      return Status::InvalidArgument("before must be the next_cursor of an earlier page")
          .WithField("before");
    }
    q.before = *before;
  }
  if (auto it = r.query.find("account_id"); it != r.query.end()) {
    if (it->second == "all") {
      q.all_accounts = true;
    } else {
      auto id = ParseInt64(it->second, "account_id");
      if (!id.ok() || *id < 0) {
        return Status::InvalidArgument("account_id must be an account's id or \"all\"")
            .WithField("account_id");
      }
      q.account_id = *id;
    }
  }
  return q;
}

// Whose events the caller may read: nullopt for every account.
struct Reader {
  std::optional<std::int64_t> account_id;
};

void WriteEvent(JsonWriter& w, const engine::AuditEvent& e) {
  w.BeginObject();
  w.Key("id").Int(e.id);
  w.Key("at").String(FormatTimestamp(e.at));
  w.Key("account_id").Int(e.account_id);
  w.Key("actor").String(e.actor);
  w.Key("kind").String(engine::AuditKindName(e.kind));
  w.Key("remote_address").String(e.remote_address);
  w.Key("user_agent").String(e.user_agent);
  w.Key("request_id").String(e.request_id);
  // Stored as a JSON object by RecordAudit; anything else (never written) reads as {}.
  json detail = json::parse(e.detail, nullptr, /*allow_exceptions=*/false);
  if (!detail.is_object()) detail = json::object();
  w.Key("detail").Value(detail);
  w.EndObject();
}

void ServeAuditLog(ApiContext& api, const Request& request, Responder respond) {
  auto query = ParseAuditQuery(request);
  if (!query.ok()) return respond(Response::Error(query.status()));
  if (api.history == nullptr) return respond(Response::Error(NoHistory()));
  api.engine.Execute<Reader>(
      [caller = CallerOf(request), q = *query](engine::Txn& txn) -> Result<Reader> {
        GPUHUB_ASSIGN_OR_RETURN(AuthenticatedCaller found, AuthenticateCaller(txn, caller));
        const bool admin = found.user.Has(engine::kRoleAdmin) &&
                           (!found.key || found.key->Has(engine::kScopeAdmin));
        const bool others = q.all_accounts || (q.account_id && *q.account_id != found.user.id);
        if (others && !admin) {
          return Status::PermissionDenied(
                     "only an admin reads the audit log of another account (account_id)")
              .WithField("account_id");
        }
        if (found.key) engine::NoteApiKeyUse(txn, found.key->id);
        if (q.all_accounts) return Reader{std::nullopt};
        return Reader{q.account_id.value_or(found.user.id)};
      },
      [&api, respond = std::move(respond), q = *query](Result<Reader> reader) mutable {
        if (!reader.ok()) return respond(Response::Error(reader.status()));
        OnReader(api, std::move(respond), [&api, q, who = *reader](Responder respond) {
          auto rows = ReadRows<engine::AuditEvent>(
              *api.history, engine::AuditPageSelect(who.account_id, q.before, q.limit + 1),
              engine::AuditEventFromRow);
          if (!rows.ok()) return respond(Response::Error(rows.status()));
          json next = nullptr;
          if (rows->size() > q.limit) {
            rows->resize(q.limit);
            next = std::to_string(rows->back().id);
          }
          std::string body;
          JsonWriter w(body);
          w.BeginObject().Key("events").BeginArray();
          for (const auto& e : *rows) WriteEvent(w, e);
          w.EndArray().Key("next_cursor").Value(next).EndObject();
          Response out = Response::Json(200, std::move(body));
          out.headers.emplace_back("Cache-Control", "no-store");
          respond(std::move(out));
        });
      });
}

}  // namespace

void RegisterAuditLogRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/audit-log?before&limit&account_id",
             RequireBearer([&api](const Request& r, Responder respond) {
               ServeAuditLog(api, r, std::move(respond));
             }));
}

}  // namespace gpuhub::http
