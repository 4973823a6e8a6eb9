#include "fit/request.h"

#include <algorithm>
#include <climits>
#include <filesystem>

#include "core/money.h"
#include "fit/limits.h"
#include "sizing/hf_config.h"
#include "sizing/limits.h"
#include "sizing/loader.h"

namespace gpuhub::fit {

using sizing::Method;
using sizing::Precision;

namespace {

Status Bad(std::string message) { return Status::InvalidArgument(std::move(message)); }

// The request field a CLI flag stands for ("--kv-precision" -> "kv_precision", "--no-double-quant"
// -> "double_quant"): API errors name it so that a form can show the message beside that field.
std::string FieldOf(std::string_view flag) {
  if (flag.rfind("--", 0) == 0) flag.remove_prefix(2);
  if (flag.rfind("no-", 0) == 0) flag.remove_prefix(3);
  std::string field(flag);
  for (char& c : field) c = c == '-' ? '_' : c;
  return field;
}

Status BadField(std::string message, std::string_view flag) {
  return Bad(std::move(message)).WithField(FieldOf(flag));
}

// The error of a step that is about one field (parsing a precision name, say), naming it.
template <typename T>
Result<T> ForField(Result<T> result, std::string_view field) {
  if (!result.ok()) return result.status().WithField(std::string(field));
  return result;
}

std::string MethodPhrase(Method m) {
  switch (m) {
    case Method::kInference:
      return "inference";
    case Method::kFullFineTune:
      return "full fine-tuning";
    case Method::kLora:
      return "LoRA";
    case Method::kQlora:
      return "QLoRA";
  }
  return "?";
}

// An int64 flag that lands in an int field: range-checked before narrowing, so 10^12 is refused
// instead of wrapping into something plausible.
Result<int> NarrowInt(std::int64_t value, std::int64_t min, std::int64_t max,
                      const std::string& flag, const std::string& what) {
  if (value < min || value > max) {
    return BadField(flag + " must be between " + std::to_string(min) + " and " +
                        std::to_string(max) + " (" + what + "), got " + std::to_string(value),
                    flag);
  }
  return static_cast<int>(value);
}

// Fields shared by size and fit: the model and the workload.
Status ResolveWorkload(const RequestFields& f, sizing::Workload& w, std::vector<std::string>& notes,
                       const sizing::ModelShape& model) {
  const bool is_model_preset = model.nominal;
  if (!f.workload)
    return BadField("--workload is required: infer, full, lora or qlora", "workload");
  GPUHUB_ASSIGN_OR_RETURN(w.method, ForField(sizing::ParseMethod(*f.workload), "workload"));
  const Method m = w.method;
  const bool training = m != Method::kInference;
  auto not_for = [&](const std::string& flag, const std::string& applies_to) {
    return BadField(flag + " applies to " + applies_to + ", not " + MethodPhrase(m), flag);
  };

  if (f.precision) {
    GPUHUB_ASSIGN_OR_RETURN(Precision p,
                            ForField(sizing::ParsePrecision(*f.precision), "precision"));
    if (m == Method::kQlora && p != Precision::kNf4 && p != Precision::kInt4) {
      return BadField(
          "QLoRA keeps the frozen base in 4-bit nf4; drop --precision (or use --workload "
          "lora for a " +
              std::string(sizing::PrecisionName(p)) + " base)",
          "precision");
    }
    w.precision = m == Method::kQlora ? Precision::kNf4 : p;
  } else if (m == Method::kQlora) {
    w.precision = Precision::kNf4;
  } else if (model.checkpoint) {
    // A checkpoint's weights are sized as stored (a GGUF Q4_K_M, a GPTQ int4) unless a precision
    // is asked for.
    w.weights_as_stored = true;
  }
  if (f.kv_precision) {
    if (training) return not_for("--kv-precision", "inference");
    GPUHUB_ASSIGN_OR_RETURN(w.kv_precision,
                            ForField(sizing::ParsePrecision(*f.kv_precision), "kv_precision"));
  }
  if (f.profile) {
    GPUHUB_ASSIGN_OR_RETURN(w.profile, ForField(sizing::ParseProfile(*f.profile), "profile"));
  }
  if (f.context) {
    if (training) {
      return not_for("--context", "inference (training uses --seq for its sequence length)");
    }
    w.context_tokens = *f.context;
  }
  if (f.batch) w.batch = *f.batch;
  if (f.seq) {
    if (!training) return not_for("--seq", "training (inference uses --context)");
    w.sequence_tokens = *f.seq;
  }
  if (f.rank) {
    if (m != Method::kLora && m != Method::kQlora) return not_for("--rank", "LoRA and QLoRA");
    GPUHUB_ASSIGN_OR_RETURN(w.lora_rank,
                            NarrowInt(*f.rank, 1, sizing::kMaxLoraRank, "--rank", "adapter rank"));
  }
  if (f.zero) {
    if (!training) return not_for("--zero", "training");
    GPUHUB_ASSIGN_OR_RETURN(w.zero_stage, NarrowInt(*f.zero, 0, 3, "--zero", "ZeRO stage"));
  }
  bool guide_profile = w.profile ? *w.profile == sizing::Profile::kGuide : is_model_preset;
  // A setting the guide profile does not model: refused there, rather than silently ignored.
  auto detailed_only = [&](const std::string& flag) -> Status {
    if (!guide_profile) return Status::Ok();
    return BadField(flag +
                        " is part of the detailed profile; the guide's published rules (the "
                        "default for presets) ignore it: add --profile detailed",
                    flag);
  };
  if (model.quantized_variant && w.precision != Precision::kInt4 &&
      w.precision != Precision::kInt8 && w.precision != Precision::kFp8) {
    notes.push_back("the model named is a quantized checkpoint, sized here with " +
                    std::string(sizing::PrecisionName(w.precision)) +
                    " weights: give --precision int4 or int8 for its stored weights");
  }
  if (f.prefill_chunk) {
    if (training) return not_for("--prefill-chunk", "inference");
    GPUHUB_RETURN_IF_ERROR(detailed_only("--prefill-chunk"));
    if (*f.prefill_chunk < 1 || *f.prefill_chunk > sizing::kMaxContextTokens) {
      return BadField("--prefill-chunk must be between 1 and " +
                          std::to_string(sizing::kMaxContextTokens) +
                          " tokens per prefill step, got " + std::to_string(*f.prefill_chunk),
                      "--prefill-chunk");
    }
    w.prefill_chunk_tokens = *f.prefill_chunk;
  }
  if (f.grad_accum) {
    if (!training) return not_for("--grad-accum", "training");
    GPUHUB_ASSIGN_OR_RETURN(w.gradient_accumulation_steps,
                            NarrowInt(*f.grad_accum, 1, sizing::kMaxGradAccumSteps, "--grad-accum",
                                      "micro-batches per optimizer step"));
    if (w.gradient_accumulation_steps != 1) GPUHUB_RETURN_IF_ERROR(detailed_only("--grad-accum"));
  }
  if (f.offload_optimizer) {
    if (!training) return not_for("--offload-optimizer", "training");
    if (m != Method::kFullFineTune) GPUHUB_RETURN_IF_ERROR(detailed_only("--offload-optimizer"));
    w.offload_optimizer = true;
  }
  if (f.optimizer) {
    if (!training) return not_for("--optimizer", "training");
    GPUHUB_ASSIGN_OR_RETURN(w.optimizer,
                            ForField(sizing::ParseOptimizer(*f.optimizer), "optimizer"));
    if (w.optimizer != sizing::Optimizer::kAdamW) {
      GPUHUB_RETURN_IF_ERROR(detailed_only("--optimizer"));
    }
  }
  if (f.lora_targets) {
    if (m != Method::kLora && m != Method::kQlora)
      return not_for("--lora-targets", "LoRA and QLoRA");
    GPUHUB_ASSIGN_OR_RETURN(w.lora_targets,
                            ForField(sizing::ParseLoraTargets(*f.lora_targets), "lora_targets"));
    GPUHUB_RETURN_IF_ERROR(detailed_only("--lora-targets"));
  }
  struct Switch {
    const std::optional<bool>& value;
    bool* target;
    bool default_value;
    const char* flag;  // the spelling that asks for the non-default value
    bool applies;
    const char* applies_to;
  };
  const bool lora_like = m == Method::kLora || m == Method::kQlora;
  const bool nf4 = m == Method::kQlora || w.precision == Precision::kNf4;
  const Switch switches[] = {
      {f.lora_dropout, &w.lora_dropout, false, "--lora-dropout", lora_like, "LoRA and QLoRA"},
      {f.pure_bf16, &w.pure_bf16, false, "--pure-bf16", training, "training"},
      {f.fused_kernels, &w.fused_kernels, false, "--fused-kernels", training, "training"},
      {f.chunked_loss, &w.chunked_loss, false, "--chunked-loss", training, "training"},
      {f.compiled_loss, &w.compiled_loss, false, "--compiled-loss", training, "training"},
      {f.offload_activations, &w.offload_activations, false, "--offload-activations", training,
       "training"},
      {f.offload_params, &w.offload_params, false, "--offload-params", training, "training"},
      {f.old_transformers, &w.old_transformers, false, "--old-transformers", true,
       "every workload"},
      {f.unchunked_nf4_quantization, &w.unchunked_nf4_quantization, false,
       "--unchunked-nf4-quantization", m == Method::kQlora, "QLoRA"},
      {f.foreach_adamw, &w.foreach_adamw, false, "--foreach-adamw", training, "training"},
      {f.optimizer_in_backward, &w.optimizer_in_backward, false, "--optimizer-in-backward",
       m == Method::kFullFineTune, "full fine-tuning"},
      {f.flash_attention, &w.flash_attention, true, "--no-flash-attention", training, "training"},
      {f.gradient_checkpointing, &w.gradient_checkpointing, true, "--no-gradient-checkpointing",
       training, "training"},
      {f.double_quant, &w.double_quant, true, "--no-double-quant", nf4, "QLoRA and nf4 weights"},
  };
  for (const Switch& s : switches) {
    if (!s.value || *s.value == s.default_value) continue;  // the default: nothing to check
    if (!s.applies) return not_for(s.flag, s.applies_to);
    GPUHUB_RETURN_IF_ERROR(detailed_only(s.flag));
    *s.target = *s.value;
  }
  if (w.foreach_adamw && w.optimizer != sizing::Optimizer::kAdamW) {
    return BadField("--foreach-adamw is torch.optim.AdamW's step; it does not apply to --optimizer " +
                        std::string(sizing::OptimizerName(w.optimizer)),
                    "--foreach-adamw");
  }
  if (f.recompute) {
    if (!training) return not_for("--recompute", "training");
    if (*f.recompute == "full") {
      w.gradient_checkpointing = true;
      w.selective_recompute = false;
    } else if (*f.recompute == "selective" || *f.recompute == "none") {
      GPUHUB_RETURN_IF_ERROR(detailed_only("--recompute"));
      w.gradient_checkpointing = false;
      w.selective_recompute = *f.recompute == "selective";
    } else {
      return BadField(
          "--recompute must be full, selective or none, got '" + f.recompute->substr(0, 40) + "'",
          "--recompute");
    }
    if (f.gradient_checkpointing && *f.gradient_checkpointing != w.gradient_checkpointing) {
      return BadField("--recompute " + *f.recompute + " contradicts --" +
                          (*f.gradient_checkpointing ? "" : "no-") + "gradient-checkpointing",
                      "--recompute");
    }
  }
  if (f.fp8_training && *f.fp8_training) {
    if (!training) return not_for("--fp8-training", "training (serving in FP8 is --precision fp8)");
    w.fp8_training = true;
  }
  if (f.stack) {
    if (!training) return not_for("--stack", "training (serving names an --engine)");
    if (*f.stack != "pytorch" && *f.stack != "megatron") {
      return BadField(
          "--stack must be pytorch (FSDP/DDP, Hugging Face, torchtitan, llm-foundry, "
          "torchtune) or megatron (Megatron Core with Transformer Engine: NeMo, "
          "Megatron-LM, Megatron-Bridge), got '" +
              f.stack->substr(0, 40) + "'",
          "--stack");
    }
    w.megatron = *f.stack == "megatron";
  }
  if (f.engine) {
    if (training) return not_for("--engine", "inference");
    GPUHUB_ASSIGN_OR_RETURN(w.engine, ForField(sizing::ParseServingEngine(*f.engine), "engine"));
    // llama.cpp and transformers read the model's own prompt in their way; the engine's prefill
    // chunk (ServingEngineTraits) applies unless --prefill-chunk is given.
  }
  if (m == Method::kFullFineTune && guide_profile && (f.seq || f.batch)) {
    notes.push_back(
        "guide profile: activations are the quick rule's 15% allowance, so --seq and "
        "--batch do not change the figure (use --profile detailed)");
  }
  return Status::Ok();
}

// --tp, --pp, --cp, --dp, --vp into the workload (size and plan; fit picks its own layout).
Status ApplyLayout(const RequestFields& f, sizing::Workload& w) {
  struct Degree {
    const std::optional<std::int64_t>& value;
    int* target;
    const char* flag;
    const char* what;
  };
  const Degree degrees[] = {
      {f.tp, &w.tensor_parallel, "--tp", "tensor-parallel cards"},
      {f.pp, &w.pipeline_parallel, "--pp", "pipeline stages"},
      {f.cp, &w.context_parallel, "--cp", "context-parallel cards"},
      {f.dp, &w.data_parallel, "--dp", "data-parallel ranks"},
      {f.vp, &w.virtual_pipeline, "--vp", "virtual pipeline stages per card"},
  };
  for (const Degree& d : degrees) {
    if (!d.value) continue;
    GPUHUB_ASSIGN_OR_RETURN(*d.target, NarrowInt(*d.value, 1, sizing::kMaxGpus, d.flag, d.what));
  }
  return Status::Ok();
}

Status RefuseFitFields(const RequestFields& f) {
  auto refuse = [](const std::string& flag) {
    return BadField(flag + " applies to gpuhub fit, not gpuhub size", flag);
  };
  if (f.cuda_only) return refuse("--cuda-only");
  if (f.region) return refuse("--region");
  if (f.in_stock) return refuse("--in-stock");
  if (f.max_monthly_usd) return refuse("--max-monthly-usd");
  if (f.top) return refuse("--top");
  if (f.why_not) return refuse("--why-not");
  if (f.gpu) return refuse("--gpu");
  return Status::Ok();
}

Result<sizing::ModelShape> ResolveModelFields(const RequestFields& f,
                                              const RequestContext& context) {
  if (f.model && f.config_json) {
    return BadField(
        "give either model (a preset or bundled id) or config (a pasted config.json), not "
        "both",
        "config");
  }
  if (f.config_json) {
    GPUHUB_ASSIGN_OR_RETURN(
        sizing::ModelShape shape,
        ForField(sizing::ParseHfConfig(*f.config_json, "pasted config.json"), "config"));
    shape.source = "pasted config.json";
    return shape;
  }
  if (!f.model) {
    return BadField("--model is required: a preset (7b, 13b, 34b, 70b, 405b)" +
                        std::string(context.allow_paths ? ", a path to a config.json" : "") +
                        " or a bundled model id",
                    "model");
  }
  return ForField(ResolveModel(*f.model, context), "model");
}

}  // namespace

Status ApplyLayoutFields(const RequestFields& f, sizing::Workload& w) { return ApplyLayout(f, w); }

Result<sizing::ModelShape> ResolveModel(const std::string& spec, const RequestContext& context) {
  if (!context.allow_paths) {
    // The API names models, it never points the server at its own files: a preset or a bundled
    // id ("org/name" or "name") only, and nothing that exists as a path where the server runs.
    bool plain = !spec.empty() && spec.size() <= kMaxModelIdBytes && spec[0] != '.' &&
                 spec[0] != '/' && spec.find("..") == std::string::npos &&
                 std::count(spec.begin(), spec.end(), '/') <= 1;
    for (char c : spec) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '-' || c == '_' || c == '/';
      plain = plain && ok;
    }
    std::error_code ec;
    if (!plain || (!sizing::PresetModel(spec).ok() && std::filesystem::exists(spec, ec))) {
      return Bad(
          "model must be a preset (7b, 13b, 34b, 70b, 405b) or a bundled model id like "
          "meta-llama/Llama-3.1-8B (paths are not accepted here; paste a config.json as "
          "\"config\" instead)");
    }
  }
  auto model = sizing::LoadModel(spec, context.data_dir);
  if (!context.allow_paths && model.status().code() == StatusCode::kNotFound) {
    return Status::NotFound("unknown model '" + spec.substr(0, kMaxModelIdBytes) +
                            "': not a preset (7b, 13b, 34b, 70b, 405b) and not a bundled model "
                            "id (GET /v1/models lists them; or paste a config.json as \"config\")");
  }
  // The API answers with a logical source: the bundled file's path is where the server keeps
  // its data, nothing a client should learn.
  if (model.ok() && !context.allow_paths && model->source != "preset") model->source = "bundled";
  return model;
}

Result<SizeRequest> ResolveSizeRequest(const RequestFields& f, const RequestContext& context) {
  GPUHUB_RETURN_IF_ERROR(RefuseFitFields(f));
  SizeRequest r;
  GPUHUB_ASSIGN_OR_RETURN(r.model, ResolveModelFields(f, context));
  GPUHUB_RETURN_IF_ERROR(ResolveWorkload(f, r.workload, r.notes, r.model));
  if (f.batch_max) {
    return BadField(
        "--batch max is the largest batch that fits a card: gpuhub plan finds it "
        "for a serving plan (--workload infer)",
        "batch");
  }
  if (f.gpus) {
    GPUHUB_ASSIGN_OR_RETURN(r.workload.gpus, NarrowInt(*f.gpus, 1, sizing::kMaxGpus, "--gpus",
                                                       "GPUs the job is spread over"));
  }
  GPUHUB_RETURN_IF_ERROR(ApplyLayoutFields(f, r.workload));
  if (r.workload.zero_stage > 0 && r.workload.gpus == 1 && !r.workload.offload_params) {
    r.notes.push_back("ZeRO shards across GPUs: with --gpus 1 it changes nothing");
  }
  GPUHUB_RETURN_IF_ERROR(sizing::ValidateWorkload(r.workload));
  r.explain = f.explain;
  return r;
}

Result<FitRequest> ResolveFitRequest(const RequestFields& f, const RequestContext& context,
                                     const catalog::Catalog& catalog) {
  if (f.gpus) {
    return BadField(
        "fit picks the number of GPUs itself; drop --gpus (use --gpu NAME to pick a card, "
        "or gpuhub size --gpus N to size a fixed set)",
        "gpus");
  }
  if (f.zero) {
    return BadField(kZeroIsFitsChoice, "zero");
  }
  for (auto [given, flag] : {std::pair{f.tp.has_value(), "tp"}, std::pair{f.pp.has_value(), "pp"},
                             std::pair{f.cp.has_value(), "cp"}, std::pair{f.dp.has_value(), "dp"},
                             std::pair{f.vp.has_value(), "vp"}}) {
    if (given) {
      return BadField(std::string("fit picks how a set shares the job; drop --") + flag +
                          " (gpuhub size or gpuhub plan take a layout)",
                      flag);
    }
  }
  if (f.batch_max) {
    return BadField(
        "--batch max is the largest batch that fits a card: gpuhub plan finds it "
        "for a serving plan (--workload infer)",
        "batch");
  }
  FitRequest r;
  GPUHUB_ASSIGN_OR_RETURN(r.model, ResolveModelFields(f, context));
  GPUHUB_RETURN_IF_ERROR(ResolveWorkload(f, r.workload, r.notes, r.model));
  r.filters.cuda_only = f.cuda_only;
  r.filters.in_stock = f.in_stock;
  if (f.region) {
    const catalog::Region* region = catalog.FindRegion(*f.region);
    if (region == nullptr) {
      return BadField("unknown region '" + f.region->substr(0, 40) +
                          "' (regions: " + catalog.RegionCodes() + ")",
                      "region");
    }
    r.filters.region = region->code;
  }
  if (f.gpu) {
    const catalog::TermGpu* gpu = catalog.FindTerm(*f.gpu);
    if (gpu == nullptr) {
      return BadField(
          "unknown GPU '" + f.gpu->substr(0, 40) + "' (term fleet: " + catalog.TermNames() + ")",
          "gpu");
    }
    r.filters.gpu = gpu->name;
  }
  if (f.max_monthly_usd) {
    const std::string& text = *f.max_monthly_usd;
    if (!text.empty() && text[0] == '-') {
      return BadField("--max-monthly-usd must be a positive amount like 1500 or 1500.50, got '" +
                          text.substr(0, 40) + "'",
                      "max_monthly_usd");
    }
    auto micros = ParseDecimalMicros(text, 2);
    if (!micros.ok()) {
      return BadField("--max-monthly-usd: " + micros.status().message() + " (like 1500 or 1500.50)",
                      "max_monthly_usd");
    }
    if (*micros <= 0) {
      return BadField("--max-monthly-usd must be a positive amount like 1500 or 1500.50, got '" +
                          text.substr(0, 40) + "'",
                      "max_monthly_usd");
    }
    r.filters.max_monthly_micros = *micros;
  }
  if (f.top) {
    GPUHUB_ASSIGN_OR_RETURN(r.top, NarrowInt(*f.top, 1, kMaxTop, "--top", "configurations listed"));
  } else {
    r.top = kDefaultTop;
  }
  r.why_not = f.why_not;
  r.explain = f.explain;
  GPUHUB_RETURN_IF_ERROR(ValidateFitInput(catalog, r.workload, r.filters));
  return r;
}

}  // namespace gpuhub::fit
