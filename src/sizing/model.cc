#include "sizing/model.h"

#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

ModelShape Preset(std::string id, double params, int layers, int heads, int kv_heads, int hidden) {
  ModelShape s;
  s.id = std::move(id);
  s.architecture = "preset";
  s.nominal = true;
  s.total_params = params;
  s.active_params = params;
  s.layers = layers;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = 128;
  s.hidden = hidden;
  s.kv_elements_per_token_per_layer = 2.0 * kv_heads * 128;
  return s;
}

const std::vector<ModelShape>& Presets() {
  // Spec §4. Query heads = hidden / head_dim; the guide's arithmetic needs only the KV side.
  static const std::vector<ModelShape> kPresets = {
      Preset("7b", 7e9, 32, 32, 8, 4096),        Preset("13b", 13e9, 40, 40, 40, 5120),
      Preset("34b", 34e9, 60, 56, 8, 7168),      Preset("70b", 70e9, 80, 64, 8, 8192),
      Preset("405b", 405e9, 126, 128, 8, 16384),
  };
  return kPresets;
}

}  // namespace

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& p : Presets()) names.push_back(p.id);
    return names;
  }();
  return kNames;
}

Result<ModelShape> PresetModel(std::string_view name) {
  for (const auto& p : Presets()) {
    if (p.id == name) return p;
  }
  return Status::NotFound("unknown model preset '" + std::string(name.substr(0, 64)) +
                          "' (presets: 7b, 13b, 34b, 70b, 405b)");
}

void ComputeParamCounts(ModelShape& s) {
  if (s.nominal) return;
  double total =
      s.embedding_params + s.lm_head_params + s.norm_params + s.other_params + s.vision_params;
  double inactive = 0;
  for (const auto& l : s.linears) {
    double p = l.weight_params() + l.bias_params();
    total += p;
    if (l.kind == LinearKind::kExpert && s.experts > 0) {
      inactive += p * (1.0 - static_cast<double>(s.experts_per_token) / s.experts);
    }
  }
  s.total_params = total;
  s.active_params = total - inactive;
}

double LinearWeightParams(const ModelShape& s) {
  double sum = 0;
  for (const auto& l : s.linears) sum += l.weight_params();
  return sum;
}

Status ValidateShape(const ModelShape& s) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("model '" + s.id + "': " + why);
  };
  if (!(s.total_params > 0) || s.total_params > kMaxParams)
    return bad("parameter count out of range");
  if (!(s.active_params > 0) || s.active_params > s.total_params) {
    return bad("active parameters must be positive and at most the total");
  }
  if (s.layers <= 0 || s.layers > kMaxLayers) return bad("layer count out of range");
  if (s.kv_heads <= 0 || s.head_dim <= 0 || s.head_dim > kMaxDimension) {
    return bad("attention shape (kv heads, head_dim) out of range");
  }
  if (s.heads > 0 && s.heads % s.kv_heads != 0) return bad("heads must be a multiple of kv heads");
  if (!(s.kv_elements_per_token_per_layer > 0)) return bad("KV cache width must be positive");
  if (s.sliding_window_layers < 0 || s.sliding_window_layers > s.layers || s.sliding_window < 0) {
    return bad("sliding-window layers out of range");
  }
  if (s.experts < 0 || s.experts > kMaxExperts || s.experts_per_token < 0 ||
      s.experts_per_token > s.experts) {
    return bad("expert counts out of range");
  }
  return Status::Ok();
}

}  // namespace gpuhub::sizing
