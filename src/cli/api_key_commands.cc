// `gpuhub api-keys ...`: the account's API keys on a running server (--server URL or
// $GPUHUB_SERVER). Keys are managed with a session (--token or $GPUHUB_TOKEN): a key cannot make
// or revoke keys. The secret of a new key is printed once, on its own line, so a script can take
// it (`gpuhub api-keys create ... | tail -1 > key && chmod 600 key`); pass it back to other verbs
// with --api-key-file or GPUHUB_API_KEY, never as an argument.
//
//   gpuhub api-keys create --name N --scope S [--scope S ...] [--spend-cap-per-day 25.00
//                          [--spend-cap-currency USD]] [--expires-at RFC3339] [--allow-cidr C ...]
//                          [--totp-code C]  (wallet-spend or payouts with two-factor sign-in on)
//   gpuhub api-keys list | show ID | revoke ID
//
// Exit codes: 0 ok; 2 bad input, including any 4xx answer of the server (one line on stderr naming
// the field); 1 when the server cannot be reached or fails (5xx).
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/command_registry.h"
#include "cli/server_verbs.h"

namespace gpuhub::cli {
namespace {

struct Flags {
  Connection c;
  long long id = 0;
  std::string name, spend_cap, spend_cap_currency, expires_at, totp_code;
  std::vector<std::string> scopes, cidrs;
};

std::string Joined(const json& list) {
  std::string out;
  for (const auto& s : list) out += (out.empty() ? "" : ",") + s.get<std::string>();
  return out.empty() ? "-" : out;
}

void PrintKey(const json& k) {
  std::cout << "api key " << Str(k, "id") << " \"" << Str(k, "name") << "\" (" << Str(k, "prefix")
            << "...): " << Joined(k["scopes"]) << "\n";
  std::cout << "  expires   " << Str(k, "expires_at")
            << (k.value("expired", false) ? " (EXPIRED)" : "") << "\n";
  if (k["spend_cap_per_day"].is_object()) {
    std::cout << "  cap       " << Money(k["spend_cap_per_day"]["amount"]) << " "
              << Str(k["spend_cap_per_day"], "currency") << " a day, "
              << Money(k["spent_today"]["amount"]) << " spent today\n";
  }
  std::cout << "  from      "
            << (k["allowed_cidrs"].empty() ? "any address" : Joined(k["allowed_cidrs"])) << "\n";
}

void Run(const Flags& f, ServerCall call, void (*print)(const json&)) {
  CallAndPrint(f.c, std::move(call), true, print);
}

void AddApiKeyCommands(CLI::App& app) {
  CLI::App* keys = app.add_subcommand(
      "api-keys", "scoped API keys for scripts on a running server (managed with a session)");
  keys->require_subcommand(1);

  auto create = std::make_shared<Flags>();
  CLI::App* c = keys->add_subcommand("create", "a new key; its secret is printed once, last");
  c->add_option("--name", create->name, "what the key is for (1..64 characters)")->required();
  c->add_option("--scope", create->scopes,
                "read, market, rentals, storage, wallet-spend, payouts, admin (repeat)")
      ->required();
  c->add_option("--spend-cap-per-day", create->spend_cap,
                "with wallet-spend: at most this much a UTC day (\"25.00\")");
  c->add_option("--spend-cap-currency", create->spend_cap_currency, "USD (default), EUR or GBP");
  c->add_option("--expires-at", create->expires_at,
                "RFC 3339 time, at most 365 days ahead (default 90 days)");
  c->add_option("--allow-cidr", create->cidrs, "only from this network (repeat; IPv4 or IPv6)");
  c->add_option("--totp-code", create->totp_code,
                "with two-factor on, for wallet-spend or payouts: the current code (default "
                "$GPUHUB_TOTP_CODE)");
  AddConnection(c, create->c, true);
  c->callback([create] {
    json body = {{"name", create->name}, {"scopes", create->scopes}};
    if (!create->spend_cap.empty()) body["spend_cap_per_day"] = create->spend_cap;
    if (!create->spend_cap_currency.empty()) {
      body["spend_cap_currency"] = create->spend_cap_currency;
    }
    if (!create->expires_at.empty()) body["expires_at"] = create->expires_at;
    if (!create->cidrs.empty()) body["allowed_cidrs"] = create->cidrs;
    std::string code = create->totp_code;
    if (const char* env = std::getenv("GPUHUB_TOTP_CODE"); code.empty() && env) code = env;
    if (!code.empty()) body["totp_code"] = code;
    Run(*create, {"POST", "/v1/api-keys", body.dump(), "", ""}, [](const json& k) {
      PrintKey(k);
      std::cout << "secret (shown once; keep it in a file or GPUHUB_API_KEY):\n"
                << Str(k, "secret") << "\n";
    });
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = keys->add_subcommand("list", "the account's keys (never their secrets)");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list, {"GET", "/v1/api-keys", "", "", ""}, [](const json& answer) {
      if (answer["api_keys"].empty()) std::cout << "no API keys\n";
      for (const auto& k : answer["api_keys"]) PrintKey(k);
    });
  });

  auto show = std::make_shared<Flags>();
  CLI::App* s = keys->add_subcommand("show", "one key");
  s->add_option("id", show->id, "key id")->required();
  AddConnection(s, show->c, true);
  s->callback([show] {
    Run(*show, {"GET", "/v1/api-keys/" + std::to_string(show->id), "", "", ""}, PrintKey);
  });

  auto revoke = std::make_shared<Flags>();
  CLI::App* r = keys->add_subcommand("revoke", "stop a key at once");
  r->add_option("id", revoke->id, "key id")->required();
  AddConnection(r, revoke->c, true);
  r->callback([revoke] {
    Run(*revoke, {"DELETE", "/v1/api-keys/" + std::to_string(revoke->id), "", "", ""},
        [](const json&) { std::cout << "revoked\n"; });
  });
}

const bool kRegistered = RegisterCommands(&AddApiKeyCommands);

}  // namespace
}  // namespace gpuhub::cli
