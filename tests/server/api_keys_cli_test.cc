// `gpuhub api-keys ...` and how every verb takes an API key (GPUHUB_API_KEY or --api-key-file,
// never an argument), against a real server.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "cli_fixture.h"

namespace gpuhub::testing {
namespace {

class ApiKeysCliTest : public CliFixture {
 protected:
  void TearDown() override {
    ::unsetenv("GPUHUB_API_KEY");
    CliFixture::TearDown();
  }
  // The last line of the output (the secret, for create).
  static std::string LastLine(const CommandResult& r) {
    std::string out = r.output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') + 1);
  }
};

TEST_F(ApiKeysCliTest, CreateUseAndRevokeAKey) {
  auto created = As(alice_, {"api-keys", "create", "--name", "ci", "--scope", "read", "--scope",
                             "storage", "--allow-cidr", "127.0.0.0/8"});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_TRUE(Has(created, "api key 1 \"ci\" (ghk_1_...): read,storage")) << created.output;
  std::string secret = LastLine(created);
  ASSERT_TRUE(secret.starts_with("ghk_1_")) << created.output;

  auto listed = As(alice_, {"api-keys", "list"});
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_TRUE(Has(listed, "127.0.0.0/8")) << listed.output;
  EXPECT_FALSE(Has(listed, secret.substr(6))) << listed.output;

  // Never from an argument.
  auto argument = As(secret, {"volumes", "list"});
  EXPECT_EQ(argument.exit_code, 2) << argument.output;
  EXPECT_TRUE(Has(argument, "never taken from an argument")) << argument.output;
  // From a file...
  std::string file = dir_.path() + "/key";
  std::ofstream(file) << secret << "\n";
  auto from_file = RunGpuhub({"volumes", "list", "--api-key-file", file}, "");
  EXPECT_EQ(from_file.exit_code, 0) << from_file.output;
  // ...or the environment.
  ::setenv("GPUHUB_API_KEY", secret.c_str(), 1);
  auto from_env = RunGpuhub({"volumes", "list"}, "");
  EXPECT_EQ(from_env.exit_code, 0) << from_env.output;
  // A key cannot make keys: the server's 403 is the CLI's bad input.
  auto make = RunGpuhub({"api-keys", "create", "--name", "x", "--scope", "read"}, "");
  EXPECT_EQ(make.exit_code, 2) << make.output;
  EXPECT_TRUE(Has(make, "API keys cannot manage API keys")) << make.output;
  // Bad input names the field.
  auto bad = As(alice_, {"api-keys", "create", "--name", "x", "--scope", "write"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(Has(bad, "(field scopes)")) << bad.output;

  auto revoked = As(alice_, {"api-keys", "revoke", "1"});
  EXPECT_EQ(revoked.exit_code, 0) << revoked.output;
  auto after = RunGpuhub({"volumes", "list"}, "");
  EXPECT_EQ(after.exit_code, 2) << after.output;
  EXPECT_TRUE(Has(after, "401")) << after.output;
}

}  // namespace
}  // namespace gpuhub::testing
