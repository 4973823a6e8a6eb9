#include "fit/plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/money.h"
#include "fit/plan_report.h"
#include "fit/report_json.h"
#include "sizing/loader.h"

namespace gpuhub::fit {
namespace {

using Json = nlohmann::json;

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";
constexpr TimestampMicros kStart = 1'780'000'000LL * kMicrosPerSecond;  // 2026-05-28T20:26:40Z

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet = *catalog::LoadCatalog(kDataDir + "/catalog.toml");
  return fleet;
}

Result<PlanRequest> Resolve(const RequestFields& f) {
  return ResolvePlanRequest(f, RequestContext{kDataDir, false}, Fleet(), kStart);
}

PlanRequest MustResolve(const RequestFields& f) {
  auto r = Resolve(f);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : PlanRequest{};
}

RequestFields Lora8b(std::int64_t tokens) {
  RequestFields f;
  f.model = "meta-llama/Llama-3.1-8B";
  f.workload = "lora";
  f.batch = 4;
  f.tokens = tokens;
  f.top = 100;
  return f;
}

const PlanOption* Find(const PlanResult& r, const std::string& gpu, int count) {
  for (const auto& o : r.ranked) {
    if (o.gpu == gpu && o.count == count) return &o;
  }
  return nullptr;
}

MarketOffer Offer(std::int64_t ask, const char* gpu, int free, std::int64_t price_micros,
                  const char* region = "IAD-1", const char* until = "2030-01-01T00:00:00Z",
                  int min_gpus = 1) {
  return {ask, ask + 100, gpu, region, free, min_gpus, price_micros, until};
}

TEST(TermMix, CheapestMonthsAndWeeksCoverTheHours) {
  // 800 h at $1,690/month and $475/week: 1 month + 1 week (888 h) $2,165 beats 2 months $3,380
  // and 5 weeks (840 h) $2,375.
  auto mix = CheapestTermMix(800, 1'690'000'000, 475'000'000);
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ(mix->months, 1);
  EXPECT_EQ(mix->weeks, 1);
  EXPECT_EQ(mix->total_micros, 2'165'000'000);
  // 9 h: one week. 700 h: 1 month ($1,690) beats 5 weeks ($2,375). 0 h: nothing.
  EXPECT_EQ(CheapestTermMix(9, 1'690'000'000, 475'000'000)->weeks, 1);
  EXPECT_EQ(CheapestTermMix(9, 1'690'000'000, 475'000'000)->months, 0);
  EXPECT_EQ(CheapestTermMix(700, 1'690'000'000, 475'000'000)->months, 1);
  EXPECT_EQ(CheapestTermMix(700, 1'690'000'000, 475'000'000)->weeks, 0);
  EXPECT_EQ(CheapestTermMix(0, 1'690'000'000, 475'000'000)->total_micros, 0);
  // Overflow is an error, never a wrapped price.
  EXPECT_FALSE(CheapestTermMix(87'600, INT64_MAX / 2, INT64_MAX / 2).ok());
}

TEST(Plan, TrainingHoursAndCostsFollowTheRate) {
  PlanRequest request = MustResolve(Lora8b(300'000'000));
  std::vector<MarketOffer> book = {Offer(7, "H100 SXM", 8, 2'880'000)};
  auto result = Plan(Fleet(), request, book, /*live=*/true);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const PlanOption* h100 = Find(*result, "H100 SXM", 1);
  ASSERT_NE(h100, nullptr);
  // The rate is rates.h's; the hours, the finish and both prices follow from it.
  auto rate = TrainingRateOn(request.fit.model, request.fit.workload,
                             RatesOf(*Fleet().FindTerm("H100 SXM")), 1, Parallelism::kSingle, {});
  ASSERT_TRUE(rate.ok());
  EXPECT_DOUBLE_EQ(h100->tokens_per_second, rate->tokens_per_second);
  const double hours = 300e6 / rate->tokens_per_second / 3600;
  EXPECT_DOUBLE_EQ(h100->hours, hours);
  EXPECT_EQ(h100->finish,
            kStart + static_cast<std::int64_t>(std::ceil(hours * 3600)) * kMicrosPerSecond);
  const std::int64_t billed = static_cast<std::int64_t>(std::ceil(hours));
  ASSERT_TRUE(h100->spot.has_value());
  EXPECT_EQ(h100->spot->billed_hours, billed);
  EXPECT_EQ(h100->spot->total_micros, billed * 2'880'000);
  EXPECT_EQ(h100->spot->offer->ask_id, 7);
  ASSERT_TRUE(h100->term_price.has_value());
  EXPECT_EQ(h100->term_price->total_micros,
            CheapestTermMix(billed, 1'690'000'000, 475'000'000)->total_micros);
  EXPECT_TRUE(h100->best_is_spot);
  EXPECT_EQ(h100->best_micros, h100->spot->total_micros);
  EXPECT_NEAR(h100->usd_per_million_tokens, billed * 2.88 / 300, 1e-9);
  // The error bar: the held-out p90 around the estimate.
  EXPECT_EQ(h100->kind, EstimateKind::kTrainingSingle);
  EXPECT_DOUBLE_EQ(h100->band.p90, HeldOutBand(EstimateKind::kTrainingSingle).p90);
  EXPECT_DOUBLE_EQ(h100->tokens_per_second_low, h100->tokens_per_second / (1 + h100->band.p90));
  // Ranked cheapest to finish first; sets of a card that holds the job alone are replicas.
  for (std::size_t i = 1; i < result->ranked.size(); ++i) {
    EXPECT_LE(result->ranked[i - 1].best_micros, result->ranked[i].best_micros);
  }
  const PlanOption* dp = Find(*result, "H100 SXM", 8);
  ASSERT_NE(dp, nullptr);
  EXPECT_EQ(dp->parallelism, Parallelism::kDataParallel);
  EXPECT_GT(dp->tokens_per_second, 7.9 * h100->tokens_per_second);
  // A card the book has no offer for is priced on its term only.
  const PlanOption* a6000 = Find(*result, "RTX A6000", 1);
  ASSERT_NE(a6000, nullptr);
  EXPECT_FALSE(a6000->spot.has_value());
  EXPECT_TRUE(a6000->term_price.has_value());
  EXPECT_FALSE(a6000->best_is_spot);
  // Spot-only cards come from the book: no term price.
  EXPECT_EQ(Find(*result, "B300", 1), nullptr);  // no B300 offer on this book
}

TEST(Plan, HowCardsShareTheJob) {
  // 405B QLoRA (guide: 248 GB) fits no single card: of the layouts that fit two MI300X, FSDP
  // (each card its own micro-batch, the frozen base sharded) beats the layer split (one card
  // after the other, no faster than one).
  RequestFields f;
  f.model = "405b";
  f.workload = "qlora";
  f.tokens = 1'000'000;
  f.top = 100;
  PlanRequest request = MustResolve(f);
  auto result = Plan(Fleet(), request, OpeningAskOffers(Fleet()), false);
  ASSERT_TRUE(result.ok());
  const PlanOption* mi300x = Find(*result, "MI300X", 2);
  ASSERT_NE(mi300x, nullptr);
  EXPECT_EQ(mi300x->parallelism, Parallelism::kSharded);
  EXPECT_EQ(mi300x->layout, "dp 2 (FSDP)");
  ASSERT_GE(mi300x->considered.size(), 2u);
  bool split_slower = false;
  for (const auto& c : mi300x->considered) {
    if (c.rfind("layers split over 2: ", 0) == 0) {
      const double split = std::stod(c.substr(std::string("layers split over 2: ").size()));
      split_slower = split < 0.75 * mi300x->tokens_per_second;
    }
  }
  EXPECT_TRUE(split_slower) << ::testing::PrintToString(mi300x->considered);
  EXPECT_EQ(Find(*result, "MI300X", 1), nullptr);
  // Full fine-tuning of 13b (239 GB): ZeRO-3 only where the card shards (not over PCIe).
  f.model = "13b";
  f.workload = "full";
  request = MustResolve(f);
  result = Plan(Fleet(), request, OpeningAskOffers(Fleet()), false);
  ASSERT_TRUE(result.ok());
  const PlanOption* a100 = Find(*result, "A100 SXM", 4);
  ASSERT_NE(a100, nullptr);
  EXPECT_EQ(a100->parallelism, Parallelism::kSharded);
  EXPECT_EQ(Find(*result, "L40S", 8), nullptr);
  bool said_why = false;
  for (const auto& x : result->excluded) {
    if (x.gpu == "L40S" && x.count == 8) {
      said_why = x.reason.find("data parallel only") != std::string::npos;
    }
  }
  EXPECT_TRUE(said_why);
}

TEST(Plan, ServingReplicasAndCostPerMillionTokens) {
  RequestFields f;
  f.model = "meta-llama/Llama-3.1-8B";
  f.workload = "infer";
  f.batch = 32;
  f.tokens_per_day = 500'000'000;
  f.days = 7;
  f.gpu = "H100 SXM";
  PlanRequest request = MustResolve(f);
  EXPECT_EQ(request.fit.workload.context_tokens, 1024 + 256);  // prompt + output by default
  std::vector<MarketOffer> book = {Offer(1, "H100 SXM", 8, 2'500'000)};
  auto result = Plan(Fleet(), request, book, true);
  ASSERT_TRUE(result.ok());
  const PlanOption* one = Find(*result, "H100 SXM", 1);
  ASSERT_NE(one, nullptr);
  auto rate = ServingRateOn(request.fit.model, request.fit.workload, 1024, 256,
                            RatesOf(*Fleet().FindTerm("H100 SXM")), 1, Parallelism::kSingle, {});
  ASSERT_TRUE(rate.ok());
  const std::int64_t replicas =
      static_cast<std::int64_t>(std::ceil(500e6 / (rate->output_tokens_per_second * 86400)));
  EXPECT_EQ(one->replicas, replicas);
  EXPECT_DOUBLE_EQ(one->hours, 7 * 24);
  ASSERT_TRUE(one->spot.has_value());
  EXPECT_EQ(one->spot->total_micros, replicas * 2'500'000 * 7 * 24);
  ASSERT_TRUE(one->term_price.has_value());
  EXPECT_EQ(one->term_price->weeks, 1);
  EXPECT_EQ(one->term_price->total_micros, replicas * 475'000'000);
  EXPECT_DOUBLE_EQ(result->total_tokens, 500e6 * 7);
  const std::int64_t best = std::min(one->spot->total_micros, one->term_price->total_micros);
  EXPECT_NEAR(one->usd_per_million_tokens, best / 1e6 / 3500, 1e-9);
}

TEST(Plan, LiveOffersAreMatchedByCardCountRegionAndTime) {
  RequestFields f = Lora8b(3'000'000'000);  // ~85 h on one H100
  f.gpu = "H100 SXM";
  PlanRequest request = MustResolve(f);
  std::vector<MarketOffer> book = {
      Offer(1, "H100 SXM", 2, 2'000'000, "IAD-1", "2030-01-01T00:00:00Z"),
      Offer(2, "H100 SXM", 8, 3'000'000, "IAD-1", "2026-05-29T00:00:00Z"),     // ends too soon
      Offer(3, "H100 SXM", 4, 2'500'000, "PDX-1", "2030-01-01T00:00:00Z", 4),  // 4 or more
  };
  auto result = Plan(Fleet(), request, book, true);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(Find(*result, "H100 SXM", 1)->spot->offer->ask_id, 1);  // cheapest with 1 free
  EXPECT_EQ(Find(*result, "H100 SXM", 4)->spot->offer->ask_id, 3);
  const PlanOption* eight = Find(*result, "H100 SXM", 8);
  ASSERT_NE(eight, nullptr);
  EXPECT_EQ(eight->spot->offer->ask_id, 2);
  EXPECT_TRUE(eight->spot->outlasts_offer);  // finishes after the ask's available_until
  EXPECT_FALSE(Find(*result, "H100 SXM", 1)->spot->outlasts_offer);
  // --region keeps the offers of that region only.
  f.region = "PDX-1";
  request = MustResolve(f);
  result = Plan(Fleet(), request, book, true);
  ASSERT_TRUE(result.ok());
  EXPECT_FALSE(Find(*result, "H100 SXM", 1)->spot.has_value());
  EXPECT_EQ(Find(*result, "H100 SXM", 4)->spot->offer->ask_id, 3);
}

TEST(Plan, RequestValidationNamesTheField) {
  struct Bad {
    const char* what;
    RequestFields fields;
    const char* field;
    const char* message;
  };
  RequestFields no_tokens = Lora8b(1);
  no_tokens.tokens.reset();
  RequestFields both = Lora8b(1);
  both.samples = 10;
  RequestFields serving_tokens = Lora8b(1);
  serving_tokens.workload = "infer";
  serving_tokens.batch.reset();
  RequestFields no_volume = serving_tokens;
  no_volume.tokens.reset();
  RequestFields small_context = no_volume;
  small_context.tokens_per_day = 1000;
  small_context.context = 512;
  RequestFields utilisation = Lora8b(1);
  utilisation.utilisation = "1.5";
  RequestFields zero_utilisation = Lora8b(1);
  zero_utilisation.utilisation = "0";
  RequestFields start = Lora8b(1);
  start.start = "tomorrow";
  RequestFields gpu = Lora8b(1);
  gpu.gpu = "V100";
  RequestFields days = Lora8b(1);
  days.days = 3;
  RequestFields epochs = Lora8b(1);
  epochs.epochs = 0;
  RequestFields huge = Lora8b(1);
  huge.tokens = 20'000'000'000'000'000;
  RequestFields tp_heads = Lora8b(1);
  tp_heads.tp = 3;
  RequestFields tp_zero = Lora8b(1);
  tp_zero.tp = 0;
  RequestFields odd_product = Lora8b(1);
  odd_product.gpus = 8;
  odd_product.dp = 3;
  RequestFields zero_stage = Lora8b(1);
  zero_stage.zero = 4;
  RequestFields vp_alone = Lora8b(1);
  vp_alone.vp = 2;
  RequestFields cp_serving = no_volume;
  cp_serving.tokens_per_day = 1'000'000;
  cp_serving.cp = 2;
  RequestFields stages = Lora8b(1);
  stages.pp = 64;
  stages.gpus = 64;
  const Bad rows[] = {
      {"no tokens", no_tokens, "tokens", "--tokens (tokens per epoch) or --samples"},
      {"tokens and samples", both, "samples", "not both"},
      {"tokens for serving", serving_tokens, "tokens", "--tokens applies to training"},
      {"serving without volume", no_volume, "tokens_per_day", "--tokens-per-day is required"},
      {"context too small", small_context, "context", "cannot hold a request of 1024 prompt"},
      {"utilisation above 1", utilisation, "utilisation", "above 0 and at most 1"},
      {"utilisation 0", zero_utilisation, "utilisation", "above 0 and at most 1"},
      {"start", start, "start", "--start must be a time like"},
      {"unknown gpu", gpu, "gpu", "unknown GPU 'V100' (term fleet: "},
      {"days for training", days, "days", "--days applies to serving"},
      {"epochs 0", epochs, "epochs", "--epochs must be between 1 and 1000"},
      {"too many tokens", huge, "tokens", "--tokens must be between 1 and"},
      {"tp not dividing the heads", tp_heads, "tp", "does not divide the model's 32 attention"},
      {"tp 0", tp_zero, "tp", "--tp must be between 1 and 1024"},
      {"degrees not making --gpus", odd_product, "gpus", "tp x pp x cp x dp is 3 GPUs, not the 8"},
      {"zero 4", zero_stage, "zero", "--zero must be between 0 and 3"},
      {"vp without pp", vp_alone, "vp", "give --pp 2 or more"},
      {"cp for serving", cp_serving, "cp", "serving splits with --tp or --pp"},
      {"more stages than layers", stages, "pp", "32 layers"},
  };
  for (const Bad& b : rows) {
    auto r = Resolve(b.fields);
    ASSERT_FALSE(r.ok()) << b.what;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << b.what;
    EXPECT_EQ(r.status().field(), b.field) << b.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find(b.message), std::string::npos)
        << b.what << ": " << r.status().message();
  }
  // A spot-only card is a valid --gpu for a plan.
  RequestFields b300 = Lora8b(1'000'000);
  b300.gpu = "B300";
  PlanRequest request = MustResolve(b300);
  EXPECT_EQ(*request.fit.filters.gpu, "B300");
  auto result = Plan(Fleet(), request, OpeningAskOffers(Fleet()), false);
  ASSERT_TRUE(result.ok());
  ASSERT_FALSE(result->ranked.empty());
  for (const auto& o : result->ranked) {
    EXPECT_EQ(o.gpu, "B300");
    EXPECT_FALSE(o.term_price.has_value());
    EXPECT_FALSE(o.spot->offer.has_value());  // the opening ask, not a live offer
  }
}

TEST(Plan, JsonReportCarriesExactMoneyTheErrorBarAndTheArithmetic) {
  std::string body = R"({"model": "meta-llama/Llama-3.1-8B", "workload": "lora", "batch": 4,
                         "tokens": 300000000, "top": 3, "explain": true,
                         "start": "2026-06-01T00:00:00Z", "utilisation": "0.4"})";
  std::vector<MarketOffer> book = {Offer(7, "H100 SXM", 8, 2'880'000)};
  auto out = HandlePlanJson(body, kDataDir, Fleet(), book, true, kStart);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Json j = Json::parse(*out);
  EXPECT_EQ(j["job"]["kind"], "training");
  EXPECT_EQ(j["job"]["total_tokens"], 300e6);
  EXPECT_EQ(j["start"], "2026-06-01T00:00:00Z");
  EXPECT_EQ(j["prices"], "market");
  EXPECT_EQ(j["assumptions"]["utilisation"], 0.4);
  EXPECT_EQ(j["error_bar"]["p90"], kTrainingHeldOutP90Error);
  ASSERT_TRUE(j["cheapest"].is_object());
  const Json& c = j["cheapest"];
  EXPECT_EQ(c["gpu"], "H100 SXM");  // the only card on this book, cheapest on spot
  EXPECT_EQ(c["best"], "spot");
  const std::int64_t hours = c["spot"]["hours_billed"];
  const std::int64_t count = c["count"];
  EXPECT_EQ(c["spot"]["exact"]["total_usd"], FormatMicros(hours * 2'880'000 * count, 6));
  EXPECT_EQ(c["spot"]["exact"]["price_usd_per_gpu_hour"], "2.880");
  EXPECT_EQ(c["spot"]["ask_id"], 7);
  EXPECT_TRUE(c["term"].is_object());
  EXPECT_EQ(j["options"].size(), 3u);
  ASSERT_TRUE(c["explain"].is_array());
  std::string lines;
  for (const auto& line : c["explain"]) lines += line.get<std::string>() + "\n";
  EXPECT_NE(lines.find("utilisation 0.400 (given)"), std::string::npos) << lines;
  EXPECT_NE(lines.find("(billed by the hour) x " + std::to_string(count) +
                       " x $2.880/GPU-h (ask 7 on the book)"),
            std::string::npos)
      << lines;
  // Fields that belong to the plan are refused by fit, and the plan refuses unknown ones.
  EXPECT_FALSE(ParseRequestJson(R"({"tokens": 5})", RequestKind::kFit).ok());
  auto unknown = HandlePlanJson(R"({"model": "7b", "workload": "lora", "tokns": 5})", kDataDir,
                                Fleet(), book, true, kStart);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().field(), "tokns");
}

}  // namespace
}  // namespace gpuhub::fit

namespace gpuhub::fit {
namespace {

Json PlanJson(const std::string& body) {
  auto out = HandlePlanJson(body, kDataDir, Fleet(), {}, false, kStart);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? Json::parse(*out) : Json();
}

TEST(Plan, BeyondOneNodeIsWholeNodesAndAQuote) {
  // The guide's 405B full fine-tune (7,452 GB): no node holds it; five nodes of 8 MI300X do.
  Json j = PlanJson(R"({"model": "405b", "workload": "full", "tokens": 1000000000, "top": 20,
                        "gpu": "MI300X"})");
  ASSERT_TRUE(j["cheapest"].is_object()) << j.dump();
  const Json& c = j["cheapest"];
  EXPECT_EQ(c["count"], 40);
  EXPECT_EQ(c["layout"]["nodes"], 5);
  EXPECT_EQ(c["quote"]["needed"], true);
  EXPECT_EQ(c["quote"]["nodes"], 5);
  EXPECT_EQ(c["quote"]["request"], "POST /v1/quote-requests");
  EXPECT_EQ(c["term"]["indicative"], true);
  // Five 8-card sets at the list price: $1,590 x 8 x 0.9 = $11,448 a month each.
  EXPECT_EQ(c["term"]["exact"]["monthly_usd"], "57240.000000");
  EXPECT_LE(c["per_card_gb"].get<double>(), 192);
  // Four nodes would not hold it: 7,452 GB / 32 cards is over 192 GB.
  EXPECT_GT(7452.0 / 32, 192);
  // A count the request fixes beyond 8 must be whole nodes.
  auto odd = HandlePlanJson(R"({"model": "70b", "workload": "full", "tokens": 1000, "gpus": 12})",
                            kDataDir, Fleet(), {}, false, kStart);
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().field(), "gpus");
  // 64 H100s, as llm-foundry ran MPT-70B: asked and answered, on 8 nodes.
  Json fixed = PlanJson(R"({"model": "meta-llama/Llama-3.1-70B", "workload": "full",
                            "tokens": 1000000000, "gpus": 64, "gpu": "H100 SXM", "seq": 2048,
                            "batch": 8, "grad_accum": 4})");
  ASSERT_TRUE(fixed["cheapest"].is_object()) << fixed.dump();
  EXPECT_EQ(fixed["cheapest"]["count"], 64);
  EXPECT_EQ(fixed["cheapest"]["quote"]["nodes"], 8);
  EXPECT_EQ(fixed["cheapest"]["error_band"]["kind"], "training, several cards");
  // A job that fits five nodes but would run for millennia: the answer names that, not the
  // single card that was never going to hold 7,452 GB.
  Json forever = PlanJson(R"({"model": "405b", "workload": "full", "gpu": "MI300X",
                              "tokens": 1000000000000000})");
  EXPECT_TRUE(forever["cheapest"].is_null()) << forever.dump();
  const std::string reason = forever["reason"];
  EXPECT_NE(reason.find("(40x MI300X: would take "), std::string::npos) << reason;
  EXPECT_NE(reason.find("years (over 87600 hours)"), std::string::npos) << reason;
}

TEST(Plan, TheLayoutIsSearchedAndExplained) {
  // Llama 3.1 70B LoRA on two H100s: the search sizes replicas (they do not fit), FSDP, tensor
  // parallel and the layer split, times those that fit and keeps the fastest.
  Json j = PlanJson(R"({"model": "meta-llama/Llama-3.1-70B", "workload": "lora",
                        "tokens": 100000000, "gpu": "H100 SXM", "gpus": 2, "explain": true})");
  ASSERT_TRUE(j["cheapest"].is_object()) << j.dump();
  const Json& c = j["cheapest"];
  const std::string chosen = c["layout"]["name"];
  ASSERT_GE(c["considered"].size(), 3u);
  double split = 0, best = c["tokens_per_s"];
  bool replicas_did_not_fit = false;
  for (const auto& line : c["considered"]) {
    const std::string s = line;
    if (s.rfind("layers split over 2: ", 0) == 0) split = std::stod(s.substr(21));
    if (s.rfind("dp 2: needs ", 0) == 0) replicas_did_not_fit = true;
  }
  EXPECT_TRUE(replicas_did_not_fit) << c["considered"].dump();
  EXPECT_GT(split, 0);
  EXPECT_GT(best, 1.5 * split) << chosen;  // the split is no faster than one card
  EXPECT_NE(c["explain"][0].get<std::string>().find("layout: " + chosen + ", the fastest of"),
            std::string::npos);
  // Asked for: exactly that layout (tensor parallel 2).
  Json tp = PlanJson(R"({"model": "meta-llama/Llama-3.1-70B", "workload": "lora",
                         "tokens": 100000000, "gpu": "H100 SXM", "tp": 2})");
  EXPECT_EQ(tp["cheapest"]["layout"]["tp"], 2);
  EXPECT_EQ(tp["cheapest"]["count"], 2);
  EXPECT_EQ(tp["workload"]["gpus"], 1);  // the request's workload; the option's layout says 2
}

TEST(Plan, PcieTensorParallelPaysForItsLink) {
  // The same tensor-parallel serving layout on two NVLink-class A100 SXM and two PCIe L40S: the
  // per-token all-reduces cost what the link says (L40S: 32 GB/s one way, PCIe latency).
  sizing::ModelShape m = *sizing::LoadModel("meta-llama/Llama-3.1-8B", kDataDir);
  sizing::Workload w;
  w.gpus = 2;
  w.tensor_parallel = 2;
  w.batch = 64;
  auto nvlink = ServingRateOn(m, w, 1024, 256, RatesOf(*Fleet().FindTerm("A100 SXM")), {});
  auto pcie = ServingRateOn(m, w, 1024, 256, RatesOf(*Fleet().FindTerm("L40S")), {});
  ASSERT_TRUE(nvlink.ok() && pcie.ok());
  // 2 all-reduces per layer of 64 x 4096 x 2 B: 32 layers x 2 x (latency + 2 x 1/2 x 524 KB /
  // link).
  const double bytes = 64.0 * 4096 * 2;
  EXPECT_NEAR(pcie->tensor_parallel_seconds_per_step,
              64 * (2 * kCollectiveLatencySeconds + bytes / 32e9), 1e-9);
  EXPECT_NEAR(nvlink->tensor_parallel_seconds_per_step,
              64 * (kCollectiveLatencySeconds + bytes / 300e9), 1e-9);
  EXPECT_GT(pcie->tensor_parallel_seconds_per_step, 2.5 * nvlink->tensor_parallel_seconds_per_step);
}

TEST(Plan, BatchMaxPromptZeroAndBothRates) {
  Json j = PlanJson(R"({"model": "meta-llama/Llama-3.1-8B", "workload": "infer",
                        "precision": "fp8", "kv_precision": "fp8", "engine": "vllm",
                        "batch": "max", "prompt_tokens": 0, "output_tokens": 512,
                        "tokens_per_day": 1000000000, "gpu": "H100 SXM", "gpus": 1})");
  ASSERT_TRUE(j["cheapest"].is_object()) << j.dump();
  const Json& c = j["cheapest"];
  const std::int64_t batch = c["batch"];
  // vLLM reserves 90% of the card; the KV cache of 512 tokens is 512 x 32 x 2 x 8 x 128 x 1 B.
  const double kv_per_sequence = 512.0 * 32 * 2 * 8 * 128;
  EXPECT_GT(batch, static_cast<std::int64_t>((72e9 - 12e9) / kv_per_sequence));
  EXPECT_LE(c["per_card_gb"].get<double>(), 72.0);
  EXPECT_EQ(c["prompt_tokens_per_s"], 0);  // no prompt, no prefill
  EXPECT_GT(c["decode_tokens_per_s"].get<double>(), c["tokens_per_s"].get<double>() * 0.99);
  EXPECT_EQ(j["job"]["prompt_tokens"], 0);
  // Training has no --batch max, and fit and size refuse it.
  auto training = HandlePlanJson(R"({"model": "7b", "workload": "lora", "tokens": 10,
                                     "batch": "max"})",
                                 kDataDir, Fleet(), {}, false, kStart);
  ASSERT_FALSE(training.ok());
  EXPECT_EQ(training.status().field(), "batch");
}

TEST(Plan, Fp8TrainingAndFp4WeightsNeedTheirCards) {
  Json fp8 = PlanJson(R"({"model": "meta-llama/Llama-3.1-8B", "workload": "full",
                          "fp8_training": true, "tokens": 100000000, "top": 100, "why_not": true})");
  for (const auto& o : fp8["options"]) {
    EXPECT_NE(o["gpu"], "A100 SXM");  // Ampere has no FP8
    EXPECT_NE(o["gpu"], "RTX A6000");
  }
  bool said = false;
  for (const auto& x : fp8["excluded"]) {
    if (x["gpu"] == "A100 SXM") said = x["reason"].get<std::string>().find("FP8 training") == 0;
  }
  EXPECT_TRUE(said);
  Json fp4 = PlanJson(R"({"model": "meta-llama/Llama-3.1-70B", "workload": "infer",
                          "precision": "fp4", "tokens_per_day": 100000000, "top": 100})");
  ASSERT_FALSE(fp4["options"].empty());
  for (const auto& o : fp4["options"]) {  // Blackwell only
    EXPECT_TRUE(o["gpu"] == "B200" || o["gpu"] == "B300" || o["gpu"] == "RTX 5090") << o["gpu"];
  }
}

}  // namespace
}  // namespace gpuhub::fit
