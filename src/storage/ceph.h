// The server's client of a region's Ceph cluster: CephFS subvolumes (a network volume each, its
// quota = its size), their snapshots and clones (a restore), cephx clients restricted to one
// subvolume's path (an attachment), the data pool's replica count and the cluster's health.
//
// It drives the `ceph` CLI through argv (core/process.h: never a shell) with --conf, --name,
// --keyring and --format json, so the server needs no librados at build time. Every name and
// path is checked against a strict charset before it reaches argv. Each call blocks for up to
// CephConfig::timeout: it belongs to a storage reconciler off the engine's writer (DESIGN.md),
// never to a command of the writer itself.
//
// Errors keep Ceph's own words ("ceph fs subvolume info: Error ENOENT: subvolume 'v1' does not
// exist") and map Ceph's errno (the CLI's exit status) to codes: ENOENT not_found, EEXIST
// conflict, ENOTEMPTY/EBUSY/ENOTSUP failed_precondition, EINVAL invalid_argument, EAGAIN,
// ETIMEDOUT and a mon or mgr that does not answer within the timeout unavailable (retry later),
// anything else internal. Thread-safe: each call runs its own process; CephFs holds no state but
// its configuration.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/process.h"
#include "core/status.h"
#include "storage/limits.h"

namespace gpuhub::storage {

struct CephConfig {
  std::string ceph_binary = "ceph";  // looked up in PATH without a '/'
  std::string conf_path;             // the cluster's ceph.conf (mon addresses)
  std::string name = "client.admin";  // the cephx entity the server acts as
  std::string keyring_path;          // its key (0600 on the server)
  std::string fs_name;               // the CephFS volume holding the subvolumes ("vols")
  std::chrono::milliseconds timeout = kCephCommandTimeout;
  std::chrono::seconds connect_timeout = kCephConnectTimeout;
};

enum class Access { kReadWrite, kReadOnly };

struct SubvolumeInfo {
  std::int64_t bytes_quota = 0;  // 0: no quota (Ceph says "infinite")
  std::int64_t bytes_used = 0;
  std::string path;       // "/volumes/_nogroup/v1/<uuid>": what a client mounts (-r PATH)
  std::string state;      // "complete", "pending"/"in-progress" (a clone), "snapshot-retained"
  std::string data_pool;  // "cephfs.vols.data"
};

struct SnapshotInfo {
  std::string created_at;  // as Ceph prints it, "2026-12-04 18:15:00.430916" (UTC)
  std::string data_pool;
  bool has_pending_clones = false;
  // Ceph 16.2's `snapshot info` does not report the snapshot's size: billing has to use the
  // volume's size (docs/storage.md).
};

struct CloneStatus {
  std::string state;    // "pending", "in-progress", "complete", "failed", "canceled"
  std::string failure;  // Ceph's reason when failed ("errno 28: ..."), else empty
  bool done() const { return state == "complete"; }
};

struct CephHealth {
  std::string status;               // "HEALTH_OK", "HEALTH_WARN", "HEALTH_ERR"
  std::vector<std::string> checks;  // "OSD_DOWN: 1 osds down", in Ceph's order
};

// A subvolume, snapshot or cephx client id: 1..kMaxCephNameBytes of [A-Za-z0-9_.-], starting with
// a letter or digit (so it can never read as an option). `what` names it in the message.
Status ValidateCephName(std::string_view what, std::string_view name);
// A path inside the file system: absolute, components of the name charset, no "." or "..".
Status ValidateCephPath(std::string_view path);

// Runs one program with a deadline (core's RunProcess with kMaxCephOutputBytes by default; a test
// gives a fake that records argv and answers).
using CephRunner = std::function<Result<ProcessResult>(const std::vector<std::string>& argv,
                                                       std::chrono::milliseconds timeout)>;

// The pure parts, exposed for tests.
namespace ceph_internal {
// ceph --conf C --name N --keyring K --connect-timeout S --format json ARGS...
std::vector<std::string> Argv(const CephConfig& config, const std::vector<std::string>& args);
// The Status of a failed command: exit status = Ceph's errno, stderr = Ceph's words.
Status MapError(const std::vector<std::string>& args, const ProcessResult& result);
Result<SubvolumeInfo> ParseSubvolumeInfo(const std::string& json);
Result<SnapshotInfo> ParseSnapshotInfo(const std::string& json);
Result<CloneStatus> ParseCloneStatus(const std::string& json);
Result<CephHealth> ParseHealth(const std::string& json);
Result<std::vector<std::string>> ParseNames(const std::string& json);  // [{"name": ...}]
Result<std::string> ParseAuthKey(const std::string& json);            // [{"key": ...}]
Result<int> ParsePoolSize(const std::string& json);                    // {"size": 3}
}  // namespace ceph_internal

class CephFs {
 public:
  explicit CephFs(CephConfig config);
  CephFs(CephConfig config, CephRunner runner);

  // A new subvolume with a quota of `bytes` (1..kMaxSubvolumeBytes). conflict when one of that
  // name exists (Ceph's own create would silently reset the existing one's quota): a reconciler
  // that may have created it before a crash reads GetSubvolumeInfo instead.
  Status CreateSubvolume(const std::string& name, std::int64_t bytes);
  // Grows the quota to `bytes`. Never shrinks: a smaller size is invalid_argument (Ceph would
  // shrink a quota down to what is used); the same size changes nothing.
  Status ResizeSubvolume(const std::string& name, std::int64_t bytes);
  Result<SubvolumeInfo> GetSubvolumeInfo(const std::string& name);
  Result<bool> SubvolumeExists(const std::string& name);
  // Removes the subvolume with all its snapshots (each `snapshot rm --force`, then `subvolume rm
  // --force`); a subvolume kept for its retained snapshots goes with them. Done is done: removing
  // one that does not exist is ok. unavailable while a snapshot still feeds a clone (EAGAIN).
  Status RemoveSubvolume(const std::string& name);

  // Creating a snapshot that exists is ok (Ceph's create is idempotent and changes nothing): a
  // retry after a crash makes exactly one.
  Status CreateSnapshot(const std::string& subvolume, const std::string& snapshot);
  Result<SnapshotInfo> GetSnapshotInfo(const std::string& subvolume, const std::string& snapshot);
  Result<std::vector<std::string>> ListSnapshots(const std::string& subvolume);
  // Removing one that does not exist is ok.
  Status RemoveSnapshot(const std::string& subvolume, const std::string& snapshot);

  // Starts an asynchronous clone of the snapshot into the new subvolume `target` (same quota as
  // the source: resize it after for a larger restore). conflict when `target` exists.
  Status CloneSnapshot(const std::string& subvolume, const std::string& snapshot,
                       const std::string& target);
  Result<CloneStatus> GetCloneStatus(const std::string& target);

  // A cephx client `client.<client_id>` allowed on `path` only (read-write or read-only), its
  // key returned (secret: never log it). Called again with another access, it changes the caps
  // of the existing client (same key): read-only while unpaid, back to read-write when paid.
  Result<std::string> Authorize(const std::string& client_id, const std::string& path,
                                Access access);
  // Removes the client (its mounts lose access). Done is done: a missing client is ok.
  Status Deauthorize(const std::string& client_id);

  // The replica count (`size`) of a pool, and of the file system's first data pool.
  Result<int> PoolSize(const std::string& pool);
  Result<int> DataPoolSize();
  Result<CephHealth> Health();

  const CephConfig& config() const { return config_; }

 private:
  // Runs `ceph ... args`: stdout on success, the mapped error otherwise.
  Result<std::string> Run(const std::vector<std::string>& args);
  Status ValidateFs() const;
  CephConfig config_;
  CephRunner runner_;
};

}  // namespace gpuhub::storage
