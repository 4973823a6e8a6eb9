// `gpuhub audit-log`: the account's audit log on a running server (--server URL or
// $GPUHUB_SERVER; a session with --token / $GPUHUB_TOKEN, or an API key with the read scope from
// --api-key-file / $GPUHUB_API_KEY). Newest first, one event a line; when there is more, the last
// line says how to get the next page.
//
//   gpuhub audit-log [--limit N] [--before ID] [--account-id ID|all (admins)] [--json]
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
  long long limit = 0;
  long long before = 0;
  std::string account_id;
};

void PrintEvent(const json& e) {
  std::cout << Str(e, "id") << "  " << Str(e, "at") << "  " << Str(e, "kind") << "  account "
            << Str(e, "account_id") << "  by " << Str(e, "actor");
  if (!Str(e, "remote_address").empty()) std::cout << "  from " << Str(e, "remote_address");
  if (e.contains("detail") && !e["detail"].empty()) std::cout << "  " << e["detail"].dump();
  std::cout << "\n";
}

void AddAuditLogCommands(CLI::App& app) {
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "audit-log",
      "the account's audit log on a running server (sign-ins, keys, money), newest first");
  cmd->add_option("--limit", flags->limit, "events per page (1..200, default 50)");
  cmd->add_option("--before", flags->before, "the next page: events older than this id");
  cmd->add_option("--account-id", flags->account_id,
                  "admins: another account's log (its id, 0: events of no account) or \"all\"");
  AddConnection(cmd, flags->c, true);
  cmd->callback([flags] {
    const std::string& account = flags->account_id;
    if (!account.empty() && account != "all" &&
        account.find_first_not_of("0123456789") != std::string::npos) {
      return FailBadInput("--account-id must be an account's id or \"all\"");
    }
    std::string query;
    auto add = [&](const std::string& name, const std::string& value) {
      query += (query.empty() ? "?" : "&") + name + "=" + value;
    };
    if (flags->limit != 0) add("limit", std::to_string(flags->limit));
    if (flags->before != 0) add("before", std::to_string(flags->before));
    if (!flags->account_id.empty()) add("account_id", flags->account_id);
    auto answer = Call(flags->c, {"GET", "/v1/audit-log" + query, "", "", ""}, true);
    if (!answer) return;
    if (flags->c.json_output) {
      std::cout << answer->dump(2) << "\n";
    } else {
      if ((*answer)["events"].empty()) std::cout << "no events\n";
      for (const auto& e : (*answer)["events"]) PrintEvent(e);
      if ((*answer)["next_cursor"].is_string()) {
        std::cout << "more: gpuhub audit-log --before "
                  << (*answer)["next_cursor"].get<std::string>() << "\n";
      }
    }
    SetExitCode(kExitOk);
  });
}

const bool kRegistered = RegisterCommands(&AddAuditLogCommands);

}  // namespace
}  // namespace gpuhub::cli
