#include "fit/report_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuhub::fit {
namespace {

using Json = nlohmann::json;

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet =
      *catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
  return fleet;
}

std::string DataDir() { return std::string(GPUHUB_SOURCE_DIR) + "/data"; }

Json FitJson(const std::string& body) {
  auto out = HandleFitJson(body, DataDir(), Fleet());
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? Json::parse(*out) : Json();
}

const char* const kConfigKeys[] = {"gpu",
                                   "count",
                                   "configuration",
                                   "monthly_usd",
                                   "weekly_usd",
                                   "hourly_usd",
                                   "headroom_gb_per_card",
                                   "tight",
                                   "decode_ceiling_tok_s",
                                   "per_card_gb",
                                   "vram_gb",
                                   "discount_percent",
                                   "list_monthly_usd",
                                   "weekly_derived",
                                   "fp8",
                                   "stack",
                                   "interconnect",
                                   "link",
                                   "regions",
                                   "free_now",
                                   "in_stock",
                                   "exact"};

void ExpectConfigShape(const Json& c) {
  ASSERT_TRUE(c.is_object()) << c.dump();
  for (const char* key : kConfigKeys) EXPECT_TRUE(c.contains(key)) << key << " in " << c.dump();
}

// spec §6 examples through the API entry point: the same JSON the CLI prints.
TEST(FitJson, SpecExamples) {
  Json a = FitJson(R"({"model": "7b", "workload": "infer"})");
  EXPECT_NEAR(a["required_gb"].get<double>(), 17.07, 0.005);
  ExpectConfigShape(a["best"]);
  EXPECT_EQ(a["best"]["gpu"], "RTX A5000");
  EXPECT_EQ(a["best"]["count"], 1);
  EXPECT_EQ(a["best"]["monthly_usd"], 190.0);
  EXPECT_EQ(a["best"]["weekly_usd"], 55.0);
  EXPECT_NEAR(a["best"]["hourly_usd"].get<double>(), 0.263889, 1e-9);
  EXPECT_EQ(a["best"]["exact"]["monthly_usd"], "190.000000");
  EXPECT_EQ(a["best"]["tight"], false);
  EXPECT_NEAR(a["best"]["decode_ceiling_tok_s"].get<double>(), 54.86, 0.005);
  EXPECT_EQ(a["alternatives"].size(), 4u);  // top 5 by default
  EXPECT_FALSE(a.contains("reason"));
  EXPECT_FALSE(a.contains("excluded"));

  Json b = FitJson(R"({"model": "70b", "workload": "infer", "precision": "fp8"})");
  EXPECT_EQ(b["best"]["gpu"], "H100 PCIe");
  EXPECT_EQ(b["best"]["monthly_usd"], 1490.0);
  EXPECT_EQ(b["best"]["weekly_derived"], true);
  EXPECT_NEAR(b["best"]["headroom_gb_per_card"].get<double>(), 5.315645, 1e-6);
  EXPECT_EQ(b["needs_fp8"], true);

  Json c = FitJson(R"({"model": "13b", "workload": "full", "why_not": true, "top": 2,
                       "explain": true})");
  EXPECT_NEAR(c["required_gb"].get<double>(), 239.2, 1e-9);
  EXPECT_EQ(c["best"]["gpu"], "A100 SXM");
  EXPECT_EQ(c["best"]["count"], 4);
  EXPECT_EQ(c["best"]["monthly_usd"], 3643.2);
  EXPECT_EQ(c["best"]["exact"]["monthly_usd"], "3643.200000");
  EXPECT_EQ(c["best"]["discount_percent"], 8.0);
  EXPECT_TRUE(c["best"]["decode_ceiling_tok_s"].is_null());  // training
  EXPECT_EQ(c["multi_card"], true);
  EXPECT_EQ(c["alternatives"].size(), 1u);
  EXPECT_EQ(c["alternatives"][0]["configuration"], "2x H200 SXM");
  ASSERT_TRUE(c["best"]["explain"].is_array());
  EXPECT_EQ(c["best"]["explain"].back(),
            "price: $990.00/month x 4 cards x (1 - 8%) = $3,643.20/month; weekly $1,030.40; "
            "hourly = monthly / 720 = $5.06");
  ASSERT_TRUE(c["excluded"].is_array());
  EXPECT_EQ(c["excluded"][0]["configuration"], "MI300X");
  EXPECT_EQ(c["excluded"][0]["kind"], "does_not_fit");
  EXPECT_EQ(c["excluded"][0]["reason"], "needs 239.20 GB, MI300X has 192 GB");
}

TEST(FitJson, NothingFitsHasNullBestAndReason) {
  Json j = FitJson(R"({"model": "405b", "workload": "full"})");
  EXPECT_TRUE(j["best"].is_null());
  ASSERT_TRUE(j["reason"].is_string());
  EXPECT_EQ(j["reason"].get<std::string>().substr(0, 31), "no configuration holds this job");
  EXPECT_TRUE(j["alternatives"].empty());
}

TEST(FitJson, FiltersEchoed) {
  Json j = FitJson(R"({"model": "70b", "workload": "infer", "precision": "fp8",
                       "max_monthly_usd": "1700.5", "region": "dfw-1", "cuda_only": true,
                       "in_stock": true, "gpu": "h100 sxm"})");
  EXPECT_EQ(j["filters"]["max_monthly_usd"], 1700.5);
  EXPECT_EQ(j["filters"]["region"], "DFW-1");
  EXPECT_EQ(j["filters"]["gpu"], "H100 SXM");
  EXPECT_EQ(j["best"]["gpu"], "H100 SXM");
  // A JSON number works for the budget too.
  Json n = FitJson(R"({"model": "70b", "workload": "infer", "precision": "fp8",
                       "max_monthly_usd": 1500})");
  EXPECT_EQ(n["best"]["gpu"], "H100 PCIe");
}

TEST(SizeJson, ComponentsAndTotals) {
  auto out = HandleSizeJson(R"({"model": "70b", "workload": "infer", "precision": "fp8",
                                "explain": true})",
                            DataDir());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  Json j = Json::parse(*out);
  EXPECT_NEAR(j["total_gb"].get<double>(), 74.684355, 1e-6);
  ASSERT_EQ(j["components"].size(), 3u);
  EXPECT_EQ(j["components"][0]["name"], "weights");
  EXPECT_EQ(j["components"][0]["bytes"], 70e9);
  EXPECT_EQ(j["components"][0]["gb"], 70.0);
  EXPECT_EQ(j["components"][0]["formula"], "70e9 params x 1.0 B/param (fp8) = 70.00 GB");
  EXPECT_EQ(j["components"][1]["name"], "kv_cache");
  EXPECT_EQ(j["components"][1]["bytes"], 2.0 * 80 * 8 * 128 * 2 * 8192);
  EXPECT_EQ(j["components"][2]["name"], "runtime_overhead");
  EXPECT_EQ(j["workload"]["precision"], "fp8");
  EXPECT_EQ(j["workload"]["context"], 8192);
  EXPECT_EQ(j["model"]["id"], "70b");

  auto sharded =
      HandleSizeJson(R"({"model": "13b", "workload": "full", "gpus": 4, "zero": 3})", DataDir());
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  Json s = Json::parse(*sharded);
  EXPECT_NEAR(s["per_gpu_gb"].get<double>(), 59.8, 1e-9);
  EXPECT_NEAR(s["total_gb"].get<double>(), 239.2, 1e-9);
  EXPECT_EQ(s["gpus"], 4);
}

struct BadBody {
  const char* body;
  RequestKind kind;
  const char* message;
};

TEST(RequestJson, BadBodiesNameTheField) {
  const BadBody rows[] = {
      {"[1, 2]", RequestKind::kFit, "request body must be a JSON object"},
      {"{\"model\": ", RequestKind::kFit, "request body is not valid JSON"},
      {"", RequestKind::kSize, "request body is not valid JSON"},
      {R"({"model": "7b", "workload": "infer", "contxt": 5})", RequestKind::kSize,
       "unknown field 'contxt'; size takes: model, config, workload, precision, kv_precision, "
       "profile, context, batch, seq, prefill_chunk, grad_accum, rank, gpus, zero, tp, pp, cp, dp, "
       "vp, "
       "recompute, fp8_training, engine, stack, offload_optimizer, optimizer, "
       "lora_targets, lora_dropout, pure_bf16, fused_kernels, chunked_loss, compiled_loss, "
       "offload_activations, offload_params, old_transformers, unchunked_nf4_quantization, "
       "foreach_adamw, "
       "optimizer_in_backward, flash_attention, gradient_checkpointing, double_quant, explain"},
      {R"({"kv-precision": "fp8"})", RequestKind::kFit,
       "unknown field 'kv-precision' (did you mean 'kv_precision'?); fit takes: model, config, "
       "workload, precision, kv_precision, profile, context, batch, seq, prefill_chunk, "
       "grad_accum, rank, gpus, zero, "
       "tp, pp, cp, dp, vp, recompute, fp8_training, engine, stack, offload_optimizer, optimizer, "
       "lora_targets, lora_dropout, pure_bf16, fused_kernels, "
       "chunked_loss, compiled_loss, offload_activations, offload_params, old_transformers, "
       "unchunked_nf4_quantization, foreach_adamw, optimizer_in_backward, flash_attention, "
       "gradient_checkpointing, double_quant, explain, cuda_only, region, in_stock, "
       "max_monthly_usd, top, why_not, gpu"},
      {R"({"region": "DFW-1"})", RequestKind::kSize, "field 'region' applies to fit, not size"},
      {R"({"context": "8192"})", RequestKind::kFit,
       "field 'context' must be a whole number, got a string"},
      {R"({"context": 8192.5})", RequestKind::kFit,
       "field 'context' must be a whole number, got a number"},
      {R"({"context": 18446744073709551615})", RequestKind::kFit,
       "field 'context' must be a whole number within range, got an integer"},
      {R"({"model": 70})", RequestKind::kFit, "field 'model' must be a string, got an integer"},
      {R"({"cuda_only": "yes"})", RequestKind::kFit,
       "field 'cuda_only' must be true or false, got a string"},
      {R"({"config": "llama"})", RequestKind::kFit,
       "field 'config' must be a JSON object (the contents of a config.json), got a string"},
      {R"({"model": null})", RequestKind::kFit,
       "field 'model' must be present with a value (omit it instead of null), got null"},
      {R"({"max_monthly_usd": true})", RequestKind::kFit,
       "field 'max_monthly_usd' must be a decimal string like \"1500.50\" or a number, got a "
       "boolean"},
  };
  for (const auto& row : rows) {
    auto r = ParseRequestJson(row.body, row.kind);
    ASSERT_FALSE(r.ok()) << row.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), row.message) << row.body;
  }
  std::string deep(100, '[');
  deep += std::string(100, ']');
  auto d = ParseRequestJson("{\"config\": " + deep + "}", RequestKind::kFit);
  EXPECT_EQ(d.status().message(), "request body is nested deeper than 32 levels");
  std::string huge = "{\"model\": \"" + std::string(2 * 1024 * 1024, 'x') + "\"}";
  EXPECT_EQ(ParseRequestJson(huge, RequestKind::kFit).status().message(),
            "request body is larger than 1048576 bytes");
}

// Flat bodies are read off the parser's events, the others through the tree: both give what the
// tree always gave. A repeated field keeps its last value (whatever the first one was), a nested
// "config" and non-object roots answer as before, numbers keep their JSON type.
TEST(RequestJson, FlatAndNestedBodiesReadAlike) {
  auto parse = [](const std::string& body) { return ParseRequestJson(body, RequestKind::kFit); };
  auto repeated = parse(R"({"model": "7b", "top": "five", "model": "70b", "top": 3})");
  ASSERT_TRUE(repeated.ok()) << repeated.status().ToString();
  EXPECT_EQ(repeated->model, "70b");
  EXPECT_EQ(repeated->top, 3);
  auto flat = parse(R"({"model":"70b","context":8192,"explain":true,"max_monthly_usd":1500.5,
                        "in_stock":false,"region":"DFW-1","kv_precision":"fp8"})");
  ASSERT_TRUE(flat.ok()) << flat.status().ToString();
  EXPECT_EQ(flat->model, "70b");
  EXPECT_EQ(flat->context, 8192);
  EXPECT_TRUE(flat->explain);
  EXPECT_EQ(flat->max_monthly_usd, "1500.5");
  EXPECT_FALSE(flat->in_stock);
  EXPECT_EQ(flat->region, "DFW-1");
  EXPECT_EQ(flat->kv_precision, "fp8");
  auto nested =
      parse(R"({"config": {"hidden_size": 4096, "list": [1, 2.5]}, "workload": "infer"})");
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_EQ(nested->config_json, R"({"hidden_size":4096,"list":[1,2.5]})");
  EXPECT_EQ(nested->workload, "infer");
  auto empty = parse("{}");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->model.has_value());
  struct Bad {
    std::string body;
    const char* message;
  };
  const Bad kBad[] = {
      {"", "request body is not valid JSON"},
      {R"({"model": "70b")", "request body is not valid JSON"},
      {R"({"model": "70b"} x)", "request body is not valid JSON"},
      {"[1, 2]", "request body must be a JSON object"},
      {"\"70b\"", "request body must be a JSON object"},
      {"7", "request body must be a JSON object"},
      {std::string(40, '[') + std::string(40, ']'), "request body is nested deeper than 32 levels"},
      {R"({"model": null})",
       "field 'model' must be present with a value (omit it instead of null), "
       "got null"},
      {R"({"context": 18446744073709551615})",
       "field 'context' must be a whole number within "
       "range, got an integer"},
      {R"({"context": 8192.5})", "field 'context' must be a whole number, got a number"},
      {R"({"top": [5]})", "field 'top' must be a whole number, got an array"},
      {R"({"model": "70b", "context": -1, "top": "x"})",
       "field 'top' must be a whole number, got "
       "a string"},
  };
  for (const Bad& b : kBad) {
    auto r = parse(b.body);
    ASSERT_FALSE(r.ok()) << b.body;
    EXPECT_EQ(r.status().message(), b.message) << b.body;
  }
  // With a nested value (the tree path) the first error in the body's order is answered, not
  // the first in sorted order; a repeated name keeps its first place and its last value.
  auto ordered = parse(R"({"config": {"b": 1, "a": [2]}, "zzz": 1, "top": "x", "aaa": 2})");
  ASSERT_FALSE(ordered.ok());
  EXPECT_EQ(ordered.status().field(), "zzz");
  auto last = parse(R"({"config": {}, "top": "x", "bogus": 1, "top": 3})");
  ASSERT_FALSE(last.ok());
  EXPECT_EQ(last.status().field(), "bogus");
  auto first = parse(R"({"config": {}, "top": 3, "bogus": 1, "top": "x"})");
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().field(), "top");
  auto kept = parse(R"({"config": {"z": 1, "a": {"y": 2, "b": 3}}, "top": 2, "top": 4})");
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(kept->top, 4);
  EXPECT_EQ(kept->config_json, R"({"a":{"b":3,"y":2},"z":1})");
  // More members than there are fields: the first unknown one is named, as always.
  std::string many = R"({"top": 3)";
  for (int i = 0; i < 200; ++i) many += ", \"x" + std::to_string(i) + "\": 1";
  auto r = parse(many + "}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "x0");
}

TEST(RequestJson, ResolveErrorsComeThrough) {
  struct Row {
    const char* body;
    StatusCode code;
    const char* message;
  };
  const Row rows[] = {
      {R"({"model": "70b", "workload": "infer", "context": 0})", StatusCode::kInvalidArgument,
       "context must be between 1 and 10000000 tokens, got 0"},
      {R"({"model": "70b", "workload": "infer", "precision": "fp8", "gpu": "A40"})",
       StatusCode::kInvalidArgument, nullptr},
      {R"({"model": "/etc/passwd", "workload": "infer"})", StatusCode::kInvalidArgument, nullptr},
      {R"({"model": "nope-7b", "workload": "infer"})", StatusCode::kNotFound, nullptr},
      {R"({"model": "70b", "workload": "infer", "max_monthly_usd": -5})",
       StatusCode::kInvalidArgument,
       "--max-monthly-usd must be a positive amount like 1500 or 1500.50, got '-5'"},
  };
  for (const auto& row : rows) {
    auto r = HandleFitJson(row.body, DataDir(), Fleet());
    ASSERT_FALSE(r.ok()) << row.body;
    EXPECT_EQ(r.status().code(), row.code) << row.body << " " << r.status().ToString();
    if (row.message != nullptr) {
      EXPECT_EQ(r.status().message(), row.message);
    }
  }
}

// The API's error body names the request field (Status::field()), so that a form can show the
// message beside it.
TEST(RequestJson, ErrorsNameTheirField) {
  struct Row {
    const char* body;
    const char* field;
  };
  const Row rows[] = {
      {R"({"model": "70b", "workload": "infer", "contxt": 5})", "contxt"},
      {R"({"model": "70b", "workload": "infer", "context": "8192"})", "context"},
      {R"({"model": "70b", "workload": "infer", "context": 0})", "context"},
      {R"({"model": "70b", "workload": "infer", "batch": 0})", "batch"},
      {R"({"model": "70b", "workload": "lora", "rank": 0})", "rank"},
      {R"({"model": "70b", "workload": "full", "context": 4096})", "context"},
      {R"({"model": "70b", "workload": "infer", "seq": 4096})", "seq"},
      {R"({"model": "70b", "workload": "infer", "precision": "fp6"})", "precision"},
      {R"({"model": "70b", "workload": "infer", "kv_precision": "int4"})", "kv_precision"},
      {R"({"model": "70b", "workload": "full", "precision": "fp8"})", "precision"},
      {R"({"model": "70b", "workload": "train"})", "workload"},
      {R"({"model": "70b"})", "workload"},
      {R"({"workload": "infer"})", "model"},
      {R"({"model": "nope-7b", "workload": "infer"})", "model"},
      {R"({"config": {"a": 1}, "workload": "infer"})", "config"},
      {R"({"model": "70b", "workload": "infer", "region": "LHR-1"})", "region"},
      {R"({"model": "70b", "workload": "infer", "max_monthly_usd": "-5"})", "max_monthly_usd"},
      {R"({"model": "70b", "workload": "infer", "gpus": 2})", "gpus"},
      {R"({"model": "70b", "workload": "infer", "optimizer": "sgd"})", "optimizer"},
      {R"({"model": "7b", "workload": "full", "flash_attention": false})", "flash_attention"},
  };
  for (const auto& row : rows) {
    auto r = HandleFitJson(row.body, DataDir(), Fleet());
    ASSERT_FALSE(r.ok()) << row.body;
    EXPECT_EQ(r.status().field(), row.field) << row.body << " " << r.status().ToString();
  }
  auto size = HandleSizeJson(R"({"model": "70b", "workload": "infer", "gpus": 0})", DataDir());
  EXPECT_EQ(size.status().field(), "gpus") << size.status().ToString();
  auto zero = HandleSizeJson(R"({"model": "70b", "workload": "infer", "zero": 3})", DataDir());
  EXPECT_EQ(zero.status().field(), "zero") << zero.status().ToString();
}

TEST(GuideJson, KeysAndCells) {
  auto guide = BuildGuide(Fleet());
  ASSERT_TRUE(guide.ok());
  Json j = Json::parse(GuideJson(*guide));
  for (const char* key : {"kv_cache", "inference", "training", "cheapest", "cost"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_NEAR(j["kv_cache"]["70b"]["128k"].get<double>(), 42.949673, 1e-6);
  EXPECT_EQ(j["kv_cache"]["70b"]["per_token_bytes"], 327680.0);
  EXPECT_NEAR(j["kv_cache"]["70b"]["per_token_mb"].get<double>(), 0.32768, 1e-9);
  EXPECT_NEAR(j["inference"]["70b"]["fp8"].get<double>(), 74.684355, 1e-6);
  EXPECT_NEAR(j["inference"]["7b"]["bf16"].get<double>(), 17.073742, 1e-6);
  EXPECT_EQ(j["training"]["7b"]["full"], 112.0);
  EXPECT_NEAR(j["training"]["7b"]["full_with_allowance"].get<double>(), 128.8, 1e-9);
  ExpectConfigShape(j["cheapest"]["70b"]["fp8"]);
  EXPECT_EQ(j["cheapest"]["70b"]["fp8"]["gpu"], "H100 PCIe");
  EXPECT_EQ(j["cheapest"]["70b"]["fp8"]["monthly_usd"], 1490.0);
  EXPECT_EQ(j["cheapest"]["13b"]["full"]["configuration"], "4x A100 SXM");
  EXPECT_TRUE(j["cheapest"]["405b"]["full"].is_null());
  EXPECT_TRUE(j["cheapest_reasons"]["405b"]["full"].is_string());
  ASSERT_EQ(j["cost"].size(), 15u);
  EXPECT_EQ(j["cost"][0]["gpu"], "MI300X");
  EXPECT_NEAR(j["cost"][0]["usd_per_gb_month"].get<double>(), 8.2813, 1e-4);
  EXPECT_NEAR(j["cost"][0]["break_even_hours"].get<double>(), 382.2, 1e-9);  // 1590 / 4.16
  EXPECT_TRUE(j["cost"][14]["break_even_hours"].is_null());
}

TEST(CatalogJson, NotPublishedIsNull) {
  Json j = Json::parse(CatalogJson(Fleet()));
  EXPECT_EQ(j["term"].size(), 15u);
  EXPECT_EQ(j["term"][1]["name"], "B200");
  EXPECT_EQ(j["term"][1]["counts"], Json::array({2, 4, 8}));
  EXPECT_EQ(j["term"][1]["weekly_derived"], true);
  EXPECT_EQ(j["term"][1]["exact"]["weekly_usd"], "1096.310000");
  EXPECT_TRUE(j["term"][11]["link_gb_per_s"].is_null());  // RTX 4090
  EXPECT_EQ(j["spot"][0]["name"], "B300");
  EXPECT_TRUE(j["spot"][0]["bandwidth_gb_per_s"].is_null());
  EXPECT_EQ(j["spot"][0]["bf16_dense_tflops"], 2250);  // from the HGX B300 datasheet
  EXPECT_NE(j["spot"][0]["tflops_source"].get<std::string>().find("HGX B300"), std::string::npos);
  EXPECT_TRUE(j["spot"][7]["fp8_dense_tflops"].is_null());  // A100 SXM: no FP8
  EXPECT_EQ(j["term"][3]["bf16_dense_tflops"], 989);        // H100 SXM
  EXPECT_EQ(j["term"][3]["fp8_dense_tflops"], 1979);
  EXPECT_EQ(j["term"][3]["architecture"], "hopper");
  EXPECT_TRUE(j["term"][5]["fp8_dense_tflops"].is_null());  // A100 SXM
  EXPECT_EQ(j["spot"][0]["opening_ask_usd_per_hour"], 8.99);
  EXPECT_EQ(j["spot"][0]["largest_full_train_b_8gpu"], 115);
  EXPECT_EQ(j["multi_card_discounts"][2]["percent"], 10.0);
  EXPECT_EQ(j["weekly_ratio"]["published_weekly_sum_usd"], 2373.0);
  EXPECT_EQ(j["weekly_ratio"]["same_cards_monthly_sum_usd"], 8420.0);
  EXPECT_TRUE(j["term"][3]["break_even_hours_vs_spot"] == 586.8);  // 1690 / 2.88
  EXPECT_FALSE(j["term"][3].contains("break_even_hours_vs_rate"));

  Json rated = Json::parse(CatalogJson(Fleet(), 2'500'000));  // $2.50 per GPU-hour
  EXPECT_EQ(rated["hourly_rate_usd"], 2.5);
  EXPECT_EQ(rated["term"][3]["break_even_hours_vs_rate"], 676.0);  // 1690 / 2.5
  EXPECT_EQ(rated["term"][14]["break_even_hours_vs_rate"], 76.0);  // 190 / 2.5
}

}  // namespace
}  // namespace gpuhub::fit
