#include "http/webhook_sender.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "engine/limits.h"
#include "engine/notifications.h"
#include "http/internal_address.h"
#include "net/http_client.h"
#include "net/url.h"

namespace gpuhub::http {
namespace {

// Webhook answers are not read beyond this (a receiver has nothing to tell us but its status).
constexpr std::size_t kMaxWebhookResponseBytes = 64 * 1024;

struct SplitUrl {
  std::string base;    // "https://host:port"
  std::string target;  // "/path?query"
};

SplitUrl Split(const std::string& url) {
  std::size_t scheme = url.find("://");
  std::size_t start = scheme == std::string::npos ? 0 : scheme + 3;
  std::size_t end = url.find_first_of("/?", start);
  SplitUrl out;
  out.base = url.substr(0, end);
  out.target = end == std::string::npos ? "/" : url.substr(end);
  if (out.target.front() == '?') out.target = "/" + out.target;
  return out;
}

}  // namespace

std::string WebhookSignatureHeader(std::string_view secret, std::int64_t unix_seconds,
                                   std::string_view body) {
  std::string t = std::to_string(unix_seconds);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(t.data()), t.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>("."), 1);
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(body.data()),
                                body.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char hex[sizeof mac * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, mac, sizeof mac);
  return "t=" + t + ",v1=" + hex;
}

WebhookSender::WebhookSender(engine::Engine& engine, engine::MetricsRegistry& metrics,
                             WebhookSenderOptions options)
    : engine_(engine),
      options_(options),
      delivered_(metrics.Counter("gpuhub_webhook_deliveries_total",
                                 "Attempts to POST a notification to an account's webhook",
                                 {{"result", "delivered"}})),
      retried_(metrics.Counter("gpuhub_webhook_deliveries_total",
                               "Attempts to POST a notification to an account's webhook",
                               {{"result", "retry"}})),
      failed_(metrics.Counter("gpuhub_webhook_deliveries_total",
                              "Attempts to POST a notification to an account's webhook",
                              {{"result", "failed"}})) {}

WebhookSender::~WebhookSender() { Stop(); }

void WebhookSender::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void WebhookSender::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WebhookSender::Loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    std::size_t sent = Round();
    std::unique_lock<std::mutex> lock(mutex_);
    // A full claim means more may be due: go again at once.
    if (sent < engine::kMaxDeliveriesPerClaim) {
      wake_.wait_for(lock, options_.poll_interval, [&] { return stopping_; });
    }
    if (stopping_) return;
  }
}

std::size_t WebhookSender::Round() {
  // High availability: the outbox is the writer's work (a standby's engine refuses commands).
  if (engine_.role() != engine::EngineRole::kWriter) return 0;
  auto jobs = engine_.ExecuteSync<std::vector<engine::DeliveryJob>>(
      [](engine::Txn& txn) -> Result<std::vector<engine::DeliveryJob>> {
        return engine::ClaimDeliveries(txn, engine::kMaxDeliveriesPerClaim);
      });
  if (!jobs.ok()) {
    spdlog::warn("event=webhook_claim_failed error=\"{}\"", jobs.status().ToString());
    return 0;
  }
  // In parallel: one slow endpoint must not hold back the others' notifications.
  std::vector<WebhookAttempt> outcomes(jobs->size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    threads.emplace_back([this, &jobs, &outcomes, i] {
      const engine::DeliveryJob& job = (*jobs)[i];
      outcomes[i] = PostWebhook(job.url, job.body, job.secret, job.id, options_);
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const engine::DeliveryJob& job = (*jobs)[i];
    const WebhookAttempt& o = outcomes[i];
    auto recorded = engine_.ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(engine::RecordDeliveryAttempt(txn, job.id, o.delivered,
                                                           o.status_code, o.error, o.permanent));
      return 0;
    });
    (o.delivered ? delivered_ : (o.permanent || job.attempt >= engine::kMaxWebhookAttempts)
                                    ? failed_
                                    : retried_)
        .Add();
    spdlog::info("event=webhook_delivery id={} user={} attempt={} delivered={} status={} error=\"{}\"",
                 job.id, job.user_id, job.attempt, o.delivered, o.status_code, o.error);
    if (!recorded.ok()) {
      // The lease runs out and the delivery is retried: at-least-once.
      spdlog::warn("event=webhook_record_failed id={} error=\"{}\"", job.id,
                   recorded.status().ToString());
    }
  }
  return jobs->size();
}

WebhookAttempt PostWebhook(const std::string& url, const std::string& body,
                           const std::string& secret, std::int64_t delivery_id,
                           const WebhookSenderOptions& options) {
  WebhookAttempt out;
  if (secret.empty()) {
    out.error = "the account's webhook was removed";
    out.permanent = true;
    return out;
  }
  SplitUrl split = Split(url);
  auto parsed = net::ParseUrl(split.base);
  if (!parsed.ok()) {
    out.error = parsed.status().message();
    out.permanent = true;
    return out;
  }
  std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  net::Request request = net::Request::Json("POST", split.target, body);
  request.With("Gpuhub-Signature", WebhookSignatureHeader(secret, now, body))
      .With("Gpuhub-Delivery", std::to_string(delivery_id));
  net::ClientOptions client;
  client.timeout = options.timeout;
  client.max_response_bytes = kMaxWebhookResponseBytes;
  client.user_agent = "gpuhub-webhooks";
  if (!options.allow_private_addresses) {
    client.check_address = [host = parsed->host](std::string_view address) {
      if (!IsInternalAddress(address)) return Status::Ok();
      return Status::PermissionDenied("refused: " + host + " resolves to an internal address (" +
                                      std::string(address) + ")");
    };
  }
  auto answer = net::Fetch(split.base, request, client);
  if (!answer.ok()) {
    out.error = answer.status().message();
    // Refused by the address check; anything else (DNS, connect, timeout) may come back.
    out.permanent = answer.status().code() == StatusCode::kPermissionDenied;
    return out;
  }
  out.status_code = answer->status;
  out.delivered = answer->ok();
  if (answer->status >= 300 && answer->status < 400) {
    out.error = "answered " + std::to_string(answer->status) + "; redirects are not followed";
  } else if (!out.delivered) {
    out.error = "answered " + std::to_string(answer->status);
  }
  return out;
}

}  // namespace gpuhub::http
