// Model shapes: what the memory arithmetic needs to know about a model.
//
// A shape comes from a preset of the published guide (nominal parameter counts, spec §4) or from a
// real model's files (config.json, checkpoint headers), where the parameter count is computed from
// the tensor shapes. Shapes are plain values; producing one does no I/O beyond the text it is
// given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub::sizing {

// One kind of linear (matmul) layer of the model, e.g. every layer's q_proj, or every routed
// expert's gate_proj. LoRA adapters attach to these; QLoRA quantizes them; activations follow their
// widths.
enum class LinearKind {
  kAttention,     // q/k/v/o projections (and MLA's low-rank projections)
  kMlp,           // dense MLP projections
  kExpert,        // routed MoE experts (only experts_per_token of `experts` run per token)
  kSharedExpert,  // MoE experts every token goes through (DeepSeek, Qwen2-MoE)
  kRouter,        // the MoE gate
};

struct LinearModule {
  std::string name;  // Hugging Face module name: "q_proj", "gate_up_proj", "experts.down_proj"
  LinearKind kind = LinearKind::kAttention;
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  std::int64_t count = 0;  // instances in the whole model (layers, x experts for expert modules)
  bool bias = false;
  double weight_params() const {
    return static_cast<double>(in_features) * static_cast<double>(out_features) *
           static_cast<double>(count);
  }
  double bias_params() const {
    return bias ? static_cast<double>(out_features) * static_cast<double>(count) : 0;
  }
};

// What a checkpoint's headers say about its tensors (safetensors or GGUF), read without touching
// the tensor data. `params` counts the parameters the tensors represent: a GPTQ/AWQ `qweight` of
// int32 packs 32/bits weights per element, a bitsandbytes nf4 `weight` of uint8 packs 2, an MXFP4
// block packs 2 per byte; quantization constants (scales, zeros, absmax, g_idx...) are bytes, not
// params.
struct DtypeTotal {
  std::string dtype;  // "BF16", "I32 (gptq int4)", "Q4_K", "F8_E4M3"...
  std::int64_t tensors = 0;
  double params = 0;  // parameters represented (0 for quantization constants)
  double bytes = 0;   // bytes of tensor data on disk
};

struct CheckpointSummary {
  std::string format;              // "safetensors" or "gguf"
  std::vector<std::string> files;  // file names read (headers only)
  std::int64_t tensors = 0;
  double params = 0;                 // parameters represented, see above
  double bytes = 0;                  // tensor data bytes (what loading the weights costs)
  double quantization_bytes = 0;     // part of `bytes` that is scales/zeros/absmax and the like
  std::vector<DtypeTotal> by_dtype;  // sorted by bytes, largest first
  std::string quantization;          // "gptq int4", "awq int4", "bnb nf4", "Q4_K_M", "" if none
  std::vector<std::string> notes;    // "index total_size 16060522496 differs from the headers"
};

struct ModelShape {
  std::string id;            // "70b", "meta-llama/Llama-3.1-8B"
  std::string architecture;  // "preset", "LlamaForCausalLM", "MixtralForCausalLM", ...
  // Presets carry the guide's nominal parameter count (7e9, not 6.74e9). Real models carry the
  // count computed from their shapes.
  bool nominal = false;
  double total_params = 0;   // resident in memory: every expert of an MoE model
  double active_params = 0;  // read per token (speed); equals total_params for dense models
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int intermediate = 0;  // MLP width of a dense layer (per expert for MoE)
  int vocab = 0;
  bool tied_embeddings = false;
  int experts = 0;            // routed experts per MoE layer; 0 for dense models
  int experts_per_token = 0;  // routed experts active per token
  // KV cache elements stored per token per layer, K and V together. Standard attention (MHA, GQA):
  // 2 x kv_heads x head_dim. MLA (DeepSeek-V2/V3): kv_lora_rank + qk_rope_head_dim.
  double kv_elements_per_token_per_layer = 0;
  // Layers whose attention is a sliding window keep at most `sliding_window` tokens of KV each
  // (Gemma 2/3, Mistral v0.1, gpt-oss). 0 = every layer attends to the full context.
  int sliding_window_layers = 0;
  int sliding_window = 0;
  // RMSNorms per decoder layer: 2 (pre-attention, pre-MLP); Gemma 2/3 add post-attention and
  // post-MLP norms (4). Each keeps its own saved input for the backward pass.
  int norms_per_layer = 2;
  // Gemma 2: tanh soft-capping of the attention scores and of the final logits (0 = none). Each
  // tanh keeps its output for the backward pass.
  double attn_logit_softcapping = 0;
  double final_logit_softcapping = 0;

  // --- Filled for real models (config.json, checkpoints); presets leave them empty. ---
  std::string model_type;  // config.json "model_type": "llama", "gemma3_text", "deepseek_v3"
  std::string source;      // where the shape came from ("data/models/x.json", a path, "preset")
  std::int64_t max_context = 0;  // max_position_embeddings (0 = unknown)
  std::string stored_dtype;      // torch_dtype of the published weights ("bfloat16"), may be empty
  std::string quantization;      // quantization_config.quant_method ("gptq", "awq", "fp8", "mxfp4")
  int quantization_bits = 0;     // quantization_config.bits when given
  bool gated_mlp = true;         // SwiGLU/GeGLU (3 matrices) vs a plain 2-matrix MLP
  int moe_intermediate = 0;      // per-expert MLP width of MoE layers (0: dense model)
  int shared_experts = 0;        // experts every token uses (counted as one wide MLP)
  int moe_layers = 0;            // layers whose MLP is MoE (the others are dense)
  // MLA (DeepSeek-V2/V3); 0 for standard attention.
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  // Parameter inventory. total_params = embedding + lm_head + linears (weights and biases) + norms
  // + other + vision.
  std::vector<LinearModule> linears;  // decoder-layer matmuls (not embeddings, not lm_head)
  double embedding_params = 0;        // input token embedding
  double lm_head_params = 0;          // output projection; 0 when tied to the embedding
  double norm_params = 0;             // RMSNorm/LayerNorm weights (and biases)
  double other_params = 0;            // attention sinks, router biases, expert biases...
  double vision_params = 0;           // vision tower and projector of multimodal models
  // Exact tensor inventory when the shape was read from a checkpoint (safetensors or GGUF).
  std::optional<CheckpointSummary> checkpoint;
  std::vector<std::string> notes;  // what the loader assumed ("sized as a Llama-style decoder")
  // Named as a quantized checkpoint of a bundled base ("...-GPTQ-Int4", "-AWQ"): the shapes are
  // the base's, the stored weights' precision is the caller's --precision.
  bool quantized_variant = false;

  bool is_moe() const { return experts > 0; }
};

// The guide's presets (spec §4): "7b", "13b", "34b", "70b", "405b".
const std::vector<std::string>& PresetNames();
// not_found naming the presets when `name` is not one of them.
Result<ModelShape> PresetModel(std::string_view name);

// Sums the parameter inventory of a real shape into total_params and active_params (routed experts
// count experts_per_token / experts toward the active count). Presets are left as they are.
void ComputeParamCounts(ModelShape& shape);

// Linear parameters in the decoder layers (what QLoRA quantizes), and the part of them that a token
// actually runs through.
double LinearWeightParams(const ModelShape& shape);

// Checks that a shape is usable (positive dimensions within limits, kv_heads dividing heads...).
Status ValidateShape(const ModelShape& shape);

}  // namespace gpuhub::sizing
