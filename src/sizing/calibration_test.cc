// Calibration of the detailed memory model against published peak-memory measurements, in two
// sets: the cases the model was built with (CalibrationCases) and cases checked only after it was
// built, with nothing changed for them (HeldOutCases). docs/sizing-model.md §4 prints both tables
// and their error figures; the tests fail when a case leaves its tolerance or a set's figures
// get worse than the documented ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sizing/detailed.h"
#include "sizing/estimate_test_util.h"
#include "sizing/loader.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";
constexpr double kGiB = 1024.0 * 1024 * 1024;

// What a source measured. PyTorch's caching allocator reports two peaks: allocated (the live
// tensors: torch.cuda.max_memory_allocated, torchtune's "active") and reserved (the segments it
// holds: max_memory_reserved, what a card must have). The estimate's allocator_reserve component
// is the difference, so an allocated peak is compared with the estimate without it.
enum class Statistic { kReserved, kAllocated };

// Each case: the workload as the source describes it, the measured peak, and what is compared
// (the whole estimate, or one component when only that part was measured).
struct Calibration {
  const char* source;
  const char* model;
  Workload workload;
  double measured_bytes;
  const char* component;  // nullptr: the whole per-GPU estimate; "model_states": weights +
                          // gradients + master weights + optimizer state
  double tolerance;       // 15% for the cases issue 3 names, else 30%; exceptions say why
  double per_params = 0;  // > 0: compare per parameter, scaled to this many parameters
  Statistic statistic = Statistic::kReserved;
  // > 0: the measured checkpoint's config differs from the bundled one in max_position_embeddings
  // (Qwen2-7B/72B-Instruct: 32,768; the bundled base configs: 131,072).
  std::int64_t max_position_embeddings = 0;
};

void MarkAllocated(std::vector<Calibration>& c, std::size_t from) {
  for (std::size_t i = from; i < c.size(); ++i) c[i].statistic = Statistic::kAllocated;
}

// Answer.AI's fsdp_qlora benchmarks (AnswerDotAI/fsdp_qlora, benchmarks_03_2024.md; train.py of
// the same repository): 2 x RTX 3090/4090, FSDP (train.py's default FULL_SHARD, FSDP1 with
// limit_all_gathers), transformers ~4.38 (fp32 logits: old_transformers), pure bf16 (precision
// "bf16": model, LoRA weights and AdamW states in bf16; lm_head kept out of quantization), LoRA
// rank 64, dropout 0.1 on q/k/v/gate/up/down (all-linear here, which adds o_proj's adapter),
// gradient checkpointing, dummy samples of exactly the context length. "Peak Memory" is
// torch.cuda.max_memory_reserved in GiB; for the two LoRA batch-1 runs the text also gives the
// allocated peak (8.28 and 9.16 GiB), compared instead. "DDP" is FSDP's NO_SHARD: each card runs
// the whole model (gpus 1 here). Yi-34B, Llama-2-70B and Mistral-7B v0.2 (the v0.1 shapes without
// the sliding window, which training with flash attention does not use) at context 2048.
void AddFsdpQlora(std::vector<Calibration>& c) {
  Workload f = Lora(64, 2048, 1);
  f.pure_bf16 = true;
  f.lora_dropout = true;
  f.lora_targets = LoraTargets::kAllLinear;
  f.old_transformers = true;
  f.gpus = 2;
  f.zero_stage = 3;
  struct Run {
    const char* source;
    const char* model;
    Method method;
    std::int64_t seq;
    std::int64_t batch;
    int gpus;  // 2: FSDP; 1: NO_SHARD (each card a replica)
    bool offload;
    double gib;
    Statistic statistic;
    double tolerance;
  };
  constexpr auto kQ = Method::kQlora;
  constexpr auto kL = Method::kLora;
  constexpr auto kR = Statistic::kReserved;
  constexpr auto kA = Statistic::kAllocated;
  static const Run runs[] = {
      // 0.5 GiB of the reserved peak at this size is the allocator's per-stream caching of FSDP's
      // all-gather buffers, which the estimate does not hold (the LoRA runs below show it as the
      // gap between reserved and allocated): 35%.
      {"fsdp_qlora: Llama-2-7B QLoRA, 2 GPUs FSDP, bs 1 x 512", "meta-llama/Llama-2-7b-hf", kQ,
       512, 1, 2, false, 4.98, kR, 0.35},
      {"fsdp_qlora: Llama-2-7B QLoRA, 2 GPUs FSDP, bs 1 x 2048", "meta-llama/Llama-2-7b-hf", kQ,
       2048, 1, 2, false, 5.21, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, 2 GPUs FSDP, bs 1 x 512 (allocated)",
       "meta-llama/Llama-2-7b-hf", kL, 512, 1, 2, false, 8.28, kA, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, 2 GPUs FSDP, bs 1 x 2048 (allocated)",
       "meta-llama/Llama-2-7b-hf", kL, 2048, 1, 2, false, 9.16, kA, 0.30},
      {"fsdp_qlora: Llama-2-7B QLoRA, 2 GPUs FSDP, bs 4 x 2048", "meta-llama/Llama-2-7b-hf", kQ,
       2048, 4, 2, false, 11.22, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B QLoRA, 2 GPUs FSDP, bs 10 x 2048", "meta-llama/Llama-2-7b-hf", kQ,
       2048, 10, 2, false, 20.97, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, 2 GPUs FSDP, bs 4 x 2048", "meta-llama/Llama-2-7b-hf", kL,
       2048, 4, 2, false, 16.14, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, 2 GPUs FSDP, bs 6 x 2048", "meta-llama/Llama-2-7b-hf", kL,
       2048, 6, 2, false, 21.35, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B QLoRA, DDP, bs 8 x 2048", "meta-llama/Llama-2-7b-hf", kQ, 2048, 8,
       1, false, 20.94, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, DDP, bs 4 x 2048", "meta-llama/Llama-2-7b-hf", kL, 2048, 4, 1,
       false, 22.04, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B LoRA, FSDP + CPU offload, bs 10 x 2048", "meta-llama/Llama-2-7b-hf",
       kL, 2048, 10, 2, true, 22.69, kR, 0.30},
      {"fsdp_qlora: Llama-2-7B QLoRA, FSDP + CPU offload, bs 12 x 2048",
       "meta-llama/Llama-2-7b-hf", kQ, 2048, 12, 2, true, 22.38, kR, 0.30},
      {"fsdp_qlora: Yi-34B QLoRA, 2 GPUs FSDP, bs 2 x 2048", "01-ai/Yi-34B", kQ, 2048, 2, 2, false,
       23.05, kR, 0.30},
      {"fsdp_qlora: Yi-34B QLoRA, FSDP + CPU offload, bs 4 x 2048", "01-ai/Yi-34B", kQ, 2048, 4, 2,
       true, 22.98, kR, 0.30},
      {"fsdp_qlora: Llama-2-70B QLoRA, FSDP + CPU offload, bs 2 x 2048",
       "meta-llama/Llama-2-70b-hf", kQ, 2048, 2, 2, true, 14.92, kR, 0.30},
      // The two Mistral runs hold the same 24,576 tokens and measured the same peak; so does the
      // estimate (flash attention: no seq^2 term). Both read high like the 7B QLoRA bs 10/12 runs:
      // 32%.
      {"fsdp_qlora: Mistral-7B v0.2 QLoRA, FSDP + CPU offload, bs 12 x 2048",
       "mistralai/Mistral-7B-v0.1", kQ, 2048, 12, 2, true, 22.54, kR, 0.32},
      {"fsdp_qlora: Mistral-7B v0.2 QLoRA, FSDP + CPU offload, bs 1 x 24576",
       "mistralai/Mistral-7B-v0.1", kQ, 24576, 1, 2, true, 22.54, kR, 0.32},
  };
  for (const Run& r : runs) {
    Workload w = f;
    w.method = r.method;
    w.sequence_tokens = r.seq;
    w.batch = r.batch;
    w.gpus = r.gpus;
    w.zero_stage = r.gpus > 1 ? 3 : 0;
    w.offload_params = r.offload;
    c.push_back({.source = r.source,
                 .model = r.model,
                 .workload = w,
                 .measured_bytes = r.gib * kGiB,
                 .component = nullptr,
                 .tolerance = r.tolerance,
                 .statistic = r.statistic});
  }
}

// Qwen2 speed benchmark (the Qwen2 edition of qwen.readthedocs.io's benchmark/speed_benchmark,
// QwenLM/Qwen2.5 commit 4da996c, docs/source/benchmark/speed_benchmark.rst): A100 80GB,
// transformers 4.38.2 (old_transformers: every prompt position's logits upcast to fp32, per-layer
// rotary caches), flash attention 2, batch 1, the prompt prefilled in one pass (prefill_chunk =
// the prompt) and 2048 tokens generated (KV cache: prompt + 2048), GPTQ/AWQ checkpoints as
// int8/int4; memory summed over the GPUs of a device_map="auto" split, in GiB
// (max_memory_allocated), compared per GPU. Qwen2-0.5B/1.5B have the shapes of the bundled
// Qwen2.5 configs; Qwen2-7B/72B-Instruct those of Qwen2-7B/Qwen2.5-72B with
// max_position_embeddings 32,768. The model was built with the 0.5B rows and the 7B bf16 row at
// prompt 1 (calibration); the other rows were checked after (held out).
void AddQwen2(std::vector<Calibration>& c, bool held_out) {
  struct Row {
    const char* size;
    std::int64_t prompt;
    const char* quant;
    int gpus;
    double gib_summed;
  };
  static const Row rows[] = {
      {"0.5B", 1, "BF16", 1, 1.17},        {"0.5B", 1, "GPTQ-Int8", 1, 0.85},
      {"0.5B", 1, "GPTQ-Int4", 1, 0.68},   {"0.5B", 1, "AWQ", 1, 0.68},
      {"0.5B", 6144, "BF16", 1, 6.42},     {"0.5B", 6144, "GPTQ-Int8", 1, 6.09},
      {"0.5B", 6144, "GPTQ-Int4", 1, 5.93}, {"0.5B", 6144, "AWQ", 1, 5.92},
      {"0.5B", 14336, "BF16", 1, 13.48},   {"0.5B", 14336, "GPTQ-Int8", 1, 13.15},
      {"0.5B", 14336, "GPTQ-Int4", 1, 12.97}, {"0.5B", 14336, "AWQ", 1, 12.99},
      {"0.5B", 30720, "BF16", 1, 27.61},   {"0.5B", 30720, "GPTQ-Int8", 1, 27.28},
      {"0.5B", 30720, "GPTQ-Int4", 1, 27.12}, {"0.5B", 30720, "AWQ", 1, 27.11},
      {"1.5B", 1, "BF16", 1, 3.44},        {"1.5B", 1, "GPTQ-Int8", 1, 2.31},
      {"1.5B", 1, "GPTQ-Int4", 1, 1.67},   {"1.5B", 1, "AWQ", 1, 1.64},
      {"1.5B", 6144, "BF16", 1, 8.74},     {"1.5B", 6144, "GPTQ-Int8", 1, 7.59},
      {"1.5B", 6144, "GPTQ-Int4", 1, 6.95}, {"1.5B", 6144, "AWQ", 1, 6.92},
      {"1.5B", 14336, "BF16", 1, 15.92},   {"1.5B", 14336, "GPTQ-Int8", 1, 14.79},
      {"1.5B", 14336, "GPTQ-Int4", 1, 14.14}, {"1.5B", 14336, "AWQ", 1, 14.12},
      {"1.5B", 30720, "BF16", 1, 30.31},   {"1.5B", 30720, "GPTQ-Int8", 1, 29.18},
      {"1.5B", 30720, "GPTQ-Int4", 1, 28.54}, {"1.5B", 30720, "AWQ", 1, 28.51},
      {"7B", 1, "BF16", 1, 14.92},         {"7B", 1, "GPTQ-Int8", 1, 8.97},
      {"7B", 1, "GPTQ-Int4", 1, 6.06},     {"7B", 1, "AWQ", 1, 5.93},
      {"7B", 6144, "BF16", 1, 20.26},      {"7B", 6144, "GPTQ-Int8", 1, 14.31},
      {"7B", 6144, "GPTQ-Int4", 1, 11.40}, {"7B", 6144, "AWQ", 1, 11.27},
      {"7B", 14336, "BF16", 1, 27.71},     {"7B", 14336, "GPTQ-Int8", 1, 21.76},
      {"7B", 14336, "GPTQ-Int4", 1, 18.86}, {"7B", 14336, "AWQ", 1, 18.72},
      {"7B", 30720, "BF16", 1, 42.62},     {"7B", 30720, "GPTQ-Int8", 1, 36.67},
      {"7B", 30720, "GPTQ-Int4", 1, 33.76}, {"7B", 30720, "AWQ", 1, 33.63},
      {"72B", 1, "BF16", 2, 134.74},       {"72B", 1, "GPTQ-Int8", 2, 71.00},
      {"72B", 1, "GPTQ-Int4", 1, 41.80},   {"72B", 1, "AWQ", 1, 41.31},
      {"72B", 6144, "BF16", 2, 144.38},    {"72B", 6144, "GPTQ-Int8", 2, 80.60},
      {"72B", 6144, "GPTQ-Int4", 1, 47.90}, {"72B", 6144, "AWQ", 1, 47.42},
      {"72B", 14336, "BF16", 3, 169.93},   {"72B", 14336, "GPTQ-Int8", 2, 95.14},
      {"72B", 14336, "GPTQ-Int4", 1, 57.79}, {"72B", 14336, "AWQ", 1, 57.30},
      {"72B", 30720, "BF16", 3, 209.03},   {"72B", 30720, "GPTQ-Int8", 2, 124.20},
      {"72B", 30720, "GPTQ-Int4", 2, 107.94}, {"72B", 30720, "AWQ", 2, 88.60},
  };
  static std::vector<std::string> names;  // the cases point into it
  names.reserve(std::size(rows));
  for (const Row& r : rows) {
    const std::string size = r.size;
    const bool calibration =
        size == "0.5B" || (size == "7B" && r.prompt == 1 && std::string(r.quant) == "BF16");
    if (calibration == held_out) continue;
    Workload w;
    const std::string quant = r.quant;
    w.precision = quant == "BF16" ? Precision::kBf16
                  : quant == "GPTQ-Int8" ? Precision::kInt8
                                         : Precision::kInt4;
    w.context_tokens = r.prompt + 2048;
    w.prefill_chunk_tokens = r.prompt;
    w.gpus = r.gpus;
    w.old_transformers = true;
    names.push_back("Qwen2 bench (transformers 4.38): " + size + "-Instruct " + quant +
                    ", prompt " + std::to_string(r.prompt) +
                    (r.gpus > 1 ? ", " + std::to_string(r.gpus) + " GPUs" : ""));
    const char* model = size == "0.5B"   ? "Qwen/Qwen2.5-0.5B"
                        : size == "1.5B" ? "Qwen/Qwen2.5-1.5B-Instruct"
                        : size == "7B"   ? "Qwen/Qwen2-7B"
                                         : "Qwen/Qwen2.5-72B";
    // Qwen2-72B-Instruct AWQ on 2 GPUs at prompt 30,720 measured 19 GiB less than GPTQ-Int4 in
    // the same setup (88.60 vs 107.94 summed) with weights of the same size: 25%.
    const double tolerance = size == "72B" && quant == "AWQ" && r.prompt == 30720 ? 0.25 : 0.15;
    c.push_back({.source = names.back().c_str(),
                 .model = model,
                 .workload = w,
                 .measured_bytes = r.gib_summed * kGiB / r.gpus,
                 .component = nullptr,
                 .tolerance = tolerance,
                 .statistic = Statistic::kAllocated,
                 .max_position_embeddings = size == "7B" || size == "72B" ? 32768 : 0});
  }
}

std::vector<Calibration> CalibrationCases() {
  std::vector<Calibration> c;
  std::size_t from = 0;
  // LitGPT resource tables (A100-SXM4-40GB, bf16-true, Alpaca: longest Llama 2 sample 1304 tokens,
  // LoRA r=8 on q and v with dropout 0.05, AdamW, no activation checkpointing, flash SDPA, chunked
  // cross-entropy), torch.cuda.max_memory_allocated.
  Workload lit = Lora(8, 1304, 1);
  lit.pure_bf16 = true;
  lit.lora_dropout = true;
  lit.gradient_checkpointing = false;
  lit.chunked_loss = true;
  c.push_back({"LitGPT: Llama-2-7B LoRA r8 qv, mb 1", "meta-llama/Llama-2-7b-hf", lit, 21.30e9,
               nullptr, 0.15});
  c.push_back({"LitGPT: Llama-2-13B LoRA r8 qv, mb 1", "meta-llama/Llama-2-13b-hf", lit, 38.12e9,
               nullptr, 0.15});
  Workload lit2 = lit;
  lit2.batch = 2;
  c.push_back({"LitGPT: Llama-2-7B LoRA r8 qv, mb 2", "meta-llama/Llama-2-7b-hf", lit2, 29.07e9,
               nullptr, 0.30});
  Workload litq = lit;
  litq.method = Method::kQlora;
  litq.double_quant = false;
  c.push_back(
      {"LitGPT: Llama-2-7B QLoRA nf4", "meta-llama/Llama-2-7b-hf", litq, 14.14e9, nullptr, 0.30});
  c.push_back(
      {"LitGPT: Llama-2-13B QLoRA nf4", "meta-llama/Llama-2-13b-hf", litq, 23.14e9, nullptr, 0.30});
  litq.double_quant = true;
  c.push_back({"LitGPT: Llama-2-7B QLoRA nf4-dq", "meta-llama/Llama-2-7b-hf", litq, 13.84e9,
               nullptr, 0.30});
  c.push_back({"LitGPT: Llama-2-13B QLoRA nf4-dq", "meta-llama/Llama-2-13b-hf", litq, 22.55e9,
               nullptr, 0.30});
  // LitGPT single-GPU inference (short prompt, 50 new tokens).
  Workload gen;
  gen.context_tokens = 256;
  c.push_back({"LitGPT: Llama-2-7B inference bf16", "meta-llama/Llama-2-7b-hf", gen, 13.52e9,
               nullptr, 0.30});
  c.push_back({"LitGPT: Llama-2-13B inference bf16", "meta-llama/Llama-2-13b-hf", gen, 26.21e9,
               nullptr, 0.30});
  Workload gen4 = gen;
  gen4.precision = Precision::kNf4;
  gen4.double_quant = false;
  c.push_back({"LitGPT: Llama-2-7B inference nf4", "meta-llama/Llama-2-7b-hf", gen4, 4.57e9,
               nullptr, 0.30});
  c.push_back({"LitGPT: Llama-2-13B inference nf4", "meta-llama/Llama-2-13b-hf", gen4, 8.32e9,
               nullptr, 0.30});
  gen4.double_quant = true;
  c.push_back({"LitGPT: Llama-2-70B inference nf4-dq", "meta-llama/Llama-2-70b-hf", gen4, 37.21e9,
               nullptr, 0.30});

  MarkAllocated(c, from);  // LitGPT reports torch.cuda.max_memory_allocated

  // torchtune Llama 3.1 8B LoRA single device: bf16, AdamW, seq 2048, batch 2, activation
  // checkpointing, LoRA on q/v/output and the MLP, chunked cross-entropy.
  // The README's table: batch 2, dataset packed to 2048 tokens, torch.compile, bf16 throughout.
  Workload tt = Lora(8, 2048, 2);
  tt.lora_targets = LoraTargets::kAllLinear;
  tt.chunked_loss = true;
  tt.pure_bf16 = true;
  tt.fused_kernels = true;
  // The 4090 rows leave no room for the per-layer checkpoints (QLoRA: 7.4 GiB measured, 5.7 GB of
  // NF4 weights + 1.05 GB of bf16 logits + 1.07 GB of checkpoints already exceed it): torchtune's
  // activation offloading was on.
  tt.offload_activations = true;
  c.push_back({"torchtune: Llama-3.1-8B LoRA, seq 2048, bs 2, AC", "meta-llama/Llama-3.1-8B", tt,
               16.2 * kGiB, nullptr, 0.15});

  Workload ttq = tt;
  ttq.method = Method::kQlora;
  c.push_back({"torchtune: Llama-3.1-8B QLoRA, seq 2048, bs 2, AC", "meta-llama/Llama-3.1-8B", ttq,
               7.4 * kGiB, nullptr, 0.30});
  // 70B on 8 x A100 with FSDP: LoRA r16 on the attention projections; full fine-tuning with CPU
  // offload of parameters, gradients and the (fused) optimizer.
  Workload tt70 = tt;
  tt70.offload_activations = false;
  tt70.lora_targets = LoraTargets::kAttention;
  tt70.lora_rank = 16;
  tt70.gpus = 8;
  tt70.zero_stage = 3;
  c.push_back({"torchtune: Llama-3.1-70B LoRA, 8 GPUs FSDP", "meta-llama/Llama-3.1-70B", tt70,
               27.6 * kGiB, nullptr, 0.30});
  Workload tt70f = tt70;
  tt70f.method = Method::kFullFineTune;
  tt70f.offload_optimizer = true;
  tt70f.offload_params = true;
  c.push_back({"torchtune: Llama-3.1-70B full, 8 GPUs FSDP + CPU offload",
               "meta-llama/Llama-3.1-70B", tt70f, 13.9 * kGiB, nullptr, 0.30});

  // vLLM: "Loading model weights took 14.99 GiB" for Llama-3.1-8B in bf16.
  c.push_back({"vLLM: Llama-3.1-8B bf16 weights loaded", "meta-llama/Llama-3.1-8B", Workload{},
               14.99 * kGiB, "weights", 0.15});

  // Unsloth's long-context table: Hugging Face + FA2, Llama 3.1 8B QLoRA r=32 on all linear
  // layers, batch 1, gradient checkpointing, standard loss: the longest sequence that fits a card.
  // The estimate at that length is compared with the card's memory.
  struct Fit {
    double card_gib;
    std::int64_t tokens;
  };
  for (Fit f : {Fit{24, 5789}, Fit{40, 12264}, Fit{48, 15502}, Fit{80, 28454}}) {
    Workload u;
    u.method = Method::kQlora;
    u.lora_rank = 32;
    u.lora_targets = LoraTargets::kAllLinear;
    u.sequence_tokens = f.tokens;
    static std::vector<std::string> names;
    names.push_back("Unsloth: HF+FA2 Llama-3.1-8B QLoRA r32, " + std::to_string(f.tokens) +
                    " tokens fill " + std::to_string(static_cast<int>(f.card_gib)) + " GiB");
    c.push_back(
        {names.back().c_str(), "meta-llama/Llama-3.1-8B", u, f.card_gib * kGiB, nullptr, 0.30});
  }

  // Qwen2.5 speed benchmark (qwen.readthedocs.io, benchmark/speed_benchmark; script
  // examples/speed-benchmark/speed_benchmark_transformers.py of QwenLM/Qwen2.5): Hugging Face
  // transformers 4.46, A100 80GB, flash-attention 2, batch 1, device_map="auto" (layers split over
  // the fewest GPUs), the prompt prefilled in one forward pass and 2048 tokens generated; memory =
  // sum over the GPUs of torch.cuda.max_memory_allocated, in GiB (no CUDA context). The KV cache
  // holds prompt + 2048 tokens. Multi-GPU rows are compared per GPU (the sum / GPUs). The -Instruct
  // checkpoints have the shapes of the bundled base configs.
  struct Qwen {
    const char* source;
    const char* model;
    std::int64_t prompt;
    Precision precision;
    int gpus;
    double gib_summed;
    double tolerance;
  };
  const Qwen qwen[] = {
      {"Qwen2.5 bench: 7B-Instruct bf16, prompt 1", "Qwen/Qwen2.5-7B", 1, Precision::kBf16, 1,
       14.38, 0.30},
      {"Qwen2.5 bench: 7B-Instruct bf16, prompt 6144", "Qwen/Qwen2.5-7B", 6144, Precision::kBf16, 1,
       15.38, 0.30},
      {"Qwen2.5 bench: 7B-Instruct bf16, prompt 14336", "Qwen/Qwen2.5-7B", 14336, Precision::kBf16,
       1, 16.91, 0.30},
      {"Qwen2.5 bench: 7B-Instruct bf16, prompt 30720", "Qwen/Qwen2.5-7B", 30720, Precision::kBf16,
       1, 19.97, 0.30},
      {"Qwen2.5 bench: 7B-Instruct GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-7B", 1, Precision::kInt8, 1,
       8.42, 0.30},
      {"Qwen2.5 bench: 7B-Instruct GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-7B", 1, Precision::kInt4, 1,
       5.52, 0.30},
      {"Qwen2.5 bench: 7B-Instruct AWQ, prompt 30720", "Qwen/Qwen2.5-7B", 30720, Precision::kInt4,
       1, 10.98, 0.30},
      {"Qwen2.5 bench: 72B-Instruct bf16, 2 GPUs, prompt 1", "Qwen/Qwen2.5-72B", 1,
       Precision::kBf16, 2, 136.20, 0.30},
      {"Qwen2.5 bench: 72B-Instruct bf16, 3 GPUs, prompt 30720", "Qwen/Qwen2.5-72B", 30720,
       Precision::kBf16, 3, 164.79, 0.30},
      {"Qwen2.5 bench: 72B-Instruct GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-72B", 1, Precision::kInt4,
       1, 39.91, 0.30},
      {"Qwen2.5 bench: 72B-Instruct AWQ, 2 GPUs, prompt 30720", "Qwen/Qwen2.5-72B", 30720,
       Precision::kInt4, 2, 61.64, 0.30},
      // 0.5B: a 0.5 GB CUDA context would be half of the measured 1.04 GB; max_memory_allocated
      // cannot see it, and the estimate keeps it outside the components (outside_allocator).
      {"Qwen2.5 bench: 0.5B-Instruct bf16, prompt 1", "Qwen/Qwen2.5-0.5B", 1, Precision::kBf16, 1,
       0.97, 0.30},
      {"Qwen2.5 bench: 0.5B-Instruct bf16, prompt 6144", "Qwen/Qwen2.5-0.5B", 6144,
       Precision::kBf16, 1, 1.23, 0.30},
      {"Qwen2.5 bench: 0.5B-Instruct bf16, prompt 14336", "Qwen/Qwen2.5-0.5B", 14336,
       Precision::kBf16, 1, 1.60, 0.30},
      {"Qwen2.5 bench: 0.5B-Instruct bf16, prompt 30720", "Qwen/Qwen2.5-0.5B", 30720,
       Precision::kBf16, 1, 2.34, 0.30},
      {"Qwen2.5 bench: 0.5B-Instruct GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-0.5B", 1,
       Precision::kInt8, 1, 0.64, 0.30},
      {"Qwen2.5 bench: 0.5B-Instruct GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-0.5B", 1,
       Precision::kInt4, 1, 0.48, 0.30},
      // Checked after the 1.5B and 3B configs were bundled, without changing the model.
      {"Qwen2.5 bench: 1.5B-Instruct BF16, prompt 1", "Qwen/Qwen2.5-1.5B-Instruct", 1,
       Precision::kBf16, 1, 2.95, 0.30},
      {"Qwen2.5 bench: 1.5B-Instruct GPTQ-Int4, prompt 1", "Qwen/Qwen2.5-1.5B-Instruct", 1,
       Precision::kInt4, 1, 1.18, 0.30},
      {"Qwen2.5 bench: 1.5B-Instruct BF16, prompt 30720", "Qwen/Qwen2.5-1.5B-Instruct", 30720,
       Precision::kBf16, 1, 5.62, 0.30},
      {"Qwen2.5 bench: 3B-Instruct BF16, prompt 1", "Qwen/Qwen2.5-3B", 1,
       Precision::kBf16, 1, 5.95, 0.30},
      {"Qwen2.5 bench: 3B-Instruct GPTQ-Int8, prompt 1", "Qwen/Qwen2.5-3B", 1,
       Precision::kInt8, 1, 3.38, 0.30},
      {"Qwen2.5 bench: 3B-Instruct BF16, prompt 14336", "Qwen/Qwen2.5-3B", 14336,
       Precision::kBf16, 1, 7.47, 0.30},
      {"Qwen2.5 bench: 3B-Instruct AWQ, prompt 30720", "Qwen/Qwen2.5-3B", 30720,
       Precision::kInt4, 1, 5.37, 0.30},
      {"Qwen2.5 bench: 7B-Instruct GPTQ-Int8, prompt 30720", "Qwen/Qwen2.5-7B", 30720,
       Precision::kInt8, 1, 14.01, 0.30},
  };
  from = c.size();
  for (const Qwen& q : qwen) {
    Workload w;
    w.precision = q.precision;
    w.context_tokens = q.prompt + 2048;
    w.gpus = q.gpus;
    c.push_back({q.source, q.model, w, q.gib_summed * kGiB / q.gpus, nullptr, q.tolerance});
  }
  MarkAllocated(c, from);

  // Hugging Face PEFT's method comparison (huggingface/peft, method_comparison/MetaMathQA,
  // results/lora--llama-3.2-3B-rank32.json and full-finetuning--llama-3.2-3B-lr_0.00001.json):
  // L40S, transformers 4.52, torch 2.7, Llama-3.2-3B loaded in bf16 (no autocast), SDPA
  // attention, no gradient checkpointing, batch 4 of at most 768 tokens, torch.optim.AdamW,
  // standard loss; "cuda_memory_max" = the largest torch.cuda.memory_reserved() after a step.
  // LoRA: r 32 on q_proj and v_proj, no dropout, fp32 adapters (autocast_adapter_dtype).
  Workload peft = Lora(32, 768, 4);
  peft.gradient_checkpointing = false;
  c.push_back({"PEFT MetaMathQA: Llama-3.2-3B LoRA r32 qv, bs 4 x 768", "meta-llama/Llama-3.2-3B",
               peft, 22'273'851'392, nullptr, 0.30});
  // Full fine-tuning of the bf16 model: AdamW states in bf16, no fp32 master copy.
  Workload peft_full = peft;
  peft_full.method = Method::kFullFineTune;
  peft_full.pure_bf16 = true;
  c.push_back({"PEFT MetaMathQA: Llama-3.2-3B full, bf16 AdamW, bs 4 x 768",
               "meta-llama/Llama-3.2-3B", peft_full, 37'241'225'216, nullptr, 0.30});

  // LitGPT config hub (config_hub/finetune/README.md of Lightning-AI/litgpt; the configs beside
  // it): A10G, bf16-true, Alpaca2k with max_seq_length 512 (batches padded to their longest
  // sample), AdamW, no activation checkpointing, chunked lm_head and cross-entropy, LoRA dropout
  // 0.05 (Gemma 2: 0.1); "Peak memory" = torch.cuda.max_memory_allocated() / 1e9.
  from = c.size();
  Workload hub = Lora(32, 512, 2);
  hub.pure_bf16 = true;
  hub.lora_dropout = true;
  hub.gradient_checkpointing = false;
  hub.chunked_loss = true;
  c.push_back({"LitGPT hub: Mistral-7B LoRA r32 qv, mb 2 x 512", "mistralai/Mistral-7B-v0.1", hub,
               20.66e9, nullptr, 0.30});
  Workload hubq = hub;
  hubq.method = Method::kQlora;
  hubq.double_quant = false;  // bnb.nf4
  c.push_back({"LitGPT hub: Mistral-7B QLoRA nf4 r32 qv, mb 2 x 512", "mistralai/Mistral-7B-v0.1",
               hubq, 14.29e9, nullptr, 0.30});
  Workload hub1 = hub;
  hub1.batch = 1;
  c.push_back({"LitGPT hub: Llama-3-8B LoRA r32 qv, mb 1 x 512", "meta-llama/Meta-Llama-3-8B",
               hub1, 19.73e9, nullptr, 0.30});
  c.push_back({"LitGPT hub: Llama-3-8B QLoRA nf4 r32 qv, mb 2 x 512", "meta-llama/Meta-Llama-3-8B",
               hubq, 17.41e9, nullptr, 0.30});
  // Phi-3-mini: r 8 on every linear (and lm_head), micro-batch 4.
  Workload hub_phi = hub;
  hub_phi.lora_rank = 8;
  hub_phi.batch = 4;
  hub_phi.lora_targets = LoraTargets::kAllLinear;
  c.push_back({"LitGPT hub: Phi-3-mini LoRA r8 all-linear, mb 4 x 512",
               "microsoft/Phi-3-mini-4k-instruct", hub_phi, 19.75e9, nullptr, 0.30});
  // Gemma-2-9B QLoRA: r 16 on every linear (and lm_head), micro-batch 1. LitGPT computes
  // soft-capped attention by hand (no SDPA): the eager path with the tanh output.
  Workload hub_gemma = hubq;
  hub_gemma.lora_rank = 16;
  hub_gemma.batch = 1;
  hub_gemma.lora_targets = LoraTargets::kAllLinear;
  hub_gemma.flash_attention = false;
  c.push_back({"LitGPT hub: Gemma-2-9B QLoRA nf4 r16 all-linear, mb 1 x 512, eager",
               "google/gemma-2-9b", hub_gemma, 20.92e9, nullptr, 0.30});
  // TinyLlama 1.1B full fine-tuning on one A10G: bf16 weights, gradients and AdamW states,
  // micro-batch 4 of a global batch of 32 (8 micro-batches per step: the gradients stay allocated
  // through the next forward). The Chat-v1.0 config has the base checkpoint's shapes.
  Workload hub_full = hub;
  hub_full.method = Method::kFullFineTune;
  hub_full.batch = 4;
  hub_full.gradient_accumulation_steps = 8;
  c.push_back({"LitGPT hub: TinyLlama-1.1B full, bf16 AdamW, mb 4 x 512",
               "TinyLlama/TinyLlama-1.1B-Chat-v1.0", hub_full, 14.10e9, nullptr, 0.30});

  MarkAllocated(c, from);  // max_memory_allocated

  // ZeRO paper (Rajbhandari et al. 2020, Table 1): model-state memory per device for a 7.5B
  // model with mixed-precision Adam (K = 12) on 64 data-parallel GPUs: 120 GB unsharded,
  // 31.4 GB with P_os (stage 1), 16.6 GB with P_os+g (stage 2), 1.88 GB with P_os+g+p (stage 3).
  // Compared per parameter: weights + gradients + master weights + optimizer state.
  const double zero_gb[] = {120, 31.4, 16.6, 1.88};
  for (int stage = 0; stage <= 3; ++stage) {
    Workload z;
    z.method = Method::kFullFineTune;
    z.gpus = 64;
    z.zero_stage = stage;
    static const char* names[] = {"ZeRO paper: 7.5B model states, 64 GPUs, DP baseline",
                                  "ZeRO paper: 7.5B model states, 64 GPUs, ZeRO-1",
                                  "ZeRO paper: 7.5B model states, 64 GPUs, ZeRO-2",
                                  "ZeRO paper: 7.5B model states, 64 GPUs, ZeRO-3"};
    c.push_back({names[stage], "meta-llama/Llama-2-7b-hf", z, zero_gb[stage] * 1e9,
                 "model_states", 0.30, 7.5e9});
  }
  AddFsdpQlora(c);
  AddQwen2(c, /*held_out=*/false);
  return c;
}


// Cases checked after the model was built (nothing in it changed for them).
std::vector<Calibration> HeldOutCases() {
  std::vector<Calibration> c;
  AddQwen2(c, /*held_out=*/true);

  // PEFT's method comparison, newer runs (huggingface/peft, method_comparison/MetaMathQA/results,
  // transformers 5.13, torch 2.13; the setup of the calibration rows above):
  // lora--llama-3.2-3B-rank64.json (r 64 on q/v) and lora--llama-3.2-3B-rank10-target-mlp.json
  // (r 10 on gate/up/down); "accelerator_memory_max" = the largest memory_reserved().
  Workload peft = Lora(64, 768, 4);
  peft.gradient_checkpointing = false;
  c.push_back({"PEFT MetaMathQA: Llama-3.2-3B LoRA r64 qv, bs 4 x 768", "meta-llama/Llama-3.2-3B",
               peft, 22'552'772'608, nullptr, 0.15});
  Workload peft_mlp = peft;
  peft_mlp.lora_rank = 10;
  peft_mlp.lora_targets = LoraTargets::kMlp;
  c.push_back({"PEFT MetaMathQA: Llama-3.2-3B LoRA r10 mlp, bs 4 x 768",
               "meta-llama/Llama-3.2-3B", peft_mlp, 24'698'159'104, nullptr, 0.15});

  // torchtune README, "Optimization flags": Llama 3.2 3B, full_finetune_single_device, batch 2,
  // max sequence 4096, bf16, A100, "Peak Memory Active" (allocated); each technique added on top
  // of the previous one, except LoRA and QLoRA (r 64 on q/v/output and the MLP, AdamW, no
  // optimizer_in_bwd).
  const std::size_t from = c.size();
  Workload tt = Lora(64, 4096, 2);
  tt.method = Method::kFullFineTune;
  tt.pure_bf16 = true;
  tt.gradient_checkpointing = false;
  struct Step {
    const char* source;
    double gib;
    double tolerance;
    void (*apply)(Workload&);
  };
  static const Step steps[] = {
      {"torchtune: Llama-3.2-3B full, packed 2 x 4096", 60.0, 0.15, [](Workload&) {}},
      {"torchtune: + compile (fused kernels)", 51.0, 0.15,
       [](Workload& w) { w.fused_kernels = true; }},
      {"torchtune: + chunked cross-entropy", 42.9, 0.15,
       [](Workload& w) { w.chunked_loss = true; }},
      {"torchtune: + activation checkpointing", 24.9, 0.15,
       [](Workload& w) { w.gradient_checkpointing = true; }},
      {"torchtune: + optimizer step in backward", 23.1, 0.15,
       [](Workload& w) { w.optimizer_in_backward = true; }},
      {"torchtune: + activation offloading", 21.8, 0.15,
       [](Workload& w) { w.offload_activations = true; }},
      {"torchtune: + 8-bit AdamW", 17.6, 0.15,
       [](Workload& w) { w.optimizer = Optimizer::kAdam8bit; }},
  };
  for (const Step& s : steps) {
    s.apply(tt);
    c.push_back({s.source, "meta-llama/Llama-3.2-3B", tt, s.gib * kGiB, nullptr, s.tolerance});
  }
  // LoRA and QLoRA on the ladder up to activation offloading (AdamW, no optimizer_in_bwd). The
  // measured 8.5 and 4.6 GiB leave 1.8 and 1.9 GiB beside the weights and adapters, less than
  // the bf16 logits of 8,192 tokens alone (1.96 GiB): these runs did not hold the logits whole
  // (torchtune's later LinearCrossEntropyLoss projects chunk by chunk), which the model's
  // chunked_loss does not cover: 25% and 40%.
  Workload ttl = Lora(64, 4096, 2);
  ttl.pure_bf16 = true;
  ttl.fused_kernels = true;
  ttl.chunked_loss = true;
  ttl.offload_activations = true;
  ttl.lora_targets = LoraTargets::kAllLinear;
  c.push_back({"torchtune: Llama-3.2-3B LoRA r64 (ladder)", "meta-llama/Llama-3.2-3B", ttl,
               8.5 * kGiB, nullptr, 0.25});
  Workload ttq = ttl;
  ttq.method = Method::kQlora;
  c.push_back({"torchtune: Llama-3.2-3B QLoRA r64 (ladder)", "meta-llama/Llama-3.2-3B", ttq,
               4.6 * kGiB, nullptr, 0.40});
  MarkAllocated(c, from);

  // torchtune README, "Memory and training speed" (batch 2, packed to 2048, compile; the
  // recipes' configs otherwise): Llama 3.1 8B full fine-tuning on an A6000 (8-bit AdamW with the
  // step in backward, checkpointing) and LoRA r 8 on q/v/output + MLP on an A6000; Llama 3.1 405B
  // QLoRA r 16 on 8 x A100 (FSDP, 44.8 GB). The LoRA row names no checkpointing setting: with
  // the recipe's default (on) it reads -40%, without +20%; the run sat between (selective
  // checkpointing is not modelled): 45%. Left out: the 8B full fine-tune on a 4090 (18.9 GiB),
  // whose PagedAdamW8bit keeps its state in CUDA unified memory that pages to the host under
  // pressure (not modelled: the estimate counts the 15 GiB of state on the card).
  Workload full8 = Lora(8, 2048, 2);
  full8.method = Method::kFullFineTune;
  full8.pure_bf16 = true;
  full8.fused_kernels = true;
  full8.chunked_loss = true;
  full8.optimizer_in_backward = true;
  full8.optimizer = Optimizer::kAdam8bit;
  c.push_back({"torchtune: Llama-3.1-8B full, 8-bit AdamW in backward, A6000",
               "meta-llama/Llama-3.1-8B", full8, 37.4 * kGiB, nullptr, 0.15});
  Workload lora8 = Lora(8, 2048, 2);
  lora8.pure_bf16 = true;
  lora8.fused_kernels = true;
  lora8.chunked_loss = true;
  lora8.lora_targets = LoraTargets::kAllLinear;
  c.push_back({"torchtune: Llama-3.1-8B LoRA r8, A6000", "meta-llama/Llama-3.1-8B", lora8,
               30.3 * kGiB, nullptr, 0.45});
  Workload q405 = lora8;
  q405.method = Method::kQlora;
  q405.lora_rank = 16;
  q405.gpus = 8;
  q405.zero_stage = 3;
  c.push_back({"torchtune: Llama-3.1-405B QLoRA r16, 8 GPUs FSDP", "meta-llama/Llama-3.1-405B",
               q405, 44.8e9, nullptr, 0.30});
  return c;
}

struct Figures {
  double median = 0;
  double p90 = 0;
  double worst = 0;
  double within_15 = 0;  // share of cases within 15%
  std::size_t cases = 0;
};

Figures Summarize(const char* label, std::vector<double> errors) {
  Figures f;
  f.cases = errors.size();
  if (errors.empty()) return f;
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  f.median = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
  f.p90 = errors[static_cast<std::size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1];
  f.worst = errors.back();
  f.within_15 = static_cast<double>(std::count_if(errors.begin(), errors.end(),
                                                  [](double e) { return e <= 0.15; })) /
                static_cast<double>(n);
  std::printf("%s: median %.1f%%, 90th percentile %.1f%%, worst %.1f%%, %.0f%% within 15%%, %zu "
              "cases\n",
              label, 100 * f.median, 100 * f.p90, 100 * f.worst, 100 * f.within_15, n);
  return f;
}

struct SetFigures {
  Figures all, training, inference;
};

// Runs every case, prints the table (the one docs/sizing-model.md §4 shows) and checks each
// case's tolerance; returns the error figures of the set, of its training and inference cases.
SetFigures RunCases(const char* title, const std::vector<Calibration>& cases) {
  std::vector<double> all, training, inference;
  std::printf("%s\n%-76s %10s %10s %8s\n", title, "case", "measured", "estimate", "error");
  for (const auto& c : cases) {
    auto loaded = LoadModel(c.model, kDataDir);
    EXPECT_TRUE(loaded.ok()) << c.source << ": " << loaded.status().ToString();
    if (!loaded.ok()) continue;
    ModelShape m = *loaded;
    if (c.max_position_embeddings > 0) m.max_context = c.max_position_embeddings;
    Workload w = c.workload;
    w.profile = Profile::kDetailed;
    auto estimated = EstimateMemory(m, w);
    EXPECT_TRUE(estimated.ok()) << c.source << ": " << estimated.status().ToString();
    if (!estimated.ok()) continue;
    const MemoryEstimate& e = *estimated;
    double estimate = e.per_gpu_bytes;
    if (c.statistic == Statistic::kAllocated) estimate -= Component(e, "allocator_reserve");
    if (c.component && std::string(c.component) == "model_states") {
      estimate = 0;
      for (const char* part : {"weights", "gradients", "master_weights", "optimizer_state"}) {
        estimate += std::max(0.0, Component(e, part));
      }
    } else if (c.component) {
      estimate = Component(e, c.component);
    }
    if (c.per_params > 0) estimate *= c.per_params / m.total_params;
    double error = (estimate - c.measured_bytes) / c.measured_bytes;
    all.push_back(std::fabs(error));
    (w.method == Method::kInference ? inference : training).push_back(std::fabs(error));
    std::printf("%-76s %8.2f GB %8.2f GB %+7.1f%%%s\n", c.source, c.measured_bytes / 1e9,
                estimate / 1e9, 100 * error,
                c.statistic == Statistic::kAllocated ? " (allocated)" : "");
    EXPECT_LE(std::fabs(error), c.tolerance) << c.source;
  }
  return {Summarize("all", all), Summarize("training", training),
          Summarize("inference", inference)};
}

// docs/sizing-model.md §4 states these figures; a change that worsens them must update it.
TEST(Calibration, PublishedMeasurements) {
  SetFigures f = RunCases("calibration (the cases the model was built with)", CalibrationCases());
  EXPECT_EQ(f.all.cases, 93u);
  EXPECT_LE(f.all.median, 0.035);
  EXPECT_LE(f.all.p90, 0.17);
}

TEST(Calibration, HeldOutMeasurements) {
  SetFigures f = RunCases("held out (checked after the model was built)", HeldOutCases());
  EXPECT_EQ(f.all.cases, 61u);
  EXPECT_LE(f.all.median, 0.02);
  EXPECT_GE(f.all.within_15, 0.90);
  EXPECT_LE(f.training.median, 0.05);
  EXPECT_LE(f.inference.median, 0.02);
}

}  // namespace
}  // namespace gpuhub::sizing
