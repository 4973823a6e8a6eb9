// Accounts and sessions: sign up, log in, log out, who am I, become a provider.
//
//   POST   /v1/accounts           {"username", "password", "roles"?: ["customer"|"provider"]} ->
//   201 POST   /v1/sessions           {"username", "password", "totp_code"?} -> 201 {"token",
//          "token_type", ...}; an account with two-factor sign-in (engine/totp.h) needs
//          totp_code (a code or a recovery code): without it, or with a wrong one, 401 naming the
//          field "totp_code" and no session
//          with "cookie": true (the web pages): the token goes in the HttpOnly session cookie and
//          the body carries {"token_type": "cookie", "csrf_token", ...} instead (web_session.h)
//   GET    /v1/sessions/current   -> 200 {"authenticated", "user", "expires_at", "via",
//                                  "csrf_token" (cookie sessions)}; anonymous: authenticated false
//   DELETE /v1/sessions/current   -> 204 (a cookie session also gets its cookie cleared)
//   GET    /v1/accounts/me        -> 200 user
//   POST   /v1/accounts/me/roles  {"role": "provider"|"customer"} -> 200 user
//
// Passwords are hashed and verified on the worker pool (Argon2id), never on the I/O or writer
// threads. Login answers the same 401 for an unknown user and a wrong password, and verifies
// against a dummy hash for unknown users so that timing does not tell them apart either.
#include "engine/limits.h"
#include "http/api.h"
#include "http/limits.h"
#include "http/web_session.h"

namespace gpuhub::http {
namespace {

Result<std::uint32_t> ParseSignupRoles(const json& body) {
  auto it = body.find("roles");
  if (it == body.end() || it->is_null()) return static_cast<std::uint32_t>(engine::kRoleCustomer);
  if (!it->is_array() || it->empty() || it->size() > 3) {
    return Status::InvalidArgument("field 'roles' must be a non-empty array of role names");
  }
  std::uint32_t roles = 0;
  for (const auto& v : *it) {
    if (!v.is_string()) return Status::InvalidArgument("field 'roles' must hold strings");
    GPUHUB_ASSIGN_OR_RETURN(engine::Role role, engine::ParseRole(v.get<std::string>()));
    if (role == engine::kRoleAdmin) {
      return Status::PermissionDenied(
          "admin accounts are created by an operator (gpuhub admin create-user)");
    }
    roles |= role;
  }
  return roles;
}

void SignUp(ApiContext& api, const Request& request, Responder respond) {
  auto body = ParseJsonObject(request, {"username", "password", "roles"});
  if (!body.ok()) return respond(Response::Error(body.status()));
  auto username = RequiredString(*body, "username");
  if (!username.ok()) return respond(Response::Error(username.status()));
  auto password = RequiredString(*body, "password");
  if (!password.ok()) return respond(Response::Error(password.status()));
  auto canonical = engine::CanonicalUsername(*username);
  if (!canonical.ok()) return respond(Response::Error(canonical.status().WithField("username")));
  Status free_name = engine::CheckUsernameNotReserved(*canonical);
  if (!free_name.ok()) return respond(Response::Error(free_name.WithField("username")));
  Status valid = engine::ValidatePassword(*password);
  if (!valid.ok()) return respond(Response::Error(valid.WithField("password")));
  auto roles = ParseSignupRoles(*body);
  if (!roles.ok()) return respond(Response::Error(roles.status().WithField("roles")));

  std::string in_flight;
  if (request.headers.count("idempotency-key")) {
    const std::string& key = request.Header("idempotency-key");
    Status key_ok = engine::ValidateIdempotencyKey(key);
    if (!key_ok.ok()) return respond(Response::Error(key_ok));
    in_flight = InFlightId(request, key);
    if (!api.in_flight.Insert(in_flight)) return ReplayAnonymousOr409(api, request, respond);
  }
  if (std::int64_t wait = api.signups_by_address.Acquire("addr:" + request.remote_address)) {
    if (!in_flight.empty()) api.in_flight.Erase(in_flight);
    return respond(TooManyRequests(wait, "too many new accounts from this address"));
  }
  auto task = [&api, request, respond, in_flight, name = *canonical, password = *password,
               roles = *roles]() mutable {
    auto hash = engine::HashPassword(password, api.config.hashing);
    if (!hash.ok()) {
      if (!in_flight.empty()) api.in_flight.Erase(in_flight);
      return respond(Response::Error(hash.status()));
    }
    RunAnonymous(
        api, request, respond, /*idempotent=*/true,
        [name, hash = *hash, roles](engine::Txn& txn) -> Result<Reply> {
          auto user = engine::CreateUser(txn, name, hash, roles);
          if (!user.ok()) {
            // The one way sign-up fails here is a taken username.
            return user.status().code() == StatusCode::kConflict
                       ? user.status().WithField("username")
                       : user.status();
          }
          return Reply{201, UserJson(*user)};
        },
        /*key_reserved=*/!in_flight.empty());
  };
  if (!api.hashers.Post(std::move(task))) {
    if (!in_flight.empty()) api.in_flight.Erase(in_flight);
    respond(Response::Error(503, "unavailable", "too many sign-ups in progress; retry shortly"));
  }
}

struct LoginTarget {
  std::int64_t user_id = 0;
  std::string password_hash;
};

// A login that sets the session cookie must come from our own pages: a cross-site form or
// no-cors fetch cannot send Content-Type: application/json (that needs a CORS preflight, which
// this server never grants), and a browser's Origin, when sent, must be this host.
Status CheckCookieLoginOrigin(const Request& request) {
  if (!IsJsonMediaType(request.Header("content-type"))) {
    return Status::InvalidArgument(
        "a cookie login must be sent with Content-Type: application/json");
  }
  const std::string& origin = request.Header("origin");
  if (!origin.empty() && origin != "null") {
    std::size_t scheme = origin.find("://");
    std::string host = scheme == std::string::npos ? origin : origin.substr(scheme + 3);
    host = ToLower(host);
    if (host != ToLower(request.Header("host")) &&
        host != ToLower(request.Header("x-forwarded-host"))) {
      return Status::PermissionDenied("cross-site login refused (Origin " + origin.substr(0, 100) +
                                      ")");
    }
  }
  return Status::Ok();
}

void LogIn(ApiContext& api, const Request& request, Responder respond) {
  auto body = ParseJsonObject(request, {"username", "password", "cookie", "totp_code"});
  if (!body.ok()) return respond(Response::Error(body.status()));
  auto totp_code = TotpCodeField(*body);
  if (!totp_code.ok()) return respond(Response::Error(totp_code.status()));
  auto username = RequiredString(*body, "username");
  if (!username.ok()) return respond(Response::Error(username.status()));
  auto password = RequiredString(*body, "password");
  if (!password.ok()) return respond(Response::Error(password.status()));
  bool cookie = false;
  if (auto it = body->find("cookie"); it != body->end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return respond(Response::Error(
          Status::InvalidArgument("field 'cookie' must be true or false").WithField("cookie")));
    }
    cookie = it->get<bool>();
  }
  if (cookie) {
    Status origin = CheckCookieLoginOrigin(request);
    if (!origin.ok()) return respond(Response::Error(origin));
  }
  bool secure = CameOverTls(request);
  auto invalid = [] {
    return Response::Error(401, "unauthenticated", "invalid username or password");
  };
  auto canonical = engine::CanonicalUsername(*username);
  if (!canonical.ok() || password->size() > engine::kMaxPasswordBytes) return respond(invalid());
  if (std::int64_t wait = api.login_attempts_by_address.Acquire("addr:" + request.remote_address)) {
    return respond(TooManyRequests(wait, "too many login attempts from this address"));
  }
  // Slowed per (username, address), never locked for everyone (http/login_throttle.h). The
  // attempt counts as a failure of its pair from now until its password checks out: checking here
  // and recording only after the hash let a burst of concurrent guesses all pass the check.
  if (std::int64_t wait = api.logins.Begin(*canonical, request.remote_address)) {
    return respond(
        TooManyRequests(wait, "too many failed logins for this username from this address"));
  }
  api.engine.Execute<LoginTarget>(
      [name = *canonical](engine::Txn& txn) -> Result<LoginTarget> {
        const engine::User* user = engine::FindUserByName(txn.state, name);
        if (!user) return LoginTarget{};
        return LoginTarget{user->id, user->password_hash};
      },
      [&api, respond, password = *password, name = *canonical, address = request.remote_address,
       seen = AuditSeenOf(request), invalid, cookie, secure,
       totp_code = *totp_code](Result<LoginTarget> target) {
        if (!target.ok()) return respond(Response::Error(target.status()));
        auto verify = [&api, respond, password, name, address, seen, invalid, cookie, secure,
                       totp_code,
                       target = *target]() {
          const std::string& hash =
              target.user_id ? target.password_hash : engine::DummyPasswordHash(api.config.hashing);
          bool ok = engine::VerifyPassword(hash, password) && target.user_id != 0;
          if (!ok) {
            api.logins.Failed(name);  // the pair counted it already, in Begin
            // In the account's audit log, answered once it is durable. A username that does
            // not exist gets an event of no account (account 0, admins only) without the name:
            // an account-scoped row would tell that the name exists, and people type passwords
            // into the username field.
            return api.engine.Execute<bool>(
                [seen, user_id = target.user_id](engine::Txn& txn) -> Result<bool> {
                  engine::RecordAudit(
                      txn,
                      engine::MakeAuditOrigin("anonymous", seen.remote_address, seen.user_agent,
                                              seen.request_id),
                      user_id, engine::AuditKind::kSignInFailed,
                      {{"reason", user_id ? "wrong_password" : "unknown_username"}});
                  return true;
                },
                [respond, invalid](Result<bool> recorded) {
                  if (!recorded.ok()) return respond(Response::Error(recorded.status()));
                  respond(invalid());
                });
          }
          // The password checked out; with two-factor the code decides. A wrong code counts as a
          // failed login (Failed); a missing one is neither (the pair keeps Begin's count until
          // a full success), so a guesser gains nothing from the password step alone.
          std::string token = engine::NewSessionToken();
          api.engine.Execute<Reply>(
              [user_id = target.user_id, hash = engine::HashToken(token), token, cookie,
               totp_code, seen](engine::Txn& txn) -> Result<Reply> {
                auto use = engine::VerifyTotp(txn.state, txn.now, user_id, totp_code,
                                              engine::TotpPurpose::kSignIn);
                if (!use.ok()) {
                  return Status::Unauthenticated(use.status().message())
                      .WithField(use.status().field());
                }
                GPUHUB_ASSIGN_OR_RETURN(engine::Session s,
                                        engine::CreateSession(txn, user_id, hash));
                engine::UseTotp(txn, *use);
                const engine::User* user = engine::FindUser(txn.state, user_id);
                if (!user) return Status::Unauthenticated("invalid username or password");
                engine::RecordAudit(
                    txn,
                    engine::MakeAuditOrigin("user:" + std::to_string(user_id), seen.remote_address,
                                            seen.user_agent, seen.request_id),
                    user_id, engine::AuditKind::kSignIn,
                    {{"session", cookie ? "cookie" : "bearer"}});
                if (cookie) {
                  // The token stays in the HttpOnly cookie; the page gets the CSRF token.
                  return Reply{201,
                               {{"token_type", "cookie"},
                                {"csrf_token", CsrfTokenFor(token)},
                                {"expires_at", FormatTimestamp(s.expires_at)},
                                {"user", UserJson(*user)}}};
                }
                return Reply{201,
                             {{"token", token},
                              {"token_type", "Bearer"},
                              {"expires_at", FormatTimestamp(s.expires_at)},
                              {"user", UserJson(*user)}}};
              },
              [&api, respond, cookie, secure, token, name, address, seen,
               user_id = target.user_id,
               sent_code = totp_code && !totp_code->empty()](Result<Reply> reply) {
                if (!reply.ok()) {
                  if (reply.status().field() != engine::kTotpCodeField || !sent_code) {
                    return respond(Response::Error(reply.status()));
                  }
                  // A wrong code: a failed login, in the throttle and in the account's log.
                  api.logins.Failed(name);
                  return api.engine.Execute<bool>(
                      [seen, user_id](engine::Txn& txn) -> Result<bool> {
                        engine::RecordAudit(
                            txn,
                            engine::MakeAuditOrigin("anonymous", seen.remote_address,
                                                    seen.user_agent, seen.request_id),
                            user_id, engine::AuditKind::kSignInFailed,
                            {{"reason", "wrong_totp_code"}});
                        return true;
                      },
                      [respond, error = reply.status()](Result<bool>) {
                        respond(Response::Error(error));
                      });
                }
                api.logins.Succeeded(name, address);
                Response r = JsonResponse(reply->status, reply->body);
                r.headers.emplace_back("Cache-Control", "no-store");
                if (cookie) {
                  r.headers.emplace_back(
                      "Set-Cookie",
                      SessionCookie(token, engine::kSessionLifetimeMicros / 1000000, secure));
                }
                respond(std::move(r));
              });
        };
        if (!api.hashers.Post(verify)) {
          respond(
              Response::Error(503, "unavailable", "too many logins in progress; retry shortly"));
        }
      });
}

// Who is signed in. Anonymous callers get 200 {"authenticated": false} (a page asks this on every
// load, so "nobody" is an answer, not an error); a stale cookie is also cleared. An invalid bearer
// token is still 401, as everywhere else.
void CurrentSession(ApiContext& api, const Request& request, Responder respond) {
  Credentials credentials = CredentialsOf(request);
  bool secure = CameOverTls(request);
  auto anonymous = [secure](bool clear_cookie) {
    Response r = JsonResponse(200, {{"authenticated", false}, {"user", nullptr}});
    r.headers.emplace_back("Cache-Control", "no-store");
    if (clear_cookie) r.headers.emplace_back("Set-Cookie", ClearedSessionCookie(secure));
    return r;
  };
  if (credentials.token.empty())
    return respond(anonymous(!request.Cookie(kSessionCookieName).empty()));
  struct Found {
    engine::User user;
    TimestampMicros expires_at = 0;
  };
  api.engine.Execute<Found>(
      [hash = engine::HashToken(credentials.token)](engine::Txn& txn) -> Result<Found> {
        GPUHUB_ASSIGN_OR_RETURN(engine::User user, engine::Authenticate(txn, hash));
        auto it = txn.state.accounts.sessions.find(hash);
        return Found{user, it == txn.state.accounts.sessions.end() ? 0 : it->second.expires_at};
      },
      [respond, credentials, anonymous](Result<Found> found) {
        if (!found.ok()) {
          if (credentials.from_cookie && found.status().code() == StatusCode::kUnauthenticated) {
            return respond(anonymous(true));
          }
          return respond(Response::Error(found.status()));
        }
        json body = {{"authenticated", true},
                     {"user", UserJson(found->user)},
                     {"expires_at", FormatTimestamp(found->expires_at)},
                     {"via", credentials.from_cookie ? "cookie" : "bearer"}};
        if (credentials.from_cookie) body["csrf_token"] = CsrfTokenFor(credentials.token);
        Response r = JsonResponse(200, body);
        r.headers.emplace_back("Cache-Control", "no-store");
        respond(std::move(r));
      });
}

}  // namespace

void RegisterAccountRoutes(Router& router, ApiContext& api) {
  router.Add("POST", "/v1/accounts",
             [&api](const Request& r, Responder respond) { SignUp(api, r, std::move(respond)); });
  router.Add("POST", "/v1/sessions",
             [&api](const Request& r, Responder respond) { LogIn(api, r, std::move(respond)); });
  router.Add("DELETE", "/v1/sessions/current",
             RequireBearer([&api](const Request& r, Responder respond) {
               Credentials credentials = CredentialsOf(r);
               std::string hash = engine::HashToken(credentials.token);
               if (credentials.from_cookie) {
                 // Logging out of the pages always clears the cookie, even when the session had
                 // already expired (the CSRF token still proves the page holds that cookie).
                 bool secure = CameOverTls(r);
                 return api.engine.Execute<bool>(
                     [hash, seen = AuditSeenOf(r)](engine::Txn& txn) -> Result<bool> {
                       auto session = txn.state.accounts.sessions.find(hash);
                       const std::int64_t user_id = session == txn.state.accounts.sessions.end()
                                                        ? 0
                                                        : session->second.user_id;
                       Status s = engine::DeleteSession(txn, hash);
                       if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
                       if (s.ok()) {
                         engine::RecordAudit(
                             txn,
                             engine::MakeAuditOrigin("user:" + std::to_string(user_id),
                                                     seen.remote_address, seen.user_agent,
                                                     seen.request_id),
                             user_id, engine::AuditKind::kSignOut, {{"session", "cookie"}});
                       }
                       return s.ok();
                     },
                     [respond, secure](Result<bool> deleted) {
                       if (!deleted.ok()) return respond(Response::Error(deleted.status()));
                       Response out = Response::Json(204, "");
                       out.headers.emplace_back("Set-Cookie", ClearedSessionCookie(secure));
                       out.headers.emplace_back("Cache-Control", "no-store");
                       respond(std::move(out));
                     });
               }
               RunAuthenticated(api, r, std::move(respond), 0,
                                [hash](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                                  GPUHUB_RETURN_IF_ERROR(engine::DeleteSession(txn, hash));
                                  engine::RecordAudit(txn, me.id, engine::AuditKind::kSignOut,
                                                      {{"session", "bearer"}});
                                  return Reply{204, nullptr};
                                });
             }));
  router.Add("GET", "/v1/sessions/current", [&api](const Request& r, Responder respond) {
    CurrentSession(api, r, std::move(respond));
  });
  router.Add("GET", "/v1/accounts/me", RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(api, r, std::move(respond), 0,
                                [](engine::Txn&, const engine::User& me) -> Result<Reply> {
                                  return Reply{200, UserJson(me)};
                                });
             }));
  router.Add(
      "POST", "/v1/accounts/me/roles", RequireBearer([&api](const Request& r, Responder respond) {
        auto body = ParseJsonObject(r, {"role"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        auto name = RequiredString(*body, "role");
        if (!name.ok()) return respond(Response::Error(name.status()));
        auto role = engine::ParseRole(*name);
        if (!role.ok()) return respond(Response::Error(role.status()));
        if (*role == engine::kRoleAdmin) {
          return respond(Response::Error(Status::PermissionDenied(
              "the admin role is granted by an operator (gpuhub admin create-user)")));
        }
        RunAuthenticated(api, r, std::move(respond), 0,
                         [role = *role](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                           GPUHUB_ASSIGN_OR_RETURN(engine::User user,
                                                   engine::GrantRoles(txn, me.id, role));
                           if (user.roles != me.roles) {
                             engine::RecordAudit(txn, me.id, engine::AuditKind::kRoleChanged,
                                                 {{"granted", engine::RoleNames(role)},
                                                  {"roles", engine::RoleNames(user.roles)}});
                           }
                           return Reply{200, UserJson(user)};
                         });
      }));
}

}  // namespace gpuhub::http
