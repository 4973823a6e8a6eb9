// Disks on the host: LUKS2 volumes on a term-fleet instance's local NVMe (cryptsetup), and network
// volumes as Ceph RBD images (the `rbd` CLI). Both drive the real tools through RunProcess (argv,
// no shell); tests point StorageConfig at fake scripts that record their arguments.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/config.h"
#include "core/status.h"

namespace gpuhub::agent {

// A name used for a device-mapper target, a key file or an RBD image: [a-z0-9-], 1..64.
Status ValidateVolumeName(const std::string& name);
// An absolute device path such as /dev/nvme1n1 ([A-Za-z0-9/_.-], under /dev/).
Status ValidateDevicePath(const std::string& device);

// LUKS2 volumes whose keys are generated on this host and never leave it: 64 random bytes in
// <key_dir>/<name>.key, mode 0600.
class LuksVolumes {
 public:
  LuksVolumes(StorageConfig config, std::string key_dir);

  // Formats `device` as LUKS2 with a new key, opens it as /dev/mapper/<name> and makes an ext4
  // file system on it. Returns the mapper path. failed_precondition when a key for `name` exists
  // (a volume is formatted once: Open it).
  Result<std::string> Create(const std::string& name, const std::string& device);
  // Opens an existing volume with its key (after a reboot); the mapper path.
  Result<std::string> Open(const std::string& name, const std::string& device);
  Status Close(const std::string& name);
  // Whether /dev/mapper/<name> is open (cryptsetup status).
  bool IsOpen(const std::string& name);
  // Crypto-erase: closes the volume, destroys every key slot (cryptsetup luksErase: the data can
  // no longer be decrypted by anyone) and deletes the key file. Done is done: erasing a volume
  // whose key is already gone only runs luksErase again.
  Status Erase(const std::string& name, const std::string& device);
  // The physical wipe (T+7 d): discards every block of the device (blkdiscard -f).
  Status Discard(const std::string& device);

  std::string KeyPath(const std::string& name) const;

 private:
  Status Run(std::vector<std::string> argv, std::chrono::milliseconds timeout);
  StorageConfig config_;
  std::string key_dir_;
};

// Network volumes: RBD images in the configured pool, mapped on this host with the kernel client.
class RbdVolumes {
 public:
  explicit RbdVolumes(StorageConfig config);

  Status Create(const std::string& image, std::int64_t size_gb);
  // `rbd map`: the block device it printed ("/dev/rbd0").
  Result<std::string> Map(const std::string& image);
  Status Unmap(const std::string& device);
  Status Snapshot(const std::string& image, const std::string& snapshot);
  // A new image from a snapshot (protects the snapshot first, as RBD requires for clones).
  Status Clone(const std::string& image, const std::string& snapshot,
               const std::string& new_image);
  Status Remove(const std::string& image);

 private:
  Result<std::string> Rbd(std::vector<std::string> args);
  StorageConfig config_;
};

}  // namespace gpuhub::agent
