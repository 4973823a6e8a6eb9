#include "sizing/detailed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sizing/loader.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";
constexpr double kGiB = 1024.0 * 1024 * 1024;

ModelShape Model(const std::string& id) {
  auto m = LoadModel(id, kDataDir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

MemoryEstimate Estimate(const ModelShape& m, Workload w) {
  auto e = EstimateMemory(m, w);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : MemoryEstimate{};
}

double Component(const MemoryEstimate& e, const std::string& name) {
  for (const auto& c : e.components) {
    if (c.name == name) return c.bytes;
  }
  return -1;
}

Workload Lora(int rank, std::int64_t seq, std::int64_t batch) {
  Workload w;
  w.method = Method::kLora;
  w.lora_rank = rank;
  w.sequence_tokens = seq;
  w.batch = batch;
  return w;
}

// --- Calibration against published peak-memory measurements -----------------------------------
//
// Each case: the workload as the source describes it, the measured peak, and what is compared
// (the whole estimate, or one component when only that part was measured). Tolerances: every case
// within 30%, the median within 15% (the acceptance rule of issue 3), and the four measurements
// named in issue 3 within 15%. docs/sizing-model.md prints this table with the errors.
struct Calibration {
  const char* source;
  const char* model;
  Workload workload;
  double measured_bytes;
  const char* component;  // nullptr: the whole per-GPU estimate; "model_states": weights +
                          // gradients + master weights + optimizer state
  double tolerance;       // 15% for the cases issue 3 names, else 30%; exceptions say why
  double per_params = 0;  // > 0: compare per parameter, scaled to this many parameters
};

std::vector<Calibration> Cases() {
  std::vector<Calibration> c;
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
  for (const Qwen& q : qwen) {
    Workload w;
    w.precision = q.precision;
    w.context_tokens = q.prompt + 2048;
    w.gpus = q.gpus;
    c.push_back({q.source, q.model, w, q.gib_summed * kGiB / q.gpus, nullptr, q.tolerance});
  }

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
  return c;
}

TEST(Calibration, PublishedMeasurements) {
  std::vector<double> errors;
  std::printf("%-70s %10s %10s %8s\n", "case", "measured", "estimate", "error");
  for (const auto& c : Cases()) {
    ModelShape m = Model(c.model);
    Workload w = c.workload;
    w.profile = Profile::kDetailed;
    MemoryEstimate e = Estimate(m, w);
    double estimate = e.per_gpu_bytes;
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
    errors.push_back(std::fabs(error));
    std::printf("%-70s %8.2f GB %8.2f GB %+7.1f%%\n", c.source, c.measured_bytes / 1e9,
                estimate / 1e9, 100 * error);
    EXPECT_LE(std::fabs(error), c.tolerance) << c.source;
  }
  std::sort(errors.begin(), errors.end());
  double median = errors.size() % 2
                      ? errors[errors.size() / 2]
                      : (errors[errors.size() / 2 - 1] + errors[errors.size() / 2]) / 2;
  std::printf("median absolute error %.1f%% over %zu cases\n", 100 * median, errors.size());
  EXPECT_LE(median, 0.15);
}

// --- Formulas ---------------------------------------------------------------------------------

TEST(Detailed, RealModelsDefaultToDetailedPresetsToGuide) {
  EXPECT_EQ(Estimate(Model("meta-llama/Llama-3.1-8B"), Workload{}).profile, Profile::kDetailed);
  EXPECT_EQ(Estimate(Model("70b"), Workload{}).profile, Profile::kGuide);
  Workload w;
  w.profile = Profile::kDetailed;
  MemoryEstimate preset = Estimate(Model("7b"), w);
  EXPECT_EQ(preset.profile, Profile::kDetailed);
  EXPECT_DOUBLE_EQ(Component(preset, "weights"), 14e9);  // nominal count kept
}

TEST(Detailed, LoraAdapterParamsFromRankAndTargets) {
  ModelShape m = Model("meta-llama/Llama-2-7b-hf");
  // LitGPT reports 4,194,304 trainable params for r=8 on q and v: 32 x 2 x 8 x (4096 + 4096).
  EXPECT_DOUBLE_EQ(LoraAdapterParams(m, LoraTargets::kQv, 8), 4'194'304);
  EXPECT_DOUBLE_EQ(LoraAdapterParams(m, LoraTargets::kAttention, 8), 8'388'608);
  // all-linear adds gate/up (4096 -> 11008) and down: 32 x 8 x 3 x (4096 + 11008).
  EXPECT_DOUBLE_EQ(LoraAdapterParams(m, LoraTargets::kAllLinear, 8),
                   8'388'608 + 32.0 * 8 * 3 * 15104);
  // GQA: Llama-3.1-8B's v_proj is 4096 -> 1024.
  ModelShape l3 = Model("meta-llama/Llama-3.1-8B");
  EXPECT_DOUBLE_EQ(LoraAdapterParams(l3, LoraTargets::kQv, 16), 32.0 * 16 * (8192 + 5120));
  EXPECT_DOUBLE_EQ(LoraAdapterParams(Model("13b"), LoraTargets::kQv, 8), 6'553'600);  // LitGPT 13B
}

TEST(Detailed, QloraConstantsFollowTheQloraPaper) {
  ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.method = Method::kQlora;
  w.double_quant = false;
  double linear = LinearWeightParams(m);
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "quantization_constants"),
                   linear * 4 / 64);  // 0.5 bit
  w.double_quant = true;
  // 8-bit absmax per 64 weights + one fp32 per 256 blocks: 0.127 bits per parameter.
  double dq = Component(Estimate(m, w), "quantization_constants");
  EXPECT_NEAR(dq * 8 / linear, 0.127, 0.001);
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "base_weights"), linear * 0.5);
}

TEST(Detailed, OptimizersZeroStagesAndOffload) {
  ModelShape m = Model("meta-llama/Llama-3.1-8B");
  const double p = m.total_params;
  Workload w;
  w.method = Method::kFullFineTune;
  MemoryEstimate adam = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(adam, "weights"), 2 * p);
  // One GPU, checkpointing: the peak is the end of backward, when every gradient exists and the
  // 32 kept hidden states (32 x 2048 x 8192 B) and the logits (2048 x 128256 x 14 B) are freed.
  EXPECT_DOUBLE_EQ(Component(adam, "gradients"),
                   2 * p - (32.0 * 2048 * 2 * 4096 + 2048.0 * 128256 * 14));
  EXPECT_DOUBLE_EQ(Component(adam, "master_weights"), 4 * p);
  EXPECT_DOUBLE_EQ(Component(adam, "optimizer_state"), 8 * p);
  w.optimizer = Optimizer::kSgdMomentum;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "optimizer_state"), 4 * p);
  w.optimizer = Optimizer::kAdam8bit;
  EXPECT_NEAR(Component(Estimate(m, w), "optimizer_state") / p, 2.0, 0.01);
  w.optimizer = Optimizer::kAdafactor;
  EXPECT_LT(Component(Estimate(m, w), "optimizer_state") / p, 0.01);  // factored: rows + columns
  w.optimizer = Optimizer::kAdamW;

  w.gpus = 8;
  for (int stage : {0, 1, 2, 3}) {
    w.zero_stage = stage;
    MemoryEstimate e = Estimate(m, w);
    EXPECT_DOUBLE_EQ(Component(e, "optimizer_state"), stage >= 1 ? 8 * p / 8 : 8 * p) << stage;
    EXPECT_DOUBLE_EQ(Component(e, "master_weights"), stage >= 1 ? 4 * p / 8 : 4 * p) << stage;
    EXPECT_DOUBLE_EQ(Component(e, "gradients"), stage >= 2 ? 2 * p / 8 : 2 * p) << stage;
    EXPECT_DOUBLE_EQ(Component(e, "weights"), stage >= 3 ? 2 * p / 8 : 2 * p) << stage;
    EXPECT_EQ(Component(e, "zero3_gathered_params") > 0, stage == 3);
  }
  w.zero_stage = 3;
  w.offload_optimizer = true;
  w.offload_params = true;
  MemoryEstimate off = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(off, "optimizer_state"), 0);
  EXPECT_DOUBLE_EQ(Component(off, "master_weights"), 0);
  EXPECT_DOUBLE_EQ(Component(off, "weights"), 0);
  EXPECT_DOUBLE_EQ(Component(off, "gradients"), 0);  // the optimizer steps on the CPU
  // fp32 master + Adam, fp32 gradients for the CPU step, and the bf16 weights.
  EXPECT_DOUBLE_EQ(off.host_bytes, 12 * p + 4 * p + 2 * p);

  Workload bad;
  bad.method = Method::kLora;
  bad.offload_params = true;
  EXPECT_FALSE(EstimateMemory(m, bad).ok());
}

// PEFT's MetaMathQA full fine-tune of Llama-3.2-3B on one GPU: bf16 everything, 4 x 768 tokens,
// no checkpointing.
Workload FullBf16Batch4x768() {
  Workload w;
  w.method = Method::kFullFineTune;
  w.pure_bf16 = true;
  w.batch = 4;
  w.sequence_tokens = 768;
  w.gradient_checkpointing = false;
  return w;
}

TEST(Detailed, GradientsAndActivationsPeakAtOppositeEndsOfBackward) {
  ModelShape m = Model("meta-llama/Llama-3.2-3B");  // tied embeddings: 128256 x 3072
  Workload w = FullBf16Batch4x768();
  MemoryEstimate one = Estimate(m, w);
  // Without checkpointing the saved activations (11.9 GB) and logits (5.5 GB) outweigh the 6.4 GB
  // of gradients: at the start of backward only the (tied) lm_head gradient exists.
  EXPECT_DOUBLE_EQ(Component(one, "gradients"), 128256.0 * 3072 * 2);
  EXPECT_DOUBLE_EQ(one.per_gpu_bytes,
                   Component(one, "weights") + Component(one, "gradients") +
                       Component(one, "optimizer_state") + Component(one, "activations") +
                       Component(one, "logits_and_loss") + Component(one, "allocator_reserve"));
  // Across GPUs the gradient buffers live for the whole step: counted in full.
  w.gpus = 2;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "gradients"), 2 * m.total_params);
}

TEST(Detailed, GradientAccumulationKeepsTheGradientsThroughTheNextForward) {
  ModelShape m = Model("meta-llama/Llama-3.2-3B");
  Workload w = FullBf16Batch4x768();
  MemoryEstimate one = Estimate(m, w);
  w.gradient_accumulation_steps = 8;
  MemoryEstimate accumulating = Estimate(m, w);
  // Every bf16 gradient is alive at the activation peak: the full 2 B per parameter.
  EXPECT_DOUBLE_EQ(Component(accumulating, "gradients"), 2 * m.total_params);
  EXPECT_LT(Component(one, "gradients"), Component(accumulating, "gradients"));
  // Nothing else changes: activations are per micro-batch.
  EXPECT_DOUBLE_EQ(Component(accumulating, "activations"), Component(one, "activations"));
  EXPECT_DOUBLE_EQ(accumulating.per_gpu_bytes - one.per_gpu_bytes,
                   Component(accumulating, "gradients") - Component(one, "gradients"));
  w.gradient_accumulation_steps = 0;
  EXPECT_FALSE(EstimateMemory(m, w).ok());
}

TEST(Detailed, InferencePrefillsThePromptInOnePass) {
  ModelShape m = Model("Qwen/Qwen2.5-7B");  // h 3584, q 3584, k = v 512, MLP 18944
  Workload w;
  w.context_tokens = 32768;
  const double per_token = 4 * 3584 + 2 * (3584 + 512 + 512) + 2 * 3584 + 6 * 18944;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "prefill_activations"),
                   32768 * per_token + 152064.0 * 4);
  w.batch = 2;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "prefill_activations"),
                   2 * 32768 * per_token + 2 * 152064.0 * 4);
  // A serving engine that chunks the prompt holds one chunk's working set, whatever the context.
  w.prefill_chunk_tokens = 8192;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "prefill_activations"),
                   8192 * per_token + 2 * 152064.0 * 4);
  // A chunk larger than the prompt changes nothing.
  w.batch = 1;
  w.context_tokens = 4096;
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "prefill_activations"),
                   4096 * per_token + 152064.0 * 4);
  w.prefill_chunk_tokens = -1;
  EXPECT_FALSE(EstimateMemory(m, w).ok());
}

TEST(Detailed, ActivationsFollowTheSwitches) {
  ModelShape m = Model("meta-llama/Llama-2-7b-hf");
  Workload w = Lora(8, 2048, 1);
  w.gradient_checkpointing = false;
  double full = Component(Estimate(m, w), "activations");
  // Frozen base, flash attention, q/v adapters without dropout: 18h + 6i bytes per token per layer
  // (+ the adapters' rank-wide intermediates and flash attention's fp32 logsumexp per head)
  // = 73,728 + 66,048 + 32 + 128.
  EXPECT_DOUBLE_EQ(ActivationBytesPerTokenPerLayer(m, w),
                   18 * 4096 + 6 * 11008 + 2 * 8 * 2 + 4 * 32);
  // QLoRA's 4-bit matmuls also keep the inputs of o_proj, gate/up and down: + 2q + 2h + 2i.
  Workload q = w;
  q.method = Method::kQlora;
  EXPECT_DOUBLE_EQ(ActivationBytesPerTokenPerLayer(m, q) - ActivationBytesPerTokenPerLayer(m, w),
                   2 * 4096 + 2 * 4096 + 2 * 11008);
  w.gradient_checkpointing = true;
  double ckpt = Component(Estimate(m, w), "activations");
  EXPECT_LT(ckpt, full / 5);
  w.gradient_checkpointing = false;
  w.flash_attention = false;
  double eager = Component(Estimate(m, w), "activations");
  EXPECT_NEAR(eager - full, 32 * EagerAttentionBytesPerLayer(m, 2048), 1);
  // Full fine-tuning keeps the linears' inputs too: 16h + 6q + 2k + 2v + 8i.
  Workload f;
  f.method = Method::kFullFineTune;
  EXPECT_DOUBLE_EQ(ActivationBytesPerTokenPerLayer(m, f), 26 * 4096 + 8 * 11008 + 4.0 * 32);
  // Longer sequences and bigger batches never cost less.
  double previous = 0;
  for (std::int64_t seq : {128, 512, 2048, 8192}) {
    Workload s = Lora(16, seq, 1);
    double now = Estimate(m, s).per_gpu_bytes;
    EXPECT_GT(now, previous);
    previous = now;
  }
}

TEST(Detailed, Gemma2KeepsFourNormsAndSoftCappingOutputs) {
  ModelShape g = Model("google/gemma-2-9b");  // h 3584, 16 heads, final logits capped at 30
  EXPECT_EQ(g.norms_per_layer, 4);
  EXPECT_DOUBLE_EQ(g.attn_logit_softcapping, 50);
  EXPECT_DOUBLE_EQ(g.final_logit_softcapping, 30);
  EXPECT_EQ(Model("meta-llama/Llama-3.1-8B").norms_per_layer, 2);
  // Frozen base: the post-attention and post-MLP norms keep their fp32 inputs too (2 x 4h more).
  Workload w = Lora(16, 512, 1);
  ModelShape two = g;
  two.norms_per_layer = 2;
  EXPECT_DOUBLE_EQ(ActivationBytesPerTokenPerLayer(g, w) - ActivationBytesPerTokenPerLayer(two, w),
                   2 * 4 * 3584.0);
  // Eager soft-capped attention keeps the tanh output beside the fp32 softmax and its bf16 copy.
  EXPECT_DOUBLE_EQ(EagerAttentionBytesPerLayer(g, 512), 8.0 * 16 * 512 * 512);
  // Logits: + the tanh output (2 B per logit).
  ModelShape uncapped = g;
  uncapped.final_logit_softcapping = 0;
  EXPECT_DOUBLE_EQ(Component(Estimate(g, w), "logits_and_loss") -
                       Component(Estimate(uncapped, w), "logits_and_loss"),
                   512.0 * 256000 * 2);
}

TEST(Detailed, LoraCostsMoreThanQloraAndLessThanFull) {
  for (const char* id : {"meta-llama/Llama-3.1-8B", "mistralai/Mixtral-8x7B-v0.1", "Qwen/Qwen3-8B",
                         "google/gemma-2-9b", "deepseek-ai/DeepSeek-V2-Lite"}) {
    ModelShape m = Model(id);
    Workload w;
    w.method = Method::kQlora;
    double qlora = Estimate(m, w).per_gpu_bytes;
    w.method = Method::kLora;
    double lora = Estimate(m, w).per_gpu_bytes;
    w.method = Method::kFullFineTune;
    double full = Estimate(m, w).per_gpu_bytes;
    EXPECT_LT(qlora, lora) << id;
    EXPECT_LT(lora, full) << id;
  }
}

TEST(Detailed, InferenceWeightsKeepEmbeddingsIn16Bits) {
  ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.precision = Precision::kInt4;
  double linear = LinearWeightParams(m);
  double rest = m.total_params - linear;
  // GPTQ/AWQ int4 g128: 0.5 B + (fp16 scale + 4-bit zero) / 128 per linear weight, the rest bf16.
  EXPECT_DOUBLE_EQ(Component(Estimate(m, w), "weights"), linear * (0.5 + 2.5 / 128) + rest * 2);
  w.precision = Precision::kBf16;
  MemoryEstimate bf16 = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(bf16, "weights"), 2 * 8'030'261'248.0);
  EXPECT_DOUBLE_EQ(Component(bf16, "kv_cache"), 2.0 * 32 * 8 * 128 * 2 * 8192);
  // The CUDA context is on the card but outside PyTorch's allocator: not a component, not in the
  // framework's peak that published measurements report; the card must hold both.
  EXPECT_EQ(bf16.outside_allocator.name, "cuda_context");
  EXPECT_DOUBLE_EQ(bf16.outside_allocator.bytes, kCudaContextBytes);
  EXPECT_DOUBLE_EQ(bf16.card_bytes(), bf16.per_gpu_bytes + kCudaContextBytes);
  for (const auto& c : bf16.components) EXPECT_NE(c.name, "cuda_context");
  // MLA: DeepSeek-V3 caches 576 elements per token per layer.
  ModelShape v3 = Model("deepseek-ai/DeepSeek-V3");
  MemoryEstimate e = Estimate(v3, w);
  EXPECT_DOUBLE_EQ(Component(e, "kv_cache"), 61.0 * 576 * 2 * 8192);
  EXPECT_NEAR(e.decode_weight_bytes / Component(e, "weights"), v3.active_params / v3.total_params,
              1e-12);
}

TEST(Detailed, LoraAcrossGpusSplitsLayersOrShardsWithFsdp) {
  ModelShape m = Model("meta-llama/Llama-3.1-70B");
  Workload w = Lora(16, 2048, 1);
  w.gpus = 4;
  MemoryEstimate split = Estimate(m, w);
  w.zero_stage = 3;
  MemoryEstimate fsdp = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(split, "base_weights"), Component(fsdp, "base_weights"));
  // FSDP: every card runs its own batch through all 80 layers, and gathers two layers at a time.
  EXPECT_GT(Component(fsdp, "activations"), Component(split, "activations"));
  EXPECT_GT(Component(fsdp, "fsdp_gathered_params"), 0);
  EXPECT_LT(Component(split, "fsdp_gathered_params"), 0);  // absent
  w.zero_stage = 2;
  auto bad = EstimateMemory(m, w);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stage"), std::string::npos);
  Workload infer;
  infer.zero_stage = 3;
  EXPECT_FALSE(EstimateMemory(m, infer).ok());
  Workload offload_infer;
  offload_infer.offload_activations = true;
  EXPECT_FALSE(EstimateMemory(m, offload_infer).ok());
}

TEST(Detailed, PureBf16AndFusedKernelsCostLess) {
  ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.method = Method::kFullFineTune;
  MemoryEstimate mixed = Estimate(m, w);
  w.pure_bf16 = true;
  MemoryEstimate pure = Estimate(m, w);
  EXPECT_LT(Component(pure, "master_weights"), 0);                           // no fp32 master copy
  EXPECT_DOUBLE_EQ(Component(pure, "optimizer_state"), 4 * m.total_params);  // bf16 m and v
  EXPECT_LT(pure.per_gpu_bytes, mixed.per_gpu_bytes);
  w.fused_kernels = true;
  EXPECT_LT(Component(Estimate(m, w), "activations"), Component(pure, "activations"));
  w.chunked_loss = true;
  EXPECT_LT(Component(Estimate(m, w), "logits_and_loss"), Component(pure, "logits_and_loss") / 3);
}

}  // namespace
}  // namespace gpuhub::sizing
