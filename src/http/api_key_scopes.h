// What an API key (engine/api_keys.h) needs to call each route: the one table of route -> scopes.
//
// Rules, in order (api_key_scopes.cc):
// - Session only (never with a key, 403 naming why): API keys themselves, sessions and log-in,
//   sign-up, the password and two-factor sign-in, roles, and account settings (webhook, billing
//   profile). A stolen key cannot make itself a new key or lock the owner out.
// - /v1/admin/... needs admin (and the account the admin role, as for a session).
// - Writes listed in the table need their area (market, rentals, storage, payouts); those that can
//   move money out of the wallets also need wallet-spend (and count against its daily cap in the
//   engine, whatever the route).
// - Any other GET/HEAD needs read.
// - Any other write is session only: a route added without a row here is closed to keys until
//   someone decides what it needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuhub::http {

struct ApiKeyAccess {
  bool session_only = false;  // no key may call the route; `why` says so
  std::uint32_t scopes = 0;   // engine::ApiScope bits the key must all hold
  std::string why;
};

// `route` is the router's pattern ("/v1/bids/{id}"), without its query parameters.
ApiKeyAccess ApiKeyAccessFor(std::string_view method, std::string_view route);

}  // namespace gpuhub::http
