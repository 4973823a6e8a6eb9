// Running the host's tools (nvidia-smi, cryptsetup, rbd, blkdiscard, mkfs, mount): argv only, no
// shell (nothing an agent is told can be interpreted as shell syntax), a deadline, an output cap.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/limits.h"
#include "core/status.h"

namespace gpuhub::agent {

struct ProcessResult {
  int exit_code = -1;   // the program's exit status; -1 when a signal ended it
  std::string stdout_text;
  std::string stderr_text;
};

// Runs argv[0] (looked up in PATH when it has no '/') with argv, feeding `stdin_text`. Errors:
// not_found when the program does not exist, unavailable when it ran past `timeout` (it is
// killed) or wrote more than kMaxToolOutputBytes, internal for fork/pipe failures. A non-zero exit
// is NOT an error here: look at exit_code.
Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout = kToolTimeout,
                                 const std::string& stdin_text = "");

// "cryptsetup exited 1: <first line of stderr>" for messages.
std::string DescribeFailure(const std::vector<std::string>& argv, const ProcessResult& result);

}  // namespace gpuhub::agent
