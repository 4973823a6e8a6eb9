#include "engine/audit_log.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "engine/accounts.h"
#include "engine/api_keys.h"
#include "engine/engine_test_fixture.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;  // 2023-11-14T22:13:20Z

class AuditLogTest : public EngineOnSqliteTest {
 protected:
  AuditLogTest() : EngineOnSqliteTest(kStart, "gpuhub_audit_log") {}
  void SetUp() override {
    OpenEngine();
    carol_ = Run<User>([](Txn& txn) { return CreateUser(txn, "carol", "h", kRoleCustomer); });
    dave_ = Run<User>([](Txn& txn) { return CreateUser(txn, "dave", "h", kRoleCustomer); });
  }
  // The events of `account` (nullopt: all) read from the store, newest first.
  std::vector<AuditEvent> Page(std::optional<std::int64_t> account, std::int64_t before,
                               std::size_t limit) {
    auto store = OpenMigrated(url_);
    std::vector<AuditEvent> out;
    Status s = store->Query(AuditPageSelect(account, before, limit), [&](const store::Row& row) {
      GPUHUB_ASSIGN_OR_RETURN(AuditEvent e, AuditEventFromRow(row));
      out.push_back(std::move(e));
      return Status::Ok();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }
  User carol_, dave_;
};

TEST(AuditKinds, NamesRoundTripAndTheSecurityKindsExist) {
  std::set<std::string> names;
  for (AuditKind k : AllAuditKinds()) {
    std::string name(AuditKindName(k));
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name;
    auto parsed = ParseAuditKind(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, k);
  }
  // The kinds the two-factor and password routes record (issue 30, h30-totp).
  for (const char* name :
       {"password_changed", "totp_enabled", "totp_disabled", "recovery_codes_regenerated",
        "payout_destination_added", "payout_destination_removed", "sign_in", "sign_in_failed",
        "sign_out", "api_key_created", "api_key_first_used", "api_key_revoked"}) {
    EXPECT_TRUE(names.count(name)) << name;
  }
  EXPECT_EQ(ParseAuditKind("nope").status().field(), "kind");
}

TEST(AuditDetail, NeverASecretAndAlwaysSmall) {
  // Members whose name says "secret" are dropped whatever the caller passed.
  std::string text = AuditDetailText({{"api_key_id", 3},
                                      {"password", "hunter2"},
                                      {"secret", "ghk_3_abc"},
                                      {"token", "t"},
                                      {"totp_code", "123456"},
                                      {"new_password_hash", "$argon2id$"},
                                      {"name", "ci"}});
  EXPECT_EQ(text, R"({"api_key_id":3,"name":"ci"})");
  EXPECT_EQ(text.find("hunter2"), std::string::npos);
  // Long strings are cut; many members end with "truncated"; non-objects are {}.
  std::string long_value(5000, 'x');
  std::string cut = AuditDetailText({{"reason", long_value}});
  EXPECT_EQ(cut.size(), std::string(R"({"reason":""})").size() + kMaxAuditDetailValueBytes);
  nlohmann::ordered_json many = nlohmann::ordered_json::object();
  for (int i = 0; i < 20; ++i) many["m" + std::to_string(i)] = long_value;
  std::string bounded = AuditDetailText(many);
  EXPECT_LE(bounded.size(), kMaxAuditDetailBytes);
  EXPECT_NE(bounded.find(R"("truncated":true)"), std::string::npos);
  EXPECT_EQ(AuditDetailText(nlohmann::ordered_json::array()), "{}");
  // Bytes that are not UTF-8 still make valid JSON (replaced), ASCII-only.
  std::string odd = AuditDetailText({{"name", std::string("a\xff\xfe")}});
  EXPECT_TRUE(nlohmann::json::accept(odd)) << odd;
}

TEST(AuditOrigins, ClientTextIsCutToPrintableAscii) {
  std::string agent(1000, 'A');
  agent[3] = '\0';
  agent[4] = '\n';
  agent[5] = '\xc3';
  AuditOrigin o = MakeAuditOrigin("user:1", "127.0.0.1", agent, "req-1");
  EXPECT_EQ(o.user_agent.size(), kMaxAuditUserAgentBytes);
  EXPECT_EQ(o.user_agent.substr(0, 7), "AAA???A");
  EXPECT_EQ(o.remote_address, "127.0.0.1");
}

TEST(AuditRetention, KeepsAtLeastAYear) { EXPECT_GE(kAuditRetentionDays, 366); }

// Append-only in the code itself: the only write to audit_events anywhere in src/ is
// RecordAudit's Insert; no Upsert, Update or Delete names the table, and no SQL updates or deletes
// from it.
TEST(AuditAppendOnly, NothingInTheSourceUpdatesOrDeletesAnEvent) {
  namespace fs = std::filesystem;
  int inserts = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(GPUHUB_SOURCE_DIR) / "src")) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    if (entry.path().filename().string().ends_with("_test.cc")) continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    std::istringstream lines(text.str());
    std::string line;
    while (std::getline(lines, line)) {
      if (line.find("audit_events") == std::string::npos) continue;
      EXPECT_EQ(line.find("Upsert"), std::string::npos) << entry.path() << ": " << line;
      EXPECT_EQ(line.find("Update"), std::string::npos) << entry.path() << ": " << line;
      EXPECT_EQ(line.find("Delete"), std::string::npos) << entry.path() << ": " << line;
      EXPECT_EQ(line.find("UPDATE"), std::string::npos) << entry.path() << ": " << line;
      EXPECT_EQ(line.find("DELETE"), std::string::npos) << entry.path() << ": " << line;
      if (line.find("writes.Insert(\"audit_events\"") != std::string::npos) ++inserts;
    }
  }
  EXPECT_EQ(inserts, 1);
}

TEST_F(AuditLogTest, EventsCommitWithTheirCommandOnlyAsInsertsAndPageNewestFirst) {
  AuditOrigin origin = MakeAuditOrigin("user:1", "10.0.0.7", "curl/8", "req-9");
  // Every write the log makes is an insert into audit_events (append-only: nothing updates or
  // deletes an event).
  Run<int>([&](Txn& txn) -> Result<int> {
    AuditOriginScope scope(txn, origin);
    for (int i = 0; i < 5; ++i) {
      RecordAudit(txn, carol_.id, AuditKind::kSshKeyAdded, {{"ssh_key_id", i}});
    }
    RecordAudit(txn, dave_.id, AuditKind::kSignIn);
    for (const auto& w : txn.writes.writes()) {
      if (w.table == "audit_events") {
        EXPECT_EQ(w.kind, store::Write::Kind::kInsert);
      }
    }
    return 0;
  });
  // Without an origin the actor is "system".
  Run<int>([&](Txn& txn) -> Result<int> {
    RecordAudit(txn, carol_.id, AuditKind::kRoleChanged);
    return 0;
  });
  // A failed command leaves no event.
  auto failed = engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
    RecordAudit(txn, carol_.id, AuditKind::kSignOut);
    return Status::Internal("the action failed");
  });
  EXPECT_FALSE(failed.ok());

  auto all = Page(carol_.id, 0, 100);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].kind, AuditKind::kRoleChanged);
  EXPECT_EQ(all[0].actor, "system");
  EXPECT_EQ(all[1].actor, "user:1");
  EXPECT_EQ(all[1].remote_address, "10.0.0.7");
  EXPECT_EQ(all[1].user_agent, "curl/8");
  EXPECT_EQ(all[1].request_id, "req-9");
  EXPECT_EQ(all[1].detail, R"({"ssh_key_id":4})");
  EXPECT_EQ(all[1].at, kStart);
  for (std::size_t i = 1; i < all.size(); ++i) EXPECT_GT(all[i - 1].id, all[i].id);
  // Pages by cursor: no event skipped or repeated.
  auto first = Page(carol_.id, 0, 4);
  auto second = Page(carol_.id, first.back().id, 4);
  ASSERT_EQ(first.size(), 4u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second.front().id, all[4].id);
  // Another account's events are not on carol's pages; all accounts together for admins.
  EXPECT_EQ(Page(dave_.id, 0, 100).size(), 1u);
  EXPECT_EQ(Page(std::nullopt, 0, 100).size(), 7u);

  // Ids continue after a restart (the next id comes from the store, not from memory).
  std::int64_t last = Page(std::nullopt, 0, 1).front().id;
  OpenEngine();
  std::int64_t next = Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
    return RecordAudit(txn, carol_.id, AuditKind::kSignIn);
  });
  EXPECT_GT(next, last);
}

TEST_F(AuditLogTest, AKeysFirstUseIsRecordedOnceAndSurvivesARestart) {
  ApiKeySpec spec;
  spec.name = "ci";
  spec.scopes = kScopeRead;
  ApiKey key = Run<ApiKey>([&](Txn& txn) { return CreateApiKey(txn, carol_, spec, "hash1"); });
  for (int i = 0; i < 3; ++i) {
    Run<int>([&](Txn& txn) -> Result<int> {
      std::size_t before = txn.writes.size();
      NoteApiKeyUse(txn, key.id);
      // The first use writes two rows (the key's column, the event); later ones nothing.
      EXPECT_EQ(txn.writes.size() - before, i == 0 ? 2u : 0u);
      return 0;
    });
    clock_.Advance(kMicrosPerSecond);
  }
  OpenEngine();
  Run<int>([&](Txn& txn) -> Result<int> {
    EXPECT_EQ(txn.state.api_keys->keys.at(key.id).first_used_at, kStart);
    std::size_t before = txn.writes.size();
    NoteApiKeyUse(txn, key.id);
    EXPECT_EQ(txn.writes.size(), before);
    return 0;
  });
  auto events = Page(carol_.id, 0, 10);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, AuditKind::kApiKeyFirstUsed);
  EXPECT_EQ(events[0].detail, R"({"api_key_id":1,"name":"ci"})");
}

TEST_F(AuditLogTest, ThePagesAreServedByAnIndex) {
  auto store = OpenMigrated(url_);
  auto plan = store->ExplainPlan(AuditPageSelect(carol_.id, 10, 50));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::string text;
  for (const auto& line : *plan) text += line + "\n";
  EXPECT_NE(text.find("audit_events_by_account"), std::string::npos) << text;
  EXPECT_EQ(text.find("TEMP B-TREE"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpuhub::engine
