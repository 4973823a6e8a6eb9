// Notifications: what the platform tells an account (a renewal invoice, a stopped rental, later
// storage notices), kept per account (GET /v1/notifications) and, when the account has set a
// webhook URL, queued in an outbox for a signed POST to it.
//
// Any domain notifies through Notify(txn, ...): generic records (kind, subject id, message for
// people, data fields for machines, time). Rentals do; storage (issue 11) will.
//
// The outbox: Notify records a delivery row in the same group commit as the notification (so a
// notification is never lost nor sent for a command that was rolled back). A sender thread
// outside the writer (http/webhook_sender.h) claims due deliveries (ClaimDeliveries: each is
// leased for kWebhookClaimMicros so that no two senders POST it at once), POSTs them, and reports
// each attempt (RecordDeliveryAttempt): delivered, or retried after the next delay of
// kWebhookRetryDelaysMicros, failed after kMaxWebhookAttempts. Delivery is at-least-once: a crash
// between the POST and its record sends it again after the lease; receivers dedupe by the id.
//
// All functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

struct Notification {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  std::string kind;     // "rental.renewal_invoice"
  std::string subject;  // "rental:12"
  std::string message;
  std::string data_json;  // a JSON object of strings
  TimestampMicros created_at = 0;
};

struct AccountWebhook {
  std::int64_t user_id = 0;
  std::string url;
  std::string secret;  // "whsec_" + hex: the HMAC-SHA256 key of the signature
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
};

enum class DeliveryStatus : std::uint8_t { kPending, kDelivered, kFailed };
std::string_view DeliveryStatusName(DeliveryStatus s);  // "pending", "delivered", "failed"

struct WebhookDelivery {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  std::int64_t notification_id = 0;
  std::string url;   // where it was (or will be) POSTed: the account's URL when last claimed
  std::string body;  // the exact bytes POSTed (and signed)
  DeliveryStatus status = DeliveryStatus::kPending;
  std::int64_t attempts = 0;
  TimestampMicros next_attempt_at = 0;
  std::int64_t last_status_code = 0;  // 0: no HTTP answer
  std::string last_error;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
};

struct NotificationsState {
  std::map<std::int64_t, Notification> notifications;
  std::map<std::int64_t, std::deque<std::int64_t>> by_user;  // oldest first
  std::map<std::int64_t, AccountWebhook> webhooks;
  std::map<std::int64_t, WebhookDelivery> deliveries;
  std::set<std::pair<TimestampMicros, std::int64_t>> due;  // pending, by next attempt
  std::map<std::int64_t, std::deque<std::int64_t>> pending_by_user;   // oldest first
  std::map<std::int64_t, std::deque<std::int64_t>> finished_by_user;  // oldest first
  std::int64_t next_notification_id = 1;
  std::int64_t next_delivery_id = 1;
};

struct NotificationInput {
  std::int64_t user_id = 0;
  std::string kind;
  std::string subject;
  std::string message;
  std::vector<std::pair<std::string, std::string>> data;
};

// Records the notification (dropping the account's oldest beyond kMaxNotificationsPerAccount) and,
// when the account has a webhook, its delivery. invalid_argument for an unknown user, an empty or
// overlong kind/subject/message, or data over kMaxNotificationDataBytes: a programmer error of
// the notifying domain, reported rather than stored.
Result<Notification> Notify(Txn& txn, const NotificationInput& input);

struct NotificationPage {
  std::vector<Notification> items;  // newest first
  std::int64_t next_before = 0;     // pass as `before` for the next (older) page; 0: none
};
// The account's notifications with id < before (0: from the newest), at most `limit`.
NotificationPage ListNotifications(const State& state, std::int64_t user_id, std::int64_t before,
                                   std::size_t limit);

// "http(s)://host[:port][/path][?query]" without credentials, fragment, spaces or control
// characters, at most kMaxWebhookUrlBytes. invalid_argument (field "url") otherwise. Returns the
// URL as given (it is what will be POSTed to).
Result<std::string> ValidateWebhookUrl(std::string_view url);
// Sets the account's webhook URL; a new secret is made the first time or when `rotate_secret`.
Result<AccountWebhook> SetWebhook(Txn& txn, std::int64_t user_id, const std::string& url,
                                  bool rotate_secret);
// not_found when none is set. Pending deliveries to it are marked failed.
Status DeleteWebhook(Txn& txn, std::int64_t user_id);
const AccountWebhook* FindWebhook(const State& state, std::int64_t user_id);
// Newest first: pending ones, then finished ones.
std::vector<WebhookDelivery> RecentDeliveries(const State& state, std::int64_t user_id,
                                              std::size_t limit);

// What the sender needs for one POST.
struct DeliveryJob {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  std::string url;
  std::string body;
  std::string secret;
  std::int64_t attempt = 0;  // 1 for the first
};
// Up to `limit` deliveries due at txn.now, each leased for kWebhookClaimMicros, to the account's
// current URL.
std::vector<DeliveryJob> ClaimDeliveries(Txn& txn, std::size_t limit);
// The outcome of one attempt: delivered (a 2xx answer), or failed with the status (0: no answer)
// and why; `permanent` failures (a URL the sender refuses) are not retried. not_found for an
// unknown id; an attempt on a delivery that is no longer pending is ignored.
Status RecordDeliveryAttempt(Txn& txn, std::int64_t id, bool delivered, int status_code,
                             const std::string& error, bool permanent);

Status LoadNotifications(store::Store& store, NotificationsState& state);

}  // namespace gpuhub::engine
