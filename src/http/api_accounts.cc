// Accounts and sessions: sign up, log in, log out, who am I, become a provider.
//
//   POST   /v1/accounts           {"username", "password", "roles"?: ["customer"|"provider"]} ->
//   201 POST   /v1/sessions           {"username", "password"} -> 201 {"token", "token_type", ...}
//   DELETE /v1/sessions/current   -> 204
//   GET    /v1/accounts/me        -> 200 user
//   POST   /v1/accounts/me/roles  {"role": "provider"|"customer"} -> 200 user
//
// Passwords are hashed and verified on the worker pool (Argon2id), never on the I/O or writer
// threads. Login answers the same 401 for an unknown user and a wrong password, and verifies
// against a dummy hash for unknown users so that timing does not tell them apart either.
#include "engine/limits.h"
#include "http/api.h"
#include "http/limits.h"

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
  if (!canonical.ok()) return respond(Response::Error(canonical.status()));
  Status valid = engine::ValidatePassword(*password);
  if (!valid.ok()) return respond(Response::Error(valid));
  auto roles = ParseSignupRoles(*body);
  if (!roles.ok()) return respond(Response::Error(roles.status()));

  std::string in_flight;
  if (request.headers.count("idempotency-key")) {
    const std::string& key = request.Header("idempotency-key");
    Status key_ok = engine::ValidateIdempotencyKey(key);
    if (!key_ok.ok()) return respond(Response::Error(key_ok));
    in_flight = InFlightId(request, key);
    if (!api.in_flight.Insert(in_flight)) {
      return respond(Response::Error(
          409, "conflict", "a request with this Idempotency-Key is still being processed"));
    }
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
          GPUHUB_ASSIGN_OR_RETURN(engine::User user, engine::CreateUser(txn, name, hash, roles));
          return Reply{201, UserJson(user)};
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

void LogIn(ApiContext& api, const Request& request, Responder respond) {
  auto body = ParseJsonObject(request, {"username", "password"});
  if (!body.ok()) return respond(Response::Error(body.status()));
  auto username = RequiredString(*body, "username");
  if (!username.ok()) return respond(Response::Error(username.status()));
  auto password = RequiredString(*body, "password");
  if (!password.ok()) return respond(Response::Error(password.status()));
  auto invalid = [] {
    return Response::Error(401, "unauthenticated", "invalid username or password");
  };
  auto canonical = engine::CanonicalUsername(*username);
  if (!canonical.ok() || password->size() > engine::kMaxPasswordBytes) return respond(invalid());
  if (std::int64_t wait = api.login_attempts_by_address.Acquire("addr:" + request.remote_address)) {
    return respond(TooManyRequests(wait, "too many login attempts from this address"));
  }
  std::string user_key = "user:" + *canonical;
  if (std::int64_t wait = api.login_failures_by_user.RetryAfter(user_key)) {
    return respond(TooManyRequests(wait, "too many failed logins for this username"));
  }
  api.engine.Execute<LoginTarget>(
      [name = *canonical](engine::Txn& txn) -> Result<LoginTarget> {
        const engine::User* user = engine::FindUserByName(txn.state, name);
        if (!user) return LoginTarget{};
        return LoginTarget{user->id, user->password_hash};
      },
      [&api, respond, password = *password, user_key, invalid](Result<LoginTarget> target) {
        if (!target.ok()) return respond(Response::Error(target.status()));
        auto verify = [&api, respond, password, user_key, invalid, target = *target]() {
          const std::string& hash =
              target.user_id ? target.password_hash : engine::DummyPasswordHash(api.config.hashing);
          bool ok = engine::VerifyPassword(hash, password) && target.user_id != 0;
          if (!ok) {
            api.login_failures_by_user.Record(user_key);
            return respond(invalid());
          }
          api.login_failures_by_user.Reset(user_key);
          std::string token = engine::NewSessionToken();
          api.engine.Execute<Reply>(
              [user_id = target.user_id, hash = engine::HashToken(token),
               token](engine::Txn& txn) -> Result<Reply> {
                GPUHUB_ASSIGN_OR_RETURN(engine::Session s,
                                        engine::CreateSession(txn, user_id, hash));
                const engine::User* user = engine::FindUser(txn.state, user_id);
                if (!user) return Status::Unauthenticated("invalid username or password");
                return Reply{201,
                             {{"token", token},
                              {"token_type", "Bearer"},
                              {"expires_at", FormatTimestamp(s.expires_at)},
                              {"user", UserJson(*user)}}};
              },
              [respond](Result<Reply> reply) {
                if (!reply.ok()) return respond(Response::Error(reply.status()));
                Response r = JsonResponse(reply->status, reply->body);
                r.headers.emplace_back("Cache-Control", "no-store");
                respond(std::move(r));
              });
        };
        if (!api.hashers.Post(verify)) {
          respond(
              Response::Error(503, "unavailable", "too many logins in progress; retry shortly"));
        }
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
               std::string hash = engine::HashToken(r.BearerToken());
               RunAuthenticated(api, r, std::move(respond), 0,
                                [hash](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                                  GPUHUB_RETURN_IF_ERROR(engine::DeleteSession(txn, hash));
                                  return Reply{204, nullptr};
                                });
             }));
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
                           return Reply{200, UserJson(user)};
                         });
      }));
}

}  // namespace gpuhub::http
