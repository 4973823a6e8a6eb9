// A GoogleTest fixture for the CLI suites that drive `gpuhub` against one real server (SQLite:
// the CLI holds no state): an administrator and alice signed in, GPUHUB_SERVER pointing at the
// server, GPUHUB_TOKEN unset so that every call says whose token it uses (As).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace gpuhub::testing {

inline bool Has(const CommandResult& r, const std::string& text) {
  return r.output.find(text) != std::string::npos;
}

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.db = FreshDatabaseUrl("sqlite", dir_);
    auto r = CreateAdmin(dir_, options_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    server_ = std::make_unique<ServerProcess>(dir_, options_);
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
    admin_ = LogInAdmin(*client_);
    alice_ = SignUpAndLogIn(*client_, "alice");
    url_ = "http://127.0.0.1:" + std::to_string(server_->port());
    ::setenv("GPUHUB_SERVER", url_.c_str(), 1);
    ::unsetenv("GPUHUB_TOKEN");
  }
  void TearDown() override { ::unsetenv("GPUHUB_SERVER"); }
  // `gpuhub args... --token token`.
  CommandResult As(const std::string& token, std::vector<std::string> args) {
    args.push_back("--token");
    args.push_back(token);
    return RunGpuhub(args, "");
  }

  TempDir dir_;
  ServerOptions options_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::string admin_, alice_, url_;
};

}  // namespace gpuhub::testing
