#include "sizing/throughput.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "sizing/detailed.h"

namespace gpuhub::sizing {
namespace {

std::string Flops(double v) { return FormatCount(v); }

// Weights a token runs through: the decoder linears (routed experts at k/E) and the output head
// (the embedding when tied). The embedding lookup itself is no matmul.
struct Matmuls {
  double active = 0;  // per token
  double expert = 0;  // all routed-expert weights (resident), for decode's touched share
  double all = 0;     // every linear + head (resident)
};

Matmuls MatmulParams(const ModelShape& m) {
  Matmuls p;
  const double routed =
      m.experts > 0 ? static_cast<double>(m.experts_per_token) / m.experts : 1.0;
  for (const auto& l : m.linears) {
    const double w = l.weight_params();
    p.all += w;
    if (l.kind == LinearKind::kExpert && m.experts > 0) {
      p.expert += w;
      p.active += w * routed;
    } else {
      p.active += w;
    }
  }
  const double head = m.lm_head_params > 0 ? m.lm_head_params : m.embedding_params;
  p.active += head;
  p.all += head;
  return p;
}

// Query and value widths of attention (MLA: per-head nope+rope queries, v_head_dim values).
double QueryValueWidth(const ModelShape& m) {
  if (m.kv_lora_rank > 0) {
    return static_cast<double>(m.heads) *
           (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim);
  }
  return 2.0 * m.heads * m.head_dim;
}

// Forward FLOPs of attention per token: QK^T and PV, 2 FLOPs per multiply-add, over the positions
// a token attends to on average (`attended` for full layers, capped by the window).
double AttentionForward(const ModelShape& m, double attended) {
  const double full_layers = m.layers - m.sliding_window_layers;
  const double window = m.sliding_window > 0 ? std::min<double>(attended, m.sliding_window)
                                             : attended;
  return 2.0 * QueryValueWidth(m) * (full_layers * attended + m.sliding_window_layers * window);
}

}  // namespace

TrainingFlops TrainingFlopsPerToken(const ModelShape& model_in, const Workload& w) {
  const ModelShape m = WithLlamaInventory(model_in);
  TrainingFlops f;
  f.matmul_params = MatmulParams(m).active;
  const bool full = w.method == Method::kFullFineTune;
  if (!full) f.adapter_params = LoraAdapterParams(m, w.lora_targets, w.lora_rank);
  // Causal attention: a token attends to (seq + 1) / 2 positions on average.
  f.attention_forward = AttentionForward(m, (static_cast<double>(w.sequence_tokens) + 1) / 2);
  f.forward = 2 * f.matmul_params + f.attention_forward + 2 * f.adapter_params;
  // Full checkpointing recomputes the whole forward; selective recompute (torchtitan's per-op
  // policy keeps every other matmul's output) recomputes half of the matmuls' forward.
  const double recompute = w.gradient_checkpointing  ? f.forward
                           : w.selective_recompute ? f.matmul_params
                                                   : 0;
  std::string how;
  if (full) {
    // Backward: activation gradients and weight gradients, each as costly as the forward.
    f.per_token = 3 * f.forward + recompute;
    how = "3 x forward (forward, activation gradients, weight gradients)";
  } else {
    // Frozen base: activation gradients only (2 x matmul), attention's backward (2 x its
    // forward), the adapters' activation and weight gradients (4 x adapters).
    f.per_token = f.forward + (2 * f.matmul_params + 2 * f.attention_forward) +
                  4 * f.adapter_params + recompute;
    how = "forward + activation gradients (2 x " + Flops(f.matmul_params) +
          " matmul + 2 x attention; the frozen weights get no weight gradient) + 4 x " +
          Flops(f.adapter_params) + " adapter params";
  }
  f.formula = "forward = 2 x " + Flops(f.matmul_params) + " matmul params" +
              (full ? "" : " + 2 x " + Flops(f.adapter_params) + " adapters") +
              " + attention 2 x " + FormatFixed(QueryValueWidth(m), 0) +
              " (q + v width) x " + std::to_string(m.layers) + " layers x " +
              FormatFixed((static_cast<double>(w.sequence_tokens) + 1) / 2, 1) +
              " positions (causal half of seq " + std::to_string(w.sequence_tokens) + ") = " +
              Flops(f.forward) + " FLOPs/token; step = " + how +
              (w.gradient_checkpointing ? " + 1 x forward recomputed (gradient checkpointing)"
               : w.selective_recompute
                   ? " + half the matmuls' forward recomputed (selective recompute)"
                   : "") +
              " = " + Flops(f.per_token) + " FLOPs/token";
  return f;
}

TrainingBytes TrainingBytesPerStep(const ModelShape& model_in, const Workload& w) {
  const ModelShape m = WithLlamaInventory(model_in);
  TrainingBytes b;
  const Matmuls p = MatmulParams(m);
  const bool full = w.method == Method::kFullFineTune;
  const bool qlora = w.method == Method::kQlora;
  const double weight_bytes = full ? (w.precision == Precision::kFp32 ? 4 : 2)
                              : qlora ? 0.5 + 2 + 2  // nf4 read, bf16 copy written and read
                                      : BytesPerParam(w.precision);
  b.weights_per_pass = p.all * weight_bytes;
  b.passes = (full ? 3 : 2) + (w.gradient_checkpointing || w.selective_recompute ? 1 : 0);
  const double trainable =
      full ? model_in.total_params : LoraAdapterParams(m, w.lora_targets, w.lora_rank);
  // Optimizer step, per trainable parameter: PyTorch's default (foreach, unfused) AdamW makes ~20
  // passes over parameter-sized tensors (lerp of m, mul and addcmul of v, decoupled weight decay,
  // sqrt, div and add of the denominator, addcdiv into the weights) and gradient clipping 3 more
  // (norm, scale); each pass reads or writes one element of the master/state width (fp32, or bf16
  // with pure_bf16). 8-bit Adam (bitsandbytes, fused) ~10, SGD with momentum ~9, Adafactor ~15.
  const bool mixed = full && w.precision != Precision::kFp32 && !w.pure_bf16;
  const double element = w.pure_bf16 ? 2 : 4;
  double passes = 0;
  switch (w.optimizer) {
    case Optimizer::kAdamW:
      passes = 23;
      break;
    case Optimizer::kAdam8bit:
      passes = 10;
      break;
    case Optimizer::kSgdMomentum:
      passes = 9;
      break;
    case Optimizer::kAdafactor:
      passes = 15;
      break;
  }
  const double grad = full ? (w.precision == Precision::kFp32 ? 4 : 2) : element;
  // Mixed precision also writes the bf16 copy of the updated weights.
  const double per_param = passes * element + (mixed ? 2 : 0);
  b.optimizer_step = trainable * per_param;
  b.gradient_bytes = trainable * grad;
  b.parameter_bytes = model_in.total_params * (full ? weight_bytes : BytesPerParam(w.precision));
  b.weights_formula = Flops(p.all) + " matmul params x " + FormatFixed(weight_bytes, 1) + " B" +
                      (qlora ? " (nf4 read + bf16 dequantized copy written and read)" : "") +
                      " = " + FormatGb(b.weights_per_pass) + " per pass, " +
                      std::to_string(b.passes) + " passes per micro-batch";
  b.optimizer_formula = Flops(trainable) + " trainable params x " + FormatFixed(per_param, 0) +
                        " B (" + FormatFixed(passes, 0) + " passes of " +
                        FormatFixed(element, 0) + " B: PyTorch's foreach " +
                        std::string(OptimizerName(w.optimizer)) + " and gradient clipping" +
                        (mixed ? ", + the bf16 weight copy" : "") + ") = " +
                        FormatGb(b.optimizer_step);
  return b;
}

ServingWork ServingWorkFor(const ModelShape& model_in, const Workload& w,
                           std::int64_t prompt_tokens, std::int64_t context_tokens,
                           std::int64_t batch, int tile_rows) {
  const ModelShape m = WithLlamaInventory(model_in);
  ServingWork s;
  const Matmuls p = MatmulParams(m);
  s.prefill_attention_flops_per_token =
      AttentionForward(m, (static_cast<double>(prompt_tokens) + 1) / 2);
  s.prefill_flops_per_token = 2 * p.active + s.prefill_attention_flops_per_token;
  s.decode_attention_flops_per_token = AttentionForward(m, static_cast<double>(context_tokens));
  s.decode_flops_per_token = 2 * p.active + s.decode_attention_flops_per_token;
  const double weights = m.checkpoint && w.weights_as_stored && m.checkpoint->bytes > 0
                             ? m.checkpoint->bytes
                             : WeightBytesAt(m, w.precision, w.double_quant);
  // The routed experts' share of the weight bytes, of which a step touches those that at least one
  // of the batch's tokens is routed to.
  const double expert_share = m.total_params > 0 ? p.expert / m.total_params : 0;
  double touched = 1;
  if (m.experts > 0) {
    const double k_over_e = static_cast<double>(m.experts_per_token) / m.experts;
    touched = 1 - std::pow(1 - k_over_e, static_cast<double>(batch));
  }
  s.decode_weight_bytes = weights * (1 - expert_share) + weights * expert_share * touched;
  const double rows = static_cast<double>(batch);
  const double tile = std::max(1, tile_rows);
  const double routed_share =
      m.experts > 0 ? static_cast<double>(m.experts_per_token) / m.experts : 0;
  const double dense_params = p.active - p.expert * routed_share;
  // Each touched expert sees its share of the batch's routed rows, padded up to the tile.
  const double expert_rows = touched > 0 ? rows * routed_share / touched : 0;
  s.decode_step_matmul_flops =
      2 * dense_params * std::max(rows, tile) +
      (m.experts > 0 ? 2 * p.expert * touched * std::max(expert_rows, tile) : 0);
  s.decode_kv_bytes = KvCacheBytes(m, w.kv_precision, context_tokens, batch);
  s.formula = "prefill " + Flops(s.prefill_flops_per_token) + " FLOPs per prompt token (2 x " +
              Flops(p.active) + " active matmul params + attention); decode step at batch " +
              std::to_string(batch) + " reads " + FormatGb(s.decode_weight_bytes) + " of weights" +
              (m.experts > 0 ? " (experts touched: 1 - (1 - " +
                                   std::to_string(m.experts_per_token) + "/" +
                                   std::to_string(m.experts) + ")^" + std::to_string(batch) +
                                   " = " + FormatFixed(touched, 3) + ")"
                             : "") +
              " + " + FormatGb(s.decode_kv_bytes) + " of KV cache (" +
              std::to_string(context_tokens) + " tokens x " + std::to_string(batch) +
              " sequences) and does " + Flops(s.decode_flops_per_token) +
              " FLOPs per sequence";
  return s;
}

}  // namespace gpuhub::sizing
