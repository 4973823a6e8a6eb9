#include "payments/webhook.h"

#include <sodium.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "payments/limits.h"

namespace gpuhub::payments {
namespace {

using json = nlohmann::json;

void Hmac(std::string_view secret, std::string_view body,
          unsigned char out[crypto_auth_hmacsha256_BYTES]) {
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(secret.data()),
                              secret.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(body.data()),
                                body.size());
  crypto_auth_hmacsha256_final(&state, out);
}

Result<std::string> Id(const json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::InvalidArgument(std::string("webhook body lacks '") + key + "'");
    return std::string();
  }
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string("webhook field '") + key + "' must be a string");
  }
  std::string value = it->get<std::string>();
  if (value.size() > kMaxProcessorIdBytes) {
    return Status::InvalidArgument(std::string("webhook field '") + key + "' is too long");
  }
  for (char c : value) {
    if (c < ' ' || c == 127) {
      return Status::InvalidArgument(std::string("webhook field '") + key +
                                     "' has control characters");
    }
  }
  if (required && value.empty()) {
    return Status::InvalidArgument(std::string("webhook field '") + key + "' is empty");
  }
  return value;
}

}  // namespace

bool WebhookSignatureValid(std::string_view secret, std::string_view body,
                           std::string_view header) {
  if (sodium_init() < 0) return false;
  while (!header.empty() && (header.front() == ' ' || header.front() == '\t')) {
    header.remove_prefix(1);
  }
  while (!header.empty() && (header.back() == ' ' || header.back() == '\t')) {
    header.remove_suffix(1);
  }
  if (header.size() != 7 + 2 * crypto_auth_hmacsha256_BYTES) return false;
  std::string prefix(header.substr(0, 7));
  for (char& c : prefix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (prefix != "sha256=") return false;
  unsigned char given[crypto_auth_hmacsha256_BYTES];
  std::size_t written = 0;
  std::string_view hex = header.substr(7);
  if (sodium_hex2bin(given, sizeof given, hex.data(), hex.size(), nullptr, &written, nullptr) !=
          0 ||
      written != sizeof given) {
    return false;
  }
  unsigned char expected[crypto_auth_hmacsha256_BYTES];
  Hmac(secret, body, expected);
  return sodium_memcmp(expected, given, sizeof expected) == 0;
}

std::string WebhookSignature(std::string_view secret, std::string_view body) {
  if (sodium_init() < 0) return "";
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  Hmac(secret, body, mac);
  std::string hex(2 * sizeof mac + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), mac, sizeof mac);
  hex.pop_back();
  return "sha256=" + hex;
}

bool IsInvoiceEvent(std::string_view type) {
  for (auto t : kInvoiceEvents) {
    if (t == type) return true;
  }
  return false;
}

Result<WebhookEvent> ParseWebhookEvent(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("webhook body must be a JSON object");
  }
  WebhookEvent e;
  GPUHUB_ASSIGN_OR_RETURN(e.type, Id(j, "type", true));
  GPUHUB_ASSIGN_OR_RETURN(e.delivery_id, Id(j, "deliveryId", false));
  GPUHUB_ASSIGN_OR_RETURN(e.original_delivery_id, Id(j, "originalDeliveryId", false));
  GPUHUB_ASSIGN_OR_RETURN(e.webhook_id, Id(j, "webhookId", false));
  GPUHUB_ASSIGN_OR_RETURN(e.store_id, Id(j, "storeId", false));
  GPUHUB_ASSIGN_OR_RETURN(e.invoice_id, Id(j, "invoiceId", IsInvoiceEvent(e.type)));
  if (auto r = j.find("isRedelivery"); r != j.end() && r->is_boolean()) {
    e.is_redelivery = r->get<bool>();
  }
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
    if (auto o = m->find("orderId"); o != m->end() && o->is_string()) {
      std::string order = o->get<std::string>();
      if (order.size() <= kMaxProcessorIdBytes) e.order_id = std::move(order);
    }
  }
  return e;
}

}  // namespace gpuhub::payments
