// Issue 25 (Hardening 2) through a real `gpuhub serve`: a request that used to end the process,
// authorization before validation on every admin route, repeated JSON names and unknown query
// parameters refused, and who may read /metrics.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

class HardeningTest : public ServerFixture {};

// One unauthenticated request with a trailer field of more than 64 KiB made Beast throw inside its
// read operation and the process died (losing the login and sign-up throttles with it).
TEST_P(HardeningTest, AnOversizedTrailerIs413AndTheServerLivesOn) {
  const std::string head =
      "POST /v1/size HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n";
  std::string one_field = head + "X-Big: " + std::string(70'000, 'v') + "\r\n\r\n";
  std::string reply = client_->Raw(one_field);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply.substr(0, 300);
  std::string many_fields = head;
  for (int i = 0; i < 80; ++i)
    many_fields += "X-T" + std::to_string(i) + ": " + std::string(1000, 't') + "\r\n";
  reply = client_->Raw(many_fields + "\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply.substr(0, 300);
  EXPECT_TRUE(server_->Running()) << server_->Log();
  EXPECT_EQ(client_->Send("GET", "/healthz").status, 200);
  EXPECT_EQ(Metric(client_->Send("GET", "/metrics").body, "gpuhub_http_handler_exceptions_total"),
            0);
}

// A customer calling an admin route got 400 with the route's field hints: every admin route now
// answers 403 before it reads the body or the query.
TEST_P(HardeningTest, EveryAdminRouteAnswers403BeforeReadingTheRequest) {
  std::string customer = User("mallory", {"customer"});
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"POST", "/v1/admin/credits"},
      {"POST", "/v1/admin/clock/advance"},
      {"PUT", "/v1/admin/fx-rates/EUR/USD"},
      {"DELETE", "/v1/admin/fx-rates/EUR/USD"},
      {"GET", "/v1/admin/ledger"},
      {"GET", "/v1/admin/invariants"},
      {"GET", "/v1/admin/billing"},
      {"GET", "/v1/admin/market"},
      {"GET", "/v1/admin/rentals"},
      {"GET", "/v1/admin/hosts"},
      {"POST", "/v1/admin/hosts/1/revoke"},
      {"GET", "/v1/admin/invoices"},
      {"GET", "/v1/admin/invoices/1"},
      {"POST", "/v1/admin/invoices/1/credit-notes"},
      {"GET", "/v1/admin/nodes"},
      {"POST", "/v1/admin/nodes"},
      {"DELETE", "/v1/admin/nodes/1"},
      {"POST", "/v1/admin/nodes/1/drain"},
      {"GET", "/v1/admin/nodes/1/agent"},
      {"POST", "/v1/admin/nodes/1/enrolment-tokens"},
      {"GET", "/v1/admin/payments/held"},
      {"POST", "/v1/admin/payments/reconcile"},
      {"GET", "/v1/admin/payouts"},
      {"POST", "/v1/admin/rentals/1/wipe"},
      {"POST", "/v1/admin/rentals/1/instance"},
      {"GET", "/v1/admin/storage"},
      {"GET", "/v1/admin/storage-hosts"},
      {"POST", "/v1/admin/storage-hosts"},
      {"POST", "/v1/admin/storage-hosts/1/drain"},
      {"POST", "/v1/admin/egress"},
      {"GET", "/v1/admin/tax-rates/changes"},
      {"POST", "/v1/admin/tax-rates"},
      {"POST", "/v1/admin/tax-rates/DE/close"},
      {"GET", "/v1/admin/tax-report"},
      {"POST", "/v1/admin/topups/x/payments/1"},
  };
  for (const auto& [method, path] : routes) {
    for (const std::string& suffix : {std::string(""), std::string("?bogus=1")}) {
      std::vector<std::pair<std::string, std::string>> headers = {
          {"Authorization", "Bearer " + customer}};
      std::string body;
      if (method != "GET" && method != "DELETE") {
        body = R"({"not_a_field": [1, 2], "amount": "x"})";
        headers.emplace_back("Content-Type", "application/json");
      }
      auto r = client_->Send(method, path + suffix, body, headers);
      EXPECT_EQ(r.status, 403) << method << " " << path << suffix << ": " << r.body;
      EXPECT_EQ(r.Json()["error"]["code"], "permission_denied") << r.body;
      EXPECT_EQ(r.body.find("not_a_field"), std::string::npos) << r.body;
      EXPECT_EQ(r.body.find("bogus"), std::string::npos) << r.body;
    }
  }
  // The admin still gets the routes' own answers: validation, then the work.
  auto bad = client_->Call("POST", "/v1/admin/credits", json::object(), admin_);
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(client_->Call("GET", "/v1/admin/invariants", nullptr, admin_).status, 200);
  EXPECT_EQ(client_->Call("GET", "/v1/admin/invariants?x=1", nullptr, admin_).status, 400);
}

TEST_P(HardeningTest, ARepeatedJsonNameIsRefusedNamingTheField) {
  std::string bob = User("bob", {"customer"});
  auto r = client_->Send(
      "POST", "/v1/accounts",
      R"({"username":"carol","username":"admin2","password":"purple monkey dishwasher"})",
      {{"Content-Type", "application/json"}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["field"], "username") << r.body;
  auto topup = client_->Send(
      "POST", "/v1/topups", R"({"amount":"1.00","currency":"USD","amount":"9000.00"})",
      {{"Content-Type", "application/json"}, {"Authorization", "Bearer " + bob}});
  EXPECT_EQ(topup.status, 400) << topup.body;
  EXPECT_EQ(topup.Json()["error"]["field"], "amount") << topup.body;
  // The read API too (its own fast parser).
  auto size =
      client_->Send("POST", "/v1/size", R"({"model":"llama-3.1-8b","model":"llama-3.1-70b"})",
                    {{"Content-Type", "application/json"}});
  EXPECT_EQ(size.status, 400) << size.body;
  EXPECT_EQ(size.Json()["error"]["field"], "model") << size.body;
}

TEST_P(HardeningTest, UnknownOrRepeatedQueryParametersAreRefused) {
  std::string bob = User("bob", {"customer"});
  auto victim = client_->Call("GET", "/v1/rentals?username=victim", nullptr, bob);
  EXPECT_EQ(victim.status, 400) << victim.body;
  EXPECT_EQ(victim.Json()["error"]["field"], "username") << victim.body;
  EXPECT_NE(victim.body.find("takes limit"), std::string::npos) << victim.body;
  EXPECT_EQ(client_->Call("GET", "/v1/rentals?limit=5", nullptr, bob).status, 200);
  EXPECT_EQ(client_->Call("GET", "/v1/wallets?limit=5", nullptr, bob).status, 400);
  EXPECT_EQ(client_->Call("GET", "/v1/transfers?limit=1&limit=2", nullptr, bob).status, 400);
  EXPECT_EQ(client_->Call("GET", "/v1/leases?as=provider&limit=2", nullptr, bob).status, 200);
  EXPECT_EQ(client_->Send("GET", "/v1/catalog?x=1").status, 400);
  EXPECT_EQ(client_->Send("GET", "/healthz?verbose=1").status, 400);
  // Static pages keep theirs (cache busting, the pages' own parameters).
  EXPECT_EQ(client_->Send("GET", "/?v=3").status, 200);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, HardeningTest, ::testing::Values("sqlite"));

// GET /metrics was public: now only [metrics] allow (default loopback) or its bearer token.
class MetricsAccessTest : public ServerFixture {
  void Configure(ServerOptions& options) override {
    options.config_extra =
        "[metrics]\nallow = [\"10.0.0.0/8\", \"fd00::/8\"]\n"
        "bearer_token = \"metrics-token-0123456789abcdef0123456789\"\n";
  }
};

TEST_P(MetricsAccessTest, OnlyAllowedAddressesOrTheTokenReadTheCounters) {
  auto refused = client_->Send("GET", "/metrics");
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(refused.body.find("gpuhub_http"), std::string::npos);
  auto wrong = client_->Send("GET", "/metrics", "", {{"Authorization", "Bearer nope"}});
  EXPECT_EQ(wrong.status, 403);
  auto ok = client_->Send("GET", "/metrics", "",
                          {{"Authorization", "Bearer metrics-token-0123456789abcdef0123456789"}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_NE(ok.body.find("gpuhub_http_requests_total"), std::string::npos);
  EXPECT_EQ(client_->Send("GET", "/healthz").status, 200) << "health stays public";
}

INSTANTIATE_TEST_SUITE_P(Sqlite, MetricsAccessTest, ::testing::Values("sqlite"));

}  // namespace
}  // namespace gpuhub::testing
