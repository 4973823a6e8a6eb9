// `gpuhub alerts ...`: stock and price alerts on a running server (--server URL or
// $GPUHUB_SERVER, a session or API key in --token or $GPUHUB_TOKEN).
//
//   gpuhub alerts stock --gpu CARD --count N [--region R]     when N x CARD can be rented
//   gpuhub alerts price --gpu MARKET [--max-usd-per-gpu-hour X] when spot is offered at or under X
//   gpuhub alerts list | cancel ID
//
// Exit codes: 0 ok; 2 bad input, including any 4xx answer of the server (one line on stderr naming
// the field); 1 when the server cannot be reached or fails (5xx).
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
  int count = 0;
  std::string gpu, region, max_price;
};

void PrintAlert(const json& a) {
  std::cout << "alert " << Str(a, "id") << ": " << Str(a, "description") << " ("
            << (a.value("holds_now", false) ? "holds now" : "not now") << "; fired "
            << Str(a, "fired_count") << "x)\n";
}

void Run(const Flags& f, ServerCall call, void (*print)(const json&)) {
  CallAndPrint(f.c, std::move(call), true, print);
}

void AddAlertCommands(CLI::App& app) {
  CLI::App* alerts = app.add_subcommand(
      "alerts", "be told when a card can be rented or a spot price falls (once per crossing)");
  alerts->require_subcommand(1);

  auto stock = std::make_shared<Flags>();
  CLI::App* s = alerts->add_subcommand("stock", "when COUNT x CARD can be rented by the term");
  s->add_option("--gpu", stock->gpu, "the term card (gpuhub catalog)")->required();
  s->add_option("--count", stock->count, "cards in one rental (one of the card's counts)")
      ->required();
  s->add_option("--region", stock->region, "a region (default: any of the card's)");
  AddConnection(s, stock->c, true);
  s->callback([stock] {
    json body = {{"kind", "stock"}, {"gpu", stock->gpu}, {"count", stock->count}};
    if (!stock->region.empty()) body["region"] = stock->region;
    Run(*stock, {"POST", "/v1/alerts", body.dump(), "", ""}, PrintAlert);
  });

  auto price = std::make_shared<Flags>();
  CLI::App* p = alerts->add_subcommand("price", "when a spot market's best offer is at or under X");
  p->add_option("--gpu", price->gpu, "the spot market (gpuhub market list)")->required();
  p->add_option("--max-usd-per-gpu-hour", price->max_price,
                "the price per GPU-hour, up to 3 decimals (default: any offer)");
  AddConnection(p, price->c, true);
  p->callback([price] {
    json body = {{"kind", "price"}, {"gpu", price->gpu}};
    if (!price->max_price.empty()) body["max_usd_per_gpu_hour"] = price->max_price;
    Run(*price, {"POST", "/v1/alerts", body.dump(), "", ""}, PrintAlert);
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = alerts->add_subcommand("list", "the account's alerts, newest first");
  AddConnection(l, list->c, true);
  l->callback([list] {
    Run(*list, {"GET", "/v1/alerts", "", "", ""}, [](const json& answer) {
      if (answer["alerts"].empty()) std::cout << "no alerts\n";
      for (const auto& a : answer["alerts"]) PrintAlert(a);
    });
  });

  auto cancel = std::make_shared<Flags>();
  CLI::App* c = alerts->add_subcommand("cancel", "cancel one");
  c->add_option("id", cancel->id, "alert id")->required();
  AddConnection(c, cancel->c, true);
  c->callback([cancel] {
    Run(*cancel, {"DELETE", "/v1/alerts/" + std::to_string(cancel->id), "", "", ""},
        [](const json&) { std::cout << "cancelled\n"; });
  });
}

const bool kRegistered = RegisterCommands(&AddAlertCommands);

}  // namespace
}  // namespace gpuhub::cli
