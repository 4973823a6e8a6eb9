#include "engine/notifications.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/json_writer.h"
#include "engine/accounts.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kDeliveryStatus[] = {"pending", "delivered", "failed"};

Result<DeliveryStatus> ParseDeliveryStatus(std::string_view name) {
  for (std::size_t i = 0; i < std::size(kDeliveryStatus); ++i) {
    if (kDeliveryStatus[i] == name) return static_cast<DeliveryStatus>(i);
  }
  return Status::Internal("unknown delivery status '" + std::string(name) + "'");
}

std::string Dump(const json& j) { return DumpJson(j); }

void WriteNotification(Txn& txn, const Notification& n) {
  txn.writes.Upsert("notifications", {{"id", n.id},
                                      {"user_id", n.user_id},
                                      {"kind", n.kind},
                                      {"subject", n.subject},
                                      {"message", n.message},
                                      {"data_json", n.data_json},
                                      {"created_at_us", n.created_at}});
}

void WriteWebhook(Txn& txn, const AccountWebhook& w) {
  txn.writes.Upsert("account_webhooks", {{"user_id", w.user_id},
                                         {"url", w.url},
                                         {"secret", w.secret},
                                         {"created_at_us", w.created_at},
                                         {"updated_at_us", w.updated_at}});
}

void WriteDelivery(Txn& txn, const WebhookDelivery& d) {
  txn.writes.Upsert("webhook_deliveries",
                    {{"id", d.id},
                     {"user_id", d.user_id},
                     {"notification_id", d.notification_id},
                     {"url", d.url},
                     {"body", d.body},
                     {"status", std::string(DeliveryStatusName(d.status))},
                     {"attempts", d.attempts},
                     {"next_attempt_at_us", d.next_attempt_at},
                     {"last_status_code", d.last_status_code},
                     {"last_error", d.last_error},
                     {"created_at_us", d.created_at},
                     {"updated_at_us", d.updated_at}});
}

void Erase(std::deque<std::int64_t>& ids, std::int64_t id) {
  for (auto it = ids.begin(); it != ids.end(); ++it) {
    if (*it == id) {
      ids.erase(it);
      return;
    }
  }
}

// A pending delivery ends (delivered or failed): out of the due set and the pending list, into
// the finished list, whose oldest beyond the cap are deleted.
void Finish(Txn& txn, WebhookDelivery& d, DeliveryStatus status) {
  NotificationsState& s = *txn.state.notifications;
  s.due.erase({d.next_attempt_at, d.id});
  Erase(s.pending_by_user[d.user_id], d.id);
  d.status = status;
  d.updated_at = txn.now;
  WriteDelivery(txn, d);
  auto& finished = s.finished_by_user[d.user_id];
  finished.push_back(d.id);
  while (finished.size() > kMaxFinishedDeliveriesPerAccount) {
    std::int64_t old = finished.front();
    finished.pop_front();
    s.deliveries.erase(old);
    txn.writes.Delete("webhook_deliveries", {{"id", old}});
  }
}

bool PrintableAscii(std::string_view text) {
  for (unsigned char c : text) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string_view DeliveryStatusName(DeliveryStatus s) {
  return kDeliveryStatus[static_cast<std::size_t>(s)];
}

Result<Notification> Notify(Txn& txn, const NotificationInput& input) {
  NotificationsState& s = *txn.state.notifications;
  if (FindUser(txn.state, input.user_id) == nullptr) {
    return Status::InvalidArgument("notification for unknown user " +
                                   std::to_string(input.user_id));
  }
  if (input.kind.empty() || input.kind.size() > kMaxNotificationKindBytes ||
      input.subject.size() > kMaxNotificationSubjectBytes || input.message.empty() ||
      input.message.size() > kMaxNotificationMessageBytes) {
    return Status::InvalidArgument("notification kind, subject or message out of range");
  }
  json data = json::object();
  for (const auto& [key, value] : input.data) data[key] = value;
  Notification n;
  n.id = s.next_notification_id++;
  n.user_id = input.user_id;
  n.kind = input.kind;
  n.subject = input.subject;
  n.message = input.message;
  n.data_json = Dump(data);
  n.created_at = txn.now;
  if (n.data_json.size() > kMaxNotificationDataBytes) {
    return Status::InvalidArgument("notification data over " +
                                   std::to_string(kMaxNotificationDataBytes) + " bytes");
  }
  WriteNotification(txn, n);
  auto& mine = s.by_user[n.user_id];
  mine.push_back(n.id);
  while (mine.size() > kMaxNotificationsPerAccount) {
    std::int64_t old = mine.front();
    mine.pop_front();
    s.notifications.erase(old);
    txn.writes.Delete("notifications", {{"id", old}});
  }
  s.notifications.emplace(n.id, n);

  auto hook = s.webhooks.find(n.user_id);
  if (hook == s.webhooks.end()) return n;
  WebhookDelivery d;
  d.id = s.next_delivery_id++;
  d.user_id = n.user_id;
  d.notification_id = n.id;
  d.url = hook->second.url;
  json body = {{"id", n.id},
               {"type", n.kind},
               {"created_at", FormatTimestamp(n.created_at)},
               {"subject", n.subject},
               {"message", n.message},
               {"data", data}};
  d.body = Dump(body);
  d.status = DeliveryStatus::kPending;
  d.next_attempt_at = txn.now;
  d.created_at = d.updated_at = txn.now;
  s.deliveries.emplace(d.id, d);
  s.due.insert({d.next_attempt_at, d.id});
  auto& pending = s.pending_by_user[d.user_id];
  pending.push_back(d.id);
  WriteDelivery(txn, d);
  // A dead endpoint must not grow the outbox without bound: the oldest pending one gives up.
  while (pending.size() > kMaxPendingDeliveriesPerAccount) {
    WebhookDelivery& oldest = s.deliveries.at(pending.front());
    oldest.last_error = "dropped: more than " + std::to_string(kMaxPendingDeliveriesPerAccount) +
                        " deliveries pending for this account";
    Finish(txn, oldest, DeliveryStatus::kFailed);
  }
  return n;
}

NotificationPage ListNotifications(const State& state, std::int64_t user_id, std::int64_t before,
                                   std::size_t limit) {
  NotificationPage page;
  const NotificationsState& s = *state.notifications;
  auto it = s.by_user.find(user_id);
  if (it == s.by_user.end()) return page;
  const auto& ids = it->second;
  for (auto id = ids.rbegin(); id != ids.rend(); ++id) {
    if (before != 0 && *id >= before) continue;
    if (page.items.size() == limit) {
      page.next_before = page.items.back().id;
      break;
    }
    page.items.push_back(s.notifications.at(*id));
  }
  return page;
}

Result<std::string> ValidateWebhookUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("url " + why + ", such as \"https://example.com/gpuhub\"")
        .WithField("url");
  };
  if (url.empty() || url.size() > kMaxWebhookUrlBytes) {
    return bad("must be 1.." + std::to_string(kMaxWebhookUrlBytes) + " characters");
  }
  if (!PrintableAscii(url)) return bad("must be printable ASCII without spaces");
  std::string_view rest;
  if (url.substr(0, 8) == "https://") {
    rest = url.substr(8);
  } else if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else {
    return bad("must start with https:// or http://");
  }
  std::size_t end = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, end);
  if (url.find('#') != std::string_view::npos) return bad("must not have a #fragment");
  if (authority.find('@') != std::string_view::npos) {
    return bad("must not carry credentials (user:password@); the signature authenticates us");
  }
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  bool ipv6 = !authority.empty() && authority.front() == '[';
  if (ipv6) {
    std::size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("has a malformed IPv6 host");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return bad("has a malformed host");
      port = authority.substr(close + 2);
      has_port = true;
    }
  } else if (std::size_t colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    has_port = true;
  }
  if (host.empty()) return bad("needs a host");
  for (char c : host) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
              (ipv6 && c == ':');
    if (!ok) return bad("has a malformed host");
  }
  if (has_port) {
    std::int64_t p = 0;
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) {
      digits = digits && c >= '0' && c <= '9';
      if (digits) p = p * 10 + (c - '0');
    }
    if (!digits || p < 1 || p > 65535) return bad("has a port outside 1..65535");
  }
  return std::string(url);
}

Result<AccountWebhook> SetWebhook(Txn& txn, std::int64_t user_id, const std::string& url,
                                  bool rotate_secret) {
  GPUHUB_ASSIGN_OR_RETURN(std::string valid, ValidateWebhookUrl(url));
  NotificationsState& s = *txn.state.notifications;
  auto [it, created] = s.webhooks.try_emplace(user_id);
  AccountWebhook& w = it->second;
  if (created) {
    w.user_id = user_id;
    w.created_at = txn.now;
  }
  if (created || rotate_secret) w.secret = "whsec_" + RandomHex(kWebhookSecretBytes);
  w.url = valid;
  w.updated_at = txn.now;
  WriteWebhook(txn, w);
  return w;
}

Status DeleteWebhook(Txn& txn, std::int64_t user_id) {
  NotificationsState& s = *txn.state.notifications;
  if (s.webhooks.erase(user_id) == 0) return Status::NotFound("no webhook is set");
  txn.writes.Delete("account_webhooks", {{"user_id", user_id}});
  auto pending = s.pending_by_user[user_id];
  for (std::int64_t id : pending) {
    WebhookDelivery& d = s.deliveries.at(id);
    d.last_error = "webhook removed by the account";
    Finish(txn, d, DeliveryStatus::kFailed);
  }
  return Status::Ok();
}

const AccountWebhook* FindWebhook(const State& state, std::int64_t user_id) {
  auto it = state.notifications->webhooks.find(user_id);
  return it == state.notifications->webhooks.end() ? nullptr : &it->second;
}

std::vector<WebhookDelivery> RecentDeliveries(const State& state, std::int64_t user_id,
                                              std::size_t limit) {
  std::vector<WebhookDelivery> out;
  const NotificationsState& s = *state.notifications;
  for (const auto* list : {&s.pending_by_user, &s.finished_by_user}) {
    auto it = list->find(user_id);
    if (it == list->end()) continue;
    for (auto id = it->second.rbegin(); id != it->second.rend() && out.size() < limit; ++id) {
      out.push_back(s.deliveries.at(*id));
    }
  }
  return out;
}

std::vector<DeliveryJob> ClaimDeliveries(Txn& txn, std::size_t limit) {
  NotificationsState& s = *txn.state.notifications;
  std::vector<DeliveryJob> jobs;
  while (!s.due.empty() && s.due.begin()->first <= txn.now && jobs.size() < limit) {
    std::int64_t id = s.due.begin()->second;
    s.due.erase(s.due.begin());
    WebhookDelivery& d = s.deliveries.at(id);
    // The account's URL and secret as they are now: a changed URL gets the pending deliveries
    // too (the sender refuses a job without a secret: the webhook was removed).
    auto hook = s.webhooks.find(d.user_id);
    std::string secret = hook == s.webhooks.end() ? "" : hook->second.secret;
    if (hook != s.webhooks.end()) d.url = hook->second.url;
    d.next_attempt_at = txn.now + kWebhookClaimMicros;
    d.updated_at = txn.now;
    s.due.insert({d.next_attempt_at, id});
    WriteDelivery(txn, d);
    jobs.push_back({id, d.user_id, d.url, d.body, secret, d.attempts + 1});
  }
  return jobs;
}

Status RecordDeliveryAttempt(Txn& txn, std::int64_t id, bool delivered, int status_code,
                             const std::string& error, bool permanent) {
  NotificationsState& s = *txn.state.notifications;
  auto it = s.deliveries.find(id);
  if (it == s.deliveries.end()) return Status::NotFound("no delivery " + std::to_string(id));
  WebhookDelivery& d = it->second;
  if (d.status != DeliveryStatus::kPending) return Status::Ok();
  ++d.attempts;
  d.last_status_code = status_code;
  d.last_error = error.substr(0, kMaxDeliveryErrorBytes);
  if (delivered) {
    d.last_error.clear();
    Finish(txn, d, DeliveryStatus::kDelivered);
    return Status::Ok();
  }
  if (permanent || d.attempts >= kMaxWebhookAttempts) {
    Finish(txn, d, DeliveryStatus::kFailed);
    return Status::Ok();
  }
  s.due.erase({d.next_attempt_at, d.id});
  d.next_attempt_at =
      d.created_at + kWebhookRetryDelaysMicros[static_cast<std::size_t>(d.attempts)];
  if (d.next_attempt_at < txn.now) d.next_attempt_at = txn.now;
  d.updated_at = txn.now;
  s.due.insert({d.next_attempt_at, d.id});
  WriteDelivery(txn, d);
  return Status::Ok();
}

Status LoadNotifications(store::Store& store, NotificationsState& s) {
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "notifications",
      {"id", "user_id", "kind", "subject", "message", "data_json", "created_at_us"}, "id",
      [&](const store::Row& row) -> Status {
        Notification n;
        GPUHUB_ASSIGN_OR_RETURN(n.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(n.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(n.kind, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(n.subject, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(n.message, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(n.data_json, row.Text(5));
        GPUHUB_ASSIGN_OR_RETURN(n.created_at, row.Int(6));
        s.by_user[n.user_id].push_back(n.id);
        s.next_notification_id = std::max(s.next_notification_id, n.id + 1);
        s.notifications.emplace(n.id, std::move(n));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "account_webhooks", {"user_id", "url", "secret", "created_at_us", "updated_at_us"},
      "user_id", [&](const store::Row& row) -> Status {
        AccountWebhook w;
        GPUHUB_ASSIGN_OR_RETURN(w.user_id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(w.url, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(w.secret, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(w.created_at, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(w.updated_at, row.Int(4));
        s.webhooks.emplace(w.user_id, std::move(w));
        return Status::Ok();
      }));
  return store.Scan(
      "webhook_deliveries",
      {"id", "user_id", "notification_id", "url", "body", "status", "attempts",
       "next_attempt_at_us", "last_status_code", "last_error", "created_at_us", "updated_at_us"},
      "id", [&](const store::Row& row) -> Status {
        WebhookDelivery d;
        GPUHUB_ASSIGN_OR_RETURN(d.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(d.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(d.notification_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(d.url, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(d.body, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(d.status, row.Parsed(5, ParseDeliveryStatus));
        GPUHUB_ASSIGN_OR_RETURN(d.attempts, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(d.next_attempt_at, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(d.last_status_code, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(d.last_error, row.Text(9));
        GPUHUB_ASSIGN_OR_RETURN(d.created_at, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(d.updated_at, row.Int(11));
        if (d.status == DeliveryStatus::kPending) {
          s.due.insert({d.next_attempt_at, d.id});
          s.pending_by_user[d.user_id].push_back(d.id);
        } else {
          s.finished_by_user[d.user_id].push_back(d.id);
        }
        s.next_delivery_id = std::max(s.next_delivery_id, d.id + 1);
        s.deliveries.emplace(d.id, std::move(d));
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
