// Issue 25 (Hardening 2) through a real `gpuhub serve`: sign-up refuses weak passwords and the
// usernames an impostor would want, naming the field; the session cap ends the oldest sessions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

class AccountRulesTest : public ServerFixture {};

void ExpectRefused(HttpClient& client, const json& body, const std::string& field,
                   const std::string& message) {
  auto r = client.Call("POST", "/v1/accounts", body);
  EXPECT_EQ(r.status, 400) << body.dump() << " -> " << r.body;
  json error = r.Json()["error"];
  EXPECT_EQ(error["code"], "invalid_argument") << r.body;
  EXPECT_EQ(error["field"], field) << body.dump() << " -> " << r.body;
  EXPECT_NE(error["message"].get<std::string>().find(message), std::string::npos) << r.body;
}

TEST_P(AccountRulesTest, WeakPasswordsAreRefusedNamingThePassword) {
  std::string nine_accented;  // 18 bytes, 9 characters
  for (int i = 0; i < 9; ++i) nine_accented += "\xc3\xa9";
  const std::vector<std::pair<std::string, std::string>> weak = {
      {"password12", "most common"},
      {"Password12", "most common"},
      {"QWERTYUIOP", "most common"},
      {"monkey2024!", "most common"},
      {"          ", "two different characters"},
      {"aaaaaaaaaa", "two different characters"},
      {nine_accented, "at least 10 characters"},
  };
  for (const auto& [password, message] : weak) {
    ExpectRefused(*client_, {{"username", "carol"}, {"password", password}}, "password", message);
  }
  // Nothing was created: the name is still free, and a good password takes it.
  auto ok = client_->Call("POST", "/v1/accounts",
                          {{"username", "carol"}, {"password", "purple monkey dishwasher"}});
  EXPECT_EQ(ok.status, 201) << ok.body;
  auto ten_accented = client_->Call(
      "POST", "/v1/accounts", {{"username", "dora"}, {"password", nine_accented + "\xc3\xa8"}});
  EXPECT_EQ(ten_accented.status, 201) << ten_accented.body;
}

TEST_P(AccountRulesTest, ReservedUsernamesAreRefusedButTheOperatorsAdminLogsIn) {
  for (const char* name : {"admin", "Administrator", "root", "Support", "billing", "security",
                           "gpuhub", "gpu-hub", "gpuhub_team", "r00t", "adm1n", "admin2",
                           "support-team", "john.admin", "webmaster", "postmaster", "www"}) {
    ExpectRefused(*client_, {{"username", name}, {"password", "purple monkey dishwasher"}},
                  "username", "reserved");
  }
  // The fixture's administrator is "root", made by `gpuhub admin create-user`: it still logs in.
  EXPECT_FALSE(LogInAdmin(*client_).empty());
  EXPECT_FALSE(User("badminton", {"customer"}).empty());
}

// The manual clock stands still, so every login below has the same time: the cap used to end
// random sessions then (the order fell to the token hashes).
TEST_P(AccountRulesTest, LoginsPastTheCapEndTheOldestSessionsOnly) {
  constexpr int kCap = 50;  // engine::kMaxSessionsPerUser
  constexpr int kExtra = 4;
  std::vector<std::string> tokens = {User("henry", {"customer"})};  // signs up and logs in
  while (static_cast<int>(tokens.size()) < kCap + kExtra)
    tokens.push_back(LogIn(*client_, "henry"));
  for (int i = 0; i < kCap + kExtra; ++i) {
    ASSERT_FALSE(tokens[i].empty()) << "login #" << i + 1;
    int status = client_->Call("GET", "/v1/accounts/me", nullptr, tokens[i]).status;
    EXPECT_EQ(status, i < kExtra ? 401 : 200) << "login #" << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Sqlite, AccountRulesTest, ::testing::Values("sqlite"));

}  // namespace
}  // namespace gpuhub::testing
