#include "http/api.h"

#include "core/clock.h"
#include "core/json_writer.h"
#include "core/strings.h"
#include "engine/audit_log.h"
#include "http/address_filter.h"
#include "http/api_key_scopes.h"
#include "http/json_keys.h"
#include "http/limits.h"
#include "http/web_session.h"

namespace gpuhub::http {

std::size_t ApiContext::kHashQueue() { return kMaxQueuedPasswordHashes; }
std::size_t ApiContext::kRenderQueue() { return kMaxQueuedRenders; }
std::size_t ApiContext::kHistoryReadQueue() { return kMaxQueuedHistoryReads; }

bool InFlightKeys::Insert(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_.insert(key).second;
}

InFlightKeys::Claim InFlightKeys::InsertOrWait(const std::string& key,
                                               std::function<void()> on_release) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (keys_.insert(key).second) return Claim::kMine;
  auto& waiting = waiters_[key];
  if (waiting.size() >= kMaxWaitersPerKey) return Claim::kBusy;
  waiting.push_back(std::move(on_release));
  return Claim::kWaiting;
}

void InFlightKeys::Erase(const std::string& key) {
  std::vector<std::function<void()>> waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    keys_.erase(key);
    auto it = waiters_.find(key);
    if (it != waiters_.end()) {
      waiting = std::move(it->second);
      waiters_.erase(it);
    }
  }
  for (auto& w : waiting) w();
}

std::string Dump(const json& body) { return DumpJson(body); }

Response JsonResponse(int status, const json& body) { return Response::Json(status, Dump(body)); }

Response TooManyRequests(std::int64_t retry_after_seconds, std::string_view what) {
  Response r = Response::Error(
      429, "resource_exhausted",
      std::string(what) + "; retry in " + std::to_string(retry_after_seconds) + " s");
  r.headers.emplace_back("Retry-After", std::to_string(retry_after_seconds));
  return r;
}

std::string InFlightId(const Request& request, const std::string& key) {
  std::string token = CredentialsOf(request).token;
  return (token.empty() ? std::string("anonymous") : engine::HashToken(token)) + "\n" + key;
}

engine::Fingerprint RequestFingerprint(const Request& request) {
  const std::string head = request.method + " " + request.path + "\n";
  engine::Fingerprint f;
  // The form every earlier version stored: keys from before an upgrade keep matching a retry
  // with the identical bytes.
  f.legacy = engine::Sha256Hex(head + request.body);
  f.current = f.legacy;
  // Stripe compares the request's parameters, not its bytes: the same fields in another order or
  // with other whitespace are the same request. nlohmann::json (not ordered_json) keeps object
  // keys sorted, so its dump is canonical; numbers compare as the handlers will read them.
  // Bodies too deep for a handler to accept keep the raw form (and are refused anyway).
  if (JsonNestingWithin(request.body, kMaxJsonDepth)) {
    nlohmann::json parsed =
        nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_discarded()) {
      f.current = std::string(kCanonicalFingerprintPrefix) +
                  engine::Sha256Hex(
                      head + parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }
  }
  return f;
}

Result<std::size_t> LimitQuery(const Request& r, const char* name, std::size_t fallback,
                               std::size_t max) {
  auto it = r.query.find(name);
  if (it == r.query.end()) return fallback;
  auto v = ParseInt64(it->second, name);
  if (!v.ok() || *v < 1 || static_cast<std::size_t>(*v) > max) {
    return Status::InvalidArgument(std::string(name) + " must be 1.." + std::to_string(max));
  }
  return static_cast<std::size_t>(*v);
}

Result<std::int64_t> IdParam(const Request& r, const char* what) {
  auto id = ParseInt64(r.path_params.at("id"), what);
  if (!id.ok() || *id < 1) {
    return Status::NotFound("no " + std::string(what) + " '" +
                            r.path_params.at("id").substr(0, 32) + "'");
  }
  return *id;
}

Result<std::int64_t> IdOnly(const Request& r, const char* what) {
  if (!Trim(r.body).empty()) GPUHUB_RETURN_IF_ERROR(ParseJsonObject(r, {}).status());
  return IdParam(r, what);
}

Result<IdAnd> IdAndBody(const Request& r, const char* what,
                        std::initializer_list<std::string_view> allowed) {
  IdAnd out;
  GPUHUB_ASSIGN_OR_RETURN(out.id, IdParam(r, what));
  out.body = json::object();
  if (!Trim(r.body).empty()) {
    GPUHUB_ASSIGN_OR_RETURN(out.body, ParseJsonObject(r, allowed));
  }
  return out;
}

Result<bool> OptionalBool(const json& body, std::string_view field, bool fallback) {
  auto it = body.find(field);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be true or false")
        .WithField(std::string(field));
  }
  return it->get<bool>();
}

Result<Currency> OptionalCurrency(const json& body, Currency fallback) {
  GPUHUB_ASSIGN_OR_RETURN(auto code, OptionalString(body, "currency"));
  if (!code) return fallback;
  auto c = ParseCurrency(*code);
  if (!c.ok()) {
    return Status::InvalidArgument(
               "field 'currency' must be USD, EUR or GBP (the wallet that pays)")
        .WithField("currency");
  }
  return *c;
}

json UserJson(const engine::User& user) {
  return {{"id", user.id},
          {"username", user.username},
          {"roles", engine::RoleNames(user.roles)},
          {"created_at", FormatTimestamp(user.created_at)}};
}

Status CheckJsonDepth(std::string_view text, int max_depth) {
  if (!JsonNestingWithin(text, max_depth)) {
    return Status::InvalidArgument("JSON body is nested deeper than " + std::to_string(max_depth) +
                                   " levels");
  }
  return Status::Ok();
}

bool IsJsonMediaType(std::string_view content_type) {
  // The media type before any parameter, case-insensitive (RFC 9110 8.3.1): not a prefix, or
  // application/jsonx and application/json-patch+json would pass.
  std::string_view type = content_type.substr(0, content_type.find(';'));
  return ToLower(Trim(type)) == "application/json";
}

Status CheckJsonContentType(const Request& request) {
  // Required, not only checked when present: a cross-site no-cors fetch of a Blob body sends no
  // Content-Type at all and needs no CORS preflight, so "none" must not pass for JSON.
  if (!IsJsonMediaType(request.Header("content-type"))) {
    return Status::InvalidArgument("Content-Type must be application/json");
  }
  return Status::Ok();
}

Status CheckJsonText(std::string_view text) {
  // nlohmann's parser takes a NUL byte for the end of its input, so `{...}\0garbage` would pass
  // where `{...}garbage` is refused. A JSON text has no raw NUL anywhere (in a string it is
  // written \u0000), so refusing the byte refuses trailing bytes consistently.
  if (text.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("request body is not valid JSON (it holds a NUL byte)");
  }
  GPUHUB_RETURN_IF_ERROR(CheckJsonDepth(text, kMaxJsonDepth));
  return CheckNoDuplicateKeys(text);
}

Status CheckJsonBody(const Request& request) {
  GPUHUB_RETURN_IF_ERROR(CheckJsonContentType(request));
  return CheckJsonText(request.body);
}

Result<json> ParseJsonObject(const Request& request,
                             std::initializer_list<std::string_view> allowed) {
  GPUHUB_RETURN_IF_ERROR(CheckJsonContentType(request));
  if (Trim(request.body).empty())
    return Status::InvalidArgument("request body must be a JSON object");
  GPUHUB_RETURN_IF_ERROR(CheckJsonText(request.body));
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Status::InvalidArgument("request body is not valid JSON");
  if (!body.is_object()) return Status::InvalidArgument("request body must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (auto a : allowed) known = known || key == a;
    if (!known) {
      return Status::InvalidArgument("unknown field '" + key.substr(0, 64) + "'")
          .WithField(key.substr(0, 64));
    }
  }
  return body;
}

Result<std::string> RequiredString(const json& object, std::string_view field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' is required")
        .WithField(std::string(field));
  }
  if (!it->is_string()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be a string")
        .WithField(std::string(field));
  }
  return it->get<std::string>();
}

Result<std::optional<std::string>> OptionalString(const json& object, std::string_view field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be a string")
        .WithField(std::string(field));
  }
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::int64_t> RequiredInteger(const json& object, std::string_view field, std::int64_t min,
                                     std::int64_t max) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' is required")
        .WithField(std::string(field));
  }
  if (!it->is_number_integer()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be a whole number")
        .WithField(std::string(field));
  }
  std::int64_t v = it->is_number_unsigned()
                       ? (it->get<std::uint64_t>() > static_cast<std::uint64_t>(max)
                              ? max + (max < INT64_MAX ? 1 : 0)
                              : static_cast<std::int64_t>(it->get<std::uint64_t>()))
                       : it->get<std::int64_t>();
  if (v < min || v > max) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be between " +
                                   std::to_string(min) + " and " + std::to_string(max))
        .WithField(std::string(field));
  }
  return v;
}

namespace {

engine::StoredResponse ToStored(const Result<Reply>& reply) {
  if (reply.ok()) {
    std::string body;
    if (reply->status != 204)
      body = reply->serialized.empty() ? Dump(reply->body) : reply->serialized;
    return {reply->status, std::move(body), false, reply->replayable};
  }
  const Status& s = reply.status();
  return {HttpStatusOf(s.code()), ErrorBody(StatusCodeName(s.code()), s.message(), s.field()),
          false};
}

Response FromStored(const engine::StoredResponse& stored) {
  Response r = Response::Json(stored.status_code, stored.body);
  if (stored.replayed) r.headers.emplace_back("Idempotent-Replayed", "true");
  return r;
}

// The answer to a retry whose key another request holds in flight: the stored answer when the
// key's first request has finished (a retry must replay, however many run at once), else 409.
Result<engine::StoredResponse> ReplayOr409(engine::Txn& txn, const std::string& scope,
                                           const std::string& key,
                                           const engine::Fingerprint& fingerprint) {
  GPUHUB_ASSIGN_OR_RETURN(std::optional<engine::StoredResponse> stored,
                          engine::FindIdempotent(txn, scope, key, fingerprint));
  if (stored) return *stored;
  return engine::StoredResponse{
      409,
      ErrorBody("conflict",
                "a request with this Idempotency-Key is still being processed; retry later", ""),
      false};
}

// What a command does with the request's key: run the action (replaying a stored answer), or
// only replay because another request with the key is in flight here.
enum class KeyMode { kRun, kReplayOnly };
using RunBody = std::function<Result<engine::StoredResponse>(
    engine::Txn&, const std::string& key, const engine::Fingerprint& fingerprint, KeyMode mode)>;

// The common path of both Run* functions. `scope` is computed on the writer (it needs the user).
// The caller's account when it has one of `any_of_roles` (0: any user).
Result<AuthenticatedCaller> AuthenticateWithRoles(engine::Txn& txn, const Caller& caller,
                                                  std::uint32_t any_of_roles) {
  auto found = AuthenticateCaller(txn, caller);
  if (!found.ok()) return found.status();
  if (any_of_roles != 0 && (found->user.roles & any_of_roles) == 0) {
    std::string names;
    for (const auto& n : engine::RoleNames(any_of_roles))
      names += (names.empty() ? "" : " or ") + n;
    return Status::PermissionDenied("this endpoint needs the " + names + " role");
  }
  return found;
}

void Run(ApiContext& api, const Request& request, Responder respond, bool idempotent, bool reserved,
         RunBody body) {
  std::string key;
  std::string in_flight;
  KeyMode mode = KeyMode::kRun;
  if (idempotent && request.method == "POST") {
    key = request.Header("idempotency-key");
    if (request.headers.count("idempotency-key")) {
      Status valid = engine::ValidateIdempotencyKey(key);
      if (!valid.ok()) return respond(Response::Error(valid));
      in_flight = InFlightId(request, key);
      if (!reserved && !api.in_flight.Insert(in_flight)) {
        // Held by another request: the first one still running, or another retry of a finished
        // one. The writer tells them apart (its state has the answer once the first finished).
        mode = KeyMode::kReplayOnly;
        in_flight.clear();  // not ours to release
      }
    }
  }
  engine::Fingerprint fingerprint =
      key.empty() ? engine::Fingerprint{} : RequestFingerprint(request);
  api.engine.Execute<engine::StoredResponse>(
      [body = std::move(body), key, fingerprint, mode](engine::Txn& txn) {
        return body(txn, key, fingerprint, mode);
      },
      [&api, respond = std::move(respond), in_flight](Result<engine::StoredResponse> result) {
        if (!in_flight.empty()) api.in_flight.Erase(in_flight);
        if (!result.ok()) return respond(Response::Error(result.status()));
        respond(FromStored(*result));
      });
}

// Runs `action` (idempotently when a key is given); the writes of a failed action are dropped.
Result<engine::StoredResponse> RunMaybeIdempotent(
    engine::Txn& txn, const std::string& scope, const std::string& key,
    const engine::Fingerprint& fingerprint, KeyMode mode,
    const std::function<Result<Reply>(engine::Txn&)>& action) {
  if (mode == KeyMode::kReplayOnly) return ReplayOr409(txn, scope, key, fingerprint);
  auto run = [&](engine::Txn& t) { return ToStored(action(t)); };
  if (!key.empty()) return engine::RunIdempotent(txn, scope, key, fingerprint, run);
  std::size_t mark = txn.writes.size();
  engine::StoredResponse response = run(txn);
  if (response.status_code >= 400) txn.writes.Truncate(mark);
  return response;
}

}  // namespace

Caller CallerOf(const Request& request) {
  Credentials credentials = CredentialsOf(request);
  Caller caller;
  caller.remote_address = request.remote_address;
  if (credentials.token.empty()) return caller;
  caller.token_hash = engine::HashToken(credentials.token);
  caller.api_key = !credentials.from_cookie && credentials.token.starts_with(engine::kApiKeyPrefix);
  if (caller.api_key) {
    ApiKeyAccess access = ApiKeyAccessFor(request.method, request.route);
    caller.session_only = access.session_only;
    caller.scopes_needed = access.scopes;
    caller.why = std::move(access.why);
  }
  return caller;
}

AuditSeen AuditSeenOf(const Request& request) {
  return {request.remote_address, request.Header("user-agent").substr(0, 1024), request.request_id,
          request.route.starts_with("/v1/admin/")};
}

engine::AuditOrigin AuditOriginOf(const AuditSeen& seen, const AuthenticatedCaller& caller) {
  std::string actor = caller.key ? "api_key:" + std::to_string(caller.key->id)
                      : seen.admin_route && caller.user.Has(engine::kRoleAdmin)
                          ? "admin:" + std::to_string(caller.user.id)
                          : "user:" + std::to_string(caller.user.id);
  return engine::MakeAuditOrigin(std::move(actor), seen.remote_address, seen.user_agent,
                                 seen.request_id);
}

Result<AuthenticatedCaller> AuthenticateCaller(const engine::Txn& txn, const Caller& caller) {
  if (caller.token_hash.empty()) {
    return Status::Unauthenticated("this endpoint needs 'Authorization: Bearer <token>'");
  }
  if (!caller.api_key) {
    GPUHUB_ASSIGN_OR_RETURN(engine::User user, engine::Authenticate(txn, caller.token_hash));
    return AuthenticatedCaller{std::move(user), std::nullopt};
  }
  if (caller.session_only) return Status::PermissionDenied(caller.why);
  GPUHUB_ASSIGN_OR_RETURN(engine::ApiKeyCaller found,
                          engine::AuthenticateApiKey(txn, caller.token_hash));
  const engine::ApiKey& key = found.key;
  if (!key.networks.empty()) {
    // Validated when the key was made; a list that no longer parses lets nobody in.
    auto networks = AddressFilter::Parse(key.networks);
    if (!networks.ok() || !networks->Allows(caller.remote_address)) {
      return Status::PermissionDenied("API key " + std::to_string(key.id) +
                                      " is not allowed from " +
                                      caller.remote_address.substr(0, 64) + " (its allowed_cidrs)");
    }
  }
  if (std::uint32_t missing = caller.scopes_needed & ~key.scopes) {
    std::string names;
    for (const auto& n : engine::ApiScopeNames(missing)) names += (names.empty() ? "" : ", ") + n;
    return Status::PermissionDenied("API key " + std::to_string(key.id) +
                                    " lacks the scope this endpoint needs: " + names);
  }
  return AuthenticatedCaller{std::move(found.user), key};
}

Handler ApiKeyGate(const std::string& method, const std::string& pattern, Handler handler) {
  ApiKeyAccess access = ApiKeyAccessFor(method, pattern);
  if (!access.session_only) return handler;
  return [handler = std::move(handler), why = access.why](const Request& request,
                                                          Responder respond) {
    if (request.BearerToken().starts_with(engine::kApiKeyPrefix)) {
      return respond(Response::Error(Status::PermissionDenied(why)));
    }
    handler(request, std::move(respond));
  };
}

Response BearerChallenge(std::string_view message) {
  Response r = Response::Error(401, "unauthenticated", message);
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

namespace {
Response MissingToken() {
  return BearerChallenge(
      "this endpoint needs 'Authorization: Bearer <token>' (POST /v1/sessions to get one) or a "
      "signed-in session cookie");
}
}  // namespace

Handler RequireBearer(Handler handler) {
  return [handler = std::move(handler)](const Request& request, Responder respond) {
    Credentials credentials = CredentialsOf(request);
    if (credentials.token.empty()) return respond(MissingToken());
    if (!CsrfAllows(request, credentials)) return respond(CsrfRefused());
    handler(request, std::move(respond));
  };
}

Handler AdminOnly(ApiContext& api, Handler handler) {
  auto shared = std::make_shared<const Handler>(std::move(handler));
  return RequireBearer([&api, shared](const Request& request, Responder respond) {
    auto copy = std::make_shared<const Request>(request);
    AuthenticateThen(api, request, std::move(respond), engine::kRoleAdmin,
                     [&api, shared, copy](const engine::User&, Responder respond) {
                       auto run = [shared, copy, respond]() mutable {
                         (*shared)(*copy, std::move(respond));
                       };
                       if (!api.admin_requests.Post(std::move(run))) {
                         respond(Response::Error(503, "unavailable",
                                                 "too many admin requests at once; retry"));
                       }
                     });
  });
}

void RunAuthenticated(ApiContext& api, const Request& request, Responder respond,
                      std::uint32_t any_of_roles, UserAction action, bool idempotent,
                      bool key_reserved) {
  Credentials credentials = CredentialsOf(request);
  if (credentials.token.empty()) return respond(MissingToken());
  if (!CsrfAllows(request, credentials)) return respond(CsrfRefused());
  Run(api, request, std::move(respond), idempotent, key_reserved,
      [caller = CallerOf(request), seen = AuditSeenOf(request), any_of_roles,
       action = std::move(action)](engine::Txn& txn, const std::string& key,
                                   const engine::Fingerprint& fingerprint,
                                   KeyMode mode) -> Result<engine::StoredResponse> {
        auto found = AuthenticateWithRoles(txn, caller, any_of_roles);
        if (!found.ok()) return ToStored(found.status());
        const engine::User me = found->user;
        const std::optional<engine::ApiKey>& api_key = found->key;
        // What the action records in the audit log names this caller; a key's first request is
        // recorded here, before the action (kept even when the action fails).
        const engine::AuditOrigin origin = AuditOriginOf(seen, *found);
        engine::AuditOriginScope audit(txn, origin);
        if (api_key) engine::NoteApiKeyUse(txn, api_key->id);
        return RunMaybeIdempotent(
            txn, "user:" + std::to_string(me.id), key, fingerprint, mode,
            [&](engine::Txn& t) -> Result<Reply> {
              if (!api_key) return action(t, me);
              // What the key may move out of the wallets (none without wallet-spend; its day's
              // cap with one), counted in the engine whatever the route.
              engine::ApiKeySpend spend(t, *api_key);
              Result<Reply> reply = action(t, me);
              if (reply.ok() && reply->status < 400) spend.Commit();
              return reply;
            });
      });
}

void AuthenticateThen(ApiContext& api, const Request& request, Responder respond,
                      std::uint32_t any_of_roles,
                      std::function<void(const engine::User&, Responder)> next) {
  Credentials credentials = CredentialsOf(request);
  if (credentials.token.empty()) return respond(MissingToken());
  if (!CsrfAllows(request, credentials)) return respond(CsrfRefused());
  api.engine.Execute<engine::User>(
      [caller = CallerOf(request), any_of_roles](engine::Txn& txn) -> Result<engine::User> {
        GPUHUB_ASSIGN_OR_RETURN(AuthenticatedCaller found,
                                AuthenticateWithRoles(txn, caller, any_of_roles));
        // Only on success: a failed command's rows are dropped, its memory is not.
        if (found.key) engine::NoteApiKeyUse(txn, found.key->id);
        return found.user;
      },
      [respond = std::move(respond), next = std::move(next)](Result<engine::User> user) mutable {
        if (!user.ok()) return respond(Response::Error(user.status()));
        next(*user, std::move(respond));
      });
}

void ReplayAnonymousOr409(ApiContext& api, const Request& request, Responder respond) {
  std::string key = request.Header("idempotency-key");
  engine::Fingerprint fingerprint = RequestFingerprint(request);
  api.engine.Execute<engine::StoredResponse>(
      [key, fingerprint](engine::Txn& txn) {
        return ReplayOr409(txn, "anonymous", key, fingerprint);
      },
      [respond = std::move(respond)](Result<engine::StoredResponse> result) {
        if (!result.ok()) return respond(Response::Error(result.status()));
        respond(FromStored(*result));
      });
}

void RunAnonymous(ApiContext& api, const Request& request, Responder respond, bool idempotent,
                  AnonymousAction action, bool key_reserved) {
  Run(api, request, std::move(respond), idempotent, key_reserved,
      [action = std::move(action)](engine::Txn& txn, const std::string& key,
                                   const engine::Fingerprint& fingerprint, KeyMode mode) {
        return RunMaybeIdempotent(txn, "anonymous", key, fingerprint, mode, action);
      });
}

}  // namespace gpuhub::http
