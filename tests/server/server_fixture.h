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

// The password of every account User() makes.
inline constexpr const char* kFixturePassword = "correct horse battery staple";

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
  // A new account with `roles`, signed in (its bearer token), billing country US: a buyer needs
  // one, and US charges no tax, so the figures stay net.
  std::string User(const std::string& name, const std::vector<std::string>& roles) {
    std::string token = SignUpAndLogIn(*client_, name, kFixturePassword, roles);
    EXPECT_FALSE(token.empty()) << "sign-up of " << name;
    EXPECT_TRUE(SetBillingCountry(*client_, token, "US"));
    return token;
  }
  // GET `path` as `token`; anything but 200 fails the test (with the body).
  json Get(const std::string& path, const std::string& token = "") {
    auto r = client_->Call("GET", path, nullptr, token);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return r.Json();
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
