// `gpuhub agent`: the program on every GPU host. It connects out only (nothing listens on the
// host), reports what the host has and runs what the server wants.
//
// Three threads:
// - the watcher: keeps one long-poll of GET /v1/agent/desired open (desired_wait_seconds, 20 s),
//   answered by the server the moment the host's desired workloads change (a lease bought, ended,
//   a key added); the new state goes to the reconciler at once, so new work never waits for a
//   heartbeat. Polls only while the last heartbeat got through (a host back from a silence is
//   offline, its leases paused, until its heartbeat says otherwise). Reconnects at once after an
//   answer, with back-off after errors. Answers are
//   ordered (protocol.h DesiredOrder): a heartbeat's older answer never takes a newer one back.
// - the reporter: every heartbeat interval (15 s; at once when the reconciler asks: a workload's
//   state changed, a not_after passed), measures the host (HostProbe), POSTs /v1/agent/heartbeat with the workloads' states, and keeps the answer:
//   the desired workloads and the server's clock (desired state cached in <state_dir>/desired.json
//   so a restart without the server still knows the last truth). Every usage interval it POSTs
//   each running container's cumulative network transmit bytes and its GPUs' utilization.
// - the reconciler: every second, lists the containers it manages (by label: the only record of
//   what runs, so a restarted agent never starts a second copy) and makes them match the desired
//   workloads (reconcile.h): pulls images beside the loop, creates containers with exactly the
//   leased GPUs by UUID and the customer's keys, publishes sshd on a free port of the range,
//   removes what is no longer desired. A container just started is "starting" until its sshd
//   answers on 127.0.0.1:PORT with an SSH banner (ssh_probe.h; ssh_ready_timeout_ms, 60 s), then
//   "running", reported at once: the customer's "ready" means the login works. A workload whose
//   not_after has passed (the paid hour is over) is removed when a heartbeat asked at that moment
//   fails: the agent stops workloads alone when the server cannot be reached.
//
// Time: the agent estimates the server's clock as its own wall clock plus the offset seen at the
// last heartbeat (server_time - local time), so a host with a wrong clock still ends workloads on
// time.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/config.h"
#include "agent/inventory.h"
#include "agent/protocol.h"
#include "agent/reconcile.h"
#include "agent/volumes.h"
#include "core/status.h"

namespace gpuhub::agent {

inline constexpr const char* kAgentVersion = "0.1.0";

struct AgentOptions {
  AgentConfig config;
  CredentialFile credential;
};

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until `stop` becomes true. Containers keep running when the agent stops (its restart
  // adopts them). Fails only on start-up (the state directory, the server URL).
  Status Run(const std::atomic<bool>& stop);

  struct State;  // agent.cc

 private:
  void ReporterLoop(const std::atomic<bool>& stop);
  void ReconcilerLoop(const std::atomic<bool>& stop);
  void ReconcileOnce();
  // A released term rental's disk: the erase, then the wipe, the server asks for (disks.h).
  void RunDiskActions(const std::set<std::string>& desired_ids);
  // Removes the named volumes of ours no container uses (Docker keeps them at a removal).
  void SweepVolumes();
  // Unmounts the network volumes no desired workload wants (or wants in the other mode) and no
  // container left binds.
  void SyncNetworkVolumes(const ReconcileInput& input, const std::vector<ActualContainer>& left,
                          const std::map<std::string, HostMount>& mounted);
  void SendUsage();
  // After a start: `status` becomes "starting" and a probe (detached, ssh_probe.h) waits for the
  // container's sshd; "running" once it answers (or the config's ssh_ready_timeout_ms passed).
  void StartSshProbe(const std::string& workload, const std::string& container, int port,
                     WorkloadStatus& status);
  // A running container's state as its probe says: "starting" while it waits.
  void SshProbeState(const std::string& workload, const std::string& container,
                     WorkloadStatus& status);

  AgentOptions options_;
  std::shared_ptr<State> state_;  // shared with image pulls that may outlive a stop
  HostProbe probe_;
};

// Enrols this host: POST /v1/agent/enroll with the token, writes the credential file (0600) in
// config.state_dir. A lost answer is retried with the same nonce (the server accepts it for 10
// minutes). Errors are in words for the operator.
Result<CredentialFile> Enrol(const AgentConfig& config, const std::string& server,
                             const std::string& token);

}  // namespace gpuhub::agent
