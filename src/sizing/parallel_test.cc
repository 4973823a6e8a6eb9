#include "sizing/parallel.h"

#include <gtest/gtest.h>

#include "sizing/detailed.h"
#include "sizing/estimate_test_util.h"
#include "sizing/hf_config.h"
#include "sizing/loader.h"
#include "sizing/serving_engine.h"

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";

ModelShape Model(const std::string& id) {
  auto m = LoadModel(id, kDataDir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

MemoryEstimate Estimate(const ModelShape& m, const Workload& w) {
  auto e = EstimateMemory(m, w);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? *e : MemoryEstimate{};
}

Workload Full(int gpus) {
  Workload w;
  w.method = Method::kFullFineTune;
  w.gpus = gpus;
  w.sequence_tokens = 4096;
  w.gradient_checkpointing = false;
  return w;
}

TEST(Layout, LegacyMeaningsOfGpus) {
  Workload w = Full(8);
  EXPECT_EQ(LayoutOf(w).data, 8);  // full fine-tuning: data parallel
  EXPECT_FALSE(LayoutOf(w).layer_split);
  w.method = Method::kLora;
  EXPECT_TRUE(LayoutOf(w).layer_split);  // LoRA, zero 0: layers split
  EXPECT_EQ(LayoutOf(w).pipeline, 8);
  w.zero_stage = 3;
  EXPECT_TRUE(LayoutOf(w).fsdp_base);  // LoRA, zero 3: FSDP
  EXPECT_EQ(LayoutOf(w).data, 8);
  EXPECT_EQ(LayoutName(LayoutOf(w), w.method), "dp 8 (FSDP)");
  Workload one;
  EXPECT_TRUE(LayoutOf(one).single());
  EXPECT_EQ(LayoutName(LayoutOf(one), one.method), "single");
}

TEST(Layout, NamedDegreesMustUseEveryGpu) {
  Workload w = Full(64);
  w.tensor_parallel = 8;
  w.pipeline_parallel = 2;
  EXPECT_TRUE(ValidateWorkload(w).ok());
  const Layout l = LayoutOf(w);
  EXPECT_EQ(l.data, 4);
  EXPECT_EQ(l.model_shards(), 16);
  EXPECT_EQ(LayoutName(l, w.method), "tp 8 x pp 2 x dp 4 (ZeRO-0)");
  w.tensor_parallel = 3;  // 64 is no multiple of 3 x 2
  Status s = ValidateWorkload(w);
  EXPECT_EQ(s.field(), "gpus") << s.message();
  w.tensor_parallel = 8;
  w.data_parallel = 2;  // 8 x 2 x 2 = 32, not 64
  EXPECT_EQ(ValidateWorkload(w).field(), "gpus");
  w.data_parallel = 0;
  w.pipeline_parallel = 1;
  w.virtual_pipeline = 2;  // interleaving needs pipeline stages
  EXPECT_EQ(ValidateWorkload(w).field(), "vp");
  Workload serve;
  serve.gpus = 2;
  serve.context_parallel = 2;
  EXPECT_EQ(ValidateWorkload(serve).field(), "cp");
  // The model's own limits: tensor parallel divides the heads, stages no more than layers.
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");  // 32 heads, 32 layers
  Workload tp = Full(6);
  tp.tensor_parallel = 6;
  EXPECT_TRUE(ValidateWorkload(tp).ok());
  EXPECT_EQ(EstimateMemory(m, tp).status().field(), "tp");
  Workload pp = Full(64);
  pp.pipeline_parallel = 64;
  EXPECT_EQ(EstimateMemory(m, pp).status().field(), "pp");
}

TEST(Layout, TensorParallelShardsStatesAndActivations) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload dp = Full(8);
  dp.zero_stage = 1;
  Workload tp = dp;
  tp.tensor_parallel = 8;  // dp 1: ZeRO-1 shards nothing more
  const MemoryEstimate a = Estimate(m, dp), b = Estimate(m, tp);
  // Weights: whole on every data-parallel rank, 1/8 on every tensor-parallel one.
  EXPECT_NEAR(Component(b, "weights"), Component(a, "weights") / 8, 1);
  // Optimizer state: ZeRO-1 over 8 ranks, or tensor-parallel 8 with one rank: the same share.
  EXPECT_NEAR(Component(b, "optimizer_state"), Component(a, "optimizer_state"), 1);
  // Activations and logits: split over the tensor-parallel ranks (sequence parallel, vocab
  // parallel cross-entropy).
  EXPECT_NEAR(Component(b, "activations"), Component(a, "activations") / 8, 1e3);
  EXPECT_NEAR(Component(b, "logits_and_loss"), Component(a, "logits_and_loss") / 8, 1);
}

TEST(Layout, ContextParallelRanksShareTheZeroGroupAndSplitTheSequence) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w = Full(8);
  w.zero_stage = 3;
  w.sequence_tokens = 65536;
  w.gradient_checkpointing = true;
  Workload cp = w;
  cp.context_parallel = 8;  // dp 1: ZeRO-3 shards over the 8 context-parallel ranks
  const MemoryEstimate a = Estimate(m, w), b = Estimate(m, cp);
  EXPECT_NEAR(Component(b, "weights"), Component(a, "weights"), 1);
  EXPECT_NEAR(Component(b, "optimizer_state"), Component(a, "optimizer_state"), 1);
  // Each rank runs an eighth of the sequence.
  EXPECT_NEAR(Component(b, "logits_and_loss"), Component(a, "logits_and_loss") / 8, 1);
  EXPECT_EQ(LayoutOf(cp).zero_group(), 8);
}

TEST(Layout, PipelineStagesHoldTheirLayersAndMicroBatchesInFlight) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload pp = Full(4);
  pp.pipeline_parallel = 4;
  pp.gradient_accumulation_steps = 8;
  pp.sequence_tokens = 2048;
  EXPECT_EQ(MicroBatchesInFlight(LayoutOf(pp), 8), 4);
  const MemoryEstimate e = Estimate(m, pp);
  EXPECT_NEAR(Component(e, "weights"), m.total_params * 2 / 4, 1);
  // 1F1B: the first stage holds 4 micro-batches of its 8 layers; the last stage one micro-batch
  // beside the logits. The larger is the card figure, the activations of one stage.
  const double per_layer_micro =
      ActivationBytesPerTokenPerLayer(m, pp) * 2048.0;  // one layer, one micro-batch
  const double first = 8 * 4 * per_layer_micro;         // + backward temporaries
  EXPECT_GT(Component(e, "activations"), first);
  EXPECT_LT(Component(e, "activations"), first * 1.1);
  EXPECT_DOUBLE_EQ(Component(e, "logits_and_loss"), 0);  // on the last stage, which peaks lower
  // Two micro-batches per step: both stages hold at most two.
  pp.gradient_accumulation_steps = 2;
  EXPECT_EQ(MicroBatchesInFlight(LayoutOf(pp), 2), 2);
  // A layer split never pipelines.
  Workload split;
  split.method = Method::kLora;
  split.gpus = 4;
  EXPECT_EQ(MicroBatchesInFlight(LayoutOf(split), 8), 1);
}

TEST(Layout, PipeliningRuntimeKeepsEveryMicroBatchsBoundaryTensors) {
  // torchtitan's 405B run: FSDP 8 x TP 8 x PP 8, 1F1B, full recomputation, Float8. Under FSDP
  // torch.distributed.pipelining keeps a receive buffer (and its input gradient), a gradient
  // receive buffer and the output of every micro-batch of the step, not only those in flight.
  const ModelShape m = Model("meta-llama/Llama-3.1-405B");
  Workload w = Full(512);
  w.zero_stage = 3;
  w.tensor_parallel = 8;
  w.pipeline_parallel = 8;
  w.sequence_tokens = 8192;
  w.gradient_accumulation_steps = 32;
  w.gradient_checkpointing = true;
  w.fp8_training = true;
  w.fused_kernels = true;
  const double boundary = 8192.0 * 2 * 16384 / 8;  // one bf16 hidden state, sequence-sharded
  const double logits = 8192.0 * 128256 * 2 / 8;   // the last stage's bf16 output, vocab-sharded
  MemoryEstimate e = Estimate(m, w);
  // The last stage peaks: the 31 earlier micro-batches' receive buffers, their input gradients
  // and their logits, beside the last one's loss.
  EXPECT_DOUBLE_EQ(Component(e, "pipeline_buffers"), (31 + 31) * boundary + 31 * logits);
  EXPECT_NEAR(Component(e, "pipeline_buffers") / 1e9, 10.22, 0.005);
  EXPECT_GT(Component(e, "logits_and_loss"), 0);
  const std::string& last = e.components[7].formula;
  EXPECT_EQ(e.components[7].name, "pipeline_buffers");
  EXPECT_NE(last.find("pipeline stage 8 of 8 (1 in flight): activation receive buffers beyond "
                      "those in flight 31 + their input gradients kept to the next step 31 + the "
                      "logits of the 31 earlier micro-batches kept in output_chunks"),
            std::string::npos)
      << last;
  EXPECT_NEAR(e.per_gpu_bytes / 1e9, 63.60, 0.005);

  // 32,768 tokens in 8 micro-batches: the first stage peaks, with a gradient receive buffer and
  // a kept output for each of them.
  w.sequence_tokens = 32768;
  w.gradient_accumulation_steps = 8;
  e = Estimate(m, w);
  EXPECT_DOUBLE_EQ(Component(e, "pipeline_buffers"), (8 + 8) * 32768.0 * 2 * 16384 / 8);
  EXPECT_DOUBLE_EQ(Component(e, "logits_and_loss"), 0);
  EXPECT_NE(e.components[7].formula.find("pipeline stage 1 of 8 (8 in flight): gradient receive "
                                         "buffers 8 + outputs kept in output_chunks 8 = 2.15 GB"),
            std::string::npos)
      << e.components[7].formula;
  EXPECT_NEAR(e.per_gpu_bytes / 1e9, 72.82, 0.005);

  // Without FSDP (Megatron's layouts: ZeRO-1 distributed optimizer) there is no such component.
  w.zero_stage = 1;
  e = Estimate(m, w);
  for (const auto& c : e.components) EXPECT_NE(c.name, "pipeline_buffers");
}

TEST(Layout, ServingTensorParallelSplitsKvUpToItsHeads) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");  // 8 KV heads
  Workload w;
  w.context_tokens = 8192;
  w.gpus = 16;
  w.tensor_parallel = 16;
  const MemoryEstimate e = Estimate(m, w);
  const double kv = KvCacheBytes(m, Precision::kFp16, 8192, 1);
  EXPECT_NEAR(Component(e, "kv_cache"), kv / 8, 1);  // 8 heads over 16 ranks: each holds one
  EXPECT_NE(e.components[1].formula.find("the rest replicated"), std::string::npos);
  EXPECT_NEAR(Component(e, "weights"), WeightBytesAt(m, Precision::kBf16, true) / 16, 1);
  // Replicas (dp) each hold a whole copy.
  Workload replicas;
  replicas.gpus = 4;
  replicas.data_parallel = 4;
  EXPECT_NEAR(Component(Estimate(m, replicas), "weights"), WeightBytesAt(m, Precision::kBf16, true),
              1);
}

TEST(Layout, SelectiveRecomputeKeepsEveryOtherMatmulOutput) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w = Full(1);
  w.selective_recompute = true;
  const double h = 4096, q = 4096, kv = 1024, i = 14336;
  // The layer's input, half of q/k/v/o/gate/up/down's outputs, the attention output and its
  // log-sum-exp (fp32 per head).
  const double expected = 2 * h + (q + kv + kv + h + 2 * i + h) + 2 * q + 4.0 * 32;
  EXPECT_DOUBLE_EQ(ActivationBytesPerTokenPerLayer(m, w), expected);
  EXPECT_LT(expected, ActivationBytesPerTokenPerLayer(m, Full(1)) / 2);
  // Not with full checkpointing: one or the other.
  w.gradient_checkpointing = true;
  EXPECT_EQ(ValidateWorkload(w).field(), "recompute");
}

TEST(Layout, Fp8TrainingKeepsTheLinearInputsInFp8) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload bf16 = Full(1);
  Workload fp8 = bf16;
  fp8.fp8_training = true;
  // q/k/v, o, gate/up and down inputs: h + q + h + i elements, 1 B instead of 2.
  EXPECT_DOUBLE_EQ(
      ActivationBytesPerTokenPerLayer(m, bf16) - ActivationBytesPerTokenPerLayer(m, fp8),
      4096 + 4096 + 4096 + 14336);
  Workload serve;
  serve.fp8_training = true;
  EXPECT_EQ(ValidateWorkload(serve).field(), "fp8_training");
}

TEST(Engines, PrefillChunksAndTraits) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  Workload w;
  w.context_tokens = 32768;
  const double whole = Component(Estimate(m, w), "prefill_activations");
  w.engine = ServingEngine::kVllm;  // 8192-token chunks
  const double vllm = Component(Estimate(m, w), "prefill_activations");
  EXPECT_NEAR(vllm / whole, 8192.0 / 32768, 0.01);
  w.engine = ServingEngine::kLlamaCpp;  // 512-token micro-batches
  EXPECT_NEAR(Component(Estimate(m, w), "prefill_activations") / whole, 512.0 / 32768, 0.01);
  w.prefill_chunk_tokens = 1024;  // the request's own chunk wins
  EXPECT_NEAR(Component(Estimate(m, w), "prefill_activations") / whole, 1024.0 / 32768, 0.01);
  EXPECT_EQ(ParseServingEngine("TensorRT-LLM").value(), ServingEngine::kTensorRtLlm);
  EXPECT_EQ(ParseServingEngine("hf").value(), ServingEngine::kTransformers);
  EXPECT_FALSE(ParseServingEngine("onnx").ok());
  // transformers' dynamic cache: concatenated and expanded to every query head each step.
  EXPECT_DOUBLE_EQ(KvTrafficFactor(ServingEngine::kTransformers, 32, 8), 4 + 2 * 4);
  EXPECT_DOUBLE_EQ(KvTrafficFactor(ServingEngine::kVllm, 32, 8), 1);
  Workload train;
  train.method = Method::kLora;
  train.engine = ServingEngine::kVllm;
  EXPECT_EQ(ValidateWorkload(train).field(), "engine");
}

TEST(Precisions, Fp4WeightsCarryAnFp8ScalePer16) {
  const ModelShape m = Model("meta-llama/Llama-3.1-8B");
  const double linear = LinearWeightParams(m);
  EXPECT_DOUBLE_EQ(WeightBytesAt(m, Precision::kFp4, true),
                   linear * (0.5 + 1.0 / 16) + (m.total_params - linear) * 2);
  EXPECT_EQ(ParsePrecision("FP4").value(), Precision::kFp4);
  EXPECT_TRUE(NeedsFp4Hardware(Precision::kFp4));
  Workload lora;
  lora.method = Method::kLora;
  lora.precision = Precision::kFp4;
  EXPECT_FALSE(ValidateWorkload(lora).ok());  // a 4-bit base is QLoRA
}

TEST(HfConfig, MptConfigsReadTheirOwnNames) {
  // llm-foundry's MPT-7B benchmark configuration: learned positions for its sequence length,
  // tied embeddings, no biases, a plain up/GELU/down MLP.
  auto s = ParseHfConfig(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
      "expansion_ratio": 4, "vocab_size": 50368, "max_seq_len": 2048, "no_bias": true})",
                         "mpt-7b");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->gated_mlp);
  EXPECT_TRUE(s->tied_embeddings);
  EXPECT_EQ(s->intermediate, 16384);
  const double expected = 32 * (4.0 * 4096 * 4096 + 2.0 * 4096 * 16384 + 2 * 4096) + 4096 +
                          50368.0 * 4096 + 2048.0 * 4096;
  EXPECT_DOUBLE_EQ(s->total_params, expected);
  // With biases (no_bias false) every linear and LayerNorm has one: llm-foundry's benchmark
  // table prints 6,658,859,008 parameters for MPT-7B at 2048 tokens.
  auto biased = ParseHfConfig(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32,
      "n_layers": 32, "expansion_ratio": 4, "vocab_size": 50368, "max_seq_len": 2048,
      "no_bias": false})",
                              "mpt-7b-bias");
  ASSERT_TRUE(biased.ok());
  EXPECT_DOUBLE_EQ(biased->total_params, 6658859008.0);
  // ALiBi: no position embeddings.
  auto alibi = ParseHfConfig(R"({"model_type": "mpt", "d_model": 4096, "n_heads": 32,
      "n_layers": 32, "vocab_size": 50368, "max_seq_len": 2048, "attn_config": {"alibi": true}})",
                             "mpt-7b-alibi");
  ASSERT_TRUE(alibi.ok());
  EXPECT_DOUBLE_EQ(alibi->total_params, expected - 2048.0 * 4096);
}

}  // namespace
}  // namespace gpuhub::sizing
