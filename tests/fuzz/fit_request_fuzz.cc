// POST /v1/size and /v1/fit bodies: any bytes must give a JSON report or an invalid_argument /
// not_found, never a crash; a report that comes back must be valid JSON whose best configuration
// holds the job on every card.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "catalog/catalog.h"
#include "fit/report_json.h"

namespace {

const gpuhub::catalog::Catalog& Fleet() {
  static const gpuhub::catalog::Catalog fleet = [] {
    auto c = gpuhub::catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
    if (!c.ok()) __builtin_trap();
    return *c;
  }();
  return fleet;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  const std::string data_dir = std::string(GPUHUB_SOURCE_DIR) + "/data";
  auto fit = gpuhub::fit::HandleFitJson(body, data_dir, Fleet());
  if (fit.ok()) {
    auto j = nlohmann::json::parse(*fit, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.contains("best")) __builtin_trap();
    if (!j["best"].is_null() &&
        !(j["best"]["per_card_gb"].get<double>() <= j["best"]["vram_gb"].get<double>())) {
      __builtin_trap();
    }
  } else {
    auto code = fit.status().code();
    if (code != gpuhub::StatusCode::kInvalidArgument && code != gpuhub::StatusCode::kNotFound) {
      __builtin_trap();
    }
  }
  auto size_report = gpuhub::fit::HandleSizeJson(body, data_dir);
  if (size_report.ok()) {
    auto j = nlohmann::json::parse(*size_report, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !(j["total_gb"].get<double>() >= 0)) __builtin_trap();
  }
  return 0;
}
