// A GoogleTest fixture for the suites that run one real server per test on each database
// (TEST_P with ::testing::Values("sqlite", "postgresql")): a fresh database, an administrator,
// the server started, a client and the admin's bearer token; restarts on the same database; admin
// credits and manual-clock advances. PostgreSQL cases skip when GPUHUB_TEST_PG_URL is unset.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "harness.h"

namespace gpuhub::testing {

class ServerFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    db_ = FreshDatabaseUrl(GetParam(), dir_);
    if (db_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
    options_.db = db_;
    Configure(options_);
    auto r = CreateAdmin(dir_, options_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    Start();
    admin_ = LogInAdmin(*client_);
    ASSERT_FALSE(admin_.empty());
  }
  // Override to change the server's options before it starts (config sections, clock).
  virtual void Configure(ServerOptions& options) { (void)options; }

  void Start() {
    server_ = std::make_unique<ServerProcess>(dir_, options_);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  // SIGTERM, then a new server on the same database.
  void Restart() {
    ASSERT_EQ(server_->Terminate(), 0) << server_->Log();
    Start();
  }
  // An admin's manual credit (a bank transfer) to `user`'s wallet.
  void Credit(const std::string& user, const std::string& amount, const char* currency = "USD") {
    auto r = client_->Call(
        "POST", "/v1/admin/credits",
        {{"username", user}, {"amount", amount}, {"currency", currency}, {"reason", "test funds"}},
        admin_);
    ASSERT_EQ(r.status, 201) << r.body;
  }
  // Moves the manual clock (the time-driven work runs at once).
  void Advance(long long seconds) {
    auto r = client_->Call("POST", "/v1/admin/clock/advance", {{"seconds", seconds}}, admin_);
    ASSERT_EQ(r.status, 200) << r.body;
  }

  TempDir dir_;
  std::string db_;
  ServerOptions options_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::string admin_;
};

}  // namespace gpuhub::testing
