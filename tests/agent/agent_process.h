// Test helpers of the agent's end-to-end suite: a running `gpuhub agent run` process and a fake
// nvidia-smi whose answer the test rewrites (waiting for a condition: WaitFor in harness.h).
#pragma once

#include <sys/types.h>

#include <string>

namespace gpuhub::testing {

// `gpuhub agent run --config <config>`, its output in <log>. The destructor SIGKILLs it.
class AgentProcess {
 public:
  AgentProcess(std::string config, std::string log) : config_(std::move(config)), log_(std::move(log)) {}
  ~AgentProcess();
  bool Start();
  void Kill();           // SIGKILL, reaped
  int Terminate();       // SIGTERM; the exit status (-1 after 20 s)
  bool Running();
  std::string Log() const;

 private:
  std::string config_;
  std::string log_;
  pid_t pid_ = -1;
};

// One line of the fake nvidia-smi's inventory CSV (the agent's NvidiaSmiQueryArgs fields).
std::string SmiLine(int index, const std::string& uuid, const std::string& name = "NVIDIA H100 80GB HBM3",
                    int ecc_uncorrected = 0);

}  // namespace gpuhub::testing
