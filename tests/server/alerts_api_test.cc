// Stock and price alerts through the real server, on SQLite and PostgreSQL (docs/api.md,
// "Alerts"): a stock alert fires when a rental of its count can be placed again in its region, a
// price alert when the spot market's best offer falls to its price; each fires once per crossing
// (again only after the condition was false in between), as a notification and a signed POST to
// the account's webhook; alerts and what they saw survive a restart; bad input names its field;
// another account's alert looks missing; the per-account limit holds.
#include <gtest/gtest.h>

#include "cli_fixture.h"
#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

using std::chrono::seconds;

std::string Later(int days) { return UtcTimeFromNow(std::chrono::hours(24 * days)); }

class AlertsApiTest : public ServerFixture {
 protected:
  void Configure(ServerOptions& options) override {
    options.config_extra = "[webhooks]\nallow_private_addresses = true\n";
  }
  static std::string Field(const HttpResponse& r) {
    json body = r.Json();
    return body.is_object() && body.contains("error") ? body["error"].value("field", "") : "";
  }
  HttpResponse Make(const json& body, const std::string& token) {
    return client_->Call("POST", "/v1/alerts", body, token);
  }
  // The alert `id` of `token`'s list.
  json Alert(long long id, const std::string& token) {
    json list = Get("/v1/alerts", token);
    for (const auto& a : list["alerts"]) {
      if (a["id"] == id) return a;
    }
    ADD_FAILURE() << "no alert " << id << " in " << list.dump();
    return json::object();
  }
  // `token`'s notifications of `type`, oldest first.
  std::vector<json> Notes(const std::string& token, const std::string& type) {
    json page = Get("/v1/notifications?limit=100", token);
    std::vector<json> out;
    for (auto it = page["notifications"].rbegin(); it != page["notifications"].rend(); ++it) {
      if ((*it)["type"] == type) out.push_back(*it);
    }
    return out;
  }
  // The provider's machine of 8 H100 SXM in IAD-1 with an ask at `price`; returns the ask's id.
  long long Offer(const std::string& provider, const std::string& price) {
    auto machine = client_->Call("POST", "/v1/machines", MachineJson("H100 SXM", 8), provider);
    EXPECT_EQ(machine.status, 201) << machine.body;
    auto ask = client_->Call("POST", "/v1/asks", AskJson(machine.Json()["id"], price, Later(30)),
                             provider);
    EXPECT_EQ(ask.status, 201) << ask.body;
    return ask.Json().value("id", 0LL);
  }
};

TEST_P(AlertsApiTest, AlertsFireOncePerCrossingAsNotificationsAndSignedWebhooks) {
  WebhookReceiver receiver;
  std::string carl = User("carl", {"customer"});
  std::string dora = User("dora", {"customer"});
  std::string paula = User("paula", {"provider"});
  Credit("dora", "20000");
  std::string url = "http://127.0.0.1:" + std::to_string(receiver.port()) + "/alerts";
  auto hook = client_->Call("PUT", "/v1/accounts/me/webhook", {{"url", url}}, carl);
  ASSERT_EQ(hook.status, 200) << hook.body;
  std::string secret = hook.Json()["secret"];

  // The only H100 SXM node, all eight cards rented: none free.
  ASSERT_EQ(
      client_->Call("POST", "/v1/admin/nodes", {{"gpu", "H100 SXM"}, {"region", "IAD-1"}}, admin_)
          .status,
      201);
  auto rental = client_->Call("POST", "/v1/rentals",
                              {{"gpu", "H100 SXM"}, {"count", 8}, {"term", "week"}}, dora);
  ASSERT_EQ(rental.status, 201) << rental.body;
  const long long rental_id = rental.Json()["id"];

  auto stock =
      Make({{"kind", "stock"}, {"gpu", "h100 sxm"}, {"count", 8}, {"region", "iad-1"}}, carl);
  ASSERT_EQ(stock.status, 201) << stock.body;
  json s = stock.Json();
  EXPECT_EQ(s["gpu"], "H100 SXM");
  EXPECT_EQ(s["region"], "IAD-1");
  EXPECT_EQ(s["count"], 8);
  EXPECT_EQ(s["max_usd_per_gpu_hour"], nullptr);
  EXPECT_EQ(s["holds_now"], false);
  EXPECT_EQ(s["fired_count"], 0);
  EXPECT_EQ(s["last_fired_at"], nullptr);
  EXPECT_EQ(s["description"], "8 × H100 SXM free in IAD-1");
  auto price =
      Make({{"kind", "price"}, {"gpu", "H100 SXM"}, {"max_usd_per_gpu_hour", "2.500"}}, carl);
  ASSERT_EQ(price.status, 201) << price.body;
  json p = price.Json();
  EXPECT_EQ(p["region"], nullptr);
  EXPECT_EQ(p["count"], nullptr);
  EXPECT_EQ(p["max_usd_per_gpu_hour"], "2.500");
  EXPECT_EQ(p["holds_now"], false);  // no offers at all
  EXPECT_EQ(p["description"], "Spot H100 SXM at or under $2.500/h");

  // An ask above the price: nothing. One at $2.400: the price alert fires, once.
  Offer(paula, "3.000");
  EXPECT_EQ(Alert(p["id"], carl)["fired_count"], 0);
  const long long cheap = Offer(paula, "2.400");
  json fired = Alert(p["id"], carl);
  EXPECT_EQ(fired["fired_count"], 1);
  EXPECT_EQ(fired["holds_now"], true);
  EXPECT_NE(fired["last_fired_at"], nullptr);
  auto got = receiver.WaitFor(1, seconds(30));
  ASSERT_EQ(got.size(), 1u) << server_->Log();
  std::string sig = got[0].headers.at("gpuhub-signature");
  std::size_t comma = sig.find(",v1=");
  ASSERT_NE(comma, std::string::npos) << sig;
  EXPECT_EQ(sig.substr(comma + 4),
            HmacSha256Hex(secret, sig.substr(2, comma - 2) + "." + got[0].body));
  json body = json::parse(got[0].body);
  EXPECT_EQ(body["type"], "alert.price");
  EXPECT_EQ(body["subject"], "alert:" + std::to_string(p["id"].get<long long>()));
  EXPECT_EQ(body["data"]["best_ask_usd_per_gpu_hour"], "2.400");
  EXPECT_EQ(body["data"]["max_usd_per_gpu_hour"], "2.500");
  EXPECT_EQ(body["message"],
            "Spot H100 SXM is offered at $2.400 per GPU-hour, at or under your "
            "$2.500 (alert " +
                std::to_string(p["id"].get<long long>()) + ")");
  Offer(paula, "2.300");  // lower still: the condition held already
  EXPECT_EQ(Alert(p["id"], carl)["fired_count"], 1);

  // The rental released: its eight cards are a free set again.
  auto released = client_->Call("POST", "/v1/rentals/" + std::to_string(rental_id) + "/release",
                                json{{"confirm", true}}, dora);
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(Alert(s["id"], carl)["fired_count"], 1);
  auto stock_notes = Notes(carl, "alert.stock");
  ASSERT_EQ(stock_notes.size(), 1u);
  EXPECT_EQ(stock_notes[0]["message"],
            "8 × H100 SXM can be rented now in IAD-1 (1 set free; alert " +
                std::to_string(s["id"].get<long long>()) + ")");
  EXPECT_EQ(stock_notes[0]["data"]["sets_free"], "1");
  got = receiver.WaitFor(2, seconds(30));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(json::parse(got[1].body)["type"], "alert.stock");

  // A restart: the alerts and what they saw come back; nothing fires by itself.
  Restart();
  EXPECT_EQ(Alert(s["id"], carl)["fired_count"], 1);
  EXPECT_EQ(Alert(p["id"], carl)["fired_count"], 1);
  EXPECT_EQ(Notes(carl, "alert.price").size(), 1u);

  // The cheap asks cancelled: back above $2.500 (re-armed); a new one at exactly $2.500 fires
  // it a second time.
  json mine = Get("/v1/asks", paula);
  for (const auto& a : mine["asks"]) {
    if (a["status"] == "open" && a["price_usd_per_gpu_hour"] != "3.000") {
      auto c = client_->Call("DELETE", "/v1/asks/" + std::to_string(a["id"].get<long long>()),
                             nullptr, paula);
      EXPECT_EQ(c.status, 200) << c.body;
    }
  }
  EXPECT_EQ(Alert(p["id"], carl)["holds_now"], false);
  EXPECT_EQ(Alert(p["id"], carl)["fired_count"], 1);
  (void)cheap;
  Offer(paula, "2.500");
  EXPECT_EQ(Alert(p["id"], carl)["fired_count"], 2);
  EXPECT_EQ(Notes(carl, "alert.price").size(), 2u);

  // Listed newest first; cancelled by its owner only.
  json list = Get("/v1/alerts", carl);
  ASSERT_EQ(list["alerts"].size(), 2u);
  EXPECT_EQ(list["alerts"][0]["id"], p["id"]);
  EXPECT_EQ(list["limit"], 25);
  const std::string path = "/v1/alerts/" + std::to_string(p["id"].get<long long>());
  EXPECT_EQ(client_->Call("DELETE", path, nullptr, dora).status, 404);
  EXPECT_EQ(Get("/v1/alerts", dora)["alerts"].size(), 0u);
  EXPECT_EQ(client_->Call("DELETE", path, nullptr, carl).status, 204);
  EXPECT_EQ(client_->Call("DELETE", path, nullptr, carl).status, 404);
  EXPECT_EQ(Get("/v1/alerts", carl)["alerts"].size(), 1u);
  Restart();
  EXPECT_EQ(Get("/v1/alerts", carl)["alerts"].size(), 1u);
}

TEST_P(AlertsApiTest, BadInputNamesTheFieldAndTheLimitHolds) {
  std::string carl = User("carl", {"customer"});
  EXPECT_EQ(client_->Call("GET", "/v1/alerts", nullptr, "").status, 401);
  EXPECT_EQ(Make({{"kind", "price"}, {"gpu", "H100 SXM"}}, "").status, 401);
  struct Case {
    json body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"kind", "later"}, {"gpu", "H100 SXM"}}, "kind"},
      {{{"gpu", "H100 SXM"}}, "kind"},
      {{{"kind", "stock"}, {"count", 1}}, "gpu"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}}, "count"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}, {"count", 3}}, "count"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}, {"count", "8"}}, "count"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}, {"count", 0}}, "count"},
      {{{"kind", "stock"}, {"gpu", "H999"}, {"count", 1}}, "gpu"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}, {"count", 1}, {"region", "MARS-1"}}, "region"},
      {{{"kind", "stock"}, {"gpu", "H100 SXM"}, {"count", 1}, {"max_usd_per_gpu_hour", "1.000"}},
       "max_usd_per_gpu_hour"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"max_usd_per_gpu_hour", "2.5001"}},
       "max_usd_per_gpu_hour"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"max_usd_per_gpu_hour", 2.5}},
       "max_usd_per_gpu_hour"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"max_usd_per_gpu_hour", "0"}},
       "max_usd_per_gpu_hour"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"region", "IAD-1"}}, "region"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"count", 2}}, "count"},
      {{{"kind", "price"}, {"gpu", "Z80"}}, "gpu"},
      {{{"kind", "price"}, {"gpu", "H100 SXM"}, {"colour", "red"}}, "colour"},
  };
  for (const auto& c : cases) {
    auto r = Make(c.body, carl);
    EXPECT_EQ(r.status, 400) << c.body.dump() << " " << r.body;
    EXPECT_EQ(Field(r), c.field) << c.body.dump() << " " << r.body;
  }
  EXPECT_EQ(client_->Call("DELETE", "/v1/alerts/abc", nullptr, carl).status, 404);
  EXPECT_EQ(client_->Call("DELETE", "/v1/alerts/1", json{{"x", 1}}, carl).status, 400);
  EXPECT_EQ(Get("/v1/alerts", carl)["alerts"].size(), 0u);  // nothing was made

  for (int i = 1; i <= 25; ++i) {
    auto r = Make({{"kind", "price"},
                   {"gpu", "H100 SXM"},
                   {"max_usd_per_gpu_hour", std::to_string(i) + ".000"}},
                  carl);
    ASSERT_EQ(r.status, 201) << r.body;
  }
  auto over = Make({{"kind", "price"}, {"gpu", "A100 SXM"}}, carl);
  EXPECT_EQ(over.status, 429) << over.body;
  EXPECT_EQ(over.Json()["error"]["code"], "resource_exhausted");
}

INSTANTIATE_TEST_SUITE_P(Databases, AlertsApiTest, ::testing::Values("sqlite", "postgresql"));

// `gpuhub alerts ...` against the real server: exit 0 with the alert, exit 2 naming the field.
class AlertsCliTest : public CliFixture {};

TEST_F(AlertsCliTest, MakeListAndCancel) {
  auto bad = As(alice_, {"alerts", "stock", "--gpu", "H100 SXM", "--count", "3"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(Has(bad, "count must be one of the counts H100 SXM is rented in: 1, 2, 4, 8"))
      << bad.output;
  auto price = As(alice_, {"alerts", "price", "--gpu", "H100 SXM", "--max-usd-per-gpu-hour", "2.5"});
  ASSERT_EQ(price.exit_code, 0) << price.output;
  EXPECT_TRUE(Has(price, "alert 1: Spot H100 SXM at or under $2.500/h (not now; fired 0x)"))
      << price.output;
  auto stock = As(alice_, {"alerts", "stock", "--gpu", "A100 SXM", "--count", "8", "--region",
                           "PDX-1"});
  ASSERT_EQ(stock.exit_code, 0) << stock.output;
  EXPECT_TRUE(Has(stock, "alert 2: 8 × A100 SXM free in PDX-1 (not now; fired 0x)"))
      << stock.output;
  auto list = As(alice_, {"alerts", "list"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_LT(list.output.find("alert 2:"), list.output.find("alert 1:")) << list.output;
  auto json_list = As(alice_, {"alerts", "list", "--json"});
  EXPECT_EQ(json::parse(json_list.output)["alerts"].size(), 2u) << json_list.output;
  EXPECT_EQ(As(alice_, {"alerts", "cancel", "1"}).exit_code, 0);
  auto again = As(alice_, {"alerts", "cancel", "1"});
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_TRUE(Has(As(alice_, {"alerts", "list"}), "alert 2:"));
}

}  // namespace
}  // namespace gpuhub::testing
