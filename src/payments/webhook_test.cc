#include "payments/webhook.h"

#include <gtest/gtest.h>

namespace gpuhub::payments {
namespace {

TEST(WebhookSignature, MatchesHmacSha256OfTheRawBody) {
  // openssl dgst -sha256 -hmac secret <<< '{"a":1}' (without the newline)
  std::string body = R"({"a":1})";
  std::string sig = WebhookSignature("secret", body);
  ASSERT_EQ(sig.size(), 7u + 64u);
  EXPECT_EQ(sig.substr(0, 7), "sha256=");
  EXPECT_TRUE(WebhookSignatureValid("secret", body, sig));
  EXPECT_TRUE(WebhookSignatureValid("secret", body, " " + sig + " "));
  std::string upper = sig;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(WebhookSignatureValid("secret", body, upper));  // hex and prefix case-insensitive
}

TEST(WebhookSignature, RefusesEveryForgery) {
  std::string body = R"({"type":"InvoiceSettled","invoiceId":"X"})";
  std::string sig = WebhookSignature("secret", body);
  EXPECT_FALSE(WebhookSignatureValid("other", body, sig));
  EXPECT_FALSE(WebhookSignatureValid("secret", body + " ", sig));  // the raw bytes count
  std::string flipped = sig;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(WebhookSignatureValid("secret", body, flipped));
  EXPECT_FALSE(WebhookSignatureValid("secret", body, sig.substr(7)));
  EXPECT_FALSE(WebhookSignatureValid("secret", body, "sha1=" + sig.substr(7)));
  EXPECT_FALSE(WebhookSignatureValid("secret", body, sig.substr(0, sig.size() - 2)));
  EXPECT_FALSE(WebhookSignatureValid("secret", body, "sha256=" + std::string(64, 'z')));
  EXPECT_FALSE(WebhookSignatureValid("secret", body, ""));
}

TEST(ParseWebhookEvent, ReadsTheDocumentedFields) {
  auto e = ParseWebhookEvent(R"({"deliveryId":"d1","webhookId":"w1","originalDeliveryId":"d0",
    "isRedelivery":true,"type":"InvoiceReceivedPayment","timestamp":1767225600,"storeId":"s1",
    "invoiceId":"i1","metadata":{"orderId":"inv_1"},"afterExpiration":false,
    "paymentMethodId":"BTC-CHAIN","payment":{"id":"p","value":"999999"}})");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->delivery_id, "d1");
  EXPECT_EQ(e->original_delivery_id, "d0");
  EXPECT_TRUE(e->is_redelivery);
  EXPECT_EQ(e->type, "InvoiceReceivedPayment");
  EXPECT_EQ(e->store_id, "s1");
  EXPECT_EQ(e->invoice_id, "i1");
  EXPECT_EQ(e->order_id, "inv_1");
}

TEST(ParseWebhookEvent, RefusesMalformedBodies) {
  for (const char* body : {"", "[]", "{", R"({"invoiceId":"i"})", R"({"type":7})",
                           R"({"type":"InvoiceSettled"})", R"({"type":"InvoiceSettled","invoiceId":""})",
                           R"({"type":"InvoiceSettled","invoiceId":"a\u0001b"})"}) {
    EXPECT_FALSE(ParseWebhookEvent(body).ok()) << body;
  }
  // Events that are not about invoices need no invoice id.
  EXPECT_TRUE(ParseWebhookEvent(R"({"type":"PayoutCreated"})").ok());
}

}  // namespace
}  // namespace gpuhub::payments
