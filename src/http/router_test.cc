#include "http/router.h"

#include <gtest/gtest.h>

#include "http/api.h"
#include "http/static_files.h"

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

TEST(JsonTest, ChecksDepthOutsideStrings) {
  EXPECT_TRUE(CheckJsonDepth(R"({"a":[[["x"]]]})", 4).ok());
  EXPECT_FALSE(CheckJsonDepth(R"({"a":[[[["x"]]]]})", 4).ok());
  EXPECT_TRUE(CheckJsonDepth(R"({"a":"[[[[[[[[[[\"[["})", 2).ok());
  EXPECT_FALSE(CheckJsonDepth(std::string(10000, '['), 32).ok());
}

TEST(JsonTest, ParsesObjectsAndRejectsUnknownFields) {
  Request r;
  r.body = R"({"amount":"1.00","currency":"USD"})";
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

}  // namespace
}  // namespace gpuhub::http
