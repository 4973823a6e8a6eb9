// `gpuhub rentals ...`, `gpuhub admin nodes ...` and `gpuhub catalog --server` against a real
// server: exit codes (0 ok, 2 bad input or any 4xx, 1 unreachable), the figures they print, the
// 402's top-up on the error line, the release confirmation. SQLite (the CLI holds no state).
#include <gtest/gtest.h>

#include "cli_fixture.h"

namespace gpuhub::testing {
namespace {

using RentalsCliTest = CliFixture;

TEST_F(RentalsCliTest, RentRenewAndReleaseFromTheCommandLine) {
  auto node = As(admin_, {"admin", "nodes", "add", "--gpu", "H100 SXM", "--region", "IAD-1",
                          "--hostname", "iad1-h100-1"});
  ASSERT_EQ(node.exit_code, 0) << node.output;
  EXPECT_TRUE(Has(node, "iad1-h100-1"));
  auto quote = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "8", "--term", "month"},
                         "");
  ASSERT_EQ(quote.exit_code, 0) << quote.output;
  EXPECT_TRUE(Has(quote, "12,168.00 USD")) << quote.output;
  EXPECT_TRUE(Has(quote, "10% at 8 cards")) << quote.output;
  EXPECT_TRUE(Has(quote, "available in IAD-1")) << quote.output;
  auto json_quote = RunGpuhub(
      {"rentals", "quote", "--gpu", "a100-sxm", "--count", "2", "--term", "week", "--json"}, "");
  ASSERT_EQ(json_quote.exit_code, 0);
  EXPECT_EQ(json::parse(json_quote.output)["amount"]["net"], "532.000000");

  // No money: exit 2, and the line names the top-up that covers the shortfall.
  auto broke = As(alice_, {"rentals", "create", "--gpu", "H100 SXM", "--count", "1", "--term",
                           "week"});
  EXPECT_EQ(broke.exit_code, 2) << broke.output;
  EXPECT_TRUE(Has(broke, "402")) << broke.output;
  EXPECT_TRUE(Has(broke, "top up 475.00 USD at")) << broke.output;
  auto credit = client_->Call("POST", "/v1/admin/credits",
                              {{"username", "alice"}, {"amount", "950"}, {"currency", "USD"},
                               {"reason", "cli test"}},
                              admin_);
  ASSERT_EQ(credit.status, 201);
  auto rented = As(alice_, {"rentals", "create", "--gpu", "H100 SXM", "--count", "1", "--term",
                            "week", "--idempotency-key", "cli-1", "--json"});
  ASSERT_EQ(rented.exit_code, 0) << rented.output;
  std::string id = std::to_string(json::parse(rented.output)["id"].get<long long>());
  auto again = As(alice_, {"rentals", "create", "--gpu", "H100 SXM", "--count", "1", "--term",
                           "week", "--idempotency-key", "cli-1", "--json"});
  EXPECT_EQ(json::parse(again.output)["id"].get<long long>(), std::stoll(id));  // not rented twice
  auto list = As(alice_, {"rentals", "list"});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_TRUE(Has(list, "1x H100 SXM week")) << list.output;
  auto renew = As(alice_, {"rentals", "renew", id});
  ASSERT_EQ(renew.exit_code, 0) << renew.output;
  EXPECT_TRUE(Has(renew, "term 2 paid: 475.00 USD")) << renew.output;
  auto renew_again = As(alice_, {"rentals", "renew", id});
  EXPECT_EQ(renew_again.exit_code, 0);
  EXPECT_TRUE(Has(renew_again, "term 2 paid: 475.00 USD"));
  auto wallets = client_->Call("GET", "/v1/wallets", nullptr, alice_).Json();
  EXPECT_EQ(wallets["wallets"][0]["available"], "0.000000");  // charged once
  auto show = As(alice_, {"rentals", "show", id});
  EXPECT_TRUE(Has(show, "renewal_paid")) << show.output;
  EXPECT_TRUE(Has(show, "next      renews at")) << show.output;

  auto off = As(alice_, {"rentals", "auto-renew", id, "off"});
  EXPECT_EQ(off.exit_code, 0);
  EXPECT_TRUE(Has(off, "auto-renew off"));
  auto unconfirmed = As(alice_, {"rentals", "release", id});
  EXPECT_EQ(unconfirmed.exit_code, 2);
  EXPECT_TRUE(Has(unconfirmed, "nothing of the term is refunded")) << unconfirmed.output;
  auto released = As(alice_, {"rentals", "release", id, "--yes"});
  ASSERT_EQ(released.exit_code, 0) << released.output;
  EXPECT_TRUE(Has(released, "released (released_by_customer)")) << released.output;

  auto stock = RunGpuhub({"catalog"}, "");
  EXPECT_TRUE(Has(stock, "live from " + url_)) << stock.output.substr(stock.output.size() - 400);
  auto stock_json = RunGpuhub({"catalog", "--json"}, "");
  ASSERT_EQ(stock_json.exit_code, 0);
  json live = json::parse(stock_json.output)["live_stock"];
  bool found = false;
  for (const auto& card : live["stock"]) {
    if (card["gpu"] == "H100 SXM") found = card["regions"][1]["cards_free"] == 8;
  }
  EXPECT_TRUE(found) << live.dump();
}

TEST_F(RentalsCliTest, BadInputAndUnreachableServersExitWithTheRightCode) {
  auto count = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "3", "--term", "week"},
                         "");
  EXPECT_EQ(count.exit_code, 2);
  EXPECT_TRUE(Has(count, "(field count)")) << count.output;
  auto term = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "1", "--term", "year"},
                        "");
  EXPECT_EQ(term.exit_code, 2);
  EXPECT_TRUE(Has(term, "(field term)")) << term.output;
  auto missing = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "1"}, "");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  auto no_token = RunGpuhub({"rentals", "list"}, "");
  EXPECT_EQ(no_token.exit_code, 2);
  EXPECT_TRUE(Has(no_token, "--token")) << no_token.output;
  auto not_admin = As(alice_, {"admin", "nodes", "add", "--gpu", "H100 SXM", "--region", "IAD-1"});
  EXPECT_EQ(not_admin.exit_code, 2);
  EXPECT_TRUE(Has(not_admin, "403")) << not_admin.output;
  // A node's host agent enrols with a one-time token; the CLI prints the line to run on the node.
  auto added = As(admin_, {"admin", "nodes", "add", "--gpu", "H100 SXM", "--region", "IAD-1",
                           "--json"});
  ASSERT_EQ(added.exit_code, 0) << added.output;
  const std::string node = std::to_string(json::parse(added.output)["id"].get<long long>());
  auto enrol = As(admin_, {"admin", "nodes", "enrol", node});
  ASSERT_EQ(enrol.exit_code, 0) << enrol.output;
  const auto at = enrol.output.find("--token ghe_");
  ASSERT_NE(at, std::string::npos) << enrol.output;
  EXPECT_TRUE(Has(enrol, "gpuhub agent enroll --server " + url_)) << enrol.output;
  const std::string token = enrol.output.substr(at + 8, enrol.output.find('\n', at) - at - 8);
  EXPECT_TRUE(Has(enrol, "  " + token + "\n")) << "the token alone on its own line";
  auto enrol_json = As(admin_, {"admin", "nodes", "enrol", node, "--json"});
  ASSERT_EQ(enrol_json.exit_code, 0) << enrol_json.output;
  EXPECT_EQ(json::parse(enrol_json.output)["node_id"], std::stoll(node));
  EXPECT_NE(json::parse(enrol_json.output)["token"], token) << "each token is new";
  auto enrol_missing = As(admin_, {"admin", "nodes", "enrol", "999"});
  EXPECT_EQ(enrol_missing.exit_code, 2) << enrol_missing.output;
  EXPECT_TRUE(Has(enrol_missing, "404")) << enrol_missing.output;
  auto enrol_customer = As(alice_, {"admin", "nodes", "enrol", node});
  EXPECT_EQ(enrol_customer.exit_code, 2);
  EXPECT_TRUE(Has(enrol_customer, "403")) << enrol_customer.output;
  auto wrong_region = As(admin_, {"admin", "nodes", "add", "--gpu", "MI300X", "--region", "IAD-1"});
  EXPECT_EQ(wrong_region.exit_code, 2);
  EXPECT_TRUE(Has(wrong_region, "(field region)")) << wrong_region.output;
  auto other = As(alice_, {"rentals", "show", "12345"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_TRUE(Has(other, "404")) << other.output;
  ::setenv("GPUHUB_SERVER", "http://127.0.0.1:1", 1);  // nothing listens there
  auto down = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "1", "--term", "week"},
                        "");
  EXPECT_EQ(down.exit_code, 1) << down.output;
  ::setenv("GPUHUB_SERVER", "ftp://example.com", 1);
  auto bad_url = RunGpuhub({"rentals", "quote", "--gpu", "H100 SXM", "--count", "1", "--term",
                            "week"},
                           "");
  EXPECT_EQ(bad_url.exit_code, 2) << bad_url.output;
}

}  // namespace
}  // namespace gpuhub::testing
