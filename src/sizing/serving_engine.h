// Serving engines: what each one does to memory and speed, stated once. The memory side (how a
// prompt is prefilled, what the engine reserves) is used by EstimateMemory; the speed side (how
// much of the card's bandwidth a decode step reaches, what the host adds per step, how the KV
// cache is read) by fit/rates.h. Every figure here names its source or the calibration run that
// set it (docs/sizing-model.md §6, "Engines").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace gpuhub::sizing {

enum class ServingEngine {
  kUnspecified,   // the legacy answer: memory as Hugging Face prefills, speed as vLLM decodes
  kVllm,          // vLLM: paged KV cache, continuous batching, CUDA graphs, chunked prefill
  kSglang,        // SGLang: as vLLM (radix cache, chunked prefill)
  kTensorRtLlm,   // TensorRT-LLM (trtllm-bench / Triton): in-flight batching, fused kernels
  kLlamaCpp,      // llama.cpp (GGUF): one sequence per slot, micro-batches of n_ubatch tokens
  kTransformers,  // Hugging Face transformers `generate`: eager Python, a static batch
};

// "vllm", "sglang", "tensorrt-llm" ("trtllm"), "llama.cpp" ("llamacpp"), "transformers" ("hf").
Result<ServingEngine> ParseServingEngine(std::string_view text);
std::string_view ServingEngineName(ServingEngine engine);  // "" for kUnspecified

struct ServingEngineTraits {
  // Tokens one prefill step runs through a layer (0: the whole prompt of every sequence at once).
  // vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size, TensorRT-LLM's max_num_tokens
  // (all 8192 by default for these benchmarks), llama.cpp's n_ubatch (512).
  std::int64_t prefill_chunk_tokens = 0;
  // Share of the card the engine reserves up front for weights + KV cache (vLLM's
  // gpu_memory_utilization 0.9, SGLang's mem_fraction_static ~0.88, TensorRT-LLM's
  // free_gpu_memory_fraction 0.9 of what the weights leave); 0: allocates as it goes.
  double reserves_fraction = 0;
  // Speed. The share of the architecture's decode bandwidth (fit/rates.h) that one decode step of
  // this engine reaches, for 16-bit/FP8 weights.
  double decode_bandwidth_factor = 1;
  // Host time per decoder layer per decode step that the GPU cannot hide (eager Python launching
  // each layer's kernels: transformers). The step takes max(GPU time, layers x this).
  double host_seconds_per_layer = 0;
  // KV cache bytes moved per byte cached, per decode step: 1 (read once, paged attention); for
  // transformers' dynamic cache the keys and values are concatenated anew every step and, for
  // grouped-query attention, expanded to every query head (repeat_kv): see KvTrafficFactor.
  bool expands_kv_per_step = false;
  // Sequences decoded together by continuous/in-flight batching; false: a static batch (every
  // sequence waits for the longest).
  bool continuous_batching = true;
  // Pipeline stages process micro-batches concurrently (vLLM, SGLang, TensorRT-LLM); false: the
  // layers split card after card (llama.cpp's layer split, transformers' device_map).
  bool pipelines_stages = true;
  // Weight-only int4/int8 kernels: the share of the 16-bit decode rate per byte they reach
  // (dequantizing while reading). nullopt-like 0: the architecture defaults of fit/rates.h.
  double int4_decode_efficiency = 0;
  // The most a decode step reads per second (GB/s), whatever the card (0: no ceiling): 16-bit
  // weights, and quantized (int8/int4) ones.
  double decode_ceiling_gb_per_s = 0;
  double quantized_decode_ceiling_gb_per_s = 0;
  // Its own attention kernels on Hopper and later (fused multi-head attention using the
  // asynchronous tensor cores) reach this share of the matmuls' utilisation at least (0: the
  // architecture's FlashAttention-2 figure of fit/rates.h).
  double attention_efficiency = 0;
  const char* source = "";
  // The share of the decode bandwidth share at which the per-step cache traffic of an engine that
  // expands its KV cache every step (KvTrafficFactor > 1) moves: separate unfused copy kernels
  // (torch.cat, repeat_kv's expand + reshape) allocating fresh tensors each step.
  double kv_copy_efficiency = 1;
};
const ServingEngineTraits& TraitsOf(ServingEngine engine);

// KV bytes a decode step moves per KV byte cached (>= 1): 1 for paged engines; for transformers'
// dynamic cache 4 + 2 x heads / kv_heads (the concatenation reads and writes the cache, repeat_kv
// writes and attention reads the expanded copy).
double KvTrafficFactor(ServingEngine engine, int heads, int kv_heads);

}  // namespace gpuhub::sizing
