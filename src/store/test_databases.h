// The store tests' databases (store_test, backup_test): one fresh database per call, and a way
// to ask PostgreSQL behind a store's back.
#pragma once

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace gpuhub::store {

// A fresh database per test: a temp SQLite file, or a new PostgreSQL database in the test cluster.
inline std::string FreshDatabase(const std::string& backend) {
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

// Runs one statement on `url` outside any store; the first value of the first row ("" if none).
inline std::string QueryOne(const std::string& url, const std::string& sql) {
  PGconn* conn = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(conn), CONNECTION_OK) << PQerrorMessage(conn);
  PGresult* r = PQexec(conn, sql.c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQerrorMessage(conn);
  std::string value = PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  PQfinish(conn);
  return value;
}

}  // namespace gpuhub::store
