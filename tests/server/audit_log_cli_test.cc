// `gpuhub audit-log` against a real server (docs/cli.md): the account's events newest first, the
// next page's hint, --json, a read key from the environment, and bad input (exit 2).
#include <gtest/gtest.h>
#include <stdlib.h>

#include "cli_fixture.h"

namespace gpuhub::testing {
namespace {

class AuditLogCliTest : public CliFixture {
 protected:
  void TearDown() override {
    ::unsetenv("GPUHUB_API_KEY");
    CliFixture::TearDown();
  }
};

TEST_F(AuditLogCliTest, PrintsTheAccountsEventsAndPages) {
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(LogIn(*client_, "alice").empty());
  auto page = As(alice_, {"audit-log", "--limit", "2"});
  ASSERT_EQ(page.exit_code, 0) << page.output;
  EXPECT_TRUE(Has(page, "sign_in  account ")) << page.output;
  EXPECT_TRUE(Has(page, "from 127.0.0.1")) << page.output;
  EXPECT_TRUE(Has(page, "more: gpuhub audit-log --before ")) << page.output;

  auto json_out = As(alice_, {"audit-log", "--json"});
  ASSERT_EQ(json_out.exit_code, 0) << json_out.output;
  auto parsed = json::parse(json_out.output);
  EXPECT_EQ(parsed["events"].size(), 5u);  // 4 sign-ins and the billing country
  EXPECT_TRUE(parsed["next_cursor"].is_null());

  auto key = client_->Call("POST", "/v1/api-keys", {{"name", "cli"}, {"scopes", {"read"}}}, alice_);
  ASSERT_EQ(key.status, 201);
  ::setenv("GPUHUB_API_KEY", key.Json()["secret"].get<std::string>().c_str(), 1);
  auto with_key = RunGpuhub({"audit-log", "--limit", "1"}, "");
  EXPECT_EQ(with_key.exit_code, 0) << with_key.output;
  EXPECT_TRUE(Has(with_key, "api_key_first_used")) << with_key.output;
  auto others = RunGpuhub({"audit-log", "--account-id", "all"}, "");
  EXPECT_EQ(others.exit_code, 2) << others.output;
  EXPECT_TRUE(Has(others, "account_id")) << others.output;
  ::unsetenv("GPUHUB_API_KEY");

  auto bad = As(alice_, {"audit-log", "--account-id", "x y"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  auto admin_all = As(admin_, {"audit-log", "--account-id", "all", "--limit", "200"});
  EXPECT_EQ(admin_all.exit_code, 0) << admin_all.output;
  EXPECT_TRUE(Has(admin_all, "by user:")) << admin_all.output;
}

}  // namespace
}  // namespace gpuhub::testing
