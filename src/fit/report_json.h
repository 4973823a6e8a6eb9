// Every JSON shape of sizing and fit, in one place: the CLI's --json output and the HTTP API's
// bodies are produced (and requests parsed) here, so they cannot drift apart. nlohmann/json stays
// inside report_json.cc; callers see strings and plain structs.
//
// Output conventions:
//  - sizes: "<name>_gb" numbers (GB = 1e9 bytes, rounded to 6 decimals) beside exact "bytes";
//  - money: "<name>_usd" numbers for people and scripts (3643.2), and the exact decimal strings in
//  an
//    "exact" object ({"monthly_usd": "3643.200000"}); never round-trip money through the numbers;
//  - a figure that is not published is null, never 0.
//
// Shapes (fields are only ever added, never removed or renamed):
//  size:    {"model": {...}, "workload": {...}, "total_gb", "total_bytes", "per_gpu_gb", "gpus",
//            "components": [{"name", "bytes", "gb", "formula"}], "outside_allocator": COMPONENT
//            | null, "card_gb", "host_gb", "notes": [...]}
//           total = all GPUs together; components and per_gpu_gb are what one GPU holds at the
//           framework's peak; card_gb adds outside_allocator (detailed: the CUDA context).
//  fit:     {"model", "workload", "filters", "required_gb" (= size's card_gb), "required_bytes",
//            "components", "outside_allocator",
//  "host_gb",
//            "needs_fp8", "multi_card", "best": CONFIG | null, "reason" (only when best is null),
//            "alternatives": [CONFIG...], "excluded": [{"gpu", "count", "configuration", "kind",
//            "reason"}] (only with why_not), "notes"}
//           CONFIG = {"gpu", "count", "configuration", "monthly_usd", "weekly_usd", "hourly_usd",
//            "headroom_gb_per_card", "tight", "decode_ceiling_tok_s" (null for training),
//            "per_card_gb", "vram_gb", "discount_percent", "list_monthly_usd", "weekly_derived",
//            "fp8", "stack", "interconnect", "link", "regions", "free_now", "in_stock",
//            "exact": {"monthly_usd", "weekly_usd", "hourly_usd"}, "explain": [...] (with explain)}
//  guide:   {"kv_cache": {preset: {"per_token_bytes", "per_token_mb", "8k", "32k", "128k"}},
//            "inference": {preset: {"bf16", "fp8", "int4"}},
//            "training": {preset: {"full", "full_with_allowance", "lora", "qlora"}},
//            "cheapest": {preset: {"bf16"|"fp8"|"int4"|"qlora"|"lora"|"full": CONFIG | null}},
//            "cheapest_reasons": {preset: {column: reason}} (cells that are null),
//            "cost": [{"gpu", "vram_gb", "monthly_usd", "usd_per_gb_month", "bandwidth_gb_per_s",
//                      "gb_s_per_usd_month", "hourly_usd", "weekly_usd", "weekly_derived",
//                      "spot", "spot_ask_usd_per_hour", "break_even_hours"}],
//            "units": {...}}  -- table values are GB numbers.
//  catalog: {"source", "regions", "multi_card_discounts", "weekly_ratio", "term": [...],
//            "spot": [...]}
//
// Requests (POST /v1/size, POST /v1/fit): a JSON object whose fields are the CLI flags' names
// (request.h): {"model": "70b", "workload": "infer", "precision": "fp8", "context": 8192, ...};
// numbers are JSON integers, switches are booleans, max_monthly_usd is a decimal string ("1500.50")
// or a JSON number. "config" may carry a pasted config.json object instead of "model". Unknown
// fields, wrong types, bodies over kMaxRequestJsonBytes or nested deeper than kMaxRequestJsonDepth
// are invalid_argument naming the field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "fit/fit.h"
#include "fit/guide.h"
#include "fit/request.h"
#include "sizing/loader.h"

namespace gpuhub::fit {

enum class RequestKind { kSize, kFit, kPlan };

Result<RequestFields> ParseRequestJson(std::string_view body, RequestKind kind);

std::string SizeReportJson(const SizeRequest& request, const sizing::MemoryEstimate& estimate);
// The parts of the fit report's CONFIG objects that depend only on the catalog: for each card and
// count it rents, "gpu" .. "hourly_usd" and "vram_gb" .. "exact" (prices, link, regions, stock),
// written once as text at the depths the fit report puts them ("best", "alternatives") instead of
// formatted again on every request (callgrind, bench/http/profile.sh: they were about a quarter of
// POST /v1/fit's instructions). A part is used only for a candidate whose card, count, prices,
// discount and stock are the ones it was written from, so the report's bytes are the same with or
// without it (report_writer_test.cc compares them). Keeps pointers into `catalog`: must not
// outlive it. Immutable once built: safe to share between threads.
class ConfigTexts {
 public:
  explicit ConfigTexts(const catalog::Catalog& catalog);

  struct Parts {
    Candidate from;  // its card, count, prices, discount and stock (no share of the job)
    int indent = 0;
    int depth = 0;     // the JSON writer's depth inside the CONFIG object
    std::string head;  // "gpu" .. "hourly_usd"
    std::string tail;  // "vram_gb" .. "exact"
  };
  // The parts written for this candidate at this indent and depth, or nullptr.
  const Parts* Find(const Candidate& c, int indent, int depth) const;

 private:
  const catalog::Catalog* catalog_;
  std::vector<std::vector<Parts>> by_card_;  // catalog.term's order
};

// With `texts` (built from the catalog the result was fitted on) the catalog's parts of each
// CONFIG are copied from it; the bytes are the same without.
std::string FitReportJson(const FitRequest& request, const FitResult& result,
                          const ConfigTexts* texts = nullptr);
std::string GuideJson(const Guide& guide);
// With `hourly_rate_micros`, every term card also carries "break_even_hours_vs_rate": the hours per
// month above which its monthly term costs less than paying that rate per GPU-hour.
std::string CatalogJson(const catalog::Catalog& catalog,
                        std::optional<std::int64_t> hourly_rate_micros = std::nullopt);
// `gpuhub models --json`: {"presets": [{"id", "total_params", ...}], "bundled": [{"id",
// "architecture", "model_type", "total_params", "active_params", "layers", "kv_heads", "head_dim",
// "max_context", "kv_bytes_per_token", "experts", "experts_per_token"}]}
std::string ModelsJson(const std::vector<sizing::BundledModel>& bundled);

// The whole of POST /v1/size and POST /v1/fit: body in, the CLI's --json text out. Errors are
// invalid_argument (400) or not_found (404, unknown model) with a message for the client.
Result<std::string> HandleSizeJson(std::string_view body, const std::string& data_dir);
Result<std::string> HandleFitJson(std::string_view body, const std::string& data_dir,
                                  const catalog::Catalog& catalog,
                                  const ConfigTexts* texts = nullptr);

}  // namespace gpuhub::fit
