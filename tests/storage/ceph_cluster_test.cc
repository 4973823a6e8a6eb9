// The server's Ceph client (src/storage/ceph.h) against a real cluster: a throwaway one-host Ceph
// 16.2 of this test binary's own (scripts/ceph-test-cluster.sh: 1 mon, 1 mgr, 3 bluestore OSDs on
// files, 1 MDS, CephFS `vols` with pools of size 3), started once for the suite. Volumes are
// mounted with the real ceph-fuse as a cephx client restricted to the subvolume's path, as the
// agent will. Nothing is faked. Skipped, loudly, only where no cluster can start here (the
// script's exit 3: not root, the Ceph packages missing).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "core/process.h"
#include "core/strings.h"
#include "ceph_test_cluster.h"
#include "storage/ceph.h"

namespace gpuhub::storage {
namespace {

constexpr std::int64_t kGiB = 1024LL * 1024 * 1024;
constexpr std::int64_t kMiB = 1024LL * 1024;

// The cluster of this test binary, started once (SetUpTestSuite).
using Cluster = gpuhub::testing::CephTestCluster;
Cluster* cluster = nullptr;

std::string Script() { return Cluster::Script(); }

Result<ProcessResult> Exec(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  return Cluster::Exec(argv, timeout);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : "<cannot read " + path + ">";
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Writes `bytes` zero bytes to a new file in 1 MiB writes, then fsyncs and closes it; the errno
// of the first call that failed, 0 when all succeeded.
int WriteBytes(const std::string& path, std::int64_t bytes) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return errno;
  std::string chunk(kMiB, '\0');
  int error = 0;
  for (std::int64_t done = 0; done < bytes && error == 0; done += kMiB) {
    if (::write(fd, chunk.data(), chunk.size()) < 0) error = errno;
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

int WriteText(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) error = errno;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  return error;
}

template <typename T>
T Or(Result<T> result, T fallback) {
  return result.ok() ? *result : fallback;
}

// The subvolume's quota, -1 when it cannot be read.
std::int64_t Quota(CephFs& ceph, const std::string& name) {
  auto info = ceph.GetSubvolumeInfo(name);
  return info.ok() ? info->bytes_quota : -1;
}

class CephClusterTest : public ::testing::Test {
 public:
  static void SetUpTestSuite() { cluster = Cluster::Start("/tmp/ceph.XXXXXX"); }
  static void TearDownTestSuite() { Cluster::Stop(cluster); }

 protected:
  void SetUp() override {
    if (!cluster->skip.empty()) {
      GTEST_SKIP() << "\n*** NO CEPH CLUSTER: the real-Ceph suite is SKIPPED ***\n"
                   << cluster->skip;
    }
    ASSERT_TRUE(cluster->error.empty()) << cluster->error;
  }
  void TearDown() override {
    for (const auto& mount : mounts_) (void)Exec({"umount", mount}, std::chrono::seconds(60));
    mounts_.clear();
  }

  static CephConfig Config() {
    CephConfig config;
    config.conf_path = cluster->conf;
    config.name = cluster->name;
    config.keyring_path = cluster->keyring;
    config.fs_name = cluster->fs;
    config.timeout = std::chrono::seconds(60);
    config.connect_timeout = std::chrono::seconds(5);
    return config;
  }

  // Mounts `path` with ceph-fuse as client.<client_id> (its key in a 0600 keyring file of its
  // own, as the agent will keep it) on a new directory under the cluster's; the mount point.
  std::string Mount(const std::string& client_id, const std::string& key,
                    const std::string& path) {
    const std::string keyring = cluster->dir + "/" + client_id + ".keyring";
    {
      int fd = ::open(keyring.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
      EXPECT_GE(fd, 0);
      const std::string text = "[client." + client_id + "]\n\tkey = " + key + "\n";
      EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
      ::close(fd);
    }
    const std::string mount_point = cluster->dir + "/mnt/" + client_id;
    ::mkdir(mount_point.c_str(), 0755);
    auto r = Exec({"ceph-fuse", "--conf", cluster->conf, "--name", "client." + client_id,
                  "--keyring", keyring, "-r", path, mount_point},
                 std::chrono::seconds(60));
    EXPECT_TRUE(r.ok() && r->exit_code == 0)
        << (r.ok() ? r->stderr_text + r->stdout_text : r.status().message());
    EXPECT_NE(ReadFile("/proc/mounts").find(" " + mount_point + " fuse.ceph-fuse"),
              std::string::npos)
        << mount_point << " is not a ceph-fuse mount";
    mounts_.push_back(mount_point);
    return mount_point;
  }
  void Unmount(const std::string& mount_point) {
    auto r = Exec({"umount", mount_point}, std::chrono::seconds(60));
    EXPECT_TRUE(r.ok() && r->exit_code == 0);
    std::erase(mounts_, mount_point);
  }

  // Waits (bounded: 240 polls of 250 ms) until the clone `target` is complete; its last status.
  CloneStatus WaitForClone(CephFs& ceph, const std::string& target) {
    CloneStatus last;
    for (int i = 0; i < 240; ++i) {
      auto status = ceph.GetCloneStatus(target);
      EXPECT_TRUE(status.ok()) << status.status().ToString();
      if (!status.ok()) return last;
      last = *status;
      if (last.state == "complete" || last.state == "failed" || last.state == "canceled") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return last;
  }

  std::vector<std::string> mounts_;
};

TEST_F(CephClusterTest, AVolumesLifeQuotaMountSnapshotCloneResizeRemove) {
  CephFs ceph(Config());
  // Create: a 1 GiB quota on a data pool of 3 replicas.
  ASSERT_TRUE(ceph.CreateSubvolume("vol-1", kGiB).ok());
  auto info = ceph.GetSubvolumeInfo("vol-1");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->bytes_quota, kGiB);
  EXPECT_EQ(info->bytes_used, 0);
  EXPECT_EQ(info->state, "complete");
  EXPECT_TRUE(info->path.starts_with("/volumes/_nogroup/vol-1/")) << info->path;
  EXPECT_EQ(info->data_pool, "cephfs.vols.data");
  auto pool_size = ceph.DataPoolSize();
  ASSERT_TRUE(pool_size.ok()) << pool_size.status().ToString();
  EXPECT_EQ(*pool_size, 3);
  EXPECT_EQ(Or(ceph.PoolSize(info->data_pool), 0), 3);
  EXPECT_EQ(Or(ceph.SubvolumeExists("vol-1"), false), true);
  EXPECT_EQ(Or(ceph.SubvolumeExists("vol-none"), true), false);
  Status again = ceph.CreateSubvolume("vol-1", 2 * kGiB);
  EXPECT_EQ(again.code(), StatusCode::kConflict) << again.ToString();
  EXPECT_EQ(Quota(ceph, "vol-1"), kGiB) << "the existing one untouched";

  // A client restricted to the subvolume's path mounts it; a file written reads back.
  auto key = ceph.Authorize("att-1", info->path, Access::kReadWrite);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(key->size(), 40u) << "a cephx key is 16 bytes + header, base64";
  std::string mnt = Mount("att-1", *key, info->path);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(WriteText(mnt + "/before.txt", "written before the snapshot\n"), 0);
  EXPECT_EQ(ReadFile(mnt + "/before.txt"), "written before the snapshot\n");
  // The client sees only its subvolume: another path of the file system is refused to it.
  const std::string outside = cluster->dir + "/mnt/outside";
  ::mkdir(outside.c_str(), 0755);
  auto other = Exec({"ceph-fuse", "--conf", cluster->conf, "--name", "client.att-1", "--keyring",
                    cluster->dir + "/att-1.keyring", "-r", "/volumes", outside},
                   std::chrono::seconds(60));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->exit_code, 0) << "mounting /volumes with a client of one subvolume";
  if (other->exit_code == 0) mounts_.push_back(outside);

  // Snapshot (twice: exactly one), write more, clone the snapshot into a new subvolume.
  ASSERT_TRUE(ceph.CreateSnapshot("vol-1", "snap-1").ok());
  ASSERT_TRUE(ceph.CreateSnapshot("vol-1", "snap-1").ok());
  EXPECT_EQ(Or(ceph.ListSnapshots("vol-1"), std::vector<std::string>{}),
            std::vector<std::string>{"snap-1"});
  auto snap = ceph.GetSnapshotInfo("vol-1", "snap-1");
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  EXPECT_FALSE(snap->created_at.empty());
  EXPECT_EQ(ceph.GetSnapshotInfo("vol-1", "snap-none").status().code(), StatusCode::kNotFound);
  ASSERT_EQ(WriteText(mnt + "/after.txt", "written after the snapshot\n"), 0);
  ASSERT_TRUE(ceph.CloneSnapshot("vol-1", "snap-1", "vol-2").ok());
  EXPECT_EQ(ceph.CloneSnapshot("vol-1", "snap-1", "vol-2").code(), StatusCode::kConflict);
  EXPECT_EQ(ceph.CloneSnapshot("vol-1", "snap-none", "vol-3").code(), StatusCode::kNotFound);
  CloneStatus clone = WaitForClone(ceph, "vol-2");
  ASSERT_EQ(clone.state, "complete") << clone.failure;
  EXPECT_EQ(ceph.GetCloneStatus("vol-1").status().code(), StatusCode::kFailedPrecondition)
      << "vol-1 is no clone (Ceph's ENOTSUP)";
  auto restored = ceph.GetSubvolumeInfo("vol-2");
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->bytes_quota, kGiB) << "a clone keeps its source's quota";
  auto key2 = ceph.Authorize("att-2", restored->path, Access::kReadWrite);
  ASSERT_TRUE(key2.ok()) << key2.status().ToString();
  EXPECT_NE(*key2, *key);
  std::string mnt2 = Mount("att-2", *key2, restored->path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(ReadFile(mnt2 + "/before.txt"), "written before the snapshot\n");
  EXPECT_FALSE(Exists(mnt2 + "/after.txt")) << "the clone is the snapshot, not the volume now";
  EXPECT_EQ(ReadFile(mnt + "/after.txt"), "written after the snapshot\n");

  // Resize grows; a shrink is refused and changes nothing.
  ASSERT_TRUE(ceph.ResizeSubvolume("vol-1", 2 * kGiB).ok());
  EXPECT_EQ(Quota(ceph, "vol-1"), 2 * kGiB);
  Status shrink = ceph.ResizeSubvolume("vol-1", kGiB);
  EXPECT_EQ(shrink.code(), StatusCode::kInvalidArgument) << shrink.ToString();
  EXPECT_EQ(Quota(ceph, "vol-1"), 2 * kGiB);
  EXPECT_EQ(ceph.ResizeSubvolume("vol-none", 2 * kGiB).code(), StatusCode::kNotFound);

  // Read-only (an unpaid volume): the same client and key, its caps changed; after a remount it
  // reads and every write is refused (EACCES: the MDS refuses; a read-only remount would say
  // EROFS).
  auto ro = ceph.Authorize("att-1", info->path, Access::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(*ro, *key);
  Unmount(mnt);
  mnt = Mount("att-1", *ro, info->path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(ReadFile(mnt + "/before.txt"), "written before the snapshot\n");
  EXPECT_EQ(WriteText(mnt + "/unpaid.txt", "x"), EACCES);
  ASSERT_TRUE(ceph.Authorize("att-1", info->path, Access::kReadWrite).ok());
  Unmount(mnt);
  mnt = Mount("att-1", *key, info->path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(WriteText(mnt + "/paid.txt", "y"), 0) << "read-write again";

  // Remove: the clients, then the volume with its snapshot; done is done.
  Unmount(mnt);
  Unmount(mnt2);
  ASSERT_TRUE(ceph.Deauthorize("att-1").ok());
  ASSERT_TRUE(ceph.Deauthorize("att-1").ok());
  ASSERT_TRUE(ceph.Deauthorize("att-2").ok());
  ASSERT_TRUE(ceph.RemoveSubvolume("vol-1").ok());
  EXPECT_EQ(ceph.GetSubvolumeInfo("vol-1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ceph.ListSnapshots("vol-1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(ceph.RemoveSubvolume("vol-1").ok());
  EXPECT_TRUE(ceph.GetSubvolumeInfo("vol-2").ok()) << "the restored volume outlives its source";
  ASSERT_TRUE(ceph.RemoveSubvolume("vol-2").ok());
  EXPECT_EQ(Or(ceph.SubvolumeExists("vol-2"), true), false);
}

TEST_F(CephClusterTest, AFullVolumeRefusesWritesWithEdquot) {
  CephFs ceph(Config());
  ASSERT_TRUE(ceph.CreateSubvolume("vol-small", 8 * kMiB).ok());
  auto info = ceph.GetSubvolumeInfo("vol-small");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->bytes_quota, 8 * kMiB);
  auto key = ceph.Authorize("att-small", info->path, Access::kReadWrite);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  std::string mnt = Mount("att-small", *key, info->path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(WriteBytes(mnt + "/fits", 4 * kMiB), 0);
  // ceph-fuse enforces the quota (client quota = true): past 8 MiB a write fails.
  EXPECT_EQ(WriteBytes(mnt + "/too-big", 16 * kMiB), EDQUOT);
  // Grown, it takes more.
  ASSERT_TRUE(ceph.ResizeSubvolume("vol-small", 64 * kMiB).ok());
  Unmount(mnt);
  mnt = Mount("att-small", *key, info->path);
  ASSERT_FALSE(HasFailure());
  ::unlink((mnt + "/too-big").c_str());
  EXPECT_EQ(WriteBytes(mnt + "/now-fits", 16 * kMiB), 0);
  Unmount(mnt);
  ASSERT_TRUE(ceph.Deauthorize("att-small").ok());
  ASSERT_TRUE(ceph.RemoveSubvolume("vol-small").ok());
}

TEST_F(CephClusterTest, BadNamesAreRefusedBeforeArgv) {
  // A client whose ceph binary does not exist: a name that reached argv would be not_found.
  CephConfig config = Config();
  config.ceph_binary = cluster->dir + "/no-such-ceph";
  CephFs ceph(config);
  EXPECT_EQ(ceph.GetSubvolumeInfo("vol-ok").status().code(), StatusCode::kNotFound)
      << "a valid name reaches the (missing) program";
  for (const std::string& bad :
       std::vector<std::string>{"vol 1", "vol;1", "vol-1;rm -rf /", "--force", "$(id)", ""}) {
    EXPECT_EQ(ceph.CreateSubvolume(bad, kGiB).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(ceph.GetSubvolumeInfo(bad).status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(ceph.CreateSnapshot("vol-ok", bad).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(ceph.CloneSnapshot("vol-ok", "s", bad).code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(ceph.Authorize(bad, "/volumes/x", Access::kReadWrite).status().code(),
              StatusCode::kInvalidArgument)
        << bad;
    EXPECT_EQ(ceph.RemoveSubvolume(bad).code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ceph.Authorize("att", "/volumes/x y", Access::kReadWrite).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ceph.Authorize("att", "/volumes/../..", Access::kReadWrite).status().code(),
            StatusCode::kInvalidArgument);
  // And on the real cluster, nothing was made of them.
  CephFs real(Config());
  EXPECT_EQ(real.CreateSubvolume("vol 1", kGiB).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Or(real.SubvolumeExists("vol"), true), false);
}

// Last: the mon goes away and comes back.
TEST_F(CephClusterTest, WithTheMonDownCallsFailAsUnavailableThenWorkAgain) {
  CephFs ceph(Config());
  ASSERT_TRUE(ceph.CreateSubvolume("vol-outage", kGiB).ok());
  auto health = ceph.Health();
  ASSERT_TRUE(health.ok()) << health.status().ToString();
  EXPECT_TRUE(health->status == "HEALTH_OK" || health->status == "HEALTH_WARN")
      << health->status;
  auto stop = Exec({"bash", Script(), "stop-mon", cluster->dir}, std::chrono::seconds(60));
  ASSERT_TRUE(stop.ok() && stop->exit_code == 0);
  CephConfig config = Config();
  config.connect_timeout = std::chrono::seconds(3);
  config.timeout = std::chrono::seconds(30);
  CephFs down(config);
  auto info = down.GetSubvolumeInfo("vol-outage");
  EXPECT_EQ(info.status().code(), StatusCode::kUnavailable) << info.status().ToString();
  EXPECT_NE(info.status().message().find("timed out"), std::string::npos)
      << info.status().message();
  EXPECT_EQ(down.Health().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(down.CreateSubvolume("vol-while-down", kGiB).code(), StatusCode::kUnavailable);
  auto start = Exec({"bash", Script(), "start-mon", cluster->dir}, std::chrono::seconds(120));
  ASSERT_TRUE(start.ok() && start->exit_code == 0)
      << (start.ok() ? start->stderr_text : start.status().message());
  // The mgr reconnects to the restarted mon on its own; its volumes module answers again.
  Result<SubvolumeInfo> back = Status::Unavailable("not asked");
  for (int i = 0; i < 120 && !back.ok(); ++i) {
    back = down.GetSubvolumeInfo("vol-outage");
    if (!back.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->bytes_quota, kGiB);
  EXPECT_EQ(Or(down.SubvolumeExists("vol-while-down"), true), false)
      << "nothing was made while the mon was down";
  ASSERT_TRUE(down.RemoveSubvolume("vol-outage").ok());
}

}  // namespace
}  // namespace gpuhub::storage
