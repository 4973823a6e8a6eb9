// `gpuhub serve`: the platform's HTTP server (src/http/serve.h does the wiring).
#include <CLI/CLI.hpp>

#include "cli/command_registry.h"
#include "http/serve.h"

namespace gpuhub::cli {
namespace {

void AddServeCommands(CLI::App& app) {
  auto options = std::make_shared<http::ServeOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve", "Run the HTTP API and web pages on an embedded SQLite file or PostgreSQL");
  serve->add_option("--listen", options->listen, "HOST:PORT to listen on (port 0: any free port)")
      ->default_str("127.0.0.1:8080");
  serve->add_option("--db", options->db, "sqlite:PATH or postgresql://USER@HOST:PORT/DB")
      ->default_str("sqlite:gpuhub.db");
  serve->add_option("--config", options->config_path, "TOML config file (docs/operations.md)");
  serve
      ->add_option("--clock", options->clock,
                   "real, or manual (tests and demos: POST /v1/admin/clock/advance)")
      ->default_str("real");
  serve->add_flag("--demo", options->demo,
                  "load the demo catalog and FX rates; machines without an agent trade on "
                  "simulated hosts");
  serve->add_flag("--simulated-hosts", options->simulated_hosts,
                  "machines without an agent trade as if one ran them (tests; never in "
                  "production: [agents] simulated_hosts)");
  serve->callback([options] {
    options->data_dir = DataDir();
    options->web_dir = WebDir();
    SetExitCode(http::RunServe(*options));
  });
}

const bool kRegistered = RegisterCommands(&AddServeCommands);

}  // namespace
}  // namespace gpuhub::cli
