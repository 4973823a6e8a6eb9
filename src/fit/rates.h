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
#include "sizing/parallel.h"

namespace gpuhub::fit {

// How the cards of a configuration share the job, in one word (the layout itself,
// sizing::Layout, says it all: degrees and ZeRO stage).
enum class Parallelism {
  kSingle,          // one card
  kDataParallel,    // every card holds the whole job and runs its own micro-batches (replicas)
  kSharded,         // data parallel with ZeRO-3/FSDP: weights, gradients and state sharded
  kLayerSplit,      // the layers split across the cards, which work one after another
  kTensorParallel,  // every layer split across the cards (and data-parallel groups of those)
  kPipeline,        // pipeline stages working on micro-batches at once (1F1B, serving engines)
  kHybrid,          // tensor and pipeline (and context) parallel together
};
// "single", "data-parallel", "zero3-sharded", "layer-split", "tensor-parallel", "pipeline",
// "hybrid".
std::string_view ParallelismName(Parallelism p);
Parallelism ParallelismOf(const sizing::Layout& layout);
// The workload as `count` cards run it with the legacy meaning of `parallelism` (data parallel
// replicas, ZeRO-3, a layer split): for callers that name a Parallelism rather than a layout.
sizing::Workload WithParallelism(sizing::Workload workload, int count, Parallelism parallelism);

// Machines hold up to this many cards; a larger set is whole nodes (the fleet rents nodes of up
// to 8 cards, so more than one needs a quote: POST /v1/quote-requests).
inline constexpr int kGpusPerNode = 8;
// Between nodes, per GPU, one way: 400 Gb/s InfiniBand or RoCE per GPU (DGX H100/H200/B200 and
// the MI300X platforms ship one 400G NIC per GPU) = 50 GB/s. An assumption, stated in every
// multi-node answer; the fleet's own nodes publish no inter-node figure. A collective whose
// group has k members on each node crosses between nodes over k NICs at once (NCCL's rings and
// trees use every NIC), capped by the link inside the node.
inline constexpr double kInterNodeGbPerSPerGpu = 50;
// The fixed cost of one collective (all-reduce of a small message) on a link between cards of a
// node, NVLink/NVSwitch/Infinity Fabric; PCIe peer-to-peer twice it; between nodes 3 times.
// Calibrated on gpt-fast's Llama-2-7B tensor-parallel decode on 2 A100s (docs/sizing-model.md §6).
inline constexpr double kCollectiveLatencySeconds = 17e-6;
inline constexpr double kPcieCollectiveLatencyFactor = 2;
inline constexpr double kInterNodeCollectiveLatencyFactor = 3;
// FP8 training: the linear layers' matmuls reach this share of the FP8 peak that BF16 matmuls
// reach of the BF16 peak (casts, scaling, the unquantized attention); calibrated on two PyTorch
// FP8 runs on 8 H100s, llm-foundry's MPT-3B and torchtitan's Llama 3.1 8B with torchao's float8
// (docs/sizing-model.md §6).
inline constexpr double kFp8MatmulEfficiency = 0.72;
// The Megatron stack (Transformer Engine's FP8 GEMMs, cuDNN's fused attention): its FP8
// matmuls calibrated on NeMo's Llama 2 7B pre-training on 8 H100s; its attention takes the
// Ampere share of FlashAttention-2 (cuDNN's Hopper kernels use the asynchronous tensor cores).
inline constexpr double kMegatronFp8MatmulEfficiency = 0.91;
// Attention's share of the matmuls' utilisation (Utilisation::attention): on Hopper (and the
// cards without their own figure) calibrated on llm-foundry's MPT-7B at a 32,768-token sequence
// on 8 H100s (FlashAttention-2 does not use Hopper's asynchronous tensor cores); on Ampere and Ada
// FlashAttention-2's published 50-73% of the A100's peak against ~85% for large GEMMs (Dao 2023).
inline constexpr double kAttentionEfficiency = 0.36;
inline constexpr double kAmpereAttentionEfficiency = 0.75;

// What a card family reaches, as fractions of its published peaks: the assumptions of the plan.
struct Utilisation {
  double training = 0;          // of dense tensor TFLOPS, at a saturated micro-batch
  double prefill = 0;           // of dense tensor TFLOPS, serving a prompt
  double decode_bandwidth = 0;  // of memory bandwidth, one decode step (16-bit and FP8 weights)
  std::string source;           // where the factors were calibrated
  // Attention (FlashAttention's kernels, whose backward recomputes the scores) reaches this
  // share of the utilisation the matmuls reach.
  double attention = 1;
};
// Weight-only int8/int4 kernels (GPTQ, AWQ, Marlin) dequantize while they read: a decode step
// reaches this share of decode_bandwidth (Qwen2.5's vLLM speed benchmark on A100, 7B rows).
inline constexpr double kInt8DecodeEfficiency = 0.78;
inline constexpr double kInt4DecodeEfficiency = 0.63;
// Rows a tensor-core GEMM computes however few sequences a decode step carries: Hopper's
// wgmma and Blackwell's tcgen05 instructions are 64 rows deep (PTX ISA: wgmma.mma_async
// m64nNk16; tcgen05.mma M = 64 or 128), Ampere/Ada's mma.sync and CDNA's MFMA 16. Measured on an
// H20 (InferSim's DeepGEMM table, bench_data/gemm/h20): 16, 32 and 64 rows take the same time.
// It binds only where the card's FLOPs per byte of bandwidth are low (the H20: 148 BF16 TFLOPS on
// 4.0 TB/s); the weight-only int4/int8 kernels (Marlin, GPTQ) use mma.sync and llama.cpp's
// batch-1 matrix-vector kernels no tensor cores at all. The GeForce/RTX PRO Blackwell parts
// (sm_120, PCIe only) have no tcgen05: mma.sync as Ada; the NVLink Blackwell parts are sm_100.
inline constexpr int kWgmmaTileRows = 64;
inline constexpr int kMmaTileRows = 16;
struct CardRates;
int DecodeTileRows(const CardRates& card, sizing::Precision precision,
                   sizing::ServingEngine engine);
// The calibrated defaults (docs/sizing-model.md §6 gives the sources and the fit).
Utilisation DefaultUtilisation(catalog::Architecture architecture, sizing::Method method);
// Training matmuls over a micro-batch of T tokens reach training x T / (T + this): small
// micro-batches leave the tensor cores idle (launches, the optimizer, thin GEMMs).
inline constexpr double kHalfUtilisationTokens = 512;
// A PCIe peer-to-peer link whose speed the catalog does not publish: PCIe Gen4 x16, one way.
inline constexpr double kUnpublishedPcieGbPerS = 32;

// How far the estimates are from published throughput they were not tuned on (the evaluation runs
// of data/benchmarks/throughput-evaluation.json, docs/sizing-model.md §6;
// fit/throughput_evaluation_test.cc recomputes them and fails when they drift): the error band
// every tokens/s of the plan carries, by kind. Fractions of the measured figure.
struct ErrorBand {
  double median = 0;
  double p90 = 0;
  int runs = 0;  // evaluation runs of this kind
};
enum class EstimateKind { kTrainingSingle, kTrainingMulti, kServingSingle, kServingMulti };
std::string_view EstimateKindName(EstimateKind kind);  // "training, one card", ...
ErrorBand HeldOutBand(EstimateKind kind);
EstimateKind KindOf(bool serving, int gpus);
// The memory model's held-out band (data/benchmarks/memory-evaluation.json, checked by
// fit/memory_evaluation_test.cc), by the EstimateKindName of the job, and over every run.
ErrorBand HeldOutMemoryBand(std::string_view kind_name);
ErrorBand HeldOutMemoryBandAll();
// Every kind of a side together (the figures of the README and the docs' summary table).
inline constexpr double kTrainingHeldOutMedianError = 0.1128;
inline constexpr double kTrainingHeldOutP90Error = 0.2317;
inline constexpr double kServingHeldOutMedianError = 0.0861;
inline constexpr double kServingHeldOutP90Error = 0.2109;

// One card's published rates, from the term fleet or the spot exchange.
struct CardRates {
  std::string name;
  catalog::Architecture architecture = catalog::Architecture::kUnknown;
  catalog::Interconnect interconnect = catalog::Interconnect::kPcie;
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

// One way, per GPU, for a collective over `group` cards spaced `stride` apart in a set of `gpus`:
// the node's link when the group stays inside a node, else the slower of it and the inter-node
// assumption. nullopt when the node's link is not published. `note` says which.
std::optional<double> GroupLinkGbPerS(const CardRates& card, int gpus, int group, int stride,
                                      std::string* note);

struct TrainingRate {
  double tokens_per_second = 0;  // the whole configuration
  double step_seconds = 0;       // one optimizer step
  double tokens_per_step = 0;
  double utilisation = 0;  // applied to the tensor peak (after the micro-batch term)
  // Where a step's time goes (seconds per step): computing, tensor-parallel collectives, the
  // pipeline's idle bubble, data-parallel gradient exchange not hidden behind the backward, the
  // optimizer step.
  double compute_seconds = 0, tensor_parallel_seconds = 0, bubble_seconds = 0,
         data_parallel_seconds = 0, optimizer_seconds = 0;
  std::vector<std::string> explain;
};
// The layout is the workload's (gpus, tensor/pipeline/context/data parallel, ZeRO stage:
// sizing::LayoutOf). invalid_argument when the card's BF16 throughput is not published, FP8
// training on a card without FP8, or data parallel full fine-tuning over an unpublished link.
Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model,
                                    const sizing::Workload& workload, const CardRates& card,
                                    const UtilisationOverride& override_factors);
// The legacy form: `count` cards sharing the job as `parallelism` says (WithParallelism).
Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model,
                                    const sizing::Workload& workload, const CardRates& card,
                                    int count, Parallelism parallelism,
                                    const UtilisationOverride& override_factors);

struct ServingRate {
  double output_tokens_per_second = 0;  // the configuration (every replica of it), at the batch
  // Prompt tokens per second while prefilling, and decode tokens per second (batch / step) of the
  // configuration: the two rates a serving benchmark reports separately.
  double prompt_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  double prefill_seconds_per_request = 0;
  double decode_step_seconds = 0;
  double tensor_parallel_seconds_per_step = 0;  // of decode_step_seconds
  double utilisation_prefill = 0, decode_bandwidth = 0;
  std::vector<std::string> explain;
};
// `prompt_tokens` (0 allowed: decode only), `output_tokens`: an average request; the batch is
// workload.batch (sequences decoded together by one replica); the layout and engine are the
// workload's (data-parallel ranks are replicas). invalid_argument when the card's bandwidth or
// tensor throughput is not published, or FP4 weights on a card without FP4.
Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& workload,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, const UtilisationOverride& override_factors);
// The legacy form (WithParallelism).
Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& workload,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, int count, Parallelism parallelism,
                                  const UtilisationOverride& override_factors);

}  // namespace gpuhub::fit
