#include "fit/use_cases.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fit/fit.h"

namespace gpuhub::fit {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet = *catalog::LoadCatalog(kDataDir + "/catalog.toml");
  return fleet;
}

const std::vector<sizing::BundledModel>& Models() {
  static const std::vector<sizing::BundledModel> models = *sizing::ListBundledModels(kDataDir);
  return models;
}

const UseCaseView& View(UseCase use) {
  static std::map<UseCase, UseCaseView> views;
  auto it = views.find(use);
  if (it == views.end()) {
    auto v = BuildUseCase(Fleet(), Models(), use);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    it = views.emplace(use, *v).first;
  }
  return it->second;
}

const UseCaseCard& Card(const UseCaseView& v, const std::string& name) {
  for (const auto& c : v.cards) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << name;
  static UseCaseCard none;
  return none;
}

bool Contains(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

// The size of `id` for `w` on `count` cards fits `vram_gb` (fit's rules).
bool Fits(const std::string& id, sizing::Workload w, int count, double vram_gb) {
  for (const auto& m : Models()) {
    if (m.id != id) continue;
    w.gpus = count;
    if (w.method == sizing::Method::kFullFineTune && count > 1) w.zero_stage = 3;
    auto e = sizing::EstimateMemory(m.shape, w);
    return e.ok() && e->card_bytes() <= vram_gb * 1e9;
  }
  ADD_FAILURE() << id;
  return false;
}

TEST(UseCases, ParseAndName) {
  for (UseCase u : kUseCases) EXPECT_EQ(*ParseUseCase(UseCaseName(u)), u);
  auto bad = ParseUseCase("pretraining");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "use");
}

TEST(UseCases, TrainingNeedsCardsThatShard) {
  const UseCaseView& v = View(UseCase::kTraining);
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_TRUE(h100.fit);
  EXPECT_TRUE(Contains(h100.why, "interconnect: NVLink + NVSwitch 900 GB/s (up-to-8)"));
  EXPECT_TRUE(Contains(h100.why, "989 dense BF16 TFLOPS"));
  // Largest for full fine-tuning on 8 sharded H100s: it fits, and no bigger bundled model does.
  const LargestModel& full = h100.largest[0];
  ASSERT_TRUE(full.eight_cards.has_value());
  sizing::Workload w;
  w.method = sizing::Method::kFullFineTune;
  EXPECT_TRUE(Fits(*full.eight_cards, w, 8, 80));
  for (const auto& m : Models()) {
    if (m.shape.total_params > full.eight_cards_params) {
      EXPECT_FALSE(Fits(m.id, w, 8, 80)) << m.id << " is larger and fits too";
    }
  }
  EXPECT_EQ(full.eight_cards_note, "ZeRO-3 over NVLink + NVSwitch 900 GB/s");
  // PCIe cards cannot shard full training: not fit, with the card's rule as the reason.
  const UseCaseCard& l40s = Card(v, "L40S");
  EXPECT_FALSE(l40s.fit);
  EXPECT_NE(l40s.why[0].find("data parallel only"), std::string::npos) << l40s.why[0];
  EXPECT_FALSE(l40s.largest[0].eight_cards.has_value());
  // Fit cards first, cheapest per million tokens first.
  bool seen_unfit = false;
  double last = 0;
  for (const auto& c : v.cards) {
    if (!c.fit) {
      seen_unfit = true;
      continue;
    }
    EXPECT_FALSE(seen_unfit) << c.name << " fit after an unfit card";
    EXPECT_GE(c.usd_per_million_tokens, last) << c.name;
    last = c.usd_per_million_tokens;
  }
  // $ per million tokens at the 8-card term price: hourly x 8 x 0.9 / (tokens/s x 3600) x 1e6.
  const double hourly8 = 1690.0 * 8 * 0.9 / 720;
  EXPECT_NEAR(h100.usd_per_million_tokens, hourly8 / (h100.tokens_per_second * 3600) * 1e6, 1e-3);
}

TEST(UseCases, FineTuningFitsSmallCardsThroughQlora) {
  const UseCaseView& v = View(UseCase::kFineTuning);
  const UseCaseCard& a5000 = Card(v, "RTX A5000");
  EXPECT_TRUE(a5000.fit);
  EXPECT_NE(a5000.reference.find("QLoRA"), std::string::npos) << a5000.reference;
  EXPECT_EQ(a5000.largest.size(), 2u);
  EXPECT_EQ(a5000.largest[1].label, "QLoRA");
  ASSERT_TRUE(a5000.largest[1].one_card.has_value());
  sizing::Workload q;
  q.method = sizing::Method::kQlora;
  q.precision = sizing::Precision::kNf4;
  EXPECT_TRUE(Fits(*a5000.largest[1].one_card, q, 1, 24));
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_NE(h100.reference.find("LoRA, batch 4"), std::string::npos);
}

TEST(UseCases, InferenceNeedsAPublishedBandwidth) {
  const UseCaseView& v = View(UseCase::kInference);
  const UseCaseCard& b300 = Card(v, "B300");
  EXPECT_FALSE(b300.fit);
  EXPECT_NE(b300.why[0].find("memory bandwidth not published"), std::string::npos);
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_TRUE(h100.fit);
  EXPECT_GT(h100.decode_tokens_per_second, 0);
  EXPECT_LT(h100.decode_tokens_per_second, h100.tokens_per_second);
  EXPECT_TRUE(Contains(h100.why, "FP8: yes (1979 dense TFLOPS)"));
  EXPECT_TRUE(Contains(Card(v, "A100 SXM").why, "FP8: no"));
  // 24 GB cards serve the reference at FP8 or INT4 when BF16 does not fit.
  const UseCaseCard& rtx4090 = Card(v, "RTX 4090");
  EXPECT_TRUE(rtx4090.fit);
  EXPECT_EQ(rtx4090.reference.find("bf16"), std::string::npos) << rtx4090.reference;
}

TEST(UseCases, SpotPricesAreTheBooksBestAskOrTheOpeningAsk) {
  UseCaseView v = View(UseCase::kInference);
  std::vector<MarketOffer> book = {
      {1, 11, "H100 SXM", "IAD-1", 4, 1, 2'500'000, "2030-01-01T00:00:00Z"},
      {2, 12, "H100 SXM", "DFW-1", 8, 1, 2'200'000, "2030-01-01T00:00:00Z"},
  };
  ApplySpotPrices(Fleet(), book, true, v);
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_EQ(*h100.spot_from_micros_per_gpu_hour, 2'200'000);
  EXPECT_EQ(h100.spot_gpus_on_offer, 12);
  EXPECT_TRUE(h100.spot_live);
  EXPECT_FALSE(Card(v, "A100 SXM").spot_from_micros_per_gpu_hour.has_value());  // none on book
  EXPECT_FALSE(Card(v, "A40").spot_from_micros_per_gpu_hour.has_value());       // term only
  ApplySpotPrices(Fleet(), {}, false, v);
  EXPECT_EQ(*Card(v, "A100 SXM").spot_from_micros_per_gpu_hour, 1'790'000);
  nlohmann::json j = nlohmann::json::parse(UseCaseJson(v));
  EXPECT_EQ(j["use"], "inference");
  ASSERT_FALSE(j["cards"].empty());
  bool found = false;
  for (const auto& c : j["cards"]) {
    if (c["name"] != "A100 SXM") continue;
    found = true;
    EXPECT_EQ(c["spot"]["exact"]["from_usd_per_gpu_hour"], "1.790");
    EXPECT_EQ(c["spot"]["live"], false);
    EXPECT_EQ(c["term"]["exact"]["monthly_usd"], "990.000000");
    EXPECT_EQ(c["largest"][0]["label"], "BF16");
    EXPECT_FALSE(c["why"].empty());
  }
  EXPECT_TRUE(found);
  std::string text = UseCaseText(v);
  EXPECT_NE(text.find("LLM inference (gpuhub catalog --use inference)"), std::string::npos);
  EXPECT_NE(text.find("Why"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::fit
