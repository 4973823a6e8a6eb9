#include <gtest/gtest.h>

#include <string>

#include "engine/accounts.h"
#include "http/api.h"

namespace gpuhub::http {
namespace {

engine::Fingerprint Of(const std::string& body, const std::string& path = "/v1/topups") {
  Request r;
  r.method = "POST";
  r.path = path;
  r.body = body;
  return RequestFingerprint(r);
}

// Idempotency-Key compares the request's parameters (Stripe), not its bytes.
TEST(RequestFingerprintTest, TheSameJsonFieldsInAnyOrderOrSpacingAreTheSameRequest) {
  const std::string body = R"({"amount":"20.00","currency":"GBP"})";
  auto a = Of(body);
  EXPECT_EQ(a.current.rfind(std::string(kCanonicalFingerprintPrefix), 0), 0u) << a.current;
  EXPECT_EQ(Of(R"({"currency":"GBP","amount":"20.00"})").current, a.current);
  EXPECT_EQ(Of(" {\n  \"currency\" : \"GBP\",\t\"amount\": \"20.00\" }\r\n").current, a.current);
  // Nested objects are canonical too; arrays keep their order (it is part of the value).
  EXPECT_EQ(Of(R"({"a":{"y":1,"x":[1,2]},"b":null})").current,
            Of(R"({"b":null,"a":{"x":[1,2],"y":1}})").current);
  EXPECT_NE(Of(R"({"a":[1,2]})").current, Of(R"({"a":[2,1]})").current);
  // Any other value, type, field, method or path is another request.
  EXPECT_NE(Of(R"({"amount":"21.00","currency":"GBP"})").current, a.current);
  EXPECT_NE(Of(R"({"amount":"20.0","currency":"GBP"})").current, a.current);
  EXPECT_NE(Of(R"({"amount":20,"currency":"GBP"})").current, a.current);
  EXPECT_NE(Of(R"({"amount":"20.00","currency":"GBP","x":1})").current, a.current);
  EXPECT_NE(Of(body, "/v1/conversions").current, a.current);
}

TEST(RequestFingerprintTest, TheLegacyFormIsTheRawBodyHashEarlierVersionsStored) {
  const std::string body = R"({"amount":"20.00","currency":"GBP"})";
  // Exactly the formula before canonical fingerprints: keys stored by it keep replaying.
  EXPECT_EQ(Of(body).legacy, engine::Sha256Hex("POST /v1/topups\n" + body));
  EXPECT_TRUE(Of(body).Matches(engine::Sha256Hex("POST /v1/topups\n" + body)));
  EXPECT_FALSE(Of(R"({"currency":"GBP","amount":"20.00"})")
                   .Matches(engine::Sha256Hex("POST /v1/topups\n" + body)));
  // A body that is not JSON (or none) counts by its bytes, as before.
  for (const std::string raw : {"", "amount=20", "{\"amount\":", "{} {}"}) {
    auto f = Of(raw);
    EXPECT_EQ(f.current, f.legacy) << raw;
    EXPECT_EQ(f.current, engine::Sha256Hex("POST /v1/topups\n" + raw)) << raw;
  }
  EXPECT_NE(Of("amount=20").current, Of("amount=20 ").current);
  // Too deep for any handler to accept: raw bytes too (and never parsed).
  std::string deep(40, '[');
  deep += std::string(40, ']');
  EXPECT_EQ(Of(deep).current, Of(deep).legacy);
}

TEST(JsonBodyTest, OnlyTheJsonMediaTypeWithParametersAndNoBytesAfterTheValue) {
  for (const char* yes : {"application/json", "application/json; charset=utf-8",
                          "APPLICATION/JSON", " application/json ;charset=utf-8"}) {
    EXPECT_TRUE(IsJsonMediaType(yes)) << yes;
  }
  for (const char* no : {"", "application/jsonx", "application/json-patch+json", "text/json",
                         "application/json,text/plain", "application/ json", "multipart/form-data"}) {
    EXPECT_FALSE(IsJsonMediaType(no)) << no;
  }
  EXPECT_TRUE(CheckJsonText(R"({"a":"\u0000"})").ok());  // an escaped NUL is fine
  EXPECT_FALSE(CheckJsonText(std::string("{}\0x", 4)).ok());
  EXPECT_FALSE(CheckJsonText(std::string("{\"a\":\"\0\"}", 8)).ok());
  EXPECT_FALSE(CheckJsonText(std::string(100, '[')).ok());
}

// POST /v1/fit's "prices" field, taken out of the body before the fit request is parsed.
TEST(TakePricesFieldTest, FindsTheFieldHoweverItIsSpelledAndLeavesOtherBodiesAlone) {
  std::string body = R"({"model":"70b","workload":"infer"})";
  EXPECT_EQ(TakePricesField(&body).value(), false);
  EXPECT_EQ(body, R"({"model":"70b","workload":"infer"})");  // untouched, not re-serialized
  body = R"({"model":"70b","prices":"market"})";
  EXPECT_EQ(TakePricesField(&body).value(), true);
  EXPECT_EQ(body, R"({"model":"70b"})");
  body = R"({"prices":"list","model":"7b"})";
  EXPECT_EQ(TakePricesField(&body).value(), false);
  EXPECT_EQ(body, R"({"model":"7b"})");
  // The key spelled with an escape is the same key.
  body = R"({"model":"70b","\u0070rices":"market"})";
  EXPECT_EQ(TakePricesField(&body).value(), true);
  EXPECT_EQ(body, R"({"model":"70b"})");
  body = R"({"model":"70b","prices":5})";
  auto bad = TakePricesField(&body);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "prices");
}

}  // namespace
}  // namespace gpuhub::http
