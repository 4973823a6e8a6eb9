// The `gpuhub` command. Verbs are registered by the *_commands.cc files of this folder.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <sys/stat.h>
#include <vector>

#include "cli/command_registry.h"

namespace gpuhub::cli {
namespace {

std::vector<CommandRegistrar>& Registrars() {
  static std::vector<CommandRegistrar> registrars;
  return registrars;
}

int& ExitCode() {
  static int code = kExitOk;
  return code;
}

bool IsDirectory(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string FindDir(const char* env, const char* name) {
  if (const char* from_env = std::getenv(env); from_env && *from_env) return from_env;
  std::string in_source = std::string(GPUHUB_SOURCE_DIR) + "/" + name;
  if (IsDirectory(in_source)) return in_source;
  return name;
}

}  // namespace

bool RegisterCommands(CommandRegistrar registrar) {
  Registrars().push_back(std::move(registrar));
  return true;
}

void SetExitCode(int code) { ExitCode() = code; }

void FailBadInput(const std::string& message) {
  std::cerr << "gpuhub: " << message << "\n";
  SetExitCode(kExitBadInput);
}

void Fail(const std::string& message) {
  std::cerr << "gpuhub: " << message << "\n";
  SetExitCode(kExitFailure);
}

std::string DataDir() { return FindDir("GPUHUB_DATA_DIR", "data"); }
std::string WebDir() { return FindDir("GPUHUB_WEB_DIR", "web"); }

}  // namespace gpuhub::cli

int main(int argc, char** argv) {
  using namespace gpuhub::cli;
  CLI::App app{"gpuhub: size a model's GPU memory, find the cheapest GPUs that hold it, rent them"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gpuhub 0.1.0");
  for (const auto& registrar : Registrars()) registrar(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit 2: scripts match on the code, people read the line.
    std::cerr << "gpuhub: " << e.what() << " (see gpuhub --help)\n";
    return kExitBadInput;
  }
  return ExitCode();
}
