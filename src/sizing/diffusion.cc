#include "sizing/diffusion.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "core/strings.h"
#include "sizing/detailed.h"
#include "sizing/limits.h"

namespace gpuhub::sizing {
namespace {

Status BadField(std::string field, std::string message) {
  return Status::InvalidArgument(std::move(message)).WithField(std::move(field));
}

double D(double v) { return v; }

// --- Parameter counts --------------------------------------------------------------------------

double Conv(double in, double out, double k) { return in * out * k + out; }  // k: kernel volume

// A UNet ResBlock (GroupNorm, 3x3 conv, time-embedding projection, GroupNorm, 3x3 conv, 1x1
// shortcut when the width changes).
double UnetRes(double in, double out, double emb) {
  double p = 2 * in + Conv(in, out, 9) + emb * out + out + 2 * out + Conv(out, out, 9);
  if (in != out) p += Conv(in, out, 1);
  return p;
}

// A SpatialTransformer with `depth` BasicTransformerBlocks (self-attention, cross-attention to
// the text context, GEGLU feed-forward, three LayerNorms) between linear projections in and out.
double UnetTransformer(double c, int depth, double context) {
  const double block = 4 * c * c + c            // self-attention: q, k, v, out (+ out bias)
                       + 8 * c * c + 8 * c       // GEGLU projection c -> 8c
                       + 4 * c * c + c           // feed-forward out 4c -> c
                       + 2 * c * c + 2 * context * c + c  // cross-attention: q, out; k, v from text
                       + 6 * c;                  // three LayerNorms
  return 2 * c + (c * c + c) + depth * block + (c * c + c);
}

double UnetParams(const UnetShape& u) {
  const double mc = u.model_channels, emb = 4 * mc;
  double p = mc * emb + emb + emb * emb + emb;  // time embedding
  if (u.adm_in_channels > 0) p += u.adm_in_channels * emb + emb + emb * emb + emb;
  p += Conv(u.in_channels, mc, 9);
  std::vector<double> skips = {mc};
  double ch = mc;
  const int levels = static_cast<int>(u.channel_mult.size());
  for (int l = 0; l < levels; ++l) {
    const double out = mc * u.channel_mult[l];
    for (int r = 0; r < u.num_res_blocks; ++r) {
      p += UnetRes(ch, out, emb);
      ch = out;
      if (u.transformer_depth[l] > 0) p += UnetTransformer(ch, u.transformer_depth[l], u.context_dim);
      skips.push_back(ch);
    }
    if (l != levels - 1) {
      p += Conv(ch, ch, 9);  // downsample
      skips.push_back(ch);
    }
  }
  p += 2 * UnetRes(ch, ch, emb);
  if (u.transformer_depth.back() > 0) {
    p += UnetTransformer(ch, u.transformer_depth.back(), u.context_dim);
  }
  for (int l = levels - 1; l >= 0; --l) {
    const double out = mc * u.channel_mult[l];
    for (int r = 0; r <= u.num_res_blocks; ++r) {
      const double skip = skips.back();
      skips.pop_back();
      p += UnetRes(ch + skip, out, emb);
      ch = out;
      if (u.transformer_depth[l] > 0) p += UnetTransformer(ch, u.transformer_depth[l], u.context_dim);
      if (l != 0 && r == u.num_res_blocks) p += Conv(ch, ch, 9);  // upsample
    }
  }
  return p + 2 * ch + Conv(ch, u.out_channels, 9);
}

double MmditParams(const MmditShape& m) {
  const double h = m.hidden, mlp = m.hidden * m.mlp_ratio, hd = m.hidden / m.heads;
  auto embedder = [&](double in) { return in * h + h + h * h + h; };  // MLPEmbedder
  double p = m.in_channels * h + h + embedder(256) + embedder(m.vec_in_dim) +
             (m.guidance_embed ? embedder(256) : 0) + m.context_in_dim * h + h;
  const double stream = h * 6 * h + 6 * h                    // modulation (shift, scale, gate x2)
                        + h * 3 * h + (m.qkv_bias ? 3 * h : 0)  // qkv
                        + 2 * hd                                // q/k RMSNorm
                        + h * h + h                             // attention out
                        + h * mlp + mlp + mlp * h + h;          // MLP
  p += m.double_blocks * 2 * stream;
  const double single = h * (3 * h + mlp) + (3 * h + mlp)  // linear1: qkv and MLP in
                        + (h + mlp) * h + h                 // linear2
                        + 2 * hd + h * 3 * h + 3 * h;       // q/k norm, modulation
  p += m.single_blocks * single;
  return p + h * m.out_channels + m.out_channels + h * 2 * h + 2 * h;  // final layer
}

double WanParams(const WanDitShape& w) {
  const double d = w.dim, f = w.ffn_dim, patch = D(w.patch_t) * w.patch_h * w.patch_w;
  double p = w.in_dim * d * patch + d                   // patch embedding (Conv3d)
             + w.text_dim * d + d + d * d + d           // text embedding
             + w.freq_dim * d + d + d * d + d           // time embedding
             + d * 6 * d + 6 * d;                       // time projection
  const double attention = 4 * (d * d + d) + 2 * d;     // q, k, v, o and the q/k RMSNorms
  const double block = attention                        // self-attention
                       + (w.cross_attn_norm ? 2 * d : 0) + attention  // cross-attention to text
                       + d * f + f + f * d + d          // feed-forward
                       + 6 * d;                         // modulation
  p += w.layers * block;
  return p + d * patch * w.out_dim + patch * w.out_dim + 2 * d;  // head and its modulation
}

double KlResnet(double in, double out) {
  double p = 2 * in + Conv(in, out, 9) + 2 * out + Conv(out, out, 9);
  if (in != out) p += Conv(in, out, 1);
  return p;
}

double KlParams(const Vae& v) {
  const double attention = [](double c) { return 2 * c + 4 * (c * c + c); }(v.ch * v.ch_mult.back());
  std::vector<double> chs;
  for (int m : v.ch_mult) chs.push_back(D(v.ch) * m);
  const double z = v.z_channels;
  double p = Conv(3, v.ch, 9);  // encoder
  double c = v.ch;
  for (std::size_t l = 0; l < chs.size(); ++l) {
    for (int r = 0; r < v.num_res_blocks; ++r) {
      p += KlResnet(c, chs[l]);
      c = chs[l];
    }
    if (l + 1 != chs.size()) p += Conv(c, c, 9);
  }
  p += 2 * KlResnet(c, c) + attention + 2 * c + Conv(c, 2 * z, 9);
  if (v.quant_conv) p += Conv(2 * z, 2 * z, 1) + Conv(z, z, 1);
  c = chs.back();  // decoder
  p += Conv(z, c, 9) + 2 * KlResnet(c, c) + attention;
  for (std::size_t l = chs.size(); l-- > 0;) {
    for (int r = 0; r <= v.num_res_blocks; ++r) {
      p += KlResnet(c, chs[l]);
      c = chs[l];
    }
    if (l != 0) p += Conv(c, c, 9);
  }
  return p + 2 * c + Conv(c, 3, 9);
}

// Wan-VAE (wan/modules/vae.py): causal 3D convolutions, RMS norms (one gain per channel), 2D
// resampling with a temporal convolution where the VAE strides in time.
double WanVaeParams(const Vae& v) {
  auto res = [](double in, double out) {
    double p = in + Conv(in, out, 27) + out + Conv(out, out, 27);
    if (in != out) p += Conv(in, out, 1);
    return p;
  };
  auto attention = [](double c) { return c + Conv(c, 3 * c, 1) + Conv(c, c, 1); };
  const int levels = static_cast<int>(v.ch_mult.size());
  const double z = v.z_channels;
  // The temporal stride sits at the deeper levels: log2(temporal_factor) of the levels between.
  const int temporal_levels = static_cast<int>(std::lround(std::log2(v.temporal_factor)));
  auto temporal_down = [&](int l) { return l >= levels - 1 - temporal_levels && l < levels - 1; };
  std::vector<double> dims = {D(v.ch)};
  for (int m : v.ch_mult) dims.push_back(D(v.ch) * m);
  double p = Conv(3, dims[0], 27);
  double c = dims[0];
  for (int l = 0; l < levels; ++l) {
    for (int r = 0; r < v.num_res_blocks; ++r) {
      p += res(c, dims[l + 1]);
      c = dims[l + 1];
    }
    if (l != levels - 1) p += Conv(c, c, 9) + (temporal_down(l) ? Conv(c, c, 3) : 0);
  }
  p += 2 * res(c, c) + attention(c) + c + Conv(c, 2 * z, 27);
  p += Conv(2 * z, 2 * z, 1) + Conv(z, z, 1);
  std::vector<double> up = {D(v.ch) * v.ch_mult.back()};
  for (int l = levels; l-- > 0;) up.push_back(D(v.ch) * v.ch_mult[l]);
  c = up[0];
  p += Conv(z, c, 27) + 2 * res(c, c) + attention(c);
  for (int i = 0; i < levels; ++i) {
    double in = i == 0 ? up[0] : up[i] / 2;  // the upsampling before halved the channels
    for (int r = 0; r <= v.num_res_blocks; ++r) {
      p += res(in, up[i + 1]);
      in = up[i + 1];
    }
    if (i != levels - 1) {
      const bool temporal = temporal_down(levels - 2 - i);
      p += Conv(in, in / 2, 9) + (temporal ? Conv(in, 2 * in, 3) : 0);
    }
    c = in;
  }
  return p + c + Conv(c, 3, 27);
}

// --- Working sets ------------------------------------------------------------------------------

// Bytes of one activation element: 16-bit compute unless fp32 weights run without autocast.
double ActivationBytes(const Denoiser& d, Precision p) {
  return p == Precision::kFp32 && !d.autocast_16bit ? 4 : 2;
}

std::string Fixed(double v, int decimals = 0) { return FormatFixed(v, decimals); }

}  // namespace

double DenoiserParams(const Denoiser& d) {
  switch (d.kind) {
    case DenoiserKind::kUnet:
      return UnetParams(d.unet);
    case DenoiserKind::kMmdit:
      return MmditParams(d.mmdit);
    case DenoiserKind::kWanDit:
      return WanParams(d.wan);
  }
  return 0;
}

double TextEncoderParams(const TextEncoder& t) {
  const double h = t.hidden, i = t.intermediate;
  if (t.kind == TextEncoderKind::kClipText) {
    const double layer = 4 * (h * h + h) + 4 * h + h * i + i + i * h + h;
    return t.vocab * h + t.positions * h + t.layers * layer + 2 * h + t.projection * h;
  }
  const double layer = 4 * h * t.inner + 2 * h + (t.gated ? 3 : 2) * h * i;
  const double bias_tables = (t.relative_bias_every_layer ? t.layers : 1) * D(t.relative_buckets) *
                             t.heads;
  return t.vocab * h + t.layers * layer + bias_tables + h;
}

double VaeParams(const Vae& v) {
  return v.kind == VaeKind::kAutoencoderKl ? KlParams(v) : WanVaeParams(v);
}

std::string_view OffloadName(Offload offload) {
  switch (offload) {
    case Offload::kNone:
      return "none";
    case Offload::kStages:
      return "stages";
    case Offload::kModel:
      return "model";
  }
  return "none";
}

Result<Offload> ParseOffload(std::string_view text) {
  for (Offload o : {Offload::kNone, Offload::kStages, Offload::kModel}) {
    if (text == OffloadName(o)) return o;
  }
  return BadField("offload", "offload must be none (everything stays on the GPU), stages (a "
                             "stage's model leaves once its stage is over) or model (only the "
                             "running stage's model is on the GPU)");
}

std::string_view GuidanceName(Guidance guidance) {
  switch (guidance) {
    case Guidance::kBatched:
      return "cfg-batched";
    case Guidance::kSequential:
      return "cfg-sequential";
    case Guidance::kDistilled:
      return "distilled";
  }
  return "cfg-batched";
}

Result<DiffusionEstimate> EstimateDiffusionMemory(const DiffusionModel& m,
                                                  const DiffusionWorkload& w) {
  DiffusionEstimate e;
  e.model_id = m.id;
  e.width = w.width > 0 ? w.width : m.default_width;
  e.height = w.height > 0 ? w.height : m.default_height;
  e.frames = w.frames > 0 ? w.frames : m.default_frames;
  e.batch = w.batch;
  for (auto [field, v, max] : {std::tuple{"width", e.width, m.max_width},
                               std::tuple{"height", e.height, m.max_height}}) {
    if (v < m.size_multiple || v > max || v % m.size_multiple != 0) {
      return BadField(field, std::string(field) + " must be a multiple of " +
                                 std::to_string(m.size_multiple) + " pixels from " +
                                 std::to_string(m.size_multiple) + " to " + std::to_string(max) +
                                 " for " + m.id + ", got " + std::to_string(v));
    }
  }
  const int tf = m.vae.temporal_factor;
  if (e.frames < 1 || e.frames > m.max_frames || (e.frames - 1) % tf != 0) {
    return BadField("frames", m.task == "video"
                                  ? "frames must be " + std::to_string(tf) + "n + 1 from 1 to " +
                                        std::to_string(m.max_frames) + " for " + m.id +
                                        " (its VAE decodes one latent frame into " +
                                        std::to_string(tf) + "), got " + std::to_string(e.frames)
                                  : m.id + " makes images: frames applies to video models");
  }
  if (w.batch < 1 || w.batch > kMaxDiffusionBatch) {
    return BadField("batch", "batch must be 1 to " + std::to_string(kMaxDiffusionBatch) +
                                 " images (videos) per prompt");
  }
  const Precision dp = w.precision.value_or(m.denoiser.precision);
  const Precision tp = w.text_encoder_precision.value_or(
      m.text_encoders.empty() ? Precision::kBf16 : m.text_encoders.front().precision);
  if (dp == Precision::kNf4 || tp == Precision::kNf4) {
    return BadField(dp == Precision::kNf4 ? "precision" : "text_encoder_precision",
                    "use int4 for 4-bit weights of a diffusion model (nf4 is QLoRA's format)");
  }

  // --- Weights, each with its formula.
  const double b = static_cast<double>(w.batch);
  auto weights = [](const std::string& name, double params, Precision p) {
    const double bytes = params * BytesPerParam(p);
    return Component{name, bytes,
                     FormatCount(params) + " params x " + FormatFixed(BytesPerParam(p), 1) +
                         " B/param (" + std::string(PrecisionName(p)) + ") = " + FormatGb(bytes)};
  };
  const Component denoiser = weights("denoiser_weights (" + m.denoiser.name + ")",
                                     DenoiserParams(m.denoiser), dp);
  std::vector<Component> encoders;
  for (const TextEncoder& t : m.text_encoders) {
    encoders.push_back(weights("text_encoder_weights (" + t.name + ")", TextEncoderParams(t),
                               w.text_encoder_precision.value_or(t.precision)));
  }
  const Component vae = weights("vae_weights (" + m.vae.name + ")", VaeParams(m.vae),
                                m.vae.precision);

  // --- Working sets.
  const double a = ActivationBytes(m.denoiser, dp);
  const double passes = m.guidance == Guidance::kBatched ? 2 : 1;
  const int latent_h = e.height / m.vae.spatial_factor, latent_w = e.width / m.vae.spatial_factor;
  const int latent_frames = (e.frames - 1) / tf + 1;
  Component denoise;
  denoise.name = "denoise_activations";
  const std::string images = std::to_string(w.batch) + (m.task == "video" ? " video" : " image") +
                             (w.batch == 1 ? "" : "s");
  const std::string pass_text = passes == 2 ? " x 2 (guidance batched)" : "";
  if (m.denoiser.kind == DenoiserKind::kUnet) {
    const UnetShape& u = m.denoiser.unet;
    int level = 0;
    while (level < static_cast<int>(u.transformer_depth.size()) && u.transformer_depth[level] == 0) {
      ++level;
    }
    level = std::min(level, static_cast<int>(u.channel_mult.size()) - 1);
    const double tokens = D(latent_h >> level) * (latent_w >> level);
    const double c = D(u.model_channels) * u.channel_mult[level];
    // The skip connections kept for the up path: conv_in, every ResBlock, every downsample.
    double skips = D(u.model_channels) * latent_h * latent_w;
    for (std::size_t l = 0; l < u.channel_mult.size(); ++l) {
      const double area = D(latent_h >> l) * (latent_w >> l);
      skips += u.num_res_blocks * D(u.model_channels) * u.channel_mult[l] * area;
      if (l + 1 != u.channel_mult.size()) {
        skips += D(u.model_channels) * u.channel_mult[l] * D(latent_h >> (l + 1)) * (latent_w >> (l + 1));
      }
    }
    e.latent_tokens = static_cast<std::int64_t>(tokens);
    denoise.bytes = (tokens * 15 * c + skips) * a * b * passes;
    denoise.formula = "(" + Fixed(tokens) + " tokens at attention level " + std::to_string(level) +
                      " x 15 x " + Fixed(c) + " channels + " + FormatCount(skips) +
                      " skip elements) x " + Fixed(a) + " B x " + images + pass_text + " = " +
                      FormatGb(denoise.bytes);
  } else {
    double tokens = 0, hidden = 0, ffn = 0;
    if (m.denoiser.kind == DenoiserKind::kMmdit) {
      const MmditShape& x = m.denoiser.mmdit;
      const double image = D(latent_h / x.patch) * (latent_w / x.patch);
      double text = 0;
      for (const TextEncoder& t : m.text_encoders) {
        if (t.kind == TextEncoderKind::kT5Encoder) text = std::max(text, D(t.tokens));
      }
      tokens = image + text;  // joint attention: the text tokens run through every block
      hidden = x.hidden;
      ffn = x.hidden * x.mlp_ratio;
      e.latent_tokens = static_cast<std::int64_t>(image);
    } else {
      const WanDitShape& x = m.denoiser.wan;
      tokens = D(latent_frames / x.patch_t) * (latent_h / x.patch_h) * (latent_w / x.patch_w);
      hidden = x.dim;
      ffn = x.ffn_dim;
      e.latent_tokens = static_cast<std::int64_t>(tokens);
    }
    const double r = m.denoiser.fp32_residual ? 4 : a;
    const double per_token = 3 * r * hidden + 2 * a * ffn;
    denoise.bytes = tokens * per_token * b * passes;
    denoise.formula = Fixed(tokens) + " tokens x (3 x " + Fixed(r) + " B x " + Fixed(hidden) +
                      " hidden + 2 x " + Fixed(a) + " B x " + Fixed(ffn) + " ffn) x " + images +
                      pass_text + " = " + FormatGb(denoise.bytes);
  }
  Component decode;
  decode.name = "decode_activations";
  {
    const double c_up = D(m.vae.ch) * m.vae.ch_mult.at(1);
    const double vb = BytesPerParam(m.vae.precision);
    decode.bytes = kVaeDecodeLiveCopies * c_up * tf * e.width * e.height * vb * b;
    decode.formula = Fixed(kVaeDecodeLiveCopies) + " x " + Fixed(c_up) + " channels x " +
                     std::to_string(tf) + (tf == 1 ? " frame" : " frames per latent frame") +
                     " x " + std::to_string(e.width) + " x " + std::to_string(e.height) + " x " +
                     Fixed(vb) + " B x " + images + " = " + FormatGb(decode.bytes);
  }
  Component encode;
  encode.name = "encode_activations";
  for (const TextEncoder& t : m.text_encoders) {
    const double bytes = D(t.tokens) * (4 * D(t.hidden) + 2 * D(t.intermediate)) * 2 * b;
    encode.bytes += bytes;
    encode.formula += (encode.formula.empty() ? "" : " + ") + std::to_string(t.tokens) +
                      " tokens x (4 x " + std::to_string(t.hidden) + " + 2 x " +
                      std::to_string(t.intermediate) + ") x 2 B";
  }
  encode.formula += " x " + images + " = " + FormatGb(encode.bytes);

  // --- Stages: what is resident in each.
  const bool te_gpu = !w.text_encoder_cpu && !m.text_encoders.empty();
  auto stage = [&](std::string name, bool with_te, bool with_denoiser, bool with_vae,
                   const Component& work) {
    DiffusionStage s;
    s.name = std::move(name);
    if (with_denoiser) s.components.push_back(denoiser);
    if (with_te && te_gpu) {
      for (const Component& c : encoders) s.components.push_back(c);
    }
    if (with_vae) s.components.push_back(vae);
    s.components.push_back(work);
    for (const Component& c : s.components) s.bytes += c.bytes;
    return s;
  };
  const bool none = w.offload == Offload::kNone, staged = w.offload == Offload::kStages;
  if (te_gpu) {
    e.stages.push_back(stage("encode", true, none || staged, none || staged, encode));
  }
  e.stages.push_back(stage("denoise", none, true, none || staged, denoise));
  e.stages.push_back(stage("decode", none, none, true, decode));
  const DiffusionStage* peak = &e.stages.front();
  for (const DiffusionStage& s : e.stages) {
    if (s.bytes > peak->bytes) peak = &s;
  }
  e.peak_stage = peak->name;

  MemoryEstimate& mem = e.memory;
  mem.model_id = m.id;
  mem.method = Method::kInference;
  mem.profile = Profile::kDetailed;
  mem.gpus = 1;
  mem.components = peak->components;
  mem.per_gpu_bytes = peak->bytes;
  mem.total_bytes = peak->bytes;
  mem.outside_allocator = {"cuda_context", kCudaContextBytes,
                           "CUDA context and library handles: " + FormatGb(kCudaContextBytes) +
                               " per GPU, outside the allocator"};
  mem.notes.push_back("peak at the " + e.peak_stage + " stage; offload " +
                      std::string(OffloadName(w.offload)) +
                      (w.text_encoder_cpu ? ", text encoders on the CPU" : ""));
  if (dp == Precision::kFp8 || dp == Precision::kInt8 || dp == Precision::kInt4) {
    mem.notes.push_back("weight-only " + std::string(PrecisionName(dp)) +
                        ": every denoiser parameter at " + FormatFixed(BytesPerParam(dp), 1) +
                        " B (scales and the layers a quantizer keeps in 16 bits not counted)");
  }
  for (const std::string& n : m.notes) mem.notes.push_back(n);
  return e;
}

}  // namespace gpuhub::sizing
