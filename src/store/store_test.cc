#include "store/store.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>

namespace gpuhub::store {
namespace {

// A fresh database per test: a temp SQLite file, or a new PostgreSQL database in the test cluster.
std::string FreshDatabase(const std::string& backend) {
  static std::mt19937_64 rng(std::random_device{}());
  std::string name =
      "gpuhub_store_test_" + std::to_string(::getpid()) + "_" + std::to_string(rng() % 1000000000);
  if (backend == "sqlite") {
    auto dir = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(dir);
    return "sqlite:" + (dir / "test.db").string();
  }
  const char* base = std::getenv("GPUHUB_TEST_PG_URL");
  if (!base || !*base) return "";
  PGconn* conn = PQconnectdb(base);
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PGresult* r = PQexec(conn, ("CREATE DATABASE " + name).c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
  std::string url = base;
  auto slash = url.rfind('/');
  auto query = url.find('?', slash);
  return url.substr(0, slash + 1) + name + (query == std::string::npos ? "" : url.substr(query));
}

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
