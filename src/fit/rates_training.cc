// TrainingRateOn: a training step's time on a layout of cards (rates.h; docs/sizing-model.md §6).
#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "fit/rates.h"
#include "fit/rates_internal.h"
#include "sizing/throughput.h"

namespace gpuhub::fit {

using rates_internal::RingSeconds;
using rates_internal::Sec;
using rates_internal::Tf;
using sizing::Method;
using sizing::Precision;

Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                    const CardRates& card, int count, Parallelism parallelism,
                                    const UtilisationOverride& over) {
  return TrainingRateOn(model, WithParallelism(w, count, parallelism), card, over);
}

Result<TrainingRate> TrainingRateOn(const sizing::ModelShape& model, const sizing::Workload& w,
                                    const CardRates& card, const UtilisationOverride& over) {
  if (!card.bf16_tflops) {
    return Status::InvalidArgument(card.name + ": BF16 tensor throughput not published");
  }
  if (w.fp8_training && !card.fp8_tflops) {
    return Status::InvalidArgument(
               "FP8 training needs FP8 tensor cores (Ada, Hopper, Blackwell, "
               "CDNA 3); " +
               card.name + " has none")
        .WithField("fp8_training");
  }
  TrainingRate r;
  const sizing::Layout l = sizing::LayoutOf(w);
  const int t = l.tensor, p = l.pipeline, c = l.context, d = l.data;
  const int gpus = l.gpus();
  const Utilisation defaults = DefaultUtilisation(card.architecture, w.method);
  // fp32 training runs on TF32 tensor cores: half the BF16 rate on Ampere, Ada and Hopper.
  const bool fp32 = w.method == Method::kFullFineTune && w.precision == Precision::kFp32;
  const double peak = *card.bf16_tflops * 1e12 * (fp32 ? 0.5 : 1.0);
  // Tokens of one micro-batch of one data-parallel rank, and what one context-parallel rank of it
  // runs (the GEMMs' height: a thin micro-batch leaves the tensor cores idle).
  const double tokens_micro = static_cast<double>(w.batch) * static_cast<double>(w.sequence_tokens);
  const double tokens_rank = tokens_micro / c;
  if (over.training_or_prefill) {
    r.utilisation = *over.training_or_prefill;
  } else {
    r.utilisation = defaults.training * tokens_rank / (tokens_rank + kHalfUtilisationTokens);
  }
  const sizing::TrainingFlops flops = sizing::TrainingFlopsPerToken(model, w);
  const sizing::TrainingBytes bytes = sizing::TrainingBytesPerStep(model, w);
  const double rate = peak * r.utilisation;
  // The cards that share one micro-batch's work at once: tensor, context and (pipelining)
  // pipeline ranks. A layer split's cards take turns: no faster than one.
  const double concurrent = static_cast<double>(t) * c * (l.layer_split ? 1 : p);
  // FP8: the linear layers' matmuls at the FP8 peak (at kFp8MatmulEfficiency of the utilisation
  // BF16 reaches), attention stays in BF16.
  const double attention_share = flops.forward > 0 ? flops.attention_forward / flops.forward : 0;
  // Attention runs at kAttentionEfficiency of the matmuls' utilisation (FlashAttention's
  // backward recomputes the scores and its kernels reach less of the peak than GEMMs).
  const double attention_share_of_rate =
      w.megatron ? std::max(defaults.attention, kAmpereAttentionEfficiency) : defaults.attention;
  const double attention_rate = rate * attention_share_of_rate;
  const double fp8_efficiency = w.megatron ? kMegatronFp8MatmulEfficiency : kFp8MatmulEfficiency;
  double flop_seconds_per_token = flops.per_token * (1 - attention_share) / rate +
                                  flops.per_token * attention_share / attention_rate;
  std::string fp8_text;
  if (w.fp8_training) {
    const double fp8_rate = *card.fp8_tflops * 1e12 * r.utilisation * fp8_efficiency;
    flop_seconds_per_token = flops.per_token * (1 - attention_share) / fp8_rate +
                             flops.per_token * attention_share / attention_rate;
    fp8_text = "; FP8 matmuls: " + FormatFixed(100 * (1 - attention_share), 1) +
               "% of the FLOPs at " + FormatFixed(*card.fp8_tflops, 0) + " FP8 TFLOPS x " +
               FormatFixed(r.utilisation, 3) + " x " + FormatFixed(fp8_efficiency, 2) +
               (w.megatron ? " (Transformer Engine)" : " (casts and scaling)") + " = " +
               Tf(fp8_rate) + ", attention at BF16";
  }
  const double compute = tokens_micro * flop_seconds_per_token / concurrent;
  const double attention_compute =
      tokens_micro * flops.per_token * attention_share / attention_rate / concurrent;
  const double bandwidth = card.bandwidth_gb_per_s ? *card.bandwidth_gb_per_s * 1e9 : 0;
  const double shards = static_cast<double>(t) * (l.layer_split ? 1 : p);
  const double floor =
      bandwidth > 0 ? bytes.weights_per_pass * bytes.passes / shards / bandwidth : 0;

  // Tensor parallel: each layer's two all-reduces (with sequence parallelism an all-gather and a
  // reduce-scatter, the same bytes) of the micro-batch's hidden states, in the forward, the
  // backward and a recomputed forward; over the node's link, not hidden behind compute.
  std::string tp_note, cp_note, dp_note;
  double tp_seconds = 0;
  const double hidden_bytes = tokens_rank * model.hidden * 2.0;
  const int layers_here = std::max(1, model.layers / p);
  if (t > 1) {
    std::optional<double> link = GroupLinkGbPerS(card, gpus, t, 1, &tp_note);
    if (!link) {
      link = kUnpublishedPcieGbPerS;
      tp_note =
          "link not published: PCIe Gen4 x16, " + FormatFixed(*link, 0) + " GB/s one way, assumed";
    }
    const double per_layer = 4 + (w.gradient_checkpointing ? 2 : 0);
    const double latency = rates_internal::CollectiveLatencySeconds(card, gpus, t, 1);
    tp_seconds = layers_here * per_layer * RingSeconds(2, t, hidden_bytes, *link * 1e9, latency, 1);
  }
  // Context parallel: a ring passes each rank's keys and values to the others (forward) and
  // their gradients back (backward), overlapped with the attention it feeds.
  double cp_exposed = 0;
  if (c > 1) {
    std::optional<double> link = GroupLinkGbPerS(card, gpus, c, t, &cp_note);
    const double kv_bytes = tokens_rank * model.kv_elements_per_token_per_layer * 2.0;
    const double cp_comm = link ? layers_here * 3 * (c - 1.0) * kv_bytes / (*link * 1e9) : 0;
    cp_exposed = std::max(0.0, cp_comm - attention_compute);
  }
  double micro = std::max(compute + tp_seconds + cp_exposed, floor);
  // The data-parallel group (with the context-parallel ranks, which hold the same weights and
  // sum their gradients too) and its link: it spans nodes when the set does.
  const int zg = l.zero_group();
  std::optional<double> dp_link;
  if (zg > 1) dp_link = GroupLinkGbPerS(card, gpus, zg, t, &dp_note);
  const double dp_ring = zg > 1 ? (zg - 1.0) / zg : 0;
  // ZeRO-3/FSDP gathers every layer's parameters for the forward and again for the backward and
  // reduce-scatters the gradients (the frozen base of LoRA/QLoRA: two gathers), each
  // micro-batch; prefetched, so hidden behind compute unless slower.
  double gather = 0;
  const bool sharded = (w.method == Method::kFullFineTune && l.zero_stage >= 3) || l.fsdp_base;
  if (sharded && zg > 1 && dp_link) {
    const double passes = w.method == Method::kFullFineTune ? 3 : 2;
    gather = passes * dp_ring * bytes.parameter_bytes / shards / (*dp_link * 1e9);
    micro = std::max(micro, gather);
  }
  const int accum = w.gradient_accumulation_steps;
  // 1F1B: the first micro-batch reaches the last stage after p - 1 stage times, idle time that
  // interleaved (virtual) stages shorten.
  const double bubble = !l.layer_split && p > 1 ? (p - 1.0) / l.virtual_stages * micro : 0;
  // Data parallel without ZeRO-3: the gradients are all-reduced once per optimizer step,
  // overlapped with the last micro-batch's backward.
  double all_reduce = 0;
  if (!sharded && zg > 1 && dp_link) {
    all_reduce = RingSeconds(2, zg, bytes.gradient_bytes / shards, *dp_link * 1e9,
                             rates_internal::CollectiveLatencySeconds(card, gpus, zg, t), 1);
  }
  const double dp_exposed = std::max(0.0, all_reduce - micro);
  const double optimizer_shards =
      shards * ((w.method == Method::kFullFineTune && l.zero_stage >= 1) ? zg : 1);
  const double optimizer = bandwidth > 0 ? bytes.optimizer_step / optimizer_shards / bandwidth : 0;
  r.step_seconds = accum * micro + bubble + optimizer + dp_exposed;
  r.tokens_per_step = static_cast<double>(d) * accum * tokens_micro;
  r.tokens_per_second = r.tokens_per_step / r.step_seconds;
  r.compute_seconds = accum * compute;
  r.tensor_parallel_seconds = accum * tp_seconds;
  r.bubble_seconds = bubble;
  r.data_parallel_seconds = dp_exposed + accum * std::max(0.0, gather - compute);
  r.optimizer_seconds = optimizer;

  r.explain.push_back("layout: " + sizing::LayoutName(l, w.method) + " on " + std::to_string(gpus) +
                      " GPU" + (gpus == 1 ? "" : "s") +
                      (gpus > kGpusPerNode
                           ? " (" + std::to_string((gpus + kGpusPerNode - 1) / kGpusPerNode) +
                                 " nodes of " + std::to_string(kGpusPerNode) + ")"
                           : ""));
  r.explain.push_back("FLOPs per token: " + flops.formula);
  r.explain.push_back(
      "rate per card: " + FormatFixed(*card.bf16_tflops, 1) + " dense BF16 TFLOPS" +
      (fp32 ? " x 0.5 (fp32 on TF32 tensor cores)" : "") + " x utilisation " +
      (over.training_or_prefill
           ? FormatFixed(r.utilisation, 3) + " (given)"
           : FormatFixed(defaults.training, 2) + " (" +
                 std::string(catalog::ArchitectureName(card.architecture)) + ", " +
                 std::string(sizing::MethodName(w.method)) + ") x " + FormatFixed(tokens_rank, 0) +
                 " / (" + FormatFixed(tokens_rank, 0) + " + " +
                 FormatFixed(kHalfUtilisationTokens, 0) + ") tokens per micro-batch" +
                 (c > 1 ? " per context-parallel rank" : "") + " = " +
                 FormatFixed(r.utilisation, 3)) +
      " = " + Tf(rate) + "; attention (" + FormatFixed(100 * attention_share, 1) +
      "% of the FLOPs) at " + FormatFixed(attention_share_of_rate, 2) + " of it" +
      (w.megatron ? " (Megatron: cuDNN fused attention)" : "") + " = " + Tf(attention_rate) +
      fp8_text);
  r.explain.push_back(
      "micro-batch: " + FormatFixed(tokens_micro, 0) + " tokens x " +
      sizing::FormatCount(flops.per_token) + " FLOPs" +
      (concurrent > 1 ? " / " + FormatFixed(concurrent, 0) + " cards working on it at once" : "") +
      (l.layer_split ? " (layers split: the cards work one after another)" : "") + " = " +
      Sec(compute) +
      (floor > 0 ? "; weights read: " + bytes.weights_formula +
                       (shards > 1 ? " / " + FormatFixed(shards, 0) + " shards" : "") + " at " +
                       FormatFixed(*card.bandwidth_gb_per_s, 0) + " GB/s = " + Sec(floor) +
                       (floor > compute + tp_seconds ? " (bound)" : "")
                 : "") +
      (tp_seconds > 0
           ? "; tensor parallel: " + std::to_string(layers_here) + " layers x " +
                 FormatFixed(4 + (w.gradient_checkpointing ? 2 : 0), 0) + " collectives of " +
                 sizing::FormatGb(hidden_bytes) + " (2 x " + std::to_string(t - 1) + "/" +
                 std::to_string(t) + " of it each way) over " + tp_note + " = " + Sec(tp_seconds) +
                 " not overlapped"
           : "") +
      (cp_exposed > 0 ? "; context parallel K/V exchange beyond the attention it overlaps " +
                            Sec(cp_exposed) + " (" + cp_note + ")"
                      : "") +
      (gather > 0 ? "; " + std::string(w.method == Method::kFullFineTune ? "ZeRO-3" : "FSDP") +
                        " gathers " + FormatFixed(w.method == Method::kFullFineTune ? 3 : 2, 0) +
                        " x " + FormatFixed(dp_ring, 3) + " x " +
                        sizing::FormatGb(bytes.parameter_bytes / shards) + " over " + dp_note +
                        " = " + Sec(gather) + (gather > compute ? " (bound)" : " (overlapped)")
                  : ""));
  if (bubble > 0) {
    r.explain.push_back(
        "pipeline: " + std::to_string(p) + " stages, " + std::to_string(accum) +
        " micro-batches per step (1F1B): bubble (" + std::to_string(p) + " - 1)" +
        (l.virtual_stages > 1 ? " / " + std::to_string(l.virtual_stages) + " virtual stages" : "") +
        " x " + Sec(micro) + " = " + Sec(bubble));
  }
  r.explain.push_back(
      "optimizer step: " + bytes.optimizer_formula +
      (optimizer_shards > 1 ? " / " + FormatFixed(optimizer_shards, 0) + " shards" : "") +
      (bandwidth > 0
           ? " at " + FormatFixed(*card.bandwidth_gb_per_s, 0) + " GB/s = " + Sec(optimizer)
           : " (bandwidth not published: not counted)"));
  if (all_reduce > 0) {
    r.explain.push_back("gradient all-reduce: 2 x " + FormatFixed(dp_ring, 3) + " x " +
                        sizing::FormatGb(bytes.gradient_bytes / shards) + " over " + dp_note +
                        " = " + Sec(all_reduce) + ", overlapped with the last backward");
  }
  r.explain.push_back(
      "step: " + std::to_string(accum) + " micro-batch(es) x " + Sec(micro) +
      (bubble > 0 ? " + bubble " + Sec(bubble) : "") + " + optimizer " + Sec(optimizer) +
      (dp_exposed > 0 ? " + all-reduce beyond the backward " + Sec(dp_exposed) : "") + " = " +
      Sec(r.step_seconds) + " for " + std::to_string(d) + " data-parallel rank(s) x " +
      std::to_string(accum) + " x " + FormatFixed(tokens_micro, 0) +
      " tokens = " + FormatFixed(r.tokens_per_second, 0) + " tokens/s");
  return r;
}

}  // namespace gpuhub::fit
