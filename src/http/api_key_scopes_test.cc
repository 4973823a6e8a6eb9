#include "http/api_key_scopes.h"

#include <gtest/gtest.h>

#include "engine/api_keys.h"

namespace gpuhub::http {
namespace {

using namespace engine;  // the scope bits

std::uint32_t Needs(std::string_view method, std::string_view route) {
  ApiKeyAccess access = ApiKeyAccessFor(method, route);
  EXPECT_FALSE(access.session_only) << method << " " << route << ": " << access.why;
  return access.scopes;
}

bool SessionOnly(std::string_view method, std::string_view route) {
  ApiKeyAccess access = ApiKeyAccessFor(method, route);
  if (access.session_only) {
    EXPECT_FALSE(access.why.empty());
  }
  return access.session_only;
}

TEST(ApiKeyScopes, ReadsNeedReadAndWritesTheirArea) {
  EXPECT_EQ(Needs("GET", "/v1/wallets"), kScopeRead);
  EXPECT_EQ(Needs("GET", "/v1/leases/{id}"), kScopeRead);
  EXPECT_EQ(Needs("HEAD", "/v1/invoices/{id}"), kScopeRead);
  EXPECT_EQ(Needs("GET", "/v1/accounts/me"), kScopeRead);
  EXPECT_EQ(Needs("POST", "/v1/rentals/quote"), kScopeRead);

  EXPECT_EQ(Needs("POST", "/v1/bids"), kScopeMarket | kScopeWalletSpend);
  EXPECT_EQ(Needs("DELETE", "/v1/bids/{id}"), kScopeMarket);
  EXPECT_EQ(Needs("POST", "/v1/asks"), kScopeMarket);
  EXPECT_EQ(Needs("POST", "/v1/rentals"), kScopeRentals | kScopeWalletSpend);
  EXPECT_EQ(Needs("POST", "/v1/rentals/{id}/renew"), kScopeRentals | kScopeWalletSpend);
  EXPECT_EQ(Needs("POST", "/v1/rentals/{id}/release"), kScopeRentals);
  EXPECT_EQ(Needs("POST", "/v1/quote-requests"), kScopeRentals);
  EXPECT_EQ(Needs("POST", "/v1/quote-requests/{id}/withdraw"), kScopeRentals);
  EXPECT_EQ(Needs("GET", "/v1/quote-requests"), kScopeRead);
  EXPECT_EQ(Needs("POST", "/v1/admin/quote-requests/{id}/answer"), kScopeAdmin);
  EXPECT_EQ(Needs("POST", "/v1/volumes"), kScopeStorage | kScopeWalletSpend);
  EXPECT_EQ(Needs("DELETE", "/v1/volumes/{id}"), kScopeStorage);
  EXPECT_EQ(Needs("POST", "/v1/conversions"), kScopeWalletSpend);
  EXPECT_EQ(Needs("POST", "/v1/payouts"), kScopePayouts);
  EXPECT_EQ(Needs("GET", "/v1/payouts"), kScopeRead);
  EXPECT_EQ(Needs("POST", "/v1/admin/credits"), kScopeAdmin);
  EXPECT_EQ(Needs("GET", "/v1/admin/ledger"), kScopeAdmin);
}

TEST(ApiKeyScopes, KeysNeverManageKeysSessionsOrTheAccount) {
  EXPECT_TRUE(SessionOnly("POST", "/v1/api-keys"));
  EXPECT_TRUE(SessionOnly("GET", "/v1/api-keys"));
  EXPECT_TRUE(SessionOnly("DELETE", "/v1/api-keys/{id}"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/sessions"));
  EXPECT_TRUE(SessionOnly("GET", "/v1/sessions/current"));
  EXPECT_TRUE(SessionOnly("DELETE", "/v1/sessions/current"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/password"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/totp/enable"));
  // The routes of two-factor sign-in, even their reads.
  EXPECT_TRUE(SessionOnly("GET", "/v1/accounts/me/totp"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/totp"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/totp/confirm"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/totp/disable"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/recovery-codes"));
  // Payout destinations: a read key may list them; adding or removing one is session only.
  EXPECT_EQ(Needs("GET", "/v1/payout-destinations"), kScopeRead);
  EXPECT_TRUE(SessionOnly("POST", "/v1/payout-destinations"));
  EXPECT_TRUE(SessionOnly("DELETE", "/v1/payout-destinations/{id}"));
  // Alerts: a read key may list, make and cancel them (no money moves).
  EXPECT_EQ(Needs("GET", "/v1/alerts"), kScopeRead);
  EXPECT_EQ(Needs("POST", "/v1/alerts"), kScopeRead);
  EXPECT_EQ(Needs("DELETE", "/v1/alerts/{id}"), kScopeRead);
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts/me/roles"));
  EXPECT_TRUE(SessionOnly("PUT", "/v1/accounts/me/webhook"));
  EXPECT_TRUE(SessionOnly("PUT", "/v1/billing-profile"));
  EXPECT_TRUE(SessionOnly("POST", "/v1/accounts"));
  EXPECT_NE(ApiKeyAccessFor("POST", "/v1/api-keys").why.find("API keys cannot manage API keys"),
            std::string::npos);
  // A prefix is a path segment, not a string prefix.
  EXPECT_EQ(Needs("GET", "/v1/api-keysmith"), kScopeRead);
}

TEST(ApiKeyScopes, AWriteWithoutARowIsClosedToKeys) {
  EXPECT_TRUE(SessionOnly("POST", "/v1/something-new"));
  EXPECT_TRUE(SessionOnly("PUT", "/v1/wallets"));
  EXPECT_TRUE(SessionOnly("POST", ""));  // a hand-made request without a route
}

}  // namespace
}  // namespace gpuhub::http
