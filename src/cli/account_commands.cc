// `gpuhub login`, `gpuhub password change`, `gpuhub totp ...`: the signed-in account on a running
// server (--server URL or $GPUHUB_SERVER). Secrets never come from an argument (they would show in
// `ps` and the shell history): passwords from $GPUHUB_PASSWORD / $GPUHUB_NEW_PASSWORD or stdin,
// one a line; a two-factor code from --totp-code or $GPUHUB_TOTP_CODE (a code is good once and
// for 30 seconds, so an argument leaks nothing reusable).
//
//   gpuhub login --username U [--totp-code C]     stdin: password     -> the token, last line
//   gpuhub password change [--totp-code C]         stdin: current, new -> other sessions end
//   gpuhub totp status | enable | confirm --totp-code C | disable --totp-code C
//   gpuhub totp recovery-codes --totp-code C       (new recovery codes; the old ones end)
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
  std::string username, code;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The variable, else the next line of stdin ("" when there is none).
std::string SecretFrom(const char* variable) {
  std::string value = Env(variable);
  if (!value.empty()) return value;
  std::string line;
  if (!std::getline(std::cin, line)) return "";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::string CodeOf(const Flags& f) { return f.code.empty() ? Env("GPUHUB_TOTP_CODE") : f.code; }

void PrintCodes(const json& answer) {
  std::cout << "recovery codes (each works once; shown only now, keep them offline):\n";
  for (const auto& c : answer["recovery_codes"]) std::cout << "  " << c.get<std::string>() << "\n";
}

void Run(const Flags& f, ServerCall call, bool needs_token, void (*print)(const json&)) {
  CallAndPrint(f.c, std::move(call), needs_token, print);
}

void AddTotpOption(CLI::App* cmd, Flags& f) {
  cmd->add_option("--totp-code", f.code,
                  "the current code of your authenticator app (default $GPUHUB_TOTP_CODE)");
}

void AddAccountCommands(CLI::App& app) {
  auto login = std::make_shared<Flags>();
  CLI::App* in = app.add_subcommand(
      "login", "sign in; prints a bearer token (password from $GPUHUB_PASSWORD or stdin)");
  in->add_option("--username", login->username, "the account")->required();
  AddTotpOption(in, *login);
  AddConnection(in, login->c, false);
  in->callback([login] {
    std::string password = SecretFrom("GPUHUB_PASSWORD");
    if (password.empty()) return FailBadInput("no password: set GPUHUB_PASSWORD or pipe it in");
    json body = {{"username", login->username}, {"password", password}};
    if (std::string code = CodeOf(*login); !code.empty()) body["totp_code"] = code;
    Run(*login, {"POST", "/v1/sessions", body.dump(), "", ""}, false, [](const json& answer) {
      std::cout << "signed in until " << Str(answer, "expires_at")
                << "; token (use it as --token or GPUHUB_TOKEN):\n"
                << Str(answer, "token") << "\n";
    });
  });

  CLI::App* password = app.add_subcommand("password", "the account's password");
  password->require_subcommand(1);
  auto change = std::make_shared<Flags>();
  CLI::App* ch = password->add_subcommand(
      "change",
      "current and new password from $GPUHUB_PASSWORD / $GPUHUB_NEW_PASSWORD or "
      "stdin (one a line); every other session ends");
  AddTotpOption(ch, *change);
  AddConnection(ch, change->c, true);
  ch->callback([change] {
    std::string current = SecretFrom("GPUHUB_PASSWORD");
    std::string next = SecretFrom("GPUHUB_NEW_PASSWORD");
    if (current.empty() || next.empty()) {
      return FailBadInput(
          "needs the current and the new password: GPUHUB_PASSWORD and GPUHUB_NEW_PASSWORD, or "
          "two lines on stdin");
    }
    json body = {{"current_password", current}, {"new_password", next}};
    if (std::string code = CodeOf(*change); !code.empty()) body["totp_code"] = code;
    Run(*change, {"POST", "/v1/accounts/me/password", body.dump(), "", ""}, true,
        [](const json& answer) {
          std::cout << "password changed; " << Str(answer, "sessions_revoked")
                    << " other session(s) ended\n";
        });
  });

  CLI::App* totp = app.add_subcommand("totp", "two-factor sign-in (an authenticator app)");
  totp->require_subcommand(1);
  auto status = std::make_shared<Flags>();
  CLI::App* st = totp->add_subcommand("status", "whether two-factor sign-in is on");
  AddConnection(st, status->c, true);
  st->callback([status] {
    Run(*status, {"GET", "/v1/accounts/me/totp", "", "", ""}, true, [](const json& a) {
      if (a.value("enabled", false)) {
        std::cout << "two-factor sign-in: enabled since " << Str(a, "enabled_at") << ", "
                  << Str(a, "recovery_codes_left") << " recovery code(s) left\n";
      } else {
        std::cout << "two-factor sign-in: "
                  << (a.value("pending", false) ? "pending (confirm it)" : "off") << "\n";
      }
    });
  });
  auto enable = std::make_shared<Flags>();
  CLI::App* en = totp->add_subcommand(
      "enable", "start: prints the secret and the otpauth:// URI for your authenticator app");
  AddConnection(en, enable->c, true);
  en->callback([enable] {
    Run(*enable, {"POST", "/v1/accounts/me/totp", "{}", "", ""}, true, [](const json& a) {
      std::cout << "add this to your authenticator app, then run `gpuhub totp confirm "
                   "--totp-code CODE`:\n  secret "
                << Str(a, "secret") << "\n"
                << Str(a, "otpauth_uri") << "\n";
    });
  });
  auto confirm = std::make_shared<Flags>();
  CLI::App* co = totp->add_subcommand("confirm", "turn it on with a code of the new secret");
  AddTotpOption(co, *confirm);
  AddConnection(co, confirm->c, true);
  co->callback([confirm] {
    json body = {{"totp_code", CodeOf(*confirm)}};
    Run(*confirm, {"POST", "/v1/accounts/me/totp/confirm", body.dump(), "", ""}, true,
        [](const json& a) {
          std::cout << "two-factor sign-in enabled\n";
          PrintCodes(a);
        });
  });
  auto disable = std::make_shared<Flags>();
  CLI::App* di = totp->add_subcommand("disable", "turn it off (a code or a recovery code)");
  AddTotpOption(di, *disable);
  AddConnection(di, disable->c, true);
  di->callback([disable] {
    json body = {{"totp_code", CodeOf(*disable)}};
    Run(*disable, {"POST", "/v1/accounts/me/totp/disable", body.dump(), "", ""}, true,
        [](const json&) { std::cout << "two-factor sign-in disabled\n"; });
  });
  auto recovery = std::make_shared<Flags>();
  CLI::App* rc = totp->add_subcommand("recovery-codes", "new recovery codes (the old ones end)");
  AddTotpOption(rc, *recovery);
  AddConnection(rc, recovery->c, true);
  rc->callback([recovery] {
    json body = {{"totp_code", CodeOf(*recovery)}};
    Run(*recovery, {"POST", "/v1/accounts/me/recovery-codes", body.dump(), "", ""}, true,
        PrintCodes);
  });
}

const bool kRegistered = RegisterCommands(&AddAccountCommands);

}  // namespace
}  // namespace gpuhub::cli
