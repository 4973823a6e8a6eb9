// Two-factor sign-in, the password change and payout destinations through the real server, on
// SQLite and PostgreSQL (docs/api.md, "Two-factor sign-in"): the login asks for the code, a code
// is good once (also after a restart), wrong codes name totp_code and count in the login
// throttle, recovery codes are single-use, a password change ends the other sessions, a spending
// key and a payout destination need a fresh code, and bad destinations name their field.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/clock.h"
#include "core/totp.h"
#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

class TotpTest : public ServerFixture {
 protected:
  static std::string Field(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("field", "") : "";
  }
  // Moves the manual clock a whole TOTP step (a new code) and returns the server's time.
  std::int64_t NextStep() {
    auto r =
        client_->Call("POST", "/v1/admin/clock/advance", {{"seconds", kTotpStepSeconds}}, admin_);
    EXPECT_EQ(r.status, 200) << r.body;
    auto now = ParseTimestamp(r.Json().value("now", ""));
    EXPECT_TRUE(now.ok()) << r.body;
    now_ = *now / 1'000'000;
    return now_;
  }
  std::string Code(int steps_ahead = 0) {
    return TotpCode(secret_, now_ + steps_ahead * kTotpStepSeconds);
  }
  // Enables two-factor for `token`'s account; returns the recovery codes.
  std::vector<std::string> Enable(const std::string& token) {
    auto start = client_->Call("POST", "/v1/accounts/me/totp", json::object(), token);
    EXPECT_EQ(start.status, 201) << start.body;
    std::string base32 = start.Json().value("secret", "");
    EXPECT_TRUE(start.Json().value("otpauth_uri", "").starts_with("otpauth://totp/gpuhub:"))
        << start.body;
    auto secret = Base32Decode(base32);
    EXPECT_TRUE(secret.ok());
    secret_ = secret.ok() ? *secret : "";
    EXPECT_EQ(secret_.size(), 20u);
    NextStep();
    auto confirmed =
        client_->Call("POST", "/v1/accounts/me/totp/confirm", {{"totp_code", Code()}}, token);
    EXPECT_EQ(confirmed.status, 200) << confirmed.body;
    std::vector<std::string> codes;
    json answer = confirmed.Json();  // kept: a range-for over a temporary's member dangles
    for (const auto& c : answer["recovery_codes"]) codes.push_back(c);
    EXPECT_EQ(codes.size(), 10u) << confirmed.body;
    return codes;
  }
  HttpResponse Login(const std::string& user, std::optional<std::string> code,
                     const std::string& password = kFixturePassword) {
    json body = {{"username", user}, {"password", password}};
    if (code) body["totp_code"] = *code;
    return client_->Call("POST", "/v1/sessions", body, "");
  }
  std::string secret_;
  std::int64_t now_ = 0;
};

TEST_P(TotpTest, LoginNeedsTheCodeAndEachCodeIsGoodOnce) {
  std::string kate = User("kate", {"customer"});
  auto off = Get("/v1/accounts/me/totp", kate);
  EXPECT_EQ(off["enabled"], false);
  auto recovery = Enable(kate);
  ASSERT_EQ(recovery.size(), 10u);
  EXPECT_EQ(Get("/v1/accounts/me/totp", kate)["recovery_codes_left"], 10);

  // The password alone is not enough, and a wrong code issues no session either.
  auto missing = Login("kate", std::nullopt);
  EXPECT_EQ(missing.status, 401) << missing.body;
  EXPECT_EQ(Field(missing), "totp_code");
  EXPECT_FALSE(missing.Json().contains("token"));
  std::string wrong_code = Code() == "123456" ? "654321" : "123456";
  auto wrong = Login("kate", wrong_code);
  EXPECT_EQ(wrong.status, 401) << wrong.body;
  EXPECT_EQ(Field(wrong), "totp_code");
  // The confirming code's step is used: replay refused.
  auto replay_of_confirm = Login("kate", Code());
  EXPECT_EQ(replay_of_confirm.status, 401) << replay_of_confirm.body;
  // The next step's code signs in, once.
  NextStep();
  std::string code = Code();
  auto good = Login("kate", code);
  ASSERT_EQ(good.status, 201) << good.body;
  EXPECT_TRUE(good.Json().value("token", "").starts_with("ghs_"));
  auto replay = Login("kate", code);
  EXPECT_EQ(replay.status, 401) << replay.body;
  EXPECT_EQ(Field(replay), "totp_code");
  // Still refused after a restart (the used step is on the row).
  Restart();
  admin_ = LogInAdmin(*client_);
  EXPECT_EQ(Login("kate", code).status, 401);

  // A recovery code works once, and the count goes down.
  auto by_recovery = Login("kate", recovery[3]);
  ASSERT_EQ(by_recovery.status, 201) << by_recovery.body;
  std::string session = by_recovery.Json()["token"];
  auto again = Login("kate", recovery[3]);
  EXPECT_EQ(again.status, 401) << again.body;
  EXPECT_EQ(Field(again), "totp_code");
  EXPECT_EQ(Get("/v1/accounts/me/totp", session)["recovery_codes_left"], 9);

  // New recovery codes need a fresh TOTP code (not a recovery code); the old ones end.
  auto by_old = client_->Call("POST", "/v1/accounts/me/recovery-codes",
                              {{"totp_code", recovery[4]}}, session);
  EXPECT_EQ(by_old.status, 400) << by_old.body;
  EXPECT_EQ(Field(by_old), "totp_code");
  NextStep();
  auto fresh =
      client_->Call("POST", "/v1/accounts/me/recovery-codes", {{"totp_code", Code()}}, session);
  ASSERT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_EQ(fresh.Json()["recovery_codes"].size(), 10u);
  EXPECT_EQ(Login("kate", recovery[5]).status, 401);

  // Disabling takes a code; then the password alone signs in again.
  auto no_code = client_->Call("POST", "/v1/accounts/me/totp/disable", json::object(), session);
  EXPECT_EQ(no_code.status, 400) << no_code.body;
  EXPECT_EQ(Field(no_code), "totp_code");
  std::string new_recovery = fresh.Json()["recovery_codes"][0];
  auto disabled =
      client_->Call("POST", "/v1/accounts/me/totp/disable", {{"totp_code", new_recovery}}, session);
  ASSERT_EQ(disabled.status, 200) << disabled.body;
  EXPECT_EQ(disabled.Json()["enabled"], false);
  EXPECT_EQ(Login("kate", std::nullopt).status, 201);
}

TEST_P(TotpTest, WrongCodesCountInTheLoginThrottle) {
  std::string kate = User("kate", {"customer"});
  Enable(kate);
  NextStep();
  std::string wrong = Code() == "000000" ? "111111" : "000000";
  std::vector<int> statuses;
  for (int i = 0; i < 10; ++i) statuses.push_back(Login("kate", wrong).status);
  // Five free failures per (username, address) pair, then the pair waits 1 s, 2 s, 4 s, ...
  // (login_throttle.h): each wrong code counted.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(statuses[i], 401) << i;
  EXPECT_NE(std::find(statuses.begin(), statuses.end(), 429), statuses.end());
  // While it waits, even the right code is not checked.
  auto right = Login("kate", Code());
  EXPECT_EQ(right.status, 429) << right.body;
}

TEST_P(TotpTest, APasswordChangeEndsTheOtherSessionsButNotKeys) {
  std::string mine = User("kate", {"customer"});
  std::string other = LogIn(*client_, "kate");
  ASSERT_FALSE(other.empty());
  auto key = client_->Call("POST", "/v1/api-keys", {{"name", "ci"}, {"scopes", {"read"}}}, mine);
  ASSERT_EQ(key.status, 201) << key.body;
  std::string secret = key.Json()["secret"];

  auto wrong = client_->Call("POST", "/v1/accounts/me/password",
                             {{"current_password", "not the password at all"},
                              {"new_password", "a much better passphrase 42"}},
                             mine);
  EXPECT_EQ(wrong.status, 403) << wrong.body;
  EXPECT_EQ(Field(wrong), "current_password");
  auto weak =
      client_->Call("POST", "/v1/accounts/me/password",
                    {{"current_password", kFixturePassword}, {"new_password", "short"}}, mine);
  EXPECT_EQ(weak.status, 400) << weak.body;
  EXPECT_EQ(Field(weak), "new_password");
  // A key can never change the password.
  auto by_key = client_->Call(
      "POST", "/v1/accounts/me/password",
      {{"current_password", kFixturePassword}, {"new_password", "a much better passphrase 42"}},
      secret);
  EXPECT_EQ(by_key.status, 403) << by_key.body;

  auto changed = client_->Call(
      "POST", "/v1/accounts/me/password",
      {{"current_password", kFixturePassword}, {"new_password", "a much better passphrase 42"}},
      mine);
  ASSERT_EQ(changed.status, 200) << changed.body;
  EXPECT_EQ(changed.Json()["sessions_revoked"], 1);
  EXPECT_EQ(client_->Call("GET", "/v1/accounts/me", nullptr, other).status, 401);
  EXPECT_EQ(client_->Call("GET", "/v1/accounts/me", nullptr, mine).status, 200);
  EXPECT_EQ(client_->Call("GET", "/v1/accounts/me", nullptr, secret).status, 200);
  EXPECT_EQ(Login("kate", std::nullopt).status, 401);
  EXPECT_EQ(Login("kate", std::nullopt, "a much better passphrase 42").status, 201);

  // With two-factor, a change needs a fresh code too.
  Enable(mine);
  NextStep();
  json body = {{"current_password", "a much better passphrase 42"},
               {"new_password", "yet another fine passphrase"}};
  auto no_code = client_->Call("POST", "/v1/accounts/me/password", body, mine);
  EXPECT_EQ(no_code.status, 400) << no_code.body;
  EXPECT_EQ(Field(no_code), "totp_code");
  body["totp_code"] = Code();
  auto with_code = client_->Call("POST", "/v1/accounts/me/password", body, mine);
  EXPECT_EQ(with_code.status, 200) << with_code.body;
}

TEST_P(TotpTest, SpendingAndPayoutKeysNeedAFreshCode) {
  std::string paula = User("paula", {"customer", "provider"});
  Enable(paula);
  NextStep();
  auto read = client_->Call("POST", "/v1/api-keys", {{"name", "r"}, {"scopes", {"read"}}}, paula);
  EXPECT_EQ(read.status, 201) << read.body;
  for (const char* scope : {"wallet-spend", "payouts"}) {
    json body = {{"name", "spend"}, {"scopes", {"read", scope}}};
    auto refused = client_->Call("POST", "/v1/api-keys", body, paula);
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_EQ(Field(refused), "totp_code");
    body["totp_code"] = Code() == "000000" ? "111111" : "000000";
    auto wrong = client_->Call("POST", "/v1/api-keys", body, paula);
    EXPECT_EQ(Field(wrong), "totp_code") << wrong.body;
    body["totp_code"] = Code();
    auto made = client_->Call("POST", "/v1/api-keys", body, paula);
    EXPECT_EQ(made.status, 201) << made.body;
    NextStep();
  }
  // No key may touch two-factor.
  std::string key = read.Json()["secret"];
  EXPECT_EQ(client_->Call("GET", "/v1/accounts/me/totp", nullptr, key).status, 403);
  EXPECT_EQ(
      client_->Call("POST", "/v1/accounts/me/totp/disable", {{"totp_code", Code()}}, key).status,
      403);
}

TEST_P(TotpTest, PayoutDestinationsAreValidatedAndNeedACode) {
  std::string paula = User("paula", {"provider"});
  auto post = [&](json body) {
    return client_->Call("POST", "/v1/payout-destinations", body, paula);
  };
  EXPECT_EQ(Field(post({{"kind", "eth"}, {"address", "0x0"}, {"label", "x"}})), "kind");
  auto bad_btc = post({{"kind", "btc"},
                       {"address", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5"},
                       {"label", "cold"}});
  EXPECT_EQ(bad_btc.status, 400) << bad_btc.body;
  EXPECT_EQ(Field(bad_btc), "address");
  EXPECT_EQ(Field(post(
                {{"kind", "bank"}, {"address", "DE89 3704 0044 0532 0130 01"}, {"label", "bank"}})),
            "address");
  EXPECT_EQ(Field(post({{"kind", "usdt"}, {"address", "0x12"}, {"label", "t"}})), "address");
  EXPECT_EQ(Field(post({{"kind", "btc"}, {"address", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"}})),
            "label");
  auto good = post(
      {{"kind", "bank"}, {"address", "DE89 3704 0044 0532 0130 00"}, {"label", "main account"}});
  ASSERT_EQ(good.status, 201) << good.body;
  EXPECT_EQ(good.Json()["address"], "DE89370400440532013000");
  // Customers hold none.
  std::string carl = User("carl", {"customer"});
  auto customer = client_->Call(
      "POST", "/v1/payout-destinations",
      {{"kind", "btc"}, {"address", "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"}, {"label", "x"}}, carl);
  EXPECT_EQ(customer.status, 403) << customer.body;

  Enable(paula);
  NextStep();
  json btc = {{"kind", "btc"},
              {"address", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"},
              {"label", "cold"}};
  auto no_code = post(btc);
  EXPECT_EQ(no_code.status, 400) << no_code.body;
  EXPECT_EQ(Field(no_code), "totp_code");
  btc["totp_code"] = Code();
  ASSERT_EQ(post(btc).status, 201);
  Restart();
  auto list = Get("/v1/payout-destinations", paula);
  ASSERT_EQ(list["payout_destinations"].size(), 2u);
  EXPECT_EQ(list["payout_destinations"][1]["label"], "cold");
  std::string id = list["payout_destinations"][0]["id"].dump();
  // A payout may name one of them; someone else's or an unknown one is 404 naming the field.
  auto unknown =
      client_->Call("POST", "/v1/payouts", {{"amount", "1.00"}, {"destination_id", 99}}, paula);
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_EQ(Field(unknown), "destination_id");
  auto bad_id =
      client_->Call("POST", "/v1/payouts", {{"amount", "1.00"}, {"destination_id", "one"}}, paula);
  EXPECT_EQ(Field(bad_id), "destination_id") << bad_id.body;
  EXPECT_EQ(client_->Call("DELETE", "/v1/payout-destinations/" + id, nullptr, paula).status, 204);
  EXPECT_EQ(Get("/v1/payout-destinations", paula)["payout_destinations"].size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, TotpTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
