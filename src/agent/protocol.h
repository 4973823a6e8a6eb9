// The agent's side of the wire protocol with `gpuhub serve` (src/http/api_agent.cc; docs/agent.md):
// the JSON of enrolment, heartbeats, the desired state's long-poll and usage samples.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/container.h"
#include "agent/inventory.h"
#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::agent {

struct EnrolAnswer {
  std::int64_t host_id = 0;
  std::string credential;
  std::string kind;  // "machine" or "node"
  std::int64_t machine_id = 0;
};
std::string EnrolBody(const std::string& token, const std::string& nonce,
                      const std::string& hostname, const std::string& version);
Result<EnrolAnswer> ParseEnrolAnswer(std::string_view body);

// What the agent says about one workload.
struct WorkloadStatus {
  std::string id;
  std::string state;  // "pulling", "starting", "running", "failed", "stopped"
  int ssh_port = 0;
  std::string detail;
  std::vector<PortMapping> ports;  // the extra ports as published
};

// The inventory as JSON, as the heartbeat carries it (`gpuhub agent inventory --json` prints the
// same); `indent` < 0: one line.
std::string InventoryJson(const Inventory& inventory, int indent = -1);

std::string HeartbeatBody(const std::string& hostname, const std::string& public_host,
                          const std::string& version, const Inventory& inventory,
                          const std::vector<WorkloadStatus>& workloads);

// What the server asks of a released term rental's local NVMe: "erase" (cryptsetup luksErase of
// its volumes, the crypto-erase) then "wipe" (blkdiscard of their devices). The agent reports each
// done as the workload's state "erased" / "wiped" until the server stops asking.
struct DiskAction {
  std::string id;  // "rental-7"
  std::string action;
  std::vector<VolumeSpec> volumes;
};

// Where an answer's desired state stands among the server's answers (the server numbers them in
// the order it read them, http/desired_waiters.h): the agent keeps the newest, so a heartbeat's
// answer read before a long-poll's but delivered after it never takes a new workload back. An
// epoch names one server process; an answer without one (an older server) is always taken.
struct DesiredOrder {
  std::string epoch;
  std::uint64_t seq = 0;
};
bool NewerThan(const DesiredOrder& answer, const DesiredOrder& held);

struct HeartbeatAnswer {
  std::int64_t host_id = 0;
  std::string desired_version;  // "" from an older server
  DesiredOrder order;
  TimestampMicros server_time = 0;
  std::chrono::milliseconds heartbeat_interval{0};
  std::chrono::milliseconds usage_interval{0};
  std::vector<WorkloadSpec> workloads;
  std::vector<DiskAction> disk_actions;
  std::string hold_reason;
};
// invalid_argument when the answer is not what the server sends (a workload id unfit for names
// and paths, a time that does not parse, more than kMaxWorkloads workloads, a network volume that
// ValidateNetworkVolume refuses, repeats an id or mount, or more than
// kMaxNetworkVolumesPerWorkload of them).
Result<HeartbeatAnswer> ParseHeartbeatAnswer(std::string_view body);

// GET /v1/agent/desired's answer: the desired state when it is not `version` any more
// (changed), or nothing new after the wait (wait_seconds 0: the server did not wait, a standby or
// a full table; the agent waits before it asks again).
struct DesiredAnswer {
  bool changed = false;
  std::string version;
  int wait_seconds = 0;
  TimestampMicros server_time = 0;  // when changed
  std::vector<WorkloadSpec> workloads;
  DesiredOrder order;
};
Result<DesiredAnswer> ParseDesiredAnswer(std::string_view body);

struct UsageSample {
  std::string workload_id;
  TimestampMicros at = 0;
  int gpu_utilization_pct = 0;
  std::int64_t net_tx_bytes = 0;
};
std::string UsageBody(const std::vector<UsageSample>& samples);

// The server's error message ({"error": {"message"}}), or the start of the body.
std::string ServerMessage(std::string_view body);

// The last desired state, kept in the state directory so that an agent restarted while the server
// is unreachable still stops what it must: the workloads and the server's clock when they came.
// Never the registry credentials (they are needed only for a pull, which needs the server) and
// never a network volume's cephx key (its keyring file on the host is what a restart uses).
struct DesiredCache {
  std::vector<WorkloadSpec> workloads;
  TimestampMicros server_time = 0;
  TimestampMicros local_time = 0;  // the host's wall clock when the answer came
};
std::string DesiredCacheJson(const DesiredCache& cache);
Result<DesiredCache> ParseDesiredCache(std::string_view text);

}  // namespace gpuhub::agent
