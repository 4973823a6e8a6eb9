// A fake BTCPay Server for tests: the Greenfield endpoints gpuhub calls, answered with the fields,
// statuses and shapes BTCPay Server 2.4.1 documents (BTCPayServer/wwwroot/swagger/v1/
// swagger.template.invoices.json, ...stores-payment-methods.json, ...webhooks.json), on
// 127.0.0.1 with a port of its own.
//
//   POST /api/v1/stores/{storeId}/invoices                         create (InvoiceData)
//   GET  /api/v1/stores/{storeId}/invoices/{invoiceId}             InvoiceData
//   GET  /api/v1/stores/{storeId}/invoices/{invoiceId}/payment-methods
//   GET  /api/v1/stores/{storeId}/payment-methods                  GenericPaymentMethodData[]
// Every call needs `Authorization: token <api key>` (401 ProblemDetails otherwise).
//
// Test control (never part of BTCPay): C++ methods, and the same over HTTP for browser tests:
//   POST /test/invoices/{id}/payments  {"id","method","value","rate","status"}  add or update
//   POST /test/invoices/{id}/status    {"status","additionalStatus"}
//   POST /test/invoices/{id}/webhook   {"type", ...extra fields}  sends a signed delivery
// Webhooks go to `webhook_url` signed like BTCPay (BTCPay-Sig: sha256=HMAC(secret, body)).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace gpuhub::testing {

class FakeBtcpay {
 public:
  struct Payment {
    std::string id;
    std::string method = "BTC-CHAIN";
    std::string value;           // crypto
    std::string rate = "50000";  // invoice currency per coin
    std::string status = "Processing";
    long long received = 0;
  };
  struct Invoice {
    std::string id;
    std::string amount;
    std::string currency;
    nlohmann::json metadata;
    std::string status = "New";
    std::string additional = "None";
    long long created = 0;
    long long expires = 0;
    std::vector<Payment> payments;
  };

  FakeBtcpay(std::string store_id, std::string api_key, std::string webhook_secret);
  ~FakeBtcpay();
  bool Start();  // listens on 127.0.0.1:0
  void Stop();   // closes the listener: calls fail as if the server were down
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set_webhook_url(std::string url) { webhook_url_ = std::move(url); }
  // Every 5xx: answers 503 to every Greenfield call while true.
  void set_failing(bool failing) { failing_ = failing; }
  // Creating an invoice takes this long (0: at once).
  void set_create_delay_ms(int ms) { create_delay_ms_ = ms; }

  // Control.
  std::vector<Invoice> Invoices();
  bool Find(const std::string& id, Invoice* out);
  void SetPayment(const std::string& invoice, const Payment& payment);
  void SetStatus(const std::string& invoice, const std::string& status,
                 const std::string& additional);
  // Sends one signed delivery of `type` about `invoice`; returns gpuhub's HTTP status and body.
  // `extra` fields are added to the event (afterExpiration, payment, ...).
  std::pair<int, std::string> SendWebhook(const std::string& invoice, const std::string& type,
                                          nlohmann::json extra = nlohmann::json::object(),
                                          std::string delivery_id = "");
  // Requests seen, as "METHOD target" (for asserting what gpuhub called).
  std::vector<std::string> Requests();
  // Authorization headers seen (to check the key is sent as `token <key>`).
  std::vector<std::string> AuthorizationHeaders();

 private:
  void Serve(int fd);
  std::pair<int, std::string> Handle(const std::string& method, const std::string& target,
                                     const std::map<std::string, std::string>& headers,
                                     const std::string& body);
  nlohmann::json InvoiceJson(const Invoice& inv) const;
  nlohmann::json PaymentMethodsJson(const Invoice& inv) const;

  std::string store_id_;
  std::string api_key_;
  std::string secret_;
  std::string webhook_url_;
  std::atomic<bool> failing_{false};
  std::atomic<int> create_delay_ms_{0};
  std::atomic<int> listen_fd_{-1};
  int port_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::map<std::string, Invoice> invoices_;
  std::vector<std::string> requests_;
  std::vector<std::string> authorizations_;
  int next_id_ = 1;
  int next_delivery_ = 1;
};

}  // namespace gpuhub::testing
