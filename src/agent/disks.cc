#include "agent/disks.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file.h"

namespace gpuhub::agent {

InstanceDisks::InstanceDisks(LuksVolumes* luks, std::vector<std::string> devices,
                             std::string owner_dir)
    : luks_(luks), devices_(std::move(devices)), owner_dir_(std::move(owner_dir)) {}

Result<std::string> InstanceDisks::Device(int slot) const {
  if (slot < 0 || static_cast<std::size_t>(slot) >= devices_.size()) {
    return Status::FailedPrecondition(
        "card slot " + std::to_string(slot) + " has no NVMe device (nvme_devices in the agent's "
        "config lists " + std::to_string(devices_.size()) + ")");
  }
  return devices_[static_cast<std::size_t>(slot)];
}

std::string InstanceDisks::OwnerOf(int slot) const {
  auto text = ReadFile(owner_dir_ + "/" + std::to_string(slot), 256);
  if (!text.ok()) return "";
  std::string name = *text;
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

Status InstanceDisks::SetOwner(int slot, const std::string& name) {
  if (::mkdir(owner_dir_.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(owner_dir_ + ": " + std::strerror(errno));
  }
  const std::string path = owner_dir_ + "/" + std::to_string(slot);
  if (name.empty()) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Status::Unavailable(path + ": " + std::strerror(errno));
    }
    return Status::Ok();
  }
  return WriteFileAtomically(path, name + "\n", 0600);
}

Result<std::vector<VolumeMount>> InstanceDisks::Prepare(const std::vector<VolumeSpec>& volumes) {
  std::vector<VolumeMount> mounts;
  // Check every slot before formatting any: a rental gets all its disks or none.
  for (const auto& v : volumes) {
    GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(v.name));
    GPUHUB_RETURN_IF_ERROR(Device(v.slot).status());
    std::string owner = OwnerOf(v.slot);
    if (!owner.empty() && owner != v.name) {
      return Status::FailedPrecondition("the NVMe of card slot " + std::to_string(v.slot) +
                                        " still holds volume " + owner +
                                        " (its erase and wipe come first)");
    }
  }
  for (std::size_t k = 0; k < volumes.size(); ++k) {
    const VolumeSpec& v = volumes[k];
    GPUHUB_ASSIGN_OR_RETURN(std::string device, Device(v.slot));
    std::string mapped;
    if (OwnerOf(v.slot) == v.name) {
      // Formatted before (an agent restart, a rental resumed after its hold): open it unless open.
      if (luks_->IsOpen(v.name)) {
        mapped = "/dev/mapper/" + v.name;
      } else {
        GPUHUB_ASSIGN_OR_RETURN(mapped, luks_->Open(v.name, device));
      }
    } else {
      // The owner is written first: a crash in the middle of formatting leaves a slot that only
      // this volume's erase can free.
      GPUHUB_RETURN_IF_ERROR(SetOwner(v.slot, v.name));
      GPUHUB_ASSIGN_OR_RETURN(mapped, luks_->Create(v.name, device));
      spdlog::info("event=volume_created volume={} device={}", v.name, device);
    }
    mounts.push_back({v.name, mapped, "/data/nvme" + std::to_string(k)});
  }
  return mounts;
}

Status InstanceDisks::Erase(const std::vector<VolumeSpec>& volumes) {
  for (const auto& v : volumes) {
    GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(v.name));
    GPUHUB_ASSIGN_OR_RETURN(std::string device, Device(v.slot));
    if (OwnerOf(v.slot) != v.name) {
      // Never formatted for this rental (or already erased): its key file, if any, goes.
      ::unlink(luks_->KeyPath(v.name).c_str());
      continue;
    }
    GPUHUB_RETURN_IF_ERROR(luks_->Erase(v.name, device));
    GPUHUB_RETURN_IF_ERROR(SetOwner(v.slot, ""));
    spdlog::info("event=volume_erased volume={} device={}", v.name, device);
  }
  return Status::Ok();
}

Status InstanceDisks::Wipe(const std::vector<VolumeSpec>& volumes) {
  for (const auto& v : volumes) {
    GPUHUB_ASSIGN_OR_RETURN(std::string device, Device(v.slot));
    std::string owner = OwnerOf(v.slot);
    if (!owner.empty()) {
      return Status::FailedPrecondition(
          "the NVMe of card slot " + std::to_string(v.slot) + " holds volume " + owner +
          (owner == v.name ? " (erase it first)" : ": it is not discarded under its new owner"));
    }
  }
  for (const auto& v : volumes) {
    GPUHUB_ASSIGN_OR_RETURN(std::string device, Device(v.slot));
    GPUHUB_RETURN_IF_ERROR(luks_->Discard(device));
    spdlog::info("event=device_discarded volume={} device={}", v.name, device);
  }
  return Status::Ok();
}

}  // namespace gpuhub::agent
