// The local NVMe of a term-fleet node's instances (docs/agent.md "Term rentals"): card slot i of
// the node owns the device nvme_devices[i] of the agent's config; a rental of the cards in its
// card mask gets one LUKS2 volume per slot ("rental-7-0" on slot 0), formatted with a key made on
// this host that never leaves it (LuksVolumes), mounted in its container at /data/nvme<k>.
//
// Who owns a device is written in <state_dir>/devices/<slot> (the volume's name): a device is
// formatted only when no volume owns it, erased only by its owner's erase, and discarded only when
// nobody owns it, so a late or repeated action of the server can never erase or discard another
// customer's volume. The order the server asks for (release -> erase -> wipe, before the slot is
// formatted for the next rental) is the one this enforces.
#pragma once

#include <string>
#include <vector>

#include "agent/container.h"
#include "agent/storage.h"
#include "core/status.h"

namespace gpuhub::agent {

class InstanceDisks {
 public:
  // `devices`: the node's NVMe devices by card slot (config nvme_devices).
  InstanceDisks(LuksVolumes* luks, std::vector<std::string> devices, std::string owner_dir);

  // Creates (first time) or opens each volume; the mounts for the container. failed_precondition
  // when a slot has no device or is owned by another volume (its erase or wipe is pending).
  Result<std::vector<VolumeMount>> Prepare(const std::vector<VolumeSpec>& volumes);
  // Crypto-erase: luksErase of each volume this rental owns, its key deleted; the slot is then
  // owned by nobody. A slot never formatted for it (provisioning failed) has nothing to erase.
  Status Erase(const std::vector<VolumeSpec>& volumes);
  // The physical wipe: blkdiscard of each slot's device. failed_precondition when a slot is
  // owned (by the volume itself: erase first; by another: it was formatted again, never discard).
  Status Wipe(const std::vector<VolumeSpec>& volumes);

  // The volume owning a slot ("" when none).
  std::string OwnerOf(int slot) const;

 private:
  Result<std::string> Device(int slot) const;
  Status SetOwner(int slot, const std::string& name);

  LuksVolumes* luks_;
  std::vector<std::string> devices_;
  std::string owner_dir_;
};

}  // namespace gpuhub::agent
