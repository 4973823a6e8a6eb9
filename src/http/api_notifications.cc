// Notifications and the account's webhook (engine/notifications.h).
//
//   GET    /v1/notifications[?limit=N&before=ID]   newest first; next_before pages back
//   PUT    /v1/accounts/me/webhook {"url", "rotate_secret"?}  sets the URL (http or https, no
//          credentials, no internal IP literal as the host unless [webhooks]
//          allow_private_addresses); the signing secret is made once and shown in the answer
//   GET    /v1/accounts/me/webhook                  the URL, the secret and the recent deliveries
//   DELETE /v1/accounts/me/webhook                  -> 204; pending deliveries are dropped
//
// Every notification of an account with a webhook is POSTed to it (http/webhook_sender.h) with
//   Content-Type: application/json
//   Gpuhub-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//   Gpuhub-Delivery: <delivery id>
// The body is {"id", "type", "created_at", "subject", "message", "data"}.
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "engine/limits.h"
#include "engine/notifications.h"
#include "http/api.h"
#include "http/internal_address.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }

json NotificationJson(const engine::Notification& n) {
  json data = json::parse(n.data_json, nullptr, false);
  return {{"id", n.id},
          {"type", n.kind},
          {"subject", n.subject},
          {"message", n.message},
          {"data", data.is_discarded() ? json::object() : data},
          {"created_at", FormatTimestamp(n.created_at)}};
}

json WebhookJson(const engine::AccountWebhook& w, const std::vector<engine::WebhookDelivery>& list) {
  json deliveries = json::array();
  for (const auto& d : list) {
    deliveries.push_back({{"id", d.id},
                          {"notification_id", d.notification_id},
                          {"status", engine::DeliveryStatusName(d.status)},
                          {"attempts", d.attempts},
                          {"next_attempt_at", d.status == engine::DeliveryStatus::kPending
                                                  ? Time(d.next_attempt_at)
                                                  : json(nullptr)},
                          {"last_status_code", d.last_status_code == 0 ? json(nullptr)
                                                                       : json(d.last_status_code)},
                          {"last_error", d.last_error.empty() ? json(nullptr) : json(d.last_error)},
                          {"created_at", FormatTimestamp(d.created_at)},
                          {"updated_at", FormatTimestamp(d.updated_at)}});
  }
  return {{"url", w.url},
          {"secret", w.secret},
          {"signature",
           {{"header", "Gpuhub-Signature"},
            {"format", "t=<unix seconds>,v1=<hex HMAC-SHA256(secret, \"<t>.<raw body>\")>"}}},
          {"created_at", FormatTimestamp(w.created_at)},
          {"updated_at", FormatTimestamp(w.updated_at)},
          {"deliveries", deliveries}};
}

struct WebhookInput {
  std::string url;
  bool rotate = false;
};

// A host that is an IP literal is judged here, so a customer hears at once that the URL can never
// be delivered to; a name is judged at each delivery, on what it resolves to then.
Status CheckLiteralHost(const std::string& url) {
  std::size_t start = url.find("://") + 3;  // ValidateWebhookUrl: http:// or https://
  std::string_view authority = std::string_view(url).substr(start);
  authority = authority.substr(0, authority.find_first_of("/?"));
  std::string_view host = authority;
  if (!authority.empty() && authority.front() == '[') {
    host = authority.substr(0, authority.find(']') + 1);  // "[::1]"
  } else {
    host = authority.substr(0, authority.find(':'));
  }
  std::optional<std::string> address = LiteralAddress(host);
  if (address && IsInternalAddress(*address)) {
    return Status::InvalidArgument("url must not point at an internal address (" + *address +
                                   "): loopback, private, link-local, shared, multicast and "
                                   "reserved networks, and the IPv6 forms that carry them, are "
                                   "refused")
        .WithField("url");
  }
  return Status::Ok();
}

Result<WebhookInput> ParseWebhook(const Request& r, bool allow_private_addresses) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"url", "rotate_secret"}));
  WebhookInput in;
  GPUHUB_ASSIGN_OR_RETURN(std::string url, RequiredString(body, "url"));
  GPUHUB_ASSIGN_OR_RETURN(in.url, engine::ValidateWebhookUrl(url));
  if (!allow_private_addresses) GPUHUB_RETURN_IF_ERROR(CheckLiteralHost(in.url));
  if (auto it = body.find("rotate_secret"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return Status::InvalidArgument("field 'rotate_secret' must be true or false")
          .WithField("rotate_secret");
    }
    in.rotate = it->get<bool>();
  }
  return in;
}

constexpr std::size_t kDeliveriesShown = 20;

// What the audit log keeps of a webhook URL: scheme and host[:port] only. Its user info, path and
// query may carry a credential (https://hooks.example/T0/B1/secret, ?token=...), never logged.
std::string WebhookOrigin(const std::string& url) {
  std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  std::size_t start = scheme + 3;
  std::size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? end : end - start);
  if (std::size_t at = authority.rfind('@'); at != std::string::npos) {
    authority = authority.substr(at + 1);
  }
  return url.substr(0, start) + authority;
}

}  // namespace

void RegisterNotificationRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/notifications?limit&before",
             Authenticated<std::pair<std::size_t, std::int64_t>>(
                 api, 0,
                 [](const Request& r) -> Result<std::pair<std::size_t, std::int64_t>> {
                   GPUHUB_ASSIGN_OR_RETURN(
                       std::size_t limit,
                       LimitQuery(r, "limit", engine::kDefaultNotificationsPageSize,
                                  engine::kMaxNotificationsPageSize));
                   std::int64_t before = 0;
                   if (auto it = r.query.find("before"); it != r.query.end()) {
                     auto v = ParseInt64(it->second, "before");
                     if (!v.ok() || *v < 1) {
                       return Status::InvalidArgument(
                           "before must be the next_before of a previous page");
                     }
                     before = *v;
                   }
                   return std::pair{limit, before};
                 },
                 [](Txn& txn, const User& me,
                    const std::pair<std::size_t, std::int64_t>& page) -> Result<Reply> {
                   auto list = engine::ListNotifications(txn.state, me.id, page.second, page.first);
                   json items = json::array();
                   for (const auto& n : list.items) items.push_back(NotificationJson(n));
                   return Reply{200,
                                {{"notifications", items},
                                 {"next_before", list.next_before == 0 ? json(nullptr)
                                                                       : json(list.next_before)}}};
                 }));
  router.Add("PUT", "/v1/accounts/me/webhook",
             Authenticated<WebhookInput>(
                 api, 0,
                 [allow = api.config.webhooks_allow_private_addresses](const Request& r) {
                   return ParseWebhook(r, allow);
                 },
                 [](Txn& txn, const User& me, const WebhookInput& in) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto hook,
                                           engine::SetWebhook(txn, me.id, in.url, in.rotate));
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kWebhookChanged,
                                       {{"action", "set"},
                                        {"url_origin", WebhookOrigin(in.url)},
                                        {"signing_rotated", in.rotate}});
                   return Reply{200, WebhookJson(hook, engine::RecentDeliveries(
                                                           txn.state, me.id, kDeliveriesShown))};
                 }));
  router.Add("GET", "/v1/accounts/me/webhook",
             Authenticated<Empty>(api, 0, NoInput,
                                  [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                                    const auto* hook = engine::FindWebhook(txn.state, me.id);
                                    if (hook == nullptr) {
                                      return Status::NotFound("no webhook is set");
                                    }
                                    return Reply{200, WebhookJson(*hook, engine::RecentDeliveries(
                                                                             txn.state, me.id,
                                                                             kDeliveriesShown))};
                                  }));
  router.Add("DELETE", "/v1/accounts/me/webhook",
             Authenticated<Empty>(api, 0, NoInput,
                                  [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
                                    GPUHUB_RETURN_IF_ERROR(engine::DeleteWebhook(txn, me.id));
                                    engine::RecordAudit(txn, me.id,
                                                        engine::AuditKind::kWebhookChanged,
                                                        {{"action", "removed"}});
                                    return Reply{204, nullptr};
                                  }));
}

}  // namespace gpuhub::http
