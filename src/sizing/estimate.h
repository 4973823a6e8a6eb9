// The memory arithmetic: one call takes a model shape and a workload and returns the named
// components of GPU memory, each with its bytes and the formula that produced them. The CLI, the
// HTTP API and the web pages all call EstimateMemory; nothing else computes sizing.
//
// Profiles:
//  - guide: the published rules of spec §1–2 (quick rule for training), default for presets;
//  - detailed: activations from the shapes, optimizer choice, ZeRO stages; default for real models.
// Units: bytes (double); GB = 1e9 bytes. Components are per GPU. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sizing/model.h"
#include "sizing/precision.h"
#include "sizing/serving_engine.h"

namespace gpuhub::sizing {

inline constexpr double kBytesPerGb = 1e9;

enum class Method { kInference, kFullFineTune, kLora, kQlora };
// "infer", "full", "lora", "qlora"
Result<Method> ParseMethod(std::string_view text);
std::string_view MethodName(Method method);

enum class Profile { kGuide, kDetailed };
Result<Profile> ParseProfile(std::string_view text);  // "guide", "detailed"
std::string_view ProfileName(Profile profile);

enum class Optimizer { kAdamW, kAdam8bit, kSgdMomentum, kAdafactor };
Result<Optimizer> ParseOptimizer(std::string_view text);  // "adamw", "adam8bit", "sgd", "adafactor"
std::string_view OptimizerName(Optimizer optimizer);

// Which linear layers get LoRA adapters (detailed profile).
//  - qv: the query and value projections (PEFT's default for Llama-style models);
//  - attn: every attention projection (q, k, v, o; MLA's low-rank projections);
//  - mlp: the MLP projections (gate, up, down; experts and shared experts included);
//  - all-linear: attention and MLP projections, experts included (not the router, not lm_head).
enum class LoraTargets { kQv, kAttention, kMlp, kAllLinear };
Result<LoraTargets> ParseLoraTargets(std::string_view text);  // "qv", "attn", "mlp", "all-linear"
std::string_view LoraTargetsName(LoraTargets targets);

// How the model is spread over several GPUs.
//  - inference, LoRA, QLoRA: layers split across the cards (any link will do);
//  - full fine-tuning: ZeRO stage 0 (plain data parallel, every card holds everything), 1, 2 or 3
//    (stage 3 = FSDP full sharding);
//  - LoRA/QLoRA with zero_stage 3: FSDP shards the frozen base, every card runs its own batch.
struct Workload {
  Method method = Method::kInference;
  // Weights for inference; the frozen base for LoRA (QLoRA always stores the base in nf4).
  Precision precision = Precision::kBf16;
  Precision kv_precision = Precision::kFp16;  // fp16 or fp8
  std::int64_t context_tokens = 8192;         // inference: tokens in the KV cache per sequence
  // Inference, detailed profile: tokens one prefill step runs through a layer. 0 = the whole
  // prompt (context x batch) in one forward pass, as Hugging Face generate and LitGPT do; serving
  // engines chunk long prompts (vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size).
  std::int64_t prefill_chunk_tokens = 0;
  std::int64_t batch = 1;               // sequences (inference) or micro-batch (training)
  std::int64_t sequence_tokens = 2048;  // training sequence length
  // Training, detailed profile: micro-batches per optimizer step. Above 1 the weight gradients
  // stay allocated while the next micro-batch runs forward, so they add to the activation peak.
  int gradient_accumulation_steps = 1;
  int lora_rank = 16;
  int gpus = 1;
  int zero_stage = 0;  // full fine-tuning only: 0, 1, 2, 3
  bool offload_optimizer = false;
  Optimizer optimizer = Optimizer::kAdamW;
  std::optional<Profile> profile;  // unset: guide for presets, detailed for real models

  // --- Detailed profile only (the guide's published rules ignore these) ---
  LoraTargets lora_targets = LoraTargets::kQv;
  bool lora_dropout = false;           // adapters apply dropout to their input (PEFT default: off)
  bool flash_attention = true;         // FlashAttention / SDPA kernels: no seq x seq scores kept
  bool gradient_checkpointing = true;  // full recomputation: one hidden state per layer kept
  bool chunked_loss = false;           // cross-entropy in chunks (torchtune, lit-gpt, Liger):
                                       // no full fp32 copy of the logits
  // The cross-entropy loss runs under torch.compile (torchtitan from bbb1b616e, 2025-04-02, when
  // --training.compile is on): Inductor saves the logits and per-row reductions only and writes
  // the logits' gradient in their dtype in one fused kernel, with no fp32 copy, log-softmax or
  // fp32 gradient (sizing-model.md §3). Unchunked loss only.
  bool compiled_loss = false;
  bool double_quant = true;            // QLoRA: the NF4 absmax constants are quantized too
  // ZeRO-3 / FSDP CPU offload: parameters live in host memory (full fine-tuning: ZeRO-Infinity or
  // FSDP; LoRA/QLoRA: FSDP offloads the frozen base and the adapters, the optimizer steps on the
  // CPU). Needs zero_stage 3.
  bool offload_params = false;
  // Hugging Face transformers before 4.45 (the releases of 2024 up to August): the model's
  // forward upcasts the logits of every position to fp32 (training: 4 B kept instead of 2;
  // inference: the prefill step's logits for every position, bf16 + the fp32 copy, 6 B each,
  // instead of the last position's), and each attention layer keeps rotary cos/sin caches for
  // max_position_embeddings positions.
  bool old_transformers = false;
  // QLoRA as torchtune 0.1 ran it with torchao before 0.2: each linear is created in bf16 on the
  // GPU and quantized there, its nearest NF4 code found by comparing the whole weight with the 16
  // codes at once (n x 16 bf16 differences and their absolute values). The caching allocator keeps
  // the blocks that needed for the rest of the run: a reserved floor (sizing-model.md §3).
  bool unchunked_nf4_quantization = false;
  // AdamW as torch.optim.AdamW runs when neither `fused` nor `foreach` is given (PyTorch 2.x on
  // CUDA: the foreach implementation): its step computes sqrt(exp_avg_sq) for every parameter of
  // the group at once (torch._foreach_sqrt), a temporary as large as one state tensor. It reuses
  // the cached blocks of the freed activations and adds only where it is larger (sizing-model.md
  // §3). AdamW only; no effect with optimizer offload or the optimizer in backward.
  bool foreach_adamw = false;
  // The optimizer steps each parameter inside the backward pass as soon as its gradient is ready
  // and frees the gradient (torchtune's optimizer_in_bwd, LOMO): only the largest gradient is
  // alive. Full fine-tuning, one micro-batch per step, no optimizer offload.
  bool optimizer_in_backward = false;
  // Everything in the compute dtype (torchtune, LitGPT "bf16-true"): no fp32 master weights,
  // optimizer states and adapters in bf16, QLoRA's unquantized parameters in bf16. Off: mixed
  // precision as Hugging Face/DeepSpeed run it (fp32 master copy, fp32 adapters and optimizer
  // state; prepare_model_for_kbit_training upcasts QLoRA's unquantized parameters to fp32).
  bool pure_bf16 = false;
  // Fused kernels (torch.compile, Liger, Unsloth): RMSNorm keeps only its bf16 input and SwiGLU
  // only gate and up for the backward pass.
  bool fused_kernels = false;
  // Saved activations stream to host memory (torchtune activation offloading, DeepSpeed CPU
  // checkpointing): with gradient checkpointing the per-layer checkpoints leave the GPU.
  bool offload_activations = false;
  // --- Parallel layout (sizing/parallel.h). None named: the legacy meanings of `gpus` above. ---
  int data_parallel = 0;  // 0: gpus / (tensor x pipeline x context)
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int context_parallel = 1;  // training: the sequence split across cards (ring attention)
  int virtual_pipeline = 1;  // interleaved pipeline chunks per card: the bubble / this
  // Training without full checkpointing: the matmul inputs are kept and the cheap parts of each
  // layer (norms, activation functions, the attention core) are recomputed in backward
  // (Korthikanti et al.'s selective recomputation, torchtitan's selective op checkpointing).
  bool selective_recompute = false;
  // Training: the linear layers compute in FP8 (Transformer Engine, torchao float8) while the
  // weights, gradients and optimizer stay in mixed precision; needs an FP8 card.
  bool fp8_training = false;
  // Training: the stack runs it as Megatron Core with Transformer Engine (NeMo, Megatron-LM,
  // Megatron-Bridge: cuDNN fused attention, TE's FP8 GEMMs) rather than PyTorch's own modules
  // (FSDP/DDP, Hugging Face, torchtitan, llm-foundry, torchtune). Speed only.
  bool megatron = false;
  // Serving: the engine (prefill chunking for memory; decode efficiency for speed).
  ServingEngine engine = ServingEngine::kUnspecified;

  // When the model carries checkpoint headers: size the weights from the tensor bytes as stored
  // (e.g. a GGUF Q4_K_M or a GPTQ checkpoint) instead of params x precision. The CLI sets it when
  // no --precision is given. Weights also come from the checkpoint when `precision` is the
  // checkpoint's own.
  bool weights_as_stored = false;
};

// Checks ranges and combinations (context 0, batch 10^12, rank 0, kv precision other than
// fp16/fp8, ZeRO stage without full fine-tuning...). The message says what to fix.
Status ValidateWorkload(const Workload& workload);

struct Component {
  std::string name;     // "weights", "kv_cache", "runtime_overhead", "gradients", ...
  double bytes = 0;     // per GPU
  std::string formula;  // "70e9 params x 1 B/param (fp8) = 70.00 GB"
};

struct MemoryEstimate {
  std::string model_id;
  Method method = Method::kInference;
  Profile profile = Profile::kGuide;
  int gpus = 1;
  std::vector<Component> components;  // per GPU, in display order
  double per_gpu_bytes = 0;           // sum of components: the framework's peak on one card
  double total_bytes = 0;             // all GPUs together (per_gpu_bytes x gpus)
  // Per GPU, outside the framework's caching allocator (detailed profile: the CUDA context and
  // library handles; the guide profile has none, its runtime_overhead component covers it). The
  // published peak-memory figures (torch.cuda.max_memory_allocated / max_memory_reserved, what
  // LitGPT, torchtune, PEFT and vLLM's load log report) do not count it, so it is not a component
  // and not in per_gpu_bytes; a card must hold both: card_bytes().
  Component outside_allocator;
  double card_bytes() const { return per_gpu_bytes + outside_allocator.bytes; }
  // Weight bytes read to decode one token (active params at the weight precision): the decode
  // ceiling is bandwidth / this. Zero for training.
  double decode_weight_bytes = 0;
  double host_bytes = 0;           // host RAM needed for offloaded state (0 without offload)
  std::vector<std::string> notes;  // assumptions worth showing ("guide quick rule: +15% ...")
};

Result<MemoryEstimate> EstimateMemory(const ModelShape& model, const Workload& workload);

// Trainable LoRA parameters: rank x (in + out) for every targeted linear of the model.
double LoraAdapterParams(const ModelShape& model, LoraTargets targets, int rank);

// KV cache bytes for `context` tokens x `batch` sequences (sliding-window layers capped).
double KvCacheBytes(const ModelShape& model, Precision kv_precision, std::int64_t context_tokens,
                    std::int64_t batch);

// Single-stream decode ceiling (tokens/s) = memory bandwidth / weight bytes read per token
// (spec §3). Splitting layers across cards does not raise it. 0 when not inference.
double DecodeCeilingTokensPerSecond(double bandwidth_gb_per_s, const MemoryEstimate& estimate);

// "70e9", "8.03e9", "13.6e6": how formulas print parameter counts.
std::string FormatCount(double count);
// "74.68 GB"
std::string FormatGb(double bytes);

}  // namespace gpuhub::sizing
