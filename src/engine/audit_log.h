// The audit log: what happened to an account's security and money, by whom, from where.
//
// - Append-only. An event is one row of `audit_events` (migration 25), written with
//   WriteBatch::Insert in the same batch as the action it records, so it commits in the same
//   transaction: an acknowledged action's event survives any crash, and an action that failed (its
//   rows dropped) leaves no event. Nothing in the code updates or deletes a row; there is no
//   pruning (kAuditRetentionDays is the floor any later pruning must keep).
// - Not kept in memory: the writer holds only the next id (max(id) + 1 at load). Pages are read
//   from the store on the history readers (GET /v1/audit-log), newest first, by id cursor.
// - Ids increase with each event (a failed command may leave a gap, never a repeat: the id is
//   taken before the rows can be dropped, and a reload starts after the largest committed one).
// - Never a secret: details are a few ids, names and amounts. RecordAudit drops any member whose
//   name says it holds a secret (password, secret, token, code, ...) and logs the programmer error;
//   strings are cut to kMaxAuditDetailValueBytes, the detail to kMaxAuditDetailBytes, the user
//   agent to kMaxAuditUserAgentBytes, all to printable ASCII where they come from the client.
// - The actor: "user:<id>" (a signed-in session), "api_key:<id>" (a request with that key),
//   "admin:<id>" (an admin's session on an admin route, acting on someone else's account),
//   "anonymous" (a failed sign-in), "system" (the engine's own work; no origin).
// - account_id 0: an event of no account (a sign-in failure for a username that does not exist,
//   a platform-wide admin change such as a tax rate): only admins see those.
//
// The functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "engine/engine.h"
#include "store/store.h"

namespace gpuhub::engine {

enum class AuditKind {
  kSignIn,
  kSignInFailed,
  kSignOut,
  kPasswordChanged,
  kTotpEnabled,
  kTotpDisabled,
  kRecoveryCodesRegenerated,
  kPayoutDestinationAdded,
  kPayoutDestinationRemoved,
  kApiKeyCreated,
  kApiKeyFirstUsed,
  kApiKeyRevoked,
  kSshKeyAdded,
  kSshKeyRemoved,
  kWebhookChanged,
  kBillingProfileChanged,
  kPayoutRequested,
  kRoleChanged,
  kAdminCredit,
  kAdminPaymentDecision,
  kAdminTaxRateChanged,
  kQuoteRequested,
  kQuoteWithdrawn,
  kQuoteAnswered,
};
// "sign_in", "sign_in_failed", ... (the API's and the database's name).
std::string_view AuditKindName(AuditKind kind);
Result<AuditKind> ParseAuditKind(std::string_view name);
// Every kind, in declaration order (tests, docs).
std::vector<AuditKind> AllAuditKinds();

// Who asked and from where; the HTTP layer builds it from the request (MakeAuditOrigin cleans
// the client's texts) and points Txn::origin at it for the length of an action.
struct AuditOrigin {
  std::string actor;  // "user:12", "api_key:3", "admin:1", "anonymous"
  std::string remote_address;
  std::string user_agent;
  std::string request_id;
};
AuditOrigin MakeAuditOrigin(std::string actor, std::string_view remote_address,
                            std::string_view user_agent, std::string_view request_id);

// Points txn.origin at `origin` until destroyed (then back to what it was).
class AuditOriginScope {
 public:
  AuditOriginScope(Txn& txn, const AuditOrigin& origin) : txn_(txn), saved_(txn.origin) {
    txn.origin = &origin;
  }
  ~AuditOriginScope() { txn_.origin = saved_; }
  AuditOriginScope(const AuditOriginScope&) = delete;
  AuditOriginScope& operator=(const AuditOriginScope&) = delete;

 private:
  Txn& txn_;
  const AuditOrigin* saved_;
};

struct AuditEvent {
  std::int64_t id = 0;
  TimestampMicros at = 0;
  std::int64_t account_id = 0;  // 0: no account (see the file comment)
  std::string actor;
  AuditKind kind = AuditKind::kSignIn;
  std::string remote_address;
  std::string user_agent;
  std::string request_id;
  std::string detail;  // a JSON object, at most kMaxAuditDetailBytes
};

// The writer's part of the log: only the next id.
struct AuditState {
  std::int64_t next_id = 1;
};

// Records an event of `account_id` at txn.now, from txn.origin (or "system"), with `detail` (a
// JSON object of a few members; see the file comment for what is dropped or cut). Returns its id.
// The one line for a route: engine::RecordAudit(txn, me.id, engine::AuditKind::kTotpEnabled);
std::int64_t RecordAudit(Txn& txn, std::int64_t account_id, AuditKind kind,
                         const nlohmann::ordered_json& detail = nlohmann::ordered_json::object());
// The same with an explicit origin (a command run outside an authenticated action: sign-in).
std::int64_t RecordAudit(Txn& txn, const AuditOrigin& origin, std::int64_t account_id,
                         AuditKind kind,
                         const nlohmann::ordered_json& detail = nlohmann::ordered_json::object());
// The detail as RecordAudit stores it (exposed for its unit test).
std::string AuditDetailText(const nlohmann::ordered_json& detail);

// An API key's first authenticated request: records kApiKeyFirstUsed once (the key's
// first_used_at is set in memory and in its row, in the same batch), nothing after that, so a
// key's later requests write nothing. No-op for an unknown key.
void NoteApiKeyUse(Txn& txn, std::int64_t key_id);

// A page of the log, newest first: the events of `account_id` (nullopt: every account, for
// admins) with id < `before` (0: from the newest), at most `limit`. Served by the index
// audit_events_by_account (account_id, id), or the primary key for all accounts.
store::Select AuditPageSelect(std::optional<std::int64_t> account_id, std::int64_t before,
                              std::size_t limit);
Result<AuditEvent> AuditEventFromRow(const store::Row& row);

Status LoadAuditLog(store::Store& store, AuditState& state);

}  // namespace gpuhub::engine
