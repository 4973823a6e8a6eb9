// The CLI's term-rental verbs (rental_commands.cc) that other verb files plug in.
#pragma once

#include <string>

#include "core/status.h"

namespace CLI {
class App;
}

namespace gpuhub::cli {

// `gpuhub admin nodes add|list|drain|undrain|remove` under the admin verb.
void AddAdminNodeCommands(CLI::App* admin);

// `gpuhub admin storage-hosts add|list|drain|undrain` under the admin verb (storage_commands.cc).
void AddAdminStorageHostCommands(CLI::App* admin);

// `gpuhub catalog --server URL`: appends the term fleet's live stock per region (GET /v1/stock)
// to the catalog's output: a table, or a "live_stock" member of the JSON. unavailable when the
// server cannot be reached or is no gpuhub server; invalid_argument for a malformed URL.
Status AppendLiveStock(const std::string& server, bool json_output, std::string* catalog_output);

}  // namespace gpuhub::cli
