#include "engine/api_keys.h"

#include <algorithm>

#include "core/strings.h"
#include "engine/accounts.h"
#include "engine/limits.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

struct ScopeName {
  ApiScope scope;
  std::string_view name;
};
constexpr ScopeName kScopeNames[] = {
    {kScopeRead, "read"},
    {kScopeMarket, "market"},
    {kScopeRentals, "rentals"},
    {kScopeStorage, "storage"},
    {kScopeWalletSpend, "wallet-spend"},
    {kScopePayouts, "payouts"},
    {kScopeAdmin, "admin"},
};

std::int64_t DayOf(TimestampMicros t) {
  return t >= 0 ? t / kMicrosPerDay : (t - kMicrosPerDay + 1) / kMicrosPerDay;
}

bool Printable(std::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::string JoinText(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ",") + p;
  return out;
}

void WriteKey(Txn& txn, const ApiKey& k) {
  txn.writes.Upsert("api_keys", {{"id", k.id},
                                 {"user_id", k.user_id},
                                 {"name", k.name},
                                 {"secret_hash", k.secret_hash},
                                 {"scopes", JoinText(ApiScopeNames(k.scopes))},
                                 {"spend_cap_micros", k.spend_cap_micros.value_or(-1)},
                                 {"cap_currency", std::string(CurrencyCode(k.cap_currency))},
                                 {"networks", JoinText(k.networks)},
                                 {"created_at_us", k.created_at},
                                 {"expires_at_us", k.expires_at},
                                 {"spend_day", k.spend_day},
                                 {"spent_micros", k.spent_micros},
                                 {"first_used_at_us", k.first_used_at}});
}

}  // namespace

Result<ApiScope> ParseApiScope(std::string_view name) {
  for (const auto& s : kScopeNames) {
    if (s.name == name) return s.scope;
  }
  return Status::InvalidArgument("unknown scope '" + std::string(name.substr(0, 32)) +
                                 "' (read, market, rentals, storage, wallet-spend, payouts, admin)")
      .WithField("scopes");
}

std::vector<std::string> ApiScopeNames(std::uint32_t scopes) {
  std::vector<std::string> out;
  for (const auto& s : kScopeNames) {
    if (scopes & s.scope) out.emplace_back(s.name);
  }
  return out;
}

std::uint32_t ScopesAllowedFor(const User& user) {
  std::uint32_t allowed =
      kScopeRead | kScopeMarket | kScopeRentals | kScopeStorage | kScopeWalletSpend;
  if (user.Has(kRoleProvider)) allowed |= kScopePayouts;
  if (user.Has(kRoleAdmin)) allowed |= kScopeAdmin;
  return allowed;
}

std::string ApiKeySecret(std::int64_t id, std::string_view random_hex) {
  return std::string(kApiKeyPrefix) + std::to_string(id) + "_" + std::string(random_hex);
}

std::int64_t ApiKey::SpentOn(TimestampMicros now) const {
  return spend_day == DayOf(now) ? spent_micros : 0;
}

std::int64_t NextApiKeyId(const State& state) { return state.api_keys->next_id; }

Result<ApiKey> CreateApiKey(Txn& txn, const User& user, const ApiKeySpec& spec,
                            const std::string& secret_hash) {
  ApiKeysState& state = *txn.state.api_keys;
  if (spec.name.empty() || spec.name.size() > kMaxApiKeyNameBytes || !Printable(spec.name)) {
    return Status::InvalidArgument("name must be 1 to " + std::to_string(kMaxApiKeyNameBytes) +
                                   " printable characters")
        .WithField("name");
  }
  if (spec.scopes == 0 || (spec.scopes & ~kAllApiScopes) != 0) {
    return Status::InvalidArgument("scopes must name at least one scope").WithField("scopes");
  }
  if (std::uint32_t refused = spec.scopes & ~ScopesAllowedFor(user)) {
    return Status::PermissionDenied("this account cannot give a key the scope '" +
                                    ApiScopeNames(refused).front() +
                                    "' (payouts needs the provider role, admin the admin role)")
        .WithField("scopes");
  }
  if (spec.spend_cap_micros && !(spec.scopes & kScopeWalletSpend)) {
    return Status::InvalidArgument(
               "spend_cap_per_day limits the wallet-spend scope, which scopes does not name")
        .WithField("spend_cap_per_day");
  }
  TimestampMicros expires_at = spec.expires_at.value_or(txn.now + kDefaultApiKeyLifetimeMicros);
  if (expires_at <= txn.now) {
    return Status::InvalidArgument("expires_at must be in the future").WithField("expires_at");
  }
  if (expires_at - txn.now > kMaxApiKeyLifetimeMicros) {
    return Status::InvalidArgument("expires_at must be at most 365 days from now")
        .WithField("expires_at");
  }
  if (spec.networks.size() > kMaxApiKeyNetworks) {
    return Status::InvalidArgument("allowed_networks holds at most " +
                                   std::to_string(kMaxApiKeyNetworks) + " networks")
        .WithField("allowed_networks");
  }
  auto& mine = state.by_user[user.id];
  if (mine.size() >= kMaxApiKeysPerUser) {
    return Status::ResourceExhausted("an account holds at most " +
                                     std::to_string(kMaxApiKeysPerUser) +
                                     " API keys (expired ones included): revoke one first");
  }
  if (state.by_hash.count(secret_hash)) return Status::Internal("API key secret collision");
  ApiKey k;
  k.id = state.next_id++;
  k.user_id = user.id;
  k.name = spec.name;
  k.secret_hash = secret_hash;
  k.scopes = spec.scopes;
  k.spend_cap_micros = spec.spend_cap_micros;
  k.cap_currency = spec.cap_currency;
  k.networks = spec.networks;
  k.created_at = txn.now;
  k.expires_at = expires_at;
  k.spend_day = DayOf(txn.now);
  mine.insert(k.id);
  state.by_hash[k.secret_hash] = k.id;
  state.keys.emplace(k.id, k);
  WriteKey(txn, k);
  return k;
}

Status RevokeApiKey(Txn& txn, std::int64_t user_id, std::int64_t key_id) {
  ApiKeysState& state = *txn.state.api_keys;
  auto it = state.keys.find(key_id);
  if (it == state.keys.end() || it->second.user_id != user_id) {
    return Status::NotFound("no API key " + std::to_string(key_id) + " of yours");
  }
  state.by_hash.erase(it->second.secret_hash);
  auto mine = state.by_user.find(user_id);
  if (mine != state.by_user.end()) {
    mine->second.erase(key_id);
    if (mine->second.empty()) state.by_user.erase(mine);
  }
  state.keys.erase(it);
  txn.writes.Delete("api_keys", {{"id", key_id}});
  return Status::Ok();
}

std::vector<ApiKey> ListApiKeys(const State& state, std::int64_t user_id) {
  std::vector<ApiKey> out;
  auto it = state.api_keys->by_user.find(user_id);
  if (it == state.api_keys->by_user.end()) return out;
  for (std::int64_t id : it->second) out.push_back(state.api_keys->keys.at(id));
  return out;
}

const ApiKey* FindApiKey(const State& state, std::int64_t user_id, std::int64_t key_id) {
  auto it = state.api_keys->keys.find(key_id);
  if (it == state.api_keys->keys.end() || it->second.user_id != user_id) return nullptr;
  return &it->second;
}

Result<ApiKeyCaller> AuthenticateApiKey(const Txn& txn, const std::string& secret_hash) {
  const ApiKeysState& state = *txn.state.api_keys;
  auto it = state.by_hash.find(secret_hash);
  const User* user = nullptr;
  if (it != state.by_hash.end()) user = FindUser(txn.state, state.keys.at(it->second).user_id);
  if (!user) {
    return Status::Unauthenticated("the API key is unknown or was revoked");
  }
  const ApiKey& key = state.keys.at(it->second);
  if (key.expires_at <= txn.now) {
    return Status::Unauthenticated("API key " + std::to_string(key.id) + " expired at " +
                                   FormatTimestamp(key.expires_at) + "; make a new one");
  }
  return ApiKeyCaller{*user, key};
}

ApiKeySpend::ApiKeySpend(Txn& txn, const ApiKey& key) : txn_(txn), key_id_(key.id) {
  ledger::Ledger::SpendGuard guard;
  guard.owner_id = key.user_id;
  guard.currency = key.cap_currency;
  if (!key.Has(kScopeWalletSpend)) {
    guard.limit_micros = 0;
    guard.refusal = "API key " + std::to_string(key.id) +
                    " has no wallet-spend scope: it cannot move money out of the wallets";
  } else if (key.spend_cap_micros) {
    std::int64_t spent = key.SpentOn(txn.now);
    guard.limit_micros = *key.spend_cap_micros;
    guard.spent_micros = std::min(spent, *key.spend_cap_micros);
    guard.refusal = "API key " + std::to_string(key.id) + " may spend at most " +
                    FormatMicros(*key.spend_cap_micros) + " " +
                    std::string(CurrencyCode(key.cap_currency)) + " a day (UTC), from the " +
                    std::string(CurrencyCode(key.cap_currency)) + " wallet only; " +
                    FormatMicros(spent) + " spent today";
  } else {
    return;  // wallet-spend without a cap: the wallet's own balance is the limit
  }
  txn.state.wallets->ledger.SetSpendGuard(std::move(guard));
  guarded_ = true;
}

ApiKeySpend::~ApiKeySpend() {
  if (guarded_) txn_.state.wallets->ledger.SetSpendGuard(std::nullopt);
}

void ApiKeySpend::Commit() {
  if (!guarded_) return;
  const auto& guard = txn_.state.wallets->ledger.spend_guard();
  auto it = txn_.state.api_keys->keys.find(key_id_);
  if (!guard || it == txn_.state.api_keys->keys.end() || !it->second.spend_cap_micros) return;
  ApiKey& key = it->second;
  std::int64_t before = std::min(key.SpentOn(txn_.now), *key.spend_cap_micros);
  if (guard->spent_micros == before) return;
  key.spend_day = DayOf(txn_.now);
  key.spent_micros = guard->spent_micros;
  WriteKey(txn_, key);
}

Status LoadApiKeys(store::Store& store, ApiKeysState& state) {
  return store.Scan(
      "api_keys",
      {"id", "user_id", "name", "secret_hash", "scopes", "spend_cap_micros", "cap_currency",
       "networks", "created_at_us", "expires_at_us", "spend_day", "spent_micros",
       "first_used_at_us"},
      "id", [&](const store::Row& row) -> Status {
        ApiKey k;
        GPUHUB_ASSIGN_OR_RETURN(k.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(k.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(k.name, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(k.secret_hash, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(std::string scopes, row.Text(4));
        for (const auto& name : Split(scopes, ',')) {
          if (name.empty()) continue;
          GPUHUB_ASSIGN_OR_RETURN(ApiScope s, ParseApiScope(name));
          k.scopes |= s;
        }
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t cap, row.Int(5));
        if (cap >= 0) k.spend_cap_micros = cap;
        GPUHUB_ASSIGN_OR_RETURN(std::string currency, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(k.cap_currency, ParseCurrency(currency));
        GPUHUB_ASSIGN_OR_RETURN(std::string networks, row.Text(7));
        for (const auto& n : Split(networks, ',')) {
          if (!n.empty()) k.networks.push_back(n);
        }
        GPUHUB_ASSIGN_OR_RETURN(k.created_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(k.expires_at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(k.spend_day, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(k.spent_micros, row.Int(11));
        GPUHUB_ASSIGN_OR_RETURN(k.first_used_at, row.Int(12));
        state.by_user[k.user_id].insert(k.id);
        state.by_hash[k.secret_hash] = k.id;
        state.next_id = std::max(state.next_id, k.id + 1);
        state.keys.emplace(k.id, std::move(k));
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
