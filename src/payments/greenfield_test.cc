#include "payments/greenfield.h"

#include <gtest/gtest.h>

namespace gpuhub::payments {
namespace {

TEST(PaymentFiatMicros, IsValueMinusFeeTimesRateRoundedHalfEvenToCents) {
  struct Case {
    const char* value;
    const char* fee;
    const char* rate;
    std::int64_t micros;
  } cases[] = {
      {"0.00153847", "0", "65000.12", 100'000'000},    // 100.0006... -> 100.00
      {"0.001", "0", "65000", 65'000'000},             // exact
      {"0.0015", "0.0001", "50000", 70'000'000},       // fee is not money the merchant got
      {"1", "0", "0.125", 120'000},                    // 0.125 -> 0.12 (half-even, down)
      {"1", "0", "0.135", 140'000},                    // 0.135 -> 0.14 (half-even, up)
      {"2.000000000000000001", "0", "3000", 6'000'000'000},  // 18 decimals (ETH)
      {"0", "0", "65000", 0},
  };
  for (const auto& c : cases) {
    auto got = PaymentFiatMicros(c.value, c.fee, c.rate);
    ASSERT_TRUE(got.ok()) << c.value << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.micros) << c.value << " x " << c.rate;
  }
}

TEST(PaymentFiatMicros, RefusesWhatIsNotADecimal) {
  for (auto [value, fee, rate] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"-1", "0", "1"},
           {"1e5", "0", "1"},
           {"", "0", "1"},
           {"1", "2", "1"},  // fee above value
           {"1.2.3", "0", "1"},
           {"1", "0", "99999999999999999999999999999999999999999"},
           {"100000000000000", "0", "100000000000"}}) {
    EXPECT_FALSE(PaymentFiatMicros(value, fee, rate).ok()) << value << " " << fee << " " << rate;
  }
}

// The shape of BTCPay Server 2.4.1's GET /api/v1/stores/{storeId}/invoices/{invoiceId}
// (swagger.template.invoices.json, InvoiceData).
constexpr const char* kInvoice = R"({
  "id": "HMprBnL9BTXWuPvpoKBS6e", "storeId": "9CiNzKoANXxmk5ayZngSXrHTiVvvgCrwrpFQd4m2K776",
  "amount": "100.00", "paidAmount": "40.00", "currency": "EUR", "type": "Standard",
  "checkoutLink": "https://btcpay.example.com/i/HMprBnL9BTXWuPvpoKBS6e",
  "createdTime": 1767225600, "expirationTime": 1767229200, "monitoringExpiration": 1767315600,
  "status": "New", "additionalStatus": "PaidPartial", "availableStatusesForManualMarking": [],
  "archived": false, "metadata": {"orderId": "inv_0123456789abcdef01234567"},
  "checkout": {"expirationMinutes": 60}, "receipt": {}})";

TEST(ParseInvoiceJson, ReadsTheDocumentedFields) {
  auto inv = ParseInvoiceJson(kInvoice);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->id, "HMprBnL9BTXWuPvpoKBS6e");
  EXPECT_EQ(inv->status, ProcessorStatus::kNew);
  EXPECT_EQ(inv->additional_status, AdditionalStatus::kPaidPartial);
  EXPECT_EQ(inv->currency, Currency::kEur);
  EXPECT_EQ(inv->amount_micros, 100'000'000);
  EXPECT_EQ(inv->order_id, "inv_0123456789abcdef01234567");
  EXPECT_EQ(inv->created_at, 1767225600LL * 1'000'000);
  EXPECT_EQ(inv->expires_at, 1767229200LL * 1'000'000);
}

TEST(ParseInvoiceJson, RefusesUnknownStatusesAndCurrencies) {
  std::string bad = kInvoice;
  EXPECT_FALSE(ParseInvoiceJson(std::string(bad).replace(bad.find("\"New\""), 5, "\"Paid\"")).ok());
  EXPECT_FALSE(ParseInvoiceJson(std::string(bad).replace(bad.find("\"EUR\""), 5, "\"BTC\"")).ok());
  EXPECT_FALSE(ParseInvoiceJson("[]").ok());
  EXPECT_FALSE(ParseInvoiceJson("not json").ok());
}

TEST(ParseInvoicePaymentMethodsJson, EveryPaymentOfEveryMethodWithItsFiatValue) {
  // InvoicePaymentMethodDataModel of 2.x (paymentMethodId, currency) and of 1.x (paymentMethod,
  // cryptoCode).
  auto payments = ParseInvoicePaymentMethodsJson(R"([
    {"paymentMethodId": "BTC-CHAIN", "currency": "BTC", "rate": "50000.00", "amount": "0.002",
     "paymentMethodPaid": "0.0008", "totalPaid": "0.0008", "due": "0.0012", "paymentMethodFee": "0",
     "activated": true, "destination": "bc1q...",
     "payments": [{"id": "a1b2-0", "receivedDate": 1767225700, "value": "0.0008", "fee": "0",
                   "status": "Settled", "destination": "bc1q..."},
                  {"id": "c3d4-1", "receivedDate": 1767225800, "value": "0.0001", "fee": "0",
                   "status": "Processing", "destination": "bc1q..."}]},
    {"paymentMethod": "LTC", "cryptoCode": "LTC", "rate": "80", "payments": [
      {"id": "e5f6-0", "receivedDate": 1767225900, "value": "0.5", "status": "Invalid"}]},
    {"paymentMethodId": "XMR-CHAIN", "currency": "XMR", "rate": "150", "payments": []}])");
  ASSERT_TRUE(payments.ok()) << payments.status().ToString();
  ASSERT_EQ(payments->size(), 3u);
  EXPECT_EQ((*payments)[0].id, "a1b2-0");
  EXPECT_EQ((*payments)[0].payment_method_id, "BTC-CHAIN");
  EXPECT_EQ((*payments)[0].status, PaymentStatus::kSettled);
  EXPECT_EQ((*payments)[0].fiat_micros, 40'000'000);
  EXPECT_EQ((*payments)[1].status, PaymentStatus::kProcessing);
  EXPECT_EQ((*payments)[1].fiat_micros, 5'000'000);
  EXPECT_EQ((*payments)[2].payment_method_id, "LTC");
  EXPECT_EQ((*payments)[2].crypto_currency, "LTC");
  EXPECT_EQ((*payments)[2].status, PaymentStatus::kInvalid);
  EXPECT_EQ((*payments)[2].fiat_micros, 40'000'000);
  EXPECT_EQ((*payments)[2].received_at, 1767225900LL * 1'000'000);
}

TEST(ParseStorePaymentMethodsJson, ReadsIdsAndEnabled) {
  auto methods = ParseStorePaymentMethodsJson(
      R"([{"enabled": true, "paymentMethodId": "BTC-CHAIN", "config": {}},
          {"enabled": false, "paymentMethodId": "BTC-LN"}])");
  ASSERT_TRUE(methods.ok());
  ASSERT_EQ(methods->size(), 2u);
  EXPECT_EQ((*methods)[0].id, "BTC-CHAIN");
  EXPECT_TRUE((*methods)[0].enabled);
  EXPECT_FALSE((*methods)[1].enabled);
  EXPECT_EQ(PaymentMethodLabel("BTC-CHAIN"), "BTC");
  EXPECT_EQ(PaymentMethodLabel("BTC-LN"), "BTC (Lightning)");
  EXPECT_EQ(PaymentMethodLabel("USDT-TRON"), "USDT (TRON)");
  EXPECT_EQ(PaymentMethodLabel("XMR"), "XMR");
}

TEST(GreenfieldConfig, ValidatesAndNeverDescribesTheKey) {
  GreenfieldConfig c{"https://btcpay.example.com", "store1", "s3cr3t-key", "", 0};
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.Describe().find("s3cr3t"), std::string::npos);
  GreenfieldConfig no_key = c;
  no_key.api_key = "";
  EXPECT_FALSE(no_key.Validate().ok());
  GreenfieldConfig bad_url = c;
  bad_url.base_url = "ftp://x";
  EXPECT_FALSE(bad_url.Validate().ok());
  GreenfieldConfig spaced = c;
  spaced.api_key = "a b";
  Status s = spaced.Validate();
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message().find("a b"), std::string::npos);
}

TEST(GreenfieldClient, AnUnreachableServerIsUnavailableWithoutTheKey) {
  // Port 1 on loopback: nothing listens there.
  GreenfieldClient client({"http://127.0.0.1:1", "store1", "do-not-leak-me", "", 2000});
  auto inv = client.GetInvoice("abc");
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(inv.status().message().find("do-not-leak-me"), std::string::npos);
  CreateInvoiceRequest r;
  r.order_id = "inv_x";
  r.amount_micros = 10'000'000;
  auto created = client.CreateInvoice(r);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(created.status().message().find("do-not-leak-me"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::payments
