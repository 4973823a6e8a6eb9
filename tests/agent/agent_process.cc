#include "agent_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>
#include <vector>

namespace gpuhub::testing {

AgentProcess::~AgentProcess() {
  if (pid_ > 0) Kill();
}

bool AgentProcess::Start() {
  pid_ = ::fork();
  if (pid_ == 0) {
    int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    std::vector<std::string> args = {GPUHUB_BINARY, "agent", "run", "--config", config_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(GPUHUB_BINARY, argv.data());
    _exit(127);
  }
  return pid_ > 0;
}

void AgentProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int AgentProcess::Terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 400; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  Kill();
  return -1;
}

bool AgentProcess::Running() {
  return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0;
}

std::string AgentProcess::Log() const {
  std::ifstream in(log_);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string SmiLine(int index, const std::string& uuid, const std::string& name,
                    int ecc_uncorrected) {
  return std::to_string(index) + ", " + uuid + ", " + name + ", 81559, 550.54.15, 5, 16, 34, " +
         std::to_string(10 * index) + ", " + std::to_string(ecc_uncorrected) + "\n";
}

}  // namespace gpuhub::testing
