// Network volumes on the host (docs/agent.md "Network volumes"): the CephFS subvolumes the
// server attached to this host's workloads, mounted once per (volume, cephx client) at
// <state_dir>/volumes/<id>-<client> and bound from there into each container that has them.
//
// - The mount is made with ceph-fuse through argv (RunProcess, no shell): this kernel has FUSE but
//   no kernel Ceph client, and CephMountArgv is the one place where `mount -t ceph` would go.
//   Quotas are enforced by the client (--client_quota=true: a subvolume's size is its quota); a
//   read-only attachment is mounted `-o ro` (and bound read-only).
// - The cephx key is written to <state_dir>/volumes/<id>-<client>.keyring (mode 0600, the
//   directory 0700) and passed to ceph-fuse by path; it is never on a command line and never
//   logged. A workload read from the desired-state cache has no key: the keyring left by the last
//   mount is used.
// - What is mounted is read from the kernel (/proc/self/mountinfo: the fstype fuse.ceph-fuse or
//   ceph, and whether it is ro) and each mount is checked alive with stat (a ceph-fuse that died
//   leaves a mount answering ENOTCONN): there is no second record, so a restarted agent adopts
//   what is mounted and never mounts it twice.
// - Nothing here decides when to mount or unmount: the reconciler does (reconciler.cc).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/container.h"
#include "core/status.h"

namespace gpuhub::agent {

// A server's network volume is used in paths, argv and labels. invalid_argument, naming the
// field, unless: id > 0; name [a-z0-9-] 1..63 and mount "/mnt/<name>" (a name of the same
// charset); monitors a comma-separated list of at most kMaxCephMonitors "host:port" (host letters,
// digits, '.', '-', ':'-free IPv4 or a name; optionally "v1:"/"v2:" before it); path "/volumes/..."
// of [A-Za-z0-9_.-/] without "..", "//" or a trailing '/', at most 255 bytes; client [a-z0-9-_.]
// 1..64 starting with a letter or digit; key base64 ([A-Za-z0-9+/=]) 1..128, or empty when
// `key_required` is false (the desired-state cache keeps no key).
Status ValidateNetworkVolume(const NetworkVolumeSpec& v, bool key_required);

// "<id>-<client>": the mount point's and keyring's name under the volumes directory.
std::string NetworkVolumeDirName(std::int64_t id, const std::string& client);

// The argv that mounts `v` at `mount_point` with the keyring file `keyring`, logging to
// `log_file`: ceph-fuse (see above).
std::vector<std::string> CephMountArgv(const std::string& ceph_fuse, const NetworkVolumeSpec& v,
                                       const std::string& keyring, const std::string& mount_point,
                                       const std::string& log_file);

// One mount of /proc/self/mountinfo.
struct HostMount {
  std::string point;
  std::string fstype;  // "fuse.ceph-fuse", "ceph", ...
  bool read_only = false;
};
// The mounts of a mountinfo text whose mount point is directly under `dir` (its octal escapes
// decoded), by the name below `dir`. Malformed lines are skipped.
std::map<std::string, HostMount> MountsUnder(std::string_view mountinfo, const std::string& dir);

// "7:gpuhub-vol7-r3:rw,..." (kLabelVolumes) -> the dir names it lists ("7-gpuhub-vol7-r3"); a
// malformed item is skipped.
std::set<std::string> DirNamesOfLabel(const std::string& label);

class NetworkVolumes {
 public:
  // `dir`: <state_dir>/volumes. `umount` unmounts a mount point given as its one argument.
  NetworkVolumes(std::string ceph_fuse, std::string umount, std::string dir,
                 std::string mountinfo_path = "/proc/self/mountinfo");

  std::string MountPoint(std::int64_t id, const std::string& client) const;
  // Ceph mounts under the directory now, by dir name; Alive: its root answers stat.
  std::map<std::string, HostMount> Mounted() const;
  bool Alive(const std::string& dir_name) const;

  // The host mount point of `v`, mounted in v's mode. A live mount in that mode is kept as it is;
  // one in the other mode or dead is unmounted first. Errors: failed_precondition without a key
  // (none given, no keyring left), unavailable with ceph-fuse's own words when it fails or the
  // kernel then shows no live Ceph mount there.
  Result<std::string> Ensure(const NetworkVolumeSpec& v);
  // Unmounts dir_name (lazily when a plain umount is refused), then deletes its keyring and
  // removes the empty mount point.
  Status Unmount(const std::string& dir_name);

 private:
  Status UnmountPoint(const std::string& dir_name);  // the keyring and directory stay
  std::string ceph_fuse_;
  std::string umount_;
  std::string dir_;
  std::string mountinfo_path_;
};

}  // namespace gpuhub::agent
