#include "fit/plan.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <tuple>

#include "core/money.h"
#include "core/strings.h"
#include "catalog/limits.h"
#include "fit/limits.h"
#include "sizing/limits.h"
#include "sizing/parallel.h"

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

std::string Join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + item;
  return out;
}
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

// Layouts timed per card and count: the first ones that fit, in plan_layouts.h's order (more
// model shards and heavier ZeRO stages communicate more, so later ones rarely win).
constexpr std::size_t kMaxTimedLayouts = 4;
// Nodes a multi-node plan may ask for (kMaxGpus / kGpusPerNode).
constexpr int kMaxPlanNodes = sizing::kMaxGpus / kGpusPerNode;

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
    GPUHUB_ASSIGN_OR_RETURN(auto single, EstimateFor(OnCards(w, 1)));
    result.required = *single;
    const bool needs_fp8 = NeedsFp8(w);
    const Filters& f = request_.fit.filters;
    std::vector<Card> cards;
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
      if (NeedsFp4(w) && !HasFp4(card.rates.architecture)) {
        exclude_all("FP4 weights need FP4 tensor cores (Blackwell); " + card.name + " has none");
        continue;
      }
      if (needs_fp8 && !card.fp8) {
        exclude_all(Fp8Phrase(w) + " need an FP8 card; " + card.name + " has none");
        continue;
      }
      cards.push_back(card);
    }
    const std::optional<int> fixed = request_.layout.gpus;
    for (const Card& card : cards) {
      if (fixed && *fixed > kGpusPerNode) continue;  // whole nodes: below
      // The term fleet's counts, and whatever one machine of the spot exchange can hold.
      std::vector<int> counts = card.term ? card.term->counts : std::vector<int>{};
      if (card.spot != nullptr) {
        for (int n : {1, 2, 4, 8}) {
          if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
        }
        std::sort(counts.begin(), counts.end());
      }
      if (fixed) {
        if (std::find(counts.begin(), counts.end(), *fixed) == counts.end()) {
          result.excluded.push_back({card.name, *fixed, card.name + " is not rented in sets of " +
                                                            std::to_string(*fixed)});
          continue;
        }
        counts = {*fixed};
      }
      for (int count : counts) GPUHUB_RETURN_IF_ERROR(Consider(card, count, result));
    }
    // Beyond one node: asked for, or the only way the job fits.
    if (fixed && *fixed > kGpusPerNode) {
      for (const Card& card : cards) {
        if (!CanRentWholeNodes(card)) {
          result.excluded.push_back({card.name, *fixed, WholeNodesReason(card)});
          continue;
        }
        GPUHUB_RETURN_IF_ERROR(Consider(card, *fixed, result));
      }
    } else if (!fixed && result.ranked.empty()) {
      for (const Card& card : cards) {
        if (!CanRentWholeNodes(card)) continue;
        const int nodes = SmallestNodes(card);
        if (nodes == 0) {
          result.excluded.push_back(
              {card.name, kGpusPerNode * kMaxPlanNodes,
               "does not fit even " + std::to_string(kMaxPlanNodes) + " nodes of " +
                   std::to_string(kGpusPerNode)});
          continue;
        }
        GPUHUB_RETURN_IF_ERROR(Consider(card, nodes * kGpusPerNode, result));
      }
    }
    std::stable_sort(result.ranked.begin(), result.ranked.end(),
                     [](const PlanOption& a, const PlanOption& b) {
                       if (a.quote.has_value() != b.quote.has_value()) return !a.quote;
                       if (a.memory_warning.empty() != b.memory_warning.empty()) {
                         return a.memory_warning.empty();
                       }
                       if (a.best_micros != b.best_micros) return a.best_micros < b.best_micros;
                       if (a.hours != b.hours) return a.hours < b.hours;
                       if (a.gpu != b.gpu) return a.gpu < b.gpu;
                       return a.count < b.count;
                     });
    if (result.ranked.empty()) {
      // The set that got furthest says the most: one that held the job but would take years
      // before any that did not hold it, then the largest tried.
      const PlanExcluded* furthest = nullptr;
      for (const auto& x : result.excluded) {
        if (furthest == nullptr || std::pair(x.fits, x.count) > std::pair(furthest->fits,
                                                                         furthest->count)) {
          furthest = &x;
        }
      }
      result.reason = "no configuration holds this job and can be priced";
      if (furthest != nullptr) {
        result.reason += " (" + ConfigurationName(furthest->gpu, furthest->count) + ": " +
                         furthest->reason + ")";
      }
    }
    return result;
  }

 private:
  static std::string Fp8Phrase(const sizing::Workload& w) {
    if (w.fp8_training) return "FP8 training";
    if (w.method == Method::kInference && w.kv_precision == sizing::Precision::kFp8 &&
        w.precision != sizing::Precision::kFp8) {
      return "an FP8 KV cache";
    }
    return "FP8 weights";
  }

  // Whole nodes of 8: term cards rented in sets of 8, spot cards (offers of 8 on one machine).
  static bool CanRentWholeNodes(const Card& card) {
    return card.term == nullptr || card.term->AllowsCount(kGpusPerNode);
  }
  static std::string WholeNodesReason(const Card& card) {
    return card.name + " is not rented in nodes of " + std::to_string(kGpusPerNode);
  }

  using EstimateKey = std::tuple<int, int, int, int, int, int, int, std::int64_t>;
  static EstimateKey KeyOf(const sizing::Workload& w) {
    return {w.gpus,           w.tensor_parallel,  w.pipeline_parallel, w.context_parallel,
            w.data_parallel,  w.virtual_pipeline, w.zero_stage,        w.batch};
  }

  Result<std::shared_ptr<const sizing::MemoryEstimate>> EstimateFor(const sizing::Workload& w) {
    const EstimateKey key = KeyOf(w);
    auto it = estimates_.find(key);
    if (it != estimates_.end()) return it->second;
    auto e = sizing::EstimateMemory(request_.fit.model, w);
    if (!e.ok()) return e.status();
    auto shared = std::make_shared<const sizing::MemoryEstimate>(*std::move(e));
    if (estimates_.size() < kMaxCachedEstimates) estimates_.emplace(key, shared);
    return shared;
  }

  // What a card may give the engine: vLLM/SGLang/TensorRT-LLM reserve a share of it up front.
  double ServingBudgetBytes(double vram_bytes) const {
    const double reserves = sizing::TraitsOf(request_.fit.workload.engine).reserves_fraction;
    return reserves > 0 ? vram_bytes * reserves : vram_bytes;
  }

  // The largest batch whose card figure fits `budget` (0: not even one sequence). The KV cache
  // and the logits grow linearly with the batch; the prefill working set grows until it reaches
  // the engine's chunk and then stays: the slope is refined from ever larger batches until the
  // answer stops moving, and checked.
  Result<std::int64_t> MaxBatch(sizing::Workload w, double budget) {
    w.batch = 1;
    GPUHUB_ASSIGN_OR_RETURN(auto one, EstimateFor(w));
    const double base = one->card_bytes();
    if (base > budget) return std::int64_t{0};
    std::int64_t batch = 2;
    for (int round = 0; round < 8; ++round) {
      w.batch = batch;
      GPUHUB_ASSIGN_OR_RETURN(auto e, EstimateFor(w));
      const double slope = (e->card_bytes() - base) / static_cast<double>(batch - 1);
      std::int64_t next = sizing::kMaxBatch;
      if (slope > 0) {
        next = std::clamp<std::int64_t>(
            1 + static_cast<std::int64_t>(std::floor((budget - base) / slope)), 1,
            sizing::kMaxBatch);
      }
      if (next == batch || next < 2) {
        batch = next;
        break;
      }
      batch = next;
    }
    for (int tries = 0; tries < 16 && batch > 1; ++tries) {
      w.batch = batch;
      GPUHUB_ASSIGN_OR_RETURN(auto e, EstimateFor(w));
      if (e->card_bytes() <= budget) break;
      batch = std::max<std::int64_t>(1, batch * 97 / 100);
    }
    return batch;
  }

  LayoutLimits LimitsFor(const Card& card, int count) const {
    LayoutLimits limits;
    limits.link_known = card.rates.link_gb_per_s_one_way.has_value();
    const int per_node = std::min(count, kGpusPerNode);
    limits.full_sharding = count == 1 || (card.term != nullptr &&
                                          catalog::AllowsShardedTraining(
                                              card.term->sharded_training, per_node));
    return limits;
  }

  // The smallest number of whole nodes of this card whose memory holds the job (0: none up to
  // kMaxPlanNodes). Memory only: the plan times the answer afterwards.
  int SmallestNodes(const Card& card) {
    const double vram = card.vram_gb * sizing::kBytesPerGb;
    auto fits = [&](int nodes) {
      const int count = nodes * kGpusPerNode;
      std::string why;
      for (sizing::Workload w : CandidateLayouts(request_.fit.workload, request_.fit.model, count,
                                                 request_.layout, LimitsFor(card, count), &why)) {
        if (request_.serving && request_.batch_max) w.batch = 1;
        auto e = EstimateFor(w);
        if (e.ok() && (*e)->card_bytes() <= vram) return true;
      }
      return false;
    };
    int hi = 2;
    while (hi <= kMaxPlanNodes && !fits(hi)) hi *= 2;
    if (hi > kMaxPlanNodes) {
      if (!fits(kMaxPlanNodes)) return 0;
      hi = kMaxPlanNodes;
    }
    int lo = std::max(1, hi / 2);  // lo does not fit (or is one node)
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (fits(mid)) {
        hi = mid;
      } else {
        lo = mid;
      }
    }
    return hi;
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

  // One layout timed on a card.
  struct Timed {
    sizing::Workload workload;
    double per_card_bytes = 0;
    double tokens_per_second = 0;
    double prompt_tokens_per_second = 0, decode_tokens_per_second = 0;
    std::vector<std::string> explain;
  };

  // Times one layout on a card: nullopt (with the reason in `considered`) when the card's
  // published figures cannot time it.
  std::optional<Timed> TimeLayout(const Card& card, const sizing::Workload& w, double per_card,
                                  const std::string& name, std::vector<std::string>& considered,
                                  std::string& first_error) {
    Timed t;
    t.workload = w;
    t.per_card_bytes = per_card;
    if (request_.serving) {
      const ServingJob& job = request_.serving_job;
      auto rate = ServingRateOn(request_.fit.model, w, job.prompt_tokens, job.output_tokens,
                                card.rates, request_.utilisation);
      if (!rate.ok()) {
        considered.push_back(name + ": " + rate.status().message());
        if (first_error.empty()) first_error = rate.status().message();
        return std::nullopt;
      }
      t.tokens_per_second = rate->output_tokens_per_second;
      t.prompt_tokens_per_second = rate->prompt_tokens_per_second;
      t.decode_tokens_per_second = rate->decode_tokens_per_second;
      t.explain = std::move(rate->explain);
    } else {
      auto rate = TrainingRateOn(request_.fit.model, w, card.rates, request_.utilisation);
      if (!rate.ok()) {
        considered.push_back(name + ": " + rate.status().message());
        if (first_error.empty()) first_error = rate.status().message();
        return std::nullopt;
      }
      t.tokens_per_second = rate->tokens_per_second;
      t.explain = std::move(rate->explain);
    }
    considered.push_back(
        name + ": " + FormatFixed(t.tokens_per_second, 0) + (request_.serving ? " output" : "") +
        " tokens/s, " + sizing::FormatGb(per_card) + " per card" +
        (request_.serving && request_.batch_max ? ", batch " + std::to_string(w.batch) : ""));
    return t;
  }

  Status Consider(const Card& card, int count, PlanResult& result) {
    const Filters& f = request_.fit.filters;
    bool fits = false;  // set once a layout holds the job
    auto exclude = [&](std::string why) {
      result.excluded.push_back({card.name, count, std::move(why), fits});
      return Status::Ok();
    };
    const double vram = card.vram_gb * sizing::kBytesPerGb;
    const sizing::Method method = request_.fit.workload.method;
    const int nodes = (count + kGpusPerNode - 1) / kGpusPerNode;
    const bool multi_node = count > kGpusPerNode;

    // Which layout: every candidate sized with its own sharding, the first that fit timed, the
    // fastest kept.
    std::string why_none;
    const LayoutLimits limits = LimitsFor(card, count);
    std::vector<sizing::Workload> layouts =
        CandidateLayouts(request_.fit.workload, request_.fit.model, count, request_.layout,
                         limits, &why_none);
    // The catalog's sharded-training limit, when it is what keeps a full fine-tune to replicas.
    const std::string no_sharding =
        method == sizing::Method::kFullFineTune && !limits.full_sharding && card.term != nullptr
            ? ShardedTrainingReason(*card.term, count)
            : std::string();
    if (layouts.empty()) return exclude(no_sharding.empty() ? why_none : no_sharding);
    std::optional<Timed> best;
    std::vector<std::string> considered;
    double smallest_need = 0;
    std::optional<sizing::Workload> smallest;  // the layout that misses the card by the least
    std::string first_error;
    std::size_t timed = 0;
    for (sizing::Workload& w : layouts) {
      const std::string name =
          sizing::LayoutName(sizing::LayoutOf(w), method);
      if (request_.serving && request_.batch_max) {
        auto batch = MaxBatch(w, ServingBudgetBytes(vram));
        if (!batch.ok()) {
          considered.push_back(name + ": cannot be sized (" + batch.status().message() + ")");
          if (first_error.empty()) first_error = batch.status().message();
          continue;
        }
        if (*batch == 0) {
          w.batch = 1;
          auto e = EstimateFor(w);
          const double need = e.ok() ? (*e)->card_bytes() : 0;
          if (smallest_need == 0 || need < smallest_need) smallest_need = need;
          considered.push_back(name + ": needs " + sizing::FormatGb(need) +
                               " per card for one sequence");
          continue;
        }
        w.batch = *batch;
      }
      auto sized = EstimateFor(w);
      if (!sized.ok()) {
        considered.push_back(name + ": cannot be sized (" + sized.status().message() + ")");
        if (first_error.empty()) first_error = sized.status().message();
        continue;
      }
      const double per_card = (*sized)->card_bytes();
      if (per_card > vram) {
        if (smallest_need == 0 || per_card < smallest_need) {
          smallest_need = per_card;
          smallest = w;
        }
        considered.push_back(name + ": needs " + sizing::FormatGb(per_card) + " per card");
        continue;
      }
      if (timed >= kMaxTimedLayouts) {
        considered.push_back(name + ": fits (" + sizing::FormatGb(per_card) +
                             " per card), not timed: more shards than the layouts timed");
        continue;
      }
      ++timed;
      auto t = TimeLayout(card, w, per_card, name, considered, first_error);
      if (!t) continue;
      if (!best || t->tokens_per_second > best->tokens_per_second * 1.0000001) best = std::move(t);
    }
    // A count the request fixed is answered even when the estimate says it does not fit: the
    // run may exist (the memory model has its own error band), and the answer says so.
    std::string memory_warning;
    if (!best && request_.layout.gpus && smallest) {
      const std::string name = sizing::LayoutName(sizing::LayoutOf(*smallest), method);
      best = TimeLayout(card, *smallest, smallest_need, name, considered, first_error);
      if (best) {
        memory_warning = "the memory estimate, " + sizing::FormatGb(smallest_need) +
                         " per card for " + name + ", is over the " +
                         FormatFixed(card.vram_gb, 0) + " GB of a " + card.name +
                         ": it may not fit (docs/sizing-model.md §4 gives the memory model's "
                         "error band)";
      }
    }
    if (!best) {
      if (smallest_need > 0) {
        return exclude((no_sharding.empty() ? "" : no_sharding + "; replicas ") + "needs " +
                       sizing::FormatGb(smallest_need) + (count > 1 ? " per card" : "") + ", " +
                       card.name + " has " + FormatFixed(card.vram_gb, 0) + " GB");
      }
      return exclude(first_error.empty() ? "no layout fits" : first_error);
    }

    fits = true;
    PlanOption o;
    o.gpu = card.name;
    o.count = count;
    o.memory_warning = memory_warning;
    o.workload = best->workload;
    const sizing::Layout layout = sizing::LayoutOf(o.workload);
    o.parallelism = ParallelismOf(layout);
    o.layout = sizing::LayoutName(layout, method);
    o.considered = std::move(considered);
    o.per_card_bytes = best->per_card_bytes;
    o.vram_gb = card.vram_gb;
    o.term = card.term != nullptr;
    o.in_stock = card.term != nullptr && card.term->free_now >= count;
    o.kind = KindOf(request_.serving, count);
    o.band = HeldOutBand(o.kind);
    o.tokens_per_second = best->tokens_per_second;
    o.tokens_per_second_low = o.tokens_per_second / (1 + o.band.p90);
    o.tokens_per_second_high = o.tokens_per_second / std::max(0.05, 1 - o.band.p90);
    o.prompt_tokens_per_second = best->prompt_tokens_per_second;
    o.decode_tokens_per_second = best->decode_tokens_per_second;
    if (request_.serving) o.batch = o.workload.batch;
    if (multi_node) o.quote = PlanQuote{nodes, kGpusPerNode};
    if (!memory_warning.empty()) o.explain.push_back("memory: " + memory_warning);
    o.explain.push_back("layout: " + o.layout + ", the fastest of " +
                        std::to_string(o.considered.size()) + " tried on " +
                        ConfigurationName(card.name, count) + " (" + Join(o.considered, "; ") +
                        ")");
    o.explain.push_back(
        "memory: " + sizing::FormatGb(o.per_card_bytes) + " per card of " +
        FormatFixed(card.vram_gb, 0) + " GB, sized with the same sharding" +
        (request_.serving && request_.batch_max
             ? "; --batch max: " + std::to_string(o.batch) + " sequences per replica fill " +
                   FormatFixed(100 * ServingBudgetBytes(vram) / vram, 0) + "% of the card"
             : ""));
    for (auto& line : best->explain) o.explain.push_back(std::move(line));

    double hours = 0;
    std::int64_t replicas = 1;
    if (request_.serving) {
      const ServingJob& job = request_.serving_job;
      const double per_day = o.tokens_per_second * 86400;
      replicas = static_cast<std::int64_t>(
          std::ceil(static_cast<double>(job.tokens_per_day) / std::max(per_day, 1e-9)));
      replicas = std::max<std::int64_t>(replicas, 1);
      if (replicas > kMaxServingReplicas) {
        return exclude("would need " + std::to_string(replicas) + " replicas (over " +
                       std::to_string(kMaxServingReplicas) + ")");
      }
      hours = static_cast<double>(job.days) * 24;
      o.explain.push_back(
          "replicas: " + std::to_string(job.tokens_per_day) + " tokens a day / (" +
          FormatFixed(o.tokens_per_second, 1) + " tokens/s x 86,400 s) = " +
          FormatFixed(static_cast<double>(job.tokens_per_day) / per_day, 3) + ", rounded up: " +
          std::to_string(replicas) + " (running " + std::to_string(job.days) + " days, " +
          FormatFixed(hours, 0) + " h)");
    } else {
      hours = request_.training.total_tokens / o.tokens_per_second / 3600;
      o.explain.push_back("hours: " + Tokens(request_.training.total_tokens) + " tokens / " +
                          FormatFixed(o.tokens_per_second, 0) + " tokens/s / 3600 = " +
                          FormatFixed(hours, 2) + " h (" +
                          FormatFixed(request_.training.total_tokens /
                                          o.tokens_per_second_high / 3600, 2) +
                          " to " +
                          FormatFixed(request_.training.total_tokens /
                                          o.tokens_per_second_low / 3600, 2) +
                          " h for 9 in 10 of the held-out runs of its kind)");
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
    // A multi-node set is priced as `nodes` single-node sets of the list: indicative.
    const int set_count = multi_node ? kGpusPerNode : count;
    const std::int64_t sets = multi_node ? nodes * replicas : replicas;
    const std::string what =
        multi_node ? std::to_string(nodes) + " nodes of " + ConfigurationName(card.name, set_count)
                   : ConfigurationName(card.name, count);

    // Term: months and weeks of the set (x replicas).
    if (card.term != nullptr && card.term->AllowsCount(set_count)) {
      const TermGpu& g = *card.term;
      if (f.region && !g.InRegion(*f.region)) {
        o.explain.push_back("term: " + g.name + " is not offered in " + *f.region);
      } else if (f.in_stock && g.free_now < count * replicas) {
        o.explain.push_back("term: " + std::to_string(g.free_now) + " free now, " +
                            std::to_string(count * replicas) + " needed (--in-stock)");
      } else {
        GPUHUB_ASSIGN_OR_RETURN(
            std::int64_t monthly,
            catalog::SetPriceMicros(catalog_, g, set_count, catalog::Term::kMonthly));
        GPUHUB_ASSIGN_OR_RETURN(
            std::int64_t weekly,
            catalog::SetPriceMicros(catalog_, g, set_count, catalog::Term::kWeekly));
        if (f.max_monthly_micros && monthly > *f.max_monthly_micros) {
          o.explain.push_back("term: " + Usd(monthly) + "/month is over the " +
                              Usd(*f.max_monthly_micros) + " budget");
        } else {
          PlanPrice p;
          p.indicative = multi_node;
          if (!CheckedMul(monthly, sets, &p.monthly_micros) ||
              !CheckedMul(weekly, sets, &p.weekly_micros)) {
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
              std::string(multi_node ? "term (indicative: list price of single nodes): "
                                     : "term: ") +
              std::to_string(billed) + " h covered by " + p.detail + " of " +
              (replicas > 1 ? std::to_string(replicas) + " x " : "") + what + " (" +
              Usd(monthly) + "/month, " + Usd(weekly) + "/week" +
              (set_count > 1 ? " per set, multi-card discount in" : "") + ") = " +
              Usd(p.total_micros) + "; the cheapest mix of 720 h months and 168 h weeks");
          o.term_price = std::move(p);
        }
      }
    }
    // Spot: the cheapest offer of the book for this card and count, billed by the hour.
    if (card.spot != nullptr) {
      const MarketOffer* offer = CheapestOffer(*card.spot, set_count);
      if (offer == nullptr) {
        o.explain.push_back("spot: no offer of " + std::to_string(set_count) + " " +
                            card.spot->name + " GPUs on one machine" +
                            (live_ ? " on the book now" : ""));
      } else {
        PlanPrice p;
        p.indicative = multi_node;
        p.price_micros_per_gpu_hour = offer->price_micros_per_gpu_hour;
        std::int64_t set_hourly = 0;
        if (!CheckedMul(offer->price_micros_per_gpu_hour, set_count, &set_hourly) ||
            !CheckedMul(set_hourly, sets, &p.hourly_micros) ||
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
            std::string(multi_node ? "spot (indicative: one machine's ask for every node): "
                                   : "spot: ") +
            std::to_string(billed) + " h (billed by the hour) x " +
            (sets > 1 ? std::to_string(sets) + " x " : "") + std::to_string(set_count) + " x " +
            "$" + FormatMicros(offer->price_micros_per_gpu_hour, 3) + "/GPU-h (" +
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
                        (multi_node ? " (indicative)" : "") + " = $" +
                        FormatFixed(o.usd_per_million_tokens, 4) + " per million tokens");
    if (multi_node) {
      o.explain.push_back("multi-node: request a quote (gpuhub quote-request, POST "
                          "/v1/quote-requests) for " +
                          std::to_string(nodes) + " nodes of " +
                          ConfigurationName(card.name, kGpusPerNode) +
                          "; between nodes 400 Gb/s per GPU assumed");
    }
    result.ranked.push_back(std::move(o));
    return Status::Ok();
  }

  // Estimates kept per plan (the layouts of every count tried; a bound, not a target).
  static constexpr std::size_t kMaxCachedEstimates = 4096;

  const catalog::Catalog& catalog_;
  const PlanRequest& request_;
  std::span<const MarketOffer> offers_;
  bool live_;
  std::map<EstimateKey, std::shared_ptr<const sizing::MemoryEstimate>> estimates_;
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
