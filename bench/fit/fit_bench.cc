// Fit across all presets x workloads x contexts (spec §6 over the whole term fleet), plus the full
// API path (JSON body in, JSON report out) and the catalog load. Reported as ns per fit. The plan
// (every configuration of both fleets with throughput and prices) as POST /v1/plan runs it.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "fit/fit.h"
#include "fit/plan.h"
#include "fit/plan_report.h"
#include "fit/report_json.h"

namespace {

using gpuhub::catalog::Catalog;
using gpuhub::sizing::Method;
using gpuhub::sizing::Precision;

const Catalog& Fleet() {
  static const Catalog fleet =
      *gpuhub::catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
  return fleet;
}

struct Case {
  gpuhub::sizing::ModelShape model;
  gpuhub::sizing::Workload workload;
};

// 5 presets x (inference at bf16/fp8/int4 x 4 contexts + full + LoRA + QLoRA) = 75 fits.
std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (const auto& name : gpuhub::sizing::PresetNames()) {
    auto model = *gpuhub::sizing::PresetModel(name);
    for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kInt4}) {
      for (std::int64_t context : {1024, 8192, 32768, 131072}) {
        gpuhub::sizing::Workload w;
        w.precision = p;
        w.context_tokens = context;
        cases.push_back({model, w});
      }
    }
    for (Method m : {Method::kFullFineTune, Method::kLora, Method::kQlora}) {
      gpuhub::sizing::Workload w;
      w.method = m;
      w.precision = m == Method::kQlora ? Precision::kNf4 : Precision::kBf16;
      cases.push_back({model, w});
    }
  }
  return cases;
}

// Fits every case in turn under `filters`; returns how many cases there are.
std::size_t FitAllCases(benchmark::State& state, const gpuhub::fit::Filters& filters) {
  const Catalog& fleet = Fleet();
  const std::vector<Case> cases = AllCases();
  std::size_t i = 0;
  for (auto _ : state) {
    const Case& c = cases[i++ % cases.size()];
    auto result = gpuhub::fit::Fit(fleet, c.model, c.workload, filters);
    benchmark::DoNotOptimize(result);
  }
  state.SetItemsProcessed(state.iterations());
  return cases.size();
}

void BM_FitAllPresetsWorkloadsContexts(benchmark::State& state) {
  std::size_t cases = FitAllCases(state, gpuhub::fit::Filters{});
  state.counters["cases"] = static_cast<double>(cases);
}
BENCHMARK(BM_FitAllPresetsWorkloadsContexts);

void BM_FitWithFilters(benchmark::State& state) {
  gpuhub::fit::Filters filters;
  filters.cuda_only = true;
  filters.in_stock = true;
  filters.region = "IAD-1";
  filters.max_monthly_micros = 5'000'000'000;
  FitAllCases(state, filters);
}
BENCHMARK(BM_FitWithFilters);

// POST /v1/fit as the HTTP layer runs it: parse, resolve, fit, render JSON.
void BM_FitJsonRequest(benchmark::State& state) {
  const Catalog& fleet = Fleet();
  const std::string data_dir = std::string(GPUHUB_SOURCE_DIR) + "/data";
  const std::string body = R"({"model": "70b", "workload": "infer", "precision": "fp8",
                               "context": 32768, "why_not": true})";
  for (auto _ : state) {
    auto json = gpuhub::fit::HandleFitJson(body, data_dir, fleet);
    benchmark::DoNotOptimize(json);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FitJsonRequest);

// POST /v1/plan as the HTTP layer runs it after reading the book: parse, resolve, size every
// count, rate and price every configuration of both fleets, render JSON with the arithmetic.
void PlanJson(benchmark::State& state, const std::string& body) {
  const Catalog& fleet = Fleet();
  const std::string data_dir = std::string(GPUHUB_SOURCE_DIR) + "/data";
  const std::vector<gpuhub::fit::MarketOffer> book = gpuhub::fit::OpeningAskOffers(fleet);
  for (auto _ : state) {
    auto json = gpuhub::fit::HandlePlanJson(body, data_dir, fleet, book, true, 0);
    if (!json.ok()) state.SkipWithError(json.status().message().c_str());
    benchmark::DoNotOptimize(json);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_PlanTrainingJsonRequest(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-8B", "workload": "lora", "batch": 4,
                      "tokens": 300000000, "explain": true, "why_not": true})");
}
BENCHMARK(BM_PlanTrainingJsonRequest);

void BM_PlanServingJsonRequest(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-70B", "workload": "infer", "batch": 64,
                      "precision": "fp8", "tokens_per_day": 1000000000, "explain": true})");
}
BENCHMARK(BM_PlanServingJsonRequest);

// One node: a real model's full fine-tune, every layout of 1-8 cards of every card searched.
void BM_PlanSingleNodeLayoutSearch(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-70B", "workload": "full", "seq": 4096,
                      "tokens": 1000000000, "explain": true})");
}
BENCHMARK(BM_PlanSingleNodeLayoutSearch);

// Serving with --batch max on every card and count: the largest batch of every layout.
void BM_PlanServingBatchMax(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-70B", "workload": "infer", "batch": "max",
                      "precision": "fp8", "engine": "vllm", "tokens_per_day": 1000000000})");
}
BENCHMARK(BM_PlanServingBatchMax);

// Beyond one node: no node holds the 405B full fine-tune, so every card's smallest number of
// nodes is searched (binary search, every layout of each count) and timed.
void BM_PlanMultiNodeSearch(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-405B", "workload": "full", "seq": 8192,
                      "tokens": 1000000000, "explain": true})");
}
BENCHMARK(BM_PlanMultiNodeSearch);

// A fixed count of 64 cards (8 nodes), every layout of them on every card.
void BM_PlanFixed64Gpus(benchmark::State& state) {
  PlanJson(state, R"({"model": "meta-llama/Llama-3.1-70B", "workload": "full", "seq": 8192,
                      "gpus": 64, "tokens": 1000000000})");
}
BENCHMARK(BM_PlanFixed64Gpus);

// The plan engine alone (no JSON): a preset full fine-tune across every count of both fleets.
void BM_PlanOnly(benchmark::State& state) {
  const Catalog& fleet = Fleet();
  gpuhub::fit::RequestFields f;
  f.model = "13b";
  f.workload = "full";
  f.tokens = 1'000'000'000;
  auto request = gpuhub::fit::ResolvePlanRequest(
      f, {std::string(GPUHUB_SOURCE_DIR) + "/data", false}, fleet, 0);
  const std::vector<gpuhub::fit::MarketOffer> book = gpuhub::fit::OpeningAskOffers(fleet);
  for (auto _ : state) {
    auto plan = gpuhub::fit::Plan(fleet, *request, book, true);
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlanOnly);

void BM_LoadCatalog(benchmark::State& state) {
  const std::string path = std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml";
  for (auto _ : state) {
    auto c = gpuhub::catalog::LoadCatalog(path);
    benchmark::DoNotOptimize(c);
  }
}
BENCHMARK(BM_LoadCatalog);

}  // namespace

BENCHMARK_MAIN();
