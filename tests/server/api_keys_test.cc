// Scoped API keys through the real server, on SQLite and PostgreSQL (docs/api.md, "API keys"):
// every scope boundary, the daily spending cap across days and restarts, the allow-list, expiry,
// revocation, what a key may never do, and that the secret is nowhere but in the 201 answer.
#include <gtest/gtest.h>

#include <chrono>

#include "engine/accounts.h"
#include "engine/api_keys.h"
#include "harness.h"
#include "server_fixture.h"
#include "store/store.h"

namespace gpuhub::testing {
namespace {

std::string Later(int hours) { return UtcTimeFromNow(std::chrono::hours(hours)); }

class ApiKeysTest : public ServerFixture {
 protected:
  // A provider with an 8-GPU H100 machine offered at 2.88 USD per GPU-hour, and a customer
  // "kate" with 100 USD, signed in (session_).
  void SetUpMarket() {
    std::string provider = User("paula", {"provider"});
    auto machine = client_->Call("POST", "/v1/machines",
                                 {{"gpu", "H100 SXM"},
                                  {"gpus", 8},
                                  {"region", "IAD-1"},
                                  {"vcpus", 96},
                                  {"ram_gb", 1024},
                                  {"disk_gb", 8000}},
                                 provider);
    ASSERT_EQ(machine.status, 201) << machine.body;
    auto ask = client_->Call("POST", "/v1/asks",
                             {{"machine_id", machine.Json()["id"]},
                              {"price_usd_per_gpu_hour", "2.880"},
                              {"min_gpus", 1},
                              {"available_until", Later(24 * 30)}},
                             provider);
    ASSERT_EQ(ask.status, 201) << ask.body;
    session_ = User("kate", {"customer"});
    Credit("kate", "100");
  }
  // POST /v1/api-keys as kate's session; the whole answer (201 expected by the caller).
  HttpResponse CreateKey(const json& body, const std::string& token = "") {
    return client_->Call("POST", "/v1/api-keys", body, token.empty() ? session_ : token);
  }
  std::string Key(const json& body) {
    auto r = CreateKey(body);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json().value("secret", "");
  }
  HttpResponse BuyOneGpu(const std::string& token) {
    return client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}},
                         token);
  }
  std::string Available(const std::string& token) {
    json wallets = Get("/v1/wallets", token);
    for (const auto& w : wallets["wallets"]) {
      if (w["currency"] == "USD") return w["available"];
    }
    return "";
  }
  static std::string Code(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("code", "") : "";
  }
  static std::string Field(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("field", "") : "";
  }
  static std::string Message(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("message", "") : "";
  }

  std::string session_;
};

TEST_P(ApiKeysTest, ScopesDecideWhatAKeyMayDo) {
  SetUpMarket();
  std::string read = Key({{"name", "dashboard"}, {"scopes", {"read"}}});
  std::string market_only = Key({{"name", "no-spend"}, {"scopes", {"market"}}});
  std::string buyer = Key({{"name", "ci"}, {"scopes", {"read", "market", "wallet-spend"}}});
  ASSERT_TRUE(read.starts_with("ghk_1_")) << read;

  // A read-only key reads...
  EXPECT_EQ(Available(read), "100.000000");
  // ...but cannot buy.
  auto refused = BuyOneGpu(read);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_EQ(Code(refused), "permission_denied");
  EXPECT_NE(Message(refused).find("market, wallet-spend"), std::string::npos) << refused.body;
  // Buying spends the wallet: market alone is not enough.
  auto no_spend = BuyOneGpu(market_only);
  EXPECT_EQ(no_spend.status, 403) << no_spend.body;
  EXPECT_NE(Message(no_spend).find("wallet-spend"), std::string::npos) << no_spend.body;
  EXPECT_EQ(Available(read), "100.000000");

  auto bought = BuyOneGpu(buyer);
  ASSERT_EQ(bought.status, 201) << bought.body;
  EXPECT_EQ(bought.Json()["status"], "filled");
  EXPECT_EQ(Available(read), "97.120000");
  // A market key stops its lease; the read key cannot.
  std::string lease = "/v1/leases/" + std::to_string(bought.Json()["lease_id"].get<long long>());
  EXPECT_EQ(client_->Call("POST", lease + "/stop", nullptr, read).status, 403);
  EXPECT_EQ(client_->Call("POST", lease + "/stop", nullptr, market_only).status, 200);
  // Payouts are for providers, admin for admins: refused at creation.
  auto payouts = CreateKey({{"name", "p"}, {"scopes", {"payouts"}}});
  EXPECT_EQ(payouts.status, 403) << payouts.body;
  EXPECT_EQ(Field(payouts), "scopes");
  auto admin = CreateKey({{"name", "a"}, {"scopes", {"admin"}}});
  EXPECT_EQ(admin.status, 403) << admin.body;
  // An admin's admin key works on the admin routes; the read key of a customer does not.
  auto root_key = CreateKey({{"name", "ops"}, {"scopes", {"admin"}}}, admin_);
  ASSERT_EQ(root_key.status, 201) << root_key.body;
  std::string ops = root_key.Json()["secret"];
  EXPECT_EQ(client_->Call("GET", "/v1/admin/invariants", nullptr, ops).status, 200);
  EXPECT_EQ(client_->Call("GET", "/v1/admin/invariants", nullptr, read).status, 403);
  // ...and an admin key without read cannot read the account's own data.
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, ops).status, 403);
}

TEST_P(ApiKeysTest, TheDailyCapHoldsAcrossARestartAndOpensTheNextDay) {
  SetUpMarket();
  std::string capped = Key({{"name", "capped"},
                            {"scopes", {"read", "market", "wallet-spend"}},
                            {"spend_cap_per_day", "5.00"}});
  ASSERT_EQ(BuyOneGpu(capped).status, 201);  // 2.88 of 5.00
  auto over = BuyOneGpu(capped);             // 5.76 > 5.00
  EXPECT_EQ(over.status, 402) << over.body;
  EXPECT_NE(Message(over).find("at most 5.000000 USD a day"), std::string::npos) << over.body;
  EXPECT_EQ(Available(capped), "97.120000");
  json key = Get("/v1/api-keys/1", session_);
  EXPECT_EQ(key["spend_cap_per_day"]["amount"], "5.000000");
  EXPECT_EQ(key["spent_today"]["amount"], "2.880000");

  Restart();  // the day's count is in the database
  admin_ = LogInAdmin(*client_);
  EXPECT_EQ(BuyOneGpu(capped).status, 402);
  // The session itself is not capped.
  ASSERT_EQ(BuyOneGpu(session_).status, 201);

  Credit("kate", "500");  // the two leases run for the day below
  Advance(24 * 3600);     // the next UTC day
  auto next_day = BuyOneGpu(capped);
  EXPECT_EQ(next_day.status, 201) << next_day.body;
  EXPECT_EQ(Get("/v1/api-keys/1", session_)["spent_today"]["amount"], "2.880000");
}

TEST_P(ApiKeysTest, AllowListExpiryAndRevocation) {
  SetUpMarket();
  std::string elsewhere = Key(
      {{"name", "vpn"}, {"scopes", {"read"}}, {"allowed_cidrs", {"10.0.0.0/8", "2001:db8::/32"}}});
  auto outside = client_->Call("GET", "/v1/wallets", nullptr, elsewhere);
  EXPECT_EQ(outside.status, 403) << outside.body;
  EXPECT_NE(Message(outside).find("not allowed from 127.0.0.1"), std::string::npos);
  std::string here =
      Key({{"name", "ci-box"}, {"scopes", {"read"}}, {"allowed_cidrs", {"127.0.0.2/32"}}});
  HttpClient from_ci(server_->port(), "127.0.0.2");
  EXPECT_EQ(from_ci.Call("GET", "/v1/wallets", nullptr, here).status, 200);
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, here).status, 403);

  std::string short_lived =
      Key({{"name", "short"}, {"scopes", {"read"}}, {"expires_at", Later(2)}});
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, short_lived).status, 200);
  Advance(3 * 3600);
  auto expired = client_->Call("GET", "/v1/wallets", nullptr, short_lived);
  EXPECT_EQ(expired.status, 401) << expired.body;
  EXPECT_NE(Message(expired).find("expired"), std::string::npos);

  std::string revoked = Key({{"name", "leaked"}, {"scopes", {"read"}}});
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, revoked).status, 200);
  long long id = engine::ApiKeyIdOf(revoked);
  auto del = client_->Call("DELETE", "/v1/api-keys/" + std::to_string(id), nullptr, session_);
  EXPECT_EQ(del.status, 204) << del.body;
  EXPECT_EQ(client_->Call("GET", "/v1/wallets", nullptr, revoked).status, 401);
  EXPECT_EQ(client_->Call("DELETE", "/v1/api-keys/" + std::to_string(id), nullptr, session_).status,
            404);
}

TEST_P(ApiKeysTest, AKeyNeverManagesKeysSessionsOrTheAccount) {
  SetUpMarket();
  std::string all = Key({{"name", "everything"},
                         {"scopes", {"read", "market", "rentals", "storage", "wallet-spend"}}});
  struct Case {
    const char* method;
    const char* path;
    json body;
  };
  for (const Case& c :
       {Case{"POST", "/v1/api-keys", {{"name", "x"}, {"scopes", {"read"}}}},
        Case{"GET", "/v1/api-keys", nullptr}, Case{"DELETE", "/v1/api-keys/1", nullptr},
        Case{"DELETE", "/v1/sessions/current", nullptr},
        Case{"GET", "/v1/sessions/current", nullptr},
        Case{"POST", "/v1/accounts/me/roles", {{"role", "provider"}}},
        Case{"PUT", "/v1/accounts/me/webhook", {{"url", "https://x.example/h"}}}}) {
    auto r = client_->Call(c.method, c.path, c.body, all);
    EXPECT_EQ(r.status, 403) << c.method << " " << c.path << ": " << r.body;
    EXPECT_NE(Message(r).find("API keys cannot"), std::string::npos) << r.body;
  }
  // Nothing changed: the key is still the only one, and it still works.
  EXPECT_EQ(Get("/v1/api-keys", session_)["api_keys"].size(), 1u);
  EXPECT_EQ(Available(all), "100.000000");
}

TEST_P(ApiKeysTest, BadInputNamesTheField) {
  session_ = User("kate", {"customer"});
  struct Case {
    json body;
    const char* field;
  };
  const Case cases[] = {
      {{{"name", "x"}, {"scopes", {"write"}}}, "scopes"},
      {{{"name", "x"}, {"scopes", json::array()}}, "scopes"},
      {{{"name", "x"}}, "scopes"},
      {{{"scopes", {"read"}}}, "name"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"expires_at", "2001-01-01T00:00:00Z"}}, "expires_at"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"expires_at", Later(24 * 400)}}, "expires_at"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"expires_at", "tomorrow"}}, "expires_at"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"allowed_cidrs", {"10.0.0.0/33"}}}, "allowed_cidrs"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"allowed_cidrs", {"10.0.0.1/8"}}}, "allowed_cidrs"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"allowed_cidrs", {"fe80::zz/64"}}}, "allowed_cidrs"},
      {{{"name", "x"}, {"scopes", {"wallet-spend"}}, {"spend_cap_per_day", 5}},
       "spend_cap_per_day"},
      {{{"name", "x"}, {"scopes", {"wallet-spend"}}, {"spend_cap_per_day", "5.0000001"}},
       "spend_cap_per_day"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"spend_cap_per_day", "5.00"}}, "spend_cap_per_day"},
      {{{"name", "x"}, {"scopes", {"read"}}, {"color", "red"}}, "color"},
  };
  for (const Case& c : cases) {
    auto r = CreateKey(c.body);
    EXPECT_EQ(r.status, 400) << c.body.dump() << ": " << r.body;
    EXPECT_EQ(Code(r), "invalid_argument") << r.body;
    EXPECT_EQ(Field(r), c.field) << c.body.dump() << ": " << r.body;
  }
  EXPECT_TRUE(Get("/v1/api-keys", session_)["api_keys"].empty());
}

TEST_P(ApiKeysTest, TheSecretIsShownOnceAndStoredOnlyAsAHash) {
  SetUpMarket();
  auto created = CreateKey({{"name", "ci"}, {"scopes", {"read"}}});
  ASSERT_EQ(created.status, 201) << created.body;
  std::string secret = created.Json()["secret"];
  ASSERT_EQ(secret.size(), std::string("ghk_1_").size() + 64);
  EXPECT_EQ(created.Json()["prefix"], "ghk_1_");
  EXPECT_EQ(Available(secret), "100.000000");
  auto list = client_->Call("GET", "/v1/api-keys", nullptr, session_);
  auto one = client_->Call("GET", "/v1/api-keys/1", nullptr, session_);
  EXPECT_EQ(list.body.find(secret.substr(6)), std::string::npos) << list.body;
  EXPECT_EQ(one.body.find(secret.substr(6)), std::string::npos) << one.body;
  EXPECT_EQ(one.Json()["scopes"], json::array({"read"}));
  // The request log names the key by its id, never its secret.
  ASSERT_TRUE(WaitFor([&] { return server_->Log().find("api_key=1") != std::string::npos; }));
  EXPECT_EQ(server_->Log().find(secret.substr(6)), std::string::npos);
  // The database holds its SHA-256 only.
  auto store = store::OpenReadStore(db_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  int rows = 0;
  Status scanned =
      (*store)->Scan("api_keys", {"secret_hash", "name", "scopes", "networks"}, "id",
                     [&](const store::Row& row) -> Status {
                       ++rows;
                       for (std::size_t i = 0; i < 4; ++i) {
                         EXPECT_EQ(row.Text(i).value().find(secret.substr(6)), std::string::npos);
                       }
                       EXPECT_EQ(row.Text(0).value(), engine::HashToken(secret));
                       return Status::Ok();
                     });
  EXPECT_TRUE(scanned.ok()) << scanned.ToString();
  EXPECT_EQ(rows, 1);
}

// The case: a rentals key cannot spend beyond its cap (term rentals pay through the same
// ledger guard as the spot exchange), and without wallet-spend it cannot rent at all.
TEST_P(ApiKeysTest, ARentalsKeyCannotSpendBeyondItsCap) {
  auto node = client_->Call("POST", "/v1/admin/nodes", {{"gpu", "A100 SXM"}, {"region", "PDX-1"}},
                            admin_);
  ASSERT_EQ(node.status, 201) << node.body;
  session_ = User("kate", {"customer"});
  Credit("kate", "1000");
  json week = {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}};
  std::string no_spend = Key({{"name", "r"}, {"scopes", {"read", "rentals"}}});
  std::string capped = Key({{"name", "rc"},
                            {"scopes", {"read", "rentals", "wallet-spend"}},
                            {"spend_cap_per_day", "300"}});
  auto refused = client_->Call("POST", "/v1/rentals", week, no_spend);
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(Message(refused).find("wallet-spend"), std::string::npos) << refused.body;
  auto first = client_->Call("POST", "/v1/rentals", week, capped);
  ASSERT_EQ(first.status, 201) << first.body;
  std::string paid = first.Json()["charge"]["paid"]["amount"];
  EXPECT_LE(Micros(paid), 300'000'000) << paid;
  std::string after_first = Available(capped);
  auto second = client_->Call("POST", "/v1/rentals", week, capped);
  EXPECT_EQ(second.status, 402) << second.body;
  EXPECT_NE(Message(second).find("may spend at most 300.000000 USD a day"), std::string::npos)
      << second.body;
  EXPECT_EQ(Available(capped), after_first);
  EXPECT_EQ(Get("/v1/api-keys/2", session_)["spent_today"]["amount"], paid);
  EXPECT_EQ(Get("/v1/rentals", capped)["rentals"].size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ApiKeysTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
