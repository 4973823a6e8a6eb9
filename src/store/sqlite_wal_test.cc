// SQLite's write-ahead log under the engine's writer: checkpointed off the writer's thread, and
// bounded by the writer itself when nobody else checkpoints it (store/sqlite/wal_checkpointer.h).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "store/sqlite/sqlite_store.h"
#include "store/test_databases.h"

namespace gpuhub::store {
namespace {

bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class SqliteWalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url = FreshDatabase("sqlite");
    path_ = url.substr(std::string("sqlite:").size());
  }
  void TearDown() override { std::filesystem::remove_all(std::filesystem::path(path_).parent_path()); }

  std::unique_ptr<SqliteStore> Open(SqliteWalOptions wal) {
    auto store = SqliteStore::Open(path_, SqliteStore::Mode::kDatabase, wal);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return nullptr;
    EXPECT_TRUE((*store)
                    ->ExecScript("CREATE TABLE IF NOT EXISTS wal_rows (id BIGINT PRIMARY KEY, "
                                 "body TEXT NOT NULL)")
                    .ok());
    return std::move(store).value();
  }
  // `rows` rows of ~3 KiB: one 4 KiB page each.
  Status WriteRows(SqliteStore& store, int rows) {
    WriteBatch batch;
    for (int i = 0; i < rows; ++i) {
      batch.Upsert("wal_rows", {{"id", next_id_++}, {"body", std::string(3000, 'x')}});
    }
    return store.Apply(batch);
  }
  std::int64_t CountRows(Store& store) {
    std::int64_t count = -1;
    EXPECT_TRUE(store
                    .Query({.table = "wal_rows", .columns = {"count(*)"}},
                           [&](const Row& row) {
                             count = row.Int(0).value();
                             return Status::Ok();
                           })
                    .ok());
    return count;
  }
  std::uintmax_t WalBytes() const {
    std::error_code error;
    auto size = std::filesystem::file_size(path_ + "-wal", error);
    return error ? 0 : size;
  }

  std::string path_;
  std::int64_t next_id_ = 1;
};

// The checkpointer copies the WAL into the database on its own thread; once it has copied every
// frame, the writer's next commit starts the WAL over at its beginning: the WAL stays near one
// batch and the writer never checkpoints itself.
TEST_F(SqliteWalTest, TheBackgroundCheckpointerKeepsTheWalShortWithoutTheWriter) {
  auto store = Open({.checkpoint_pages = 100, .max_pages = 1'000'000, .background = true});
  ASSERT_TRUE(store);
  int most_pages = 0;
  for (int batch = 0; batch < 10; ++batch) {
    // 120 rows of one page each: past checkpoint_pages at every commit.
    const std::uint64_t runs_before = store->wal_stats().background.runs;
    ASSERT_TRUE(WriteRows(*store, 120).ok());
    const int pages = store->wal_stats().wal_pages;
    most_pages = std::max(most_pages, pages);
    ASSERT_TRUE(WaitFor([&] {
      auto stats = store->wal_stats().background;
      return stats.runs > runs_before && stats.last_wal_pages == pages &&
             stats.last_copied_pages == pages;
    })) << "batch " << batch << ": no checkpoint of all " << pages << " pages";
  }
  SqliteWalStats stats = store->wal_stats();
  EXPECT_GE(stats.background.runs, 10u);
  EXPECT_GE(stats.background.complete, 10u);
  EXPECT_EQ(stats.background.failures, 0u);
  EXPECT_EQ(stats.writer_checkpoints, 0u);
  // 1200 pages of rows went through it; it never held much more than one batch's (the b-tree's
  // inner pages come with each), and its file is reused from the start rather than grown.
  EXPECT_GT(most_pages, 120);
  EXPECT_LT(most_pages, 200);
  EXPECT_LT(WalBytes(), 200u * 4120);
  EXPECT_EQ(CountRows(*store), 1200);
  store.reset();
  // Everything committed is in the database after a close.
  auto reopened = Open({});
  ASSERT_TRUE(reopened);
  EXPECT_EQ(CountRows(*reopened), 1200);
}

// Nobody else checkpoints (the checkpointer lags, or cannot open the file): the writer does,
// once the WAL reaches max_pages, so the file stays bounded whatever the write rate.
TEST_F(SqliteWalTest, WithoutTheCheckpointerTheWriterBoundsTheWalItself) {
  auto store = Open({.checkpoint_pages = 100, .max_pages = 300, .background = false});
  ASSERT_TRUE(store);
  int most_pages = 0;
  for (int batch = 0; batch < 40; ++batch) {
    ASSERT_TRUE(WriteRows(*store, 50).ok());
    most_pages = std::max(most_pages, store->wal_stats().wal_pages);
  }
  SqliteWalStats stats = store->wal_stats();
  EXPECT_EQ(stats.background.runs, 0u);
  // ~2000 pages through a WAL of at most 300 + one batch: checkpoints of the writer's own.
  EXPECT_GE(stats.writer_checkpoints, 4u);
  EXPECT_EQ(stats.writer_checkpoint_failures, 0u);
  EXPECT_LT(most_pages, 300 + 60);
  EXPECT_LT(WalBytes(), (300u + 60) * 4120);
  EXPECT_EQ(CountRows(*store), 2000);
}

// A reader in the middle of a long read holds the pages of its snapshot: the writer's own
// checkpoint waits for it (within the busy timeout) instead of failing the commit, and completes
// once the reader is done. Commits never fail for a checkpoint.
TEST_F(SqliteWalTest, TheWritersCheckpointWaitsForAReaderAndTheCommitStillSucceeds) {
  auto store = Open({.checkpoint_pages = 100, .max_pages = 200, .background = true});
  ASSERT_TRUE(store);
  ASSERT_TRUE(WriteRows(*store, 20).ok());
  auto reader = SqliteStore::Open(path_, SqliteStore::Mode::kReader).value();
  std::atomic<bool> reading{false};
  std::int64_t seen = 0;
  std::thread long_read([&] {
    // The read transaction stays open while the callback runs (the statement is mid-scan).
    (void)reader->Query({.table = "wal_rows", .columns = {"id"}, .order_by = "id"},
                        [&](const Row&) {
                          if (seen++ == 0) {
                            reading = true;
                            std::this_thread::sleep_for(std::chrono::milliseconds(300));
                          }
                          return Status::Ok();
                        });
  });
  ASSERT_TRUE(WaitFor([&] { return reading.load(); }));
  // Past max_pages while the reader holds its snapshot.
  for (int batch = 0; batch < 6; ++batch) ASSERT_TRUE(WriteRows(*store, 50).ok());
  long_read.join();
  EXPECT_EQ(seen, 20) << "the reader kept its snapshot";
  SqliteWalStats stats = store->wal_stats();
  EXPECT_GE(stats.writer_checkpoints, 1u);
  EXPECT_EQ(stats.writer_checkpoint_failures, 0u);
  EXPECT_EQ(CountRows(*store), 320);
}

// SIGKILL while the checkpointer copies the WAL and the writer starts it over: every batch whose
// Apply returned is in the database when it opens again, and the database is intact.
TEST_F(SqliteWalTest, AWriterKilledMidCheckpointLosesNoCommittedBatch) {
  ASSERT_TRUE(Open({}));  // creates the file and the table
  for (int round = 0; round < 5; ++round) {
    int acknowledged[2];
    ASSERT_EQ(::pipe(acknowledged), 0);
    const std::int64_t first_id = next_id_;
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(acknowledged[0]);
      auto store = SqliteStore::Open(path_, SqliteStore::Mode::kDatabase,
                                     {.checkpoint_pages = 20, .max_pages = 200});
      if (!store.ok()) ::_exit(2);
      for (std::int64_t batch = 0;; ++batch) {
        if (!WriteRows(**store, 10).ok()) ::_exit(3);
        // Acknowledged: the batch's last id, once Apply returned.
        std::int64_t last = next_id_ - 1;
        if (::write(acknowledged[1], &last, sizeof last) != sizeof last) ::_exit(4);
      }
    }
    ::close(acknowledged[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + 150 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer failed by itself: exit " << WEXITSTATUS(status);
    std::int64_t last_acknowledged = 0, value = 0;
    while (::read(acknowledged[0], &value, sizeof value) == sizeof value) last_acknowledged = value;
    ::close(acknowledged[0]);
    ASSERT_GT(last_acknowledged, first_id) << "round " << round << ": nothing was written";

    auto reopened = Open({});
    ASSERT_TRUE(reopened);
    std::string integrity;
    ASSERT_TRUE(reopened
                    ->Scan("pragma_integrity_check", {"integrity_check"}, "",
                           [&](const Row& row) {
                             integrity += row.Text(0).value();
                             return Status::Ok();
                           })
                    .ok());
    EXPECT_EQ(integrity, "ok");
    std::int64_t highest = 0;
    ASSERT_TRUE(reopened
                    ->Query({.table = "wal_rows", .columns = {"max(id)"}},
                            [&](const Row& row) {
                              highest = row.Int(0).value();
                              return Status::Ok();
                            })
                    .ok());
    // Every acknowledged batch is there (and at most the one in flight beyond it), with no gap.
    EXPECT_GE(highest, last_acknowledged) << "round " << round;
    EXPECT_LE(highest, last_acknowledged + 10) << "round " << round;
    EXPECT_EQ(CountRows(*reopened), highest);
    next_id_ = highest + 1;
  }
}

}  // namespace
}  // namespace gpuhub::store
