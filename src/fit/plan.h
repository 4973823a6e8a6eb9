// The plan: how long a job runs on every configuration that holds it, what it costs to finish on
// the spot exchange (live best asks, billed by the hour) and on a weekly/monthly term, and which
// configuration finishes cheapest (`gpuhub plan`, `POST /v1/plan`, the calculator's plan section).
//
// Jobs:
//  - training (full, LoRA, QLoRA): `total_tokens` tokens (tokens per epoch x epochs) through the
//    workload's micro-batches; hours = tokens / (tokens per second of the configuration) / 3600;
//  - serving (inference): `tokens_per_day` output tokens for `days` days, requests of
//    `prompt_tokens` in and `output_tokens` out, `workload.batch` sequences decoded together; a
//    configuration serves it with as many replicas as that rate needs, all the time.
//
// Configurations (rules of fit.h where they apply): every card of the term fleet at every count it
// is rented in, and every card on the spot exchange at 1, 2, 4 or 8 GPUs of one machine (the
// cheapest offer of each card and count); --gpus N fixes the count. Beyond one node (8 cards)
// a set is whole nodes: when no single node of a card holds the job (or --gpus asks for more
// than 8), the smallest number of nodes that does is planned with its arithmetic and an
// indicative list price, and marked `quote` (the fleet rents nodes of up to 8 cards: a larger
// set is a quote request, POST /v1/quote-requests).
// How the cards share the job: every layout of plan_layouts.h (data, tensor, pipeline and
// context parallel, ZeRO stage; a layer split) is sized with the same sharding its throughput
// assumes, and the fastest that fits is kept, with the others and why they lost
// (PlanOption::considered). Full fine-tuning shards only where the catalog's sharded-training
// limit allows that count; otherwise replicas over a published link.
// Filters: --gpu (a term or spot card), --region, --cuda-only, --in-stock (term: free now; spot:
// everything on the book is free), FP8 needed, --max-monthly-usd (a term set's monthly price).
//
// Prices (integer micro-USD; the hours are rounded up once, to whole hours, where money starts):
//  - spot: ceil(hours) x price per GPU-hour x GPUs (a lease is billed by the hour); the offer's
//    available_until is compared with the finish;
//  - term: the cheapest number of months and weeks of the set's price (multi-card discount
//    included) whose 720 and 168 hours cover ceil(hours): the catalog's break-even applied to this
//    job.
// Ranked by the cheaper of the two, then by hours, then by name. Pure: no clock (the start is an
// input), no I/O. Thread-safe for a const Catalog.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "catalog/catalog.h"
#include "core/clock.h"
#include "core/status.h"
#include "fit/market_fit.h"
#include "fit/plan_layouts.h"
#include "fit/rates.h"
#include "fit/request.h"

namespace gpuhub::fit {

struct TrainingJob {
  double total_tokens = 0;  // tokens per epoch x epochs
  std::int64_t tokens_per_epoch = 0;
  std::int64_t epochs = 1;
};

struct ServingJob {
  std::int64_t tokens_per_day = 0;  // output tokens
  std::int64_t prompt_tokens = 1024;
  std::int64_t output_tokens = 256;
  std::int64_t days = 30;
};

struct PlanRequest {
  FitRequest fit;  // model, workload, filters, top, explain
  bool serving = false;
  LayoutAsk layout;        // --gpus, --tp, --pp, --cp, --dp, --vp, --zero as given
  bool batch_max = false;  // serving: --batch max, the largest batch that fits each layout
  TrainingJob training;
  ServingJob serving_job;
  UtilisationOverride utilisation;
  TimestampMicros start = 0;  // when the job starts (finish = start + hours)
};

// One way to pay for a configuration.
struct PlanPrice {
  std::int64_t total_micros = 0;
  std::int64_t billed_hours = 0;  // spot: hours billed; term: hours the months and weeks cover
  // spot
  std::int64_t price_micros_per_gpu_hour = 0;
  std::int64_t hourly_micros = 0;  // the whole set (x replicas for serving)
  std::optional<MarketOffer> offer;  // absent: the catalog's opening ask (no live book)
  bool outlasts_offer = false;       // the job finishes after the offer's available_until
  // term
  std::int64_t months = 0, weeks = 0;
  std::int64_t monthly_micros = 0, weekly_micros = 0;  // the set (x replicas for serving)
  std::string detail;  // "38 h x $5.760000/h", "1 month + 2 weeks"
  // Multi-node sets: the price the fleet's list would give n single-node sets; the real price
  // comes with the quote.
  bool indicative = false;
};

// A set larger than one node: the fleet rents nodes of up to kGpusPerNode cards.
struct PlanQuote {
  int nodes = 0;
  int gpus_per_node = kGpusPerNode;
};

struct PlanOption {
  std::string gpu;  // the card's name (term fleet name when it has one)
  int count = 1;
  Parallelism parallelism = Parallelism::kSingle;
  sizing::Workload workload;  // as planned: gpus, layout, batch
  std::string layout;         // sizing::LayoutName of it
  // The other layouts tried for this card and count, each with its tokens/s or why it was left
  // out; the chosen one is the fastest that fits.
  std::vector<std::string> considered;
  double per_card_bytes = 0;
  double vram_gb = 0;
  bool term = false;  // rentable on a term
  bool in_stock = false;
  // training: tokens/s of the configuration; serving: output tokens/s of one replica
  double tokens_per_second = 0;
  double tokens_per_second_low = 0, tokens_per_second_high = 0;  // the held-out p90 error bar
  // serving: prompt tokens/s while prefilling and decode tokens/s of the configuration
  double prompt_tokens_per_second = 0, decode_tokens_per_second = 0;
  std::int64_t batch = 0;     // serving: sequences per replica (--batch max: the largest that fits)
  EstimateKind kind = EstimateKind::kTrainingSingle;
  ErrorBand band;             // the held-out error band of this kind of estimate
  std::optional<PlanQuote> quote;  // set: more than one node, a quote request
  // Set when --gpus fixed the count and no layout fits by the estimate: the fastest of the
  // closest is answered, with this sentence (ranked after every option that fits).
  std::string memory_warning;
  std::int64_t replicas = 1;  // serving: configurations needed for the daily volume
  double hours = 0;           // training: to finish; serving: the period
  TimestampMicros finish = 0;
  std::optional<PlanPrice> spot, term_price;
  std::int64_t best_micros = 0;
  bool best_is_spot = false;
  double usd_per_million_tokens = 0;  // at the best price (serving: over the period's tokens)
  std::vector<std::string> explain;
};

struct PlanExcluded {
  std::string gpu;
  int count = 1;
  std::string reason;
  bool fits = false;  // a layout held the job: excluded for its time or price, not its memory
};

struct PlanResult {
  sizing::MemoryEstimate required;  // the job on one card
  bool live_prices = false;         // spot prices from the book (else the catalog's opening asks)
  std::size_t offers = 0;
  std::vector<PlanOption> ranked;  // cheapest to finish first
  std::vector<PlanExcluded> excluded;
  std::string reason;  // when ranked is empty
  double total_tokens = 0;  // training: all epochs; serving: tokens_per_day x days
};

// The plan's request fields (request.h) on top of fit's: --tokens or --samples (x --seq) and
// --epochs for training; --tokens-per-day, --prompt-tokens, --output-tokens and --days for
// serving (inference), whose --context defaults to prompt + output and must hold them;
// --utilisation and --bandwidth-efficiency (0 < x <= 1) replace the calibrated factors; --start
// (RFC 3339) defaults to `now`. --gpu names a card of the term fleet or of the spot exchange.
// Every error is invalid_argument naming the field (not_found for an unknown model).
Result<PlanRequest> ResolvePlanRequest(const RequestFields& fields, const RequestContext& context,
                                       const catalog::Catalog& catalog, TimestampMicros now);

// `offers`: the spot book (GET /v1/offers); with `live` false the catalog's opening asks stand in
// for it, one offer per spot card with 8 GPUs free. Errors: invalid_argument for a job that cannot
// be planned (no tokens, a period over the limits), those of ValidateFitInput.
Result<PlanResult> Plan(const catalog::Catalog& catalog, const PlanRequest& request,
                        std::span<const MarketOffer> offers, bool live);

// The catalog's opening asks as offers (ask_id 0), for a plan without a live book.
std::vector<MarketOffer> OpeningAskOffers(const catalog::Catalog& catalog);

// The cheapest months and weeks covering `hours` at these prices (spec §5's break-even applied).
struct TermMix {
  std::int64_t months = 0, weeks = 0, total_micros = 0;
};
Result<TermMix> CheapestTermMix(std::int64_t hours, std::int64_t monthly_micros,
                                std::int64_t weekly_micros);

}  // namespace gpuhub::fit
