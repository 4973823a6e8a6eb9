#include "http/api_key_scopes.h"

#include <utility>

#include "engine/api_keys.h"

namespace gpuhub::http {
namespace {

using engine::kScopeAdmin;
using engine::kScopeMarket;
using engine::kScopePayouts;
using engine::kScopeRead;
using engine::kScopeRentals;
using engine::kScopeStorage;
using engine::kScopeWalletSpend;

struct Row {
  std::string_view method;
  std::string_view route;
  std::uint32_t scopes;
};

// The writes a key may make, by area. Spending routes also name wallet-spend.
constexpr std::uint32_t kSpend = kScopeWalletSpend;
constexpr Row kWrites[] = {
    // The spot exchange.
    {"POST", "/v1/bids", kScopeMarket | kSpend},
    {"DELETE", "/v1/bids/{id}", kScopeMarket},
    {"POST", "/v1/asks", kScopeMarket},
    {"DELETE", "/v1/asks/{id}", kScopeMarket},
    {"POST", "/v1/machines", kScopeMarket},
    {"DELETE", "/v1/machines/{id}/agent", kScopeMarket},
    {"POST", "/v1/machines/{id}/enrolment-tokens", kScopeMarket},
    {"POST", "/v1/leases/{id}/stop", kScopeMarket},
    {"POST", "/v1/payouts", kScopePayouts},
    // Term rentals, and the SSH keys their machines get.
    {"POST", "/v1/rentals", kScopeRentals | kSpend},
    {"POST", "/v1/rentals/{id}/renew", kScopeRentals | kSpend},
    {"POST", "/v1/rentals/{id}/extra-nvme", kScopeRentals | kSpend},
    {"POST", "/v1/rentals/{id}/auto-renew", kScopeRentals},
    {"POST", "/v1/rentals/{id}/release", kScopeRentals},
    {"POST", "/v1/ssh-keys", kScopeRentals},
    {"DELETE", "/v1/ssh-keys/{id}", kScopeRentals},
    // Multi-node quote requests: asking the operators for capacity (no money moves).
    {"POST", "/v1/quote-requests", kScopeRentals},
    {"POST", "/v1/quote-requests/{id}/withdraw", kScopeRentals},
    // Storage.
    {"POST", "/v1/volumes", kScopeStorage | kSpend},
    {"POST", "/v1/volumes/{id}/pay", kScopeStorage | kSpend},
    {"POST", "/v1/volumes/{id}/resize", kScopeStorage | kSpend},
    {"DELETE", "/v1/volumes/{id}", kScopeStorage},
    {"POST", "/v1/snapshots", kScopeStorage | kSpend},
    {"POST", "/v1/snapshots/{id}/pay", kScopeStorage | kSpend},
    {"POST", "/v1/snapshots/{id}/restore", kScopeStorage | kSpend},
    {"DELETE", "/v1/snapshots/{id}", kScopeStorage},
    // The wallets themselves.
    {"POST", "/v1/conversions", kSpend},
    {"POST", "/v1/topups", kSpend},
    // Stock and price alerts: they move no money and change nothing but what the account is
    // told, so a key that may read the markets may watch them.
    {"POST", "/v1/alerts", kScopeRead},
    {"DELETE", "/v1/alerts/{id}", kScopeRead},
    // Reads sent as POST (public, or priced for the caller).
    {"POST", "/v1/rentals/quote", kScopeRead},
    {"POST", "/v1/size", kScopeRead},
    {"POST", "/v1/size/diffusion", kScopeRead},
    {"POST", "/v1/fit", kScopeRead},
    {"POST", "/v1/plan", kScopeRead},
};

// Prefixes (and exact routes) no key may call, whatever the method.
constexpr std::string_view kSessionOnlyPrefixes[] = {
    "/v1/api-keys",         "/v1/sessions",        "/v1/accounts/me/password",
    "/v1/accounts/me/totp", "/v1/accounts/me/2fa", "/v1/accounts/me/recovery-codes",
};

bool UnderPrefix(std::string_view route, std::string_view prefix) {
  return route == prefix ||
         (route.starts_with(prefix) && route.size() > prefix.size() && route[prefix.size()] == '/');
}

ApiKeyAccess SessionOnly(std::string why) { return {true, 0, std::move(why)}; }

}  // namespace

ApiKeyAccess ApiKeyAccessFor(std::string_view method, std::string_view route) {
  for (auto prefix : kSessionOnlyPrefixes) {
    if (UnderPrefix(route, prefix)) {
      return SessionOnly(
          "API keys cannot manage API keys, sessions, the password or two-factor sign-in: use a "
          "signed-in session (POST /v1/sessions)");
    }
  }
  bool read = method == "GET" || method == "HEAD";
  if (route == "/v1/accounts" || route == "/v1/accounts/me/roles" ||
      (route == "/v1/accounts/me/webhook" && !read) || (route == "/v1/billing-profile" && !read)) {
    return SessionOnly(
        "API keys cannot change the account itself (sign-up, roles, webhook, billing profile): "
        "use a signed-in session");
  }
  if (UnderPrefix(route, "/v1/admin")) return {false, kScopeAdmin, ""};
  for (const Row& row : kWrites) {
    if (row.method == method && row.route == route) return {false, row.scopes, ""};
  }
  if (read) return {false, kScopeRead, ""};
  return SessionOnly(std::string(method) + " " + std::string(route) +
                     " is not open to API keys: use a signed-in session");
}

}  // namespace gpuhub::http
