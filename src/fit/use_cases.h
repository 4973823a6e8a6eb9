// Use-case views (`gpuhub catalog --use training|fine-tuning|inference`, GET /v1/use-cases/{use},
// the pages /use/<use>/): for one use, every card of both fleets with
//  - whether it is fit for that use and why (memory, tensor throughput, interconnect), as sentences
//    built from the figures below;
//  - the largest bundled model one card and eight cards hold for that use, sized by the engine
//    (sizing::EstimateMemory, the detailed profile of real models) with fit's rules for sets:
//      training     full fine-tuning (bf16 mixed precision, AdamW, seq 2048, batch 1,
//                   checkpointing); 8 cards shard with ZeRO-3 where the card's link allows it;
//      fine-tuning  LoRA and QLoRA (rank 16 on q/v, seq 2048, batch 1); 8 cards split the layers;
//      inference    BF16 and INT4 weights, 8,192 tokens of fp16 KV, batch 1; 8 cards split layers;
//  - a reference throughput from fit/rates.h with its error bar: training, tokens/s of a full
//    fine-tune of Llama-3.1-8B on 8 cards (ZeRO-3 or replicas) or on one card; fine-tuning, tokens/s
//    of Llama-3.1-8B LoRA (batch 4) on one card; inference, output tokens/s of Llama-3.1-8B BF16
//    at 32 sequences (1,024 in, 256 out) on one card, and its single-stream decode;
//  - the term prices (monthly, weekly, hourly) and the spot price: the book's best ask per GPU-hour
//    ("from $X/h") when live, else the catalog's opening ask;
//  - the cost of the reference job per million tokens at the term's hourly price, the order of the
//    fit cards (best value first); unfit cards follow.
// The view without prices depends only on the catalog and the bundled models: build it once
// (BuildUseCase) and apply the book's prices per request (ApplySpotPrices). Pure.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "fit/market_fit.h"
#include "sizing/diffusion.h"
#include "sizing/loader.h"

namespace gpuhub::fit {

// LLM uses, and general ones (use_cases_general.cc): image and video generation (the bundled
// diffusion models sized at their defaults), 3D rendering and VFX (RT cores, FP32, memory), and
// scientific computing and simulation (FP64, ECC).
enum class UseCase { kTraining, kFineTuning, kInference, kImageVideo, kRendering, kScience };
// "training", "fine-tuning", "inference", "image-video" (or image, video), "rendering" (or 3d,
// vfx), "science" (or scientific-computing, simulation, hpc)
Result<UseCase> ParseUseCase(std::string_view text);
std::string_view UseCaseName(UseCase use);
inline bool IsGeneralUseCase(UseCase use) {
  return use == UseCase::kImageVideo || use == UseCase::kRendering || use == UseCase::kScience;
}
inline constexpr UseCase kUseCases[] = {UseCase::kTraining,   UseCase::kFineTuning,
                                        UseCase::kInference,  UseCase::kImageVideo,
                                        UseCase::kRendering,  UseCase::kScience};

// The largest bundled model a configuration holds for one workload of the use.
struct LargestModel {
  std::string label;  // "full fine-tuning", "LoRA", "QLoRA", "BF16", "INT4"
  std::optional<std::string> one_card;    // model id; nullopt: none of the bundled models
  double one_card_params = 0;
  std::optional<std::string> eight_cards;  // nullopt: none, or 8 cards cannot do it
  double eight_cards_params = 0;
  std::string eight_cards_note;  // why not, or how ("ZeRO-3 over NVSwitch", "layers split")
};

struct UseCaseCard {
  std::string name;
  const catalog::TermGpu* term = nullptr;  // points into the Catalog given to BuildUseCase
  const catalog::SpotGpu* spot = nullptr;
  double vram_gb = 0;
  std::optional<double> bf16_tflops, fp8_tflops, bandwidth_gb_per_s;
  std::string interconnect;  // the link as published, and the sharded-training limit
  bool fit = false;
  std::vector<std::string> why;  // memory, tensor throughput, interconnect: one sentence each
  std::vector<LargestModel> largest;
  // The reference job: tokens/s and its held-out p90 band, and its cost per million tokens at the
  // term's hourly price (0 without a term price).
  std::string reference;
  double tokens_per_second = 0, tokens_per_second_low = 0, tokens_per_second_high = 0;
  double decode_tokens_per_second = 0;  // inference: one sequence
  double usd_per_million_tokens = 0;
  // General uses (image-video, rendering, science).
  catalog::GeneralSpecs general;  // FP32, FP64, ECC, RT cores as published, with the source
  struct DiffusionFit {
    std::string model;    // "black-forest-labs/FLUX.1-dev"
    std::string name;     // its short name, what --model takes ("flux.1-dev")
    std::string setting;  // "1024x1024, 1 image, bf16"
    double card_gb = 0;   // what the card must hold, offload none
    bool fits = false;
    double offloaded_card_gb = 0;  // with --offload model (diffusers enable_model_cpu_offload)
    bool fits_offloaded = false;
  };
  std::vector<DiffusionFit> diffusion;  // image-video: every bundled model at its defaults
  std::string value_metric;             // "BF16 TFLOPS", "RT TFLOPS", "FP64 TFLOPS"
  double value_tflops = 0;              // the card's figure of that metric
  double usd_per_tflops_hour = 0;       // hourly price / value_tflops (0: no price or figure)
  std::int64_t hourly_micros = 0;       // one card: term hourly, else the spot opening ask
  // Spot: set by ApplySpotPrices.
  std::optional<std::int64_t> spot_from_micros_per_gpu_hour;
  bool spot_live = false;
  int spot_gpus_on_offer = 0;
};

struct UseCaseView {
  UseCase use = UseCase::kTraining;
  std::string title;    // "LLM training"
  std::string summary;  // what matters for this use, one paragraph
  std::string reference;
  std::vector<UseCaseCard> cards;  // fit cards first, best value first
  std::vector<std::string> notes;
};

// invalid_argument when the bundled models cannot be sized (a broken data folder). The general
// uses read `diffusion` (image-video) and the catalog's [[card_specs]]; the LLM uses `models`.
Result<UseCaseView> BuildUseCase(const catalog::Catalog& catalog,
                                 const std::vector<sizing::BundledModel>& models, UseCase use,
                                 const std::vector<sizing::DiffusionModel>& diffusion = {});

// "from $X/h": the cheapest ask per GPU-hour of each card on `offers` (live), else the catalog's
// opening ask.
void ApplySpotPrices(const catalog::Catalog& catalog, std::span<const MarketOffer> offers,
                     bool live, UseCaseView& view);

std::string UseCaseJson(const UseCaseView& view);
std::string UseCaseText(const UseCaseView& view);

}  // namespace gpuhub::fit
