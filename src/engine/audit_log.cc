#include "engine/audit_log.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "core/strings.h"
#include "engine/api_keys.h"
#include "engine/limits.h"
#include "engine/state.h"

namespace gpuhub::engine {
namespace {

struct KindName {
  AuditKind kind;
  std::string_view name;
};
constexpr KindName kKindNames[] = {
    {AuditKind::kSignIn, "sign_in"},
    {AuditKind::kSignInFailed, "sign_in_failed"},
    {AuditKind::kSignOut, "sign_out"},
    {AuditKind::kPasswordChanged, "password_changed"},
    {AuditKind::kTotpEnabled, "totp_enabled"},
    {AuditKind::kTotpDisabled, "totp_disabled"},
    {AuditKind::kRecoveryCodesRegenerated, "recovery_codes_regenerated"},
    {AuditKind::kPayoutDestinationAdded, "payout_destination_added"},
    {AuditKind::kPayoutDestinationRemoved, "payout_destination_removed"},
    {AuditKind::kApiKeyCreated, "api_key_created"},
    {AuditKind::kApiKeyFirstUsed, "api_key_first_used"},
    {AuditKind::kApiKeyRevoked, "api_key_revoked"},
    {AuditKind::kSshKeyAdded, "ssh_key_added"},
    {AuditKind::kSshKeyRemoved, "ssh_key_removed"},
    {AuditKind::kWebhookChanged, "webhook_url_changed"},
    {AuditKind::kBillingProfileChanged, "billing_profile_changed"},
    {AuditKind::kPayoutRequested, "payout_requested"},
    {AuditKind::kRoleChanged, "role_changed"},
    {AuditKind::kAdminCredit, "admin_credit"},
    {AuditKind::kAdminPaymentDecision, "admin_payment_decision"},
    {AuditKind::kAdminTaxRateChanged, "admin_tax_rate_changed"},
    {AuditKind::kQuoteRequested, "quote_requested"},
    {AuditKind::kQuoteWithdrawn, "quote_withdrawn"},
    {AuditKind::kQuoteAnswered, "quote_answered"},
};

// Member names that say a value is a secret: a detail never carries one (defence in depth: the
// callers pass ids and names only). Matched as substrings of the lower-cased name.
constexpr std::string_view kSecretWords[] = {"password", "secret", "token",        "code",
                                             "otp",      "hash",   "key_material", "private"};

bool SecretName(const std::string& name) {
  std::string lower = ToLower(name);
  for (auto word : kSecretWords) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return false;
}

// Printable ASCII only (a client's text: PostgreSQL refuses invalid UTF-8 and NUL in TEXT), cut.
std::string CleanText(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  for (char c : text) {
    if (out.size() >= max_bytes) break;
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

constexpr const char* kColumns[] = {"id",         "at_us",      "account_id",
                                    "actor",      "kind",       "remote_address",
                                    "user_agent", "request_id", "detail"};

std::vector<std::string> Columns() { return {std::begin(kColumns), std::end(kColumns)}; }

}  // namespace

std::string_view AuditKindName(AuditKind kind) {
  for (const auto& k : kKindNames) {
    if (k.kind == kind) return k.name;
  }
  return "unknown";
}

Result<AuditKind> ParseAuditKind(std::string_view name) {
  for (const auto& k : kKindNames) {
    if (k.name == name) return k.kind;
  }
  return Status::InvalidArgument("unknown audit event kind '" + std::string(name.substr(0, 40)) +
                                 "'")
      .WithField("kind");
}

std::vector<AuditKind> AllAuditKinds() {
  std::vector<AuditKind> out;
  for (const auto& k : kKindNames) out.push_back(k.kind);
  return out;
}

AuditOrigin MakeAuditOrigin(std::string actor, std::string_view remote_address,
                            std::string_view user_agent, std::string_view request_id) {
  AuditOrigin o;
  o.actor = CleanText(actor, kMaxAuditShortTextBytes);
  o.remote_address = CleanText(remote_address, kMaxAuditShortTextBytes);
  o.user_agent = CleanText(user_agent, kMaxAuditUserAgentBytes);
  o.request_id = CleanText(request_id, kMaxAuditShortTextBytes);
  return o;
}

std::string AuditDetailText(const nlohmann::ordered_json& detail) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!detail.is_object()) return "{}";
  for (const auto& [name, value] : detail.items()) {
    if (out.size() >= kMaxAuditDetailFields) {
      out["truncated"] = true;
      break;
    }
    if (SecretName(name)) {
      // A programmer error, never the client's: say so loudly, store nothing of it.
      spdlog::error("event=audit_detail_secret_dropped member={}", CleanText(name, 40));
      continue;
    }
    std::string key = CleanText(name, 40);
    if (value.is_string()) {
      // Cut by bytes; a cut UTF-8 sequence is replaced when dumped (error_handler_t::replace).
      out[key] = value.get<std::string>().substr(0, kMaxAuditDetailValueBytes);
    } else if (value.is_number_integer() || value.is_boolean() || value.is_null()) {
      out[key] = value;
    } else if (value.is_array()) {
      // A short list of names (scopes, roles): strings and integers only, each cut.
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (const auto& item : value) {
        if (list.size() >= kMaxAuditDetailFields) break;
        if (item.is_string()) list.push_back(item.get<std::string>().substr(0, 40));
        if (item.is_number_integer()) list.push_back(item);
      }
      out[key] = std::move(list);
    }
    // Objects and floating-point numbers are not detail material: dropped.
  }
  std::string text =
      out.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace);
  if (text.size() > kMaxAuditDetailBytes) return R"({"truncated":true})";
  return text;
}

std::int64_t RecordAudit(Txn& txn, const AuditOrigin& origin, std::int64_t account_id,
                         AuditKind kind, const nlohmann::ordered_json& detail) {
  AuditState& state = *txn.state.audit;
  const std::int64_t id = state.next_id++;
  txn.writes.Insert("audit_events", {{"id", id},
                                     {"at_us", txn.now},
                                     {"account_id", account_id},
                                     {"actor", origin.actor.empty() ? "system" : origin.actor},
                                     {"kind", std::string(AuditKindName(kind))},
                                     {"remote_address", origin.remote_address},
                                     {"user_agent", origin.user_agent},
                                     {"request_id", origin.request_id},
                                     {"detail", AuditDetailText(detail)}});
  return id;
}

std::int64_t RecordAudit(Txn& txn, std::int64_t account_id, AuditKind kind,
                         const nlohmann::ordered_json& detail) {
  static const AuditOrigin kSystem{"system", "", "", ""};
  return RecordAudit(txn, txn.origin != nullptr ? *txn.origin : kSystem, account_id, kind, detail);
}

void NoteApiKeyUse(Txn& txn, std::int64_t key_id) {
  auto it = txn.state.api_keys->keys.find(key_id);
  if (it == txn.state.api_keys->keys.end() || it->second.first_used_at != 0) return;
  ApiKey& key = it->second;
  key.first_used_at = txn.now;
  // Only this column: a later ApiKeySpend::Commit writes the whole row, which carries it too.
  txn.writes.Update("api_keys", {{"id", key.id}, {"first_used_at_us", key.first_used_at}});
  RecordAudit(txn, key.user_id, AuditKind::kApiKeyFirstUsed,
              {{"api_key_id", key.id}, {"name", key.name}});
}

store::Select AuditPageSelect(std::optional<std::int64_t> account_id, std::int64_t before,
                              std::size_t limit) {
  using Op = store::Condition::Op;
  store::Select select;
  select.table = "audit_events";
  select.columns = Columns();
  if (account_id) select.where.push_back({"account_id", Op::kEq, *account_id});
  if (before > 0) select.where.push_back({"id", Op::kLt, before});
  select.order_by = "id DESC";
  select.limit = limit;
  return select;
}

Result<AuditEvent> AuditEventFromRow(const store::Row& row) {
  AuditEvent e;
  GPUHUB_ASSIGN_OR_RETURN(e.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(e.at, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(e.account_id, row.Int(2));
  GPUHUB_ASSIGN_OR_RETURN(e.actor, row.Text(3));
  GPUHUB_ASSIGN_OR_RETURN(e.kind, row.Parsed(4, ParseAuditKind));
  GPUHUB_ASSIGN_OR_RETURN(e.remote_address, row.Text(5));
  GPUHUB_ASSIGN_OR_RETURN(e.user_agent, row.Text(6));
  GPUHUB_ASSIGN_OR_RETURN(e.request_id, row.Text(7));
  GPUHUB_ASSIGN_OR_RETURN(e.detail, row.Text(8));
  return e;
}

Status LoadAuditLog(store::Store& store, AuditState& state) {
  std::int64_t last = 0;
  GPUHUB_RETURN_IF_ERROR(
      store.Query({"audit_events", {"max(id)"}, {}, {}, "", 0}, [&](const store::Row& row) {
        GPUHUB_ASSIGN_OR_RETURN(last, row.Int(0));
        return Status::Ok();
      }));
  state.next_id = last + 1;
  return Status::Ok();
}

}  // namespace gpuhub::engine
