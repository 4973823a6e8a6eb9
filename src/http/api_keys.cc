// API keys of the signed-in account (engine/api_keys.h). Session only: a key never manages keys
// (api_key_scopes.h).
//
//   POST   /v1/api-keys {"name", "scopes": [...], "spend_cap_per_day"?, "spend_cap_currency"?,
//                        "expires_at"?, "allowed_cidrs"?, "totp_code"?}
//                        -> 201 key + {"secret"} (shown once); a key with wallet-spend or payouts
//                        on an account with two-factor needs a fresh totp_code
//   GET    /v1/api-keys                                   -> 200 {"api_keys": [key]}
//   GET    /v1/api-keys/{id}                              -> 200 key
//   DELETE /v1/api-keys/{id}                              -> 204 (the key stops at once)
// key: {"id", "name", "prefix", "scopes", "spend_cap_per_day": {"amount", "currency"} | null,
//       "spent_today": {"amount", "currency"} | null, "allowed_cidrs", "created_at",
//       "expires_at", "expired", "first_used_at" (null until a request used it)}
#include "engine/api_keys.h"
#include "core/money.h"
#include "engine/limits.h"
#include "http/address_filter.h"
#include "http/api.h"

namespace gpuhub::http {
namespace {

json KeyJson(const engine::ApiKey& k, TimestampMicros now) {
  json cap = nullptr, spent = nullptr;
  if (k.spend_cap_micros) {
    std::string currency(CurrencyCode(k.cap_currency));
    cap = {{"amount", FormatMicros(*k.spend_cap_micros)}, {"currency", currency}};
    spent = {{"amount", FormatMicros(k.SpentOn(now))}, {"currency", currency}};
  }
  return {{"id", k.id},
          {"name", k.name},
          {"prefix", std::string(engine::kApiKeyPrefix) + std::to_string(k.id) + "_"},
          {"scopes", engine::ApiScopeNames(k.scopes)},
          {"spend_cap_per_day", cap},
          {"spent_today", spent},
          {"allowed_cidrs", k.networks},
          {"created_at", FormatTimestamp(k.created_at)},
          {"expires_at", FormatTimestamp(k.expires_at)},
          {"expired", k.expires_at <= now},
          {"first_used_at",
           k.first_used_at ? json(FormatTimestamp(k.first_used_at)) : json(nullptr)}};
}

struct NewKey {
  engine::ApiKeySpec spec;
  std::string random_hex;  // the secret's random part, made here (off the writer)
  std::optional<std::string> totp_code;
  std::string remote_address;
};

Result<std::vector<std::string>> StringArray(const json& body, std::string_view field,
                                             std::size_t max_items, std::size_t max_bytes) {
  auto it = body.find(field);
  std::vector<std::string> out;
  if (it == body.end() || it->is_null()) return out;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("field '" + std::string(field) + "' " + why)
        .WithField(std::string(field));
  };
  if (!it->is_array()) return bad("must be an array of strings");
  if (it->size() > max_items) {
    return bad("holds at most " + std::to_string(max_items) + " entries");
  }
  for (const auto& item : *it) {
    if (!item.is_string()) return bad("must be an array of strings");
    std::string s = item.get<std::string>();
    if (s.size() > max_bytes) return bad("has an entry longer than " + std::to_string(max_bytes));
    out.push_back(std::move(s));
  }
  return out;
}

Result<NewKey> ParseNewKey(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(
      json body, ParseJsonObject(r, {"name", "scopes", "spend_cap_per_day", "spend_cap_currency",
                                     "expires_at", "allowed_cidrs", "totp_code"}));
  NewKey out;
  GPUHUB_ASSIGN_OR_RETURN(out.spec.name, RequiredString(body, "name"));
  if (!body.contains("scopes")) {
    return Status::InvalidArgument("field 'scopes' is required").WithField("scopes");
  }
  GPUHUB_ASSIGN_OR_RETURN(auto scopes, StringArray(body, "scopes", 16, 32));
  if (scopes.empty()) {
    return Status::InvalidArgument("field 'scopes' must name at least one scope")
        .WithField("scopes");
  }
  for (const auto& name : scopes) {
    GPUHUB_ASSIGN_OR_RETURN(engine::ApiScope scope, engine::ParseApiScope(name));
    out.spec.scopes |= scope;
  }
  auto cap = body.find("spend_cap_per_day");
  if (cap != body.end() && !cap->is_null()) {
    auto micros = cap->is_string() ? ParseDecimalMicros(cap->get<std::string>(), 6)
                                   : Result<std::int64_t>(Status::InvalidArgument("a JSON number"));
    if (!micros.ok()) {
      return Status::InvalidArgument(
                 "field 'spend_cap_per_day' must be a decimal money string such as \"25.00\" "
                 "(at most 6 decimals)")
          .WithField("spend_cap_per_day");
    }
    out.spec.spend_cap_micros = *micros;
  }
  GPUHUB_ASSIGN_OR_RETURN(auto currency, OptionalString(body, "spend_cap_currency"));
  if (currency) {
    auto c = ParseCurrency(*currency);
    if (!c.ok()) {
      return Status::InvalidArgument("field 'spend_cap_currency' must be USD, EUR or GBP")
          .WithField("spend_cap_currency");
    }
    if (!out.spec.spend_cap_micros) {
      return Status::InvalidArgument("field 'spend_cap_currency' goes with spend_cap_per_day")
          .WithField("spend_cap_currency");
    }
    out.spec.cap_currency = *c;
  }
  GPUHUB_ASSIGN_OR_RETURN(auto expires, OptionalString(body, "expires_at"));
  if (expires) {
    auto at = ParseTimestamp(*expires);
    if (!at.ok()) {
      return Status::InvalidArgument(
                 "field 'expires_at' must be an RFC 3339 time such as 2027-03-01T00:00:00Z")
          .WithField("expires_at");
    }
    out.spec.expires_at = *at;
  }
  GPUHUB_ASSIGN_OR_RETURN(out.spec.networks,
                          StringArray(body, "allowed_cidrs", engine::kMaxApiKeyNetworks,
                                      engine::kMaxApiKeyNetworkBytes));
  for (const auto& network : out.spec.networks) {
    auto parsed = AddressFilter::Parse({network});
    if (!parsed.ok()) {
      return Status::InvalidArgument("field 'allowed_cidrs': " + parsed.status().message())
          .WithField("allowed_cidrs");
    }
  }
  GPUHUB_ASSIGN_OR_RETURN(out.totp_code, TotpCodeField(body));
  out.remote_address = CallerOf(r).remote_address;
  out.random_hex = engine::RandomHex(32);
  return out;
}

}  // namespace

void RegisterApiKeyRoutes(Router& router, ApiContext& api) {
  using engine::Txn;
  using engine::User;
  router.Add("GET", "/v1/api-keys",
             Authenticated<Empty>(api, 0, NoInput,
                                  [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                                    json list = json::array();
                                    for (const auto& k : engine::ListApiKeys(txn.state, me.id)) {
                                      list.push_back(KeyJson(k, txn.now));
                                    }
                                    return Reply{200, {{"api_keys", list}}};
                                  }));
  router.Add("GET", "/v1/api-keys/{id}",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdParam(r, "API key"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   const engine::ApiKey* k = engine::FindApiKey(txn.state, me.id, id);
                   if (!k)
                     return Status::NotFound("no API key " + std::to_string(id) + " of yours");
                   return Reply{200, KeyJson(*k, txn.now)};
                 }));
  // Not idempotent: the answer holds the secret, which is never stored for a replay.
  router.Add("POST", "/v1/api-keys",
             Authenticated<NewKey>(
                 api, 0, ParseNewKey,
                 [&api](Txn& txn, const User& me, const NewKey& in) -> Result<Reply> {
                   std::string secret =
                       engine::ApiKeySecret(engine::NextApiKeyId(txn.state), in.random_hex);
                   // A key that can move money out needs a fresh code. Verifying changes nothing;
                   // the code is spent only once the key exists.
                   engine::TotpUse use;
                   if (in.spec.scopes & (engine::kScopeWalletSpend | engine::kScopePayouts)) {
                     GPUHUB_ASSIGN_OR_RETURN(
                         use, VerifyFreshCode(api, txn, me, in.remote_address, in.totp_code,
                                              engine::TotpPurpose::kFreshCode));
                   }
                   GPUHUB_ASSIGN_OR_RETURN(
                       engine::ApiKey key,
                       engine::CreateApiKey(txn, me, in.spec, engine::HashToken(secret)));
                   engine::UseTotp(txn, use);
                   // Never the secret, nor its hash: the id, name, scopes and expiry.
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kApiKeyCreated,
                                       {{"api_key_id", key.id},
                                        {"name", key.name},
                                        {"scopes", engine::ApiScopeNames(key.scopes)},
                                        {"expires_at", FormatTimestamp(key.expires_at)}});
                   json body = KeyJson(key, txn.now);
                   body["secret"] = secret;
                   return Reply{201, body, /*replayable=*/false};
                 },
                 /*idempotent=*/false));
  router.Add("DELETE", "/v1/api-keys/{id}",
             Authenticated<std::int64_t>(
                 api, 0, [](const Request& r) { return IdOnly(r, "API key"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   const engine::ApiKey* k = engine::FindApiKey(txn.state, me.id, id);
                   const std::string name = k ? k->name : "";
                   GPUHUB_RETURN_IF_ERROR(engine::RevokeApiKey(txn, me.id, id));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kApiKeyRevoked,
                                       {{"api_key_id", id}, {"name", name}});
                   return Reply{204, nullptr};
                 }));
}

}  // namespace gpuhub::http
