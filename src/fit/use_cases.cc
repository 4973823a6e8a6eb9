#include "fit/use_cases.h"

#include <algorithm>
#include <cmath>

#include "core/money.h"
#include "core/strings.h"
#include "fit/fit.h"
#include "fit/rates.h"
#include "fit/use_cases_internal.h"

namespace gpuhub::fit {

using catalog::SpotGpu;
using catalog::TermGpu;
using sizing::Method;
using sizing::Precision;

Result<UseCase> ParseUseCase(std::string_view text) {
  if (text == "training") return UseCase::kTraining;
  if (text == "image-video" || text == "image" || text == "video" || text == "image-generation") {
    return UseCase::kImageVideo;
  }
  if (text == "rendering" || text == "3d" || text == "vfx" || text == "3d-rendering") {
    return UseCase::kRendering;
  }
  if (text == "science" || text == "scientific-computing" || text == "simulation" || text == "hpc") {
    return UseCase::kScience;
  }
  if (text == "fine-tuning" || text == "finetuning" || text == "fine_tuning") {
    return UseCase::kFineTuning;
  }
  if (text == "inference") return UseCase::kInference;
  return Status::InvalidArgument("unknown use '" + std::string(text.substr(0, 40)) +
                                 "' (expected training, fine-tuning, inference, image-video, rendering or science)")
      .WithField("use");
}

std::string_view UseCaseName(UseCase use) {
  switch (use) {
    case UseCase::kTraining:
      return "training";
    case UseCase::kFineTuning:
      return "fine-tuning";
    case UseCase::kInference:
      return "inference";
    case UseCase::kImageVideo:
      return "image-video";
    case UseCase::kRendering:
      return "rendering";
    case UseCase::kScience:
      return "science";
  }
  return "?";
}

namespace {

constexpr const char* kReferenceModel = "meta-llama/Llama-3.1-8B";

std::string Params(double p) { return FormatFixed(p / 1e9, p >= 10e9 ? 0 : 1) + "B"; }
std::string Rate(double v) { return FormatFixed(v, 0); }

sizing::Workload Serving(Precision p) {
  sizing::Workload w;
  w.precision = p;
  return w;
}

class Builder {
 public:
  Builder(const catalog::Catalog& catalog, const std::vector<sizing::BundledModel>& models,
          UseCase use)
      : catalog_(catalog), use_(use) {
    for (const auto& m : models) ladder_.push_back(&m);
    // Largest first: the first that fits is the answer.
    std::sort(ladder_.begin(), ladder_.end(), [](const auto* a, const auto* b) {
      return a->shape.total_params > b->shape.total_params;
    });
  }

  Result<UseCaseView> Run() {
    UseCaseView view;
    view.use = use_;
    const sizing::BundledModel* reference = nullptr;
    for (const auto* m : ladder_) {
      if (m->id == kReferenceModel) reference = m;
    }
    if (reference == nullptr) {
      return Status::InvalidArgument(std::string("the bundled models lack ") + kReferenceModel);
    }
    reference_ = &reference->shape;
    switch (use_) {
      case UseCase::kTraining:
        view.title = "LLM training";
        view.summary =
            "Full training keeps 16 bytes per parameter of weights, gradients and Adam state "
            "before activations, so it is sharded across cards (ZeRO-3/FSDP): every step "
            "moves every parameter between them. What matters: memory per card, dense BF16 "
            "tensor throughput, and a link that lets the cards shard (NVLink/NVSwitch or "
            "Infinity Fabric; over PCIe full training cannot shard).";
        view.reference =
            "Llama-3.1-8B full fine-tuning (bf16 mixed precision, AdamW, seq 2048, batch 1, "
            "checkpointing) on 8 cards where the card shards, else one";
        break;
      case UseCase::kFineTuning:
        view.title = "LLM fine-tuning";
        view.summary =
            "LoRA freezes the base in 16 bits and trains small adapters; QLoRA keeps the base "
            "in 4 bits. What matters: memory for the frozen base and the activations, tensor "
            "throughput; a model too large for one card splits its layers over any link.";
        view.reference = "Llama-3.1-8B LoRA (rank 16 on q/v, seq 2048, batch 4) on one card";
        break;
      case UseCase::kInference:
        view.title = "LLM inference";
        view.summary =
            "Serving reads every weight once per decode step, and the KV cache of every "
            "sequence: memory bandwidth sets the tokens per second, memory the model and the "
            "batch it holds; FP8 halves weights and cache on cards that have it.";
        view.reference =
            "Llama-3.1-8B BF16, 32 sequences of 1,024 prompt + 256 output tokens, on one card";
        break;
      case UseCase::kImageVideo:
      case UseCase::kRendering:
      case UseCase::kScience:
        return Status::Internal("the general uses are built by use_cases_general.cc");
    }
    for (const Card& card : Cards(catalog_)) {
      GPUHUB_ASSIGN_OR_RETURN(UseCaseCard c, Describe(card));
      view.cards.push_back(std::move(c));
    }
    std::stable_sort(view.cards.begin(), view.cards.end(),
                     [](const UseCaseCard& a, const UseCaseCard& b) {
                       if (a.fit != b.fit) return a.fit;
                       if (!a.fit) return false;
                       const bool pa = a.usd_per_million_tokens > 0,
                                  pb = b.usd_per_million_tokens > 0;
                       if (pa != pb) return pa;
                       return a.usd_per_million_tokens < b.usd_per_million_tokens;
                     });
    view.notes.push_back(
        "largest model: the biggest of gpuhub's bundled models (gpuhub models) the engine "
        "sizes into the cards for this use; one card must be rented alone (term or spot)");
    view.notes.push_back(
        "tokens/s: fit/rates.h at the calibrated utilisation of each card family, with the band "
        "9 in 10 published runs fell in (docs/sizing-model.md §6); $ per million tokens at the "
        "term's hourly price (monthly / 720), else the spot opening ask");
    return view;
  }

 private:
  // Does `m` fit `count` cards of `card` for workload `w`? (fit's rules: ZeRO-3 for full
  // fine-tuning across cards, layers split otherwise.)
  bool Fits(const Card& card, const sizing::ModelShape& m, const sizing::Workload& w, int count) {
    auto e = sizing::EstimateMemory(m, OnCards(w, count));
    return e.ok() && e->card_bytes() <= card.vram_gb * sizing::kBytesPerGb;
  }

  const sizing::BundledModel* Largest(const Card& card, const sizing::Workload& w, int count) {
    for (const auto* m : ladder_) {
      if (Fits(card, m->shape, w, count)) return m;
    }
    return nullptr;
  }

  // Full fine-tuning across 8 of these cards: the card's sharded-training rule.
  std::optional<std::string> WhyNoSharding(const Card& card) const {
    if (card.term == nullptr) return "the link between its cards is not published";
    if (!catalog::AllowsShardedTraining(card.term->sharded_training, 8)) {
      return ShardedTrainingReason(*card.term, 8);
    }
    return std::nullopt;
  }

  LargestModel LargestFor(const Card& card, const std::string& label, const sizing::Workload& w,
                          bool sharded) {
    LargestModel l;
    l.label = label;
    if (card.AllowsOne()) {
      if (const auto* m = Largest(card, w, 1)) {
        l.one_card = m->id;
        l.one_card_params = m->shape.total_params;
      }
    }
    if (!card.AllowsEight()) {
      l.eight_cards_note = "not rented in sets of 8";
      return l;
    }
    if (sharded) {
      if (auto why = WhyNoSharding(card)) {
        l.eight_cards_note = *why;
        return l;
      }
      l.eight_cards_note = "ZeRO-3 over " + card.term->link;
    } else {
      l.eight_cards_note = "layers split across the cards";
    }
    if (const auto* m = Largest(card, w, 8)) {
      l.eight_cards = m->id;
      l.eight_cards_params = m->shape.total_params;
    }
    return l;
  }

  std::int64_t HourlyMicros(const Card& card, int count) const {
    return SetHourlyMicros(catalog_, card, count);
  }

  void SetRate(UseCaseCard& c, double tps, double p90, std::int64_t hourly_micros) {
    c.tokens_per_second = tps;
    c.tokens_per_second_low = tps / (1 + p90);
    c.tokens_per_second_high = tps / (1 - p90);
    if (hourly_micros > 0 && tps > 0) {
      c.usd_per_million_tokens = catalog::MicrosToUsd(hourly_micros) / (tps * 3600) * 1e6;
    }
  }

  Result<UseCaseCard> Describe(const Card& card) {
    UseCaseCard c = CardBasics(card);
    c.interconnect = card.term != nullptr
                         ? card.term->link + " (" +
                               std::string(catalog::ShardedTrainingName(card.term->sharded_training)) +
                               ")"
                         : "not published";
    const std::string tflops = card.rates.bf16_tflops
                                   ? FormatFixed(*card.rates.bf16_tflops, 0) + " dense BF16 TFLOPS"
                                   : "BF16 throughput not published";
    // "LoRA up to Qwen2.5-32B (33B) on one card, Qwen3-235B-A22B (235B) on 8".
    auto largest_text = [](const LargestModel& l) {
      auto model = [](const std::string& id, double params) {
        const auto slash = id.find('/');
        return (slash == std::string::npos ? id : id.substr(slash + 1)) + " (" + Params(params) +
               ")";
      };
      std::string s = l.label + " up to " +
                      (l.one_card ? model(*l.one_card, l.one_card_params) + " on one card"
                                  : std::string("no bundled model on one card"));
      s += l.eight_cards ? ", " + model(*l.eight_cards, l.eight_cards_params) + " on 8"
                         : ", none on 8" + (l.eight_cards_note.empty() ? std::string()
                                                                        : " (" + l.eight_cards_note +
                                                                              ")");
      return s;
    };
    const sizing::ModelShape& ref = *reference_;
    switch (use_) {
      case UseCase::kTraining: {
        c.largest.push_back(LargestFor(card, "full fine-tuning", WorkloadFor(Method::kFullFineTune), /*sharded=*/true));
        const bool one = card.AllowsOne() && Fits(card, ref, WorkloadFor(Method::kFullFineTune), 1);
        // On 8 cards: ZeRO-3 where the card shards (fit's rule), as the largest model is sized.
        std::optional<Parallelism> eight;
        if (card.AllowsEight() && !WhyNoSharding(card) && Fits(card, ref, WorkloadFor(Method::kFullFineTune), 8)) {
          eight = Parallelism::kSharded;
        }
        const int count = eight ? 8 : 1;
        if (eight || one) {
          auto rate = TrainingRateOn(ref, WorkloadFor(Method::kFullFineTune), card.rates, count,
                                     eight ? *eight : Parallelism::kSingle, {});
          if (rate.ok()) {
            SetRate(c, rate->tokens_per_second, kTrainingHeldOutP90Error,
                    HourlyMicros(card, count));
            c.reference = "Llama-3.1-8B full fine-tuning on " + ConfigurationName(card.name, count);
          }
        }
        c.fit = eight.has_value() && c.tokens_per_second > 0;
        if (!c.fit) {
          const auto no_sharding = WhyNoSharding(card);
          c.why.push_back(no_sharding ? "cannot shard full training across 8 cards: " + *no_sharding
                                      : "too little memory: a full fine-tune of Llama-3.1-8B "
                                        "fits neither one card nor 8 sharded ones");
        }
        c.why.push_back("memory: " + FormatFixed(card.vram_gb, 0) + " GB per card; " +
                        largest_text(c.largest[0]));
        if (c.tokens_per_second > 0) {
          c.why.push_back("tensor throughput: " + tflops + ": about " +
                          Rate(c.tokens_per_second) + " tokens/s (" +
                          Rate(c.tokens_per_second_low) + "–" + Rate(c.tokens_per_second_high) +
                          ") for " + c.reference);
        } else {
          c.why.push_back("tensor throughput: " + tflops);
        }
        c.why.push_back("interconnect: " + c.interconnect +
                        (WhyNoSharding(card) ? "" : ": every step's all-gather and "
                                                    "reduce-scatter stay on the fast link"));
        break;
      }
      case UseCase::kFineTuning: {
        c.largest.push_back(LargestFor(card, "LoRA", WorkloadFor(Method::kLora), false));
        c.largest.push_back(LargestFor(card, "QLoRA", WorkloadFor(Method::kQlora), false));
        // The reference run: LoRA at batch 4 where it fits one card, else QLoRA (batch 4, 1).
        struct Try {
          Method method;
          std::int64_t batch;
          const char* text;
        };
        for (Try t : {Try{Method::kLora, 4, "LoRA, batch 4"}, Try{Method::kQlora, 4, "QLoRA, batch 4"},
                      Try{Method::kQlora, 1, "QLoRA, batch 1"}}) {
          sizing::Workload w = WorkloadFor(t.method);
          w.batch = t.batch;
          if (!card.AllowsOne() || !Fits(card, ref, w, 1)) continue;
          auto rate = TrainingRateOn(ref, w, card.rates, 1, Parallelism::kSingle, {});
          if (!rate.ok()) break;
          SetRate(c, rate->tokens_per_second, kTrainingHeldOutP90Error, HourlyMicros(card, 1));
          c.reference = "Llama-3.1-8B " + std::string(t.text) + " x 2048, on one " + card.name;
          break;
        }
        c.fit = c.tokens_per_second > 0;
        if (!c.fit) {
          c.why.push_back(card.rates.bf16_tflops
                              ? "too little memory for an 8B QLoRA on one card"
                              : "BF16 throughput not published: no speed can be worked out");
        }
        c.why.push_back("memory: " + FormatFixed(card.vram_gb, 0) + " GB; " +
                        largest_text(c.largest[0]) + "; " + largest_text(c.largest[1]));
        c.why.push_back("tensor throughput: " + tflops +
                        (c.tokens_per_second > 0
                             ? ": about " + Rate(c.tokens_per_second) + " tokens/s (" +
                                   Rate(c.tokens_per_second_low) + "–" +
                                   Rate(c.tokens_per_second_high) + ") for " + c.reference
                             : ""));
        c.why.push_back("interconnect: " + c.interconnect +
                        ": a model larger than one card splits its layers over any link");
        break;
      }
      case UseCase::kInference: {
        c.largest.push_back(LargestFor(card, "BF16", Serving(Precision::kBf16), false));
        c.largest.push_back(LargestFor(card, "INT4", Serving(Precision::kInt4), false));
        // The reference: 32 sequences at BF16 where they fit one card, else FP8 (FP8 cards), else
        // INT4 weights.
        for (Precision p : {Precision::kBf16, Precision::kFp8, Precision::kInt4}) {
          if (p == Precision::kFp8 && !card.rates.fp8_tflops) continue;
          sizing::Workload w = Serving(p);
          w.batch = 32;
          w.context_tokens = 1024 + 256;
          if (!card.AllowsOne() || !Fits(card, ref, w, 1)) continue;
          auto rate = ServingRateOn(ref, w, 1024, 256, card.rates, 1, Parallelism::kSingle, {});
          sizing::Workload single = w;
          single.batch = 1;
          auto one = ServingRateOn(ref, single, 1024, 256, card.rates, 1, Parallelism::kSingle, {});
          if (!rate.ok() || !one.ok()) break;
          SetRate(c, rate->output_tokens_per_second, kServingHeldOutP90Error,
                  HourlyMicros(card, 1));
          // Decode speed of one stream: one token per step.
          c.decode_tokens_per_second = 1.0 / one->decode_step_seconds;
          c.reference = "Llama-3.1-8B " + std::string(sizing::PrecisionName(p)) +
                        " at 32 sequences on one " + card.name;
          break;
        }
        c.fit = c.tokens_per_second > 0;
        if (!c.fit) {
          c.why.push_back(!card.rates.bandwidth_gb_per_s
                              ? "memory bandwidth not published: no throughput can be worked out"
                              : "too little memory for Llama-3.1-8B at 32 sequences, even at INT4");
        }
        c.why.push_back("memory: " + FormatFixed(card.vram_gb, 0) + " GB; " +
                        largest_text(c.largest[0]) + "; " + largest_text(c.largest[1]));
        c.why.push_back(
            "bandwidth: " +
            (card.rates.bandwidth_gb_per_s
                 ? FormatFixed(*card.rates.bandwidth_gb_per_s, 0) + " GB/s" +
                       (c.decode_tokens_per_second > 0
                            ? ": about " + Rate(c.decode_tokens_per_second) +
                                  " tokens/s for one stream of the reference, " +
                                  Rate(c.tokens_per_second) + " (" +
                                  Rate(c.tokens_per_second_low) + "–" +
                                  Rate(c.tokens_per_second_high) + ") at 32"
                            : "")
                 : std::string("not published")));
        c.why.push_back(std::string("FP8: ") +
                        (card.rates.fp8_tflops ? "yes (" + FormatFixed(*card.rates.fp8_tflops, 0) +
                                                     " dense TFLOPS): FP8 weights and KV halve "
                                                     "memory"
                                               : "no: INT4/INT8 weight-only quantization "
                                                 "instead"));
        break;
      }
      case UseCase::kImageVideo:
      case UseCase::kRendering:
      case UseCase::kScience:
        break;  // built by use_cases_general.cc
    }
    return c;
  }

  const catalog::Catalog& catalog_;
  UseCase use_;
  std::vector<const sizing::BundledModel*> ladder_;
  const sizing::ModelShape* reference_ = nullptr;
};

}  // namespace

std::vector<Card> Cards(const catalog::Catalog& c) {
  std::vector<Card> cards;
  for (const TermGpu& g : c.term) {
    Card card{&g, nullptr, g.name, g.vram_gb, RatesOf(g)};
    for (const SpotGpu& s : c.spot) {
      if (s.term_name && *s.term_name == g.name) card.spot = &s;
    }
    cards.push_back(card);
  }
  for (const SpotGpu& s : c.spot) {
    if (!s.term_name) cards.push_back({nullptr, &s, s.name, s.vram_gb, RatesOf(s, nullptr)});
  }
  return cards;
}

UseCaseCard CardBasics(const Card& card) {
  UseCaseCard c;
  c.name = card.name;
  c.term = card.term;
  c.spot = card.spot;
  c.vram_gb = card.vram_gb;
  c.bf16_tflops = card.rates.bf16_tflops;
  c.fp8_tflops = card.rates.fp8_tflops;
  c.bandwidth_gb_per_s = card.rates.bandwidth_gb_per_s;
  c.general = card.general();
  return c;
}

std::int64_t SetHourlyMicros(const catalog::Catalog& catalog, const Card& card, int count) {
  if (card.term != nullptr && card.term->AllowsCount(count)) {
    auto p = catalog::SetPriceMicros(catalog, *card.term, count, catalog::Term::kHourly);
    if (p.ok()) return *p;
  }
  if (card.spot != nullptr && card.spot->opening_ask_micros_per_hour) {
    return *card.spot->opening_ask_micros_per_hour * count;
  }
  return 0;
}

Result<UseCaseView> BuildUseCase(const catalog::Catalog& catalog,
                                 const std::vector<sizing::BundledModel>& models, UseCase use,
                                 const std::vector<sizing::DiffusionModel>& diffusion) {
  if (IsGeneralUseCase(use)) return BuildGeneralUseCase(catalog, diffusion, use);
  return Builder(catalog, models, use).Run();
}

void ApplySpotPrices(const catalog::Catalog& catalog, std::span<const MarketOffer> offers,
                     bool live, UseCaseView& view) {
  for (UseCaseCard& c : view.cards) {
    c.spot_live = live;
    c.spot_from_micros_per_gpu_hour.reset();
    c.spot_gpus_on_offer = 0;
    if (c.spot == nullptr) continue;
    if (!live) {
      c.spot_from_micros_per_gpu_hour = c.spot->opening_ask_micros_per_hour;
      continue;
    }
    for (const MarketOffer& o : offers) {
      if (catalog.FindSpot(o.gpu) != c.spot) continue;
      c.spot_gpus_on_offer += o.free_gpus;
      if (!c.spot_from_micros_per_gpu_hour ||
          o.price_micros_per_gpu_hour < *c.spot_from_micros_per_gpu_hour) {
        c.spot_from_micros_per_gpu_hour = o.price_micros_per_gpu_hour;
      }
    }
  }
}

}  // namespace gpuhub::fit
