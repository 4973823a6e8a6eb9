#include "agent/disks.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/test_util.h"

namespace gpuhub::agent {
namespace {

using testing::FakeTools;
using testing::Lines;
using testing::TempDir;

const std::vector<std::string> kDevices = {"/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme2n1"};

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(InstanceDisksTest, ARentalGetsAVolumePerSlotFormattedOnceThenOpened) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  InstanceDisks disks(&luks, kDevices, dir.File("devices"));
  auto mounts = disks.Prepare({{"rental-7-1", 1}, {"rental-7-2", 2}});
  ASSERT_TRUE(mounts.ok()) << mounts.status().ToString();
  ASSERT_EQ(mounts->size(), 2u);
  EXPECT_EQ((*mounts)[0].device, "/dev/mapper/rental-7-1");
  EXPECT_EQ((*mounts)[0].target, "/data/nvme0");
  EXPECT_EQ((*mounts)[1].target, "/data/nvme1");
  EXPECT_EQ(disks.OwnerOf(1), "rental-7-1");
  EXPECT_EQ(disks.OwnerOf(0), "");
  auto calls = Lines(dir.Read("calls.log"));
  ASSERT_EQ(calls.size(), 6u);  // luksFormat, open, mkfs per volume
  EXPECT_EQ(calls[0].rfind("cryptsetup luksFormat", 0), 0u) << calls[0];
  EXPECT_NE(calls[0].find("/dev/nvme1n1"), std::string::npos);
  EXPECT_EQ(calls[5], "mkfs -q /dev/mapper/rental-7-2");
  // After a restart (or the hold ends with a payment): opened, never formatted again.
  ::unlink(dir.File("open").c_str());
  ASSERT_TRUE(disks.Prepare({{"rental-7-1", 1}}).ok());
  calls = Lines(dir.Read("calls.log"));
  EXPECT_EQ(calls[calls.size() - 2], "cryptsetup status rental-7-1");
  EXPECT_EQ(calls.back().rfind("cryptsetup open --type luks2", 0), 0u) << calls.back();
}

TEST(InstanceDisksTest, ASlotIsNeverFormattedErasedOrDiscardedUnderAnotherOwner) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  InstanceDisks disks(&luks, kDevices, dir.File("devices"));
  ASSERT_TRUE(disks.Prepare({{"rental-7-0", 0}}).ok());
  // The next rental on slot 0 before rental 7's erase and wipe: refused, nothing formatted.
  const std::size_t before = Lines(dir.Read("calls.log")).size();
  auto next = disks.Prepare({{"rental-9-1", 1}, {"rental-9-0", 0}});
  EXPECT_EQ(next.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(next.status().message().find("still holds volume rental-7-0"), std::string::npos);
  EXPECT_EQ(Lines(dir.Read("calls.log")).size(), before) << "all or nothing";
  EXPECT_EQ(disks.OwnerOf(1), "");
  // Wiping before erasing: refused.
  EXPECT_EQ(disks.Wipe({{"rental-7-0", 0}}).code(), StatusCode::kFailedPrecondition);
  // Another rental's erase of slot 0 (a late or forged action) does not touch rental 7's volume.
  ASSERT_TRUE(disks.Erase({{"rental-5-0", 0}}).ok());
  EXPECT_EQ(Lines(dir.Read("calls.log")).size(), before);
  EXPECT_TRUE(Exists(dir.File("keys/rental-7-0.key")));
  // Its own erase: luksErase, key gone, slot free; then the wipe discards the device.
  ASSERT_TRUE(disks.Erase({{"rental-7-0", 0}}).ok());
  auto calls = Lines(dir.Read("calls.log"));
  EXPECT_EQ(calls.back(), "cryptsetup luksErase --batch-mode /dev/nvme0n1");
  EXPECT_FALSE(Exists(dir.File("keys/rental-7-0.key")));
  EXPECT_EQ(disks.OwnerOf(0), "");
  ASSERT_TRUE(disks.Erase({{"rental-7-0", 0}}).ok()) << "done is done";
  ASSERT_TRUE(disks.Wipe({{"rental-7-0", 0}}).ok());
  EXPECT_EQ(Lines(dir.Read("calls.log")).back(), "blkdiscard -f /dev/nvme0n1");
  // Formatted for rental 9 now; a late wipe of rental 7 must not discard it.
  ASSERT_TRUE(disks.Prepare({{"rental-9-0", 0}}).ok());
  auto late = disks.Wipe({{"rental-7-0", 0}});
  EXPECT_EQ(late.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(late.message().find("not discarded under its new owner"), std::string::npos);
}

TEST(InstanceDisksTest, ASlotWithoutADeviceIsRefused) {
  TempDir dir;
  LuksVolumes luks(FakeTools(dir), dir.File("keys"));
  InstanceDisks disks(&luks, {"/dev/nvme0n1"}, dir.File("devices"));
  auto r = disks.Prepare({{"rental-3-4", 4}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("card slot 4 has no NVMe device"), std::string::npos);
  EXPECT_FALSE(disks.Prepare({{"Bad/Name", 0}}).ok());
}

}  // namespace
}  // namespace gpuhub::agent
