// The web session on the real server: POST /v1/sessions {"cookie": true} sets an HttpOnly,
// SameSite=Strict cookie (Secure behind a TLS proxy) and answers a CSRF token instead of the
// session token; requests made with the cookie need X-CSRF-Token to change anything; bearer
// clients are unaffected; log out clears the cookie; error bodies name the field.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "harness.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kPassword = "correct horse battery staple";

class WebSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.db = FreshDatabaseUrl("sqlite", dir_);
    server_ = std::make_unique<ServerProcess>(dir_, options);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }

  // Signs up `name` and logs in for a cookie; returns the cookie pair and fills `csrf`.
  std::string CookieLogIn(const std::string& name, std::string* csrf,
                          const std::vector<std::pair<std::string, std::string>>& extra = {}) {
    auto signup =
        client_->Call("POST", "/v1/accounts", {{"username", name}, {"password", kPassword}});
    EXPECT_TRUE(signup.status == 201 || signup.status == 409) << signup.body;
    EXPECT_TRUE(SetBillingCountry(*client_, LogIn(*client_, name, kPassword), "US"));
    auto headers = extra;
    headers.emplace_back("Content-Type", "application/json");
    auto login = client_->Send(
        "POST", "/v1/sessions",
        json{{"username", name}, {"password", kPassword}, {"cookie", true}}.dump(), headers);
    EXPECT_EQ(login.status, 201) << login.body;
    last_set_cookie_ = login.Header("set-cookie");
    if (csrf) *csrf = login.Json().value("csrf_token", "");
    std::string c = last_set_cookie_.substr(0, last_set_cookie_.find(';'));
    return c;
  }

  HttpResponse WithCookie(const std::string& method, const std::string& path,
                          const std::string& cookie, const std::string& csrf,
                          const json& body = nullptr) {
    std::vector<std::pair<std::string, std::string>> headers = {{"Cookie", cookie}};
    if (!csrf.empty()) headers.emplace_back("X-CSRF-Token", csrf);
    std::string text;
    if (!body.is_null()) {
      text = body.dump();
      headers.emplace_back("Content-Type", "application/json");
    }
    return client_->Send(method, path, text, headers);
  }

  TempDir dir_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::string last_set_cookie_;
};

TEST_F(WebSessionTest, CookieLoginSetsAnHttpOnlyStrictCookieAndGivesNoToken) {
  std::string csrf;
  std::string cookie = CookieLogIn("ada", &csrf);
  EXPECT_EQ(cookie.rfind("gpuhub_session=ghs_", 0), 0u) << cookie;
  EXPECT_NE(last_set_cookie_.find("; HttpOnly"), std::string::npos) << last_set_cookie_;
  EXPECT_NE(last_set_cookie_.find("; SameSite=Strict"), std::string::npos);
  EXPECT_NE(last_set_cookie_.find("; Path=/"), std::string::npos);
  EXPECT_NE(last_set_cookie_.find("; Max-Age=2592000"), std::string::npos);  // 30 days
  EXPECT_EQ(last_set_cookie_.find("Secure"), std::string::npos) << "plain HTTP: no Secure";
  EXPECT_EQ(csrf.size(), 64u);

  auto login =
      client_->Send("POST", "/v1/sessions",
                    json{{"username", "ada"}, {"password", kPassword}, {"cookie", true}}.dump(),
                    {{"Content-Type", "application/json"}});
  ASSERT_EQ(login.status, 201);
  json body = login.Json();
  EXPECT_FALSE(body.contains("token")) << "the page must never see the session token";
  EXPECT_EQ(body["token_type"], "cookie");
  EXPECT_EQ(body["user"]["username"], "ada");
  EXPECT_EQ(login.Header("cache-control"), "no-store");

  // Behind a proxy that says the client came over TLS, the cookie is Secure.
  CookieLogIn("ada", nullptr, {{"X-Forwarded-Proto", "https"}});
  EXPECT_NE(last_set_cookie_.find("; Secure"), std::string::npos) << last_set_cookie_;

  // A plain bearer login is unchanged: a token, no cookie.
  auto bearer =
      client_->Call("POST", "/v1/sessions", {{"username", "ada"}, {"password", kPassword}});
  ASSERT_EQ(bearer.status, 201);
  EXPECT_EQ(bearer.Json()["token_type"], "Bearer");
  EXPECT_EQ(bearer.Header("set-cookie"), "");
}

TEST_F(WebSessionTest, CookieLoginMustComeFromThePages) {
  ASSERT_EQ(
      client_->Call("POST", "/v1/accounts", {{"username", "ada"}, {"password", kPassword}}).status,
      201);
  std::string body = json{{"username", "ada"}, {"password", kPassword}, {"cookie", true}}.dump();
  // What a cross-site form or no-cors fetch can send: no JSON content type.
  auto no_type = client_->Send("POST", "/v1/sessions", body);
  EXPECT_EQ(no_type.status, 400) << no_type.body;
  auto text = client_->Send("POST", "/v1/sessions", body, {{"Content-Type", "text/plain"}});
  EXPECT_EQ(text.status, 400) << text.body;
  auto evil =
      client_->Send("POST", "/v1/sessions", body,
                    {{"Content-Type", "application/json"}, {"Origin", "https://evil.example"}});
  EXPECT_EQ(evil.status, 403) << evil.body;
  EXPECT_EQ(evil.Header("set-cookie"), "");
  auto same = client_->Send("POST", "/v1/sessions", body,
                            {{"Content-Type", "application/json"}, {"Origin", "http://127.0.0.1"}});
  EXPECT_EQ(same.status, 201) << same.body;
  auto wrong_type =
      client_->Send("POST", "/v1/sessions",
                    json{{"username", "ada"}, {"password", kPassword}, {"cookie", "yes"}}.dump(),
                    {{"Content-Type", "application/json"}});
  EXPECT_EQ(wrong_type.status, 400);
  EXPECT_EQ(wrong_type.Json()["error"]["field"], "cookie");
}

TEST_F(WebSessionTest, CurrentSessionAnswersAnonymousCookieAndBearer) {
  auto anonymous = client_->Send("GET", "/v1/sessions/current");
  ASSERT_EQ(anonymous.status, 200) << anonymous.body;
  EXPECT_EQ(anonymous.Json()["authenticated"], false);
  EXPECT_TRUE(anonymous.Json()["user"].is_null());

  std::string csrf;
  std::string cookie = CookieLogIn("ada", &csrf);
  auto mine = WithCookie("GET", "/v1/sessions/current", cookie, "");
  ASSERT_EQ(mine.status, 200) << mine.body;
  EXPECT_EQ(mine.Json()["authenticated"], true);
  EXPECT_EQ(mine.Json()["via"], "cookie");
  EXPECT_EQ(mine.Json()["user"]["username"], "ada");
  EXPECT_EQ(mine.Json()["csrf_token"], csrf);
  EXPECT_EQ(mine.Header("cache-control"), "no-store");

  std::string token = LogIn(*client_, "ada");
  auto bearer = client_->Call("GET", "/v1/sessions/current", nullptr, token);
  ASSERT_EQ(bearer.status, 200);
  EXPECT_EQ(bearer.Json()["via"], "bearer");
  EXPECT_FALSE(bearer.Json().contains("csrf_token"));
  EXPECT_EQ(client_->Call("GET", "/v1/sessions/current", nullptr, "ghs_forged").status, 401);

  // A cookie whose session is gone: anonymous, and the browser is told to drop the cookie.
  auto stale = WithCookie("GET", "/v1/sessions/current", "gpuhub_session=ghs_gone", "");
  ASSERT_EQ(stale.status, 200);
  EXPECT_EQ(stale.Json()["authenticated"], false);
  EXPECT_EQ(stale.Header("set-cookie").rfind("gpuhub_session=; Path=/; Max-Age=0", 0), 0u)
      << stale.Header("set-cookie");
}

TEST_F(WebSessionTest, ChangesWithTheCookieNeedTheCsrfTokenOfThatSession) {
  std::string csrf, other_csrf;
  std::string cookie = CookieLogIn("ada", &csrf);
  CookieLogIn("bob", &other_csrf);
  json topup = {{"amount", "10.00"}, {"currency", "USD"}};

  // Reads need no token.
  EXPECT_EQ(WithCookie("GET", "/v1/wallets", cookie, "").status, 200);
  // Writes do: missing, wrong, another session's, then right.
  auto missing = WithCookie("POST", "/v1/topups", cookie, "", topup);
  EXPECT_EQ(missing.status, 403) << missing.body;
  EXPECT_EQ(missing.Json()["error"]["code"], "permission_denied");
  EXPECT_NE(missing.Json()["error"]["message"].get<std::string>().find("CSRF"), std::string::npos);
  EXPECT_EQ(WithCookie("POST", "/v1/topups", cookie, std::string(64, '0'), topup).status, 403);
  EXPECT_EQ(WithCookie("POST", "/v1/topups", cookie, other_csrf, topup).status, 403);
  EXPECT_EQ(WithCookie("POST", "/v1/topups", cookie, csrf.substr(1), topup).status, 403);
  auto ok = WithCookie("POST", "/v1/topups", cookie, csrf, topup);
  EXPECT_EQ(ok.status, 201) << ok.body;
  // Every route behind the common auth gets the same check, the market's included, before the
  // body is even read.
  EXPECT_EQ(WithCookie("POST", "/v1/bids", cookie, "", json{{"gpu", "H100 SXM"}}).status, 403);
  EXPECT_EQ(WithCookie("DELETE", "/v1/bids/1", cookie, "").status, 403);
  EXPECT_EQ(WithCookie("POST", "/v1/leases/1/stop", cookie, "", json::object()).status, 403);
  EXPECT_EQ(
      WithCookie("POST", "/v1/accounts/me/roles", cookie, "", json{{"role", "provider"}}).status,
      403);

  // Bearer clients never need a CSRF token, and a bearer header wins over a cookie.
  std::string token = LogIn(*client_, "bob");
  auto bearer = client_->Send("POST", "/v1/topups", topup.dump(),
                              {{"Content-Type", "application/json"},
                               {"Authorization", "Bearer " + token},
                               {"Cookie", cookie}});
  ASSERT_EQ(bearer.status, 201) << bearer.body;
  auto bobs = client_->Call("GET", "/v1/topups", nullptr, token);
  EXPECT_EQ(bobs.Json()["topups"].size(), 1u) << "the bearer's user (bob) got the invoice";
  // A malformed Authorization header is refused, not replaced by the cookie.
  auto malformed =
      client_->Send("GET", "/v1/wallets", "", {{"Authorization", "Basic abc"}, {"Cookie", cookie}});
  EXPECT_EQ(malformed.status, 401);
}

TEST_F(WebSessionTest, LogOutNeedsTheTokenAndClearsTheCookie) {
  std::string csrf;
  std::string cookie = CookieLogIn("ada", &csrf);
  EXPECT_EQ(WithCookie("DELETE", "/v1/sessions/current", cookie, "").status, 403);
  auto out = WithCookie("DELETE", "/v1/sessions/current", cookie, csrf);
  ASSERT_EQ(out.status, 204) << out.body;
  EXPECT_EQ(out.Header("set-cookie"),
            "gpuhub_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
  EXPECT_EQ(WithCookie("GET", "/v1/wallets", cookie, "").status, 401);
  // Logging out twice (a second tab) still clears the cookie.
  EXPECT_EQ(WithCookie("DELETE", "/v1/sessions/current", cookie, csrf).status, 204);
  // A new login has a new CSRF token; the old one is dead with its session.
  std::string fresh_csrf;
  std::string fresh = CookieLogIn("ada", &fresh_csrf);
  EXPECT_NE(fresh_csrf, csrf);
  EXPECT_EQ(
      WithCookie("POST", "/v1/topups", fresh, csrf, json{{"amount", "5.00"}, {"currency", "USD"}})
          .status,
      403);
}

TEST_F(WebSessionTest, ErrorsNameTheFieldForTheForms) {
  struct Row {
    const char* what;
    std::string method, path;
    json body;
    int status;
    const char* field;
  };
  std::string csrf;
  std::string cookie = CookieLogIn("ada", &csrf);
  const Row rows[] = {
      {"short username",
       "POST",
       "/v1/accounts",
       {{"username", "al"}, {"password", kPassword}},
       400,
       "username"},
      {"taken username",
       "POST",
       "/v1/accounts",
       {{"username", "ada"}, {"password", kPassword}},
       409,
       "username"},
      {"short password",
       "POST",
       "/v1/accounts",
       {{"username", "eve"}, {"password", "short"}},
       400,
       "password"},
      {"top-up amount",
       "POST",
       "/v1/topups",
       {{"amount", "1.234"}, {"currency", "USD"}},
       400,
       "amount"},
      {"top-up currency",
       "POST",
       "/v1/topups",
       {{"amount", "10.00"}, {"currency", "JPY"}},
       400,
       "currency"},
      {"bid limit",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"limit_usd_per_gpu_hour", "2.8805"}},
       400,
       "limit_usd_per_gpu_hour"},
      {"bid gpus",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 0}, {"market", true}},
       400,
       "gpus"},
      {"bid expiry",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"},
        {"gpus", 1},
        {"limit_usd_per_gpu_hour", "2.000"},
        {"time_in_force", "gtc"},
        {"expires_at", "2099-12-31T18:00:00Z"}},
       400,
       "expires_at"},
      {"bid region",
       "POST",
       "/v1/bids",
       {{"gpu", "H100 SXM"}, {"gpus", 1}, {"market", true}, {"region", "LHR-1"}},
       400,
       "region"},
      {"bid market",
       "POST",
       "/v1/bids",
       {{"gpu", "H999"}, {"gpus", 1}, {"market", true}},
       400,
       "gpu"},
      {"calculator context",
       "POST",
       "/v1/size",
       {{"model", "70b"}, {"workload", "infer"}, {"context", 0}},
       400,
       "context"},
      {"calculator model",
       "POST",
       "/v1/fit",
       {{"model", "71b"}, {"workload", "infer"}},
       404,
       "model"},
  };
  for (const Row& row : rows) {
    auto r = WithCookie(row.method, row.path, cookie, csrf, row.body);
    EXPECT_EQ(r.status, row.status) << row.what << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], row.field) << row.what << ": " << r.body;
  }
}

TEST_F(WebSessionTest, ModelsListsPresetsAndBundledIds) {
  auto r = client_->Send("GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  json body = r.Json();
  ASSERT_EQ(body["presets"].size(), 5u);
  EXPECT_EQ(body["presets"][3]["id"], "70b");
  EXPECT_EQ(body["presets"][3]["layers"], 80);
  bool llama = false;
  for (const auto& m : body["bundled"]) llama = llama || m["id"] == "meta-llama/Llama-3.1-8B";
  EXPECT_TRUE(llama) << r.body.substr(0, 300);
}

TEST_F(WebSessionTest, PagesCarryASecurityPolicyAndRevalidate) {
  auto page = client_->Send("GET", "/calculator/");
  ASSERT_EQ(page.status, 200) << page.body.substr(0, 200);
  EXPECT_EQ(page.Header("content-type"), "text/html; charset=utf-8");
  std::string csp = page.Header("content-security-policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(page.Header("x-frame-options"), "DENY");
  EXPECT_EQ(page.Header("cache-control"), "no-cache");
  auto script = client_->Send("GET", "/assets/api.js");
  ASSERT_EQ(script.status, 200);
  EXPECT_EQ(script.Header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(script.Header("cache-control"), "no-cache");
  auto again =
      client_->Send("GET", "/assets/api.js", "", {{"If-None-Match", script.Header("etag")}});
  EXPECT_EQ(again.status, 304);
  // Every page of the site is there.
  for (const char* path : {"/", "/calculator/", "/guide/", "/market/", "/account/"}) {
    EXPECT_EQ(client_->Send("GET", path).status, 200) << path;
  }
}

}  // namespace
}  // namespace gpuhub::testing
