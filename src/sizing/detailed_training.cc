#include <algorithm>
#include <optional>

#include "core/strings.h"
#include "sizing/detailed.h"
#include "sizing/detailed_internal.h"
#include "sizing/parallel.h"

// Training's memory (full fine-tuning, LoRA, QLoRA) under its layout: weights, gradients,
// optimizer state, FSDP's gathered units, activations with their pipeline and recompute rules,
// logits and loss. Split from detailed.cc, which keeps the shared helpers and inference.
namespace gpuhub::sizing::detailed_internal {

double AddTrainingParts(const ModelShape& m, const Workload& w, bool from_checkpoint,
                        MemoryEstimate& e) {
  double transient = 0;
  // Full fine-tuning: where the gradients component sits (adjusted once activations are known).
  std::optional<std::size_t> gradients_index;
  const bool full = w.method == Method::kFullFineTune;
  // The layout (sizing/parallel.h): tensor-parallel ranks split every layer (with sequence
  // parallelism the activations too), pipeline stages and a layer split hold their layers,
  // context-parallel ranks their share of each sequence, and the data-parallel group shards what
  // its ZeRO stage / FSDP says. LoRA/QLoRA legacy: layers split (zero 0) or FSDP (zero 3); full
  // fine-tuning legacy: data parallel with ZeRO.
  const Layout layout = LayoutOf(w);
  const bool fsdp = layout.fsdp_base;
  const int tp = layout.tensor;
  const int stages = layout.pipeline;  // layers are divided over these (a layer split too)
  const int mp = layout.model_shards();
  const int shard = full ? 1 : mp * (fsdp ? layout.zero_group() : 1);
  // Tokens of one micro-batch on one context-parallel rank.
  const double tokens =
      static_cast<double>(w.batch) * static_cast<double>(w.sequence_tokens) / layout.context;
  // 1F1B: the first stage holds the activations of this many micro-batches at its peak.
  const int in_flight = MicroBatchesInFlight(layout, w.gradient_accumulation_steps);
  // FSDP under pipeline stages is torchtitan's layout, run by torch.distributed.pipelining
  // (PyTorch 2.4-2.6): its gathered parameters and fp32 gradients below, its per-step buffers
  // with the activations.
  const bool pipelining_runtime = full && w.zero_stage >= 3 && layout.pipeline > 1 &&
                                  !layout.layer_split && layout.zero_group() > 1 &&
                                  !w.offload_params;
  if (full) {
    const std::string params = Num(m.total_params);
    const bool mixed = w.precision != Precision::kFp32 && !w.pure_bf16;
    const double wb = w.precision == Precision::kFp32 ? 4 : 2;
    int shard_w = mp * (w.zero_stage >= 3 ? layout.zero_group() : 1);
    int shard_g = mp * (w.zero_stage >= 2 ? layout.zero_group() : 1);
    int shard_o = mp * (w.zero_stage >= 1 ? layout.zero_group() : 1);
    double weights = m.total_params * wb;
    Component wc = Split("weights", weights,
                         params + " params x " + B(wb) + " (" +
                             std::string(PrecisionName(w.precision)) + ") = " + Gb(weights),
                         shard_w);
    if (w.offload_params) {
      e.host_bytes += weights;
      wc.formula += " -> offloaded to host memory";
      wc.bytes = 0;
    }
    // FSDP under pipeline stages (torchtitan): a stage's parameters stay gathered from its
    // first micro-batch's forward to the step's end (re-gathering them for every micro-batch
    // would cost more than they weigh), and its gradients are kept unsharded in fp32 until
    // the last micro-batch's backward reduce-scatters them.
    const bool fsdp_pipelined = pipelining_runtime;
    if (fsdp_pipelined) {
      wc = Split("weights", weights,
                 params + " params x " + B(wb) + " (" + std::string(PrecisionName(w.precision)) +
                     ") = " + Gb(weights) +
                     ", gathered for the whole step on each pipeline "
                     "stage (FSDP under pipeline parallel)",
                 mp);
    }
    e.components.push_back(wc);
    double grads = m.total_params * (fsdp_pipelined ? 4 : wb);
    double optimizer_host = 0;
    Component gc =
        fsdp_pipelined
            ? Split("gradients", grads,
                    params +
                        " params x 4 B fp32 gradients, unsharded until the step's last "
                        "micro-batch reduce-scatters them (FSDP under pipeline parallel) = " +
                        Gb(grads),
                    mp)
            : Split("gradients", grads, params + " params x " + B(wb) + " gradients = " + Gb(grads),
                    shard_g);
    if (w.offload_optimizer && w.zero_stage >= 2) {
      // ZeRO-Offload / FSDP CPU offload: the optimizer steps on the CPU, so the reduced gradient
      // shards are copied out as they are produced (fp32 on the host).
      optimizer_host += m.total_params * 4;
      gc.formula += " -> offloaded to host memory (the optimizer steps on the CPU)";
      gc.bytes = 0;
    } else if (w.optimizer_in_backward) {
      // The optimizer steps each parameter as soon as its gradient is ready (a post-accumulate
      // hook) and frees that gradient: only the largest single parameter's gradient is ever
      // alive, the lm_head's (or the tied embedding's).
      const double head = (m.lm_head_params > 0 ? m.lm_head_params : m.embedding_params) * wb;
      gc.bytes = head / shard_g;
      gc.formula =
          "optimizer step fused into backward: each gradient is freed once its "
          "parameter is stepped, so at most the largest one is alive: lm_head " +
          Num(head / wb) + " params x " + B(wb) +
          (shard_g > 1 ? " / " + std::to_string(shard_g) + " GPUs" : "") + " = " + Gb(gc.bytes);
    }
    gradients_index = e.components.size();
    e.components.push_back(gc);
    if (mixed) {
      double master = m.total_params * 4;
      Component mc = Split(
          "master_weights", master,
          params + " params x 4 B (fp32 master copy for mixed precision) = " + Gb(master), shard_o);
      if (w.offload_optimizer) {
        optimizer_host += master;
        mc.formula += " -> offloaded to host memory";
        mc.bytes = 0;
      }
      e.components.push_back(mc);
    }
    OptimizerPart opt = OptimizerState(w.optimizer, m.total_params,
                                       AdafactorBytes(m, 0, w.lora_targets, false), w.pure_bf16);
    Component oc = Split("optimizer_state", opt.bytes, opt.formula, shard_o);
    if (w.offload_optimizer) {
      optimizer_host += opt.bytes;
      oc.formula += " -> offloaded to host memory";
      oc.bytes = 0;
    }
    e.components.push_back(oc);
    // Host memory for the node: each GPU offloads its shard; without sharding every process
    // keeps a full copy.
    e.host_bytes += optimizer_host * (shard_o > 1 ? 1 : w.gpus);
    if (w.offload_params) e.host_bytes *= 1;
    if (w.zero_stage >= 3) {
      // ZeRO-3/FSDP gather each layer's full parameters before use, prefetching the next.
      double layer_params =
          (m.total_params - m.embedding_params - m.lm_head_params) / std::max(1, m.layers);
      double gathered = 2 * layer_params * wb / tp;
      e.components.push_back(
          {"zero3_gathered_params", gathered,
           "2 layers (current + prefetched) x " + Num(layer_params) + " params x " + B(wb) +
               (tp > 1 ? " / " + std::to_string(tp) + " tensor-parallel ranks" : std::string()) +
               " gathered from the shards = " + Gb(gathered)});
    }
  } else {
    const bool qlora = w.method == Method::kQlora;
    if (qlora) {
      double linear = LinearWeightParams(m);
      double rest = m.total_params - linear;
      double quant = linear * 0.5;
      e.components.push_back(
          Split("base_weights", quant,
                Num(linear) + " linear params x 0.5 B (nf4, frozen) = " + Gb(quant), shard));
      double constants = linear * QuantConstantBytesPerParam(Precision::kNf4, w.double_quant);
      e.components.push_back(
          Split("quantization_constants", constants,
                Num(linear) + " params / 64-weight blocks x " +
                    (w.double_quant
                         ? std::string("(1 B absmax + 4 B per 256 blocks: double quantization)")
                         : std::string("4 B fp32 absmax")) +
                    " = " + Gb(constants),
                shard));
      const double rb = w.pure_bf16 ? 2 : 4;
      double rest_bytes = rest * rb;
      e.components.push_back(
          Split("frozen_unquantized", rest_bytes,
                Num(rest) + " embedding/lm_head/norm params x " + B(rb) +
                    (w.pure_bf16 ? std::string(" (bf16)")
                                 : std::string(" (fp32, as prepare_model_for_kbit_"
                                               "training leaves them)")) +
                    " = " + Gb(rest_bytes),
                shard));
      double dequant = LargestLinearParams(m) * 2;
      e.components.push_back({"dequant_workspace", dequant,
                              "largest linear " + Num(LargestLinearParams(m)) +
                                  " params dequantized to bf16 for its matmul = " + Gb(dequant)});
    } else {
      WeightPart base = Weights(m, w.precision, w.double_quant);
      if (from_checkpoint) base = {m.checkpoint->bytes, CheckpointFormula(*m.checkpoint)};
      e.components.push_back(Split("base_weights", base.bytes, base.formula + " (frozen)", shard));
    }
    double adapter_params = LoraAdapterParams(m, w.lora_targets, w.lora_rank);
    OptimizerPart opt =
        OptimizerState(w.optimizer, adapter_params,
                       AdafactorBytes(m, w.lora_rank, w.lora_targets, true), w.pure_bf16);
    const double ab = w.pure_bf16 ? 2 : 4;
    const std::string adt = w.pure_bf16 ? "bf16" : "fp32";
    double adapters = adapter_params * 2 * ab + opt.bytes;
    e.components.push_back(Split("lora_adapters", adapters,
                                 "rank " + std::to_string(w.lora_rank) + " on " +
                                     std::string(LoraTargetsName(w.lora_targets)) + ": " +
                                     Num(adapter_params) + " params x (" + B(ab) + " " + adt +
                                     " weights + " + B(ab) + " " + adt + " grads) + " + opt.formula,
                                 shard));
    if (w.offload_params) {
      // FSDP CPUOffload(offload_params=True): every parameter shard, the adapters' gradients
      // and the optimizer step live in host memory; a unit's parameters come to the GPU only
      // while it runs (below).
      for (Component& c : e.components) {
        if (c.name != "base_weights" && c.name != "quantization_constants" &&
            c.name != "frozen_unquantized" && c.name != "lora_adapters") {
          continue;
        }
        e.host_bytes += c.bytes * w.gpus;
        c.formula += " -> offloaded to host memory (FSDP CPU offload)";
        c.bytes = 0;
      }
    }
    if (fsdp) {
      // FSDP all-gathers the unit about to run and prefetches the next one: two decoder layers
      // in the middle of the passes; at the start of the backward (where the activations and
      // the loss peak) the lm_head's unit, in use for the loss's backward, and the last layer
      // being prefetched. Each gathered unit costs its full size beyond the shard already
      // counted (all of it when the shards live in host memory).
      const double layer_params =
          (m.total_params - m.embedding_params - m.lm_head_params) / std::max(1, m.layers);
      const double layer_bytes = qlora ? 0.5 : WeightBytesPerParam(w.precision);
      const double head_params = m.lm_head_params > 0 ? m.lm_head_params : m.embedding_params;
      const double head_bytes = qlora ? (w.pure_bf16 ? 2 : 4) : WeightBytesPerParam(w.precision);
      const double beyond_shard = w.offload_params ? 1.0 : 1.0 - 1.0 / layout.zero_group();
      const double two_layers = 2 * layer_params * layer_bytes / tp;
      const double head_and_layer =
          (head_params * head_bytes * beyond_shard + layer_params * layer_bytes) / tp;
      const double gathered = std::max(two_layers, head_and_layer);
      e.components.push_back(
          {"fsdp_gathered_params", gathered,
           "the larger of 2 decoder layers (current + prefetched: 2 x " + Num(layer_params) +
               " params x " + B(layer_bytes) + " = " + Gb(two_layers) +
               ") and, at the start of backward, the lm_head (" + Num(head_params) + " params x " +
               B(head_bytes) +
               (w.offload_params
                    ? ", from host memory"
                    : " x (1 - 1/" + std::to_string(layout.zero_group()) + ") beyond its shard") +
               ") + the last layer prefetched (" + Gb(head_and_layer) + ") = " + Gb(gathered)});
    }
    if (w.offload_optimizer) {
      e.notes.push_back(
          "optimizer offload has little to move for LoRA: adapter state stays on GPU");
    }
  }

  AddRotaryCaches(m, w, stages, e);

  // Activations (Korthikanti et al. 2022, adapted to Llama-style blocks). With tensor parallel
  // and sequence parallelism every saved tensor is split over the tensor-parallel ranks; eager
  // attention's scores over the heads and, with context parallel, the query positions.
  double per_layer_token = ActivationBytesPerTokenPerLayer(m, w) / tp;
  double eager = w.flash_attention ? 0
                                   : EagerAttentionBytesPerLayer(m, w.sequence_tokens) * w.batch /
                                         (tp * layout.context);
  Widths x = WidthsOf(m);
  double backward_temp = tokens * (4 * x.h + 2 * x.mlp) / tp;
  const double layers_per_stage = static_cast<double>(m.layers) / stages;
  const std::string tok =
      FormatFixed(tokens, 0) + " tokens (batch " + std::to_string(w.batch) + " x seq " +
      std::to_string(w.sequence_tokens) +
      (layout.context > 1 ? " / " + std::to_string(layout.context) + " context-parallel ranks"
                          : std::string()) +
      ")";
  const std::string where =
      (stages > 1
           ? " / " + std::to_string(stages) + (layout.layer_split ? " GPUs" : " pipeline stages")
           : std::string()) +
      (tp > 1 ? ", / " + std::to_string(tp) + " tensor-parallel ranks (sequence parallel)"
              : std::string());
  // The activations one stage holds for `micro` micro-batches in flight.
  // `formula` set: this is the answer's stage, whose offloaded bytes count toward host memory.
  auto stage_activations = [&](int micro, std::string* formula) {
    double activations = 0;
    const std::string flight =
        micro > 1 ? " x " + std::to_string(micro) + " micro-batches in flight (1F1B)" : "";
    if (w.gradient_checkpointing) {
      double kept = layers_per_stage * micro * tokens * 2 * x.h / tp;
      double working = tokens * per_layer_token + eager + backward_temp;
      std::string kept_text = std::to_string(m.layers) + " layers x " + tok + " x " +
                              FormatFixed(2 * x.h, 0) + " B (one bf16 hidden state per layer)" +
                              where + flight;
      if (w.offload_activations) {
        if (formula != nullptr) e.host_bytes += kept * w.gpus;
        kept_text = "checkpoints offloaded to host memory (" + Gb(kept) + ")";
        kept = 0;
      }
      activations = kept + working;
      if (formula != nullptr) {
        *formula = "gradient checkpointing: " + kept_text + " + one layer recomputed: " + tok +
                   " x " + FormatFixed(per_layer_token, 0) + " B" +
                   (eager > 0 ? " + eager attention scores " + Gb(eager) : "") +
                   " + backward temporaries " + Gb(backward_temp) + " = " + Gb(activations);
      }
      return activations;
    }
    double layers_on_gpu = layers_per_stage * micro;
    if (w.offload_activations) {
      // Two layers' activations stay on the GPU (the one in use and the one in transit).
      if (formula != nullptr) {
        e.host_bytes += (layers_on_gpu - std::min(2.0, layers_on_gpu)) *
                        (tokens * per_layer_token + eager) * w.gpus;
      }
      layers_on_gpu = std::min(2.0, layers_on_gpu);
    }
    activations = layers_on_gpu * (tokens * per_layer_token + eager) + backward_temp;
    if (formula != nullptr) {
      *formula =
          std::to_string(m.layers) + " layers x " + tok + " x " + FormatFixed(per_layer_token, 0) +
          " B per token per layer" +
          (w.selective_recompute ? " (selective recompute: the layer's input, every other "
                                   "matmul's output and the attention output kept)"
                                 : "") +
          (eager > 0 ? " + " + std::to_string(m.layers) + " x eager attention scores " + Gb(eager) +
                           (m.attn_logit_softcapping > 0
                                ? " (8 x heads x seq^2 x batch: fp32 softmax, its bf16 "
                                  "copy and the soft-capping tanh output)"
                                : " (6 x heads x seq^2 x batch)")
                     : " (flash attention: no seq^2 term)") +
          where + flight + " + backward temporaries " + Gb(backward_temp) + " = " + Gb(activations);
    }
    return activations;
  };
  std::string formula;
  double activations = stage_activations(in_flight, &formula);

  // Logits and loss: bf16 logits (fp32 for QLoRA's fp32 lm_head), the fp32 upcast and
  // log-softmax kept for backward, and their gradients at the start of backward.
  // Older transformers upcast the logits inside the model's forward (old_transformers).
  double logit_bytes = (w.method == Method::kQlora && !w.pure_bf16) || w.old_transformers ? 4 : 2;
  // Chunked: only one chunk's fp32 work at a time (fused kernels do it without the fp32 copy).
  // Compiled (torch.compile of cross_entropy(logits.float(), labels)): AOTAutograd's min-cut
  // partitioner saves the logits themselves and the per-row max and log-sum-exp (a few bytes per
  // token) rather than the fp32 log-softmax, recomputing the pointwise rest; Inductor turns
  // nll_loss_backward's scatter into a zeros tensor into a pointwise select
  // (scatter_upon_const_tensor) and fuses it with the softmax backward and the downcast, so the
  // backward writes the logits' gradient in their dtype and nothing fp32 the size of the logits
  // is ever allocated: the logits and their gradient at the start of backward.
  const bool compiled = w.compiled_loss && !w.chunked_loss;
  double per = w.chunked_loss ? logit_bytes + (w.fused_kernels ? 4.0 : 12.0) / kLossChunks
               : compiled     ? 2 * logit_bytes
                              : logit_bytes + 12;
  // Final logit soft-capping (Gemma 2): tanh keeps its bf16 output beside the capped logits.
  const double softcap = m.final_logit_softcapping > 0 ? 2 : 0;
  per += softcap;
  // Tensor parallel splits the vocabulary (Megatron's vocab-parallel cross-entropy).
  double logits = tokens * m.vocab * per / tp;
  std::string logits_text =
      tok + " x vocab " + std::to_string(m.vocab) + " x " + B(per) +
      (w.chunked_loss ? " (logits kept + fp32 loss in " + std::to_string(kLossChunks) + " chunks)"
       : compiled
           ? " (compiled loss: logits " + B(logit_bytes) + " kept + their gradient " +
                 B(logit_bytes) + ", no fp32 copy)"
           : " (logits " + B(logit_bytes) +
                 " + fp32 log-softmax 4 B + its gradient 4 B + logits gradient 4 B)") +
      (softcap > 0 ? " incl. 2 B for the soft-capping tanh output" : "") +
      (tp > 1 ? " / " + std::to_string(tp) + " tensor-parallel ranks" : std::string()) + " = " +
      Gb(logits);
  // Pipelined stages: the logits live on the last stage, which holds one micro-batch; the first
  // holds `in_flight`, stage s min(micro-batches, stages - s). The card that peaks highest is the
  // one every card is sized for.
  //
  // torch.distributed.pipelining (stage.py, PyTorch 2.4-2.6) also keeps one boundary tensor per
  // micro-batch of the step, not only those in flight: `_prepare_forward_infra` allocates an
  // activation receive buffer for every micro-batch (stages after the first) and
  // `_prepare_backward_infra` a gradient receive buffer for every micro-batch (stages before the
  // last), both kept across steps; `forward_one_chunk` appends every micro-batch's output to
  // `output_chunks` (the last stage's are its logits) and `torch.autograd.backward` accumulates
  // each input gradient into its receive buffer's `.grad`, both cleared only by
  // `clear_runtime_states` at the next step's start. A boundary tensor is one bf16 hidden state,
  // split over the sequence by the tensor-parallel ranks (torchtitan's blocks return the local
  // Shard(1) tensor).
  double buffers = 0, buffers_persistent = 0;
  std::string buffers_text;
  if (in_flight > 1) {
    const int n = std::max(1, w.gradient_accumulation_steps);
    const double boundary = tokens * 2 * x.h / tp;
    const double logits_out = tokens * m.vocab * logit_bytes / tp;
    const std::string each = std::to_string(n) + " micro-batches of " + tok + " x " +
                             FormatFixed(2 * x.h, 0) + " B" +
                             (tp > 1 ? " / " + std::to_string(tp) + " tensor-parallel ranks"
                                     : std::string()) +
                             " = " + Gb(boundary) + " each";
    struct StagePeak {
      int stage = 0;
      int micro = 1;
      double activations = 0, logits = 0, buffers = 0, persistent = 0, host = 0;
      std::string formula, buffers_text;
      double total() const { return activations + logits + buffers; }
    };
    const double host_before = e.host_bytes;
    auto peak_of = [&](int stage) {
      StagePeak p;
      p.stage = stage;
      const bool last_stage = stage == stages - 1;
      p.micro = last_stage ? 1 : std::max(1, std::min(n, stages - stage));
      e.host_bytes = host_before;
      p.activations = stage_activations(p.micro, &p.formula);
      p.host = e.host_bytes - host_before;
      if (last_stage) p.logits = logits;
      if (!pipelining_runtime) return p;
      const int f = p.micro;
      // At the stage's peak (its last forward; the last stage's last backward) the receive
      // buffers beyond the micro-batches in flight (those are their first layer's checkpoints),
      // the input gradients of the micro-batches already backwarded, every gradient receive
      // buffer and every output so far.
      const int recv_extra = stage == 0 ? 0 : n - f;
      const int grads_in = stage == 0 ? 0 : n - f;
      const int grad_recv = last_stage ? 0 : n;
      const int outputs = last_stage ? n - 1 : n;  // the last micro-batch's logits are counted
      const double outputs_bytes = outputs * (last_stage ? logits_out : boundary);
      p.buffers = (recv_extra + grads_in + grad_recv) * boundary + outputs_bytes;
      p.persistent = (recv_extra + grad_recv) * boundary;
      p.buffers_text =
          "torch.distributed.pipelining keeps a boundary tensor per micro-batch of the step (" +
          each + "); pipeline stage " + std::to_string(stage + 1) + " of " +
          std::to_string(stages) + " (" + std::to_string(f) + " in flight): " +
          (stage == 0 ? std::string()
                      : "activation receive buffers beyond those in flight " +
                            std::to_string(recv_extra) +
                            " + their input gradients kept to the next step " +
                            std::to_string(grads_in) + " + ") +
          (last_stage ? std::string()
                      : "gradient receive buffers " + std::to_string(grad_recv) + " + ") +
          (last_stage ? "the logits of the " + std::to_string(outputs) +
                            " earlier micro-batches kept in output_chunks (" + tok +
                            " x vocab " + std::to_string(m.vocab) + " x " + B(logit_bytes) +
                            (tp > 1 ? " / " + std::to_string(tp) : std::string()) + " each) " +
                            Gb(outputs_bytes)
                      : "outputs kept in output_chunks " + std::to_string(outputs)) +
          " = " + Gb(p.buffers);
      return p;
    };
    StagePeak best = peak_of(0);
    const StagePeak first = best;
    if (pipelining_runtime) {
      for (int s = 1; s < stages - 1; ++s) {
        StagePeak p = peak_of(s);
        if (p.total() > best.total()) best = p;
      }
    }
    const StagePeak last = peak_of(stages - 1);
    if (last.total() >= best.total()) best = last;
    e.host_bytes = host_before + best.host;
    activations = best.activations;
    formula = best.formula;
    if (best.stage == stages - 1) {
      formula = "last pipeline stage (one micro-batch beside the logits; the first stage's " +
                Gb(first.activations) + " of activations is lower with none): " + formula;
    } else {
      if (best.stage > 0) {
        formula = "pipeline stage " + std::to_string(best.stage + 1) + " of " +
                  std::to_string(stages) + " (" + std::to_string(best.micro) +
                  " micro-batches in flight; with the pipeline's buffers it peaks above the "
                  "first stage's " +
                  Gb(first.total()) + "): " + formula;
      }
      logits_text = "on the last pipeline stage, whose peak (" + Gb(last.total()) +
                    " with its one micro-batch" +
                    (pipelining_runtime ? " and its buffers" : "") + ") is below " +
                    (best.stage == 0 ? std::string("the first stage's")
                                     : "stage " + std::to_string(best.stage + 1) + "'s") +
                    ": 0 here";
      logits = 0;
    }
    buffers = best.buffers;
    buffers_persistent = best.persistent;
    buffers_text = best.buffers_text;
  }
  e.components.push_back({"activations", activations, formula});
  transient += activations;
  e.components.push_back({"logits_and_loss", logits, logits_text});
  transient += logits;
  if (pipelining_runtime && in_flight > 1) {
    e.components.push_back({"pipeline_buffers", buffers, buffers_text});
    // The receive buffers are allocated once; what the step appends and clears is transient.
    transient += buffers - buffers_persistent;
  }

  // On one GPU, one micro-batch per step, the weight gradients do not add to the activation
  // peak: zero_grad(set_to_none) frees them before the next forward, and autograd writes each
  // layer's gradients while it frees that layer's saved tensors. The peak is the larger of the
  // start of backward (saved activations + logits + the lm_head gradient, computed first) and its
  // end (every gradient + the first layer's working set); the component shows the gradients alive
  // at that peak. Across GPUs, DDP buckets and DeepSpeed's flat gradient partitions hold gradient
  // storage for the whole step, so there the gradients add up in full (FSDP's sharded ones are 1/N
  // anyway). With gradient accumulation they stay allocated through the next micro-batches' forward
  // and backward, so they count in full.
  if (gradients_index && w.gpus == 1 && w.gradient_accumulation_steps == 1 &&
      !w.optimizer_in_backward && e.components[*gradients_index].bytes > 0) {
    Component& gc = e.components[*gradients_index];
    const double wb = w.precision == Precision::kFp32 ? 4 : 2;
    const double head = (m.lm_head_params > 0 ? m.lm_head_params : m.embedding_params) * wb;
    const double last_layer =
        (w.gradient_checkpointing ? tokens * per_layer_token + eager
                                  : std::min(activations, tokens * per_layer_token + eager)) +
        backward_temp;
    const double freed = activations + logits - std::min(activations, last_layer);
    const double alive = std::clamp(gc.bytes - freed, std::min(head, gc.bytes), gc.bytes);
    const bool at_start = alive <= head;
    gc.formula += "; written during backward while autograd frees " + Gb(freed) +
                  " of saved activations and logits: " + Gb(alive) + " alive at the peak (" +
                  (at_start ? "start of backward: the lm_head gradient"
                            : "end of backward: all gradients, activations freed") +
                  ")";
    gc.bytes = alive;
  }

  // torch.optim.AdamW without `fused` or `foreach` runs the foreach step on CUDA tensors
  // (_default_to_fused_or_foreach), whose `torch._foreach_sqrt(exp_avg_sqs)` allocates sqrt(v)
  // for every parameter of the group at once before adding it into the update: one state
  // tensor's worth (the parameters' dtype), alive beside the weights, every gradient and the
  // state. The activations, logits and gathered units are freed by then and the allocator reuses
  // their cached blocks, so the step adds only what it needs beyond them.
  const bool step_on_gpu = !w.offload_optimizer && !w.optimizer_in_backward &&
                           !(w.method != Method::kFullFineTune && w.offload_params);
  if (w.foreach_adamw && w.optimizer == Optimizer::kAdamW && step_on_gpu) {
    double params = 0, bytes = 0, grads_at_step = 0, grads_at_peak = 0;
    int group = 1;
    if (full) {
      params = m.total_params;
      bytes = (w.pure_bf16 || w.precision == Precision::kFp32) ? WeightBytesPerParam(w.precision)
                                                               : 4;  // fp32 master copy
      group = mp * layout.zero_group();  // ZeRO >= 1 / FSDP shard the state
      if (w.zero_stage < 1) group = mp;
      const double wb = w.precision == Precision::kFp32 ? 4 : 2;
      const int shard_g = mp * (w.zero_stage >= 2 ? layout.zero_group() : 1);
      grads_at_step = m.total_params * wb / shard_g;
      grads_at_peak = gradients_index ? e.components[*gradients_index].bytes : grads_at_step;
    } else {
      params = LoraAdapterParams(m, w.lora_targets, w.lora_rank);
      bytes = w.pure_bf16 ? 2 : 4;
      group = shard;
    }
    const double temp = params * bytes / group;
    // On one GPU the backward peak may hold fewer gradients than the step (all of them).
    const double more_grads = std::max(0.0, grads_at_step - grads_at_peak);
    double freed = 0;
    for (const Component& c : e.components) {
      if (c.name == "activations" || c.name == "logits_and_loss" ||
          c.name == "zero3_gathered_params" || c.name == "fsdp_gathered_params") {
        freed += c.bytes;
      }
    }
    const double extra = std::max(0.0, temp + more_grads - freed);
    e.components.push_back(
        {"optimizer_step_temporaries", extra,
         "foreach AdamW step: sqrt(exp_avg_sq) of every parameter at once, " + Num(params) +
             " params x " + B(bytes) + (group > 1 ? " / " + std::to_string(group) + " GPUs" : "") +
             " = " + Gb(temp) +
             (more_grads > 0 ? " + the gradients not alive at the backward peak " + Gb(more_grads)
                             : std::string()) +
             ", in the cached blocks of the freed activations, logits and gathered units (" +
             Gb(freed) + "): " + Gb(extra) + " beyond them"});
  }
  return transient;
}

ReservedFloor LoadReservedFloor(const ModelShape& m, const Workload& w, const MemoryEstimate& e) {
  if (w.method != Method::kQlora || !w.unchunked_nf4_quantization) return {};
  // torchao before 0.2 (NF4Tensor.quantize_tensor_nearest) quantizes a weight of n elements by
  // materialising `value - nf4` and its `.abs()`, n x 16 bf16 each (32n B), beside the bf16
  // weight and its block-scaled copy (2n each); `.min(dim=-1)` then returns int64 indices (8n)
  // and bf16 values (2n). Each 32n tensor is one allocation, returned to the cache when freed.
  // The next weight, its scaled copy and the quantized pieces that stay are carved by best fit
  // out of one of those cached blocks, so the next difference pair no longer fits there and a
  // third 32n segment is reserved: three segments of 32n, one of them filling up with the
  // quantized weights, plus the quantization's other tensors (14n). The largest linear sets it.
  double resident = 0;
  for (const Component& c : e.components) {
    if (c.name == "base_weights" || c.name == "quantization_constants" ||
        c.name == "frozen_unquantized") {
      resident += c.bytes;
    }
  }
  const double n = LargestLinearParams(m);
  const double quantize = n * (3 * 16 * 2 + 2 + 2 + 8 + 2);
  return {resident + quantize,
          "reserved while loading (torchao before 0.2 quantizes each weight on the GPU against "
          "all 16 NF4 codes at once): the weights " +
              Gb(resident) + " + largest linear " + Num(n) +
              " params x 110 B (3 cached segments of n x 16 bf16 differences + the bf16 weight, "
              "its scaled copy, int64 code indices and bf16 minima) " +
              Gb(quantize) + " = " + Gb(resident + quantize)};
}

}  // namespace gpuhub::sizing::detailed_internal
