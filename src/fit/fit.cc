#include "fit/fit.h"

#include <algorithm>
#include <map>

#include "core/money.h"
#include "core/strings.h"

namespace gpuhub::fit {

using catalog::Catalog;
using catalog::TermGpu;
using sizing::Method;
using sizing::Precision;

std::string_view ExclusionName(Exclusion exclusion) {
  switch (exclusion) {
    case Exclusion::kGpuFilter:
      return "gpu_filter";
    case Exclusion::kCountNotRented:
      return "count_not_rented";
    case Exclusion::kNotCuda:
      return "not_cuda";
    case Exclusion::kRegion:
      return "region";
    case Exclusion::kNeedsFp8:
      return "needs_fp8";
    case Exclusion::kSingleCardFits:
      return "single_card_fits";
    case Exclusion::kShardedTraining:
      return "sharded_training";
    case Exclusion::kCannotSize:
      return "cannot_size";
    case Exclusion::kDoesNotFit:
      return "does_not_fit";
    case Exclusion::kSmallerSetFits:
      return "smaller_set_fits";
    case Exclusion::kOutOfStock:
      return "out_of_stock";
    case Exclusion::kOverBudget:
      return "over_budget";
  }
  return "?";
}

std::string ShardedTrainingReason(const TermGpu& g, int count) {
  using catalog::ShardedTraining;
  std::string name = ConfigurationName(g.name, count);
  switch (g.sharded_training) {
    case ShardedTraining::kEightWayOnly:
      return "full fine-tuning across " + g.name + " cards shards 8-way only (" + g.link + ")";
    case ShardedTraining::kPairs:
      return "full fine-tuning shards across pairs of " + g.name + " only (" + g.link + ")";
    case ShardedTraining::kDataParallelOnly:
      return "full fine-tuning cannot shard across " + g.name + " cards (" + g.link +
             ": data parallel only)";
    case ShardedTraining::kSingleCard:
      return "full fine-tuning cannot shard across " + g.name + " cards (" + g.link +
             ": single card only)";
    case ShardedTraining::kUpTo8:
      return "full fine-tuning shards across at most 8 " + g.name + " cards";
  }
  return name + " cannot shard training";
}

std::string MultiNodeName(const MultiNodeFit& m) {
  static const char* kWords[] = {"zero", "one", "two",   "three", "four", "five",
                                 "six",  "seven", "eight", "nine", "ten"};
  const std::string n = m.nodes >= 0 && m.nodes <= 10 ? kWords[m.nodes] : std::to_string(m.nodes);
  return n + " nodes of " + ConfigurationName(m.gpu->name, kNodeGpus);
}

std::string ConfigurationName(const std::string& gpu, int count) {
  return count == 1 ? gpu : std::to_string(count) + "x " + gpu;
}

bool NeedsFp8(const sizing::Workload& w) {
  bool fp8_weights = w.method != Method::kQlora && w.method != Method::kFullFineTune &&
                     (w.precision == Precision::kFp8 || w.precision == Precision::kFp4);
  bool fp8_kv = w.method == Method::kInference && w.kv_precision == Precision::kFp8;
  return fp8_weights || fp8_kv || w.fp8_training;
}

bool NeedsFp4(const sizing::Workload& w) { return sizing::NeedsFp4Hardware(w.precision); }

bool HasFp4(catalog::Architecture a) { return a == catalog::Architecture::kBlackwell; }

namespace {

constexpr double kTightSingleBytes = 5e9;  // spec §6
constexpr double kTightSetBytes = 2e9;     // per card

std::string Gb(double bytes) { return FormatFixed(bytes / sizing::kBytesPerGb, 2) + " GB"; }

std::string VramText(const TermGpu& g) { return FormatFixed(g.vram_gb, 0) + " GB"; }

std::string Fp8Reason(const sizing::Workload& w) {
  if (w.precision == Precision::kFp4) return "FP4 weights";
  if (w.fp8_training) return "FP8 training";
  if (w.method == Method::kInference && w.kv_precision == Precision::kFp8 &&
      w.precision != Precision::kFp8) {
    return "an FP8 KV cache";
  }
  return "FP8 weights";
}

struct Evaluation {
  std::optional<Exclusion> exclusion;
  std::string reason;
};

// An exclusion as the rules found it: what its entry and sentence are made of, written only when
// someone reads them (FitOptions::exclusions, or nothing fits). Writing every sentence of every
// fit was ~20k of POST /v1/fit's ~150k instructions (callgrind) for answers that list none.
struct Pending {
  const TermGpu* gpu = nullptr;
  int count = 1;
  Exclusion kind = Exclusion::kDoesNotFit;
  double card_bytes = 0;            // kDoesNotFit: each card's share
  int fitting_count = 0;            // kSmallerSetFits: the set that holds the job
  std::int64_t monthly_micros = 0;  // kOverBudget: the set's price
  std::string message;              // kCannotSize: the sizing engine's
};

class Fitter {
 public:
  Fitter(const Catalog& catalog, const sizing::ModelShape& model, const sizing::Workload& workload,
         const Filters& filters, const FitOptions& options)
      : catalog_(catalog),
        model_(model),
        workload_(workload),
        filters_(filters),
        options_(options) {}

  Result<FitResult> Run() {
    FitResult result;
    GPUHUB_ASSIGN_OR_RETURN(std::shared_ptr<const sizing::MemoryEstimate> single, EstimateFor(1));
    result.required = *single;
    result.needs_fp8 = NeedsFp8(workload_);
    required_bytes_ = result.required.card_bytes();
    // Every candidate ends up ranked or excluded: room for all of them at once (growing the
    // vectors moved every exclusion's strings several times per fit, callgrind).
    std::size_t candidates = 0;
    for (const TermGpu& g : catalog_.term) {
      candidates += 1 + catalog_.discounts.size() + g.counts.size();
    }
    pending_.reserve(candidates);
    result.ranked.reserve(candidates);

    // Single cards first; sets only when none of them is left standing.
    for (const TermGpu& g : catalog_.term) {
      GPUHUB_RETURN_IF_ERROR(Consider(g, 1, result));
    }
    result.considered_sets = result.ranked.empty();
    std::vector<int> set_counts;  // one buffer for every card's (growing one per card was 45
                                  // allocations per fit)
    set_counts.reserve(catalog_.discounts.size() + 8);
    for (const TermGpu& g : catalog_.term) {
      bool smaller_set_fits = false;
      int fitting_count = 0;
      for (int count : SetCounts(g, set_counts)) {
        if (!result.considered_sets) {
          Exclude(g, count, Exclusion::kSingleCardFits);
          continue;
        }
        if (smaller_set_fits) {
          Exclude(g, count, Exclusion::kSmallerSetFits).fitting_count = fitting_count;
          continue;
        }
        GPUHUB_RETURN_IF_ERROR(Consider(g, count, result, &smaller_set_fits));
        if (smaller_set_fits && fitting_count == 0) fitting_count = count;
      }
    }
    std::stable_sort(result.ranked.begin(), result.ranked.end(),
                     [](const Candidate& a, const Candidate& b) {
                       if (a.monthly_micros != b.monthly_micros) {
                         return a.monthly_micros < b.monthly_micros;
                       }
                       if (a.count != b.count) return a.count < b.count;
                       if (a.headroom_bytes_per_card != b.headroom_bytes_per_card) {
                         return a.headroom_bytes_per_card > b.headroom_bytes_per_card;
                       }
                       return a.gpu->name < b.gpu->name;
                     });
    // The candidates left out, with their sentences, when asked for, and always when nothing
    // fits (the answer's reason quotes them).
    if (options_.exclusions || result.ranked.empty()) {
      result.excluded.resize(pending_.size());  // filled in place: no temporaries to move
      for (std::size_t i = 0; i < pending_.size(); ++i) {
        const Pending& p = pending_[i];
        Excluded& x = result.excluded[i];
        x.gpu = p.gpu->name;
        x.count = p.count;
        x.kind = p.kind;
        x.reason = Reason(p);
      }
    }
    if (result.ranked.empty()) {
      result.reason = NothingFitsReason(result);
      GPUHUB_RETURN_IF_ERROR(FindMultiNode(result));
      if (result.multi_node) {
        result.reason += "; multi-node: " + MultiNodeName(*result.multi_node) +
                         " would hold it (" + Gb(result.multi_node->per_card_bytes) +
                         " per card), request a quote (gpuhub quote-request, POST "
                         "/v1/quote-requests)";
      }
    }
    return result;
  }

  // The cheapest whole number of nodes of one card that holds the job, when no set of one node
  // does and memory is why: full fine-tuning shards with ZeRO-3 over every card (where the card
  // shards 8-way), the rest split the layers. Binary search on the node count per card.
  Status FindMultiNode(FitResult& result) {
    // Only when memory is why: something that fit one node but was over budget or out of stock
    // is the answer to change, not more nodes.
    bool memory_is_why = false;
    for (const Pending& p : pending_) {
      if (p.kind == Exclusion::kOverBudget || p.kind == Exclusion::kOutOfStock ||
          p.kind == Exclusion::kSmallerSetFits) {
        return Status::Ok();
      }
      memory_is_why = memory_is_why || p.kind == Exclusion::kDoesNotFit;
    }
    if (!memory_is_why) return Status::Ok();
    for (const TermGpu& g : catalog_.term) {
      if (!g.AllowsCount(kNodeGpus)) continue;
      if (filters_.gpu && g.name != *filters_.gpu) continue;
      if (filters_.cuda_only && g.stack != catalog::Stack::kCuda) continue;
      if (filters_.region && !g.InRegion(*filters_.region)) continue;
      if (result.needs_fp8 && !g.fp8) continue;
      if (NeedsFp4(workload_) && !HasFp4(g.compute.architecture)) continue;
      if (workload_.method == Method::kFullFineTune &&
          !catalog::AllowsShardedTraining(g.sharded_training, kNodeGpus)) {
        continue;
      }
      const double vram = g.vram_gb * sizing::kBytesPerGb;
      double per_card = 0;
      auto fits = [&](int nodes) {
        auto e = sizing::EstimateMemory(model_, OnCards(workload_, nodes * kNodeGpus));
        if (!e.ok() || e->card_bytes() > vram) return false;
        per_card = e->card_bytes();
        return true;
      };
      int hi = 2;
      while (hi <= kMaxFitNodes && !fits(hi)) hi *= 2;
      if (hi > kMaxFitNodes) {
        if (!fits(kMaxFitNodes)) continue;
        hi = kMaxFitNodes;
      }
      int lo = hi / 2;
      while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (fits(mid)) {
          hi = mid;
        } else {
          lo = mid;
        }
      }
      fits(hi);  // per_card of the answer
      GPUHUB_ASSIGN_OR_RETURN(std::int64_t set,
                              catalog::SetPriceMicros(catalog_, g, kNodeGpus, catalog::Term::kMonthly));
      std::int64_t monthly = 0;
      if (!CheckedMul(set, hi, &monthly)) continue;
      if (filters_.max_monthly_micros && monthly > *filters_.max_monthly_micros) continue;
      if (!result.multi_node || monthly < result.multi_node->monthly_micros) {
        result.multi_node = MultiNodeFit{&g, hi, per_card, monthly};
      }
    }
    return Status::Ok();
  }

 private:
  // Counts above one that the fleet rents: every count of a card except 1, plus the counts it is
  // not rented in (so --why-not can say "B200 is rented from 2").
  const std::vector<int>& SetCounts(const TermGpu& g, std::vector<int>& counts) const {
    counts.clear();
    for (const auto& d : catalog_.discounts) counts.push_back(d.count);
    for (int n : g.counts) {
      if (n > 1 && std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
    }
    std::sort(counts.begin(), counts.end());
    return counts;
  }

  Result<std::shared_ptr<const sizing::MemoryEstimate>> EstimateFor(int count) {
    auto it = estimates_.find(count);
    if (it == estimates_.end()) {
      GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate e,
                              sizing::EstimateMemory(model_, OnCards(workload_, count)));
      it = estimates_.emplace(count, std::make_shared<const sizing::MemoryEstimate>(std::move(e)))
               .first;
    }
    return it->second;
  }

  Pending& Exclude(const TermGpu& g, int count, Exclusion kind) {
    Pending& p = pending_.emplace_back();
    p.gpu = &g;
    p.count = count;
    p.kind = kind;
    return p;
  }

  // The sentence for people: "needs 71.30 GB, A40 has 48 GB".
  std::string Reason(const Pending& p) const {
    const TermGpu& g = *p.gpu;
    switch (p.kind) {
      case Exclusion::kGpuFilter:
        return "not the card asked for (--gpu)";
      case Exclusion::kCountNotRented: {
        std::string counts;
        for (int n : g.counts) counts += (counts.empty() ? "" : ", ") + std::to_string(n);
        return g.name + " is rented in sets of " + counts + " only";
      }
      case Exclusion::kNotCuda:
        return g.name + " runs " + std::string(catalog::StackName(g.stack)) + ", not CUDA";
      case Exclusion::kRegion: {
        std::string regions;
        for (const auto& r : g.regions) regions += (regions.empty() ? "" : ", ") + r;
        return g.name + " is offered in " + regions + " only, not " + *filters_.region;
      }
      case Exclusion::kNeedsFp8:
        if (NeedsFp4(workload_)) {
          return "FP4 weights need FP4 tensor cores (Blackwell); " + g.name + " is " +
                 std::string(catalog::ArchitectureName(g.compute.architecture));
        }
        return Fp8Reason(workload_) + " need an FP8 card; " + g.name + " has no FP8";
      case Exclusion::kSingleCardFits:
        return "a single card holds this job; sets are considered only when none does";
      case Exclusion::kShardedTraining:
        return ShardedTrainingReason(g, p.count);
      case Exclusion::kCannotSize:
        return "cannot be sized on " + std::to_string(p.count) + " cards: " + p.message;
      case Exclusion::kDoesNotFit: {
        std::string share = p.count == 1 ? "needs " + Gb(p.card_bytes)
                                         : "needs " + Gb(p.card_bytes) + " per card";
        return share + ", " + g.name + " has " + VramText(g);
      }
      case Exclusion::kSmallerSetFits:
        return ConfigurationName(g.name, p.fitting_count) +
               " already holds the job; a larger set only costs more";
      case Exclusion::kOutOfStock:
        return std::to_string(g.free_now) + " " + g.name + " free now, the set needs " +
               std::to_string(p.count);
      case Exclusion::kOverBudget:
        return "$" + catalog::FormatUsd(p.monthly_micros) + "/month is over the $" +
               catalog::FormatUsd(*filters_.max_monthly_micros) + " budget";
    }
    return "";
  }

  // Applies the rules to one candidate; ranks it or records why not. `fits_memory` (optional) is
  // set when the set holds the job, whatever stock and budget say.
  Status Consider(const TermGpu& g, int count, FitResult& result, bool* fits_memory = nullptr) {
    if (filters_.gpu && catalog_.FindTerm(*filters_.gpu) != &g) {
      Exclude(g, count, Exclusion::kGpuFilter);
      return Status::Ok();
    }
    if (!g.AllowsCount(count)) {
      Exclude(g, count, Exclusion::kCountNotRented);
      return Status::Ok();
    }
    if (filters_.cuda_only && g.stack != catalog::Stack::kCuda) {
      Exclude(g, count, Exclusion::kNotCuda);
      return Status::Ok();
    }
    if (filters_.region && !g.InRegion(*filters_.region)) {
      Exclude(g, count, Exclusion::kRegion);
      return Status::Ok();
    }
    if ((result.needs_fp8 && !g.fp8) || (NeedsFp4(workload_) && !HasFp4(g.compute.architecture))) {
      Exclude(g, count, Exclusion::kNeedsFp8);
      return Status::Ok();
    }
    if (count > 1 && workload_.method == Method::kFullFineTune &&
        !catalog::AllowsShardedTraining(g.sharded_training, count)) {
      Exclude(g, count, Exclusion::kShardedTraining);
      return Status::Ok();
    }
    auto sized = EstimateFor(count);
    if (!sized.ok()) {
      if (count == 1) return sized.status();
      Exclude(g, count, Exclusion::kCannotSize).message = sized.status().message();
      return Status::Ok();
    }
    std::shared_ptr<const sizing::MemoryEstimate> e = *std::move(sized);
    double vram_bytes = g.vram_gb * sizing::kBytesPerGb;
    if (e->card_bytes() > vram_bytes) {
      Exclude(g, count, Exclusion::kDoesNotFit).card_bytes = e->card_bytes();
      return Status::Ok();
    }
    if (fits_memory != nullptr) *fits_memory = true;
    if (filters_.in_stock && g.free_now < count) {
      Exclude(g, count, Exclusion::kOutOfStock);
      return Status::Ok();
    }
    Candidate c;
    c.gpu = &g;
    c.count = count;
    c.per_card_bytes = e->card_bytes();
    c.headroom_bytes_per_card = vram_bytes - e->card_bytes();
    c.tight = c.headroom_bytes_per_card < (count == 1 ? kTightSingleBytes : kTightSetBytes);
    c.discount_ppm = catalog_.DiscountPpm(count);
    GPUHUB_ASSIGN_OR_RETURN(c.monthly_micros,
                            catalog::SetPriceMicros(catalog_, g, count, catalog::Term::kMonthly));
    GPUHUB_ASSIGN_OR_RETURN(c.weekly_micros,
                            catalog::SetPriceMicros(catalog_, g, count, catalog::Term::kWeekly));
    GPUHUB_ASSIGN_OR_RETURN(c.hourly_micros,
                            catalog::SetPriceMicros(catalog_, g, count, catalog::Term::kHourly));
    if (filters_.max_monthly_micros && c.monthly_micros > *filters_.max_monthly_micros) {
      Exclude(g, count, Exclusion::kOverBudget).monthly_micros = c.monthly_micros;
      return Status::Ok();
    }
    c.in_stock = g.free_now >= count;
    c.decode_ceiling_tokens_per_s = sizing::DecodeCeilingTokensPerSecond(g.bandwidth_gb_per_s, *e);
    c.estimate = std::move(e);
    result.ranked.push_back(std::move(c));
    return Status::Ok();
  }

  std::string TryInstead() const {
    switch (workload_.method) {
      case Method::kInference:
        return "try a smaller weight precision (fp8, int4), an fp8 KV cache, a shorter context or "
               "a smaller batch";
      case Method::kFullFineTune:
        return "try --workload lora or qlora, or --offload-optimizer";
      case Method::kLora:
        return "try --workload qlora";
      case Method::kQlora:
        return "try a smaller model";
    }
    return "";
  }

  std::string NothingFitsReason(const FitResult& result) const {
    const Excluded* cheapest_over_budget = nullptr;
    std::int64_t cheapest_price = 0;
    const Excluded* out_of_stock = nullptr;
    const Excluded* closest = nullptr;  // does not fit, smallest share of memory missing
    double closest_ratio = 0;
    bool sharding = false;
    for (const auto& x : result.excluded) {
      const TermGpu* g = catalog_.FindTerm(x.gpu);
      if (x.kind == Exclusion::kOverBudget) {
        auto price = catalog::SetPriceMicros(catalog_, *g, x.count, catalog::Term::kMonthly);
        if (price.ok() && (cheapest_over_budget == nullptr || *price < cheapest_price)) {
          cheapest_over_budget = &x;
          cheapest_price = *price;
        }
      } else if (x.kind == Exclusion::kOutOfStock && out_of_stock == nullptr) {
        out_of_stock = &x;
      } else if (x.kind == Exclusion::kDoesNotFit) {
        auto it = estimates_.find(x.count);
        if (it == estimates_.end()) continue;
        double ratio = it->second->card_bytes() / (g->vram_gb * sizing::kBytesPerGb);
        if (closest == nullptr || ratio < closest_ratio) {
          closest = &x;
          closest_ratio = ratio;
        }
      } else if (x.kind == Exclusion::kShardedTraining) {
        sharding = true;
      }
    }
    if (cheapest_over_budget != nullptr) {
      return "the cheapest configuration that holds it, " +
             ConfigurationName(cheapest_over_budget->gpu, cheapest_over_budget->count) + " at $" +
             catalog::FormatUsd(cheapest_price) + "/month, is over the $" +
             catalog::FormatUsd(*filters_.max_monthly_micros) + " budget";
    }
    if (out_of_stock != nullptr) {
      return "every configuration that holds it is out of stock (" +
             ConfigurationName(out_of_stock->gpu, out_of_stock->count) + ": " +
             out_of_stock->reason + "); drop --in-stock to rent it when cards free up";
    }
    if (closest != nullptr) {
      std::string text = "no configuration holds this job (" + Gb(required_bytes_) +
                         " on one card); the closest, " +
                         ConfigurationName(closest->gpu, closest->count) + ", " + closest->reason;
      if (sharding)
        text += "; full fine-tuning can only shard over NVLink/NVSwitch/Infinity Fabric";
      return text + "; " + TryInstead();
    }
    if (sharding) {
      return "no card that passes the filters can hold this job alone (" + Gb(required_bytes_) +
             ") or shard full fine-tuning across a set; " + TryInstead();
    }
    if (!result.excluded.empty()) {
      // Everything was filtered out before memory was even checked: say by what.
      for (Exclusion kind : {Exclusion::kNeedsFp8, Exclusion::kRegion, Exclusion::kNotCuda,
                             Exclusion::kCountNotRented}) {
        for (const auto& x : result.excluded) {
          if (x.kind == kind) return "no card passes the filters: " + x.reason;
        }
      }
    }
    return "no card passes the filters";
  }

  const Catalog& catalog_;
  const sizing::ModelShape& model_;
  const sizing::Workload& workload_;
  const Filters& filters_;
  const FitOptions& options_;
  std::vector<Pending> pending_;  // in the order the rules left them out
  double required_bytes_ = 0;
  std::map<int, std::shared_ptr<const sizing::MemoryEstimate>> estimates_;
};

}  // namespace

sizing::Workload OnCards(sizing::Workload w, int count) {
  w.gpus = count;
  // ZeRO-3 across cards; on one card only when parameters are offloaded (ZeRO-Infinity, FSDP
  // CPU offload).
  if ((w.method == Method::kFullFineTune && count > 1) ||
      (w.offload_params && w.method != Method::kInference)) {
    w.zero_stage = 3;
  }
  return w;
}

sizing::Workload WorkloadFor(Method method) {
  sizing::Workload w;
  w.method = method;
  w.precision = method == Method::kQlora ? Precision::kNf4 : Precision::kBf16;
  return w;
}

Status ValidateFitInput(const Catalog& catalog, const sizing::Workload& workload,
                        const Filters& filters) {
  sizing::Workload as_fitted = workload;  // what Fit runs on one card
  if (workload.offload_params && workload.zero_stage == 0) as_fitted.zero_stage = 3;
  GPUHUB_RETURN_IF_ERROR(sizing::ValidateWorkload(as_fitted));
  if (workload.gpus != 1) {
    return Status::InvalidArgument(
        "fit picks the number of GPUs itself; drop --gpus (use --gpu NAME to pick a card, or "
        "gpuhub size --gpus N to size a fixed set)");
  }
  if (workload.zero_stage != 0) {
    return Status::InvalidArgument(kZeroIsFitsChoice);
  }
  if (filters.region && catalog.FindRegion(*filters.region) == nullptr) {
    return Status::InvalidArgument("unknown region '" + filters.region->substr(0, 40) +
                                   "' (regions: " + catalog.RegionCodes() + ")");
  }
  if (filters.max_monthly_micros && *filters.max_monthly_micros <= 0) {
    return Status::InvalidArgument(
        "--max-monthly-usd must be a positive amount like 1500 or 1500.50");
  }
  if (filters.gpu) {
    const TermGpu* g = catalog.FindTerm(*filters.gpu);
    if (g == nullptr) {
      return Status::InvalidArgument("unknown GPU '" + filters.gpu->substr(0, 40) +
                                     "' (term fleet: " + catalog.TermNames() + ")");
    }
    if (NeedsFp4(workload) && !HasFp4(g->compute.architecture)) {
      return Status::InvalidArgument(g->name + " has no FP4 tensor cores: FP4 weights need a "
                                     "Blackwell card (B200)")
          .WithField("precision");
    }
    if (NeedsFp8(workload) && !g->fp8) {
      std::string fp8_cards;
      for (const auto& other : catalog.term) {
        if (other.fp8) fp8_cards += (fp8_cards.empty() ? "" : ", ") + other.name;
      }
      return Status::InvalidArgument(g->name + " has no FP8 support: " + Fp8Reason(workload) +
                                     " need one of " + fp8_cards +
                                     " (or use --precision bf16 or int4 and --kv-precision fp16)");
    }
    if (filters.cuda_only && g->stack != catalog::Stack::kCuda) {
      return Status::InvalidArgument(g->name + " runs " +
                                     std::string(catalog::StackName(g->stack)) +
                                     ", not CUDA: drop --cuda-only or pick a CUDA card");
    }
  }
  return Status::Ok();
}

Result<FitResult> Fit(const Catalog& catalog, const sizing::ModelShape& model,
                      const sizing::Workload& workload, const Filters& filters,
                      const FitOptions& options) {
  GPUHUB_RETURN_IF_ERROR(ValidateFitInput(catalog, workload, filters));
  return Fitter(catalog, model, workload, filters, options).Run();
}

std::vector<std::string> ExplainCandidate(const Candidate& c) {
  std::vector<std::string> lines;
  const TermGpu& g = *c.gpu;
  std::string per_card = c.count == 1 ? "" : " per card";
  for (const auto& component : c.estimate->components) {
    lines.push_back(component.name + ": " + component.formula);
  }
  lines.push_back("required" + per_card + ": " + Gb(c.per_card_bytes));
  lines.push_back(
      "headroom" + per_card + ": " + VramText(g) + " - " + Gb(c.per_card_bytes) + " = " +
      Gb(c.headroom_bytes_per_card) +
      (c.tight ? (c.count == 1 ? " (tight: under 5 GB)" : " (tight: under 2 GB per card)") : ""));
  std::string price = "price: $" + catalog::FormatUsd(g.monthly_micros) + "/month";
  if (c.count > 1) {
    price += " x " + std::to_string(c.count) + " cards x (1 - " +
             catalog::FormatPercent(c.discount_ppm) + ") = $" +
             catalog::FormatUsd(c.monthly_micros) + "/month";
  } else {
    price += " (list)";
  }
  price += "; weekly $" + catalog::FormatUsd(c.weekly_micros) +
           (g.weekly_derived ? " (derived)" : "") + "; hourly = monthly / 720 = $" +
           catalog::FormatUsd(c.hourly_micros);
  lines.push_back(price);
  if (c.decode_ceiling_tokens_per_s > 0) {
    lines.push_back("decode ceiling: " + FormatFixed(g.bandwidth_gb_per_s, 0) + " GB/s / " +
                    Gb(c.estimate->decode_weight_bytes) + " of weights read per token = " +
                    FormatFixed(c.decode_ceiling_tokens_per_s, 1) + " tok/s" +
                    (c.count > 1 ? " (splitting layers across cards does not raise it)" : ""));
  }
  return lines;
}

}  // namespace gpuhub::fit
