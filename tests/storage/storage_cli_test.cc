// `gpuhub volumes ...`, `gpuhub snapshots ...`, `gpuhub admin storage-hosts ...` and the storage
// flags of `gpuhub rentals` against a real server: exit codes (0 ok, 2 bad input or any 4xx naming
// the field, 1 unreachable), the figures they print, the delete confirmation. SQLite (the CLI holds
// no state).
#include <gtest/gtest.h>

#include "cli_fixture.h"

namespace gpuhub::testing {
namespace {

using StorageCliTest = CliFixture;

TEST_F(StorageCliTest, VolumesAndSnapshotsFromTheCommandLine) {
  for (int i = 1; i <= 3; ++i) {
    auto host = As(admin_, {"admin", "storage-hosts", "add", "--region", "DFW-1", "--capacity-tb",
                            "100", "--hostname", "dfw1-ceph-" + std::to_string(i)});
    ASSERT_EQ(host.exit_code, 0) << host.output;
    EXPECT_TRUE(Has(host, "dfw1-ceph-" + std::to_string(i)));
  }
  auto hosts = As(admin_, {"admin", "storage-hosts", "list", "--region", "DFW-1"});
  ASSERT_EQ(hosts.exit_code, 0) << hosts.output;
  EXPECT_TRUE(Has(hosts, "dfw1-ceph-3"));
  ASSERT_EQ(As(admin_, {"admin", "nodes", "add", "--gpu", "H100 SXM", "--region", "DFW-1"})
                .exit_code,
            0);
  ASSERT_EQ(client_->Call("POST", "/v1/admin/credits",
                          {{"username", "alice"}, {"amount", "2000"}, {"currency", "USD"},
                           {"reason", "cli test"}},
                          admin_)
                .status,
            201);

  // A rental with 2 TB of extra NVMe: the quote shows the line, the order pays it.
  auto quote = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "1", "--term",
                          "week", "--extra-nvme-tb", "2"},
                         "");
  ASSERT_EQ(quote.exit_code, 0) << quote.output;
  EXPECT_TRUE(Has(quote, "(2 TB extra x 2.10)")) << quote.output;
  EXPECT_TRUE(Has(quote, "479.20")) << quote.output;  // 475 + 2 x 2.10
  auto rented = As(alice_, {"rentals", "create", "--gpu", "H100 SXM", "--count", "1", "--term",
                            "month", "--region", "DFW-1", "--extra-nvme-tb", "2", "--json"});
  ASSERT_EQ(rented.exit_code, 0) << rented.output;
  std::string rental = std::to_string(json::parse(rented.output)["id"].get<long long>());

  auto created = As(alice_, {"volumes", "create", "--region", "DFW-1", "--size-tb", "4", "--name",
                             "ckpt", "--idempotency-key", "cli-vol-1"});
  ASSERT_EQ(created.exit_code, 0) << created.output;
  EXPECT_TRUE(Has(created, "volume 1 \"ckpt\": 4 TB in DFW-1, active (read_write), 3 replicas"))
      << created.output;
  EXPECT_TRUE(Has(created, "56.00 per 30 days")) << created.output;
  auto again = As(alice_, {"volumes", "create", "--region", "DFW-1", "--size-tb", "4", "--name",
                           "ckpt", "--idempotency-key", "cli-vol-1", "--json"});
  EXPECT_EQ(json::parse(again.output)["id"], 1);  // not created twice
  auto attached = As(alice_, {"volumes", "attach", "1", "--rental", rental});
  ASSERT_EQ(attached.exit_code, 0) << attached.output;
  EXPECT_TRUE(Has(attached, "rental " + rental + " (H100 SXM)")) << attached.output;
  auto show = As(alice_, {"rentals", "show", rental});
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_TRUE(Has(show, "+ 2000 GB extra")) << show.output;
  EXPECT_TRUE(Has(show, "volume    1 (ckpt, 4 TB, read_write)")) << show.output;
  EXPECT_TRUE(Has(show, "egress    term 1: 0.000 TB of 20.000 TB included")) << show.output;
  EXPECT_TRUE(Has(show, "month at 1,708.00 USD net (cards 1,690.00 + 2 TB extra NVMe 18.00)"))
      << show.output;
  auto nvme = As(alice_, {"rentals", "extra-nvme", rental, "--add-tb", "1"});
  ASSERT_EQ(nvme.exit_code, 0) << nvme.output;
  EXPECT_TRUE(Has(nvme, "3 TB extra NVMe; each term from the next costs 1,717.00 USD net"))
      << nvme.output;

  auto snap = As(alice_, {"snapshots", "create", "--volume", "1", "--name", "s1"});
  ASSERT_EQ(snap.exit_code, 0) << snap.output;
  EXPECT_TRUE(Has(snap, "snapshot 1 \"s1\": 4 TB in DFW-1, copy of volume 1, active (restorable)"))
      << snap.output;
  auto restored = As(alice_, {"snapshots", "restore", "1", "--size-tb", "5"});
  ASSERT_EQ(restored.exit_code, 0) << restored.output;
  EXPECT_TRUE(Has(restored, "volume 2: 5 TB in DFW-1")) << restored.output;
  EXPECT_TRUE(Has(restored, "restored from snapshot 1")) << restored.output;
  auto list = As(alice_, {"volumes", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  // 4 TB day 2 + 5 TB day 2 + the 4 TB snapshot (not listed here but billed): 1.866666 + 2.333334
  // + 0.8.
  EXPECT_TRUE(Has(list, "storage costs 5.00 USD the next day in all (13 TB)")) << list.output;

  // Bad input: exit 2 with the field named; the server's refusals too.
  auto shrink = As(alice_, {"volumes", "resize", "1", "--size-tb", "2"});
  EXPECT_EQ(shrink.exit_code, 2);
  EXPECT_TRUE(Has(shrink, "never shrink")) << shrink.output;
  auto fraction = As(alice_, {"volumes", "create", "--region", "DFW-1", "--size-tb", "1.5"});
  EXPECT_EQ(fraction.exit_code, 2) << fraction.output;
  auto region = As(alice_, {"snapshots", "restore", "1", "--region", "IAD-1"});
  EXPECT_EQ(region.exit_code, 2);
  EXPECT_TRUE(Has(region, "restores as a volume of DFW-1 only")) << region.output;
  auto both = As(alice_, {"snapshots", "create", "--volume", "1", "--rental", rental});
  EXPECT_EQ(both.exit_code, 2);
  // Deleting needs --yes, and a detached volume.
  auto unconfirmed = As(alice_, {"volumes", "delete", "2"});
  EXPECT_EQ(unconfirmed.exit_code, 2);
  EXPECT_TRUE(Has(unconfirmed, "add --yes")) << unconfirmed.output;
  auto attached_delete = As(alice_, {"volumes", "delete", "1", "--yes"});
  EXPECT_EQ(attached_delete.exit_code, 2);
  EXPECT_TRUE(Has(attached_delete, "detach it first")) << attached_delete.output;
  auto deleted = As(alice_, {"volumes", "delete", "2", "--yes"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.output;
  EXPECT_TRUE(Has(deleted, "deleted")) << deleted.output;
  // Unreachable server: exit 1.
  auto gone = RunGpuhub({"volumes", "list", "--server", "http://127.0.0.1:1", "--token", alice_},
                        "");
  EXPECT_EQ(gone.exit_code, 1) << gone.output;
}

}  // namespace
}  // namespace gpuhub::testing
