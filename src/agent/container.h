// What a customer's workload runs as: the Docker create body of its container, built from the
// server's desired workload. Pure (no I/O), so the security-relevant choices are unit-tested:
// - never privileged; every capability dropped but the few sshd and a root shell need (CapAdd:
//   CHOWN, DAC_OVERRIDE, FOWNER, SETUID, SETGID, SYS_CHROOT, KILL, AUDIT_WRITE,
//   NET_BIND_SERVICE); no-new-privileges; a PID limit;
// - GPUs only by UUID through a DeviceRequest {Driver "nvidia", DeviceIDs [UUIDs],
//   Capabilities [["gpu"]]}, and NVIDIA_VISIBLE_DEVICES set to exactly those UUIDs in the
//   container's own environment (it overrides an image's ENV); any NVIDIA_VISIBLE_DEVICES,
//   NVIDIA_DRIVER_CAPABILITIES or CUDA_VISIBLE_DEVICES a customer passes is stripped;
// - the customer's keys in a read-only bind mount that sshd reads as AuthorizedKeysFile;
// - sshd published on the host port chosen from the configured range, the extra container ports
//   on the host ports chosen from the listing's range (labelled, so a restarted agent adopts them);
// - the lease's share of CPUs and memory; restart unless stopped;
// - a term rental's opened LUKS2 volumes at /data/nvme<k>;
// - network volumes (Ceph, mounted on the host by volumes.h) bound in at /mnt/<name>, read-only
//   when the server says so;
// - labels from which the agent rebuilds its state after a restart (kLabel*).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::agent {

// A LUKS2 volume on the local NVMe of a term-fleet node's card slot (disks.h): "rental-7-0".
struct VolumeSpec {
  std::string name;
  int slot = 0;
  friend bool operator==(const VolumeSpec&, const VolumeSpec&) = default;
};

// An opened volume mounted in the container: the mapper device, formatted ext4, through Docker's
// local volume driver (a named volume "gpuhub-<name>" with type=ext4 and device=<device>,
// labelled kLabelManaged and kLabelWorkload). Docker keeps a named volume when its container is
// removed (`v=1` removes anonymous ones only): the agent removes it once no container uses it. The
// data is on the device, not in the volume: removing the volume loses nothing.
struct VolumeMount {
  std::string name;
  std::string device;  // "/dev/mapper/rental-7-0"
  std::string target;  // "/data/nvme0"
};

// A network volume attached to the workload (the server's `network_volumes`; docs/agent.md
// "Network volumes"): a CephFS subvolume's `path`, mounted on the host as the cephx client
// `client` (whose caps the server restricted to that path) from `monitors`, bound into the
// container at `mount` (/mnt/<name>). `key` is the client's cephx secret: kept in memory and in a
// 0600 keyring file of the state directory only; never logged, never in desired.json (a workload
// read from that cache has an empty key: the keyring file left by the last mount is used).
struct NetworkVolumeSpec {
  std::int64_t id = 0;
  std::string name;      // "data"
  std::string mount;     // "/mnt/data"
  std::string monitors;  // "10.0.0.1:6789,10.0.0.2:6789" (optionally v1:/v2: prefixed)
  std::string path;      // "/volumes/_nogroup/vol-7/<uuid>"
  std::string client;    // cephx id without "client.": "gpuhub-vol7-r3"
  std::string key;
  bool read_only = false;
  friend bool operator==(const NetworkVolumeSpec&, const NetworkVolumeSpec&) = default;
};

// A network volume's host mount point bound into the container.
struct NetworkMount {
  std::string source;  // <state_dir>/volumes/<id>-<client>
  std::string target;  // /mnt/<name>
  bool read_only = false;
};

// A container port published on a host port (a workload's extra ports: Jupyter 8888 ...).
struct PortMapping {
  int container = 0;
  int host = 0;
  friend bool operator==(const PortMapping&, const PortMapping&) = default;
};

// A registry credential for the pull of a private image (sent as Docker's X-Registry-Auth; kept in
// memory only: never in the desired-state cache, never logged).
struct RegistryCredential {
  std::string username;
  std::string password;
  std::string server_address;
  bool empty() const { return username.empty() && password.empty(); }
};

// The desired state of one workload (the heartbeat's answer).
struct WorkloadSpec {
  std::string id;  // "lease-17"
  std::string image;
  std::vector<std::string> gpu_uuids;
  std::vector<std::string> ssh_keys;  // authorized_keys lines
  TimestampMicros not_after = 0;
  std::int64_t cpus = 0;
  std::int64_t memory_gb = 0;
  std::vector<std::string> env;  // "KEY=value"; stripped of the GPU-selecting keys
  std::vector<VolumeSpec> volumes;  // term rentals: its encrypted local NVMe, one per card slot
  // Extra container ports, published on free host ports of [port_first, port_last] (the
  // listing's range), and the credential of the image's pull.
  std::vector<int> ports;
  int port_first = 0;
  int port_last = 0;
  RegistryCredential registry_auth;
  std::vector<NetworkVolumeSpec> network_volumes;  // at most kMaxNetworkVolumesPerWorkload
};

// Where the container is placed on this host.
struct Placement {
  int ssh_port = 0;
  std::string ssh_dir;  // host directory holding authorized_keys (mounted read-only)
  std::vector<VolumeMount> mounts;
  std::vector<PortMapping> ports;  // the extra ports and the host ports chosen for them
  std::vector<NetworkMount> network_mounts;
};

inline constexpr const char* kLabelManaged = "io.gpuhub.managed";    // "true"
inline constexpr const char* kLabelWorkload = "io.gpuhub.workload";  // "lease-17"
inline constexpr const char* kLabelNotAfter = "io.gpuhub.not_after";  // RFC 3339, at creation
inline constexpr const char* kLabelSshPort = "io.gpuhub.ssh_port";
inline constexpr const char* kLabelGpus = "io.gpuhub.gpus";  // UUIDs, comma-separated
inline constexpr const char* kLabelPorts = "io.gpuhub.ports";  // "8888:41000,8000:41001"
// The network volumes the container was made with, "<id>:<client>:<rw|ro>" comma-separated, in
// the spec's order ("7:gpuhub-vol7-r3:rw,9:gpuhub-vol9-r3:ro"; "" for none): a desired workload
// whose label differs (a volume attached, detached, its client or read_only changed) is recreated.
inline constexpr const char* kLabelVolumes = "io.gpuhub.volumes";
std::string NetworkVolumesLabel(const std::vector<NetworkVolumeSpec>& volumes);
// "8888:41000,8000:41001" <-> mappings (a malformed label reads as none).
std::string FormatPortMappings(const std::vector<PortMapping>& ports);
std::vector<PortMapping> ParsePortMappings(const std::string& label);
// Where the keys are mounted inside the container.
inline constexpr const char* kContainerSshDir = "/etc/gpuhub/ssh";

// "gpuhub-lease-17": one name per workload, so Docker itself refuses a second container for it.
std::string ContainerName(const std::string& workload_id);
// A workload id from the server is used in names, labels and paths: [a-z0-9-], 1..64.
Status ValidateWorkloadId(const std::string& id);
// An image reference from the server goes into Docker API paths and queries: letters, digits and
// ._/:@-, 1..255, starting and ending with a letter or digit, no empty or dot segments. (The server
// checks the same; the agent does not rely on it.)
Status ValidateImage(const std::string& image);
// The user-defined bridge network the containers join: inter-container traffic disabled
// (com.docker.network.bridge.enable_icc=false), so two customers' containers on one host cannot
// reach each other; published ports work as on the default bridge.
inline constexpr const char* kNetworkName = "gpuhub";
// The environment without NVIDIA_VISIBLE_DEVICES / NVIDIA_DRIVER_CAPABILITIES /
// CUDA_VISIBLE_DEVICES and without malformed entries.
std::vector<std::string> SanitizedEnv(const std::vector<std::string>& env);
// The shell script the container runs: installs openssh-server when the image lacks it (apt, dnf,
// yum or apk), creates host keys, keeps the image's environment for SSH sessions, runs sshd in
// the foreground with keys only.
const std::string& BootScript();
// The body of POST /containers/create.
std::string CreateBody(const WorkloadSpec& spec, const Placement& placement);

}  // namespace gpuhub::agent
