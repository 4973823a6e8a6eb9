// Who learns at once that a host's desired workloads changed: the agents' long-poll
// (GET /v1/agent/desired, http/desired_waiters.h) parks one request per host and is woken through
// a DesiredWatch the engine's agents state holds (AgentsConfig::watch).
//
// Contract: the domain code that changes what a host must run calls one of the Note* functions
// below inside its command, on the writer thread, before the commit: a lease created, ended,
// paused, resumed or paid for another hour (its machine: engine/market.cc), a rental's lifecycle
// (its node: engine/rentals.cc), a customer's SSH keys (the hosts of its live leases and rentals:
// engine/ssh_keys.cc), a
// heartbeat that moved a host's GPU binding (engine/agents.cc). A note is only a hint, never the
// answer: the watch re-reads the desired state in a command of its own, after the noting command
// committed, and answers only when the version differs from what the agent holds. So a note for a
// command that failed, or a spurious one, costs one read and changes nothing; a missing note
// costs the agent its next heartbeat (the change still arrives, just not at once).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/agents.h"

namespace gpuhub::engine {

// Called on the writer thread, inside the command that makes the change: must be quick (no I/O,
// no waiting for the engine).
class DesiredWatch {
 public:
  virtual ~DesiredWatch() = default;
  virtual void Changed(std::int64_t host_id) = 0;
};

// The desired workloads of a host at `now` (what a heartbeat's reply carries).
std::vector<DesiredWorkload> DesiredWorkloadsOf(const State& state, const AgentHost& host,
                                                TimestampMicros now);
// A version of a desired state: 16 hex digits of a hash of everything the agent acts on (ids,
// images, GPUs, keys, not_after, CPUs, memory, volumes), in order. Equal states, equal versions.
std::string DesiredVersion(const std::vector<DesiredWorkload>& workloads);

void NoteMachineDesiredChanged(const State& state, std::int64_t machine_id);
void NoteNodeDesiredChanged(const State& state, std::int64_t node_id);
void NoteHostDesiredChanged(const State& state, std::int64_t host_id);
void NoteCustomerDesiredChanged(const State& state, std::int64_t customer_id);

}  // namespace gpuhub::engine
