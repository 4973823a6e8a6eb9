#include "http/router.h"

#include <gtest/gtest.h>

#include "http/api.h"
#include "http/static_files.h"
#include "http/web_session.h"

namespace gpuhub::http {
namespace {

TEST(RouterTest, MatchesPatternsAndCapturesParameters) {
  Router router;
  int hit = 0;
  router.Add("GET", "/v1/topups/{id}", [&](const Request&, Responder) { hit = 1; });
  router.Add("POST", "/v1/topups", [&](const Request&, Responder) { hit = 2; });
  auto m = router.Find("GET", "/v1/topups/inv_42");
  ASSERT_NE(m.handler, nullptr);
  EXPECT_EQ(m.route, "/v1/topups/{id}");
  EXPECT_EQ(m.params.at("id"), "inv_42");
  (*m.handler)(Request{}, nullptr);
  EXPECT_EQ(hit, 1);
  // HEAD is served by GET routes.
  EXPECT_NE(router.Find("HEAD", "/v1/topups/x").handler, nullptr);
  // Path matched, method did not: 405 material.
  auto wrong = router.Find("DELETE", "/v1/topups");
  EXPECT_EQ(wrong.handler, nullptr);
  EXPECT_EQ(wrong.allowed_methods, std::vector<std::string>{"POST"});
  EXPECT_EQ(router.Find("GET", "/v1/topups/a/b").handler, nullptr);
  EXPECT_TRUE(router.Find("GET", "/v1/nothing").allowed_methods.empty());
  // A parameter before a literal segment that differs: the next route is tried, and only the
  // matching route's parameters come back.
  router.Add("GET", "/v1/markets/{gpu}/book", [&](const Request&, Responder) { hit = 3; });
  router.Add("GET", "/v1/markets/{market}/trades", [&](const Request&, Responder) { hit = 4; });
  auto trades = router.Find("GET", "//v1/markets/h100-sxm/trades");
  ASSERT_NE(trades.handler, nullptr);
  EXPECT_EQ(trades.route, "/v1/markets/{market}/trades");
  EXPECT_EQ(trades.params, (std::map<std::string, std::string>{{"market", "h100-sxm"}}));
  EXPECT_EQ(router.Find("GET", "/v1/markets/h100-sxm/other").handler, nullptr);
}

TEST(RouterTest, APatternNamesTheQueryParametersItsRouteReads) {
  Router router;
  std::string wrapped_pattern;
  router.SetWrapper([&](const std::string&, const std::string& pattern, Handler h) {
    wrapped_pattern = pattern;
    return h;
  });
  router.Add("GET", "/v1/leases?limit&cursor&as", [](const Request&, Responder) {});
  router.Add("GET", "/v1/wallets", [](const Request&, Responder) {});
  EXPECT_EQ(wrapped_pattern, "/v1/wallets");
  auto leases = router.Find("GET", "/v1/leases");
  ASSERT_NE(leases.handler, nullptr);
  EXPECT_EQ(leases.route, "/v1/leases") << "the metric label is the path alone";
  EXPECT_EQ(Router::UnknownQueryParameter(leases, {{"limit", "5"}, {"as", "provider"}}), "");
  EXPECT_EQ(Router::UnknownQueryParameter(leases, {{"limit", "5"}, {"username", "victim"}}),
            "username");
  auto wallets = router.Find("GET", "/v1/wallets");
  ASSERT_NE(wallets.handler, nullptr);
  EXPECT_EQ(Router::UnknownQueryParameter(wallets, {}), "");
  EXPECT_EQ(Router::UnknownQueryParameter(wallets, {{"limit", "1"}}), "limit");
  // The handler refuses them itself (behind any wrapper), naming the parameter.
  Request request;
  request.query = {{"username", "victim"}};
  Response answer;
  (*leases.handler)(request, [&](Response r) { answer = std::move(r); });
  EXPECT_EQ(answer.status, 400);
  EXPECT_NE(answer.body.find("\"field\":\"username\""), std::string::npos) << answer.body;
  EXPECT_NE(answer.body.find("takes limit, cursor, as"), std::string::npos) << answer.body;
}

TEST(RouterTest, MapsStatusCodesToHttp) {
  EXPECT_EQ(HttpStatusOf(StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatusOf(StatusCode::kInsufficientFunds), 402);
  EXPECT_EQ(HttpStatusOf(StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatusOf(StatusCode::kFailedPrecondition), 409);
  EXPECT_EQ(HttpStatusOf(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(StatusCode::kUnavailable), 503);
  Response r = Response::Error(Status::NotFound("no \"x\"\n"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, R"({"error":{"code":"not_found","message":"no \"x\"\n"}})");
  // Invalid UTF-8 in a message does not break the JSON.
  EXPECT_EQ(ErrorBody("invalid_argument", "bad \xff"),
            "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"bad \xef\xbf\xbd\"}}");
}

TEST(RouterTest, DecodesUrlsStrictly) {
  EXPECT_EQ(UrlDecode("/a%20b", false).value(), "/a b");
  EXPECT_EQ(UrlDecode("a+b", true).value(), "a b");
  EXPECT_EQ(UrlDecode("a+b", false).value(), "a+b");
  EXPECT_FALSE(UrlDecode("%zz", false).ok());
  EXPECT_FALSE(UrlDecode("%2", false).ok());
  EXPECT_FALSE(UrlDecode("%00", false).ok());
  auto q = ParseQuery("limit=10&cursor=5&flag");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->at("limit"), "10");
  EXPECT_EQ(q->at("flag"), "");
  // A name given twice: which would count is not the client's guess to make.
  auto twice = ParseQuery("limit=1&limit=500");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().field(), "limit");
}

TEST(RequestTest, ReadsBearerTokens) {
  Request r;
  r.headers["authorization"] = "Bearer ghs_abc";
  EXPECT_EQ(r.BearerToken(), "ghs_abc");
  r.headers["authorization"] = "bearer   ghs_abc  ";
  EXPECT_EQ(r.BearerToken(), "ghs_abc");
  r.headers["authorization"] = "Basic dXNlcjpwYXNz";
  EXPECT_EQ(r.BearerToken(), "");
}

TEST(RequestTest, ReadsCookies) {
  Request r;
  EXPECT_EQ(r.Cookie("gpuhub_session"), "");
  r.headers["cookie"] = "theme=dark; gpuhub_session=ghs_abc;other=1";
  EXPECT_EQ(r.Cookie("gpuhub_session"), "ghs_abc");
  EXPECT_EQ(r.Cookie("other"), "1");
  EXPECT_EQ(r.Cookie("theme"), "dark");
  EXPECT_EQ(r.Cookie("gpuhub"), "");  // a prefix is not a name
  r.headers["cookie"] = "x_gpuhub_session=evil; gpuhub_session=\"ghs_q\"; gpuhub_session=second";
  EXPECT_EQ(r.Cookie("gpuhub_session"), "ghs_q");  // the first wins, quotes dropped
  r.headers["cookie"] = ";;novalue; =x; gpuhub_session=";
  EXPECT_EQ(r.Cookie("gpuhub_session"), "");
}

TEST(WebSessionTest, CredentialsPreferTheAuthorizationHeader) {
  Request r;
  r.headers["cookie"] = "gpuhub_session=ghs_cookie";
  Credentials c = CredentialsOf(r);
  EXPECT_EQ(c.token, "ghs_cookie");
  EXPECT_TRUE(c.from_cookie);
  r.headers["authorization"] = "Bearer ghs_bearer";
  c = CredentialsOf(r);
  EXPECT_EQ(c.token, "ghs_bearer");
  EXPECT_FALSE(c.from_cookie);
  // A malformed Authorization header is not silently replaced by the cookie.
  r.headers["authorization"] = "Basic abc";
  c = CredentialsOf(r);
  EXPECT_EQ(c.token, "");
  EXPECT_FALSE(c.from_cookie);
}

TEST(WebSessionTest, CsrfNeededOnlyForUnsafeCookieRequests) {
  const std::string token = "ghs_0123";
  const std::string csrf = CsrfTokenFor(token);
  EXPECT_EQ(csrf.size(), 64u);
  EXPECT_NE(csrf, CsrfTokenFor("ghs_0124"));
  EXPECT_NE(csrf, engine::HashToken(token));  // not the stored session hash
  struct Case {
    const char* what;
    std::string method;
    bool cookie;
    std::string header;  // X-CSRF-Token ("-" for none)
    bool allowed;
  };
  const Case cases[] = {
      {"GET with cookie", "GET", true, "-", true},
      {"HEAD with cookie", "HEAD", true, "-", true},
      {"POST with cookie, no token", "POST", true, "-", false},
      {"POST with cookie, wrong token", "POST", true, std::string(64, 'a'), false},
      {"POST with cookie, truncated token", "POST", true, csrf.substr(0, 63), false},
      {"POST with cookie, empty token", "POST", true, "", false},
      {"POST with cookie, right token", "POST", true, csrf, true},
      {"DELETE with cookie, right token", "DELETE", true, csrf, true},
      {"DELETE with cookie, no token", "DELETE", true, "-", false},
      {"POST with bearer, no token", "POST", false, "-", true},
  };
  for (const Case& c : cases) {
    Request r;
    r.method = c.method;
    if (c.cookie) {
      r.headers["cookie"] = "gpuhub_session=" + token;
    } else {
      r.headers["authorization"] = "Bearer " + token;
    }
    if (c.header != "-") r.headers["x-csrf-token"] = c.header;
    EXPECT_EQ(CsrfAllows(r, CredentialsOf(r)), c.allowed) << c.what;
  }
}

TEST(WebSessionTest, CookieAttributes) {
  EXPECT_EQ(SessionCookie("ghs_x", 2592000, false),
            "gpuhub_session=ghs_x; Path=/; Max-Age=2592000; HttpOnly; SameSite=Strict");
  EXPECT_EQ(SessionCookie("ghs_x", 60, true),
            "gpuhub_session=ghs_x; Path=/; Max-Age=60; HttpOnly; SameSite=Strict; Secure");
  EXPECT_EQ(ClearedSessionCookie(false),
            "gpuhub_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
  Request r;
  EXPECT_FALSE(CameOverTls(r));
  r.headers["x-forwarded-proto"] = "https";
  EXPECT_TRUE(CameOverTls(r));
  r.headers["x-forwarded-proto"] = "http";
  EXPECT_FALSE(CameOverTls(r));
  r.headers["forwarded"] = "for=192.0.2.60;proto=https;by=203.0.113.43";
  EXPECT_TRUE(CameOverTls(r));
}

TEST(RouterTest, ErrorBodiesNameTheField) {
  Response with = Response::Error(Status::InvalidArgument("bad amount").WithField("amount"));
  EXPECT_EQ(with.status, 400);
  json body = json::parse(with.body);
  EXPECT_EQ(body["error"]["field"], "amount");
  EXPECT_EQ(body["error"]["message"], "bad amount");
  Response without = Response::Error(Status::NotFound("no such lease"));
  EXPECT_FALSE(json::parse(without.body)["error"].contains("field"));
  // The field survives added context, and an ok status never gets one.
  EXPECT_EQ(Status::InvalidArgument("x").WithField("f").WithContext("ctx").field(), "f");
  EXPECT_EQ(Status::Ok().WithField("f").field(), "");
}

TEST(JsonTest, ChecksDepthOutsideStrings) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a":[[["x"]]]})", 4).ok());
  EXPECT_FALSE(CheckJsonDepth(R"({"a":[[[["x"]]]]})", 4).ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"a":"[[[[[[[[[[\"[["})", 2).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(10000, '['), 32).ok());
}

TEST(JsonTest, ParsesObjectsAndRejectsUnknownFields) {
  Request r;
  r.body = R"({"amount":"1.00","currency":"USD"})";
  // No Content-Type is not JSON (a cross-site no-cors fetch of a Blob sends none).
  EXPECT_EQ(ParseJsonObject(r, {"amount", "currency"}).status().message(),
            "Content-Type must be application/json");
  r.headers["content-type"] = "application/json";
  EXPECT_TRUE(ParseJsonObject(r, {"amount", "currency"}).ok());
  auto unknown = ParseJsonObject(r, {"amount"});
  EXPECT_EQ(unknown.status().message(), "unknown field 'currency'");
  r.headers["content-type"] = "text/plain";
  EXPECT_EQ(ParseJsonObject(r, {"amount", "currency"}).status().message(),
            "Content-Type must be application/json");
  r.headers["content-type"] = "application/json; charset=utf-8";
  r.body = "[1,2]";
  EXPECT_EQ(ParseJsonObject(r, {}).status().message(), "request body must be a JSON object");
  r.body = "{\"a\":";
  EXPECT_EQ(ParseJsonObject(r, {"a"}).status().message(), "request body is not valid JSON");
  json j = json::parse(R"({"n": 5, "s": 1})");
  EXPECT_EQ(RequiredInteger(j, "n", 1, 10).value(), 5);
  EXPECT_FALSE(RequiredInteger(j, "n", 6, 10).ok());
  EXPECT_EQ(RequiredString(j, "s").status().message(), "field 's' must be a string");
  EXPECT_EQ(RequiredString(j, "x").status().message(), "field 'x' is required");
  // Each of these names the field, for the pages to show the message beside it.
  EXPECT_EQ(RequiredString(j, "s").status().field(), "s");
  EXPECT_EQ(RequiredInteger(j, "n", 6, 10).status().field(), "n");
  EXPECT_EQ(unknown.status().field(), "currency");
}

TEST(StaticFilesTest, ContentTypesAndTraversal) {
  EXPECT_EQ(ContentTypeFor("/x/index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("app.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(ContentTypeFor("a.bin"), "application/octet-stream");
  Request r;
  r.method = "GET";
  for (const char* path : {"/../etc/passwd", "/a/../../etc/passwd", "/./x"}) {
    r.path = path;
    EXPECT_EQ(ServeStaticFile("/tmp", r).status, 400) << path;
  }
  r.path = "/.git/config";
  EXPECT_EQ(ServeStaticFile("/tmp", r).status, 404);
}

TEST(StaticFilesTest, WithoutThePagesTheFrontPageIsAPlaceholder) {
  Request r;
  r.method = "GET";
  for (const char* web_dir : {"", "/nonexistent-gpuhub-web-dir"}) {
    r.path = "/";
    Response front = ServeStaticFile(web_dir, r);
    EXPECT_EQ(front.status, 200) << web_dir;
    EXPECT_EQ(front.content_type, "text/html; charset=utf-8") << web_dir;
    EXPECT_NE(front.body.find("/v1/catalog"), std::string::npos) << web_dir;
    r.path = "/calculator/";
    EXPECT_EQ(ServeStaticFile(web_dir, r).status, 404) << web_dir;
  }
}

}  // namespace
}  // namespace gpuhub::http
