// Top-ups through BTCPay Server, every payment outcome, against the fake BTCPay Server
// (fake_btcpay.h) and a real `gpuhub serve` on SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include <thread>

#include "fake_btcpay.h"
#include "harness.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kSecret = "whsec_test_secret_0123456789abcdef";
constexpr const char* kStore = "9CiNzKoANXxmk5ayZngSXrHTiVvvgCrwrpFQd4m2K776";
constexpr const char* kApiKey = "gf-api-key-1f8e2d7c-must-never-leak";

class PaymentsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    db_ = FreshDatabaseUrl(GetParam(), dir_);
    if (db_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
    btcpay_ = std::make_unique<FakeBtcpay>(kStore, kApiKey, kSecret);
    ASSERT_TRUE(btcpay_->Start());
    ServerOptions options;
    options.db = db_;
    options.payments_extra = "btcpay_url = \"" + btcpay_->url() + "\"\nstore_id = \"" + kStore +
                             "\"\napi_key = \"" + kApiKey + "\"\nreconcile_interval_seconds = 3600\n";
    ASSERT_EQ(CreateAdmin(dir_, options).exit_code, 0);
    server_ = std::make_unique<ServerProcess>(dir_, options);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
    btcpay_->set_webhook_url("http://127.0.0.1:" + std::to_string(server_->port()));
    token_ = SignUpAndLogIn(*client_, "payer");
    ASSERT_FALSE(token_.empty());
  }

  // A top-up through gpuhub; returns (our invoice, BTCPay's invoice id).
  std::pair<json, std::string> TopUp(const std::string& amount, const std::string& currency = "EUR") {
    auto r = client_->Call("POST", "/v1/topups", {{"amount", amount}, {"currency", currency}}, token_);
    EXPECT_EQ(r.status, 201) << r.body;
    json inv = r.Json();
    return {inv, inv.value("processor_invoice_id", "")};
  }
  void Pay(const std::string& invoice, const std::string& id, const std::string& value,
           const std::string& status, const std::string& rate = "50000") {
    FakeBtcpay::Payment p;
    p.id = id;
    p.value = value;
    p.status = status;
    p.rate = rate;
    btcpay_->SetPayment(invoice, p);
  }
  json Hook(const std::string& invoice, const std::string& type, const std::string& delivery = "") {
    auto [status, body] = btcpay_->SendWebhook(invoice, type, json::object(), delivery);
    EXPECT_EQ(status, 200) << body;
    return json::parse(body, nullptr, false);
  }
  std::string Available(const std::string& currency = "EUR") {
    auto wallets = client_->Call("GET", "/v1/wallets", nullptr, token_);
    json all = wallets.Json();
    for (const auto& w : all["wallets"]) {
      if (w["currency"] == currency) return w["available"];
    }
    return "? " + wallets.body;
  }
  json Topup(const std::string& id) {
    return client_->Call("GET", "/v1/topups/" + id, nullptr, token_).Json();
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<FakeBtcpay> btcpay_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::string token_;
};

TEST_P(PaymentsTest, ATopUpCreatesABtcpayInvoiceAndTheSettledPaymentCreditsOnce) {
  auto [inv, btcpay_id] = TopUp("100.00");
  EXPECT_EQ(inv["processor"], "btcpay");
  EXPECT_EQ(inv["checkout_url"], btcpay_->url() + "/i/" + btcpay_id);
  FakeBtcpay::Invoice at_btcpay;
  ASSERT_TRUE(btcpay_->Find(btcpay_id, &at_btcpay));
  EXPECT_EQ(at_btcpay.amount, "100.00");
  EXPECT_EQ(at_btcpay.currency, "EUR");
  EXPECT_EQ(at_btcpay.metadata["orderId"], inv["invoice_id"]);
  EXPECT_EQ(at_btcpay.expires - at_btcpay.created, 60 * 60);
  for (const auto& auth : btcpay_->AuthorizationHeaders()) EXPECT_EQ(auth, std::string("token ") + kApiKey);

  Pay(btcpay_id, "tx1-0", "0.002", "Processing");
  btcpay_->SetStatus(btcpay_id, "Processing", "None");
  json received = Hook(btcpay_id, "InvoiceReceivedPayment");
  EXPECT_EQ(received["credited"], false);  // not confirmed yet
  EXPECT_EQ(Available(), "0.000000");
  Pay(btcpay_id, "tx1-0", "0.002", "Settled");
  btcpay_->SetStatus(btcpay_id, "Settled", "None");
  json settled = Hook(btcpay_id, "InvoiceSettled");
  EXPECT_EQ(settled["credited"], true) << settled;
  EXPECT_EQ(settled["credited_total"], "100.00");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Hook(btcpay_id, "InvoicePaymentSettled")["credited"], false);
  EXPECT_EQ(Available(), "100.000000");
  json got = Topup(inv["invoice_id"]);
  EXPECT_EQ(got["status"], "settled");
  ASSERT_EQ(got["payments"].size(), 1u);
  EXPECT_EQ(got["payments"][0]["payment_id"], "tx1-0");
  EXPECT_EQ(got["payments"][0]["amount"], "100.00");
  EXPECT_EQ(got["payments"][0]["state"], "credited");
  EXPECT_NE(got["payments"][0]["source"].get<std::string>().find("webhook:Dlv"), std::string::npos);
  // The delivery id is logged with each credit.
  EXPECT_NE(server_->Log().find("event=payment_credited invoice=" + inv["invoice_id"].get<std::string>()),
            std::string::npos);
}

TEST_P(PaymentsTest, PartialOverLateAndExpiredCreditWhatArrived) {
  auto [partial, p_id] = TopUp("100.00");
  Pay(p_id, "a-0", "0.0008", "Settled");  // 40.00 at 50,000
  btcpay_->SetStatus(p_id, "Expired", "PaidPartial");
  EXPECT_EQ(Hook(p_id, "InvoiceExpired")["credited_total"], "40.00");
  EXPECT_EQ(Topup(partial["invoice_id"])["status"], "expired");
  EXPECT_EQ(Topup(partial["invoice_id"])["additional_status"], "PaidPartial");
  // Late: the rest arrives after expiry, BTCPay keeps it Expired/PaidLate: still credited.
  Pay(p_id, "b-0", "0.0012", "Settled");
  btcpay_->SetStatus(p_id, "Expired", "PaidLate");
  EXPECT_EQ(Hook(p_id, "InvoiceReceivedPayment")["credited_total"], "100.00");
  EXPECT_EQ(Available(), "100.000000");

  auto [over, o_id] = TopUp("50.00");
  Pay(o_id, "c-0", "0.0013", "Settled");  // 65.00
  btcpay_->SetStatus(o_id, "Settled", "PaidOver");
  EXPECT_EQ(Hook(o_id, "InvoiceSettled")["credited_total"], "65.00");
  EXPECT_EQ(Available(), "165.000000");

  auto [expired, e_id] = TopUp("20.00");
  btcpay_->SetStatus(e_id, "Expired", "None");
  json nothing = Hook(e_id, "InvoiceExpired");
  EXPECT_EQ(nothing["credited"], false);
  EXPECT_EQ(Topup(expired["invoice_id"])["status"], "expired");
  EXPECT_EQ(Available(), "165.000000");
}

TEST_P(PaymentsTest, InvalidHoldsTheCreditUntilAnAdminDecides) {
  auto [inv, id] = TopUp("100.00");
  Pay(id, "x-0", "0.0016", "Processing");  // 80.00, never confirmed
  Pay(id, "y-0", "0.0004", "Settled");     // 20.00
  btcpay_->SetStatus(id, "Invalid", "None");
  json held = Hook(id, "InvoiceInvalid");
  EXPECT_EQ(held["held_total"], "100.00");
  EXPECT_EQ(Available(), "0.000000");
  std::string admin = LogInAdmin(*client_);
  ASSERT_FALSE(admin.empty());
  auto list = client_->Call("GET", "/v1/admin/payments/held", nullptr, admin);
  ASSERT_EQ(list.status, 200) << list.body;
  ASSERT_EQ(list.Json()["held"].size(), 2u);
  EXPECT_EQ(list.Json()["held"][0]["username"], "payer");
  std::string path = "/v1/admin/topups/" + inv["invoice_id"].get<std::string>() + "/payments/";
  EXPECT_EQ(client_->Call("POST", path + "2", {{"decision", "release"}, {"reason", "20 EUR confirmed"}}, admin).status, 200);
  EXPECT_EQ(client_->Call("POST", path + "1", {{"decision", "refuse"}, {"reason", "double spent"}}, admin).status, 200);
  auto twice = client_->Call("POST", path + "1", {{"decision", "release"}, {"reason", "x"}}, admin);
  EXPECT_EQ(twice.status, 409) << twice.body;
  auto bad = client_->Call("POST", path + "1", {{"decision", "maybe"}, {"reason", "x"}}, admin);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["error"]["field"], "decision");
  EXPECT_EQ(client_->Call("POST", path + "1", {{"decision", "release"}, {"reason", "x"}}, token_).status, 403);
  EXPECT_EQ(Available(), "20.000000");
  // Both decisions are in the payer's audit log, by the admin (docs/api.md, "Audit log").
  auto audit = client_->Call("GET", "/v1/audit-log?limit=2", nullptr, token_);
  ASSERT_EQ(audit.status, 200) << audit.body;
  json events = audit.Json()["events"];
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["kind"], "admin_payment_decision");
  EXPECT_EQ(events[0]["detail"]["decision"], "refuse");
  EXPECT_EQ(events[0]["detail"]["reason"], "double spent");
  EXPECT_EQ(events[1]["detail"]["decision"], "release");
  EXPECT_EQ(events[1]["detail"]["invoice_id"], inv["invoice_id"]);
  EXPECT_EQ(events[1]["actor"].get<std::string>().rfind("admin:", 0), 0u) << events[1];
}

// Retries of one top-up (one Idempotency-Key) arriving while BTCPay is still creating the first
// one's invoice: the key is reserved before the outbound call, so BTCPay is asked once and every
// retry waits for the first and replays its answer.
TEST_P(PaymentsTest, ConcurrentRetriesOfATopUpCreateOneBtcpayInvoice) {
  auto creates = [&] {
    int n = 0;
    for (const auto& r : btcpay_->Requests()) {
      n += r == std::string("POST /api/v1/stores/") + kStore + "/invoices" ? 1 : 0;
    }
    return n;
  };
  btcpay_->set_create_delay_ms(400);
  json body = {{"amount", "25.00"}, {"currency", "USD"}};
  std::vector<HttpResponse> answers(5);
  std::vector<std::thread> retries;
  for (std::size_t i = 0; i < answers.size(); ++i) {
    retries.emplace_back([&, i] {
      HttpClient c(server_->port());
      answers[i] = c.Call("POST", "/v1/topups", body, token_, "topup-same-key");
    });
  }
  for (auto& t : retries) t.join();
  EXPECT_EQ(creates(), 1) << "BTCPay was asked for more than one invoice";
  int replayed = 0;
  for (const auto& a : answers) {
    ASSERT_EQ(a.status, 201) << a.body;
    EXPECT_EQ(a.Json()["invoice_id"], answers[0].Json()["invoice_id"]);
    replayed += a.Header("idempotent-replayed") == "true" ? 1 : 0;
  }
  EXPECT_EQ(replayed, 4);
  EXPECT_EQ(client_->Call("GET", "/v1/topups", nullptr, token_).Json()["topups"].size(), 1u);

  // BTCPay failing: the first answers 503 and records nothing; the retries that waited try
  // themselves (nothing to replay) and fail the same way; once BTCPay is back one retry creates.
  btcpay_->set_failing(true);
  btcpay_->set_create_delay_ms(0);
  const int before = creates();
  std::vector<int> statuses(3);
  retries.clear();
  for (std::size_t i = 0; i < statuses.size(); ++i) {
    retries.emplace_back([&, i] {
      HttpClient c(server_->port());
      statuses[i] = c.Call("POST", "/v1/topups", body, token_, "topup-key-2").status;
    });
  }
  for (auto& t : retries) t.join();
  for (int s : statuses) EXPECT_EQ(s, 503);
  EXPECT_EQ(creates(), before + 3);  // each tried once, one after the other
  btcpay_->set_failing(false);
  auto ok = client_->Call("POST", "/v1/topups", body, token_, "topup-key-2");
  ASSERT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(creates(), before + 4);
  EXPECT_EQ(client_->Call("POST", "/v1/topups", body, token_, "topup-key-2").Header("idempotent-replayed"), "true");
  EXPECT_EQ(creates(), before + 4);
  EXPECT_EQ(client_->Call("GET", "/v1/topups", nullptr, token_).Json()["topups"].size(), 2u);
}

// BTCPay calls a payment Invalid after it was credited and spent: the wallet cannot cover the
// debit, so it goes on hold (no purchase, the account is told) until an admin debits it back
// once the balance allows, or writes it off.
TEST_P(PaymentsTest, APaymentReversedAfterItWasCreditedAndSpentHoldsTheWalletForAnAdmin) {
  auto [inv, id] = TopUp("100.00");
  Pay(id, "r-0", "0.002", "Settled");
  btcpay_->SetStatus(id, "Settled", "None");
  EXPECT_EQ(Hook(id, "InvoiceSettled")["credited"], true);
  std::string admin = LogInAdmin(*client_);
  ASSERT_EQ(client_->Call("PUT", "/v1/admin/fx-rates/EUR/USD", {{"rate", "1.08"}, {"spread_bps", 0}}, admin).status, 200);
  ASSERT_EQ(client_->Call("POST", "/v1/conversions", {{"from", "EUR"}, {"to", "USD"}, {"amount", "80"}}, token_).status, 201);
  EXPECT_EQ(Available(), "20.000000");

  Pay(id, "r-0", "0.002", "Invalid");  // a double spend: the coins never arrived after all
  btcpay_->SetStatus(id, "Invalid", "None");
  json reversed = Hook(id, "InvoiceInvalid");
  ASSERT_EQ(reversed["changes"].size(), 1u) << reversed;
  EXPECT_EQ(reversed["changes"][0]["state"], "reversal_pending");
  EXPECT_EQ(Available(), "20.000000");  // nothing taken: it could not all be
  EXPECT_NE(server_->Log().find("level=error event=wallet_hold_placed invoice=" + inv["invoice_id"].get<std::string>()),
            std::string::npos);
  json profile = client_->Call("GET", "/v1/billing-profile", nullptr, token_).Json();
  ASSERT_TRUE(profile["wallet_hold"].is_object()) << profile;
  EXPECT_NE(profile["wallet_hold"]["reason"].get<std::string>().find("reversed by the payment processor"),
            std::string::npos);
  auto bid = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, token_);
  EXPECT_EQ(bid.status, 409) << bid.body;
  EXPECT_NE(bid.Json()["error"]["message"].get<std::string>().find("on hold"), std::string::npos);
  EXPECT_EQ(Hook(id, "InvoiceInvalid")["changes"].size(), 0u);  // decided once

  auto held = client_->Call("GET", "/v1/admin/payments/held", nullptr, admin).Json();
  ASSERT_EQ(held["held"].size(), 1u) << held;
  EXPECT_EQ(held["held"][0]["state"], "reversal_pending");
  std::string path = "/v1/admin/topups/" + inv["invoice_id"].get<std::string>() + "/payments/1";
  auto too_early = client_->Call("POST", path, {{"decision", "debit"}, {"reason", "take it back"}}, admin);
  EXPECT_EQ(too_early.status, 402) << too_early.body;
  EXPECT_EQ(client_->Call("POST", path, {{"decision", "release"}, {"reason", "x"}}, admin).status, 409);
  // The customer pays by bank transfer; the admin debits the reversed payment back.
  ASSERT_EQ(client_->Call("POST", "/v1/admin/credits",
                          {{"username", "payer"}, {"amount", "100"}, {"currency", "EUR"}, {"reason", "bank transfer"}},
                          admin).status,
            201);
  auto debited = client_->Call("POST", path, {{"decision", "debit"}, {"reason", "paid by bank"}}, admin);
  ASSERT_EQ(debited.status, 200) << debited.body;
  EXPECT_EQ(debited.Json()["state"], "reversed");
  EXPECT_EQ(Available(), "20.000000");
  EXPECT_TRUE(client_->Call("GET", "/v1/billing-profile", nullptr, token_).Json()["wallet_hold"].is_null());
  EXPECT_NE(client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}}, token_).status, 409);
  json ledger = client_->Call("GET", "/v1/admin/ledger", nullptr, admin).Json();
  EXPECT_EQ(ledger["invariants"], "ok") << ledger;
}

TEST_P(PaymentsTest, DuplicatesAndOutOfOrderEventsCreditOnce) {
  auto [inv, id] = TopUp("30.00");
  Pay(id, "z-0", "0.0006", "Settled");
  btcpay_->SetStatus(id, "Settled", "None");
  // InvoiceSettled first, then the events that came before it, then redeliveries.
  EXPECT_EQ(Hook(id, "InvoiceSettled", "D-9")["credited"], true);
  EXPECT_EQ(Hook(id, "InvoiceReceivedPayment", "D-1")["credited"], false);
  EXPECT_EQ(Hook(id, "InvoiceProcessing", "D-2")["credited"], false);
  EXPECT_EQ(Hook(id, "InvoiceSettled", "D-9")["credited"], false);
  std::vector<std::thread> racers;
  for (int i = 0; i < 8; ++i) racers.emplace_back([&] { btcpay_->SendWebhook(id, "InvoicePaymentSettled"); });
  for (auto& t : racers) t.join();
  EXPECT_EQ(Available(), "30.000000");
  int topup_transfers = 0;
  for (const auto& t : AllTransfers(*client_, token_)) topup_transfers += t["code"] == "topup" ? 1 : 0;
  EXPECT_EQ(topup_transfers, 1);
}

TEST_P(PaymentsTest, ALostWebhookIsCreditedByTheReconciliationPass) {
  auto [inv, id] = TopUp("75.00");
  Pay(id, "lost-0", "0.0015", "Settled");
  btcpay_->SetStatus(id, "Settled", "None");  // no webhook at all
  std::string admin = LogInAdmin(*client_);
  auto pass = client_->Call("POST", "/v1/admin/payments/reconcile", json::object(), admin);
  ASSERT_EQ(pass.status, 200) << pass.body;
  EXPECT_EQ(pass.Json()["credits"], 1);
  EXPECT_EQ(Available(), "75.000000");
  auto again = client_->Call("POST", "/v1/admin/payments/reconcile", json::object(), admin);
  EXPECT_EQ(again.Json()["credits"], 0);  // settled: no longer read back
  EXPECT_EQ(Available(), "75.000000");
  std::string log = server_->Log();
  EXPECT_NE(log.find("event=payment_credited invoice=" + inv["invoice_id"].get<std::string>()), std::string::npos);
  EXPECT_NE(log.find("source=reconciliation"), std::string::npos);
  std::string metrics = client_->Send("GET", "/metrics").body;
  EXPECT_NE(metrics.find("gpuhub_payments_credits_total{source=\"reconciliation\"} 1"), std::string::npos) << metrics;
  EXPECT_EQ(client_->Call("POST", "/v1/admin/payments/reconcile", json::object(), token_).status, 403);
}

TEST_P(PaymentsTest, BtcpayDownAtCreationIsAClear503AndNothingIsRecorded) {
  btcpay_->Stop();
  auto r = client_->Call("POST", "/v1/topups", {{"amount", "10.00"}, {"currency", "USD"}}, token_);
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.Json()["error"]["message"].get<std::string>().find("BTCPay"), std::string::npos);
  EXPECT_EQ(client_->Call("GET", "/v1/topups", nullptr, token_).Json()["topups"].size(), 0u);
  auto methods = client_->Call("GET", "/v1/payments/methods");
  EXPECT_EQ(methods.status, 503);
}

TEST_P(PaymentsTest, ForgedMalformedAndUnknownWebhooks) {
  auto [inv, id] = TopUp("10.00");
  // Signed with another secret, or unsigned: 401, nothing read, nothing credited.
  std::string body = json{{"type", "InvoiceSettled"}, {"invoiceId", id}, {"storeId", kStore}}.dump();
  auto forged = client_->Send("POST", "/v1/payments/webhook", body,
                              {{"Content-Type", "application/json"}, {"BTCPay-Sig", WebhookSignature("wrong", body)}});
  EXPECT_EQ(forged.status, 401);
  EXPECT_EQ(client_->Send("POST", "/v1/payments/webhook", body, {{"Content-Type", "application/json"}}).status, 401);
  // Correctly signed but claiming money BTCPay never saw: the body is not trusted.
  auto claim = Hook(id, "InvoiceSettled");
  EXPECT_EQ(claim["credited"], false);
  EXPECT_EQ(Available(), "0.000000");
  // Malformed (signed): 400. Unknown invoice: 200, ignored.
  std::string bad = "{\"type\":";
  auto malformed = client_->Send("POST", "/v1/payments/webhook", bad,
                                 {{"Content-Type", "application/json"}, {"BTCPay-Sig", WebhookSignature(kSecret, bad)}});
  EXPECT_EQ(malformed.status, 400);
  json unknown = Hook("NoSuchInvoice", "InvoiceSettled");
  EXPECT_EQ(unknown["ignored"], true);
  EXPECT_NE(server_->Log().find("event=webhook_ignored"), std::string::npos);
}

TEST_P(PaymentsTest, TheApiKeyNeverShowsInLogsErrorsHealthOrMetrics) {
  TopUp("10.00");
  btcpay_->set_failing(true);
  auto r = client_->Call("POST", "/v1/topups", {{"amount", "10.00"}, {"currency", "USD"}}, token_);
  EXPECT_EQ(r.status, 503);
  btcpay_->set_failing(false);
  auto health = client_->Send("GET", "/healthz");
  EXPECT_EQ(health.Json()["details"]["payments"]["mode"], "btcpay");
  auto methods = client_->Call("GET", "/v1/payments/methods");
  ASSERT_EQ(methods.status, 200) << methods.body;
  EXPECT_EQ(methods.Json()["identity_check"], false);
  EXPECT_EQ(methods.Json()["methods"].size(), 4u);  // the enabled ones
  EXPECT_EQ(methods.Json()["methods"][1]["label"], "BTC (Lightning)");
  std::string admin = LogInAdmin(*client_);
  btcpay_->Stop();
  auto pass = client_->Call("POST", "/v1/admin/payments/reconcile", json::object(), admin);
  EXPECT_EQ(pass.Json()["failed"], 1);
  std::string everything = r.body + health.body + methods.body + pass.body +
                           client_->Send("GET", "/metrics").body;
  // Request lines are written up to a second late (batched): read the log once the server has
  // stopped and flushed them, so that a key in one of them cannot go unseen.
  ASSERT_EQ(server_->Terminate(), 0);
  everything += server_->Log();
  EXPECT_NE(everything.find("event=request "), std::string::npos) << "the log has the requests";
  EXPECT_EQ(everything.find(kApiKey), std::string::npos);
  EXPECT_EQ(everything.find("1f8e2d7c"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, PaymentsTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
