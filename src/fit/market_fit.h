// Fit on live prices: the cheapest offers on the spot exchange's book that hold a job, priced per
// hour (`POST /v1/fit {"prices": "market"}`, `gpuhub fit --prices market --server URL`).
//
// The market only supplies offers (asks: a machine's free GPUs at a price per GPU-hour); the rules
// are fit.h's, applied to each offer and card count:
//  1. candidates are 1, 2, 4 or 8 GPUs of one machine: the offer must have that many free and its
//     min_gpus must allow it (all GPUs of a spot lease are on one machine);
//  2. filters: --gpu (a spot card name), --region (the machine's), CUDA only, FP8 needed. A card's
//     FP8 support, software stack and sharding link come from the same card in the term fleet
//     (the catalog's `term` link); where the catalog does not publish them, the candidate is
//     excluded with that reason rather than guessed;
//  3. sets only when no single card holds the job; full fine-tuning across cards needs the
//     card's sharded-training rule (NVLink/NVSwitch/Infinity Fabric);
//  4. it fits when each card holds its share (sizing::EstimateMemory with gpus = count, ZeRO-3 for
//     full fine-tuning across cards);
//  5. budget: --max-monthly-usd compares with the hourly price x 720 (a month of hours).
// Price = price per GPU-hour x count (no multi-card discount on the spot market). Ranked by hourly
// price, then fewer cards, then more headroom, then the older ask. "Tight" as in fit.h.
//
// Pure: no I/O. Thread-safe for a const Catalog.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "core/status.h"
#include "fit/fit.h"
#include "fit/request.h"
#include "sizing/estimate.h"

namespace gpuhub::fit {

// An ask on the book, as the exchange (or GET /v1/offers) hands it out.
struct MarketOffer {
  std::int64_t ask_id = 0;
  std::int64_t machine_id = 0;
  std::string gpu;  // the market: a spot card of the catalog
  std::string region;
  int free_gpus = 0;
  int min_gpus = 1;
  std::int64_t price_micros_per_gpu_hour = 0;
  std::string available_until;  // RFC 3339, shown as is
};

struct MarketCandidate {
  MarketOffer offer;
  const catalog::SpotGpu* card = nullptr;  // points into the Catalog given to FitMarket
  int count = 1;
  double per_card_bytes = 0;
  double headroom_bytes_per_card = 0;
  bool tight = false;
  std::int64_t hourly_micros = 0;          // price x count
  double decode_ceiling_tokens_per_s = 0;  // 0 for training or when bandwidth is not published
  std::shared_ptr<const sizing::MemoryEstimate> estimate;
};

struct MarketExcluded {
  std::string gpu;
  int count = 1;
  std::int64_t ask_id = 0;
  std::string kind;    // "gpu_filter", "region", "not_cuda", "needs_fp8", "unknown_card", ...
  std::string reason;  // a sentence for people
};

struct MarketFitResult {
  sizing::MemoryEstimate required;  // the job on one GPU
  bool needs_fp8 = false;
  bool considered_sets = false;
  std::size_t offers = 0;               // offers on the book that were looked at
  std::vector<MarketCandidate> ranked;  // cheapest first
  std::vector<MarketExcluded> excluded;
  std::string reason;  // when ranked is empty
};

// ResolveFitRequest for live prices: --gpu names a spot card (checked against the catalog's spot
// cards, not the term fleet) and --in-stock is dropped (everything on the book is free now).
Result<FitRequest> ResolveMarketFitRequest(RequestFields fields, const RequestContext& context,
                                           const catalog::Catalog& catalog);

// The whole of POST /v1/fit with "prices": "market" (the field already taken out of `body`):
// the request parsed as for list prices (report_json.h), fitted on `offers`, the JSON report out.
Result<std::string> HandleMarketFitJson(std::string_view body, const std::string& data_dir,
                                        const catalog::Catalog& catalog,
                                        std::span<const MarketOffer> offers);

// Errors: those of ValidateFitInput, except that --gpu names a spot card ("H100 SXM", "B300") and
// --in-stock is meaningless (everything on the book is free now) and is ignored. An unknown --gpu
// is invalid_argument with field "gpu" (here and in ResolveMarketFitRequest).
Result<MarketFitResult> FitMarket(const catalog::Catalog& catalog, const FitRequest& request,
                                  std::span<const MarketOffer> offers);

// {"prices": "market", "model", "workload", "required_gb", "needs_fp8", "multi_card",
//  "offers_considered", "best": OFFER | null, "alternatives": [OFFER...], "reason" (when best is
//  null), "excluded" (with why_not), "notes"}
// OFFER = {"gpu", "count", "configuration", "ask_id", "machine_id", "region", "gpus_free",
//  "price_usd_per_gpu_hour", "hourly_usd", "monthly_equivalent_usd", "headroom_gb_per_card",
//  "tight", "per_card_gb", "vram_gb", "decode_ceiling_tok_s", "available_until",
//  "exact": {"price_usd_per_gpu_hour", "hourly_usd", "monthly_equivalent_usd"}}
// Money follows report_json.h: the "<name>_usd" numbers are for people (kept: fields are only
// ever added), the exact decimal strings are in "exact" and are the ones to compute with. There
// the price per GPU-hour has the exchange's three decimals ("2.880", as GET /v1/markets and
// /v1/offers quote it) and amounts have six ("5.760000", as a lease's "hourly_usd").
std::string MarketFitReportJson(const FitRequest& request, const MarketFitResult& result);
// The same for people: a table of the best and the runners-up.
std::string MarketFitReportText(const FitRequest& request, const MarketFitResult& result);

// Parses GET /v1/offers: {"offers": [{"ask_id", "machine_id", "gpu", "region", "gpus_free",
// "min_gpus", "price_usd_per_gpu_hour", "available_until"}...]}. invalid_argument for anything
// else, including a price that is not a positive multiple of the 0.001 tick.
Result<std::vector<MarketOffer>> ParseOffersJson(std::string_view body);

}  // namespace gpuhub::fit
