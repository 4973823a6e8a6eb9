// How fast a configuration of cards runs a job: the work of sizing/throughput.h over a card's
// published dense tensor throughput and memory bandwidth, at a utilisation factor per card
// architecture and setup (calibrated on published tokens/s, docs/sizing-model.md §6) that the
// caller may replace. Pure; every figure comes with the lines that show how it was made.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::fit {

// How the cards of a configuration share the job.
enum class Parallelism {
  kSingle,        // one card
  kDataParallel,  // every card holds the whole job and runs its own micro-batches (replicas)
  kSharded,       // full fine-tuning with ZeRO-3/FSDP: weights, gradients and state sharded
  kLayerSplit,    // the layers split across the cards, which work one after another
};
std::string_view ParallelismName(Parallelism p);  // "single", "data-parallel", ...

// What a card family reaches, as fractions of its published peaks: the assumptions of the plan.
struct Utilisation {
  double training = 0;          // of dense tensor TFLOPS, at a saturated micro-batch
  double prefill = 0;           // of dense tensor TFLOPS, serving a prompt
  double decode_bandwidth = 0;  // of memory bandwidth, one decode step (16-bit and FP8 weights)
  std::string source;           // where the factors were calibrated
};
// Weight-only int8/int4 kernels (GPTQ, AWQ, Marlin) dequantize while they read: a decode step
// reaches this share of decode_bandwidth (Qwen2.5's vLLM speed benchmark on A100, 7B rows).
inline constexpr double kInt8DecodeEfficiency = 0.78;
inline constexpr double kInt4DecodeEfficiency = 0.63;
// The calibrated defaults (docs/sizing-model.md §6 gives the sources and the fit).
Utilisation DefaultUtilisation(catalog::Architecture architecture, sizing::Method method);
// Training matmuls over a micro-batch of T tokens reach training x T / (T + this): small
// micro-batches leave the tensor cores idle (launches, the optimizer, thin GEMMs).
inline constexpr double kHalfUtilisationTokens = 512;
// A PCIe peer-to-peer link whose speed the catalog does not publish: PCIe Gen4 x16, one way.
inline constexpr double kUnpublishedPcieGbPerS = 32;

// How far the estimates are from published throughput they were not tuned on (the held-out rows
// of docs/sizing-model.md §6; fit/rates_test.cc recomputes them and fails when they drift): the
// error bar every tokens/s of the plan carries. Fractions of the measured figure.
inline constexpr double kTrainingHeldOutMedianError = 0.152;
inline constexpr double kTrainingHeldOutP90Error = 0.425;
inline constexpr double kServingHeldOutMedianError = 0.073;
inline constexpr double kServingHeldOutP90Error = 0.183;

// One card's published rates, from the term fleet or the spot exchange.
struct CardRates {
  std::string name;
  catalog::Architecture architecture = catalog::Architecture::kUnknown;
  std::optional<double> bf16_tflops, fp8_tflops, bandwidth_gb_per_s;
  // Between the cards of one machine, one direction (NVLink/NVSwitch/Infinity Fabric figures are
  // published as the sum of both directions: halved). nullopt: no multi-card link known.
  std::optional<double> link_gb_per_s_one_way;
  std::string link_note;  // how link_gb_per_s_one_way was read
};
CardRates RatesOf(const catalog::TermGpu& gpu);
CardRates RatesOf(const catalog::SpotGpu& gpu, const catalog::TermGpu* same_card_in_term);

// The caller's replacements for the calibrated factors (nullopt: the default).
struct UtilisationOverride {
  std::optional<double> training_or_prefill;
  std::optional<double> decode_bandwidth;
};

struct TrainingRate {
  double tokens_per_second = 0;  // the whole configuration
  double step_seconds = 0;       // one optimizer step
  double tokens_per_step = 0;
  double utilisation = 0;  // applied to the tensor peak (after the micro-batch term)
  std::vector<std::string> explain;
};
// invalid_argument when the card's BF16 throughput is not published.
Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model,
                                    const sizing::Workload& workload, const CardRates& card,
                                    int count, Parallelism parallelism,
                                    const UtilisationOverride& override_factors);

struct ServingRate {
  double output_tokens_per_second = 0;  // one replica (the configuration), at the batch
  double prefill_seconds_per_request = 0;
  double decode_step_seconds = 0;
  double utilisation_prefill = 0, decode_bandwidth = 0;
  std::vector<std::string> explain;
};
// `prompt_tokens`, `output_tokens`: an average request; the batch is workload.batch (concurrent
// sequences). invalid_argument when the card's bandwidth or tensor throughput is not published.
Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& workload,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, int count, Parallelism parallelism,
                                  const UtilisationOverride& override_factors);

}  // namespace gpuhub::fit
