#include "http/storage_reconciler.h"

#include <spdlog/spdlog.h>

#include <set>

#include "engine/storage.h"
#include "rentals/limits.h"

namespace gpuhub::http {
namespace {

constexpr std::int64_t kBytesPerTb = rentals::kBytesPerTb;

TimestampMicros WallNow() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Ceph refused the request itself: retrying the same request cannot help.
bool Permanent(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
    case StatusCode::kResourceExhausted:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::map<std::string, std::unique_ptr<storage::CephFs>> CephClientsOf(
    const std::vector<CephRegionConfig>& regions) {
  std::map<std::string, std::unique_ptr<storage::CephFs>> out;
  for (const auto& r : regions) {
    storage::CephConfig c;
    c.conf_path = r.ceph_conf;
    c.name = r.ceph_name;
    c.keyring_path = r.ceph_keyring;
    c.fs_name = r.cephfs;
    out.emplace(r.region, std::make_unique<storage::CephFs>(std::move(c)));
  }
  return out;
}

StorageReconciler::StorageReconciler(
    engine::Engine& engine, const RegistrySealer& sealer,
    std::map<std::string, std::unique_ptr<storage::CephFs>> regions,
    StorageReconcilerOptions options)
    : engine_(engine), sealer_(sealer), regions_(std::move(regions)), options_(options) {}

StorageReconciler::~StorageReconciler() { Stop(); }

void StorageReconciler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void StorageReconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StorageReconciler::Wake() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    woken_ = true;
  }
  wake_.notify_all();
}

std::optional<CephRegionStatus> StorageReconciler::RegionStatus(const std::string& region) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = status_.find(region);
  if (it == status_.end()) return std::nullopt;
  return it->second;
}

void StorageReconciler::Loop() {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      woken_ = false;
    }
    const int steps = Pass();
    std::unique_lock<std::mutex> lock(mutex_);
    // Steps done: more may follow from them (a ready volume's clients): go again at once.
    if (steps == 0) {
      wake_.wait_for(lock, options_.interval, [&] { return stopping_ || woken_; });
    }
    if (stopping_) return;
  }
}

bool StorageReconciler::Probe(const std::string& region, storage::CephFs& ceph, bool force) {
  const std::optional<CephRegionStatus> last = RegionStatus(region);
  const bool stale =
      !last || WallNow() - last->at >=
                   std::chrono::duration_cast<std::chrono::microseconds>(options_.status_interval)
                       .count();
  if (!force && !stale) return last->reachable;
  // Forced (the region has work): the health alone says whether to go on; the pool size is
  // re-read every status_interval.
  CephRegionStatus s;
  s.at = stale ? WallNow() : last->at;
  auto health = ceph.Health();
  if (health.ok()) {
    s.reachable = true;
    s.health = health->status;
    s.checks = health->checks;
    if (!stale && last->pool_size > 0) {
      s.pool_size = last->pool_size;
    } else if (auto size = ceph.DataPoolSize(); size.ok()) {
      s.pool_size = *size;
    }
  } else {
    s.error = health.status().message();
  }
  const bool was = last.has_value() && last->reachable;
  if (was != s.reachable) {
    spdlog::info("event=ceph_region region={} reachable={} health={} error=\"{}\"", region,
                 s.reachable, s.health, s.error);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  status_[region] = s;
  return s.reachable;
}

int StorageReconciler::Pass() {
  if (engine_.role() != engine::EngineRole::kWriter) return 0;
  auto work = engine_.ExecuteSync<rentals::CephWork>([](engine::Txn& txn) {
    return Result<rentals::CephWork>(engine::ReadCephWork(txn, rentals::kMaxCephWorkPerPass));
  });
  if (!work.ok()) {
    spdlog::warn("event=ceph_work_read_failed error=\"{}\"", work.status().ToString());
    return 0;
  }
  std::set<std::string> busy;
  for (const auto& w : work->volumes) busy.insert(w.region);
  for (const auto& w : work->snapshots) busy.insert(w.region);
  std::map<std::string, bool> reachable;
  for (auto& [region, ceph] : regions_) {
    // A region with work is probed on every pass (a down cluster is noticed at once); the others
    // every status_interval (the pool size and health the API shows).
    reachable[region] = Probe(region, *ceph, busy.count(region) > 0);
  }
  int steps = 0;
  for (const auto& w : work->volumes) {
    auto it = regions_.find(w.region);
    if (it == regions_.end() || !reachable[w.region]) continue;  // waits: stays pending
    steps += Volume(*it->second, w);
  }
  for (const auto& w : work->snapshots) {
    auto it = regions_.find(w.region);
    if (it == regions_.end() || !reachable[w.region]) continue;
    steps += Snapshot(*it->second, w);
  }
  return steps;
}

void StorageReconciler::Report(const char* what, std::int64_t id,
                               std::function<Status(engine::Txn&)> fn) {
  auto r = engine_.ExecuteSync<int>([&](engine::Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(fn(txn));
    return 0;
  });
  if (!r.ok()) {
    // The next pass sees the same work and repeats the (idempotent) step.
    spdlog::warn("event=ceph_report_failed what={} id={} error=\"{}\"", what, id,
                 r.status().ToString());
  }
}

void StorageReconciler::Fail(const rentals::CephVolumeWork& w, const char* step,
                             const Status& error) {
  spdlog::warn("event=ceph_step_failed volume={} step={} error=\"{}\"", w.volume_id, step,
               error.ToString());
  if (!Permanent(error) || !(w.create || w.clone)) return;
  const std::string why = std::string(step) + ": " + error.message();
  Report("failed", w.volume_id, [&](engine::Txn& txn) {
    return engine::ReportCephFailed(txn, w.volume_id, why);
  });
}

bool StorageReconciler::ReportInfo(storage::CephFs& ceph, const rentals::CephVolumeWork& w) {
  const std::string name = rentals::CephSubvolumeName(w.volume_id);
  auto info = ceph.GetSubvolumeInfo(name);
  if (!info.ok()) {
    Fail(w, "subvolume info", info.status());
    return false;
  }
  const std::int64_t wanted = w.size_tb * kBytesPerTb;
  if (info->bytes_quota != wanted) {
    // Short (a crash before a resize, or a clone that keeps its source's quota): grow it. A
    // quota larger than the volume is never made by us; it is left as Ceph has it.
    if (info->bytes_quota == 0 || info->bytes_quota < wanted) {
      Status grown = ceph.ResizeSubvolume(name, wanted);
      if (!grown.ok()) {
        Fail(w, "subvolume resize", grown);
        return false;
      }
      info->bytes_quota = wanted;
    }
  }
  const std::int64_t quota_tb = info->bytes_quota / kBytesPerTb;
  const std::string path = info->path;
  Report("ready", w.volume_id, [&](engine::Txn& txn) {
    return engine::ReportCephReady(txn, w.volume_id, path, quota_tb);
  });
  spdlog::info("event=ceph_volume_ready volume={} quota_tb={} path={}", w.volume_id, quota_tb,
               path);
  return true;
}

int StorageReconciler::Volume(storage::CephFs& ceph, const rentals::CephVolumeWork& w) {
  const std::string name = rentals::CephSubvolumeName(w.volume_id);
  int steps = 0;
  if (w.create) {
    Report("creating", w.volume_id, [&](engine::Txn& txn) {
      return engine::ReportCephCreating(txn, w.volume_id);
    });
    Status made = ceph.CreateSubvolume(name, w.size_tb * kBytesPerTb);
    // conflict: it exists (made by us before a crash, its quota untouched): read back below.
    if (!made.ok() && made.code() != StatusCode::kConflict) {
      Fail(w, "subvolume create", made);
      return 0;
    }
    return ReportInfo(ceph, w) ? 1 : 0;
  }
  if (w.clone) {
    auto status = ceph.GetCloneStatus(name);
    if (!status.ok() && status.status().code() == StatusCode::kNotFound) {
      Status started = ceph.CloneSnapshot(w.clone_subvolume, w.clone_snapshot, name);
      if (!started.ok() && started.code() != StatusCode::kConflict) {
        Fail(w, "snapshot clone", started);
        return 0;
      }
      return 1;  // followed on the next passes
    }
    if (!status.ok()) {
      Fail(w, "clone status", status.status());
      return 0;
    }
    if (status->state == "failed" || status->state == "canceled") {
      Fail(w, "clone", Status::FailedPrecondition("the clone " + status->state + ": " +
                                                  status->failure));
      return 1;
    }
    if (!status->done()) return 0;  // pending / in-progress: the next pass looks again
    ReportInfo(ceph, w);
    return 1;
  }
  if (w.resize) {
    Status grown = ceph.ResizeSubvolume(name, w.size_tb * kBytesPerTb);
    if (grown.ok() && ReportInfo(ceph, w)) {
      ++steps;
    } else if (!grown.ok()) {
      Fail(w, "subvolume resize", grown);
    }
  }
  for (const auto& [rental, read_only] : w.authorize) {
    const std::string client = rentals::CephClientName(w.volume_id, rental);
    auto key = ceph.Authorize(client, w.path,
                              read_only ? storage::Access::kReadOnly : storage::Access::kReadWrite);
    if (!key.ok()) {
      Fail(w, "authorize", key.status());
      continue;
    }
    ++steps;
    rentals::CephClient c;
    c.rental_id = rental;
    c.read_only = read_only;
    c.sealed_key = sealer_.Seal(RegistryAuth{client, *key, ""});
    Report("client", w.volume_id, [&](engine::Txn& txn) {
      return engine::ReportCephClient(txn, w.volume_id, c);
    });
    spdlog::info("event=ceph_client_authorized volume={} rental={} client={} access={}",
                 w.volume_id, rental, client, read_only ? "r" : "rw");
  }
  for (rentals::RentalId rental : w.deauthorize) {
    const std::string client = rentals::CephClientName(w.volume_id, rental);
    Status gone = ceph.Deauthorize(client);
    if (!gone.ok()) {
      Fail(w, "deauthorize", gone);
      continue;
    }
    ++steps;
    Report("client_removed", w.volume_id, [&](engine::Txn& txn) {
      return engine::ReportCephClientRemoved(txn, w.volume_id, rental);
    });
    spdlog::info("event=ceph_client_removed volume={} rental={} client={}", w.volume_id, rental,
                 client);
  }
  if (w.remove) {
    Status gone = ceph.RemoveSubvolume(name);
    if (!gone.ok()) {
      Fail(w, "subvolume remove", gone);
    } else {
      ++steps;
      Report("removed", w.volume_id, [&](engine::Txn& txn) {
        return engine::ReportCephRemoved(txn, w.volume_id);
      });
      spdlog::info("event=ceph_volume_removed volume={}", w.volume_id);
    }
  }
  return steps;
}

int StorageReconciler::Snapshot(storage::CephFs& ceph, const rentals::CephSnapshotWork& w) {
  const std::string snap = rentals::CephSnapshotName(w.snapshot_id);
  Status s = w.take ? ceph.CreateSnapshot(w.subvolume, snap)
                    : ceph.RemoveSnapshot(w.subvolume, snap);
  if (!s.ok()) {
    spdlog::warn("event=ceph_snapshot_failed snapshot={} take={} error=\"{}\"", w.snapshot_id,
                 w.take, s.ToString());
    return 0;
  }
  Report("snapshot", w.snapshot_id, [&](engine::Txn& txn) {
    return engine::ReportCephSnapshot(txn, w.snapshot_id, w.remove);
  });
  return 1;
}

}  // namespace gpuhub::http
