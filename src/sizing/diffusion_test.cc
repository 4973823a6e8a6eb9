// Diffusion sizing (diffusion.h) against published figures:
//  - parameter counts computed from the bundled shapes against the counts and sizes published for
//    the checkpoints;
//  - peaks against published measurements, each with its setting, its unit and the tolerance
//    docs/sizing-model.md ("Diffusion") states.
#include "sizing/diffusion.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpuhub::sizing {
namespace {

const std::string kDataDir = std::string(GPUHUB_SOURCE_DIR) + "/data";
constexpr double kGiB = 1024.0 * 1024 * 1024;

DiffusionModel Model(const std::string& name) {
  auto m = FindDiffusionModel(name, kDataDir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : DiffusionModel{};
}

double Within(double got, double want) { return std::abs(got - want) / want; }

TEST(DiffusionParams, Sdxl) {
  DiffusionModel m = Model("sdxl");
  // The UNet of stable-diffusion-xl-base-1.0: 2,567,463,684 parameters (the diffusers benchmark
  // dataset huggingface.co/datasets/diffusers/benchmarks lists its UNet2DConditionModel at
  // 2.57B); the two text encoders and the VAE as their checkpoints hold them.
  EXPECT_EQ(DenoiserParams(m.denoiser), 2'567'463'684.0);
  ASSERT_EQ(m.text_encoders.size(), 2u);
  EXPECT_EQ(TextEncoderParams(m.text_encoders[0]), 123'060'480.0);
  EXPECT_EQ(TextEncoderParams(m.text_encoders[1]), 694'659'840.0);
  EXPECT_EQ(VaeParams(m.vae), 83'653'863.0);
  // "The base SDXL model has 3.5B parameters" (huggingface.co/blog/simple_sdxl_optimizations).
  const double all = DenoiserParams(m.denoiser) + TextEncoderParams(m.text_encoders[0]) +
                     TextEncoderParams(m.text_encoders[1]) + VaeParams(m.vae);
  EXPECT_LT(Within(all, 3.5e9), 0.01);
}

TEST(DiffusionParams, FluxDevMatchesTheComponentSizesDiffusersPublished) {
  DiffusionModel m = Model("flux.1-dev");
  // huggingface.co/blog/diffusers-quantization: transformer 23.8 GB, T5 9.52 GB, CLIP 246 MB,
  // VAE 168 MB, all in BF16.
  EXPECT_EQ(DenoiserParams(m.denoiser), 11'901'408'320.0);
  EXPECT_NEAR(DenoiserParams(m.denoiser) * 2 / 1e9, 23.8, 0.05);
  ASSERT_EQ(m.text_encoders.size(), 2u);
  EXPECT_EQ(TextEncoderParams(m.text_encoders[0]), 123'060'480.0);
  EXPECT_NEAR(TextEncoderParams(m.text_encoders[0]) * 2 / 1e6, 246, 0.5);
  EXPECT_EQ(TextEncoderParams(m.text_encoders[1]), 4'762'310'656.0);
  EXPECT_NEAR(TextEncoderParams(m.text_encoders[1]) * 2 / 1e9, 9.52, 0.005);
  EXPECT_EQ(VaeParams(m.vae), 83'819'683.0);
  EXPECT_NEAR(VaeParams(m.vae) * 2 / 1e6, 168, 0.5);
}

TEST(DiffusionParams, Wan21) {
  DiffusionModel big = Model("wan2.1-t2v-14b");
  DiffusionModel small = Model("wan2.1-t2v-1.3b");
  EXPECT_EQ(DenoiserParams(big.denoiser), 14'288'491'584.0);
  EXPECT_EQ(DenoiserParams(small.denoiser), 1'418'996'800.0);
  // The names say 14B and 1.3B.
  EXPECT_LT(Within(DenoiserParams(big.denoiser), 14e9), 0.03);
  EXPECT_LT(Within(DenoiserParams(small.denoiser), 1.3e9), 0.1);
  ASSERT_EQ(big.text_encoders.size(), 1u);
  EXPECT_EQ(TextEncoderParams(big.text_encoders[0]), 5'680'910'336.0);
  EXPECT_EQ(VaeParams(big.vae), 126'892'531.0);
}

// SDXL at 1024x1024, one image, 16-bit, SDPA: torch.cuda.max_memory_allocated() 8.958 GiB
// (huggingface/diffusion-fast, collated_results_sdxl.csv in the sayakpaul/sample-datasets
// dataset, the run without compilation). The VAE decoder's live copies were calibrated on this
// figure: it checks the arithmetic, not the model.
TEST(DiffusionPeak, SdxlCalibration) {
  auto e = EstimateDiffusionMemory(Model("sdxl"), {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->peak_stage, "decode");
  EXPECT_LT(Within(e->memory.per_gpu_bytes, 8.958 * kGiB), 0.01)
      << e->memory.per_gpu_bytes / kGiB << " GiB";
  EXPECT_DOUBLE_EQ(e->memory.card_bytes(), e->memory.per_gpu_bytes + 0.5e9);
}

// FLUX.1-dev, BF16, 1024x1024, 50 steps, max_sequence_length 512, on one H100: "memory after
// loading" 31.447 and "peak memory" 36.166, printed by torch.cuda.max_memory_reserved() / 1024**3
// (huggingface.co/blog/diffusers-quantization). Reserved memory includes the caching allocator's
// unused blocks, which the estimate does not model: it is checked within 10%.
TEST(DiffusionPeak, FluxDevAgainstTheDiffusersQuantizationBlog) {
  auto e = EstimateDiffusionMemory(Model("flux-dev"), {});
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  double weights = 0;
  for (const auto& c : e->memory.components) {
    if (c.name.find("_weights") != std::string::npos) weights += c.bytes;
  }
  EXPECT_LT(Within(weights, 31.447 * kGiB), 0.01) << weights / kGiB << " GiB";
  EXPECT_LT(Within(e->memory.per_gpu_bytes, 36.166 * kGiB), 0.10)
      << e->memory.per_gpu_bytes / kGiB << " GiB";
  EXPECT_EQ(e->latent_tokens, 4096);
}

// Wan2.1's README, "Computational Efficiency on Different GPUs" (assets/comp_effic.png): peak
// GPU memory of T2V-14B at 720P on one GPU with --offload_model True, 69.1 GB (the same on H20,
// A100 and H100), and of T2V-1.3B at 480P on one RTX 4090 with --offload_model True --t5_cpu,
// 8.19 GB. Both with the reference generate.py: 81 frames.
TEST(DiffusionPeak, Wan21AgainstItsReadme) {
  DiffusionWorkload big;
  big.offload = Offload::kStages;
  auto e = EstimateDiffusionMemory(Model("wan-14b"), big);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  // At the first step the T5 encodes while the fp32 DiT (loaded at start) and the VAE are there.
  EXPECT_EQ(e->peak_stage, "encode");
  EXPECT_LT(Within(e->memory.per_gpu_bytes, 69.1e9), 0.03) << e->memory.per_gpu_bytes / 1e9;
  EXPECT_EQ(e->latent_tokens, 21 * 45 * 80);

  DiffusionWorkload small;
  small.offload = Offload::kStages;
  small.text_encoder_cpu = true;
  e = EstimateDiffusionMemory(Model("wan-1.3b"), small);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->peak_stage, "denoise");
  EXPECT_LT(Within(e->memory.per_gpu_bytes, 8.19e9), 0.05) << e->memory.per_gpu_bytes / 1e9;
}

TEST(DiffusionPeak, OffloadModesAndBatchMoveThePeak) {
  DiffusionModel flux = Model("flux-dev");
  auto none = EstimateDiffusionMemory(flux, {});
  DiffusionWorkload model;
  model.offload = Offload::kModel;
  auto offloaded = EstimateDiffusionMemory(flux, model);
  ASSERT_TRUE(none.ok() && offloaded.ok());
  // Only the transformer and its working set at the peak: 23.80 GB + its activations.
  EXPECT_EQ(offloaded->peak_stage, "denoise");
  EXPECT_LT(offloaded->memory.per_gpu_bytes, 25e9);
  EXPECT_GT(none->memory.per_gpu_bytes, offloaded->memory.per_gpu_bytes + 9e9);
  // Four images decode together: four times the decode working set.
  DiffusionWorkload four;
  four.batch = 4;
  auto batch = EstimateDiffusionMemory(flux, four);
  ASSERT_TRUE(batch.ok());
  const auto decode = [](const DiffusionEstimate& e) {
    for (const auto& c : e.memory.components) {
      if (c.name == "decode_activations") return c.bytes;
    }
    return 0.0;
  };
  EXPECT_DOUBLE_EQ(decode(*batch), 4 * decode(*none));
  // 5 x 256 channels x 1024 x 1024 x 2 B.
  EXPECT_DOUBLE_EQ(decode(*none), 5.0 * 256 * 1024 * 1024 * 2);
  // FP8 weights halve the transformer.
  DiffusionWorkload fp8;
  fp8.precision = Precision::kFp8;
  auto small = EstimateDiffusionMemory(flux, fp8);
  ASSERT_TRUE(small.ok());
  EXPECT_NEAR(none->memory.per_gpu_bytes - small->memory.per_gpu_bytes, 11'901'408'320.0, 1);
}

TEST(DiffusionWorkloads, BadInputNamesTheField) {
  DiffusionModel wan = Model("wan-14b");
  DiffusionWorkload w;
  w.frames = 80;  // not 4n + 1
  EXPECT_EQ(EstimateDiffusionMemory(wan, w).status().field(), "frames");
  w = {};
  w.width = 1000;  // not a multiple of 16
  EXPECT_EQ(EstimateDiffusionMemory(wan, w).status().field(), "width");
  w = {};
  w.height = 4096;
  EXPECT_EQ(EstimateDiffusionMemory(wan, w).status().field(), "height");
  w = {};
  w.batch = 0;
  EXPECT_EQ(EstimateDiffusionMemory(wan, w).status().field(), "batch");
  w = {};
  w.frames = 5;
  EXPECT_EQ(EstimateDiffusionMemory(Model("sdxl"), w).status().field(), "frames");
  EXPECT_EQ(FindDiffusionModel("stable-cascade", kDataDir).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ParseOffload("sometimes").status().field(), "offload");
}

TEST(DiffusionFiles, EveryFieldIsCheckedAndUnknownOnesRefused) {
  auto bundled = ListDiffusionModels(kDataDir);
  ASSERT_TRUE(bundled.ok()) << bundled.status().ToString();
  ASSERT_EQ(bundled->size(), 4u);
  for (const auto& m : *bundled) {
    EXPECT_NE(m.denoiser.source.find("https://github.com/"), std::string::npos) << m.id;
    EXPECT_NE(m.vae.source.find("https://github.com/"), std::string::npos) << m.id;
    auto e = EstimateDiffusionMemory(m, {});
    EXPECT_TRUE(e.ok()) << m.id << ": " << e.status().ToString();
  }
  auto bad = ParseDiffusionModel(R"({"id": "x", "colour": 1})", "x.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("x.json"), std::string::npos);
  EXPECT_FALSE(ParseDiffusionModel("[1, 2]", "y.json").ok());
  EXPECT_FALSE(ParseDiffusionModel(std::string(70'000, ' '), "z.json").ok());
}

}  // namespace
}  // namespace gpuhub::sizing
