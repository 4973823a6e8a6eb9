#include "engine/agents.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "core/strings.h"
#include "engine/accounts.h"
#include "engine/agent_watch.h"
#include "engine/agents_internal.h"
#include "engine/limits.h"
#include "engine/market.h"
#include "engine/rentals.h"
#include "engine/ssh_keys.h"
#include "engine/storage.h"

namespace gpuhub::engine {

namespace agents_internal {

std::string Clean(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxAgentTextBytes)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  return out;
}

void WriteWorkload(Txn& txn, const WorkloadRecord& w) {
  txn.writes.Upsert("agent_workloads", {{"id", w.id},
                                        {"host_id", w.host_id},
                                        {"state", w.state},
                                        {"ssh_port", std::int64_t{w.ssh_port}},
                                        {"detail", w.detail},
                                        {"ports", FormatPublishedPorts(w.ports)},
                                        {"updated_at_us", w.updated_at},
                                        {"egress_bytes", w.egress_bytes},
                                        {"tx_counter_bytes", w.tx_counter_bytes},
                                        {"last_sample_at_us", w.last_sample_at}});
}

}  // namespace agents_internal

namespace {

using agents_internal::Clean;
using agents_internal::WriteWorkload;

AgentsState& A(Txn& txn) { return *txn.state.agents; }
const market::Exchange& X(const State& state) { return state.market->exchange; }

std::int64_t OfflineAfter(const AgentsState& a) {
  return a.config.offline_after_micros > 0 ? a.config.offline_after_micros
                                           : kAgentOfflineAfterMicros;
}

std::string RandomSecret(const char* prefix) {
  unsigned char bytes[32];
  randombytes_buf(bytes, sizeof bytes);
  char hex[sizeof bytes * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, bytes, sizeof bytes);
  return std::string(prefix) + hex;
}

std::string JoinWith(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const auto& r : parts) out += (out.empty() ? "" : separator) + r;
  return out;
}

void WriteHost(Txn& txn, const AgentHost& h) {
  txn.writes.Upsert("agent_hosts", {{"id", h.id},
                                    {"kind", std::string(HostKindName(h.kind))},
                                    {"owner_id", h.owner_id},
                                    {"machine_id", h.machine_id},
                                    {"node_id", h.node_id},
                                    {"credential_hash", h.credential_hash},
                                    {"enrolled_at_us", h.enrolled_at},
                                    {"revoked_at_us", h.revoked_at},
                                    {"last_seen_us", h.last_seen},
                                    {"hostname", h.hostname},
                                    {"public_host", h.public_host},
                                    {"agent_version", h.agent_version},
                                    {"inventory_source", h.inventory.source},
                                    {"inventory_error", h.inventory.error},
                                    {"driver_version", h.inventory.driver_version},
                                    {"cuda_version", h.inventory.cuda_version},
                                    {"ram_mib", h.inventory.ram_mib},
                                    {"vcpus", h.inventory.vcpus},
                                    {"nvme_free_gb", h.inventory.nvme_free_gb},
                                    {"disk_total_gb", h.inventory.disk_total_gb},
                                    {"bound_uuids", JoinWith(h.bound_uuids, ",")}});
}

void WriteGpu(Txn& txn, std::int64_t host_id, const GpuInventory& g) {
  txn.writes.Upsert("agent_gpus",
                    {{"host_id", host_id},
                     {"gpu_index", std::int64_t{g.index}},
                     {"uuid", g.uuid},
                     {"name", g.name},
                     {"memory_mib", g.memory_mib},
                     {"pcie_gen", std::int64_t{g.pcie_gen}},
                     {"pcie_width", std::int64_t{g.pcie_width}},
                     {"healthy", std::int64_t{g.healthy ? 1 : 0}},
                     {"health", JoinWith(g.health, "\n")}},
                    /*key_columns=*/2);
}

void WriteToken(Txn& txn, const EnrolmentToken& t) {
  txn.writes.Upsert("agent_enrolment_tokens", {{"token_hash", t.token_hash},
                                               {"kind", std::string(HostKindName(t.kind))},
                                               {"machine_id", t.machine_id},
                                               {"node_id", t.node_id},
                                               {"created_by", t.created_by},
                                               {"created_at_us", t.created_at},
                                               {"expires_at_us", t.expires_at},
                                               {"used_at_us", t.used_at},
                                               {"host_id", t.host_id},
                                               {"nonce_hash", t.nonce_hash}});
}

void SetCredential(AgentsState& a, AgentHost& host, const std::string& hash) {
  if (!host.credential_hash.empty()) a.host_by_credential.erase(host.credential_hash);
  host.credential_hash = hash;
  if (!hash.empty()) a.host_by_credential[hash] = host.id;
}

// Whether the workload belongs to the host: an active lease on the host's machine, or one that
// ended and whose workload this host reported (so that its last reports are still taken).
bool WorkloadOfHost(const State& state, const AgentHost& host, std::string_view workload_id) {
  if (host.kind == HostKind::kNode) {
    return agents_internal::NodeWorkloadOfHost(state, host, workload_id);
  }
  std::int64_t lease_id = LeaseOfWorkload(workload_id);
  if (lease_id == 0 || host.kind != HostKind::kMachine) return false;
  const market::Lease* lease = X(state).FindLease(lease_id);
  if (lease != nullptr) return lease->machine_id == host.machine_id;
  // An ended lease left memory (Exchange::Forget); the workload it ran on this host is still
  // recorded, so the host's last reports of it are taken.
  const WorkloadRecord* w = FindWorkload(state, std::string(workload_id));
  return w != nullptr && w->host_id == host.id;
}

std::vector<DesiredWorkload> DesiredFor(const State& state, const AgentHost& host,
                                        TimestampMicros now) {
  if (host.kind == HostKind::kNode) return agents_internal::DesiredForNode(state, host);
  std::vector<DesiredWorkload> out;
  const market::Machine* machine = X(state).FindMachine(host.machine_id);
  if (machine == nullptr) return out;
  auto reported = [&](const std::string& uuid) {
    return std::any_of(host.inventory.gpus.begin(), host.inventory.gpus.end(),
                       [&](const GpuInventory& g) { return g.uuid == uuid; });
  };
  if (machine->offline_since != 0) return out;  // its leases are paused with it
  const std::int64_t start_timeout = LeaseStartTimeoutMicros(state.agents->config);
  for (const market::Lease& lease : X(state).ActiveLeasesOn(host.machine_id)) {
    DesiredWorkload w;
    w.id = LeaseWorkloadId(lease.id);
    bool placed = true;
    for (int i = 0; i < market::kMaxGpusPerMachine; ++i) {
      if ((lease.gpu_mask & (1u << i)) == 0) continue;
      if (i >= static_cast<int>(host.bound_uuids.size()) ||
          !reported(host.bound_uuids[static_cast<std::size_t>(i)])) {
        placed = false;  // the host does not report the GPU: nothing to start it on
        break;
      }
      w.gpu_uuids.push_back(host.bound_uuids[static_cast<std::size_t>(i)]);
    }
    if (!placed) continue;
    w.image = LeaseImage(state, lease);
    if (const LaunchExtras* extras = BidExtras(state, lease.bid_id)) {
      w.ports = extras->ports;
      w.sealed_registry_auth = extras->sealed_registry_auth;
    }
    w.port_range_first = machine->port_range_first;
    w.port_range_last = machine->port_range_last;
    for (const auto& key : ListSshKeys(state, lease.customer_id)) {
      w.ssh_authorized_keys.push_back(key.key.Line());
    }
    if (lease.Provisioning()) {
      w.not_after = lease.start_deadline + market::kLeaseHourMicros;  // the hour it holds
    } else if (lease.workload_down) {
      // Long enough to run it again; `now` rounded up to the hour so that the desired state (and
      // its version, which the long-poll compares) changes once an hour, not at every request.
      const TimestampMicros hour = market::kLeaseHourMicros;
      w.not_after = std::max(lease.PaidUntil(), (now + hour - 1) / hour * hour + start_timeout);
    } else {
      w.not_after = lease.PaidUntil();
    }
    w.cpus = WorkloadCpus(*machine, host.inventory, lease.gpus);
    w.memory_gb = WorkloadMemoryGb(*machine, host.inventory, lease.gpus);
    out.push_back(std::move(w));
  }
  return out;
}

// What the heartbeat says of each active lease on the host's machine, one side at a time:
// `running` false applies the leases that ran and are no longer running (reported in another
// state, or not reported at all: the container is gone), true those reported "running" that are
// provisioning or down (market::Exchange::ReportLeaseWorkload).
Status ApplyLeaseReports(Txn& txn, const AgentHost& host,
                         const std::vector<WorkloadReport>& reports, bool running) {
  for (const market::Lease& lease : X(txn.state).ActiveLeasesOn(host.machine_id)) {
    const std::string id = LeaseWorkloadId(lease.id);
    const bool reported_running = std::any_of(
        reports.begin(), reports.end(),
        [&](const WorkloadReport& r) { return r.id == id && r.state == "running"; });
    if (reported_running != running) continue;
    const bool change = running ? lease.Provisioning() || lease.workload_down
                                : !lease.Provisioning() && !lease.workload_down;
    if (!change) continue;
    GPUHUB_ASSIGN_OR_RETURN(market::Lease after, ReportLeaseWorkload(txn, lease.id, running));
    spdlog::info("event=lease_workload lease={} host={} running={} billed_hours={} status={}",
                 lease.id, host.id, running, after.hours_paid,
                 market::LeaseStatusName(after.status));
  }
  return Status::Ok();
}

Status ValidateInventory(const HostInventory& inv) {
  if (inv.gpus.size() > kMaxReportedGpus) {
    return Status::InvalidArgument("inventory.gpus: at most " + std::to_string(kMaxReportedGpus) +
                                   " GPUs")
        .WithField("inventory.gpus");
  }
  std::set<int> indices;
  std::set<std::string> uuids;
  for (const auto& g : inv.gpus) {
    if (g.index < 0 || g.index >= static_cast<int>(kMaxReportedGpus) || !indices.insert(g.index).second) {
      return Status::InvalidArgument("inventory.gpus: indices must be distinct, 0.." +
                                     std::to_string(kMaxReportedGpus - 1))
          .WithField("inventory.gpus");
    }
    bool plain = !g.uuid.empty() && g.uuid.size() <= 96;
    for (char c : g.uuid) {
      plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '-');
    }
    if (!plain || !uuids.insert(g.uuid).second) {
      return Status::InvalidArgument(
                 "inventory.gpus: every GPU needs its own uuid (letters, digits and '-')")
          .WithField("inventory.gpus");
    }
    if (g.health.size() > kMaxHealthReasonsPerGpu) {
      return Status::InvalidArgument("inventory.gpus: at most " +
                                     std::to_string(kMaxHealthReasonsPerGpu) +
                                     " health reasons per GPU")
          .WithField("inventory.gpus");
    }
  }
  return Status::Ok();
}

}  // namespace

std::vector<DesiredWorkload> DesiredWorkloadsOf(const State& state, const AgentHost& host,
                                                TimestampMicros now) {
  return DesiredFor(state, host, now);
}

std::string NewEnrolmentToken() { return RandomSecret("ghe_"); }
std::string NewAgentCredential() { return RandomSecret("gha_"); }

namespace {

// A new token for the machine or node `target`; the oldest unused tokens of that target beyond
// the limit (and any expired ones) are dropped.
Result<EnrolmentToken> IssueToken(Txn& txn, HostKind kind, std::int64_t target,
                                  std::int64_t user_id, const std::string& token_hash) {
  AgentsState& a = A(txn);
  auto target_of = [](const EnrolmentToken& t) {
    return t.kind == HostKind::kMachine ? t.machine_id : t.node_id;
  };
  std::vector<std::pair<TimestampMicros, std::string>> open;
  for (const auto& [hash, t] : a.tokens) {
    if (t.kind == kind && target_of(t) == target && t.used_at == 0) {
      open.push_back({t.created_at, hash});
    }
  }
  std::sort(open.begin(), open.end());
  for (std::size_t i = 0; i < open.size(); ++i) {
    const EnrolmentToken& t = a.tokens.at(open[i].second);
    if (t.expires_at <= txn.now || open.size() - i >= kMaxOpenEnrolmentTokensPerTarget) {
      txn.writes.Delete("agent_enrolment_tokens", {{"token_hash", open[i].second}});
      a.tokens.erase(open[i].second);
    }
  }
  EnrolmentToken t;
  t.token_hash = token_hash;
  t.kind = kind;
  (kind == HostKind::kMachine ? t.machine_id : t.node_id) = target;
  t.created_by = user_id;
  t.created_at = txn.now;
  t.expires_at = txn.now + kEnrolmentTokenLifetimeMicros;
  if (!a.tokens.emplace(token_hash, t).second) return Status::Internal("token collision");
  WriteToken(txn, t);
  return t;
}

bool NodeExists(const State& state, std::int64_t node_id) {
  const rentals::Node* node = state.rentals->fleet.FindNode(node_id);
  return node != nullptr && node->state != rentals::NodeState::kRemoved;
}

}  // namespace

Result<EnrolmentToken> CreateMachineEnrolmentToken(Txn& txn, std::int64_t user_id,
                                                   std::int64_t machine_id,
                                                   const std::string& token_hash) {
  const market::Machine* machine = X(txn.state).FindMachine(machine_id);
  if (machine == nullptr || machine->provider_id != user_id) {
    return Status::NotFound("no machine " + std::to_string(machine_id) + " of yours");
  }
  return IssueToken(txn, HostKind::kMachine, machine_id, user_id, token_hash);
}

Result<EnrolmentToken> CreateNodeEnrolmentToken(Txn& txn, std::int64_t admin_id,
                                                std::int64_t node_id,
                                                const std::string& token_hash) {
  if (!NodeExists(txn.state, node_id)) {
    return Status::NotFound("no node " + std::to_string(node_id) + " in the fleet");
  }
  return IssueToken(txn, HostKind::kNode, node_id, admin_id, token_hash);
}

Result<AgentHost> Enrol(Txn& txn, const EnrolRequest& request) {
  AgentsState& a = A(txn);
  const Status refused = Status::Unauthenticated(
      "this enrolment token is not valid: it is unknown, already used or expired (a token "
      "enrols one host once and lives 24 hours; create a new one)");
  auto it = a.tokens.find(request.token_hash);
  if (it == a.tokens.end() || it->second.expires_at <= txn.now) return refused;
  EnrolmentToken& token = it->second;
  if (request.credential_hash.size() != 64) return Status::Internal("bad credential hash");
  if (token.used_at != 0) {
    // Only the agent that used it, retrying a lost answer, with the same nonce and soon.
    if (request.nonce_hash.empty() || request.nonce_hash != token.nonce_hash ||
        txn.now - token.used_at > kEnrolmentRetryMicros) {
      return refused;
    }
    AgentHost& host = a.hosts.at(token.host_id);
    SetCredential(a, host, request.credential_hash);
    WriteHost(txn, host);
    return host;
  }
  if (token.kind == HostKind::kMachine && X(txn.state).FindMachine(token.machine_id) == nullptr) {
    return refused;
  }
  if (token.kind == HostKind::kNode && !NodeExists(txn.state, token.node_id)) return refused;
  AgentHost* host = nullptr;
  auto existing = token.kind == HostKind::kMachine ? a.host_by_machine.find(token.machine_id)
                                                   : a.host_by_node.find(token.node_id);
  auto& index = token.kind == HostKind::kMachine ? a.host_by_machine : a.host_by_node;
  if (existing != index.end()) {
    host = &a.hosts.at(existing->second);  // enrolled again: the old credential stops now
  } else {
    if (a.hosts.size() >= kMaxAgentHosts) return Status::ResourceExhausted("too many hosts");
    AgentHost fresh;
    fresh.id = a.next_host_id++;
    fresh.kind = token.kind;
    fresh.machine_id = token.machine_id;
    fresh.node_id = token.node_id;
    host = &a.hosts.emplace(fresh.id, fresh).first->second;
    index[token.kind == HostKind::kMachine ? token.machine_id : token.node_id] = host->id;
  }
  host->owner_id = token.created_by;
  host->bound_uuids.clear();  // possibly other hardware: bound again from its first report
  SetCredential(a, *host, request.credential_hash);
  host->enrolled_at = txn.now;
  host->revoked_at = 0;
  host->last_seen = txn.now;
  host->hostname = Clean(request.hostname);
  host->agent_version = Clean(request.agent_version);
  token.used_at = txn.now;
  token.host_id = host->id;
  token.nonce_hash = request.nonce_hash;
  WriteToken(txn, token);
  WriteHost(txn, *host);
  if (token.kind == HostKind::kMachine) {
    // Held for want of an agent (or a revoked one): now for want of its first report.
    const market::Machine* machine = X(txn.state).FindMachine(token.machine_id);
    if (machine->hold_reason == kNoAgentHoldReason || machine->hold_reason == kRevokedHoldReason) {
      market::MachineCondition c{machine->offline_since, machine->blocked_mask,
                                 kEnrolledHoldReason};
      GPUHUB_RETURN_IF_ERROR(SetMachineCondition(txn, token.machine_id, c).status());
    }
  }
  return *host;
}

Result<AgentHost> AuthenticateHost(const Txn& txn, const std::string& credential_hash) {
  const AgentsState& a = *txn.state.agents;
  auto it = a.host_by_credential.find(credential_hash);
  if (credential_hash.empty() || it == a.host_by_credential.end()) {
    return Status::Unauthenticated(
        "this endpoint needs a host agent's credential (gpuhub agent enroll); this one is unknown "
        "or revoked");
  }
  return a.hosts.at(it->second);
}

Result<HeartbeatReply> RecordHeartbeat(Txn& txn, std::int64_t host_id, const Heartbeat& heartbeat) {
  AgentsState& a = A(txn);
  auto hit = a.hosts.find(host_id);
  if (hit == a.hosts.end() || hit->second.credential_hash.empty()) {
    return Status::Unauthenticated("this host's credential was revoked");
  }
  GPUHUB_RETURN_IF_ERROR(ValidateInventory(heartbeat.inventory));
  if (heartbeat.workloads.size() > kMaxReportedWorkloads) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxReportedWorkloads) +
                                   " workloads per heartbeat")
        .WithField("workloads");
  }
  if (!heartbeat.public_host.empty()) {
    GPUHUB_RETURN_IF_ERROR(ValidatePublicHost(heartbeat.public_host));
  }
  AgentHost& host = hit->second;
  // What the host must run may move with its report (a GPU back in it, a new binding): the
  // long-poll learns of it (agent_watch.h).
  const std::string desired_before =
      a.config.watch ? DesiredVersion(DesiredFor(txn.state, host, txn.now)) : std::string();
  HostInventory inventory = heartbeat.inventory;
  for (auto& g : inventory.gpus) {
    g.name = Clean(g.name);
    g.uuid = Clean(g.uuid);
    for (auto& r : g.health) r = Clean(r);
  }
  inventory.error = Clean(inventory.error);
  inventory.driver_version = Clean(inventory.driver_version);
  inventory.cuda_version = Clean(inventory.cuda_version);
  // GPU rows: written when what is stored changed, removed when a GPU is gone.
  const auto& before = host.inventory.gpus;
  for (const auto& g : inventory.gpus) {
    auto same = std::find_if(before.begin(), before.end(),
                             [&](const GpuInventory& o) { return o.SameStored(g); });
    if (same == before.end()) WriteGpu(txn, host.id, g);
  }
  for (const auto& old : before) {
    bool kept = std::any_of(inventory.gpus.begin(), inventory.gpus.end(),
                            [&](const GpuInventory& g) { return g.index == old.index; });
    if (!kept) {
      txn.writes.Delete("agent_gpus",
                        {{"host_id", host.id}, {"gpu_index", std::int64_t{old.index}}});
    }
  }
  host.inventory = std::move(inventory);
  if (host.kind == HostKind::kNode) {
    // Back after a silence longer than the limit: the node's rentals get their downtime credit.
    const TimestampMicros silent_from = std::max(host.last_seen, a.watch_from);
    if (txn.now - silent_from > OfflineAfter(a)) {
      GPUHUB_RETURN_IF_ERROR(agents_internal::CreditNodeDowntime(txn, host, silent_from, txn.now));
    }
  }
  host.hostname = Clean(heartbeat.hostname);
  host.public_host = heartbeat.public_host;
  host.agent_version = Clean(heartbeat.agent_version);
  host.last_seen = txn.now;

  HeartbeatReply reply;
  if (host.kind == HostKind::kMachine) {
    const market::Machine* machine = X(txn.state).FindMachine(host.machine_id);
    if (machine == nullptr) return Status::Internal("the host's machine is gone");
    const bool leased = !X(txn.state).ActiveLeasesOn(host.machine_id).empty();
    host.bound_uuids = BindListing(*machine, host.inventory, host.bound_uuids, leased);
    market::MachineCondition now_condition =
        MachineConditionFor(*machine, host.inventory, host.bound_uuids, 0);
    // Workloads down first: a lease whose container is not running stays paused when its machine
    // comes back online below (no new hour billed only to be credited again).
    GPUHUB_RETURN_IF_ERROR(ApplyLeaseReports(txn, host, heartbeat.workloads, /*running=*/false));
    market::MachineCondition current{machine->offline_since, machine->blocked_mask,
                                     machine->hold_reason};
    if (now_condition != current) {
      GPUHUB_ASSIGN_OR_RETURN(market::Machine updated,
                              SetMachineCondition(txn, host.machine_id, now_condition));
      (void)updated;
      spdlog::info("event=machine_condition machine={} offline_since={} blocked={} held=\"{}\"",
                   host.machine_id, now_condition.offline_since, now_condition.blocked_mask,
                   now_condition.hold_reason);
    } else {
      // Hours due are billed (or leases ended) before not_after is computed.
      GPUHUB_RETURN_IF_ERROR(AdvanceMarket(txn));
    }
    reply.condition = now_condition;
    // Then those running: billed from now (their first hour, or a new one after a stop).
    GPUHUB_RETURN_IF_ERROR(ApplyLeaseReports(txn, host, heartbeat.workloads, /*running=*/true));
  } else {
    host.bound_uuids = agents_internal::BindNode(txn.state, host);
  }
  for (const auto& report : heartbeat.workloads) {
    if (!WorkloadOfHost(txn.state, host, report.id)) {
      reply.unknown_workloads.push_back(Clean(report.id));
      continue;
    }
    WorkloadRecord& w = a.workloads[report.id];
    std::string state = Clean(report.state), detail = Clean(report.detail);
    int port = report.ssh_port >= 0 && report.ssh_port <= 65535 ? report.ssh_port : 0;
    if (w.id != report.id || w.host_id != host.id || w.state != state || w.ssh_port != port ||
        w.detail != detail || w.ports != report.ports) {
      if (w.state != state) {
        w.steps.emplace_back(state, txn.now);
        if (w.steps.size() > kMaxWorkloadStepsKept) w.steps.erase(w.steps.begin());
      }
      w.id = report.id;
      w.host_id = host.id;
      w.state = state;
      w.ssh_port = port;
      w.detail = detail;
      w.ports = report.ports;
      w.updated_at = txn.now;
      WriteWorkload(txn, w);
    }
    // Every time (it acts only on a difference): a report taken before the host had a public
    // address still starts the term once it has one.
    if (host.kind == HostKind::kNode) agents_internal::ApplyNodeReport(txn, host, w);
  }
  WriteHost(txn, host);  // with the binding as it is now (the same key: the row is replaced)
  reply.workloads = DesiredFor(txn.state, host, txn.now);
  if (a.config.watch && DesiredVersion(reply.workloads) != desired_before) {
    NoteHostDesiredChanged(txn.state, host.id);
  }
  reply.disk_actions = agents_internal::DiskActionsForNode(txn.state, host, txn.now);
  return reply;
}

Result<std::int64_t> RecordUsage(Txn& txn, std::int64_t host_id,
                                 const std::vector<UsageSample>& samples) {
  AgentsState& a = A(txn);
  auto hit = a.hosts.find(host_id);
  if (hit == a.hosts.end() || hit->second.credential_hash.empty()) {
    return Status::Unauthenticated("this host's credential was revoked");
  }
  if (samples.size() > kMaxUsageSamplesPerRequest) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxUsageSamplesPerRequest) +
                                   " samples per request")
        .WithField("samples");
  }
  // Validate everything first: a refused request records nothing.
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const UsageSample& s = samples[i];
    const std::string field = "samples[" + std::to_string(i) + "]";
    if (!WorkloadOfHost(txn.state, hit->second, s.workload_id)) {
      return Status::InvalidArgument(field + ".workload_id: no workload '" +
                                     Clean(s.workload_id).substr(0, 40) + "' on this host")
          .WithField(field + ".workload_id");
    }
    if (s.at < txn.now - kMaxUsageSampleAgeMicros || s.at > txn.now + kMaxUsageSampleAheadMicros) {
      return Status::InvalidArgument(field + ".at must be within the last 24 hours")
          .WithField(field + ".at");
    }
    if (s.gpu_utilization_pct < 0 || s.gpu_utilization_pct > 100 || s.net_tx_bytes < 0) {
      return Status::InvalidArgument(field + ": gpu_utilization_pct 0..100, net_tx_bytes >= 0")
          .WithField(field);
    }
  }
  std::int64_t recorded = 0;
  std::vector<rentals::EgressSample> rental_egress;  // what a term rental's instance sent
  std::vector<UsageSample> sorted = samples;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const UsageSample& x, const UsageSample& y) { return x.at < y.at; });
  for (const UsageSample& s : sorted) {
    WorkloadRecord& w = a.workloads[s.workload_id];
    if (w.id.empty()) {
      w.id = s.workload_id;
      w.host_id = host_id;
      w.state = "running";
      w.updated_at = txn.now;
    }
    if (s.at <= w.last_sample_at) continue;  // a resend
    // The counter is cumulative per container: a smaller value means the container restarted.
    const std::int64_t delta =
        s.net_tx_bytes >= w.tx_counter_bytes ? s.net_tx_bytes - w.tx_counter_bytes : s.net_tx_bytes;
    w.egress_bytes += delta;
    w.tx_counter_bytes = s.net_tx_bytes;
    w.last_sample_at = s.at;
    WriteWorkload(txn, w);
    const TimestampMicros hour = s.at - s.at % kMicrosPerHour;
    UsageHour& u = a.usage[{s.workload_id, hour}];
    u.egress_bytes += delta;
    u.gpu_utilization_sum += s.gpu_utilization_pct;
    ++u.samples;
    txn.writes.Upsert("agent_usage_hours",
                      {{"workload_id", s.workload_id},
                       {"hour_us", hour},
                       {"egress_bytes", u.egress_bytes},
                       {"gpu_utilization_sum", u.gpu_utilization_sum},
                       {"samples", u.samples}},
                      /*key_columns=*/2);
    ++recorded;
    if (const std::int64_t rental = RentalOfWorkload(s.workload_id); rental != 0 && delta > 0) {
      rental_egress.push_back({rental, s.at, delta});
    }
  }
  // The storage egress meter bills what goes beyond the term's allowance.
  GPUHUB_RETURN_IF_ERROR(MeterAgentEgress(txn, rental_egress));
  return recorded;
}

Result<AgentHost> RevokeHost(Txn& txn, std::int64_t host_id) {
  AgentsState& a = A(txn);
  auto it = a.hosts.find(host_id);
  if (it == a.hosts.end()) return Status::NotFound("no host " + std::to_string(host_id));
  AgentHost& host = it->second;
  if (host.credential_hash.empty()) {
    return Status::FailedPrecondition("host " + std::to_string(host_id) + " is already revoked");
  }
  SetCredential(a, host, "");
  host.revoked_at = txn.now;
  WriteHost(txn, host);
  if (host.kind == HostKind::kMachine) {
    const market::Machine* machine = X(txn.state).FindMachine(host.machine_id);
    if (machine != nullptr) {
      market::MachineCondition c{machine->offline_since != 0 ? machine->offline_since : txn.now,
                                 machine->blocked_mask, kRevokedHoldReason};
      GPUHUB_RETURN_IF_ERROR(SetMachineCondition(txn, host.machine_id, c).status());
    }
  }
  return host;
}

std::int64_t LeaseStartTimeoutMicros(const AgentsConfig& config) {
  return config.lease_start_timeout_micros > 0 ? config.lease_start_timeout_micros
                                               : kLeaseStartTimeoutMicros;
}

bool IsSimulatedHost(const State& state, market::MachineId machine_id) {
  return state.agents->config.simulated_hosts &&
         !state.agents->host_by_machine.count(machine_id);
}

void BindLeaseStart(State& state) {
  const State* s = &state;
  state.market->exchange.SetStartTimeout([s](market::MachineId machine) -> std::int64_t {
    return IsSimulatedHost(*s, machine) ? 0 : LeaseStartTimeoutMicros(s->agents->config);
  });
}

Status HoldUnhostedMachine(Txn& txn, market::MachineId machine_id) {
  if (A(txn).config.simulated_hosts || A(txn).host_by_machine.count(machine_id)) {
    return Status::Ok();
  }
  const market::Machine* machine = X(txn.state).FindMachine(machine_id);
  if (machine == nullptr || machine->hold_reason == kNoAgentHoldReason) return Status::Ok();
  market::MachineCondition c{machine->offline_since, machine->blocked_mask, kNoAgentHoldReason};
  return SetMachineCondition(txn, machine_id, c).status();
}

Status HoldUnhostedMachines(Txn& txn) {
  A(txn).unhosted_held = true;
  if (A(txn).config.simulated_hosts) return Status::Ok();
  for (market::MachineId id : X(txn.state).MachineIds()) {
    GPUHUB_RETURN_IF_ERROR(HoldUnhostedMachine(txn, id));
  }
  return Status::Ok();
}

const AgentHost* FindHost(const State& state, std::int64_t host_id) {
  auto it = state.agents->hosts.find(host_id);
  return it == state.agents->hosts.end() ? nullptr : &it->second;
}

const AgentHost* FindHostOfMachine(const State& state, std::int64_t machine_id) {
  auto it = state.agents->host_by_machine.find(machine_id);
  return it == state.agents->host_by_machine.end() ? nullptr : FindHost(state, it->second);
}

const WorkloadRecord* FindWorkload(const State& state, const std::string& workload_id) {
  auto it = state.agents->workloads.find(workload_id);
  return it == state.agents->workloads.end() ? nullptr : &it->second;
}

std::string HostStatus(const State& state, const AgentHost& host, TimestampMicros now) {
  if (host.credential_hash.empty()) return "revoked";
  return now - host.last_seen > OfflineAfter(*state.agents) ? "offline" : "online";
}

std::vector<std::pair<TimestampMicros, UsageHour>> WorkloadUsage(const State& state,
                                                                 const std::string& workload_id) {
  std::vector<std::pair<TimestampMicros, UsageHour>> out;
  const auto& usage = state.agents->usage;
  for (auto it = usage.lower_bound({workload_id, 0});
       it != usage.end() && it->first.first == workload_id; ++it) {
    out.push_back({it->first.second, it->second});
  }
  return out;
}

namespace {

// The last moment the machine's host still counts as online (it is offline at any later time),
// or kNoTickDue when no tick takes it offline: revoked (offline since the revocation), no such
// machine, or already offline.
TimestampMicros OnlineUntil(const State& state, const AgentsState& a, market::MachineId machine_id,
                            const AgentHost& host, TimestampMicros watch_from) {
  if (host.credential_hash.empty()) return kNoTickDue;
  const market::Machine* machine = X(state).FindMachine(machine_id);
  if (machine == nullptr || machine->offline_since != 0) return kNoTickDue;
  return std::max(host.last_seen, watch_from) + OfflineAfter(a);
}

}  // namespace

TimestampMicros NextAgentOfflineAt(const State& state, TimestampMicros watch_from) {
  const AgentsState& a = *state.agents;
  TimestampMicros next = kNoTickDue;
  for (const auto& [machine_id, host_id] : a.host_by_machine) {
    const TimestampMicros until =
        OnlineUntil(state, a, machine_id, a.hosts.at(host_id), watch_from);
    if (until != kNoTickDue) next = std::min(next, until + 1);
  }
  return next;
}

Status CheckAgentsOffline(Txn& txn, TimestampMicros watch_from) {
  AgentsState& a = A(txn);
  a.watch_from = watch_from;
  for (const auto& [machine_id, host_id] : a.host_by_machine) {
    const AgentHost& host = a.hosts.at(host_id);
    if (txn.now <= OnlineUntil(txn.state, a, machine_id, host, watch_from)) continue;
    const market::Machine* machine = X(txn.state).FindMachine(machine_id);
    market::MachineCondition c{host.last_seen, machine->blocked_mask, machine->hold_reason};
    GPUHUB_RETURN_IF_ERROR(SetMachineCondition(txn, machine_id, c).status());
    spdlog::warn("event=host_offline host={} machine={} last_seen={}", host.id, machine_id,
                 FormatTimestamp(host.last_seen));
  }
  return Status::Ok();
}

void AddAgentTickHooks(Engine& engine) {
  // The grace runs from when this engine became the writer: a standby that takes over after the
  // writer died must not take every machine offline for the heartbeats that went nowhere meanwhile.
  // Due at its own time: a long manual clock advance takes a silent host offline when its limit
  // passes, so its leases are not billed for the rest of the advance (Engine::AdvanceClockTo).
  engine.AddTickHook(
      [&engine](Txn& txn) { return CheckAgentsOffline(txn, engine.writer_since()); },
      [&engine](const State& state) { return NextAgentOfflineAt(state, engine.writer_since()); });
  engine.AddTickHook([](Txn& txn) {
    ForgetClosedLaunchSpecs(txn.state);
    return Status::Ok();
  });
  // Machines listed before "nothing sold without a machine" (or while simulated hosts were on)
  // are held once, at the first tick.
  engine.AddTickHook(
      [](Txn& txn) { return txn.state.agents->unhosted_held ? Status::Ok() : HoldUnhostedMachines(txn); },
      [](const State& state) { return state.agents->unhosted_held ? kNoTickDue : TimestampMicros{0}; });
}

}  // namespace gpuhub::engine
