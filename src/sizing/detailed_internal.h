// Helpers shared by detailed.cc (inference and the public functions) and detailed_training.cc
// (not part of the contract).
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include "core/strings.h"
#include "sizing/detailed.h"

namespace gpuhub::sizing::detailed_internal {

inline std::string Num(double v) { return FormatCount(v); }
inline std::string Gb(double bytes) { return FormatGb(bytes); }
inline std::string B(double bytes_per) {
  // "2 B", "0.5 B", "0.0159 B"
  if (bytes_per == std::floor(bytes_per)) return FormatFixed(bytes_per, 0) + " B";
  if (bytes_per >= 0.1) return FormatFixed(bytes_per, 2) + " B";
  return FormatFixed(bytes_per, 4) + " B";
}

struct Widths {
  double h = 0, q = 0, k = 0, v = 0;
  double mlp = 0;         // MLP width a token runs through, averaged over layers
  double moe_layers = 0;  // fraction of layers that are MoE
};

Widths WidthsOf(const ModelShape& m);
ModelShape WithInventory(const ModelShape& m);
bool Targeted(const LinearModule& l, LoraTargets targets);
double WeightBytesPerParam(Precision p);
// Bytes of quantization constants per quantized weight.
double QuantConstantBytesPerParam(Precision p, bool double_quant);
std::optional<Precision> CheckpointPrecision(const CheckpointSummary& c);

struct WeightPart {
  double bytes = 0;
  std::string formula;
};

// Resident weights at `precision` (decoder linears quantized, the rest in 16 bits).
WeightPart Weights(const ModelShape& m, Precision precision, bool double_quant);
std::string CheckpointFormula(const CheckpointSummary& c);
// `bytes` over `gpus` cards, the division shown in the formula.
Component Split(std::string name, double bytes, std::string formula, int gpus);
std::string KvFormula(const ModelShape& m, const Workload& w, double bytes);
double LargestLinearParams(const ModelShape& m);

// Optimizer state bytes for `params` trainable parameters laid out as `matrices` (rows, cols).
struct OptimizerPart {
  double bytes = 0;
  std::string formula;
};

OptimizerPart OptimizerState(Optimizer o, double params, double factored_bytes, bool bf16_states);
double AdafactorBytes(const ModelShape& m, double lora_rank, LoraTargets targets,
                      bool adapters_only);
// Per-layer rotary caches of transformers before 4.45, on the GPU that holds the layer.
void AddRotaryCaches(const ModelShape& m, const Workload& w, int layer_split, MemoryEstimate& e);

// Each adds its method's components to `e` and returns the transient bytes (activations,
// logits) the caching allocator churns through.
double AddInferenceParts(const ModelShape& m, const Workload& w, bool from_checkpoint,
                         MemoryEstimate& e);
double AddTrainingParts(const ModelShape& m, const Workload& w, bool from_checkpoint,
                        MemoryEstimate& e);
// The memory the caching allocator reserved while the model was loaded and keeps for the run
// (0 when loading reserves no more than the weights): `e` holds the components already counted.
struct ReservedFloor {
  double bytes = 0;
  std::string formula;
};
ReservedFloor LoadReservedFloor(const ModelShape& m, const Workload& w, const MemoryEstimate& e);

}  // namespace gpuhub::sizing::detailed_internal
