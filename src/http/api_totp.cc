// Two-factor sign-in (engine/totp.h) and the password of the signed-in account. Session only: no
// API key reaches these routes (api_key_scopes.h's session-only prefixes).
//
//   GET  /v1/accounts/me/totp          -> 200 {"enabled", "pending", "recovery_codes_left"}
//   POST /v1/accounts/me/totp          {} -> 201 {"secret", "otpauth_uri", "enabled": false}
//                                      (pending until confirmed; the secret is shown only here)
//   POST /v1/accounts/me/totp/confirm  {"totp_code"} -> 200 {"enabled": true, "recovery_codes"}
//   POST /v1/accounts/me/totp/disable  {"totp_code"} (a code or a recovery code) -> 200
//   POST /v1/accounts/me/recovery-codes {"totp_code"} -> 200 {"recovery_codes"} (the old ones end)
//   POST /v1/accounts/me/password      {"current_password", "new_password", "totp_code"?} -> 200
//                                      {"sessions_revoked"}: every other session ends, keys stay
//
// Answers holding a secret or recovery codes are never stored for an Idempotency-Key replay.
#include "engine/audit_log.h"
#include "engine/totp.h"

#include "engine/limits.h"
#include "http/api.h"
#include "http/web_session.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;

struct CodeOnly {
  std::optional<std::string> code;
  std::vector<std::string> recovery_codes;  // new ones, made here (off the writer)
};

Result<CodeOnly> ParseCodeOnly(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"totp_code"}));
  CodeOnly out;
  GPUHUB_ASSIGN_OR_RETURN(out.code, TotpCodeField(body));
  return out;
}

Result<CodeOnly> ParseRequiredCode(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(CodeOnly out, ParseCodeOnly(r));
  if (!out.code || out.code->empty()) {
    return Status::InvalidArgument("field 'totp_code' is required").WithField("totp_code");
  }
  out.recovery_codes =
      engine::RecoveryCodesFrom(engine::RandomBytes(engine::kTotpRecoveryCodes * 7));
  return out;
}

json StatusJson(const engine::State& state, std::int64_t user_id) {
  const engine::AccountTotp* t = engine::FindTotp(state, user_id);
  return {{"enabled", t && t->enabled},
          {"pending", t && !t->enabled},
          {"recovery_codes_left", t && t->enabled ? t->recovery_hashes.size() : 0},
          {"enabled_at", t && t->enabled ? json(FormatTimestamp(t->enabled_at)) : json(nullptr)}};
}

struct PasswordChange {
  std::string current;
  std::string replacement;
  std::optional<std::string> code;
};

Result<PasswordChange> ParsePasswordChange(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body,
                          ParseJsonObject(r, {"current_password", "new_password", "totp_code"}));
  PasswordChange out;
  GPUHUB_ASSIGN_OR_RETURN(out.current, RequiredString(body, "current_password"));
  GPUHUB_ASSIGN_OR_RETURN(out.replacement, RequiredString(body, "new_password"));
  GPUHUB_ASSIGN_OR_RETURN(out.code, TotpCodeField(body));
  if (out.current.size() > engine::kMaxPasswordBytes) {
    return Status::PermissionDenied("current_password is wrong").WithField("current_password");
  }
  Status valid = engine::ValidatePassword(out.replacement);
  if (!valid.ok()) return valid.WithField("new_password");
  if (out.replacement == out.current) {
    return Status::InvalidArgument("new_password must differ from current_password")
        .WithField("new_password");
  }
  return out;
}

// The current password is checked against the hash the writer answered, on the hashing pool (as
// a login), through the login throttle of the user and this address; the new one is hashed there
// too; the writer then checks the code and that the hash is still the one checked.
void ChangePassword(ApiContext& api, const Request& r, Responder respond) {
  auto change = ParsePasswordChange(r);
  if (!change.ok()) return respond(Response::Error(change.status()));
  std::string address = CallerOf(r).remote_address;
  AuthenticateThen(
      api, r, std::move(respond), 0,
      [&api, r, change = *change, address](const User& me, Responder respond) {
        auto task = [&api, r, change, address, me, respond]() mutable {
          if (std::int64_t wait = api.logins.Begin(me.username, address)) {
            return respond(TooManyRequests(wait,
                                           "too many failed sign-in checks for this account"
                                           " from this address"));
          }
          if (!engine::VerifyPassword(me.password_hash, change.current)) {
            api.logins.Failed(me.username);
            return respond(Response::Error(Status::PermissionDenied("current_password is wrong")
                                               .WithField("current_password")));
          }
          api.logins.Succeeded(me.username, address);
          auto hash = engine::HashPassword(change.replacement, api.config.hashing);
          if (!hash.ok()) return respond(Response::Error(hash.status()));
          std::string keep = engine::HashToken(CredentialsOf(r).token);
          RunAuthenticated(
              api, r, std::move(respond), 0,
              [&api, address, change, checked = me.password_hash, hash = *hash, keep](
                  Txn& txn, const User& user) -> Result<Reply> {
                GPUHUB_ASSIGN_OR_RETURN(engine::TotpUse use,
                                        VerifyFreshCode(api, txn, user, address, change.code,
                                                        engine::TotpPurpose::kFreshCode));
                GPUHUB_ASSIGN_OR_RETURN(std::size_t ended,
                                        engine::ChangePassword(txn, user.id, checked, hash, keep));
                engine::UseTotp(txn, use);
                engine::RecordAudit(txn, user.id, engine::AuditKind::kPasswordChanged,
                                    {{"sessions_revoked", ended}});
                return Reply{200, {{"changed", true}, {"sessions_revoked", ended}}};
              },
              /*idempotent=*/false);
        };
        if (!api.hashers.Post(std::move(task))) {
          respond(Response::Error(503, "unavailable", "too many password checks; retry shortly"));
        }
      });
}

// A route of an account with two-factor on that needs a fresh code (or, to disable, a recovery
// code): the code checked in the same command as `action`, which runs only when it passed.
template <typename Action>
Handler WithFreshCode(ApiContext& api, engine::TotpPurpose purpose, bool idempotent,
                      Action action) {
  return RequireBearer([&api, purpose, idempotent, action](const Request& r, Responder respond) {
    auto in = ParseRequiredCode(r);
    if (!in.ok()) return respond(Response::Error(in.status()));
    std::string address = CallerOf(r).remote_address;
    RunAuthenticated(
        api, r, std::move(respond), 0,
        [&api, address, purpose, action, in = *in](Txn& txn, const User& me) -> Result<Reply> {
          if (!engine::TotpEnabled(txn.state, me.id)) {
            return Status::FailedPrecondition("two-factor sign-in is not enabled on this account");
          }
          GPUHUB_RETURN_IF_ERROR(VerifyFreshCode(api, txn, me, address, in.code, purpose).status());
          return action(txn, me, in);
        },
        idempotent);
  });
}

}  // namespace

Result<std::optional<std::string>> TotpCodeField(const json& body) {
  GPUHUB_ASSIGN_OR_RETURN(auto code, OptionalString(body, "totp_code"));
  if (code && code->size() > 64) {
    return Status::InvalidArgument("field 'totp_code' is a 6-digit code or a recovery code")
        .WithField("totp_code");
  }
  return code;
}

Result<engine::TotpUse> VerifyFreshCode(ApiContext& api, const engine::Txn& txn,
                                        const engine::User& me, const std::string& address,
                                        const std::optional<std::string>& code,
                                        engine::TotpPurpose purpose) {
  if (!engine::TotpEnabled(txn.state, me.id) || !code || code->empty()) {
    // Nothing to check, or the missing code's error: no guess was made.
    return engine::VerifyTotp(txn.state, txn.now, me.id, code, purpose);
  }
  if (std::int64_t wait = api.logins.Begin(me.username, address)) {
    return Status::ResourceExhausted(
               "too many wrong two-factor codes from this address; retry in " +
               std::to_string(wait) + " s")
        .WithField("totp_code");
  }
  auto use = engine::VerifyTotp(txn.state, txn.now, me.id, code, purpose);
  if (use.ok()) {
    api.logins.Succeeded(me.username, address);
  } else {
    api.logins.Failed(me.username);
  }
  return use;
}

void RegisterTotpRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/accounts/me/totp",
             Authenticated<Empty>(api, 0, NoInput,
                                  [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                                    return Reply{200, StatusJson(txn.state, me.id)};
                                  }));
  router.Add(
      "POST", "/v1/accounts/me/totp",
      Authenticated<std::string>(
          api, 0,
          [](const Request& r) -> Result<std::string> {
            if (!r.body.empty()) {
              GPUHUB_RETURN_IF_ERROR(ParseJsonObject(r, {}).status());
            }
            return engine::RandomBytes(engine::kTotpSecretBytes);
          },
          [](Txn& txn, const User& me, const std::string& secret) -> Result<Reply> {
            GPUHUB_ASSIGN_OR_RETURN(engine::TotpEnrolment e, engine::StartTotp(txn, me, secret));
            return Reply{
                201,
                {{"secret", e.secret_base32}, {"otpauth_uri", e.otpauth_uri}, {"enabled", false}},
                /*replayable=*/false};
          },
          /*idempotent=*/false));
  router.Add(
      "POST", "/v1/accounts/me/totp/confirm",
      Authenticated<CodeOnly>(
          api, 0, ParseRequiredCode,
          [](Txn& txn, const User& me, const CodeOnly& in) -> Result<Reply> {
            GPUHUB_RETURN_IF_ERROR(engine::ConfirmTotp(txn, me.id, *in.code, in.recovery_codes));
            engine::RecordAudit(txn, me.id, engine::AuditKind::kTotpEnabled);
            return Reply{200,
                         {{"enabled", true}, {"recovery_codes", in.recovery_codes}},
                         /*replayable=*/false};
          },
          /*idempotent=*/false));
  router.Add("POST", "/v1/accounts/me/totp/disable",
             WithFreshCode(api, engine::TotpPurpose::kDisable, /*idempotent=*/true,
                           [](Txn& txn, const User& me, const CodeOnly& in) -> Result<Reply> {
                             GPUHUB_RETURN_IF_ERROR(engine::DisableTotp(txn, me.id, in.code));
                             engine::RecordAudit(txn, me.id, engine::AuditKind::kTotpDisabled);
                             return Reply{200, StatusJson(txn.state, me.id)};
                           }));
  router.Add("POST", "/v1/accounts/me/recovery-codes",
             WithFreshCode(api, engine::TotpPurpose::kFreshCode, /*idempotent=*/false,
                           [](Txn& txn, const User& me, const CodeOnly& in) -> Result<Reply> {
                             GPUHUB_RETURN_IF_ERROR(engine::ReplaceRecoveryCodes(
                                 txn, me.id, in.code, in.recovery_codes));
                             engine::RecordAudit(txn, me.id,
                                                 engine::AuditKind::kRecoveryCodesRegenerated);
                             return Reply{200,
                                          {{"recovery_codes", in.recovery_codes}},
                                          /*replayable=*/false};
                           }));
  router.Add("POST", "/v1/accounts/me/password",
             RequireBearer([&api](const Request& r, Responder respond) {
               ChangePassword(api, r, std::move(respond));
             }));
}

}  // namespace gpuhub::http
