// Human renderings of the size, fit, guide and catalog reports: aligned plain-text tables, the same
// figures as report_json.h rounded for reading (GB to 2 decimals, USD to the cent). Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "fit/fit.h"
#include "fit/guide.h"
#include "fit/request.h"
#include "sizing/loader.h"

namespace gpuhub::fit {

// A plain-text table: columns separated by two spaces, numbers right-aligned, a dashed rule under
// the header. Cells are UTF-8; width counts code points.
class TextTable {
 public:
  enum class Align { kLeft, kRight };
  explicit TextTable(std::vector<std::string> header, std::vector<Align> align = {});
  void AddRow(std::vector<std::string> cells);
  std::string Render(const std::string& indent = "  ") const;

 private:
  std::vector<std::string> header_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

std::string SizeReportText(const SizeRequest& request, const sizing::MemoryEstimate& estimate);
std::string FitReportText(const FitRequest& request, const FitResult& result);
std::string GuideText(const Guide& guide);
// With `hourly_rate_micros`, a column gives each card's break-even hours against that rate.
std::string CatalogText(const catalog::Catalog& catalog,
                        std::optional<std::int64_t> hourly_rate_micros = std::nullopt);
std::string ModelsText(const std::vector<sizing::BundledModel>& bundled);

// "70b, inference: fp8 weights, fp16 KV cache, 8192 tokens x batch 1"
std::string DescribeJob(const sizing::ModelShape& model, const sizing::Workload& workload);

}  // namespace gpuhub::fit
