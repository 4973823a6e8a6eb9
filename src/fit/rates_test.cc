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
  const double flops = sizing::TrainingFlopsPerToken(m, w).per_token;
  const double compute = 4096 * flops / (989e12 * r->utilisation);
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

// --- Calibration and held-out checks against published throughput ------------------------------

struct Case {
  const char* source;
  const char* model;
  const char* card;
  Workload workload;
  int count;
  Parallelism parallelism;
  double measured_tokens_per_s;  // the whole configuration
  bool calibration;              // used to set the factors (else checked after, unchanged)
  // serving only: prompt and output tokens per request (0: training)
  std::int64_t prompt = 0, output = 0;
  const char* excluded = nullptr;  // why a published figure is left out of the error figures
};

Workload Full(std::int64_t seq, std::int64_t micro, int accum, bool checkpointing) {
  Workload w;
  w.method = Method::kFullFineTune;
  w.sequence_tokens = seq;
  w.batch = micro;
  w.gradient_accumulation_steps = accum;
  w.gradient_checkpointing = checkpointing;
  return w;
}

Workload Serve(Precision p, std::int64_t batch) {
  Workload w;
  w.precision = p;
  w.batch = batch;
  return w;
}

std::vector<Case> Cases() {
  std::vector<Case> c;
  const auto S = Parallelism::kSharded;
  // llm-foundry (mosaicml/llm-foundry scripts/train/benchmarking/README.md): MPT models, 8 GPUs,
  // FSDP FULL_SHARD, amp_bf16; tokens/s per GPU x 8. MPT-7B/13B have Llama-2-7B/13B's widths.
  c.push_back({"llm-foundry H100: 7B, seq 2048, mb 6, no AC", "meta-llama/Llama-2-7b-hf",
               "H100 SXM", Full(2048, 6, 1, false), 8, S, 10643 * 8.0, true});
  c.push_back({"llm-foundry H100: 7B, seq 4096, mb 16 x 2, AC", "meta-llama/Llama-2-7b-hf",
               "H100 SXM", Full(4096, 16, 2, true), 8, S, 8611 * 8.0, true});
  c.push_back({"llm-foundry H100: 7B, seq 8192, mb 8 x 2, AC", "meta-llama/Llama-2-7b-hf",
               "H100 SXM", Full(8192, 8, 2, true), 8, S, 6935 * 8.0, false});
  c.push_back({"llm-foundry H100: 13B, seq 2048, mb 2, no AC", "meta-llama/Llama-2-13b-hf",
               "H100 SXM", Full(2048, 2, 1, false), 8, S, 4792 * 8.0, true});
  c.push_back({"llm-foundry H100: 13B, seq 4096, mb 10 x 3, AC", "meta-llama/Llama-2-13b-hf",
               "H100 SXM", Full(4096, 10, 3, true), 8, S, 4717 * 8.0, false});
  c.push_back({"llm-foundry A100 80GB: 7B, seq 2048, mb 6 x 2, no AC", "meta-llama/Llama-2-7b-hf",
               "A100 SXM", Full(2048, 6, 2, false), 8, S, 4641 * 8.0, true});
  c.push_back({"llm-foundry A100 80GB: 7B, seq 4096, mb 16 x 2, AC", "meta-llama/Llama-2-7b-hf",
               "A100 SXM", Full(4096, 16, 2, true), 8, S, 3684 * 8.0, true});
  c.push_back({"llm-foundry A100 80GB: 13B, seq 2048, mb 2 x 3, no AC",
               "meta-llama/Llama-2-13b-hf", "A100 SXM", Full(2048, 2, 3, false), 8, S,
               2262 * 8.0, true});
  c.push_back({"llm-foundry A100 80GB: 13B, seq 4096, mb 10 x 3, AC",
               "meta-llama/Llama-2-13b-hf", "A100 SXM", Full(4096, 10, 3, true), 8, S,
               2060 * 8.0, false});
  // torchtitan docs/performance.md: FSDP2 on 64 A100 80GB, tokens/s per GPU (x 8 here: the
  // node's share; the factors come from 8-GPU runs).
  c.push_back({"torchtitan A100: Llama 3 8B, seq 8192, bs 1, selective op AC",
               "meta-llama/Meta-Llama-3-8B", "A100 SXM", Full(8192, 1, 1, false), 8, S,
               2973 * 8.0, false});
  c.push_back({"torchtitan A100: Llama 3 70B, seq 8192, bs 1, full AC",
               "meta-llama/Llama-3.1-70B", "A100 SXM", Full(8192, 1, 1, true), 8, S, 331 * 8.0,
               false});
  c.push_back({"torchtitan A100: Llama 2 13B, seq 4096, bs 2, no AC", "meta-llama/Llama-2-13b-hf",
               "A100 SXM", Full(4096, 2, 1, false), 8, S, 2162 * 8.0, false});
  // Hugging Face PEFT MetaMathQA (huggingface/peft method_comparison/MetaMathQA/results, L40S):
  // Llama-3.2-3B, batch 4 of 210 tokens on average (4,198,051 tokens over 20,000 samples), no
  // checkpointing, "tokens / sec" of the training steps.
  Workload peft;
  peft.method = Method::kLora;
  peft.lora_rank = 32;
  peft.batch = 4;
  peft.sequence_tokens = 210;
  peft.gradient_checkpointing = false;
  c.push_back({"PEFT L40S: Llama-3.2-3B LoRA r32 qv, bs 4 x 210", "meta-llama/Llama-3.2-3B",
               "L40S", peft, 1, Parallelism::kSingle, 6770, true});
  Workload peft_full = peft;
  peft_full.method = Method::kFullFineTune;
  peft_full.pure_bf16 = true;
  c.push_back({"PEFT L40S: Llama-3.2-3B full, bf16 AdamW, bs 4 x 210", "meta-llama/Llama-3.2-3B",
               "L40S", peft_full, 1, Parallelism::kSingle, 2310, true});
  // torchtune README ("Memory and training speed"): Llama 3.1 8B, batch 2, packed to 2048,
  // torch.compile, activation checkpointing; the 8-GPU rows are the whole node.
  Workload tt;
  tt.method = Method::kLora;
  tt.batch = 2;
  tt.sequence_tokens = 2048;
  tt.pure_bf16 = true;
  tt.lora_targets = sizing::LoraTargets::kAllLinear;
  tt.lora_rank = 8;
  c.push_back({"torchtune 4090: Llama 3.1 8B LoRA, bs 2 x 2048", "meta-llama/Llama-3.1-8B",
               "RTX 4090", tt, 1, Parallelism::kSingle, 3083, false});
  Workload ttq = tt;
  ttq.method = Method::kQlora;
  c.push_back({"torchtune 4090: Llama 3.1 8B QLoRA, bs 2 x 2048", "meta-llama/Llama-3.1-8B",
               "RTX 4090", ttq, 1, Parallelism::kSingle, 2413, false});
  Workload ttf = tt;
  ttf.method = Method::kFullFineTune;
  c.push_back({"torchtune 4090: Llama 3.1 8B full, bs 2 x 2048", "meta-llama/Llama-3.1-8B",
               "RTX 4090", ttf, 1, Parallelism::kSingle, 1650, false});
  c.push_back({"torchtune A6000: Llama 3.1 8B LoRA, bs 2 x 2048", "meta-llama/Llama-3.1-8B",
               "RTX A6000", tt, 1, Parallelism::kSingle, 4699, false});
  c.push_back({"torchtune A6000: Llama 3.1 8B full, bs 2 x 2048", "meta-llama/Llama-3.1-8B",
               "RTX A6000", ttf, 1, Parallelism::kSingle, 2579, false});
  Workload tt70 = tt;
  tt70.lora_targets = sizing::LoraTargets::kAttention;
  tt70.lora_rank = 16;
  c.push_back({"torchtune 8x A100: Llama 3.1 70B LoRA (FSDP)", "meta-llama/Llama-3.1-70B",
               "A100 SXM", tt70, 8, S, 3497, false});
  Workload tt405 = tt70;
  tt405.method = Method::kQlora;
  c.push_back({"torchtune 8x A100: Llama 3.1 405B QLoRA (FSDP)", "meta-llama/Llama-3.1-405B",
               "A100 SXM", tt405, 8, S, 653, false});

  // Qwen2.5 speed benchmark (qwen.readthedocs.io, benchmark/speed_benchmark): vLLM 0.6.3 on one
  // A100 80GB, batch 1, 2048 tokens generated after a prompt; speed = tokens / total time.
  struct Q {
    const char* source;
    const char* model;
    Precision precision;
    std::int64_t prompt;
    double tokens_per_s;
    bool calibration;
  };
  const Q qwen[] = {
      {"Qwen2.5 vLLM A100: 7B bf16, prompt 1", "Qwen/Qwen2.5-7B", Precision::kBf16, 1, 84.28,
       true},
      {"Qwen2.5 vLLM A100: 7B bf16, prompt 6144", "Qwen/Qwen2.5-7B", Precision::kBf16, 6144, 80.70,
       false},
      {"Qwen2.5 vLLM A100: 7B bf16, prompt 14336", "Qwen/Qwen2.5-7B", Precision::kBf16, 14336,
       77.69, false},
      {"Qwen2.5 vLLM A100: 7B bf16, prompt 30720", "Qwen/Qwen2.5-7B", Precision::kBf16, 30720,
       70.33, false},
      {"Qwen2.5 vLLM A100: 7B GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-7B", Precision::kInt8, 1, 122.01,
       true},
      {"Qwen2.5 vLLM A100: 7B GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-7B", Precision::kInt4, 1, 154.05,
       true},
      {"Qwen2.5 vLLM A100: 7B GPTQ-Int4, prompt 30720", "Qwen/Qwen2.5-7B", Precision::kInt4,
       30720, 108.30, false},
      {"Qwen2.5 vLLM A100: 14B bf16, prompt 1", "Qwen/Qwen2.5-14B", Precision::kBf16, 1, 46.30,
       true},
      {"Qwen2.5 vLLM A100: 14B bf16, prompt 6144", "Qwen/Qwen2.5-14B", Precision::kBf16, 6144,
       43.83, false},
      {"Qwen2.5 vLLM A100: 14B bf16, prompt 14336", "Qwen/Qwen2.5-14B", Precision::kBf16, 14336,
       41.91, false},
      {"Qwen2.5 vLLM A100: 14B bf16, prompt 30720", "Qwen/Qwen2.5-14B", Precision::kBf16, 30720,
       37.18, false},
      {"Qwen2.5 vLLM A100: 14B GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-14B", Precision::kInt8, 1,
       70.40, false},
      {"Qwen2.5 vLLM A100: 14B GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-14B", Precision::kInt4, 1,
       98.02, false},
      {"Qwen2.5 vLLM A100: 32B bf16, prompt 1", "Qwen/Qwen2.5-32B", Precision::kBf16, 1, 22.13,
       false},
      {"Qwen2.5 vLLM A100: 32B bf16, prompt 14336", "Qwen/Qwen2.5-32B", Precision::kBf16, 14336,
       19.91, false},
      {"Qwen2.5 vLLM A100: 32B GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-32B", Precision::kInt8, 1,
       37.57, false},
      {"Qwen2.5 vLLM A100: 32B GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-32B", Precision::kInt4, 1,
       55.83, false},
      {"Qwen2.5 vLLM A100: 32B GPTQ-Int4, prompt 30720", "Qwen/Qwen2.5-32B", Precision::kInt4,
       30720, 35.66, false},
  };
  for (const Q& q : qwen) {
    c.push_back({q.source, q.model, "A100 SXM", Serve(q.precision, 1), 1, Parallelism::kSingle,
                 q.tokens_per_s, q.calibration, q.prompt, 2048});
  }
  // TensorRT-LLM perf overview (NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md):
  // offline maximum load, Llama 3.1 8B FP8, one GPU; the batch is what fits the card's KV
  // budget (computed below from the sizing engine, 90% of memory).
  struct T {
    const char* source;
    const char* card;
    std::int64_t isl, osl;
    double tokens_per_s;
  };
  const T trt[] = {
      {"TensorRT-LLM H100: Llama 3.1 8B FP8, 128/2048, max load", "H100 SXM", 128, 2048, 22714},
      {"TensorRT-LLM H100: Llama 3.1 8B FP8, 1000/1000, max load", "H100 SXM", 1000, 1000, 15220},
      {"TensorRT-LLM H100: Llama 3.1 8B FP8, 2048/2048, max load", "H100 SXM", 2048, 2048, 9305},
      {"TensorRT-LLM H100: Llama 3.1 8B FP8, 5000/500, max load", "H100 SXM", 5000, 500, 3459},
      {"TensorRT-LLM H200: Llama 3.1 8B FP8, 1000/1000, max load", "H200 SXM", 1000, 1000, 17744},
      {"TensorRT-LLM H200: Llama 3.1 8B FP8, 2048/2048, max load", "H200 SXM", 2048, 2048, 12194},
  };
  for (const T& t : trt) {
    c.push_back({t.source, "meta-llama/Llama-3.1-8B", t.card, Serve(Precision::kFp8, 0), 1,
                 Parallelism::kSingle, t.tokens_per_s, false, t.isl, t.osl});
    c.back().workload.kv_precision = Precision::kFp8;
  }
  return c;
}

// The largest batch whose weights and KV cache fit 90% of the card (TensorRT-LLM's KV budget).
std::int64_t MaxBatch(const sizing::ModelShape& m, const Workload& w, const CardRates& card,
                      double vram_gb, std::int64_t tokens) {
  const double budget = 0.9 * vram_gb * 1e9 - sizing::WeightBytesAt(m, w.precision, true);
  const double per_sequence = sizing::KvCacheBytes(m, w.kv_precision, tokens, 1);
  (void)card;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(budget / per_sequence));
}

// Above this share of a card's dense peak, a training figure is not what its setup says.
constexpr double kImplausibleUtilisation = 0.85;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  double pos = p * (v.size() - 1);
  std::size_t lo = static_cast<std::size_t>(pos);
  std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

struct Errors {
  std::vector<double> built, held;
  void Add(const Case& c, double error) { (c.calibration ? built : held).push_back(std::fabs(error)); }
  void Print(const char* what) const {
    auto line = [](const char* set, const std::vector<double>& v) {
      if (v.empty()) return;
      std::printf("  %s: %zu cases, median %.1f%%, p90 %.1f%%, worst %.1f%%\n", set, v.size(),
                  100 * Percentile(v, 0.5), 100 * Percentile(v, 0.9), 100 * Percentile(v, 1.0));
    };
    std::printf("%s\n", what);
    line("calibration", built);
    line("held out", held);
  }
};

TEST(ThroughputCalibration, PublishedTokensPerSecond) {
  Errors training, serving;
  std::printf("| source | measured tok/s | estimate | error | set |\n|---|---|---|---|---|\n");
  for (Case c : Cases()) {
    sizing::ModelShape m = Model(c.model);
    CardRates card = Card(c.card);
    double estimate = 0;
    const bool serve = c.prompt > 0 || c.output > 0;
    if (serve) {
      if (c.workload.batch == 0) {
        c.workload.batch =
            MaxBatch(m, c.workload, card, Fleet().FindTerm(c.card)->vram_gb, c.prompt + c.output);
      }
      auto r = ServingRateOn(m, c.workload, c.prompt, c.output, card, c.count, c.parallelism, {});
      ASSERT_TRUE(r.ok()) << c.source << ": " << r.status().ToString();
      estimate = r->output_tokens_per_second;
    } else {
      auto r = TrainingRateOn(m, c.workload, card, c.count, c.parallelism, {});
      ASSERT_TRUE(r.ok()) << c.source << ": " << r.status().ToString();
      estimate = r->tokens_per_second;
      // A published figure that needs more than kImplausibleUtilisation of the card's dense
      // peak for the FLOPs its setup implies is left out of the error figures (it measured
      // something else: another card, another setup), with the figure that says so.
      const double replicas = c.parallelism == Parallelism::kDataParallel ||
                                      c.parallelism == Parallelism::kSharded
                                  ? c.count
                                  : 1;
      const double implied = c.measured_tokens_per_s *
                             sizing::TrainingFlopsPerToken(m, c.workload).per_token /
                             (replicas * *card.bf16_tflops * 1e12);
      if (implied > kImplausibleUtilisation) {
        static std::vector<std::string> reasons;
        reasons.push_back("implies " + std::to_string(static_cast<int>(implied * 100)) +
                          "% of the dense BF16 peak");
        c.excluded = reasons.back().c_str();
      }
    }
    const double error = (estimate - c.measured_tokens_per_s) / c.measured_tokens_per_s;
    std::printf("| %s | %.0f | %.0f | %+.1f%% | %s |\n", c.source, c.measured_tokens_per_s,
                estimate, 100 * error,
                c.excluded ? (std::string("left out: ") + c.excluded).c_str()
                : c.calibration ? "calibration"
                                : "held out");
    if (c.excluded) continue;
    (serve ? serving : training).Add(c, error);
  }
  training.Print("training");
  serving.Print("serving");
  // The figures the product quotes beside every estimate (rates.h) are these held-out ones.
  EXPECT_NEAR(Percentile(training.held, 0.5), kTrainingHeldOutMedianError, 0.005);
  EXPECT_NEAR(Percentile(training.held, 0.9), kTrainingHeldOutP90Error, 0.005);
  EXPECT_NEAR(Percentile(serving.held, 0.5), kServingHeldOutMedianError, 0.005);
  EXPECT_NEAR(Percentile(serving.held, 0.9), kServingHeldOutP90Error, 0.005);
  EXPECT_LE(Percentile(training.built, 0.5), 0.10);
  EXPECT_LE(Percentile(serving.built, 0.5), 0.10);
}

}  // namespace
}  // namespace gpuhub::fit
