// The size and fit reports (POST /v1/size, POST /v1/fit, `gpuhub size|fit --json`) written straight
// to text with JsonWriter instead of built as an nlohmann tree and dumped.
//
// Why: callgrind (bench/http/profile.sh) put building the fit report's tree at ~240k and dumping it
// at ~96k of POST /v1/fit's ~570k instructions per request (70b fp8: 4.5 KB out); the fit itself
// is ~77k. The bytes are exactly those of the tree the other reports still build from json_parts.h
// (same members, same order, same number formatting): report_json_test.cc compares both byte for
// byte over models, precisions, workloads, profiles, filters, --explain and --why-not.
#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/json_writer.h"
#include "fit/json_parts.h"
#include "fit/report_json.h"
#include "sizing/parallel.h"

namespace gpuhub::fit {
namespace {

using json_parts::Exact;
using json_parts::Gb;
using json_parts::RecomputeName;
using json_parts::Round;
using json_parts::Usd;
using sizing::Method;

// One value, written as nlohmann writes the same C++ value assigned to a json: bool, signed and
// unsigned integers, floating point, strings, lists of strings.
template <typename T>
void Put(JsonWriter& w, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    w.Bool(v);
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    w.Int(v);
  } else if constexpr (std::is_integral_v<T>) {
    w.Uint(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    w.Double(v);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    w.BeginArray();
    for (const auto& s : v) w.String(s);
    w.EndArray();
  } else {
    static_assert(std::is_convertible_v<T, std::string_view>, "not a JSON value");
    w.String(v);
  }
}

template <typename T>
void Field(JsonWriter& w, JsonKey key, const T& v) {
  w.Key(key);
  Put(w, v);
}

// A filter that is not set is null.
template <typename T>
void FieldOrNull(JsonWriter& w, JsonKey key, const std::optional<T>& v) {
  w.Key(key);
  if (v) {
    Put(w, *v);
  } else {
    w.Null();
  }
}

// json_parts::ModelJson
void WriteModel(JsonWriter& w, const sizing::ModelShape& m) {
  w.BeginObject();
  Field(w, "id", m.id);
  Field(w, "architecture", m.architecture);
  Field(w, "nominal", m.nominal);
  Field(w, "total_params", m.total_params);
  Field(w, "active_params", m.active_params);
  Field(w, "layers", m.layers);
  Field(w, "hidden", m.hidden);
  Field(w, "heads", m.heads);
  Field(w, "kv_heads", m.kv_heads);
  Field(w, "head_dim", m.head_dim);
  if (!m.source.empty()) Field(w, "source", m.source);
  if (m.is_moe()) {
    Field(w, "experts", m.experts);
    Field(w, "experts_per_token", m.experts_per_token);
  }
  w.EndObject();
}

// json_parts::WorkloadJson
void WriteWorkload(JsonWriter& w, const sizing::Workload& wl, const sizing::MemoryEstimate& e) {
  w.BeginObject();
  Field(w, "workload", sizing::MethodName(wl.method));
  Field(w, "precision", sizing::PrecisionName(wl.precision));
  if (wl.method == Method::kInference) {
    Field(w, "kv_precision", sizing::PrecisionName(wl.kv_precision));
    Field(w, "context", wl.context_tokens);
  } else {
    Field(w, "seq", wl.sequence_tokens);
  }
  Field(w, "batch", wl.batch);
  if (wl.method == Method::kLora || wl.method == Method::kQlora) Field(w, "rank", wl.lora_rank);
  if (wl.method == Method::kFullFineTune) {
    Field(w, "zero", wl.zero_stage);
    Field(w, "offload_optimizer", wl.offload_optimizer);
  }
  Field(w, "gpus", wl.gpus);
  if (sizing::NamesLayout(wl)) {
    const sizing::Layout l = sizing::LayoutOf(wl);
    Field(w, "tp", l.tensor);
    Field(w, "pp", l.pipeline);
    Field(w, "cp", l.context);
    Field(w, "dp", l.data);
    Field(w, "vp", l.virtual_stages);
  }
  if (wl.fp8_training) Field(w, "fp8_training", true);
  if (wl.megatron) Field(w, "stack", "megatron");
  if (wl.engine != sizing::ServingEngine::kUnspecified) {
    Field(w, "engine", sizing::ServingEngineName(wl.engine));
  }
  Field(w, "profile", sizing::ProfileName(e.profile));
  bool detailed = e.profile == sizing::Profile::kDetailed;
  if (detailed && wl.method == Method::kInference) {
    Field(w, "prefill_chunk", wl.prefill_chunk_tokens);
    Field(w, "old_transformers", wl.old_transformers);
  }
  if (detailed && wl.method != Method::kInference) {
    Field(w, "optimizer", sizing::OptimizerName(wl.optimizer));
    Field(w, "grad_accum", wl.gradient_accumulation_steps);
    if (wl.method == Method::kLora || wl.method == Method::kQlora) {
      Field(w, "lora_targets", sizing::LoraTargetsName(wl.lora_targets));
      Field(w, "lora_dropout", wl.lora_dropout);
    }
    Field(w, "pure_bf16", wl.pure_bf16);
    Field(w, "fused_kernels", wl.fused_kernels);
    Field(w, "chunked_loss", wl.chunked_loss);
    if (wl.compiled_loss) Field(w, "compiled_loss", true);
    Field(w, "flash_attention", wl.flash_attention);
    Field(w, "gradient_checkpointing", wl.gradient_checkpointing);
    Field(w, "recompute", RecomputeName(wl));
    Field(w, "offload_activations", wl.offload_activations);
    Field(w, "offload_params", wl.offload_params);
    Field(w, "old_transformers", wl.old_transformers);
    if (wl.unchunked_nf4_quantization) Field(w, "unchunked_nf4_quantization", true);
    if (wl.foreach_adamw) Field(w, "foreach_adamw", true);
    if (wl.method == Method::kFullFineTune) {
      Field(w, "optimizer_in_backward", wl.optimizer_in_backward);
    }
  }
  if (detailed && (wl.method == Method::kQlora || wl.precision == sizing::Precision::kNf4)) {
    Field(w, "double_quant", wl.double_quant);
  }
  if (wl.weights_as_stored) Field(w, "weights_as_stored", true);
  w.EndObject();
}

// json_parts::ComponentJson
void WriteComponent(JsonWriter& w, const sizing::Component& c) {
  w.BeginObject();
  Field(w, "name", c.name);
  Field(w, "bytes", c.bytes);
  Field(w, "gb", Gb(c.bytes));
  Field(w, "formula", c.formula);
  w.EndObject();
}

// "components", then "outside_allocator" (null when the profile counts none).
void WriteComponents(JsonWriter& w, const sizing::MemoryEstimate& e) {
  w.Key("components").BeginArray();
  for (const auto& c : e.components) WriteComponent(w, c);
  w.EndArray();
  w.Key("outside_allocator");
  if (e.outside_allocator.bytes > 0) {
    WriteComponent(w, e.outside_allocator);
  } else {
    w.Null();
  }
}

// json_parts::NotesJson
void WriteNotes(JsonWriter& w, const sizing::ModelShape& model,
                const std::vector<std::string>& request_notes,
                const sizing::MemoryEstimate& estimate) {
  w.Key("notes").BeginArray();
  for (const auto* notes : {&model.notes, &request_notes, &estimate.notes}) {
    for (const auto& line : *notes) w.String(line);
  }
  w.EndArray();
}

// json_parts::ConfigJson, in three runs of members: the catalog's (head, tail: ConfigTexts keeps
// them as text) around the request's (the job's share of each card).
void WriteConfigHead(JsonWriter& w, const Candidate& c) {
  const catalog::TermGpu& g = *c.gpu;
  Field(w, "gpu", g.name);
  Field(w, "count", c.count);
  Field(w, "configuration", ConfigurationName(g.name, c.count));
  Field(w, "monthly_usd", Usd(c.monthly_micros));
  Field(w, "weekly_usd", Usd(c.weekly_micros));
  Field(w, "hourly_usd", Usd(c.hourly_micros));
}

void WriteConfigFigures(JsonWriter& w, const Candidate& c) {
  Field(w, "headroom_gb_per_card", Gb(c.headroom_bytes_per_card));
  Field(w, "tight", c.tight);
  w.Key("decode_ceiling_tok_s");
  if (c.decode_ceiling_tokens_per_s > 0) {
    w.Double(Round(c.decode_ceiling_tokens_per_s, 2));
  } else {
    w.Null();
  }
  Field(w, "per_card_gb", Gb(c.per_card_bytes));
}

void WriteConfigTail(JsonWriter& w, const Candidate& c) {
  const catalog::TermGpu& g = *c.gpu;
  Field(w, "vram_gb", g.vram_gb);
  Field(w, "discount_percent", Round(static_cast<double>(c.discount_ppm) / 1e4, 4));
  Field(w, "list_monthly_usd", Usd(g.monthly_micros));
  Field(w, "weekly_derived", g.weekly_derived);
  Field(w, "fp8", g.fp8);
  Field(w, "stack", catalog::StackName(g.stack));
  Field(w, "interconnect", catalog::InterconnectName(g.interconnect));
  Field(w, "link", g.link);
  Field(w, "regions", g.regions);
  Field(w, "free_now", g.free_now);
  Field(w, "in_stock", c.in_stock);
  w.Key("exact").BeginObject();  // json_parts::ExactPrices
  Field(w, "monthly_usd", Exact(c.monthly_micros));
  Field(w, "weekly_usd", Exact(c.weekly_micros));
  Field(w, "hourly_usd", Exact(c.hourly_micros));
  w.EndObject();
}

void WriteConfig(JsonWriter& w, const Candidate& c, bool explain, const ConfigTexts* texts) {
  w.BeginObject();
  const ConfigTexts::Parts* parts =
      texts != nullptr ? texts->Find(c, w.indent(), w.depth()) : nullptr;
  if (parts != nullptr) {
    w.RawMembers(parts->head);
  } else {
    WriteConfigHead(w, c);
  }
  WriteConfigFigures(w, c);
  if (parts != nullptr) {
    w.RawMembers(parts->tail);
  } else {
    WriteConfigTail(w, c);
  }
  if (explain) Field(w, "explain", ExplainCandidate(c));
  w.EndObject();
}

constexpr int kReportIndent = 2;
// The depths of CONFIG members in the fit report: "best" (2) and each of "alternatives" (3).
constexpr int kConfigDepths[] = {2, 3};

}  // namespace

std::string SizeReportJson(const SizeRequest& request, const sizing::MemoryEstimate& e) {
  std::string out;
  out.reserve(4096);
  JsonWriter w(out, 2);
  w.BeginObject();
  w.Key("model");
  WriteModel(w, request.model);
  w.Key("workload");
  WriteWorkload(w, request.workload, e);
  Field(w, "total_gb", Gb(e.total_bytes));
  Field(w, "total_bytes", e.total_bytes);
  Field(w, "per_gpu_gb", Gb(e.per_gpu_bytes));
  Field(w, "gpus", e.gpus);
  WriteComponents(w, e);
  Field(w, "card_gb", Gb(e.card_bytes()));
  Field(w, "host_gb", Gb(e.host_bytes));
  if (e.method == Method::kInference) {
    Field(w, "decode_weight_bytes_per_token", e.decode_weight_bytes);
  }
  WriteNotes(w, request.model, request.notes, e);
  w.EndObject();
  return out;
}

ConfigTexts::ConfigTexts(const catalog::Catalog& catalog) : catalog_(&catalog) {
  by_card_.resize(catalog.term.size());
  for (std::size_t i = 0; i < catalog.term.size(); ++i) {
    const catalog::TermGpu& g = catalog.term[i];
    // Every count Fit can rank a card in: one card, the discounted set sizes, the card's own.
    std::vector<int> counts = {1};
    for (const auto& d : catalog.discounts) counts.push_back(d.count);
    counts.insert(counts.end(), g.counts.begin(), g.counts.end());
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (int count : counts) {
      if (!g.AllowsCount(count)) continue;
      auto monthly = catalog::SetPriceMicros(catalog, g, count, catalog::Term::kMonthly);
      auto weekly = catalog::SetPriceMicros(catalog, g, count, catalog::Term::kWeekly);
      auto hourly = catalog::SetPriceMicros(catalog, g, count, catalog::Term::kHourly);
      if (!monthly.ok() || !weekly.ok() || !hourly.ok()) continue;  // Fit refuses these
      Candidate c;
      c.gpu = &g;
      c.count = count;
      c.monthly_micros = *monthly;
      c.weekly_micros = *weekly;
      c.hourly_micros = *hourly;
      c.discount_ppm = catalog.DiscountPpm(count);
      c.in_stock = g.free_now >= count;
      for (int depth : kConfigDepths) {
        Parts p;
        p.from = c;
        p.indent = kReportIndent;
        p.depth = depth;
        p.head = JsonWriter::MembersText(kReportIndent, depth,
                                         [&](JsonWriter& w) { WriteConfigHead(w, c); });
        p.tail = JsonWriter::MembersText(kReportIndent, depth,
                                         [&](JsonWriter& w) { WriteConfigTail(w, c); });
        by_card_[i].push_back(std::move(p));
      }
    }
  }
}

const ConfigTexts::Parts* ConfigTexts::Find(const Candidate& c, int indent, int depth) const {
  const auto& term = catalog_->term;
  // Only a card of this catalog (std::less orders pointers into different objects too).
  if (term.empty() || std::less<>()(c.gpu, term.data()) ||
      !std::less<>()(c.gpu, term.data() + term.size())) {
    return nullptr;
  }
  for (const Parts& p : by_card_[static_cast<std::size_t>(c.gpu - term.data())]) {
    const Candidate& f = p.from;
    if (f.count == c.count && p.indent == indent && p.depth == depth) {
      bool same = f.monthly_micros == c.monthly_micros && f.weekly_micros == c.weekly_micros &&
                  f.hourly_micros == c.hourly_micros && f.discount_ppm == c.discount_ppm &&
                  f.in_stock == c.in_stock;
      return same ? &p : nullptr;
    }
  }
  return nullptr;
}

std::string FitReportJson(const FitRequest& request, const FitResult& result,
                          const ConfigTexts* texts) {
  std::string out;
  out.reserve(8192);
  JsonWriter w(out, kReportIndent);
  w.BeginObject();
  w.Key("model");
  WriteModel(w, request.model);
  w.Key("workload");
  WriteWorkload(w, request.workload, result.required);
  w.Key("filters").BeginObject();
  Field(w, "cuda_only", request.filters.cuda_only);
  FieldOrNull(w, "region", request.filters.region);
  Field(w, "in_stock", request.filters.in_stock);
  w.Key("max_monthly_usd");
  if (request.filters.max_monthly_micros) {
    w.Double(Usd(*request.filters.max_monthly_micros));
  } else {
    w.Null();
  }
  FieldOrNull(w, "gpu", request.filters.gpu);
  Field(w, "top", request.top);
  w.EndObject();
  Field(w, "required_gb", Gb(result.required.card_bytes()));
  Field(w, "required_bytes", result.required.card_bytes());
  WriteComponents(w, result.required);
  Field(w, "host_gb", Gb(result.required.host_bytes));
  Field(w, "needs_fp8", result.needs_fp8);
  Field(w, "multi_card", result.considered_sets);
  w.Key("best");
  if (result.ranked.empty()) {
    w.Null();
    Field(w, "reason", result.reason);
    if (result.multi_node) {
      const MultiNodeFit& m = *result.multi_node;
      w.Key("multi_node").BeginObject();
      Field(w, "gpu", m.gpu->name);
      Field(w, "nodes", m.nodes);
      Field(w, "gpus_per_node", kNodeGpus);
      Field(w, "configuration", MultiNodeName(m));
      Field(w, "per_card_gb", Gb(m.per_card_bytes));
      Field(w, "monthly_usd", Usd(m.monthly_micros));
      Field(w, "indicative", true);
      w.Key("quote").BeginObject();
      Field(w, "needed", true);
      Field(w, "nodes", m.nodes);
      Field(w, "request", "POST /v1/quote-requests");
      w.EndObject();
      w.EndObject();
    }
  } else {
    WriteConfig(w, result.ranked.front(), request.explain, texts);
  }
  w.Key("alternatives").BeginArray();
  for (std::size_t i = 1; i < result.ranked.size() && static_cast<int>(i) < request.top; ++i) {
    WriteConfig(w, result.ranked[i], request.explain, texts);
  }
  w.EndArray();
  if (request.why_not) {
    w.Key("excluded").BeginArray();
    for (const auto& x : result.excluded) {
      w.BeginObject();
      Field(w, "gpu", x.gpu);
      Field(w, "count", x.count);
      Field(w, "configuration", ConfigurationName(x.gpu, x.count));
      Field(w, "kind", ExclusionName(x.kind));
      Field(w, "reason", x.reason);
      w.EndObject();
    }
    w.EndArray();
  }
  WriteNotes(w, request.model, request.notes, result.required);
  w.EndObject();
  return out;
}

}  // namespace gpuhub::fit
