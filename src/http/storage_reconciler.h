// The storage reconciler: applies what the engine says its Ceph regions must hold (volumes as
// CephFS subvolumes, their quotas, snapshots, clones and the attachments' cephx clients) to each
// region's cluster, off the engine's writer thread, and reports every result back through engine
// commands (engine/storage.h "The storage reconciler").
//
// Contract
// - One thread. Each pass reads the work in a command of its own (engine::ReadCephWork), calls
//   Ceph (storage::CephFs: each call blocks up to its timeout, never on the writer), and reports
//   each step in a command of its own as soon as it is done. A pass runs every interval, and at
//   once after Wake() (a customer's command that made work).
// - Idempotent across a crash: a subvolume that already exists is read back, not created again
//   (ready when its quota is there, grown when it is short); a snapshot taken twice is one (Ceph's
//   create is idempotent); a clone that exists is followed, not started again; removing what is
//   gone is done. So a server SIGKILLed between a Ceph call and its report repeats the call safely.
// - Ceph down: the region's health probe fails and its work waits (the volumes stay pending);
//   nothing is lost, the next pass after it returns catches up. Only Ceph's refusals of the
//   request itself (invalid_argument, failed_precondition, permission_denied, resource_exhausted)
//   fail a volume at once; anything else is retried until the engine's ready deadline fails it.
// - Secrets: a client's key is sealed (RegistrySealer, the server's key: registry_auth.h) before
//   it reaches the engine; it is never logged. Only the writer does this work (a standby waits).
#pragma once

#include <chrono>
#include <functional>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "engine/engine.h"
#include "http/config.h"
#include "http/registry_auth.h"
#include "rentals/storage.h"
#include "storage/ceph.h"

namespace gpuhub::http {

// What a region's cluster said last (GET /v1/volumes shows it as "ceph").
struct CephRegionStatus {
  bool reachable = false;
  int pool_size = 0;      // the file system's data pool's replica count (0: unknown)
  std::string health;     // "HEALTH_OK", ...; "" when unreachable
  std::vector<std::string> checks;
  std::string error;      // why it is unreachable
  TimestampMicros at = 0;  // the wall clock when read
};

struct StorageReconcilerOptions {
  std::chrono::milliseconds interval{1000};  // kStorageReconcileIntervalMillis
  std::chrono::seconds status_interval{30};  // kCephStatusIntervalSeconds
};

class StorageReconciler {
 public:
  // One CephFs per Ceph region (rentals::CephRegion::region -> its client).
  StorageReconciler(engine::Engine& engine, const RegistrySealer& sealer,
                    std::map<std::string, std::unique_ptr<storage::CephFs>> regions,
                    StorageReconcilerOptions options = {});
  ~StorageReconciler();
  StorageReconciler(const StorageReconciler&) = delete;
  StorageReconciler& operator=(const StorageReconciler&) = delete;

  void Start();
  void Stop();  // after the step in flight; idempotent
  void Wake();  // run a pass now
  // One pass, on the caller's thread (tests, and the thread's loop): the steps it reported.
  int Pass();
  std::optional<CephRegionStatus> RegionStatus(const std::string& region) const;

 private:
  void Loop();
  // Health and pool size, re-read when older than status_interval or `force`; whether reachable.
  bool Probe(const std::string& region, storage::CephFs& ceph, bool force);
  int Volume(storage::CephFs& ceph, const rentals::CephVolumeWork& w);
  int Snapshot(storage::CephFs& ceph, const rentals::CephSnapshotWork& w);
  // Reports the subvolume's path and quota (ready, or a grown quota); false when it failed.
  bool ReportInfo(storage::CephFs& ceph, const rentals::CephVolumeWork& w);
  void Report(const char* what, std::int64_t id, std::function<Status(engine::Txn&)> fn);
  // A Ceph error on a volume: failed at once when Ceph refused the request itself.
  void Fail(const rentals::CephVolumeWork& w, const char* step, const Status& error);

  engine::Engine& engine_;
  const RegistrySealer& sealer_;
  std::map<std::string, std::unique_ptr<storage::CephFs>> regions_;
  StorageReconcilerOptions options_;
  mutable std::mutex mutex_;
  std::map<std::string, CephRegionStatus> status_;  // guarded by mutex_
  std::condition_variable wake_;
  bool woken_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

// The CephFs of each [storage.regions.<REGION>] (http/config.h).
std::map<std::string, std::unique_ptr<storage::CephFs>> CephClientsOf(
    const std::vector<CephRegionConfig>& regions);

}  // namespace gpuhub::http
