#include "fit/plan_report.h"

#include <algorithm>

#include "core/json_writer.h"
#include "core/money.h"
#include "core/strings.h"
#include "fit/json_parts.h"
#include "fit/report_json.h"
#include "fit/report_text.h"
#include "sizing/parallel.h"

namespace gpuhub::fit {

using namespace json_parts;  // NOLINT: the shared pieces of every report

namespace {

const PlanOption* Fastest(const PlanResult& r) {
  const PlanOption* best = nullptr;
  for (const auto& o : r.ranked) {
    if (best == nullptr || o.hours < best->hours ||
        (o.hours == best->hours && o.best_micros < best->best_micros)) {
      best = &o;
    }
  }
  return best;
}

Json OptionJson(const PlanOption& o, bool explain) {
  Json j;
  j["gpu"] = o.gpu;
  j["count"] = o.count;
  j["configuration"] = ConfigurationName(o.gpu, o.count);
  j["parallelism"] = ParallelismName(o.parallelism);
  {
    const sizing::Layout l = sizing::LayoutOf(o.workload);
    j["layout"] = {{"name", o.layout},
                   {"dp", l.data},
                   {"tp", l.tensor},
                   {"pp", l.pipeline},
                   {"cp", l.context},
                   {"vp", l.virtual_stages},
                   {"zero", l.zero_stage},
                   {"layer_split", l.layer_split},
                   {"nodes", (o.count + kGpusPerNode - 1) / kGpusPerNode}};
  }
  j["considered"] = Strings(o.considered);
  j["memory_warning"] = o.memory_warning.empty() ? Json(nullptr) : Json(o.memory_warning);
  j["per_card_gb"] = Gb(o.per_card_bytes);
  j["vram_gb"] = o.vram_gb;
  j["tokens_per_s"] = Round(o.tokens_per_second, 1);
  j["tokens_per_s_range"] = {Round(o.tokens_per_second_low, 1),
                             Round(o.tokens_per_second_high, 1)};
  j["error_band"] = {{"kind", EstimateKindName(o.kind)},
                     {"median", o.band.median},
                     {"p90", o.band.p90},
                     {"runs", o.band.runs}};
  if (o.batch > 0) {
    j["batch"] = o.batch;
    j["prompt_tokens_per_s"] = Round(o.prompt_tokens_per_second, 1);
    j["decode_tokens_per_s"] = Round(o.decode_tokens_per_second, 1);
  }
  if (o.quote) {
    j["quote"] = {{"needed", true},
                  {"nodes", o.quote->nodes},
                  {"gpus_per_node", o.quote->gpus_per_node},
                  {"request", "POST /v1/quote-requests"},
                  {"cli", "gpuhub quote-request"},
                  {"inter_node_gb_per_s_per_gpu", kInterNodeGbPerSPerGpu}};
  } else {
    j["quote"] = {{"needed", false}};
  }
  j["replicas"] = o.replicas;
  j["hours"] = Round(o.hours, 3);
  j["finish"] = FormatTimestamp(o.finish);
  j["in_stock"] = o.in_stock;
  j["best"] = o.best_is_spot ? "spot" : "term";
  j["best_usd"] = Usd(o.best_micros);
  j["usd_per_million_tokens"] = Round(o.usd_per_million_tokens, 6);
  if (o.spot) {
    const PlanPrice& p = *o.spot;
    Json s;
    s["total_usd"] = Usd(p.total_micros);
    s["hours_billed"] = p.billed_hours;
    s["price_usd_per_gpu_hour"] = Usd(p.price_micros_per_gpu_hour);
    s["hourly_usd"] = Usd(p.hourly_micros);
    s["live"] = p.offer.has_value();
    s["ask_id"] = p.offer ? Json(p.offer->ask_id) : Json(nullptr);
    s["machine_id"] = p.offer ? Json(p.offer->machine_id) : Json(nullptr);
    s["region"] = p.offer ? Json(p.offer->region) : Json(nullptr);
    s["available_until"] = p.offer ? Json(p.offer->available_until) : Json(nullptr);
    s["outlasts_offer"] = p.outlasts_offer;
    s["indicative"] = p.indicative;
    s["exact"] = {{"total_usd", Exact(p.total_micros)},
                  {"price_usd_per_gpu_hour", FormatMicros(p.price_micros_per_gpu_hour, 3)},
                  {"hourly_usd", Exact(p.hourly_micros)}};
    j["spot"] = std::move(s);
  } else {
    j["spot"] = nullptr;
  }
  if (o.term_price) {
    const PlanPrice& p = *o.term_price;
    j["term"] = {{"total_usd", Usd(p.total_micros)},
                 {"months", p.months},
                 {"weeks", p.weeks},
                 {"hours_covered", p.billed_hours},
                 {"monthly_usd", Usd(p.monthly_micros)},
                 {"weekly_usd", Usd(p.weekly_micros)},
                 {"detail", p.detail},
                 {"indicative", p.indicative},
                 {"exact",
                  {{"total_usd", Exact(p.total_micros)},
                   {"monthly_usd", Exact(p.monthly_micros)},
                   {"weekly_usd", Exact(p.weekly_micros)}}}};
  } else {
    j["term"] = nullptr;
  }
  if (explain) j["explain"] = Strings(o.explain);
  return j;
}

Json FactorsJson(sizing::Method method) {
  Json j = Json::object();
  for (catalog::Architecture a :
       {catalog::Architecture::kAmpere, catalog::Architecture::kAda, catalog::Architecture::kHopper,
        catalog::Architecture::kBlackwell, catalog::Architecture::kCdna3}) {
    Utilisation u = DefaultUtilisation(a, method);
    j[std::string(catalog::ArchitectureName(a))] = {{"training", Round(u.training, 4)},
                                                    {"prefill", Round(u.prefill, 4)},
                                                    {"decode_bandwidth", u.decode_bandwidth},
                                                    {"source", u.source}};
  }
  return j;
}

std::string Hours(double h) {
  if (h >= 48) return FormatFixed(h / 24, 1) + " d";
  return FormatFixed(h, 1) + " h";
}

std::string Money(std::int64_t micros) { return "$" + catalog::FormatUsd(micros); }

}  // namespace

std::string PlanReportJson(const PlanRequest& request, const PlanResult& result) {
  Json j;
  j["model"] = ModelJson(request.fit.model);
  j["workload"] = WorkloadJson(request.fit.workload, result.required);
  if (request.serving) {
    const ServingJob& s = request.serving_job;
    j["job"] = {{"kind", "serving"},
                {"tokens_per_day", s.tokens_per_day},
                {"prompt_tokens", s.prompt_tokens},
                {"output_tokens", s.output_tokens},
                {"days", s.days},
                {"total_tokens", result.total_tokens}};
  } else {
    const TrainingJob& t = request.training;
    j["job"] = {{"kind", "training"},
                {"tokens_per_epoch", t.tokens_per_epoch},
                {"epochs", t.epochs},
                {"total_tokens", t.total_tokens}};
  }
  j["start"] = FormatTimestamp(request.start);
  j["prices"] = result.live_prices ? "market" : "opening_ask";
  j["offers_considered"] = result.offers;
  j["required_gb"] = Gb(result.required.card_bytes());
  j["assumptions"] = {{"utilisation", OrNull(request.utilisation.training_or_prefill)},
                      {"bandwidth_efficiency", OrNull(request.utilisation.decode_bandwidth)},
                      {"half_utilisation_tokens", kHalfUtilisationTokens},
                      {"int8_decode_efficiency", kInt8DecodeEfficiency},
                      {"int4_decode_efficiency", kInt4DecodeEfficiency},
                      {"decode_tile_rows",
                       {{"hopper_and_nvlink_blackwell", kWgmmaTileRows},
                        {"other", kMmaTileRows},
                        {"llama_cpp", 1}}},
                      {"fp8_matmul_efficiency", kFp8MatmulEfficiency},
                      {"collective_latency_s", kCollectiveLatencySeconds},
                      {"gpus_per_node", kGpusPerNode},
                      {"inter_node_gb_per_s_per_gpu", kInterNodeGbPerSPerGpu},
                      {"factors", FactorsJson(request.fit.workload.method)}};
  const double median = request.serving ? kServingHeldOutMedianError : kTrainingHeldOutMedianError;
  const double p90 = request.serving ? kServingHeldOutP90Error : kTrainingHeldOutP90Error;
  Json bands = Json::object();
  for (EstimateKind k : {EstimateKind::kTrainingSingle, EstimateKind::kTrainingMulti,
                         EstimateKind::kServingSingle, EstimateKind::kServingMulti}) {
    const ErrorBand b = HeldOutBand(k);
    bands[std::string(EstimateKindName(k))] = {
        {"median", b.median}, {"p90", b.p90}, {"runs", b.runs}};
  }
  j["error_bar"] = {
      {"median", median},
      {"p90", p90},
      {"by_kind", std::move(bands)},
      {"about",
       "the tokens/s estimates were off by a median of " + FormatFixed(median * 100, 1) +
           "% and by at most " + FormatFixed(p90 * 100, 1) +
           "% for 9 in 10 of the published runs they were checked against, none of them used to "
           "fit the model (docs/sizing-model.md §6); each option's error_band is that of its kind "
           "(training or serving, one card or several) and tokens_per_s_range is that band"}};
  j["cheapest"] = result.ranked.empty()
                      ? Json()
                      : OptionJson(result.ranked.front(), request.fit.explain);
  const PlanOption* fastest = Fastest(result);
  j["fastest"] = fastest ? OptionJson(*fastest, request.fit.explain) : Json();
  Json options = Json::array();
  const std::size_t top = static_cast<std::size_t>(std::max(1, request.fit.top));
  for (std::size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    options.push_back(OptionJson(result.ranked[i], request.fit.explain));
  }
  j["options"] = std::move(options);
  j["configurations"] = result.ranked.size();
  if (result.ranked.empty()) j["reason"] = result.reason;
  if (request.fit.why_not) {
    Json excluded = Json::array();
    for (const auto& x : result.excluded) {
      excluded.push_back({{"gpu", x.gpu},
                          {"count", x.count},
                          {"configuration", ConfigurationName(x.gpu, x.count)},
                          {"reason", x.reason}});
    }
    j["excluded"] = std::move(excluded);
  }
  Json notes = NotesJson(request.fit.model, request.fit.notes, result.required);
  notes.push_back(result.live_prices
                      ? "spot prices: the live best asks of the exchange's book, billed by the hour"
                      : "spot prices: the catalog's opening asks (no live book; gpuhub plan "
                        "--server URL or POST /v1/plan reads it)");
  notes.push_back(
      "term prices: the cheapest months (720 h) and weeks (168 h) of the set that cover the "
      "hours, multi-card discount included");
  j["notes"] = std::move(notes);
  return DumpJson(j, 2);
}

std::string PlanReportText(const PlanRequest& request, const PlanResult& result) {
  using A = TextTable::Align;
  std::string out = DescribeJob(request.fit.model, request.fit.workload) + "\n";
  if (request.serving) {
    const ServingJob& s = request.serving_job;
    out += "serving " + FormatFixed(static_cast<double>(s.tokens_per_day), 0) +
           " output tokens a day for " + std::to_string(s.days) + " days (requests of " +
           std::to_string(s.prompt_tokens) + " prompt + " + std::to_string(s.output_tokens) +
           " output tokens, " + std::to_string(request.fit.workload.batch) +
           " sequences at once)\n";
  } else {
    const TrainingJob& t = request.training;
    out += "training " + FormatFixed(static_cast<double>(t.tokens_per_epoch), 0) +
           " tokens x " + std::to_string(t.epochs) + " epoch(s) = " +
           FormatFixed(t.total_tokens, 0) + " tokens, from " + FormatTimestamp(request.start) +
           "\n";
  }
  out += "needs " + FormatFixed(result.required.card_bytes() / 1e9, 2) + " GB on one card\n\n";
  if (result.ranked.empty()) {
    out += "Nothing can be planned: " + result.reason + "\n";
    return out;
  }
  const PlanOption& best = result.ranked.front();
  out += "Cheapest to finish: " +
         (best.quote ? std::to_string(best.quote->nodes) + " nodes of " +
                           ConfigurationName(best.gpu, best.quote->gpus_per_node)
                     : ConfigurationName(best.gpu, best.count)) +
         " (" + best.layout + ") on " + (best.best_is_spot ? "spot" : "a term") + ", " +
         Money(best.best_micros) + (best.quote ? " indicative" : "") + ", " + Hours(best.hours) +
         (request.serving ? " of service" : "") + ", finishing " + FormatTimestamp(best.finish) +
         (best.replicas > 1 ? " (" + std::to_string(best.replicas) + " replicas)" : "") + "\n";
  if (best.quote) {
    out += "multi-node: request a quote (gpuhub quote-request) for " +
           std::to_string(best.quote->nodes) + " nodes of " +
           ConfigurationName(best.gpu, best.quote->gpus_per_node) + "\n";
  }
  if (request.serving) {
    out += "per replica: batch " + std::to_string(best.batch) +
           (request.batch_max ? " (the largest that fits)" : "") + ", prefill " +
           FormatFixed(best.prompt_tokens_per_second, 0) + " prompt tokens/s, decode " +
           FormatFixed(best.decode_tokens_per_second, 0) + " tokens/s\n";
  }
  if (const PlanOption* fast = Fastest(result); fast != nullptr && fast != &best &&
                                                !request.serving) {
    out += "Fastest: " + ConfigurationName(fast->gpu, fast->count) + ", " + Hours(fast->hours) +
           " for " + Money(fast->best_micros) + "\n";
  }
  out += "\n";
  TextTable t({"#", "configuration", "layout", request.serving ? "tok/s each" : "tokens/s",
               request.serving ? "replicas" : "hours", "finish", "spot", "term", "best",
               "$/M tokens"},
              {A::kRight, A::kLeft, A::kLeft, A::kRight, A::kRight, A::kLeft, A::kRight,
               A::kRight, A::kLeft, A::kRight});
  const std::size_t top = static_cast<std::size_t>(std::max(1, request.fit.top));
  for (std::size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    const PlanOption& o = result.ranked[i];
    t.AddRow({std::to_string(i + 1),
              ConfigurationName(o.gpu, o.count) + (o.quote ? " (quote)" : "") +
                  (o.memory_warning.empty() ? "" : " (may not fit)"),
              o.layout + (o.batch > 0 && request.batch_max ? ", batch " + std::to_string(o.batch)
                                                           : ""),
              FormatFixed(o.tokens_per_second, 0),
              request.serving ? std::to_string(o.replicas) : FormatFixed(o.hours, 1),
              FormatTimestamp(o.finish).substr(0, 16),
              o.spot ? Money(o.spot->total_micros) + (o.spot->outlasts_offer ? "!" : "") : "",
              o.term_price ? Money(o.term_price->total_micros) : "",
              o.best_is_spot ? "spot" : "term " + o.term_price->detail,
              FormatFixed(o.usd_per_million_tokens, 3)});
  }
  out += t.Render();
  if (result.ranked.size() > top) {
    out += "  (" + std::to_string(result.ranked.size() - top) + " more; --top " +
           std::to_string(result.ranked.size()) + " lists them all)\n";
  }
  const double p90 = request.serving ? kServingHeldOutP90Error : kTrainingHeldOutP90Error;
  const double median =
      request.serving ? kServingHeldOutMedianError : kTrainingHeldOutMedianError;
  {
    const ErrorBand band = best.band;
    out += "  error bar (" + std::string(EstimateKindName(best.kind)) +
           "): tokens/s were off by a median of " + FormatFixed(band.median * 100, 0) +
           "%, within " + FormatFixed(band.p90 * 100, 0) + "% for 9 in 10 of " +
           std::to_string(band.runs) +
           " published runs not used to fit the model (docs/sizing-model.md §6)\n";
    (void)median;
    (void)p90;
  }
  bool any_quote = false;
  for (std::size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    any_quote = any_quote || result.ranked[i].quote.has_value();
  }
  if (any_quote) {
    out += "  multi-node: request a quote (gpuhub quote-request): the fleet rents nodes of up to " +
           std::to_string(kGpusPerNode) +
           " cards; the prices of (quote) sets are the list's, indicative; between nodes " +
           FormatFixed(kInterNodeGbPerSPerGpu * 8, 0) + " Gb/s per GPU is assumed\n";
  }
  out += std::string("  spot: ") +
         (result.live_prices ? "live best asks of the book, billed by the hour"
                             : "the catalog's opening asks (--server URL for the live book)") +
         "; ! = the offer ends before the finish\n";
  out += "  term: the cheapest months and weeks that cover the hours\n";
  if (request.fit.explain) {
    out += "\nHow the cheapest was computed (" + ConfigurationName(best.gpu, best.count) + ")\n";
    for (const auto& line : best.explain) out += "  " + line + "\n";
  }
  if (request.fit.why_not && !result.excluded.empty()) {
    out += "\nExcluded:\n";
    for (const auto& x : result.excluded) {
      out += "  " + ConfigurationName(x.gpu, x.count) + ": " + x.reason + "\n";
    }
  }
  return out;
}

Result<std::string> HandlePlanJson(std::string_view body, const std::string& data_dir,
                                   const catalog::Catalog& catalog,
                                   std::span<const MarketOffer> offers, bool live,
                                   TimestampMicros now) {
  GPUHUB_ASSIGN_OR_RETURN(RequestFields fields, ParseRequestJson(body, RequestKind::kPlan));
  GPUHUB_ASSIGN_OR_RETURN(PlanRequest request,
                          ResolvePlanRequest(fields, RequestContext{data_dir, false}, catalog, now));
  std::vector<MarketOffer> opening;
  if (!live) {
    opening = OpeningAskOffers(catalog);
    offers = opening;
  }
  GPUHUB_ASSIGN_OR_RETURN(PlanResult result, Plan(catalog, request, offers, live));
  return PlanReportJson(request, result);
}

}  // namespace gpuhub::fit
