#include "http/json_keys.h"

#include <gtest/gtest.h>

#include <string>

namespace gpuhub::http {
namespace {

TEST(JsonKeys, ARepeatedNameIsRefusedAtAnyDepth) {
  for (const char* body : {R"({"amount":"1","amount":"1000"})", R"({"a":{"b":1,"b":2}})",
                           R"({"list":[{"x":1},{"y":1,"y":2}]})",
                           R"({"amount":"1","\u0061mount":"2"})", R"([{"k":1,"k":1}])"}) {
    Status s = CheckNoDuplicateKeys(body);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(s.message().find("more than once"), std::string::npos) << s.message();
    EXPECT_FALSE(s.field().empty()) << body;
  }
  EXPECT_EQ(CheckNoDuplicateKeys(R"({"amount":"1","amount":"2"})").field(), "amount");
}

TEST(JsonKeys, TheSameNameInDifferentObjectsIsFine) {
  for (const char* body : {R"({"a":{"id":1},"b":{"id":2},"id":3})", R"([{"id":1},{"id":2}])",
                           R"({})", R"([])", R"("text")", R"(12)", R"({"a":[{"a":{"a":1}}]})"}) {
    EXPECT_TRUE(CheckNoDuplicateKeys(body).ok()) << body;
  }
}

TEST(JsonKeys, InvalidJsonIsLeftToTheParser) {
  EXPECT_TRUE(CheckNoDuplicateKeys(R"({"a":1,)").ok());
  EXPECT_TRUE(CheckNoDuplicateKeys("not json").ok());
}

TEST(JsonKeys, ManyNamesInOneObjectStayCorrectPastTheScannedOnes) {
  std::string body = "{";
  for (int i = 0; i < 5000; ++i) body += "\"k" + std::to_string(i) + "\":1,";
  std::string unique = body + "\"last\":1}";
  EXPECT_TRUE(CheckNoDuplicateKeys(unique).ok());
  std::string repeated = body + "\"k3\":1}";
  EXPECT_EQ(CheckNoDuplicateKeys(repeated).field(), "k3");
  std::string repeated_late = body + "\"k4999\":2}";
  EXPECT_EQ(CheckNoDuplicateKeys(repeated_late).field(), "k4999");
}

}  // namespace
}  // namespace gpuhub::http
