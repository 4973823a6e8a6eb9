// `gpuhub rentals ...` and `gpuhub admin nodes ...`: term rentals against a running server
// (--server URL or $GPUHUB_SERVER; --token or $GPUHUB_TOKEN, a bearer token from POST
// /v1/sessions). Every figure comes from the server's answer; --json prints that answer as is.
//
//   gpuhub rentals quote  --gpu G --count N --term week|month [--region R] [--currency C] [--fp8]
//   gpuhub rentals create --gpu G --count N --term week|month [--region R] [--currency C]
//                         [--no-auto-renew] [--fp8] [--extra-nvme-tb N] [--idempotency-key K]
//   gpuhub rentals list [--limit N] | show ID | renew ID [--currency C]
//   gpuhub rentals auto-renew ID on|off | release ID --yes | extra-nvme ID --add-tb N
//   gpuhub admin nodes add --gpu G --region R [--cards N] [--hostname H]
//   gpuhub admin nodes list [--gpu G] [--region R] | drain ID | undrain ID | remove ID | enrol ID
//
// Exit codes: 0 ok; 2 bad input, including any 4xx answer of the server (one line on stderr
// naming the field); 1 when the server cannot be reached or fails (5xx).
#include "cli/rental_commands.h"

#include <CLI/CLI.hpp>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/command_registry.h"
#include "cli/server_client.h"
#include "cli/server_verbs.h"
#include "core/strings.h"

namespace gpuhub::cli {
namespace {

void PrintQuote(const json& q) {
  std::cout << q["count"].get<int>() << "x " << Str(q, "gpu") << ", " << Str(q, "term")
            << (q["term"] == "week" ? " (7 days)" : " (30 days)") << ", "
            << (q["region_requested"].is_null() ? "any region" : Str(q, "region_requested"))
            << "\n";
  const json& a = q["amount"];
  auto row = [](const std::string& name, const std::string& value, const std::string& how = "") {
    std::cout << "  " << std::left << std::setw(10) << name << std::right << std::setw(14) << value
              << " USD" << (how.empty() ? "" : "  " + how) << "\n";
  };
  row("list", Money(q["list_price_per_card"]),
      std::string("per card") + (q["list_price_derived"] == true ? " (weekly price derived)" : ""));
  row("subtotal", Money(q["subtotal"]),
      "(" + std::to_string(q["count"].get<int>()) + " x " + Money(q["list_price_per_card"]) + ")");
  int count = q["count"].get<int>();
  row("discount", "-" + Money(q["discount"]),
      count == 1 ? "(none for one card)"
                 : "(" + Str(q, "discount_percent") + "% at " + std::to_string(count) + " cards)");
  if (q.contains("extra_nvme") && q["extra_nvme"].value("tb", 0) > 0) {
    row("NVMe", Money(q["extra_nvme"]["net"]),
        "(" + std::to_string(q["extra_nvme"]["tb"].get<long long>()) + " TB extra x " +
            Money(q["extra_nvme"]["per_tb"]) + ")");
  }
  row("net", Money(a["net"]));
  for (const auto& line : a["tax"]) row(Str(line, "name"), Money(line["amount"]));
  row("tax", Money(a["tax_total"]));
  row("total", Money(a["gross"]));
  const json& charge = q["charge"];
  std::cout << "  paid from the " << Str(charge, "currency") << " wallet: "
            << (charge["amount"].is_null() ? "no exchange rate" : Money(charge["amount"]) + " " +
                                                                     Str(charge, "currency"))
            << "\n";
  std::cout << "  term      " << Str(q, "term_start") << " .. " << Str(q, "term_end")
            << " (if ordered now)\n";
  std::string sets;
  for (const auto& s : q["stock"]) {
    sets += (sets.empty() ? "" : ", ") + Str(s, "region") + " " + std::to_string(s["sets"].get<int>());
  }
  if (q["available"] == true) {
    std::cout << "  available in " << Str(q, "region") << " (sets free now: " << sets << ")\n";
  } else {
    std::cout << "  NOT available: " << Str(q["reason"], "message") << "\n";
  }
}

// Bytes as decimal TB with 3 decimals, to the nearest GB ("4.667" for a week's 4,666,666,666,667
// bytes), from the exact integer in the answer.
std::string Terabytes(const json& bytes) {
  const long long b = bytes.is_number_integer() ? bytes.get<long long>() : 0;
  const long long gb = (b + 500'000'000LL) / 1'000'000'000LL;
  char out[32];
  std::snprintf(out, sizeof out, "%lld.%03lld", gb / 1'000, gb % 1'000);
  return out;
}

void PrintRental(const json& r, bool detail) {
  std::cout << "rental " << r["id"].get<long long>() << ": " << r["count"].get<int>() << "x "
            << Str(r, "gpu") << " in " << Str(r, "region") << " (node " << Str(r, "node_id")
            << ", cards " << r["cards"].dump() << "), " << Str(r, "term") << " at "
            << Money(r["price"].value("term_net", r["price"]["net"])) << " USD net";
  if (r["price"].value("extra_nvme_tb", 0LL) > 0) {
    std::cout << " (cards " << Money(r["price"]["net"]) << " + " << Str(r["price"], "extra_nvme_tb")
              << " TB extra NVMe " << Money(r["price"]["extra_nvme"]) << ")";
  }
  std::cout << "\n";
  std::cout << "  state     " << Str(r, "state")
            << (r["release_reason"].is_null() ? "" : " (" + Str(r, "release_reason") + ")")
            << ", term " << r["period"].get<long long>() << ": " << Str(r, "term_start") << " .. "
            << Str(r, "term_end") << "\n";
  std::cout << "  auto-renew " << (r["auto_renew"] == true ? "on" : "off") << ", pays from the "
            << Str(r, "currency") << " wallet\n";
  if (r.contains("hold_until")) {
    std::cout << "  ON HOLD until " << Str(r, "hold_until")
              << ": pay the renewal before then, or the disk's data is destroyed\n";
  }
  if (!r["next_transition"].is_null()) {
    std::cout << "  next      " << Str(r["next_transition"], "what") << " at "
              << Str(r["next_transition"], "at") << "\n";
  }
  if (!r["renewal"].is_null()) {
    const json& n = r["renewal"];
    std::cout << "  renewal   term " << n["period"].get<long long>() << ": "
              << Money(n["amount"]["gross"]) << " USD, " << Str(n, "status") << ", due "
              << Str(n, "due_at") << "\n";
  }
  const json& i = r["instance"];
  std::cout << "  instance  " << Str(i, "state") << ", " << i["nvme_gb"].get<long long>()
            << " GB local NVMe";
  if (i.value("extra_nvme_gb", 0LL) > 0) {
    std::cout << " + " << i["extra_nvme_gb"].get<long long>() << " GB extra";
  }
  if (!i["connection"].empty()) std::cout << ", " << i["connection"].dump();
  std::cout << "\n";
  if (r.contains("storage") && r["storage"].is_object()) {
    const json& st = r["storage"];
    const json& e = st["egress"]["current"];
    if (e.is_object()) {
      std::cout << "  egress    term " << Str(e, "term") << ": " << Terabytes(e["used_bytes"])
                << " TB of " << Terabytes(e["included_bytes"]) << " TB included; "
                << Str(e, "billed_gb")
                << " GB billed" << (e.value("owed_gb", 0LL) > 0 ? ", " + Str(e, "owed_gb") +
                                                                      " GB owed"
                                                                : "")
                << "\n";
    }
    for (const auto& v : st["volumes"]) {
      std::cout << "  volume    " << Str(v, "id") << " (" << Str(v, "name") << ", "
                << Str(v, "size_tb") << " TB, " << Str(v, "access") << ")\n";
    }
  }
  if (!detail) return;
  std::cout << "  history\n";
  for (const auto& e : r["history"]) {
    std::cout << "    " << Str(e, "at") << "  " << std::left << std::setw(18) << Str(e, "event")
              << std::right << Str(e, "detail") << "\n";
  }
}

// ----- gpuhub rentals ---------------------------------------------------------------------------

struct OrderFlags {
  Connection c;
  std::string gpu, term, region, currency, idempotency_key;
  int count = 0;
  long long extra_nvme_tb = 0;
  bool fp8 = false, no_auto_renew = false;
};

std::string OrderBody(const OrderFlags& f, bool order) {
  json body = {{"gpu", f.gpu}, {"count", f.count}, {"term", f.term}};
  if (!f.region.empty()) body["region"] = f.region;
  if (!f.currency.empty()) body["currency"] = f.currency;
  if (f.fp8) body["fp8"] = true;
  if (f.extra_nvme_tb != 0) body["extra_nvme_tb"] = f.extra_nvme_tb;
  if (order && f.no_auto_renew) body["auto_renew"] = false;
  return body.dump();
}

void AddOrderFlags(CLI::App* cmd, OrderFlags& f) {
  cmd->add_option("--gpu", f.gpu, "card model, such as \"H100 SXM\"")->required();
  cmd->add_option("--count", f.count, "cards on one node: 1, 2, 4 or 8 (the card's rules)")
      ->required();
  cmd->add_option("--term", f.term, "week (7 days) or month (30 days)")->required();
  cmd->add_option("--region", f.region, "DFW-1, IAD-1, PDX-1 (default: any)");
  cmd->add_option("--currency", f.currency, "the wallet that pays: USD, EUR or GBP");
  cmd->add_flag("--fp8", f.fp8, "refuse cards without FP8");
  cmd->add_option("--extra-nvme-tb", f.extra_nvme_tb,
                  "extra local NVMe in whole TB (0..30; $9 per TB-month, a week 7/30 of it)");
}

struct IdFlags {
  Connection c;
  long long id = 0;
  std::string currency, on_off;
  bool yes = false;
  int limit = 0;
  long long add_tb = 0;
};

void AddRentalCommands(CLI::App& app) {
  CLI::App* rentals =
      app.add_subcommand("rentals", "term rentals on a running server (weekly or monthly)");
  rentals->require_subcommand(1);

  auto quote = std::make_shared<OrderFlags>();
  CLI::App* q = rentals->add_subcommand("quote", "the exact price and availability, before buying");
  AddOrderFlags(q, *quote);
  AddConnection(q, quote->c, false);
  q->callback([quote] {
    // A signed-in customer's quote carries their tax: send the token when there is one.
    ServerCall call{"POST", "/v1/rentals/quote", OrderBody(*quote, false), "", ""};
    bool with_token = !TokenFromEnvironment(quote->c.token).empty();
    auto body = Call(quote->c, call, with_token);
    if (!body) return;
    quote->c.json_output ? void(std::cout << body->dump(2) << "\n") : PrintQuote(*body);
    SetExitCode(kExitOk);
  });

  auto create = std::make_shared<OrderFlags>();
  CLI::App* c = rentals->add_subcommand("create", "rent: pays the whole term from the wallet");
  AddOrderFlags(c, *create);
  c->add_flag("--no-auto-renew", create->no_auto_renew, "do not debit the next term at T-72 h");
  c->add_option("--idempotency-key", create->idempotency_key,
                "retry-safe key: the same key never rents twice");
  AddConnection(c, create->c, true);
  c->callback([create] {
    ServerCall call{"POST", "/v1/rentals", OrderBody(*create, true), "", create->idempotency_key};
    auto body = Call(create->c, call, true);
    if (!body) return;
    create->c.json_output ? void(std::cout << body->dump(2) << "\n") : PrintRental(*body, false);
    SetExitCode(kExitOk);
  });

  auto list = std::make_shared<IdFlags>();
  CLI::App* l = rentals->add_subcommand("list", "your rentals, newest first");
  l->add_option("--limit", list->limit, "at most this many (1..500)");
  AddConnection(l, list->c, true);
  l->callback([list] {
    std::string path = "/v1/rentals" + (list->limit ? "?limit=" + std::to_string(list->limit) : "");
    auto body = Call(list->c, {"GET", path, "", "", ""}, true);
    if (!body) return;
    if (list->c.json_output) {
      std::cout << body->dump(2) << "\n";
    } else if ((*body)["rentals"].empty()) {
      std::cout << "no rentals\n";
    } else {
      std::cout << "  id  rental                   region  state         term ends              "
                   "next\n";
      for (const auto& r : (*body)["rentals"]) {
        std::ostringstream what;
        what << r["count"].get<int>() << "x " << Str(r, "gpu") << " " << Str(r, "term");
        std::string next = r["next_transition"].is_null()
                               ? "-"
                               : Str(r["next_transition"], "what") + " at " +
                                     Str(r["next_transition"], "at");
        std::cout << std::setw(4) << r["id"].get<long long>() << "  " << std::left
                  << std::setw(24) << what.str() << " " << std::setw(7) << Str(r, "region") << " "
                  << std::setw(13) << Str(r, "state") << " " << std::setw(22)
                  << Str(r, "term_end") << std::right << " " << next << "\n";
      }
    }
    SetExitCode(kExitOk);
  });

  auto show = std::make_shared<IdFlags>();
  CLI::App* s = rentals->add_subcommand("show", "one rental: state, next transition, history");
  s->add_option("id", show->id, "rental id")->required();
  AddConnection(s, show->c, true);
  s->callback([show] {
    auto body = Call(show->c, {"GET", "/v1/rentals/" + std::to_string(show->id), "", "", ""}, true);
    if (!body) return;
    show->c.json_output ? void(std::cout << body->dump(2) << "\n") : PrintRental(*body, true);
    SetExitCode(kExitOk);
  });

  auto renew = std::make_shared<IdFlags>();
  CLI::App* rn = rentals->add_subcommand(
      "renew", "pay the next term now (paid already: the same answer, no second charge)");
  rn->add_option("id", renew->id, "rental id")->required();
  rn->add_option("--currency", renew->currency, "pay from this wallet (default: the rental's)");
  AddConnection(rn, renew->c, true);
  rn->callback([renew] {
    json body = json::object();
    if (!renew->currency.empty()) body["currency"] = renew->currency;
    auto answer = Call(renew->c,
                       {"POST", "/v1/rentals/" + std::to_string(renew->id) + "/renew", body.dump(),
                        "", ""},
                       true);
    if (!answer) return;
    if (renew->c.json_output) {
      std::cout << answer->dump(2) << "\n";
    } else {
      const json& n = (*answer)["renewal"];
      std::cout << "term " << n["period"].get<long long>() << " " << Str(n, "status") << ": "
                << Money(n["paid"]["amount"]) << " " << Str(n["paid"], "currency") << " at "
                << Str(n, "paid_at") << "\n";
      PrintRental((*answer)["rental"], false);
    }
    SetExitCode(kExitOk);
  });

  auto auto_renew = std::make_shared<IdFlags>();
  CLI::App* ar = rentals->add_subcommand("auto-renew", "switch auto-renew on or off");
  ar->add_option("id", auto_renew->id, "rental id")->required();
  ar->add_option("state", auto_renew->on_off, "on or off")->required();
  AddConnection(ar, auto_renew->c, true);
  ar->callback([auto_renew] {
    if (auto_renew->on_off != "on" && auto_renew->on_off != "off") {
      return FailBadInput("auto-renew takes on or off, got '" + auto_renew->on_off.substr(0, 20) +
                          "'");
    }
    json body = {{"enabled", auto_renew->on_off == "on"}};
    auto answer =
        Call(auto_renew->c,
             {"POST", "/v1/rentals/" + std::to_string(auto_renew->id) + "/auto-renew", body.dump(),
              "", ""},
             true);
    if (!answer) return;
    auto_renew->c.json_output ? void(std::cout << answer->dump(2) << "\n")
                              : PrintRental(*answer, false);
    SetExitCode(kExitOk);
  });

  auto nvme = std::make_shared<IdFlags>();
  CLI::App* nv = rentals->add_subcommand(
      "extra-nvme", "add extra local NVMe to a running rental, prorated to the term end");
  nv->add_option("id", nvme->id, "rental id")->required();
  nv->add_option("--add-tb", nvme->add_tb, "whole TB to add (a rental has at most 30)")->required();
  AddConnection(nv, nvme->c, true);
  nv->callback([nvme] {
    auto answer = Call(nvme->c,
                       {"POST", "/v1/rentals/" + std::to_string(nvme->id) + "/extra-nvme",
                        json({{"add_tb", nvme->add_tb}}).dump(), "", ""},
                       true);
    if (!answer) return;
    if (nvme->c.json_output) {
      std::cout << answer->dump(2) << "\n";
    } else {
      std::cout << "rental " << nvme->id << ": " << Str(*answer, "extra_nvme_tb")
                << " TB extra NVMe; each term from the next costs " << Money((*answer)["term_net"])
                << " USD net\n";
      for (const auto& c : (*answer)["charges"]) {
        std::cout << "  paid " << Money(c["paid"]["amount"]) << " " << Str(c["paid"], "currency")
                  << " for term " << Str(c, "term") << ": " << Str(c, "period_start") << " .. "
                  << Str(c, "period_end") << "\n";
      }
    }
    SetExitCode(kExitOk);
  });

  auto release = std::make_shared<IdFlags>();
  CLI::App* rl = rentals->add_subcommand(
      "release", "end a rental now: no refund of the term, its disk's data destroyed");
  rl->add_option("id", release->id, "rental id")->required();
  rl->add_flag("--yes", release->yes,
               "confirm: nothing of the term is refunded and the data cannot be recovered");
  AddConnection(rl, release->c, true);
  rl->callback([release] {
    if (!release->yes) {
      return FailBadInput(
          "releasing ends rental " + std::to_string(release->id) +
          " now: nothing of the term is refunded and its disk's encryption key is destroyed (the "
          "data cannot be recovered); add --yes to go ahead");
    }
    auto answer = Call(release->c,
                       {"POST", "/v1/rentals/" + std::to_string(release->id) + "/release",
                        json({{"confirm", true}}).dump(), "", ""},
                       true);
    if (!answer) return;
    release->c.json_output ? void(std::cout << answer->dump(2) << "\n")
                           : PrintRental(*answer, false);
    SetExitCode(kExitOk);
  });
}

const bool kRegistered = RegisterCommands(&AddRentalCommands);

}  // namespace

// ----- gpuhub admin nodes -----------------------------------------------------------------------

void AddAdminNodeCommands(CLI::App* admin) {
  CLI::App* nodes = admin->add_subcommand(
      "nodes", "the term fleet's nodes, on a running server (--server, --token of an admin)");
  nodes->require_subcommand(1);

  struct NodeFlags {
    Connection c;
    std::string gpu, region, hostname;
    int cards = 0;
    long long id = 0;
  };
  auto print_nodes = [](const json& list) {
    std::cout << "  id  gpu           region  cards  rented  state     hostname\n";
    for (const auto& n : list) {
      std::cout << std::setw(4) << n["id"].get<long long>() << "  " << std::left << std::setw(13)
                << Str(n, "gpu") << " " << std::setw(7) << Str(n, "region") << " " << std::right
                << std::setw(5) << n["cards"].get<int>() << "  " << std::setw(6)
                << n["cards_rented"].size() << "  " << std::left << std::setw(9)
                << Str(n, "state") << " " << Str(n, "hostname") << std::right << "\n";
    }
  };

  auto add = std::make_shared<NodeFlags>();
  CLI::App* a = nodes->add_subcommand("add", "add a node (it takes rentals at once)");
  a->add_option("--gpu", add->gpu, "card model")->required();
  a->add_option("--region", add->region, "region code")->required();
  a->add_option("--cards", add->cards, "cards on the node (default: the card's largest set, 8)");
  a->add_option("--hostname", add->hostname, "for operators and the host agent");
  AddConnection(a, add->c, true);
  a->callback([add, print_nodes] {
    json body = {{"gpu", add->gpu}, {"region", add->region}};
    if (add->cards) body["cards"] = add->cards;
    if (!add->hostname.empty()) body["hostname"] = add->hostname;
    auto answer = Call(add->c, {"POST", "/v1/admin/nodes", body.dump(), "", ""}, true);
    if (!answer) return;
    add->c.json_output ? void(std::cout << answer->dump(2) << "\n")
                       : print_nodes(json::array({*answer}));
    SetExitCode(kExitOk);
  });

  auto list = std::make_shared<NodeFlags>();
  CLI::App* l = nodes->add_subcommand("list", "every node, by id");
  l->add_option("--gpu", list->gpu, "only this card");
  l->add_option("--region", list->region, "only this region");
  AddConnection(l, list->c, true);
  l->callback([list, print_nodes] {
    std::string query;
    if (!list->gpu.empty()) query += "&gpu=" + list->gpu;
    if (!list->region.empty()) query += "&region=" + list->region;
    for (auto& ch : query) {
      if (ch == ' ') ch = '+';
    }
    // Every page (500 nodes each).
    json all = json::array();
    long long after = 0;
    while (true) {
      auto answer = Call(list->c,
                         {"GET", "/v1/admin/nodes?after=" + std::to_string(after) + query, "", "",
                          ""},
                         true);
      if (!answer) return;
      for (auto& n : (*answer)["nodes"]) all.push_back(n);
      if ((*answer)["next_after"].is_null()) break;
      after = (*answer)["next_after"].get<long long>();
    }
    list->c.json_output ? void(std::cout << json({{"nodes", all}}).dump(2) << "\n")
                        : print_nodes(all);
    SetExitCode(kExitOk);
  });

  struct Action {
    const char* name;
    const char* help;
    const char* method;
    const char* suffix;
  };
  for (Action act : {Action{"drain", "take no new rentals; the running ones stay", "POST", "/drain"},
                     Action{"undrain", "take new rentals again", "POST", "/undrain"},
                     Action{"remove", "out of the fleet (only with no live rental or pending wipe)",
                            "DELETE", ""}}) {
    auto flags = std::make_shared<NodeFlags>();
    CLI::App* cmd = nodes->add_subcommand(act.name, act.help);
    cmd->add_option("id", flags->id, "node id")->required();
    AddConnection(cmd, flags->c, true);
    cmd->callback([flags, act, print_nodes] {
      auto answer = Call(flags->c,
                         {act.method, "/v1/admin/nodes/" + std::to_string(flags->id) + act.suffix,
                          "", "", ""},
                         true);
      if (!answer) return;
      flags->c.json_output ? void(std::cout << answer->dump(2) << "\n")
                           : print_nodes(json::array({*answer}));
      SetExitCode(kExitOk);
    });
  }

  // The node's host agent enrols with a one-time token; the line to run on the node names this
  // server as the CLI reached it (the API cannot know its public URL behind a proxy).
  auto enrol = std::make_shared<NodeFlags>();
  CLI::App* e = nodes->add_subcommand(
      "enrol", "a one-time token for the node's host agent, and the command to run on the node");
  e->add_option("id", enrol->id, "node id")->required();
  AddConnection(e, enrol->c, true);
  e->callback([enrol] {
    auto answer = Call(enrol->c,
                       {"POST", "/v1/admin/nodes/" + std::to_string(enrol->id) + "/enrolment-tokens",
                        "", "", ""},
                       true);
    if (!answer) return;
    if (enrol->c.json_output) {
      std::cout << answer->dump(2) << "\n";
    } else {
      const std::string token = Str(*answer, "token");
      std::cout << "enrolment token for node " << enrol->id << " (one use, expires "
                << Str(*answer, "expires_at") << "):\n  " << token
                << "\non the node, as root:\n  gpuhub agent enroll --server "
                << ServerFromEnvironment(enrol->c.server) << " --token " << token
                << "\n  gpuhub agent run\n";
    }
    SetExitCode(kExitOk);
  });
}

// `gpuhub catalog --server URL`: the live stock per region under the catalog's tables.
Status AppendLiveStock(const std::string& server, bool json_output, std::string* catalog_output) {
  ServerCall call{"GET", "/v1/stock", "", "", ""};
  auto response = CallServer(server, call);
  if (!response.ok()) return response.status();
  if (!response->ok()) return Status::Unavailable(ServerError(call, *response));
  json stock = json::parse(response->body, nullptr, false);
  if (stock.is_discarded() || !stock.contains("stock")) {
    return Status::Unavailable("the server's /v1/stock answer is not what gpuhub serves");
  }
  if (json_output) {
    json out = json::parse(*catalog_output, nullptr, false);
    if (out.is_discarded()) return Status::Internal("the catalog JSON does not parse");
    out["live_stock"] = stock;
    *catalog_output = out.dump() + "\n";
    return Status::Ok();
  }
  std::ostringstream text;
  text << "\nTerm fleet stock, live from " << server << " at " << Str(stock, "as_of")
       << " (free cards, and rentable sets per card count):\n\n";
  text << "  card           region  nodes  free  sets\n";
  text << "  -------------------------------------------------------------\n";
  for (const auto& card : stock["stock"]) {
    for (const auto& r : card["regions"]) {
      if (r["nodes"] == 0 && r["nodes_draining"] == 0) continue;  // none of that card there
      std::string sets;
      for (const auto& [count, n] : r["sets_free"].items()) {
        sets += (sets.empty() ? "" : "  ") + count + "x: " + std::to_string(n.get<int>());
      }
      text << "  " << std::left << std::setw(14) << Str(card, "gpu") << " " << std::setw(7)
           << Str(r, "region") << std::right << " " << std::setw(5) << r["nodes"].get<int>()
           << " " << std::setw(5) << r["cards_free"].get<int>() << "  " << sets << "\n";
    }
  }
  *catalog_output += text.str();
  return Status::Ok();
}

}  // namespace gpuhub::cli
