// The audit log through the real server, on SQLite and PostgreSQL (docs/api.md, "Audit log"):
// what each action records (actor, address, user agent, request id, detail), paging by cursor,
// that no account ever sees another's events, that no secret is ever in it, and that every
// acknowledged event survives a SIGKILL of the server.
#include <gtest/gtest.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr const char* kAgent = "audit-test/1.0 (+https://example.com)";
constexpr const char* kSshKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj carl@laptop";

// A call with the headers the log records; `request_id` becomes the event's request id.
HttpResponse As(HttpClient& c, const std::string& method, const std::string& path, const json& body,
                const std::string& token, const std::string& request_id) {
  std::vector<std::pair<std::string, std::string>> headers = {{"User-Agent", kAgent}};
  if (!request_id.empty()) headers.emplace_back("X-Request-Id", request_id);
  if (!token.empty()) headers.emplace_back("Authorization", "Bearer " + token);
  std::string payload;
  if (!body.is_null()) {
    headers.emplace_back("Content-Type", "application/json");
    payload = body.dump();
  }
  return c.Send(method, path, payload, headers);
}

// Every event `token` may read with `query` ("account_id=all"), walking the pages of `limit`.
std::vector<json> AllEvents(HttpClient& c, const std::string& token, const std::string& query = "",
                            int limit = 200) {
  std::vector<json> out;
  std::string before;
  for (int page = 0; page < 1000; ++page) {
    std::string path = "/v1/audit-log?limit=" + std::to_string(limit);
    if (!query.empty()) path += "&" + query;
    if (!before.empty()) path += "&before=" + before;
    auto r = c.Call("GET", path, nullptr, token);
    EXPECT_EQ(r.status, 200) << path << ": " << r.body;
    if (r.status != 200) break;
    json answer = r.Json();
    for (const auto& e : answer["events"]) out.push_back(e);
    if (answer["next_cursor"].is_null()) break;
    before = answer["next_cursor"].get<std::string>();
  }
  return out;
}

const json* Find(const std::vector<json>& events, const std::string& kind) {
  for (const auto& e : events) {
    if (e["kind"] == kind) return &e;
  }
  return nullptr;
}

class AuditLogTest : public ServerFixture {};

TEST_P(AuditLogTest, EachActionRecordsWhoWhatAndWhereWithoutSecrets) {
  std::string kate = User("kate", {"customer"});
  long long kate_id = Get("/v1/accounts/me", kate)["id"];
  // Sign-ins: a success, a wrong password (kate's log), an unknown username (no account's log).
  auto in = As(*client_, "POST", "/v1/sessions",
               {{"username", "kate"}, {"password", kFixturePassword}}, "", "req-signin-1");
  ASSERT_EQ(in.status, 201) << in.body;
  std::string session = in.Json()["token"];
  auto wrong =
      As(*client_, "POST", "/v1/sessions",
         {{"username", "kate"}, {"password", "not my password at all"}}, "", "req-wrong-1");
  EXPECT_EQ(wrong.status, 401);
  auto nobody = As(*client_, "POST", "/v1/sessions",
                   {{"username", "nobody-here"}, {"password", "correct horse battery staple"}}, "",
                   "req-nobody-1");
  EXPECT_EQ(nobody.status, 401);
  // Keys, SSH keys, the webhook, a role.
  auto key = As(*client_, "POST", "/v1/api-keys", {{"name", "ci"}, {"scopes", {"read"}}}, session,
                "req-key-1");
  ASSERT_EQ(key.status, 201) << key.body;
  std::string secret = key.Json()["secret"];
  long long key_id = key.Json()["id"];
  for (int i = 0; i < 3; ++i) {  // "first used" once, however many requests
    EXPECT_EQ(
        As(*client_, "GET", "/v1/wallets", nullptr, secret, "req-use-" + std::to_string(i)).status,
        200);
  }
  auto ssh = As(*client_, "POST", "/v1/ssh-keys", {{"public_key", kSshKey}, {"name", "laptop"}},
                session, "req-ssh-1");
  ASSERT_EQ(ssh.status, 201) << ssh.body;
  long long ssh_id = ssh.Json()["id"];
  EXPECT_EQ(As(*client_, "DELETE", "/v1/ssh-keys/" + std::to_string(ssh_id), nullptr, session,
               "req-ssh-2")
                .status,
            204);
  auto hook = As(*client_, "PUT", "/v1/accounts/me/webhook",
                 {{"url", "https://hooks.example.com/T000/B000/pathsecret?token=querysecret"}},
                 session, "req-hook-1");
  ASSERT_EQ(hook.status, 200) << hook.body;
  EXPECT_EQ(
      As(*client_, "POST", "/v1/accounts/me/roles", {{"role", "provider"}}, session, "req-role-1")
          .status,
      200);
  EXPECT_EQ(As(*client_, "DELETE", "/v1/api-keys/" + std::to_string(key_id), nullptr, session,
               "req-key-2")
                .status,
            204);
  // An admin's credit and a tax rate.
  Credit("kate", "12.50");
  auto tax =
      client_->Call("POST", "/v1/admin/tax-rates", {{"country", "DE"}, {"rate", "19"}}, admin_);
  EXPECT_EQ(tax.status, 201) << tax.body;
  EXPECT_EQ(As(*client_, "DELETE", "/v1/sessions/current", nullptr, session, "req-out-1").status,
            204);

  std::string relog = LogIn(*client_, "kate");
  auto events = AllEvents(*client_, relog);
  for (const auto& e : events) EXPECT_EQ(e["account_id"], kate_id) << e.dump();
  auto kinds = [&] {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e["kind"]);
    return out;
  }();
  // Newest first (the last sign-in on top; the fixture's sign-in and billing country, set by the
  // sign-up helper and again by User(), at the end).
  std::vector<std::string> expected = {"sign_in",
                                       "sign_out",
                                       "admin_credit",
                                       "api_key_revoked",
                                       "role_changed",
                                       "webhook_url_changed",
                                       "ssh_key_removed",
                                       "ssh_key_added",
                                       "api_key_first_used",
                                       "api_key_created",
                                       "sign_in_failed",
                                       "sign_in",
                                       "billing_profile_changed",
                                       "billing_profile_changed",
                                       "sign_in"};
  EXPECT_EQ(kinds, expected);

  const json* signin = Find(events, "sign_in_failed");
  ASSERT_NE(signin, nullptr);
  EXPECT_EQ((*signin)["actor"], "anonymous");
  EXPECT_EQ((*signin)["request_id"], "req-wrong-1");
  EXPECT_EQ((*signin)["user_agent"], kAgent);
  EXPECT_EQ((*signin)["remote_address"], "127.0.0.1");
  EXPECT_EQ((*signin)["detail"]["reason"], "wrong_password");
  json ok_signin = events[events.size() - 4];
  EXPECT_EQ(ok_signin["request_id"], "req-signin-1");
  EXPECT_EQ(ok_signin["actor"], "user:" + std::to_string(kate_id));
  const json* used = Find(events, "api_key_first_used");
  ASSERT_NE(used, nullptr);
  EXPECT_EQ((*used)["actor"], "api_key:" + std::to_string(key_id));
  EXPECT_EQ((*used)["request_id"], "req-use-0");
  EXPECT_EQ((*used)["detail"]["api_key_id"], key_id);
  const json* created = Find(events, "api_key_created");
  EXPECT_EQ((*created)["detail"]["scopes"], json::array({"read"}));
  const json* webhook = Find(events, "webhook_url_changed");
  EXPECT_EQ((*webhook)["detail"]["url_origin"], "https://hooks.example.com");
  const json* credit = Find(events, "admin_credit");
  long long admin_id = Get("/v1/accounts/me", admin_)["id"];
  EXPECT_EQ((*credit)["actor"], "admin:" + std::to_string(admin_id));
  EXPECT_EQ((*credit)["detail"]["amount"], "12.500000");
  EXPECT_EQ((*credit)["detail"]["currency"], "USD");
  EXPECT_EQ(Find(events, "ssh_key_added")->at("detail")["fingerprint"], ssh.Json()["fingerprint"]);

  // No secret anywhere: the password, the key's secret, session tokens, the webhook's path.
  std::string everything;
  for (const auto& e : events) everything += e.dump();
  for (const auto& admin_view : AllEvents(*client_, admin_, "account_id=all")) {
    everything += admin_view.dump();
  }
  for (const std::string& s :
       {std::string(kFixturePassword), std::string("not my password at all"), secret,
        secret.substr(secret.rfind('_') + 1), session, relog, std::string("pathsecret"),
        std::string("querysecret"), std::string("nobody-here")}) {
    EXPECT_EQ(everything.find(s), std::string::npos) << "the audit log holds a secret: " << s;
  }
  // The unknown username's failure is an event of no account, seen by admins only.
  auto orphans = AllEvents(*client_, admin_, "account_id=0");
  const json* unknown = Find(orphans, "sign_in_failed");
  ASSERT_NE(unknown, nullptr);
  EXPECT_EQ((*unknown)["detail"]["reason"], "unknown_username");
  EXPECT_EQ((*unknown)["request_id"], "req-nobody-1");
  EXPECT_NE(Find(orphans, "admin_tax_rate_changed"), nullptr);
}

TEST_P(AuditLogTest, PagesByCursorNewestFirstWithAMaximum) {
  std::string kate = User("kate", {"customer"});
  for (int i = 0; i < 9; ++i) ASSERT_FALSE(LogIn(*client_, "kate").empty());
  auto all = AllEvents(*client_, kate);
  ASSERT_EQ(all.size(), 12u);  // 10 sign-ins and the billing profile set twice (the fixture)
  auto paged = AllEvents(*client_, kate, "", 5);
  ASSERT_EQ(paged.size(), all.size());
  std::set<long long> ids;
  for (std::size_t i = 0; i < paged.size(); ++i) {
    EXPECT_EQ(paged[i]["id"], all[i]["id"]);
    EXPECT_TRUE(ids.insert(paged[i]["id"].get<long long>()).second);
    if (i > 0) {
      EXPECT_LT(paged[i]["id"].get<long long>(), paged[i - 1]["id"].get<long long>());
    }
  }
  auto first = client_->Call("GET", "/v1/audit-log?limit=5", nullptr, kate).Json();
  EXPECT_EQ(first["events"].size(), 5u);
  EXPECT_EQ(first["next_cursor"], std::to_string(first["events"][4]["id"].get<long long>()));
  auto last = client_->Call("GET", "/v1/audit-log?limit=200", nullptr, kate).Json();
  EXPECT_TRUE(last["next_cursor"].is_null());
  // Bad input names its field.
  for (const auto& [query, field] :
       std::vector<std::pair<std::string, std::string>>{{"limit=0", "limit"},
                                                        {"limit=201", "limit"},
                                                        {"before=abc", "before"},
                                                        {"before=0", "before"},
                                                        {"account_id=-3", "account_id"}}) {
    auto r = client_->Call("GET", "/v1/audit-log?" + query, nullptr, kate);
    EXPECT_EQ(r.status, 400) << query << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], field) << query;
  }
  EXPECT_EQ(client_->Call("GET", "/v1/audit-log?color=red", nullptr, kate).status, 400);
  EXPECT_EQ(client_->Call("GET", "/v1/audit-log").status, 401);
}

TEST_P(AuditLogTest, NoAccountSeesAnothersEventsNotEvenWithAKey) {
  std::string kate = User("kate", {"customer"});
  std::string liam = User("liam", {"customer"});
  long long kate_id = Get("/v1/accounts/me", kate)["id"];
  long long liam_id = Get("/v1/accounts/me", liam)["id"];
  ASSERT_EQ(client_->Call("POST", "/v1/ssh-keys", {{"public_key", kSshKey}}, liam).status, 201);
  auto key = client_->Call("POST", "/v1/api-keys", {{"name", "dash"}, {"scopes", {"read"}}}, kate);
  ASSERT_EQ(key.status, 201);
  std::string read_key = key.Json()["secret"];
  auto market_key =
      client_->Call("POST", "/v1/api-keys", {{"name", "m"}, {"scopes", {"market"}}}, kate);
  ASSERT_EQ(market_key.status, 201);

  for (const std::string& token : {kate, read_key}) {
    auto events = AllEvents(*client_, token);
    ASSERT_FALSE(events.empty());
    for (const auto& e : events) EXPECT_EQ(e["account_id"], kate_id) << e.dump();
    EXPECT_EQ(Find(events, "ssh_key_added"), nullptr);
    for (const std::string& query : {"account_id=" + std::to_string(liam_id),
                                     std::string("account_id=all"), std::string("account_id=0")}) {
      auto r = client_->Call("GET", "/v1/audit-log?" + query, nullptr, token);
      EXPECT_EQ(r.status, 403) << query << ": " << r.body;
      EXPECT_EQ(r.Json()["error"]["field"], "account_id");
    }
    // Naming one's own account is fine.
    EXPECT_EQ(
        client_->Call("GET", "/v1/audit-log?account_id=" + std::to_string(kate_id), nullptr, token)
            .status,
        200);
  }
  // A key needs the read scope.
  EXPECT_EQ(client_->Call("GET", "/v1/audit-log", nullptr, market_key.Json()["secret"]).status,
            403);
  // An admin reads liam's log, and all of them.
  auto liams = AllEvents(*client_, admin_, "account_id=" + std::to_string(liam_id));
  ASSERT_NE(Find(liams, "ssh_key_added"), nullptr);
  for (const auto& e : liams) EXPECT_EQ(e["account_id"], liam_id);
  std::set<long long> accounts;
  for (const auto& e : AllEvents(*client_, admin_, "account_id=all")) {
    accounts.insert(e["account_id"].get<long long>());
  }
  EXPECT_TRUE(accounts.count(kate_id) && accounts.count(liam_id));
}

// Sign-ins and API key creations under concurrent load, SIGKILL in the middle, restart: every
// request whose answer arrived has its event (found by its X-Request-Id), on the restarted
// server, with ids still unique and newest first.
TEST_P(AuditLogTest, EveryAcknowledgedEventSurvivesSigkill) {
  std::string kate = User("kate", {"customer"});
  std::mutex mutex;
  std::set<std::string> acknowledged;
  std::atomic<bool> stop{false};
  std::atomic<int> counter{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c(server_->port());
      c.set_timeout_seconds(10);
      while (!stop) {
        std::string id = "load-" + std::to_string(t) + "-" + std::to_string(counter++);
        HttpResponse r;
        if (t % 2 == 0) {
          r = As(c, "POST", "/v1/sessions", {{"username", "kate"}, {"password", kFixturePassword}},
                 "", id);
          if (r.status == 0) break;
          if (r.status != 201) continue;
        } else {
          r = As(c, "POST", "/v1/api-keys", {{"name", id}, {"scopes", {"read"}}}, kate, id);
          if (r.status == 0) break;
          if (r.status != 201) continue;
          // Revoked at once (kMaxApiKeysPerUser): its own event, its own request id.
          std::string revoke = id + "-r";
          auto del =
              As(c, "DELETE", "/v1/api-keys/" + std::to_string(r.Json()["id"].get<long long>()),
                 nullptr, kate, revoke);
          if (del.status == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            acknowledged.insert(id);
            break;
          }
          if (del.status == 204) {
            std::lock_guard<std::mutex> lock(mutex);
            acknowledged.insert(revoke);
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        acknowledged.insert(id);
      }
    });
  }
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::lock_guard<std::mutex> lock(mutex);
    if (acknowledged.size() >= 150) break;
  }
  server_->Kill();
  stop = true;
  for (auto& t : threads) t.join();
  ASSERT_GT(acknowledged.size(), 20u) << "the load never got going:\n" << server_->Log();

  Start();
  admin_ = LogInAdmin(*client_);
  std::string session = LogIn(*client_, "kate");
  ASSERT_FALSE(session.empty()) << server_->Log();
  auto events = AllEvents(*client_, session);
  std::set<std::string> found;
  std::set<long long> ids;
  long long previous = 0;
  for (const auto& e : events) {
    found.insert(e["request_id"].get<std::string>());
    long long id = e["id"];
    EXPECT_TRUE(ids.insert(id).second) << "event id " << id << " twice";
    if (previous != 0) {
      EXPECT_LT(id, previous);
    }
    previous = id;
  }
  std::size_t lost = 0;
  for (const auto& id : acknowledged) {
    if (!found.count(id)) {
      ++lost;
      ADD_FAILURE() << "acknowledged event lost: " << id;
    }
  }
  EXPECT_EQ(lost, 0u) << acknowledged.size() << " acknowledged";
  std::cout << "[ audit ] " << acknowledged.size() << " acknowledged before SIGKILL, "
            << events.size() << " events after the restart\n";
  // The restarted server carries on after the last id the killed one committed.
  auto next = As(*client_, "POST", "/v1/sessions",
                 {{"username", "kate"}, {"password", kFixturePassword}}, "", "after-restart");
  ASSERT_EQ(next.status, 201);
  auto newest = client_->Call("GET", "/v1/audit-log?limit=1", nullptr, session).Json();
  EXPECT_EQ(newest["events"][0]["request_id"], "after-restart");
  EXPECT_GT(newest["events"][0]["id"].get<long long>(), *ids.rbegin());
}

INSTANTIATE_TEST_SUITE_P(Backends, AuditLogTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
