// `gpuhub quote-request ...`: multi-node quote requests on a running server (--server URL or
// $GPUHUB_SERVER; a session with --token / $GPUHUB_TOKEN, or an API key from --api-key-file /
// $GPUHUB_API_KEY: creating and withdrawing need the rentals scope, listing read).
//
//   gpuhub quote-request create --model 405b --workload full [--precision P] [--context N]
//       [--batch N] [--seq N] [--rank N] [--tokens N] [--epochs N] [--tokens-per-day N]
//       [--contact TEXT] [--note TEXT]
//   gpuhub quote-request list [--status open|answered|declined|withdrawn] [--limit N] [--before ID]
//   gpuhub quote-request show ID | withdraw ID
//   gpuhub quote-request answer ID --status answered|declined [--price TEXT] [--terms TEXT] (admins)
//
// The job's flags are POST /v1/plan's; the server recomputes the job and prints its figures (the
// memory it needs, the 8-card nodes of each card that hold it). The contact is free text (a
// Matrix or Telegram handle, "reply on the account"), not an email address.
//
// Exit codes: 0 ok; 2 bad input, including any 4xx answer of the server (one line on stderr naming
// the field); 1 when the server cannot be reached or fails (5xx).
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <memory>

#include "cli/command_registry.h"
#include "cli/server_verbs.h"
#include "core/strings.h"

namespace gpuhub::cli {
namespace {

struct Flags {
  Connection c;
  long long id = 0;
  // create: the job's fields by their API names; text as typed, numbers checked below.
  std::map<std::string, std::string> text, number;
  std::map<std::string, CLI::Option*> given;
  std::string contact, note;
  // list
  std::string status;
  long long limit = 0, before = 0;
  // answer
  std::string price, terms;
};

void PrintRequest(const json& q) {
  std::cout << "quote request " << Str(q, "id") << " [" << Str(q, "status") << "] "
            << Str(q, "summary") << "\n";
  if (!Str(q, "contact").empty() && Str(q, "contact") != "-") {
    std::cout << "  contact: " << Str(q, "contact") << "\n";
  }
  if (q.contains("answer") && q["answer"].is_object()) {
    const json& a = q["answer"];
    std::cout << "  " << Str(a, "status") << " " << Str(a, "answered_at");
    if (!Str(a, "price").empty()) std::cout << ": " << Str(a, "price");
    std::cout << "\n";
    if (!Str(a, "terms").empty()) std::cout << "  terms: " << Str(a, "terms") << "\n";
  }
}

// The server's recomputation, as `create` and `show` print it: the nodes of each card.
void PrintSizing(const json& q) {
  PrintRequest(q);
  if (!q.contains("sizing") || !q["sizing"].is_object()) return;
  const json& s = q["sizing"];
  std::cout << "  the server's recomputation: " << Str(s, "required_gb") << " GB\n";
  for (const auto& n : s.value("nodes", json::array())) {
    std::cout << "    " << Str(n, "configuration") << "  $" << Money(n["exact"]["monthly_usd"])
              << "/month list  (" << Str(n, "formula") << ")\n";
  }
}

void Run(const Flags& f, ServerCall call, void (*print)(const json&)) {
  auto answer = Call(f.c, std::move(call), true);
  if (!answer) return;
  f.c.json_output ? void(std::cout << answer->dump(2) << "\n") : print(*answer);
  SetExitCode(kExitOk);
}

constexpr const char* kTextFields[][2] = {
    {"model", "a preset (7b ... 405b) or a bundled model id (gpuhub models)"},
    {"workload", "infer, full, lora or qlora"},
    {"precision", "weights: fp32, bf16, fp16, fp8, int8, int4 (QLoRA: nf4)"},
    {"kv-precision", "KV cache: fp16 or fp8 (inference)"},
    {"profile", "guide or detailed"},
};
constexpr const char* kNumberFields[][2] = {
    {"context", "tokens in the KV cache per sequence (inference)"},
    {"batch", "sequences (inference) or micro-batch (training)"},
    {"seq", "training sequence length in tokens"},
    {"rank", "LoRA/QLoRA adapter rank"},
    {"tokens", "training: tokens per epoch"},
    {"epochs", "training: epochs"},
    {"tokens-per-day", "serving: output tokens a day"},
};

std::string ApiName(std::string flag) {
  for (char& c : flag) c = c == '-' ? '_' : c;
  return flag;
}

void AddQuoteRequestCommands(CLI::App& app) {
  CLI::App* quote = app.add_subcommand(
      "quote-request", "multi-node quote requests: a job larger than one 8-card node, priced by "
                       "the operators");
  quote->require_subcommand(1);

  auto create = std::make_shared<Flags>();
  CLI::App* c = quote->add_subcommand(
      "create", "send a job for a quote; prints the server's recomputation of it");
  for (const auto& [name, help] : kTextFields) {
    create->given[name] = c->add_option(std::string("--") + name, create->text[name], help);
  }
  for (const auto& [name, help] : kNumberFields) {
    create->given[name] = c->add_option(std::string("--") + name, create->number[name], help);
  }
  c->add_option("--contact", create->contact,
                "how to reach you: free text such as a Matrix or Telegram handle (default: reply "
                "on the account)");
  c->add_option("--note", create->note, "anything the operators should know (dates, regions)");
  AddConnection(c, create->c, true);
  c->callback([create] {
    json body = json::object();
    for (const auto& [name, option] : create->given) {
      if (option->count() == 0) continue;
      if (create->text.contains(name)) {
        body[ApiName(name)] = create->text.at(name);
        continue;
      }
      auto n = ParseInt64(create->number.at(name), "--" + name);
      if (!n.ok()) return FailBadInput(n.status().message());
      body[ApiName(name)] = *n;
    }
    if (!create->contact.empty()) body["contact"] = create->contact;
    if (!create->note.empty()) body["note"] = create->note;
    Run(*create, {"POST", "/v1/quote-requests", body.dump(), "", ""}, PrintSizing);
  });

  auto list = std::make_shared<Flags>();
  CLI::App* l = quote->add_subcommand("list", "your quote requests (an admin's: everyone's)");
  l->add_option("--status", list->status, "open, answered, declined or withdrawn");
  l->add_option("--limit", list->limit, "per page (1..200, default 50)");
  l->add_option("--before", list->before, "the next page: requests older than this id");
  AddConnection(l, list->c, true);
  l->callback([list] {
    std::string query;
    auto add = [&](const std::string& name, const std::string& value) {
      query += (query.empty() ? "?" : "&") + name + "=" + value;
    };
    if (!list->status.empty()) add("status", list->status);
    if (list->limit != 0) add("limit", std::to_string(list->limit));
    if (list->before != 0) add("before", std::to_string(list->before));
    Run(*list, {"GET", "/v1/quote-requests" + query, "", "", ""}, [](const json& answer) {
      if (answer["quote_requests"].empty()) std::cout << "no quote requests\n";
      for (const auto& q : answer["quote_requests"]) {
        if (q.contains("username")) std::cout << Str(q, "username") << ": ";
        PrintRequest(q);
      }
      if (!answer["next_before"].is_null()) {
        std::cout << "more: --before " << answer["next_before"].dump() << "\n";
      }
    });
  });

  auto show = std::make_shared<Flags>();
  CLI::App* s = quote->add_subcommand("show", "one request with the server's recomputation");
  s->add_option("id", show->id, "quote request id")->required();
  AddConnection(s, show->c, true);
  s->callback([show] {
    Run(*show, {"GET", "/v1/quote-requests/" + std::to_string(show->id), "", "", ""},
        PrintSizing);
  });

  auto withdraw = std::make_shared<Flags>();
  CLI::App* w = quote->add_subcommand("withdraw", "withdraw an open request of yours");
  w->add_option("id", withdraw->id, "quote request id")->required();
  AddConnection(w, withdraw->c, true);
  w->callback([withdraw] {
    Run(*withdraw,
        {"POST", "/v1/quote-requests/" + std::to_string(withdraw->id) + "/withdraw", "", "", ""},
        PrintRequest);
  });

  auto answer = std::make_shared<Flags>();
  CLI::App* a = quote->add_subcommand(
      "answer", "admins: answer an open request with a price and terms, or decline it");
  a->add_option("id", answer->id, "quote request id")->required();
  a->add_option("--status", answer->status, "answered or declined")->required();
  a->add_option("--price", answer->price, "the price, as text (required to answer)");
  a->add_option("--terms", answer->terms, "conditions, or why it is declined");
  AddConnection(a, answer->c, true);
  a->callback([answer] {
    json body = {{"status", answer->status}};
    if (!answer->price.empty()) body["price"] = answer->price;
    if (!answer->terms.empty()) body["terms"] = answer->terms;
    Run(*answer,
        {"POST", "/v1/admin/quote-requests/" + std::to_string(answer->id) + "/answer",
         body.dump(), "", ""},
        PrintRequest);
  });
}

const bool kRegistered = RegisterCommands(&AddQuoteRequestCommands);

}  // namespace
}  // namespace gpuhub::cli
