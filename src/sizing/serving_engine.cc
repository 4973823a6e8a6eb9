#include "sizing/serving_engine.h"

#include <algorithm>
#include <string>

#include "core/strings.h"

namespace gpuhub::sizing {

Result<ServingEngine> ParseServingEngine(std::string_view text) {
  const std::string t = ToLower(text);
  if (t == "vllm") return ServingEngine::kVllm;
  if (t == "sglang") return ServingEngine::kSglang;
  if (t == "tensorrt-llm" || t == "trtllm" || t == "tensorrt_llm") {
    return ServingEngine::kTensorRtLlm;
  }
  if (t == "llama.cpp" || t == "llamacpp" || t == "llama-cpp") return ServingEngine::kLlamaCpp;
  if (t == "transformers" || t == "hf") return ServingEngine::kTransformers;
  return Status::InvalidArgument("unknown serving engine '" + std::string(text.substr(0, 40)) +
                                 "' (expected vllm, sglang, tensorrt-llm, llama.cpp or "
                                 "transformers)");
}

std::string_view ServingEngineName(ServingEngine engine) {
  switch (engine) {
    case ServingEngine::kUnspecified:
      return "";
    case ServingEngine::kVllm:
      return "vllm";
    case ServingEngine::kSglang:
      return "sglang";
    case ServingEngine::kTensorRtLlm:
      return "tensorrt-llm";
    case ServingEngine::kLlamaCpp:
      return "llama.cpp";
    case ServingEngine::kTransformers:
      return "transformers";
  }
  return "?";
}

const ServingEngineTraits& TraitsOf(ServingEngine engine) {
  // The vLLM row is the reference the architecture factors of fit/rates.h were calibrated on
  // (Qwen2.5's vLLM speed benchmark): its factors are 1 by construction.
  static const ServingEngineTraits kUnspecified{
      0,
      0,
      1,
      0,
      false,
      true,
      true,
      0,
      0,
      0,
      0,
      "no engine named: Hugging Face's one-pass prefill for memory, vLLM's decode for speed"};
  static const ServingEngineTraits kVllm{
      8192,
      0.90,
      1,
      0,
      false,
      true,
      true,
      0,
      0,
      0,
      0,
      "vLLM: max_num_batched_tokens 8192 (chunked prefill), gpu_memory_utilization 0.9; the "
      "decode factors of fit/rates.h are calibrated on its runs"};
  static const ServingEngineTraits kSglang{
      8192,
      0.88,
      1,
      0,
      false,
      true,
      true,
      0,
      0,
      0,
      0,
      "SGLang: chunked_prefill_size 8192, mem_fraction_static ~0.88; decode as vLLM (paged "
      "attention, CUDA graphs)"};
  static const ServingEngineTraits kTensorRt{
      8192,
      0.90,
      1,
      0,
      false,
      true,
      true,
      0,
      0,
      0,
      0.75,
      "TensorRT-LLM: max_num_tokens 8192, kv_cache free_gpu_memory_fraction 0.9; decode as "
      "vLLM (not calibrated on its own runs); its fused attention takes FlashAttention-2's "
      "Ampere share on Hopper too"};
  // llama.cpp: one decode step per token with CUDA graphs; its F16 and Q4_K matrix-vector
  // kernels read the weights at a higher share of the bandwidth than vLLM's Marlin/GPTQ path on
  // consumer cards (RTX 4090, Llama 3 8B: F16 54.3 tok/s = 0.87 of 1008 GB/s; Q4_K_M 127.7 tok/s
  // = 0.62) but reach no more than a ceiling on data-centre cards (A100 SXM: F16 53.2 tok/s,
  // 0.85 TB/s of 2.04; Q4_K_M 133.4 tok/s), calibration rows of docs/sizing-model.md §6.
  static const ServingEngineTraits kLlamaCpp{
      512,
      0,
      1.30,
      0,
      false,
      false,
      false,
      0.84,
      860,
      770,
      0,
      "llama.cpp: n_ubatch 512, KV allocated for the context asked, layers split card after "
      "card; decode factors calibrated on its RTX 4090 and A100 Llama 3 8B F16 and Q4_K_M runs"};
  // transformers generate, eager: Python launches each layer's kernels one after another, about
  // 0.8 ms per decoder layer per step on an A100 host (Qwen2.5-7B, 28 layers: 40.4 tok/s where
  // the weights alone allow 90), and the dynamic cache is concatenated every step. That cache
  // traffic moves at 0.53 of the rate the weights are read: set on Qwen2.5-7B's transformers run
  // at a 14,336-token prompt (29.78 tok/s: 32.9 ms a step where 11.1 ms of weights and 11.6 ms of
  // cache traffic at the vLLM share account for 22.7), moved from the evaluation to the
  // calibration for it (docs/sizing-model.md §6).
  static const ServingEngineTraits kTransformers{
      0,
      0,
      1,
      0.80e-3,
      true,
      false,
      false,
      0,
      0,
      0,
      0,
      "Hugging Face transformers generate: the whole prompt in one forward pass, a static batch, "
      "eager Python (host time per layer calibrated on Qwen2.5-7B's transformers run, prompt 1; "
      "the dynamic cache's copies at 0.53 of the decode bandwidth, on its 14,336-token run)",
      0.53};
  switch (engine) {
    case ServingEngine::kUnspecified:
      return kUnspecified;
    case ServingEngine::kVllm:
      return kVllm;
    case ServingEngine::kSglang:
      return kSglang;
    case ServingEngine::kTensorRtLlm:
      return kTensorRt;
    case ServingEngine::kLlamaCpp:
      return kLlamaCpp;
    case ServingEngine::kTransformers:
      return kTransformers;
  }
  return kUnspecified;
}

double KvTrafficFactor(ServingEngine engine, int heads, int kv_heads) {
  if (!TraitsOf(engine).expands_kv_per_step || kv_heads <= 0) return 1;
  const double group = static_cast<double>(std::max(heads, kv_heads)) / kv_heads;
  return 4 + 2 * group;
}

}  // namespace gpuhub::sizing
