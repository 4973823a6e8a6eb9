// The bundled diffusion model files (data/diffusion/*.json): ParseDiffusionModel, the listing and
// the lookup by name (diffusion.h). Every field is checked (type, range, no unknown member) with
// errors "<file>: <field>: what is wrong".
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/file.h"
#include "core/strings.h"
#include "sizing/diffusion.h"
#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// One JSON object being read: its path for messages, the members read so far (the rest are
// unknown and refused by Done).
class Obj {
 public:
  Obj(const Json& j, std::string path, std::string_view source)
      : j_(j), path_(std::move(path)), source_(source) {}

  Status Bad(const std::string& key, const std::string& what) const {
    return Status::InvalidArgument(std::string(source_) + ": " + Path(key) + ": " + what);
  }
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  const Json* Find(const std::string& key) {
    read_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  Result<std::string> Text(const std::string& key, bool required = true) {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (required) return Bad(key, "missing");
      return std::string();
    }
    if (!v->is_string() || v->get<std::string>().size() > 1024) {
      return Bad(key, "must be a string of at most 1024 bytes");
    }
    return v->get<std::string>();
  }
  Result<int> Int(const std::string& key, int min, std::int64_t max, std::optional<int> fallback = {}) {
    const Json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Bad(key, "missing");
    }
    if (!v->is_number_integer() || v->get<std::int64_t>() < min || v->get<std::int64_t>() > max) {
      return Bad(key, "must be an integer from " + std::to_string(min) + " to " + std::to_string(max));
    }
    return static_cast<int>(v->get<std::int64_t>());
  }
  Result<double> Number(const std::string& key, double min, double max) {
    const Json* v = Find(key);
    if (v == nullptr) return Bad(key, "missing");
    if (!v->is_number() || v->get<double>() < min || v->get<double>() > max) {
      return Bad(key, "must be a number from " + FormatFixed(min, 1) + " to " + FormatFixed(max, 1));
    }
    return v->get<double>();
  }
  Result<bool> Bool(const std::string& key, bool fallback) {
    const Json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Bad(key, "must be true or false");
    return v->get<bool>();
  }
  Result<std::vector<int>> Ints(const std::string& key, int min, int max) {
    const Json* v = Find(key);
    if (v == nullptr || !v->is_array() || v->empty() || v->size() > 8) {
      return Bad(key, "must be a list of 1 to 8 integers");
    }
    std::vector<int> out;
    for (const Json& x : *v) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < min || x.get<std::int64_t>() > max) {
        return Bad(key, "must hold integers from " + std::to_string(min) + " to " +
                            std::to_string(max));
      }
      out.push_back(static_cast<int>(x.get<std::int64_t>()));
    }
    return out;
  }
  Result<Precision> Prec(const std::string& key) {
    GPUHUB_ASSIGN_OR_RETURN(std::string text, Text(key));
    auto p = ParsePrecision(text);
    if (!p.ok()) return Bad(key, p.status().message());
    return *p;
  }
  Result<Obj> Child(const std::string& key) {
    const Json* v = Find(key);
    if (v == nullptr || !v->is_object()) return Bad(key, "must be an object");
    return Obj(*v, Path(key), source_);
  }
  Status Done() const {
    for (auto it = j_.begin(); it != j_.end(); ++it) {
      if (!read_.contains(it.key())) return Bad(it.key(), "unknown field");
    }
    return Status::Ok();
  }

 private:
  const Json& j_;
  std::string path_;
  std::string_view source_;
  std::set<std::string> read_;
};

constexpr int kDim = static_cast<int>(kMaxDimension);

Result<Denoiser> ReadDenoiser(Obj o) {
  Denoiser d;
  GPUHUB_ASSIGN_OR_RETURN(std::string kind, o.Text("kind"));
  GPUHUB_ASSIGN_OR_RETURN(d.name, o.Text("name"));
  GPUHUB_ASSIGN_OR_RETURN(d.precision, o.Prec("precision"));
  GPUHUB_ASSIGN_OR_RETURN(d.autocast_16bit, o.Bool("autocast_16bit", false));
  GPUHUB_ASSIGN_OR_RETURN(d.fp32_residual, o.Bool("fp32_residual", false));
  GPUHUB_ASSIGN_OR_RETURN(d.source, o.Text("source"));
  GPUHUB_ASSIGN_OR_RETURN(Obj s, o.Child("shape"));
  if (kind == "unet") {
    d.kind = DenoiserKind::kUnet;
    UnetShape& u = d.unet;
    GPUHUB_ASSIGN_OR_RETURN(u.in_channels, s.Int("in_channels", 1, 1024));
    GPUHUB_ASSIGN_OR_RETURN(u.out_channels, s.Int("out_channels", 1, 1024));
    GPUHUB_ASSIGN_OR_RETURN(u.model_channels, s.Int("model_channels", 1, 65536));
    GPUHUB_ASSIGN_OR_RETURN(u.channel_mult, s.Ints("channel_mult", 1, 64));
    GPUHUB_ASSIGN_OR_RETURN(u.num_res_blocks, s.Int("num_res_blocks", 1, 16));
    GPUHUB_ASSIGN_OR_RETURN(u.transformer_depth, s.Ints("transformer_depth", 0, 64));
    GPUHUB_ASSIGN_OR_RETURN(u.head_channels, s.Int("head_channels", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(u.context_dim, s.Int("context_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(u.adm_in_channels, s.Int("adm_in_channels", 0, kDim, 0));
    if (u.transformer_depth.size() != u.channel_mult.size()) {
      return s.Bad("transformer_depth", "must have one entry per channel_mult level");
    }
  } else if (kind == "mmdit") {
    d.kind = DenoiserKind::kMmdit;
    MmditShape& x = d.mmdit;
    GPUHUB_ASSIGN_OR_RETURN(x.hidden, s.Int("hidden", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.heads, s.Int("heads", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.double_blocks, s.Int("double_blocks", 0, 1000));
    GPUHUB_ASSIGN_OR_RETURN(x.single_blocks, s.Int("single_blocks", 0, 1000));
    GPUHUB_ASSIGN_OR_RETURN(x.mlp_ratio, s.Number("mlp_ratio", 0.5, 64));
    GPUHUB_ASSIGN_OR_RETURN(x.in_channels, s.Int("in_channels", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.out_channels, s.Int("out_channels", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.vec_in_dim, s.Int("vec_in_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.context_in_dim, s.Int("context_in_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.guidance_embed, s.Bool("guidance_embed", false));
    GPUHUB_ASSIGN_OR_RETURN(x.qkv_bias, s.Bool("qkv_bias", false));
    GPUHUB_ASSIGN_OR_RETURN(x.patch, s.Int("patch", 1, 16));
    if (x.hidden % x.heads != 0) return s.Bad("heads", "must divide hidden");
  } else if (kind == "wan-dit") {
    d.kind = DenoiserKind::kWanDit;
    WanDitShape& x = d.wan;
    GPUHUB_ASSIGN_OR_RETURN(x.dim, s.Int("dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.ffn_dim, s.Int("ffn_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.heads, s.Int("heads", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.layers, s.Int("layers", 1, 1000));
    GPUHUB_ASSIGN_OR_RETURN(x.in_dim, s.Int("in_dim", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.out_dim, s.Int("out_dim", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(x.text_dim, s.Int("text_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(x.freq_dim, s.Int("freq_dim", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(std::vector<int> patch, s.Ints("patch", 1, 16));
    if (patch.size() != 3) return s.Bad("patch", "must be [t, h, w]");
    x.patch_t = patch[0];
    x.patch_h = patch[1];
    x.patch_w = patch[2];
    GPUHUB_ASSIGN_OR_RETURN(x.cross_attn_norm, s.Bool("cross_attn_norm", false));
    if (x.dim % x.heads != 0) return s.Bad("heads", "must divide dim");
  } else {
    return o.Bad("kind", "must be unet, mmdit or wan-dit");
  }
  GPUHUB_RETURN_IF_ERROR(s.Done());
  GPUHUB_RETURN_IF_ERROR(o.Done());
  return d;
}

Result<TextEncoder> ReadTextEncoder(Obj o) {
  TextEncoder t;
  GPUHUB_ASSIGN_OR_RETURN(std::string kind, o.Text("kind"));
  GPUHUB_ASSIGN_OR_RETURN(t.name, o.Text("name"));
  GPUHUB_ASSIGN_OR_RETURN(t.precision, o.Prec("precision"));
  GPUHUB_ASSIGN_OR_RETURN(t.tokens, o.Int("tokens", 1, 65536));
  GPUHUB_ASSIGN_OR_RETURN(t.source, o.Text("source"));
  GPUHUB_ASSIGN_OR_RETURN(Obj s, o.Child("shape"));
  GPUHUB_ASSIGN_OR_RETURN(t.vocab, s.Int("vocab", 1, kDim));
  GPUHUB_ASSIGN_OR_RETURN(t.hidden, s.Int("hidden", 1, kDim));
  GPUHUB_ASSIGN_OR_RETURN(t.layers, s.Int("layers", 1, 1000));
  GPUHUB_ASSIGN_OR_RETURN(t.intermediate, s.Int("intermediate", 1, kDim));
  GPUHUB_ASSIGN_OR_RETURN(t.heads, s.Int("heads", 1, 4096));
  if (kind == "clip-text") {
    t.kind = TextEncoderKind::kClipText;
    GPUHUB_ASSIGN_OR_RETURN(t.positions, s.Int("positions", 1, 65536));
    GPUHUB_ASSIGN_OR_RETURN(t.projection, s.Int("projection", 0, kDim, 0));
  } else if (kind == "t5-encoder") {
    t.kind = TextEncoderKind::kT5Encoder;
    GPUHUB_ASSIGN_OR_RETURN(t.inner, s.Int("inner", 1, kDim));
    GPUHUB_ASSIGN_OR_RETURN(t.gated, s.Bool("gated", true));
    GPUHUB_ASSIGN_OR_RETURN(t.relative_buckets, s.Int("relative_buckets", 1, 4096));
    GPUHUB_ASSIGN_OR_RETURN(t.relative_bias_every_layer, s.Bool("relative_bias_every_layer", false));
  } else {
    return o.Bad("kind", "must be clip-text or t5-encoder");
  }
  GPUHUB_RETURN_IF_ERROR(s.Done());
  GPUHUB_RETURN_IF_ERROR(o.Done());
  return t;
}

Result<Vae> ReadVae(Obj o) {
  Vae v;
  GPUHUB_ASSIGN_OR_RETURN(std::string kind, o.Text("kind"));
  if (kind == "autoencoder-kl") {
    v.kind = VaeKind::kAutoencoderKl;
  } else if (kind == "wan-vae") {
    v.kind = VaeKind::kWanVae;
  } else {
    return o.Bad("kind", "must be autoencoder-kl or wan-vae");
  }
  GPUHUB_ASSIGN_OR_RETURN(v.name, o.Text("name"));
  GPUHUB_ASSIGN_OR_RETURN(v.precision, o.Prec("precision"));
  GPUHUB_ASSIGN_OR_RETURN(v.source, o.Text("source"));
  GPUHUB_ASSIGN_OR_RETURN(Obj s, o.Child("shape"));
  GPUHUB_ASSIGN_OR_RETURN(v.ch, s.Int("ch", 1, 65536));
  GPUHUB_ASSIGN_OR_RETURN(v.ch_mult, s.Ints("ch_mult", 1, 64));
  if (v.ch_mult.size() < 2) return s.Bad("ch_mult", "must have at least two levels");
  GPUHUB_ASSIGN_OR_RETURN(v.num_res_blocks, s.Int("num_res_blocks", 1, 16));
  GPUHUB_ASSIGN_OR_RETURN(v.z_channels, s.Int("z_channels", 1, 1024));
  GPUHUB_ASSIGN_OR_RETURN(v.quant_conv, s.Bool("quant_conv", true));
  GPUHUB_ASSIGN_OR_RETURN(v.spatial_factor, s.Int("spatial_factor", 1, 64));
  GPUHUB_ASSIGN_OR_RETURN(v.temporal_factor, s.Int("temporal_factor", 1, 16, 1));
  if ((v.temporal_factor & (v.temporal_factor - 1)) != 0) {
    return s.Bad("temporal_factor", "must be a power of two");
  }
  GPUHUB_RETURN_IF_ERROR(s.Done());
  GPUHUB_RETURN_IF_ERROR(o.Done());
  return v;
}

}  // namespace

Result<DiffusionModel> ParseDiffusionModel(std::string_view text, std::string_view source) {
  if (text.size() > kMaxDiffusionModelBytes) {
    return Status::InvalidArgument(std::string(source) + ": larger than " +
                                   std::to_string(kMaxDiffusionModelBytes) + " bytes");
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(std::string(source) + ": not a JSON object");
  }
  Obj o(j, "", source);
  DiffusionModel m;
  m.source_file = std::string(source);
  GPUHUB_ASSIGN_OR_RETURN(m.id, o.Text("id"));
  if (const Json* names = o.Find("names")) {
    if (!names->is_array() || names->size() > 8) return o.Bad("names", "must be a list of names");
    for (const Json& n : *names) {
      if (!n.is_string() || n.get<std::string>().empty() || n.get<std::string>().size() > 64) {
        return o.Bad("names", "must hold names of 1 to 64 characters");
      }
      m.names.push_back(n.get<std::string>());
    }
  }
  GPUHUB_ASSIGN_OR_RETURN(m.task, o.Text("task"));
  if (m.task != "image" && m.task != "video") return o.Bad("task", "must be image or video");
  GPUHUB_ASSIGN_OR_RETURN(m.pipeline, o.Text("pipeline"));
  GPUHUB_ASSIGN_OR_RETURN(std::string guidance, o.Text("guidance"));
  bool known = false;
  for (Guidance g : {Guidance::kBatched, Guidance::kSequential, Guidance::kDistilled}) {
    if (guidance == GuidanceName(g)) {
      m.guidance = g;
      known = true;
    }
  }
  if (!known) return o.Bad("guidance", "must be cfg-batched, cfg-sequential or distilled");
  GPUHUB_ASSIGN_OR_RETURN(Obj sizes, o.Child("sizes"));
  GPUHUB_ASSIGN_OR_RETURN(m.default_width, sizes.Int("default_width", 8, kMaxDiffusionPixels));
  GPUHUB_ASSIGN_OR_RETURN(m.default_height, sizes.Int("default_height", 8, kMaxDiffusionPixels));
  GPUHUB_ASSIGN_OR_RETURN(m.default_frames, sizes.Int("default_frames", 1, kMaxDiffusionFrames));
  GPUHUB_ASSIGN_OR_RETURN(m.max_width, sizes.Int("max_width", 8, kMaxDiffusionPixels));
  GPUHUB_ASSIGN_OR_RETURN(m.max_height, sizes.Int("max_height", 8, kMaxDiffusionPixels));
  GPUHUB_ASSIGN_OR_RETURN(m.max_frames, sizes.Int("max_frames", 1, kMaxDiffusionFrames));
  GPUHUB_ASSIGN_OR_RETURN(m.size_multiple, sizes.Int("size_multiple", 1, 1024));
  GPUHUB_RETURN_IF_ERROR(sizes.Done());
  GPUHUB_ASSIGN_OR_RETURN(Obj denoiser, o.Child("denoiser"));
  GPUHUB_ASSIGN_OR_RETURN(m.denoiser, ReadDenoiser(std::move(denoiser)));
  const Json* encoders = o.Find("text_encoders");
  if (encoders == nullptr || !encoders->is_array() || encoders->size() > 4) {
    return o.Bad("text_encoders", "must be a list of at most 4 encoders");
  }
  for (std::size_t i = 0; i < encoders->size(); ++i) {
    if (!(*encoders)[i].is_object()) return o.Bad("text_encoders", "must hold objects");
    GPUHUB_ASSIGN_OR_RETURN(
        TextEncoder t,
        ReadTextEncoder(Obj((*encoders)[i], "text_encoders[" + std::to_string(i) + "]", source)));
    m.text_encoders.push_back(std::move(t));
  }
  GPUHUB_ASSIGN_OR_RETURN(Obj vae, o.Child("vae"));
  GPUHUB_ASSIGN_OR_RETURN(m.vae, ReadVae(std::move(vae)));
  if (const Json* notes = o.Find("notes")) {
    if (!notes->is_array() || notes->size() > 16) return o.Bad("notes", "must be a list");
    for (const Json& n : *notes) {
      if (!n.is_string()) return o.Bad("notes", "must hold strings");
      m.notes.push_back(n.get<std::string>());
    }
  }
  GPUHUB_RETURN_IF_ERROR(o.Done());
  // The defaults must be a workload the model runs.
  if (m.default_width % m.size_multiple != 0 || m.default_height % m.size_multiple != 0 ||
      (m.default_frames - 1) % m.vae.temporal_factor != 0 || m.default_width > m.max_width ||
      m.default_height > m.max_height || m.default_frames > m.max_frames) {
    return o.Bad("sizes", "the defaults are not a size the model runs");
  }
  return m;
}

Result<std::vector<DiffusionModel>> ListDiffusionModels(const std::string& data_dir) {
  const std::string dir = (fs::path(data_dir) / "diffusion").string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status::NotFound(dir + ": bundled diffusion models folder not found");
  }
  std::vector<DiffusionModel> out;
  fs::directory_iterator it(dir, ec), end;
  if (ec) return Status::InvalidArgument(dir + ": cannot list: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return Status::InvalidArgument(dir + ": cannot list: " + ec.message());
    const std::string name = it->path().filename().string();
    if (!name.ends_with(".json") || !it->is_regular_file(ec)) continue;
    if (out.size() >= kMaxDiffusionModels) return Status::InvalidArgument(dir + ": too many files");
    GPUHUB_ASSIGN_OR_RETURN(std::string text,
                            ReadFile(it->path().string(), kMaxDiffusionModelBytes));
    GPUHUB_ASSIGN_OR_RETURN(DiffusionModel m,
                            ParseDiffusionModel(text, "data/diffusion/" + name));
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const DiffusionModel& a, const DiffusionModel& b) { return ToLower(a.id) < ToLower(b.id); });
  return out;
}

Result<DiffusionModel> FindDiffusionModel(std::string_view name, const std::string& data_dir) {
  GPUHUB_ASSIGN_OR_RETURN(auto models, ListDiffusionModels(data_dir));
  const std::string want = ToLower(Trim(name));
  std::string known;
  for (DiffusionModel& m : models) {
    bool match = ToLower(m.id) == want;
    for (const std::string& n : m.names) match = match || ToLower(n) == want;
    if (match) return std::move(m);
    known += (known.empty() ? "" : ", ") + (m.names.empty() ? m.id : m.names.front());
  }
  return Status::NotFound("unknown diffusion model '" + std::string(name.substr(0, 80)) +
                          "' (bundled: " + known + ")")
      .WithField("model");
}

bool IsDiffusionModelName(std::string_view name, const std::string& data_dir) {
  return FindDiffusionModel(name, data_dir).ok();
}

}  // namespace gpuhub::sizing
