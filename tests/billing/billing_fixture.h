// What the billing suites share: a real server with a manual clock and a known seller on SQLite
// or PostgreSQL, an admin, a provider whose asks sell H100 hours at 2.500 USD, customers with a
// billing country and money, and the clock moved to the start of the next month.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "harness.h"

namespace gpuhub::testing {

inline constexpr const char* kPassword = "correct horse battery staple";
inline constexpr const char* kSellerConfig =
    "seller_name = \"gpuhub Inc.\"\n"
    "seller_address = \"1 Main St\\nDover, DE 19901\"\n"
    "seller_country = \"US\"\n"
    "country_header = \"cf-ipcountry\"\n";

class BillingServerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    db_ = FreshDatabaseUrl(GetParam(), dir_);
    if (db_.empty()) GTEST_SKIP() << "GPUHUB_TEST_PG_URL is unset: PostgreSQL case skipped";
    ServerOptions options = Options();
    auto r = CreateAdmin(dir_, options);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    Start();
    admin_ = LogInAdmin(*client_);
    ASSERT_FALSE(admin_.empty());
  }
  // Bearer sessions live 30 days and the manual clock crosses months: every test user logs in
  // again after the clock moved a day or more (tokens are read through T()).
  const std::string& T(const std::string& name) { return tokens_.at(name); }
  // A login can time out on a loaded machine (each verifies a password hash while the test's own
  // load runs): tried a few times, and an empty token is a failure here, not a 401 later on.
  void RefreshSessions() {
    auto again = [&](const std::string& name, const std::string& password) {
      std::string token;
      for (int i = 0; i < 3 && token.empty(); ++i) token = LogIn(*client_, name, password);
      EXPECT_FALSE(token.empty()) << name << " could not log in again:\n" << server_->Log();
      return token;
    };
    admin_ = again(kAdminUsername, kAdminPassword);
    for (auto& [name, token] : tokens_) token = again(name, kPassword);
  }
  ServerOptions Options() const {
    ServerOptions options;
    options.db = db_;
    options.config_extra = std::string("[billing]\n") + kSellerConfig;
    return options;
  }
  void Start() {
    server_ = std::make_unique<ServerProcess>(dir_, Options());
    ASSERT_TRUE(server_->Start()) << server_->Log();
    client_ = std::make_unique<HttpClient>(server_->port());
  }
  void Restart() {
    ASSERT_EQ(server_->Terminate(), 0) << server_->Log();
    Start();
  }
  // A customer with `country` (none when empty) and `funds` USD; its name (T(name): its token).
  std::string Customer(const std::string& name, const std::string& country,
                       const std::string& funds = "1000") {
    auto r = client_->Call("POST", "/v1/accounts", {{"username", name}, {"password", kPassword}});
    EXPECT_EQ(r.status, 201) << r.body;
    std::string token = LogIn(*client_, name, kPassword);
    tokens_[name] = token;
    if (!country.empty()) {
      EXPECT_TRUE(SetBillingCountry(*client_, token, country));
    }
    auto c = client_->Call(
        "POST", "/v1/admin/credits",
        {{"username", name}, {"amount", funds}, {"currency", "USD"}, {"reason", "test funds"}},
        admin_);
    EXPECT_EQ(c.status, 201) << c.body;
    return name;
  }
  // A provider with `machines` 8-GPU H100 machines asking 2.500 USD per GPU-hour for 90 days.
  void Provider(int machines = 1) {
    std::string p = SignUpAndLogIn(*client_, "paula", kPassword, {"provider"});
    ASSERT_FALSE(p.empty());
    for (int i = 0; i < machines; ++i) {
      auto m = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), p);
      ASSERT_EQ(m.status, 201) << m.body;
      auto a = client_->Call(
          "POST", "/v1/asks",
          AskJson(m.Json()["id"], "2.500", UtcTimeFromNow(std::chrono::hours(24 * 90))), p);
      ASSERT_EQ(a.status, 201) << a.body;
    }
  }
  json Buy(const std::string& name, int gpus, int expect = 201) {
    auto r = client_->Call("POST", "/v1/bids", {{"gpu", "H100 SXM"}, {"gpus", gpus}, {"market", true}},
                           T(name));
    EXPECT_EQ(r.status, expect) << r.body;
    return r.Json();
  }
  // Moves the manual clock (in steps of at most 20 days, logging everyone in again after each);
  // returns its new time.
  TimestampMicros Advance(long long seconds) {
    constexpr long long kStep = 20 * 24 * 3600;
    TimestampMicros now = 0;
    while (seconds > 0) {
      long long step = std::min(seconds, kStep);
      auto r = client_->Call("POST", "/v1/admin/clock/advance", {{"seconds", step}}, admin_);
      EXPECT_EQ(r.status, 200) << r.body;
      auto t = ParseTimestamp(r.Json().value("now", ""));
      now = t.ok() ? *t : 0;
      seconds -= step;
      if (step >= 24 * 3600) RefreshSessions();
    }
    return now;
  }
  // To the first second of the next month (UTC): the tick issues last month's statements.
  TimestampMicros AdvanceToNextMonth() {
    TimestampMicros now = Advance(1);
    CivilDate d = CivilDateOf(now);
    TimestampMicros next = TimestampOfDate(d.year, d.month + 1, 1);
    return Advance((next - now) / kMicrosPerSecond + 1);
  }
  // GET with the token of `who` (a test user's name, or a raw token such as admin_, or "").
  json Get(const std::string& path, const std::string& who) {
    auto it = tokens_.find(who);
    auto r = client_->Call("GET", path, nullptr, it == tokens_.end() ? who : it->second);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    return r.Json();
  }
  void ExpectInvariants() {
    json b = Get("/v1/admin/billing", admin_);
    EXPECT_EQ(b["invariants"], "ok") << b.dump();
    json l = Get("/v1/admin/ledger", admin_);
    EXPECT_EQ(l["invariants"], "ok") << l.dump();
    json m = Get("/v1/admin/market", admin_);
    EXPECT_EQ(m["settlement"], "ok") << m.dump();
    json all = Get("/v1/admin/invariants", admin_);  // billing's lines included
    EXPECT_EQ(all["ok"], true) << all.dump();
  }

  TempDir dir_;
  std::string db_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<HttpClient> client_;
  std::string admin_;
  std::map<std::string, std::string> tokens_;  // test user -> current bearer token
};

}  // namespace gpuhub::testing
