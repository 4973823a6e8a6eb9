// How the verbs of the `gpuhub` command plug in: each *_commands.cc file registers a function that
// adds its subcommands to the CLI11 app. main.cc owns parsing, errors and exit codes.
//
// Exit codes (scripts depend on them): 0 ok, 2 bad input (one line on stderr, "gpuhub: ..."),
// 1 anything else (a server that cannot start, an internal error).
#pragma once

#include <functional>
#include <string>

namespace CLI {
class App;
}

namespace gpuhub::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

// Adds subcommands to `app`. A subcommand's callback returns its exit code through SetExitCode (CLI11
// callbacks return void).
using CommandRegistrar = std::function<void(CLI::App& app)>;

// Called from a static initializer in each *_commands.cc:
//   static const bool kRegistered = gpuhub::cli::RegisterCommands(&AddSizingCommands);
bool RegisterCommands(CommandRegistrar registrar);

void SetExitCode(int code);

// Prints "gpuhub: <message>" on stderr and sets the exit code to kExitBadInput.
void FailBadInput(const std::string& message);
// Prints "gpuhub: <message>" on stderr and sets the exit code to kExitFailure.
void Fail(const std::string& message);

// `gpuhub admin`, the group of operator verbs (created by whichever file asks first).
CLI::App* AdminGroup(CLI::App& app);

// Where bundled data lives: $GPUHUB_DATA_DIR, else <source tree>/data when it exists (a build run
// from its checkout), else ./data.
std::string DataDir();
// Where the web pages live: $GPUHUB_WEB_DIR, else <source tree>/web, else ./web.
std::string WebDir();

}  // namespace gpuhub::cli
