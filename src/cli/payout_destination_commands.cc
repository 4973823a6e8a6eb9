// `gpuhub payout-destinations ...`: a provider's payout destinations on a running server
// (--server URL or $GPUHUB_SERVER, a session in --token or $GPUHUB_TOKEN).
//
//   gpuhub payout-destinations add --kind btc|usdt|usdc|bank --address A --label L [--totp-code C]
//   gpuhub payout-destinations list | remove ID
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
  std::string kind, address, label, code;
};

void PrintDestination(const json& d) {
  std::cout << "payout destination " << Str(d, "id") << " \"" << Str(d, "label")
            << "\": " << Str(d, "kind") << " " << Str(d, "address") << "\n";
}

void Run(const Flags& f, ServerCall call, void (*print)(const json&)) {
  CallAndPrint(f.c, std::move(call), true, print);
}

void AddPayoutDestinationCommands(CLI::App& app) {
  CLI::App* dest =
      app.add_subcommand("payout-destinations", "where a provider's payouts may be sent");
  dest->require_subcommand(1);

  auto add = std::make_shared<Flags>();
  CLI::App* a = dest->add_subcommand("add", "a new destination (checked by its shape)");
  a->add_option("--kind", add->kind, "btc, usdt, usdc or bank")->required();
  a->add_option("--address", add->address, "the address, IBAN or bank reference")->required();
  a->add_option("--label", add->label, "a name for it (1..64 characters)")->required();
  a->add_option("--totp-code", add->code,
                "with two-factor: the current code (default $GPUHUB_TOTP_CODE)");
  AddConnection(a, add->c, true);
  a->callback([add] {
    json body = {{"kind", add->kind}, {"address", add->address}, {"label", add->label}};
    std::string code = add->code;
    if (code.empty()) {
      const char* env = std::getenv("GPUHUB_TOTP_CODE");
      if (env) code = env;
    }
    if (!code.empty()) body["totp_code"] = code;
    Run(*add, {"POST", "/v1/payout-destinations", body.dump(), "", ""}, PrintDestination);
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = dest->add_subcommand("list", "the account's destinations");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list, {"GET", "/v1/payout-destinations", "", "", ""}, [](const json& answer) {
      if (answer["payout_destinations"].empty()) std::cout << "no payout destinations\n";
      for (const auto& d : answer["payout_destinations"]) PrintDestination(d);
    });
  });

  auto remove = std::make_shared<Flags>();
  CLI::App* r = dest->add_subcommand("remove", "remove one");
  r->add_option("id", remove->id, "destination id")->required();
  AddConnection(r, remove->c, true);
  r->callback([remove] {
    Run(*remove, {"DELETE", "/v1/payout-destinations/" + std::to_string(remove->id), "", "", ""},
        [](const json&) { std::cout << "removed\n"; });
  });
}

const bool kRegistered = RegisterCommands(&AddPayoutDestinationCommands);

}  // namespace
}  // namespace gpuhub::cli
