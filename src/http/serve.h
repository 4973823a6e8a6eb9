// `gpuhub serve`: wires the store, the engine, the API routes and the HTTP server together and
// runs until SIGTERM/SIGINT.
#pragma once

#include <string>

namespace gpuhub::http {


struct ServeOptions {
  std::string listen;  // "HOST:PORT"; empty: the config file's, else 127.0.0.1:8080
  std::string db = "sqlite:gpuhub.db";
  std::string config_path;     // empty: defaults
  std::string clock = "real";  // "real" | "manual"
  bool demo = false;
  // Machines without an agent trade on a simulated host ([agents] simulated_hosts; --demo too).
  bool simulated_hosts = false;
  std::string data_dir;  // catalog.toml, models/
  std::string web_dir;   // static pages
};

// Returns the process exit code: 0 after a clean shutdown, 2 for bad flags or config, 1 when the
// server cannot start (database unreachable, port taken). Prints "listening on http://HOST:PORT"
// on stdout (flushed) once it accepts connections.
int RunServe(const ServeOptions& options);

// Sets up spdlog: logfmt-style lines on stderr with UTC timestamps, one event per line, repeats of
// a warning or error held back and counted (http/log_sink.h).
void SetUpLogging();
// Writes the summaries of warnings and errors still held back (at exit).
void FlushLogRepeats();

}  // namespace gpuhub::http
