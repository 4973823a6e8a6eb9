#include "sizing/estimate.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/strings.h"
#include "sizing/detailed.h"
#include "sizing/limits.h"
#include "sizing/parallel.h"

namespace gpuhub::sizing {

Result<Method> ParseMethod(std::string_view text) {
  if (text == "infer" || text == "inference") return Method::kInference;
  if (text == "full") return Method::kFullFineTune;
  if (text == "lora") return Method::kLora;
  if (text == "qlora") return Method::kQlora;
  return Status::InvalidArgument("unknown workload '" + std::string(text.substr(0, 40)) +
                                 "' (expected infer, full, lora or qlora)");
}

std::string_view MethodName(Method method) {
  switch (method) {
    case Method::kInference:
      return "infer";
    case Method::kFullFineTune:
      return "full";
    case Method::kLora:
      return "lora";
    case Method::kQlora:
      return "qlora";
  }
  return "?";
}

Result<Profile> ParseProfile(std::string_view text) {
  if (text == "guide") return Profile::kGuide;
  if (text == "detailed") return Profile::kDetailed;
  return Status::InvalidArgument("unknown profile '" + std::string(text.substr(0, 40)) +
                                 "' (expected guide or detailed)");
}

std::string_view ProfileName(Profile profile) {
  return profile == Profile::kGuide ? "guide" : "detailed";
}

Result<LoraTargets> ParseLoraTargets(std::string_view text) {
  if (text == "qv" || text == "q,v") return LoraTargets::kQv;
  if (text == "attn" || text == "attention") return LoraTargets::kAttention;
  if (text == "mlp") return LoraTargets::kMlp;
  if (text == "all-linear" || text == "all_linear" || text == "all") return LoraTargets::kAllLinear;
  return Status::InvalidArgument("unknown LoRA targets '" + std::string(text.substr(0, 40)) +
                                 "' (expected qv, attn, mlp or all-linear)");
}

std::string_view LoraTargetsName(LoraTargets targets) {
  switch (targets) {
    case LoraTargets::kQv:
      return "qv";
    case LoraTargets::kAttention:
      return "attn";
    case LoraTargets::kMlp:
      return "mlp";
    case LoraTargets::kAllLinear:
      return "all-linear";
  }
  return "?";
}

Result<Optimizer> ParseOptimizer(std::string_view text) {
  if (text == "adamw" || text == "adam") return Optimizer::kAdamW;
  if (text == "adam8bit") return Optimizer::kAdam8bit;
  if (text == "sgd") return Optimizer::kSgdMomentum;
  if (text == "adafactor") return Optimizer::kAdafactor;
  return Status::InvalidArgument("unknown optimizer '" + std::string(text.substr(0, 40)) +
                                 "' (expected adamw, adam8bit, sgd or adafactor)");
}

std::string_view OptimizerName(Optimizer optimizer) {
  switch (optimizer) {
    case Optimizer::kAdamW:
      return "adamw";
    case Optimizer::kAdam8bit:
      return "adam8bit";
    case Optimizer::kSgdMomentum:
      return "sgd";
    case Optimizer::kAdafactor:
      return "adafactor";
  }
  return "?";
}

Status ValidateWorkload(const Workload& w) {
  auto bad = [](std::string m) { return Status::InvalidArgument(std::move(m)); };
  if (w.context_tokens < 1 || w.context_tokens > kMaxContextTokens) {
    return bad("context must be between 1 and " + std::to_string(kMaxContextTokens) +
               " tokens, got " + std::to_string(w.context_tokens))
        .WithField("context");
  }
  if (w.prefill_chunk_tokens < 0 || w.prefill_chunk_tokens > kMaxContextTokens) {
    return bad("prefill chunk must be between 1 and " + std::to_string(kMaxContextTokens) +
               " tokens (0: the whole prompt), got " + std::to_string(w.prefill_chunk_tokens))
        .WithField("prefill_chunk");
  }
  if (w.gradient_accumulation_steps < 1 || w.gradient_accumulation_steps > kMaxGradAccumSteps) {
    return bad("gradient accumulation must be between 1 and " +
               std::to_string(kMaxGradAccumSteps) + " micro-batches per step, got " +
               std::to_string(w.gradient_accumulation_steps))
        .WithField("grad_accum");
  }
  if (w.batch < 1 || w.batch > kMaxBatch) {
    return bad("batch must be between 1 and " + std::to_string(kMaxBatch) + ", got " +
               std::to_string(w.batch))
        .WithField("batch");
  }
  if (w.sequence_tokens < 1 || w.sequence_tokens > kMaxSequenceTokens) {
    return bad("sequence length must be between 1 and " + std::to_string(kMaxSequenceTokens) +
               " tokens, got " + std::to_string(w.sequence_tokens))
        .WithField("seq");
  }
  if (w.lora_rank < 1 || w.lora_rank > kMaxLoraRank) {
    return bad("LoRA rank must be between 1 and " + std::to_string(kMaxLoraRank) + ", got " +
               std::to_string(w.lora_rank))
        .WithField("rank");
  }
  if (w.gpus < 1 || w.gpus > kMaxGpus) {
    return bad("GPU count must be between 1 and " + std::to_string(kMaxGpus) + ", got " +
               std::to_string(w.gpus))
        .WithField("gpus");
  }
  if (w.zero_stage < 0 || w.zero_stage > 3) {
    return bad("ZeRO stage must be 0, 1, 2 or 3, got " + std::to_string(w.zero_stage))
        .WithField("zero");
  }
  if (w.kv_precision != Precision::kFp16 && w.kv_precision != Precision::kBf16 &&
      w.kv_precision != Precision::kFp8) {
    return bad("KV cache precision must be fp16 or fp8, got " +
               std::string(PrecisionName(w.kv_precision)))
        .WithField("kv_precision");
  }
  if (w.method == Method::kFullFineTune) {
    if (w.precision != Precision::kBf16 && w.precision != Precision::kFp16 &&
        w.precision != Precision::kFp32) {
      return bad("full fine-tuning trains in bf16, fp16 or fp32 (mixed precision), not " +
                 std::string(PrecisionName(w.precision)))
          .WithField("precision");
    }
  } else {
    if (w.zero_stage != 0 && w.method == Method::kInference) {
      return bad("ZeRO stages apply to training only").WithField("zero");
    }
    if (w.zero_stage != 0 && w.zero_stage != 3) {
      return bad("LoRA/QLoRA across GPUs: ZeRO stage 3 (FSDP) shards the frozen base, stage 0 "
                 "splits the layers; stages 1 and 2 do not apply")
          .WithField("zero");
    }
    if (w.offload_optimizer && w.method == Method::kInference) {
      return bad("optimizer offload applies to training only");
    }
  }
  if (w.offload_activations && w.method == Method::kInference) {
    return bad("activation offload applies to training only");
  }
  if (w.offload_params && (w.method == Method::kInference || w.zero_stage != 3)) {
    return bad("parameter offload needs training with ZeRO stage 3 / FSDP (--zero 3)")
        .WithField("offload_params");
  }
  if (w.optimizer_in_backward &&
      (w.method != Method::kFullFineTune || w.gradient_accumulation_steps != 1 ||
       w.offload_optimizer)) {
    return bad("the optimizer step fused into backward needs full fine-tuning with one "
               "micro-batch per step (--grad-accum 1) and the optimizer on the GPU")
        .WithField("optimizer_in_backward");
  }
  if (w.method == Method::kLora &&
      (w.precision == Precision::kInt4 || w.precision == Precision::kNf4 ||
       w.precision == Precision::kFp4)) {
    return bad("LoRA on a 4-bit base is QLoRA: use --workload qlora");
  }
  const bool training = w.method != Method::kInference;
  if (w.selective_recompute && !training) {
    return bad("selective recompute applies to training").WithField("recompute");
  }
  if (w.selective_recompute && w.gradient_checkpointing) {
    return bad("selective recompute replaces full gradient checkpointing: choose one "
               "(--recompute full, selective or none)")
        .WithField("recompute");
  }
  if (w.fp8_training && !training) {
    return bad("FP8 training applies to training; serving in FP8 is --precision fp8")
        .WithField("fp8_training");
  }
  if (w.fp8_training && w.method == Method::kFullFineTune && w.precision == Precision::kFp32) {
    return bad("FP8 training keeps bf16 weights beside its FP8 matmuls: drop --precision fp32")
        .WithField("fp8_training");
  }
  if (w.megatron && !training) {
    return bad("the Megatron stack applies to training; serving names an --engine")
        .WithField("stack");
  }
  if (w.engine != ServingEngine::kUnspecified && training) {
    return bad("a serving engine applies to inference").WithField("engine");
  }
  return ValidateLayout(w);
}

std::string FormatCount(double count) {
  if (count <= 0) return "0";
  int exponent = static_cast<int>(std::floor(std::log10(count)));
  exponent -= exponent % 3;  // engineering notation: e3, e6, e9, e12
  if (exponent < 3) return FormatFixed(count, 0);
  double mantissa = count / std::pow(10.0, exponent);
  // std::to_chars with a precision is printf's "%.3g" (the standard defines it so) without
  // printf's format parsing and locale (it was most of this function's cost in every fit).
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, mantissa, std::chars_format::general, 3);
  if (ec != std::errc()) end = buf + std::snprintf(buf, sizeof buf, "%.3g", mantissa);
  std::string out(buf, end);
  out += 'e';
  out += std::to_string(exponent);
  return out;
}

std::string FormatGb(double bytes) { return FormatFixed(bytes / kBytesPerGb, 2) + " GB"; }

double KvCacheBytes(const ModelShape& m, Precision kv_precision, std::int64_t context_tokens,
                    std::int64_t batch) {
  double per_token_per_layer = m.kv_elements_per_token_per_layer * BytesPerParam(kv_precision);
  double full_layers = m.layers - m.sliding_window_layers;
  double window_tokens =
      m.sliding_window > 0
          ? static_cast<double>(std::min<std::int64_t>(context_tokens, m.sliding_window))
          : static_cast<double>(context_tokens);
  double token_layers =
      full_layers * static_cast<double>(context_tokens) + m.sliding_window_layers * window_tokens;
  return per_token_per_layer * token_layers * static_cast<double>(batch);
}

double DecodeCeilingTokensPerSecond(double bandwidth_gb_per_s, const MemoryEstimate& e) {
  if (e.method != Method::kInference || e.decode_weight_bytes <= 0) return 0;
  return bandwidth_gb_per_s * kBytesPerGb / e.decode_weight_bytes;
}

namespace {

constexpr double kRuntimeOverheadBytes = 2e9;       // spec §1: per GPU process
constexpr double kGuideActivationAllowance = 0.15;  // spec §2: the quick rule
constexpr double kGuideAdapterFraction = 0.005;     // spec §2: rank-16 adapters ≈ 0.5% of params
constexpr int kGuideAdapterRank = 16;
constexpr double kAdapterBytesPerParam = 16;  // weights + grads + master + Adam, spec §2

std::string KvFormula(const ModelShape& m, const Workload& w, double bytes) {
  // Appended piece by piece into one string (chains of operator+ made a temporary per piece).
  std::string f;
  f.reserve(160);
  if (m.kv_lora_rank > 0) {
    // MLA caches one compressed latent (K and V together) plus the decoupled rope key.
    f += std::to_string(m.layers);
    f += " layers x (kv_lora_rank ";
    f += std::to_string(m.kv_lora_rank);
    f += " + rope ";
    f += std::to_string(m.qk_rope_head_dim);
    f += ") latent";
  } else {
    f += "2 x ";
    f += std::to_string(m.layers);
    f += " layers x ";
    if (m.kv_elements_per_token_per_layer == 2.0 * m.kv_heads * m.head_dim) {
      f += std::to_string(m.kv_heads);
      f += " kv heads x ";
      f += std::to_string(m.head_dim);
      f += " head_dim";
    } else {
      f += FormatFixed(m.kv_elements_per_token_per_layer / 2, 0);
      f += " elements";
    }
  }
  f += " x ";
  f += FormatFixed(BytesPerParam(w.kv_precision), 0);
  f += " B (";
  f += PrecisionName(w.kv_precision);
  f += ") x ";
  f += std::to_string(w.context_tokens);
  f += " tokens x batch ";
  f += std::to_string(w.batch);
  if (m.sliding_window_layers > 0) {
    f += " (";
    f += std::to_string(m.sliding_window_layers);
    f += " sliding-window layers keep at most ";
    f += std::to_string(m.sliding_window);
    f += " tokens)";
  }
  f += " = ";
  f += FormatGb(bytes);
  return f;
}

// Divides a whole-model figure over `gpus` cards and says so in the formula.
Component Split(std::string name, double bytes, std::string formula, int gpus) {
  if (gpus <= 1) return {std::move(name), bytes, std::move(formula)};
  double per = bytes / gpus;
  return {std::move(name), per,
          formula + ", / " + std::to_string(gpus) + " GPUs = " + FormatGb(per)};
}

MemoryEstimate GuideInference(const ModelShape& m, const Workload& w, MemoryEstimate e) {
  double bpp = BytesPerParam(w.precision);
  double weights = m.total_params * bpp;
  std::string weights_formula = FormatCount(m.total_params) + " params x " + FormatFixed(bpp, 1) +
                                " B/param (" + std::string(PrecisionName(w.precision)) +
                                ") = " + FormatGb(weights);
  // Each card of a tensor/pipeline split holds its share; data-parallel replicas hold it each.
  const int shards = LayoutOf(w).model_shards();
  e.components.push_back(Split("weights", weights, weights_formula, shards));
  double kv = KvCacheBytes(m, w.kv_precision, w.context_tokens, w.batch);
  e.components.push_back(Split("kv_cache", kv, KvFormula(m, w, kv), shards));
  e.components.push_back({"runtime_overhead", kRuntimeOverheadBytes,
                          "2 GB per GPU process (CUDA/ROCm context, framework, allocator)"});
  e.decode_weight_bytes = m.active_params * bpp;
  if (m.is_moe()) {
    e.notes.push_back(
        "MoE: every expert is resident (memory uses total params); decoding reads "
        "the active params only");
  }
  return e;
}

Component Adapters(const ModelShape& m, const Workload& w, int gpus) {
  double adapter_params = m.total_params * kGuideAdapterFraction * w.lora_rank / kGuideAdapterRank;
  double bytes = adapter_params * kAdapterBytesPerParam;
  std::string formula =
      FormatCount(m.total_params) + " params x 0.5% x rank " + std::to_string(w.lora_rank) +
      "/16 = " + FormatCount(adapter_params) +
      " adapter params x 16 B (weights, grads, fp32 master, Adam) = " + FormatGb(bytes);
  return Split("lora_adapters", bytes, formula, gpus);
}

MemoryEstimate GuideTraining(const ModelShape& m, const Workload& w, MemoryEstimate e) {
  const std::string params = FormatCount(m.total_params);
  if (w.method == Method::kFullFineTune) {
    // ZeRO-3 shards all three; stage 2 gradients + optimizer; stage 1 optimizer only.
    const Layout l = LayoutOf(w);
    const int mp = l.model_shards();
    int shard_weights = mp * (w.zero_stage >= 3 ? l.zero_group() : 1);
    int shard_grads = mp * (w.zero_stage >= 2 ? l.zero_group() : 1);
    int shard_optimizer = mp * (w.zero_stage >= 1 ? l.zero_group() : 1);
    double weights = m.total_params * 2, grads = m.total_params * 2;
    double master = m.total_params * 4, adam = m.total_params * 8;
    e.components.push_back(Split(
        "weights", weights, params + " params x 2 B (bf16) = " + FormatGb(weights), shard_weights));
    e.components.push_back(Split(
        "gradients", grads, params + " params x 2 B (bf16) = " + FormatGb(grads), shard_grads));
    Component master_c =
        Split("master_weights", master,
              params + " params x 4 B (fp32 master copy) = " + FormatGb(master), shard_optimizer);
    Component adam_c =
        Split("optimizer_state", adam,
              params + " params x 8 B (Adam m and v, fp32) = " + FormatGb(adam), shard_optimizer);
    if (w.offload_optimizer) {
      e.host_bytes = master + adam;
      master_c.formula += " -> offloaded to host memory";
      adam_c.formula += " -> offloaded to host memory";
      master_c.bytes = 0;
      adam_c.bytes = 0;
    }
    e.components.push_back(master_c);
    e.components.push_back(adam_c);
    double state = 0;
    for (const auto& c : e.components) state += c.bytes;
    double allowance = state * kGuideActivationAllowance;
    e.components.push_back({"activation_allowance", allowance,
                            "15% of " + FormatGb(state) +
                                " (guide quick rule: activations with gradient checkpointing, "
                                "fragmentation) = " +
                                FormatGb(allowance)});
    e.notes.push_back("guide quick rule: 16 B/param for weights, gradients and Adam state, +15%");
    return e;
  }
  Precision base = w.method == Method::kQlora ? Precision::kNf4 : w.precision;
  double bpp = BytesPerParam(base);
  double weights = m.total_params * bpp;
  const Layout l = LayoutOf(w);
  const int shard = l.model_shards() * (l.fsdp_base ? l.zero_group() : 1);
  e.components.push_back(Split("base_weights", weights,
                               params + " params x " + FormatFixed(bpp, 1) + " B/param (" +
                                   std::string(PrecisionName(base)) +
                                   ", frozen) = " + FormatGb(weights),
                               shard));
  e.components.push_back(Adapters(m, w, shard));
  // Activations at the guide's assumptions, from the shapes (sequence and batch as asked: they
  // grow on top of the published 2048 x 1).
  GuideActivations act = GuideAdapterActivations(m, w);
  e.components.push_back({"activations", act.bytes(), act.formula});
  e.components.push_back({"runtime_overhead", kRuntimeOverheadBytes,
                          "2 GB per GPU process (CUDA/ROCm context, framework, allocator)"});
  e.notes.push_back(
      "guide assumptions: gradient checkpointing on, sequence 2048, batch 1, "
      "rank-16 adapters on the attention projections at about 0.5% of params; activations "
      "(checkpoints, one layer recomputed, logits) from the shapes grow with sequence and batch");
  return e;
}

}  // namespace

Result<MemoryEstimate> EstimateMemory(const ModelShape& model, const Workload& workload) {
  GPUHUB_RETURN_IF_ERROR(ValidateShape(model));
  GPUHUB_RETURN_IF_ERROR(ValidateWorkload(workload));
  GPUHUB_RETURN_IF_ERROR(ValidateLayoutForModel(model, workload));
  MemoryEstimate e;
  e.components.reserve(8);  // room for what the profiles list (3 to about 8): no moves while adding
  e.model_id = model.id;
  e.method = workload.method;
  e.profile = workload.profile.value_or(model.nominal ? Profile::kGuide : Profile::kDetailed);
  e.gpus = workload.gpus;
  if (e.profile == Profile::kDetailed) {
    auto detailed = DetailedEstimate(model, workload, std::move(e));
    if (!detailed.ok()) return detailed.status();
    e = std::move(*detailed);
  } else if (workload.method == Method::kInference) {
    e = GuideInference(model, workload, std::move(e));
  } else {
    e = GuideTraining(model, workload, std::move(e));
  }
  e.per_gpu_bytes = 0;
  for (const auto& c : e.components) e.per_gpu_bytes += c.bytes;
  e.total_bytes = e.per_gpu_bytes * e.gpus;
  return e;
}

}  // namespace gpuhub::sizing
