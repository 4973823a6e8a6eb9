// Prepared writes by shape (store/statement_cache.h), and PostgreSQL sessions that lose them.
#include "store/statement_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "store/test_databases.h"

namespace gpuhub::store {
namespace {

Write Shape(Write::Kind kind, std::string table, std::vector<std::string> columns,
            std::size_t key_columns, std::int64_t value = 0) {
  Write w;
  w.kind = kind;
  w.table = std::move(table);
  w.columns = std::move(columns);
  w.values.assign(w.columns.size(), Value{value});
  w.key_columns = key_columns;
  return w;
}

TEST(StatementCacheTest, OneStatementPerShapeWhateverTheValues) {
  StatementCache<int> cache;
  const Write a = Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 1, 1);
  EXPECT_EQ(cache.Find(a), nullptr);
  cache.Add(a, 1);
  // The same shape with other values: the same statement.
  ASSERT_NE(cache.Find(Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 1, 99)), nullptr);
  EXPECT_EQ(*cache.Find(Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 1, 99)), 1);
  // Anything that changes the SQL is another shape.
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kInsert, "t", {"id", "x"}, 1)), nullptr);
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kUpsert, "u", {"id", "x"}, 1)), nullptr);
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kUpsert, "t", {"x", "id"}, 1)), nullptr);
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kUpsert, "t", {"id", "x", "y"}, 1)), nullptr);
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 2)), nullptr);
  EXPECT_EQ(cache.Find(Shape(Write::Kind::kUpsert, "t", {"idx"}, 1)), nullptr);
  cache.Add(Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 2), 2);
  EXPECT_EQ(*cache.Find(Shape(Write::Kind::kUpsert, "t", {"id", "x"}, 2)), 2);
  EXPECT_EQ(*cache.Find(a), 1);
  EXPECT_EQ(cache.size(), 2u);
  cache.Clear();
  EXPECT_EQ(cache.Find(a), nullptr);
}

std::int64_t MetaValue(Store& store, const std::string& name) {
  std::int64_t value = -1;
  EXPECT_TRUE(store
                  .Query({.table = "engine_meta",
                          .columns = {"value"},
                          .where = {{"name", Condition::Op::kEq, name}}},
                         [&](const Row& row) {
                           value = row.Int(0).value();
                           return Status::Ok();
                         })
                  .ok());
  return value;
}

WriteBatch Meta(const std::string& name, std::int64_t value) {
  WriteBatch batch;
  batch.Upsert("engine_meta", {{"name", name}, {"value", value}});
  batch.Insert("engine_meta", {{"name", name + "_" + std::to_string(value)}, {"value", value}});
  return batch;
}

// Statements are prepared per session: a session that was reset (the server restarted or cut it)
// has none, and the store prepares them again instead of failing every batch.
TEST(PostgresPreparedTest, ANewSessionPreparesItsStatementsAgain) {
  const std::string url = FreshDatabase("postgresql");
  if (url.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  auto store = OpenStore(url).value();
  ASSERT_TRUE(store->Migrate().ok());
  ASSERT_TRUE(store->Apply(Meta("n", 1)).ok());
  // Cut the store's session, as a database restart would.
  ASSERT_EQ(QueryOne(url,
                     "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname "
                     "= current_database() AND pid <> pg_backend_pid()"),
            "1");
  // The store notices on its next call (that call fails: its session is gone) ...
  for (int i = 0; i < 50 && store->SchemaVersion().ok(); ++i) usleep(20'000);
  // ... and its next batch runs on a new session with its statements prepared again.
  Status s = store->Apply(Meta("n", 2));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(MetaValue(*store, "n"), 2);
  EXPECT_EQ(MetaValue(*store, "n_2"), 2);

  // A writer that steps down and back up gets a new session too.
  ASSERT_TRUE(store->TryAcquireWriterLock().value());
  ASSERT_TRUE(store->ClaimWriterTerm("a", "127.0.0.1:1", "s", 1).ok());
  ASSERT_TRUE(store->Apply(Meta("n", 3)).ok());
  store->ReleaseWriterLock();
  ASSERT_TRUE(store->TryAcquireWriterLock().value());
  ASSERT_TRUE(store->ClaimWriterTerm("a", "127.0.0.1:1", "s", 2).ok());
  s = store->Apply(Meta("n", 4));
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(MetaValue(*store, "n"), 4);
  EXPECT_EQ(MetaValue(*store, "n_4"), 4);
  // A failed batch (a duplicate key) leaves the session's statements usable.
  EXPECT_FALSE(store->Apply(Meta("n", 4)).ok());
  EXPECT_EQ(MetaValue(*store, "n"), 4);
  ASSERT_TRUE(store->Apply(Meta("n", 5)).ok());
  EXPECT_EQ(MetaValue(*store, "n"), 5);
}

}  // namespace
}  // namespace gpuhub::store
