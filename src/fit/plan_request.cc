// ResolvePlanRequest: the plan's fields on top of fit's (plan.h).
#include "core/strings.h"
#include "fit/limits.h"
#include "fit/plan.h"
#include "sizing/limits.h"
#include "sizing/parallel.h"

namespace gpuhub::fit {
namespace {

Status Bad(std::string message, std::string field) {
  return Status::InvalidArgument(std::move(message)).WithField(std::move(field));
}

Result<std::int64_t> InRange(std::int64_t v, std::int64_t min, std::int64_t max,
                             const std::string& flag, const std::string& field) {
  if (v < min || v > max) {
    return Bad(flag + " must be between " + std::to_string(min) + " and " + std::to_string(max) +
                   ", got " + std::to_string(v),
               field);
  }
  return v;
}

// A fraction of a published peak: 0 < x <= 1, as typed ("0.35").
Result<double> Fraction(const std::string& text, const std::string& flag,
                        const std::string& field) {
  auto v = ParseDouble(text, flag);
  if (!v.ok() || !(*v > 0) || *v > 1) {
    return Bad(flag + " must be a fraction of the published peak above 0 and at most 1, like "
                      "0.35, got '" +
                   text.substr(0, 40) + "'",
               field);
  }
  return *v;
}

}  // namespace

Result<PlanRequest> ResolvePlanRequest(const RequestFields& fields, const RequestContext& context,
                                       const catalog::Catalog& catalog, TimestampMicros now) {
  RequestFields f = fields;
  // --gpu may name a spot-only card: resolved here, not by fit's term-fleet check.
  std::optional<std::string> gpu;
  if (f.gpu) {
    if (const catalog::TermGpu* t = catalog.FindTerm(*f.gpu)) {
      gpu = t->name;
    } else if (const catalog::SpotGpu* s = catalog.FindSpot(*f.gpu)) {
      gpu = s->term_name.value_or(s->name);
    } else {
      std::string spot;
      for (const auto& s : catalog.spot) spot += (spot.empty() ? "" : ", ") + s.name;
      return Bad("unknown GPU '" + f.gpu->substr(0, 40) + "' (term fleet: " + catalog.TermNames() +
                     "; spot exchange: " + spot + ")",
                 "gpu");
    }
    f.gpu.reset();
  }
  // The layout plan searches: what the request fixes of it is kept aside (fit refuses it).
  LayoutAsk ask;
  {
    struct Degree {
      std::optional<std::int64_t>& value;
      std::optional<int>* target;
      const char* flag;
      const char* field;
    };
    Degree degrees[] = {{f.gpus, &ask.gpus, "--gpus", "gpus"}, {f.tp, &ask.tp, "--tp", "tp"},
                        {f.pp, &ask.pp, "--pp", "pp"},         {f.cp, &ask.cp, "--cp", "cp"},
                        {f.dp, &ask.dp, "--dp", "dp"},         {f.vp, &ask.vp, "--vp", "vp"}};
    for (Degree& d : degrees) {
      if (!d.value) continue;
      GPUHUB_ASSIGN_OR_RETURN(std::int64_t v,
                              InRange(*d.value, 1, sizing::kMaxGpus, d.flag, d.field));
      *d.target = static_cast<int>(v);
      d.value.reset();
    }
    if (f.zero) {
      GPUHUB_ASSIGN_OR_RETURN(std::int64_t z, InRange(*f.zero, 0, 3, "--zero", "zero"));
      ask.zero = static_cast<int>(z);
      f.zero.reset();
    }
  }
  if (ask.NamesDegrees()) {
    const long long product = static_cast<long long>(ask.tp.value_or(1)) * ask.pp.value_or(1) *
                              ask.cp.value_or(1) * ask.dp.value_or(1);
    if (!ask.gpus && ask.dp) {
      if (product > sizing::kMaxGpus) {
        return Bad("tp x pp x cp x dp is " + std::to_string(product) + " GPUs, over " +
                       std::to_string(sizing::kMaxGpus),
                   "gpus");
      }
      ask.gpus = static_cast<int>(product);
    }
    if (ask.gpus && ask.dp && product != *ask.gpus) {
      return Bad("tp x pp x cp x dp is " + std::to_string(product) + " GPUs, not the " +
                     std::to_string(*ask.gpus) + " of --gpus",
                 "gpus");
    }
    if (ask.gpus && *ask.gpus % (product / ask.dp.value_or(1)) != 0) {
      return Bad("--gpus " + std::to_string(*ask.gpus) + " is not a multiple of tp x pp x cp (" +
                     std::to_string(product / ask.dp.value_or(1)) + ")",
                 "gpus");
    }
    if (!ask.gpus) ask.gpus = static_cast<int>(product);
  }
  if (ask.gpus && *ask.gpus > kGpusPerNode && *ask.gpus % kGpusPerNode != 0) {
    return Bad("above " + std::to_string(kGpusPerNode) + " GPUs a set is whole nodes of " +
                   std::to_string(kGpusPerNode) + ": --gpus must be a multiple of " +
                   std::to_string(kGpusPerNode) + ", got " + std::to_string(*ask.gpus),
               "gpus");
  }
  const bool batch_max = f.batch_max;
  f.batch_max = false;
  const bool serving = f.workload && (*f.workload == "infer" || *f.workload == "inference");
  PlanRequest r;
  r.serving = serving;
  r.layout = ask;
  r.batch_max = batch_max;
  if (batch_max && !serving) {
    return Bad("--batch max applies to serving (--workload infer): the largest batch of "
               "sequences that fits each configuration",
               "batch");
  }
  if (ask.zero && serving) return Bad("--zero applies to training", "zero");
  if (ask.cp && *ask.cp > 1 && serving) {
    return Bad("--cp splits a training sequence; serving splits with --tp or --pp", "cp");
  }
  if (serving) {
    for (auto [given, flag] : {std::pair{f.tokens.has_value(), "--tokens"},
                               std::pair{f.samples.has_value(), "--samples"},
                               std::pair{f.epochs.has_value(), "--epochs"}}) {
      if (given) {
        std::string field = std::string(flag).substr(2);
        return Bad(std::string(flag) + " applies to training; serving is planned from "
                                       "--tokens-per-day",
                   field);
      }
    }
    if (!f.tokens_per_day) {
      return Bad("--tokens-per-day is required for a serving plan (output tokens a day)",
                 "tokens_per_day");
    }
    ServingJob& j = r.serving_job;
    GPUHUB_ASSIGN_OR_RETURN(j.tokens_per_day, InRange(*f.tokens_per_day, 1, kMaxTokensPerDay,
                                                      "--tokens-per-day", "tokens_per_day"));
    if (f.prompt_tokens) {
      GPUHUB_ASSIGN_OR_RETURN(j.prompt_tokens, InRange(*f.prompt_tokens, 0, 10'000'000,
                                                       "--prompt-tokens", "prompt_tokens"));
    }
    if (f.output_tokens) {
      GPUHUB_ASSIGN_OR_RETURN(j.output_tokens, InRange(*f.output_tokens, 1, 10'000'000,
                                                       "--output-tokens", "output_tokens"));
    }
    if (f.days) {
      GPUHUB_ASSIGN_OR_RETURN(j.days, InRange(*f.days, 1, kMaxPlanDays, "--days", "days"));
    }
    if (!f.context) f.context = j.prompt_tokens + j.output_tokens;
    if (*f.context < j.prompt_tokens + j.output_tokens) {
      return Bad("--context " + std::to_string(*f.context) + " cannot hold a request of " +
                     std::to_string(j.prompt_tokens) + " prompt + " +
                     std::to_string(j.output_tokens) + " output tokens",
                 "context");
    }
  } else {
    for (auto [given, flag] : {std::pair{f.tokens_per_day.has_value(), "--tokens-per-day"},
                               std::pair{f.prompt_tokens.has_value(), "--prompt-tokens"},
                               std::pair{f.output_tokens.has_value(), "--output-tokens"},
                               std::pair{f.days.has_value(), "--days"},
                               std::pair{f.bandwidth_efficiency.has_value(),
                                         "--bandwidth-efficiency"}}) {
      if (given) {
        std::string field = std::string(flag).substr(2);
        for (char& c : field) c = c == '-' ? '_' : c;
        return Bad(std::string(flag) + " applies to serving (--workload infer)", field);
      }
    }
    if (f.tokens && f.samples) {
      return Bad("give --tokens (per epoch) or --samples (x --seq), not both", "samples");
    }
    if (!f.tokens && !f.samples) {
      return Bad("--tokens (tokens per epoch) or --samples (dataset samples, x --seq) is "
                 "required for a training plan",
                 "tokens");
    }
  }
  if (ask.vp && *ask.vp > 1 && !(ask.pp && *ask.pp > 1)) {
    return Bad("virtual pipeline stages interleave pipeline stages: give --pp 2 or more", "vp");
  }
  GPUHUB_ASSIGN_OR_RETURN(r.fit, ResolveFitRequest(f, context, catalog));
  if (ask.NamesDegrees()) {
    // The degrees asked for must suit the model (tensor parallel dividing its heads, no more
    // pipeline stages than layers), or no configuration could ever be planned.
    sizing::Workload w = r.fit.workload;
    w.gpus = ask.gpus.value_or(1);
    w.tensor_parallel = ask.tp.value_or(1);
    w.pipeline_parallel = ask.pp.value_or(1);
    w.context_parallel = ask.cp.value_or(1);
    w.virtual_pipeline = ask.vp.value_or(1);
    w.data_parallel = ask.dp.value_or(0);
    GPUHUB_RETURN_IF_ERROR(sizing::ValidateLayoutForModel(r.fit.model, w));
  }
  if (gpu) r.fit.filters.gpu = gpu;
  if (!serving) {
    TrainingJob& t = r.training;
    if (f.tokens) {
      GPUHUB_ASSIGN_OR_RETURN(t.tokens_per_epoch,
                              InRange(*f.tokens, 1, static_cast<std::int64_t>(kMaxPlanTokens),
                                      "--tokens", "tokens"));
    } else {
      GPUHUB_ASSIGN_OR_RETURN(std::int64_t samples,
                              InRange(*f.samples, 1, static_cast<std::int64_t>(kMaxPlanTokens),
                                      "--samples", "samples"));
      const double tokens =
          static_cast<double>(samples) * static_cast<double>(r.fit.workload.sequence_tokens);
      if (tokens > kMaxPlanTokens) {
        return Bad("--samples x --seq is over " + sizing::FormatCount(kMaxPlanTokens) +
                       " tokens per epoch",
                   "samples");
      }
      t.tokens_per_epoch = samples * r.fit.workload.sequence_tokens;
    }
    if (f.epochs) {
      GPUHUB_ASSIGN_OR_RETURN(t.epochs,
                              InRange(*f.epochs, 1, kMaxPlanEpochs, "--epochs", "epochs"));
    }
    t.total_tokens = static_cast<double>(t.tokens_per_epoch) * static_cast<double>(t.epochs);
    if (t.total_tokens > kMaxPlanTokens) {
      return Bad("tokens per epoch x epochs is over " + sizing::FormatCount(kMaxPlanTokens),
                 "epochs");
    }
  }
  if (f.utilisation) {
    GPUHUB_ASSIGN_OR_RETURN(r.utilisation.training_or_prefill,
                            Fraction(*f.utilisation, "--utilisation", "utilisation"));
  }
  if (f.bandwidth_efficiency) {
    GPUHUB_ASSIGN_OR_RETURN(
        r.utilisation.decode_bandwidth,
        Fraction(*f.bandwidth_efficiency, "--bandwidth-efficiency", "bandwidth_efficiency"));
  }
  r.start = now;
  if (f.start) {
    auto start = ParseTimestamp(*f.start);
    if (!start.ok()) {
      return Bad("--start must be a time like 2025-07-01T09:00:00Z, got '" +
                     f.start->substr(0, 40) + "'",
                 "start");
    }
    r.start = *start;
  }
  return r;
}

}  // namespace gpuhub::fit
