#include "cli/server_client.h"

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "core/strings.h"

namespace gpuhub::cli {

std::string ServerFromEnvironment(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("GPUHUB_SERVER");
  return env ? env : "";
}

std::string TokenFromEnvironment(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const char* env = std::getenv("GPUHUB_TOKEN");
  if (env && *env) return env;
  const char* key = std::getenv("GPUHUB_API_KEY");
  return key ? key : "";
}

Result<std::string> CredentialFrom(const std::string& token_flag,
                                   const std::string& api_key_file) {
  if (token_flag.starts_with("ghk_")) {
    return Status::InvalidArgument(
        "--token takes a session token; an API key is never taken from an argument (it would "
        "show in ps and in shell history): use GPUHUB_API_KEY or --api-key-file");
  }
  if (!token_flag.empty()) return token_flag;
  if (!api_key_file.empty()) {
    auto text = ReadFile(api_key_file, 4096);
    if (!text.ok()) return Status::InvalidArgument("--api-key-file: " + text.status().message());
    std::string key(Trim(std::string_view(*text).substr(0, text->find('\n'))));
    if (!key.starts_with("ghk_")) {
      return Status::InvalidArgument("--api-key-file " + api_key_file +
                                     " holds no API key (its first line must start with ghk_)");
    }
    return key;
  }
  return TokenFromEnvironment("");
}

Result<net::Response> CallServer(std::string_view server, const ServerCall& call) {
  if (server.empty()) {
    return Status::InvalidArgument(
        "this needs --server URL (a running gpuhub serve), or GPUHUB_SERVER in the environment");
  }
  auto url = net::ParseUrl(server);
  if (!url.ok()) return Status::InvalidArgument("--server: " + url.status().message());
  if (url->scheme == net::Scheme::kUnix) {
    return Status::InvalidArgument("--server must be an http:// or https:// URL");
  }
  net::Request request;
  request.method = call.method;
  request.target = call.path;
  request.body = call.body;
  request.headers.push_back({"Accept", "application/json"});
  if (!call.body.empty()) request.headers.push_back({"Content-Type", "application/json"});
  if (!call.token.empty()) request.headers.push_back({"Authorization", "Bearer " + call.token});
  if (!call.idempotency_key.empty()) {
    request.headers.push_back({"Idempotency-Key", call.idempotency_key});
  }
  net::ClientOptions options;
  options.user_agent = "gpuhub-cli";
  return net::Fetch(server, request, options);
}

std::string ServerError(const ServerCall& call, const net::Response& response) {
  std::string out = "the server answered " + std::to_string(response.status) + " to " +
                    call.method + " " + call.path.substr(0, call.path.find('?'));
  auto body = nlohmann::json::parse(response.body, nullptr, false);
  if (body.is_object() && body.contains("error") && body["error"].is_object()) {
    const auto& error = body["error"];
    if (error.contains("code") && error["code"].is_string()) {
      out += ": " + error["code"].get<std::string>();
    }
    if (error.contains("message") && error["message"].is_string()) {
      out += ": " + error["message"].get<std::string>();
    }
    if (error.contains("field") && error["field"].is_string()) {
      out += " (field " + error["field"].get<std::string>() + ")";
    }
    return out;
  }
  return out + ": " + response.body.substr(0, 200);
}

}  // namespace gpuhub::cli
