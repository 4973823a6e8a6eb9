// How CLI verbs talk to a running `gpuhub serve` (--server URL, default $GPUHUB_SERVER; --token,
// default $GPUHUB_TOKEN, a bearer token from POST /v1/sessions; or an API key from
// --api-key-file or $GPUHUB_API_KEY, never from an argument: arguments show in `ps` and in shell
// history). One place, so that every verb says the same thing when the server is missing,
// unreachable or refuses.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "net/http_client.h"

namespace gpuhub::cli {

struct ServerCall {
  std::string method = "GET";
  std::string path;  // "/v1/rentals?limit=20"
  std::string body;  // JSON, sent with Content-Type: application/json when not empty
  std::string token;            // bearer token; "" for public endpoints
  std::string idempotency_key;  // sent as Idempotency-Key when not empty
};

// The --server value, else $GPUHUB_SERVER, else "".
std::string ServerFromEnvironment(const std::string& flag_value);
// The --token value, else $GPUHUB_TOKEN, else $GPUHUB_API_KEY, else "".
std::string TokenFromEnvironment(const std::string& flag_value);
// The bearer credential of a verb: --token (a session token: an API key there is
// invalid_argument), else the API key in `api_key_file` (its first line; invalid_argument when it
// cannot be read or holds no "ghk_" key), else TokenFromEnvironment("").
Result<std::string> CredentialFrom(const std::string& token_flag, const std::string& api_key_file);

// Sends `call` to `server`. invalid_argument when `server` is empty or not a base URL (the message
// names --server); unavailable when the server cannot be reached in time. Any HTTP status comes
// back as a Response: use ServerError to turn a non-2xx one into a message.
Result<net::Response> CallServer(std::string_view server, const ServerCall& call);

// "the server answered 402 insufficient_funds: <message>" from an error response of the API
// (its {"error": {...}} body), or the first 200 bytes of any other body.
std::string ServerError(const ServerCall& call, const net::Response& response);

}  // namespace gpuhub::cli
