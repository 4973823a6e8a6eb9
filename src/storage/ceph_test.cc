#include "storage/ceph.h"

#include <gtest/gtest.h>

#include <deque>

namespace gpuhub::storage {
namespace {

using namespace ceph_internal;

// Answers each call with the next canned result and records the argv it was given.
struct FakeCeph {
  std::vector<std::vector<std::string>> calls;
  std::vector<std::chrono::milliseconds> timeouts;
  std::deque<Result<ProcessResult>> answers;

  void Answer(int exit_code, std::string out, std::string err = "") {
    answers.push_back(ProcessResult{exit_code, std::move(out), std::move(err)});
  }
  CephRunner Runner() {
    return [this](const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
      calls.push_back(argv);
      timeouts.push_back(timeout);
      if (answers.empty()) return Result<ProcessResult>(ProcessResult{0, "", ""});
      auto next = answers.front();
      answers.pop_front();
      return next;
    };
  }
  // The arguments after the common prefix (binary, --conf, --name, --keyring, --connect-timeout)
  // and before the trailing --format json.
  std::vector<std::string> Args(std::size_t i) const {
    const auto& argv = calls.at(i);
    return std::vector<std::string>(argv.begin() + 9, argv.end() - 2);
  }
};

CephConfig Config() {
  CephConfig config;
  config.ceph_binary = "/usr/bin/ceph";
  config.conf_path = "/etc/gpuhub/iad.conf";
  config.name = "client.gpuhub";
  config.keyring_path = "/etc/gpuhub/iad.keyring";
  config.fs_name = "vols";
  config.timeout = std::chrono::milliseconds(5000);
  config.connect_timeout = std::chrono::seconds(3);
  return config;
}

constexpr const char* kInfo = R"({
    "atime": "2026-12-04 18:14:49", "bytes_pcent": "0.00", "bytes_quota": 1073741824,
    "bytes_used": 4096, "data_pool": "cephfs.vols.data", "mode": 16877,
    "path": "/volumes/_nogroup/v1/acc97c8e-2bd6-4d7b-a066-45669f30eb03",
    "pool_namespace": "", "state": "complete", "type": "subvolume", "uid": 0})";

TEST(CephArgvTest, NamesTheClusterAndAsksForJson) {
  EXPECT_EQ(Argv(Config(), {"fs", "subvolume", "info", "vols", "v1"}),
            (std::vector<std::string>{"/usr/bin/ceph", "--conf", "/etc/gpuhub/iad.conf", "--name",
                                      "client.gpuhub", "--keyring", "/etc/gpuhub/iad.keyring",
                                      "--connect-timeout", "3", "fs", "subvolume", "info", "vols",
                                      "v1", "--format", "json"}));
  CephConfig defaults;
  defaults.fs_name = "vols";
  EXPECT_EQ(Argv(defaults, {"health"}),
            (std::vector<std::string>{"ceph", "--name", "client.admin", "--connect-timeout", "10",
                                      "health", "--format", "json"}))
      << "no --conf/--keyring: Ceph's own defaults";
}

TEST(CephValidateTest, StrictNamesAndPaths) {
  EXPECT_TRUE(ValidateCephName("a subvolume name", "vol-12").ok());
  EXPECT_TRUE(ValidateCephName("a subvolume name", "Vol_1.2").ok());
  EXPECT_TRUE(ValidateCephName("x", std::string(kMaxCephNameBytes, 'a')).ok());
  for (const std::string& bad :
       std::vector<std::string>{"", "a b", "a;rm -rf /", "-rf", ".hidden", "a/b", "a$(x)", "é",
                          std::string(kMaxCephNameBytes + 1, 'a'), std::string("a\0b", 3),
                          std::string("a\nb")}) {
    Status s = ValidateCephName("a subvolume name", bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find("a subvolume name"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(ValidateCephPath("/volumes/_nogroup/v1/acc97c8e-2bd6").ok());
  for (const std::string& bad :
       std::vector<std::string>{"", "/", "volumes/v1", "/volumes//v1", "/volumes/../etc", "/v1/.",
                          "/v 1", "/v1;x", "/v1/"}) {
    EXPECT_EQ(ValidateCephPath(bad).code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
  }
}

TEST(CephErrorTest, ErrnoAndCephsWordsMapToCodes) {
  const std::vector<std::string> args = {"fs", "subvolume", "info", "vols", "nope"};
  Status s = MapError(args, {2, "", "Error ENOENT: subvolume 'nope' does not exist\n"});
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(),
            "ceph fs subvolume info vols nope: Error ENOENT: subvolume 'nope' does not exist");
  EXPECT_EQ(MapError(args, {17, "", "Error EEXIST: subvolume 'c1' exists"}).code(),
            StatusCode::kConflict);
  EXPECT_EQ(MapError(args, {39, "", "Error ENOTEMPTY: subvolume 'v1' has snapshots"}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(MapError(args, {95, "", "Error ENOTSUP: operation 'clone-status' ..."}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(MapError(args, {22, "", "Error EINVAL: bad"}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MapError(args, {11, "", "Error EAGAIN: snapshot has pending clones"}).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(MapError(args, {110, "", "Error ETIMEDOUT"}).code(), StatusCode::kUnavailable);
  // The mon did not answer within --connect-timeout: Ceph 16.2 says "timed out" and exits 1.
  Status down = MapError(args, {1, "", "timed out\n"});
  EXPECT_EQ(down.code(), StatusCode::kUnavailable);
  EXPECT_EQ(down.message(), "ceph fs subvolume info vols nope: timed out");
  EXPECT_EQ(MapError(args, {1, "", "[errno 110] RADOS timed out (error connecting to the "
                                   "cluster)"})
                .code(),
            StatusCode::kUnavailable);
  // A warning line before the error: the error is what is kept.
  Status warned = MapError(args, {13, "", "2026-12-04 warning: something\nError EACCES: denied\n"});
  EXPECT_EQ(warned.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(warned.message(), "ceph fs subvolume info vols nope: Error EACCES: denied");
  EXPECT_EQ(MapError(args, {5, "", "Error EIO: boom"}).code(), StatusCode::kInternal);
}

TEST(CephParseTest, SubvolumeInfo) {
  auto info = ParseSubvolumeInfo(kInfo);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->bytes_quota, 1073741824);
  EXPECT_EQ(info->bytes_used, 4096);
  EXPECT_EQ(info->path, "/volumes/_nogroup/v1/acc97c8e-2bd6-4d7b-a066-45669f30eb03");
  EXPECT_EQ(info->state, "complete");
  EXPECT_EQ(info->data_pool, "cephfs.vols.data");
  auto unlimited = ParseSubvolumeInfo(
      R"({"bytes_quota": "infinite", "bytes_used": 0, "path": "/volumes/_nogroup/u/x",
          "state": "complete"})");
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().ToString();
  EXPECT_EQ(unlimited->bytes_quota, 0);
  auto retained = ParseSubvolumeInfo(R"({"state": "snapshot-retained", "type": "subvolume"})");
  ASSERT_TRUE(retained.ok());
  EXPECT_EQ(retained->state, "snapshot-retained");
  EXPECT_EQ(ParseSubvolumeInfo("not json").status().code(), StatusCode::kInternal);
  EXPECT_EQ(ParseSubvolumeInfo(R"({"state": "complete", "bytes_used": 0})").status().code(),
            StatusCode::kInternal);
  EXPECT_EQ(ParseSubvolumeInfo(R"({"bytes_quota": 1, "bytes_used": 0, "path": "/a;b",
                                    "state": "complete"})")
                .status()
                .code(),
            StatusCode::kInternal)
      << "a path that would not pass validation is refused here already";
  EXPECT_EQ(ParseSubvolumeInfo(std::string(100, '[') + std::string(100, ']')).status().code(),
            StatusCode::kInternal);
}

TEST(CephParseTest, SnapshotsClonesHealthKeysPools) {
  auto snap = ParseSnapshotInfo(R"({"created_at": "2026-12-04 18:15:00.430916",
      "data_pool": "cephfs.vols.data", "has_pending_clones": "yes"})");
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->created_at, "2026-12-04 18:15:00.430916");
  EXPECT_TRUE(snap->has_pending_clones);
  auto clone = ParseCloneStatus(R"({"status": {"state": "in-progress",
      "source": {"volume": "vols", "subvolume": "v1", "snapshot": "s1"}}})");
  ASSERT_TRUE(clone.ok());
  EXPECT_EQ(clone->state, "in-progress");
  EXPECT_FALSE(clone->done());
  auto failed = ParseCloneStatus(R"({"status": {"state": "failed",
      "failure": {"errno": "122", "error_msg": "Disk quota exceeded"}}})");
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->failure, "errno 122: Disk quota exceeded");
  EXPECT_EQ(ParseCloneStatus(R"({"state": "complete"})").status().code(), StatusCode::kInternal);
  auto health = ParseHealth(R"({"status":"HEALTH_WARN","checks":{"OSD_DOWN":{"severity":
      "HEALTH_WARN","summary":{"message":"1 osds down","count":1},"muted":false}},"mutes":[]})");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, "HEALTH_WARN");
  EXPECT_EQ(health->checks, std::vector<std::string>{"OSD_DOWN: 1 osds down"});
  auto names = ParseNames(R"([{"name": "s1"}, {"name": "s2"}])");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"s1", "s2"}));
  EXPECT_EQ(ParseNames(R"([{"name": "s 1"}])").status().code(), StatusCode::kInternal);
  auto key = ParseAuthKey(R"([{"entity":"client.t1","key":"AQAvAxNr9Ox6Lh==","caps":{}}])");
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "AQAvAxNr9Ox6Lh==");
  auto size = ParsePoolSize(R"({"pool":"cephfs.vols.data","pool_id":3,"size":3})");
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 3);
}

TEST(CephFsTest, CreateChecksFirstAndSetsTheQuota) {
  FakeCeph fake;
  CephFs ceph(Config(), fake.Runner());
  fake.Answer(2, "", "Error ENOENT: subvolume 'v1' does not exist");
  fake.Answer(0, "");
  ASSERT_TRUE(ceph.CreateSubvolume("v1", 1073741824).ok());
  ASSERT_EQ(fake.calls.size(), 2u);
  EXPECT_EQ(fake.Args(0), (std::vector<std::string>{"fs", "subvolume", "info", "vols", "v1"}));
  EXPECT_EQ(fake.Args(1), (std::vector<std::string>{"fs", "subvolume", "create", "vols", "v1",
                                                    "--size", "1073741824"}));
  EXPECT_EQ(fake.timeouts[1], std::chrono::milliseconds(5000));
  // It exists: conflict, and nothing is created (Ceph's create would reset its quota).
  fake.Answer(0, kInfo);
  Status again = ceph.CreateSubvolume("v1", 2147483648);
  EXPECT_EQ(again.code(), StatusCode::kConflict);
  EXPECT_EQ(fake.calls.size(), 3u);
  // Bad input never reaches argv.
  for (std::int64_t bytes : {std::int64_t{0}, std::int64_t{-1}, kMaxSubvolumeBytes + 1}) {
    EXPECT_EQ(ceph.CreateSubvolume("v2", bytes).code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ceph.CreateSubvolume("v 2", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ceph.CreateSubvolume("v;2", 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake.calls.size(), 3u);
}

TEST(CephFsTest, ResizeGrowsNeverShrinks) {
  FakeCeph fake;
  CephFs ceph(Config(), fake.Runner());
  fake.Answer(0, kInfo);  // quota 1 GiB
  Status shrink = ceph.ResizeSubvolume("v1", 536870912);
  EXPECT_EQ(shrink.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shrink.message().find("never shrink"), std::string::npos) << shrink.message();
  EXPECT_EQ(fake.calls.size(), 1u) << "only the info was asked";
  fake.Answer(0, kInfo);
  EXPECT_TRUE(ceph.ResizeSubvolume("v1", 1073741824).ok());
  EXPECT_EQ(fake.calls.size(), 2u) << "the same size changes nothing";
  fake.Answer(0, kInfo);
  fake.Answer(0, "[]");
  EXPECT_TRUE(ceph.ResizeSubvolume("v1", 2147483648).ok());
  EXPECT_EQ(fake.Args(3), (std::vector<std::string>{"fs", "subvolume", "resize", "vols", "v1",
                                                    "2147483648", "--no_shrink"}));
}

TEST(CephFsTest, RemoveTakesTheSnapshotsAndIsDoneWhenGone) {
  FakeCeph fake;
  CephFs ceph(Config(), fake.Runner());
  fake.Answer(0, R"([{"name": "s1"}, {"name": "s2"}])");
  ASSERT_TRUE(ceph.RemoveSubvolume("v1").ok());
  ASSERT_EQ(fake.calls.size(), 4u);
  EXPECT_EQ(fake.Args(1), (std::vector<std::string>{"fs", "subvolume", "snapshot", "rm", "vols",
                                                    "v1", "s1", "--force"}));
  EXPECT_EQ(fake.Args(2)[6], "s2");
  EXPECT_EQ(fake.Args(3),
            (std::vector<std::string>{"fs", "subvolume", "rm", "vols", "v1", "--force"}));
  fake.Answer(2, "", "Error ENOENT: subvolume 'v1' does not exist");
  EXPECT_TRUE(ceph.RemoveSubvolume("v1").ok());
  EXPECT_EQ(fake.calls.size(), 5u);
  // A snapshot still feeding a clone: retry later, the subvolume stays.
  fake.Answer(0, R"([{"name": "s1"}])");
  fake.Answer(11, "", "Error EAGAIN: snapshot 's1' has pending clones");
  EXPECT_EQ(ceph.RemoveSubvolume("v1").code(), StatusCode::kUnavailable);
  EXPECT_EQ(fake.calls.size(), 7u);
}

TEST(CephFsTest, AuthorizeRestrictsToThePathAndChangesAccess) {
  FakeCeph fake;
  CephFs ceph(Config(), fake.Runner());
  fake.Answer(0, R"([{"entity":"client.att-7","key":"AQBkey==","caps":{}}])");
  auto key = ceph.Authorize("att-7", "/volumes/_nogroup/v1/abc", Access::kReadWrite);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(*key, "AQBkey==");
  EXPECT_EQ(fake.Args(0), (std::vector<std::string>{"fs", "authorize", "vols", "client.att-7",
                                                    "/volumes/_nogroup/v1/abc", "rw"}));
  // Read-only now: Ceph refuses to change an existing client's caps through authorize.
  fake.Answer(22, "", "Error EINVAL: client.att-7 already has fs capabilities that differ from "
                      "those supplied. To generate a new auth key ...");
  fake.Answer(0, "");
  fake.Answer(0, R"([{"entity":"client.att-7","key":"AQBkey==","caps":{}}])");
  auto ro = ceph.Authorize("att-7", "/volumes/_nogroup/v1/abc", Access::kReadOnly);
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(*ro, "AQBkey==");
  EXPECT_EQ(fake.Args(2),
            (std::vector<std::string>{"auth", "caps", "client.att-7", "mds",
                                      "allow r fsname=vols path=/volumes/_nogroup/v1/abc", "mon",
                                      "allow r fsname=vols", "osd",
                                      "allow r tag cephfs data=vols"}));
  EXPECT_EQ(fake.Args(3), (std::vector<std::string>{"auth", "get", "client.att-7"}));
  EXPECT_EQ(ceph.Authorize("a b", "/v", Access::kReadOnly).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ceph.Authorize("a", "/v;x", Access::kReadOnly).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(fake.calls.size(), 4u);
  ASSERT_TRUE(ceph.Deauthorize("att-7").ok());
  EXPECT_EQ(fake.Args(4), (std::vector<std::string>{"auth", "rm", "client.att-7"}));
}

TEST(CephFsTest, DataPoolSizeAndTimeouts) {
  FakeCeph fake;
  CephFs ceph(Config(), fake.Runner());
  fake.Answer(0, R"([{"name":"other","data_pools":["x"]},{"name":"vols",
      "metadata_pool":"cephfs.vols.meta","data_pools":["cephfs.vols.data"]}])");
  fake.Answer(0, R"({"pool":"cephfs.vols.data","pool_id":3,"size":3})");
  auto size = ceph.DataPoolSize();
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, 3);
  EXPECT_EQ(fake.Args(1),
            (std::vector<std::string>{"osd", "pool", "get", "cephfs.vols.data", "size"}));
  // The runner's deadline passed (a mgr that never answers): unavailable, naming the command.
  fake.answers.push_back(Status::Unavailable("/usr/bin/ceph: no answer within 5 s (killed)"));
  auto health = ceph.Health();
  EXPECT_EQ(health.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(health.status().message(),
            "ceph health: /usr/bin/ceph: no answer within 5 s (killed)");
  CephConfig bad = Config();
  bad.fs_name = "vols;x";
  CephFs wrong(bad, fake.Runner());
  EXPECT_EQ(wrong.GetSubvolumeInfo("v1").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuhub::storage
