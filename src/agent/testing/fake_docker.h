// A fake Docker Engine API for tests: HTTP/1.1 on a unix socket, answering the calls the agent
// makes the way the real daemon does: Debian's docker.io 20.10.24, API 1.41 (read from moby's
// source at v20.10.24: paths, status codes and the daemon's messages), keeping containers, images,
// networks and volumes in memory, and recording every call.
//
//   GET  /_ping (Api-Version: 1.41)           GET  /version
//   /v1.42 and newer: 400 "client version 1.42 is too new. Maximum supported API version is 1.41"
//   GET  /vX/containers/json?all=1&filters={"label":[..]} (State and Status as Docker words them)
//   GET  /vX/images/{name}/json (200 | 404)   POST /vX/images/create?fromImage=&tag= (JSON stream)
//   POST /vX/containers/create?name= (201 | 409 name in use | 404 no image, network | 400
//        "Range of CPUs is from 0.01 to N.00, as there are only N CPUs available", "Minimum memory
//        limit allowed is 6MB" | 500 a security option it cannot parse). Its named volumes
//        (Mounts of Type volume) are created with their driver options and labels.
//   POST /vX/containers/{id}/start: 204 | 304 running or restarting | 409 paused ("cannot start a
//        paused container, try unpause instead"), dead or removing ("container is marked for
//        removal and cannot be started") | 500 in the daemon's order: a port already allocated
//        (FailStarts), a volume that does not mount (FailMounts), no nvidia driver
//        (SetNvidiaDriver(false): "could not select device driver ..."), a failing prestart hook
//        (FailPrestartHook: the OCI runtime's words). A failed start leaves the state as it was.
//   POST /vX/containers/{id}/stop?t= (204 | 304)
//   DELETE /vX/containers/{id}?force=1&v=1 (204 | 404 | 409 removing, or running without force);
//        v=1 removes its anonymous volumes only, never a named one
//   GET  /vX/containers/{id}/stats?stream=0&one-shot=1 (running: {"networks": {"eth0":
//        {"tx_bytes"}}}; not running or restarting: an empty sample without `networks`)
//   GET  /vX/networks/{name} (200 | 404)      POST /vX/networks/create (201 | 409)
//   GET  /vX/volumes?filters={"label":[..],"dangling":["true"]}
//   DELETE /vX/volumes/{name} (204 | 404 | 409 "remove NAME: volume is in use - [ids]")
//
// Test hooks do what happens to a real daemon behind the agent's back: a container paused, dead
// or being removed (SetState), one that exits by itself (Exit: "restarting" under a restart policy,
// else "exited"; FinishRestart ends Docker's restart delay). What the real daemon logs about a
// request (a deprecated option) is kept in DaemonLog().
//
// Thread-safe. Start() binds; Stop() closes the socket and every connection (a daemon that went
// away); Start() again serves the same containers (a daemon that came back).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpuhub::agent::testing {

class FakeDocker {
 public:
  struct Call {
    std::string method;
    std::string path;   // without the version prefix: "/containers/create"
    std::string query;  // raw, percent-encoded
    std::string body;
  };
  struct Container {
    std::string id;
    std::string name;
    // "created", "running", "restarting", "exited", "paused", "dead", "removing"
    std::string state;
    nlohmann::json create_body;
    std::int64_t tx_bytes = 0;
    int exit_code = 0;
    bool started_once = false;
  };
  struct Volume {
    std::string name;
    nlohmann::json options;  // the local driver's (type, device)
    nlohmann::json labels;
    bool anonymous = false;
  };

  explicit FakeDocker(std::string socket_path);
  ~FakeDocker();
  bool Start();
  void Stop();
  std::string url() const { return "unix:" + socket_path_; }

  std::vector<Call> Calls() const;
  std::vector<Call> CallsTo(const std::string& method, const std::string& path_prefix) const;
  std::vector<Container> Containers() const;
  // The create body of a network made through the API (null when there is none).
  nlohmann::json Network(const std::string& name) const;
  void AddImage(const std::string& reference);
  // Pulls of this image fail inside the stream, as the daemon reports a missing repository.
  void FailPulls(const std::string& reference, const std::string& error);
  void SetTxBytes(const std::string& container_id, std::int64_t bytes);
  // The next `n` starts fail with "port is already allocated".
  void FailStarts(int n);
  // Adds a container as if someone (an older agent) had created it.
  std::string AddContainer(const std::string& name, const nlohmann::json& create_body,
                           const std::string& state);
  // Puts a container (by id or name) in a state behind the agent's back: "paused", "dead",
  // "removing", "exited", ... false when there is no such container.
  bool SetState(const std::string& id_or_name, const std::string& state);
  // PID 1 of the container exited with `exit_code` (the customer ran `shutdown`, killed sshd):
  // under its RestartPolicy (always, unless-stopped; on-failure with a non-zero code) it is
  // "restarting", else "exited". Its network counters start again from zero.
  bool Exit(const std::string& id_or_name, int exit_code);
  // Docker's restart delay is over: a "restarting" container runs again.
  bool FinishRestart(const std::string& id_or_name);
  // The nvidia device driver is registered only when nvidia-container-runtime-hook is on
  // dockerd's PATH; without it a start with an nvidia DeviceRequest fails (500). Default: present.
  void SetNvidiaDriver(bool present);
  // Starts fail in the prestart hook with this on its stderr ("" ends it).
  void FailPrestartHook(const std::string& stderr_text);
  // Starts of a container whose volume's device starts with `device_prefix` fail to mount it with
  // `error` ("no such file or directory", "invalid argument"); "" as the error ends it.
  void FailMounts(const std::string& device_prefix, const std::string& error);
  // The CPUs the daemon sees (NanoCpus is checked against them). Default: this process's
  // affinity mask, as Go's runtime.NumCPU.
  void SetCpus(int cpus);
  std::map<std::string, Volume> Volumes() const;
  std::vector<std::string> DaemonLog() const;

 private:
  void AcceptLoop();
  void Serve(int fd);
  std::string Handle(const std::string& method, const std::string& target,
                     const std::string& body);
  Container* Find(const std::string& id_or_name);  // under mutex_
  // Why a start fails (the daemon's status and message), or {0, ""}. Under mutex_.
  std::pair<int, std::string> StartFailure(const Container& c);
  std::vector<std::string> VolumesOf(const Container& c) const;
  bool InUse(const std::string& volume) const;

  std::string socket_path_;
  std::atomic<int> listen_fd_{-1};
  std::atomic<bool> running_{false};
  std::thread acceptor_;
  mutable std::mutex mutex_;
  std::set<int> connections_;
  std::vector<std::thread> workers_;
  std::vector<Call> calls_;
  std::map<std::string, Container> containers_;  // by id
  std::set<std::string> images_;
  std::map<std::string, nlohmann::json> networks_;
  std::map<std::string, std::string> failing_pulls_;
  int failing_starts_ = 0;
  bool nvidia_driver_ = true;
  std::string failing_hook_;
  std::map<std::string, std::string> failing_mounts_;  // device prefix -> error
  int cpus_ = 1;
  std::map<std::string, Volume> volumes_;
  std::vector<std::string> daemon_log_;
  std::uint64_t next_id_ = 1;
};

}  // namespace gpuhub::agent::testing
