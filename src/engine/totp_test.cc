#include "engine/totp.h"

#include <gtest/gtest.h>

#include "core/totp.h"
#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"

namespace gpuhub::engine {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;  // 2023-11-14T22:13:20Z, step 56666666
const std::string kSecret = "12345678901234567890";        // RFC 6238's seed: 20 bytes

class TotpTest : public EngineOnSqliteTest {
 protected:
  TotpTest() : EngineOnSqliteTest(kStart, "gpuhub_totp") {}
  void SetUp() override {
    OpenEngine();
    user_ = Run<User>([](Txn& txn) { return CreateUser(txn, "carol", "h", kRoleCustomer); });
  }
  std::int64_t NowSeconds() { return clock_.NowMicros() / kMicrosPerSecond; }
  std::string CodeNow(std::int64_t steps_ahead = 0) {
    return TotpCode(kSecret, NowSeconds() + steps_ahead * kTotpStepSeconds);
  }
  Status Exec(std::function<Status(Txn&)> fn) {
    return engine_
        ->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
          GPUHUB_RETURN_IF_ERROR(fn(txn));
          return 0;
        })
        .status();
  }
  Status Check(std::optional<std::string> code, TotpPurpose purpose = TotpPurpose::kSignIn) {
    return Exec([&](Txn& txn) { return CheckTotp(txn, user_.id, code, purpose); });
  }
  std::vector<std::string> Enable() {
    auto start = engine_->ExecuteSync<TotpEnrolment>(
        [&](Txn& txn) { return StartTotp(txn, user_, kSecret); });
    EXPECT_TRUE(start.ok());
    EXPECT_EQ(start->secret_base32, "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
    EXPECT_EQ(start->otpauth_uri,
              "otpauth://totp/gpuhub:carol?secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ&issuer=gpuhub&"
              "algorithm=SHA1&digits=6&period=30");
    auto codes = RecoveryCodesFrom(std::string(70, '\x5a'));
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i][0] = static_cast<char>('a' + i);
    Status confirmed = Exec([&](Txn& txn) { return ConfirmTotp(txn, user_.id, CodeNow(), codes); });
    EXPECT_TRUE(confirmed.ok()) << confirmed.ToString();
    return codes;
  }
  User user_;
};

TEST(TotpRecoveryCodes, TenCodesOfTenSymbols) {
  auto codes = RecoveryCodesFrom(RandomBytes(kTotpRecoveryCodes * 7));
  ASSERT_EQ(codes.size(), 10u);
  for (const auto& c : codes) {
    ASSERT_EQ(c.size(), 11u) << c;
    EXPECT_EQ(c[5], '-');
  }
  EXPECT_EQ(NormalizeRecoveryCode("ABCDE-FGHIJ"), "abcdefghij");
  EXPECT_EQ(NormalizeRecoveryCode("abcde fghij"), "abcdefghij");
}

TEST_F(TotpTest, NothingIsAskedWithoutTwoFactorNorWhilePending) {
  EXPECT_TRUE(Check(std::nullopt).ok());
  Run<TotpEnrolment>([&](Txn& txn) { return StartTotp(txn, user_, kSecret); });
  EXPECT_TRUE(Check(std::nullopt).ok());  // pending: not enabled until confirmed
  EXPECT_FALSE(
      Run<bool>([&](Txn& txn) -> Result<bool> { return TotpEnabled(txn.state, user_.id); }));
}

TEST_F(TotpTest, ConfirmNeedsTheCodeOfThePendingSecret) {
  Run<TotpEnrolment>([&](Txn& txn) { return StartTotp(txn, user_, kSecret); });
  Status wrong = Exec([&](Txn& txn) { return ConfirmTotp(txn, user_.id, "000000", {}); });
  if (CodeNow() != "000000") {
    EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(wrong.field(), "totp_code");
  }
  Enable();
  // Enabled: a second enrolment is refused until it is disabled.
  auto again =
      engine_->ExecuteSync<TotpEnrolment>([&](Txn& txn) { return StartTotp(txn, user_, kSecret); });
  EXPECT_EQ(again.status().code(), StatusCode::kConflict);
}

TEST_F(TotpTest, ACodeIsGoodOnceAndOneStepEitherSide) {
  Enable();  // used the step of now
  Status replay = Check(CodeNow());
  EXPECT_EQ(replay.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(replay.field(), "totp_code");
  EXPECT_NE(replay.message().find("already used"), std::string::npos);
  // The next step's code (a phone's clock 30 s ahead) is good, once.
  EXPECT_TRUE(Check(CodeNow(1)).ok());
  EXPECT_FALSE(Check(CodeNow(1)).ok());
  // Two steps ahead is too far; after 60 s it is the previous-step code, still good.
  std::string later = CodeNow(2);
  EXPECT_FALSE(Check(later).ok());
  Advance(2 * kTotpStepSeconds * kMicrosPerSecond + kMicrosPerSecond);
  EXPECT_TRUE(Check(later).ok());
  // Missing and malformed codes name the field too.
  EXPECT_EQ(Check(std::nullopt).field(), "totp_code");
  EXPECT_EQ(Check("").field(), "totp_code");
  EXPECT_EQ(Check("12345").field(), "totp_code");
}

TEST_F(TotpTest, ReplayIsRefusedAfterARestart) {
  Enable();
  Advance(kTotpStepSeconds * kMicrosPerSecond);
  std::string code = CodeNow();
  ASSERT_TRUE(Check(code).ok());
  OpenEngine();  // the state comes back from the database
  EXPECT_EQ(Check(code).field(), "totp_code");
  EXPECT_TRUE(Check(CodeNow(1)).ok());
}

TEST_F(TotpTest, RecoveryCodesAreSingleUseAndOnlyWherePurposeAllows) {
  auto codes = Enable();
  ASSERT_EQ(codes.size(), 10u);
  // Not for a fresh-code check (password change, spending keys, payout destinations).
  EXPECT_EQ(Check(codes[0], TotpPurpose::kFreshCode).field(), "totp_code");
  // Signing in: once, in any case and spacing.
  std::string upper = codes[0];
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_TRUE(Check(upper).ok());
  EXPECT_EQ(Check(codes[0]).field(), "totp_code");
  OpenEngine();
  EXPECT_EQ(Check(codes[0]).field(), "totp_code");
  EXPECT_EQ(Run<std::size_t>([&](Txn& txn) -> Result<std::size_t> {
              return FindTotp(txn.state, user_.id)->recovery_hashes.size();
            }),
            9u);
  // New codes replace the old ones (fresh TOTP code needed).
  Advance(kTotpStepSeconds * kMicrosPerSecond);
  std::vector<std::string> fresh = {"zzzzz-zzzzz"};
  EXPECT_EQ(
      Exec([&](Txn& txn) { return ReplaceRecoveryCodes(txn, user_.id, codes[1], fresh); }).field(),
      "totp_code");
  EXPECT_TRUE(
      Exec([&](Txn& txn) { return ReplaceRecoveryCodes(txn, user_.id, CodeNow(), fresh); }).ok());
  EXPECT_EQ(Check(codes[1]).field(), "totp_code");
  // Disabling with a recovery code works, and then nothing is asked.
  EXPECT_TRUE(Exec([&](Txn& txn) { return DisableTotp(txn, user_.id, "ZZZZZ-ZZZZZ"); }).ok());
  EXPECT_TRUE(Check(std::nullopt).ok());
  OpenEngine();
  EXPECT_TRUE(Check(std::nullopt).ok());
}

TEST_F(TotpTest, VerifyChangesNothingUntilUsed) {
  Enable();
  Advance(kTotpStepSeconds * kMicrosPerSecond);
  std::string code = CodeNow();
  auto use = engine_->ExecuteSync<TotpUse>([&](Txn& txn) {
    return VerifyTotp(txn.state, txn.now, user_.id, code, TotpPurpose::kFreshCode);
  });
  ASSERT_TRUE(use.ok());
  ASSERT_TRUE(use->step);
  EXPECT_TRUE(Check(code).ok());  // verified only: still good
  EXPECT_FALSE(Check(code).ok());
}

}  // namespace
}  // namespace gpuhub::engine
