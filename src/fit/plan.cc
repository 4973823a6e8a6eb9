#include "fit/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>

#include "core/money.h"
#include "core/strings.h"
#include "catalog/limits.h"
#include "fit/limits.h"

namespace gpuhub::fit {

using catalog::SpotGpu;
using catalog::TermGpu;
using sizing::Method;

std::vector<MarketOffer> OpeningAskOffers(const catalog::Catalog& catalog) {
  std::vector<MarketOffer> offers;
  for (const SpotGpu& s : catalog.spot) {
    if (!s.opening_ask_micros_per_hour) continue;
    offers.push_back({0, 0, s.name, "", 8, 1, *s.opening_ask_micros_per_hour, ""});
  }
  return offers;
}

Result<TermMix> CheapestTermMix(std::int64_t hours, std::int64_t monthly, std::int64_t weekly) {
  constexpr std::int64_t kMonth = catalog::kHoursPerMonth, kWeek = 168;
  TermMix best;
  bool found = false;
  for (std::int64_t months = 0; months <= (hours + kMonth - 1) / kMonth; ++months) {
    const std::int64_t rest = std::max<std::int64_t>(0, hours - months * kMonth);
    const std::int64_t weeks = (rest + kWeek - 1) / kWeek;
    std::int64_t a = 0, b = 0, total = 0;
    if (!CheckedMul(months, monthly, &a) || !CheckedMul(weeks, weekly, &b) ||
        !CheckedAdd(a, b, &total)) {
      return Status::InvalidArgument("the term price of this plan overflows");
    }
    if (!found || total < best.total_micros) best = {months, weeks, total};
    found = true;
  }
  return best;
}

namespace {

std::string Usd(std::int64_t micros) { return "$" + catalog::FormatUsd(micros); }
std::string Tokens(double t) { return FormatFixed(t, 0); }

// "1 month", "2 weeks", "1 month + 2 weeks".
std::string TermDetail(std::int64_t months, std::int64_t weeks) {
  auto unit = [](std::int64_t n, const char* one) {
    return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
  };
  if (months == 0) return unit(weeks, "week");
  if (weeks == 0) return unit(months, "month");
  return unit(months, "month") + " + " + unit(weeks, "week");
}

// A card the plan can place the job on: the term fleet's entry and/or the spot exchange's.
struct Card {
  const TermGpu* term = nullptr;
  const SpotGpu* spot = nullptr;
  std::string name;
  double vram_gb = 0;
  bool fp8 = false;
  bool cuda = true;
  CardRates rates;
};

std::vector<Card> Cards(const catalog::Catalog& c) {
  std::vector<Card> cards;
  for (const TermGpu& g : c.term) {
    Card card{&g, nullptr, g.name, g.vram_gb, g.fp8, g.stack == catalog::Stack::kCuda,
              RatesOf(g)};
    for (const SpotGpu& s : c.spot) {
      if (s.term_name && *s.term_name == g.name) card.spot = &s;
    }
    cards.push_back(card);
  }
  for (const SpotGpu& s : c.spot) {
    if (s.term_name) continue;
    // Spot-only cards: FP8 and the stack from what the catalog publishes of them.
    Card card{nullptr, &s, s.name, s.vram_gb, s.compute.fp8_dense_tflops.has_value(),
              s.compute.architecture != catalog::Architecture::kCdna3, RatesOf(s, nullptr)};
    cards.push_back(card);
  }
  return cards;
}

class Planner {
 public:
  Planner(const catalog::Catalog& catalog, const PlanRequest& request,
          std::span<const MarketOffer> offers, bool live)
      : catalog_(catalog), request_(request), offers_(offers), live_(live) {}

  Result<PlanResult> Run() {
    PlanResult result;
    result.live_prices = live_;
    result.offers = offers_.size();
    const sizing::Workload& w = request_.fit.workload;
    if (request_.serving) {
      result.total_tokens = static_cast<double>(request_.serving_job.tokens_per_day) *
                            static_cast<double>(request_.serving_job.days);
    } else {
      result.total_tokens = request_.training.total_tokens;
    }
    GPUHUB_ASSIGN_OR_RETURN(auto single, EstimateFor(1));
    result.required = *single;
    const bool needs_fp8 = NeedsFp8(w);
    const Filters& f = request_.fit.filters;
    for (const Card& card : Cards(catalog_)) {
      auto exclude_all = [&](const std::string& why) {
        result.excluded.push_back({card.name, 1, why});
      };
      if (f.gpu && card.name != *f.gpu &&
          !(card.spot != nullptr && card.spot->name == *f.gpu)) {
        continue;  // not the card asked for: not worth listing
      }
      if (f.cuda_only && !card.cuda) {
        exclude_all(card.name + " runs ROCm, not CUDA");
        continue;
      }
      if (needs_fp8 && !card.fp8) {
        exclude_all("FP8 weights or KV cache need an FP8 card; " + card.name + " has none");
        continue;
      }
      std::vector<int> counts = card.term ? card.term->counts : std::vector<int>{1, 2, 4, 8};
      for (int count : counts) {
        GPUHUB_RETURN_IF_ERROR(Consider(card, count, result));
      }
    }
    std::stable_sort(result.ranked.begin(), result.ranked.end(),
                     [](const PlanOption& a, const PlanOption& b) {
                       if (a.best_micros != b.best_micros) return a.best_micros < b.best_micros;
                       if (a.hours != b.hours) return a.hours < b.hours;
                       if (a.gpu != b.gpu) return a.gpu < b.gpu;
                       return a.count < b.count;
                     });
    if (result.ranked.empty()) {
      result.reason = "no configuration holds this job and can be priced";
      for (const auto& x : result.excluded) {
        result.reason = "no configuration holds this job and can be priced (" +
                        ConfigurationName(x.gpu, x.count) + ": " + x.reason + ")";
        break;
      }
    }
    return result;
  }

 private:
  Result<std::shared_ptr<const sizing::MemoryEstimate>> EstimateFor(int count) {
    auto it = estimates_.find(count);
    if (it != estimates_.end()) return it->second;
    GPUHUB_ASSIGN_OR_RETURN(
        sizing::MemoryEstimate e,
        sizing::EstimateMemory(request_.fit.model, OnCards(request_.fit.workload, count)));
    auto shared = std::make_shared<const sizing::MemoryEstimate>(std::move(e));
    estimates_.emplace(count, shared);
    return shared;
  }

  // The cheapest offer of the book for `count` GPUs of this spot card on one machine.
  const MarketOffer* CheapestOffer(const SpotGpu& spot, int count) const {
    const MarketOffer* best = nullptr;
    for (const MarketOffer& o : offers_) {
      if (catalog_.FindSpot(o.gpu) != &spot) continue;
      if (o.free_gpus < count || o.min_gpus > count) continue;
      if (live_ && request_.fit.filters.region &&
          ToLower(o.region) != ToLower(*request_.fit.filters.region)) {
        continue;
      }
      if (best == nullptr || o.price_micros_per_gpu_hour < best->price_micros_per_gpu_hour) {
        best = &o;
      }
    }
    return best;
  }

  Status Consider(const Card& card, int count, PlanResult& result) {
    const sizing::Workload& w = request_.fit.workload;
    const Filters& f = request_.fit.filters;
    const bool full = w.method == Method::kFullFineTune;
    auto exclude = [&](std::string why) {
      result.excluded.push_back({card.name, count, std::move(why)});
      return Status::Ok();
    };
    const double vram = card.vram_gb * sizing::kBytesPerGb;
    const bool single_fits = result.required.card_bytes() <= vram;
    Parallelism parallelism = Parallelism::kSingle;
    double per_card = result.required.card_bytes();
    if (count == 1) {
      if (!single_fits) {
        return exclude("needs " + sizing::FormatGb(per_card) + ", " + card.name + " has " +
                       FormatFixed(card.vram_gb, 0) + " GB");
      }
    } else if (single_fits &&
               !(full && card.term != nullptr &&
                 catalog::AllowsShardedTraining(card.term->sharded_training, count))) {
      // Replicas: inference and adapters always; full fine-tuning only where the cards cannot
      // shard (ZeRO-3 shards the optimizer step too, which replicas would each repeat).
      if (full && card.term != nullptr &&
          card.term->sharded_training == catalog::ShardedTraining::kSingleCard) {
        return exclude("full fine-tuning runs on one " + card.name +
                       " only (single-card), so no data-parallel set");
      }
      // Full fine-tuning replicas all-reduce every gradient each step: it needs a known link.
      // LoRA/QLoRA exchange only the adapters' gradients; inference replicas exchange nothing.
      if (full && !card.rates.link_gb_per_s_one_way) {
        return exclude("the link between " + card.name + " cards is not published");
      }
      parallelism = Parallelism::kDataParallel;
    } else {
      if (full) {
        if (card.term == nullptr) {
          return exclude("full fine-tuning across " + card.name +
                         " cards: the link between them is not published");
        }
        if (!catalog::AllowsShardedTraining(card.term->sharded_training, count)) {
          return exclude(ShardedTrainingReason(*card.term, count));
        }
        parallelism = Parallelism::kSharded;
      } else {
        parallelism = Parallelism::kLayerSplit;
      }
      auto sized = EstimateFor(count);
      if (!sized.ok()) return exclude("cannot be sized: " + sized.status().message());
      per_card = (*sized)->card_bytes();
      if (per_card > vram) {
        return exclude("needs " + sizing::FormatGb(per_card) + " per card, " + card.name +
                       " has " + FormatFixed(card.vram_gb, 0) + " GB");
      }
    }

    PlanOption o;
    o.gpu = card.name;
    o.count = count;
    o.parallelism = parallelism;
    o.per_card_bytes = per_card;
    o.vram_gb = card.vram_gb;
    o.term = card.term != nullptr;
    o.in_stock = card.term != nullptr && card.term->free_now >= count;
    o.explain.push_back(
        "memory: " + sizing::FormatGb(per_card) + " per card of " +
        FormatFixed(card.vram_gb, 0) + " GB (" + std::string(ParallelismName(parallelism)) +
        (parallelism == Parallelism::kDataParallel
             ? ": every card holds the whole job and runs its own micro-batches"
         : parallelism == Parallelism::kSharded ? ": ZeRO-3 shards weights, gradients and state"
         : parallelism == Parallelism::kLayerSplit ? ": each card holds its share of the layers"
                                                   : "") +
        ")");

    // How fast.
    const double p90_training = kTrainingHeldOutP90Error, p90_serving = kServingHeldOutP90Error;
    double hours = 0;
    std::int64_t replicas = 1;
    if (request_.serving) {
      const ServingJob& job = request_.serving_job;
      auto rate = ServingRateOn(request_.fit.model, w, job.prompt_tokens, job.output_tokens,
                                card.rates, count, parallelism, request_.utilisation);
      if (!rate.ok()) return exclude(rate.status().message());
      o.tokens_per_second = rate->output_tokens_per_second;
      o.tokens_per_second_low = o.tokens_per_second / (1 + p90_serving);
      o.tokens_per_second_high = o.tokens_per_second / (1 - p90_serving);
      const double per_day = o.tokens_per_second * 86400;
      replicas = static_cast<std::int64_t>(
          std::ceil(static_cast<double>(job.tokens_per_day) / std::max(per_day, 1e-9)));
      replicas = std::max<std::int64_t>(replicas, 1);
      if (replicas > kMaxServingReplicas) {
        return exclude("would need " + std::to_string(replicas) + " replicas (over " +
                       std::to_string(kMaxServingReplicas) + ")");
      }
      hours = static_cast<double>(job.days) * 24;
      for (auto& line : rate->explain) o.explain.push_back(line);
      o.explain.push_back(
          "replicas: " + std::to_string(job.tokens_per_day) + " tokens a day / (" +
          FormatFixed(o.tokens_per_second, 1) + " tokens/s x 86,400 s) = " +
          FormatFixed(static_cast<double>(job.tokens_per_day) / per_day, 3) + ", rounded up: " +
          std::to_string(replicas) + " (running " + std::to_string(job.days) + " days, " +
          FormatFixed(hours, 0) + " h)");
    } else {
      auto rate = TrainingRateOn(request_.fit.model, w, card.rates, count, parallelism,
                                 request_.utilisation);
      if (!rate.ok()) return exclude(rate.status().message());
      o.tokens_per_second = rate->tokens_per_second;
      o.tokens_per_second_low = o.tokens_per_second / (1 + p90_training);
      o.tokens_per_second_high = o.tokens_per_second / (1 - p90_training);
      hours = request_.training.total_tokens / o.tokens_per_second / 3600;
      for (auto& line : rate->explain) o.explain.push_back(line);
      o.explain.push_back("hours: " + Tokens(request_.training.total_tokens) + " tokens / " +
                          FormatFixed(o.tokens_per_second, 0) + " tokens/s / 3600 = " +
                          FormatFixed(hours, 2) + " h (" +
                          FormatFixed(request_.training.total_tokens /
                                          o.tokens_per_second_high / 3600, 2) +
                          " to " +
                          FormatFixed(request_.training.total_tokens /
                                          o.tokens_per_second_low / 3600, 2) +
                          " h for 9 in 10 of the published runs checked)");
    }
    if (!(hours > 0) || hours > static_cast<double>(kMaxPlanHours)) {
      return exclude("would take " + FormatFixed(hours / 24 / 365, 1) + " years (over " +
                     std::to_string(kMaxPlanHours) + " hours)");
    }
    o.hours = hours;
    o.replicas = replicas;
    o.finish = request_.start + static_cast<std::int64_t>(std::ceil(hours * 3600)) *
                                    kMicrosPerSecond;
    const std::int64_t billed = static_cast<std::int64_t>(std::ceil(hours - 1e-9));

    // Term: months and weeks of the set (x replicas).
    if (card.term != nullptr) {
      const TermGpu& g = *card.term;
      if (f.region && !g.InRegion(*f.region)) {
        o.explain.push_back("term: " + g.name + " is not offered in " + *f.region);
      } else if (f.in_stock && g.free_now < count * replicas) {
        o.explain.push_back("term: " + std::to_string(g.free_now) + " free now, " +
                            std::to_string(count * replicas) + " needed (--in-stock)");
      } else {
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t monthly,
                                catalog::SetPriceMicros(catalog_, g, count, catalog::Term::kMonthly));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t weekly,
                                catalog::SetPriceMicros(catalog_, g, count, catalog::Term::kWeekly));
        if (f.max_monthly_micros && monthly > *f.max_monthly_micros) {
          o.explain.push_back("term: " + Usd(monthly) + "/month is over the " +
                              Usd(*f.max_monthly_micros) + " budget");
        } else {
          PlanPrice p;
          if (!CheckedMul(monthly, replicas, &p.monthly_micros) ||
              !CheckedMul(weekly, replicas, &p.weekly_micros)) {
            return exclude("the term price overflows");
          }
          GPUHUB_ASSIGN_OR_RETURN(TermMix mix,
                                  CheapestTermMix(billed, p.monthly_micros, p.weekly_micros));
          p.months = mix.months;
          p.weeks = mix.weeks;
          p.total_micros = mix.total_micros;
          p.billed_hours = mix.months * catalog::kHoursPerMonth + mix.weeks * 168;
          p.detail = TermDetail(mix.months, mix.weeks);
          o.explain.push_back(
              "term: " + std::to_string(billed) + " h covered by " + p.detail + " of " +
              (replicas > 1 ? std::to_string(replicas) + " x " : "") +
              ConfigurationName(g.name, count) + " (" + Usd(monthly) + "/month, " + Usd(weekly) +
              "/week" + (count > 1 ? ", multi-card discount in" : "") + ") = " +
              Usd(p.total_micros) + "; the cheapest mix of 720 h months and 168 h weeks");
          o.term_price = std::move(p);
        }
      }
    }
    // Spot: the cheapest offer of the book for this card and count, billed by the hour.
    if (card.spot != nullptr) {
      const MarketOffer* offer = CheapestOffer(*card.spot, count);
      if (offer == nullptr) {
        o.explain.push_back("spot: no offer of " + std::to_string(count) + " " +
                            card.spot->name + " GPUs on one machine" +
                            (live_ ? " on the book now" : ""));
      } else {
        PlanPrice p;
        p.price_micros_per_gpu_hour = offer->price_micros_per_gpu_hour;
        std::int64_t set_hourly = 0;
        if (!CheckedMul(offer->price_micros_per_gpu_hour, count, &set_hourly) ||
            !CheckedMul(set_hourly, replicas, &p.hourly_micros) ||
            !CheckedMul(p.hourly_micros, billed, &p.total_micros)) {
          return exclude("the spot price overflows");
        }
        p.billed_hours = billed;
        if (live_) p.offer = *offer;
        p.detail = std::to_string(billed) + " h x " + Usd(p.hourly_micros) + "/h";
        std::string when = "";
        if (live_ && !offer->available_until.empty()) {
          auto until = ParseTimestamp(offer->available_until);
          if (until.ok() && o.finish > *until) {
            p.outlasts_offer = true;
            when = "; the offer ends " + offer->available_until + ", before the finish";
          }
        }
        o.explain.push_back(
            "spot: " + std::to_string(billed) + " h (billed by the hour) x " +
            (replicas > 1 ? std::to_string(replicas) + " x " : "") + std::to_string(count) +
            " x " + "$" + FormatMicros(offer->price_micros_per_gpu_hour, 3) + "/GPU-h (" +
            (live_ ? "ask " + std::to_string(offer->ask_id) + " on the book"
                   : "the catalog's opening ask; --server for the live book") +
            ") = " + Usd(p.total_micros) + when);
        o.spot = std::move(p);
      }
    }
    if (!o.spot && !o.term_price) {
      return exclude("no price: " + o.explain.back());
    }
    o.best_is_spot =
        o.spot && (!o.term_price || o.spot->total_micros < o.term_price->total_micros);
    o.best_micros = o.best_is_spot ? o.spot->total_micros : o.term_price->total_micros;
    const double tokens = request_.serving ? result.total_tokens
                                           : request_.training.total_tokens;
    o.usd_per_million_tokens = catalog::MicrosToUsd(o.best_micros) / (tokens / 1e6);
    o.explain.push_back("cheapest way to pay: " +
                        std::string(o.best_is_spot ? "spot " : "term ") + Usd(o.best_micros) +
                        " = $" + FormatFixed(o.usd_per_million_tokens, 4) +
                        " per million tokens");
    result.ranked.push_back(std::move(o));
    return Status::Ok();
  }

  const catalog::Catalog& catalog_;
  const PlanRequest& request_;
  std::span<const MarketOffer> offers_;
  bool live_;
  std::map<int, std::shared_ptr<const sizing::MemoryEstimate>> estimates_;
};

}  // namespace

Result<PlanResult> Plan(const catalog::Catalog& catalog, const PlanRequest& request,
                        std::span<const MarketOffer> offers, bool live) {
  if (request.serving) {
    const ServingJob& j = request.serving_job;
    if (j.tokens_per_day < 1 || j.tokens_per_day > kMaxTokensPerDay) {
      return Status::InvalidArgument("tokens per day must be between 1 and " +
                                     std::to_string(kMaxTokensPerDay))
          .WithField("tokens_per_day");
    }
    if (j.days < 1 || j.days > kMaxPlanDays) {
      return Status::InvalidArgument("days must be between 1 and " + std::to_string(kMaxPlanDays))
          .WithField("days");
    }
  } else if (!(request.training.total_tokens >= 1) ||
             request.training.total_tokens > kMaxPlanTokens) {
    return Status::InvalidArgument("the job's tokens (per epoch x epochs) must be between 1 and " +
                                   sizing::FormatCount(kMaxPlanTokens))
        .WithField("tokens");
  }
  return Planner(catalog, request, offers, live).Run();
}

}  // namespace gpuhub::fit
