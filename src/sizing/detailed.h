// The detailed memory model (Profile::kDetailed): every part of GPU memory from the model's shapes.
// Formulas and sources are in docs/sizing-model.md; each component's `formula` says how its bytes
// were obtained. Called by EstimateMemory; exposed for tests and the documentation's tables.
#pragma once

#include "sizing/estimate.h"

namespace gpuhub::sizing {

// Constants of the detailed model (docs/sizing-model.md explains each).
inline constexpr double kCudaContextBytes = 0.5e9;  // CUDA context + cuBLAS/cuDNN handles
inline constexpr double kAllocatorReserveFraction =
    0.10;                                          // caching allocator over transient memory
inline constexpr int kNf4BlockSize = 64;           // bitsandbytes 4-bit block
inline constexpr int kDoubleQuantBlockSize = 256;  // blocks of absmax per second-level constant
inline constexpr int kInt4GroupSize = 128;         // GPTQ/AWQ group size
inline constexpr int kFp4BlockSize = 16;           // NVFP4: one FP8 scale per 16 values
inline constexpr int kLossChunks = 8;              // torchtune CEWithChunkedOutputLoss

// A preset (nominal parameter count only) with the detailed profile's Llama-style per-layer
// inventory: vocab 32,000 unless the shape says otherwise, untied, the MLP width that keeps the
// nominal count. Real models are returned as they are.
ModelShape WithLlamaInventory(const ModelShape& model);
// Resident weight bytes at `precision`: decoder linears at the quantized width with their
// constants (nf4/int4), everything else (embeddings, lm_head, norms, vision) in 16 bits.
double WeightBytesAt(const ModelShape& model, Precision precision, bool double_quant);

// Activation bytes saved for backward per token for ONE decoder layer (bf16 activations, no
// recomputation), for the workload's method (trainable base or frozen base + adapters), attention
// kernel and LoRA targets. Excludes the seq x seq score term of eager attention (see below).
double ActivationBytesPerTokenPerLayer(const ModelShape& model, const Workload& workload);
// Eager (non-flash) attention keeps the softmax probabilities: bytes per layer per sequence.
double EagerAttentionBytesPerLayer(const ModelShape& model, std::int64_t sequence_tokens);

// The guide profile's LoRA/QLoRA activations: the detailed formulas below at the guide's stated
// assumptions (gradient checkpointing, rank-16 adapters on the attention projections, flash
// attention, unfused kernels, the whole loss at once), on the model's shapes (a preset gets the
// Llama-style inventory of WithInventory: vocab 32,000 unless the shape says otherwise). Three
// parts: the kept checkpoints (one bf16 hidden state per layer, / layer-split GPUs), one layer
// recomputed during backward with its backward temporaries, and the logits with the loss.
struct GuideActivations {
  double checkpoints_bytes = 0;
  double recompute_bytes = 0;
  double logits_bytes = 0;
  std::string formula;
  double bytes() const { return checkpoints_bytes + recompute_bytes + logits_bytes; }
};
// `workload` supplies the method (lora/qlora), sequence, batch, rank and GPUs (layer split).
GuideActivations GuideAdapterActivations(const ModelShape& model, const Workload& workload);

Result<MemoryEstimate> DetailedEstimate(const ModelShape& model, const Workload& workload,
                                        MemoryEstimate estimate);

}  // namespace gpuhub::sizing
