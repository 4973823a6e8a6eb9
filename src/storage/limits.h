// Named limits of the server's network storage client (src/storage: the Ceph cluster of a region).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace gpuhub::storage {

// One `ceph` command, connect to answer. The CLI's own --connect-timeout gives up on a mon that
// does not answer; this whole-command deadline (the process is killed past it) also bounds a mgr
// that accepted the connection and never replies. A reconciler retries what timed out.
inline constexpr std::chrono::milliseconds kCephCommandTimeout{30'000};
inline constexpr std::chrono::seconds kCephConnectTimeout{10};
// Output of one command that is read (a subvolume's info is ~1 KiB; a snapshot list of
// kMaxSnapshotsPerSubvolume names a few KiB).
inline constexpr std::size_t kMaxCephOutputBytes = 1024 * 1024;
// Subvolume, snapshot and cephx client names: [A-Za-z0-9_.-], at most this long.
inline constexpr std::size_t kMaxCephNameBytes = 100;
// A subvolume path as Ceph reports it (/volumes/_nogroup/<name>/<uuid>).
inline constexpr std::size_t kMaxCephPathBytes = 1024;
// The largest quota set on a subvolume: 100 TB, the largest network volume sold
// (docs/storage.md).
inline constexpr std::int64_t kMaxSubvolumeBytes = 100LL * 1000 * 1000 * 1000 * 1000;
// Snapshots of one subvolume removed with it (Ceph's own default cap, mds_max_snaps_per_dir, is
// 100).
inline constexpr std::size_t kMaxSnapshotsPerSubvolume = 100;

}  // namespace gpuhub::storage
