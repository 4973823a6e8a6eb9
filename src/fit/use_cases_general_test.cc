// The general use-case views (use_cases_general.cc) on the real catalog and bundled models: which
// cards are fit and why, in what order, and the price per TFLOPS-hour from the published figures.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fit/use_cases.h"

namespace gpuhub::fit {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

UseCaseView View(UseCase use) {
  static const catalog::Catalog fleet = *catalog::LoadCatalog(kDataDir + "/catalog.toml");
  static const auto diffusion = *sizing::ListDiffusionModels(kDataDir);
  auto v = BuildUseCase(fleet, {}, use, diffusion);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : UseCaseView{};
}

const UseCaseCard& Card(const UseCaseView& v, const std::string& name) {
  for (const auto& c : v.cards) {
    if (c.name == name) return c;
  }
  ADD_FAILURE() << name;
  static UseCaseCard none;
  return none;
}

const UseCaseCard::DiffusionFit& Model(const UseCaseCard& c, const std::string& name) {
  for (const auto& f : c.diffusion) {
    if (f.name == name) return f;
  }
  ADD_FAILURE() << name;
  static UseCaseCard::DiffusionFit none;
  return none;
}

bool Says(const UseCaseCard& c, const std::string& text) {
  for (const auto& w : c.why) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(GeneralUseCases, ParseAndNames) {
  EXPECT_EQ(*ParseUseCase("image"), UseCase::kImageVideo);
  EXPECT_EQ(*ParseUseCase("vfx"), UseCase::kRendering);
  EXPECT_EQ(*ParseUseCase("hpc"), UseCase::kScience);
  EXPECT_EQ(UseCaseName(UseCase::kScience), "science");
  EXPECT_EQ(ParseUseCase("mining").status().field(), "use");
}

TEST(GeneralUseCases, ImageVideoSizesTheBundledModelsOnEachCard) {
  UseCaseView v = View(UseCase::kImageVideo);
  // 24 GB: SDXL yes (10.1 GB), FLUX.1-dev no even offloaded (the transformer alone is 23.8 GB).
  const UseCaseCard& rtx4090 = Card(v, "RTX 4090");
  EXPECT_TRUE(rtx4090.fit);
  EXPECT_TRUE(Model(rtx4090, "sdxl").fits);
  EXPECT_NEAR(Model(rtx4090, "sdxl").card_gb, 10.12, 0.01);
  EXPECT_FALSE(Model(rtx4090, "flux.1-dev").fits_offloaded);
  // 32 GB: FLUX.1-dev only with model offload (36.9 GB without).
  const UseCaseCard& rtx5090 = Card(v, "RTX 5090");
  EXPECT_FALSE(Model(rtx5090, "flux.1-dev").fits);
  EXPECT_TRUE(Model(rtx5090, "flux.1-dev").fits_offloaded);
  EXPECT_NEAR(Model(rtx5090, "flux.1-dev").card_gb, 36.92, 0.01);
  // 80 GB: Wan2.1 14B's reference pipeline (fp32 DiT) only with model offload.
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_FALSE(Model(h100, "wan2.1-t2v-14b").fits);
  EXPECT_TRUE(Model(h100, "wan2.1-t2v-14b").fits_offloaded);
  EXPECT_TRUE(Says(rtx4090, "not flux.1-dev") || Says(rtx4090, "not FLUX.1-dev"));
  // Ordered by the models held, then price per BF16 TFLOPS-hour.
  EXPECT_EQ(v.cards.front().name, "MI300X");
  EXPECT_DOUBLE_EQ(h100.usd_per_tflops_hour, 2.347222 / 989);
}

TEST(GeneralUseCases, RenderingNeedsRtCores) {
  UseCaseView v = View(UseCase::kRendering);
  const UseCaseCard& h100 = Card(v, "H100 SXM");
  EXPECT_FALSE(h100.fit);
  EXPECT_TRUE(Says(h100, "no RT cores"));
  const UseCaseCard& l4 = Card(v, "L4");
  EXPECT_FALSE(l4.fit);
  EXPECT_TRUE(Says(l4, "RT cores not published"));
  const UseCaseCard& l40s = Card(v, "L40S");
  EXPECT_TRUE(l40s.fit);
  EXPECT_TRUE(Says(l40s, "RT cores: 142 (212 TFLOPS on RT cores)"));
  EXPECT_DOUBLE_EQ(l40s.usd_per_tflops_hour, 0.722222 / 212);  // hourly = 520 / 720 to the micro-dollar
  // Cheapest RT TFLOPS first: the RTX 5090 (318 RT TFLOPS at $0.75/h).
  EXPECT_EQ(v.cards.front().name, "RTX 5090");
  for (const auto& c : v.cards) {
    if (c.fit) {
      EXPECT_GT(*c.general.rt_cores, 0) << c.name;
    }
  }
}

TEST(GeneralUseCases, ScienceNeedsPublishedFp64AndEcc) {
  UseCaseView v = View(UseCase::kScience);
  const UseCaseCard& mi300x = Card(v, "MI300X");
  EXPECT_TRUE(mi300x.fit);
  EXPECT_EQ(v.cards.front().name, "MI300X");  // 81.7 FP64 TFLOPS at $2.21/h
  EXPECT_DOUBLE_EQ(mi300x.usd_per_tflops_hour, 2.208333 / 81.7);
  const UseCaseCard& l40s = Card(v, "L40S");
  EXPECT_FALSE(l40s.fit);
  EXPECT_TRUE(Says(l40s, "FP64 not published"));
  const UseCaseCard& b300 = Card(v, "B300");
  EXPECT_FALSE(b300.fit);
  const UseCaseCard& a100 = Card(v, "A100 SXM");
  EXPECT_TRUE(a100.fit);
  EXPECT_TRUE(Says(a100, "FP64: 9.7 TFLOPS vector, 19.5 TFLOPS on tensor/matrix units"));
  // The JSON carries the figures and their source.
  auto j = nlohmann::json::parse(UseCaseJson(v));
  EXPECT_EQ(j["use"], "science");
  EXPECT_EQ(j["cards"][0]["general"]["fp64_tflops"], 81.7);
  EXPECT_TRUE(j["cards"][0]["general"]["source"].get<std::string>().starts_with("https://www.amd.com/"));
  EXPECT_EQ(j["cards"][0]["value"]["metric"], "FP64 TFLOPS");
  EXPECT_NE(UseCaseText(v).find("scientific computing and simulation"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::fit
