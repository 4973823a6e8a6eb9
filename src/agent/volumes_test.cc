#include "agent/volumes.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "agent/test_util.h"
#include "core/file.h"

namespace gpuhub::agent {
namespace {

using testing::TempDir;

NetworkVolumeSpec V() {
  NetworkVolumeSpec v;
  v.id = 7;
  v.name = "data";
  v.mount = "/mnt/data";
  v.monitors = "10.0.0.1:6789,10.0.0.2:6789,v2:ceph-mon-3.iad:3300";
  v.path = "/volumes/_nogroup/vol-7/1b4e28ba-2fa1-11d2-883f-0016d3cca427";
  v.client = "gpuhub-vol7-r3";
  v.key = "AQCwCBNrmvk9FxAAB78mRvVlZabLmAcErqJDcw==";
  return v;
}

TEST(NetworkVolumesTest, WhatTheServerSendsIsCheckedFieldByField) {
  EXPECT_TRUE(ValidateNetworkVolume(V(), true).ok());
  NetworkVolumeSpec no_key = V();
  no_key.key.clear();
  EXPECT_FALSE(ValidateNetworkVolume(no_key, true).ok());
  EXPECT_TRUE(ValidateNetworkVolume(no_key, false).ok()) << "the cache keeps no key";
  struct Case {
    const char* field;
    void (*change)(NetworkVolumeSpec&);
  };
  const Case cases[] = {
      {"id", [](NetworkVolumeSpec& v) { v.id = 0; }},
      {"name", [](NetworkVolumeSpec& v) { v.name = "Data"; }},
      {"name", [](NetworkVolumeSpec& v) { v.name = "../etc"; }},
      {"mount", [](NetworkVolumeSpec& v) { v.mount = "/etc"; }},
      {"mount", [](NetworkVolumeSpec& v) { v.mount = "/mnt/a/b"; }},
      {"mount", [](NetworkVolumeSpec& v) { v.mount = "/mnt/"; }},
      {"mount", [](NetworkVolumeSpec& v) { v.mount = "/mnt/.."; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = ""; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = "10.0.0.1"; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = "10.0.0.1:99999"; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = "-o:1"; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = "a:1,,b:2"; }},
      {"monitors", [](NetworkVolumeSpec& v) { v.monitors = "h;rm:1"; }},
      {"path", [](NetworkVolumeSpec& v) { v.path = "/"; }},
      {"path", [](NetworkVolumeSpec& v) { v.path = "/volumes/../etc"; }},
      {"path", [](NetworkVolumeSpec& v) { v.path = "/volumes/a//b"; }},
      {"path", [](NetworkVolumeSpec& v) { v.path = "/volumes/a b"; }},
      {"path", [](NetworkVolumeSpec& v) { v.path = "/other/a"; }},
      {"client", [](NetworkVolumeSpec& v) { v.client = "admin\n"; }},
      {"client", [](NetworkVolumeSpec& v) { v.client = "-n"; }},
      {"client", [](NetworkVolumeSpec& v) { v.client = "a/b"; }},
      {"key", [](NetworkVolumeSpec& v) { v.key = "AQ==\n[client.admin]"; }},
      {"key", [](NetworkVolumeSpec& v) { v.key = std::string(129, 'A'); }},
  };
  for (const auto& c : cases) {
    NetworkVolumeSpec v = V();
    c.change(v);
    Status s = ValidateNetworkVolume(v, true);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(s.message().find(std::string("bad ") + c.field), std::string::npos) << s.message();
    EXPECT_EQ(s.message().find(V().key), std::string::npos) << "never the key in a message";
  }
  std::string many;
  for (int i = 0; i < 17; ++i) many += (many.empty() ? "" : ",") + std::string("m:1");
  NetworkVolumeSpec v = V();
  v.monitors = many;
  EXPECT_FALSE(ValidateNetworkVolume(v, true).ok()) << "at most kMaxCephMonitors";
}

TEST(NetworkVolumesTest, TheMountCommandIsArgvWithTheKeyInAFile) {
  NetworkVolumeSpec v = V();
  auto argv = CephMountArgv("ceph-fuse", v, "/s/volumes/7-gpuhub-vol7-r3.keyring",
                            "/s/volumes/7-gpuhub-vol7-r3", "/s/volumes/7-gpuhub-vol7-r3.log");
  EXPECT_EQ(argv, (std::vector<std::string>{
                      "ceph-fuse", "--conf=/dev/null", "--name=client.gpuhub-vol7-r3",
                      "--keyring=/s/volumes/7-gpuhub-vol7-r3.keyring",
                      "--mon_host=10.0.0.1:6789,10.0.0.2:6789,v2:ceph-mon-3.iad:3300",
                      "--client_mountpoint=/volumes/_nogroup/vol-7/"
                      "1b4e28ba-2fa1-11d2-883f-0016d3cca427",
                      "--client_quota=true", "--client_mount_timeout=20",
                      "--log_file=/s/volumes/7-gpuhub-vol7-r3.log", "--admin_socket=",
                      "--pid_file=", "/s/volumes/7-gpuhub-vol7-r3"}));
  v.read_only = true;
  argv = CephMountArgv("ceph-fuse", v, "k", "/p", "l");
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[argv.size() - 3], "-o");
  EXPECT_EQ(argv[argv.size() - 2], "ro");
  for (const auto& a : argv) EXPECT_EQ(a.find(V().key), std::string::npos) << a;
}

TEST(NetworkVolumesTest, TheKernelsMountTableIsRead) {
  const std::string info =
      "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
      "45 27 0:40 / /s/volumes/7-gpuhub-vol7-r3 rw,nosuid,nodev,relatime shared:3 - "
      "fuse.ceph-fuse ceph-fuse rw,user_id=0,group_id=0,allow_other\n"
      "46 27 0:41 / /s/volumes/9-c ro,nosuid,nodev,relatime - fuse.ceph-fuse ceph-fuse ro\n"
      "47 27 0:42 / /s/volumes/a\\040b rw - tmpfs tmpfs rw\n"
      "48 27 0:43 / /s/volumes/9-c/deeper rw - tmpfs tmpfs rw\n"
      "49 27 0:44 / /s/volumesX/1-c rw - ceph 10.0.0.1:/ rw\n"
      "garbage line\n";
  auto m = MountsUnder(info, "/s/volumes");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m["7-gpuhub-vol7-r3"].fstype, "fuse.ceph-fuse");
  EXPECT_FALSE(m["7-gpuhub-vol7-r3"].read_only);
  EXPECT_TRUE(m["9-c"].read_only);
  EXPECT_EQ(m["a b"].point, "/s/volumes/a b");
  EXPECT_EQ(DirNamesOfLabel("7:gpuhub-vol7-r3:rw,9:c:ro,bad,0:x:rw,5:Bad:rw"),
            (std::set<std::string>{"7-gpuhub-vol7-r3", "9-c"}));
}

// The mounter's decisions with a ceph-fuse stand-in that "mounts" by appending to a mountinfo
// file (the real one is driven in tests/agent/agent_real_volumes_test.cc).
TEST(NetworkVolumesTest, MountsOnceRemountsOnAModeChangeAndUnmounts) {
  TempDir t;
  const std::string dir = t.File("volumes");
  const std::string info = t.File("mountinfo");
  std::ofstream(info) << "27 1 254:0 / / rw - ext4 /dev/vda rw\n";
  const std::string log = t.File("calls");
  // $last is the mount point; "-o ro" makes it read-only.
  const std::string fuse = t.Script(
      "ceph-fuse", "echo \"mount $*\" >> " + log + "\nopts=rw\nfor a; do last=$a; done\n"
                   "case \"$*\" in *'-o ro'*) opts=ro ;; esac\n"
                   "case \"$*\" in *fail*) echo 'ceph-fuse[7]: starting ceph client' >&2\n"
                   "  echo '2026-12-04T18:57:26.817+0000 7fe6 -1 client.4179 mds.0 rejected us' "
                   ">&2\n"
                   "  echo 'ceph-fuse[7]: ceph mount failed with (1) Operation not "
                   "permitted' >&2; exit 1 ;; esac\n"
                   "echo \"50 27 0:40 / $last $opts - fuse.ceph-fuse ceph-fuse $opts\" >> " +
                       info + "\n");
  const std::string umount = t.Script(
      "umount", "echo \"umount $*\" >> " + log + "\ngrep -v \" $1 \" " + info + " > " + info +
                    ".t; mv " + info + ".t " + info + "\n");
  NetworkVolumes volumes(fuse, umount, dir, info);
  auto point = volumes.Ensure(V());
  ASSERT_TRUE(point.ok()) << point.status().ToString();
  EXPECT_EQ(*point, dir + "/7-gpuhub-vol7-r3");
  // The key in a 0600 keyring in a 0700 directory, never in argv.
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/7-gpuhub-vol7-r3.keyring").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(*ReadFile(dir + "/7-gpuhub-vol7-r3.keyring"),
            "[client.gpuhub-vol7-r3]\n\tkey = " + V().key + "\n");
  EXPECT_EQ(ReadFile(log)->find(V().key), std::string::npos);
  // Mounted: not mounted again, even without a key (a restart from the cache).
  NetworkVolumeSpec cached = V();
  cached.key.clear();
  ASSERT_TRUE(volumes.Ensure(cached).ok());
  EXPECT_EQ(volumes.Mounted().size(), 1u);
  auto lines = Split(*ReadFile(log), '\n');
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(),
                          [](const std::string& l) { return l.rfind("mount", 0) == 0; }),
            1);
  // Read-only now: unmounted, mounted again with -o ro.
  NetworkVolumeSpec ro = V();
  ro.read_only = true;
  ASSERT_TRUE(volumes.Ensure(ro).ok());
  EXPECT_TRUE(volumes.Mounted().at("7-gpuhub-vol7-r3").read_only);
  EXPECT_NE(ReadFile(log)->find("umount " + dir + "/7-gpuhub-vol7-r3\nmount "), std::string::npos)
      << *ReadFile(log);
  // Unmounted: the keyring and the mount point go too.
  ASSERT_TRUE(volumes.Unmount("7-gpuhub-vol7-r3").ok());
  EXPECT_TRUE(volumes.Mounted().empty());
  EXPECT_NE(::access((dir + "/7-gpuhub-vol7-r3.keyring").c_str(), F_OK), 0);
  EXPECT_NE(::access((dir + "/7-gpuhub-vol7-r3").c_str(), F_OK), 0);
  // No key and no keyring: refused before ceph-fuse runs.
  auto none = volumes.Ensure(cached);
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
  // ceph-fuse's own words come back.
  NetworkVolumeSpec bad = V();
  bad.path = "/volumes/fail";
  auto failed = volumes.Ensure(bad);
  EXPECT_EQ(failed.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failed.status().message(),
            "mounting network volume 7 failed: client.4179 mds.0 rejected us; ceph mount failed "
            "with (1) Operation not permitted");
}

}  // namespace
}  // namespace gpuhub::agent
