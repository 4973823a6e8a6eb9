#include "store/backup.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "store/sqlite/sqlite_store.h"
#include "store/store.h"
#include "store/test_databases.h"

namespace gpuhub::store {
namespace {

std::string Suffix() {
  static std::mt19937_64 rng(std::random_device{}());
  return std::to_string(::getpid()) + "_" + std::to_string(rng() % 1000000000);
}

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() / ("gpuhub_backup_test_" + Suffix());
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::map<std::string, std::int64_t> Meta(Store& store) {
  std::map<std::string, std::int64_t> meta;
  EXPECT_TRUE(store
                  .Scan("engine_meta", {"name", "value"}, "name",
                        [&](const Row& row) {
                          meta[row.Text(0).value()] = row.Int(1).value();
                          return Status::Ok();
                        })
                  .ok());
  return meta;
}

TEST(SchemaTablesTest, AreTheTablesOfAMigratedDatabaseInCreationOrder) {
  auto tables = SchemaTables(Migrations().back().version);
  ASSERT_GE(tables.size(), 5u);
  EXPECT_EQ(tables.front(), "engine_meta");
  EXPECT_EQ(SchemaTables(1), (std::vector<std::string>{"engine_meta", "users", "sessions",
                                                       "idempotency_keys"}));
  // Parents before children: users before every table that references it.
  auto at = [&](const std::string& t) { return std::find(tables.begin(), tables.end(), t); };
  EXPECT_LT(at("users"), at("market_leases"));
  EXPECT_LT(at("market_machines"), at("market_asks"));
  // The list is exactly what a migrated database holds (a table a migration adds is backed up).
  std::string dir = TempDir();
  auto store = SqliteStore::Open(dir + "/t.db").value();
  ASSERT_TRUE(store->Migrate().ok());
  std::set<std::string> actual;
  ASSERT_TRUE(store
                  ->Scan("sqlite_master", {"name", "type"}, "name",
                         [&](const Row& row) {
                           std::string name = row.Text(0).value();
                           if (row.Text(1).value() == "table" && name != "schema_migrations" &&
                               name.rfind("sqlite_", 0) != 0) {
                             actual.insert(name);
                           }
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(std::set<std::string>(tables.begin(), tables.end()), actual);
  std::filesystem::remove_all(dir);
}

class BackupTest : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

// source backend -> backup file -> target backend: every row comes back, the writer row does not,
// and the target is at the latest schema.
TEST_P(BackupTest, RoundTripsEveryRowIntoAnEmptyDatabase) {
  auto [from, to] = GetParam();
  std::string dir = TempDir();
  std::string source_url = FreshDatabase(from), target_url = FreshDatabase(to);
  if (source_url.empty() || target_url.empty()) {
    GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
  }
  {
    auto source = OpenStore(source_url).value();
    ASSERT_TRUE(source->Migrate().ok());
    ASSERT_TRUE(source->ClaimWriterTerm("n", "127.0.0.1:1", "s", 5).ok());
    WriteBatch batch;
    for (int i = 0; i < 12'345; ++i) {  // more than one restore transaction
      batch.Upsert("engine_meta", {{"name", "k" + std::to_string(i)}, {"value", std::int64_t{i}}});
    }
    batch.Insert("users", {{"id", std::int64_t{1}},
                           {"username", std::string("zoë")},
                           {"password_hash", std::string("$argon2id$x")},
                           {"roles", std::string("customer")},
                           {"created_at_us", std::int64_t{42}}});
    ASSERT_TRUE(source->Apply(batch).ok());
  }
  std::string file = dir + "/backup.db";
  auto made = BackupToFile(source_url, file, 1'700'000'000'000'000);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_EQ(made->schema_version, Migrations().back().version);
  EXPECT_EQ(made->rows_by_table.at("engine_meta"), 12'345);
  EXPECT_EQ(made->rows_by_table.at("users"), 1);
  EXPECT_EQ(made->rows_by_table.at("engine_writer"), 1);
  EXPECT_EQ(made->taken_at_us, 1'700'000'000'000'000);
  EXPECT_FALSE(std::filesystem::exists(file + "-wal")) << "a backup is one file";
  // It never overwrites.
  EXPECT_EQ(BackupToFile(source_url, file, 1).status().code(), StatusCode::kInvalidArgument);

  auto restored = RestoreFromFile(file, target_url);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->rows_by_table.count("engine_writer"), 0u);
  auto target = OpenStore(target_url).value();
  EXPECT_EQ(target->SchemaVersion().value(), Migrations().back().version);
  auto meta = Meta(*target);
  EXPECT_EQ(meta.size(), 12'345u);
  EXPECT_EQ(meta["k12344"], 12'344);
  std::string name;
  ASSERT_TRUE(target
                  ->Scan("users", {"username"}, "id",
                         [&](const Row& row) {
                           name = row.Text(0).value();
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(name, "zoë");
  EXPECT_EQ(target->CurrentWriter().value().term, 0) << "a restored database has no writer yet";
  // A second restore into the same (now not empty) database is refused and changes nothing.
  auto again = RestoreFromFile(file, target_url);
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("not empty"), std::string::npos);
  EXPECT_EQ(Meta(*target).size(), 12'345u);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackupTest,
                         ::testing::Values(std::pair{"sqlite", "sqlite"},
                                           std::pair{"sqlite", "postgresql"},
                                           std::pair{"postgresql", "sqlite"},
                                           std::pair{"postgresql", "postgresql"}));

TEST(BackupFileTest, RefusesWhatIsNotAGpuhubBackup) {
  std::string dir = TempDir();
  EXPECT_EQ(ReadBackupSummary(dir + "/missing.db").status().code(), StatusCode::kNotFound);
  {
    std::FILE* f = std::fopen((dir + "/text.db").c_str(), "w");
    std::fputs("hello, not a database", f);
    std::fclose(f);
  }
  auto text = ReadBackupSummary(dir + "/text.db");
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("not a gpuhub backup"), std::string::npos);
  // A gpuhub database is not a backup either (no gpuhub_backup table).
  std::string db = dir + "/live.db";
  ASSERT_TRUE(OpenStore("sqlite:" + db).value()->Migrate().ok());
  EXPECT_EQ(ReadBackupSummary(db).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RestoreFromFile(db, "sqlite:" + dir + "/t.db").status().code(),
            StatusCode::kInvalidArgument);
  // Nothing to back up.
  auto none = BackupToFile("sqlite:" + dir + "/none.db", dir + "/out.db", 1);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir + "/none.db")) << "backup must not create its source";
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.db"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuhub::store
