// Model shapes: what the memory arithmetic needs to know about a model.
//
// A shape comes from a preset of the published guide (nominal parameter counts, spec §4) or from a
// real model's files (config.json, checkpoint headers), where the parameter count is computed from
// the tensor shapes. Shapes are plain values; producing one does no I/O beyond the text it is given.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub::sizing {

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
  int intermediate = 0;      // MLP width of a dense layer (per expert for MoE)
  int vocab = 0;
  bool tied_embeddings = false;
  int experts = 0;             // routed experts per MoE layer; 0 for dense models
  int experts_per_token = 0;   // routed experts active per token
  // KV cache elements stored per token per layer, K and V together. Standard attention (MHA, GQA):
  // 2 x kv_heads x head_dim. MLA (DeepSeek-V2/V3): kv_lora_rank + qk_rope_head_dim.
  double kv_elements_per_token_per_layer = 0;
  // Layers whose attention is a sliding window keep at most `sliding_window` tokens of KV each
  // (Gemma 2/3, Mistral v0.1, gpt-oss). 0 = every layer attends to the full context.
  int sliding_window_layers = 0;
  int sliding_window = 0;

  bool is_moe() const { return experts > 0; }
};

// The guide's presets (spec §4): "7b", "13b", "34b", "70b", "405b".
const std::vector<std::string>& PresetNames();
// not_found naming the presets when `name` is not one of them.
Result<ModelShape> PresetModel(std::string_view name);

// Checks that a shape is usable (positive dimensions within limits, kv_heads dividing heads...).
Status ValidateShape(const ModelShape& shape);

}  // namespace gpuhub::sizing
