// ServingRateOn: prefill and decode on a layout of cards with a serving engine (rates.h;
// docs/sizing-model.md §6).
#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "fit/rates.h"
#include "fit/rates_internal.h"
#include "sizing/throughput.h"

namespace gpuhub::fit {

using rates_internal::RingSeconds;
using rates_internal::Sec;
using sizing::Precision;

Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, int count, Parallelism parallelism,
                                  const UtilisationOverride& over) {
  return ServingRateOn(model, WithParallelism(w, count, parallelism), prompt_tokens, output_tokens,
                       card, over);
}

Result<ServingRate> ServingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                  std::int64_t prompt_tokens, std::int64_t output_tokens,
                                  const CardRates& card, const UtilisationOverride& over) {
  if (!card.bf16_tflops) {
    return Status::InvalidArgument(card.name + ": BF16 tensor throughput not published");
  }
  if (!card.bandwidth_gb_per_s) {
    return Status::InvalidArgument(card.name + ": memory bandwidth not published");
  }
  const bool fp4 = sizing::NeedsFp4Hardware(w.precision);
  if (fp4 && card.architecture != catalog::Architecture::kBlackwell) {
    return Status::InvalidArgument("FP4 weights need FP4 tensor cores (Blackwell); " + card.name +
                                   " has none")
        .WithField("precision");
  }
  ServingRate r;
  const sizing::Layout l = sizing::LayoutOf(w);
  const int t = l.tensor, p = l.pipeline, replicas = l.data;
  const int gpus = l.gpus();
  const sizing::ServingEngineTraits& engine = sizing::TraitsOf(w.engine);
  const Utilisation defaults = DefaultUtilisation(card.architecture, w.method);
  const bool fp8 = w.precision == Precision::kFp8 && card.fp8_tflops;
  // Blackwell's dense FP4 rate is twice its FP8 rate (NVIDIA B200 datasheet: 9 vs 4.5 PFLOPS).
  const double peak_tflops = fp4 && card.fp8_tflops ? 2 * *card.fp8_tflops
                             : fp8                  ? *card.fp8_tflops
                                                    : *card.bf16_tflops;
  const char* peak_name = fp4 && card.fp8_tflops ? " FP4 (2 x FP8)" : fp8 ? " FP8" : " BF16";
  const double peak = peak_tflops * 1e12;
  r.utilisation_prefill = over.training_or_prefill.value_or(defaults.prefill);
  const double int4 =
      engine.int4_decode_efficiency > 0 ? engine.int4_decode_efficiency : kInt4DecodeEfficiency;
  const double format = w.precision == Precision::kInt8 ? kInt8DecodeEfficiency
                        : w.precision == Precision::kInt4 || w.precision == Precision::kNf4 ? int4
                                                                                            : 1.0;
  r.decode_bandwidth = over.decode_bandwidth.value_or(
      std::min(0.95, defaults.decode_bandwidth * format * engine.decode_bandwidth_factor));
  const std::int64_t kv_tokens = prompt_tokens + output_tokens / 2;
  const std::int64_t batch = std::max<std::int64_t>(1, w.batch);
  const int tile_rows = DecodeTileRows(card, w.precision, w.engine);
  const sizing::ServingWork work =
      sizing::ServingWorkFor(model, w, prompt_tokens, kv_tokens, batch, tile_rows);
  const double rate = peak * r.utilisation_prefill;
  // Pipeline stages work on micro-batches at once where the engine pipelines and the batch has a
  // sequence for every stage; otherwise the stages take turns (a layer split).
  const bool pipelined = !l.layer_split && p > 1 && engine.pipelines_stages && batch >= p;
  const double stage_concurrency = pipelined ? p : 1;
  // Tensor parallel splits the KV heads up to their number (the rest are replicated; MLA's
  // latent is read whole by every rank).
  const int kv_split = model.kv_lora_rank > 0 ? 1 : std::min(t, std::max(1, model.kv_heads));
  const double kv_traffic = sizing::KvTrafficFactor(w.engine, model.heads, model.kv_heads);
  const double kv_copy = kv_traffic > 1 && !over.decode_bandwidth ? engine.kv_copy_efficiency : 1;
  double bandwidth = *card.bandwidth_gb_per_s * 1e9 * r.decode_bandwidth;
  // Some engines' decode kernels read no faster than their own ceiling, however fast the card.
  const double ceiling =
      format < 1 ? engine.quantized_decode_ceiling_gb_per_s : engine.decode_ceiling_gb_per_s;
  const bool capped = ceiling > 0 && !over.decode_bandwidth && bandwidth > ceiling * 1e9;
  if (capped) bandwidth = ceiling * 1e9;
  // Each rank reads its share of the weights once per micro-batch pass: stage after stage, or
  // every stage for each of the p micro-batches, the weights take the same time; the KV cache
  // of concurrent micro-batches is read in parallel.
  const double weights_time = work.decode_weight_bytes / t / bandwidth;
  const double kv_time =
      work.decode_kv_bytes * kv_traffic / kv_split / (bandwidth * kv_copy) / stage_concurrency;
  // The matmuls compute whole tensor-core tiles: below tile_rows sequences the padded rows cost
  // as much as real ones (the H20 decodes at batch 1 bound by its tensor cores, not its HBM).
  const double matmul_compute = work.decode_step_matmul_flops / (t * stage_concurrency) / rate;
  const double attention_compute = static_cast<double>(batch) *
                                   work.decode_attention_flops_per_token /
                                   (t * stage_concurrency) / rate;
  // The matmuls and the attention are separate kernels, one after the other: each is bound by
  // its own roofline (the weights' read or the GEMM's FLOPs; the KV cache's read or attention's
  // FLOPs), and their times add. One max over the whole step would let the GEMMs' compute hide
  // behind the KV cache's read, which no kernel does.
  const double matmul_time = std::max(weights_time, matmul_compute);
  const double attention_time = std::max(kv_time, attention_compute);
  const bool padded = batch < tile_rows && matmul_compute > weights_time;
  // Tensor parallel: two all-reduces of the batch's hidden states per layer per step.
  std::string tp_note;
  double tp_step = 0, tp_prefill = 0;
  if (t > 1) {
    std::optional<double> link = GroupLinkGbPerS(card, gpus, t, 1, &tp_note);
    if (!link) {
      link = kUnpublishedPcieGbPerS;
      tp_note =
          "link not published: PCIe Gen4 x16, " + FormatFixed(*link, 0) + " GB/s one way, assumed";
    }
    const double latency = rates_internal::CollectiveLatencySeconds(card, gpus, t, 1);
    tp_step =
        2.0 * model.layers *
        RingSeconds(2, t, static_cast<double>(batch) * model.hidden * 2, *link * 1e9, latency, 1);
    if (prompt_tokens > 0) {
      tp_prefill = 2.0 * model.layers *
                   RingSeconds(2, t, static_cast<double>(prompt_tokens) * model.hidden * 2,
                               *link * 1e9, latency, 1);
    }
  }
  r.tensor_parallel_seconds_per_step = tp_step;
  const double gpu_step = matmul_time + attention_time + tp_step;
  // Engines that launch every layer from Python (transformers) cannot go faster than the host.
  const double host = engine.host_seconds_per_layer * model.layers;
  r.decode_step_seconds = std::max(gpu_step, host);
  // Prefill: the linear layers at the prefill utilisation, attention at kAttentionEfficiency of
  // it; stages of a pipelining engine work on chunks at once, a layer split's take turns.
  const double prefill_cards = t * (l.layer_split || !engine.pipelines_stages ? 1.0 : p);
  const double prefill_matmul =
      work.prefill_flops_per_token - work.prefill_attention_flops_per_token;
  const double attention_share = std::max(defaults.attention, engine.attention_efficiency);
  r.prefill_seconds_per_request =
      static_cast<double>(prompt_tokens) *
          (prefill_matmul / rate +
           work.prefill_attention_flops_per_token / (rate * attention_share)) /
          prefill_cards +
      tp_prefill;
  const double per_batch = static_cast<double>(batch) * r.prefill_seconds_per_request +
                           static_cast<double>(output_tokens) * r.decode_step_seconds;
  r.output_tokens_per_second = per_batch > 0 ? replicas * static_cast<double>(batch) *
                                                   static_cast<double>(output_tokens) / per_batch
                                             : 0;
  r.prompt_tokens_per_second =
      r.prefill_seconds_per_request > 0
          ? replicas * static_cast<double>(prompt_tokens) / r.prefill_seconds_per_request
          : 0;
  r.decode_tokens_per_second = replicas * static_cast<double>(batch) / r.decode_step_seconds;

  r.explain.push_back(
      "layout: " + sizing::LayoutName(l, w.method) + " on " + std::to_string(gpus) + " GPU" +
      (gpus == 1 ? "" : "s") +
      (replicas > 1 ? " (" + std::to_string(replicas) + " replicas)" : "") +
      (w.engine != sizing::ServingEngine::kUnspecified
           ? "; engine " + std::string(sizing::ServingEngineName(w.engine)) + ": " + engine.source
           : ""));
  r.explain.push_back("work: " + work.formula);
  r.explain.push_back("prefill: " + std::to_string(prompt_tokens) + " prompt tokens x " +
                      sizing::FormatCount(work.prefill_flops_per_token) + " FLOPs / (" +
                      FormatFixed(peak_tflops, 1) + peak_name + " TFLOPS x " +
                      FormatFixed(r.utilisation_prefill, 2) +
                      (over.training_or_prefill ? " given" : "") +
                      (prefill_cards > 1 ? " x " + FormatFixed(prefill_cards, 0) + " cards" : "") +
                      "; attention at " + FormatFixed(attention_share, 2) + " of it" + ")" +
                      (tp_prefill > 0 ? " + tensor-parallel all-reduces " + Sec(tp_prefill) : "") +
                      " = " + Sec(r.prefill_seconds_per_request) + " per request" +
                      (r.prompt_tokens_per_second > 0
                           ? " (" + FormatFixed(r.prompt_tokens_per_second, 0) + " prompt tokens/s)"
                           : ""));
  r.explain.push_back(
      "decode step at batch " + std::to_string(batch) + ": matmuls max(weights " +
      sizing::FormatGb(work.decode_weight_bytes) + (t > 1 ? " / " + std::to_string(t) : "") +
      " read " + Sec(weights_time) + ", compute " + Sec(matmul_compute) +
      (padded
           ? " (padded to " + std::to_string(tile_rows) + " rows, the tensor-core tile)"
           : "") +
      ") + attention max(KV " + sizing::FormatGb(work.decode_kv_bytes) +
      (kv_traffic > 1 ? " x " + FormatFixed(kv_traffic, 1) +
                            " (the dynamic cache concatenated and expanded to every query head "
                            "each step)" +
                            (kv_copy < 1 ? " at " + FormatFixed(kv_copy, 2) + " of the rate" : "")
                      : "") +
      (kv_split * stage_concurrency > 1 ? " / " + FormatFixed(kv_split * stage_concurrency, 0)
                                        : "") +
      (capped ? " at the engine's ceiling of " + FormatFixed(ceiling, 0) + " GB/s"
              : " at " + FormatFixed(*card.bandwidth_gb_per_s, 0) + " GB/s x " +
                    FormatFixed(r.decode_bandwidth, 2) + (over.decode_bandwidth ? " given" : "")) +
      " read " + Sec(kv_time) + ", compute " + Sec(attention_compute) + ")" +
      (tp_step > 0 ? " + tensor parallel 2 x " + std::to_string(model.layers) +
                         " all-reduces over " + tp_note + " = " + Sec(tp_step)
                   : "") +
      (host > gpu_step
           ? "; host-bound: " + std::to_string(model.layers) + " layers x " +
                 Sec(engine.host_seconds_per_layer) + " launched from Python = " + Sec(host)
           : "") +
      " = " + Sec(r.decode_step_seconds) +
      (l.layer_split ? " (layers split: the cards read their shares one after another)"
       : pipelined   ? " (" + std::to_string(p) + " pipeline stages on micro-batches at once)"
                     : "") +
      " (" + FormatFixed(r.decode_tokens_per_second, 1) + " decode tokens/s)");
  r.explain.push_back("throughput: " + std::to_string(replicas) + " replica(s) x " +
                      std::to_string(batch) + " sequences x " + std::to_string(output_tokens) +
                      " output tokens / (" + std::to_string(batch) + " prefills x " +
                      Sec(r.prefill_seconds_per_request) + " + " + std::to_string(output_tokens) +
                      " steps x " + Sec(r.decode_step_seconds) +
                      ") = " + FormatFixed(r.output_tokens_per_second, 1) + " output tokens/s");
  return r;
}

}  // namespace gpuhub::fit
