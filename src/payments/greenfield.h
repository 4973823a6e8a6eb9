// BTCPay Server's Greenfield API, as gpuhub uses it: create a top-up invoice, read an invoice back
// with its payments, list the store's payment methods. Written against the Greenfield v1 API of
// BTCPay Server 2.x (docs/payments.md names the version the test fixtures follow).
//
// Contract
// - Every call goes through net::Client (deadline kGreenfieldTimeout, response cap
//   kMaxGreenfieldResponseBytes, https verified) with `Authorization: token <api key>`. The key is
//   never part of any Status message, log line or returned value (GreenfieldConfig::Describe leaves
//   it out).
// - Errors: unavailable for anything the network or BTCPay did (unreachable, timeout, 5xx, a
//   response that is not what the API documents); failed_precondition for 401/403 (the key lacks a
//   permission: an operator must fix the configuration); not_found for 404; invalid_argument for a
//   400 (BTCPay's validation message is included). Messages never include the key or response
//   bodies beyond BTCPay's own short error message.
// - Amounts come back as exact decimals; the fiat value of a payment is computed here once
//   (PaymentFiatMicros) so that every caller credits the same figure.
// - Thread-safety: a GreenfieldClient may be used from several threads (each call opens its own
//   connection).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuhub::payments {

struct GreenfieldConfig {
  std::string base_url;  // "https://btcpay.example.com" (the API lives under /api/v1)
  std::string store_id;
  std::string api_key;  // secret
  std::string ca_file;  // https: trust these CAs instead of the system's (tests, private CAs)
  std::int64_t timeout_ms = 0;  // 0: kGreenfieldTimeout

  bool configured() const { return !base_url.empty(); }
  // invalid_argument naming what is missing or malformed (never echoing the key).
  Status Validate() const;
  // "https://btcpay.example.com store 9CiN..." for logs and /healthz: never the key.
  std::string Describe() const;
};

// BTCPay's invoice statuses ("New", "Processing", "Expired", "Invalid", "Settled") and additional
// statuses ("None", "PaidLate", "PaidPartial", "Marked", "Invalid", "PaidOver").
enum class ProcessorStatus { kNew, kProcessing, kExpired, kInvalid, kSettled };
enum class AdditionalStatus { kNone, kPaidLate, kPaidPartial, kMarked, kInvalid, kPaidOver };
std::string_view ProcessorStatusName(ProcessorStatus s);    // BTCPay's spelling
std::string_view AdditionalStatusName(AdditionalStatus s);  // BTCPay's spelling
Result<ProcessorStatus> ParseProcessorStatus(std::string_view name);
Result<AdditionalStatus> ParseAdditionalStatus(std::string_view name);

// A payment's status: "Settled" (confirmed), "Processing" (seen, not confirmed yet), "Invalid"
// (not accounted: double-spent, replaced).
enum class PaymentStatus { kProcessing, kSettled, kInvalid };
std::string_view PaymentStatusName(PaymentStatus s);
Result<PaymentStatus> ParsePaymentStatus(std::string_view name);

struct ProcessorPayment {
  std::string id;                 // BTCPay's payment id ("<txid>-<vout>" on chain)
  std::string payment_method_id;  // "BTC-CHAIN", "BTC-LN", "XMR-CHAIN", ...
  std::string crypto_currency;    // "BTC"
  PaymentStatus status = PaymentStatus::kProcessing;
  std::string value;  // crypto, exact decimal as BTCPay wrote it
  std::string fee;    // the payment method fee included in value ("0" when none)
  std::string rate;   // invoice currency per crypto unit, fixed when the invoice was created
  // (value - fee) x rate in the invoice's currency, rounded half-even to cents once: what the
  // payment is worth (BTCPay's own InvoicePaidAmount.Net, rounded like its paidAmount).
  std::int64_t fiat_micros = 0;
  TimestampMicros received_at = 0;
};

struct ProcessorInvoice {
  std::string id;
  std::string store_id;
  ProcessorStatus status = ProcessorStatus::kNew;
  AdditionalStatus additional_status = AdditionalStatus::kNone;
  Currency currency = Currency::kUsd;
  std::int64_t amount_micros = 0;
  std::string checkout_link;
  std::string order_id;  // metadata.orderId: our invoice id
  TimestampMicros created_at = 0;
  TimestampMicros expires_at = 0;
  std::vector<ProcessorPayment> payments;  // of every payment method
};

struct PaymentMethod {
  std::string id;  // "BTC-CHAIN"
  bool enabled = false;
};

struct CreateInvoiceRequest {
  std::string order_id;  // our invoice id (metadata.orderId)
  std::int64_t user_id = 0;
  std::int64_t amount_micros = 0;  // whole cents
  Currency currency = Currency::kUsd;
  std::int64_t expiration_minutes = 0;  // 0: kDefaultInvoiceExpirationMinutes
  std::string redirect_url;             // where "return to the store" goes; may be empty
};

// (value - fee) x rate, rounded half-even to cents, as micro-units. invalid_argument for a
// malformed or absurd decimal (negative, more than kMaxDecimalDigits digits, over kMaxAmountMicros).
Result<std::int64_t> PaymentFiatMicros(std::string_view value, std::string_view fee,
                                       std::string_view rate);

// Pure parsers of the documented JSON (exposed for unit tests and the fake's self-checks).
Result<ProcessorInvoice> ParseInvoiceJson(std::string_view body);
// GET /api/v1/stores/{storeId}/invoices/{invoiceId}/payment-methods: an array of payment methods,
// each with its payments.
Result<std::vector<ProcessorPayment>> ParseInvoicePaymentMethodsJson(std::string_view body);
Result<std::vector<PaymentMethod>> ParseStorePaymentMethodsJson(std::string_view body);

class GreenfieldClient {
 public:
  explicit GreenfieldClient(GreenfieldConfig config);

  // POST /api/v1/stores/{storeId}/invoices. The returned invoice has no payments.
  Result<ProcessorInvoice> CreateInvoice(const CreateInvoiceRequest& request) const;
  // GET /api/v1/stores/{storeId}/invoices/{id} and .../payment-methods: the invoice with every
  // payment BTCPay knows of (the only source of amounts gpuhub trusts).
  Result<ProcessorInvoice> GetInvoice(std::string_view invoice_id) const;
  // GET /api/v1/stores/{storeId}/payment-methods?onlyEnabled=true
  Result<std::vector<PaymentMethod>> ListPaymentMethods() const;

  const GreenfieldConfig& config() const { return config_; }

 private:
  struct Reply {
    int status = 0;
    std::string body;
  };
  Result<Reply> Call(std::string method, std::string target, std::string body) const;
  GreenfieldConfig config_;
};

// "BTC-CHAIN" -> "BTC", "USDT-TRON" -> "USDT", "BTC-LN" -> "BTC (Lightning)": how the top-up page
// names a payment method.
std::string PaymentMethodLabel(std::string_view payment_method_id);

}  // namespace gpuhub::payments
