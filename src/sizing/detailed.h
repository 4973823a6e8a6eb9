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
inline constexpr int kLossChunks = 8;              // torchtune CEWithChunkedOutputLoss

// Activation bytes saved for backward per token for ONE decoder layer (bf16 activations, no
// recomputation), for the workload's method (trainable base or frozen base + adapters), attention
// kernel and LoRA targets. Excludes the seq x seq score term of eager attention (see below).
double ActivationBytesPerTokenPerLayer(const ModelShape& model, const Workload& workload);
// Eager (non-flash) attention keeps the softmax probabilities: bytes per layer per sequence.
double EagerAttentionBytesPerLayer(const ModelShape& model, std::int64_t sequence_tokens);

Result<MemoryEstimate> DetailedEstimate(const ModelShape& model, const Workload& workload,
                                        MemoryEstimate estimate);

}  // namespace gpuhub::sizing
