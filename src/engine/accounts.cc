#include "engine/accounts.h"

#include <sodium.h>

#include <mutex>

#include "core/strings.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

std::string Hex(const unsigned char* bytes, std::size_t n) {
  std::string out(n * 2, '\0');
  sodium_bin2hex(out.data(), out.size() + 1, bytes, n);
  return out;
}

void WriteSession(Txn& txn, const Session& s) {
  txn.writes.Upsert("sessions", {{"token_hash", s.token_hash},
                                 {"user_id", s.user_id},
                                 {"created_at_us", s.created_at},
                                 {"expires_at_us", s.expires_at}});
}

void WriteUser(Txn& txn, const User& u) {
  std::string roles;
  for (const auto& name : RoleNames(u.roles)) roles += (roles.empty() ? "" : ",") + name;
  txn.writes.Upsert("users", {{"id", u.id},
                              {"username", u.username},
                              {"password_hash", u.password_hash},
                              {"roles", roles},
                              {"created_at_us", u.created_at}});
}

void ForgetSession(AccountsState& accounts, const std::string& token_hash) {
  auto it = accounts.sessions.find(token_hash);
  if (it == accounts.sessions.end()) return;
  auto by_user = accounts.sessions_by_user.find(it->second.user_id);
  if (by_user != accounts.sessions_by_user.end()) {
    by_user->second.erase({it->second.created_at, token_hash});
    if (by_user->second.empty()) accounts.sessions_by_user.erase(by_user);
  }
  accounts.sessions_by_expiry.erase({it->second.expires_at, token_hash});
  accounts.sessions.erase(it);
}

void RememberSession(AccountsState& accounts, const Session& s) {
  accounts.sessions[s.token_hash] = s;
  accounts.sessions_by_user[s.user_id].insert({s.created_at, s.token_hash});
  accounts.sessions_by_expiry.insert({s.expires_at, s.token_hash});
}

}  // namespace

Result<std::string> CanonicalUsername(std::string_view username) {
  if (username.size() < kMinUsernameBytes || username.size() > kMaxUsernameBytes) {
    return Status::InvalidArgument("username must be " + std::to_string(kMinUsernameBytes) +
                                   " to " + std::to_string(kMaxUsernameBytes) + " characters long");
  }
  std::string out;
  out.reserve(username.size());
  for (char c : username) {
    char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    bool ok = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9') || lower == '_' ||
              lower == '.' || lower == '-';
    if (!ok) {
      return Status::InvalidArgument(
          "username may contain only letters a-z, digits, '_', '.' and '-'");
    }
    out.push_back(lower);
  }
  char first = out[0];
  if (!((first >= 'a' && first <= 'z') || (first >= '0' && first <= '9'))) {
    return Status::InvalidArgument("username must start with a letter or a digit");
  }
  return out;
}

namespace {
std::uint64_t Ops(const PasswordHashing& h) {
  return h.ops_limit ? h.ops_limit : crypto_pwhash_OPSLIMIT_INTERACTIVE;
}
std::uint64_t Mem(const PasswordHashing& h) {
  return h.mem_limit_bytes ? h.mem_limit_bytes : crypto_pwhash_MEMLIMIT_INTERACTIVE;
}
}  // namespace

Status ValidatePasswordHashing(const PasswordHashing& h) {
  if (Ops(h) < crypto_pwhash_OPSLIMIT_MIN || Ops(h) > crypto_pwhash_OPSLIMIT_MAX) {
    return Status::InvalidArgument("argon2 ops limit must be at least " +
                                   std::to_string(crypto_pwhash_OPSLIMIT_MIN));
  }
  if (Mem(h) < crypto_pwhash_MEMLIMIT_MIN || Mem(h) > (std::uint64_t{4} << 30)) {
    return Status::InvalidArgument("argon2 memory limit must be between " +
                                   std::to_string(crypto_pwhash_MEMLIMIT_MIN) + " bytes and 4 GiB");
  }
  return Status::Ok();
}

Result<std::string> HashPassword(std::string_view password, const PasswordHashing& hashing) {
  GPUHUB_RETURN_IF_ERROR(ValidatePasswordHashing(hashing));
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, password.data(), password.size(), Ops(hashing),
                            static_cast<std::size_t>(Mem(hashing)),
                            crypto_pwhash_ALG_ARGON2ID13) != 0) {
    return Status::Unavailable("out of memory while hashing the password; retry shortly");
  }
  return std::string(out);
}

bool VerifyPassword(const std::string& hash, std::string_view password) {
  return crypto_pwhash_str_verify(hash.c_str(), password.data(), password.size()) == 0;
}

const std::string& DummyPasswordHash(const PasswordHashing& hashing) {
  static std::once_flag once;
  static std::string hash;
  std::call_once(once, [&] {
    auto h = HashPassword("not a real password, only for timing", hashing);
    hash = h.ok() ? *h : std::string();
  });
  return hash;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(data.data()), data.size());
  return Hex(digest, sizeof digest);
}

std::string RandomHex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  randombytes_buf(buf.data(), buf.size());
  return Hex(buf.data(), buf.size());
}

std::string NewSessionToken() { return "ghs_" + RandomHex(32); }

std::string HashToken(std::string_view token) { return Sha256Hex(token); }

Result<Role> ParseRole(std::string_view name) {
  if (name == "customer") return kRoleCustomer;
  if (name == "provider") return kRoleProvider;
  if (name == "admin") return kRoleAdmin;
  return Status::InvalidArgument("unknown role '" + std::string(name.substr(0, 32)) +
                                 "' (customer, provider or admin)");
}

std::vector<std::string> RoleNames(std::uint32_t roles) {
  std::vector<std::string> out;
  if (roles & kRoleCustomer) out.push_back("customer");
  if (roles & kRoleProvider) out.push_back("provider");
  if (roles & kRoleAdmin) out.push_back("admin");
  return out;
}

Result<User> CreateUser(Txn& txn, const std::string& canonical_username, std::string password_hash,
                        std::uint32_t roles) {
  AccountsState& accounts = txn.state.accounts;
  if (accounts.user_by_name.count(canonical_username)) {
    return Status::Conflict("username '" + canonical_username + "' is taken");
  }
  if (accounts.users.size() >= kMaxUsers) return Status::ResourceExhausted("too many accounts");
  User user;
  user.id = accounts.next_user_id++;
  user.username = canonical_username;
  user.password_hash = std::move(password_hash);
  user.roles = roles;
  user.created_at = txn.now;
  accounts.users[user.id] = user;
  accounts.user_by_name[user.username] = user.id;
  WriteUser(txn, user);
  return user;
}

const User* FindUserByName(const State& state, const std::string& canonical_username) {
  auto it = state.accounts.user_by_name.find(canonical_username);
  if (it == state.accounts.user_by_name.end()) return nullptr;
  return FindUser(state, it->second);
}

const User* FindUser(const State& state, std::int64_t user_id) {
  auto it = state.accounts.users.find(user_id);
  return it == state.accounts.users.end() ? nullptr : &it->second;
}

Result<User> GrantRoles(Txn& txn, std::int64_t user_id, std::uint32_t roles) {
  auto it = txn.state.accounts.users.find(user_id);
  if (it == txn.state.accounts.users.end()) return Status::NotFound("no such user");
  if ((it->second.roles | roles) != it->second.roles) {
    it->second.roles |= roles;
    WriteUser(txn, it->second);
  }
  return it->second;
}

Result<Session> CreateSession(Txn& txn, std::int64_t user_id, const std::string& token_hash) {
  AccountsState& accounts = txn.state.accounts;
  if (!accounts.users.count(user_id)) return Status::NotFound("no such user");
  if (accounts.sessions.count(token_hash)) return Status::Internal("session token collision");
  auto& mine = accounts.sessions_by_user[user_id];
  // Logins in one microsecond (a manual clock, a burst) all had the same creation time, and the
  // token hash, which is random, decided which one was "oldest": the cap ended sessions at random
  // (issue 25). A user's sessions now get distinct, increasing creation times, so order by
  // (creation time, token hash) is login order, across restarts too (the time is stored).
  TimestampMicros created_at = txn.now;
  if (!mine.empty()) created_at = std::max(created_at, mine.rbegin()->first + 1);
  while (mine.size() >= kMaxSessionsPerUser) {
    std::string oldest = mine.begin()->second;
    ForgetSession(accounts, oldest);
    txn.writes.Delete("sessions", {{"token_hash", oldest}});
    if (!accounts.sessions_by_user.count(user_id)) break;
  }
  Session s{token_hash, user_id, created_at, txn.now + kSessionLifetimeMicros};
  RememberSession(accounts, s);
  WriteSession(txn, s);
  return s;
}

Result<User> Authenticate(const Txn& txn, const std::string& token_hash) {
  const AccountsState& accounts = txn.state.accounts;
  auto it = accounts.sessions.find(token_hash);
  if (it == accounts.sessions.end() || it->second.expires_at <= txn.now) {
    return Status::Unauthenticated("the bearer token is invalid or expired; log in again");
  }
  const User* user = FindUser(txn.state, it->second.user_id);
  if (!user) return Status::Unauthenticated("the bearer token is invalid or expired; log in again");
  return *user;
}

Status DeleteSession(Txn& txn, const std::string& token_hash) {
  if (!txn.state.accounts.sessions.count(token_hash)) return Status::NotFound("no such session");
  ForgetSession(txn.state.accounts, token_hash);
  txn.writes.Delete("sessions", {{"token_hash", token_hash}});
  return Status::Ok();
}

Result<std::size_t> ChangePassword(Txn& txn, std::int64_t user_id, const std::string& expected_hash,
                                   std::string new_hash, const std::string& keep_token_hash) {
  AccountsState& accounts = txn.state.accounts;
  auto it = accounts.users.find(user_id);
  if (it == accounts.users.end()) return Status::NotFound("no such user");
  if (it->second.password_hash != expected_hash) {
    return Status::Conflict("the password was changed meanwhile; try again")
        .WithField("current_password");
  }
  it->second.password_hash = std::move(new_hash);
  WriteUser(txn, it->second);
  std::vector<std::string> others;
  auto mine = accounts.sessions_by_user.find(user_id);
  if (mine != accounts.sessions_by_user.end()) {
    for (const auto& [created, hash] : mine->second) {
      if (hash != keep_token_hash) others.push_back(hash);
    }
  }
  for (const auto& hash : others) {
    ForgetSession(accounts, hash);
    txn.writes.Delete("sessions", {{"token_hash", hash}});
  }
  return others.size();
}

Status ExpireSessions(Txn& txn) {
  auto& by_expiry = txn.state.accounts.sessions_by_expiry;
  while (!by_expiry.empty() && by_expiry.begin()->first <= txn.now) {
    std::string hash = by_expiry.begin()->second;
    ForgetSession(txn.state.accounts, hash);
    txn.writes.Delete("sessions", {{"token_hash", hash}});
  }
  return Status::Ok();
}

Status LoadAccounts(store::Store& store, AccountsState& state) {
  GPUHUB_RETURN_IF_ERROR(store.Scan("users",
                                    {"id", "username", "password_hash", "roles", "created_at_us"},
                                    "id", [&](const store::Row& row) -> Status {
                                      User u;
                                      GPUHUB_ASSIGN_OR_RETURN(u.id, row.Int(0));
                                      GPUHUB_ASSIGN_OR_RETURN(u.username, row.Text(1));
                                      GPUHUB_ASSIGN_OR_RETURN(u.password_hash, row.Text(2));
                                      GPUHUB_ASSIGN_OR_RETURN(std::string roles, row.Text(3));
                                      for (const auto& name : Split(roles, ',')) {
                                        if (name.empty()) continue;
                                        GPUHUB_ASSIGN_OR_RETURN(Role r, ParseRole(name));
                                        u.roles |= r;
                                      }
                                      GPUHUB_ASSIGN_OR_RETURN(u.created_at, row.Int(4));
                                      state.user_by_name[u.username] = u.id;
                                      state.next_user_id = std::max(state.next_user_id, u.id + 1);
                                      state.users[u.id] = std::move(u);
                                      return Status::Ok();
                                    }));
  return store.Scan("sessions", {"token_hash", "user_id", "created_at_us", "expires_at_us"},
                    "token_hash", [&](const store::Row& row) -> Status {
                      Session s;
                      GPUHUB_ASSIGN_OR_RETURN(s.token_hash, row.Text(0));
                      GPUHUB_ASSIGN_OR_RETURN(s.user_id, row.Int(1));
                      GPUHUB_ASSIGN_OR_RETURN(s.created_at, row.Int(2));
                      GPUHUB_ASSIGN_OR_RETURN(s.expires_at, row.Int(3));
                      RememberSession(state, s);
                      return Status::Ok();
                    });
}

}  // namespace gpuhub::engine
