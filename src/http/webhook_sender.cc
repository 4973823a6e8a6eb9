#include "http/webhook_sender.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sodium.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <vector>

#include "engine/limits.h"
#include "engine/notifications.h"
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

bool InV4(std::uint32_t a, std::uint32_t net, int bits) {
  std::uint32_t mask = bits == 0 ? 0 : ~std::uint32_t{0} << (32 - bits);
  return (a & mask) == (net & mask);
}

bool InternalV4(std::uint32_t a) {
  return InV4(a, 0x00000000, 8) || InV4(a, 0x0a000000, 8) || InV4(a, 0x64400000, 10) ||
         InV4(a, 0x7f000000, 8) || InV4(a, 0xa9fe0000, 16) || InV4(a, 0xac100000, 12) ||
         InV4(a, 0xc0000000, 24) || InV4(a, 0xc0a80000, 16) || InV4(a, 0xc6120000, 15) ||
         InV4(a, 0xe0000000, 3);  // multicast and reserved up to 255.255.255.255
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

bool IsInternalAddress(std::string_view numeric) {
  std::string text(numeric);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return InternalV4(ntohl(v4.s_addr));
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return true;  // not an address: refuse
  const unsigned char* b = v6.s6_addr;
  bool zero_prefix = true;
  for (int i = 0; i < 10; ++i) zero_prefix = zero_prefix && b[i] == 0;
  if (zero_prefix && b[10] == 0xff && b[11] == 0xff) {  // ::ffff:a.b.c.d
    return InternalV4((std::uint32_t{b[12]} << 24) | (std::uint32_t{b[13]} << 16) |
                      (std::uint32_t{b[14]} << 8) | b[15]);
  }
  bool all_zero = zero_prefix && b[10] == 0 && b[11] == 0 && b[12] == 0 && b[13] == 0 &&
                  b[14] == 0;
  if (all_zero && (b[15] == 0 || b[15] == 1)) return true;  // :: and ::1
  if ((b[0] & 0xfe) == 0xfc) return true;                    // fc00::/7 unique local
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return true;    // fe80::/10 link-local
  if (b[0] == 0xff) return true;                             // multicast
  return false;
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
  std::vector<Outcome> outcomes(jobs->size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    threads.emplace_back([this, &jobs, &outcomes, i] {
      const engine::DeliveryJob& job = (*jobs)[i];
      outcomes[i] = Send(job.url, job.body, job.secret, job.id);
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const engine::DeliveryJob& job = (*jobs)[i];
    const Outcome& o = outcomes[i];
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

WebhookSender::Outcome WebhookSender::Send(const std::string& url, const std::string& body,
                                           const std::string& secret,
                                           std::int64_t delivery_id) const {
  Outcome out;
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
  if (!options_.allow_private_addresses) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(parsed->host.c_str(), parsed->port.c_str(), &hints, &found) != 0) {
      out.error = "cannot resolve " + parsed->host;
      return out;  // DNS may come back: retried
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* addr = a->ai_family == AF_INET
                             ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr)
                             : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
      ::inet_ntop(a->ai_family, addr, text, sizeof text);
      if (IsInternalAddress(text)) {
        out.error = "refused: " + parsed->host + " resolves to an internal address (" + text + ")";
        out.permanent = true;
        break;
      }
    }
    ::freeaddrinfo(found);
    if (out.permanent) return out;
  }
  std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  net::Request request = net::Request::Json("POST", split.target, body);
  request.With("Gpuhub-Signature", WebhookSignatureHeader(secret, now, body))
      .With("Gpuhub-Delivery", std::to_string(delivery_id));
  net::ClientOptions client;
  client.timeout = options_.timeout;
  client.max_response_bytes = kMaxWebhookResponseBytes;
  client.user_agent = "gpuhub-webhooks";
  auto answer = net::Fetch(split.base, request, client);
  if (!answer.ok()) {
    out.error = answer.status().message();
    return out;
  }
  out.status_code = answer->status;
  out.delivered = answer->ok();
  if (!out.delivered) out.error = "answered " + std::to_string(answer->status);
  return out;
}

}  // namespace gpuhub::http
