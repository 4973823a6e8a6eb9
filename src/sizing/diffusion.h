// Diffusion models (image and video generation): GPU memory at inference, component by component,
// with the formula behind every figure (docs/sizing-model.md, "Diffusion").
//
// A diffusion pipeline is three kinds of model run one after another:
//   1. text encoders (CLIP, T5) turn the prompt into embeddings            (the "encode" stage)
//   2. the denoiser (a UNet or a diffusion transformer) runs every step    (the "denoise" stage)
//   3. the VAE decoder turns the final latents into pixels                 (the "decode" stage)
// Memory at each stage = the weights resident on the GPU then + that stage's working set; the
// peak is the largest stage. What is resident depends on the offload mode:
//   none    everything stays on the GPU (diffusers `pipe.to("cuda")`);
//   stages  a stage's model leaves the GPU once its stage is over, the rest were loaded at start
//           (Wan2.1 generate.py --offload_model: the T5 after encoding, the DiT before decoding);
//   model   only the running stage's model is on the GPU (diffusers enable_model_cpu_offload);
// and `text_encoder_cpu` runs the text encoders on the CPU (Wan2.1 --t5_cpu).
//
// Shapes come from the bundled files data/diffusion/*.json (each field with its source: the
// models' own config files); parameter counts are computed from them (DenoiserParams,
// TextEncoderParams, VaeParams) and checked against published counts in diffusion_test.cc.
//
// Working sets (bytes; a = 2 for 16-bit compute, 4 for fp32; r = the residual stream's bytes):
//   transformer denoiser: tokens x images x passes x (3 x r x hidden + 2 x a x ffn)
//     tokens = latent patches (+ the text tokens of a joint-attention MMDiT), passes = 2 when
//     classifier-free guidance runs the conditional and unconditional halves as one batch
//   UNet: the first attention level's tokens x images x passes x 15 x C x a (a transformer block:
//     residual, norm and attention outputs 3C, GEGLU projection 8C, gated output 4C) + the skip
//     connections kept for the up path
//   VAE decode: 5 x C_up x frames per chunk x H x W x bytes(vae) x images decoded at once, where
//     C_up = the channels entering the decoder's last upsampling (ch x ch_mult[1]); 5 live copies
//     is calibrated on SDXL (see docs), checked on FLUX.1-dev and Wan2.1
//   text encoders: tokens x images x (4 x hidden + 2 x intermediate) x bytes
// The CUDA context (0.5 GB) is outside the allocator, as in the LLM detailed profile.
// Pure: parsing takes text, estimating takes values. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sizing/estimate.h"
#include "sizing/precision.h"

namespace gpuhub::sizing {

// The VAE decoder's live copies of its widest full-resolution activation (see the file comment):
// calibrated on SDXL's published peak (docs/sizing-model.md, "Diffusion").
inline constexpr double kVaeDecodeLiveCopies = 5;

enum class DenoiserKind { kUnet, kMmdit, kWanDit };
enum class TextEncoderKind { kClipText, kT5Encoder };
enum class VaeKind { kAutoencoderKl, kWanVae };
// How classifier-free guidance runs: both halves as one batch (diffusers SDXL), one after the
// other (Wan2.1), or not at all (guidance-distilled: FLUX.1-dev embeds the scale).
enum class Guidance { kBatched, kSequential, kDistilled };
enum class Offload { kNone, kStages, kModel };
Result<Offload> ParseOffload(std::string_view text);  // "none", "stages", "model"
std::string_view OffloadName(Offload offload);
std::string_view GuidanceName(Guidance guidance);  // "cfg-batched", "cfg-sequential", "distilled"

struct UnetShape {  // Stable Diffusion's UNet (sgm openaimodel / diffusers UNet2DConditionModel)
  int in_channels = 4, out_channels = 4, model_channels = 320;
  std::vector<int> channel_mult;       // per level: channels = model_channels x mult
  int num_res_blocks = 2;
  std::vector<int> transformer_depth;  // per level; 0 = no attention at that level
  int head_channels = 64;
  int context_dim = 2048;
  int adm_in_channels = 0;  // SDXL's size/crop conditioning input (0: none)
};
struct MmditShape {  // FLUX.1 (black-forest-labs/flux FluxParams)
  int hidden = 3072, heads = 24, double_blocks = 19, single_blocks = 38;
  double mlp_ratio = 4.0;
  int in_channels = 64, out_channels = 64, vec_in_dim = 768, context_in_dim = 4096;
  bool guidance_embed = true, qkv_bias = true;
  int patch = 2;
};
struct WanDitShape {  // Wan2.1 (wan/configs, WanModel)
  int dim = 1536, ffn_dim = 8960, heads = 12, layers = 30;
  int in_dim = 16, out_dim = 16, text_dim = 4096, freq_dim = 256;
  int patch_t = 1, patch_h = 2, patch_w = 2;
  bool cross_attn_norm = true;
};

struct Denoiser {
  DenoiserKind kind = DenoiserKind::kUnet;
  std::string name;  // "UNet (SDXL base)"
  UnetShape unet;
  MmditShape mmdit;
  WanDitShape wan;
  Precision precision = Precision::kBf16;  // the weights as the reference pipeline keeps them
  bool autocast_16bit = false;  // fp32 weights computed in bf16 (Wan2.1's amp.autocast)
  bool fp32_residual = false;   // the residual stream kept in fp32 (Wan2.1's blocks)
  std::string source;
};

struct TextEncoder {
  TextEncoderKind kind = TextEncoderKind::kClipText;
  std::string name;  // "CLIP ViT-L/14 text"
  int vocab = 0, hidden = 0, layers = 0, intermediate = 0, heads = 0;
  int positions = 0;   // CLIP: learned positions
  int projection = 0;  // CLIP: text_projection width (0: none)
  int inner = 0;       // T5: heads x d_kv
  bool gated = true;   // T5: gated-GELU (wi_0, wi_1)
  int relative_buckets = 32;
  bool relative_bias_every_layer = false;  // umT5: every layer has its own
  int tokens = 77;                         // the pipeline's max length
  Precision precision = Precision::kBf16;
  std::string source;
};

struct Vae {
  VaeKind kind = VaeKind::kAutoencoderKl;
  std::string name;
  int ch = 128;
  std::vector<int> ch_mult;
  int num_res_blocks = 2;
  int z_channels = 4;
  bool quant_conv = true;  // AutoencoderKL: quant_conv and post_quant_conv (FLUX's has none)
  int spatial_factor = 8;
  int temporal_factor = 1;  // frames one latent frame decodes to (Wan-VAE: 4)
  Precision precision = Precision::kBf16;
  std::string source;
};

struct DiffusionModel {
  std::string id;                  // "black-forest-labs/FLUX.1-dev"
  std::vector<std::string> names;  // short names: "flux.1-dev", "flux-dev"
  std::string task;                // "image" or "video"
  std::string pipeline;            // the reference pipeline the defaults follow
  Denoiser denoiser;
  std::vector<TextEncoder> text_encoders;
  Vae vae;
  Guidance guidance = Guidance::kBatched;
  int default_width = 1024, default_height = 1024, default_frames = 1;
  int max_width = 4096, max_height = 4096, max_frames = 1;
  int size_multiple = 8;  // width and height must be multiples (latent factor x patch / levels)
  std::string source_file;  // "data/diffusion/x.json"
  std::vector<std::string> notes;
};

// Parameter counts from the shapes (formulas in docs/sizing-model.md).
double DenoiserParams(const Denoiser& d);
double TextEncoderParams(const TextEncoder& t);
double VaeParams(const Vae& v);

struct DiffusionWorkload {
  int width = 0, height = 0, frames = 0;  // 0: the model's defaults
  std::int64_t batch = 1;                 // images (videos) per prompt
  std::optional<Precision> precision;     // the denoiser's weights (default: the model's)
  std::optional<Precision> text_encoder_precision;
  Offload offload = Offload::kNone;
  bool text_encoder_cpu = false;
};

struct DiffusionStage {
  std::string name;  // "encode", "denoise", "decode"
  std::vector<Component> components;  // resident weights, then the working set
  double bytes = 0;
};

struct DiffusionEstimate {
  std::string model_id;
  int width = 0, height = 0, frames = 0;
  std::int64_t batch = 1;
  std::int64_t latent_tokens = 0;  // the denoiser's tokens for one image/video
  std::vector<DiffusionStage> stages;
  std::string peak_stage;
  // The peak stage as a MemoryEstimate (components, per_gpu_bytes, the CUDA context outside the
  // allocator): what a card must hold, in the shape the LLM reports use.
  MemoryEstimate memory;
};

// invalid_argument naming the field ("width", "frames", "batch", "precision") for a workload the
// model cannot run: sizes not multiples of size_multiple or beyond its maximum, video frames not
// 4n + 1 for a 4x temporal VAE, a batch over kMaxDiffusionBatch.
Result<DiffusionEstimate> EstimateDiffusionMemory(const DiffusionModel& model,
                                                  const DiffusionWorkload& workload);

// A bundled model file (JSON). invalid_argument "<source>: <field>: what is wrong".
Result<DiffusionModel> ParseDiffusionModel(std::string_view json_text, std::string_view source);
// Every data/diffusion/*.json under `data_dir`, sorted by id.
Result<std::vector<DiffusionModel>> ListDiffusionModels(const std::string& data_dir);
// By id or short name, case-insensitive; not_found listing the bundled ones.
Result<DiffusionModel> FindDiffusionModel(std::string_view name, const std::string& data_dir);
// Whether `name` names a bundled diffusion model (the CLI's `size` dispatches on it).
bool IsDiffusionModelName(std::string_view name, const std::string& data_dir);

}  // namespace gpuhub::sizing
