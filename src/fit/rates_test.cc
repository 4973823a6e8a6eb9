#include "fit/rates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sizing/loader.h"
#include "sizing/detailed.h"
#include "sizing/throughput.h"

namespace gpuhub::fit {
namespace {

using sizing::Method;
using sizing::Precision;
using sizing::Workload;

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet = *catalog::LoadCatalog(kDataDir + "/catalog.toml");
  return fleet;
}

sizing::ModelShape Model(const std::string& id) {
  auto m = sizing::LoadModel(id, kDataDir);
  EXPECT_TRUE(m.ok()) << id << ": " << m.status().ToString();
  return *m;
}

CardRates Card(const std::string& name) {
  const catalog::TermGpu* g = Fleet().FindTerm(name);
  EXPECT_NE(g, nullptr) << name;
  return RatesOf(*g);
}

// --- Formulas ----------------------------------------------------------------------------------

TEST(Throughput, TrainingFlopsFollowTheMatmulsAndAttention) {
  sizing::ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.method = Method::kFullFineTune;
  w.sequence_tokens = 2048;
  w.gradient_checkpointing = false;
  sizing::TrainingFlops f = sizing::TrainingFlopsPerToken(m, w);
  // Matmuls: every linear + the untied lm_head (128256 x 4096); the embedding is a lookup.
  const double linears = sizing::LinearWeightParams(m);
  EXPECT_DOUBLE_EQ(f.matmul_params, linears + 128256.0 * 4096);
  // Attention: 2 x (q + v width = 2 x 32 x 128) x 32 layers x 1024.5 positions.
  EXPECT_DOUBLE_EQ(f.attention_forward, 2.0 * 8192 * 32 * 1024.5);
  EXPECT_DOUBLE_EQ(f.forward, 2 * f.matmul_params + f.attention_forward);
  EXPECT_DOUBLE_EQ(f.per_token, 3 * f.forward);
  w.gradient_checkpointing = true;
  EXPECT_DOUBLE_EQ(sizing::TrainingFlopsPerToken(m, w).per_token, 4 * f.forward);
  // LoRA: no weight gradients for the frozen base.
  w.method = Method::kLora;
  w.gradient_checkpointing = false;
  sizing::TrainingFlops lora = sizing::TrainingFlopsPerToken(m, w);
  const double adapters = sizing::LoraAdapterParams(m, sizing::LoraTargets::kQv, 16);
  EXPECT_DOUBLE_EQ(lora.adapter_params, adapters);
  EXPECT_DOUBLE_EQ(lora.per_token, (2 * f.matmul_params + f.attention_forward + 2 * adapters) +
                                       (2 * f.matmul_params + 2 * f.attention_forward) +
                                       4 * adapters);
  EXPECT_LT(lora.per_token, 0.7 * f.per_token);
  EXPECT_NE(lora.formula.find("the frozen weights get no weight gradient"), std::string::npos);
}

TEST(Throughput, DecodeReadsTheWeightsOnceAndTheKvOfEverySequence) {
  sizing::ModelShape m = Model("Qwen/Qwen2.5-7B");
  Workload w;
  sizing::ServingWork one = sizing::ServingWorkFor(m, w, 1, 1025, 1);
  sizing::ServingWork many = sizing::ServingWorkFor(m, w, 1, 1025, 64);
  EXPECT_DOUBLE_EQ(one.decode_weight_bytes, many.decode_weight_bytes);  // dense: all weights
  EXPECT_DOUBLE_EQ(many.decode_kv_bytes, 64 * one.decode_kv_bytes);
  EXPECT_DOUBLE_EQ(one.decode_kv_bytes, sizing::KvCacheBytes(m, Precision::kFp16, 1025, 1));
  // MoE: a larger batch touches more experts (Mixtral: 2 of 8 per token).
  sizing::ModelShape moe = Model("mistralai/Mixtral-8x7B-v0.1");
  double b1 = sizing::ServingWorkFor(moe, w, 1, 100, 1).decode_weight_bytes;
  double b64 = sizing::ServingWorkFor(moe, w, 1, 100, 64).decode_weight_bytes;
  EXPECT_NEAR(b1 / (moe.active_params * 2), 1.0, 0.01);  // batch 1: the active share
  EXPECT_NEAR(b64 / (moe.total_params * 2), 1.0, 0.01);  // 1 - 0.75^64: every expert
}

TEST(Throughput, RatesShowTheirArithmetic) {
  sizing::ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.method = Method::kLora;
  w.batch = 2;
  auto r = TrainingRateOn(m, w, Card("H100 SXM"), 1, Parallelism::kSingle, {});
  ASSERT_TRUE(r.ok());
  // 4096 tokens per micro-batch: utilisation 0.50 x 4096 / (4096 + 512).
  EXPECT_NEAR(r->utilisation, 0.50 * 4096 / 4608, 1e-12);
  // The matmuls at that utilisation, attention (its share of the forward) at 0.36 of it.
  const sizing::TrainingFlops f = sizing::TrainingFlopsPerToken(m, w);
  const double attention = f.attention_forward / f.forward;
  const double rate = 989e12 * r->utilisation;
  const double compute =
      4096 * (f.per_token * (1 - attention) / rate + f.per_token * attention / (rate * 0.36));
  EXPECT_NEAR(r->step_seconds, compute + sizing::TrainingBytesPerStep(m, w).optimizer_step / 3350e9,
              1e-9);
  EXPECT_NEAR(r->tokens_per_second, 4096 / r->step_seconds, 1e-6);
  ASSERT_GE(r->explain.size(), 4u);
  EXPECT_EQ(r->explain[0], "layout: single on 1 GPU");
  EXPECT_NE(r->explain[2].find("989.0 dense BF16 TFLOPS x utilisation 0.50 (hopper, lora)"),
            std::string::npos)
      << r->explain[2];
  // A given utilisation replaces the calibrated one exactly.
  auto given = TrainingRateOn(m, w, Card("H100 SXM"), 1, Parallelism::kSingle, {0.3, {}});
  EXPECT_DOUBLE_EQ(given->utilisation, 0.3);
  // Data parallel over 8 cards: 8 replicas; a layer split is no faster than one card.
  auto dp = TrainingRateOn(m, w, Card("H100 SXM"), 8, Parallelism::kDataParallel, {});
  auto split = TrainingRateOn(m, w, Card("H100 SXM"), 2, Parallelism::kLayerSplit, {});
  EXPECT_NEAR(dp->tokens_per_second / r->tokens_per_second, 8, 0.01);
  EXPECT_DOUBLE_EQ(split->tokens_per_second, r->tokens_per_second);
  // No published BF16 figure: refused, never guessed.
  CardRates unknown = Card("H100 SXM");
  unknown.bf16_tflops.reset();
  EXPECT_FALSE(TrainingRateOn(m, w, unknown, 1, Parallelism::kSingle, {}).ok());
}

// The checks against published throughput (calibration and held-out runs) are in
// throughput_evaluation_test.cc, over data/benchmarks/throughput-*.json.

}  // namespace
}  // namespace gpuhub::fit
