// The agent's configuration (TOML, /etc/gpuhub/agent.toml by default; every key optional) and its
// credential file.
//
//   server = "https://gpuhub.example.com"   # else the one it enrolled with
//   ca_file = ""                            # PEM to trust instead of the system's CAs
//   state_dir = "/var/lib/gpuhub-agent"     # credential (0600), desired-state cache, SSH key dirs,
//                                           # LUKS key files (0600)
//   hostname = ""                           # default: the kernel's host name
//   public_host = "203.0.113.7"             # where customers connect: the connection line's HOST
//   ssh_ports = "40000-40999"               # host ports published for the containers' sshd
//   docker = "unix:/var/run/docker.sock"
//   nvml_library = "libnvidia-ml.so.1"      # "" = nvidia-smi only
//   nvidia_smi = "nvidia-smi"
//   disk_path = "/var/lib/docker"           # whose free space is reported
//   nvme_devices = ["/dev/nvme0n1", ...]    # term-fleet nodes: card slot i's local NVMe (disks.h)
//   heartbeat_interval_ms = 0               # 0: what the server says (15 s)
//   usage_interval_ms = 0                   # 0: what the server says (60 s)
//   reconcile_interval_ms = 1000
//   desired_wait_seconds = 20               # the desired state's long-poll; 0: heartbeats only
//   ssh_ready_timeout_ms = 60000            # after a start, "running" once sshd answers (or this);
//                                           # 0: "running" at once, no probe
//   [storage]                               # LUKS2 volumes and Ceph RBD (storage.h)
//   cryptsetup = "cryptsetup"
//   blkdiscard = "blkdiscard"
//   mkfs = "mkfs.ext4"
//   rbd = "rbd"
//   ceph_conf = "/etc/ceph/ceph.conf"
//   rbd_pool = "gpuhub"
//   rbd_user = "gpuhub"                     # cephx id: client.<rbd_user>
//   rbd_keyring = ""                        # default: ceph's own lookup
//   ceph_fuse = "ceph-fuse"                 # mounts network volumes (volumes.h)
//   umount = "umount"
//
// Unknown keys are errors (a typo must not silently fall back to a default).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuhub::agent {

struct StorageConfig {
  std::string cryptsetup = "cryptsetup";
  std::string blkdiscard = "blkdiscard";
  std::string mkfs = "mkfs.ext4";
  std::string rbd = "rbd";
  std::string ceph_conf = "/etc/ceph/ceph.conf";
  std::string rbd_pool = "gpuhub";
  std::string rbd_user = "gpuhub";
  std::string rbd_keyring;
  std::string ceph_fuse = "ceph-fuse";
  std::string umount = "umount";
};

struct AgentConfig {
  std::string server;
  std::string ca_file;
  std::string state_dir = "/var/lib/gpuhub-agent";
  std::string hostname;
  std::string public_host;
  int ssh_port_first = 40000;
  int ssh_port_last = 40999;
  std::string docker = "unix:/var/run/docker.sock";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string nvidia_smi = "nvidia-smi";
  std::string disk_path = "/var/lib/docker";
  std::vector<std::string> nvme_devices;  // by card slot; empty on a spot machine
  std::int64_t heartbeat_interval_ms = 0;
  std::int64_t usage_interval_ms = 0;
  std::int64_t reconcile_interval_ms = 1000;
  std::int64_t desired_wait_seconds = 20;
  std::int64_t ssh_ready_timeout_ms = 60'000;
  StorageConfig storage;
};

inline constexpr const char* kDefaultAgentConfigPath = "/etc/gpuhub/agent.toml";

// Errors name the source, line and key.
Result<AgentConfig> ParseAgentConfig(std::string_view toml_text, std::string_view source);
// `path` empty: kDefaultAgentConfigPath when it exists, else the defaults.
Result<AgentConfig> LoadAgentConfig(const std::string& path);

// What enrolment leaves on the host: <state_dir>/credential, mode 0600.
struct CredentialFile {
  std::string server;
  std::string credential;
  std::int64_t host_id = 0;
  std::string kind;
  std::int64_t machine_id = 0;
};
std::string CredentialPath(const std::string& state_dir);
// Creates state_dir (0700) when missing and writes the file atomically with mode 0600.
Status WriteCredential(const std::string& state_dir, const CredentialFile& file);
// not_found when the host is not enrolled; failed_precondition when the file is readable by
// others than its owner (as ssh refuses such a key).
Result<CredentialFile> ReadCredential(const std::string& state_dir);

// Writes `content` to `path` through a temporary file and rename (mode `mode`).
Status WriteFileAtomically(const std::string& path, const std::string& content, unsigned mode);

}  // namespace gpuhub::agent
