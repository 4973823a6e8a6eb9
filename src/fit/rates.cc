#include "fit/rates.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "sizing/throughput.h"

namespace gpuhub::fit {

using catalog::Architecture;
using sizing::Method;
using sizing::Precision;

std::string_view ParallelismName(Parallelism p) {
  switch (p) {
    case Parallelism::kSingle:
      return "single";
    case Parallelism::kDataParallel:
      return "data-parallel";
    case Parallelism::kSharded:
      return "zero3-sharded";
    case Parallelism::kLayerSplit:
      return "layer-split";
  }
  return "?";
}

Utilisation DefaultUtilisation(Architecture a, Method m) {
  // Training at a saturated micro-batch, of the dense BF16 peak, from published tokens/s (the
  // calibration table of docs/sizing-model.md §6 and fit/rates_test.cc). QLoRA's bitsandbytes
  // matmuls dequantize every weight first and reach less of the peak than LoRA's.
  Utilisation u;
  switch (a) {
    case Architecture::kAmpere:
      u = {0.62, 0.62, 0.67,
           "A100: llm-foundry (mosaicml) MPT benchmarks and torchtitan Llama 3 on A100; "
           "decode: Qwen2.5 vLLM speed benchmark on A100"};
      break;
    case Architecture::kHopper:
      u = {0.50, 0.50, 0.67,
           "H100: llm-foundry (mosaicml) MPT benchmarks, BF16; decode as ampere (vLLM)"};
      break;
    case Architecture::kAda:
      u = {0.45, 0.45, 0.67,
           "L40S: Hugging Face PEFT MetaMathQA runs; RTX 4090: torchtune's README; decode as "
           "ampere (vLLM)"};
      break;
    case Architecture::kBlackwell:
      u = {0.50, 0.50, 0.67,
           "not calibrated on Blackwell: the hopper factors (Megatron-Bridge's B200 FP8 "
           "pre-training reaches 2.1x H100's tokens/s per GPU, as the 2.3x peak suggests)"};
      break;
    case Architecture::kCdna3:
      u = {0.28, 0.28, 0.60,
           "MI300X: 0.74 x the peak ratio of H200 in a single-GPU 8B BF16 training comparison "
           "(H200 1.32-1.40x faster; alpharomercoma/MI300X-vs-H200)"};
      break;
    case Architecture::kUnknown:
      u = {0.40, 0.40, 0.60, "architecture not in the catalog: a conservative default"};
      break;
  }
  if (m == Method::kQlora) u.training *= 0.8;
  return u;
}

namespace {

std::string Tf(double flops_per_s) { return FormatFixed(flops_per_s / 1e12, 1) + " TFLOPS"; }
std::string Sec(double s) {
  return s >= 1 ? FormatFixed(s, 3) + " s" : FormatFixed(s * 1e3, 2) + " ms";
}

std::optional<double> OneWay(catalog::Interconnect k, std::optional<double> published,
                             std::string* note) {
  if (!published) {
    if (k == catalog::Interconnect::kPcie) {
      *note = "PCIe link speed not published: PCIe Gen4 x16, " +
              FormatFixed(kUnpublishedPcieGbPerS, 0) + " GB/s one way, assumed";
      return kUnpublishedPcieGbPerS;
    }
    *note = "link speed not published";
    return std::nullopt;
  }
  if (k == catalog::Interconnect::kPcie) {
    *note = "PCIe " + FormatFixed(*published, 0) + " GB/s one way";
    return *published;
  }
  *note = std::string(catalog::InterconnectName(k)) + " " + FormatFixed(*published, 0) +
          " GB/s published for both directions: " + FormatFixed(*published / 2, 0) +
          " GB/s one way";
  return *published / 2;
}

}  // namespace

CardRates RatesOf(const catalog::TermGpu& g) {
  CardRates r;
  r.name = g.name;
  r.architecture = g.compute.architecture;
  r.bf16_tflops = g.compute.bf16_dense_tflops;
  r.fp8_tflops = g.compute.fp8_dense_tflops;
  r.bandwidth_gb_per_s = g.bandwidth_gb_per_s;
  r.link_gb_per_s_one_way = OneWay(g.interconnect, g.link_gb_per_s, &r.link_note);
  return r;
}

CardRates RatesOf(const catalog::SpotGpu& g, const catalog::TermGpu* term) {
  CardRates r;
  if (term != nullptr) r = RatesOf(*term);  // link and FP8 from the same card in the term fleet
  r.name = g.name;
  r.architecture = g.compute.architecture;
  r.bf16_tflops = g.bf16_dense_tflops;
  r.fp8_tflops = g.compute.fp8_dense_tflops;
  r.bandwidth_gb_per_s = g.bandwidth_gb_per_s;
  if (term == nullptr) r.link_note = "link between the cards of a machine not published";
  return r;
}

Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                    const CardRates& card, int count, Parallelism parallelism,
                                    const UtilisationOverride& over) {
  if (!card.bf16_tflops) {
    return Status::InvalidArgument(card.name + ": BF16 tensor throughput not published");
  }
  TrainingRate r;
  const Utilisation defaults = DefaultUtilisation(card.architecture, w.method);
  // fp32 training runs on TF32 tensor cores: half the BF16 rate on Ampere, Ada and Hopper.
  const bool fp32 = w.method == Method::kFullFineTune && w.precision == Precision::kFp32;
  const double peak = *card.bf16_tflops * 1e12 * (fp32 ? 0.5 : 1.0);
  const double tokens_micro =
      static_cast<double>(w.batch) * static_cast<double>(w.sequence_tokens);
  if (over.training_or_prefill) {
    r.utilisation = *over.training_or_prefill;
  } else {
    r.utilisation = defaults.training * tokens_micro / (tokens_micro + kHalfUtilisationTokens);
  }
  const sizing::TrainingFlops flops = sizing::TrainingFlopsPerToken(model, w);
  const sizing::TrainingBytes bytes = sizing::TrainingBytesPerStep(model, w);
  const double rate = peak * r.utilisation;
  const double compute = tokens_micro * flops.per_token / rate;
  const double bandwidth = card.bandwidth_gb_per_s ? *card.bandwidth_gb_per_s * 1e9 : 0;
  const double floor = bandwidth > 0 ? bytes.weights_per_pass * bytes.passes / bandwidth : 0;
  const bool replicated =
      parallelism == Parallelism::kDataParallel || parallelism == Parallelism::kSharded;
  const double replicas = replicated ? count : 1;
  const double link = card.link_gb_per_s_one_way ? *card.link_gb_per_s_one_way * 1e9 : 0;
  const double ring = count > 1 ? (count - 1.0) / count : 0;
  // ZeRO-3/FSDP gathers every layer's parameters for the forward and again for the backward and
  // reduce-scatters the gradients, each micro-batch; overlapped with compute (prefetch).
  double gather = 0;
  if (parallelism == Parallelism::kSharded && link > 0) {
    gather = 3 * ring * bytes.parameter_bytes / link;
  }
  // Data parallel: the gradients are all-reduced once per optimizer step (ring: 2 (n-1)/n of
  // them each way), overlapped with the last micro-batch's backward.
  double all_reduce = 0;
  if (parallelism == Parallelism::kDataParallel && link > 0) {
    all_reduce = 2 * ring * bytes.gradient_bytes / link;
  }
  const double micro = std::max({compute, floor, gather});
  const double shards = parallelism == Parallelism::kSharded ? count : 1;
  const double optimizer = bandwidth > 0 ? bytes.optimizer_step / shards / bandwidth : 0;
  const double accum = w.gradient_accumulation_steps;
  r.step_seconds = accum * micro + optimizer + std::max(0.0, all_reduce - micro);
  r.tokens_per_step = replicas * accum * tokens_micro;
  r.tokens_per_second = r.tokens_per_step / r.step_seconds;

  r.explain.push_back("FLOPs per token: " + flops.formula);
  r.explain.push_back(
      "rate per card: " + FormatFixed(*card.bf16_tflops, 1) + " dense BF16 TFLOPS" +
      (fp32 ? " x 0.5 (fp32 on TF32 tensor cores)" : "") + " x utilisation " +
      (over.training_or_prefill
           ? FormatFixed(r.utilisation, 3) + " (given)"
           : FormatFixed(defaults.training, 2) + " (" +
                 std::string(catalog::ArchitectureName(card.architecture)) + ", " +
                 std::string(sizing::MethodName(w.method)) + ") x " +
                 FormatFixed(tokens_micro, 0) + " / (" + FormatFixed(tokens_micro, 0) + " + " +
                 FormatFixed(kHalfUtilisationTokens, 0) + ") tokens per micro-batch = " +
                 FormatFixed(r.utilisation, 3)) +
      " = " + Tf(rate));
  r.explain.push_back("micro-batch: " + FormatFixed(tokens_micro, 0) + " tokens x " +
                      sizing::FormatCount(flops.per_token) + " FLOPs / " + Tf(rate) + " = " +
                      Sec(compute) +
                      (floor > 0 ? "; weights read: " + bytes.weights_formula + " at " +
                                       FormatFixed(*card.bandwidth_gb_per_s, 0) +
                                       " GB/s = " + Sec(floor) + (floor > compute ? " (bound)" : "")
                                 : "") +
                      (gather > 0 ? "; ZeRO-3 gathers 3 x " + FormatFixed(ring, 3) + " x " +
                                        sizing::FormatGb(bytes.parameter_bytes) + " over " +
                                        card.link_note + " = " + Sec(gather) +
                                        (gather > compute ? " (bound)" : "")
                                  : ""));
  r.explain.push_back(
      "optimizer step: " + bytes.optimizer_formula +
      (shards > 1 ? " / " + FormatFixed(shards, 0) + " shards" : "") +
      (bandwidth > 0 ? " at " + FormatFixed(*card.bandwidth_gb_per_s, 0) + " GB/s = " +
                           Sec(optimizer)
                     : " (bandwidth not published: not counted)"));
  if (all_reduce > 0) {
    r.explain.push_back("gradient all-reduce: 2 x " + FormatFixed(ring, 3) + " x " +
                        sizing::FormatGb(bytes.gradient_bytes) + " over " + card.link_note +
                        " = " + Sec(all_reduce) + ", overlapped with the last backward");
  }
  r.explain.push_back(
      "step: " + FormatFixed(accum, 0) + " micro-batch(es) x " + Sec(micro) + " + optimizer " +
      Sec(optimizer) +
      (all_reduce > micro ? " + all-reduce beyond the backward " + Sec(all_reduce - micro) : "") +
      " = " + Sec(r.step_seconds) + " for " + FormatFixed(replicas, 0) + " replica(s) x " +
      FormatFixed(accum, 0) + " x " + FormatFixed(tokens_micro, 0) + " tokens = " +
      FormatFixed(r.tokens_per_second, 0) + " tokens/s" +
      (parallelism == Parallelism::kLayerSplit
           ? " (layers split: the cards work one after another, no faster than one)"
           : ""));
  return r;
}

Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, int count, Parallelism parallelism,
                                  const UtilisationOverride& over) {
  if (!card.bf16_tflops) {
    return Status::InvalidArgument(card.name + ": BF16 tensor throughput not published");
  }
  if (!card.bandwidth_gb_per_s) {
    return Status::InvalidArgument(card.name + ": memory bandwidth not published");
  }
  ServingRate r;
  const Utilisation defaults = DefaultUtilisation(card.architecture, w.method);
  const bool fp8 = w.precision == Precision::kFp8 && card.fp8_tflops;
  const double peak = (fp8 ? *card.fp8_tflops : *card.bf16_tflops) * 1e12;
  r.utilisation_prefill = over.training_or_prefill.value_or(defaults.prefill);
  const double format = w.precision == Precision::kInt8   ? kInt8DecodeEfficiency
                        : w.precision == Precision::kInt4 || w.precision == Precision::kNf4
                            ? kInt4DecodeEfficiency
                            : 1.0;
  r.decode_bandwidth = over.decode_bandwidth.value_or(defaults.decode_bandwidth * format);
  const std::int64_t kv_tokens = prompt_tokens + output_tokens / 2;
  const sizing::ServingWork work =
      sizing::ServingWorkFor(model, w, prompt_tokens, kv_tokens, w.batch);
  const double rate = peak * r.utilisation_prefill;
  r.prefill_seconds_per_request =
      static_cast<double>(prompt_tokens) * work.prefill_flops_per_token / rate;
  const double bandwidth = *card.bandwidth_gb_per_s * 1e9 * r.decode_bandwidth;
  // A layer split reads each card's share one after another: the step takes as long as on one
  // card that held everything; replicas each decode their own batch.
  const double memory = (work.decode_weight_bytes + work.decode_kv_bytes) / bandwidth;
  const double compute = static_cast<double>(w.batch) * work.decode_flops_per_token / rate;
  r.decode_step_seconds = std::max(memory, compute);
  const double batch = static_cast<double>(w.batch);
  const double per_batch = batch * r.prefill_seconds_per_request +
                           static_cast<double>(output_tokens) * r.decode_step_seconds;
  const double replicas = parallelism == Parallelism::kDataParallel ? count : 1;
  r.output_tokens_per_second = replicas * batch * static_cast<double>(output_tokens) / per_batch;

  r.explain.push_back("work: " + work.formula);
  r.explain.push_back(
      "prefill: " + std::to_string(prompt_tokens) + " prompt tokens x " +
      sizing::FormatCount(work.prefill_flops_per_token) + " FLOPs / (" +
      FormatFixed(fp8 ? *card.fp8_tflops : *card.bf16_tflops, 1) + (fp8 ? " FP8" : " BF16") +
      " TFLOPS x " + FormatFixed(r.utilisation_prefill, 2) +
      (over.training_or_prefill ? " given" : "") + ") = " + Sec(r.prefill_seconds_per_request) +
      " per request");
  r.explain.push_back("decode step at batch " + std::to_string(w.batch) + ": max(memory " +
                      sizing::FormatGb(work.decode_weight_bytes + work.decode_kv_bytes) + " / (" +
                      FormatFixed(*card.bandwidth_gb_per_s, 0) + " GB/s x " +
                      FormatFixed(r.decode_bandwidth, 2) +
                      (over.decode_bandwidth ? " given" : "") + ") = " + Sec(memory) +
                      ", compute " + Sec(compute) + ") = " + Sec(r.decode_step_seconds) +
                      (parallelism == Parallelism::kLayerSplit
                           ? " (layers split: the cards read their shares one after another)"
                           : ""));
  r.explain.push_back(
      "throughput: " + FormatFixed(replicas, 0) + " replica(s) x " + std::to_string(w.batch) +
      " sequences x " + std::to_string(output_tokens) + " output tokens / (" +
      std::to_string(w.batch) + " prefills x " + Sec(r.prefill_seconds_per_request) + " + " +
      std::to_string(output_tokens) + " steps x " + Sec(r.decode_step_seconds) + ") = " +
      FormatFixed(r.output_tokens_per_second, 1) + " output tokens/s");
  return r;
}

}  // namespace gpuhub::fit
