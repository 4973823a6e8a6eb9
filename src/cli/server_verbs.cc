#include "cli/server_verbs.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/command_registry.h"

namespace gpuhub::cli {

void AddConnection(CLI::App* cmd, Connection& c, bool needs_token) {
  cmd->add_option("--server", c.server, "a running gpuhub serve (default $GPUHUB_SERVER)");
  if (needs_token) {
    cmd->add_option("--token", c.token,
                    "bearer token from POST /v1/sessions (default $GPUHUB_TOKEN)");
    cmd->add_option("--api-key-file", c.api_key_file,
                    "a file holding an API key (ghk_...; default $GPUHUB_API_KEY)");
  }
  cmd->add_flag("--json", c.json_output, "print the server's JSON answer");
}

void CallAndPrint(const Connection& c, ServerCall call, bool needs_token,
                  void (*print)(const json&)) {
  auto answer = Call(c, std::move(call), needs_token);
  if (!answer) return;
  c.json_output ? void(std::cout << answer->dump(2) << "\n") : print(*answer);
  SetExitCode(kExitOk);
}

std::optional<json> Call(const Connection& c, ServerCall call, bool needs_token) {
  std::string server = ServerFromEnvironment(c.server);
  call.token.clear();
  if (needs_token) {
    auto credential = CredentialFrom(c.token, c.api_key_file);
    if (!credential.ok()) {
      FailBadInput(credential.status().message());
      return std::nullopt;
    }
    call.token = *credential;
  }
  if (needs_token && call.token.empty()) {
    FailBadInput(
        "this needs --token (a bearer token from POST /v1/sessions) or GPUHUB_TOKEN, or an API "
        "key in GPUHUB_API_KEY or --api-key-file");
    return std::nullopt;
  }
  auto response = CallServer(server, call);
  if (!response.ok()) {
    response.status().code() == StatusCode::kInvalidArgument
        ? FailBadInput(response.status().message())
        : Fail(response.status().message());
    return std::nullopt;
  }
  if (response->ok()) {
    json body = json::parse(response->body, nullptr, false);
    if (response->status == 204) return json::object();
    if (body.is_discarded()) {
      Fail("the server's answer is not JSON (is " + server + " a gpuhub server?)");
      return std::nullopt;
    }
    return body;
  }
  std::string message = ServerError(call, *response);
  json body = json::parse(response->body, nullptr, false);
  if (response->status == 402 && body.is_object() && body.contains("error")) {
    const json& e = body["error"];
    if (e.contains("shortfall") && e["shortfall"].is_object()) {
      message += "; short by " + e["shortfall"].value("amount", std::string()) + " " +
                 e["shortfall"].value("currency", std::string());
    }
    if (e.contains("topup") && e["topup"].is_object()) {
      message += "; top up " + e["topup"].value("amount", std::string()) + " " +
                 e["topup"].value("currency", std::string()) + " at " +
                 e["topup"].value("checkout_url", std::string());
    }
  }
  response->status >= 400 && response->status < 500 ? FailBadInput(message) : Fail(message);
  return std::nullopt;
}

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

std::string Money(const json& value) {
  if (!value.is_string()) return "-";
  std::string text = value.get<std::string>();
  std::size_t point = text.find('.');
  std::string whole = text.substr(0, point), frac = point == std::string::npos ? "" : text.substr(point + 1);
  bool negative = !whole.empty() && whole[0] == '-';
  if (negative) whole.erase(0, 1);
  std::string grouped;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  while (frac.size() > 2 && frac.back() == '0') frac.pop_back();
  while (frac.size() < 2) frac += '0';
  return (negative ? "-" : "") + grouped + "." + frac;
}

}  // namespace gpuhub::cli
