// API keys: long-lived bearer credentials for scripts (CI, schedulers), narrower than a session.
//
// - The secret is "ghk_<id>_<64 hex digits>": the prefix makes a leaked key recognisable (secret
//   scanners), the id lets logs name the key without its secret. It is returned once, at creation;
//   only HashToken(secret) (SHA-256, as sessions) is stored.
// - A key carries scopes (ApiScope); what each route needs is http/api_key_scopes.h's table. A key
//   may only carry scopes its account's roles allow (ScopesAllowedFor): payouts for providers,
//   admin for admins.
// - It expires (default kDefaultApiKeyLifetimeMicros, at most kMaxApiKeyLifetimeMicros) and may be
//   limited to client networks (CIDRs; checked by the HTTP layer, which owns address parsing).
// - Spending: a key without kScopeWalletSpend can move nothing out of the account's wallets; a key
//   with it and a daily cap can move at most the cap per UTC day, in the cap's currency only. The
//   count lives in the key (state and row), so it holds across restarts and takeovers. ApiKeySpend
//   enforces both through the ledger's SpendGuard around one command.
// - Revoking deletes the key: the next request with it is 401, on every node (standbys forward
//   authenticated requests to the writer, which holds the only copy of the state).
//
// The functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/money.h"
#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

enum ApiScope : std::uint32_t {
  kScopeRead = 1u << 0,         // every GET of the account's own data
  kScopeMarket = 1u << 1,       // the spot exchange: bids, asks, machines, leases
  kScopeRentals = 1u << 2,      // term rentals and the SSH keys they install
  kScopeStorage = 1u << 3,      // volumes and snapshots
  kScopeWalletSpend = 1u << 4,  // anything that moves money out of the wallets; conversions
  kScopePayouts = 1u << 5,      // providers' payouts
  kScopeAdmin = 1u << 6,        // /v1/admin/...
};
inline constexpr std::uint32_t kAllApiScopes = (1u << 7) - 1;

// "read", "market", "rentals", "storage", "wallet-spend", "payouts", "admin".
Result<ApiScope> ParseApiScope(std::string_view name);
std::vector<std::string> ApiScopeNames(std::uint32_t scopes);
// The scopes a key of this account may carry: payouts needs the provider role, admin the admin
// role; the rest any account.
std::uint32_t ScopesAllowedFor(const User& user);

// The secret prefix, and the key id a secret claims ("ghk_12_..." -> 12; 0 when it is not of
// that form). The claim is only a claim until the hash matches.
inline constexpr std::string_view kApiKeyPrefix = "ghk_";
// Inline: the HTTP server names the key in its log line without linking the engine.
inline std::int64_t ApiKeyIdOf(std::string_view secret) {
  if (!secret.starts_with(kApiKeyPrefix)) return 0;
  secret.remove_prefix(kApiKeyPrefix.size());
  std::size_t end = secret.find('_');
  if (end == 0 || end == std::string_view::npos || end > 18) return 0;
  std::int64_t id = 0;
  for (char c : secret.substr(0, end)) {
    if (c < '0' || c > '9') return 0;
    id = id * 10 + (c - '0');
  }
  return id;
}
// The secret of key `id` from 64 random hex digits (RandomHex(32), made off the writer thread).
std::string ApiKeySecret(std::int64_t id, std::string_view random_hex);

struct ApiKey {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  std::string name;
  std::string secret_hash;  // HashToken(secret)
  std::uint32_t scopes = 0;
  // Daily cap on what the key moves out of the wallets (micro-units of cap_currency); nullopt:
  // none (with kScopeWalletSpend: as the wallet allows).
  std::optional<std::int64_t> spend_cap_micros;
  Currency cap_currency = Currency::kUsd;
  std::vector<std::string> networks;  // CIDRs; empty: any address
  TimestampMicros created_at = 0;
  TimestampMicros expires_at = 0;
  // The UTC day (days since the epoch) of spent_micros; spending on a later day starts at zero.
  std::int64_t spend_day = 0;
  std::int64_t spent_micros = 0;
  // The first request it authenticated (0: never used); the audit log's api_key_first_used.
  TimestampMicros first_used_at = 0;

  bool Has(ApiScope scope) const { return (scopes & scope) != 0; }
  // What the key has spent on the day of `now`.
  std::int64_t SpentOn(TimestampMicros now) const;
};

struct ApiKeysState {
  std::map<std::int64_t, ApiKey> keys;
  std::unordered_map<std::string, std::int64_t> by_hash;
  std::map<std::int64_t, std::set<std::int64_t>> by_user;
  std::int64_t next_id = 1;
};

struct ApiKeySpec {
  std::string name;
  std::uint32_t scopes = 0;
  std::optional<std::int64_t> spend_cap_micros;
  Currency cap_currency = Currency::kUsd;
  std::vector<std::string> networks;          // already validated as CIDRs by the caller
  std::optional<TimestampMicros> expires_at;  // nullopt: now + kDefaultApiKeyLifetimeMicros
};

// The id the next key will get (the secret names it, so the caller makes the secret first).
std::int64_t NextApiKeyId(const State& state);
// Creates the key with id NextApiKeyId(). invalid_argument naming the field: name (1..
// kMaxApiKeyNameBytes printable), scopes (none), spend_cap_per_day (without wallet-spend),
// expires_at (not after now, or beyond kMaxApiKeyLifetimeMicros); permission_denied (field
// "scopes") for a scope the roles do not allow; resource_exhausted beyond kMaxApiKeysPerUser.
Result<ApiKey> CreateApiKey(Txn& txn, const User& user, const ApiKeySpec& spec,
                            const std::string& secret_hash);
// Deletes the key at once. not_found unless it exists and is the user's.
Status RevokeApiKey(Txn& txn, std::int64_t user_id, std::int64_t key_id);
// Oldest first.
std::vector<ApiKey> ListApiKeys(const State& state, std::int64_t user_id);
const ApiKey* FindApiKey(const State& state, std::int64_t user_id, std::int64_t key_id);
// The key with this secret hash and its user. unauthenticated when there is none (never made, or
// revoked) or it has expired (the message says when).
struct ApiKeyCaller {
  User user;
  ApiKey key;
};
Result<ApiKeyCaller> AuthenticateApiKey(const Txn& txn, const std::string& secret_hash);

// Limits what a command run for `key` moves out of its account's wallets (see the file comment):
// installs the ledger's SpendGuard (nothing without wallet-spend; the rest of the day's cap with
// one), and removes it when destroyed. Commit() after the command succeeded adds what it spent to
// the key's day (state and row); a command that failed spent nothing.
class ApiKeySpend {
 public:
  ApiKeySpend(Txn& txn, const ApiKey& key);
  ~ApiKeySpend();
  ApiKeySpend(const ApiKeySpend&) = delete;
  ApiKeySpend& operator=(const ApiKeySpend&) = delete;
  void Commit();

 private:
  Txn& txn_;
  std::int64_t key_id_;
  bool guarded_ = false;
};

Status LoadApiKeys(store::Store& store, ApiKeysState& state);

}  // namespace gpuhub::engine
