#include "fit/market_fit.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_writer.h"
#include "core/money.h"
#include "core/strings.h"
#include "fit/report_json.h"

namespace gpuhub::fit {
namespace {

using Json = nlohmann::ordered_json;
using sizing::Method;

constexpr double kTightSingleBytes = 5e9;  // spec §6, as in fit.cc
constexpr double kTightSetBytes = 2e9;
constexpr int kSetCounts[] = {1, 2, 4, 8};
constexpr std::int64_t kHoursPerMonth = 720;  // spec §5: hourly = monthly / 720

std::string Gb(double bytes) { return FormatFixed(bytes / sizing::kBytesPerGb, 2) + " GB"; }

// What the term fleet publishes about a spot card (FP8, stack, link), when the catalog links the
// two; nullptr when it does not.
const catalog::TermGpu* TermOf(const catalog::Catalog& catalog, const catalog::SpotGpu& card) {
  if (!card.term_name) return nullptr;
  return catalog.FindTerm(*card.term_name);
}

class MarketFitter {
 public:
  MarketFitter(const catalog::Catalog& catalog, const FitRequest& request)
      : catalog_(catalog), request_(request) {}

  Result<MarketFitResult> Run(std::span<const MarketOffer> offers) {
    MarketFitResult result;
    GPUHUB_ASSIGN_OR_RETURN(auto single, EstimateFor(1));
    result.required = *single;
    result.needs_fp8 = NeedsFp8(request_.workload);
    result.offers = offers.size();
    for (const auto& offer : offers) Consider(offer, 1, result);
    result.considered_sets = result.ranked.empty();
    if (result.considered_sets) {
      for (const auto& offer : offers) {
        for (int count : kSetCounts) {
          if (count > 1) Consider(offer, count, result);
        }
      }
    }
    std::stable_sort(result.ranked.begin(), result.ranked.end(),
                     [](const MarketCandidate& a, const MarketCandidate& b) {
                       if (a.hourly_micros != b.hourly_micros)
                         return a.hourly_micros < b.hourly_micros;
                       if (a.count != b.count) return a.count < b.count;
                       if (a.headroom_bytes_per_card != b.headroom_bytes_per_card) {
                         return a.headroom_bytes_per_card > b.headroom_bytes_per_card;
                       }
                       return a.offer.ask_id < b.offer.ask_id;
                     });
    if (result.ranked.empty()) result.reason = NothingFits(result);
    return result;
  }

 private:
  Result<std::shared_ptr<const sizing::MemoryEstimate>> EstimateFor(int count) {
    auto it = estimates_.find(count);
    if (it == estimates_.end()) {
      GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate e,
                              sizing::EstimateMemory(request_.model, OnCards(request_.workload, count)));
      it = estimates_.emplace(count, std::make_shared<const sizing::MemoryEstimate>(std::move(e)))
               .first;
    }
    return it->second;
  }

  void Exclude(MarketFitResult& r, const MarketOffer& o, int count, const char* kind,
               std::string reason) {
    r.excluded.push_back({o.gpu, count, o.ask_id, kind, std::move(reason)});
  }

  void Consider(const MarketOffer& o, int count, MarketFitResult& result) {
    const Filters& f = request_.filters;
    const catalog::SpotGpu* card = catalog_.FindSpot(o.gpu);
    if (card == nullptr) {
      Exclude(result, o, count, "unknown_card", o.gpu + " is not a card of the catalog");
      return;
    }
    if (f.gpu && catalog_.FindSpot(*f.gpu) != card) {
      Exclude(result, o, count, "gpu_filter", "not the card asked for (--gpu)");
      return;
    }
    if (o.free_gpus < count) {
      Exclude(result, o, count, "not_enough_free",
              "machine " + std::to_string(o.machine_id) + " has " + std::to_string(o.free_gpus) +
                  " " + card->name + " free");
      return;
    }
    if (o.min_gpus > count) {
      Exclude(result, o, count, "below_min_gpus",
              "ask " + std::to_string(o.ask_id) + " rents " + std::to_string(o.min_gpus) +
                  " GPUs or more");
      return;
    }
    if (f.region && ToLower(*f.region) != ToLower(o.region)) {
      Exclude(
          result, o, count, "region",
          "machine " + std::to_string(o.machine_id) + " is in " + o.region + ", not " + *f.region);
      return;
    }
    const catalog::TermGpu* term = TermOf(catalog_, *card);
    if (f.cuda_only) {
      if (term == nullptr) {
        Exclude(result, o, count, "unknown_stack",
                "the catalog does not publish the software stack of " + card->name);
        return;
      }
      if (term->stack != catalog::Stack::kCuda) {
        Exclude(
            result, o, count, "not_cuda",
            card->name + " runs " + std::string(catalog::StackName(term->stack)) + ", not CUDA");
        return;
      }
    }
    if (result.needs_fp8 && (term == nullptr || !term->fp8)) {
      Exclude(result, o, count, "needs_fp8",
              term == nullptr
                  ? "FP8 is needed and the catalog does not publish FP8 support of " + card->name
                  : "FP8 is needed and " + card->name + " has no FP8");
      return;
    }
    if (count > 1 && request_.workload.method == Method::kFullFineTune) {
      if (term == nullptr) {
        Exclude(
            result, o, count, "sharded_training",
            "full fine-tuning shards every step; the catalog does not publish the link between " +
                card->name + " cards");
        return;
      }
      if (!catalog::AllowsShardedTraining(term->sharded_training, count)) {
        Exclude(result, o, count, "sharded_training",
                "full fine-tuning cannot shard across " + std::to_string(count) + " " + card->name +
                    " (" + term->link + ")");
        return;
      }
    }
    auto estimate = EstimateFor(count);
    if (!estimate.ok()) {
      Exclude(result, o, count, "cannot_size", estimate.status().message());
      return;
    }
    double vram = card->vram_gb * sizing::kBytesPerGb;
    if ((*estimate)->card_bytes() > vram) {
      Exclude(result, o, count, "does_not_fit",
              "needs " + Gb((*estimate)->card_bytes()) + (count > 1 ? " per card" : "") + ", " +
                  card->name + " has " + FormatFixed(card->vram_gb, 0) + " GB");
      return;
    }
    MarketCandidate c;
    c.offer = o;
    c.card = card;
    c.count = count;
    c.per_card_bytes = (*estimate)->card_bytes();
    c.headroom_bytes_per_card = vram - c.per_card_bytes;
    c.tight = c.headroom_bytes_per_card < (count == 1 ? kTightSingleBytes : kTightSetBytes);
    c.hourly_micros = o.price_micros_per_gpu_hour * count;
    if (f.max_monthly_micros && c.hourly_micros * kHoursPerMonth > *f.max_monthly_micros) {
      Exclude(result, o, count, "over_budget",
              "$" + catalog::FormatUsd(c.hourly_micros) + "/h is $" +
                  catalog::FormatUsd(c.hourly_micros * kHoursPerMonth) +
                  " over 720 hours, above the $" + catalog::FormatUsd(*f.max_monthly_micros) +
                  " budget");
      return;
    }
    if (card->bandwidth_gb_per_s) {
      c.decode_ceiling_tokens_per_s =
          sizing::DecodeCeilingTokensPerSecond(*card->bandwidth_gb_per_s, **estimate);
    }
    c.estimate = *estimate;
    result.ranked.push_back(std::move(c));
  }

  std::string NothingFits(const MarketFitResult& result) const {
    if (result.offers == 0) {
      return "the book has no offers now; try again later or use list prices (drop --prices "
             "market)";
    }
    for (const char* kind : {"over_budget", "does_not_fit", "needs_fp8", "sharded_training",
                             "region", "not_enough_free", "gpu_filter"}) {
      for (const auto& x : result.excluded) {
        if (x.kind == kind) {
          return "no offer on the book holds this job (" + Gb(result.required.card_bytes()) +
                 " on one card); for example " + ConfigurationName(x.gpu, x.count) + " (ask " +
                 std::to_string(x.ask_id) + "): " + x.reason;
        }
      }
    }
    return "no offer on the book passes the filters";
  }

  const catalog::Catalog& catalog_;
  const FitRequest& request_;
  std::map<int, std::shared_ptr<const sizing::MemoryEstimate>> estimates_;
};

double Rounded(double v, int decimals) {
  double scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  return static_cast<double>(static_cast<long long>(v * scale + (v >= 0 ? 0.5 : -0.5))) / scale;
}

// A price per GPU-hour as the exchange quotes it (GET /v1/markets, /v1/offers): three decimals,
// its tick ("2.880"); a price off the tick keeps all six rather than being rounded.
std::string PriceText(std::int64_t micros_per_gpu_hour) {
  constexpr std::int64_t kTickMicros = 1000;
  return FormatMicros(micros_per_gpu_hour, micros_per_gpu_hour % kTickMicros == 0 ? 3 : 6);
}

Json OfferJson(const MarketCandidate& c) {
  Json j;
  j["gpu"] = c.card->name;
  j["count"] = c.count;
  j["configuration"] = ConfigurationName(c.card->name, c.count);
  j["ask_id"] = c.offer.ask_id;
  j["machine_id"] = c.offer.machine_id;
  j["region"] = c.offer.region;
  j["gpus_free"] = c.offer.free_gpus;
  j["price_usd_per_gpu_hour"] = catalog::MicrosToUsd(c.offer.price_micros_per_gpu_hour);
  j["hourly_usd"] = catalog::MicrosToUsd(c.hourly_micros);
  j["monthly_equivalent_usd"] = catalog::MicrosToUsd(c.hourly_micros * kHoursPerMonth);
  j["headroom_gb_per_card"] = Rounded(c.headroom_bytes_per_card / sizing::kBytesPerGb, 6);
  j["tight"] = c.tight;
  j["per_card_gb"] = Rounded(c.per_card_bytes / sizing::kBytesPerGb, 6);
  j["vram_gb"] = c.card->vram_gb;
  j["decode_ceiling_tok_s"] =
      c.decode_ceiling_tokens_per_s > 0 ? Json(Rounded(c.decode_ceiling_tokens_per_s, 1)) : Json();
  j["available_until"] = c.offer.available_until;
  // Money as the rest of the market API writes it: the price per GPU-hour with the exchange's
  // three decimals, amounts with six (a lease's "hourly_usd": "5.760000").
  j["exact"] = {{"price_usd_per_gpu_hour", PriceText(c.offer.price_micros_per_gpu_hour)},
                {"hourly_usd", FormatMicros(c.hourly_micros)},
                {"monthly_equivalent_usd", FormatMicros(c.hourly_micros * kHoursPerMonth)}};
  return j;
}

}  // namespace

Result<FitRequest> ResolveMarketFitRequest(RequestFields fields, const RequestContext& context,
                                           const catalog::Catalog& catalog) {
  std::optional<std::string> gpu = std::move(fields.gpu);
  fields.gpu.reset();
  fields.in_stock = false;
  GPUHUB_ASSIGN_OR_RETURN(FitRequest request, ResolveFitRequest(fields, context, catalog));
  if (gpu) {
    const catalog::SpotGpu* card = catalog.FindSpot(*gpu);
    if (card == nullptr) {
      std::string names;
      for (const auto& s : catalog.spot) names += (names.empty() ? "" : ", ") + s.name;
      return Status::InvalidArgument("unknown spot GPU '" + gpu->substr(0, 40) +
                                     "' (spot exchange: " + names + ")")
          .WithField("gpu");
    }
    request.filters.gpu = card->name;
  }
  return request;
}

Result<std::string> HandleMarketFitJson(std::string_view body, const std::string& data_dir,
                                        const catalog::Catalog& catalog,
                                        std::span<const MarketOffer> offers) {
  GPUHUB_ASSIGN_OR_RETURN(RequestFields fields, ParseRequestJson(body, RequestKind::kFit));
  GPUHUB_ASSIGN_OR_RETURN(
      FitRequest request,
      ResolveMarketFitRequest(fields, RequestContext{data_dir, false}, catalog));
  GPUHUB_ASSIGN_OR_RETURN(MarketFitResult result, FitMarket(catalog, request, offers));
  return MarketFitReportJson(request, result);
}

Result<MarketFitResult> FitMarket(const catalog::Catalog& catalog, const FitRequest& request,
                                  std::span<const MarketOffer> offers) {
  GPUHUB_RETURN_IF_ERROR(sizing::ValidateWorkload(request.workload));
  if (request.filters.gpu && catalog.FindSpot(*request.filters.gpu) == nullptr) {
    std::string names;
    for (const auto& s : catalog.spot) names += (names.empty() ? "" : ", ") + s.name;
    return Status::InvalidArgument("unknown spot GPU '" + request.filters.gpu->substr(0, 40) +
                                   "' (spot exchange: " + names + ")")
        .WithField("gpu");
  }
  return MarketFitter(catalog, request).Run(offers);
}

std::string MarketFitReportJson(const FitRequest& request, const MarketFitResult& result) {
  Json j;
  j["prices"] = "market";
  j["model"] = {{"id", request.model.id}, {"total_params", request.model.total_params}};
  j["workload"] = {{"method", sizing::MethodName(request.workload.method)},
                   {"precision", sizing::PrecisionName(request.workload.precision)}};
  j["required_gb"] = Rounded(result.required.card_bytes() / sizing::kBytesPerGb, 6);
  j["needs_fp8"] = result.needs_fp8;
  j["multi_card"] = result.considered_sets;
  j["offers_considered"] = result.offers;
  std::size_t top = static_cast<std::size_t>(std::max(1, request.top));
  j["best"] = result.ranked.empty() ? Json() : OfferJson(result.ranked.front());
  Json alternatives = Json::array();
  for (std::size_t i = 1; i < result.ranked.size() && i < top; ++i) {
    alternatives.push_back(OfferJson(result.ranked[i]));
  }
  j["alternatives"] = alternatives;
  if (result.ranked.empty()) j["reason"] = result.reason;
  if (request.why_not) {
    Json excluded = Json::array();
    for (const auto& x : result.excluded) {
      excluded.push_back({{"gpu", x.gpu},
                          {"count", x.count},
                          {"configuration", ConfigurationName(x.gpu, x.count)},
                          {"ask_id", x.ask_id},
                          {"kind", x.kind},
                          {"reason", x.reason}});
    }
    j["excluded"] = excluded;
  }
  Json notes = Json::array();
  for (const auto& n : request.notes) notes.push_back(n);
  notes.push_back(
      "live prices from the spot exchange's book: USD per GPU-hour, billed hourly in advance; all "
      "GPUs of a lease are on one machine");
  j["notes"] = notes;
  return DumpJson(j, 2);
}

std::string MarketFitReportText(const FitRequest& request, const MarketFitResult& result) {
  std::ostringstream out;
  out << "required: " << Gb(result.required.card_bytes()) << " on one GPU (" << result.offers
      << " offers on the book)\n";
  if (result.ranked.empty()) {
    out << "no offer: " << result.reason << "\n";
    return out.str();
  }
  out << "\n" << std::left;
  auto row = [&](const std::string& a, const std::string& b, const std::string& c,
                 const std::string& d, const std::string& e, const std::string& f,
                 const std::string& g) {
    out << "  " << a << std::string(a.size() < 16 ? 16 - a.size() : 1, ' ') << b
        << std::string(b.size() < 9 ? 9 - b.size() : 1, ' ') << c
        << std::string(c.size() < 8 ? 8 - c.size() : 1, ' ') << d
        << std::string(d.size() < 11 ? 11 - d.size() : 1, ' ') << e
        << std::string(e.size() < 11 ? 11 - e.size() : 1, ' ') << f
        << std::string(f.size() < 14 ? 14 - f.size() : 1, ' ') << g << "\n";
  };
  row("configuration", "ask", "region", "$/GPU-h", "$/hour", "headroom/card", "");
  std::size_t top = static_cast<std::size_t>(std::max(1, request.top));
  for (std::size_t i = 0; i < result.ranked.size() && i < top; ++i) {
    const auto& c = result.ranked[i];
    row(ConfigurationName(c.card->name, c.count), std::to_string(c.offer.ask_id), c.offer.region,
        FormatMicros(c.offer.price_micros_per_gpu_hour, 3), catalog::FormatUsd(c.hourly_micros),
        Gb(c.headroom_bytes_per_card),
        std::string(i == 0 ? "best" : "") + (c.tight ? " tight" : ""));
  }
  const auto& best = result.ranked.front();
  out << "\nbest: " << ConfigurationName(best.card->name, best.count) << " on machine "
      << best.offer.machine_id << " (" << best.offer.region << ") at $"
      << catalog::FormatUsd(best.hourly_micros) << "/hour";
  if (best.decode_ceiling_tokens_per_s > 0) {
    out << ", decode ceiling " << FormatFixed(best.decode_ceiling_tokens_per_s, 1) << " tok/s";
  }
  out << "\n";
  return out.str();
}

Result<std::vector<MarketOffer>> ParseOffersJson(std::string_view body) {
  Json root = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object() || !root.contains("offers") ||
      !root["offers"].is_array()) {
    return Status::InvalidArgument("the server's offers are not the expected JSON");
  }
  std::vector<MarketOffer> offers;
  for (const auto& o : root["offers"]) {
    if (!o.is_object() || !o.value("ask_id", Json()).is_number_integer() ||
        !o.value("machine_id", Json()).is_number_integer() || !o.value("gpu", Json()).is_string() ||
        !o.value("region", Json()).is_string() ||
        !o.value("gpus_free", Json()).is_number_integer() ||
        !o.value("min_gpus", Json()).is_number_integer() ||
        !o.value("price_usd_per_gpu_hour", Json()).is_string()) {
      return Status::InvalidArgument("an offer from the server lacks a field");
    }
    MarketOffer offer;
    offer.ask_id = o["ask_id"].get<std::int64_t>();
    offer.machine_id = o["machine_id"].get<std::int64_t>();
    offer.gpu = o["gpu"].get<std::string>();
    offer.region = o["region"].get<std::string>();
    offer.free_gpus = o["gpus_free"].get<int>();
    offer.min_gpus = o["min_gpus"].get<int>();
    // The exchange quotes on a 0.001 tick: a price with more decimals is not one of its offers.
    auto price = ParseDecimalMicros(o["price_usd_per_gpu_hour"].get<std::string>(), 3);
    if (!price.ok() || *price <= 0) {
      return Status::InvalidArgument(
          "an offer from the server has a price that is not a positive multiple of 0.001");
    }
    offer.price_micros_per_gpu_hour = *price;
    if (o.contains("available_until") && o["available_until"].is_string()) {
      offer.available_until = o["available_until"].get<std::string>();
    }
    offers.push_back(std::move(offer));
  }
  return offers;
}

}  // namespace gpuhub::fit
