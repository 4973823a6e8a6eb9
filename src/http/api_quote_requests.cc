// Multi-node quote requests (engine/quote_requests.h): a job larger than one 8-card node goes to
// the operators for a price.
//
//   POST /v1/quote-requests {job fields..., "contact"?, "note"?}    -> 201 request (user)
//        the job's fields are POST /v1/plan's (model, workload, precision, context, batch, seq,
//        tokens, epochs, tokens_per_day, ...); the server recomputes the job (fit/quote.h) and
//        stores its own figures, never the page's. 400 naming the field; 429 beyond the open
//        requests an account may have.
//   GET  /v1/quote-requests?limit&before&status                      -> 200 {"quote_requests",
//        "next_before"}: the caller's own, newest first; an admin's: every account's
//   GET  /v1/quote-requests/{id}                                     -> 200 request, with the
//        job's recomputation ("sizing"); another account's id is 404 (admins see all)
//   POST /v1/quote-requests/{id}/withdraw                            -> 200 request (open only)
//   POST /v1/admin/quote-requests/{id}/answer {"status": "answered"|"declined", "price"?,
//        "terms"?}                                                   -> 200 request; the customer
//        is notified (GET /v1/notifications and the account's signed webhook)
// request: {"id", "status", "model", "workload", "required_gb", "summary", "job", "contact",
//   "note", "created_at", "updated_at", "answer": null | {"status", "price", "terms",
//   "answered_at"}, "user_id", "username" (admins), "sizing" (one request only)}
#include <memory>
#include <optional>
#include <string>

#include "core/strings.h"
#include "engine/limits.h"
#include "engine/quote_requests.h"
#include "http/api.h"

#ifdef GPUHUB_HAVE_FIT
#include "catalog/catalog.h"
#include "fit/quote.h"
#endif

namespace gpuhub::http {
namespace {

using engine::QuoteRequest;
using engine::QuoteStatus;
using engine::Txn;
using engine::User;

json ParsedOr(const std::string& text) {
  auto j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(text) : j;
}

json RequestJson(const engine::State& state, const QuoteRequest& q, bool with_user,
                 bool with_sizing) {
  json j;
  j["id"] = q.id;
  j["status"] = engine::QuoteStatusName(q.status);
  j["model"] = q.model;
  j["workload"] = q.workload;
  j["required_gb"] = static_cast<double>(q.required_bytes) / 1e9;
  j["summary"] = q.summary;
  j["job"] = ParsedOr(q.job_json);
  j["contact"] = q.contact;
  j["note"] = q.note;
  j["created_at"] = FormatTimestamp(q.created_at);
  j["updated_at"] = FormatTimestamp(q.updated_at);
  if (q.answered_at != 0) {
    j["answer"] = {{"status", engine::QuoteStatusName(q.status)},
                   {"price", q.price},
                   {"terms", q.terms},
                   {"answered_at", FormatTimestamp(q.answered_at)}};
  } else {
    j["answer"] = nullptr;
  }
  if (with_user) {
    j["user_id"] = q.user_id;
    const User* u = engine::FindUser(state, q.user_id);
    j["username"] = u ? u->username : "";
  }
  if (with_sizing) j["sizing"] = ParsedOr(q.sizing_json);
  return j;
}

// Every account's requests are an admin's to read: an admin's session, or an admin's API key with
// the admin scope (a read-only key of an admin account sees its own, as anyone's would).
bool SeesEveryAccount(const engine::Txn& txn, const engine::User& me, const Caller& caller) {
  if (!me.Has(engine::kRoleAdmin)) return false;
  auto found = AuthenticateCaller(txn, caller);
  return found.ok() && (!found->key || found->key->Has(engine::kScopeAdmin));
}

struct Page {
  Caller caller;
  std::size_t limit = engine::kDefaultQuoteRequestsPageSize;
  std::int64_t before = 0;
  std::optional<QuoteStatus> status;
};

Result<Page> ParsePage(const Request& r) {
  Page p;
  p.caller = CallerOf(r);
  GPUHUB_ASSIGN_OR_RETURN(p.limit, LimitQuery(r, "limit", engine::kDefaultQuoteRequestsPageSize,
                                              engine::kMaxQuoteRequestsPageSize));
  if (auto it = r.query.find("before"); it != r.query.end()) {
    auto v = ParseInt64(it->second, "before");
    if (!v.ok() || *v < 1) {
      return Status::InvalidArgument("before must be the next_before of a previous page")
          .WithField("before");
    }
    p.before = *v;
  }
  if (auto it = r.query.find("status"); it != r.query.end()) {
    GPUHUB_ASSIGN_OR_RETURN(p.status, engine::ParseQuoteStatus(it->second));
  }
  return p;
}

Result<std::optional<std::string>> TextField(json& body, const char* field) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) {
    if (it != body.end()) body.erase(it);
    return std::optional<std::string>();
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string(field) + " must be a string")
        .WithField(std::string(field));
  }
  std::string text(Trim(it->get<std::string>()));
  body.erase(it);
  return std::optional<std::string>(std::move(text));
}

#ifdef GPUHUB_HAVE_FIT
struct QuoteData {
  std::string data_dir;
  std::optional<catalog::Catalog> catalog;
  Status error;
};

// The body on the I/O thread: the contact and note taken out, the rest is the job, recomputed.
Result<engine::QuoteRequestInput> ParseNewRequest(const QuoteData& data, ApiContext& api,
                                                  const Request& r) {
  if (!data.catalog) {
    return Status::Unavailable("the catalog is not loaded: " + data.error.message());
  }
  GPUHUB_RETURN_IF_ERROR(CheckJsonBody(r));
  json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return Status::InvalidArgument("the body must be a JSON object: the job's fields (model, "
                                   "workload, ...) and an optional contact and note");
  }
  engine::QuoteRequestInput in;
  GPUHUB_ASSIGN_OR_RETURN(auto contact, TextField(body, "contact"));
  GPUHUB_ASSIGN_OR_RETURN(auto note, TextField(body, "note"));
  in.contact = contact.value_or("");
  in.note = note.value_or("");
  // Checked here too, so a bad contact is answered before the job is sized.
  if (in.contact.size() > engine::kMaxQuoteContactBytes) {
    return Status::InvalidArgument("contact must be at most " +
                                   std::to_string(engine::kMaxQuoteContactBytes) + " bytes")
        .WithField("contact");
  }
  if (in.note.size() > engine::kMaxQuoteNoteBytes) {
    return Status::InvalidArgument("note must be at most " +
                                   std::to_string(engine::kMaxQuoteNoteBytes) + " bytes")
        .WithField("note");
  }
  GPUHUB_ASSIGN_OR_RETURN(fit::QuoteJob job,
                          fit::ResolveQuoteJob(body.dump(), data.data_dir, *data.catalog,
                                               api.engine.clock().NowMicros()));
  in.model = job.model;
  in.workload = job.workload;
  in.required_bytes = static_cast<std::int64_t>(job.required_bytes);
  in.summary = job.summary;
  in.job_json = std::move(job.job_json);
  in.sizing_json = std::move(job.sizing_json);
  return in;
}
#endif

}  // namespace

void RegisterQuoteRequestRoutes(Router& router, ApiContext& api, const std::string& data_dir) {
#ifdef GPUHUB_HAVE_FIT
  auto data = std::make_shared<QuoteData>();
  data->data_dir = data_dir;
  auto loaded = catalog::LoadCatalog(data_dir + "/catalog.toml");
  if (loaded.ok()) {
    data->catalog = std::move(loaded).value();
  } else {
    data->error = loaded.status();
  }
  router.Add("POST", "/v1/quote-requests",
             Authenticated<engine::QuoteRequestInput>(
                 api, 0, [data, &api](const Request& r) { return ParseNewRequest(*data, api, r); },
                 [](Txn& txn, const User& me, const engine::QuoteRequestInput& in) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(QuoteRequest q,
                                           engine::CreateQuoteRequest(txn, me.id, in));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kQuoteRequested,
                                       {{"quote_request_id", q.id},
                                        {"model", q.model},
                                        {"workload", q.workload}});
                   return Reply{201, RequestJson(txn.state, q, false, true)};
                 }));
#else
  (void)data_dir;
  router.Add("POST", "/v1/quote-requests", [](const Request&, Responder respond) {
    respond(Response::Error(503, "unavailable", "the sizing engine is not built in"));
  });
#endif
  router.Add("GET", "/v1/quote-requests?limit&before&status",
             Authenticated<Page>(
                 api, 0, ParsePage, [](Txn& txn, const User& me, const Page& p) -> Result<Reply> {
                   const bool admin = SeesEveryAccount(txn, me, p.caller);
                   auto page = engine::ListQuoteRequests(
                       txn.state, admin ? std::nullopt : std::optional<std::int64_t>(me.id),
                       p.before, p.limit, p.status);
                   json items = json::array();
                   for (const auto& q : page.items) {
                     items.push_back(RequestJson(txn.state, q, admin, false));
                   }
                   return Reply{200,
                                {{"quote_requests", items},
                                 {"next_before", page.next_before == 0 ? json(nullptr)
                                                                       : json(page.next_before)}}};
                 }));
  struct OneRequest {
    Caller caller;
    std::int64_t id = 0;
  };
  router.Add("GET", "/v1/quote-requests/{id}",
             Authenticated<OneRequest>(
                 api, 0,
                 [](const Request& r) -> Result<OneRequest> {
                   GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, IdParam(r, "quote request"));
                   return OneRequest{CallerOf(r), id};
                 },
                 [](Txn& txn, const User& me, const OneRequest& one) -> Result<Reply> {
                   const std::int64_t id = one.id;
                   const QuoteRequest* q = engine::FindQuoteRequest(txn.state, id);
                   const bool admin = SeesEveryAccount(txn, me, one.caller);
                   // Someone else's is not found: the answer must not tell that it exists.
                   if (q == nullptr || (q->user_id != me.id && !admin)) {
                     return Status::NotFound("no quote request " + std::to_string(id) +
                                             " of yours");
                   }
                   return Reply{200, RequestJson(txn.state, *q, admin, true)};
                 }));
  router.Add("POST", "/v1/quote-requests/{id}/withdraw",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdOnly(r, "quote request"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(QuoteRequest q,
                                           engine::WithdrawQuoteRequest(txn, me.id, id));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kQuoteWithdrawn,
                                       {{"quote_request_id", q.id}});
                   return Reply{200, RequestJson(txn.state, q, false, false)};
                 }));
  struct AnswerSpec {
    std::int64_t id = 0;
    engine::QuoteAnswer answer;
  };
  router.Add(
      "POST", "/v1/admin/quote-requests/{id}/answer",
      Authenticated<AnswerSpec>(
          api, engine::kRoleAdmin,
          [](const Request& r) -> Result<AnswerSpec> {
            GPUHUB_ASSIGN_OR_RETURN(IdAnd in,
                                    IdAndBody(r, "quote request", {"status", "price", "terms"}));
            AnswerSpec s;
            s.id = in.id;
            GPUHUB_ASSIGN_OR_RETURN(std::string status, RequiredString(in.body, "status"));
            GPUHUB_ASSIGN_OR_RETURN(s.answer.status, engine::ParseQuoteStatus(status));
            GPUHUB_ASSIGN_OR_RETURN(auto price, OptionalString(in.body, "price"));
            GPUHUB_ASSIGN_OR_RETURN(auto terms, OptionalString(in.body, "terms"));
            s.answer.price = std::string(Trim(price.value_or("")));
            s.answer.terms = std::string(Trim(terms.value_or("")));
            return s;
          },
          [](Txn& txn, const User& me, const AnswerSpec& s) -> Result<Reply> {
            GPUHUB_ASSIGN_OR_RETURN(QuoteRequest q,
                                    engine::AnswerQuoteRequest(txn, me.id, s.id, s.answer));
            engine::RecordAudit(txn, q.user_id, engine::AuditKind::kQuoteAnswered,
                                {{"quote_request_id", q.id},
                                 {"status", engine::QuoteStatusName(q.status)},
                                 {"price", q.price}});
            return Reply{200, RequestJson(txn.state, q, true, true)};
          }));
}

}  // namespace gpuhub::http
