#include "agent/storage.h"

#include <sodium.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/limits.h"
#include "agent/process.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

bool LowerAlnumDash(const std::string& s) {
  if (s.empty() || s.size() > 64 || s.front() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

}  // namespace

Status ValidateVolumeName(const std::string& name) {
  if (LowerAlnumDash(name)) return Status::Ok();
  return Status::InvalidArgument("volume name '" + name.substr(0, 64) +
                                 "' must be 1..64 of a-z, 0-9 and '-'");
}

Status ValidateDevicePath(const std::string& device) {
  bool ok = device.rfind("/dev/", 0) == 0 && device.size() <= 128 &&
            device.find("..") == std::string::npos;
  for (char c : device) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '/' || c == '_' || c == '-' || c == '.');
  }
  if (ok) return Status::Ok();
  return Status::InvalidArgument("device '" + device.substr(0, 128) +
                                 "' must be a path under /dev/");
}

// ----- LUKS2 ------------------------------------------------------------------------------------

LuksVolumes::LuksVolumes(StorageConfig config, std::string key_dir)
    : config_(std::move(config)), key_dir_(std::move(key_dir)) {}

std::string LuksVolumes::KeyPath(const std::string& name) const {
  return key_dir_ + "/" + name + ".key";
}

Status LuksVolumes::Run(std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  GPUHUB_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv, timeout));
  if (r.exit_code != 0) return Status::Unavailable(DescribeFailure(argv, r));
  return Status::Ok();
}

Result<std::string> LuksVolumes::Create(const std::string& name, const std::string& device) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(name));
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  const std::string key = KeyPath(name);
  if (::mkdir(key_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(key_dir_ + ": " + std::strerror(errno));
  }
  // O_EXCL: a second Create of the same volume must not replace the key of a formatted disk.
  int fd = ::open(key.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) {
      return Status::FailedPrecondition("volume " + name + " already has a key: open it instead");
    }
    return Status::Unavailable(key + ": " + std::strerror(errno));
  }
  unsigned char secret[64];
  randombytes_buf(secret, sizeof secret);
  bool written = ::write(fd, secret, sizeof secret) == static_cast<ssize_t>(sizeof secret) &&
                 ::fsync(fd) == 0;
  sodium_memzero(secret, sizeof secret);
  ::close(fd);
  if (!written) {
    ::unlink(key.c_str());
    return Status::Unavailable(key + ": cannot write the key");
  }
  Status formatted = Run({config_.cryptsetup, "luksFormat", "--type", "luks2", "--batch-mode",
                          "--key-file", key, device},
                         kToolTimeout);
  if (!formatted.ok()) {
    ::unlink(key.c_str());  // nothing was encrypted with it
    return formatted;
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string mapped, Open(name, device));
  GPUHUB_RETURN_IF_ERROR(Run({config_.mkfs, "-q", mapped}, kEraseTimeout));
  return mapped;
}

Result<std::string> LuksVolumes::Open(const std::string& name, const std::string& device) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(name));
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  GPUHUB_RETURN_IF_ERROR(Run({config_.cryptsetup, "open", "--type", "luks2", "--key-file",
                              KeyPath(name), device, name},
                             kToolTimeout));
  return "/dev/mapper/" + name;
}

Status LuksVolumes::Close(const std::string& name) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(name));
  return Run({config_.cryptsetup, "close", name}, kToolTimeout);
}

bool LuksVolumes::IsOpen(const std::string& name) {
  if (!ValidateVolumeName(name).ok()) return false;
  auto status = RunProcess({config_.cryptsetup, "status", name}, kToolTimeout);
  return status.ok() && status->exit_code == 0;
}

Status LuksVolumes::Erase(const std::string& name, const std::string& device) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(name));
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  // A volume that is not open is fine to erase; any other close failure stops here.
  if (IsOpen(name)) GPUHUB_RETURN_IF_ERROR(Close(name));
  GPUHUB_RETURN_IF_ERROR(
      Run({config_.cryptsetup, "luksErase", "--batch-mode", device}, kToolTimeout));
  const std::string key = KeyPath(name);
  if (::unlink(key.c_str()) != 0 && errno != ENOENT) {
    return Status::Unavailable("the key slots are erased but " + key + " could not be deleted: " +
                               std::strerror(errno));
  }
  return Status::Ok();
}

Status LuksVolumes::Discard(const std::string& device) {
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  return Run({config_.blkdiscard, "-f", device}, kEraseTimeout);
}

// ----- RBD --------------------------------------------------------------------------------------

RbdVolumes::RbdVolumes(StorageConfig config) : config_(std::move(config)) {}

Result<std::string> RbdVolumes::Rbd(std::vector<std::string> args) {
  std::vector<std::string> argv{config_.rbd, "--id", config_.rbd_user, "-c", config_.ceph_conf};
  if (!config_.rbd_keyring.empty()) {
    argv.push_back("--keyring");
    argv.push_back(config_.rbd_keyring);
  }
  for (auto& a : args) argv.push_back(std::move(a));
  GPUHUB_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(argv, kToolTimeout));
  if (r.exit_code != 0) return Status::Unavailable(DescribeFailure(argv, r));
  return r.stdout_text;
}

Status RbdVolumes::Create(const std::string& image, std::int64_t size_gb) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(image));
  if (size_gb < 1 || size_gb > 1'000'000) {
    return Status::InvalidArgument("size_gb must be 1..1000000");
  }
  // rbd's --size is in MiB by default; GB (1e9 bytes) rounded up to whole MiB.
  const std::int64_t mib = (size_gb * 1'000'000'000 + (1 << 20) - 1) / (1 << 20);
  return Rbd({"create", "--size", std::to_string(mib), config_.rbd_pool + "/" + image}).status();
}

Result<std::string> RbdVolumes::Map(const std::string& image) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(image));
  GPUHUB_ASSIGN_OR_RETURN(std::string out, Rbd({"map", config_.rbd_pool + "/" + image}));
  std::string device(Trim(out));
  if (device.find('\n') != std::string::npos) device = std::string(Trim(Split(device, '\n').back()));
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  return device;
}

Status RbdVolumes::Unmap(const std::string& device) {
  GPUHUB_RETURN_IF_ERROR(ValidateDevicePath(device));
  return Rbd({"unmap", device}).status();
}

Status RbdVolumes::Snapshot(const std::string& image, const std::string& snapshot) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(image));
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(snapshot));
  return Rbd({"snap", "create", config_.rbd_pool + "/" + image + "@" + snapshot}).status();
}

Status RbdVolumes::Clone(const std::string& image, const std::string& snapshot,
                         const std::string& new_image) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(image));
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(snapshot));
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(new_image));
  const std::string snap = config_.rbd_pool + "/" + image + "@" + snapshot;
  auto protect = Rbd({"snap", "protect", snap});
  // Protecting twice is refused by rbd ("already protected"): that is the state we want.
  if (!protect.ok() && protect.status().message().find("already protected") == std::string::npos) {
    return protect.status();
  }
  return Rbd({"clone", snap, config_.rbd_pool + "/" + new_image}).status();
}

Status RbdVolumes::Remove(const std::string& image) {
  GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(image));
  return Rbd({"rm", config_.rbd_pool + "/" + image}).status();
}

}  // namespace gpuhub::agent
