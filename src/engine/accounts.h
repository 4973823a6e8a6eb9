// Accounts and sessions: users with Argon2id password hashes, roles, and bearer sessions.
//
// Split by thread:
// - HashPassword / VerifyPassword are slow on purpose (Argon2id): the HTTP layer runs them on its
//   worker pool, never on the writer thread.
// - The functions taking a Txn are commands' building blocks and run on the writer thread.
//
// Secrets: the bearer token is returned once to the client and only its SHA-256 is stored; the
// password is hashed with a fresh salt (crypto_pwhash_str) and never stored or logged.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/account_rules.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

// "Alice_1" -> "alice_1"; invalid_argument (with the rule in the message) otherwise.
Result<std::string> CanonicalUsername(std::string_view username);
// ValidatePassword and the reserved usernames: engine/account_rules.h.

// Argon2id work factor. Defaults are libsodium's "interactive" limits (about 64 MiB and a few
// hundred milliseconds); tests lower them in the config file.
struct PasswordHashing {
  std::uint64_t ops_limit = 0;        // 0: crypto_pwhash_OPSLIMIT_INTERACTIVE
  std::uint64_t mem_limit_bytes = 0;  // 0: crypto_pwhash_MEMLIMIT_INTERACTIVE
};
// invalid_argument when the limits are below libsodium's minimums.
Status ValidatePasswordHashing(const PasswordHashing& hashing);
Result<std::string> HashPassword(std::string_view password, const PasswordHashing& hashing);
// Constant-time with respect to the password; false for a malformed hash.
bool VerifyPassword(const std::string& hash, std::string_view password);
// A hash to verify against when the username does not exist, so that the response time does not
// tell which usernames exist.
const std::string& DummyPasswordHash(const PasswordHashing& hashing);

// A new random bearer token ("ghs_" + 64 hex digits) and the hash stored for it.
std::string NewSessionToken();
std::string HashToken(std::string_view token);
// `bytes` random bytes (libsodium's CSPRNG) as lower-case hex: ids and secrets nobody can guess.
std::string RandomHex(std::size_t bytes);
// Lower-case hex SHA-256.
std::string Sha256Hex(std::string_view data);

// "customer", "provider", "admin".
Result<Role> ParseRole(std::string_view name);
std::vector<std::string> RoleNames(std::uint32_t roles);

// --- writer-thread building blocks ---

// conflict when the username is taken.
Result<User> CreateUser(Txn& txn, const std::string& canonical_username, std::string password_hash,
                        std::uint32_t roles);
const User* FindUserByName(const State& state, const std::string& canonical_username);
const User* FindUser(const State& state, std::int64_t user_id);
// Adds roles to a user (never removes).
Result<User> GrantRoles(Txn& txn, std::int64_t user_id, std::uint32_t roles);
// A user holds at most kMaxSessionsPerUser sessions: at the cap, a new one ends the oldest (by
// creation time, then token hash). Creation times of one user's sessions strictly increase (a
// login in the microsecond of the previous one, or after the clock stepped back, is dated one
// microsecond after it), so the oldest is the one logged in first. Expiry is txn.now + lifetime.
Result<Session> CreateSession(Txn& txn, std::int64_t user_id, const std::string& token_hash);
// unauthenticated when the token is unknown or expired.
Result<User> Authenticate(const Txn& txn, const std::string& token_hash);
// Deletes the session (logout). not_found when there is none.
Status DeleteSession(Txn& txn, const std::string& token_hash);
// Sets the user's password hash and ends every other session of the user (API keys stay: they
// are revoked one by one). `expected_hash` is the hash the caller verified the current password
// against: conflict when the password changed since. Returns how many sessions ended.
Result<std::size_t> ChangePassword(Txn& txn, std::int64_t user_id, const std::string& expected_hash,
                                   std::string new_hash, const std::string& keep_token_hash);
// Tick hook: drops expired sessions.
Status ExpireSessions(Txn& txn);

}  // namespace gpuhub::engine
