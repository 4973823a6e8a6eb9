// The size and fit reports written straight to text (report_writer.cc) against the nlohmann path
// they replaced: the tree below is the code that answered POST /v1/size and POST /v1/fit before,
// dumped by nlohmann itself. Byte for byte, over presets and bundled models (dense, MoE, sliding
// window), every workload, both profiles, every filter, --explain formulas, --why-not exclusions,
// multi-card sets, nothing fitting, an inline config.json, and the error answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "fit/json_parts.h"
#include "fit/report_json.h"

namespace gpuhub::fit {
namespace {

using namespace json_parts;  // NOLINT: the reference is built from the same parts as before

std::string Nlohmann(const Json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

// POST /v1/size's report as it was built before report_writer.cc.
std::string TreeSizeReport(const SizeRequest& request, const sizing::MemoryEstimate& e) {
  Json j;
  j["model"] = ModelJson(request.model);
  j["workload"] = WorkloadJson(request.workload, e);
  j["total_gb"] = Gb(e.total_bytes);
  j["total_bytes"] = e.total_bytes;
  j["per_gpu_gb"] = Gb(e.per_gpu_bytes);
  j["gpus"] = e.gpus;
  j["components"] = ComponentsJson(e);
  j["outside_allocator"] = OutsideAllocatorJson(e);
  j["card_gb"] = Gb(e.card_bytes());
  j["host_gb"] = Gb(e.host_bytes);
  if (e.method == sizing::Method::kInference) {
    j["decode_weight_bytes_per_token"] = e.decode_weight_bytes;
  }
  j["notes"] = NotesJson(request.model, request.notes, e);
  return Nlohmann(j);
}

// POST /v1/fit's report as it was built before report_writer.cc.
std::string TreeFitReport(const FitRequest& request, const FitResult& result) {
  Json j;
  j["model"] = ModelJson(request.model);
  j["workload"] = WorkloadJson(request.workload, result.required);
  Json filters;
  filters["cuda_only"] = request.filters.cuda_only;
  filters["region"] = OrNull(request.filters.region);
  filters["in_stock"] = request.filters.in_stock;
  filters["max_monthly_usd"] = OrNull(request.filters.max_monthly_micros, Usd);
  filters["gpu"] = OrNull(request.filters.gpu);
  filters["top"] = request.top;
  j["filters"] = std::move(filters);
  j["required_gb"] = Gb(result.required.card_bytes());
  j["required_bytes"] = result.required.card_bytes();
  j["components"] = ComponentsJson(result.required);
  j["outside_allocator"] = OutsideAllocatorJson(result.required);
  j["host_gb"] = Gb(result.required.host_bytes);
  j["needs_fp8"] = result.needs_fp8;
  j["multi_card"] = result.considered_sets;
  if (result.ranked.empty()) {
    j["best"] = nullptr;
    j["reason"] = result.reason;
    if (result.multi_node) {
      const MultiNodeFit& m = *result.multi_node;
      j["multi_node"] = {{"gpu", m.gpu->name},
                         {"nodes", m.nodes},
                         {"gpus_per_node", kNodeGpus},
                         {"configuration", MultiNodeName(m)},
                         {"per_card_gb", Gb(m.per_card_bytes)},
                         {"monthly_usd", Usd(m.monthly_micros)},
                         {"indicative", true},
                         {"quote", {{"needed", true},
                                    {"nodes", m.nodes},
                                    {"request", "POST /v1/quote-requests"}}}};
    }
  } else {
    j["best"] = ConfigJson(result.ranked.front(), request.explain);
  }
  Json alternatives = Json::array();
  for (std::size_t i = 1; i < result.ranked.size() && static_cast<int>(i) < request.top; ++i) {
    alternatives.push_back(ConfigJson(result.ranked[i], request.explain));
  }
  j["alternatives"] = std::move(alternatives);
  if (request.why_not) {
    Json excluded = Json::array();
    for (const auto& x : result.excluded) {
      excluded.push_back({{"gpu", x.gpu},
                          {"count", x.count},
                          {"configuration", ConfigurationName(x.gpu, x.count)},
                          {"kind", ExclusionName(x.kind)},
                          {"reason", x.reason}});
    }
    j["excluded"] = std::move(excluded);
  }
  j["notes"] = NotesJson(request.model, request.notes, result.required);
  return Nlohmann(j);
}

const catalog::Catalog& Fleet() {
  static const catalog::Catalog fleet =
      *catalog::LoadCatalog(std::string(GPUHUB_SOURCE_DIR) + "/data/catalog.toml");
  return fleet;
}

RequestContext Context() { return RequestContext{std::string(GPUHUB_SOURCE_DIR) + "/data", false}; }

// Request bodies that reach the report; each is sent to fit, and (without the fit-only fields)
// to size.
struct Case {
  const char* body;
  const char* fit_only;        // appended for fit: filters, top, why_not
  const char* size_only = "";  // appended for size: gpus (fit picks the count itself)
};
const Case kCases[] = {
    {R"("model": "70b", "workload": "infer", "precision": "fp8", "context": 8192)", ""},
    {R"("model": "7b", "workload": "infer")", R"(, "explain": true, "why_not": true)"},
    {R"("model": "13b", "workload": "full", "explain": true)", R"(, "why_not": true, "top": 2)"},
    {R"("model": "70b", "workload": "qlora", "rank": 64, "seq": 4096)", R"(, "top": 10)"},
    {R"("model": "34b", "workload": "lora", "batch": 4)",
     R"(, "region": "DFW-1", "cuda_only": true, "in_stock": true, "max_monthly_usd": "1500.50")"},
    {R"("model": "405b", "workload": "infer", "precision": "int4", "explain": true)",
     R"(, "max_monthly_usd": 99999.5, "why_not": true)"},
    {R"("model": "405b", "workload": "full", "offload_optimizer": true)",
     R"(, "max_monthly_usd": "10", "why_not": true)",
     R"(, "gpus": 8, "zero": 3)"},  // nothing fits: best null, reason
    {R"("model": "7b", "workload": "infer", "batch": 32, "context": 32768)",
     R"(, "gpu": "H100 SXM", "top": 1, "explain": true)"},
    {R"("model": "deepseek-ai/DeepSeek-V3", "workload": "infer", "precision": "fp8")",
     R"(, "why_not": true, "explain": true)"},  // MoE, multi-card sets
    {R"("model": "google/gemma-2-9b", "workload": "infer", "profile": "detailed",
        "prefill_chunk": 512, "old_transformers": true, "kv_precision": "fp8", "context": 8192)",
     ""},
    {R"("model": "meta-llama/Llama-3.1-8B", "workload": "lora", "profile": "detailed",
        "lora_targets": "all-linear", "lora_dropout": true, "optimizer": "adam8bit",
        "grad_accum": 4, "chunked_loss": true, "explain": true)",
     R"(, "why_not": true)"},
    {R"("model": "Qwen/Qwen3-30B-A3B", "workload": "qlora", "profile": "detailed",
        "double_quant": false, "offload_activations": true)",
     ""},
    {R"("model": "meta-llama/Llama-3.1-70B", "workload": "full", "profile": "detailed",
        "offload_params": true, "optimizer_in_backward": true, "pure_bf16": true, "fused_kernels": true,
        "gradient_checkpointing": false, "flash_attention": false, "explain": true)",
     R"(, "why_not": true, "top": 3)", R"(, "gpus": 8, "zero": 3)"},
    {R"("config": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "vocab_size": 128256}, "workload": "qlora", "explain": true)",
     R"(, "region": "IAD-1")"},
};

TEST(ReportWriter, FitReportIsByteForByteTheNlohmannTree) {
  int nothing_fits = 0, with_explain = 0, with_excluded = 0, multi_card = 0;
  const ConfigTexts texts(Fleet());
  int from_texts = 0, configs = 0;
  for (const Case& c : kCases) {
    std::string body = std::string("{") + c.body + c.fit_only + "}";
    auto fields = ParseRequestJson(body, RequestKind::kFit);
    ASSERT_TRUE(fields.ok()) << body << ": " << fields.status().ToString();
    auto request = ResolveFitRequest(*fields, Context(), Fleet());
    ASSERT_TRUE(request.ok()) << body << ": " << request.status().ToString();
    auto result = Fit(Fleet(), request->model, request->workload, request->filters);
    ASSERT_TRUE(result.ok()) << body << ": " << result.status().ToString();
    std::string written = FitReportJson(*request, *result);
    ASSERT_EQ(written, TreeFitReport(*request, *result)) << body;
    // The API's answer is this report.
    auto answered = HandleFitJson(body, Context().data_dir, Fleet());
    ASSERT_TRUE(answered.ok()) << body;
    EXPECT_EQ(*answered, written) << body;
    // With the catalog's parts of each CONFIG kept as text (the server's way), the same bytes.
    EXPECT_EQ(FitReportJson(*request, *result, &texts), written) << body;
    auto served = HandleFitJson(body, Context().data_dir, Fleet(), &texts);
    ASSERT_TRUE(served.ok()) << body;
    EXPECT_EQ(*served, written) << body;
    int top = static_cast<int>(std::min<std::size_t>(result->ranked.size(),
                                                     static_cast<std::size_t>(request->top)));
    for (int i = 0; i < top; ++i) {
      configs += 1;
      from_texts += texts.Find(result->ranked[static_cast<std::size_t>(i)], 2, i == 0 ? 2 : 3) !=
                    nullptr;
    }
    nothing_fits += result->ranked.empty();
    with_explain += written.find("\"explain\": [") != std::string::npos;
    with_excluded += written.find("\"excluded\": [\n") != std::string::npos;
    multi_card += result->considered_sets;
  }
  // The cases cover what they claim to.
  EXPECT_GE(nothing_fits, 1);
  EXPECT_GE(with_explain, 4);
  EXPECT_GE(with_excluded, 4);
  EXPECT_GE(multi_card, 1);
  // Every listed configuration of these cases is a card and count of the catalog at its list
  // prices: all of them come from the texts.
  EXPECT_GT(configs, 20);
  EXPECT_EQ(from_texts, configs);
}

// A candidate whose figures are not those the texts were written from (another card object,
// another price, discount or stock) is written member by member, so the report stays the
// truth whatever Fit puts in it.
TEST(ReportWriter, ConfigTextsServeOnlyTheFiguresTheyWereWrittenFrom) {
  const ConfigTexts texts(Fleet());
  auto fields = ParseRequestJson(
      R"({"model": "70b", "workload": "infer", "precision": "fp8", "top": 3})", RequestKind::kFit);
  ASSERT_TRUE(fields.ok());
  auto request = ResolveFitRequest(*fields, Context(), Fleet());
  ASSERT_TRUE(request.ok());
  auto result = Fit(Fleet(), request->model, request->workload, request->filters);
  ASSERT_TRUE(result.ok());
  ASSERT_GE(result->ranked.size(), 2u);
  const Candidate& best = result->ranked.front();
  const ConfigTexts::Parts* parts = texts.Find(best, 2, 2);
  ASSERT_NE(parts, nullptr);
  EXPECT_EQ(parts->head.substr(0, 7), "\"gpu\": ");
  EXPECT_NE(parts->tail.find("\"exact\": {\n      \"monthly_usd\""), std::string::npos)
      << parts->tail;
  EXPECT_EQ(texts.Find(best, 2, 4), nullptr);   // a depth it was not written for
  EXPECT_EQ(texts.Find(best, -1, 2), nullptr);  // another indent

  catalog::Catalog copy = Fleet();
  std::vector<std::function<void(FitResult&)>> changes = {
      [](FitResult& r) { r.ranked.front().monthly_micros += 1; },
      [](FitResult& r) { r.ranked.front().weekly_micros -= 1; },
      [](FitResult& r) { r.ranked.front().hourly_micros += 10; },
      [](FitResult& r) { r.ranked.front().discount_ppm = 50000; },
      [](FitResult& r) { r.ranked.front().in_stock = !r.ranked.front().in_stock; },
      [](FitResult& r) { r.ranked.front().count = 3; },
      [&copy](FitResult& r) {  // the same card in another catalog, where its link differs
        for (catalog::TermGpu& g : copy.term) {
          if (g.name != r.ranked.front().gpu->name) continue;
          g.link = "changed";
          r.ranked.front().gpu = &g;
        }
      },
  };
  for (std::size_t i = 0; i < changes.size(); ++i) {
    FitResult changed = *result;
    changes[i](changed);
    EXPECT_EQ(texts.Find(changed.ranked.front(), 2, 2), nullptr) << "change " << i;
    std::string written = FitReportJson(*request, changed, &texts);
    EXPECT_EQ(written, FitReportJson(*request, changed)) << "change " << i;
    EXPECT_EQ(written, TreeFitReport(*request, changed)) << "change " << i;
    EXPECT_NE(written, FitReportJson(*request, *result, &texts)) << "change " << i;
  }
}

TEST(ReportWriter, SizeReportIsByteForByteTheNlohmannTree) {
  for (const Case& c : kCases) {
    std::string body = std::string("{") + c.body + c.size_only + "}";
    auto fields = ParseRequestJson(body, RequestKind::kSize);
    ASSERT_TRUE(fields.ok()) << body << ": " << fields.status().ToString();
    auto request = ResolveSizeRequest(*fields, Context());
    ASSERT_TRUE(request.ok()) << body << ": " << request.status().ToString();
    auto estimate = sizing::EstimateMemory(request->model, request->workload);
    ASSERT_TRUE(estimate.ok()) << body;
    std::string written = SizeReportJson(*request, *estimate);
    ASSERT_EQ(written, TreeSizeReport(*request, *estimate)) << body;
    auto answered = HandleSizeJson(body, Context().data_dir);
    ASSERT_TRUE(answered.ok()) << body;
    EXPECT_EQ(*answered, written) << body;
  }
}

// Bad requests never reach the report: the same errors as before, naming the field.
TEST(ReportWriter, ErrorsAreAnsweredBeforeAnyReport) {
  struct Bad {
    const char* body;
    StatusCode code;
    const char* field;
  };
  const Bad kBad[] = {
      {R"({"model": "70b", "workload": "infer", "precision": "fp9"})", StatusCode::kInvalidArgument,
       "precision"},
      {R"({"model": "70b", "top": "5"})", StatusCode::kInvalidArgument, "top"},
      {R"({"model": "70b", "gpu": "H100 SXM", "precision": "fp8", "workload": "infer",
          "region": "NOWHERE"})",
       StatusCode::kInvalidArgument, "region"},
      {R"({"model": "no-such-model", "workload": "infer"})", StatusCode::kNotFound, "model"},
  };
  for (const Bad& b : kBad) {
    auto out = HandleFitJson(b.body, Context().data_dir, Fleet());
    ASSERT_FALSE(out.ok()) << b.body;
    EXPECT_EQ(out.status().code(), b.code) << b.body << ": " << out.status().ToString();
    EXPECT_EQ(out.status().field(), b.field) << b.body << ": " << out.status().ToString();
  }
}

}  // namespace
}  // namespace gpuhub::fit
