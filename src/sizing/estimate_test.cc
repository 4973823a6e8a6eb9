#include "sizing/estimate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace gpuhub::sizing {
namespace {

MemoryEstimate Estimate(const std::string& preset, Workload w) {
  auto model = PresetModel(preset);
  EXPECT_TRUE(model.ok());
  auto e = EstimateMemory(*model, w);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return *e;
}

double ComponentBytes(const MemoryEstimate& e, const std::string& name) {
  for (const auto& c : e.components) {
    if (c.name == name) return c.bytes;
  }
  ADD_FAILURE() << "no component " << name;
  return -1;
}

// Spec §1 worked example: 70B at FP8, 8192 tokens, batch 1.
TEST(GuideInference, SeventyBAtFp8) {
  Workload w;
  w.precision = Precision::kFp8;
  MemoryEstimate e = Estimate("70b", w);
  EXPECT_DOUBLE_EQ(ComponentBytes(e, "weights"), 70e9);
  EXPECT_DOUBLE_EQ(ComponentBytes(e, "kv_cache"), 2.0 * 80 * 8 * 128 * 2 * 8192);
  EXPECT_DOUBLE_EQ(ComponentBytes(e, "runtime_overhead"), 2e9);
  EXPECT_NEAR(e.per_gpu_bytes / 1e9, 74.68, 0.005);
  EXPECT_EQ(e.profile, Profile::kGuide);
  // KV per token = 0.33 MB; at 128k tokens the cache alone is 42.9 GB.
  auto model = *PresetModel("70b");
  EXPECT_NEAR(KvCacheBytes(model, Precision::kFp16, 1, 1) / 1e6, 0.33, 0.005);
  EXPECT_NEAR(KvCacheBytes(model, Precision::kFp16, 131072, 1) / 1e9, 42.9, 0.05);
}

TEST(GuideInference, SevenBAtBf16Is17Gb) {
  MemoryEstimate e = Estimate("7b", Workload{});
  EXPECT_NEAR(e.per_gpu_bytes / 1e9, 17.07, 0.005);
}

TEST(GuideTraining, FullFineTuneQuickRule) {
  Workload w;
  w.method = Method::kFullFineTune;
  MemoryEstimate e = Estimate("7b", w);
  double state = ComponentBytes(e, "weights") + ComponentBytes(e, "gradients") +
                 ComponentBytes(e, "master_weights") + ComponentBytes(e, "optimizer_state");
  EXPECT_DOUBLE_EQ(state, 112e9);
  EXPECT_NEAR(e.per_gpu_bytes, 128.8e9, 1);
  EXPECT_NEAR(Estimate("13b", w).per_gpu_bytes, 239.2e9, 1);
}

TEST(GuideTraining, LoraAndQlora) {
  Workload w;
  w.method = Method::kLora;
  // 7B: 14 GB base + 35e6 adapter params x 16 B + activations + 2 GB; the activations by hand in
  // fit/guide_test.cc (checkpoints 0.54 GB + one layer 0.40 GB + logits 0.92 GB).
  MemoryEstimate lora = Estimate("7b", w);
  EXPECT_NEAR(lora.per_gpu_bytes, 14e9 + 0.56e9 + 1'855'864'832 + 2e9, 1);
  ASSERT_EQ(lora.components.size(), 4u);
  EXPECT_EQ(lora.components[2].name, "activations");
  EXPECT_NE(lora.components[2].formula.find("32 layers x 2048 tokens (batch 1 x seq 2048) x 8192 B"),
            std::string::npos)
      << lora.components[2].formula;
  EXPECT_NE(lora.components[2].formula.find("vocab 32000 x 14 B"), std::string::npos);
  w.method = Method::kQlora;
  MemoryEstimate qlora = Estimate("70b", w);
  EXPECT_NEAR(qlora.per_gpu_bytes, 35e9 + 5.6e9 + 4'709'056'512 + 2e9, 1);
  // Split over 2 GPUs: the checkpoints of each card's layers, the whole working set and logits.
  w.gpus = 2;
  MemoryEstimate split = Estimate("70b", w);
  EXPECT_NEAR(split.components[2].bytes, 4'709'056'512 - 80.0 * 2048 * 2 * 8192 / 2, 1);
}

TEST(Properties, MemoryGrowsWithContextAndBatch) {
  for (const auto& preset : PresetNames()) {
    double previous = 0;
    for (std::int64_t context : {1, 1024, 8192, 32768, 131072}) {
      Workload w;
      w.context_tokens = context;
      double now = Estimate(preset, w).per_gpu_bytes;
      EXPECT_GT(now, previous) << preset << " context " << context;
      previous = now;
    }
    previous = 0;
    for (std::int64_t batch : {1, 2, 8, 64}) {
      Workload w;
      w.batch = batch;
      double now = Estimate(preset, w).per_gpu_bytes;
      EXPECT_GT(now, previous) << preset << " batch " << batch;
      previous = now;
    }
  }
}

TEST(Properties, LowerPrecisionNeverCostsMore) {
  for (const auto& preset : PresetNames()) {
    Workload w;
    w.precision = Precision::kFp8;
    double fp8 = Estimate(preset, w).per_gpu_bytes;
    w.precision = Precision::kBf16;
    double bf16 = Estimate(preset, w).per_gpu_bytes;
    w.precision = Precision::kFp32;
    double fp32 = Estimate(preset, w).per_gpu_bytes;
    w.precision = Precision::kInt4;
    double int4 = Estimate(preset, w).per_gpu_bytes;
    EXPECT_LE(int4, fp8);
    EXPECT_LE(fp8, bf16);
    EXPECT_LE(bf16, fp32);
  }
}

TEST(Properties, MoreZero3GpusNeverRaisePerGpuMemory) {
  for (const auto& preset : PresetNames()) {
    double previous = 1e300;
    for (int gpus : {1, 2, 4, 8, 16, 64}) {
      Workload w;
      w.method = Method::kFullFineTune;
      w.zero_stage = 3;
      w.gpus = gpus;
      double now = Estimate(preset, w).per_gpu_bytes;
      EXPECT_LE(now, previous) << preset << " gpus " << gpus;
      previous = now;
    }
  }
}

TEST(Validation, RefusesAbsurdInput) {
  auto model = *PresetModel("7b");
  struct Case {
    const char* what;
    Workload w;
  };
  std::vector<Case> cases;
  Workload w;
  w.context_tokens = 0;
  cases.push_back({"context", w});
  w = {};
  w.batch = 1'000'000'000'000;
  cases.push_back({"batch", w});
  w = {};
  w.method = Method::kLora;
  w.lora_rank = 0;
  cases.push_back({"rank", w});
  w = {};
  w.gpus = 0;
  cases.push_back({"GPU count", w});
  w = {};
  w.kv_precision = Precision::kInt4;
  cases.push_back({"KV cache precision", w});
  w = {};
  w.zero_stage = 3;
  cases.push_back({"ZeRO", w});
  for (const auto& c : cases) {
    auto e = EstimateMemory(model, c.w);
    ASSERT_FALSE(e.ok()) << c.what;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(c.what), std::string::npos) << e.status().message();
  }
  EXPECT_EQ(PresetModel("8b").status().code(), StatusCode::kNotFound);
}

TEST(Format, Counts) {
  EXPECT_EQ(FormatCount(70e9), "70e9");
  EXPECT_EQ(FormatCount(8.03e9), "8.03e9");
  EXPECT_EQ(FormatCount(405e9), "405e9");
  EXPECT_EQ(FormatCount(35e6), "35e6");
  // The mantissa is printf's "%.3g" of it, over every magnitude and rounding edge.
  std::mt19937_64 rng(20261202);
  std::uniform_real_distribution<double> exponent(3.0, 15.0);
  std::vector<double> counts = {999.5, 1000, 999999, 999500, 1.2345e12, 9.995e9, 9.9949e9};
  for (int i = 0; i < 20000; ++i) counts.push_back(std::pow(10.0, exponent(rng)));
  for (double count : counts) {
    int e = static_cast<int>(std::floor(std::log10(count)));
    e -= e % 3;
    if (e < 3) continue;  // written as a whole number (FormatFixed)
    char mantissa[64];
    std::snprintf(mantissa, sizeof mantissa, "%.3g", count / std::pow(10.0, e));
    EXPECT_EQ(FormatCount(count), std::string(mantissa) + "e" + std::to_string(e)) << count;
  }
}

}  // namespace
}  // namespace gpuhub::sizing
