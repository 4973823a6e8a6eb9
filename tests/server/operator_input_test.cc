// What an operator hands the server is checked like any user input: the webhook secret it starts
// with and the FX rates an admin sets. A real server process, real HTTP.
#include <gtest/gtest.h>

#include <string>

#include "harness.h"

namespace gpuhub::testing {
namespace {

// A one-character webhook secret used to be accepted: one signed delivery lets anyone find a
// short secret offline and forge payments. Below 32 bytes `serve` refuses to start (exit 2),
// whether the secret comes from the config file or from GPUHUB_WEBHOOK_SECRET.
TEST(OperatorInputTest, AWebhookSecretShorterThan32BytesStopsTheServer) {
  TempDir dir;
  struct Case {
    std::string file_secret, env_secret;
    bool starts;
    const char* message;
  } cases[] = {
      {"x", "", false,
       "payments.webhook_secret is 1 bytes; a webhook secret must be at least 32 bytes"},
      {"", std::string(31, 's'), false, "GPUHUB_WEBHOOK_SECRET is 31 bytes"},
      {"", std::string(32, 's'), true, ""},
  };
  for (const auto& c : cases) {
    ServerOptions options;
    options.db = FreshDatabaseUrl("sqlite", dir);
    options.webhook_secret = c.file_secret;
    options.env_webhook_secret = c.env_secret;
    ServerProcess server(dir, options);
    EXPECT_EQ(server.Start(), c.starts) << c.file_secret << c.env_secret << ": " << server.Log();
    if (!c.starts) {
      EXPECT_NE(server.Log().find(c.message), std::string::npos) << server.Log();
    }
  }
}

// An admin FX rate of 0.000000001 used to be accepted and made absurd balances until overflow
// stopped the conversions. Rates are 0.1 .. 10 and move at most 25% per update (field "rate").
TEST(OperatorInputTest, AdminFxRatesStayInASaneRangeAndMoveAtMostAQuarterPerUpdate) {
  TempDir dir;
  ServerOptions options;
  options.db = FreshDatabaseUrl("sqlite", dir);
  ASSERT_EQ(CreateAdmin(dir, options).exit_code, 0);
  ServerProcess server(dir, options);
  ASSERT_TRUE(server.Start()) << server.Log();
  HttpClient client(server.port());
  std::string root = LogInAdmin(client);
  ASSERT_FALSE(root.empty());
  auto put = [&](const std::string& pair, const std::string& rate) {
    return client.Call("PUT", "/v1/admin/fx-rates/" + pair, {{"rate", rate}, {"spread_bps", 50}},
                       root);
  };
  for (const char* absurd : {"0.000000001", "0.09", "10.5", "1000"}) {
    auto r = put("EUR/USD", absurd);
    EXPECT_EQ(r.status, 400) << absurd << ": " << r.body;
    EXPECT_EQ(r.Json()["error"]["field"], "rate") << r.body;
  }
  ASSERT_EQ(put("EUR/USD", "1.08").status, 200);
  // A typo (1.8 for 1.08) is a 67% move: refused, and the rate stays.
  auto typo = put("EUR/USD", "1.8");
  EXPECT_EQ(typo.status, 400) << typo.body;
  EXPECT_EQ(typo.Json()["error"]["field"], "rate");
  EXPECT_NE(typo.body.find("moves more than 25%"), std::string::npos) << typo.body;
  EXPECT_EQ(put("EUR/USD", "1.36").status, 400);  // +25.9%
  EXPECT_EQ(put("EUR/USD", "1.35").status, 200);  // +25%
  // Quoted the other way, the move is measured against the inverse (1/1.35 = 0.7407..).
  EXPECT_EQ(put("USD/EUR", "0.55").status, 400);  // -25.7%
  auto inverse = put("USD/EUR", "0.6");           // -19%
  EXPECT_EQ(inverse.status, 200) << inverse.body;
  auto rates = client.Call("GET", "/v1/fx-rates", nullptr, root);
  EXPECT_NE(rates.body.find("\"0.6\""), std::string::npos) << rates.body;
}

}  // namespace
}  // namespace gpuhub::testing
