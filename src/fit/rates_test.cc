#include "fit/rates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sizing/detailed.h"
#include "sizing/loader.h"
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

// A card with few tensor FLOPs per byte of bandwidth decodes at batch 1 as fast as its tensor cores
// compute 64-row tiles, not as fast as it reads the weights: the H20 (148 BF16 TFLOPS, 4.0 TB/s;
// Qwen3's speed benchmark ran SGLang on it at ~1.4 TB/s effective). The H100 does not notice.
TEST(Throughput, DecodeGemmsArePaddedToTheTensorCoreTile) {
  sizing::ModelShape m = Model("Qwen/Qwen3-8B");
  Workload w;
  w.method = Method::kInference;
  w.batch = 1;
  w.engine = sizing::ServingEngine::kSglang;
  CardRates h20;
  h20.name = "H20";
  h20.architecture = catalog::Architecture::kHopper;
  h20.bf16_tflops = 148;
  h20.fp8_tflops = 296;
  h20.bandwidth_gb_per_s = 4000;
  EXPECT_EQ(DecodeTileRows(h20, Precision::kBf16, w.engine), 64);
  EXPECT_EQ(DecodeTileRows(Card("B200"), Precision::kFp8, w.engine), 64);
  EXPECT_EQ(DecodeTileRows(Card("RTX 5090"), Precision::kBf16, w.engine), 16);  // sm_120
  EXPECT_EQ(DecodeTileRows(Card("A100 SXM"), Precision::kBf16, w.engine), 16);
  EXPECT_EQ(DecodeTileRows(h20, Precision::kInt4, w.engine), 16);
  EXPECT_EQ(DecodeTileRows(h20, Precision::kBf16, sizing::ServingEngine::kLlamaCpp), 1);
  const sizing::ServingWork one = sizing::ServingWorkFor(m, w, 0, 1024, 1, 64);
  const sizing::ServingWork unpadded = sizing::ServingWorkFor(m, w, 0, 1024, 1, 1);
  EXPECT_NEAR(one.decode_step_matmul_flops / unpadded.decode_step_matmul_flops, 64, 1e-9);
  EXPECT_DOUBLE_EQ(unpadded.decode_step_matmul_flops + unpadded.decode_attention_flops_per_token,
                   unpadded.decode_flops_per_token);
  auto r = ServingRateOn(m, w, 0, 2048, h20, {});
  ASSERT_TRUE(r.ok());
  // 2 x 64 rows x 7.57e9 matmul params / (148 TFLOPS x 0.50): 13.1 ms a token, where the 16.4 GB of
  // weights alone take 6.1 ms at 4.0 TB/s x 0.67.
  // The KV cache of 1,024 tokens is read after the matmuls, by the attention kernel.
  const double padded = one.decode_step_matmul_flops / (148e12 * 0.50) +
                        one.decode_kv_bytes / (4000e9 * 0.67);
  EXPECT_GT(one.decode_kv_bytes / (4000e9 * 0.67),
            one.decode_attention_flops_per_token / (148e12 * 0.50));
  EXPECT_NEAR(r->decode_step_seconds, padded, 1e-12);
  EXPECT_NEAR(r->decode_step_seconds, 13.2e-3, 0.2e-3);
  EXPECT_NEAR(r->decode_tokens_per_second, 76, 1);  // measured 81.7 (prompt 1, SGLang 0.4.6)
  EXPECT_NE(r->explain[3].find("padded to 64 rows"), std::string::npos) << r->explain[3];
  // Up to 64 sequences cost the same matmul time: the tile was computed anyway.
  w.batch = 64;
  auto full = ServingRateOn(m, w, 0, 2048, h20, {});
  EXPECT_GT(full->decode_tokens_per_second, 50 * r->decode_tokens_per_second);
  // The H100 SXM (989 TFLOPS on 3.35 TB/s) still reads its weights slower than it pads.
  w.batch = 1;
  auto h100 = ServingRateOn(m, w, 0, 2048, Card("H100 SXM"), {});
  EXPECT_NEAR(h100->decode_step_seconds,
              (one.decode_weight_bytes + one.decode_kv_bytes) / (3350e9 * 0.67), 1e-12);
  EXPECT_EQ(h100->explain[3].find("padded"), std::string::npos) << h100->explain[3];
}

// A decode step runs its matmuls and its attention as separate kernels, each bound by its own
// roofline: at the batch a B200 holds for Llama 3.3 70B in FP4, the GEMMs are bound by their
// FLOPs and the attention by the KV cache's read, and the two times add (TensorRT-LLM's
// perf-overview measured 9,922 tok/s at 128/2048; one max over the step said 16,237).
TEST(Throughput, DecodeMatmulsAndAttentionAreSeparateKernels) {
  sizing::ModelShape m = Model("meta-llama/Llama-3.3-70B-Instruct");
  Workload w;
  w.method = Method::kInference;
  w.precision = Precision::kFp4;
  w.kv_precision = Precision::kFp8;
  w.engine = sizing::ServingEngine::kTensorRtLlm;
  w.batch = 326;
  const CardRates b200 = Card("B200");
  const sizing::ServingWork work = sizing::ServingWorkFor(m, w, 128, 128 + 1024, 326, 64);
  auto r = ServingRateOn(m, w, 128, 2048, b200, {});
  ASSERT_TRUE(r.ok());
  const double rate = 2 * *b200.fp8_tflops * 1e12 * r->utilisation_prefill;
  const double bandwidth = *b200.bandwidth_gb_per_s * 1e9 * r->decode_bandwidth;
  const double weights_read = work.decode_weight_bytes / bandwidth;
  const double matmuls = work.decode_step_matmul_flops / rate;
  const double kv_read = work.decode_kv_bytes / bandwidth;
  EXPECT_GT(matmuls, weights_read);  // FP4 GEMMs at 326 rows: compute-bound
  EXPECT_GT(kv_read, 326 * work.decode_attention_flops_per_token / rate);
  EXPECT_NEAR(r->decode_step_seconds, matmuls + kv_read, 1e-12);
  EXPECT_NEAR(r->decode_step_seconds, 21.55e-3, 0.05e-3);
  EXPECT_GT(r->decode_step_seconds, std::max(weights_read + kv_read, matmuls) * 1.1);
  EXPECT_NE(r->explain[3].find("matmuls max(weights"), std::string::npos) << r->explain[3];
  EXPECT_NE(r->explain[3].find(") + attention max(KV"), std::string::npos) << r->explain[3];
}

// transformers' dynamic cache is concatenated and expanded every step by unfused copies that move
// at 0.53 of the weights' rate (set on Qwen2.5-7B's 14,336-token transformers run, 29.78 tok/s).
TEST(Throughput, TransformersCacheCopiesMoveSlowerThanTheWeights) {
  sizing::ModelShape m = Model("Qwen/Qwen2.5-7B");
  Workload w;
  w.method = Method::kInference;
  w.batch = 1;
  w.engine = sizing::ServingEngine::kTransformers;
  EXPECT_DOUBLE_EQ(sizing::TraitsOf(w.engine).kv_copy_efficiency, 0.53);
  EXPECT_DOUBLE_EQ(sizing::TraitsOf(sizing::ServingEngine::kVllm).kv_copy_efficiency, 1);
  auto r = ServingRateOn(m, w, 14336, 2048, Card("A100 SXM"), {});
  ASSERT_TRUE(r.ok());
  const sizing::ServingWork work = sizing::ServingWorkFor(m, w, 14336, 14336 + 1024, 1, 16);
  const double rate = 2040e9 * 0.67;
  // Qwen2.5-7B: 28 heads on 4 KV heads, 4 + 2 x 7 = 18 bytes moved per cached byte.
  EXPECT_NEAR(r->decode_step_seconds,
              work.decode_weight_bytes / rate + work.decode_kv_bytes * 18 / (rate * 0.53), 1e-12);
  EXPECT_NEAR(r->decode_step_seconds, 33.0e-3, 0.3e-3);  // measured: ~32.9 ms a step
  EXPECT_NEAR(r->output_tokens_per_second, 29.78, 0.3);
  EXPECT_NE(r->explain[3].find("at 0.53 of the rate"), std::string::npos) << r->explain[3];
  // A given bandwidth efficiency replaces every factor, this one included.
  auto given = ServingRateOn(m, w, 14336, 2048, Card("A100 SXM"), {std::nullopt, 0.67});
  EXPECT_NEAR(given->decode_step_seconds,
              (work.decode_weight_bytes + work.decode_kv_bytes * 18) / rate, 1e-12);
}

// The checks against published throughput (calibration and held-out runs) are in
// throughput_evaluation_test.cc, over data/benchmarks/throughput-*.json.

}  // namespace
}  // namespace gpuhub::fit
