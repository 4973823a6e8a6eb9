#include "fit/rates.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "fit/rates_internal.h"

namespace gpuhub::fit {

using catalog::Architecture;
using sizing::Method;
using sizing::Precision;

std::string_view ParallelismName(Parallelism p) {
  switch (p) {
    case Parallelism::kSingle:
      return "single";
    case Parallelism::kDataParallel:
      return "data-parallel";
    case Parallelism::kSharded:
      return "zero3-sharded";
    case Parallelism::kLayerSplit:
      return "layer-split";
    case Parallelism::kTensorParallel:
      return "tensor-parallel";
    case Parallelism::kPipeline:
      return "pipeline";
    case Parallelism::kHybrid:
      return "hybrid";
  }
  return "?";
}

Parallelism ParallelismOf(const sizing::Layout& l) {
  if (l.single()) return Parallelism::kSingle;
  if (l.layer_split) return Parallelism::kLayerSplit;
  const int split_kinds = (l.tensor > 1) + (l.pipeline > 1) + (l.context > 1);
  if (split_kinds > 1) return Parallelism::kHybrid;
  if (l.tensor > 1) return Parallelism::kTensorParallel;
  if (l.pipeline > 1) return Parallelism::kPipeline;
  if (l.context > 1) return Parallelism::kHybrid;
  return l.zero_stage >= 3 || l.fsdp_base ? Parallelism::kSharded : Parallelism::kDataParallel;
}

sizing::Workload WithParallelism(sizing::Workload w, int count, Parallelism p) {
  w.gpus = count;
  w.data_parallel = 0;
  w.tensor_parallel = w.pipeline_parallel = w.context_parallel = w.virtual_pipeline = 1;
  if (count <= 1) return w;
  switch (p) {
    case Parallelism::kSingle:
    case Parallelism::kLayerSplit:
      break;  // the legacy meaning: full fine-tuning data parallel, the rest layers split
    case Parallelism::kDataParallel:
      w.data_parallel = count;
      if (w.method == Method::kFullFineTune && w.zero_stage == 3) w.zero_stage = 0;
      break;
    case Parallelism::kSharded:
      w.data_parallel = count;
      if (w.method != Method::kInference) w.zero_stage = 3;
      break;
    case Parallelism::kTensorParallel:
    case Parallelism::kHybrid:
      w.tensor_parallel = count;
      break;
    case Parallelism::kPipeline:
      w.pipeline_parallel = count;
      break;
  }
  return w;
}

std::string_view EstimateKindName(EstimateKind kind) {
  switch (kind) {
    case EstimateKind::kTrainingSingle:
      return "training, one card";
    case EstimateKind::kTrainingMulti:
      return "training, several cards";
    case EstimateKind::kServingSingle:
      return "serving, one card";
    case EstimateKind::kServingMulti:
      return "serving, several cards";
  }
  return "?";
}

EstimateKind KindOf(bool serving, int gpus) {
  if (serving) return gpus > 1 ? EstimateKind::kServingMulti : EstimateKind::kServingSingle;
  return gpus > 1 ? EstimateKind::kTrainingMulti : EstimateKind::kTrainingSingle;
}

int DecodeTileRows(const CardRates& card, sizing::Precision precision,
                   sizing::ServingEngine engine) {
  if (engine == sizing::ServingEngine::kLlamaCpp) return 1;
  if (precision == sizing::Precision::kInt8 || precision == sizing::Precision::kInt4 ||
      precision == sizing::Precision::kNf4) {
    return kMmaTileRows;
  }
  const bool sm100 = card.architecture == Architecture::kBlackwell &&
                     card.interconnect != catalog::Interconnect::kPcie;
  return card.architecture == Architecture::kHopper || sm100 ? kWgmmaTileRows : kMmaTileRows;
}

Utilisation DefaultUtilisation(Architecture a, Method m) {
  // Training at a saturated micro-batch, of the dense BF16 peak, from published tokens/s (the
  // calibration table of docs/sizing-model.md §6 and fit/rates_test.cc). QLoRA's bitsandbytes
  // matmuls dequantize every weight first and reach less of the peak than LoRA's.
  Utilisation u;
  switch (a) {
    case Architecture::kAmpere:
      u = {0.62, 0.62, 0.67,
           "A100: llm-foundry (mosaicml) MPT benchmarks and torchtitan Llama 3 on A100; "
           "decode: Qwen2.5 vLLM speed benchmark on A100"};
      break;
    case Architecture::kHopper:
      u = {0.50, 0.50, 0.67,
           "H100: llm-foundry (mosaicml) MPT benchmarks, BF16; decode as ampere (vLLM)"};
      break;
    case Architecture::kAda:
      u = {0.40, 0.40, 0.67,
           "L40S: Hugging Face PEFT MetaMathQA runs (LoRA and full fine-tuning of Llama-3.2-3B); "
           "decode as ampere (vLLM)"};
      break;
    case Architecture::kBlackwell:
      u = {0.50, 0.50, 0.67,
           "not calibrated on Blackwell: the hopper factors (Megatron-Bridge's B200 FP8 "
           "pre-training reaches 2.1x H100's tokens/s per GPU, as the 2.3x peak suggests)"};
      break;
    case Architecture::kCdna3:
      u = {0.28, 0.28, 0.60,
           "MI300X: 0.74 x the peak ratio of H200 in a single-GPU 8B BF16 training comparison "
           "(H200 1.32-1.40x faster; alpharomercoma/MI300X-vs-H200)"};
      break;
    case Architecture::kUnknown:
      u = {0.40, 0.40, 0.60, "architecture not in the catalog: a conservative default"};
      break;
  }
  u.attention = a == Architecture::kAmpere || a == Architecture::kAda ? kAmpereAttentionEfficiency
                                                                      : kAttentionEfficiency;
  if (m == Method::kQlora) u.training *= 0.8;
  return u;
}

namespace {

std::optional<double> OneWay(catalog::Interconnect k, std::optional<double> published,
                             std::string* note) {
  if (!published) {
    if (k == catalog::Interconnect::kPcie) {
      *note = "PCIe link speed not published: PCIe Gen4 x16, " +
              FormatFixed(kUnpublishedPcieGbPerS, 0) + " GB/s one way, assumed";
      return kUnpublishedPcieGbPerS;
    }
    *note = "link speed not published";
    return std::nullopt;
  }
  if (k == catalog::Interconnect::kPcie) {
    *note = "PCIe " + FormatFixed(*published, 0) + " GB/s one way";
    return *published;
  }
  *note = std::string(catalog::InterconnectName(k)) + " " + FormatFixed(*published, 0) +
          " GB/s published for both directions: " + FormatFixed(*published / 2, 0) +
          " GB/s one way";
  return *published / 2;
}

}  // namespace

CardRates RatesOf(const catalog::TermGpu& g) {
  CardRates r;
  r.name = g.name;
  r.architecture = g.compute.architecture;
  r.bf16_tflops = g.compute.bf16_dense_tflops;
  r.fp8_tflops = g.compute.fp8_dense_tflops;
  r.bandwidth_gb_per_s = g.bandwidth_gb_per_s;
  r.interconnect = g.interconnect;
  r.link_gb_per_s_one_way = OneWay(g.interconnect, g.link_gb_per_s, &r.link_note);
  return r;
}

CardRates RatesOf(const catalog::SpotGpu& g, const catalog::TermGpu* term) {
  CardRates r;
  if (term != nullptr) r = RatesOf(*term);  // link and FP8 from the same card in the term fleet
  r.name = g.name;
  r.architecture = g.compute.architecture;
  r.bf16_tflops = g.bf16_dense_tflops;
  r.fp8_tflops = g.compute.fp8_dense_tflops;
  r.bandwidth_gb_per_s = g.bandwidth_gb_per_s;
  if (term == nullptr) r.link_note = "link between the cards of a machine not published";
  return r;
}

ErrorBand HeldOutBand(EstimateKind kind) {
  // The held-out figures fit/throughput_evaluation_test.cc measures on the evaluation runs of
  // data/benchmarks/throughput-evaluation.json (it fails when they drift from these).
  switch (kind) {
    case EstimateKind::kTrainingSingle:
      return {0.3202, 0.5521, 4};
    case EstimateKind::kTrainingMulti:
      return {0.1110, 0.2277, 68};
    case EstimateKind::kServingSingle:
      return {0.0863, 0.2165, 56};
    case EstimateKind::kServingMulti:
      return {0.0845, 0.1657, 29};
  }
  return {};
}

ErrorBand HeldOutMemoryBand(std::string_view kind) {
  // Measured by fit/memory_evaluation_test.cc on data/benchmarks/memory-evaluation.json.
  if (kind == EstimateKindName(EstimateKind::kTrainingSingle)) return {0.0603, 0.0956, 7};
  if (kind == EstimateKindName(EstimateKind::kTrainingMulti)) return {0.0720, 0.2174, 16};
  if (kind == EstimateKindName(EstimateKind::kServingSingle)) return {0.0040, 0.0286, 30};
  if (kind == EstimateKindName(EstimateKind::kServingMulti)) return {0, 0, 0};
  return {};
}

ErrorBand HeldOutMemoryBandAll() { return {0.0239, 0.0950, 53}; }

std::optional<double> GroupLinkGbPerS(const CardRates& card, int gpus, int group, int stride,
                                      std::string* note) {
  const bool crosses_nodes = gpus > kGpusPerNode && group * stride > kGpusPerNode;
  std::optional<double> intra = card.link_gb_per_s_one_way;
  if (!crosses_nodes || !intra) {
    if (note != nullptr) *note = card.link_note;
    return intra;
  }
  // Members of the group on one node: those `stride` apart within its kGpusPerNode cards.
  const int per_node = std::max(1, std::min(group, kGpusPerNode / std::max(1, stride)));
  const double link = std::min(*intra, per_node * kInterNodeGbPerSPerGpu);
  if (note != nullptr) {
    *note = "across nodes: " + std::to_string(per_node) + " x " +
            FormatFixed(kInterNodeGbPerSPerGpu, 0) +
            " GB/s one way (400 Gb/s per GPU between nodes, assumed; " + std::to_string(per_node) +
            " of the group's cards per node)" +
            (link < *intra ? "" : ", capped by " + card.link_note);
  }
  return link;
}

}  // namespace gpuhub::fit

namespace gpuhub::fit::rates_internal {

double CollectiveLatencySeconds(const CardRates& card, int gpus, int group, int stride) {
  double latency = kCollectiveLatencySeconds;
  if (card.interconnect == catalog::Interconnect::kPcie || !card.link_gb_per_s_one_way) {
    latency *= kPcieCollectiveLatencyFactor;
  }
  if (gpus > kGpusPerNode && group * stride > kGpusPerNode) {
    latency *= kInterNodeCollectiveLatencyFactor;
  }
  return latency;
}

}  // namespace gpuhub::fit::rates_internal
