// The work a job asks of a GPU, from the model's shapes: floating-point operations per token for
// training and for a serving forward pass, and the bytes of memory a training pass, an optimizer
// step and a decode step must move. No card and no prices here: fit/plan.h divides these by a
// card's published dense tensor throughput and bandwidth, at a utilisation it states.
// Formulas in docs/sizing-model.md §6; every result carries the formula that made it. Pure.
#pragma once

#include <cstdint>
#include <string>

#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::sizing {

// FLOPs a token costs in one training step (forward, backward and, under gradient checkpointing,
// the recomputed forward), counting the matmuls (2 FLOPs per weight per token) and attention's
// sequence term. Normalization, activations and the optimizer are not FLOPs here (the optimizer
// is a memory cost: TrainingBytes).
struct TrainingFlops {
  double matmul_params = 0;   // weights a token runs through: active linears + lm_head
  double adapter_params = 0;  // LoRA/QLoRA: trainable adapter weights (0 for full fine-tuning)
  double attention_forward = 0;  // FLOPs per token: QK^T and PV over the causal half (window)
  double forward = 0;            // 2 x matmul_params + attention_forward (+ 2 x adapters)
  double per_token = 0;          // the whole step, per token
  std::string formula;
};
// Full fine-tuning: 3 x forward (activation and weight gradients); LoRA/QLoRA: the frozen
// weights get no weight gradient, so 2 x matmul + 3 x attention + 6 x adapters, the forward and
// the activation gradients; + 1 x forward with gradient checkpointing.
TrainingFlops TrainingFlopsPerToken(const ModelShape& model, const Workload& workload);

// Bytes of memory traffic that do not shrink with the tokens of a micro-batch.
struct TrainingBytes {
  // Weights read by one pass over the model (each forward, backward and recomputed pass reads
  // every weight once; QLoRA also writes and re-reads the bf16 copy bitsandbytes dequantizes).
  double weights_per_pass = 0;
  int passes = 0;  // per micro-batch: forward, backward (+ weight-gradient pass), recompute
  // One optimizer step over the trainable parameters (reads and writes of weights, gradients,
  // master copy and optimizer state).
  double optimizer_step = 0;
  // Gradients exchanged between data-parallel replicas per optimizer step (bf16 or fp32 grads of
  // the trainable parameters) and parameters gathered per micro-batch under ZeRO-3/FSDP.
  double gradient_bytes = 0;
  double parameter_bytes = 0;
  std::string weights_formula;    // the weights_per_pass figure
  std::string optimizer_formula;  // the optimizer_step figure
};
TrainingBytes TrainingBytesPerStep(const ModelShape& model, const Workload& workload);

// Serving: one forward pass per prompt token (prefill) and one decode step for a batch.
struct ServingWork {
  double prefill_flops_per_token = 0;  // 2 x active matmul params + attention over the prompt
  double prefill_attention_flops_per_token = 0;  // the attention part of it
  double decode_flops_per_token = 0;  // 2 x active matmul params + attention over the context
  double decode_weight_bytes = 0;     // weights read by one decode step at the batch
  double decode_kv_bytes = 0;         // KV cache read by one decode step (every sequence)
  // The batch's matmul FLOPs in one decode step with every GEMM's rows rounded up to
  // `tile_rows` (a tensor-core instruction computes at least that many rows however few
  // sequences there are; each touched expert's GEMM is padded on its own).
  double decode_step_matmul_flops = 0;
  double decode_attention_flops_per_token = 0;  // the attention part of decode_flops_per_token
  std::string formula;
};
// `prompt_tokens`: average prompt; `context_tokens`: the average KV length a decode step reads
// (prompt + half the output); `batch`: sequences decoded together. Weights at the workload's
// precision (quantization constants included); an MoE step reads the experts at least one of the
// batch's tokens is routed to: 1 - (1 - k/E)^batch of them, balanced routing assumed.
ServingWork ServingWorkFor(const ModelShape& model, const Workload& workload,
                           std::int64_t prompt_tokens, std::int64_t context_tokens,
                           std::int64_t batch, int tile_rows = 1);

}  // namespace gpuhub::sizing
