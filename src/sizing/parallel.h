// How a job is spread over its GPUs: data, tensor, pipeline and context parallel degrees and the
// ZeRO/FSDP stage of the data-parallel group. One layout drives both the memory check
// (EstimateMemory: what each card holds) and the throughput (fit/rates.h: what each card computes
// and exchanges), so the two always describe the same run.
//
// A Workload names its layout with `gpus` plus, optionally, tensor_parallel, pipeline_parallel,
// context_parallel and data_parallel. Without any of them the legacy meanings hold:
//  - full fine-tuning: every GPU is a data-parallel rank (ZeRO `zero_stage`);
//  - LoRA/QLoRA with zero_stage 3: FSDP, every GPU a data-parallel rank with the base sharded;
//  - LoRA/QLoRA with zero_stage 0 and inference: the layers split across the GPUs, which work one
//    after another (Hugging Face device_map, llama.cpp's layer split): `layer_split`.
// With any of them: gpus = data x tensor x pipeline x context, and pipeline stages pipeline
// micro-batches (1F1B in training, concurrent micro-batches in serving engines that do).
// Pure; thread-safe.
#pragma once

#include <string>

#include "core/status.h"
#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::sizing {

struct Layout {
  int data = 1;
  int tensor = 1;
  int pipeline = 1;
  int context = 1;
  int virtual_stages = 1;    // interleaved pipeline chunks per card (Megatron's VP)
  bool layer_split = false;  // stages run one after another, never concurrently
  int zero_stage = 0;        // of the data-parallel group (full fine-tuning; 3 = FSDP)
  bool fsdp_base = false;    // LoRA/QLoRA: the frozen base sharded over the data-parallel group
  int gpus() const { return data * tensor * pipeline * context; }
  // Cards that split the model's weights between them (each holds 1 / this of every layer).
  int model_shards() const { return tensor * pipeline; }
  // The group ZeRO/FSDP shards over: the data-parallel ranks and the context-parallel ones (they
  // hold the same weights: torchtitan's dp_shard_cp mesh, Megatron's distributed optimizer).
  int zero_group() const { return data * context; }
  bool single() const { return gpus() == 1; }
};

// The layout a workload asks for (the legacy meanings above when it names none). Assumes the
// workload passed ValidateLayout.
Layout LayoutOf(const Workload& workload);

// True when the workload names any degree (tensor, pipeline, context or data parallel).
bool NamesLayout(const Workload& workload);

// Range and product checks (gpus = data x tensor x pipeline x context, context parallel for
// training only, virtual stages only with pipeline stages); the model-dependent ones (tensor
// parallel dividing the attention heads, pipeline stages no more than layers) are in
// ValidateLayoutForModel. Errors name the request field.
Status ValidateLayout(const Workload& workload);
Status ValidateLayoutForModel(const ModelShape& model, const Workload& workload);

// "single", "dp 8 (ZeRO-3)", "tp 4 x pp 2 x dp 2 (ZeRO-1)", "layers split over 2", "tp 8".
std::string LayoutName(const Layout& layout, Method method);

// Micro-batches whose activations the first pipeline stage holds at its peak under 1F1B:
// min(pipeline stages, micro-batches per step); 1 without pipelining.
int MicroBatchesInFlight(const Layout& layout, int micro_batches_per_step);

}  // namespace gpuhub::sizing
