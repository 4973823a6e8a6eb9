#include "fit/guide.h"

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

sizing::Workload Training(Method m) {
  sizing::Workload w;
  w.method = m;
  w.precision = m == Method::kQlora ? Precision::kNf4 : Precision::kBf16;
  return w;
}

sizing::Workload CheapestWorkload(const std::string& column) {
  if (column == "bf16") return Inference(Precision::kBf16);
  if (column == "fp8") return Inference(Precision::kFp8);
  if (column == "int4") return Inference(Precision::kInt4);
  if (column == "qlora") return Training(Method::kQlora);
  if (column == "lora") return Training(Method::kLora);
  return Training(Method::kFullFineTune);
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
                            sizing::EstimateMemory(model, Training(Method::kFullFineTune)));
    training.full_with_allowance_bytes = full.per_gpu_bytes;
    training.full_bytes = full.per_gpu_bytes;
    for (const auto& c : full.components) {
      if (c.name == "activation_allowance") training.full_bytes -= c.bytes;
    }
    GPUHUB_ASSIGN_OR_RETURN(training.lora_bytes, PerGpuBytes(model, Training(Method::kLora)));
    GPUHUB_ASSIGN_OR_RETURN(training.qlora_bytes, PerGpuBytes(model, Training(Method::kQlora)));
    guide.training.push_back(training);

    for (const char* column : kGuideCheapestColumns) {
      GPUHUB_ASSIGN_OR_RETURN(FitResult fit, Fit(catalog, model, CheapestWorkload(column), {}));
      GuideCheapestCell cell;
      cell.preset = name;
      cell.column = column;
      cell.required_bytes = fit.required.card_bytes();
      if (fit.ranked.empty()) {
        cell.reason = fit.reason;
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
