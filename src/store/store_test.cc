#include "store/store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "store/test_databases.h"

namespace gpuhub::store {
namespace {

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = FreshDatabase(GetParam());
    if (url_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL store tests skipped";
  }
  std::unique_ptr<Store> Open() {
    auto store = OpenStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }
  std::string url_;
};

int Latest() { return Migrations().back().version; }

TEST_P(StoreTest, CreatesAndMigratesAnEmptyDatabase) {
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_EQ(store->SchemaVersion().value(), 0);
  ASSERT_TRUE(store->Migrate().ok());
  EXPECT_EQ(store->SchemaVersion().value(), Latest());
  // Idempotent: a second start migrates nothing.
  ASSERT_TRUE(store->Migrate().ok());
  EXPECT_EQ(store->SchemaVersion().value(), Latest());
}

TEST_P(StoreTest, UpgradesAnOlderDatabaseInPlace) {
  {
    auto store = Open();
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->Migrate(1).ok());
    EXPECT_EQ(store->SchemaVersion().value(), 1);
    WriteBatch batch;
    batch.Upsert("engine_meta", {{"name", std::string("kept")}, {"value", std::int64_t{7}}});
    ASSERT_TRUE(store->Apply(batch).ok());
  }
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  EXPECT_EQ(store->SchemaVersion().value(), Latest());
  std::int64_t kept = 0;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name", "value"}, "name",
                         [&](const Row& row) {
                           if (row.Text(0).value() == "kept") kept = row.Int(1).value();
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(kept, 7);
}

TEST_P(StoreTest, RefusesADatabaseNewerThanTheBinary) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  // A migration only a later gpuhub knows.
  Migration future{9999, "future", "CREATE TABLE future_table (id BIGINT PRIMARY KEY)"};
  WriteBatch batch;
  batch.Insert("schema_migrations",
               {{"version", std::int64_t{9999}}, {"name", std::string("future")}});
  ASSERT_TRUE(store->Apply(batch).ok());
  Status s = store->Migrate();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("upgrade gpuhub"), std::string::npos);
  (void)future;
}

TEST_P(StoreTest, AppliesUpsertsInsertsAndDeletesAndScansThemBack) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  WriteBatch batch;
  batch.Upsert("engine_meta", {{"name", std::string("b")}, {"value", std::int64_t{2}}});
  batch.Upsert("engine_meta", {{"name", std::string("a")}, {"value", std::int64_t{-1}}});
  batch.Upsert("engine_meta", {{"name", std::string("b")}, {"value", std::int64_t{20}}});
  batch.Insert("engine_meta", {{"name", std::string("it's \"quoted\"; DROP TABLE users; --")},
                               {"value", std::int64_t{9'000'000'000'000'000'000}}});
  batch.Upsert("idempotency_keys",
               {{"scope", std::string("user:1")},
                {"idem_key", std::string("k1")},
                {"fingerprint", std::string("f")},
                {"status_code", std::int64_t{201}},
                {"response_body", std::string("{\"x\":\"\xc3\xa9\"}")},
                {"created_at_us", std::int64_t{5}}},
               2);
  ASSERT_TRUE(store->Apply(batch).ok());
  WriteBatch second;
  second.Delete("engine_meta", {{"name", std::string("a")}});
  second.Delete("engine_meta", {{"name", std::string("never-there")}});
  ASSERT_TRUE(store->Apply(second).ok());

  std::vector<std::pair<std::string, std::int64_t>> rows;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name", "value"}, "name",
                         [&](const Row& row) {
                           rows.emplace_back(row.Text(0).value(), row.Int(1).value());
                           return Status::Ok();
                         })
                  .ok());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::pair<std::string, std::int64_t>{"b", 20}));
  EXPECT_EQ(rows[1].first, "it's \"quoted\"; DROP TABLE users; --");
  EXPECT_EQ(rows[1].second, 9'000'000'000'000'000'000);

  std::string body;
  ASSERT_TRUE(store
                  ->Scan("idempotency_keys", {"response_body", "status_code"}, "scope, idem_key",
                         [&](const Row& row) {
                           body = row.Text(0).value();
                           EXPECT_EQ(row.Int(1).value(), 201);
                           EXPECT_FALSE(row.Int(0).ok());  // text is not an integer
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(body, "{\"x\":\"\xc3\xa9\"}");
}

// An update sets only the columns it names, on the row with its key; a key with no row is no
// error and writes nothing.
TEST_P(StoreTest, AnUpdateSetsOnlyItsColumns) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  WriteBatch batch;
  batch.Upsert("idempotency_keys", {{"scope", std::string("user:1")},
                                    {"idem_key", std::string("k1")},
                                    {"fingerprint", std::string("f")},
                                    {"status_code", std::int64_t{201}},
                                    {"response_body", std::string("{}")},
                                    {"created_at_us", std::int64_t{5}}},
               2);
  // In the batch that inserted the row, and on a key that has none.
  batch.Update("idempotency_keys", {{"scope", std::string("user:1")},
                                    {"idem_key", std::string("k1")},
                                    {"status_code", std::int64_t{409}}},
               2);
  batch.Update("idempotency_keys", {{"scope", std::string("user:2")},
                                    {"idem_key", std::string("k1")},
                                    {"status_code", std::int64_t{500}}},
               2);
  ASSERT_TRUE(store->Apply(batch).ok());
  std::vector<std::string> rows;
  ASSERT_TRUE(store
                  ->Scan("idempotency_keys",
                         {"scope", "fingerprint", "status_code", "response_body", "created_at_us"},
                         "scope, idem_key",
                         [&](const Row& row) {
                           rows.push_back(row.Text(0).value() + " " + row.Text(1).value() + " " +
                                          std::to_string(row.Int(2).value()) + " " +
                                          row.Text(3).value() + " " +
                                          std::to_string(row.Int(4).value()));
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(rows, std::vector<std::string>{"user:1 f 409 {} 5"});
}

TEST_P(StoreTest, AFailingBatchWritesNothing) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  WriteBatch first;
  first.Insert("engine_meta", {{"name", std::string("x")}, {"value", std::int64_t{1}}});
  ASSERT_TRUE(store->Apply(first).ok());
  WriteBatch bad;
  bad.Upsert("engine_meta", {{"name", std::string("y")}, {"value", std::int64_t{2}}});
  bad.Insert("engine_meta", {{"name", std::string("x")}, {"value", std::int64_t{3}}});  // duplicate
  Status s = bad.empty() ? Status::Ok() : store->Apply(bad);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  int count = 0;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name", "value"}, "name",
                         [&](const Row& row) {
                           ++count;
                           EXPECT_EQ(row.Text(0).value(), "x");
                           EXPECT_EQ(row.Int(1).value(), 1);
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(count, 1);
  // The store is still usable after the failure.
  WriteBatch good;
  good.Upsert("engine_meta", {{"name", std::string("z")}, {"value", std::int64_t{3}}});
  EXPECT_TRUE(store->Apply(good).ok());
}

// A batch is applied in order, however a backend sends it (one prepared statement per row today;
// a backend that groups rows into multi-row statements must keep this): a key written twice in a
// run of one shape keeps its last value, a delete after upserts of a key wins until the next
// upsert, and a duplicate insert deep in a long run still fails the whole batch.
TEST_P(StoreTest, LongRunsOfOneShapeKeepTheirOrderAndRepeatedKeys) {
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->Migrate().ok());
  WriteBatch batch;
  std::map<std::string, std::int64_t> expected;
  for (int i = 0; i < 150; ++i) {  // 150 upserts of 45 keys: each key again 45 rows later
    const std::string name = "k" + std::to_string(i % 45);
    batch.Upsert("engine_meta", {{"name", name}, {"value", std::int64_t{i}}});
    expected[name] = i;
  }
  batch.Delete("engine_meta", {{"name", std::string("k7")}});
  expected.erase("k7");
  for (int i = 0; i < 70; ++i) {  // a run past 64 rows, of another shape
    const std::string name = "n" + std::to_string(i);
    batch.Insert("engine_meta", {{"name", name}, {"value", std::int64_t{1000 + i}}});
    expected[name] = 1000 + i;
  }
  batch.Upsert("engine_meta", {{"name", std::string("k8")}, {"value", std::int64_t{-8}}});
  expected["k8"] = -8;
  ASSERT_TRUE(store->Apply(batch).ok());
  std::map<std::string, std::int64_t> found;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name", "value"}, "name",
                         [&](const Row& row) {
                           const std::string name = row.Text(0).value();
                           if (name[0] == 'k' || name[0] == 'n') found[name] = row.Int(1).value();
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(found, expected);

  WriteBatch bad;
  for (int i = 0; i < 100; ++i) {
    // m0..m49, then n5 (already there) at position 50, then m50..
    const std::string name = i == 50 ? std::string("n5") : "m" + std::to_string(i);
    bad.Insert("engine_meta", {{"name", name}, {"value", std::int64_t{i}}});
  }
  EXPECT_EQ(store->Apply(bad).code(), StatusCode::kUnavailable);
  int m_rows = 0;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name"}, "name",
                         [&](const Row& row) {
                           m_rows += row.Text(0).value()[0] == 'm';
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(m_rows, 0);
}

TEST_P(StoreTest, OnlyOneEngineHoldsTheWriterLock) {
  auto first = Open();
  auto second = Open();
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(first->AcquireWriterLock().ok());
  Status s = second->AcquireWriterLock();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("in use"), std::string::npos) << s.message();
  first.reset();
  EXPECT_TRUE(second->AcquireWriterLock().ok());
}

TEST_P(StoreTest, TryAcquireReportsAHeldLockAndReleaseHandsItOver) {
  auto first = Open();
  auto second = Open();
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->TryAcquireWriterLock().value(), true);
  EXPECT_EQ(first->TryAcquireWriterLock().value(), true);  // already held: still true
  EXPECT_EQ(second->TryAcquireWriterLock().value(), false);
  first->ReleaseWriterLock();  // at once (PostgreSQL: unlocked before the session is closed)
  EXPECT_EQ(second->TryAcquireWriterLock().value(), true);
  EXPECT_EQ(first->TryAcquireWriterLock().value(), false);
  // A holder that goes away (a CLI verb exiting, a server's clean shutdown) hands the lock over
  // at once: `gpuhub serve` started right after `gpuhub admin create-user` is the writer.
  second.reset();
  auto third = Open();
  ASSERT_TRUE(third);
  EXPECT_EQ(third->TryAcquireWriterLock().value(), true);
}

// Two writers that both believe they may write (the lock is not even consulted here): only the
// holder of the database's latest term commits; the other's batch is refused inside its
// transaction and writes nothing.
TEST_P(StoreTest, OnlyTheLatestWriterTermCommits) {
  auto first = Open();
  auto second = Open();
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(first->Migrate().ok());
  EXPECT_EQ(first->CurrentWriter().value().term, 0);
  auto one = first->ClaimWriterTerm("node-a", "10.0.0.1:8080", "secret-a", 111);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->term, 1);
  EXPECT_EQ(first->writer_term(), 1);
  WriteBatch a;
  a.Upsert("engine_meta", {{"name", std::string("by")}, {"value", std::int64_t{1}}});
  ASSERT_TRUE(first->Apply(a).ok());
  EXPECT_TRUE(first->CheckWriterTerm().ok());

  auto two = second->ClaimWriterTerm("node-b", "10.0.0.2:8080", "secret-b", 222);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->term, 2);
  WriteBatch stale;
  stale.Upsert("engine_meta", {{"name", std::string("by")}, {"value", std::int64_t{100}}});
  stale.Upsert("engine_meta", {{"name", std::string("stale")}, {"value", std::int64_t{1}}});
  Status refused = first->Apply(stale);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("fenced: writer term 1"), std::string::npos)
      << refused.message();
  EXPECT_FALSE(first->CheckWriterTerm().ok());
  WriteBatch b;
  b.Upsert("engine_meta", {{"name", std::string("by")}, {"value", std::int64_t{2}}});
  ASSERT_TRUE(second->Apply(b).ok());
  EXPECT_TRUE(second->CheckWriterTerm().ok());

  std::map<std::string, std::int64_t> meta;
  ASSERT_TRUE(second
                  ->Scan("engine_meta", {"name", "value"}, "name",
                         [&](const Row& row) {
                           meta[row.Text(0).value()] = row.Int(1).value();
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(meta, (std::map<std::string, std::int64_t>{{"by", 2}}));
  WriterRecord now = first->CurrentWriter().value();
  EXPECT_EQ(now.term, 2);
  EXPECT_EQ(now.node, "node-b");
  EXPECT_EQ(now.address, "10.0.0.2:8080");
  EXPECT_EQ(now.proxy_secret, "secret-b");
  EXPECT_EQ(now.since_us, 222);
  // The refused writer stays refused: claiming again is the only way back (a new term).
  EXPECT_FALSE(first->Apply(a).ok());
  ASSERT_EQ(first->ClaimWriterTerm("node-a", "10.0.0.1:8080", "s", 333).value().term, 3);
  EXPECT_TRUE(first->Apply(a).ok());
  EXPECT_FALSE(second->Apply(b).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgresql"));

// The writer lock used to be a sidecar file named after the path: a symlink or a hard link to the
// same SQLite file has another sidecar, and a second engine started on it. The file itself (its
// inode) is locked now.
TEST(SqliteWriterLockTest, ASymlinkOrAHardLinkToTheSameFileIsTheSameDatabase) {
  std::string dir = ::testing::TempDir() + "/gpuhub_lock_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/other");
  const std::string file = dir + "/gpuhub.db";
  auto first = OpenStore("sqlite:" + file);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE((*first)->AcquireWriterLock().ok());
  std::filesystem::create_symlink(file, dir + "/other/symlink.db");
  std::filesystem::create_hard_link(file, dir + "/other/hardlink.db");
  for (const char* link : {"/other/symlink.db", "/other/hardlink.db"}) {
    auto second = OpenStore("sqlite:" + dir + link);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    Status s = (*second)->AcquireWriterLock();
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << link;
    EXPECT_NE(s.message().find("in use by another gpuhub engine through another path"),
              std::string::npos)
        << s.message();
  }
  // Released with the store: a link may then take it.
  first->reset();
  auto third = OpenStore("sqlite:" + dir + "/other/hardlink.db");
  ASSERT_TRUE(third.ok());
  EXPECT_TRUE((*third)->AcquireWriterLock().ok());
  third->reset();
  std::filesystem::remove_all(dir);
}

// The writer's session is terminated (a failover, an operator, a network cut): its advisory lock
// is gone with it, another engine takes the lock and a new term, and the first engine cannot
// commit anything again, not even on a fresh connection, until it released and re-competed.
TEST(PostgresWriterTest, ATerminatedWriterSessionCannotCommitAndMustStepDown) {
  std::string url = FreshDatabase("postgresql");
  if (url.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  auto first = OpenStore(url).value();
  auto second = OpenStore(url).value();
  ASSERT_TRUE(first->TryAcquireWriterLock().value());
  ASSERT_TRUE(first->Migrate().ok());
  ASSERT_EQ(first->ClaimWriterTerm("a", "127.0.0.1:1", "s", 1).value().term, 1);
  WriteBatch w;
  w.Upsert("engine_meta", {{"name", std::string("n")}, {"value", std::int64_t{1}}});
  ASSERT_TRUE(first->Apply(w).ok());
  EXPECT_EQ(QueryOne(url,
                     "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                     "application_name = 'gpuhub writer' AND datname = current_database()"),
            "1");
  bool taken = false;
  for (int i = 0; i < 100 && !taken; ++i) {
    taken = second->TryAcquireWriterLock().value();
    if (!taken) usleep(50'000);
  }
  ASSERT_TRUE(taken);
  ASSERT_EQ(second->ClaimWriterTerm("b", "127.0.0.1:2", "s", 2).value().term, 2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    Status s = first->Apply(w);
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << attempt;
    EXPECT_FALSE(first->CheckWriterTerm().ok());
    EXPECT_FALSE(first->TryAcquireWriterLock().ok()) << "a lost lock is not silently retaken";
  }
  EXPECT_NE(first->Apply(w).message().find("step down"), std::string::npos)
      << first->Apply(w).message();
  first->ReleaseWriterLock();
  EXPECT_EQ(first->TryAcquireWriterLock().value(), false);
  EXPECT_EQ(first->CurrentWriter().value().node, "b");
  WriteBatch by_second;
  by_second.Upsert("engine_meta", {{"name", std::string("n")}, {"value", std::int64_t{2}}});
  EXPECT_TRUE(second->Apply(by_second).ok());
  EXPECT_EQ(QueryOne(url, "SELECT value FROM engine_meta WHERE name = 'n'"), "2");
}

TEST(OpenStoreTest, RejectsUnknownUrls) {
  EXPECT_EQ(OpenStore("mysql://x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("sqlite:").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("sqlite:/nonexistent-dir/x/y.db").status().code(), StatusCode::kUnavailable);
}

TEST(WriteSqlTest, BuildsPortableUpserts) {
  WriteBatch batch;
  batch.Upsert("t", {{"a", std::int64_t{1}}, {"b", std::int64_t{2}}, {"c", std::string("x")}}, 2);
  EXPECT_EQ(WriteSql(batch.writes()[0], true),
            "INSERT INTO t (a, b, c) VALUES ($1, $2, $3) ON CONFLICT (a, b) DO UPDATE SET c = "
            "excluded.c");
  batch.Delete("t", {{"a", std::int64_t{1}}});
  EXPECT_EQ(WriteSql(batch.writes()[1], false), "DELETE FROM t WHERE a = ?1");
  batch.Update("t", {{"a", std::int64_t{1}}, {"b", std::int64_t{2}}, {"c", std::string("x")}});
  EXPECT_EQ(WriteSql(batch.writes()[2], true), "UPDATE t SET b = $2, c = $3 WHERE a = $1");
}

TEST(RowTest, TypedAccessorsForLoaders) {
  Row row;
  row.values = {std::int64_t{3}, std::string("USD"), std::monostate{}, std::string("x")};
  EXPECT_EQ(*row.IntAs<int>(0), 3);
  EXPECT_TRUE(*row.IntAs<bool>(0));
  EXPECT_FALSE(*row.IntAs<bool>(2));  // NULL reads as 0
  auto only_usd = [](std::string_view s) -> Result<std::size_t> {
    if (s != "USD") return Status::InvalidArgument("not USD");
    return s.size();
  };
  EXPECT_EQ(*row.Parsed(1, only_usd), 3u);
  EXPECT_EQ(row.Parsed(3, only_usd).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(row.Parsed(0, only_usd).status().code(), StatusCode::kInternal);  // not text
  EXPECT_EQ(row.IntAs<int>(1).status().code(), StatusCode::kInternal);        // not an integer
}

TEST(ScanSqlTest, SelectsTheColumnsInOrder) {
  EXPECT_EQ(ScanSql("t", {"a", "b"}, "a"), "SELECT a, b FROM t ORDER BY a");
  EXPECT_EQ(ScanSql("t", {"a"}, ""), "SELECT a FROM t");
}

}  // namespace
}  // namespace gpuhub::store
