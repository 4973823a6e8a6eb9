// Fit: the cheapest configuration of the term fleet that holds a job (spec/sizing.md §6).
//
// Rules, in the order they are applied to each candidate (card x count):
//  1. candidates are one card or 2, 4, 8 identical cards, as the card is rented (B200 from 2);
//  2. filters: --gpu NAME, CUDA only (no ROCm), region, FP8 needed (FP8 weights or KV cache);
//  3. multi-card sets are considered only when no single card passes the filters and holds the job
//     (stock and budget are filters too, so a single card that is out of stock or over budget lets
//     sets in);
//  4. full fine-tuning on several cards shards every step (ZeRO-3 all-reduce), so the cards must be
//     linked by NVLink, NVSwitch or Infinity Fabric within the card's sharded-training limit;
//     inference, LoRA and QLoRA split layers across any link;
//  5. it fits when each card holds its share: sizing::EstimateMemory with gpus = count (ZeRO-3 for
//     full fine-tuning across cards, and on one card too when parameters are offloaded), so the
//     2 GB runtime overhead is counted on every card. With one card this is the spec's
//     "required <= VRAM". A count the sizing engine refuses is excluded with its message; a
//     single card it refuses is an error (the job itself is invalid);
//  6. a larger set of a card that already fits in a smaller set is not listed (it only costs more);
//  7. in stock (free now >= count) and the monthly budget, when asked.
// Price = monthly x count x (1 - discount), integer micro-USD. Ranked by monthly price, then fewer
// cards, then more headroom, then name. "Tight": headroom under 5 GB on one card, under 2 GB per
// card in a set. Inference answers carry the single-stream decode ceiling (bandwidth of one card /
// weight bytes read per token; splitting layers does not raise it).
//
// Fit is pure: it reads the catalog and mutates nothing. Thread-safe for a const Catalog.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::fit {

struct Filters {
  bool cuda_only = false;
  std::optional<std::string> region;               // a region code of the catalog
  bool in_stock = false;                           // free now >= count
  std::optional<std::int64_t> max_monthly_micros;  // budget for the whole set, per month
  std::optional<std::string> gpu;                  // only this card of the term fleet
};

// Why a candidate was left out, in the order the rules are applied.
enum class Exclusion {
  kGpuFilter,        // --gpu names another card
  kCountNotRented,   // the card is not rented in sets of that size (B200 x1)
  kNotCuda,          // --cuda-only and the card runs ROCm
  kRegion,           // not offered in the region asked for
  kNeedsFp8,         // FP8 weights or KV cache on a card without FP8
  kSingleCardFits,   // a single card holds the job, so sets are not considered
  kShardedTraining,  // full fine-tuning cannot shard across this many of these cards
  kCannotSize,       // the sizing engine refuses this job on that many cards
  kDoesNotFit,       // each card's share is larger than its memory
  kSmallerSetFits,   // a smaller set of the same card already holds the job
  kOutOfStock,       // --in-stock and fewer cards free now than the set needs
  kOverBudget,       // the set's monthly price is above --max-monthly-usd
};
std::string_view ExclusionName(Exclusion exclusion);  // "does_not_fit", "over_budget", ...

struct Candidate {
  const catalog::TermGpu* gpu = nullptr;  // points into the Catalog given to Fit
  int count = 1;
  double per_card_bytes = 0;           // what each card must hold
  double headroom_bytes_per_card = 0;  // VRAM - per_card_bytes
  bool tight = false;
  std::int64_t discount_ppm = 0;
  std::int64_t monthly_micros = 0;  // the whole set
  std::int64_t weekly_micros = 0;
  std::int64_t hourly_micros = 0;
  bool in_stock = false;                   // free now >= count
  double decode_ceiling_tokens_per_s = 0;  // 0 for training
  // Per card, with the formulas; shared by every candidate with the same card count.
  std::shared_ptr<const sizing::MemoryEstimate> estimate;
};

struct Excluded {
  std::string gpu;
  int count = 1;
  Exclusion kind = Exclusion::kDoesNotFit;
  std::string reason;  // a sentence for people: "needs 71.3 GB per card, A40 has 48 GB"
};

// When no set of one node holds the job: the cheapest whole number of nodes (kNodeGpus cards
// each) that does, by list price. The fleet rents nodes of up to 8 cards, so this is a quote
// request (POST /v1/quote-requests), not a rental: the price is indicative.
inline constexpr int kNodeGpus = 8;
inline constexpr int kMaxFitNodes = 128;
struct MultiNodeFit {
  const catalog::TermGpu* gpu = nullptr;
  int nodes = 0;
  double per_card_bytes = 0;
  std::int64_t monthly_micros = 0;  // nodes x the 8-card set's monthly list price
};
// "five nodes of 8x MI300X"
std::string MultiNodeName(const MultiNodeFit& m);

struct FitResult {
  sizing::MemoryEstimate required;  // the job on one GPU: required.per_gpu_bytes is "required_gb"
  std::optional<MultiNodeFit> multi_node;  // set when nothing fits one node but nodes would
  bool needs_fp8 = false;
  bool considered_sets = false;    // no single card fit, so multi-card sets were ranked
  std::vector<Candidate> ranked;   // cheapest first; empty when nothing fits
  std::vector<Excluded> excluded;  // every candidate that was left out, with why
  std::string reason;              // when ranked is empty: why nothing fits and what to try
};

// Errors (invalid_argument, message says what to fix): workload invalid (sizing::ValidateWorkload),
// workload.gpus != 1 or a ZeRO stage set (fit picks the count and shards with ZeRO-3), unknown
// --gpu or --region, a negative budget, FP8 asked of the --gpu card, --cuda-only with a ROCm --gpu.
Status ValidateFitInput(const catalog::Catalog& catalog, const sizing::Workload& workload,
                        const Filters& filters);

struct FitOptions {
  // FitResult::excluded, every candidate left out with its sentence. Without, it is empty unless
  // nothing fits (FitResult::reason quotes those sentences then). The ranking is the same.
  bool exclusions = true;
};

Result<FitResult> Fit(const catalog::Catalog& catalog, const sizing::ModelShape& model,
                      const sizing::Workload& workload, const Filters& filters,
                      const FitOptions& options = {});

// True when the workload needs an FP8 card: FP8 (or FP4) weights (inference, LoRA base), an FP8
// KV cache or FP8 training.
bool NeedsFp8(const sizing::Workload& workload);
// FP4 weights: Blackwell cards only.
bool NeedsFp4(const sizing::Workload& workload);
bool HasFp4(catalog::Architecture architecture);

// Lines that show how a candidate's figures were made: each memory component's formula, the
// headroom, the price and the decode ceiling.
std::vector<std::string> ExplainCandidate(const Candidate& c);

// Why full fine-tuning cannot shard across `count` cards of `gpu` (its sharded-training limit).
std::string ShardedTrainingReason(const catalog::TermGpu& gpu, int count);

// The workload as `count` cards run it: full fine-tuning across cards shards with ZeRO-3, and
// parameter offload (full fine-tuning, LoRA, QLoRA) needs ZeRO-3 / FSDP on any count; otherwise
// LoRA/QLoRA and inference split the layers.
sizing::Workload OnCards(sizing::Workload workload, int count);
// What fit says to a --zero it was given (OnCards chooses the stage).
inline constexpr const char* kZeroIsFitsChoice =
    "fit picks how a set shares the job (ZeRO-3 for full fine-tuning and for offloaded "
    "parameters, layers split otherwise); drop --zero";

// A workload of `method` at its natural precision (nf4 for QLoRA, bf16 otherwise), every other
// field at its default: the reference jobs of the guide and the use-case views.
sizing::Workload WorkloadFor(sizing::Method method);

// "4x A100 SXM" or "RTX A5000".
std::string ConfigurationName(const std::string& gpu, int count);

}  // namespace gpuhub::fit
