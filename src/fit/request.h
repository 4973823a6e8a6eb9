// The inputs of `gpuhub size` / `gpuhub fit` and of the HTTP API's POST /v1/size and POST /v1/fit,
// under one set of names: a JSON field is the CLI flag without its dashes, with '_' for '-'
// (--kv-precision <-> "kv_precision", --max-monthly-usd <-> "max_monthly_usd").
//
// Both faces fill a RequestFields (the CLI from flags, report_json.h from a JSON body) and resolve
// it here, so validation and messages are the same everywhere. Every error is invalid_argument (or
// not_found for an unknown model) with a message that says what to fix; a field that does not apply
// to the workload is refused rather than ignored ("--context applies to inference").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "fit/fit.h"
#include "sizing/estimate.h"
#include "sizing/model.h"

namespace gpuhub::fit {

struct RequestFields {
  std::optional<std::string> model;           // --model: preset, bundled id, or (CLI only) a path
  std::optional<std::string> config_json;     // "config": a pasted config.json (HTTP API only)
  std::optional<std::string> workload;        // --workload infer|full|lora|qlora (required)
  std::optional<std::string> precision;       // --precision fp32|bf16|fp16|fp8|int8|int4|nf4
  std::optional<std::string> kv_precision;    // --kv-precision fp16|fp8 (inference)
  std::optional<std::string> profile;         // --profile guide|detailed
  std::optional<std::int64_t> context;        // --context tokens (inference)
  std::optional<std::int64_t> batch;          // --batch
  bool batch_max = false;                     // --batch max / "batch": "max" (plan, serving)
  std::optional<std::int64_t> seq;            // --seq tokens (training)
  std::optional<std::int64_t> prefill_chunk;  // --prefill-chunk tokens (inference, detailed)
  std::optional<std::int64_t> grad_accum;     // --grad-accum micro-batches (training, detailed)
  std::optional<std::int64_t> rank;           // --rank (LoRA, QLoRA)
  std::optional<std::int64_t> gpus;           // --gpus (size; plan: a fixed count, whole nodes > 8)
  std::optional<std::int64_t> zero;           // --zero 0..3 (size, plan; training)
  // The parallel layout (size and plan; sizing/parallel.h): tensor, pipeline, context and data
  // parallel degrees and interleaved pipeline stages. Plan searches the ones not given.
  std::optional<std::int64_t> tp, pp, cp, dp, vp;
  std::optional<std::string> recompute;  // --recompute full|selective|none (training)
  std::optional<bool> fp8_training;      // --fp8-training (training, FP8 cards)
  std::optional<std::string> engine;     // --engine vllm|sglang|tensorrt-llm|llama.cpp|transformers
  std::optional<std::string> stack;      // --stack pytorch|megatron (training)
  bool offload_optimizer = false;        // --offload-optimizer (training)
  // Detailed profile only (--profile detailed; the default for real models). The guide's published
  // rules ignore them, so asking for a non-default value under the guide profile is an error.
  std::optional<std::string> optimizer;     // --optimizer adamw|adam8bit|sgd|adafactor (training)
  std::optional<std::string> lora_targets;  // --lora-targets qv|attn|all-linear (LoRA, QLoRA)
  std::optional<bool> lora_dropout;         // --lora-dropout
  std::optional<bool> pure_bf16;            // --pure-bf16 (training)
  std::optional<bool> fused_kernels;        // --fused-kernels (training)
  std::optional<bool> chunked_loss;         // --chunked-loss (training)
  std::optional<bool> compiled_loss;        // --compiled-loss (training)
  std::optional<bool> offload_activations;  // --offload-activations (training)
  std::optional<bool> offload_params;       // --offload-params (training, ZeRO-3 / FSDP)
  std::optional<bool> old_transformers;     // --old-transformers (transformers < 4.45)
  std::optional<bool> unchunked_nf4_quantization;  // --unchunked-nf4-quantization (QLoRA)
  std::optional<bool> foreach_adamw;  // --foreach-adamw (training, AdamW)
  std::optional<bool> optimizer_in_backward;       // --optimizer-in-backward (full fine-tuning)
  std::optional<bool> flash_attention;  // --flash-attention / --no-flash-attention (training)
  std::optional<bool> gradient_checkpointing;  // --[no-]gradient-checkpointing (training)
  std::optional<bool> double_quant;            // --[no-]double-quant (nf4 weights, QLoRA)
  bool explain = false;                        // --explain: formulas in the report
  // fit only
  bool cuda_only = false;                      // --cuda-only
  std::optional<std::string> region;           // --region DFW-1
  bool in_stock = false;                       // --in-stock
  std::optional<std::string> max_monthly_usd;  // --max-monthly-usd 1500.50 (decimal text)
  std::optional<std::int64_t> top;             // --top K
  bool why_not = false;                        // --why-not
  std::optional<std::string> gpu;              // --gpu "H100 SXM"
  // plan only (gpuhub plan, POST /v1/plan)
  std::optional<std::int64_t> tokens;               // --tokens: training tokens per epoch
  std::optional<std::int64_t> samples;              // --samples: dataset samples (x --seq = tokens)
  std::optional<std::int64_t> epochs;               // --epochs (default 1)
  std::optional<std::int64_t> tokens_per_day;       // --tokens-per-day: serving, output tokens
  std::optional<std::int64_t> prompt_tokens;        // --prompt-tokens: serving, per request (1024)
  std::optional<std::int64_t> output_tokens;        // --output-tokens: serving, per request (256)
  std::optional<std::int64_t> days;                 // --days: serving period (30)
  std::optional<std::string> utilisation;           // --utilisation 0.35: of the dense tensor peak
  std::optional<std::string> bandwidth_efficiency;  // --bandwidth-efficiency 0.7: decode
  std::optional<std::string> start;                 // --start 2025-07-01T09:00:00Z (default now)
};

struct RequestContext {
  std::string data_dir;  // where data/models/ lives (bundled model ids)
  // CLI: --model may be a path to a config.json or checkpoint. HTTP API: never (a client must not
  // make the server read its files); presets and bundled ids only, or a pasted "config".
  bool allow_paths = false;
};

struct SizeRequest {
  sizing::ModelShape model;
  sizing::Workload workload;
  bool explain = false;
  std::vector<std::string> notes;  // about the request itself
};

struct FitRequest {
  sizing::ModelShape model;
  sizing::Workload workload;
  Filters filters;
  int top = 5;  // configurations listed: best + top-1 runners-up
  bool why_not = false;
  bool explain = false;
  std::vector<std::string> notes;
};

Result<SizeRequest> ResolveSizeRequest(const RequestFields& fields, const RequestContext& context);
// Validates the filters against `catalog` too (unknown --gpu or --region, FP8 on a non-FP8 --gpu).
Result<FitRequest> ResolveFitRequest(const RequestFields& fields, const RequestContext& context,
                                     const catalog::Catalog& catalog);

// --tp, --pp, --cp, --dp and --vp into the workload's layout (range-checked; the product with
// --gpus is checked by sizing::ValidateWorkload).
Status ApplyLayoutFields(const RequestFields& fields, sizing::Workload& workload);

// Resolves --model: a preset, a bundled model id, or (allow_paths) a config.json / checkpoint path.
Result<sizing::ModelShape> ResolveModel(const std::string& spec, const RequestContext& context);

}  // namespace gpuhub::fit
