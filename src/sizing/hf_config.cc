#include "sizing/hf_config.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/strings.h"
#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

using nlohmann::json;

enum class Family {
  kLlama,
  kMistral,
  kMixtral,
  kQwen2,
  kQwen2Moe,
  kQwen3,
  kQwen3Moe,
  kGemma,
  kGemma2,
  kGemma3,
  kPhi3,
  kDeepseekV2,
  kDeepseekV3,
  kGptOss,
  kMpt,
  kGeneric,
};

struct FamilyName {
  const char* model_type;
  Family family;
};

constexpr FamilyName kFamilies[] = {
    {"llama", Family::kLlama},
    {"mistral", Family::kMistral},
    {"mixtral", Family::kMixtral},
    {"qwen2", Family::kQwen2},
    {"qwen2_moe", Family::kQwen2Moe},
    {"qwen3", Family::kQwen3},
    {"qwen3_moe", Family::kQwen3Moe},
    {"gemma", Family::kGemma},
    {"gemma2", Family::kGemma2},
    {"gemma3", Family::kGemma3},
    {"gemma3_text", Family::kGemma3},
    {"phi3", Family::kPhi3},
    {"deepseek_v2", Family::kDeepseekV2},
    {"deepseek_v3", Family::kDeepseekV3},
    {"gpt_oss", Family::kGptOss},
    {"mpt", Family::kMpt},
};

// MosaicML's MPT configs name their dimensions their own way (d_model, n_layers, n_heads,
// expansion_ratio, max_seq_len) and always tie the embeddings: rewritten into the Hugging Face
// names the parser reads. The MLP is a plain up/GELU/down (no gate), no biases (no_bias).
void NormalizeMpt(json& root) {
  auto copy = [&](const char* from, const char* to) {
    if (auto it = root.find(from); it != root.end() && !root.contains(to)) root[to] = *it;
  };
  copy("d_model", "hidden_size");
  copy("n_layers", "num_hidden_layers");
  copy("n_heads", "num_attention_heads");
  copy("max_seq_len", "max_position_embeddings");
  if (auto it = root.find("attn_config"); it != root.end() && it->is_object()) {
    if (auto kv = it->find("kv_n_heads"); kv != it->end() && !root.contains("num_key_value_heads")) {
      root["num_key_value_heads"] = *kv;
    }
  }
  auto d = root.find("d_model");
  auto ratio = root.find("expansion_ratio");
  if (!root.contains("intermediate_size") && d != root.end() && d->is_number_integer()) {
    double r = ratio != root.end() && ratio->is_number() ? ratio->get<double>() : 4.0;
    if (r > 0 && r <= 64) {
      root["intermediate_size"] = static_cast<std::int64_t>(r * d->get<std::int64_t>());
    }
  }
  if (!root.contains("tie_word_embeddings")) root["tie_word_embeddings"] = true;
}

// Reads fields from the decoder's config (text_config when present, then the top level), collecting
// every missing or malformed field so the error names them all at once.
class Fields {
 public:
  Fields(const json* text, const json* root) : text_(text), root_(root) {}

  const json* Find(const char* key) const {
    for (const json* j : {text_, root_}) {
      if (j == nullptr) continue;
      auto it = j->find(key);
      if (it != j->end() && !it->is_null()) return &*it;
    }
    return nullptr;
  }
  bool Has(const char* key) const { return Find(key) != nullptr; }

  // A positive whole number (an integral float such as 4096.0 is accepted), or nullopt when absent.
  std::optional<std::int64_t> Int(const char* key, std::int64_t max = kMaxDimension,
                                  bool allow_zero = false) {
    const json* v = Find(key);
    if (v == nullptr) return std::nullopt;
    double d = 0;
    if (v->is_number_integer()) {
      if (v->is_number_unsigned()) {
        auto u = v->get<std::uint64_t>();
        d = u > static_cast<std::uint64_t>(max) ? static_cast<double>(max) + 1
                                                : static_cast<double>(u);
      } else {
        d = static_cast<double>(v->get<std::int64_t>());
      }
    } else if (v->is_number_float()) {
      d = v->get<double>();
      if (!std::isfinite(d) || d != std::floor(d)) {
        bad_.push_back(std::string(key) + " must be a whole number");
        return std::nullopt;
      }
    } else {
      bad_.push_back(std::string(key) + " must be a number, got " + v->type_name());
      return std::nullopt;
    }
    if (d < (allow_zero ? 0 : 1) || d > static_cast<double>(max)) {
      bad_.push_back(std::string(key) + " must be between " + (allow_zero ? "0" : "1") + " and " +
                     std::to_string(max) + ", got " + FormatPlain(d));
      return std::nullopt;
    }
    return static_cast<std::int64_t>(d);
  }

  std::int64_t Require(const char* key, std::int64_t max = kMaxDimension, bool allow_zero = false) {
    std::size_t bad_before = bad_.size();
    auto v = Int(key, max, allow_zero);
    if (v) return *v;
    if (bad_.size() == bad_before) missing_.push_back(key);
    return 0;
  }

  std::int64_t IntOr(const char* key, std::int64_t fallback, std::int64_t max = kMaxDimension,
                     bool allow_zero = false) {
    auto v = Int(key, max, allow_zero);
    return v ? *v : fallback;
  }

  std::optional<bool> Bool(const char* key) {
    const json* v = Find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      bad_.push_back(std::string(key) + " must be true or false");
      return std::nullopt;
    }
    return v->get<bool>();
  }

  std::string String(const char* key) {
    const json* v = Find(key);
    if (v == nullptr) return "";
    if (!v->is_string()) {
      bad_.push_back(std::string(key) + " must be a string");
      return "";
    }
    return v->get<std::string>().substr(0, 128);
  }

  void Bad(std::string why) { bad_.push_back(std::move(why)); }
  const std::vector<std::string>& missing() const { return missing_; }
  const std::vector<std::string>& bad() const { return bad_; }

 private:
  static std::string FormatPlain(double d) {
    if (std::fabs(d) < 1e15) return std::to_string(static_cast<std::int64_t>(d));
    return std::to_string(d);
  }
  const json* text_;
  const json* root_;
  std::vector<std::string> missing_;
  std::vector<std::string> bad_;
};

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

void AddLinear(ModelShape& s, std::string name, LinearKind kind, std::int64_t in, std::int64_t out,
               std::int64_t count, bool bias = false) {
  if (count <= 0) return;
  s.linears.push_back({std::move(name), kind, in, out, count, bias});
}

// SigLIP / CLIP style vision tower: pre-norm ViT blocks with biased q/k/v/o and a 2-matrix MLP,
// a patch convolution, learned position embeddings and a final LayerNorm.
std::optional<double> VisionTowerParams(const json& v) {
  auto get = [&](const char* key, std::int64_t fallback) -> std::optional<std::int64_t> {
    auto it = v.find(key);
    if (it == v.end() || it->is_null()) {
      if (fallback > 0) return fallback;
      return std::nullopt;
    }
    if (!it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
        it->get<std::int64_t>() > kMaxDimension) {
      return std::nullopt;
    }
    return it->get<std::int64_t>();
  };
  auto h = get("hidden_size", 0), inter = get("intermediate_size", 0);
  auto layers = get("num_hidden_layers", 0), patch = get("patch_size", 0);
  auto image = get("image_size", 0), channels = get("num_channels", 3);
  if (!h || !inter || !layers || !patch || !image || !channels || *layers > kMaxLayers) {
    return std::nullopt;
  }
  double H = static_cast<double>(*h), I = static_cast<double>(*inter);
  double per_layer = 4 * (H * H + H) + 2 * H * I + I + H + 4 * H;
  double patches = std::pow(static_cast<double>(*image / *patch), 2);
  double p = static_cast<double>(*patch);
  return static_cast<double>(*layers) * per_layer + static_cast<double>(*channels) * p * p * H + H +
         patches * H + 2 * H;
}

}  // namespace

const std::vector<std::string>& SupportedModelTypes() {
  static const std::vector<std::string> kTypes = [] {
    std::vector<std::string> t;
    for (const auto& f : kFamilies) t.emplace_back(f.model_type);
    return t;
  }();
  return kTypes;
}

Result<ModelShape> ParseHfConfig(std::string_view json_text, std::string id) {
  const std::string where = "config.json of '" + id + "': ";
  auto fail = [&](const std::string& why) { return Status::InvalidArgument(where + why); };
  if (json_text.size() > kMaxConfigJsonBytes) {
    return fail("file is " + std::to_string(json_text.size()) + " bytes, more than the limit of " +
                std::to_string(kMaxConfigJsonBytes));
  }
  if (!JsonNestingWithin(json_text, kMaxJsonDepth)) {
    return fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  json root = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return fail("not valid JSON");
  if (!root.is_object()) return fail("expected a JSON object at the top level");
  if (auto mt = root.find("model_type"); mt != root.end() && mt->is_string() && *mt == "mpt") {
    NormalizeMpt(root);
  }

  const json* text = nullptr;
  if (auto it = root.find("text_config"); it != root.end() && it->is_object()) text = &*it;
  Fields f(text, &root);

  ModelShape s;
  s.id = id;
  s.model_type = f.String("model_type");
  if (auto it = root.find("architectures");
      it != root.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    s.architecture = (*it)[0].get<std::string>().substr(0, 128);
  }
  if (s.model_type.empty() && s.architecture.empty()) {
    return fail("missing model_type and architectures: is this a Hugging Face config.json?");
  }
  Family family = Family::kGeneric;
  for (const auto& fam : kFamilies) {
    if (s.model_type == fam.model_type) family = fam.family;
  }
  if (s.architecture.empty()) s.architecture = s.model_type;
  const bool is_gemma =
      family == Family::kGemma || family == Family::kGemma2 || family == Family::kGemma3;
  const bool is_mla = family == Family::kDeepseekV2 || family == Family::kDeepseekV3;

  // --- Core dimensions ---
  const std::int64_t hidden = f.Require("hidden_size");
  const std::int64_t layers = f.Require("num_hidden_layers", kMaxLayers);
  const std::int64_t heads = f.Require("num_attention_heads", kMaxDimension);
  std::int64_t vocab = 0;
  if (family == Family::kGemma3) {
    vocab = f.IntOr("vocab_size", 262208);  // Gemma3TextConfig default (multimodal configs omit it)
  } else {
    vocab = f.Require("vocab_size");
  }
  const std::int64_t kv_heads = f.IntOr("num_key_value_heads", heads);
  // Gemma3TextConfig's default; multimodal Gemma 3 configs omit it.
  s.max_context =
      f.IntOr("max_position_embeddings", family == Family::kGemma3 ? 131072 : 0, 1'000'000'000);
  s.stored_dtype = f.String("torch_dtype");
  if (s.stored_dtype.empty()) s.stored_dtype = f.String("dtype");

  // MoE fields by family.
  std::int64_t experts = 0, experts_per_token = 0, moe_inter = 0, shared_experts = 0;
  std::int64_t shared_inter = 0, first_dense = 0, moe_freq = 1;
  switch (family) {
    case Family::kMixtral:
    case Family::kGptOss:
      experts = f.Require("num_local_experts", kMaxExperts);
      experts_per_token = family == Family::kGptOss && !f.Has("num_experts_per_tok")
                              ? f.Require("experts_per_token", kMaxExperts)
                              : f.Require("num_experts_per_tok", kMaxExperts);
      moe_inter = f.Require("intermediate_size");
      break;
    case Family::kQwen2Moe:
    case Family::kQwen3Moe:
      experts = f.Require("num_experts", kMaxExperts);
      experts_per_token = f.Require("num_experts_per_tok", kMaxExperts);
      moe_inter = f.Require("moe_intermediate_size");
      moe_freq = f.IntOr("decoder_sparse_step", 1, kMaxLayers);
      if (family == Family::kQwen2Moe) {
        shared_inter = f.IntOr("shared_expert_intermediate_size", 0, kMaxDimension, true);
      }
      break;
    case Family::kDeepseekV2:
    case Family::kDeepseekV3:
      experts = f.IntOr("n_routed_experts", 0, kMaxExperts, true);
      if (experts > 0) {
        experts_per_token = f.Require("num_experts_per_tok", kMaxExperts);
        moe_inter = f.Require("moe_intermediate_size");
        shared_experts = f.IntOr("n_shared_experts", 0, kMaxExperts, true);
        first_dense = f.IntOr("first_k_dense_replace", 0, kMaxLayers, true);
        moe_freq = f.IntOr("moe_layer_freq", 1, kMaxLayers);
      }
      break;
    default:
      if (f.Has("num_local_experts")) {  // a Mixtral-like model of an unknown family
        experts = f.Require("num_local_experts", kMaxExperts);
        experts_per_token = f.Require("num_experts_per_tok", kMaxExperts);
        moe_inter = f.Require("intermediate_size");
      }
      break;
  }
  std::int64_t inter = 0;
  if (family == Family::kMixtral || family == Family::kGptOss) {
    inter = moe_inter;
  } else if (family == Family::kQwen3Moe || family == Family::kQwen2Moe) {
    inter = f.IntOr("intermediate_size", moe_inter);
  } else {
    inter = f.Require("intermediate_size");
  }

  // Head dimensions.
  std::int64_t head_dim = 0;
  if (is_mla) {
    s.q_lora_rank = static_cast<int>(f.IntOr("q_lora_rank", 0, kMaxDimension, true));
    s.kv_lora_rank = static_cast<int>(f.Require("kv_lora_rank"));
    s.qk_rope_head_dim = static_cast<int>(f.Require("qk_rope_head_dim"));
    s.qk_nope_head_dim = static_cast<int>(f.Require("qk_nope_head_dim"));
    s.v_head_dim = static_cast<int>(f.Require("v_head_dim"));
    head_dim = s.qk_nope_head_dim + s.qk_rope_head_dim;
  } else if (f.Has("head_dim")) {
    head_dim = f.Require("head_dim");
  } else if (is_gemma && family != Family::kGemma2) {
    head_dim = 256;  // GemmaConfig / Gemma3TextConfig default
  } else if (heads > 0) {
    head_dim = hidden / heads;
  }

  if (!f.missing().empty() || !f.bad().empty()) {
    std::string why;
    if (!f.missing().empty()) why = "missing " + Join(f.missing(), ", ");
    if (!f.bad().empty()) why += (why.empty() ? "" : "; ") + Join(f.bad(), "; ");
    if (family == Family::kGeneric) {
      why += " (model_type '" + s.model_type +
             "' is not a supported family: " + Join(SupportedModelTypes(), ", ") + ")";
    }
    return fail(why);
  }
  if (heads % kv_heads != 0) {
    return fail("num_attention_heads (" + std::to_string(heads) +
                ") must be a multiple of num_key_value_heads (" + std::to_string(kv_heads) + ")");
  }
  if (experts > 0 && experts_per_token > experts) {
    return fail("num_experts_per_tok (" + std::to_string(experts_per_token) +
                ") exceeds the number of experts (" + std::to_string(experts) + ")");
  }
  if (hidden * vocab > static_cast<std::int64_t>(kMaxParams)) {
    return fail("vocab_size x hidden_size is beyond any real model");
  }

  s.layers = static_cast<int>(layers);
  s.hidden = static_cast<int>(hidden);
  s.heads = static_cast<int>(heads);
  s.kv_heads = static_cast<int>(kv_heads);
  s.head_dim = static_cast<int>(head_dim);
  s.intermediate = static_cast<int>(inter);
  s.vocab = static_cast<int>(vocab);
  s.experts = static_cast<int>(experts);
  s.experts_per_token = static_cast<int>(experts_per_token);
  s.moe_intermediate = static_cast<int>(experts > 0 ? moe_inter : 0);
  s.shared_experts = static_cast<int>(shared_experts);

  // Tied embeddings: Gemma ties by default, the others do not.
  bool tied = is_gemma;
  if (auto t = f.Bool("tie_word_embeddings")) tied = *t;
  s.tied_embeddings = tied;
  s.embedding_params = static_cast<double>(vocab) * hidden;
  s.lm_head_params = tied ? 0 : static_cast<double>(vocab) * hidden;

  // --- Attention ---
  const double H = static_cast<double>(hidden);
  const std::int64_t q_width = heads * head_dim, kv_width = kv_heads * head_dim;
  double norms_per_layer = 2 * H;
  if (family == Family::kGemma2 || family == Family::kGemma3) norms_per_layer = 4 * H;
  if (is_mla) {
    const std::int64_t qk_head = s.qk_nope_head_dim + s.qk_rope_head_dim;
    if (s.q_lora_rank > 0) {
      AddLinear(s, "q_a_proj", LinearKind::kAttention, hidden, s.q_lora_rank, layers);
      AddLinear(s, "q_b_proj", LinearKind::kAttention, s.q_lora_rank, heads * qk_head, layers);
      norms_per_layer += s.q_lora_rank;
    } else {
      AddLinear(s, "q_proj", LinearKind::kAttention, hidden, heads * qk_head, layers);
    }
    AddLinear(s, "kv_a_proj_with_mqa", LinearKind::kAttention, hidden,
              s.kv_lora_rank + s.qk_rope_head_dim, layers);
    AddLinear(s, "kv_b_proj", LinearKind::kAttention, s.kv_lora_rank,
              heads * (s.qk_nope_head_dim + s.v_head_dim), layers);
    AddLinear(s, "o_proj", LinearKind::kAttention, heads * s.v_head_dim, hidden, layers);
    norms_per_layer += s.kv_lora_rank;
    s.kv_elements_per_token_per_layer = s.kv_lora_rank + s.qk_rope_head_dim;
  } else {
    bool qkv_bias = family == Family::kQwen2 || family == Family::kQwen2Moe;
    bool o_bias = false;
    if (auto b = f.Bool("attention_bias")) {
      qkv_bias = qkv_bias || *b;
      o_bias = *b;
    }
    // MPT with no_bias false: every linear and LayerNorm has a bias.
    const bool mpt_bias = family == Family::kMpt && !root.value("no_bias", true);
    if (mpt_bias) qkv_bias = o_bias = true;
    if (family == Family::kPhi3) {
      AddLinear(s, "qkv_proj", LinearKind::kAttention, hidden, q_width + 2 * kv_width, layers);
    } else {
      AddLinear(s, "q_proj", LinearKind::kAttention, hidden, q_width, layers, qkv_bias);
      AddLinear(s, "k_proj", LinearKind::kAttention, hidden, kv_width, layers, qkv_bias);
      AddLinear(s, "v_proj", LinearKind::kAttention, hidden, kv_width, layers, qkv_bias);
    }
    AddLinear(s, "o_proj", LinearKind::kAttention, q_width, hidden, layers, o_bias);
    if (family == Family::kQwen3 || family == Family::kQwen3Moe || family == Family::kGemma3) {
      norms_per_layer += 2.0 * head_dim;  // q_norm and k_norm over head_dim
    }
    if (family == Family::kGptOss) s.other_params += static_cast<double>(heads) * layers;  // sinks
    // MPT learns position embeddings (max_seq_len x d_model) unless it uses ALiBi.
    if (family == Family::kMpt) {
      bool alibi = false;
      if (auto it = root.find("attn_config"); it != root.end() && it->is_object()) {
        alibi = it->value("alibi", false);
      }
      if (root.value("learned_pos_emb", true) && !alibi && s.max_context > 0) {
        s.other_params += static_cast<double>(s.max_context) * H;
      }
    }
    s.kv_elements_per_token_per_layer = 2.0 * kv_heads * head_dim;
  }
  s.norm_params = norms_per_layer * layers + H;  // + the final norm
  if (family == Family::kMpt && !root.value("no_bias", true)) s.norm_params *= 2;  // LayerNorm biases

  // --- MLP: which layers are MoE ---
  std::int64_t moe_layers = 0;
  if (experts > 0) {
    std::vector<std::int64_t> mlp_only;
    if (auto it = (text ? text : &root)->find("mlp_only_layers");
        it != (text ? text : &root)->end() && it->is_array()) {
      for (const auto& v : *it) {
        if (v.is_number_integer()) mlp_only.push_back(v.get<std::int64_t>());
      }
    }
    for (std::int64_t i = 0; i < layers; ++i) {
      bool moe = true;
      if (is_mla) moe = i >= first_dense && i % moe_freq == 0;
      if (family == Family::kQwen2Moe || family == Family::kQwen3Moe) {
        moe = (i + 1) % moe_freq == 0 &&
              std::find(mlp_only.begin(), mlp_only.end(), i) == mlp_only.end();
      }
      if (moe) ++moe_layers;
    }
  }
  s.moe_layers = static_cast<int>(moe_layers);
  const std::int64_t dense_layers = layers - moe_layers;
  if (family == Family::kPhi3) {
    AddLinear(s, "gate_up_proj", LinearKind::kMlp, hidden, 2 * inter, dense_layers);
    AddLinear(s, "down_proj", LinearKind::kMlp, inter, hidden, dense_layers);
  } else if (family == Family::kMpt) {
    // ffn.up_proj -> GELU -> ffn.down_proj, no gate.
    s.gated_mlp = false;
    const bool bias = !root.value("no_bias", true);
    AddLinear(s, "up_proj", LinearKind::kMlp, hidden, inter, dense_layers, bias);
    AddLinear(s, "down_proj", LinearKind::kMlp, inter, hidden, dense_layers, bias);
  } else {
    bool mlp_bias = f.Bool("mlp_bias").value_or(false);
    AddLinear(s, "gate_proj", LinearKind::kMlp, hidden, inter, dense_layers, mlp_bias);
    AddLinear(s, "up_proj", LinearKind::kMlp, hidden, inter, dense_layers, mlp_bias);
    AddLinear(s, "down_proj", LinearKind::kMlp, inter, hidden, dense_layers, mlp_bias);
  }
  if (moe_layers > 0) {
    const std::int64_t n = moe_layers * experts;
    if (family == Family::kGptOss) {
      AddLinear(s, "experts.gate_up_proj", LinearKind::kExpert, hidden, 2 * moe_inter, n, true);
      AddLinear(s, "experts.down_proj", LinearKind::kExpert, moe_inter, hidden, n, true);
      AddLinear(s, "router", LinearKind::kRouter, hidden, experts, moe_layers, true);
    } else if (family == Family::kMixtral || family == Family::kGeneric) {
      AddLinear(s, "experts.w1", LinearKind::kExpert, hidden, moe_inter, n);
      AddLinear(s, "experts.w3", LinearKind::kExpert, hidden, moe_inter, n);
      AddLinear(s, "experts.w2", LinearKind::kExpert, moe_inter, hidden, n);
      AddLinear(s, "gate", LinearKind::kRouter, hidden, experts, moe_layers);
    } else {
      AddLinear(s, "experts.gate_proj", LinearKind::kExpert, hidden, moe_inter, n);
      AddLinear(s, "experts.up_proj", LinearKind::kExpert, hidden, moe_inter, n);
      AddLinear(s, "experts.down_proj", LinearKind::kExpert, moe_inter, hidden, n);
      AddLinear(s, "gate", LinearKind::kRouter, hidden, experts, moe_layers);
      if (family == Family::kDeepseekV3) {
        // noaux_tc routing keeps a learned per-expert bias (e_score_correction_bias).
        s.other_params += static_cast<double>(experts) * moe_layers;
      }
      std::int64_t shared_width = is_mla ? moe_inter * shared_experts : shared_inter;
      if (shared_width > 0) {
        AddLinear(s, "shared_experts.gate_proj", LinearKind::kSharedExpert, hidden, shared_width,
                  moe_layers);
        AddLinear(s, "shared_experts.up_proj", LinearKind::kSharedExpert, hidden, shared_width,
                  moe_layers);
        AddLinear(s, "shared_experts.down_proj", LinearKind::kSharedExpert, shared_width, hidden,
                  moe_layers);
        if (family == Family::kQwen2Moe) {
          AddLinear(s, "shared_expert_gate", LinearKind::kRouter, hidden, 1, moe_layers);
        }
      }
    }
  }

  // --- Gemma 2/3: post-attention and post-MLP norms; Gemma 2: soft-capping (its config's
  // defaults are 50 and 30 when the keys are absent; null switches it off) ---
  if (family == Family::kGemma2 || family == Family::kGemma3) s.norms_per_layer = 4;
  {
    const json* c = text ? text : &root;
    auto cap = [&](const char* key, double fallback) {
      auto it = c->find(key);
      if (it == c->end()) return fallback;
      return it->is_number() && it->get<double>() > 0 ? it->get<double>() : 0.0;
    };
    const bool gemma2 = family == Family::kGemma2;
    s.attn_logit_softcapping = cap("attn_logit_softcapping", gemma2 ? 50.0 : 0.0);
    s.final_logit_softcapping = cap("final_logit_softcapping", gemma2 ? 30.0 : 0.0);
  }

  // --- Sliding-window attention layers ---
  std::int64_t window = f.IntOr("sliding_window", 0, 1'000'000'000, true);
  std::int64_t sliding_layers = 0;
  const json* cfg = text ? text : &root;
  if (auto it = cfg->find("layer_types"); it != cfg->end() && it->is_array()) {
    if (static_cast<std::int64_t>(it->size()) != layers) {
      return fail("layer_types has " + std::to_string(it->size()) + " entries for " +
                  std::to_string(layers) + " layers");
    }
    for (const auto& t : *it) {
      if (t.is_string() && t.get<std::string>() == "sliding_attention") ++sliding_layers;
    }
  } else if (window > 0) {
    switch (family) {
      case Family::kGemma2:
        sliding_layers = (layers + 1) / 2;  // even layers slide
        break;
      case Family::kGemma3: {
        std::int64_t pattern = f.IntOr("sliding_window_pattern", 6, kMaxLayers);
        sliding_layers = layers - layers / pattern;  // every pattern-th layer is global
        break;
      }
      case Family::kQwen2:
      case Family::kQwen2Moe:
      case Family::kQwen3:
      case Family::kQwen3Moe:
        if (f.Bool("use_sliding_window").value_or(false)) {
          sliding_layers =
              layers - std::min(layers, f.IntOr("max_window_layers", layers, kMaxLayers, true));
        }
        break;
      default:
        sliding_layers = layers;  // Mistral v0.1, Phi-3: every layer
        break;
    }
  }
  if (sliding_layers > 0 && window > 0 && (s.max_context == 0 || window < s.max_context)) {
    s.sliding_window_layers = static_cast<int>(sliding_layers);
    s.sliding_window = static_cast<int>(std::min<std::int64_t>(window, 2'000'000'000));
  }

  // --- Vision tower (multimodal checkpoints keep it resident) ---
  if (auto it = root.find("vision_config"); it != root.end() && it->is_object()) {
    if (auto v = VisionTowerParams(*it)) {
      auto vh = it->find("hidden_size");
      double vision_hidden = static_cast<double>(vh->get<std::int64_t>());
      double projector = family == Family::kGemma3 ? vision_hidden * H + vision_hidden
                                                   : vision_hidden * H + H + H * H + H;
      s.vision_params = *v + projector;
      s.notes.push_back("vision tower and projector counted: " +
                        std::to_string(static_cast<std::int64_t>(s.vision_params)) + " params");
    } else {
      s.notes.push_back(
          "vision_config present but not understood: the vision tower is not counted");
    }
  }

  // --- Quantization as published ---
  if (auto it = root.find("quantization_config"); it != root.end() && it->is_object()) {
    if (auto m = it->find("quant_method"); m != it->end() && m->is_string()) {
      s.quantization = m->get<std::string>().substr(0, 64);
    }
    if (auto b = it->find("bits"); b != it->end() && b->is_number_integer()) {
      auto bits = b->get<std::int64_t>();
      if (bits >= 1 && bits <= 16) s.quantization_bits = static_cast<int>(bits);
    }
  }

  if (family == Family::kGeneric) {
    s.notes.push_back("model_type '" + s.model_type +
                      "' is not a known family: sized as a Llama-style decoder (gated MLP, "
                      "RMSNorm, no biases)");
  }
  ComputeParamCounts(s);
  GPUHUB_RETURN_IF_ERROR(ValidateShape(s));
  return s;
}

}  // namespace gpuhub::sizing
