#include "fit/report_json.h"

#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/json_writer.h"
#include "core/money.h"
#include "fit/json_parts.h"
#include "fit/limits.h"
#include "sizing/parallel.h"

namespace gpuhub::fit {

using sizing::Method;

namespace json_parts {

double Round(double value, int decimals) {
  // The powers reports round to, as exact as std::pow gives them (it was ~1k instructions of
  // every fit report).
  static constexpr double kPowersOfTen[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
  double scale = decimals >= 0 && decimals <= 9 ? kPowersOfTen[decimals] : std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

double Gb(double bytes) { return Round(bytes / sizing::kBytesPerGb, 6); }

double Usd(std::int64_t micros) { return catalog::MicrosToUsd(micros); }

std::string Exact(std::int64_t micros) { return FormatMicros(micros, 6); }

// The "exact" object: the prices as decimal strings, never rounded through a double.
Json ExactPrices(std::int64_t monthly_micros, std::int64_t weekly_micros,
                 std::int64_t hourly_micros) {
  return {{"monthly_usd", Exact(monthly_micros)},
          {"weekly_usd", Exact(weekly_micros)},
          {"hourly_usd", Exact(hourly_micros)}};
}

// Notes about the model, then the request, then the estimate, as the reports list them.
Json NotesJson(const sizing::ModelShape& model, const std::vector<std::string>& request_notes,
               const sizing::MemoryEstimate& estimate) {
  Json j = Json::array();
  for (const auto* notes : {&model.notes, &request_notes, &estimate.notes}) {
    for (const auto& line : *notes) j.push_back(line);
  }
  return j;
}

Json ModelJson(const sizing::ModelShape& m) {
  Json j;
  j["id"] = m.id;
  j["architecture"] = m.architecture;
  j["nominal"] = m.nominal;
  j["total_params"] = m.total_params;
  j["active_params"] = m.active_params;
  j["layers"] = m.layers;
  j["hidden"] = m.hidden;
  j["heads"] = m.heads;
  j["kv_heads"] = m.kv_heads;
  j["head_dim"] = m.head_dim;
  if (!m.source.empty()) j["source"] = m.source;
  if (m.is_moe()) {
    j["experts"] = m.experts;
    j["experts_per_token"] = m.experts_per_token;
  }
  return j;
}

const char* RecomputeName(const sizing::Workload& w) {
  return w.gradient_checkpointing ? "full" : w.selective_recompute ? "selective" : "none";
}

Json WorkloadJson(const sizing::Workload& w, const sizing::MemoryEstimate& e) {
  Json j;
  j["workload"] = sizing::MethodName(w.method);
  j["precision"] = sizing::PrecisionName(w.precision);
  if (w.method == Method::kInference) {
    j["kv_precision"] = sizing::PrecisionName(w.kv_precision);
    j["context"] = w.context_tokens;
  } else {
    j["seq"] = w.sequence_tokens;
  }
  j["batch"] = w.batch;
  if (w.method == Method::kLora || w.method == Method::kQlora) j["rank"] = w.lora_rank;
  if (w.method == Method::kFullFineTune) {
    j["zero"] = w.zero_stage;
    j["offload_optimizer"] = w.offload_optimizer;
  }
  j["gpus"] = w.gpus;
  if (sizing::NamesLayout(w)) {
    const sizing::Layout l = sizing::LayoutOf(w);
    j["tp"] = l.tensor;
    j["pp"] = l.pipeline;
    j["cp"] = l.context;
    j["dp"] = l.data;
    j["vp"] = l.virtual_stages;
  }
  if (w.fp8_training) j["fp8_training"] = true;
  if (w.megatron) j["stack"] = "megatron";
  if (w.engine != sizing::ServingEngine::kUnspecified) {
    j["engine"] = sizing::ServingEngineName(w.engine);
  }
  j["profile"] = sizing::ProfileName(e.profile);
  if (e.profile == sizing::Profile::kDetailed && w.method == Method::kInference) {
    j["prefill_chunk"] = w.prefill_chunk_tokens;  // 0: the whole prompt in one pass
    j["old_transformers"] = w.old_transformers;
  }
  if (e.profile == sizing::Profile::kDetailed && w.method != Method::kInference) {
    j["optimizer"] = sizing::OptimizerName(w.optimizer);
    j["grad_accum"] = w.gradient_accumulation_steps;
    if (w.method == Method::kLora || w.method == Method::kQlora) {
      j["lora_targets"] = sizing::LoraTargetsName(w.lora_targets);
      j["lora_dropout"] = w.lora_dropout;
    }
    j["pure_bf16"] = w.pure_bf16;
    j["fused_kernels"] = w.fused_kernels;
    j["chunked_loss"] = w.chunked_loss;
    if (w.compiled_loss) j["compiled_loss"] = true;
    j["flash_attention"] = w.flash_attention;
    j["gradient_checkpointing"] = w.gradient_checkpointing;
    j["recompute"] = RecomputeName(w);
    j["offload_activations"] = w.offload_activations;
    j["offload_params"] = w.offload_params;
    j["old_transformers"] = w.old_transformers;
    if (w.unchunked_nf4_quantization) j["unchunked_nf4_quantization"] = true;
    if (w.foreach_adamw) j["foreach_adamw"] = true;
    if (w.method == Method::kFullFineTune) j["optimizer_in_backward"] = w.optimizer_in_backward;
  }
  if (e.profile == sizing::Profile::kDetailed &&
      (w.method == Method::kQlora || w.precision == sizing::Precision::kNf4)) {
    j["double_quant"] = w.double_quant;
  }
  if (w.weights_as_stored) j["weights_as_stored"] = true;
  return j;
}

Json ComponentJson(const sizing::Component& c) {
  return {{"name", c.name}, {"bytes", c.bytes}, {"gb", Gb(c.bytes)}, {"formula", c.formula}};
}

Json ComponentsJson(const sizing::MemoryEstimate& e) {
  Json components = Json::array();
  for (const auto& c : e.components) components.push_back(ComponentJson(c));
  return components;
}

// Memory a card holds besides the framework's peak (null when the profile counts none).
Json OutsideAllocatorJson(const sizing::MemoryEstimate& e) {
  return e.outside_allocator.bytes > 0 ? ComponentJson(e.outside_allocator) : Json();
}

Json Strings(const std::vector<std::string>& lines) {
  Json j = Json::array();
  for (const auto& line : lines) j.push_back(line);
  return j;
}

Json ConfigJson(const Candidate& c, bool explain) {
  const catalog::TermGpu& g = *c.gpu;
  Json j;
  j["gpu"] = g.name;
  j["count"] = c.count;
  j["configuration"] = ConfigurationName(g.name, c.count);
  j["monthly_usd"] = Usd(c.monthly_micros);
  j["weekly_usd"] = Usd(c.weekly_micros);
  j["hourly_usd"] = Usd(c.hourly_micros);
  j["headroom_gb_per_card"] = Gb(c.headroom_bytes_per_card);
  j["tight"] = c.tight;
  if (c.decode_ceiling_tokens_per_s > 0) {
    j["decode_ceiling_tok_s"] = Round(c.decode_ceiling_tokens_per_s, 2);
  } else {
    j["decode_ceiling_tok_s"] = nullptr;
  }
  j["per_card_gb"] = Gb(c.per_card_bytes);
  j["vram_gb"] = g.vram_gb;
  j["discount_percent"] = Round(static_cast<double>(c.discount_ppm) / 1e4, 4);
  j["list_monthly_usd"] = Usd(g.monthly_micros);
  j["weekly_derived"] = g.weekly_derived;
  j["fp8"] = g.fp8;
  j["stack"] = catalog::StackName(g.stack);
  j["interconnect"] = catalog::InterconnectName(g.interconnect);
  j["link"] = g.link;
  j["regions"] = g.regions;
  j["free_now"] = g.free_now;
  j["in_stock"] = c.in_stock;
  j["exact"] = ExactPrices(c.monthly_micros, c.weekly_micros, c.hourly_micros);
  if (explain) j["explain"] = Strings(ExplainCandidate(c));
  return j;
}

}  // namespace json_parts

namespace {

using namespace json_parts;  // NOLINT: the shared pieces of every report

// --- Request parsing -------------------------------------------------------------------------

// One request field: its JSON type and the member of RequestFields it lands in (the member's type
// follows from the JSON type: kMoney and kObject are kept as text).
struct FieldSpec {
  std::string_view name;
  enum Type { kString, kInteger, kBool, kMoney, kObject, kBatch } type;
  bool fit_only;
  std::optional<std::string> RequestFields::*text = nullptr;      // kString, kMoney, kObject
  std::optional<std::int64_t> RequestFields::*integer = nullptr;  // kInteger
  // kBool: one of the two, a plain switch (false unless given) or one whose default comes later.
  bool RequestFields::*flag = nullptr;
  std::optional<bool> RequestFields::*optional_flag = nullptr;
  bool plan_only = false;  // POST /v1/plan only
};

using R = RequestFields;
constexpr FieldSpec Text(std::string_view name, std::optional<std::string> R::*m,
                         bool fit_only = false) {
  return {name, FieldSpec::kString, fit_only, m};
}
constexpr FieldSpec Integer(std::string_view name, std::optional<std::int64_t> R::*m,
                            bool fit_only = false) {
  return {name, FieldSpec::kInteger, fit_only, nullptr, m};
}
constexpr FieldSpec Flag(std::string_view name, bool R::*m, bool fit_only = false) {
  return {name, FieldSpec::kBool, fit_only, nullptr, nullptr, m};
}
constexpr FieldSpec Flag(std::string_view name, std::optional<bool> R::*m) {
  return {name, FieldSpec::kBool, false, nullptr, nullptr, nullptr, m};
}

constexpr FieldSpec PlanInteger(std::string_view name, std::optional<std::int64_t> R::*m) {
  return {name, FieldSpec::kInteger, true, nullptr, m, nullptr, nullptr, true};
}
// A decimal number, sent as a JSON number or a string (kept as text, parsed strictly later).
constexpr FieldSpec PlanDecimal(std::string_view name, std::optional<std::string> R::*m) {
  return {name, FieldSpec::kMoney, true, m, nullptr, nullptr, nullptr, true};
}
constexpr FieldSpec PlanText(std::string_view name, std::optional<std::string> R::*m) {
  return {name, FieldSpec::kString, true, m, nullptr, nullptr, nullptr, true};
}

constexpr FieldSpec kFields[] = {
    Text("model", &R::model),
    {"config", FieldSpec::kObject, false, &R::config_json},
    Text("workload", &R::workload),
    Text("precision", &R::precision),
    Text("kv_precision", &R::kv_precision),
    Text("profile", &R::profile),
    Integer("context", &R::context),
    {"batch", FieldSpec::kBatch, false, nullptr, &R::batch},
    Integer("seq", &R::seq),
    Integer("prefill_chunk", &R::prefill_chunk),
    Integer("grad_accum", &R::grad_accum),
    Integer("rank", &R::rank),
    Integer("gpus", &R::gpus),
    Integer("zero", &R::zero),
    Integer("tp", &R::tp),
    Integer("pp", &R::pp),
    Integer("cp", &R::cp),
    Integer("dp", &R::dp),
    Integer("vp", &R::vp),
    Text("recompute", &R::recompute),
    Flag("fp8_training", &R::fp8_training),
    Text("engine", &R::engine),
    Text("stack", &R::stack),
    Flag("offload_optimizer", &R::offload_optimizer),
    Text("optimizer", &R::optimizer),
    Text("lora_targets", &R::lora_targets),
    Flag("lora_dropout", &R::lora_dropout),
    Flag("pure_bf16", &R::pure_bf16),
    Flag("fused_kernels", &R::fused_kernels),
    Flag("chunked_loss", &R::chunked_loss),
    Flag("compiled_loss", &R::compiled_loss),
    Flag("offload_activations", &R::offload_activations),
    Flag("offload_params", &R::offload_params),
    Flag("old_transformers", &R::old_transformers),
    Flag("unchunked_nf4_quantization", &R::unchunked_nf4_quantization),
    Flag("foreach_adamw", &R::foreach_adamw),
    Flag("optimizer_in_backward", &R::optimizer_in_backward),
    Flag("flash_attention", &R::flash_attention),
    Flag("gradient_checkpointing", &R::gradient_checkpointing),
    Flag("double_quant", &R::double_quant),
    Flag("explain", &R::explain),
    Flag("cuda_only", &R::cuda_only, true),
    Text("region", &R::region, true),
    Flag("in_stock", &R::in_stock, true),
    {"max_monthly_usd", FieldSpec::kMoney, true, &R::max_monthly_usd},
    Integer("top", &R::top, true),
    Flag("why_not", &R::why_not, true),
    Text("gpu", &R::gpu, true),
    PlanInteger("tokens", &R::tokens),
    PlanInteger("samples", &R::samples),
    PlanInteger("epochs", &R::epochs),
    PlanInteger("tokens_per_day", &R::tokens_per_day),
    PlanInteger("prompt_tokens", &R::prompt_tokens),
    PlanInteger("output_tokens", &R::output_tokens),
    PlanInteger("days", &R::days),
    PlanDecimal("utilisation", &R::utilisation),
    PlanDecimal("bandwidth_efficiency", &R::bandwidth_efficiency),
    PlanText("start", &R::start),
};

constexpr bool EveryFieldHasItsMember() {
  for (const FieldSpec& f : kFields) {
    bool wired = f.type == FieldSpec::kInteger || f.type == FieldSpec::kBatch ? f.integer != nullptr
                 : f.type == FieldSpec::kBool ? (f.flag != nullptr) != (f.optional_flag != nullptr)
                                              : f.text != nullptr;
    if (!wired) return false;
  }
  return true;
}
static_assert(EveryFieldHasItsMember());

std::string FieldList(RequestKind kind) {
  std::string out;
  for (const auto& f : kFields) {
    if (f.fit_only && kind == RequestKind::kSize) continue;
    if (f.plan_only && kind != RequestKind::kPlan) continue;
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  }
  return out;
}

template <typename AnyJson>
const char* TypeName(const AnyJson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// One member of the request object, checked and put into `f` (from either JSON flavour: the flat
// path's values are ordered_json, the tree path's nlohmann::json).
template <typename AnyJson>
Status ApplyField(RequestFields& f, const std::string& key, const AnyJson& v, RequestKind kind) {
  const char* verb = kind == RequestKind::kSize  ? "size"
                     : kind == RequestKind::kFit ? "fit"
                                                 : "plan";
  // Names are compared as string_views (length first): comparing each key with every name as
  // a C string was ~10k instructions of POST /v1/fit (strlen and memcmp, callgrind).
  const FieldSpec* spec = nullptr;
  for (const auto& candidate : kFields) {
    if (std::string_view(key) == candidate.name) {
      spec = &candidate;
      break;
    }
  }
  if (spec == nullptr) {
    std::string hint;
    std::string underscored = key;
    for (char& c : underscored) c = c == '-' ? '_' : c;
    for (const auto& candidate : kFields) {
      if (underscored == candidate.name) hint = " (did you mean '" + underscored + "'?)";
    }
    return Status::InvalidArgument("unknown field '" + key.substr(0, 40) + "'" + hint + "; " +
                                   verb + " takes: " + FieldList(kind))
        .WithField(key.substr(0, 40));
  }
  if (spec->plan_only && kind != RequestKind::kPlan) {
    return Status::InvalidArgument("field '" + key + "' applies to plan (POST /v1/plan), not " +
                                   verb)
        .WithField(key);
  }
  if (spec->fit_only && kind == RequestKind::kSize) {
    return Status::InvalidArgument("field '" + key + "' applies to fit, not size").WithField(key);
  }
  auto wrong = [&](const char* expected) {
    return Status::InvalidArgument("field '" + key + "' must be " + expected + ", got " +
                                   TypeName(v))
        .WithField(key);
  };
  if (v.is_null()) return wrong("present with a value (omit it instead of null)");
  switch (spec->type) {
    case FieldSpec::kString: {
      if (!v.is_string()) return wrong("a string");
      f.*spec->text = v.template get<std::string>();
      break;
    }
    case FieldSpec::kInteger: {
      if (!v.is_number_integer()) return wrong("a whole number");
      if (v.is_number_unsigned() &&
          v.template get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return wrong("a whole number within range");
      }
      f.*spec->integer = v.template get<std::int64_t>();
      break;
    }
    case FieldSpec::kBool: {
      if (!v.is_boolean()) return wrong("true or false");
      if (spec->flag != nullptr) {
        f.*spec->flag = v.template get<bool>();
      } else {
        f.*spec->optional_flag = v.template get<bool>();
      }
      break;
    }
    case FieldSpec::kMoney: {
      if (v.is_string()) {
        f.*spec->text = v.template get<std::string>();
      } else if (v.is_number()) {
        // The shortest text that reads back as the same double: 1500.5 -> "1500.5". Exponents
        // and negatives are refused by the decimal parser with a clear message.
        f.*spec->text = v.dump();
      } else {
        return wrong("a decimal string like \"1500.50\" or a number");
      }
      break;
    }
    case FieldSpec::kBatch: {
      // A number of sequences, or "max": the largest batch that fits (plan).
      if (v.is_string() && v.template get<std::string>() == "max") {
        f.batch_max = true;
        break;
      }
      if (!v.is_number_integer()) return wrong("a whole number or \"max\"");
      if (v.is_number_unsigned() &&
          v.template get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
        return wrong("a whole number within range");
      }
      f.*spec->integer = v.template get<std::int64_t>();
      break;
    }
    case FieldSpec::kObject: {
      if (!v.is_object()) return wrong("a JSON object (the contents of a config.json)");
      f.*spec->text = v.dump();
      break;
    }
  }
  return Status::Ok();
}

// A flat request object ({"model": "70b", "context": 8192, ...}) read straight off the parser's
// events into its members: building nlohmann's tree (a node per value in an ordered map) under the
// callback that guards its depth was ~11k of POST /v1/fit's instructions (callgrind). Anything
// else (a nested value such as "config", a repeated field, a syntax error, a root that is not an
// object) stops it, and the tree path answers exactly as it always did.
class FlatRequest {
 public:
  std::vector<std::pair<std::string, Json>> members;

  bool null() { return Value(Json(nullptr)); }
  bool boolean(bool v) { return Value(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Value(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Value(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return Value(Json(v)); }
  bool string(Json::string_t& v) { return Value(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return false; }
  bool start_object(std::size_t) { return !std::exchange(opened_, true); }  // the root only
  bool key(Json::string_t& k) {
    // More members than there are fields cannot all be fields: the tree path answers (and this
    // check stays linear).
    if (members.size() >= std::size(kFields)) return false;
    for (const auto& m : members) {
      if (m.first == k) return false;  // repeated: the tree keeps the first place, last value
    }
    members.emplace_back(std::move(k), Json());
    return true;
  }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return false; }
  bool end_array() { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }

 private:
  bool Value(Json v) {
    if (!opened_) return false;  // a root that is not an object
    members.back().second = std::move(v);
    return true;
  }
  bool opened_ = false;
};

}  // namespace

Result<RequestFields> ParseRequestJson(std::string_view body, RequestKind kind) {
  if (body.size() > kMaxRequestJsonBytes) {
    return Status::InvalidArgument("request body is larger than " +
                                   std::to_string(kMaxRequestJsonBytes) + " bytes");
  }
  RequestFields f;
  FlatRequest flat;
  if (Json::sax_parse(body.begin(), body.end(), &flat)) {
    for (const auto& [key, value] : flat.members) {
      GPUHUB_RETURN_IF_ERROR(ApplyField(f, key, value, kind));
    }
    return f;
  }
  // The tree is a sorted map (nlohmann::json): an ordered_json object finds each new member by
  // walking the ones before it, so a 1 MB body of 90,000 distinct names took ~9 s of a server
  // thread. The order the members were written in, which says which error is answered first, is
  // kept beside it (the first place of a repeated name; its last value is the one in the tree).
  bool too_deep = false;
  std::vector<std::string> order;
  std::unordered_set<std::string> seen;
  nlohmann::json root = nlohmann::json::parse(
      body.begin(), body.end(),
      [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (depth > kMaxRequestJsonDepth) too_deep = true;
        if (!too_deep && depth == 1 && event == nlohmann::json::parse_event_t::key) {
          const std::string& name = parsed.get_ref<const std::string&>();
          if (seen.insert(name).second) order.push_back(name);
        }
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep) {
    return Status::InvalidArgument("request body is nested deeper than " +
                                   std::to_string(kMaxRequestJsonDepth) + " levels");
  }
  if (root.is_discarded()) return Status::InvalidArgument("request body is not valid JSON");
  if (!root.is_object()) return Status::InvalidArgument("request body must be a JSON object");

  for (const std::string& key : order) {
    GPUHUB_RETURN_IF_ERROR(ApplyField(f, key, root.at(key), kind));
  }
  return f;
}

std::string GuideJson(const Guide& guide) {
  Json j;
  Json kv = Json::object();
  for (const auto& row : guide.kv_cache) {
    Json r;
    r["per_token_bytes"] = row.per_token_bytes;
    r["per_token_mb"] = Round(row.per_token_bytes / 1e6, 6);
    for (int i = 0; i < 3; ++i) r[kGuideContextNames[i]] = Gb(row.bytes[i]);
    kv[row.preset] = std::move(r);
  }
  j["kv_cache"] = std::move(kv);
  Json inference = Json::object();
  for (const auto& row : guide.inference) {
    inference[row.preset] = {
        {"bf16", Gb(row.bf16_bytes)}, {"fp8", Gb(row.fp8_bytes)}, {"int4", Gb(row.int4_bytes)}};
  }
  j["inference"] = std::move(inference);
  Json training = Json::object();
  for (const auto& row : guide.training) {
    auto published = [](const std::optional<GuidePublishedFigure>& f) -> Json {
      if (!f) return nullptr;
      return {{"gb", f->published_gb},
              {"engine_gb", Gb(f->engine_bytes)},
              {"engine_llama3_vocab_gb", Gb(f->engine_llama3_vocab_bytes)},
              {"reason", f->reason}};
    };
    training[row.preset] = {{"full", Gb(row.full_bytes)},
                            {"full_with_allowance", Gb(row.full_with_allowance_bytes)},
                            {"lora", Gb(row.lora_bytes)},
                            {"qlora", Gb(row.qlora_bytes)},
                            {"lora_activations", Gb(row.lora_activation_bytes)},
                            {"qlora_activations", Gb(row.qlora_activation_bytes)},
                            {"lora_published", published(row.lora_published)},
                            {"qlora_published", published(row.qlora_published)}};
  }
  j["training"] = std::move(training);
  Json cheapest = Json::object();
  Json reasons = Json::object();
  for (const auto& cell : guide.cheapest) {
    if (cell.best) {
      cheapest[cell.preset][cell.column] = ConfigJson(*cell.best, false);
    } else {
      cheapest[cell.preset][cell.column] = nullptr;
      reasons[cell.preset][cell.column] = cell.reason;
    }
  }
  j["cheapest"] = std::move(cheapest);
  j["cheapest_reasons"] = std::move(reasons);
  Json multi = Json::object();
  for (const auto& cell : guide.cheapest) {
    if (!cell.multi_node) continue;
    const MultiNodeFit& m = *cell.multi_node;
    multi[cell.preset][cell.column] = {
        {"gpu", m.gpu->name},
        {"nodes", m.nodes},
        {"gpus_per_node", kNodeGpus},
        {"configuration", MultiNodeName(m)},
        {"label", MultiNodeName(m) + ", quote"},
        {"per_card_gb", Gb(m.per_card_bytes)},
        {"monthly_usd", Usd(m.monthly_micros)},
        {"indicative", true},
        {"quote", {{"needed", true}, {"nodes", m.nodes}, {"request", "POST /v1/quote-requests"}}}};
  }
  j["cheapest_multi_node"] = std::move(multi);
  Json cost = Json::array();
  for (const auto& row : guide.cost) {
    const catalog::TermGpu& g = *row.gpu;
    Json r;
    r["gpu"] = g.name;
    r["vram_gb"] = g.vram_gb;
    r["monthly_usd"] = Usd(g.monthly_micros);
    r["usd_per_gb_month"] = Round(row.usd_per_gb_month, 4);
    r["bandwidth_gb_per_s"] = g.bandwidth_gb_per_s;
    r["gb_s_per_usd_month"] = Round(row.gb_s_per_usd_month, 4);
    r["hourly_usd"] = Usd(g.hourly_micros);
    r["weekly_usd"] = Usd(g.weekly_micros);
    r["weekly_derived"] = g.weekly_derived;
    r["spot"] = OrNull(row.spot_name);
    r["spot_ask_usd_per_hour"] = OrNull(row.spot_ask_micros, Usd);
    r["break_even_hours"] = OrNull(row.break_even_hours, [](double h) { return Round(h, 1); });
    cost.push_back(std::move(r));
  }
  j["cost"] = std::move(cost);
  j["units"] = {
      {"kv_cache", "GB (1e9 bytes) of fp16 KV cache, batch 1; per_token_mb in MB (1e6 bytes)"},
      {"inference", "GB per GPU: weights + fp16 KV at 8192 tokens + 2 GB runtime, batch 1"},
      {"training",
       "GB on one GPU: full = 16 B/param (no activations), full_with_allowance = +15%, "
       "lora = bf16 base + adapters + activations + 2 GB, qlora = nf4 base + adapters + "
       "activations + 2 GB (activations: checkpoints + one layer recomputed + logits at "
       "sequence 2048, batch 1); <method>_published = the published guide's figure with the "
       "reason, only where it differs from the engine's by more than 0.5 GB"},
      {"cheapest", "fit's best configuration with no filters"},
      {"cost", "USD; hourly = monthly / 720; break_even_hours = monthly / spot opening ask"},
  };
  return DumpJson(j, 2);
}

std::string CatalogJson(const catalog::Catalog& c, std::optional<std::int64_t> hourly_rate_micros) {
  Json j;
  j["source"] = c.source;
  Json regions = Json::array();
  for (const auto& r : c.regions) regions.push_back({{"code", r.code}, {"city", r.city}});
  j["regions"] = std::move(regions);
  Json discounts = Json::array();
  for (const auto& d : c.discounts) {
    discounts.push_back(
        {{"count", d.count}, {"percent", Round(static_cast<double>(d.ppm) / 1e4, 4)}});
  }
  j["multi_card_discounts"] = std::move(discounts);
  j["weekly_ratio"] = {
      {"published_weekly_sum_usd", Usd(c.weekly_ratio_numerator_micros)},
      {"same_cards_monthly_sum_usd", Usd(c.weekly_ratio_denominator_micros)},
      {"ratio", c.weekly_ratio_denominator_micros > 0
                    ? Round(static_cast<double>(c.weekly_ratio_numerator_micros) /
                                static_cast<double>(c.weekly_ratio_denominator_micros),
                            6)
                    : 0.0},
      {"rule", "derived weekly = monthly x ratio, rounded half-even to the cent"}};
  Json term = Json::array();
  for (const auto& g : c.term) {
    Json r;
    r["name"] = g.name;
    r["vram_gb"] = g.vram_gb;
    r["memory"] = g.memory;
    r["power_w"] = OrNull(g.power_w);
    r["bandwidth_gb_per_s"] = g.bandwidth_gb_per_s;
    r["fp8"] = g.fp8;
    r["stack"] = catalog::StackName(g.stack);
    r["link"] = g.link;
    r["interconnect"] = catalog::InterconnectName(g.interconnect);
    r["link_gb_per_s"] = OrNull(g.link_gb_per_s);
    r["link_optional"] = g.link_optional;
    r["sharded_training"] = catalog::ShardedTrainingName(g.sharded_training);
    r["counts"] = g.counts;
    r["regions"] = g.regions;
    r["free_now"] = g.free_now;
    r["local_nvme_tb"] = OrNull(g.local_nvme_tb);
    r["monthly_usd"] = Usd(g.monthly_micros);
    r["weekly_usd"] = Usd(g.weekly_micros);
    r["weekly_derived"] = g.weekly_derived;
    r["hourly_usd"] = Usd(g.hourly_micros);
    r["bf16_dense_tflops"] = OrNull(g.compute.bf16_dense_tflops);
    r["fp8_dense_tflops"] = OrNull(g.compute.fp8_dense_tflops);
    r["tflops_source"] = g.compute.source;
    r["architecture"] = catalog::ArchitectureName(g.compute.architecture);
    r["usd_per_gb_month"] = Round(catalog::UsdPerGbMonth(g), 4);
    r["gb_s_per_usd_month"] = Round(catalog::GbPerSecondPerUsdMonth(g), 4);
    const catalog::SpotGpu* spot = nullptr;
    for (const auto& s : c.spot) {
      if (s.term_name && *s.term_name == g.name) spot = &s;
    }
    if (spot != nullptr && spot->opening_ask_micros_per_hour) {
      r["break_even_hours_vs_spot"] =
          Round(catalog::BreakEvenHours(g.monthly_micros, *spot->opening_ask_micros_per_hour), 1);
    } else {
      r["break_even_hours_vs_spot"] = nullptr;
    }
    if (hourly_rate_micros) {
      r["break_even_hours_vs_rate"] =
          Round(catalog::BreakEvenHours(g.monthly_micros, *hourly_rate_micros), 1);
    }
    r["exact"] = ExactPrices(g.monthly_micros, g.weekly_micros, g.hourly_micros);
    term.push_back(std::move(r));
  }
  j["term"] = std::move(term);
  if (hourly_rate_micros) j["hourly_rate_usd"] = Usd(*hourly_rate_micros);
  Json spot = Json::array();
  for (const auto& s : c.spot) {
    Json r;
    r["name"] = s.name;
    r["vram_gb"] = s.vram_gb;
    r["memory"] = s.memory;
    r["bandwidth_gb_per_s"] = OrNull(s.bandwidth_gb_per_s);
    r["bf16_dense_tflops"] = OrNull(s.bf16_dense_tflops);
    r["fp8_dense_tflops"] = OrNull(s.compute.fp8_dense_tflops);
    r["tflops_source"] = s.compute.source;
    r["architecture"] = catalog::ArchitectureName(s.compute.architecture);
    r["opening_ask_usd_per_hour"] = OrNull(s.opening_ask_micros_per_hour, Usd);
    r["largest_full_train_b_1gpu"] = s.largest_full_train_b_1gpu;
    r["largest_full_train_b_8gpu"] = s.largest_full_train_b_8gpu;
    r["term"] = OrNull(s.term_name);
    spot.push_back(std::move(r));
  }
  j["spot"] = std::move(spot);
  return DumpJson(j, 2);
}

namespace {

Json ShapeSummaryJson(const std::string& id, const sizing::ModelShape& m) {
  Json r;
  r["id"] = id;
  r["architecture"] = m.architecture;
  r["model_type"] = m.model_type.empty() ? Json(nullptr) : Json(m.model_type);
  r["total_params"] = m.total_params;
  r["active_params"] = m.active_params;
  r["layers"] = m.layers;
  r["hidden"] = m.hidden;
  r["kv_heads"] = m.kv_heads;
  r["head_dim"] = m.head_dim;
  r["max_context"] = m.max_context > 0 ? Json(m.max_context) : Json(nullptr);
  r["kv_bytes_per_token"] = sizing::KvCacheBytes(m, sizing::Precision::kFp16, 1, 1);
  r["experts"] = m.experts;
  r["experts_per_token"] = m.experts_per_token;
  return r;
}

}  // namespace

std::string ModelsJson(const std::vector<sizing::BundledModel>& bundled) {
  Json j;
  Json presets = Json::array();
  for (const auto& name : sizing::PresetNames()) {
    auto shape = sizing::PresetModel(name);
    if (shape.ok()) presets.push_back(ShapeSummaryJson(name, *shape));
  }
  j["presets"] = std::move(presets);
  Json models = Json::array();
  for (const auto& b : bundled) models.push_back(ShapeSummaryJson(b.id, b.shape));
  j["bundled"] = std::move(models);
  return DumpJson(j, 2);
}

Result<std::string> HandleSizeJson(std::string_view body, const std::string& data_dir) {
  GPUHUB_ASSIGN_OR_RETURN(RequestFields fields, ParseRequestJson(body, RequestKind::kSize));
  GPUHUB_ASSIGN_OR_RETURN(SizeRequest request,
                          ResolveSizeRequest(fields, RequestContext{data_dir, false}));
  GPUHUB_ASSIGN_OR_RETURN(sizing::MemoryEstimate estimate,
                          sizing::EstimateMemory(request.model, request.workload));
  return SizeReportJson(request, estimate);
}

Result<std::string> HandleFitJson(std::string_view body, const std::string& data_dir,
                                  const catalog::Catalog& catalog, const ConfigTexts* texts) {
  GPUHUB_ASSIGN_OR_RETURN(RequestFields fields, ParseRequestJson(body, RequestKind::kFit));
  GPUHUB_ASSIGN_OR_RETURN(FitRequest request,
                          ResolveFitRequest(fields, RequestContext{data_dir, false}, catalog));
  GPUHUB_ASSIGN_OR_RETURN(FitResult result,
                          Fit(catalog, request.model, request.workload, request.filters,
                              FitOptions{.exclusions = request.why_not}));
  return FitReportJson(request, result, texts);
}

}  // namespace gpuhub::fit
