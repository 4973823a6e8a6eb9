#include "rentals/storage_types.h"

#include <array>

#include "core/names.h"

namespace gpuhub::rentals {
namespace {

constexpr std::array<std::string_view, 2> kHostState = {"active", "draining"};
constexpr std::array<std::string_view, 4> kStorageState = {"active", "read_only", "detached",
                                                           "deleted"};
constexpr std::array<std::string_view, 4> kDeleteReason = {"", "deleted_by_customer", "unpaid",
                                                           "failed"};
constexpr std::array<std::string_view, 6> kProvisioning = {"",         "pending", "creating",
                                                           "cloning",  "ready",   "failed"};
constexpr std::array<std::string_view, 2> kSnapshotSource = {"volume", "local_nvme"};
constexpr std::array<std::string_view, 4> kChargeKind = {"volume_days", "volume_growth",
                                                         "snapshot_days", "egress"};
constexpr std::array<std::string_view, 8> kEventKind = {
    "created", "resized", "attached", "detached", "read_only", "suspended", "restored", "deleted"};

}  // namespace

std::string_view StorageHostStateName(StorageHostState s) { return EnumName(kHostState, s); }
Result<StorageHostState> ParseStorageHostState(std::string_view n) {
  return ParseEnumName<StorageHostState>(kHostState, n, "storage host state");
}
std::string_view StorageStateName(StorageState s) { return EnumName(kStorageState, s); }
Result<StorageState> ParseStorageState(std::string_view n) {
  return ParseEnumName<StorageState>(kStorageState, n, "storage state");
}
std::string_view CephStateName(CephState p) { return EnumName(kProvisioning, p); }
Result<CephState> ParseCephState(std::string_view n) {
  return ParseEnumName<CephState>(kProvisioning, n, "provisioning");
}
std::string CephSubvolumeName(VolumeId id) { return "vol-" + std::to_string(id); }
std::string CephSnapshotName(SnapshotId id) { return "snap-" + std::to_string(id); }
std::string CephClientName(VolumeId volume, RentalId rental) {
  return "gpuhub-vol" + std::to_string(volume) + "-r" + std::to_string(rental);
}
std::string_view DeleteReasonName(DeleteReason r) { return EnumName(kDeleteReason, r); }
Result<DeleteReason> ParseDeleteReason(std::string_view n) {
  return ParseEnumName<DeleteReason>(kDeleteReason, n, "delete reason");
}
std::string_view SnapshotSourceName(SnapshotSource s) { return EnumName(kSnapshotSource, s); }
Result<SnapshotSource> ParseSnapshotSource(std::string_view n) {
  return ParseEnumName<SnapshotSource>(kSnapshotSource, n, "source");
}
std::string_view StorageChargeKindName(StorageChargeKind k) { return EnumName(kChargeKind, k); }
Result<StorageChargeKind> ParseStorageChargeKind(std::string_view n) {
  return ParseEnumName<StorageChargeKind>(kChargeKind, n, "storage charge kind");
}
std::string_view StorageEventKindName(StorageEventKind k) { return EnumName(kEventKind, k); }
Result<StorageEventKind> ParseStorageEventKind(std::string_view n) {
  return ParseEnumName<StorageEventKind>(kEventKind, n, "storage event kind");
}

std::string StorageChargeTransferBase(const StorageCharge& c) {
  const std::string id = std::to_string(c.subject_id);
  switch (c.kind) {
    case StorageChargeKind::kVolumeDays:
      return "volume:" + id + ":d" + std::to_string(c.first_day);
    case StorageChargeKind::kVolumeGrowth:
      return "volume:" + id + ":grow" + std::to_string(c.growth);
    case StorageChargeKind::kSnapshotDays:
      return "snapshot:" + id + ":d" + std::to_string(c.first_day);
    case StorageChargeKind::kEgress:
      return "egress:" + id + ":p" + std::to_string(c.period) + ":gb" +
             std::to_string(c.egress_gb_from + 1);
  }
  return "storage:?";
}

}  // namespace gpuhub::rentals
