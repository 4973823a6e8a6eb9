#include "sizing/detailed.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/strings.h"
#include "sizing/detailed_internal.h"
#include "sizing/parallel.h"

namespace gpuhub::sizing {
namespace detailed_internal {

// Presets carry nominal counts only: give them a Llama-style inventory (vocab 32000, untied) whose
// MLP width makes the total come out at the nominal count, so the detailed formulas apply.
ModelShape WithInventory(const ModelShape& m) {
  if (!m.linears.empty() || m.hidden <= 0) return m;
  ModelShape s = m;
  const double h = m.hidden, layers = m.layers;
  const double q = static_cast<double>(m.heads) * m.head_dim,
               kv = static_cast<double>(m.kv_heads) * m.head_dim;
  s.vocab = s.vocab > 0 ? s.vocab : 32000;
  s.embedding_params = static_cast<double>(s.vocab) * h;
  s.lm_head_params = s.embedding_params;
  s.norm_params = (2 * layers + 1) * h;
  double attention = layers * (2 * h * q + 2 * h * kv);
  double mlp = m.total_params - s.embedding_params - s.lm_head_params - s.norm_params - attention;
  double inter = std::max(1.0, mlp / (3 * h * layers));
  s.intermediate = static_cast<int>(inter);
  auto add = [&](const char* name, LinearKind kind, double in, double out) {
    s.linears.push_back({name, kind, static_cast<std::int64_t>(in), static_cast<std::int64_t>(out),
                         static_cast<std::int64_t>(layers), false});
  };
  add("q_proj", LinearKind::kAttention, h, q);
  add("k_proj", LinearKind::kAttention, h, kv);
  add("v_proj", LinearKind::kAttention, h, kv);
  add("o_proj", LinearKind::kAttention, q, h);
  add("gate_proj", LinearKind::kMlp, h, inter);
  add("up_proj", LinearKind::kMlp, h, inter);
  add("down_proj", LinearKind::kMlp, inter, h);
  // Integer MLP width: the remainder goes to other_params so the nominal total is kept exactly.
  double counted = s.embedding_params + s.lm_head_params + s.norm_params + LinearWeightParams(s);
  s.other_params = std::max(0.0, m.total_params - counted);
  s.notes.push_back(std::string(m.nominal ? "preset" : "no per-layer inventory") +
                    ": Llama-style shapes assumed (vocab 32000, MLP width " +
                    std::to_string(s.intermediate) + ")");
  return s;
}

Widths WidthsOf(const ModelShape& m) {
  Widths w;
  w.h = m.hidden;
  if (m.kv_lora_rank > 0) {
    w.q = static_cast<double>(m.heads) * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    w.k = w.q;
    w.v = static_cast<double>(m.heads) * m.v_head_dim;
  } else {
    w.q = static_cast<double>(m.heads) * m.head_dim;
    w.k = w.v = static_cast<double>(m.kv_heads) * m.head_dim;
  }
  double layers = std::max(1, m.layers);
  double moe = std::clamp<double>(m.moe_layers, 0, layers);
  double shared = 0;
  for (const auto& l : m.linears) {
    if (l.kind == LinearKind::kSharedExpert && l.name.find("down") != std::string::npos) {
      shared = static_cast<double>(l.in_features);
    }
  }
  double per_token_moe = static_cast<double>(m.experts_per_token) * m.moe_intermediate + shared;
  w.mlp = ((layers - moe) * m.intermediate + moe * per_token_moe) / layers;
  w.moe_layers = moe / layers;
  return w;
}

bool Targeted(const LinearModule& l, LoraTargets targets) {
  if (l.kind == LinearKind::kRouter) return false;
  const std::string& n = l.name;
  switch (targets) {
    case LoraTargets::kQv:
      return n == "q_proj" || n == "v_proj" || n == "qkv_proj" || n == "q_b_proj" ||
             n == "kv_b_proj";
    case LoraTargets::kAttention:
      return l.kind == LinearKind::kAttention;
    case LoraTargets::kMlp:
      return l.kind == LinearKind::kMlp || l.kind == LinearKind::kExpert ||
             l.kind == LinearKind::kSharedExpert;
    case LoraTargets::kAllLinear:
      return true;
  }
  return false;
}

double WeightBytesPerParam(Precision p) { return BytesPerParam(p); }

// Bytes of quantization constants per quantized weight.
double QuantConstantBytesPerParam(Precision p, bool double_quant) {
  switch (p) {
    case Precision::kNf4:
      // One fp32 absmax per 64 weights; double quantization stores it in 8 bits plus one fp32 per
      // 256 blocks (QLoRA paper §2: 0.5 -> 0.127 bits per parameter).
      return double_quant ? 1.0 / kNf4BlockSize + 4.0 / (kNf4BlockSize * kDoubleQuantBlockSize)
                          : 4.0 / kNf4BlockSize;
    case Precision::kInt4:
      return (2.0 + 0.5) / kInt4GroupSize;  // fp16 scale + packed 4-bit zero per group of 128
    case Precision::kFp4:
      // NVFP4: one FP8 (E4M3) scale per 16 values (NVIDIA's ModelOpt checkpoints; the per-tensor
      // FP32 scale is negligible).
      return 1.0 / kFp4BlockSize;
    default:
      return 0;
  }
}

std::optional<Precision> CheckpointPrecision(const CheckpointSummary& c) {
  if (c.by_dtype.empty()) return std::nullopt;
  const std::string& d = c.by_dtype.front().dtype;
  if (d == "BF16") return Precision::kBf16;
  if (d == "F16") return Precision::kFp16;
  if (d == "F32") return Precision::kFp32;
  if (d.rfind("F8_", 0) == 0) return Precision::kFp8;
  if (d == "I8" || d == "Q8_0") return Precision::kInt8;
  if (d.find("int4") != std::string::npos || d.find("mxfp4") != std::string::npos ||
      d.find("nf4") != std::string::npos || d.rfind("Q4", 0) == 0 || d.rfind("IQ4", 0) == 0) {
    return Precision::kInt4;
  }
  return std::nullopt;
}

// Resident weights at `precision`: decoder linears at the quantized width (with their constants),
// everything else (embeddings, lm_head, norms, vision tower) in 16 bits, as GPTQ/AWQ/bitsandbytes/
// FP8 checkpoints keep them.
WeightPart Weights(const ModelShape& m, Precision precision, bool double_quant) {
  WeightPart w;
  double bpp = WeightBytesPerParam(precision);
  if (precision == Precision::kBf16 || precision == Precision::kFp16 ||
      precision == Precision::kFp32) {
    w.bytes = m.total_params * bpp;
    w.formula = Num(m.total_params) + " params x " + B(bpp) + " (" +
                std::string(PrecisionName(precision)) + ") = " + Gb(w.bytes);
    return w;
  }
  double linear = LinearWeightParams(m);
  double rest = m.total_params - linear;
  double constants = QuantConstantBytesPerParam(precision, double_quant);
  w.bytes = linear * (bpp + constants) + rest * 2;
  w.formula = Num(linear) + " linear params x " + B(bpp) + " (" +
              std::string(PrecisionName(precision)) + ")" +
              (constants > 0 ? " + " + B(constants) + " quantization constants" : "") + ", " +
              Num(rest) + " embedding/norm/other params x 2 B (kept in 16 bits) = " + Gb(w.bytes);
  return w;
}

std::string CheckpointFormula(const CheckpointSummary& c) {
  std::string f = "checkpoint tensors as stored (" + c.format;
  if (!c.quantization.empty()) f += ", " + c.quantization;
  f += "): ";
  int shown = 0;
  for (const auto& d : c.by_dtype) {
    if (shown++ == 4) {
      f += ", ...";
      break;
    }
    f += (shown > 1 ? ", " : "") + d.dtype + " " + Gb(d.bytes);
  }
  return f + " = " + Gb(c.bytes);
}

Component Split(std::string name, double bytes, std::string formula, int gpus) {
  if (gpus <= 1) return {std::move(name), bytes, std::move(formula)};
  double per = bytes / gpus;
  return {std::move(name), per, formula + ", / " + std::to_string(gpus) + " GPUs = " + Gb(per)};
}

std::string KvFormula(const ModelShape& m, const Workload& w, double bytes) {
  std::string f;
  if (m.kv_lora_rank > 0) {
    f = std::to_string(m.layers) + " layers x (kv_lora_rank " + std::to_string(m.kv_lora_rank) +
        " + rope " + std::to_string(m.qk_rope_head_dim) + ") latent";
  } else {
    f = "2 x " + std::to_string(m.layers) + " layers x " + std::to_string(m.kv_heads) +
        " kv heads x " + std::to_string(m.head_dim) + " head_dim";
  }
  f += " x " + B(BytesPerParam(w.kv_precision)) + " (" +
       std::string(PrecisionName(w.kv_precision)) + ") x " + std::to_string(w.context_tokens) +
       " tokens x batch " + std::to_string(w.batch);
  if (m.sliding_window_layers > 0) {
    f += " (" + std::to_string(m.sliding_window_layers) + " sliding-window layers keep at most " +
         std::to_string(m.sliding_window) + " tokens)";
  }
  return f + " = " + Gb(bytes);
}

double LargestLinearParams(const ModelShape& m) {
  double best = 0;
  for (const auto& l : m.linears) {
    best = std::max(best, static_cast<double>(l.in_features) * static_cast<double>(l.out_features));
  }
  return best;
}

OptimizerPart OptimizerState(Optimizer o, double params, double factored_bytes, bool bf16_states) {
  OptimizerPart p;
  const double state = bf16_states ? 2 : 4;
  const std::string dtype = bf16_states ? "bf16" : "fp32";
  switch (o) {
    case Optimizer::kAdamW:
      p.bytes = params * 2 * state;
      p.formula =
          Num(params) + " trainable params x " + B(2 * state) + " (AdamW m and v, " + dtype + ")";
      break;
    case Optimizer::kAdam8bit:
      // bitsandbytes 8-bit Adam: two uint8 states + one fp32 absmax per 2048-value block each.
      p.bytes = params * (2 + 2 * 4.0 / 2048);
      p.formula =
          Num(params) + " trainable params x 2.004 B (8-bit Adam: 2 uint8 states + block absmax)";
      break;
    case Optimizer::kSgdMomentum:
      p.bytes = params * state;
      p.formula =
          Num(params) + " trainable params x " + B(state) + " (SGD momentum buffer, " + dtype + ")";
      break;
    case Optimizer::kAdafactor:
      p.bytes = factored_bytes * state / 4;
      p.formula =
          "Adafactor factored second moment (row + column statistics per matrix, fp32; "
          "no first moment)";
      break;
  }
  p.formula += " = " + Gb(p.bytes);
  return p;
}

double AdafactorBytes(const ModelShape& m, double lora_rank, LoraTargets targets,
                      bool adapters_only) {
  double bytes = 0;
  if (adapters_only) {
    for (const auto& l : m.linears) {
      if (!Targeted(l, targets)) continue;
      // A: rank x in, B: out x rank
      bytes += 4.0 * l.count * ((lora_rank + l.in_features) + (l.out_features + lora_rank));
    }
    return bytes;
  }
  for (const auto& l : m.linears) {
    bytes += 4.0 * l.count * (l.in_features + l.out_features);
    if (l.bias) bytes += 4.0 * l.count * l.out_features;
  }
  bytes += 4.0 * (m.vocab + m.hidden) * (m.lm_head_params > 0 ? 2 : 1);
  bytes += 4.0 * (m.norm_params + m.other_params + m.vision_params);
  return bytes;
}

// Transformers before 4.45 gave every attention layer its own rotary embedding with cos and sin
// caches for max_position_embeddings positions, in the model's dtype (bf16): 2 x positions x
// head_dim x 2 B per layer, on the GPU that holds the layer.
void AddRotaryCaches(const ModelShape& m, const Workload& w, int layer_split, MemoryEstimate& e) {
  // MLA (DeepSeek) rotates only the rope part of each head.
  const int rotary_dim = m.qk_rope_head_dim > 0 ? m.qk_rope_head_dim : m.head_dim;
  if (!w.old_transformers || m.max_context <= 0 || rotary_dim <= 0) return;
  const double per_layer = 2.0 * static_cast<double>(m.max_context) * rotary_dim * 2;
  const double bytes = per_layer * m.layers / std::max(1, layer_split);
  e.components.push_back(
      {"rotary_caches", bytes,
       std::to_string(m.layers) + " layers x cos + sin x " + std::to_string(m.max_context) +
           " positions (max_position_embeddings) x rotary dim " + std::to_string(rotary_dim) +
           " x 2 B (each layer's rotary cache, transformers before 4.45)" +
           (layer_split > 1 ? " / " + std::to_string(layer_split) + " GPUs" : "") + " = " +
           Gb(bytes)});
}

// Inference: weights, KV cache and the prefill's working set; returns the transient bytes.
double AddInferenceParts(const ModelShape& m, const Workload& w, bool from_checkpoint,
                         MemoryEstimate& e) {
  double transient = 0;
  WeightPart weights = Weights(m, w.precision, w.double_quant);
  if (from_checkpoint) {
    weights = {m.checkpoint->bytes, CheckpointFormula(*m.checkpoint)};
  }
  // Tensor parallel splits every layer's weights; pipeline stages (and a layer split) hold
  // their layers; data-parallel replicas each hold a whole copy.
  const Layout layout = LayoutOf(w);
  const int shards = layout.model_shards();
  e.components.push_back(Split("weights", weights.bytes, weights.formula, shards));
  double kv = KvCacheBytes(m, w.kv_precision, w.context_tokens, w.batch);
  // Tensor parallel splits the KV heads; beyond the model's KV heads they are replicated (MLA's
  // latent is replicated on every tensor-parallel rank).
  const int kv_tensor = m.kv_lora_rank > 0 ? 1 : std::min(layout.tensor, std::max(1, m.kv_heads));
  Component kvc = Split("kv_cache", kv, KvFormula(m, w, kv), layout.pipeline * kv_tensor);
  if (kv_tensor < layout.tensor) {
    kvc.formula += " (" + std::to_string(layout.tensor) + "-way tensor parallel over " +
                   (m.kv_lora_rank > 0 ? std::string("MLA's shared latent")
                                       : std::to_string(m.kv_heads) + " KV heads") +
                   ": the rest replicated)";
  }
  e.components.push_back(std::move(kvc));
  // Prefill runs the whole prompt (every sequence of the batch) through one layer at a time:
  // that layer's activations are the working set (hidden in/out, q/k/v, attention output,
  // gate/up/SiLU). PyTorch engines (Hugging Face generate, LitGPT) prefill in one forward pass;
  // only the last position's logits are computed. Each GPU of a layer split runs its own layers,
  // so every card holds this working set at its peak. Serving engines prefill in chunks of
  // their own size (ServingEngineTraits) unless --prefill-chunk says otherwise.
  Widths x = WidthsOf(m);
  const double prompt_tokens = static_cast<double>(w.context_tokens) * static_cast<double>(w.batch);
  const std::int64_t chunk_asked =
      w.prefill_chunk_tokens > 0 ? w.prefill_chunk_tokens : TraitsOf(w.engine).prefill_chunk_tokens;
  const bool chunked = chunk_asked > 0 && static_cast<double>(chunk_asked) < prompt_tokens;
  const double tokens = chunked ? static_cast<double>(chunk_asked) : prompt_tokens;
  // A gated MLP (SwiGLU) holds gate, up and their product; a plain one its input and output.
  const double mlp_working = (m.gated_mlp ? 6 : 4) * x.mlp;
  // Tensor parallel splits the heads and the MLP width; the hidden state is whole on each rank.
  const double split_part = (2 * (x.q + x.k + x.v) + 2 * x.q + mlp_working) / layout.tensor;
  double per_token = 4 * x.h + split_part;
  const std::string working_text =
      FormatFixed(tokens, 0) +
      (chunked ? " prompt tokens per prefill chunk" +
                     (w.prefill_chunk_tokens > 0
                          ? std::string()
                          : " (" + std::string(ServingEngineName(w.engine)) + "'s)") +
                     " x "
               : " prompt tokens in one forward pass (context x batch) x ") +
      FormatFixed(per_token, 0) + " B per token for one layer's working set" +
      (layout.tensor > 1 ? " (its heads and MLP width / " + std::to_string(layout.tensor) +
                               " tensor-parallel ranks)"
                         : "");
  double prefill = 0;
  std::string prefill_text;
  if (w.old_transformers) {
    // Transformers before 4.45: lm_head runs on every prompt position and the forward upcasts
    // the result, so the bf16 logits and their fp32 copy are alive together once the layers'
    // working set is gone: the prefill peaks at the larger of the two.
    const double all_logits = tokens * m.vocab * 6;
    prefill = std::max(tokens * per_token, all_logits);
    prefill_text = "the larger of " + working_text + " (" + Gb(tokens * per_token) +
                   ") and the logits of every position of the step: " + FormatFixed(tokens, 0) +
                   " tokens x vocab " + std::to_string(m.vocab) +
                   " x 6 B (bf16 + the fp32 upcast, transformers before 4.45) (" + Gb(all_logits) +
                   ") = " + Gb(prefill);
  } else {
    double logits = static_cast<double>(w.batch) * m.vocab * 4 / layout.tensor;
    prefill = tokens * per_token + logits;
    prefill_text = working_text + " + batch x vocab x 4 B logits = " + Gb(prefill);
  }
  e.components.push_back({"prefill_activations", prefill, prefill_text});
  AddRotaryCaches(m, w, layout.pipeline, e);
  transient += prefill;
  e.decode_weight_bytes =
      from_checkpoint ? m.checkpoint->bytes * (m.active_params / std::max(1.0, m.total_params))
                      : Weights(m, w.precision, w.double_quant).bytes *
                            (m.active_params / std::max(1.0, m.total_params));
  if (m.is_moe()) {
    e.notes.push_back(
        "MoE: every expert is resident (memory uses total params); decoding reads "
        "the active params only");
  }
  return transient;
}

}  // namespace detailed_internal

using namespace detailed_internal;  // NOLINT: the helpers shared with detailed_training.cc

ModelShape WithLlamaInventory(const ModelShape& model) { return WithInventory(model); }

double WeightBytesAt(const ModelShape& model, Precision precision, bool double_quant) {
  return Weights(WithInventory(model), precision, double_quant).bytes;
}

double LoraAdapterParams(const ModelShape& model_in, LoraTargets targets, int rank) {
  ModelShape m = WithInventory(model_in);
  double params = 0;
  for (const auto& l : m.linears) {
    if (!Targeted(l, targets)) continue;
    params += static_cast<double>(rank) * (l.in_features + l.out_features) * l.count;
  }
  return params;
}

double EagerAttentionBytesPerLayer(const ModelShape& m, std::int64_t sequence_tokens) {
  // Softmax in fp32 (kept for its backward) and its bf16 copy (kept by the matmul with V):
  // heads x s x s x (4 + 2) bytes per sequence.
  // Soft-capped scores (Gemma 2: tanh(scores / cap) x cap) also keep the tanh output (bf16).
  double s = static_cast<double>(sequence_tokens);
  return (m.attn_logit_softcapping > 0 ? 8.0 : 6.0) * m.heads * s * s;
}

double ActivationBytesPerTokenPerLayer(const ModelShape& model_in, const Workload& w) {
  ModelShape m = WithInventory(model_in);
  Widths x = WidthsOf(m);
  // Attention with FlashAttention/SDPA keeps q, k, v and the output (plus a per-head logsumexp).
  double attention = 2 * x.q + 2 * x.k + 2 * x.v + 2 * x.q + 4.0 * m.heads;
  double bytes = 0;
  if (w.selective_recompute) {
    // Selective (per-op) recomputation, as torchtitan's policy runs it: inside each layer only
    // the outputs of every other matmul and of the attention kernel (output and log-sum-exp) are
    // saved, beside the layer's input; everything else is recomputed from them in backward.
    const double matmul_outputs = x.q + x.k + x.v + x.h + (m.gated_mlp ? 2 : 1) * x.mlp + x.h;
    bytes = 2 * x.h + 0.5 * 2 * matmul_outputs + 2 * x.q + 4.0 * m.heads;
    bytes += x.moe_layers * 4.0 * m.experts;
    return bytes;
  }
  // FP8 training (Transformer Engine, torchao float8) saves each linear's input as the FP8 copy
  // its matmul read: 1 B per element instead of 2.
  const double linear_input = w.fp8_training ? 1 : 2;
  // Unfused (eager PyTorch, Hugging Face): RMSNorm upcasts to fp32 and keeps that copy (4h), plus
  // the normalized bf16 output when its weight trains (2h); SwiGLU keeps gate (for SiLU), the SiLU
  // output and up (for the product): 6i. Fused kernels keep the bf16 input (2h) and gate and up
  // (4i), recomputing the rest.
  const bool lean = w.fused_kernels;
  const double norm = lean ? 2 * x.h : (w.method == Method::kFullFineTune ? 6 : 4) * x.h;
  // A plain (non-gated) MLP keeps the activation function's input, and its output only as the
  // down projection's input (counted with the linears below).
  const double swiglu = m.gated_mlp ? (lean ? 4 : 6) * x.mlp : 2 * x.mlp;
  // Pre-attention and pre-MLP norms; Gemma 2/3 add a post-attention and a post-MLP norm.
  const double norms = std::max(2, m.norms_per_layer);
  if (w.method == Method::kFullFineTune) {
    // q/k/v, o, gate/up and down keep their inputs for the weight gradients (2h, 2q, 2h, 2i).
    bytes = norms * norm + attention + swiglu + linear_input * (x.h + x.q + x.h + x.mlp);
  } else {
    // Frozen base: linears keep nothing (no weight gradient); the norms and SwiGLU keep what the
    // gradient flowing back to earlier layers' adapters needs.
    bytes = norms * norm + attention + swiglu;
    // Adapters keep their input (with dropout: the dropped copy 2 B + its mask 1 B, per adapter;
    // without: the shared input tensor itself, counted once). bitsandbytes' 4-bit matmul also keeps
    // its input for the backward pass (MatMul4Bit ctx.tensors), so QLoRA keeps all four inputs.
    bool norm1_out = false, attn_out = false, norm2_out = false, mlp_product = false;
    double dropout_bytes = 0;
    int modules = 0;
    for (const auto& l : m.linears) {
      if (!Targeted(l, w.lora_targets) || l.kind == LinearKind::kExpert) continue;
      ++modules;
      const std::string& n = l.name;
      double width = x.h;
      bool* input = &norm1_out;
      if (n == "o_proj") {
        width = x.q;
        input = &attn_out;
      } else if (n.find("down") != std::string::npos) {
        width = x.mlp;
        input = &mlp_product;
      } else if (l.kind == LinearKind::kMlp || l.kind == LinearKind::kSharedExpert) {
        input = &norm2_out;
      }
      if (w.lora_dropout) {
        dropout_bytes += 3 * width;
      } else {
        *input = true;
      }
    }
    if (w.method == Method::kQlora) norm1_out = attn_out = norm2_out = mlp_product = true;
    bytes += (norm1_out ? 2 * x.h : 0) + (attn_out ? 2 * x.q : 0) + (norm2_out ? 2 * x.h : 0) +
             (mlp_product ? 2 * x.mlp : 0) + dropout_bytes;
    bytes += 2.0 * w.lora_rank * modules;  // each adapter's lora_A output, kept by lora_B
  }
  // MoE routers keep fp32 router probabilities.
  bytes += x.moe_layers * 4.0 * m.experts;
  return bytes;
}

GuideActivations GuideAdapterActivations(const ModelShape& model_in, const Workload& workload) {
  const ModelShape m = WithInventory(model_in);
  Workload w = workload;
  w.lora_targets = LoraTargets::kAttention;  // spec §2: adapters on the attention projections
  w.gradient_checkpointing = true;
  w.flash_attention = true;
  w.fused_kernels = false;
  w.chunked_loss = false;
  w.compiled_loss = false;
  w.lora_dropout = false;
  w.pure_bf16 = false;
  const Widths x = WidthsOf(m);
  const double tokens = static_cast<double>(w.batch) * static_cast<double>(w.sequence_tokens);
  const Layout layout = LayoutOf(w);
  const int split = layout.fsdp_base ? 1 : layout.model_shards();
  GuideActivations a;
  a.checkpoints_bytes = static_cast<double>(m.layers) * tokens * 2 * x.h / split;
  const double per_layer = ActivationBytesPerTokenPerLayer(m, w);
  const double temporaries = tokens * (4 * x.h + 2 * x.mlp);
  a.recompute_bytes = tokens * per_layer + temporaries;
  // bf16 logits (QLoRA: fp32, prepare_model_for_kbit_training upcasts lm_head) + the fp32
  // log-softmax, its gradient and the logits' gradient, alive together at the start of backward.
  const double per_logit = (w.method == Method::kQlora ? 4 : 2) + 12;
  a.logits_bytes = tokens * m.vocab * per_logit;
  const std::string tok = FormatFixed(tokens, 0) + " tokens (batch " + std::to_string(w.batch) +
                          " x seq " + std::to_string(w.sequence_tokens) + ")";
  a.formula =
      "gradient checkpointing: " + std::to_string(m.layers) + " layers x " + tok + " x " +
      FormatFixed(2 * x.h, 0) + " B (one bf16 hidden state per layer)" +
      (split > 1 ? " / " + std::to_string(split) + " GPUs" : "") + " = " + Gb(a.checkpoints_bytes) +
      " + one layer recomputed: " + tok + " x " + FormatFixed(per_layer, 0) +
      " B (Llama-style block, adapters on q/k/v/o) + backward temporaries " + Gb(temporaries) +
      " = " + Gb(a.recompute_bytes) + " + logits: " + tok + " x vocab " + std::to_string(m.vocab) +
      " x " + B(per_logit) + " (" + (w.method == Method::kQlora ? "fp32" : "bf16") +
      " logits + fp32 log-softmax, its gradient, the logits' gradient) = " + Gb(a.logits_bytes) +
      "; total " + Gb(a.bytes());
  return a;
}

Result<MemoryEstimate> DetailedEstimate(const ModelShape& model_in, const Workload& w,
                                        MemoryEstimate e) {
  const ModelShape m = WithInventory(model_in);
  // What the inventory adds about the model (the model's own notes are reported with the model).
  for (const auto& n : m.notes) {
    if (std::find(model_in.notes.begin(), model_in.notes.end(), n) == model_in.notes.end()) {
      e.notes.push_back(n);
    }
  }
  const bool from_checkpoint =
      m.checkpoint.has_value() && m.checkpoint->bytes > 0 &&
      (w.weights_as_stored || CheckpointPrecision(*m.checkpoint) == w.precision);
  // What the caching allocator churns through (activations, logits).
  const double transient = w.method == Method::kInference
                               ? AddInferenceParts(m, w, from_checkpoint, e)
                               : AddTrainingParts(m, w, from_checkpoint, e);
  e.outside_allocator = {"cuda_context", kCudaContextBytes,
                         "CUDA context, cuBLAS/cuDNN handles and loaded kernels, per GPU process, "
                         "outside PyTorch's allocator (nvidia-smi shows it, "
                         "torch.cuda.max_memory_allocated does not) = " +
                             Gb(kCudaContextBytes)};
  double reserve = transient * kAllocatorReserveFraction;
  std::string reserve_formula = "10% of " + Gb(transient) +
                                " transient memory (PyTorch caching allocator: blocks rounded and "
                                "cached, fragmentation) = " +
                                Gb(reserve);
  // The allocator never hands memory back during a run (no empty_cache): what it reserved to load
  // the model stays reserved, and the run's own tensors reuse it.
  const ReservedFloor load_floor = LoadReservedFloor(m, w, e);
  double live = 0;
  for (const Component& c : e.components) live += c.bytes;
  if (load_floor.bytes > live + reserve) {
    reserve = load_floor.bytes - live;
    reserve_formula = load_floor.formula + ", less the " + Gb(live) +
                      " of live tensors that reuse it = " + Gb(reserve) + " (above " +
                      reserve_formula + ")";
  }
  e.components.push_back({"allocator_reserve", reserve, reserve_formula});
  return e;
}

}  // namespace gpuhub::sizing
