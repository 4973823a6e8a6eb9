#include "fake_btcpay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "net/http_client.h"
#include "payments/webhook.h"

namespace gpuhub::testing {
namespace {

using json = nlohmann::json;

long long NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

std::pair<int, std::string> Problem(int status, const std::string& code, const std::string& m) {
  return {status, json{{"code", code}, {"message", m}}.dump()};
}

}  // namespace

FakeBtcpay::FakeBtcpay(std::string store_id, std::string api_key, std::string webhook_secret)
    : store_id_(std::move(store_id)), api_key_(std::move(api_key)), secret_(std::move(webhook_secret)) {}

FakeBtcpay::~FakeBtcpay() { Stop(); }

bool FakeBtcpay::Start() {
  int sock = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
  if (::listen(sock, 64) != 0) return false;
  socklen_t len = sizeof addr;
  ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  listen_fd_ = sock;
  int fd = sock;
  thread_ = std::thread([this, fd] {
    while (true) {
      pollfd p{fd, POLLIN, 0};
      int ready = ::poll(&p, 1, 100);
      if (listen_fd_ < 0) return;
      if (ready <= 0) continue;
      int client = ::accept(fd, nullptr, nullptr);
      if (client < 0) continue;
      std::thread([this, client] { Serve(client); }).detach();
    }
  });
  return true;
}

void FakeBtcpay::Stop() {
  int fd = listen_fd_.exchange(-1);
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  if (fd >= 0) ::close(fd);
}

void FakeBtcpay::Serve(int fd) {
  std::string data;
  char buf[8192];
  std::size_t header_end = std::string::npos;
  while (header_end == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return (void)::close(fd);
    data.append(buf, static_cast<std::size_t>(n));
    header_end = data.find("\r\n\r\n");
  }
  std::string head = data.substr(0, header_end);
  std::string body = data.substr(header_end + 4);
  std::map<std::string, std::string> headers;
  std::size_t line_end = head.find("\r\n");
  std::string request_line = head.substr(0, line_end);
  std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    std::size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    std::size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      headers[Lower(line.substr(0, colon))] = value;
    }
    pos = e + 2;
  }
  std::size_t want = headers.count("content-length") ? std::stoul(headers["content-length"]) : 0;
  while (body.size() < want) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    body.append(buf, static_cast<std::size_t>(n));
  }
  std::size_t sp1 = request_line.find(' ');
  std::size_t sp2 = request_line.find(' ', sp1 + 1);
  std::string method = request_line.substr(0, sp1);
  std::string target = request_line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto [status, response] = Handle(method, target, headers, body);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n"
                    "Content-Length: " + std::to_string(response.size()) +
                    "\r\nConnection: close\r\n\r\n" + response;
  std::size_t sent = 0;
  while (sent < out.size()) {
    ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

json FakeBtcpay::InvoiceJson(const Invoice& inv) const {
  json available = json::array();
  if (inv.status == "Processing" || inv.status == "New") available = {"Settled", "Invalid"};
  return {{"id", inv.id},
          {"storeId", store_id_},
          {"amount", inv.amount},
          {"paidAmount", "0.00"},
          {"currency", inv.currency},
          {"type", "Standard"},
          {"checkoutLink", "http://127.0.0.1:" + std::to_string(port_) + "/i/" + inv.id},
          {"createdTime", inv.created},
          {"expirationTime", inv.expires},
          {"monitoringExpiration", inv.expires + 86400},
          {"status", inv.status},
          {"additionalStatus", inv.additional},
          {"availableStatusesForManualMarking", available},
          {"archived", false},
          {"metadata", inv.metadata},
          {"checkout", {{"speedPolicy", "MediumSpeed"}, {"expirationMinutes", (inv.expires - inv.created) / 60}}},
          {"receipt", {{"enabled", true}}}};
}

json FakeBtcpay::PaymentMethodsJson(const Invoice& inv) const {
  std::map<std::string, json> methods;
  std::vector<std::string> order{"BTC-CHAIN"};
  methods["BTC-CHAIN"] = {{"paymentMethodId", "BTC-CHAIN"}, {"currency", "BTC"},
                          {"destination", "bcrt1qfake"}, {"paymentLink", "bitcoin:bcrt1qfake"},
                          {"rate", "50000"}, {"paymentMethodPaid", "0"}, {"totalPaid", "0"},
                          {"due", "0"}, {"amount", "0"}, {"paymentMethodFee", "0"},
                          {"payments", json::array()}, {"activated", true},
                          {"additionalData", json::object()}};
  for (const auto& p : inv.payments) {
    if (!methods.count(p.method)) {
      order.push_back(p.method);
      methods[p.method] = {{"paymentMethodId", p.method}, {"currency", p.method.substr(0, p.method.find('-'))},
                           {"destination", "fake"}, {"rate", p.rate}, {"payments", json::array()},
                           {"activated", true}, {"paymentMethodFee", "0"}};
    }
    methods[p.method]["rate"] = p.rate;
    methods[p.method]["payments"].push_back({{"id", p.id},
                                             {"receivedDate", p.received},
                                             {"value", p.value},
                                             {"fee", "0"},
                                             {"status", p.status},
                                             {"destination", "fake"}});
  }
  json out = json::array();
  for (const auto& m : order) out.push_back(methods[m]);
  return out;
}

std::pair<int, std::string> FakeBtcpay::Handle(const std::string& method, const std::string& target,
                                               const std::map<std::string, std::string>& headers,
                                               const std::string& body) {
  std::string path = target.substr(0, target.find('?'));
  auto seg = Segments(path);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    requests_.push_back(method + " " + target);
  }
  // Test control.
  if (seg.size() == 4 && seg[0] == "test" && seg[1] == "invoices") {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object()) return Problem(400, "bad", "json object");
    if (seg[3] == "payments") {
      Payment p;
      p.id = j.value("id", "");
      p.method = j.value("method", "BTC-CHAIN");
      p.value = j.value("value", "0");
      p.rate = j.value("rate", "50000");
      p.status = j.value("status", "Processing");
      SetPayment(seg[2], p);
      return {200, "{}"};
    }
    if (seg[3] == "status") {
      SetStatus(seg[2], j.value("status", "New"), j.value("additionalStatus", "None"));
      return {200, "{}"};
    }
    if (seg[3] == "webhook") {
      std::string type = j.value("type", "");
      j.erase("type");
      auto [status, reply] = SendWebhook(seg[2], type, j);
      return {200, json{{"status", status}, {"body", reply}}.dump()};
    }
  }
  if (failing_) return Problem(503, "service-unavailable", "fake outage");
  auto auth = headers.find("authorization");
  {
    std::lock_guard<std::mutex> lock(mutex_);
    authorizations_.push_back(auth == headers.end() ? "" : auth->second);
  }
  if (auth == headers.end() || auth->second != "token " + api_key_) {
    return Problem(401, "unauthenticated", "Authentication is required for accessing this endpoint");
  }
  if (seg.size() < 4 || seg[0] != "api" || seg[1] != "v1" || seg[2] != "stores") {
    return Problem(404, "not-found", "unknown endpoint");
  }
  if (seg[3] != store_id_) return Problem(403, "unauthorized", "store");
  if (seg.size() == 5 && seg[4] == "invoices" && method == "POST" && create_delay_ms_ > 0) {
    // A slow BTCPay: a second request of the same top-up can arrive meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(create_delay_ms_.load()));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (seg.size() == 5 && seg[4] == "payment-methods" && method == "GET") {
    return {200, json::array({{{"enabled", true}, {"paymentMethodId", "BTC-CHAIN"}, {"config", json::object()}},
                              {{"enabled", true}, {"paymentMethodId", "BTC-LN"}},
                              {{"enabled", true}, {"paymentMethodId", "XMR-CHAIN"}},
                              {{"enabled", true}, {"paymentMethodId", "USDT-TRON"}},
                              {{"enabled", false}, {"paymentMethodId", "LTC-CHAIN"}}})
                     .dump()};
  }
  if (seg.size() == 5 && seg[4] == "invoices" && method == "POST") {
    json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("amount") || !j["amount"].is_string()) {
      return {400, json::array({{{"path", "amount"}, {"message", "amount must be a decimal string"}}}).dump()};
    }
    Invoice inv;
    inv.id = "FakeInv" + std::to_string(next_id_++) + "x" + std::to_string(port_);
    inv.amount = j["amount"].get<std::string>();
    inv.currency = j.value("currency", "USD");
    inv.metadata = j.value("metadata", json::object());
    inv.created = NowSeconds();
    long long minutes = 15;
    if (j.contains("checkout") && j["checkout"].contains("expirationMinutes")) {
      minutes = j["checkout"]["expirationMinutes"].get<long long>();
    }
    inv.expires = inv.created + minutes * 60;
    invoices_[inv.id] = inv;
    return {200, InvoiceJson(inv).dump()};
  }
  if (seg.size() >= 6 && seg[4] == "invoices" && method == "GET") {
    auto it = invoices_.find(seg[5]);
    if (it == invoices_.end()) return Problem(404, "invoice-not-found", "The invoice was not found");
    if (seg.size() == 6) return {200, InvoiceJson(it->second).dump()};
    if (seg.size() == 7 && seg[6] == "payment-methods") {
      return {200, PaymentMethodsJson(it->second).dump()};
    }
  }
  return Problem(404, "not-found", "unknown endpoint");
}

std::vector<FakeBtcpay::Invoice> FakeBtcpay::Invoices() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Invoice> out;
  for (const auto& [id, inv] : invoices_) out.push_back(inv);
  return out;
}

bool FakeBtcpay::Find(const std::string& id, Invoice* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = invoices_.find(id);
  if (it == invoices_.end()) return false;
  *out = it->second;
  return true;
}

void FakeBtcpay::SetPayment(const std::string& invoice, const Payment& payment) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& inv = invoices_[invoice];
  for (auto& p : inv.payments) {
    if (p.id == payment.id) {
      p = payment;
      if (!p.received) p.received = NowSeconds();
      return;
    }
  }
  inv.payments.push_back(payment);
  if (!inv.payments.back().received) inv.payments.back().received = NowSeconds();
}

void FakeBtcpay::SetStatus(const std::string& invoice, const std::string& status,
                           const std::string& additional) {
  std::lock_guard<std::mutex> lock(mutex_);
  invoices_[invoice].status = status;
  invoices_[invoice].additional = additional;
}

std::pair<int, std::string> FakeBtcpay::SendWebhook(const std::string& invoice,
                                                    const std::string& type, json extra,
                                                    std::string delivery_id) {
  json event;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (delivery_id.empty()) delivery_id = "Dlv" + std::to_string(next_delivery_++);
    json metadata = invoices_.count(invoice) ? invoices_[invoice].metadata : json::object();
    event = {{"deliveryId", delivery_id}, {"webhookId", "Whk1"}, {"originalDeliveryId", delivery_id},
             {"isRedelivery", false}, {"type", type}, {"timestamp", NowSeconds()},
             {"storeId", store_id_}, {"invoiceId", invoice}, {"metadata", metadata}};
  }
  for (auto& [k, v] : extra.items()) event[k] = v;
  std::string body = event.dump();
  net::Request request = net::Request::Json("POST", "/v1/payments/webhook", body);
  request.With("BTCPay-Sig", payments::WebhookSignature(secret_, body));
  request.With("User-Agent", "BTCPayServer");
  auto response = net::Fetch(webhook_url_, request);
  if (!response.ok()) return {0, response.status().ToString()};
  return {response->status, response->body};
}

std::vector<std::string> FakeBtcpay::Requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

std::vector<std::string> FakeBtcpay::AuthorizationHeaders() {
  std::lock_guard<std::mutex> lock(mutex_);
  return authorizations_;
}

}  // namespace gpuhub::testing
