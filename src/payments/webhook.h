// BTCPay Server's webhook deliveries: the signature and the few fields gpuhub reads.
//
// A delivery is a POST whose body is the event (JSON) and whose header `BTCPay-Sig` is
// "sha256=" + hex(HMAC-SHA256(UTF-8 secret, raw body bytes)). Only the signature makes a delivery
// authentic; even then its body is never trusted for amounts or statuses: the receiver fetches
// the invoice back from BTCPay (GreenfieldClient::GetInvoice).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub::payments {

// True when `header` is "sha256=<64 hex digits>" (case-insensitive prefix and digits) and the
// digest matches HMAC-SHA256(secret, body). Compared in constant time (sodium_memcmp).
bool WebhookSignatureValid(std::string_view secret, std::string_view body,
                           std::string_view header);
// The header value BTCPay would send for `body` (tests and the fake server).
std::string WebhookSignature(std::string_view secret, std::string_view body);

// The event types gpuhub acts on (Greenfield webhook "type").
inline constexpr std::string_view kInvoiceEvents[] = {
    "InvoiceCreated",  "InvoiceReceivedPayment", "InvoiceProcessing",    "InvoiceExpired",
    "InvoiceSettled",  "InvoiceInvalid",         "InvoicePaymentSettled"};
bool IsInvoiceEvent(std::string_view type);

struct WebhookEvent {
  std::string delivery_id;
  std::string original_delivery_id;  // set on redeliveries
  bool is_redelivery = false;
  std::string webhook_id;
  std::string type;
  std::string store_id;
  std::string invoice_id;  // BTCPay's invoice id (empty for non-invoice events)
  std::string order_id;    // metadata.orderId when present
};

// invalid_argument (the receiver answers 400) when the body is not a JSON object, lacks `type`, or
// an invoice event lacks `invoiceId`; ids longer than kMaxProcessorIdBytes or with control
// characters are refused too.
Result<WebhookEvent> ParseWebhookEvent(std::string_view body);

}  // namespace gpuhub::payments
