#include "core/process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

extern char** environ;

namespace gpuhub {
namespace {

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds timeout, const std::string& stdin_text,
                                 std::size_t max_output_bytes) {
  if (argv.empty() || argv[0].empty()) return Status::InvalidArgument("no program to run");
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0) {
    for (int* p : {in, out, err}) {
      CloseFd(p[0]);
      CloseFd(p[1]);
    }
    return Status::Internal(std::string("pipe: ") + ::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // posix_spawn, not fork + exec: the agent and the server are multi-threaded, and glibc's
  // posix_spawn reports a program that cannot be executed as its return value.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int spawned = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(in[0]);
  CloseFd(out[1]);
  CloseFd(err[1]);
  if (spawned != 0) {
    CloseFd(in[1]);
    CloseFd(out[0]);
    CloseFd(err[0]);
    if (spawned == ENOENT) return Status::NotFound(argv[0] + ": not found");
    return Status::Unavailable(argv[0] + ": " + ::strerror(spawned));
  }

  ProcessResult result;
  std::size_t written = 0;
  if (stdin_text.empty()) CloseFd(in[1]);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool killed = false, too_much = false;
  while (out[0] >= 0 || err[0] >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      killed = true;
      break;
    }
    pollfd fds[3];
    int count = 0;
    if (out[0] >= 0) fds[count++] = {out[0], POLLIN, 0};
    if (err[0] >= 0) fds[count++] = {err[0], POLLIN, 0};
    if (in[1] >= 0) fds[count++] = {in[1], POLLOUT, 0};
    int ready = ::poll(fds, static_cast<nfds_t>(count), static_cast<int>(left));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == in[1]) {
        ssize_t w = ::write(in[1], stdin_text.data() + written, stdin_text.size() - written);
        if (w > 0) written += static_cast<std::size_t>(w);
        if (w < 0 || written == stdin_text.size()) CloseFd(in[1]);
        continue;
      }
      char buf[8192];
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r <= 0) {
        if (fds[i].fd == out[0]) CloseFd(out[0]);
        else CloseFd(err[0]);
        continue;
      }
      std::string& to = fds[i].fd == out[0] ? result.stdout_text : result.stderr_text;
      to.append(buf, static_cast<std::size_t>(r));
      if (result.stdout_text.size() + result.stderr_text.size() > max_output_bytes) {
        too_much = true;
      }
    }
    if (too_much) break;
  }
  CloseFd(in[1]);
  CloseFd(out[0]);
  CloseFd(err[0]);
  if (killed || too_much) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (killed) {
    return Status::Unavailable(argv[0] + ": no answer within " +
                               std::to_string(timeout.count() / 1000) + " s (killed)");
  }
  if (too_much) return Status::Unavailable(argv[0] + ": too much output");
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string DescribeFailure(const std::vector<std::string>& argv, const ProcessResult& result) {
  std::string first = result.stderr_text.empty() ? result.stdout_text : result.stderr_text;
  first = first.substr(0, first.find('\n')).substr(0, 200);
  return (argv.empty() ? std::string("?") : argv[0]) +
         (result.exit_code < 0 ? " was killed by a signal"
                               : " exited " + std::to_string(result.exit_code)) +
         (first.empty() ? "" : ": " + first);
}

}  // namespace gpuhub
