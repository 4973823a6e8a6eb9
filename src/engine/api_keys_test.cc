#include "engine/api_keys.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"
#include "engine/limits.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;  // 2023-11-14T22:13:20Z

class ApiKeysTest : public EngineOnSqliteTest {
 protected:
  ApiKeysTest() : EngineOnSqliteTest(kStart, "gpuhub_api_keys") {}
  void SetUp() override {
    OpenEngine();
    user_ = Run<User>([](Txn& txn) { return CreateUser(txn, "carol", "h", kRoleCustomer); });
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_ASSIGN_OR_RETURN(User admin, CreateUser(txn, "root", "h", kRoleAdmin));
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, admin.id, user_.id, Currency::kUsd, 100'000'000, "wire").status());
      GPUHUB_RETURN_IF_ERROR(
          SetFxRate(txn, Currency::kEur, Currency::kUsd, 1'000'000'000, 0).status());
      return 0;
    });
  }
  Result<ApiKey> Create(ApiKeySpec spec, std::string hash = "h1") {
    return engine_->ExecuteSync<ApiKey>(
        [&](Txn& txn) { return CreateApiKey(txn, user_, spec, hash); });
  }
  // A conversion of `micros` USD to EUR made as `key_id` would make it through the API.
  Status SpendAs(std::int64_t key_id, std::int64_t micros) {
    return engine_
        ->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
          ApiKey key = txn.state.api_keys->keys.at(key_id);
          ApiKeySpend spend(txn, key);
          GPUHUB_RETURN_IF_ERROR(
              Convert(txn, user_.id, Currency::kUsd, Currency::kEur, micros).status());
          spend.Commit();
          return 0;
        })
        .status();
  }
  User user_;
};

TEST(ApiKeyNames, ScopesRoundTripAndSecretsNameTheirKey) {
  for (const char* name :
       {"read", "market", "rentals", "storage", "wallet-spend", "payouts", "admin"}) {
    auto scope = ParseApiScope(name);
    ASSERT_TRUE(scope.ok()) << name;
    EXPECT_EQ(ApiScopeNames(*scope), std::vector<std::string>{name});
  }
  auto bad = ParseApiScope("write");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().field(), "scopes");
  std::string secret = ApiKeySecret(42, RandomHex(32));
  EXPECT_TRUE(secret.starts_with("ghk_42_"));
  EXPECT_EQ(secret.size(), 7u + 64u);
  EXPECT_EQ(ApiKeyIdOf(secret), 42);
  EXPECT_EQ(ApiKeyIdOf("ghs_42_abc"), 0);
  EXPECT_EQ(ApiKeyIdOf("ghk_x2_abc"), 0);
  EXPECT_EQ(ApiKeyIdOf("ghk__abc"), 0);
  User customer{1, "c", "", kRoleCustomer, 0};
  User provider{2, "p", "", kRoleProvider, 0};
  EXPECT_FALSE(ScopesAllowedFor(customer) & kScopePayouts);
  EXPECT_TRUE(ScopesAllowedFor(provider) & kScopePayouts);
  EXPECT_FALSE(ScopesAllowedFor(provider) & kScopeAdmin);
}

TEST_F(ApiKeysTest, CreatesValidatesAndRevokes) {
  auto key = Create({"ci", kScopeRead | kScopeMarket, std::nullopt, Currency::kUsd, {}, {}});
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->id, 1);
  EXPECT_EQ(key->expires_at, kStart + kDefaultApiKeyLifetimeMicros);

  auto payouts = Create({"p", kScopePayouts, std::nullopt, Currency::kUsd, {}, {}}, "h2");
  EXPECT_EQ(payouts.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(payouts.status().field(), "scopes");
  auto past = Create({"p", kScopeRead, std::nullopt, Currency::kUsd, {}, kStart - 1}, "h2");
  EXPECT_EQ(past.status().field(), "expires_at");
  auto far = Create(
      {"p", kScopeRead, std::nullopt, Currency::kUsd, {}, kStart + kMaxApiKeyLifetimeMicros + 1},
      "h2");
  EXPECT_EQ(far.status().field(), "expires_at");
  auto cap_alone = Create({"p", kScopeRead, 5'000'000, Currency::kUsd, {}, {}}, "h2");
  EXPECT_EQ(cap_alone.status().field(), "spend_cap_per_day");
  auto unnamed = Create({"", kScopeRead, std::nullopt, Currency::kUsd, {}, {}}, "h2");
  EXPECT_EQ(unnamed.status().field(), "name");

  auto found =
      engine_->ExecuteSync<ApiKeyCaller>([](Txn& txn) { return AuthenticateApiKey(txn, "h1"); });
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->user.id, user_.id);
  OpenEngine();  // the key comes back from the database
  EXPECT_EQ(Run<std::size_t>([&](Txn& txn) -> Result<std::size_t> {
              return ListApiKeys(txn.state, user_.id).size();
            }),
            1u);
  EXPECT_TRUE(Run<int>([&](Txn& txn) -> Result<int> {
                GPUHUB_RETURN_IF_ERROR(RevokeApiKey(txn, user_.id, 1));
                return 0;
              }) == 0);
  auto gone =
      engine_->ExecuteSync<ApiKeyCaller>([](Txn& txn) { return AuthenticateApiKey(txn, "h1"); });
  EXPECT_EQ(gone.status().code(), StatusCode::kUnauthenticated);
}

TEST_F(ApiKeysTest, AnAccountHoldsAtMostTheNamedNumberOfKeys) {
  for (std::size_t i = 0; i < kMaxApiKeysPerUser; ++i) {
    ASSERT_TRUE(Create({"k", kScopeRead, std::nullopt, Currency::kUsd, {}, {}},
                       "hash" + std::to_string(i))
                    .ok());
  }
  auto over = Create({"k", kScopeRead, std::nullopt, Currency::kUsd, {}, {}}, "one more");
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(Run<int>([&](Txn& txn) -> Result<int> {
                GPUHUB_RETURN_IF_ERROR(RevokeApiKey(txn, user_.id, 3));
                return 1;
              }) == 1);
  EXPECT_TRUE(Create({"k", kScopeRead, std::nullopt, Currency::kUsd, {}, {}}, "one more").ok());
}

TEST_F(ApiKeysTest, AKeyExpires) {
  ASSERT_TRUE(Create({"ci", kScopeRead, std::nullopt, Currency::kUsd, {}, kStart + 1000}).ok());
  Advance(1000);
  auto expired =
      engine_->ExecuteSync<ApiKeyCaller>([](Txn& txn) { return AuthenticateApiKey(txn, "h1"); });
  EXPECT_EQ(expired.status().code(), StatusCode::kUnauthenticated);
  EXPECT_NE(expired.status().message().find("expired"), std::string::npos);
}

TEST_F(ApiKeysTest, TheDailyCapHoldsAcrossARestartAndResetsTheNextDay) {
  auto capped = Create({"spend", kScopeWalletSpend, 10'000'000, Currency::kUsd, {}, {}});
  ASSERT_TRUE(capped.ok());
  auto none = Create({"read", kScopeRead, std::nullopt, Currency::kUsd, {}, {}}, "h2");
  ASSERT_TRUE(none.ok());

  Status no_scope = SpendAs(none->id, 10'000);
  EXPECT_EQ(no_scope.code(), StatusCode::kInsufficientFunds);
  EXPECT_NE(no_scope.message().find("no wallet-spend scope"), std::string::npos);

  EXPECT_TRUE(SpendAs(capped->id, 6'000'000).ok());
  Status over = SpendAs(capped->id, 4'000'001);
  EXPECT_EQ(over.code(), StatusCode::kInsufficientFunds);
  EXPECT_NE(over.message().find("at most 10.000000 USD a day"), std::string::npos);
  EXPECT_EQ(UsdAvailable(user_.id), 94'000'000);  // the refused one moved nothing

  OpenEngine();  // the day's count is in the database
  EXPECT_EQ(SpendAs(capped->id, 4'000'001).code(), StatusCode::kInsufficientFunds);
  EXPECT_TRUE(SpendAs(capped->id, 4'000'000).ok());
  EXPECT_EQ(SpendAs(capped->id, 10'000).code(), StatusCode::kInsufficientFunds);

  Advance(kMicrosPerDay);  // a new UTC day
  EXPECT_TRUE(SpendAs(capped->id, 10'000'000).ok());
  EXPECT_EQ(UsdAvailable(user_.id), 80'000'000);
  // Spending without the guard (a session) is not limited, and the guard is gone.
  EXPECT_TRUE(Run<int>([&](Txn& txn) -> Result<int> {
                EXPECT_FALSE(txn.state.wallets->ledger.spend_guard().has_value());
                GPUHUB_RETURN_IF_ERROR(
                    Convert(txn, user_.id, Currency::kUsd, Currency::kEur, 20'000'000).status());
                return 0;
              }) == 0);
}

}  // namespace
}  // namespace gpuhub::engine
