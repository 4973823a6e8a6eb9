// Multi-node quote requests through the real server, on SQLite and PostgreSQL (docs/api.md,
// "Quote requests"): the server recomputes the job (the guide's 405B full fine-tune: 7,452 GB,
// five nodes of 8x MI300X) and keeps its own figures, not the page's; a signed-in account only,
// with a limit of open requests; another account's id is 404; bad input names the field; an
// admin's answer notifies the customer (the list and the signed webhook) and leaves audit events;
// everything survives a restart.
#include <gtest/gtest.h>

#include <algorithm>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

class QuoteRequestsTest : public ServerFixture {
 protected:
  void Configure(ServerOptions& options) override {
    options.config_extra = "[webhooks]\nallow_private_addresses = true\n";
  }
  static std::string Field(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("field", "") : "";
  }
  static json Job() {
    return {{"model", "405b"},
            {"workload", "full"},
            {"contact", "@alice:matrix.org"},
            {"note", "three months from July"}};
  }
};

TEST_P(QuoteRequestsTest, TheServerRecomputesTheJobAndKeepsItsOwnFigures) {
  std::string alice = User("alice", {"customer"});
  // Anonymous: 401 before anything is sized.
  EXPECT_EQ(client_->Call("POST", "/v1/quote-requests", Job()).status, 401);
  // A figure of the page's in the body is not a field the server takes (it recomputes).
  json forged = Job();
  forged["required_gb"] = 1;
  auto refused = client_->Call("POST", "/v1/quote-requests", forged, alice);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(Field(refused), "required_gb");

  auto created = client_->Call("POST", "/v1/quote-requests", Job(), alice, "quote-1");
  ASSERT_EQ(created.status, 201) << created.body;
  json q = created.Json();
  EXPECT_EQ(q["status"], "open");
  EXPECT_EQ(q["model"], "405b");
  EXPECT_EQ(q["workload"], "full");
  EXPECT_DOUBLE_EQ(q["required_gb"].get<double>(), 7452.0);
  EXPECT_EQ(q["summary"], "405b full: 7,452 GB; 5 nodes of 8x MI300X (7,680 GB)");
  EXPECT_EQ(q["contact"], "@alice:matrix.org");
  EXPECT_EQ(q["job"], json({{"model", "405b"}, {"workload", "full"}}));
  EXPECT_EQ(q["sizing"]["recomputed_by"], "server");
  EXPECT_EQ(q["sizing"]["nodes"][0]["configuration"], "5 x 8x MI300X");
  EXPECT_EQ(q["sizing"]["nodes"][0]["exact"]["monthly_usd"], "57240.000000");
  EXPECT_TRUE(q["answer"].is_null());
  // The same Idempotency-Key replays the first answer instead of a second request.
  auto replay = client_->Call("POST", "/v1/quote-requests", Job(), alice, "quote-1");
  EXPECT_EQ(replay.Json()["id"], q["id"]);

  auto list = Get("/v1/quote-requests", alice);
  ASSERT_EQ(list["quote_requests"].size(), 1u) << list.dump();
  EXPECT_FALSE(list["quote_requests"][0].contains("sizing"));  // lists stay light
  EXPECT_TRUE(list["next_before"].is_null());
  Restart();
  auto back = Get("/v1/quote-requests/" + std::to_string(q["id"].get<long long>()), alice);
  EXPECT_EQ(back["sizing"], q["sizing"]);
  EXPECT_EQ(back["note"], "three months from July");
}

TEST_P(QuoteRequestsTest, OthersIdsAreNotFoundAndBadInputNamesTheField) {
  std::string alice = User("alice", {"customer"});
  std::string mallory = User("mallory", {"customer"});
  auto created = client_->Call("POST", "/v1/quote-requests", Job(), alice);
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string path = "/v1/quote-requests/" + std::to_string(created.Json()["id"].get<long long>());
  EXPECT_EQ(client_->Call("GET", path, nullptr, mallory).status, 404);
  EXPECT_EQ(client_->Call("POST", path + "/withdraw", nullptr, mallory).status, 404);
  EXPECT_TRUE(Get("/v1/quote-requests", mallory)["quote_requests"].empty());
  EXPECT_EQ(client_->Call("GET", "/v1/quote-requests/abc", nullptr, alice).status, 404);
  // Only admins answer.
  EXPECT_EQ(client_->Call("POST", "/v1/admin/quote-requests/1/answer",
                          {{"status", "answered"}, {"price", "$1"}}, mallory)
                .status,
            403);

  struct Case {
    json body;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {{{"workload", "full"}}, "model"},
           {{{"model", "405b"}, {"workload", "everything"}}, "workload"},
           {{{"model", "405b"}, {"workload", "full"}, {"precision", "fp7"}}, "precision"},
           {{{"model", "405b"}, {"workload", "full"}, {"seq", -3}}, "seq"},
           {{{"model", "405b"}, {"workload", "full"}, {"contact", 12}}, "contact"},
           {{{"model", "405b"}, {"workload", "full"}, {"contact", std::string(201, 'x')}},
            "contact"},
           {{{"model", "405b"}, {"workload", "full"}, {"note", std::string(2001, 'n')}}, "note"},
           {{{"model", "405b"}, {"workload", "full"}, {"contact", "a\u0007b"}}, "contact"},
           {{{"model", "405b"}, {"workload", "full"}, {"colour", "red"}}, "colour"}}) {
    auto r = client_->Call("POST", "/v1/quote-requests", c.body, alice);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " -> " << r.body;
    EXPECT_EQ(Field(r), c.field) << c.body.dump() << " -> " << r.body;
  }
  auto unknown = client_->Call("POST", "/v1/quote-requests",
                               {{"model", "no-such-model"}, {"workload", "full"}}, alice);
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  auto bad_status = client_->Call("GET", "/v1/quote-requests?status=pending", nullptr, alice);
  EXPECT_EQ(bad_status.status, 400);
  EXPECT_EQ(Field(bad_status), "status");
  auto bad_query = client_->Call("GET", "/v1/quote-requests?user_id=1", nullptr, alice);
  EXPECT_EQ(bad_query.status, 400);
  EXPECT_EQ(Field(bad_query), "user_id");
}

TEST_P(QuoteRequestsTest, OpenRequestsAreLimitedPerAccount) {
  std::string alice = User("alice", {"customer"});
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(client_->Call("POST", "/v1/quote-requests", Job(), alice).status, 201);
  }
  auto over = client_->Call("POST", "/v1/quote-requests", Job(), alice);
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_NE(over.body.find("at most 3 open quote requests"), std::string::npos) << over.body;
  auto withdrawn = client_->Call("POST", "/v1/quote-requests/1/withdraw", nullptr, alice);
  ASSERT_EQ(withdrawn.status, 200) << withdrawn.body;
  EXPECT_EQ(withdrawn.Json()["status"], "withdrawn");
  EXPECT_EQ(client_->Call("POST", "/v1/quote-requests", Job(), alice).status, 201);
  auto open = Get("/v1/quote-requests?status=open&limit=2", alice);
  EXPECT_EQ(open["quote_requests"].size(), 2u);
  EXPECT_FALSE(open["next_before"].is_null());
}

TEST_P(QuoteRequestsTest, AnAdminsAnswerNotifiesTheCustomerAndIsAudited) {
  std::string alice = User("alice", {"customer"});
  WebhookReceiver receiver;
  const std::string url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hook";
  ASSERT_EQ(client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, alice).status, 200);
  auto created = client_->Call("POST", "/v1/quote-requests", Job(), alice);
  ASSERT_EQ(created.status, 201) << created.body;
  const long long id = created.Json()["id"];
  const std::string answer = "/v1/admin/quote-requests/" + std::to_string(id) + "/answer";
  // Admins see every account's requests, with whose they are.
  auto all = Get("/v1/quote-requests", admin_);
  ASSERT_EQ(all["quote_requests"].size(), 1u);
  EXPECT_EQ(all["quote_requests"][0]["username"], "alice");
  // An admin's key without the admin scope reads as anyone's would: its own requests only.
  auto key = client_->Call("POST", "/v1/api-keys", {{"name", "ro"}, {"scopes", {"read"}}}, admin_);
  ASSERT_EQ(key.status, 201) << key.body;
  const std::string read_key = key.Json()["secret"];
  EXPECT_TRUE(Get("/v1/quote-requests", read_key)["quote_requests"].empty());
  EXPECT_EQ(client_->Call("GET", "/v1/quote-requests/" + std::to_string(id), nullptr, read_key).status,
            404);

  auto no_price = client_->Call("POST", answer, {{"status", "answered"}}, admin_);
  EXPECT_EQ(no_price.status, 400);
  EXPECT_EQ(Field(no_price), "price");
  auto bad = client_->Call("POST", answer, {{"status", "maybe"}, {"price", "$1"}}, admin_);
  EXPECT_EQ(Field(bad), "status");
  auto ok = client_->Call(
      "POST", answer,
      {{"status", "answered"}, {"price", "$55,000/month for 5 nodes"}, {"terms", "3 months"}},
      admin_);
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.Json()["answer"]["price"], "$55,000/month for 5 nodes");
  EXPECT_EQ(client_->Call("POST", answer, {{"status", "declined"}}, admin_).status, 409);
  EXPECT_EQ(client_->Call("POST", "/v1/admin/quote-requests/999/answer",
                          {{"status", "declined"}}, admin_)
                .status,
            404);

  auto notes = Get("/v1/notifications", alice)["notifications"];
  auto note = std::find_if(notes.begin(), notes.end(),
                           [](const json& n) { return n["type"] == "quote_request.answered"; });
  ASSERT_NE(note, notes.end()) << notes.dump();
  EXPECT_EQ((*note)["subject"], "quote_request:" + std::to_string(id));
  EXPECT_EQ((*note)["data"]["price"], "$55,000/month for 5 nodes");
  auto got = receiver.WaitFor(1, std::chrono::seconds(30));
  auto hook = std::find_if(got.begin(), got.end(), [](const WebhookReceiver::Received& r) {
    return json::parse(r.body)["type"] == "quote_request.answered";
  });
  ASSERT_NE(hook, got.end()) << server_->Log();
  EXPECT_TRUE(hook->headers.contains("gpuhub-signature"));
  EXPECT_EQ(json::parse(hook->body)["data"]["terms"], "3 months");

  auto events = Get("/v1/audit-log?limit=50", alice)["events"];
  auto find = [&](const char* kind) {
    return std::find_if(events.begin(), events.end(),
                        [&](const json& e) { return e["kind"] == kind; });
  };
  ASSERT_NE(find("quote_requested"), events.end()) << events.dump();
  auto answered = find("quote_answered");
  ASSERT_NE(answered, events.end()) << events.dump();
  EXPECT_TRUE((*answered)["actor"].get<std::string>().starts_with("admin:"));
  EXPECT_EQ((*answered)["detail"]["status"], "answered");
  Restart();
  EXPECT_EQ(Get("/v1/quote-requests/" + std::to_string(id), alice)["status"], "answered");
}

INSTANTIATE_TEST_SUITE_P(Backends, QuoteRequestsTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
