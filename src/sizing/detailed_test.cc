#include "sizing/detailed.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sizing/estimate_test_util.h"
#include "sizing/loader.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

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

// FSDP gathers the unit about to run: two decoder layers, or at the start of backward the
// lm_head (beyond its shard) and the last layer; with CPU offload nothing else stays on the card.
TEST(Detailed, FsdpGathersLayersAndTheHeadAndOffloadsTheRest) {
  ModelShape m = Model("meta-llama/Llama-3.1-70B");  // lm_head 128,256 x 8,192; 80 layers
  Workload w = Lora(16, 2048, 1);
  w.gpus = 8;
  w.zero_stage = 3;
  MemoryEstimate sharded = Estimate(m, w);
  const double layer = (m.total_params - m.embedding_params - m.lm_head_params) / m.layers;
  const double head = 128256.0 * 8192;
  EXPECT_DOUBLE_EQ(m.lm_head_params, head);
  // lm_head x 2 B x 7/8 + one layer x 2 B (3.55 GB) beats two layers x 2 B (3.42 GB).
  EXPECT_DOUBLE_EQ(Component(sharded, "fsdp_gathered_params"), head * 2 * 7.0 / 8 + layer * 2);
  EXPECT_DOUBLE_EQ(Component(sharded, "base_weights"), m.total_params * 2 / 8);

  w.offload_params = true;
  MemoryEstimate off = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(off, "base_weights"), 0);
  EXPECT_DOUBLE_EQ(Component(off, "lora_adapters"), 0);
  EXPECT_DOUBLE_EQ(Component(off, "fsdp_gathered_params"), head * 2 + layer * 2);
  // Every card's shard and its adapters' state, in host memory.
  EXPECT_DOUBLE_EQ(off.host_bytes,
                   (Component(sharded, "base_weights") + Component(sharded, "lora_adapters")) * 8);

  // QLoRA offloaded on one GPU (FSDP with one rank): the nf4 layers and the bf16 head come in.
  ModelShape small = Model("meta-llama/Llama-2-7b-hf");
  Workload q = Lora(64, 2048, 1);
  q.method = Method::kQlora;
  q.pure_bf16 = true;
  q.zero_stage = 3;
  q.offload_params = true;
  MemoryEstimate qo = Estimate(small, q);
  EXPECT_DOUBLE_EQ(Component(qo, "base_weights"), 0);
  EXPECT_DOUBLE_EQ(Component(qo, "quantization_constants"), 0);
  EXPECT_DOUBLE_EQ(Component(qo, "frozen_unquantized"), 0);
  EXPECT_GT(Component(qo, "dequant_workspace"), 0);  // still dequantized on the card
  EXPECT_GT(qo.host_bytes, 3.2e9);

  Workload no_fsdp = Lora(16, 2048, 1);
  no_fsdp.offload_params = true;  // layer split: nothing to offload from
  auto bad = EstimateMemory(m, no_fsdp);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "parameter offload needs training with ZeRO stage 3 / FSDP (--zero 3)");
}

// torchtune's optimizer_in_bwd: each gradient is freed as soon as its parameter is stepped.
TEST(Detailed, OptimizerInBackwardKeepsOnlyTheLargestGradient) {
  ModelShape m = Model("meta-llama/Llama-3.2-3B");  // tied: the embedding is the head
  Workload w = FullBf16Batch4x768();  // torchtune's ladder: 2 x 4096 packed, compile, chunked CE
  w.sequence_tokens = 4096;
  w.batch = 2;
  w.fused_kernels = true;
  w.chunked_loss = true;
  w.gradient_checkpointing = true;
  MemoryEstimate plain = Estimate(m, w);  // the peak at the end of backward: every gradient
  w.optimizer_in_backward = true;
  MemoryEstimate fused = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(fused, "gradients"), 128256.0 * 3072 * 2);
  EXPECT_GT(Component(plain, "gradients"), Component(fused, "gradients"));
  EXPECT_DOUBLE_EQ(Component(plain, "optimizer_state"), Component(fused, "optimizer_state"));

  w.gradient_accumulation_steps = 4;  // gradients must survive the micro-batches
  EXPECT_FALSE(EstimateMemory(m, w).ok());
  Workload lora = Lora(16, 2048, 1);
  lora.optimizer_in_backward = true;
  auto bad = EstimateMemory(m, lora);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "optimizer_in_backward");
}

// Transformers before 4.45: every prefill position's logits in bf16 and fp32, rotary caches per
// layer, fp32 logits in training.
TEST(Detailed, OldTransformersUpcastEveryLogitAndCacheRotaryTables) {
  ModelShape m = Model("Qwen/Qwen2.5-0.5B");  // vocab 151,936, 24 layers, head_dim 64, 32,768
  Workload w;
  w.context_tokens = 30720 + 2048;
  w.prefill_chunk_tokens = 30720;
  MemoryEstimate now = Estimate(m, w);
  w.old_transformers = true;
  MemoryEstimate old = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(old, "prefill_activations"), 30720.0 * 151936 * 6);
  EXPECT_DOUBLE_EQ(Component(old, "rotary_caches"), 24 * 2.0 * 32768 * 64 * 2);
  EXPECT_LT(Component(now, "rotary_caches"), 0);  // absent
  // MLA rotates only the rope part of a head (DeepSeek-V3: 64 of 192).
  ModelShape mla = Model("deepseek-ai/DeepSeek-V3");
  Workload mw;
  mw.precision = Precision::kFp8;
  mw.old_transformers = true;
  EXPECT_DOUBLE_EQ(Component(Estimate(mla, mw), "rotary_caches"), 61 * 2.0 * 163840 * 64 * 2);
  EXPECT_GT(old.per_gpu_bytes, 10 * now.per_gpu_bytes);
  // A short prompt: the working set of the step is the larger part again.
  w.prefill_chunk_tokens = 1;
  w.context_tokens = 1 + 2048;
  EXPECT_LT(Component(Estimate(m, w), "prefill_activations"), 1e9);

  Workload t = Lora(16, 2048, 1);
  t.gradient_checkpointing = false;
  MemoryEstimate bf16_logits = Estimate(m, t);
  t.old_transformers = true;
  MemoryEstimate fp32_logits = Estimate(m, t);
  EXPECT_DOUBLE_EQ(
      Component(fp32_logits, "logits_and_loss") - Component(bf16_logits, "logits_and_loss"),
      2048.0 * 151936 * 2);
}

// PEFT's target_modules=["gate_proj", "up_proj", "down_proj"].
TEST(Detailed, UnchunkedNf4QuantizationLeavesAReservedFloor) {
  // torchtune 0.1's QLoRA (torchao 0.1) quantizes each Llama-2-7B linear on the GPU; the largest,
  // gate/up/down at 11,008 x 4,096 = 45,088,768 weights, needs three cached 32n-byte segments for
  // the n x 16 bf16 differences plus 14n for the weight, its scaled copy and the code indices and
  // minima: 110 B x n = 4.96 GB kept reserved on top of the weights.
  ModelShape m = Model("meta-llama/Llama-2-7b-hf");
  Workload w;
  w.method = Method::kQlora;
  w.pure_bf16 = true;
  w.lora_rank = 8;
  w.lora_targets = LoraTargets::kAllLinear;
  w.sequence_tokens = 512;
  w.batch = 2;
  const MemoryEstimate plain = Estimate(m, w);
  w.unchunked_nf4_quantization = true;
  const MemoryEstimate floor = Estimate(m, w);
  const double n = 11008.0 * 4096.0;
  const double weights = Component(floor, "base_weights") +
                         Component(floor, "quantization_constants") +
                         Component(floor, "frozen_unquantized");
  EXPECT_NEAR(floor.per_gpu_bytes, weights + 110 * n, 1);
  EXPECT_NEAR(110 * n, 4.96e9, 0.01e9);
  // Only the reserve grows: the tensors alive during training are the same.
  EXPECT_DOUBLE_EQ(floor.per_gpu_bytes - Component(floor, "allocator_reserve"),
                   plain.per_gpu_bytes - Component(plain, "allocator_reserve"));
  EXPECT_GT(floor.per_gpu_bytes, plain.per_gpu_bytes + 3e9);
  // A training peak above the floor (a long sequence) leaves the 10% reserve as it was.
  w.sequence_tokens = 16384;
  const MemoryEstimate long_run = Estimate(m, w);
  w.unchunked_nf4_quantization = false;
  EXPECT_DOUBLE_EQ(long_run.per_gpu_bytes, Estimate(m, w).per_gpu_bytes);
}

// torch.optim.AdamW without fused/foreach runs the foreach step on CUDA (PyTorch 2.2, as
// torchtune 0.1's configs give it): torch._foreach_sqrt(exp_avg_sqs) copies every state tensor
// at once. torchtune 0.1's Llama-2-7B full fine-tune on 4 GPUs (FSDP, bf16 state, 2 x 512 tokens,
// checkpointing): 6,738,415,616 params x 2 B / 4 = 3.37 GB, beside 3.37 GB of weights, 3.37 GB of
// gradients and 6.74 GB of state: a step peak of 16.85 GB above the backward's.
TEST(Detailed, ForeachAdamwStepCopiesTheStateBeyondTheFreedActivations) {
  ModelShape m = Model("meta-llama/Llama-2-7b-hf");
  Workload w;
  w.method = Method::kFullFineTune;
  w.pure_bf16 = true;
  w.gpus = 4;
  w.zero_stage = 3;
  w.sequence_tokens = 512;
  w.batch = 2;
  const MemoryEstimate fused = Estimate(m, w);
  w.foreach_adamw = true;
  const MemoryEstimate foreach = Estimate(m, w);
  const double temp = m.total_params * 2 / 4;
  EXPECT_NEAR(temp, 3.369e9, 0.001e9);
  const double freed = Component(foreach, "activations") + Component(foreach, "logits_and_loss") +
                       Component(foreach, "zero3_gathered_params");
  EXPECT_GT(freed, 0);
  EXPECT_NEAR(Component(foreach, "optimizer_step_temporaries"), temp - freed, 1);
  EXPECT_NEAR(foreach.per_gpu_bytes - fused.per_gpu_bytes, temp - freed, 1);
  // Without the reserve the estimate is the step's peak: weights + gradients + state + the copy.
  const double step = Component(foreach, "weights") + Component(foreach, "gradients") +
                      Component(foreach, "optimizer_state") + temp;
  EXPECT_NEAR(step, 16.85e9, 0.01e9);
  EXPECT_NEAR(foreach.per_gpu_bytes - Component(foreach, "allocator_reserve"), step, 1);
  // A long sequence frees more activations than the copy needs: nothing is added.
  w.sequence_tokens = 16384;
  w.gradient_checkpointing = false;
  EXPECT_EQ(Component(Estimate(m, w), "optimizer_step_temporaries"), 0);
  // LoRA: the copy covers the adapters' state only (4,194,304 params x 2 B / 2 GPUs), far below
  // the freed activations.
  Workload l;
  l.method = Method::kLora;
  l.pure_bf16 = true;
  l.lora_rank = 8;
  l.gpus = 2;
  l.zero_stage = 3;
  l.sequence_tokens = 512;
  l.batch = 2;
  const MemoryEstimate lora_fused = Estimate(m, l);
  l.foreach_adamw = true;
  EXPECT_DOUBLE_EQ(Estimate(m, l).per_gpu_bytes, lora_fused.per_gpu_bytes);
  // Other optimizers, and a step on the CPU or inside backward, have no such copy.
  w.sequence_tokens = 512;
  w.gradient_checkpointing = true;
  w.optimizer = Optimizer::kSgdMomentum;
  const double sgd = Estimate(m, w).per_gpu_bytes;
  w.foreach_adamw = false;
  EXPECT_DOUBLE_EQ(Estimate(m, w).per_gpu_bytes, sgd);
}

// torchtune 0.1's lora_llama2_7b builds every adapter with dropout 0.05: each adapter keeps its
// own dropped input (2 B) and mask (1 B) instead of sharing the norm's output (2 B, once). For
// q and v that is 2 x 3h - 2h = 4h = 16,384 B per token per layer: at 2 x 512 tokens without
// checkpointing, 32 layers x 1,024 x 16,384 B = 0.54 GB.
TEST(Detailed, LoraDropoutKeepsEachAdaptersDroppedInputAndMask) {
  ModelShape m = Model("meta-llama/Llama-2-7b-hf");
  Workload w;
  w.method = Method::kLora;
  w.pure_bf16 = true;
  w.lora_rank = 8;
  w.gpus = 2;
  w.zero_stage = 3;
  w.gradient_checkpointing = false;
  w.sequence_tokens = 512;
  w.batch = 2;
  const double plain = Component(Estimate(m, w), "activations");
  w.lora_dropout = true;
  const double dropped = Component(Estimate(m, w), "activations");
  EXPECT_NEAR(dropped - plain, 32 * 1024 * 16384.0, 1);
  EXPECT_NEAR(dropped - plain, 0.537e9, 0.001e9);
}

TEST(Detailed, MlpTargetsAdaptTheMlpProjectionsOnly) {
  ModelShape m = Model("meta-llama/Llama-3.2-3B");  // h 3072, MLP 8192, 28 layers
  EXPECT_DOUBLE_EQ(LoraAdapterParams(m, LoraTargets::kMlp, 10), 28 * 10.0 * 3 * (3072 + 8192));
  EXPECT_DOUBLE_EQ(LoraAdapterParams(m, LoraTargets::kMlp, 10) +
                       LoraAdapterParams(m, LoraTargets::kAttention, 10),
                   LoraAdapterParams(m, LoraTargets::kAllLinear, 10));
  EXPECT_EQ(*ParseLoraTargets("mlp"), LoraTargets::kMlp);
  EXPECT_EQ(LoraTargetsName(LoraTargets::kMlp), "mlp");
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

// torchtitan compiles the loss with --training.compile from bbb1b616e (April 2025): Inductor keeps
// the bf16 logits and writes their bf16 gradient, with no fp32 copy, log-softmax or fp32 gradient.
// Trainy's Llama 3.1 8B run (torchtitan e7c0cae): 32 GPUs FSDP, 2 x 8192, selective op AC, Float8.
TEST(Detailed, CompiledLossKeepsTheLogitsAndTheirGradientOnly) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.method = Method::kFullFineTune;
  w.sequence_tokens = 8192;
  w.batch = 2;
  w.gpus = 32;
  w.zero_stage = 3;
  w.gradient_checkpointing = false;
  w.selective_recompute = true;
  w.fp8_training = true;
  w.fused_kernels = true;
  const double tokens_x_vocab = 16384.0 * 128256;
  const MemoryEstimate eager = Estimate(m, w);  // torchtitan 9dec370 (Dec 2024): loss not compiled
  EXPECT_DOUBLE_EQ(Component(eager, "logits_and_loss"), tokens_x_vocab * 14);  // 29.42 GB
  w.compiled_loss = true;
  const MemoryEstimate compiled = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(compiled, "logits_and_loss"), tokens_x_vocab * 4);  // 8.41 GB
  // 21.01 GB less, and the allocator's 10% of it.
  EXPECT_NEAR(eager.per_gpu_bytes - compiled.per_gpu_bytes, tokens_x_vocab * 10 * 1.1, 1e6);
  EXPECT_DOUBLE_EQ(Component(compiled, "activations"), Component(eager, "activations"));
  // Chunked loss is its own path: compiling it changes nothing here.
  w.chunked_loss = true;
  const double chunked = Component(Estimate(m, w), "logits_and_loss");
  w.compiled_loss = false;
  EXPECT_DOUBLE_EQ(chunked, Component(Estimate(m, w), "logits_and_loss"));
}

}  // namespace
}  // namespace gpuhub::sizing
