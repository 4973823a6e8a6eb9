// Term rentals through HTTP: a real server with a manual clock on SQLite and PostgreSQL — the
// seed's prices, bad input (each a 4xx naming the field), the 402 with its top-up, the renewal
// lifecycle (invoice, pay, pay again, hold, release), admin node management, restarts.
#include <gtest/gtest.h>

#include "harness.h"
#include "server_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr long long kDay = 24 * 3600;

class RentalsApiTest : public ServerFixture {
 protected:
  json Node(const std::string& gpu, const std::string& region, int cards = 0) {
    json body = {{"gpu", gpu}, {"region", region}};
    if (cards > 0) body["cards"] = cards;
    auto r = client_->Call("POST", "/v1/admin/nodes", body, admin_);
    EXPECT_EQ(r.status, 201) << r.body;
    return r.Json();
  }
  json Quote(const json& body, int expected_status = 200) {
    auto r = client_->Call("POST", "/v1/rentals/quote", body);
    EXPECT_EQ(r.status, expected_status) << r.body;
    return r.Json();
  }
  std::string Usd(const std::string& token) {
    auto r = client_->Call("GET", "/v1/wallets", nullptr, token);
    return r.Json()["wallets"][0]["available"];
  }
  // A 4xx whose error names `field`.
  void ExpectRefused(const HttpResponse& r, int status, const std::string& field) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = r.Json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    if (field.empty()) return;
    ASSERT_TRUE(j["error"].contains("field")) << r.body;
    EXPECT_EQ(j["error"]["field"], field) << r.body;
  }
};

TEST_P(RentalsApiTest, TheSeedFiguresComeOutExactlyAndQuotesNeedNoAccount) {
  Node("H100 SXM", "IAD-1");
  Node("A100 SXM", "PDX-1");
  Node("MI300X", "DFW-1");
  json h100 = Quote({{"gpu", "H100 SXM"}, {"count", 8}, {"term", "month"}});
  EXPECT_EQ(h100["amount"]["net"], "12168.000000");
  EXPECT_EQ(h100["amount"]["gross"], "12168.000000");
  EXPECT_EQ(h100["discount_percent"], "10");
  EXPECT_EQ(h100["subtotal"], "13520.000000");
  EXPECT_EQ(h100["available"], true);
  EXPECT_EQ(h100["region"], "IAD-1");
  EXPECT_EQ(h100["formula"],
            "8 x 1690.000000 = 13520.000000; - 10% (1352.000000) = 12168.000000 USD net; + tax "
            "0.000000 = 12168.000000 USD");
  json a100 = Quote({{"gpu", "a100-sxm"}, {"count", 2}, {"term", "week"}});
  EXPECT_EQ(a100["amount"]["net"], "532.000000");
  EXPECT_EQ(a100["gpu"], "A100 SXM");
  json mi = Quote({{"gpu", "MI300X"}, {"count", 8}, {"term", "month"}, {"region", "DFW-1"}});
  EXPECT_EQ(mi["amount"]["net"], "11448.000000");
  // Why not: no stock in that region, count not allowed for that card, FP8.
  json none = Quote({{"gpu", "H100 SXM"}, {"count", 8}, {"term", "month"}, {"region", "DFW-1"}});
  EXPECT_EQ(none["available"], false);
  EXPECT_EQ(none["reason"]["code"], "no_stock");
  EXPECT_EQ(none["reason"]["field"], "region");
  json b200 = Quote({{"gpu", "B200"}, {"count", 1}, {"term", "month"}});
  EXPECT_EQ(b200["reason"]["code"], "count_not_allowed");
  json fp8 = Quote({{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}, {"fp8", true}});
  EXPECT_EQ(fp8["reason"]["code"], "needs_fp8");
  json stock = client_->Call("GET", "/v1/stock").Json();
  ASSERT_TRUE(stock["stock"].is_array());
  for (const auto& card : stock["stock"]) {
    if (card["gpu"] != "B200") continue;
    EXPECT_EQ(card["counts"], json({2, 4, 8}));
    EXPECT_FALSE(card["regions"][0]["sets_free"].contains("1"));
  }
}

TEST_P(RentalsApiTest, BadInputIsA4xxNamingTheFieldAndChangesNothing) {
  Node("H100 SXM", "IAD-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  std::string bob = SignUpAndLogIn(*client_, "bob");
  Credit("alice", "20000");
  auto order = [&](const json& body) {
    return client_->Call("POST", "/v1/rentals", body, alice);
  };
  json ok = {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"}};
  auto with = [&](const std::string& field, const json& value) {
    json b = ok;
    b[field] = value;
    return b;
  };
  ExpectRefused(order(with("gpu", "H999")), 400, "gpu");
  ExpectRefused(order(with("gpu", 7)), 400, "gpu");
  ExpectRefused(order(with("count", 3)), 400, "count");
  ExpectRefused(order(with("count", 0)), 400, "count");
  ExpectRefused(order(with("count", -8)), 400, "count");
  ExpectRefused(order(with("count", 1'000'000'000'000LL)), 400, "count");
  ExpectRefused(order(with("count", "8")), 400, "count");
  ExpectRefused(order(with("count", 2.5)), 400, "count");
  ExpectRefused(order({{"gpu", "B200"}, {"count", 1}, {"term", "month"}}), 400, "count");
  ExpectRefused(order(with("region", "MARS-1")), 400, "region");
  ExpectRefused(order(with("region", "dfw 1")), 400, "region");
  ExpectRefused(order(with("term", "year")), 400, "term");
  ExpectRefused(order(with("term", "")), 400, "term");
  ExpectRefused(order(with("currency", "BTC")), 400, "currency");
  ExpectRefused(order(with("auto_renew", "yes")), 400, "auto_renew");
  ExpectRefused(order(with("refund", true)), 400, "refund");
  ExpectRefused(order({{"count", 1}, {"term", "week"}}), 400, "gpu");
  ExpectRefused(order({{"gpu", "MI300X"}, {"count", 8}, {"term", "month"}, {"region", "IAD-1"}}),
                409, "region");
  EXPECT_EQ(Usd(alice), "20000.000000");  // nothing was charged

  auto created = order(ok);
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = std::to_string(created.Json()["id"].get<long long>());
  // Another user's rental looks missing, whatever they try.
  EXPECT_EQ(client_->Call("GET", "/v1/rentals/" + id, nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/rentals/" + id + "/release", {{"confirm", true}}, bob).status,
            404);
  EXPECT_EQ(
      client_->Call("POST", "/v1/rentals/" + id + "/auto-renew", {{"enabled", false}}, bob).status,
      404);
  EXPECT_EQ(client_->Call("GET", "/v1/rentals/abc", nullptr, alice).status, 404);
  EXPECT_EQ(client_->Call("GET", "/v1/rentals/999999", nullptr, alice).status, 404);
  ExpectRefused(client_->Call("POST", "/v1/rentals/" + id + "/release", json::object(), alice),
                400, "confirm");
  ExpectRefused(client_->Call("POST", "/v1/rentals/" + id + "/release", {{"confirm", "yes"}}, alice),
                400, "confirm");
  ExpectRefused(client_->Call("POST", "/v1/rentals/" + id + "/auto-renew", json::object(), alice),
                400, "enabled");
  ExpectRefused(
      client_->Call("POST", "/v1/rentals/" + id + "/renew", {{"currency", "XYZ"}}, alice), 400,
      "currency");
  EXPECT_EQ(client_->Call("GET", "/v1/rentals/" + id, nullptr, alice).Json()["state"], "active");
  // A script flipping auto-renew is stopped after 10 switches a term (429 naming the field).
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(client_->Call("POST", "/v1/rentals/" + id + "/auto-renew", {{"enabled", i % 2 == 1}},
                            alice)
                  .status,
              200);
  }
  ExpectRefused(
      client_->Call("POST", "/v1/rentals/" + id + "/auto-renew", {{"enabled", false}}, alice), 429,
      "enabled");
  // Anonymous and wrong roles.
  EXPECT_EQ(client_->Call("POST", "/v1/rentals", ok).status, 401);
  EXPECT_EQ(client_->Call("POST", "/v1/admin/nodes", {{"gpu", "H100 SXM"}, {"region", "IAD-1"}},
                          alice)
                .status,
            403);
  // Admin node input.
  ExpectRefused(client_->Call("POST", "/v1/admin/nodes",
                              {{"gpu", "H100 SXM"}, {"region", "IAD-1"}, {"cards", 99}}, admin_),
                400, "cards");
  ExpectRefused(client_->Call("POST", "/v1/admin/nodes", {{"gpu", "MI300X"}, {"region", "IAD-1"}},
                              admin_),
                400, "region");
  ExpectRefused(client_->Call("POST", "/v1/admin/nodes",
                              {{"gpu", "H100 SXM"}, {"region", "IAD-1"}, {"hostname", "Bad Host"}},
                              admin_),
                400, "hostname");
  EXPECT_EQ(client_->Call("POST", "/v1/admin/nodes/424242/drain", nullptr, admin_).status, 404);
}

TEST_P(RentalsApiTest, AShortWalletGets402WithTheShortfallAndATopUpThatPaysForIt) {
  Node("H100 SXM", "IAD-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "100");
  json body = {{"gpu", "H100 SXM"}, {"count", 8}, {"term", "month"}};
  auto short1 = client_->Call("POST", "/v1/rentals", body, alice, "order-1");
  ASSERT_EQ(short1.status, 402) << short1.body;
  json e = short1.Json()["error"];
  EXPECT_EQ(e["code"], "insufficient_funds");
  EXPECT_EQ(e["shortfall"]["amount"], "12068.000000");
  EXPECT_EQ(e["shortfall"]["needed"], "12168.000000");
  EXPECT_EQ(e["topup"]["amount"], "12068.00");
  EXPECT_EQ(e["topup"]["status"], "new");
  std::string invoice = e["topup"]["invoice_id"];
  // Asked again (without the key): the same invoice, not a second one.
  auto short2 = client_->Call("POST", "/v1/rentals", body, alice);
  ASSERT_EQ(short2.status, 402);
  EXPECT_EQ(short2.Json()["error"]["topup"]["invoice_id"], invoice);
  auto topups = client_->Call("GET", "/v1/topups", nullptr, alice).Json()["topups"];
  EXPECT_EQ(topups.size(), 1u);
  // The processor settles it; the order goes through.
  std::string settled = json({{"type", "InvoiceSettled"}, {"invoiceId", invoice}}).dump();
  auto hook = client_->Send("POST", "/v1/payments/webhook", settled,
                            {{"Content-Type", "application/json"},
                             {"BTCPay-Sig", WebhookSignature(ServerOptions().webhook_secret, settled)}});
  ASSERT_EQ(hook.status, 200) << hook.body;
  auto ordered = client_->Call("POST", "/v1/rentals", body, alice, "order-2");
  ASSERT_EQ(ordered.status, 201) << ordered.body;
  EXPECT_EQ(Usd(alice), "0.000000");
  // A retry with the same key answers the same rental and charges nothing more.
  auto retry = client_->Call("POST", "/v1/rentals", body, alice, "order-2");
  EXPECT_EQ(retry.status, 201);
  EXPECT_EQ(retry.Header("idempotent-replayed"), "true");
  EXPECT_EQ(retry.Json()["id"], ordered.Json()["id"]);
  auto rentals = client_->Call("GET", "/v1/rentals", nullptr, alice).Json()["rentals"];
  EXPECT_EQ(rentals.size(), 1u);
}

TEST_P(RentalsApiTest, RenewalInvoicePaidTwiceChargesOnceHoldResumesAndUnpaidIsReleased) {
  Node("A100 SXM", "DFW-1");
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "1064");
  auto created = client_->Call("POST", "/v1/rentals",
                               {{"gpu", "A100 SXM"}, {"count", 2}, {"term", "week"},
                                {"auto_renew", false}},
                               alice);
  ASSERT_EQ(created.status, 201) << created.body;
  json rental = created.Json();
  std::string id = std::to_string(rental["id"].get<long long>());
  std::string end1 = rental["term_end"];
  EXPECT_EQ(rental["next_transition"]["what"], "renewal_invoice");
  EXPECT_EQ(Usd(alice), "532.000000");
  Advance(6 * kDay);
  json now = client_->Call("GET", "/v1/rentals/" + id, nullptr, alice).Json();
  ASSERT_TRUE(now["renewal"].is_object()) << now.dump();
  EXPECT_EQ(now["renewal"]["status"], "open");
  EXPECT_EQ(now["renewal"]["amount"]["gross"], "532.000000");
  EXPECT_EQ(now["renewal"]["due_at"], end1);
  EXPECT_EQ(now["next_transition"]["what"], "stops");
  auto notes = client_->Call("GET", "/v1/notifications", nullptr, alice).Json()["notifications"];
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes[0]["type"], "rental.renewal_invoice");
  EXPECT_EQ(notes[0]["data"]["amount"], "532.000000");

  Restart();  // nothing of it is lost
  auto paid = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), alice);
  ASSERT_EQ(paid.status, 200) << paid.body;
  EXPECT_EQ(paid.Json()["renewal"]["status"], "paid");
  std::string after_first = Usd(alice);
  EXPECT_EQ(after_first, "0.000000");
  auto again = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), alice);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.Json()["renewal"], paid.Json()["renewal"]);  // the same answer...
  EXPECT_EQ(Usd(alice), after_first);                          // ...and no second charge
  Advance(kDay + 3600);
  now = client_->Call("GET", "/v1/rentals/" + id, nullptr, alice).Json();
  EXPECT_EQ(now["state"], "active");
  EXPECT_EQ(now["period"], 2);
  EXPECT_EQ(now["term_start"], end1);  // the new term runs from the old end

  // Term 2 goes unpaid: stopped at its end, held 72 h, then released with its key destroyed.
  Advance(7 * kDay);
  now = client_->Call("GET", "/v1/rentals/" + id, nullptr, alice).Json();
  EXPECT_EQ(now["state"], "stopped");
  EXPECT_EQ(now["instance"]["state"], "stopped");
  EXPECT_TRUE(now.contains("hold_until"));
  json stock = client_->Call("GET", "/v1/stock").Json();
  Advance(3 * kDay);
  now = client_->Call("GET", "/v1/rentals/" + id, nullptr, alice).Json();
  EXPECT_EQ(now["state"], "released");
  EXPECT_EQ(now["release_reason"], "unpaid");
  EXPECT_EQ(now["instance"]["state"], "erased");
  EXPECT_FALSE(now["instance"]["key_destroyed_at"].is_null());
  EXPECT_EQ(now["renewal"]["status"], "void");
  std::vector<std::string> events;
  for (const auto& h : now["history"]) events.push_back(h["event"]);
  EXPECT_EQ(events, (std::vector<std::string>{"created", "provisioned", "renewal_invoiced",
                                              "renewal_paid", "extended", "renewal_invoiced",
                                              "stopped", "released", "key_destroyed"}));
  auto late = client_->Call("POST", "/v1/rentals/" + id + "/renew", json::object(), alice);
  EXPECT_EQ(late.status, 409) << late.body;
  auto ledger = client_->Call("GET", "/v1/admin/ledger", nullptr, admin_).Json();
  EXPECT_EQ(ledger["balanced"], true);
  auto fleet = client_->Call("GET", "/v1/admin/rentals", nullptr, admin_).Json();
  EXPECT_EQ(fleet["invariants"], "ok");
  EXPECT_EQ(fleet["settlement"], "ok");
}

TEST_P(RentalsApiTest, AdminsDrainUndrainAndRemoveNodesOnlyWhenNothingIsOnThem) {
  json node = Node("A100 SXM", "IAD-1");
  std::string nid = std::to_string(node["id"].get<long long>());
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "1000");
  auto created = client_->Call("POST", "/v1/rentals",
                               {{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}}, alice);
  ASSERT_EQ(created.status, 201);
  std::string id = std::to_string(created.Json()["id"].get<long long>());
  auto drained = client_->Call("POST", "/v1/admin/nodes/" + nid + "/drain", nullptr, admin_);
  ASSERT_EQ(drained.status, 200) << drained.body;
  EXPECT_EQ(drained.Json()["state"], "draining");
  EXPECT_EQ(drained.Json()["live_rentals"], json({created.Json()["id"]}));
  json q = Quote({{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}});
  EXPECT_EQ(q["available"], false);  // a draining node takes no new rentals
  auto removed = client_->Call("DELETE", "/v1/admin/nodes/" + nid, nullptr, admin_);
  EXPECT_EQ(removed.status, 409) << removed.body;
  ASSERT_EQ(client_->Call("POST", "/v1/admin/nodes/" + nid + "/undrain", nullptr, admin_).status,
            200);
  EXPECT_EQ(Quote({{"gpu", "A100 SXM"}, {"count", 1}, {"term", "week"}})["available"], true);
  ASSERT_EQ(
      client_->Call("POST", "/v1/rentals/" + id + "/release", {{"confirm", true}}, alice).status,
      200);
  removed = client_->Call("DELETE", "/v1/admin/nodes/" + nid, nullptr, admin_);
  EXPECT_EQ(removed.status, 409) << removed.body;  // its NVMe is not wiped yet
  Advance(7 * kDay);
  removed = client_->Call("DELETE", "/v1/admin/nodes/" + nid, nullptr, admin_);
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.Json()["state"], "removed");
  auto nodes = client_->Call("GET", "/v1/admin/nodes?gpu=a100-sxm", nullptr, admin_).Json();
  EXPECT_EQ(nodes["nodes"].size(), 1u);
  // Pages of nodes.
  Node("H100 SXM", "DFW-1");
  Node("H100 SXM", "IAD-1");
  auto page1 = client_->Call("GET", "/v1/admin/nodes?limit=2", nullptr, admin_).Json();
  ASSERT_EQ(page1["nodes"].size(), 2u);
  ASSERT_FALSE(page1["next_after"].is_null());
  auto page2 = client_->Call("GET", "/v1/admin/nodes?limit=2&after=" +
                                        std::to_string(page1["next_after"].get<long long>()),
                             nullptr, admin_)
                   .Json();
  ASSERT_EQ(page2["nodes"].size(), 1u);
  EXPECT_TRUE(page2["next_after"].is_null());
  ExpectRefused(client_->Call("GET", "/v1/admin/nodes?limit=0", nullptr, admin_), 400, "");
}

INSTANTIATE_TEST_SUITE_P(Backends, RentalsApiTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
