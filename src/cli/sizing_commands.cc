// `gpuhub size`, `gpuhub fit`, `gpuhub guide`, `gpuhub catalog`: thin wrappers that turn flags into
// a fit::RequestFields and print the reports of src/fit (the same code that answers the HTTP API).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "catalog/catalog.h"
#include "cli/command_registry.h"
#include "cli/diffusion_size.h"
#include "cli/market_fit.h"
#include "cli/rental_commands.h"
#include "cli/server_client.h"
#include "core/clock.h"
#include "core/money.h"
#include "core/strings.h"
#include "fit/fit.h"
#include "fit/guide.h"
#include "fit/plan.h"
#include "fit/plan_report.h"
#include "fit/report_json.h"
#include "fit/report_text.h"
#include "fit/request.h"
#include "fit/use_cases.h"
#include "sizing/estimate.h"
#include "sizing/loader.h"

namespace gpuhub::cli {
namespace {

// Reports a failed Status the way scripts expect: bad input (invalid_argument, not_found) exits 2
// with one line on stderr; anything else exits 1.
void FailWith(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound) {
    FailBadInput(status.message());
  } else {
    Fail(status.message());
  }
}

// Flags are read as text and parsed by core's strict parsers, so "--context 8k" or "--batch 1e12"
// get a message naming the flag instead of CLI11's generic one.
struct Flags {
  std::string model, workload, precision, kv_precision, profile;
  std::string context, batch, seq, rank, gpus, zero, prefill_chunk, grad_accum;
  std::string tp, pp, cp, dp, vp, recompute, engine, stack;
  bool fp8_training = false;
  bool offload_optimizer = false, explain = false, json = false;
  std::string optimizer, lora_targets;
  bool lora_dropout = false, pure_bf16 = false, fused_kernels = false, chunked_loss = false;
  bool compiled_loss = false;
  bool offload_activations = false, offload_params = false, old_transformers = false;
  bool optimizer_in_backward = false, unchunked_nf4_quantization = false, foreach_adamw = false;
  bool flash_attention = true, gradient_checkpointing = true, double_quant = true;
  // fit
  bool cuda_only = false, in_stock = false, why_not = false;
  std::string region, max_monthly_usd, top, gpu;
  std::string catalog_path;
  std::string hourly_rate;              // catalog --hourly-rate
  std::string use;                      // catalog --use training|fine-tuning|inference
  std::string prices = "list", server;  // fit --prices market --server URL
  // plan
  std::string tokens, samples, epochs, tokens_per_day, prompt_tokens, output_tokens, days;
  std::string utilisation, bandwidth_efficiency, start;

  std::map<std::string, CLI::Option*> options;
  bool Given(const std::string& name) const {
    auto it = options.find(name);
    return it != options.end() && it->second->count() > 0;
  }
};

// The parallel layout: size takes it as given, plan searches the degrees not given.
void AddLayoutFlags(CLI::App* cmd, Flags& f) {
  auto text = [&](const std::string& name, std::string& target, const std::string& help) {
    f.options[name] = cmd->add_option(name, target, help);
  };
  text("--tp", f.tp, "tensor-parallel cards (every layer split across them)");
  text("--pp", f.pp, "pipeline stages (1F1B in training; micro-batches at once when serving)");
  text("--cp", f.cp, "training: context-parallel cards (each sequence split across them)");
  text("--dp", f.dp, "data-parallel ranks (default: gpus / (tp x pp x cp))");
  text("--vp", f.vp, "interleaved (virtual) pipeline stages per card");
}

void AddWorkloadFlags(CLI::App* cmd, Flags& f, bool for_size) {
  auto text = [&](const std::string& name, std::string& target, const std::string& help) {
    f.options[name] = cmd->add_option(name, target, help);
  };
  text("--model", f.model,
       "a preset (7b, 13b, 34b, 70b, 405b), a path to a config.json or checkpoint, or a bundled "
       "model id");
  text("--workload", f.workload, "infer, full, lora or qlora");
  text("--precision", f.precision,
       "weights: fp32, bf16 (default), fp16, fp8, int8, int4 (QLoRA: nf4)");
  text("--kv-precision", f.kv_precision, "KV cache: fp16 (default) or fp8 (inference)");
  text("--profile", f.profile, "guide (default for presets) or detailed");
  text("--context", f.context, "tokens in the KV cache per sequence (inference; default 8192)");
  text("--batch", f.batch,
       "sequences (inference) or micro-batch (training); default 1; plan, serving: max = the "
       "largest batch that fits");
  text("--seq", f.seq, "training sequence length in tokens (default 2048)");
  text("--rank", f.rank, "LoRA/QLoRA adapter rank (default 16)");
  text("--grad-accum", f.grad_accum,
       "detailed, training: micro-batches per optimizer step (default 1); above 1 the gradients "
       "stay allocated through the next micro-batch");
  text("--prefill-chunk", f.prefill_chunk,
       "detailed, inference: tokens per prefill step (default: the whole prompt at once, as "
       "Hugging Face generate; vLLM/SGLang chunk, e.g. 8192)");
  if (for_size) {
    text("--gpus", f.gpus, "GPUs the job is spread over (default 1)");
    text("--zero", f.zero, "ZeRO stage for full fine-tuning across GPUs: 0, 1, 2 or 3");
    AddLayoutFlags(cmd, f);
  }
  text("--recompute", f.recompute,
       "training: full (gradient checkpointing, default), selective (norms and activation "
       "functions) or none");
  text("--stack", f.stack,
       "training: pytorch (default: FSDP/DDP, Hugging Face, torchtitan, torchtune) or megatron "
       "(NeMo, Megatron-LM: Transformer Engine)");
  text("--engine", f.engine,
       "inference: vllm, sglang, tensorrt-llm, llama.cpp or transformers (prefill chunking, "
       "decode speed)");
  f.options["--fp8-training"] =
      cmd->add_flag("--fp8-training", f.fp8_training,
                    "training: FP8 matmuls (Transformer Engine, torchao float8) on an FP8 card");
  cmd->add_flag("--offload-optimizer", f.offload_optimizer,
                "training: keep the optimizer state in host memory");
  // Detailed profile (--profile detailed, the default for real models).
  text("--optimizer", f.optimizer, "detailed: adamw (default), adam8bit, sgd or adafactor");
  text("--lora-targets", f.lora_targets, "detailed: qv (default), attn, mlp or all-linear");
  auto flag = [&](const std::string& spec, const std::string& name, bool& target,
                  const std::string& help) { f.options[name] = cmd->add_flag(spec, target, help); };
  flag("--lora-dropout", "--lora-dropout", f.lora_dropout, "detailed: adapters apply dropout");
  flag("--pure-bf16", "--pure-bf16", f.pure_bf16,
       "detailed: everything in bf16 (no fp32 master weights or optimizer state)");
  flag("--fused-kernels", "--fused-kernels", f.fused_kernels,
       "detailed: fused RMSNorm/SwiGLU kernels (Liger, Unsloth, torch.compile)");
  flag("--chunked-loss", "--chunked-loss", f.chunked_loss,
       "detailed: cross-entropy in chunks (no full fp32 logits)");
  flag("--compiled-loss", "--compiled-loss", f.compiled_loss,
       "detailed: the cross-entropy loss runs under torch.compile (torchtitan since April 2025 "
       "with --training.compile): no fp32 copy of the logits");
  flag("--offload-activations", "--offload-activations", f.offload_activations,
       "detailed: saved activations stream to host memory");
  flag("--offload-params", "--offload-params", f.offload_params,
       "detailed: parameters live in host memory (training with --zero 3: ZeRO-3 / FSDP CPU "
       "offload)");
  flag("--optimizer-in-backward", "--optimizer-in-backward", f.optimizer_in_backward,
       "detailed: full fine-tuning steps each parameter during backward and frees its gradient "
       "(torchtune optimizer_in_bwd)");
  flag("--old-transformers", "--old-transformers", f.old_transformers,
       "detailed: Hugging Face transformers before 4.45 (fp32 logits of every position, per-layer "
       "rotary caches)");
  flag("--unchunked-nf4-quantization", "--unchunked-nf4-quantization", f.unchunked_nf4_quantization,
       "detailed, QLoRA: torchao before 0.2 quantizes each weight on the GPU against all 16 NF4 "
       "codes at once (torchtune 0.1); the allocator keeps that memory reserved");
  flag("--foreach-adamw", "--foreach-adamw", f.foreach_adamw,
       "detailed, training: torch.optim.AdamW without fused/foreach given (foreach on CUDA): "
       "the step's sqrt(exp_avg_sq) copy of every state tensor at once");
  flag("--flash-attention,!--no-flash-attention", "--flash-attention", f.flash_attention,
       "detailed: FlashAttention/SDPA kernels (default on)");
  flag("--gradient-checkpointing,!--no-gradient-checkpointing", "--gradient-checkpointing",
       f.gradient_checkpointing, "detailed: recompute activations (default on)");
  flag("--double-quant,!--no-double-quant", "--double-quant", f.double_quant,
       "detailed: quantize the nf4 absmax constants too (default on)");
  cmd->add_flag("--explain", f.explain, "show the formula behind every figure");
  cmd->add_flag("--json", f.json, "print JSON instead of tables");
}

Result<std::optional<std::int64_t>> IntFlag(const Flags& f, const std::string& name,
                                            const std::string& value) {
  if (!f.Given(name)) return std::optional<std::int64_t>();
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t n, ParseInt64(value, name));
  return std::optional<std::int64_t>(n);
}

Result<fit::RequestFields> ToFields(const Flags& f) {
  fit::RequestFields r;
  auto text = [&](const std::string& name, const std::string& value) {
    return f.Given(name) ? std::optional<std::string>(value) : std::nullopt;
  };
  r.model = text("--model", f.model);
  r.workload = text("--workload", f.workload);
  r.precision = text("--precision", f.precision);
  r.kv_precision = text("--kv-precision", f.kv_precision);
  r.profile = text("--profile", f.profile);
  GPUHUB_ASSIGN_OR_RETURN(r.context, IntFlag(f, "--context", f.context));
  if (f.Given("--batch") && f.batch == "max") {
    r.batch_max = true;
  } else {
    GPUHUB_ASSIGN_OR_RETURN(r.batch, IntFlag(f, "--batch", f.batch));
  }
  GPUHUB_ASSIGN_OR_RETURN(r.tp, IntFlag(f, "--tp", f.tp));
  GPUHUB_ASSIGN_OR_RETURN(r.pp, IntFlag(f, "--pp", f.pp));
  GPUHUB_ASSIGN_OR_RETURN(r.cp, IntFlag(f, "--cp", f.cp));
  GPUHUB_ASSIGN_OR_RETURN(r.dp, IntFlag(f, "--dp", f.dp));
  GPUHUB_ASSIGN_OR_RETURN(r.vp, IntFlag(f, "--vp", f.vp));
  r.recompute = text("--recompute", f.recompute);
  r.engine = text("--engine", f.engine);
  r.stack = text("--stack", f.stack);
  GPUHUB_ASSIGN_OR_RETURN(r.seq, IntFlag(f, "--seq", f.seq));
  GPUHUB_ASSIGN_OR_RETURN(r.prefill_chunk, IntFlag(f, "--prefill-chunk", f.prefill_chunk));
  GPUHUB_ASSIGN_OR_RETURN(r.grad_accum, IntFlag(f, "--grad-accum", f.grad_accum));
  GPUHUB_ASSIGN_OR_RETURN(r.rank, IntFlag(f, "--rank", f.rank));
  GPUHUB_ASSIGN_OR_RETURN(r.gpus, IntFlag(f, "--gpus", f.gpus));
  GPUHUB_ASSIGN_OR_RETURN(r.zero, IntFlag(f, "--zero", f.zero));
  GPUHUB_ASSIGN_OR_RETURN(r.top, IntFlag(f, "--top", f.top));
  r.offload_optimizer = f.offload_optimizer;
  r.optimizer = text("--optimizer", f.optimizer);
  r.lora_targets = text("--lora-targets", f.lora_targets);
  auto given = [&](const std::string& name, bool value) {
    return f.Given(name) ? std::optional<bool>(value) : std::nullopt;
  };
  r.lora_dropout = given("--lora-dropout", f.lora_dropout);
  r.pure_bf16 = given("--pure-bf16", f.pure_bf16);
  r.fused_kernels = given("--fused-kernels", f.fused_kernels);
  r.chunked_loss = given("--chunked-loss", f.chunked_loss);
  r.compiled_loss = given("--compiled-loss", f.compiled_loss);
  r.offload_activations = given("--offload-activations", f.offload_activations);
  r.offload_params = given("--offload-params", f.offload_params);
  r.old_transformers = given("--old-transformers", f.old_transformers);
  r.optimizer_in_backward = given("--optimizer-in-backward", f.optimizer_in_backward);
  r.unchunked_nf4_quantization =
      given("--unchunked-nf4-quantization", f.unchunked_nf4_quantization);
  r.foreach_adamw = given("--foreach-adamw", f.foreach_adamw);
  r.flash_attention = given("--flash-attention", f.flash_attention);
  r.gradient_checkpointing = given("--gradient-checkpointing", f.gradient_checkpointing);
  r.double_quant = given("--double-quant", f.double_quant);
  r.fp8_training = given("--fp8-training", f.fp8_training);
  r.explain = f.explain;
  r.cuda_only = f.cuda_only;
  r.in_stock = f.in_stock;
  r.why_not = f.why_not;
  r.region = text("--region", f.region);
  r.max_monthly_usd = text("--max-monthly-usd", f.max_monthly_usd);
  r.gpu = text("--gpu", f.gpu);
  GPUHUB_ASSIGN_OR_RETURN(r.tokens, IntFlag(f, "--tokens", f.tokens));
  GPUHUB_ASSIGN_OR_RETURN(r.samples, IntFlag(f, "--samples", f.samples));
  GPUHUB_ASSIGN_OR_RETURN(r.epochs, IntFlag(f, "--epochs", f.epochs));
  GPUHUB_ASSIGN_OR_RETURN(r.tokens_per_day, IntFlag(f, "--tokens-per-day", f.tokens_per_day));
  GPUHUB_ASSIGN_OR_RETURN(r.prompt_tokens, IntFlag(f, "--prompt-tokens", f.prompt_tokens));
  GPUHUB_ASSIGN_OR_RETURN(r.output_tokens, IntFlag(f, "--output-tokens", f.output_tokens));
  GPUHUB_ASSIGN_OR_RETURN(r.days, IntFlag(f, "--days", f.days));
  r.utilisation = text("--utilisation", f.utilisation);
  r.bandwidth_efficiency = text("--bandwidth-efficiency", f.bandwidth_efficiency);
  r.start = text("--start", f.start);
  return r;
}

fit::RequestContext CliContext() { return fit::RequestContext{DataDir(), /*allow_paths=*/true}; }

// The catalog of --catalog, or the bundled one. A broken bundled catalog is an installation
// problem (exit 1); a broken file the user named is bad input (exit 2).
std::optional<catalog::Catalog> LoadCatalogOrFail(const Flags& f) {
  bool named = f.Given("--catalog");
  std::string path = named ? f.catalog_path : DataDir() + "/catalog.toml";
  auto c = catalog::LoadCatalog(path);
  if (!c.ok()) {
    if (named) {
      FailBadInput(c.status().message());
    } else {
      Fail(c.status().message());
    }
    return std::nullopt;
  }
  return std::move(*c);
}

void AddCatalogFlag(CLI::App* cmd, Flags& f) {
  f.options["--catalog"] = cmd->add_option("--catalog", f.catalog_path,
                                           "catalog file (default: <data dir>/catalog.toml)");
}

void RunSize(const Flags& f, const DiffusionFlags& diffusion) {
  // A bundled diffusion model (sdxl, flux-dev, wan-14b, ...) is sized by cli/diffusion_commands.cc.
  if (IsDiffusionModel(f.model)) {
    std::vector<std::string> llm;
    for (const auto& [name, option] : f.options) {
      if (option->count() > 0 && name != "--model" && name != "--precision" && name != "--batch") {
        llm.push_back(name);
      }
    }
    return RunDiffusionSize(diffusion, f.model, f.Given("--precision") ? f.precision : "",
                            f.Given("--batch") ? f.batch : "", llm, f.explain, f.json);
  }
  if (std::string flag = diffusion.FirstGiven(); !flag.empty()) {
    return FailBadInput(flag + " applies to diffusion models (gpuhub diffusion-models lists them)");
  }
  auto fields = ToFields(f);
  if (!fields.ok()) return FailWith(fields.status());
  auto request = fit::ResolveSizeRequest(*fields, CliContext());
  if (!request.ok()) return FailWith(request.status());
  auto estimate = sizing::EstimateMemory(request->model, request->workload);
  if (!estimate.ok()) return FailWith(estimate.status());
  if (f.json) {
    std::cout << fit::SizeReportJson(*request, *estimate) << "\n";
  } else {
    std::cout << fit::SizeReportText(*request, *estimate);
  }
  SetExitCode(kExitOk);
}

void RunFit(const Flags& f) {
  auto fields = ToFields(f);
  if (!fields.ok()) return FailWith(fields.status());
  auto fleet = LoadCatalogOrFail(f);
  if (!fleet) return;
  if (f.prices != "list" && f.prices != "market") {
    return FailBadInput(
        "--prices must be list (the fleet's list prices) or market (live offers of "
        "a server's spot exchange)");
  }
  if (f.prices == "market") {
    std::string server = f.server;
    if (server.empty()) {
      if (const char* env = std::getenv("GPUHUB_SERVER")) server = env;
    }
    return RunMarketFit(*fields, CliContext(), *fleet, server, f.json);
  }
  if (!f.server.empty()) return FailBadInput("--server applies to --prices market");
  auto request = fit::ResolveFitRequest(*fields, CliContext(), *fleet);
  if (!request.ok()) return FailWith(request.status());
  auto result = fit::Fit(*fleet, request->model, request->workload, request->filters);
  if (!result.ok()) return FailWith(result.status());
  if (f.json) {
    std::cout << fit::FitReportJson(*request, *result) << "\n";
  } else {
    std::cout << fit::FitReportText(*request, *result);
  }
  SetExitCode(kExitOk);
}

void RunPlan(const Flags& f) {
  auto fields = ToFields(f);
  if (!fields.ok()) return FailWith(fields.status());
  auto fleet = LoadCatalogOrFail(f);
  if (!fleet) return;
  auto request = fit::ResolvePlanRequest(*fields, CliContext(), *fleet, RealClock().NowMicros());
  if (!request.ok()) return FailWith(request.status());
  // Spot prices: the live book of a server when one is named, else the catalog's opening asks.
  const std::string server = ServerFromEnvironment(f.server);
  std::vector<fit::MarketOffer> offers;
  const bool live = !server.empty();
  if (live) {
    auto book = FetchOffers(server);
    if (!book.ok()) return FailWith(book.status());
    offers = std::move(*book);
  } else {
    offers = fit::OpeningAskOffers(*fleet);
  }
  auto result = fit::Plan(*fleet, *request, offers, live);
  if (!result.ok()) return FailWith(result.status());
  if (f.json) {
    std::cout << fit::PlanReportJson(*request, *result) << "\n";
  } else {
    std::cout << fit::PlanReportText(*request, *result);
  }
  SetExitCode(kExitOk);
}

void RunGuide(const Flags& f) {
  auto fleet = LoadCatalogOrFail(f);
  if (!fleet) return;
  auto guide = fit::BuildGuide(*fleet);
  if (!guide.ok()) return Fail(guide.status().message());
  if (f.json) {
    std::cout << fit::GuideJson(*guide) << "\n";
  } else {
    std::cout << fit::GuideText(*guide);
  }
  SetExitCode(kExitOk);
}

// gpuhub catalog --use training|fine-tuning|inference|image-video|rendering|science [--server URL]
void RunUseCase(const Flags& f, const catalog::Catalog& fleet) {
  auto use = fit::ParseUseCase(f.use);
  if (!use.ok()) return FailBadInput("--use: " + use.status().message());
  auto bundled = sizing::ListBundledModels(DataDir());
  if (!bundled.ok()) return Fail(bundled.status().message());
  auto diffusion = sizing::ListDiffusionModels(DataDir());
  if (!diffusion.ok()) return Fail(diffusion.status().message());
  auto view = fit::BuildUseCase(fleet, *bundled, *use, *diffusion);
  if (!view.ok()) return Fail(view.status().message());
  const std::string server = ServerFromEnvironment(f.server);
  if (!server.empty()) {
    auto book = FetchOffers(server);
    if (!book.ok()) return FailWith(book.status());
    fit::ApplySpotPrices(fleet, *book, /*live=*/true, *view);
  } else {
    fit::ApplySpotPrices(fleet, {}, /*live=*/false, *view);
  }
  if (f.json) {
    std::cout << fit::UseCaseJson(*view) << "\n";
  } else {
    std::cout << fit::UseCaseText(*view);
  }
  SetExitCode(kExitOk);
}

void RunCatalog(const Flags& f) {
  std::optional<std::int64_t> rate;
  if (f.Given("--hourly-rate")) {
    auto micros = ParseDecimalMicros(f.hourly_rate, 6);
    if (!micros.ok() || *micros <= 0) {
      return FailBadInput(
          "--hourly-rate must be a positive USD amount per GPU-hour like 2.50, got '" +
          f.hourly_rate.substr(0, 40) + "'");
    }
    rate = *micros;
  }
  auto fleet = LoadCatalogOrFail(f);
  if (!fleet) return;
  if (f.Given("--use")) {
    if (rate) return FailBadInput("--hourly-rate applies to the fleet table, not to --use");
    return RunUseCase(f, *fleet);
  }
  std::string out = f.json ? fit::CatalogJson(*fleet, rate) + "\n" : fit::CatalogText(*fleet, rate);
  // With a server: the term fleet's live stock per region, under the tables.
  if (const std::string server = ServerFromEnvironment(f.server); !server.empty()) {
    Status live = AppendLiveStock(server, f.json, &out);
    if (!live.ok()) return FailWith(live);
  }
  std::cout << out;
  SetExitCode(kExitOk);
}

void RunModels(const Flags& f) {
  auto bundled = sizing::ListBundledModels(DataDir());
  if (!bundled.ok()) return Fail(bundled.status().message());
  if (f.json) {
    std::cout << fit::ModelsJson(*bundled) << "\n";
  } else {
    std::cout << fit::ModelsText(*bundled);
  }
  SetExitCode(kExitOk);
}

void AddSizingCommands(CLI::App& app) {
  // Flags live as long as the app: the callbacks run after parsing.
  static Flags size_flags, fit_flags, guide_flags, catalog_flags, models_flags, plan_flags;
  static DiffusionFlags diffusion_flags;

  CLI::App* size = app.add_subcommand(
      "size", "GPU memory a model needs for inference or training, component by component");
  AddWorkloadFlags(size, size_flags, /*for_size=*/true);
  AddDiffusionFlags(size, diffusion_flags);
  size->callback([] { RunSize(size_flags, diffusion_flags); });

  CLI::App* fit_cmd = app.add_subcommand(
      "fit", "the cheapest GPU configuration of the fleet that holds the job, and the runners-up");
  AddWorkloadFlags(fit_cmd, fit_flags, /*for_size=*/false);
  // --gpus/--zero are refused with a message that says why (fit picks the count).
  fit_flags.options["--gpus"] =
      fit_cmd->add_option("--gpus", fit_flags.gpus, "not for fit: it picks the count itself");
  fit_flags.options["--zero"] =
      fit_cmd->add_option("--zero", fit_flags.zero, "not for fit: it shards with ZeRO-3 itself");
  fit_cmd->add_flag("--cuda-only", fit_flags.cuda_only, "CUDA cards only (no ROCm)");
  fit_flags.options["--region"] =
      fit_cmd->add_option("--region", fit_flags.region, "region code: DFW-1, IAD-1 or PDX-1");
  fit_cmd->add_flag("--in-stock", fit_flags.in_stock, "only configurations free now");
  fit_flags.options["--max-monthly-usd"] = fit_cmd->add_option(
      "--max-monthly-usd", fit_flags.max_monthly_usd, "budget per month for the whole set, USD");
  fit_flags.options["--top"] =
      fit_cmd->add_option("--top", fit_flags.top, "configurations listed (default 5)");
  fit_cmd->add_flag("--why-not", fit_flags.why_not, "list every excluded candidate and why");
  fit_flags.options["--gpu"] = fit_cmd->add_option(
      "--gpu", fit_flags.gpu, "only this card of the term fleet (\"H100 SXM\")");
  AddCatalogFlag(fit_cmd, fit_flags);
  fit_cmd
      ->add_option("--prices", fit_flags.prices,
                   "list (the fleet's list prices) or market (live offers on a server's spot "
                   "exchange, per hour)")
      ->default_str("list");
  fit_cmd->add_option("--server", fit_flags.server,
                      "with --prices market: a running gpuhub serve, http://HOST:PORT "
                      "(default $GPUHUB_SERVER)");
  fit_cmd->callback([] { RunFit(fit_flags); });

  CLI::App* plan = app.add_subcommand(
      "plan",
      "how long a training or serving job runs on every configuration that holds it, and what it "
      "costs to finish on spot (live asks) or a weekly/monthly term, cheapest first");
  AddWorkloadFlags(plan, plan_flags, /*for_size=*/false);
  auto plan_option = [&](const std::string& name, std::string& target, const std::string& help) {
    plan_flags.options[name] = plan->add_option(name, target, help);
  };
  plan_option("--gpus", plan_flags.gpus,
              "a fixed number of GPUs (default: every count of each card; above 8, whole nodes "
              "of 8)");
  plan_option("--zero", plan_flags.zero,
              "training: ZeRO stage of the data-parallel group "
              "(default: searched)");
  AddLayoutFlags(plan, plan_flags);
  plan->add_flag("--cuda-only", plan_flags.cuda_only, "CUDA cards only (no ROCm)");
  plan_option("--region", plan_flags.region, "region code: DFW-1, IAD-1 or PDX-1");
  plan->add_flag("--in-stock", plan_flags.in_stock, "term: only sets free now");
  plan_option("--max-monthly-usd", plan_flags.max_monthly_usd,
              "term: budget per month for the whole set, USD");
  plan_option("--top", plan_flags.top, "configurations listed (default 5)");
  plan->add_flag("--why-not", plan_flags.why_not, "list every excluded configuration and why");
  plan_option("--gpu", plan_flags.gpu, "only this card (term fleet or spot exchange)");
  plan_option("--tokens", plan_flags.tokens, "training: tokens per epoch");
  plan_option("--samples", plan_flags.samples, "training: dataset samples (x --seq tokens each)");
  plan_option("--epochs", plan_flags.epochs, "training: epochs (default 1)");
  plan_option("--tokens-per-day", plan_flags.tokens_per_day,
              "serving (--workload infer): output tokens a day");
  plan_option("--prompt-tokens", plan_flags.prompt_tokens,
              "serving: prompt tokens per request (default 1024)");
  plan_option("--output-tokens", plan_flags.output_tokens,
              "serving: output tokens per request (default 256)");
  plan_option("--days", plan_flags.days, "serving: days of service (default 30)");
  plan_option("--utilisation", plan_flags.utilisation,
              "share of the dense tensor peak reached (default: calibrated per architecture)");
  plan_option("--bandwidth-efficiency", plan_flags.bandwidth_efficiency,
              "serving: share of memory bandwidth a decode step reaches (default calibrated)");
  plan_option("--start", plan_flags.start, "when the job starts, RFC 3339 (default now)");
  AddCatalogFlag(plan, plan_flags);
  plan->add_option("--server", plan_flags.server,
                   "a running gpuhub serve whose spot book prices the plan (default "
                   "$GPUHUB_SERVER; none: the catalog's opening asks)");
  plan->callback([] { RunPlan(plan_flags); });

  CLI::App* guide = app.add_subcommand(
      "guide", "the published sizing guide, regenerated from the engine and the catalog");
  guide->add_flag("--json", guide_flags.json, "print JSON instead of tables");
  AddCatalogFlag(guide, guide_flags);
  guide->callback([] { RunGuide(guide_flags); });

  CLI::App* catalog_cmd =
      app.add_subcommand("catalog", "the fleet: term rentals and spot-exchange cards, with prices");
  catalog_cmd->add_flag("--json", catalog_flags.json, "print JSON instead of tables");
  catalog_flags.options["--hourly-rate"] = catalog_cmd->add_option(
      "--hourly-rate", catalog_flags.hourly_rate,
      "USD per GPU-hour: add each card's break-even hours per month against it");
  catalog_flags.options["--use"] = catalog_cmd->add_option(
      "--use", catalog_flags.use,
      "training, fine-tuning, inference, image-video, rendering or science: the cards fit for "
      "that use, why (memory, throughput, FP64, ECC, RT cores as published), and prices");
  catalog_flags.options["--server"] = catalog_cmd->add_option(
      "--server", catalog_flags.server,
      "a running gpuhub serve (default $GPUHUB_SERVER): the term fleet's live stock per region "
      "under the tables; with --use, its book gives the live \"from $X/h\" (none: the opening "
      "asks)");
  AddCatalogFlag(catalog_cmd, catalog_flags);
  catalog_cmd->callback([] { RunCatalog(catalog_flags); });

  CLI::App* models = app.add_subcommand(
      "models", "the guide's presets and the bundled model configs --model accepts by id");
  models->add_flag("--json", models_flags.json, "print JSON instead of tables");
  models->callback([] { RunModels(models_flags); });
}

const bool kRegistered = RegisterCommands(&AddSizingCommands);

}  // namespace
}  // namespace gpuhub::cli
