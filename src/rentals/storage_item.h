// Internal to src/rentals/storage*.cc: a volume or a snapshot seen through what they share (the
// daily bill, the unpaid path, replicas, history, charges), so that billing and the unpaid path
// are written once for both.
#pragma once

#include <string>

#include "rentals/storage.h"

namespace gpuhub::rentals {

struct Storage::Item {
  VolumeSlot* volume = nullptr;      // exactly one of the two is set
  SnapshotSlot* snapshot = nullptr;

  static Item Of(VolumeSlot& slot) { return {&slot, nullptr}; }
  static Item Of(SnapshotSlot& slot) { return {nullptr, &slot}; }

  bool is_volume() const { return volume != nullptr; }
  ItemKind kind() const { return volume ? ItemKind::kVolume : ItemKind::kSnapshot; }
  std::int64_t id() const { return volume ? volume->volume.id : snapshot->snapshot.id; }
  UserId customer() const {
    return volume ? volume->volume.customer_id : snapshot->snapshot.customer_id;
  }
  StorageBill& bill() const { return volume ? volume->volume.bill : snapshot->snapshot.bill; }
  std::int64_t size_tb() const { return volume ? volume->volume.size_tb : snapshot->snapshot.size_tb; }
  const std::string& region() const {
    return volume ? volume->volume.region : snapshot->snapshot.region;
  }
  std::vector<StorageHostId>& hosts() const {
    return volume ? volume->volume.hosts : snapshot->snapshot.hosts;
  }
  std::vector<StorageEvent>& history() const {
    return volume ? volume->history : snapshot->history;
  }
  std::vector<StorageChargeId>& charges() const {
    return volume ? volume->charges : snapshot->charges;
  }
  std::optional<TimestampMicros>& scheduled() const {
    return volume ? volume->scheduled : snapshot->scheduled;
  }
  std::int64_t& events() const { return volume ? volume->volume.events : snapshot->snapshot.events; }
  TimestampMicros& updated_at() const {
    return volume ? volume->volume.updated_at : snapshot->snapshot.updated_at;
  }
  // "volume" / "snapshot", "volume:7", "volume 7 (4 TB, DFW-1)".
  const char* noun() const { return volume ? "volume" : "snapshot"; }
  std::string subject() const { return std::string(noun()) + ":" + std::to_string(id()); }
  std::string title() const {
    return std::string(noun()) + " " + std::to_string(id()) + " (" + std::to_string(size_tb()) +
           " TB, " + region() + ")";
  }
};

}  // namespace gpuhub::rentals
