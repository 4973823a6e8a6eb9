// What every CLI verb that talks to a running server shares (rentals, storage, admin nodes): the
// --server/--token/--json flags, one call that reports errors the same way (exit 2 for a 4xx with
// the server's message naming the field, 1 when unreachable or 5xx; a 402 names the shortfall and
// the top-up), and how figures of the answers print.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/server_client.h"

namespace CLI {
class App;
}

namespace gpuhub::cli {

using json = nlohmann::ordered_json;

struct Connection {
  std::string server;
  std::string token;
  std::string api_key_file;
  bool json_output = false;
};

// Adds --server, --token and --api-key-file (when `needs_token`) and --json.
void AddConnection(CLI::App* cmd, Connection& c, bool needs_token);

// Sends the call; on success returns the parsed body ({} for a 204), else reports (exit 2 for a
// 4xx, 1 for the rest) and returns nullopt. A 402 names the top-up that covers the shortfall on
// the same line.
std::optional<json> Call(const Connection& c, ServerCall call, bool needs_token);
// Call, then the answer: as JSON with --json, else through `print`; exit 0 on success.
void CallAndPrint(const Connection& c, ServerCall call, bool needs_token,
                  void (*print)(const json&));

// A member as text: strings as they are, other values as JSON, "-" when absent or null.
std::string Str(const json& j, const char* key);
// "12168.000000" -> "12,168.00" (two decimals when exact, else all six).
std::string Money(const json& value);

}  // namespace gpuhub::cli
