// Select (store.h) and ReadPool (read_pool.h) on both backends.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/read_pool.h"
#include "store/store.h"
#include "store/test_databases.h"

namespace gpuhub::store {
namespace {

using Op = Condition::Op;

TEST(SelectSqlTest, BuildsCheckedSqlWithPlaceholdersInConditionOrder) {
  Select select{"market_bids",
                {"id", "status"},
                {{"customer_id", Op::kEq, std::int64_t{7}}, {"id", Op::kLt, std::int64_t{100}}},
                {},
                "id DESC",
                51};
  EXPECT_EQ(SelectSql(select, false),
            "SELECT id, status FROM market_bids WHERE customer_id = ?1 AND id < ?2 ORDER BY id "
            "DESC LIMIT 51");
  EXPECT_EQ(SelectSql(select, true),
            "SELECT id, status FROM market_bids WHERE customer_id = $1 AND id < $2 ORDER BY id "
            "DESC LIMIT 51");
  EXPECT_EQ(SelectParameters(select), (std::vector<Value>{std::int64_t{7}, std::int64_t{100}}));
  Select totals{"market_leases",
                {"provider_id", "sum(price_micros)", "count(*)", "max(id)", "min(id)"},
                {{"status", Op::kNe, std::string("active")}},
                {"provider_id"},
                "provider_id",
                0};
  EXPECT_EQ(SelectSql(totals, true),
            "SELECT provider_id, CAST(SUM(price_micros) AS BIGINT), COUNT(*), MAX(id), MIN(id) "
            "FROM market_leases WHERE status <> $1 GROUP BY provider_id ORDER BY provider_id");
}

TEST(SelectSqlDeathTest, NamesThatAreNotIdentifiersAreProgrammerErrors) {
  EXPECT_DEATH(SelectSql({"t; DROP TABLE users", {"id"}}, false), "identifier|table");
  EXPECT_DEATH(SelectSql({"t", {"id", "sum(1); --)"}}, false), "column");
  EXPECT_DEATH(SelectSql({"t", {"avg(id)"}}, false), "aggregates");
  EXPECT_DEATH(SelectSql({"t", {"id"}, {}, {}, "id; DELETE"}, false), "order_by");
  EXPECT_DEATH(SelectSql({"t", {"id"}, {}, {}, "id SIDEWAYS"}, false), "ASC or DESC");
  EXPECT_DEATH(SelectSql({"t", {"id"}, {{"id", Op::kEq, std::monostate{}}}}, false), "NULL");
}

class SelectTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = FreshDatabase(GetParam());
    if (url_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL store tests skipped";
    auto store = OpenStore(url_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    writer_ = std::move(store).value();
    ASSERT_TRUE(writer_->Migrate().ok());
  }
  // engine_meta rows "k0000".."k{n-1}" with value i % 10.
  void Fill(int n) {
    WriteBatch batch;
    for (int i = 0; i < n; ++i) {
      char name[16];
      std::snprintf(name, sizeof name, "k%04d", i);
      batch.Upsert("engine_meta", {{"name", std::string(name)}, {"value", std::int64_t{i % 10}}});
    }
    ASSERT_TRUE(writer_->Apply(batch).ok());
  }
  std::vector<std::string> Names(Store& store, const Select& select) {
    std::vector<std::string> names;
    Status s = store.Query(select, [&](const Row& row) -> Status {
      GPUHUB_ASSIGN_OR_RETURN(std::string name, row.Text(0));
      names.push_back(name);
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return names;
  }
  std::string url_;
  std::unique_ptr<Store> writer_;
};

TEST_P(SelectTest, FiltersOrdersAndLimitsWithBoundValues) {
  Fill(30);
  Select select{"engine_meta",
                {"name", "value"},
                {{"value", Op::kEq, std::int64_t{3}}, {"name", Op::kLt, std::string("k0023")}},
                {},
                "name DESC",
                2};
  EXPECT_EQ(Names(*writer_, select), (std::vector<std::string>{"k0013", "k0003"}));
  select.limit = 0;
  select.where[1].op = Op::kGe;
  EXPECT_EQ(Names(*writer_, select), (std::vector<std::string>{"k0023"}));
  // A value that looks like SQL is only a value.
  select.where = {{"name", Op::kEq, std::string("x' OR '1'='1")}};
  EXPECT_TRUE(Names(*writer_, select).empty());
}

TEST_P(SelectTest, AggregatesReadAsIntegersOnBothDatabases) {
  Fill(30);
  Select totals{"engine_meta", {"value", "count(*)", "sum(value)", "max(name)"}, {}, {"value"},
                "value DESC", 3};
  std::vector<std::string> seen;
  ASSERT_TRUE(writer_->Query(totals, [&](const Row& row) -> Status {
                 seen.push_back(std::to_string(row.Int(0).value()) + ":" +
                                std::to_string(row.Int(1).value()) + ":" +
                                std::to_string(row.Int(2).value()) + ":" + row.Text(3).value());
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"9:3:27:k0029", "8:3:24:k0028", "7:3:21:k0027"}));
  // The sum of no rows is NULL, which reads as 0.
  Select none{"engine_meta", {"sum(value)", "count(*)"}, {{"value", Op::kGt, std::int64_t{99}}}};
  int rows = 0;
  ASSERT_TRUE(writer_->Query(none, [&](const Row& row) -> Status {
                 ++rows;
                 EXPECT_TRUE(row.IsNull(0));
                 EXPECT_EQ(row.Int(0).value(), 0);
                 EXPECT_EQ(row.Int(1).value(), 0);
                 return Status::Ok();
               }).ok());
  EXPECT_EQ(rows, 1);
}

// The audit log's page (engine::AuditPageSelect: one account, id below a cursor, newest first)
// is served by audit_events_by_account (migration 25) on both databases.
TEST_P(SelectTest, TheAuditLogsPageUsesItsIndex) {
  WriteBatch batch;
  for (int i = 1; i <= 5000; ++i) {
    batch.Insert("audit_events", {{"id", std::int64_t{i}},
                                  {"at_us", std::int64_t{i}},
                                  {"account_id", std::int64_t{i % 100}},
                                  {"actor", std::string("user:1")},
                                  {"kind", std::string("sign_in")},
                                  {"remote_address", std::string("127.0.0.1")},
                                  {"user_agent", std::string("test")},
                                  {"request_id", std::string("r")},
                                  {"detail", std::string("{}")}});
  }
  ASSERT_TRUE(writer_->Apply(batch).ok());
  Select page{"audit_events",
              {"id", "at_us", "account_id", "actor", "kind", "remote_address", "user_agent",
               "request_id", "detail"},
              {{"account_id", Op::kEq, std::int64_t{7}}, {"id", Op::kLt, std::int64_t{4000}}},
              {},
              "id DESC",
              51};
  auto plan = writer_->ExplainPlan(page);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::string text;
  for (const auto& line : *plan) text += line + "\n";
  EXPECT_NE(text.find("audit_events_by_account"), std::string::npos) << text;
  // SQLite walks the index backwards (no sort). PostgreSQL, before ANALYZE has seen the table,
  // estimates a handful of rows and sorts what its bitmap scan of the index found: either way the
  // index bounds what is read.
  if (GetParam() == "sqlite") {
    EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
  }
}

TEST_P(SelectTest, ExplainShowsTheIndexThatServesALookup) {
  Fill(5000);
  Select lookup{"engine_meta", {"value"}, {{"name", Op::kEq, std::string("k0042")}}};
  auto plan = writer_->ExplainPlan(lookup);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::string text;
  for (const auto& line : *plan) text += line + "\n";
  if (GetParam() == "sqlite") {
    EXPECT_NE(text.find("SEARCH engine_meta USING INDEX"), std::string::npos) << text;
  } else {
    EXPECT_NE(text.find("Index Scan using engine_meta_pkey"), std::string::npos) << text;
  }
  Select scan{"engine_meta", {"name"}, {{"value", Op::kEq, std::int64_t{1}}}};
  plan = writer_->ExplainPlan(scan);
  ASSERT_TRUE(plan.ok());
  text.clear();
  for (const auto& line : *plan) text += line + "\n";
  EXPECT_NE(text.find(GetParam() == "sqlite" ? "SCAN engine_meta" : "Seq Scan on engine_meta"),
            std::string::npos)
      << "no index on value: " << text;
}

TEST_P(SelectTest, ThePoolSeesEveryCommittedWriteAndNeverWrites) {
  ReadPool pool(url_, 3);
  Select all{"engine_meta", {"name"}, {{"name", Op::kGe, std::string("k")}}, {}, "name"};
  EXPECT_TRUE(Names(*writer_, all).empty());
  std::vector<std::string> names;
  ASSERT_TRUE(pool.Query(all, [&](const Row&) { return Status::Ok(); }).ok());
  EXPECT_EQ(pool.open_connections(), 1u);
  Fill(3);  // committed by the writer after the pool's connection was opened
  names.clear();
  ASSERT_TRUE(pool.Query(all, [&](const Row& row) -> Status {
                    names.push_back(row.Text(0).value());
                    return Status::Ok();
                  }).ok());
  EXPECT_EQ(names, (std::vector<std::string>{"k0000", "k0001", "k0002"}));
  // A read connection refuses to write.
  auto reader = OpenReadStore(url_);
  ASSERT_TRUE(reader.ok());
  WriteBatch batch;
  batch.Upsert("engine_meta", {{"name", std::string("sneaky")}, {"value", std::int64_t{1}}});
  EXPECT_FALSE((*reader)->Apply(batch).ok());
  EXPECT_EQ(Names(*writer_, {"engine_meta", {"name"}, {{"name", Op::kEq, std::string("sneaky")}}})
                .size(),
            0u);
}

TEST_P(SelectTest, ManyThreadsShareAtMostTheirConnections) {
  Fill(200);
  ReadPool pool(url_, 2);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        int rows = 0;
        Status s = pool.Query({"engine_meta", {"name"}, {{"value", Op::kEq, std::int64_t{4}}}},
                              [&](const Row&) {
                                ++rows;
                                return Status::Ok();
                              });
        if (!s.ok() || rows != 20) ++wrong;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(pool.open_connections(), 2u);
  EXPECT_GE(pool.open_connections(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Backends, SelectTest, ::testing::Values("sqlite", "postgresql"));

TEST(ReadPoolTest, NeverCreatesAMissingSqliteDatabase) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpuhub_read_pool_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "missing.db").string();
  ReadPool pool("sqlite:" + path);
  Status s = pool.Query({"engine_meta", {"name"}}, [](const Row&) { return Status::Ok(); });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_EQ(pool.open_connections(), 0u) << "a failed open gives its slot back";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuhub::store
