#include "fit/market_fit.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "catalog/catalog.h"

namespace gpuhub::fit {
namespace {

const catalog::Catalog& Fleet() {
  static const catalog::Catalog c = [] {
    auto c = catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
    if (!c.ok()) std::abort();
    return std::move(c).value();
  }();
  return c;
}

MarketOffer Offer(std::int64_t ask, const char* gpu, int free, std::int64_t price_micros,
                  const char* region = "IAD-1", int min_gpus = 1) {
  return {ask, ask + 100, gpu, region, free, min_gpus, price_micros, "2027-01-01T00:00:00Z"};
}

FitRequest Request(std::initializer_list<std::pair<const char*, const char*>> flags) {
  RequestFields f;
  for (const auto& [k, v] : flags) {
    std::string key = k;
    if (key == "model") f.model = v;
    if (key == "workload") f.workload = v;
    if (key == "precision") f.precision = v;
    if (key == "region") f.region = v;
    if (key == "gpu") f.gpu = v;
    if (key == "max_monthly_usd") f.max_monthly_usd = v;
  }
  auto r = ResolveMarketFitRequest(f, {std::string(GPUHUB_SOURCE_DIR) + "/data", false}, Fleet());
  if (!r.ok()) {
    ADD_FAILURE() << r.status().ToString();
    return {};
  }
  return *r;
}

struct Case {
  const char* name;
  FitRequest request;
  std::vector<MarketOffer> offers;
  std::int64_t best_ask;  // 0: nothing fits
  int best_count;
  std::int64_t best_hourly_micros;
};

TEST(MarketFitTest, CheapestOfferThatHoldsTheJob) {
  const std::vector<MarketOffer> book = {
      Offer(1, "H100 SXM", 8, 2'880'000), Offer(2, "A100 SXM", 2, 1'790'000),
      Offer(3, "A100 PCIe", 1, 1'500'000), Offer(4, "H200", 2, 4'190'000, "DFW-1")};
  const Case cases[] = {
      {"7B bf16 takes the cheapest card", Request({{"model", "7b"}, {"workload", "infer"}}), book,
       3, 1, 1'500'000},
      {"70B fp8 needs FP8: A100s are out (A100 PCIe's FP8 is not published)",
       Request({{"model", "70b"}, {"workload", "infer"}, {"precision", "fp8"}}), book, 1, 1,
       2'880'000},
      {"region filter", Request({{"model", "7b"}, {"workload", "infer"}, {"region", "DFW-1"}}),
       book, 4, 1, 4'190'000},
      {"gpu filter names a spot card",
       Request({{"model", "7b"}, {"workload", "infer"}, {"gpu", "h200"}}), book, 4, 1, 4'190'000},
      {"min_gpus forces a set",
       Request({{"model", "7b"}, {"workload", "infer"}}),
       {Offer(9, "H100 SXM", 8, 2'000'000, "IAD-1", 4)},
       9,
       4,
       8'000'000},
      {"full fine-tune shards across a set",
       Request({{"model", "13b"}, {"workload", "full"}}),
       {Offer(1, "H100 SXM", 8, 2'880'000), Offer(2, "A100 SXM", 2, 1'790'000)},
       1,
       4,
       11'520'000},
      {"budget is hourly x 720",
       Request({{"model", "7b"}, {"workload", "infer"}, {"max_monthly_usd", "1000"}}),
       {Offer(1, "H100 SXM", 8, 2'880'000)},
       0,
       0,
       0},
      {"empty book", Request({{"model", "7b"}, {"workload", "infer"}}), {}, 0, 0, 0},
  };
  for (const auto& c : cases) {
    auto r = FitMarket(Fleet(), c.request, c.offers);
    ASSERT_TRUE(r.ok()) << c.name << ": " << r.status().ToString();
    if (c.best_ask == 0) {
      EXPECT_TRUE(r->ranked.empty()) << c.name;
      EXPECT_FALSE(r->reason.empty()) << c.name;
      continue;
    }
    ASSERT_FALSE(r->ranked.empty()) << c.name << ": " << r->reason;
    EXPECT_EQ(r->ranked[0].offer.ask_id, c.best_ask) << c.name;
    EXPECT_EQ(r->ranked[0].count, c.best_count) << c.name;
    EXPECT_EQ(r->ranked[0].hourly_micros, c.best_hourly_micros) << c.name;
    for (std::size_t i = 0; i < r->ranked.size(); ++i) {
      const auto& x = r->ranked[i];
      EXPECT_LE(x.per_card_bytes, x.card->vram_gb * 1e9) << c.name;
      if (i > 0) {
        EXPECT_LE(r->ranked[i - 1].hourly_micros, x.hourly_micros) << c.name;
      }
    }
  }
}

TEST(MarketFitTest, ExclusionsSayWhy) {
  FitRequest request = Request({{"model", "70b"}, {"workload", "infer"}, {"precision", "fp8"}});
  request.why_not = true;
  auto r = FitMarket(Fleet(), request,
                     std::vector<MarketOffer>{Offer(2, "A100 SXM", 8, 1'790'000),
                                              Offer(3, "A100 PCIe", 8, 1'500'000)});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ranked.empty());
  bool sxm = false, pcie = false;
  for (const auto& x : r->excluded) {
    if (x.gpu == "A100 SXM" && x.kind == "needs_fp8") {
      sxm = x.reason == "FP8 is needed and A100 SXM has no FP8";
    }
    if (x.gpu == "A100 PCIe" && x.kind == "needs_fp8") {
      pcie = x.reason.find("does not publish FP8 support") != std::string::npos;
    }
  }
  EXPECT_TRUE(sxm);
  EXPECT_TRUE(pcie);
  auto json = nlohmann::json::parse(MarketFitReportJson(request, *r));
  EXPECT_EQ(json["prices"], "market");
  EXPECT_TRUE(json["best"].is_null());
  EXPECT_FALSE(json["reason"].get<std::string>().empty());
  EXPECT_FALSE(json["excluded"].empty());
}

TEST(MarketFitTest, JsonAndTextReports) {
  FitRequest request = Request({{"model", "7b"}, {"workload", "infer"}});
  std::vector<MarketOffer> offers = {Offer(1, "H100 SXM", 8, 2'880'000),
                                     Offer(2, "A100 SXM", 2, 1'790'000)};
  auto r = FitMarket(Fleet(), request, offers);
  ASSERT_TRUE(r.ok());
  auto json = nlohmann::json::parse(MarketFitReportJson(request, *r));
  EXPECT_EQ(json["best"]["gpu"], "A100 SXM");
  EXPECT_EQ(json["best"]["ask_id"], 2);
  EXPECT_EQ(json["best"]["exact"]["hourly_usd"], "1.790000");
  EXPECT_EQ(json["best"]["monthly_equivalent_usd"], 1288.8);
  // The exact strings are money as the market API writes it: the price per GPU-hour with the
  // exchange's three decimals (GET /v1/offers says "1.790"), amounts with six.
  EXPECT_EQ(json["best"]["exact"]["price_usd_per_gpu_hour"], "1.790");
  EXPECT_EQ(json["best"]["exact"]["monthly_equivalent_usd"], "1288.800000");
  EXPECT_EQ(json["alternatives"][0]["exact"]["price_usd_per_gpu_hour"], "2.880");
  for (const auto& offer : {json["best"], json["alternatives"][0]}) {
    for (const char* money : {"price_usd_per_gpu_hour", "hourly_usd", "monthly_equivalent_usd"}) {
      EXPECT_TRUE(offer["exact"][money].is_string()) << money;
      EXPECT_TRUE(offer[money].is_number()) << money << " (documented, kept)";
    }
  }
  EXPECT_EQ(json["offers_considered"], 2);
  ASSERT_EQ(json["alternatives"].size(), 1u);
  EXPECT_EQ(json["alternatives"][0]["gpu"], "H100 SXM");
  std::string text = MarketFitReportText(request, *r);
  EXPECT_NE(text.find("best: A100 SXM on machine 102 (IAD-1) at $1.79/hour"), std::string::npos)
      << text;
}

TEST(MarketFitTest, RequestValidation) {
  RequestFields f;
  f.model = "7b";
  f.workload = "infer";
  f.gpu = "RTX 9999";
  auto r = ResolveMarketFitRequest(f, {std::string(GPUHUB_SOURCE_DIR) + "/data", false}, Fleet());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown spot GPU 'RTX 9999'"), std::string::npos);
  EXPECT_EQ(r.status().field(), "gpu");
  FitRequest request = Request({{"model", "7b"}, {"workload", "infer"}});
  request.filters.gpu = "RTX 9999";
  auto fitted = FitMarket(Fleet(), request, {});
  ASSERT_FALSE(fitted.ok());
  EXPECT_EQ(fitted.status().field(), "gpu");
  auto json = HandleMarketFitJson(R"({"model": "7b", "workload": "infer", "gpu": "H100"})",
                                  std::string(GPUHUB_SOURCE_DIR) + "/data", Fleet(), {});
  ASSERT_FALSE(json.ok());
  EXPECT_EQ(json.status().field(), "gpu");
  f.gpu = "B300";  // a spot card with no term twin is fine here
  EXPECT_TRUE(
      ResolveMarketFitRequest(f, {std::string(GPUHUB_SOURCE_DIR) + "/data", false}, Fleet()).ok());
}

TEST(MarketFitTest, ParsesTheServersOffers) {
  auto offers = ParseOffersJson(
      R"({"offers": [{"ask_id": 7, "machine_id": 3, "gpu": "H100 SXM", "region": "IAD-1",
          "gpus_free": 6, "min_gpus": 1, "price_usd_per_gpu_hour": "2.880",
          "available_until": "2027-01-01T00:00:00Z"}]})");
  ASSERT_TRUE(offers.ok()) << offers.status().ToString();
  ASSERT_EQ(offers->size(), 1u);
  EXPECT_EQ((*offers)[0].price_micros_per_gpu_hour, 2'880'000);
  EXPECT_EQ((*offers)[0].free_gpus, 6);
  EXPECT_FALSE(ParseOffersJson("[]").ok());
  EXPECT_FALSE(ParseOffersJson(R"({"offers": [{"ask_id": "x"}]})").ok());
  EXPECT_FALSE(ParseOffersJson("not json").ok());
  // The exchange quotes on a 0.001 tick: anything else is not one of its offers (and would not
  // print as the three-decimal price the report shows).
  for (const char* price : {"2.8805", "0.000", "-1.000", "2,880"}) {
    std::string body = std::string(R"({"offers": [{"ask_id": 7, "machine_id": 3, "gpu": "H100 SXM",
        "region": "IAD-1", "gpus_free": 6, "min_gpus": 1, "price_usd_per_gpu_hour": ")") +
                       price + "\"}]}";
    EXPECT_EQ(ParseOffersJson(body).status().code(), StatusCode::kInvalidArgument) << price;
  }
}

TEST(MarketFitTest, HandleMarketFitJson) {
  std::vector<MarketOffer> offers = {Offer(1, "H100 SXM", 8, 2'880'000)};
  auto out = HandleMarketFitJson(R"({"model": "7b", "workload": "infer"})",
                                 std::string(GPUHUB_SOURCE_DIR) + "/data", Fleet(), offers);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(nlohmann::json::parse(*out)["best"]["gpu"], "H100 SXM");
  auto bad = HandleMarketFitJson(R"({"model": "7b"})", std::string(GPUHUB_SOURCE_DIR) + "/data",
                                 Fleet(), offers);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuhub::fit
