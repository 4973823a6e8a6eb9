// Test helpers of the evaluation tests (throughput_evaluation_test.cc, memory_evaluation_test.cc):
// the published runs of data/benchmarks/*.json and the statistics of their errors.
// Test-only; not part of the library.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace gpuhub::fit::evaluation {

using Json = nlohmann::json;

inline const std::string& DataDir() {
  static const std::string dir = std::string(GPUHUB_SOURCE_DIR) + "/data";
  return dir;
}

// The file's JSON ({"sources": ..., "cards": ..., "runs": [...]}); a test failure when absent.
inline Json LoadBenchmarks(const std::string& name) {
  std::ifstream in(DataDir() + "/benchmarks/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << name << " is not valid JSON";
  return j;
}

// The p-th percentile (0..1) by linear interpolation between order statistics.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(pos);
  const std::size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace gpuhub::fit::evaluation
