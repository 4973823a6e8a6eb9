// A fake Docker Engine API for tests: HTTP/1.1 on a unix socket, answering the calls the agent
// makes the way the real daemon does (API 1.43 paths and status codes, moby's api/swagger.yaml),
// keeping containers and images in memory, and recording every call.
//
//   GET  /_ping (Api-Version header)          GET  /vX/containers/json?all=1&filters={"label":[..]}
//   GET  /vX/images/{name}/json (200 | 404)   POST /vX/images/create?fromImage=&tag= (JSON stream)
//   POST /vX/containers/create?name= (201 | 409 name in use)
//   POST /vX/containers/{id}/start (204 | 304 | 500 "port is already allocated" when told)
//   POST /vX/containers/{id}/stop?t= (204 | 304)   DELETE /vX/containers/{id}?force=1 (204 | 404)
//   GET  /vX/containers/{id}/stats?stream=0&one-shot=1 ({"networks": {"eth0": {"tx_bytes"}}})
//   GET  /vX/networks/{name} (200 | 404)      POST /vX/networks/create (201 | 409)
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
#include <vector>

namespace gpuhub::agent::testing {

class FakeDocker {
 public:
  struct Call {
    std::string method;
    std::string path;   // without the version prefix: "/containers/create"
    std::string query;  // raw, percent-encoded
    std::string body;
    std::string registry_auth;  // the X-Registry-Auth header ("" when none)
  };
  struct Container {
    std::string id;
    std::string name;
    std::string state;  // "created", "running", "exited"
    nlohmann::json create_body;
    std::int64_t tx_bytes = 0;
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
  // Pulls of this image fail ("unauthorized") unless X-Registry-Auth carries this user name and
  // password (base64url JSON, as Docker decodes it).
  void RequireAuth(const std::string& reference, const std::string& username,
                   const std::string& password);
  void SetTxBytes(const std::string& container_id, std::int64_t bytes);
  // The next `n` starts fail with "port is already allocated".
  void FailStarts(int n);
  // Adds a container as if someone (an older agent) had created it.
  std::string AddContainer(const std::string& name, const nlohmann::json& create_body,
                           const std::string& state);

 private:
  void AcceptLoop();
  void Serve(int fd);
  std::string Handle(const std::string& method, const std::string& target,
                     const std::string& body, const std::string& registry_auth = "");

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
  std::map<std::string, std::pair<std::string, std::string>> private_images_;
  int failing_starts_ = 0;
  std::uint64_t next_id_ = 1;
};

}  // namespace gpuhub::agent::testing
