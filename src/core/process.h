// Running outside programs (the agent's nvidia-smi, cryptsetup, rbd; the server's ceph CLI): argv
// only, no shell (nothing a caller is given can be interpreted as shell syntax), a deadline and an
// output cap. Thread-safe: each call spawns and reaps its own child.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuhub {

struct ProcessResult {
  int exit_code = -1;   // the program's exit status; -1 when a signal ended it
  std::string stdout_text;
  std::string stderr_text;
};

// Runs argv[0] (looked up in PATH when it has no '/') with argv, feeding `stdin_text`. Errors:
// invalid_argument for an empty argv, not_found when the program does not exist, unavailable when
// it ran past `timeout` (it is killed with SIGKILL) or wrote more than `max_output_bytes` on
// stdout and stderr together, internal for pipe failures. A non-zero exit is NOT an error here:
// look at exit_code.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout, const std::string& stdin_text,
                                 std::size_t max_output_bytes);

// "cryptsetup exited 1: <first line of stderr>" for messages.
std::string DescribeFailure(const std::vector<std::string>& argv, const ProcessResult& result);

}  // namespace gpuhub
