// The published guide, regenerated from the engine: every table is computed by
// sizing::EstimateMemory and fit::Fit on the presets of spec §4 and the loaded catalog, never typed
// in.
//
// Tables:
//  - kv_cache: per preset, KV bytes per token and at 8k / 32k / 128k tokens (8192, 32768, 131072;
//    fp16 KV, batch 1);
//  - inference: per preset, the total at bf16 / fp8 / int4 weights (8192 tokens, fp16 KV, batch 1);
//  - training: per preset, full fine-tuning without and with the 15% activation allowance, LoRA
//    (bf16 base) and QLoRA (nf4 base) with their activations, on one GPU; the published figure
//    beside a LoRA/QLoRA cell that differs from it by more than its rounding, with the reason;
//  - cheapest: per preset, fit's best answer for bf16 / fp8 / int4 inference, QLoRA, LoRA and full
//    fine-tuning, with no filters (nullopt + reason when nothing fits);
//  - cost: the term fleet's cost views (USD per GB-month, GB/s per USD-month, hourly, weekly,
//    break-even hours against the spot opening ask where the card trades on both).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "fit/fit.h"

namespace gpuhub::fit {

inline constexpr std::int64_t kGuideContexts[] = {8192, 32768, 131072};
inline constexpr const char* kGuideContextNames[] = {"8k", "32k", "128k"};
// Columns of the cheapest table, in order.
inline constexpr const char* kGuideCheapestColumns[] = {"bf16",  "fp8",  "int4",
                                                        "qlora", "lora", "full"};

struct GuideKvRow {
  std::string preset;
  double per_token_bytes = 0;
  double bytes[3] = {0, 0, 0};  // at kGuideContexts
};

struct GuideInferenceRow {
  std::string preset;
  double bf16_bytes = 0, fp8_bytes = 0, int4_bytes = 0;
};

// A figure of the published guide's table set beside the engine's, where they differ by more than
// the published table's rounding (whole GB, so 0.5 GB). Display only: fit and every other figure
// use the engine's number.
struct GuidePublishedFigure {
  double published_gb = 0;
  double engine_bytes = 0;
  // The same arithmetic with Llama 3's 128,256-token vocabulary instead of the presets' 32,000:
  // the part of the gap the logits explain.
  double engine_llama3_vocab_bytes = 0;
  std::string reason;  // a sentence for people, built from the figures above
};

struct GuideTrainingRow {
  std::string preset;
  double full_bytes = 0;                 // 16 B/param: weights, gradients, fp32 master, Adam
  double full_with_allowance_bytes = 0;  // + 15% quick rule
  double lora_bytes = 0;                 // bf16 base + adapters + activations + 2 GB
  double qlora_bytes = 0;                // nf4 base + adapters + activations + 2 GB
  double lora_activation_bytes = 0;      // the activations component of lora_bytes
  double qlora_activation_bytes = 0;
  std::optional<GuidePublishedFigure> lora_published;   // set only when off by > 0.5 GB
  std::optional<GuidePublishedFigure> qlora_published;  // set only when off by > 0.5 GB
};

// The published guide's LoRA/QLoRA figures in GB (gradient checkpointing, sequence 2048, batch
// 1, runtime reserve included), per preset: the comparison column of the training table.
struct GuidePublishedTraining {
  const char* preset;
  double lora_gb;
  double qlora_gb;
};
inline constexpr GuidePublishedTraining kGuidePublishedTraining[] = {
    {"7b", 21, 10}, {"13b", 33, 14}, {"34b", 79, 28}, {"70b", 156, 51}, {"405b", 856, 249}};
inline constexpr double kGuidePublishedRoundingGb = 0.5;  // the table gives whole GB
inline constexpr int kLlama3Vocab = 128256;

struct GuideCheapestCell {
  std::string preset;
  std::string column;  // one of kGuideCheapestColumns
  std::optional<Candidate> best;
  std::optional<MultiNodeFit> multi_node;  // no single node holds it: nodes, and a quote
  double required_bytes = 0;
  std::string reason;  // when best is empty
};

struct GuideCostRow {
  const catalog::TermGpu* gpu = nullptr;
  double usd_per_gb_month = 0;
  double gb_s_per_usd_month = 0;
  std::optional<std::string> spot_name;         // the same card on the spot exchange
  std::optional<std::int64_t> spot_ask_micros;  // its opening ask per GPU-hour
  std::optional<double> break_even_hours;       // monthly / spot ask
};

struct Guide {
  std::vector<GuideKvRow> kv_cache;
  std::vector<GuideInferenceRow> inference;
  std::vector<GuideTrainingRow> training;
  std::vector<GuideCheapestCell> cheapest;  // preset-major, kGuideCheapestColumns order
  std::vector<GuideCostRow> cost;           // catalog order
};

// The catalog must outlive the Guide (candidates and cost rows point into it).
Result<Guide> BuildGuide(const catalog::Catalog& catalog);

}  // namespace gpuhub::fit
