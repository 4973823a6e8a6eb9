// The plan's reports: `gpuhub plan` (text or --json) and POST /v1/plan (the same JSON).
//
// JSON: {"model", "workload", "job": {"kind": "training", "tokens_per_epoch", "epochs",
//   "total_tokens"} | {"kind": "serving", "tokens_per_day", "prompt_tokens", "output_tokens",
//   "days", "total_tokens"}, "start", "prices": "market" | "opening_ask", "offers_considered",
//   "required_gb", "assumptions": {"utilisation", "bandwidth_efficiency" (null: the calibrated
//   per-architecture factors), "half_utilisation_tokens", "factors": {arch: {"training",
//   "prefill", "decode_bandwidth", "source"}}}, "error_bar": {"median", "p90", "about"},
//   "cheapest": OPTION | null, "fastest": OPTION | null, "options": [OPTION...] (the first `top`,
//   cheapest first), "reason" (when nothing can be planned), "excluded" (with why_not), "notes"}
// OPTION = {"gpu", "count", "configuration", "parallelism", "per_card_gb", "vram_gb",
//   "tokens_per_s", "tokens_per_s_range": [low, high], "replicas", "hours", "finish", "in_stock",
//   "best": "spot" | "term", "best_usd", "usd_per_million_tokens",
//   "spot": {"total_usd", "hours_billed", "price_usd_per_gpu_hour", "hourly_usd", "live",
//            "ask_id", "machine_id", "region", "available_until", "outlasts_offer",
//            "exact": {"total_usd", "price_usd_per_gpu_hour", "hourly_usd"}} | null,
//   "term": {"total_usd", "months", "weeks", "hours_covered", "monthly_usd", "weekly_usd",
//            "detail", "exact": {"total_usd", "monthly_usd", "weekly_usd"}} | null,
//   "explain": [...] (with explain)}
// Money as in report_json.h: "<name>_usd" numbers for people, exact decimal strings in "exact".
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "catalog/catalog.h"
#include "core/clock.h"
#include "core/status.h"
#include "fit/plan.h"

namespace gpuhub::fit {

std::string PlanReportJson(const PlanRequest& request, const PlanResult& result);
std::string PlanReportText(const PlanRequest& request, const PlanResult& result);

// The whole of POST /v1/plan: the body parsed (report_json.h's rules, plan fields allowed), the
// plan made on `offers` (live: the book; else the catalog's opening asks), its JSON out.
Result<std::string> HandlePlanJson(std::string_view body, const std::string& data_dir,
                                   const catalog::Catalog& catalog,
                                   std::span<const MarketOffer> offers, bool live,
                                   TimestampMicros now);

}  // namespace gpuhub::fit
