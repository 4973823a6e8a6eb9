#include "http/market_json.h"

#include <gtest/gtest.h>

#include "core/json_writer.h"
#include "engine/agents.h"

namespace gpuhub::http {
namespace {

// A bid is written straight into its answer; these are the bytes its documented JSON object
// (docs/api.md) serializes to, member for member and in the same order.
TEST(MarketJsonTest, ABidIsWrittenAsItsDocumentedObject) {
  engine::State state;
  market::Bid resting;
  resting.id = 41;
  resting.gpu = "H100 SXM";
  resting.gpus = 2;
  resting.limit_micros = 2'345'000;
  resting.time_in_force = market::TimeInForce::kGtc;
  resting.status = market::BidStatus::kResting;
  resting.created_at = 1'700'000'000'000'000;
  resting.hold_micros = 4'690'000;
  json expected = {{"id", 41},
                   {"gpu", "H100 SXM"},
                   {"gpus", 2},
                   {"region", nullptr},
                   {"market", false},
                   {"limit_usd_per_gpu_hour", "2.345"},
                   {"time_in_force", "gtc"},
                   {"expires_at", nullptr},
                   {"currency", "USD"},
                   {"status", "resting"},
                   {"close_reason", nullptr},
                   {"lease_id", nullptr},
                   {"hold", "4.690000"},
                   {"created_at", "2023-11-14T22:13:20Z"},
                   {"closed_at", nullptr},
                   {"image", state.agents->config.default_image}};
  EXPECT_EQ(BidBody(state, resting), DumpJson(expected));

  market::Bid filled = resting;
  filled.id = 42;
  filled.region = "eu-west";
  filled.is_market = true;
  filled.limit_micros = 0;
  filled.time_in_force = market::TimeInForce::kIoc;
  filled.currency = Currency::kEur;
  filled.status = market::BidStatus::kFilled;
  filled.close_reason = market::BidCloseReason::kFilled;
  filled.lease_id = 7;
  filled.expires_at = 1'700'000'360'000'000;
  filled.closed_at = 1'700'000'001'000'000;
  state.agents->image_by_bid[42] = "ghcr.io/acme/train:1";
  expected["id"] = 42;
  expected["region"] = "eu-west";
  expected["market"] = true;
  expected["limit_usd_per_gpu_hour"] = nullptr;
  expected["time_in_force"] = "ioc";
  expected["expires_at"] = "2023-11-14T22:19:20Z";
  expected["currency"] = "EUR";
  expected["status"] = "filled";
  expected["close_reason"] = "filled";
  expected["lease_id"] = 7;
  expected["hold"] = nullptr;
  expected["closed_at"] = "2023-11-14T22:13:21Z";
  expected["image"] = "ghcr.io/acme/train:1";
  EXPECT_EQ(BidBody(state, filled), DumpJson(expected));
}

}  // namespace
}  // namespace gpuhub::http
