// Throughput against published, measured runs, through the same door a user would use: every
// run is a POST /v1/plan body (data/benchmarks/throughput-*.json) with its card and GPU count
// fixed, answered by fit::Plan, and compared with what the run measured.
//
// Two files, kept apart (docs/sizing-model.md §6):
//  - throughput-calibration.json: the runs the factors of fit/rates.h and sizing/serving_engine.h
//    were set on;
//  - throughput-evaluation.json: runs never used to set anything. Their median and 90th
//    percentile of |error|, by kind, are the error bands every plan quotes (rates.h
//    HeldOutBand); this test fails when the measured figures and the stated ones drift apart.
// A run the plan cannot express (no option for its card and count) fails the test.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "catalog/catalog.h"
#include "catalog/limits.h"
#include "fit/evaluation_test_util.h"
#include "fit/plan.h"
#include "fit/report_json.h"

namespace gpuhub::fit {
namespace {

using evaluation::Json;
using evaluation::Percentile;

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet =
      *catalog::LoadCatalog(evaluation::DataDir() + "/catalog.toml");
  return fleet;
}

// The fleet, plus the cards a file describes that the fleet does not rent (an H20, the 96 GB
// H100s of Meta's Grand Teton hosts) as term cards: what the plan needs of a card is its
// published figures and its link.
catalog::Catalog WithCards(const Json& file) {
  catalog::Catalog c = Fleet();
  if (!file.contains("cards")) return c;
  for (const Json& j : file["cards"]) {
    catalog::TermGpu g;
    g.name = j.at("name").get<std::string>();
    g.vram_gb = j.at("vram_gb").get<double>();
    g.bandwidth_gb_per_s = j.at("bandwidth_gb_per_s").get<double>();
    g.compute.bf16_dense_tflops = j.at("bf16_dense_tflops").get<double>();
    if (j.contains("fp8_dense_tflops")) {
      g.compute.fp8_dense_tflops = j["fp8_dense_tflops"].get<double>();
      g.fp8 = true;
    }
    const std::string arch = j.at("architecture").get<std::string>();
    g.compute.architecture = arch == "hopper"   ? catalog::Architecture::kHopper
                             : arch == "ampere" ? catalog::Architecture::kAmpere
                             : arch == "ada"    ? catalog::Architecture::kAda
                                                : catalog::Architecture::kUnknown;
    g.compute.source = j.value("source", "");
    g.interconnect = catalog::Interconnect::kNvSwitch;
    g.link = "NVLink";
    g.link_gb_per_s = j.value("link_gb_per_s", 900.0);
    g.sharded_training = catalog::ShardedTraining::kUpTo8;
    g.counts = {1, 2, 4, 8};
    for (const auto& r : c.regions) g.regions.push_back(r.code);
    g.monthly_micros = g.weekly_micros = 1'000'000'000;
    g.hourly_micros = g.monthly_micros / catalog::kHoursPerMonth;
    c.term.push_back(g);
  }
  return c;
}

struct Outcome {
  std::string id, kind;  // kind: EstimateKindName
  double measured = 0, estimate = 0, error = 0;
  std::string layout;
};

// Runs every run of `file` through the plan; a failure names the run that cannot be asked.
std::vector<Outcome> RunAll(const std::string& file_name) {
  const Json file = evaluation::LoadBenchmarks(file_name);
  const catalog::Catalog catalog = WithCards(file);
  const std::vector<MarketOffer> offers = OpeningAskOffers(catalog);
  std::vector<Outcome> out;
  for (const Json& run : file.at("runs")) {
    const std::string id = run.at("id").get<std::string>();
    Json body = run.at("request");
    const bool serving = body.value("workload", "") == "infer";
    body["gpu"] = run.at("card");
    if (!body.contains("gpus")) body["gpus"] = run.value("gpus", 1);
    if (serving) {
      if (!body.contains("tokens_per_day")) body["tokens_per_day"] = 1'000'000;
    } else if (!body.contains("tokens") && !body.contains("samples")) {
      body["tokens"] = 1'000'000'000;
    }
    auto fields = ParseRequestJson(body.dump(), RequestKind::kPlan);
    EXPECT_TRUE(fields.ok()) << id << ": " << fields.status().ToString();
    if (!fields.ok()) continue;
    auto request =
        ResolvePlanRequest(*fields, RequestContext{evaluation::DataDir(), false}, catalog, 0);
    EXPECT_TRUE(request.ok()) << id << ": " << request.status().ToString();
    if (!request.ok()) continue;
    auto result = Plan(catalog, *request, offers, false);
    EXPECT_TRUE(result.ok()) << id << ": " << result.status().ToString();
    if (!result.ok()) continue;
    EXPECT_FALSE(result->ranked.empty())
        << id << " cannot be asked: " << result->reason
        << (result->excluded.empty() ? "" : " / " + result->excluded.front().reason);
    if (result->ranked.empty()) continue;
    const PlanOption& o = result->ranked.front();
    Outcome r;
    r.id = id;
    r.kind = std::string(EstimateKindName(o.kind));
    r.measured = run.at("measured_tokens_per_s").get<double>();
    r.estimate = o.tokens_per_second;
    // Qwen3's speed benchmark divides prompt + generated tokens by the time.
    if (run.value("metric", "") == "prompt_plus_output") {
      r.estimate *= static_cast<double>(request->serving_job.prompt_tokens +
                                        request->serving_job.output_tokens) /
                    request->serving_job.output_tokens;
    }
    r.error = (r.estimate - r.measured) / r.measured;
    r.layout = o.layout;
    out.push_back(r);
  }
  return out;
}

std::map<std::string, std::vector<double>> ByKind(const std::vector<Outcome>& outcomes) {
  std::map<std::string, std::vector<double>> by;
  for (const auto& o : outcomes) {
    by[o.kind].push_back(std::fabs(o.error));
    by[o.kind.rfind("training", 0) == 0 ? "training" : "serving"].push_back(std::fabs(o.error));
  }
  return by;
}

void Print(const char* title, const std::vector<Outcome>& outcomes) {
  std::printf("%s\n| run | layout | measured tok/s | estimate | error |\n|---|---|---|---|---|\n",
              title);
  for (const auto& o : outcomes) {
    std::printf("| %s | %s | %.0f | %.0f | %+.1f%% |\n", o.id.c_str(), o.layout.c_str(), o.measured,
                o.estimate, 100 * o.error);
  }
  std::printf("| set | runs | median | p90 | worst |\n|---|---|---|---|---|\n");
  for (const auto& [kind, errors] : ByKind(outcomes)) {
    std::printf("| %s | %zu | %.2f%% | %.2f%% | %.1f%% |\n", kind.c_str(), errors.size(),
                100 * Percentile(errors, 0.5), 100 * Percentile(errors, 0.9),
                100 * Percentile(errors, 1.0));
  }
}

TEST(ThroughputEvaluation, CalibrationRunsAreExpressibleAndClose) {
  const std::vector<Outcome> outcomes = RunAll("throughput-calibration.json");
  Print("calibration", outcomes);
  EXPECT_GE(outcomes.size(), 15u);
  for (const auto& [kind, errors] : ByKind(outcomes)) {
    EXPECT_LE(Percentile(errors, 0.5), 0.10) << kind;
  }
}

TEST(ThroughputEvaluation, HeldOutRunsMatchTheStatedBands) {
  const std::vector<Outcome> outcomes = RunAll("throughput-evaluation.json");
  Print("evaluation (held out)", outcomes);
  const auto by = ByKind(outcomes);
  for (EstimateKind k : {EstimateKind::kTrainingSingle, EstimateKind::kTrainingMulti,
                         EstimateKind::kServingSingle, EstimateKind::kServingMulti}) {
    const std::string name(EstimateKindName(k));
    auto it = by.find(name);
    ASSERT_NE(it, by.end()) << name << ": no evaluation run of this kind";
    const ErrorBand stated = HeldOutBand(k);
    EXPECT_EQ(static_cast<int>(it->second.size()), stated.runs) << name;
    EXPECT_NEAR(Percentile(it->second, 0.5), stated.median, 0.005) << name;
    EXPECT_NEAR(Percentile(it->second, 0.9), stated.p90, 0.005) << name;
  }
  // The side-wide figures the README and the docs quote.
  EXPECT_NEAR(Percentile(by.at("training"), 0.5), kTrainingHeldOutMedianError, 0.005);
  EXPECT_NEAR(Percentile(by.at("training"), 0.9), kTrainingHeldOutP90Error, 0.005);
  EXPECT_NEAR(Percentile(by.at("serving"), 0.5), kServingHeldOutMedianError, 0.005);
  EXPECT_NEAR(Percentile(by.at("serving"), 0.9), kServingHeldOutP90Error, 0.005);
}

// No run appears in both files: the evaluation is of runs the model was not set on.
TEST(ThroughputEvaluation, CalibrationAndEvaluationAreApart) {
  const Json a = evaluation::LoadBenchmarks("throughput-calibration.json");
  const Json b = evaluation::LoadBenchmarks("throughput-evaluation.json");
  std::map<std::string, int> seen;
  for (const Json& run : a.at("runs")) seen[run.at("request").dump() + run.at("card").dump()]++;
  for (const Json& run : b.at("runs")) {
    EXPECT_EQ(seen.count(run.at("request").dump() + run.at("card").dump()), 0u)
        << run.at("id") << " is also a calibration run";
  }
}

}  // namespace
}  // namespace gpuhub::fit
