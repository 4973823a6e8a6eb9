// Hugging Face `config.json` → ModelShape. Pure: parses the text it is given, does no I/O.
//
// Families (by "model_type"): llama (Llama 2/3/3.1/3.2/3.3), mistral, mixtral, qwen2, qwen2_moe,
// qwen3, qwen3_moe, gemma, gemma2, gemma3 / gemma3_text (multimodal configs keep the decoder in
// "text_config"; the vision tower is counted), phi3, deepseek_v2, deepseek_v3 (MLA attention,
// shared and routed experts, first_k_dense_replace), gpt_oss. Any other model_type is sized as a
// Llama-style decoder when the standard fields are present (a note says so); otherwise
// invalid_argument names the missing fields.
//
// The parameter count is computed from the shapes (embedding, attention, MLP/experts, norms,
// biases, lm_head unless tied): meta-llama/Llama-3.1-8B comes out at exactly 8,030,261,248.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sizing/model.h"

namespace gpuhub::sizing {

// `id` names the model in the shape and in error messages. Errors are invalid_argument and start
// with "config.json of '<id>': ". Input larger than kMaxConfigJsonBytes or nested deeper than
// kMaxJsonDepth is refused before parsing.
Result<ModelShape> ParseHfConfig(std::string_view json_text, std::string id);

// The model_type values recognised by name (for `gpuhub models` and error messages).
const std::vector<std::string>& SupportedModelTypes();

}  // namespace gpuhub::sizing
