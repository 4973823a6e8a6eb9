#include "fit/guide.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "sizing/detailed.h"

namespace gpuhub::fit {

using sizing::Method;
using sizing::Precision;

namespace {

Result<double> PerGpuBytes(const sizing::ModelShape& model, const sizing::Workload& w) {
  GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate e, sizing::EstimateMemory(model, w));
  return e.per_gpu_bytes;
}

sizing::Workload Inference(Precision p) {
  sizing::Workload w;
  w.method = Method::kInference;
  w.precision = p;
  w.kv_precision = Precision::kFp16;
  w.context_tokens = 8192;
  w.batch = 1;
  return w;
}


sizing::Workload CheapestWorkload(const std::string& column) {
  if (column == "bf16") return Inference(Precision::kBf16);
  if (column == "fp8") return Inference(Precision::kFp8);
  if (column == "int4") return Inference(Precision::kInt4);
  if (column == "qlora") return WorkloadFor(Method::kQlora);
  if (column == "lora") return WorkloadFor(Method::kLora);
  return WorkloadFor(Method::kFullFineTune);
}

double ActivationBytes(const sizing::MemoryEstimate& e) {
  for (const auto& c : e.components) {
    if (c.name == "activations") return c.bytes;
  }
  return 0;
}

// The published figure beside the engine's, when they differ by more than the table's rounding.
Result<std::optional<GuidePublishedFigure>> Compare(const sizing::ModelShape& model, Method method,
                                                    double published_gb,
                                                    const sizing::MemoryEstimate& engine) {
  if (std::abs(engine.per_gpu_bytes / 1e9 - published_gb) <= kGuidePublishedRoundingGb) {
    return std::optional<GuidePublishedFigure>();
  }
  sizing::ModelShape llama3 = model;
  llama3.vocab = kLlama3Vocab;
  GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate alt,
                          sizing::EstimateMemory(llama3, WorkloadFor(method)));
  GuidePublishedFigure f;
  f.published_gb = published_gb;
  f.engine_bytes = engine.per_gpu_bytes;
  f.engine_llama3_vocab_bytes = alt.per_gpu_bytes;
  const double logits_now = sizing::GuideAdapterActivations(model, WorkloadFor(method)).logits_bytes;
  const double logits_alt = sizing::GuideAdapterActivations(llama3, WorkloadFor(method)).logits_bytes;
  const bool alt_matches =
      std::abs(alt.per_gpu_bytes / 1e9 - published_gb) <= kGuidePublishedRoundingGb;
  f.reason = "published " + FormatFixed(published_gb, 0) + " GB; this arithmetic gives " +
             sizing::FormatGb(engine.per_gpu_bytes) +
             " with the presets' 32,000-token vocabulary (logits " +
             sizing::FormatGb(logits_now) + ") and " + sizing::FormatGb(alt.per_gpu_bytes) +
             " with Llama 3's 128,256 (logits " + sizing::FormatGb(logits_alt) + ")" +
             (alt_matches
                  ? ", which matches the published figure within its rounding"
                  : "; neither matches within the table's rounding (the nearer is " +
                        FormatFixed(std::min(std::abs(engine.per_gpu_bytes / 1e9 - published_gb),
                                             std::abs(alt.per_gpu_bytes / 1e9 - published_gb)),
                                    2) +
                        " GB off), and the published table states neither its vocabulary nor "
                        "how it counts activations");
  return std::optional<GuidePublishedFigure>(std::move(f));
}

const GuidePublishedTraining* Published(const std::string& preset) {
  for (const auto& p : kGuidePublishedTraining) {
    if (preset == p.preset) return &p;
  }
  return nullptr;
}

}  // namespace

Result<Guide> BuildGuide(const catalog::Catalog& catalog) {
  Guide guide;
  for (const std::string& name : sizing::PresetNames()) {
    GPUHUB_ASSIGN_OR_RETURN(sizing::ModelShape model, sizing::PresetModel(name));

    GuideKvRow kv;
    kv.preset = name;
    kv.per_token_bytes = sizing::KvCacheBytes(model, Precision::kFp16, 1, 1);
    for (int i = 0; i < 3; ++i) {
      kv.bytes[i] = sizing::KvCacheBytes(model, Precision::kFp16, kGuideContexts[i], 1);
    }
    guide.kv_cache.push_back(kv);

    GuideInferenceRow inference;
    inference.preset = name;
    GPUHUB_ASSIGN_OR_RETURN(inference.bf16_bytes, PerGpuBytes(model, Inference(Precision::kBf16)));
    GPUHUB_ASSIGN_OR_RETURN(inference.fp8_bytes, PerGpuBytes(model, Inference(Precision::kFp8)));
    GPUHUB_ASSIGN_OR_RETURN(inference.int4_bytes, PerGpuBytes(model, Inference(Precision::kInt4)));
    guide.inference.push_back(inference);

    GuideTrainingRow training;
    training.preset = name;
    GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate full,
                            sizing::EstimateMemory(model, WorkloadFor(Method::kFullFineTune)));
    training.full_with_allowance_bytes = full.per_gpu_bytes;
    training.full_bytes = full.per_gpu_bytes;
    for (const auto& c : full.components) {
      if (c.name == "activation_allowance") training.full_bytes -= c.bytes;
    }
    GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate lora,
                            sizing::EstimateMemory(model, WorkloadFor(Method::kLora)));
    GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate qlora,
                            sizing::EstimateMemory(model, WorkloadFor(Method::kQlora)));
    training.lora_bytes = lora.per_gpu_bytes;
    training.qlora_bytes = qlora.per_gpu_bytes;
    training.lora_activation_bytes = ActivationBytes(lora);
    training.qlora_activation_bytes = ActivationBytes(qlora);
    if (const GuidePublishedTraining* published = Published(name)) {
      GPUHUB_ASSIGN_OR_RETURN(training.lora_published,
                              Compare(model, Method::kLora, published->lora_gb, lora));
      GPUHUB_ASSIGN_OR_RETURN(training.qlora_published,
                              Compare(model, Method::kQlora, published->qlora_gb, qlora));
    }
    guide.training.push_back(training);

    for (const char* column : kGuideCheapestColumns) {
      GPUHUB_ASSIGN_OR_RETURN(FitResult fit, Fit(catalog, model, CheapestWorkload(column), {}));
      GuideCheapestCell cell;
      cell.preset = name;
      cell.column = column;
      cell.required_bytes = fit.required.card_bytes();
      if (fit.ranked.empty()) {
        cell.reason = fit.reason;
        cell.multi_node = fit.multi_node;
      } else {
        cell.best = std::move(fit.ranked.front());
      }
      guide.cheapest.push_back(std::move(cell));
    }
  }
  for (const auto& g : catalog.term) {
    GuideCostRow row;
    row.gpu = &g;
    row.usd_per_gb_month = catalog::UsdPerGbMonth(g);
    row.gb_s_per_usd_month = catalog::GbPerSecondPerUsdMonth(g);
    for (const auto& spot : catalog.spot) {
      if (spot.term_name && *spot.term_name == g.name) {
        row.spot_name = spot.name;
        row.spot_ask_micros = spot.opening_ask_micros_per_hour;
        if (spot.opening_ask_micros_per_hour) {
          row.break_even_hours =
              catalog::BreakEvenHours(g.monthly_micros, *spot.opening_ask_micros_per_hour);
        }
      }
    }
    guide.cost.push_back(row);
  }
  return guide;
}

}  // namespace gpuhub::fit
