// Running the host's tools (nvidia-smi, cryptsetup, rbd, blkdiscard, mkfs, mount): argv only, no
// shell (nothing an agent is told can be interpreted as shell syntax), a deadline, an output cap.
// The runner itself is core's (core/process.h, shared with the server's Ceph client); this header
// gives it the agent's limits.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "agent/limits.h"
#include "core/process.h"
#include "core/status.h"

namespace gpuhub::agent {

using gpuhub::ProcessResult;

// Runs argv[0] (looked up in PATH when it has no '/') with argv, feeding `stdin_text`. Errors:
// not_found when the program does not exist, unavailable when it ran past `timeout` (it is
// killed) or wrote more than kMaxToolOutputBytes, internal for fork/pipe failures. A non-zero exit
// is NOT an error here: look at exit_code.
inline Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                        std::chrono::milliseconds timeout = kToolTimeout,
                                        const std::string& stdin_text = "") {
  return gpuhub::RunProcess(argv, timeout, stdin_text, kMaxToolOutputBytes);
}

// "cryptsetup exited 1: <first line of stderr>" for messages.
using gpuhub::DescribeFailure;

}  // namespace gpuhub::agent
