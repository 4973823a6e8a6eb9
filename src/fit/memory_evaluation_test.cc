// Memory against published peaks the model was never built on (data/benchmarks/
// memory-evaluation.json): every run is a POST /v1/size body, answered by EstimateMemory and
// compared with the peak its source reports (reserved or allocated). The calibration cases are
// src/sizing/calibration_test.cc's. The held-out median and 90th percentile, by kind, are the
// memory error bands (fit/rates.h HeldOutMemoryBand) and this test fails when they drift.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "fit/evaluation_test_util.h"
#include "fit/rates.h"
#include "fit/report_json.h"
#include "fit/request.h"
#include "sizing/estimate.h"

namespace gpuhub::fit {
namespace {

using evaluation::Json;
using evaluation::Percentile;

double Component(const sizing::MemoryEstimate& e, const std::string& name) {
  for (const auto& c : e.components) {
    if (c.name == name) return c.bytes;
  }
  return 0;
}

TEST(MemoryEvaluation, HeldOutRunsMatchTheStatedBands) {
  const Json file = evaluation::LoadBenchmarks("memory-evaluation.json");
  std::map<std::string, std::vector<double>> by_kind;
  std::printf("| run | measured GB | estimate GB | error |\n|---|---|---|---|\n");
  for (const Json& run : file.at("runs")) {
    const std::string id = run.at("id");
    auto fields = ParseRequestJson(run.at("request").dump(), RequestKind::kSize);
    ASSERT_TRUE(fields.ok()) << id << ": " << fields.status().ToString();
    auto request = ResolveSizeRequest(*fields, RequestContext{evaluation::DataDir(), false});
    ASSERT_TRUE(request.ok()) << id << ": " << request.status().ToString();
    auto e = sizing::EstimateMemory(request->model, request->workload);
    ASSERT_TRUE(e.ok()) << id << ": " << e.status().ToString();
    double estimate = e->per_gpu_bytes;
    if (run.at("compare") == "allocated") estimate -= Component(*e, "allocator_reserve");
    // What stays on the card after generation: the weights and the KV cache.
    if (run.at("compare") == "resident") {
      estimate = Component(*e, "weights") + Component(*e, "kv_cache");
    }
    const double measured = run.at("measured_gb").get<double>() * 1e9;
    const double error = (estimate - measured) / measured;
    std::printf("| %s | %.2f | %.2f | %+.1f%% |\n", id.c_str(), measured / 1e9, estimate / 1e9,
                100 * error);
    const bool training = request->workload.method != sizing::Method::kInference;
    const EstimateKind kind = KindOf(!training, request->workload.gpus);
    by_kind[std::string(EstimateKindName(kind))].push_back(std::fabs(error));
    by_kind["all"].push_back(std::fabs(error));
  }
  std::printf("| set | runs | median | p90 | worst |\n|---|---|---|---|---|\n");
  for (const auto& [kind, errors] : by_kind) {
    std::printf("| %s | %zu | %.2f%% | %.2f%% | %.1f%% |\n", kind.c_str(), errors.size(),
                100 * Percentile(errors, 0.5), 100 * Percentile(errors, 0.9),
                100 * Percentile(errors, 1.0));
  }
  for (const auto& [kind, errors] : by_kind) {
    const ErrorBand stated = kind == "all" ? HeldOutMemoryBandAll() : HeldOutMemoryBand(kind);
    EXPECT_EQ(static_cast<int>(errors.size()), stated.runs) << kind;
    EXPECT_NEAR(Percentile(errors, 0.5), stated.median, 0.005) << kind;
    EXPECT_NEAR(Percentile(errors, 0.9), stated.p90, 0.005) << kind;
  }
}

}  // namespace
}  // namespace gpuhub::fit
