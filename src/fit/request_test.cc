#include "fit/request.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace gpuhub::fit {
namespace {

using sizing::Method;
using sizing::Precision;

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet =
      *catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
  return fleet;
}

RequestContext Cli() { return {std::string(GPUHUB_SOURCE_DIR) + "/data", true}; }
RequestContext Api() { return {std::string(GPUHUB_SOURCE_DIR) + "/data", false}; }

RequestFields Fields(const std::string& model, const std::string& workload) {
  RequestFields f;
  f.model = model;
  f.workload = workload;
  return f;
}

TEST(Request, SizeDefaultsAndFlags) {
  RequestFields f = Fields("70b", "infer");
  f.precision = "FP8";
  f.kv_precision = "fp8";
  f.context = 131072;
  f.batch = 4;
  auto r = ResolveSizeRequest(f, Cli());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.id, "70b");
  EXPECT_EQ(r->workload.method, Method::kInference);
  EXPECT_EQ(r->workload.precision, Precision::kFp8);
  EXPECT_EQ(r->workload.kv_precision, Precision::kFp8);
  EXPECT_EQ(r->workload.context_tokens, 131072);
  EXPECT_EQ(r->workload.batch, 4);
  EXPECT_EQ(r->workload.gpus, 1);

  RequestFields q = Fields("7b", "qlora");
  q.rank = 64;
  auto qr = ResolveSizeRequest(q, Cli());
  ASSERT_TRUE(qr.ok());
  EXPECT_EQ(qr->workload.precision, Precision::kNf4);
  EXPECT_EQ(qr->workload.lora_rank, 64);

  RequestFields full = Fields("13b", "full");
  full.gpus = 4;
  full.zero = 3;
  full.offload_optimizer = true;
  auto fr = ResolveSizeRequest(full, Cli());
  ASSERT_TRUE(fr.ok());
  EXPECT_EQ(fr->workload.gpus, 4);
  EXPECT_EQ(fr->workload.zero_stage, 3);
  EXPECT_TRUE(fr->workload.offload_optimizer);

  RequestFields seq = Fields("7b", "full");
  seq.seq = 4096;
  auto sr = ResolveSizeRequest(seq, Cli());
  ASSERT_TRUE(sr.ok());
  ASSERT_EQ(sr->notes.size(), 1u);  // the guide's quick rule does not use --seq: said, not hidden
  EXPECT_NE(sr->notes[0].find("--seq and --batch do not change the figure"), std::string::npos);
}

struct BadRow {
  const char* what;
  RequestFields fields;
  StatusCode code;
  const char* message;
};

TEST(Request, BadSizeInputSaysWhatToFix) {
  auto with = [](RequestFields f, auto&& edit) {
    edit(f);
    return f;
  };
  const RequestFields infer = Fields("70b", "infer");
  const BadRow rows[] = {
      {"no model", with(infer, [](RequestFields& f) { f.model.reset(); }),
       StatusCode::kInvalidArgument,
       "--model is required: a preset (7b, 13b, 34b, 70b, 405b), a path to a config.json or a "
       "bundled model id"},
      {"no workload", with(infer, [](RequestFields& f) { f.workload.reset(); }),
       StatusCode::kInvalidArgument, "--workload is required: infer, full, lora or qlora"},
      {"bad workload", with(infer, [](RequestFields& f) { f.workload = "train"; }),
       StatusCode::kInvalidArgument,
       "unknown workload 'train' (expected infer, full, lora or qlora)"},
      {"bad precision", with(infer, [](RequestFields& f) { f.precision = "fp6"; }),
       StatusCode::kInvalidArgument,
       "unknown precision 'fp6' (expected fp32, bf16, fp16, fp8, int8, int4, nf4 or fp4)"},
      {"context 0", with(infer, [](RequestFields& f) { f.context = 0; }),
       StatusCode::kInvalidArgument, "context must be between 1 and 10000000 tokens, got 0"},
      {"batch 1e12", with(infer, [](RequestFields& f) { f.batch = 1'000'000'000'000; }),
       StatusCode::kInvalidArgument, "batch must be between 1 and 65536, got 1000000000000"},
      {"negative batch", with(infer, [](RequestFields& f) { f.batch = -1; }),
       StatusCode::kInvalidArgument, "batch must be between 1 and 65536, got -1"},
      {"rank 0", with(Fields("7b", "lora"), [](RequestFields& f) { f.rank = 0; }),
       StatusCode::kInvalidArgument, "--rank must be between 1 and 65536 (adapter rank), got 0"},
      {"rank 1e12",
       with(Fields("7b", "lora"), [](RequestFields& f) { f.rank = 1'000'000'000'000; }),
       StatusCode::kInvalidArgument,
       "--rank must be between 1 and 65536 (adapter rank), got 1000000000000"},
      {"gpus 1e12", with(infer, [](RequestFields& f) { f.gpus = 4'294'967'297; }),
       StatusCode::kInvalidArgument,
       "--gpus must be between 1 and 1024 (GPUs the job is spread over), got 4294967297"},
      {"context for training",
       with(Fields("7b", "full"), [](RequestFields& f) { f.context = 4096; }),
       StatusCode::kInvalidArgument,
       "--context applies to inference (training uses --seq for its sequence length), not full "
       "fine-tuning"},
      {"seq for inference", with(infer, [](RequestFields& f) { f.seq = 4096; }),
       StatusCode::kInvalidArgument,
       "--seq applies to training (inference uses --context), not inference"},
      {"rank for inference", with(infer, [](RequestFields& f) { f.rank = 8; }),
       StatusCode::kInvalidArgument, "--rank applies to LoRA and QLoRA, not inference"},
      {"kv for training",
       with(Fields("7b", "lora"), [](RequestFields& f) { f.kv_precision = "fp8"; }),
       StatusCode::kInvalidArgument, "--kv-precision applies to inference, not LoRA"},
      {"zero for inference", with(infer, [](RequestFields& f) { f.zero = 3; }),
       StatusCode::kInvalidArgument, "--zero applies to training, not inference"},
      {"zero 1 for lora", with(Fields("7b", "lora"), [](RequestFields& f) { f.zero = 1; }),
       StatusCode::kInvalidArgument,
       "LoRA/QLoRA across GPUs: ZeRO stage 3 (FSDP) shards the frozen base, stage 0 splits the "
       "layers; stages 1 and 2 do not apply"},
      {"detailed flag on a preset",
       with(Fields("7b", "lora"), [](RequestFields& f) { f.pure_bf16 = true; }),
       StatusCode::kInvalidArgument,
       "--pure-bf16 is part of the detailed profile; the guide's published rules (the default for "
       "presets) ignore it: add --profile detailed"},
      {"no flash attention on a preset",
       with(Fields("7b", "full"), [](RequestFields& f) { f.flash_attention = false; }),
       StatusCode::kInvalidArgument,
       "--no-flash-attention is part of the detailed profile; the guide's published rules (the "
       "default for presets) ignore it: add --profile detailed"},
      {"lora targets for inference", with(infer, [](RequestFields& f) { f.lora_targets = "qv"; }),
       StatusCode::kInvalidArgument, "--lora-targets applies to LoRA and QLoRA, not inference"},
      {"fused kernels for inference",
       with(infer,
            [](RequestFields& f) {
              f.fused_kernels = true;
              f.profile = "detailed";
            }),
       StatusCode::kInvalidArgument, "--fused-kernels applies to training, not inference"},
      {"optimizer in backward for lora",
       with(Fields("7b", "lora"),
            [](RequestFields& f) {
              f.optimizer_in_backward = true;
              f.profile = "detailed";
            }),
       StatusCode::kInvalidArgument,
       "--optimizer-in-backward applies to full fine-tuning, not LoRA"},
      {"old transformers on a preset",
       with(infer, [](RequestFields& f) { f.old_transformers = true; }),
       StatusCode::kInvalidArgument,
       "--old-transformers is part of the detailed profile; the guide's published rules (the "
       "default for presets) ignore it: add --profile detailed"},
      {"bad optimizer", with(Fields("7b", "full"), [](RequestFields& f) { f.optimizer = "lion"; }),
       StatusCode::kInvalidArgument,
       "unknown optimizer 'lion' (expected adamw, adam8bit, sgd or adafactor)"},
      {"offload params without zero 3",
       with(Fields("7b", "full"),
            [](RequestFields& f) {
              f.offload_params = true;
              f.profile = "detailed";
            }),
       StatusCode::kInvalidArgument,
       "parameter offload needs training with ZeRO stage 3 / FSDP (--zero 3)"},
      {"zero 4", with(Fields("7b", "full"), [](RequestFields& f) { f.zero = 4; }),
       StatusCode::kInvalidArgument, "--zero must be between 0 and 3 (ZeRO stage), got 4"},
      {"offload for qlora",
       with(Fields("7b", "qlora"), [](RequestFields& f) { f.offload_optimizer = true; }),
       StatusCode::kInvalidArgument,
       "--offload-optimizer is part of the detailed profile; the guide's published rules (the "
       "default for presets) ignore it: add --profile detailed"},
      {"offload for inference", with(infer, [](RequestFields& f) { f.offload_optimizer = true; }),
       StatusCode::kInvalidArgument, "--offload-optimizer applies to training, not inference"},
      {"qlora bf16", with(Fields("7b", "qlora"), [](RequestFields& f) { f.precision = "bf16"; }),
       StatusCode::kInvalidArgument,
       "QLoRA keeps the frozen base in 4-bit nf4; drop --precision (or use --workload lora for a "
       "bf16 base)"},
      {"kv int4", with(infer, [](RequestFields& f) { f.kv_precision = "int4"; }),
       StatusCode::kInvalidArgument, "KV cache precision must be fp16 or fp8, got int4"},
      {"fit flag on size", with(infer, [](RequestFields& f) { f.region = "DFW-1"; }),
       StatusCode::kInvalidArgument, "--region applies to gpuhub fit, not gpuhub size"},
      {"unknown model", Fields("71b", "infer"), StatusCode::kNotFound, nullptr},
      {"model and config", with(infer, [](RequestFields& f) { f.config_json = "{}"; }),
       StatusCode::kInvalidArgument,
       "give either model (a preset or bundled id) or config (a pasted config.json), not both"},
  };
  for (const auto& row : rows) {
    auto r = ResolveSizeRequest(row.fields, Cli());
    ASSERT_FALSE(r.ok()) << row.what;
    EXPECT_EQ(r.status().code(), row.code) << row.what << ": " << r.status().ToString();
    if (row.message != nullptr) {
      EXPECT_EQ(r.status().message(), row.message) << row.what;
    }
  }
}

TEST(Request, DetailedProfileSettings) {
  RequestFields f = Fields("meta-llama/Llama-3.1-8B", "lora");  // real model: detailed by default
  f.lora_targets = "all-linear";
  f.pure_bf16 = true;
  f.fused_kernels = true;
  f.chunked_loss = true;
  f.flash_attention = true;  // the default: accepted anywhere
  f.gradient_checkpointing = false;
  f.optimizer = "adam8bit";
  f.offload_optimizer = true;
  auto r = ResolveSizeRequest(f, Cli());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->workload.lora_targets, sizing::LoraTargets::kAllLinear);
  EXPECT_TRUE(r->workload.pure_bf16);
  EXPECT_TRUE(r->workload.fused_kernels);
  EXPECT_TRUE(r->workload.chunked_loss);
  EXPECT_TRUE(r->workload.flash_attention);
  EXPECT_FALSE(r->workload.gradient_checkpointing);
  EXPECT_EQ(r->workload.optimizer, sizing::Optimizer::kAdam8bit);
  EXPECT_TRUE(r->workload.offload_optimizer);

  // A preset with --profile detailed takes them too; the guide's own switches stay usable.
  RequestFields p = Fields("7b", "full");
  p.profile = "detailed";
  p.offload_params = true;
  p.zero = 3;
  p.gpus = 4;
  auto pr = ResolveSizeRequest(p, Cli());
  ASSERT_TRUE(pr.ok()) << pr.status().ToString();
  EXPECT_TRUE(pr->workload.offload_params);
  // LoRA/QLoRA with FSDP CPU offload, the older transformers' logits, the step in backward.
  RequestFields q = Fields("7b", "qlora");
  q.profile = "detailed";
  q.offload_params = true;
  q.zero = 3;
  q.gpus = 2;
  q.old_transformers = true;
  q.lora_targets = "mlp";
  auto qr = ResolveSizeRequest(q, Cli());
  ASSERT_TRUE(qr.ok()) << qr.status().ToString();
  EXPECT_TRUE(qr->workload.offload_params);
  EXPECT_TRUE(qr->workload.old_transformers);
  EXPECT_EQ(qr->workload.lora_targets, sizing::LoraTargets::kMlp);
  RequestFields o = Fields("7b", "full");
  o.profile = "detailed";
  o.optimizer_in_backward = true;
  auto orr = ResolveSizeRequest(o, Cli());
  ASSERT_TRUE(orr.ok()) << orr.status().ToString();
  EXPECT_TRUE(orr->workload.optimizer_in_backward);
  RequestFields g = Fields("7b", "full");
  g.offload_optimizer = true;  // the guide models optimizer offload for full fine-tuning
  EXPECT_TRUE(ResolveSizeRequest(g, Cli()).ok());
}

TEST(Request, FitFiltersAndErrors) {
  RequestFields f = Fields("70b", "infer");
  f.precision = "fp8";
  f.region = "dfw-1";
  f.gpu = "h100-pcie";
  f.max_monthly_usd = "1500.50";
  f.top = 3;
  f.cuda_only = true;
  f.in_stock = true;
  f.why_not = true;
  auto r = ResolveFitRequest(f, Cli(), Fleet());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r->filters.region, "DFW-1");  // canonical spelling
  EXPECT_EQ(*r->filters.gpu, "H100 PCIe");
  EXPECT_EQ(*r->filters.max_monthly_micros, 1'500'500'000);
  EXPECT_EQ(r->top, 3);
  EXPECT_TRUE(r->why_not);

  struct Row {
    const char* what;
    void (*edit)(RequestFields&);
    const char* message;
  };
  const Row rows[] = {
      {"negative budget", [](RequestFields& x) { x.max_monthly_usd = "-5"; },
       "--max-monthly-usd must be a positive amount like 1500 or 1500.50, got '-5'"},
      {"zero budget", [](RequestFields& x) { x.max_monthly_usd = "0"; },
       "--max-monthly-usd must be a positive amount like 1500 or 1500.50, got '0'"},
      {"text budget", [](RequestFields& x) { x.max_monthly_usd = "lots"; },
       "--max-monthly-usd: amount 'lots' must be a plain decimal number like 12.50 (like 1500 or "
       "1500.50)"},
      {"sub-cent budget", [](RequestFields& x) { x.max_monthly_usd = "10.001"; },
       "--max-monthly-usd: amount '10.001' has more than 2 digits after the decimal point (like "
       "1500 or 1500.50)"},
      {"top 0", [](RequestFields& x) { x.top = 0; },
       "--top must be between 1 and 100 (configurations listed), got 0"},
      {"gpus", [](RequestFields& x) { x.gpus = 2; },
       "fit picks the number of GPUs itself; drop --gpus (use --gpu NAME to pick a card, or gpuhub "
       "size --gpus N to size a fixed set)"},
      {"region", [](RequestFields& x) { x.region = "mars"; },
       "unknown region 'mars' (regions: DFW-1, IAD-1, PDX-1)"},
      {"fp8 on A100", [](RequestFields& x) { x.gpu = "A100 SXM"; },
       "A100 SXM has no FP8 support: FP8 weights need one of MI300X, B200, H200 SXM, H100 SXM, "
       "H100 PCIe, L40S, RTX 6000 Ada, RTX 5090, RTX 4090, L4 (or use --precision bf16 or int4 "
       "and --kv-precision fp16)"},
  };
  for (const auto& row : rows) {
    RequestFields x = Fields("70b", "infer");
    x.precision = "fp8";
    row.edit(x);
    auto bad = ResolveFitRequest(x, Cli(), Fleet());
    ASSERT_FALSE(bad.ok()) << row.what;
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << row.what;
    EXPECT_EQ(bad.status().message(), row.message) << row.what;
  }
}

TEST(Request, AQuantizedVariantAsksForItsPrecisionUntilGiven) {
  auto has_hint = [](const SizeRequest& r) {
    for (const auto& n : r.notes) {
      if (n.find("give --precision int4 or int8") != std::string::npos) return true;
    }
    return false;
  };
  RequestFields f = Fields("Qwen/Qwen2.5-72B-Instruct-GPTQ-Int4", "infer");
  auto bf16 = ResolveSizeRequest(f, Api());
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->model.id, "Qwen/Qwen2.5-72B");
  EXPECT_TRUE(has_hint(*bf16));
  f.precision = "int4";
  auto int4 = ResolveSizeRequest(f, Api());
  ASSERT_TRUE(int4.ok());
  EXPECT_FALSE(has_hint(*int4));
  // A plain tuned variant never asks.
  auto tuned = ResolveSizeRequest(Fields("Qwen/Qwen2.5-7B-Instruct", "infer"), Api());
  ASSERT_TRUE(tuned.ok());
  EXPECT_FALSE(has_hint(*tuned));
}

TEST(Request, AnUnknownModelThroughTheApiDoesNotTalkAboutPaths) {
  auto api = ResolveSizeRequest(Fields("acme/NoSuchModel-9B", "infer"), Api());
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(api.status().message().find("path"), std::string::npos) << api.status().message();
  EXPECT_NE(api.status().message().find("GET /v1/models"), std::string::npos);
  auto cli = ResolveSizeRequest(Fields("acme/NoSuchModel-9B", "infer"), Cli());
  ASSERT_FALSE(cli.ok());
  EXPECT_NE(cli.status().message().find("not an existing path"), std::string::npos);
}

TEST(Request, ModelsByPresetBundledIdPathAndPastedConfig) {
  auto bundled = ResolveModel("meta-llama/Llama-3.1-8B", Api());
  ASSERT_TRUE(bundled.ok()) << bundled.status().ToString();
  EXPECT_EQ(bundled->total_params, 8'030'261'248);
  // A logical source through the API, never the server's file path.
  EXPECT_EQ(bundled->source, "bundled");
  auto by_name = ResolveModel("Llama-3.1-8B", Api());
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->total_params, 8'030'261'248);
  EXPECT_EQ(by_name->source, "bundled");
  EXPECT_EQ(ResolveModel("70b", Api())->source, "preset");

  std::string path = std::string(GPUHUB_SOURCE_DIR) + "/data/models/meta-llama--Llama-3.1-8B.json";
  auto from_path = ResolveModel(path, Cli());
  ASSERT_TRUE(from_path.ok()) << from_path.status().ToString();
  EXPECT_EQ(from_path->total_params, 8'030'261'248);
  EXPECT_EQ(from_path->source, path);  // the CLI's own file: its path

  // The API never reads a path it is given: absolute, relative with dots, deeper than org/name...
  for (const std::string& spec :
       {path, std::string("/etc/passwd"), std::string("../data/x.json"), std::string("a/b/c")}) {
    auto refused = ResolveModel(spec, Api());
    ASSERT_FALSE(refused.ok()) << spec;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(refused.status().message().find("paths are not accepted here"), std::string::npos);
  }
  // ... or shaped like an id but naming a file where the server runs.
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(GPUHUB_SOURCE_DIR);
  for (const std::string& spec : {std::string("data/catalog.toml"), std::string("data/models")}) {
    auto refused = ResolveModel(spec, Api());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << spec;
  }
  std::filesystem::current_path(cwd);

  RequestFields pasted;
  pasted.workload = "infer";
  pasted.config_json = R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
      "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256,
      "tie_word_embeddings": false, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05})";
  auto r = ResolveSizeRequest(pasted, Api());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.total_params, 8'030'261'248);
  EXPECT_EQ(r->model.source, "pasted config.json");

  pasted.config_json = R"({"model_type": "llama"})";
  auto bad = ResolveSizeRequest(pasted, Api());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuhub::fit
