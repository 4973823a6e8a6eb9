#include "rentals/storage_types.h"

#include <array>

namespace gpuhub::rentals {
namespace {

template <typename E, std::size_t N>
std::string_view NameOf(const std::array<std::string_view, N>& names, E value) {
  auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : std::string_view("?");
}

template <typename E, std::size_t N>
Result<E> Parse(const std::array<std::string_view, N>& names, std::string_view name,
                std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  std::string list;
  for (auto n : names) {
    if (!n.empty()) list += (list.empty() ? "" : ", ") + std::string(n);
  }
  return Status::InvalidArgument(std::string(what) + " must be one of " + list + ", got '" +
                                 std::string(name.substr(0, 32)) + "'");
}

constexpr std::array<std::string_view, 2> kHostState = {"active", "draining"};
constexpr std::array<std::string_view, 4> kStorageState = {"active", "read_only", "detached",
                                                           "deleted"};
constexpr std::array<std::string_view, 3> kDeleteReason = {"", "deleted_by_customer", "unpaid"};
constexpr std::array<std::string_view, 2> kSnapshotSource = {"volume", "local_nvme"};
constexpr std::array<std::string_view, 4> kChargeKind = {"volume_days", "volume_growth",
                                                         "snapshot_days", "egress"};
constexpr std::array<std::string_view, 9> kEventKind = {
    "created",   "paid",      "resized",  "attached", "detached",
    "read_only", "suspended", "restored", "deleted"};

}  // namespace

std::string_view StorageHostStateName(StorageHostState s) { return NameOf(kHostState, s); }
Result<StorageHostState> ParseStorageHostState(std::string_view n) {
  return Parse<StorageHostState>(kHostState, n, "storage host state");
}
std::string_view StorageStateName(StorageState s) { return NameOf(kStorageState, s); }
Result<StorageState> ParseStorageState(std::string_view n) {
  return Parse<StorageState>(kStorageState, n, "storage state");
}
std::string_view DeleteReasonName(DeleteReason r) { return NameOf(kDeleteReason, r); }
Result<DeleteReason> ParseDeleteReason(std::string_view n) {
  return Parse<DeleteReason>(kDeleteReason, n, "delete reason");
}
std::string_view SnapshotSourceName(SnapshotSource s) { return NameOf(kSnapshotSource, s); }
Result<SnapshotSource> ParseSnapshotSource(std::string_view n) {
  return Parse<SnapshotSource>(kSnapshotSource, n, "source");
}
std::string_view StorageChargeKindName(StorageChargeKind k) { return NameOf(kChargeKind, k); }
Result<StorageChargeKind> ParseStorageChargeKind(std::string_view n) {
  return Parse<StorageChargeKind>(kChargeKind, n, "storage charge kind");
}
std::string_view StorageEventKindName(StorageEventKind k) { return NameOf(kEventKind, k); }
Result<StorageEventKind> ParseStorageEventKind(std::string_view n) {
  return Parse<StorageEventKind>(kEventKind, n, "storage event kind");
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
