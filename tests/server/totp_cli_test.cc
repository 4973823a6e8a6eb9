// `gpuhub login`, `gpuhub totp ...`, `gpuhub password change` and `gpuhub payout-destinations`
// against a real server: exit 0 with the answer, exit 2 with the server's message naming the
// field (a missing or wrong two-factor code, a bad address).
#include <gtest/gtest.h>
#include <stdlib.h>

#include "cli_fixture.h"
#include "core/clock.h"
#include "core/totp.h"

namespace gpuhub::testing {
namespace {

class TotpCliTest : public CliFixture {
 protected:
  void TearDown() override {
    ::unsetenv("GPUHUB_TOTP_CODE");
    CliFixture::TearDown();
  }
  // Moves the manual clock one TOTP step; the server's time in seconds.
  std::int64_t NextStep() {
    auto r =
        client_->Call("POST", "/v1/admin/clock/advance", {{"seconds", kTotpStepSeconds}}, admin_);
    EXPECT_EQ(r.status, 200) << r.body;
    auto now = ParseTimestamp(r.Json().value("now", ""));
    return now.ok() ? *now / 1'000'000 : 0;
  }
  static std::string LastLine(const CommandResult& r) {
    std::string out = r.output;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') + 1);
  }
};

TEST_F(TotpCliTest, EnableLogInWithACodeAndChangeThePassword) {
  auto plain = RunGpuhub({"login", "--username", "alice"}, "correct horse battery staple\n");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_TRUE(LastLine(plain).starts_with("ghs_")) << plain.output;

  auto enable = As(alice_, {"totp", "enable"});
  ASSERT_EQ(enable.exit_code, 0) << enable.output;
  std::string uri = LastLine(enable);
  ASSERT_TRUE(uri.starts_with("otpauth://totp/gpuhub:alice?secret=")) << enable.output;
  std::string base32 = uri.substr(uri.find("secret=") + 7);
  base32 = base32.substr(0, base32.find('&'));
  auto secret = Base32Decode(base32);
  ASSERT_TRUE(secret.ok());
  std::int64_t now = NextStep();
  auto confirm = As(alice_, {"totp", "confirm", "--totp-code", TotpCode(*secret, now)});
  ASSERT_EQ(confirm.exit_code, 0) << confirm.output;
  EXPECT_TRUE(Has(confirm, "recovery codes")) << confirm.output;

  auto missing = RunGpuhub({"login", "--username", "alice"}, "correct horse battery staple\n");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(Has(missing, "totp_code")) << missing.output;
  now = NextStep();
  ::setenv("GPUHUB_TOTP_CODE", TotpCode(*secret, now).c_str(), 1);
  auto with_code = RunGpuhub({"login", "--username", "alice"}, "correct horse battery staple\n");
  EXPECT_EQ(with_code.exit_code, 0) << with_code.output;
  // The same code again: used.
  auto replay = RunGpuhub({"login", "--username", "alice"}, "correct horse battery staple\n");
  EXPECT_EQ(replay.exit_code, 2) << replay.output;
  EXPECT_TRUE(Has(replay, "already used")) << replay.output;
  ::unsetenv("GPUHUB_TOTP_CODE");

  now = NextStep();
  auto change =
      RunGpuhub({"password", "change", "--token", alice_, "--totp-code", TotpCode(*secret, now)},
                "correct horse battery staple\na much better passphrase 42\n");
  EXPECT_EQ(change.exit_code, 0) << change.output;
  EXPECT_TRUE(Has(change, "other session(s) ended")) << change.output;
  auto old_session = RunGpuhub({"totp", "status", "--token", LastLine(plain)}, "");
  EXPECT_EQ(old_session.exit_code, 2) << old_session.output;
}

TEST_F(TotpCliTest, PayoutDestinationsNameTheBadField) {
  std::string paula =
      SignUpAndLogIn(*client_, "paula", "correct horse battery staple", {"provider"});
  auto bad = As(paula, {"payout-destinations", "add", "--kind", "btc", "--address",
                        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", "--label", "cold"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(Has(bad, "address")) << bad.output;
  auto good = As(paula, {"payout-destinations", "add", "--kind", "usdc", "--address",
                         "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "--label", "eth"});
  ASSERT_EQ(good.exit_code, 0) << good.output;
  EXPECT_TRUE(Has(good, "payout destination 1 \"eth\": usdc 0xa0b8")) << good.output;
  auto list = As(paula, {"payout-destinations", "list"});
  EXPECT_TRUE(Has(list, "payout destination 1")) << list.output;
  auto removed = As(paula, {"payout-destinations", "remove", "1"});
  EXPECT_EQ(removed.exit_code, 0) << removed.output;
  EXPECT_TRUE(Has(As(paula, {"payout-destinations", "list"}), "no payout destinations"));
}

}  // namespace
}  // namespace gpuhub::testing
