// Billing from the command line, against a running server (--server/--token or GPUHUB_SERVER/
// GPUHUB_TOKEN):
//   gpuhub billing profile [--country DE --business-name NAME --vat-id ID --address TEXT]
//   gpuhub billing invoices [--limit N] [--json]
//   gpuhub billing invoice NUMBER [--pdf FILE | --html FILE] [--json]
// The server decides everything (tax, numbers); these verbs show what it says and save its files.
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "cli/server_client.h"

namespace gpuhub::cli {
namespace {

using json = nlohmann::json;

struct Options {
  std::string server;
  std::string token;
  bool json_out = false;
  // profile
  std::optional<std::string> country, business_name, vat_id, address;
  // invoices
  int limit = 20;
  std::string number, pdf, html;
};

// Calls the server; on an error answer prints it (exit 2 for 4xx, 1 otherwise) and returns false.
bool Call(const Options& o, ServerCall call, net::Response* out) {
  call.token = TokenFromEnvironment(o.token);
  if (call.token.empty()) {
    FailBadInput("this needs --token (or GPUHUB_TOKEN): a bearer token from POST /v1/sessions");
    return false;
  }
  auto answer = CallServer(ServerFromEnvironment(o.server), call);
  if (!answer.ok()) {
    answer.status().code() == StatusCode::kInvalidArgument ? FailBadInput(answer.status().message())
                                                           : Fail(answer.status().message());
    return false;
  }
  if (answer->status < 200 || answer->status >= 300) {
    std::string message = ServerError(call, *answer);
    answer->status < 500 ? FailBadInput(message) : Fail(message);
    return false;
  }
  *out = std::move(answer).value();
  return true;
}

std::string Money(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : "?";
  std::size_t dot = s.find('.');
  while (dot != std::string::npos && s.size() > dot + 3 && s.back() == '0') s.pop_back();
  return s;
}

void Profile(const Options& o) {
  ServerCall call;
  call.path = "/v1/billing-profile";
  if (o.country || o.business_name || o.vat_id || o.address) {
    if (!o.country) return FailBadInput("--country is required to change the billing profile");
    json body = {{"billing_country", *o.country}};
    if (o.business_name) body["business_name"] = *o.business_name;
    if (o.vat_id) body["vat_id"] = *o.vat_id;
    if (o.address) {
      // "\n" typed on a command line is two characters: it means a line break here.
      std::string a = *o.address;
      for (std::size_t i = a.find("\\n"); i != std::string::npos; i = a.find("\\n", i + 1)) {
        a.replace(i, 2, "\n");
      }
      body["address"] = a;
    }
    call.method = "PUT";
    call.body = body.dump();
  }
  net::Response r;
  if (!Call(o, call, &r)) return;
  json p = json::parse(r.body, nullptr, false);
  if (o.json_out || p.is_discarded()) {
    std::cout << r.body << "\n";
  } else {
    std::cout << "billing country: "
              << (p["billing_country"].is_string()
                      ? p["country_name"].get<std::string>() + " (" +
                            p["billing_country"].get<std::string>() + ")"
                      : std::string("not set (needed before the first purchase)"))
              << "\n";
    if (!p.value("business_name", "").empty()) std::cout << "business: " << p["business_name"].get<std::string>() << "\n";
    if (!p.value("vat_id", "").empty()) std::cout << "VAT id: " << p["vat_id"].get<std::string>() << "\n";
    if (!p.value("address", "").empty()) std::cout << "address: " << p["address"].get<std::string>() << "\n";
    std::cout << "tax now: " << p["tax"]["note"].get<std::string>() << "\n";
    if (p["wallet_hold"].is_object()) {
      std::cout << "wallet on hold: " << p["wallet_hold"]["reason"].get<std::string>() << "\n";
    }
  }
  SetExitCode(kExitOk);
}

void Invoices(const Options& o) {
  if (o.limit < 1 || o.limit > 500) return FailBadInput("--limit must be 1..500");
  ServerCall call;
  call.path = "/v1/invoices?limit=" + std::to_string(o.limit);
  net::Response r;
  if (!Call(o, call, &r)) return;
  json list = json::parse(r.body, nullptr, false);
  if (o.json_out || list.is_discarded()) {
    std::cout << r.body << "\n";
    return SetExitCode(kExitOk);
  }
  if (list["invoices"].empty()) std::cout << "no invoices yet\n";
  for (const auto& d : list["invoices"]) {
    std::printf("%-16s %-11s %-11s net %12s  tax %11s  gross %12s %s  %s\n",
                d["number"].get<std::string>().c_str(), d["kind"].get<std::string>().c_str(),
                d["issued_at"].get<std::string>().substr(0, 10).c_str(), Money(d["net"]).c_str(),
                Money(d["tax"]).c_str(), Money(d["gross"]).c_str(),
                d["currency"].get<std::string>().c_str(), d["title"].get<std::string>().c_str());
  }
  SetExitCode(kExitOk);
}

void Invoice(const Options& o) {
  if (!o.pdf.empty() && !o.html.empty()) return FailBadInput("give --pdf or --html, not both");
  for (char c : o.number) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') {
      return FailBadInput("'" + o.number.substr(0, 32) +
                          "' is not an invoice number such as 2026-000001 or CN-2026-000001");
    }
  }
  ServerCall call;
  call.path = "/v1/invoices/" + o.number + (!o.pdf.empty() ? ".pdf" : !o.html.empty() ? ".html" : "");
  net::Response r;
  if (!Call(o, call, &r)) return;
  const std::string& file = !o.pdf.empty() ? o.pdf : o.html;
  if (!file.empty()) {
    std::ofstream out(file, std::ios::binary);
    out << r.body;
    if (!out) return Fail("cannot write " + file);
    std::cout << "saved " << file << " (" << r.body.size() << " bytes)\n";
    return SetExitCode(kExitOk);
  }
  json d = json::parse(r.body, nullptr, false);
  if (o.json_out || d.is_discarded()) {
    std::cout << r.body << "\n";
    return SetExitCode(kExitOk);
  }
  std::cout << (d["kind"] == "credit_note" ? "Credit note " : "Invoice ") << d["number"].get<std::string>()
            << " — " << d["title"].get<std::string>() << "\nissued "
            << d["issued_at"].get<std::string>().substr(0, 10) << ", supplied from "
            << d["supply_from"].get<std::string>().substr(0, 10) << " until "
            << d["supply_until"].get<std::string>().substr(0, 10) << " (exclusive)\n";
  for (const auto& l : d["lines"]) {
    std::cout << "  " << l["description"].get<std::string>() << "\n    " << l["quantity"] << " x "
              << Money(l["unit_net"]) << " = " << Money(l["net"]) << " + tax "
              << (l["reverse_charge"].get<bool>() ? std::string("(reverse charge)")
                                                  : l["tax_rate_percent"].get<std::string>() + "%")
              << " " << Money(l["tax"]) << " = " << Money(l["gross"]) << "\n";
  }
  std::cout << "net " << Money(d["net"]) << ", tax " << Money(d["tax"]) << ", gross "
            << Money(d["gross"]) << " " << d["currency"].get<std::string>() << "\n"
            << d["tax_note"].get<std::string>() << "\n";
  SetExitCode(kExitOk);
}

void AddBillingCommands(CLI::App& app) {
  CLI::App* billing = app.add_subcommand(
      "billing", "Your billing profile and tax invoices on a running server (--server, --token)");
  billing->require_subcommand(1);
  auto add_common = [](CLI::App* c, Options& o) {
    c->add_option("--server", o.server, "server URL (default $GPUHUB_SERVER)");
    c->add_option("--token", o.token, "bearer token (default $GPUHUB_TOKEN)");
    c->add_flag("--json", o.json_out, "print the API's JSON");
  };
  auto p = std::make_shared<Options>();
  CLI::App* profile = billing->add_subcommand(
      "profile", "Show the billing profile, or set it (--country is then required)");
  add_common(profile, *p);
  profile->add_option("--country", p->country, "ISO 3166-1 code, such as DE");
  profile->add_option("--business-name", p->business_name, "the business (with a VAT id)");
  profile->add_option("--vat-id", p->vat_id, "VAT id (its shape is checked for the country)");
  profile->add_option("--address", p->address, "address printed on invoices (\\n between lines)");
  profile->callback([p] { Profile(*p); });

  auto l = std::make_shared<Options>();
  CLI::App* invoices = billing->add_subcommand("invoices", "List your invoices and credit notes");
  add_common(invoices, *l);
  invoices->add_option("--limit", l->limit, "how many, newest first (1..500)");
  invoices->callback([l] { Invoices(*l); });

  auto g = std::make_shared<Options>();
  CLI::App* invoice = billing->add_subcommand("invoice", "Show one invoice, or save its PDF/HTML");
  add_common(invoice, *g);
  invoice->add_option("number", g->number, "the number, such as 2026-000001")->required();
  invoice->add_option("--pdf", g->pdf, "save the PDF to this file");
  invoice->add_option("--html", g->html, "save the printable page to this file");
  invoice->callback([g] { Invoice(*g); });
}

const bool kRegistered = RegisterCommands(&AddBillingCommands);

}  // namespace
}  // namespace gpuhub::cli
