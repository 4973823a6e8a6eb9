// The control plane of the host agents (`gpuhub agent`, src/agent): enrolment, per-host
// credentials, heartbeats with the measured inventory and health, the desired workloads each host
// must run, what it reports running, usage samples, and offline detection.
//
// Trust: a provider (for a listed machine) or an admin (for a term-fleet node) creates a one-time
// enrolment token; the agent exchanges it for a per-host credential. Only SHA-256 hashes of both
// are stored. A credential sees only its own host: its desired workloads, its workload reports,
// its usage. Revoking it cuts the host off at once (the machine goes offline: asks held, leases
// paused and credited; market::Exchange::SetMachineCondition).
//
// Measured, never claimed: a listed machine's condition comes from its host's last heartbeat
// (MachineConditionFor): fewer GPUs of the listed model than listed, or another model, holds its
// asks off the book with the reason in words; an unhealthy GPU is blocked for new leases; a host
// silent for kAgentOfflineAfterMicros is offline from its last heartbeat (the tick hook,
// AddAgentTickHooks). Back in contact, the next heartbeat brings the machine back online.
//
// Term-fleet nodes (agent_rentals.cc): one workload per provisioning or active rental on the node
// ("rental-<id>"): the node's cards by UUID (bound as a listing's are), one LUKS2 volume per card
// slot, the customer's keys, the default image, not_after = the provisioning deadline, then the
// paid term's end. The agent's "running" report (with the SSH line) starts the term
// (rentals::Fleet::ReportInstance), "failed" while provisioning refunds it; after a release the
// reply asks for the erase, then the wipe, of its volumes until each is reported done.
//
// Nothing sold without a machine: a listed machine is on the book only while its host's agent
// reports it online and healthy. A machine no agent was ever enrolled on is held from its listing
// (HoldUnhostedMachine; start-up holds those listed before this rule), so is one whose agent
// enrolled but has not reported yet, or whose credential was revoked (offline too). The only
// exception is [agents] simulated_hosts (AgentsConfig::simulated_hosts, off by default: the demo
// and the test harnesses turn it on): a machine without an enrolled host then trades as listed,
// its leases run from their fill, and the API and pages say "demo: simulated host, no real
// machine" (IsSimulatedHost). A machine with an enrolled host follows the rules either way.
//
// Billed from when it runs: a lease on a machine with a host is provisioning (market::Lease,
// Exchange::SetStartTimeout, BindLeaseStart) until its host reports the workload "running": then
// its first hour is charged and its hours run from that moment. Not running within the start
// timeout ([agents] lease_start_timeout_seconds, kLeaseStartTimeoutMicros) it ends not_started
// and the hold of its first hour is released: nothing was charged. Once it ran, a report of any
// other state, or a heartbeat that no longer lists it, pauses it and credits the rest of its paid
// hour (as for a silent host: lease:N:hH:credit:...); running again, it is billed a new whole hour.
//
// Desired workloads: one per active lease on the host's machine ("lease-<id>") while the machine
// is online (provisioning, billed, or paused because its workload is down: the agent restarts it), with
// exactly the lease's GPUs by UUID (listing GPU i = the i-th GPU of the listed model the host
// reports, by index), the customer's SSH keys, the image of the bid (or the configured default)
// and not_after = the end of the paid hour (provisioning: the start deadline plus an hour; down:
// at least the start timeout from now): the agent stops a workload itself when that passes and
// the server cannot be reached.
//
// All functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"
#include "market/exchange.h"

namespace gpuhub::engine {

enum class HostKind : std::uint8_t { kMachine, kNode };
std::string_view HostKindName(HostKind kind);  // "machine" (spot exchange), "node" (term fleet)
Result<HostKind> ParseHostKind(std::string_view name);

// One GPU as the host's agent measured it (NVML, or nvidia-smi).
struct GpuInventory {
  int index = 0;
  std::string uuid;  // "GPU-8f6c2a3e-..."
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::int64_t memory_mib = 0;
  int pcie_gen = 0;    // the link's maximum generation
  int pcie_width = 0;  // and width
  bool healthy = true;
  std::vector<std::string> health;  // why not, in words ("XID 79 ...", "uncorrected ECC ...")
  // Volatile: kept in memory from the last heartbeat, not stored.
  int temperature_c = 0;
  int utilization_pct = 0;

  // The fields that are stored (a heartbeat writes the GPU rows only when these change).
  bool SameStored(const GpuInventory& o) const {
    return index == o.index && uuid == o.uuid && name == o.name && memory_mib == o.memory_mib &&
           pcie_gen == o.pcie_gen && pcie_width == o.pcie_width && healthy == o.healthy &&
           health == o.health;
  }
};

struct HostInventory {
  std::string source;  // "nvml", "nvidia-smi", or "" when neither answered
  std::string error;   // why no GPU could be read, when source is ""
  std::string driver_version;
  std::string cuda_version;
  std::int64_t ram_mib = 0;
  std::int64_t vcpus = 0;
  std::int64_t nvme_free_gb = 0;
  // The size of the file system the containers' disks live on (what a listing's disk_gb is
  // checked against; free space falls as containers write, its size does not).
  std::int64_t disk_total_gb = 0;
  std::vector<GpuInventory> gpus;  // by index
};

struct AgentHost {
  std::int64_t id = 0;
  HostKind kind = HostKind::kMachine;
  std::int64_t owner_id = 0;    // the provider (machine) or the admin who enrolled it (node)
  std::int64_t machine_id = 0;  // the spot exchange's machine; 0 for a node
  std::int64_t node_id = 0;     // the term fleet's node; 0 for a machine
  std::string credential_hash;  // SHA-256 hex of the credential; "" once revoked
  TimestampMicros enrolled_at = 0;
  TimestampMicros revoked_at = 0;  // 0 while the credential is valid
  TimestampMicros last_seen = 0;   // the last heartbeat (the enrolment before the first)
  std::string hostname;
  std::string public_host;  // where customers connect (the connection line's HOST)
  std::string agent_version;
  HostInventory inventory;
  // The listing's GPU i is the host's GPU bound_uuids[i] (BindListing).
  std::vector<std::string> bound_uuids;
};

// A term rental's LUKS2 volume on the local NVMe of its node's card `slot` ("rental-7-0").
struct DesiredVolume {
  std::string name;
  int slot = 0;
};

// A container port the agent published on a host port (a lease's extra ports: Jupyter 8888 ...).
struct PublishedPort {
  int container = 0;
  int host = 0;
  friend bool operator==(const PublishedPort&, const PublishedPort&) = default;
};

// What a bid's leases run besides its image (POST /v1/bids "ports", "registry_auth").
struct LaunchExtras {
  std::vector<int> ports;  // extra container ports to publish (ValidateContainerPorts)
  // The registry credential, sealed by the HTTP layer (http/registry_auth.h) with the server's
  // key: opaque here, never in clear in memory, in the store or in any answer but the host's
  // desired workload. "" when none.
  std::string sealed_registry_auth;
};

// What a term rental runs (POST /v1/rentals "image", "ports", "registry_auth").
struct RentalLaunch {
  std::string image;
  LaunchExtras extras;
};

// Desired state of one workload, as the heartbeat's reply carries it.
// A network volume a term rental's instance mounts (docs/agent.md "Network volumes"): the CephFS
// subvolume `path` of the region's cluster at `monitors`, as the cephx client `client` (whose key
// is sealed here and opened only in the host's own answer), bound at `mount` in the container.
struct DesiredNetworkVolume {
  std::int64_t id = 0;
  std::string name;
  std::string mount;  // "/mnt/<name>", "/mnt/vol-<id>" when unnamed
  std::string monitors;
  std::string path;
  std::string client;  // "gpuhub-vol7-r3" (the cephx entity is client.<client>)
  std::string sealed_key;
  bool read_only = false;
};

struct DesiredWorkload {
  std::string id;  // "lease-17"
  std::string image;
  std::vector<std::string> gpu_uuids;
  std::vector<std::string> ssh_authorized_keys;  // authorized_keys lines
  TimestampMicros not_after = 0;
  std::int64_t cpus = 0;       // the lease's share of the listing's vCPUs
  std::int64_t memory_gb = 0;  // and of its RAM
  std::vector<DesiredVolume> volumes;  // term rentals: one per card slot
  // Extra container ports, published on free host ports of [port_range_first, port_range_last]
  // (the listing's range; the default for a node), and the sealed registry credential of the pull.
  std::vector<int> ports;
  int port_range_first = 0;
  int port_range_last = 0;
  std::string sealed_registry_auth;
  // Term rentals: the attached network volumes that are ready with an authorized client, by id.
  std::vector<DesiredNetworkVolume> network_volumes;
};

// What a released term rental's local NVMe needs: "erase" (the crypto-erase: luksErase of its
// volumes) until the agent reports the workload "erased", then "wipe" (blkdiscard) once it is due
// or a slot is rented again, until it reports "wiped".
struct DiskAction {
  std::string id;  // "rental-7"
  std::string action;
  std::vector<DesiredVolume> volumes;
};

// What the agent says about a workload it runs.
struct WorkloadReport {
  std::string id;
  std::string state;  // "pulling", "starting", "running", "failed", "stopped"
  int ssh_port = 0;
  std::string detail;  // an error or progress message, "" when none
  std::vector<PublishedPort> ports;  // the extra ports as published
};

struct WorkloadRecord {
  std::string id;
  std::int64_t host_id = 0;
  std::string state;
  int ssh_port = 0;
  std::string detail;
  std::vector<PublishedPort> ports;  // stored "8888:41000,8000:41001"
  TimestampMicros updated_at = 0;
  // Each state as it was first reported, oldest first (the lease page's provisioning steps);
  // volatile: kept in memory from the heartbeats, at most kMaxWorkloadStepsKept, not stored.
  std::vector<std::pair<std::string, TimestampMicros>> steps;
  // Usage (POST /v1/agent/usage): egress from the container's cumulative transmit counter.
  std::int64_t egress_bytes = 0;
  std::int64_t tx_counter_bytes = 0;
  TimestampMicros last_sample_at = 0;
};

struct UsageSample {
  std::string workload_id;
  TimestampMicros at = 0;
  int gpu_utilization_pct = 0;
  std::int64_t net_tx_bytes = 0;  // cumulative since the container started
};

struct UsageHour {
  std::int64_t egress_bytes = 0;
  std::int64_t gpu_utilization_sum = 0;  // over samples: the average is sum / samples
  std::int64_t samples = 0;
};

struct EnrolmentToken {
  std::string token_hash;
  HostKind kind = HostKind::kMachine;
  std::int64_t machine_id = 0;
  std::int64_t node_id = 0;
  std::int64_t created_by = 0;
  TimestampMicros created_at = 0;
  TimestampMicros expires_at = 0;
  TimestampMicros used_at = 0;  // 0 while unused
  std::int64_t host_id = 0;     // the host it enrolled
  std::string nonce_hash;       // of the agent's enrolment nonce (a retry of a lost answer)
};

class DesiredWatch;  // engine/agent_watch.h

struct AgentsConfig {
  std::string default_image = "nvidia/cuda:12.4.1-base-ubuntu22.04";
  std::int64_t offline_after_micros = 0;  // 0: kAgentOfflineAfterMicros
  // A term rental's downtime credit per hour its node was offline: the term's hourly rate (the
  // term's price / its hours: monthly / 720, weekly / 168) x this, in ppm (1'000'000 = x1).
  std::int64_t rental_downtime_multiplier_ppm = 1'000'000;
  // Told (on the writer thread) when a host's desired workloads may have changed; null: nobody
  // listens (engine/agent_watch.h).
  std::shared_ptr<DesiredWatch> watch;
  // How long a lease waits for its host to run its workload; 0: kLeaseStartTimeoutMicros.
  std::int64_t lease_start_timeout_micros = 0;
  // Machines without an enrolled host trade as if one ran them (the demo, test harnesses). Never
  // in production: a customer would pay for a machine nobody runs.
  bool simulated_hosts = false;
};

// What the API and pages say of a machine whose host is simulated.
inline constexpr const char* kSimulatedHostLabel = "demo: simulated host, no real machine";

// Money back to a term rental's customer for a span its node's agent was silent.
struct RentalDowntimeCredit {
  std::int64_t id = 0;
  std::int64_t rental_id = 0;
  std::int64_t host_id = 0;
  std::int64_t customer_id = 0;
  TimestampMicros from = 0;  // the node's last heartbeat (or the rental's start, if later)
  TimestampMicros to = 0;    // back (or the rental's stop or release, if earlier)
  std::int64_t multiplier_ppm = 0;
  std::int64_t usd_micros = 0;  // DowntimeCreditMicros of the rental's price
  Currency currency = Currency::kUsd;  // the wallet credited (the rental's)
  std::int64_t amount_micros = 0;      // in that currency: the same fraction of what it paid
  TimestampMicros created_at = 0;
};

struct AgentsState {
  AgentsConfig config;
  std::map<std::int64_t, AgentHost> hosts;
  std::unordered_map<std::string, std::int64_t> host_by_credential;
  std::map<std::int64_t, std::int64_t> host_by_machine;
  std::map<std::int64_t, std::int64_t> host_by_node;
  std::map<std::string, EnrolmentToken> tokens;  // by hash
  std::map<std::string, WorkloadRecord> workloads;
  std::map<std::pair<std::string, TimestampMicros>, UsageHour> usage;  // (workload, hour start)
  // Launch specs of the open bids (resting, or whose lease is live: Exchange::OpenBidIds); a
  // closed bid's leaves memory at the next tick (ForgetClosedLaunchSpecs) and is the store's
  // (launch_specs, LaunchSpecSelect).
  std::map<std::int64_t, std::string> image_by_bid;  // a StoredImages
  std::map<std::int64_t, LaunchExtras> extras_by_bid;  // kept and forgotten with image_by_bid
  // Term rentals that named an image (every rental's, as the fleet keeps every rental).
  std::map<std::int64_t, RentalLaunch> launch_by_rental;
  std::multimap<std::int64_t, RentalDowntimeCredit> downtime_by_rental;
  std::int64_t next_host_id = 1;
  std::int64_t next_downtime_credit_id = 1;
  // Silence before this moment (the engine's start) is not the host's: a server restart must not
  // count as every node's downtime.
  TimestampMicros watch_from = 0;
  bool unhosted_held = false;  // HoldUnhostedMachines ran since start-up
};

// ----- Pure helpers --------------------------------------------------------------------------

// Whether a GPU the host reports ("NVIDIA H100 80GB HBM3") is a card of `market` ("H100 SXM").
// Compares the names' tokens: every token of the market name must be in the measured name, and a
// form-factor token of the measured name (sxm, pcie, nvl) must be in the market name; NVIDIA's
// names for SXM parts that do not say so ("H100 80GB HBM3", "H200") count as sxm.
bool GpuNameMatchesMarket(std::string_view measured, std::string_view market);

// The reported GPUs of the listed model, by index, at most listing.gpus of them.
std::vector<const GpuInventory*> ListingGpus(const market::Machine& listing,
                                             const HostInventory& inventory);

// Which host GPU (by UUID) is the listing's GPU i. While the machine has no active lease the
// binding follows the report (the i-th reported GPU of the listed model, by index); once it is
// leased the binding is kept, so a lease's GPUs never move to another physical GPU when one drops
// out of the report (a GPU fallen off the bus shifts the indices of the others).
std::vector<std::string> BindListing(const market::Machine& listing,
                                     const HostInventory& inventory,
                                     const std::vector<std::string>& bound, bool leased);

// The condition of a listed machine from its host's last report and binding; `offline_since` is
// 0 while the host reports. Holds the machine (hold_reason, in words for the provider) when the
// host reports no GPU, fewer GPUs of the listed model than listed, or no longer reports a bound
// GPU, or when the listing claims more vCPUs or RAM than measured (ClaimedBeyondMeasured); blocks
// the listing GPUs whose GPU is unhealthy or gone.
// Why the listing claims more than the host has ("" when it does not): more vCPUs than the host's
// online CPUs, or more GB of RAM than MeasuredRamGb. A measurement of 0 (an agent that could not
// read it) holds nothing.
std::string ClaimedBeyondMeasured(const market::Machine& listing, const HostInventory& inventory);
// The most GB (10^9 bytes) of RAM a listing may claim on this host: MemTotal plus
// kListedRamSlackPct, rounded down.
std::int64_t MeasuredRamGb(const HostInventory& inventory);
// A lease's container share, by GPUs (at least 1): of the listing's vCPUs and RAM, but never of
// more than the host measured, so the engine is never asked for CPUs or memory it does not have.
std::int64_t WorkloadCpus(const market::Machine& listing, const HostInventory& inventory,
                          int lease_gpus);
std::int64_t WorkloadMemoryGb(const market::Machine& listing, const HostInventory& inventory,
                              int lease_gpus);

market::MachineCondition MachineConditionFor(const market::Machine& listing,
                                             const HostInventory& inventory,
                                             const std::vector<std::string>& bound,
                                             TimestampMicros offline_since);

// "lease-17" <-> 17. 0 when the id is not a lease's.
std::string LeaseWorkloadId(std::int64_t lease_id);
std::int64_t LeaseOfWorkload(std::string_view workload_id);
// "rental-7" <-> 7 (a term rental's instance on a node). 0 when the id is not a rental's.
std::string RentalWorkloadId(std::int64_t rental_id);
std::int64_t RentalOfWorkload(std::string_view workload_id);

// A Docker image reference the agent may pull, by Docker's reference grammar (distribution/
// reference): [domain[:port]/]path[:tag][@sha256:<64 hex>], path components lower-case
// [a-z0-9]+ joined by '.', '_', '__' or dashes, a tag [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; at most
// kMaxImageRefBytes, ending in a letter or digit. invalid_argument (field "image") otherwise.
Status ValidateImageRef(std::string_view image);
// A lease's extra container ports: at most kMaxExtraPorts, each 1..65535, distinct, not 22 (sshd's).
// invalid_argument (field "ports") otherwise.
Status ValidateContainerPorts(const std::vector<int>& ports);
// "8888:41000,8000:41001" <-> ports; a malformed text parses as none.
std::string FormatPublishedPorts(const std::vector<PublishedPort>& ports);
std::vector<PublishedPort> ParsePublishedPorts(std::string_view text);
// A host name or address for the connection line: 1..253 of [A-Za-z0-9.:-] (so the line can be
// pasted into a shell as it is). invalid_argument (field "public_host") otherwise.
Status ValidatePublicHost(std::string_view host);

// A term rental's downtime credit: price_micros x down_micros x multiplier_ppm / (term_micros x
// 1e6), rounded half-even once (price 12,168 USD a 30-day month, 2 h down, x1: 33.800000 USD).
std::int64_t DowntimeCreditMicros(std::int64_t price_micros, std::int64_t term_micros,
                                  std::int64_t down_micros, std::int64_t multiplier_ppm);

// "ssh -p 40001 root@203.0.113.7" for a running workload on a host with a public address; ""
// otherwise.
std::string ConnectionLine(const AgentHost& host, const WorkloadRecord& workload);

// New random secrets ("ghe_" / "gha_" + 64 hex digits); store only HashToken() of them.
std::string NewEnrolmentToken();
std::string NewAgentCredential();

// Why a machine without a working agent is held (MachineCondition::hold_reason).
inline constexpr const char* kNoAgentHoldReason =
    "no host agent runs this machine yet: enrol one (gpuhub agent enroll) and its asks go on the "
    "book once it reports the machine";
inline constexpr const char* kEnrolledHoldReason =
    "the host's agent enrolled but has not reported yet: its asks go on the book with its first "
    "heartbeat";
inline constexpr const char* kRevokedHoldReason =
    "the host's agent was disconnected (its credential revoked): enrol the machine again to sell it";

std::int64_t LeaseStartTimeoutMicros(const AgentsConfig& config);
// Whether the machine trades on a simulated host: [agents] simulated_hosts and no host enrolled.
bool IsSimulatedHost(const State& state, market::MachineId machine_id);
// Tells the exchange which machines' leases wait for their host (every machine but a simulated
// host's), reading the config and the hosts at each fill (Exchange::SetStartTimeout).
void BindLeaseStart(State& state);

// ----- Commands ------------------------------------------------------------------------------

// A one-time enrolment token for the provider's machine (not_found unless `user_id` owns it).
// At most kMaxOpenEnrolmentTokensPerTarget unused tokens per machine: the oldest is dropped.
Result<EnrolmentToken> CreateMachineEnrolmentToken(Txn& txn, std::int64_t user_id,
                                                   std::int64_t machine_id,
                                                   const std::string& token_hash);

// A one-time enrolment token for a node of the term fleet (admins; not_found for a node that does
// not exist or was removed). The same limit of unused tokens per node.
Result<EnrolmentToken> CreateNodeEnrolmentToken(Txn& txn, std::int64_t admin_id,
                                                std::int64_t node_id,
                                                const std::string& token_hash);

struct EnrolRequest {
  std::string token_hash;
  std::string nonce_hash;  // of the agent's random enrolment nonce ("" when none)
  std::string credential_hash;
  std::string hostname;
  std::string agent_version;
};
// Exchanges an unused, unexpired token for a host credential. One host per machine: enrolling a
// machine again replaces the previous credential (revoked at once). A token already used answers
// again only to the same nonce within kEnrolmentRetryMicros (the agent retrying a lost answer): the
// credential is replaced by the new one. Anything else is unauthenticated.
Result<AgentHost> Enrol(Txn& txn, const EnrolRequest& request);

// unauthenticated unless the hash is a valid host credential.
Result<AgentHost> AuthenticateHost(const Txn& txn, const std::string& credential_hash);

struct Heartbeat {
  std::string hostname;
  std::string public_host;
  std::string agent_version;
  HostInventory inventory;
  std::vector<WorkloadReport> workloads;
};
struct HeartbeatReply {
  std::vector<DesiredWorkload> workloads;
  std::vector<DiskAction> disk_actions;        // nodes of the term fleet
  std::vector<std::string> unknown_workloads;  // reported ids that are not this host's
  market::MachineCondition condition;          // the machine's, after this heartbeat
};
// Records the host's report, brings its machine's condition up to date (back online, held,
// blocked), applies what it says of each lease's workload (running: billed from now; not running
// or not listed after it ran: paused) and answers the workloads it must run. invalid_argument for
// malformed reports.
Result<HeartbeatReply> RecordHeartbeat(Txn& txn, std::int64_t host_id, const Heartbeat& heartbeat);

// Adds usage samples of the host's workloads. invalid_argument (nothing recorded) when a sample
// names a workload that is not this host's, or is out of range; samples at or before the last one
// accepted for their workload are ignored (a resend). Returns how many were recorded.
Result<std::int64_t> RecordUsage(Txn& txn, std::int64_t host_id,
                                 const std::vector<UsageSample>& samples);

// Holds the machine off the book (kNoAgentHoldReason) when it has no enrolled host and no
// simulated one; nothing otherwise.
Status HoldUnhostedMachine(Txn& txn, market::MachineId machine_id);
// Every machine HoldUnhostedMachine would hold (start-up: machines listed before the rule).
Status HoldUnhostedMachines(Txn& txn);

// Revokes the host's credential now; its machine goes offline at once, held (kRevokedHoldReason).
Result<AgentHost> RevokeHost(Txn& txn, std::int64_t host_id);

// The image a bid's leases run (POST /v1/bids "image"; "" = the configured default) and its
// extras. invalid_argument for a bad image, bad ports or a sealed credential past
// kMaxSealedRegistryAuthBytes.
Status RecordLaunchSpec(Txn& txn, market::OrderId bid_id, const std::string& image,
                        const LaunchExtras& extras = {});

// ----- Queries -------------------------------------------------------------------------------

const AgentHost* FindHost(const State& state, std::int64_t host_id);
const AgentHost* FindHostOfMachine(const State& state, std::int64_t machine_id);
const AgentHost* FindHostOfNode(const State& state, std::int64_t node_id);
const WorkloadRecord* FindWorkload(const State& state, const std::string& workload_id);
// "online", "offline" (silent past the limit, as of `now`) or "revoked".
std::string HostStatus(const State& state, const AgentHost& host, TimestampMicros now);
// The image a bid's leases run: its launch spec (memory's while the bid is open, else `stored`:
// what a history page read from launch_specs), or the default.
using StoredImages = std::map<std::int64_t, std::string>;
std::string BidImage(const State& state, market::OrderId bid_id,
                     const StoredImages* stored = nullptr);
// The image a lease runs (its bid's).
std::string LeaseImage(const State& state, const market::Lease& lease,
                       const StoredImages* stored = nullptr);
// The image and extras of a term rental, recorded with its order (OrderRental's txn).
Status RecordRentalLaunchSpec(Txn& txn, std::int64_t rental_id, const std::string& image,
                              const LaunchExtras& extras);
// A rental's launch spec; null when its order named none (it runs the default image).
const RentalLaunch* FindRentalLaunch(const State& state, std::int64_t rental_id);
// A live bid's extras (none once the bid is closed and its leases ended).
const LaunchExtras* BidExtras(const State& state, market::OrderId bid_id);
// The launch spec of one bid (by primary key).
store::Select LaunchSpecSelect(market::OrderId bid_id);
// The launch specs of `bid_ids` into `images`, one primary-key read each (start-up's open bids, a
// history page's rows). `reader`: a store::Store or a store::ReadPool.
template <typename Reader>
Status ReadLaunchSpecs(Reader& reader, const std::vector<market::OrderId>& bid_ids,
                       StoredImages& images) {
  for (market::OrderId bid : bid_ids) {
    GPUHUB_RETURN_IF_ERROR(
        reader.Query(LaunchSpecSelect(bid), [&](const store::Row& row) -> Status {
          GPUHUB_ASSIGN_OR_RETURN(images[bid], row.Text(1));
          return Status::Ok();
        }));
  }
  return Status::Ok();
}
// Drops the launch specs of bids that are no longer open (tick hook of AddAgentTickHooks).
void ForgetClosedLaunchSpecs(State& state);
// A term rental's downtime credits, oldest first.
std::vector<RentalDowntimeCredit> RentalDowntimeCredits(const State& state, std::int64_t rental_id);
// Usage of a workload, hour by hour (oldest first).
std::vector<std::pair<TimestampMicros, UsageHour>> WorkloadUsage(const State& state,
                                                                 const std::string& workload_id);

// ----- Time and loading ----------------------------------------------------------------------

// Tick hooks: once after start-up HoldUnhostedMachines; hosts silent for longer than the limit
// take their machines offline (from their last
// heartbeat). A grace of the same length after the engine became the writer (a start or a
// takeover) keeps a restart or a takeover from taking every machine offline.
void AddAgentTickHooks(Engine& engine);
Status CheckAgentsOffline(Txn& txn, TimestampMicros watch_from);
// When CheckAgentsOffline next takes a machine offline if no heartbeat comes first (its TickDue):
// the first moment past the limit of the silent host that reaches it first; kNoTickDue when none.
TimestampMicros NextAgentOfflineAt(const State& state, TimestampMicros watch_from);

// `open_bids`: Exchange::OpenBidIds() of the loaded market (the launch specs kept in memory).
Status LoadAgents(store::Store& store, const std::vector<market::OrderId>& open_bids,
                  AgentsState& state);

}  // namespace gpuhub::engine
