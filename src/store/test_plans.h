// For the query-plan tests (tests/market/*_plan_test, tests/billing/spot_usage_load_test):
// statistics as production would have them, and what "served by an index" means on each database.
// Not for production code.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <memory>
#include <string>

#include "store/read_pool.h"
#include "store/store.h"
#include "store/test_databases.h"

namespace gpuhub::store {

// A test on a fresh, migrated database of the parameter's kind ("sqlite", "postgresql"); skipped
// when PostgreSQL is not configured. A derived SetUp calls this one first and returns when
// IsSkipped() or HasFatalFailure().
class FreshDatabaseTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    url_ = FreshDatabase(GetParam());
    if (url_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL cases skipped";
    auto opened = OpenStore(url_);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    store_ = std::move(opened).value();
    ASSERT_TRUE(store_->Migrate().ok());
  }

  std::string url_;
  std::unique_ptr<Store> store_;
};

// Accounts 1..count ("u1", "u2", ...; no password can log in) for the tables that refer to users.
inline void AddPlanTestUsers(WriteBatch& batch, int count, const std::string& roles) {
  for (int u = 1; u <= count; ++u) {
    batch.Upsert("users", {{"id", std::int64_t{u}},
                           {"username", "u" + std::to_string(u)},
                           {"password_hash", std::string("!")},
                           {"roles", roles},
                           {"created_at_us", std::int64_t{1}}});
  }
}

// ANALYZE on PostgreSQL (`database` is the test parameter: "sqlite" or "postgresql"), so that the
// planner chooses with statistics; nothing on SQLite.
inline void AnalyzeIfPostgres(const std::string& database, const std::string& url) {
  if (database != "postgresql") return;
  PGconn* conn = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PGresult* r = PQexec(conn, "ANALYZE");
  EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << PQerrorMessage(conn);
  PQclear(r);
  PQfinish(conn);
}

// Expects the plan of `select` to name `index` and neither scan a table whole nor sort; returns
// how many rows the query returns (it runs). PostgreSQL: for an owner with few rows its cheapest
// plan reads all of them through the index (a bitmap scan) and sorts those; that sort is bounded by
// the owner's rows, so it is accepted when fed by `index` unless `bounded_sort_ok` is false.
// `partial`: `index` is a partial index holding only the rows wanted, so walking all of it (SQLite
// "SCAN t USING INDEX index") is what reading them costs, and is accepted.
inline int ExpectPlanUsesIndex(const std::string& database, const std::string& url,
                               const Select& select, const std::string& index,
                               bool bounded_sort_ok = true, bool partial = false) {
  ReadPool pool(url, 1);
  auto plan = pool.ExplainPlan(select);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (!plan.ok()) return -1;
  std::string text;
  for (const auto& line : *plan) text += line + "\n";
  EXPECT_NE(text.find(index), std::string::npos) << select.table << ":\n" << text;
  if (database == "sqlite") {
    // "SCAN t" alone is a full scan; "SCAN t USING INDEX" would walk a whole index.
    std::string scans = text;
    if (partial) {
      const std::string walk = "SCAN " + select.table + " USING INDEX " + index;
      for (auto at = scans.find(walk); at != std::string::npos; at = scans.find(walk)) {
        scans.erase(at, walk.size());
      }
    }
    EXPECT_EQ(scans.find("SCAN "), std::string::npos) << text;
    EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
  } else {
    EXPECT_EQ(text.find("Seq Scan"), std::string::npos) << text;
    if (text.find("Sort") != std::string::npos) {
      EXPECT_TRUE(bounded_sort_ok) << text;
      EXPECT_NE(text.find("Bitmap Index Scan on " + index), std::string::npos) << text;
    }
  }
  int rows = 0;
  EXPECT_TRUE(pool.Query(select, [&](const Row&) {
                    ++rows;
                    return Status::Ok();
                  }).ok());
  return rows;
}

}  // namespace gpuhub::store
