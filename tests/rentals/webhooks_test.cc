// Notifications to a customer's own webhook: a real server POSTs them, signed, to a real receiver
// on loopback (allowed by [webhooks] allow_private_addresses), retries a failed delivery on the
// engine's schedule, and refuses internal addresses when that switch is off. SQLite and PostgreSQL.
#include <gtest/gtest.h>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

using std::chrono::seconds;

class WebhooksTest : public ServerFixture {
 protected:
  void Configure(ServerOptions& options) override {
    if (AllowPrivate()) options.config_extra = "[webhooks]\nallow_private_addresses = true\n";
  }
  virtual bool AllowPrivate() const { return true; }
  void SetUp() override {
    ServerFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_EQ(client_->Call("POST", "/v1/admin/nodes", {{"gpu", "A100 SXM"}, {"region", "DFW-1"}},
                            admin_)
                  .status,
              201);
    alice_ = SignUpAndLogIn(*client_, "alice");
    Credit("alice", "1000");
  }
  json Order() {
    auto r = client_->Call("POST", "/v1/rentals",
                           {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}}, alice_);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json();
  }
  json Deliveries() {
    return client_->Call("GET", "/v1/accounts/me/webhook", nullptr, alice_).Json()["deliveries"];
  }

  std::string alice_;
};

// The same with the production default: internal addresses refused.
class WebhooksToInternalAddressesTest : public WebhooksTest {
 protected:
  bool AllowPrivate() const override { return false; }
};

TEST_P(WebhooksTest, NotificationsArePostedSignedAndRetriedUntilDelivered) {
  WebhookReceiver receiver({503});  // the first attempt fails
  std::string url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/hooks/gpuhub?k=1";
  auto set = client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, alice_);
  ASSERT_EQ(set.status, 200) << set.body;
  std::string secret = set.Json()["secret"];
  ASSERT_EQ(secret.substr(0, 6), "whsec_");
  // Setting it again keeps the secret unless asked to rotate it.
  auto again = client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, alice_);
  EXPECT_EQ(again.Json()["secret"], secret);

  json rental = Order();
  auto got = receiver.WaitFor(1, seconds(30));
  ASSERT_EQ(got.size(), 1u) << server_->Log();
  const WebhookReceiver::Received first = got[0];
  EXPECT_EQ(first.method, "POST");
  EXPECT_EQ(first.target, "/hooks/gpuhub?k=1");
  EXPECT_EQ(first.headers.at("content-type"), "application/json");
  // Gpuhub-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
  std::string sig = first.headers.at("gpuhub-signature");
  ASSERT_EQ(sig.substr(0, 2), "t=") << sig;
  std::size_t comma = sig.find(",v1=");
  ASSERT_NE(comma, std::string::npos) << sig;
  std::string t = sig.substr(2, comma - 2);
  EXPECT_EQ(sig.substr(comma + 4), HmacSha256Hex(secret, t + "." + first.body));
  EXPECT_NE(sig.substr(comma + 4), HmacSha256Hex("whsec_wrong", t + "." + first.body));
  json body = json::parse(first.body);
  EXPECT_EQ(body["type"], "rental.active");
  EXPECT_EQ(body["subject"], "rental:" + std::to_string(rental["id"].get<long long>()));
  EXPECT_EQ(body["data"]["rental_id"], std::to_string(rental["id"].get<long long>()));
  std::string delivery = first.headers.at("gpuhub-delivery");

  // 503: retried one minute later on the engine's (manual) clock, with the same bytes. (The
  // receiver answered before the sender recorded the attempt: wait for the record.)
  json pending;
  WaitFor([&] {
    pending = Deliveries();
    return pending.size() == 1 && pending[0]["attempts"] == 1;
  });
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0]["status"], "pending");
  EXPECT_EQ(pending[0]["last_status_code"], 503);
  EXPECT_EQ(receiver.WaitFor(2, seconds(3)).size(), 1u);  // not before the minute
  ASSERT_EQ(client_->Call("POST", "/v1/admin/clock/advance", {{"seconds", 61}}, admin_).status, 200);
  got = receiver.WaitFor(2, seconds(30));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].body, first.body);
  EXPECT_EQ(got[1].headers.at("gpuhub-delivery"), delivery);
  // The receiver answered before the sender recorded the attempt: wait for the record.
  WaitFor([&] { return Deliveries()[0]["status"] == "delivered"; });
  auto done = Deliveries();
  EXPECT_EQ(done[0]["status"], "delivered");
  EXPECT_EQ(done[0]["attempts"], 2);

  // Removing the webhook stops the posts; the notifications stay readable.
  EXPECT_EQ(client_->Call("DELETE", "/v1/accounts/me/webhook", nullptr, alice_).status, 204);
  EXPECT_EQ(client_->Call("GET", "/v1/accounts/me/webhook", nullptr, alice_).status, 404);
  auto notes = client_->Call("GET", "/v1/notifications", nullptr, alice_).Json();
  EXPECT_EQ(notes["notifications"][0]["type"], "rental.active");
}

TEST_P(WebhooksToInternalAddressesTest, AreRefusedAndBadUrlsNameTheField) {
  WebhookReceiver receiver;
  std::string port = std::to_string(receiver.port());
  // An internal IP literal, in any of its spellings or inside an IPv6 form, is refused at once.
  for (const std::string& bad : std::vector<std::string>{
           "ftp://example.com/x", "https://user:secret@example.com/hook",
           "https://example.com/#frag", "not a url", "https://example.com:70000/",
           "http://127.0.0.1:" + port + "/hook", "http://127.1:" + port,
           "http://2130706433:" + port, "http://[::ffff:127.0.0.1]:" + port,
           "http://[::127.0.0.1]/", "http://[::ffff:0:10.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/",
           "http://[64:ff9b:1::8.8.8.8]/", "http://[2002:a00:1::]/",
           "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "http://169.254.169.254/latest"}) {
    auto r = client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", bad}}, alice_);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], "url") << bad;
  }
  // Public addresses in the same forms are accepted.
  for (const char* good : {"https://93.184.216.34/h", "https://[::ffff:93.184.216.34]/h",
                           "https://[64:ff9b::93.184.216.34]/h", "https://[2002:5db8:d822::1]/h"}) {
    EXPECT_EQ(client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", good}}, alice_).status, 200)
        << good;
  }
  // A name is judged at delivery, on what it resolves to.
  std::string url = "http://localhost:" + port + "/hook";
  ASSERT_EQ(client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, alice_).status, 200);
  Order();
  json d;
  WaitFor([&] {
    d = Deliveries();
    return !d.empty() && d[0]["status"] == "failed";
  });
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0]["status"], "failed");
  EXPECT_NE(d[0]["last_error"].get<std::string>().find("internal address"), std::string::npos)
      << d.dump();
  EXPECT_TRUE(receiver.WaitFor(1, seconds(1)).empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, WebhooksTest, ::testing::Values("sqlite", "postgresql"));
INSTANTIATE_TEST_SUITE_P(Backends, WebhooksToInternalAddressesTest,
                         ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
