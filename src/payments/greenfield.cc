#include "payments/greenfield.h"

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "net/http_client.h"
#include "payments/limits.h"

namespace gpuhub::payments {
namespace {

using json = nlohmann::json;
using u128 = unsigned __int128;

// An exact non-negative decimal: mantissa x 10^-scale.
struct Decimal {
  u128 mantissa = 0;
  int scale = 0;
};

Result<Decimal> ParseDecimal(std::string_view text, std::string_view what) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string(what) + " '" + std::string(text.substr(0, 48)) +
                                   "' is not a decimal BTCPay would send (" + why + ")");
  };
  if (text.empty()) return bad("empty");
  Decimal d;
  bool point = false;
  std::size_t digits = 0;
  for (char c : text) {
    if (c == '.') {
      if (point) return bad("two points");
      point = true;
      continue;
    }
    if (c < '0' || c > '9') return bad("only digits and one point");
    if (++digits > kMaxDecimalDigits) return bad("too many digits");
    d.mantissa = d.mantissa * 10 + static_cast<unsigned>(c - '0');
    if (point) ++d.scale;
  }
  if (digits == 0) return bad("no digits");
  return d;
}

u128 Pow10(int n) {
  u128 p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

constexpr u128 kU128Max = ~static_cast<u128>(0);

// a x b without wrapping.
Result<u128> CheckedMul(u128 a, u128 b) {
  if (a != 0 && b > kU128Max / a) return Status::InvalidArgument("decimal product too large");
  return a * b;
}

std::string Text(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

// A decimal field: BTCPay writes decimals as JSON strings; a number is accepted too (older
// versions wrote some as numbers), through its exact textual form.
std::string DecimalText(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer() || it->is_number_unsigned()) return it->dump();
  return "";
}

bool ValidId(std::string_view id) {
  if (id.empty() || id.size() > kMaxProcessorIdBytes) return false;
  for (char c : id) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

TimestampMicros UnixSeconds(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return 0;
  std::int64_t s = it->get<std::int64_t>();
  if (s < 0 || s > 32503680000) return 0;  // before 1970 or after 3000: not a time
  return s * kMicrosPerSecond;
}

Status Malformed(std::string_view what) {
  return Status::Unavailable("BTCPay answered something the Greenfield API does not document (" +
                             std::string(what) + ")");
}

// BTCPay's error bodies: {"code","message"} or [{"path","message"}, ...].
std::string ErrorMessage(const std::string& body) {
  json parsed = json::parse(body, nullptr, false);
  std::string message;
  if (parsed.is_object()) {
    message = Text(parsed, "message");
  } else if (parsed.is_array()) {
    for (const auto& item : parsed) {
      if (!item.is_object()) continue;
      if (!message.empty()) message += "; ";
      std::string path = Text(item, "path");
      message += (path.empty() ? "" : path + ": ") + Text(item, "message");
    }
  }
  if (message.size() > 200) message = message.substr(0, 200) + "...";
  for (char& c : message) {
    if (c < ' ' || c == 127) c = ' ';
  }
  return message;
}

}  // namespace

Status GreenfieldConfig::Validate() const {
  if (base_url.empty()) return Status::InvalidArgument("payments.btcpay_url is not set");
  auto url = net::ParseUrl(base_url);
  if (!url.ok()) {
    return Status::InvalidArgument("payments.btcpay_url: " + url.status().message());
  }
  if (url->scheme == net::Scheme::kUnix) {
    return Status::InvalidArgument("payments.btcpay_url must be http:// or https://");
  }
  if (!ValidId(store_id)) {
    return Status::InvalidArgument(
        "payments.store_id must be set to the BTCPay store id (printable, no spaces)");
  }
  if (api_key.empty() || api_key.size() > 512) {
    return Status::InvalidArgument(
        "payments.api_key (or GPUHUB_BTCPAY_API_KEY) must be set to a Greenfield API key with "
        "the store's invoice permissions");
  }
  for (char c : api_key) {
    if (c <= ' ' || c > '~') {
      return Status::InvalidArgument("payments.api_key must be printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

std::string GreenfieldConfig::Describe() const {
  auto url = net::ParseUrl(base_url);
  return (url.ok() ? url->ToString() : std::string("(invalid url)")) + " store " + store_id;
}

std::string_view ProcessorStatusName(ProcessorStatus s) {
  switch (s) {
    case ProcessorStatus::kNew:
      return "New";
    case ProcessorStatus::kProcessing:
      return "Processing";
    case ProcessorStatus::kExpired:
      return "Expired";
    case ProcessorStatus::kInvalid:
      return "Invalid";
    case ProcessorStatus::kSettled:
      return "Settled";
  }
  return "New";
}

std::string_view AdditionalStatusName(AdditionalStatus s) {
  switch (s) {
    case AdditionalStatus::kNone:
      return "None";
    case AdditionalStatus::kPaidLate:
      return "PaidLate";
    case AdditionalStatus::kPaidPartial:
      return "PaidPartial";
    case AdditionalStatus::kMarked:
      return "Marked";
    case AdditionalStatus::kInvalid:
      return "Invalid";
    case AdditionalStatus::kPaidOver:
      return "PaidOver";
  }
  return "None";
}

std::string_view PaymentStatusName(PaymentStatus s) {
  switch (s) {
    case PaymentStatus::kProcessing:
      return "Processing";
    case PaymentStatus::kSettled:
      return "Settled";
    case PaymentStatus::kInvalid:
      return "Invalid";
  }
  return "Processing";
}

Result<ProcessorStatus> ParseProcessorStatus(std::string_view name) {
  for (auto s : {ProcessorStatus::kNew, ProcessorStatus::kProcessing, ProcessorStatus::kExpired,
                 ProcessorStatus::kInvalid, ProcessorStatus::kSettled}) {
    if (ProcessorStatusName(s) == name) return s;
  }
  return Status::InvalidArgument("unknown invoice status '" + std::string(name.substr(0, 32)) +
                                 "'");
}

Result<AdditionalStatus> ParseAdditionalStatus(std::string_view name) {
  if (name.empty()) return AdditionalStatus::kNone;
  for (auto s : {AdditionalStatus::kNone, AdditionalStatus::kPaidLate,
                 AdditionalStatus::kPaidPartial, AdditionalStatus::kMarked,
                 AdditionalStatus::kInvalid, AdditionalStatus::kPaidOver}) {
    if (AdditionalStatusName(s) == name) return s;
  }
  return Status::InvalidArgument("unknown additional status '" + std::string(name.substr(0, 32)) +
                                 "'");
}

Result<PaymentStatus> ParsePaymentStatus(std::string_view name) {
  for (auto s : {PaymentStatus::kProcessing, PaymentStatus::kSettled, PaymentStatus::kInvalid}) {
    if (PaymentStatusName(s) == name) return s;
  }
  return Status::InvalidArgument("unknown payment status '" + std::string(name.substr(0, 32)) +
                                 "'");
}

Result<std::int64_t> PaymentFiatMicros(std::string_view value, std::string_view fee,
                                       std::string_view rate) {
  GPUHUB_ASSIGN_OR_RETURN(Decimal v, ParseDecimal(value, "payment value"));
  GPUHUB_ASSIGN_OR_RETURN(Decimal f, ParseDecimal(fee.empty() ? "0" : fee, "payment fee"));
  GPUHUB_ASSIGN_OR_RETURN(Decimal r, ParseDecimal(rate, "rate"));
  // value - fee at the larger scale.
  int scale = std::max(v.scale, f.scale);
  if (scale > 36) return Status::InvalidArgument("payment value has too many decimals");
  GPUHUB_ASSIGN_OR_RETURN(u128 vm, CheckedMul(v.mantissa, Pow10(scale - v.scale)));
  GPUHUB_ASSIGN_OR_RETURN(u128 fm, CheckedMul(f.mantissa, Pow10(scale - f.scale)));
  if (fm > vm) return Status::InvalidArgument("payment fee exceeds the payment value");
  GPUHUB_ASSIGN_OR_RETURN(u128 product, CheckedMul(vm - fm, r.mantissa));
  int product_scale = scale + r.scale;
  // cents = round_half_even(product / 10^(product_scale - 2))
  u128 cents = 0;
  if (product_scale <= 2) {
    GPUHUB_ASSIGN_OR_RETURN(cents, CheckedMul(product, Pow10(2 - product_scale)));
  } else {
    if (product_scale - 2 > 38) return Status::InvalidArgument("too many decimals");
    u128 divisor = Pow10(product_scale - 2);
    cents = product / divisor;
    u128 rest = product % divisor;
    u128 half = divisor / 2;
    if (rest > half || (rest == half && divisor % 2 == 0 && (cents & 1) != 0)) ++cents;
  }
  if (cents > static_cast<u128>(kMaxAmountMicros / 10'000)) {
    return Status::InvalidArgument("payment worth more than the largest amount gpuhub handles");
  }
  return static_cast<std::int64_t>(cents) * 10'000;
}

Result<ProcessorInvoice> ParseInvoiceJson(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return Malformed("an invoice must be a JSON object");
  ProcessorInvoice inv;
  inv.id = Text(j, "id");
  if (!ValidId(inv.id)) return Malformed("invoice without a valid id");
  inv.store_id = Text(j, "storeId");
  auto status = ParseProcessorStatus(Text(j, "status"));
  if (!status.ok()) return Malformed(status.status().message());
  inv.status = *status;
  auto additional = ParseAdditionalStatus(Text(j, "additionalStatus"));
  if (!additional.ok()) return Malformed(additional.status().message());
  inv.additional_status = *additional;
  auto currency = ParseCurrency(Text(j, "currency"));
  if (!currency.ok()) {
    return Malformed("invoice currency '" + Text(j, "currency").substr(0, 8) +
                     "' is not USD, EUR or GBP");
  }
  inv.currency = *currency;
  auto amount = ParseDecimalMicros(DecimalText(j, "amount"), 6);
  if (!amount.ok()) return Malformed("invoice amount: " + amount.status().message());
  inv.amount_micros = *amount;
  inv.checkout_link = Text(j, "checkoutLink");
  if (auto m = j.find("metadata"); m != j.end() && m->is_object()) {
    inv.order_id = Text(*m, "orderId");
  }
  inv.created_at = UnixSeconds(j, "createdTime");
  inv.expires_at = UnixSeconds(j, "expirationTime");
  return inv;
}

Result<std::vector<ProcessorPayment>> ParseInvoicePaymentMethodsJson(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_array()) return Malformed("payment methods must be a JSON array");
  if (j.size() > kMaxPaymentMethods) return Malformed("too many payment methods");
  std::vector<ProcessorPayment> out;
  for (const auto& method : j) {
    if (!method.is_object()) return Malformed("a payment method must be an object");
    // 2.x: paymentMethodId + currency; 1.x: paymentMethod + cryptoCode.
    std::string method_id = Text(method, "paymentMethodId");
    if (method_id.empty()) method_id = Text(method, "paymentMethod");
    std::string crypto = Text(method, "currency");
    if (crypto.empty()) crypto = Text(method, "cryptoCode");
    std::string rate = DecimalText(method, "rate");
    auto payments = method.find("payments");
    if (payments == method.end() || payments->is_null()) continue;
    if (!payments->is_array()) return Malformed("payments must be an array");
    for (const auto& p : *payments) {
      if (!p.is_object()) return Malformed("a payment must be an object");
      if (out.size() >= kMaxPaymentsPerInvoice) return Malformed("too many payments");
      ProcessorPayment payment;
      payment.id = Text(p, "id");
      if (!ValidId(payment.id)) return Malformed("payment without a valid id");
      payment.payment_method_id = method_id;
      payment.crypto_currency = crypto;
      auto status = ParsePaymentStatus(Text(p, "status"));
      if (!status.ok()) return Malformed(status.status().message());
      payment.status = *status;
      payment.value = DecimalText(p, "value");
      payment.fee = DecimalText(p, "fee");
      if (payment.fee.empty()) payment.fee = "0";
      payment.rate = rate;
      auto fiat = PaymentFiatMicros(payment.value, payment.fee, payment.rate);
      if (!fiat.ok()) return Malformed("payment " + payment.id + ": " + fiat.status().message());
      payment.fiat_micros = *fiat;
      payment.received_at = UnixSeconds(p, "receivedDate");
      out.push_back(std::move(payment));
    }
  }
  return out;
}

Result<std::vector<PaymentMethod>> ParseStorePaymentMethodsJson(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_array()) return Malformed("store payment methods must be a JSON array");
  if (j.size() > kMaxPaymentMethods) return Malformed("too many payment methods");
  std::vector<PaymentMethod> out;
  for (const auto& m : j) {
    if (!m.is_object()) return Malformed("a payment method must be an object");
    PaymentMethod method;
    method.id = Text(m, "paymentMethodId");
    if (method.id.empty()) method.id = Text(m, "paymentMethod");
    if (!ValidId(method.id)) return Malformed("payment method without a valid id");
    auto enabled = m.find("enabled");
    method.enabled = enabled != m.end() && enabled->is_boolean() && enabled->get<bool>();
    out.push_back(std::move(method));
  }
  return out;
}

std::string PaymentMethodLabel(std::string_view id) {
  std::size_t dash = id.find('-');
  std::string coin(id.substr(0, dash));
  if (dash == std::string_view::npos) return coin;
  std::string kind(id.substr(dash + 1));
  if (kind == "CHAIN") return coin;
  if (kind == "LN" || kind == "LNURL" || kind == "LightningNetwork") return coin + " (Lightning)";
  return coin + " (" + kind + ")";
}

GreenfieldClient::GreenfieldClient(GreenfieldConfig config) : config_(std::move(config)) {}

Result<GreenfieldClient::Reply> GreenfieldClient::Call(std::string method, std::string target,
                                                       std::string body) const {
  net::ClientOptions options;
  options.timeout = config_.timeout_ms > 0 ? std::chrono::milliseconds(config_.timeout_ms)
                                           : kGreenfieldTimeout;
  options.max_response_bytes = kMaxGreenfieldResponseBytes;
  options.ca_file = config_.ca_file;
  net::Request request;
  if (method == "GET") {
    request.method = "GET";
    request.target = std::move(target);
  } else {
    request = net::Request::Json(std::move(method), std::move(target), std::move(body));
  }
  request.With("Authorization", "token " + config_.api_key);
  request.With("Accept", "application/json");
  auto response = net::Fetch(config_.base_url, request, options);
  if (!response.ok()) {
    // net's messages name the URL and what failed, never the headers.
    return Status::Unavailable("BTCPay Server is unreachable: " + response.status().message());
  }
  Reply reply{response->status, std::move(response->body)};
  if (reply.status >= 200 && reply.status < 300) return reply;
  std::string why = ErrorMessage(reply.body);
  std::string said = " (HTTP " + std::to_string(reply.status) + (why.empty() ? "" : ": " + why) + ")";
  if (reply.status == 401 || reply.status == 403) {
    return Status::FailedPrecondition(
        "BTCPay Server refused gpuhub's API key" + said +
        ": the key needs the store's invoice permissions (btcpay.store.cancreateinvoice, "
        "btcpay.store.canviewinvoices, btcpay.store.canviewstoresettings)");
  }
  if (reply.status == 404) return Status::NotFound("BTCPay Server has no such object" + said);
  if (reply.status == 400 || reply.status == 422) {
    return Status::InvalidArgument("BTCPay Server refused the request" + said);
  }
  return Status::Unavailable("BTCPay Server failed" + said);
}

Result<ProcessorInvoice> GreenfieldClient::CreateInvoice(const CreateInvoiceRequest& r) const {
  json body = {
      {"amount", FormatMicros(r.amount_micros, 2)},
      {"currency", std::string(CurrencyCode(r.currency))},
      {"metadata",
       {{"orderId", r.order_id},
        {"itemDesc", "gpuhub balance top-up"},
        {"gpuhubUserId", r.user_id}}},
      {"checkout",
       {{"expirationMinutes",
         r.expiration_minutes > 0 ? r.expiration_minutes : kDefaultInvoiceExpirationMinutes}}}};
  if (!r.redirect_url.empty()) body["checkout"]["redirectURL"] = r.redirect_url;
  GPUHUB_ASSIGN_OR_RETURN(
      Reply reply, Call("POST", "/api/v1/stores/" + config_.store_id + "/invoices", body.dump()));
  GPUHUB_ASSIGN_OR_RETURN(ProcessorInvoice inv, ParseInvoiceJson(reply.body));
  if (inv.checkout_link.empty()) return Malformed("a new invoice without checkoutLink");
  if (inv.currency != r.currency || inv.amount_micros != r.amount_micros) {
    return Malformed("the new invoice's amount or currency differs from the request");
  }
  return inv;
}

Result<ProcessorInvoice> GreenfieldClient::GetInvoice(std::string_view invoice_id) const {
  if (!ValidId(invoice_id)) return Status::InvalidArgument("not a BTCPay invoice id");
  std::string base = "/api/v1/stores/" + config_.store_id + "/invoices/" + std::string(invoice_id);
  GPUHUB_ASSIGN_OR_RETURN(Reply invoice, Call("GET", base, ""));
  GPUHUB_ASSIGN_OR_RETURN(ProcessorInvoice inv, ParseInvoiceJson(invoice.body));
  if (inv.id != invoice_id) return Malformed("asked for one invoice, got another");
  GPUHUB_ASSIGN_OR_RETURN(Reply methods,
                          Call("GET", base + "/payment-methods?onlyAccountedPayments=false", ""));
  GPUHUB_ASSIGN_OR_RETURN(inv.payments, ParseInvoicePaymentMethodsJson(methods.body));
  return inv;
}

Result<std::vector<PaymentMethod>> GreenfieldClient::ListPaymentMethods() const {
  GPUHUB_ASSIGN_OR_RETURN(
      Reply reply,
      Call("GET", "/api/v1/stores/" + config_.store_id + "/payment-methods?onlyEnabled=true", ""));
  return ParseStorePaymentMethodsJson(reply.body);
}

}  // namespace gpuhub::payments
