#include "agent/storage.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/test_util.h"
#include "core/strings.h"

namespace gpuhub::agent {
namespace {

using testing::FakeTools;
using testing::Lines;
using testing::TempDir;

TEST(LuksTest, CreateOpensFormatsWithAKeyThatStaysOnTheHost) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  auto mapped = luks.Create("rental-7", "/dev/nvme1n1");
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ(*mapped, "/dev/mapper/rental-7");
  const std::string key = dir.File("keys/rental-7.key");
  struct stat st {};
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 64);
  EXPECT_EQ(Lines(dir.Read("calls.log")),
            (std::vector<std::string>{
                "cryptsetup luksFormat --type luks2 --batch-mode --key-file " + key + " /dev/nvme1n1",
                "cryptsetup open --type luks2 --key-file " + key + " /dev/nvme1n1 rental-7",
                "mkfs -q /dev/mapper/rental-7"}));
  // Formatting twice would lose the data: refused, the key untouched.
  EXPECT_EQ(luks.Create("rental-7", "/dev/nvme1n1").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(::stat(key.c_str(), &st), 0);
}

TEST(LuksTest, EraseDestroysTheKeySlotsAndTheKeyThenDiscardWipes) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  ASSERT_TRUE(luks.Create("rental-7", "/dev/nvme1n1").ok());
  std::remove(dir.File("calls.log").c_str());
  ASSERT_TRUE(luks.Erase("rental-7", "/dev/nvme1n1").ok());
  EXPECT_EQ(Lines(dir.Read("calls.log")),
            (std::vector<std::string>{"cryptsetup status rental-7", "cryptsetup close rental-7",
                                      "cryptsetup luksErase --batch-mode /dev/nvme1n1"}));
  struct stat st {};
  EXPECT_NE(::stat(dir.File("keys/rental-7.key").c_str(), &st), 0) << "the key is gone";
  // Erasing again (a retry after a crash) runs luksErase again and succeeds.
  ASSERT_TRUE(luks.Erase("rental-7", "/dev/nvme1n1").ok());
  std::remove(dir.File("calls.log").c_str());
  ASSERT_TRUE(luks.Discard("/dev/nvme1n1").ok());
  EXPECT_EQ(dir.Read("calls.log"), "blkdiscard -f /dev/nvme1n1\n");
}

TEST(LuksTest, RefusesNamesAndDevicesThatAreNotPlain) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  EXPECT_EQ(luks.Create("../x", "/dev/nvme1n1").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(luks.Create("ok", "/etc/passwd").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(luks.Create("ok", "/dev/../etc/passwd").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(luks.Discard("/dev/sda; reboot").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dir.Read("calls.log"), "") << "nothing ran";
  // A tool that fails: its words come back.
  StorageConfig broken = FakeTools(dir);
  broken.cryptsetup = dir.Script("cryptsetup-broken",
                                 "echo 'Device /dev/nvme9n1 does not exist or access denied.' >&2; exit 4\n");
  LuksVolumes failing(broken, dir.File("keys2"));
  auto r = failing.Create("v", "/dev/nvme9n1");
  EXPECT_EQ(r.status().message(), dir.File("cryptsetup-broken") +
                                      " exited 4: Device /dev/nvme9n1 does not exist or access denied.");
  struct stat st {};
  EXPECT_NE(::stat(dir.File("keys2/v.key").c_str(), &st), 0) << "no key kept for a failed format";
}

TEST(RbdTest, MapsSnapshotsClonesWithTheClusterSettings) {
  TempDir dir;
  RbdVolumes rbd(FakeTools(dir));
  ASSERT_TRUE(rbd.Create("vol-12", 100).ok());
  auto dev = rbd.Map("vol-12");
  ASSERT_TRUE(dev.ok()) << dev.status().ToString();
  EXPECT_EQ(*dev, "/dev/rbd3");
  ASSERT_TRUE(rbd.Snapshot("vol-12", "snap-1").ok());
  ASSERT_TRUE(rbd.Clone("vol-12", "snap-1", "vol-13").ok()) << "already protected is fine";
  ASSERT_TRUE(rbd.Unmap("/dev/rbd3").ok());
  ASSERT_TRUE(rbd.Remove("vol-12").ok());
  const std::string common = "rbd --id agent -c /etc/ceph/ceph.conf ";
  EXPECT_EQ(Lines(dir.Read("calls.log")),
            (std::vector<std::string>{common + "create --size 95368 gpuhub/vol-12",
                                      common + "map gpuhub/vol-12",
                                      common + "snap create gpuhub/vol-12@snap-1",
                                      common + "snap protect gpuhub/vol-12@snap-1",
                                      common + "clone gpuhub/vol-12@snap-1 gpuhub/vol-13",
                                      common + "unmap /dev/rbd3", common + "rm gpuhub/vol-12"}));
  auto missing = rbd.Map("missing");
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing.status().message().find("No such file or directory"), std::string::npos);
  EXPECT_EQ(rbd.Snapshot("vol-12", "a@b").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rbd.Create("vol-1", 0).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuhub::agent
