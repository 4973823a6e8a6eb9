// The reconcile plan: what to create, start and remove so that the containers on the host match
// the desired workloads. Pure (no I/O, time given), so each rule is unit-tested:
// - one container per workload (named after it: Docker refuses a second one); extra containers of
//   one workload and containers of workloads not desired are removed;
// - a desired workload whose not_after has passed is removed only once the server could not be
//   asked again (`expired_confirmed`): until then it is `awaiting` (the agent asks at once); a
//   heartbeat that succeeds brings the truth (a paid next hour moves not_after);
// - without any desired state (never reached the server, no cache), containers are kept until the
//   not_after they were created with (their label), then removed;
// - Docker's states (moby v20.10.24, daemon/start.go): "created"/"exited" are started; a
//   "paused", "dead" or "removing" container answers 409 to a start, so it is recreated (removed,
//   then created again once gone, at most as often as RecreateBackoff allows); "restarting" is a
//   container that exited by itself (the customer's `shutdown`, sshd killed) and that Docker's
//   restart policy (unless-stopped) brings back: left to Docker, reported, never started or
//   recreated by the agent (two restarters would race);
// - a desired container whose network volumes (kLabelVolumes) are not the workload's any more (a
//   volume attached or detached, its client or read_only changed), or one of whose volumes the
//   host no longer has mounted (`volumes_lost`: ceph-fuse died), is removed and created again on
//   the next pass (its bind mounts are fixed at creation).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/container.h"
#include "agent/docker.h"
#include "agent/protocol.h"
#include "core/clock.h"

namespace gpuhub::agent {

struct ActualContainer {
  std::string id;
  std::string workload;
  std::string state;  // Docker's
  int ssh_port = 0;
  TimestampMicros label_not_after = 0;
  std::string status;  // Docker's words ("Restarting (1) 2 seconds ago")
  std::vector<PortMapping> ports;  // its extra ports (kLabelPorts)
  std::string volumes;  // kLabelVolumes
};

// The agent's containers (those labelled kLabelManaged) as ActualContainers; containers whose
// labels are unusable are kept with an empty workload (and so removed).
std::vector<ActualContainer> FromSummaries(const std::vector<ContainerSummary>& containers);

struct ReconcileInput {
  std::vector<WorkloadSpec> desired;
  bool desired_known = false;
  std::set<std::string> expired_confirmed;
  TimestampMicros now = 0;  // the server's clock, as estimated on the host
  std::set<std::string> volumes_lost;  // workloads whose host mount of a volume is gone or dead
};

struct Plan {
  std::vector<WorkloadSpec> create;
  std::vector<ActualContainer> start;   // created or exited: (re)start
  std::vector<ActualContainer> remove;  // not desired, duplicated, or past not_after
  std::vector<std::string> awaiting;    // past not_after: ask the server before removing
  std::vector<ActualContainer> recreate;    // desired, but paused, dead or removing
  std::vector<ActualContainer> restarting;  // desired, exited by itself, Docker restarts it
  std::vector<std::string> volumes_changed;  // workloads in `remove` to be made with new volumes
};

Plan PlanReconcile(const ReconcileInput& input, const std::vector<ActualContainer>& actual);

// How long after its n-th recreate (n >= 1) a workload may be recreated again:
// kRecreateBackoffFirst, doubling, at most kRecreateBackoffMax. The first recreate (n = 0) is at once.
std::chrono::milliseconds RecreateBackoff(int recreates);

// A heartbeat carrying `sent` was answered: the "stopped" reports it delivered leave `status`.
// A report it carried in another state stays, even if `status` says "stopped" now: the reconciler
// changed it while the heartbeat was in flight, and the server has not heard it yet.
void ForgetDeliveredStops(const std::vector<WorkloadStatus>& sent,
                          std::map<std::string, WorkloadStatus>* status);

// The lowest port of [first, last] not in `used`; 0 when none is free.
int PickPort(int first, int last, const std::set<int>& used);

}  // namespace gpuhub::agent
