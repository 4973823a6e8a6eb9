// Private to the agent's files: the state its threads share (agent.cc: Run, the reporter, the
// watcher and enrolment; reconciler.cc: the reconciler) and the helpers both use.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/disks.h"
#include "agent/docker.h"
#include "agent/limits.h"
#include "agent/protocol.h"
#include "agent/reconcile.h"
#include "agent/volumes.h"

namespace gpuhub::agent {
namespace agent_internal {

using Steady = std::chrono::steady_clock;

TimestampMicros WallNow();
// Where a workload's authorized_keys live on the host (mounted read-only in its container).
std::string KeysDir(const std::string& state_dir, const std::string& workload);
Status MakeDirs(const std::string& path, unsigned mode);
// Writes the workload's authorized_keys when it differs from what is there (a new key of the
// customer reaches a running container).
Status WriteKeys(const std::string& state_dir, const WorkloadSpec& w);
void RemoveKeys(const std::string& state_dir, const std::string& workload);
// Whether Docker refused a port binding because the host port is taken.
bool PortInUse(const Status& s);

}  // namespace agent_internal

struct Agent::State {
  std::mutex mu;
  std::condition_variable cv;
  // From the reporter and the watcher (the long-poll): the newest answer's desired state.
  std::vector<WorkloadSpec> desired;
  bool desired_known = false;
  std::string desired_version;  // "" until an answer named it
  DesiredOrder desired_order;
  // Bumped by whatever the reconciler must act on at once (a new desired state from the watcher,
  // a pull or an SSH probe finished).
  std::uint64_t nudges = 0;
  bool stopping = false;  // Run is returning: the detached watcher and probes end
  // SSH probes of containers just started (ssh_probe.h), by workload: "starting" until done.
  struct SshProbe {
    std::string container;
    bool done = false;
    bool answered = false;
  };
  std::map<std::string, std::shared_ptr<SshProbe>> probes;
  // Asked in the last answer only (never cached: a disk is erased on the server's word of now).
  std::vector<DiskAction> disk_actions;
  TimestampMicros offset = 0;  // server clock - host clock
  std::uint64_t attempts = 0;  // heartbeats finished
  bool last_ok = false;
  bool force = false;
  std::chrono::milliseconds heartbeat_interval = kDefaultHeartbeatInterval;
  std::chrono::milliseconds usage_interval = kDefaultUsageInterval;
  Inventory inventory;
  // From the reconciler.
  std::map<std::string, WorkloadStatus> status;
  // Disk actions done (or failed), reported as the workload's state while the server asks.
  std::map<std::string, WorkloadStatus> disk_status;
  std::vector<ActualContainer> actual;
  std::map<std::string, std::string> gpus_of;  // container id -> GPU UUIDs label
  // Reconciler only.
  std::unique_ptr<DockerClient> docker;
  agent_internal::Steady::time_point docker_retry{};
  std::map<std::string, std::uint64_t> expired_asked;  // workload -> attempts when asked
  struct Pull {
    bool done = false;
    Status result;
  };
  std::map<std::string, std::shared_ptr<Pull>> pulls;  // by image; `done`/`result` under mu
  struct Retry {
    agent_internal::Steady::time_point next{};
    std::chrono::milliseconds delay{0};
  };
  std::map<std::string, Retry> retries;
  // Recreates of containers Docker will not start (paused, dead, removing), by workload.
  struct Recreate {
    int count = 0;
    agent_internal::Steady::time_point last{};
    agent_internal::Steady::time_point next{};
  };
  std::map<std::string, Recreate> recreates;
  // Named volumes are left by a container's removal: swept (the unused ones of ours) after a
  // removal and once per Docker connection.
  bool sweep_volumes = false;
  std::map<int, agent_internal::Steady::time_point> bad_ports;  // port -> when it was taken
  std::unique_ptr<LuksVolumes> luks;
  std::unique_ptr<InstanceDisks> disks;
  std::unique_ptr<NetworkVolumes> volumes;
};

}  // namespace gpuhub::agent
