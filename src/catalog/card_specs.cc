// [[card_specs]]: what a card does besides tensor math (catalog.h GeneralSpecs), by card name.
#include "catalog/catalog.h"
#include "catalog/limits.h"
#include "catalog/toml_fields.h"

namespace gpuhub::catalog {
namespace {

// true, false, or "not published" (nullopt).
Result<std::optional<bool>> PublishedBool(Fields& f, const Where& where, std::string_view key) {
  const toml::node* node = f.Find(key);
  if (node == nullptr) return where.Error(nullptr, key, "is missing (true, false or \"not published\")");
  if (node->is_boolean()) return std::optional<bool>(node->as_boolean()->get());
  if (auto s = node->value<std::string>(); s && *s == "not published") return std::optional<bool>();
  return where.Error(node, key, "must be true, false or \"not published\", got " + Describe(*node));
}

}  // namespace

Status ParseCardSpecs(const toml::table& root, std::string_view source, Catalog& c) {
  std::set<std::string> seen;
  return ForEachTable(
      root, "card_specs", source, kMaxTermGpus + kMaxSpotGpus,
      [&](const toml::table& t, std::size_t i) -> Status {
        Where where(source, "[[card_specs]] #" + std::to_string(i + 1), LineOf(t));
        Fields f(t, where);
        GPUHUB_ASSIGN_OR_RETURN(std::string name, f.String("name"));
        where.set_what("[[card_specs]] " + Quote(name));
        TermGpu* term = nullptr;
        for (TermGpu& g : c.term) {
          if (g.name == name) term = &g;
        }
        std::vector<SpotGpu*> spots;
        for (SpotGpu& s : c.spot) {
          if (s.name == name || (term != nullptr && s.term_name == name)) spots.push_back(&s);
        }
        if (term == nullptr && spots.empty()) {
          return where.Error(t.get("name"), "name", "names no [[term]] or [[spot]] card");
        }
        GeneralSpecs g;
        GPUHUB_ASSIGN_OR_RETURN(g.fp32_tflops, f.Number("fp32_tflops", kMaxTflops, true));
        GPUHUB_ASSIGN_OR_RETURN(g.fp64_tflops, f.Number("fp64_tflops", kMaxTflops, true));
        GPUHUB_ASSIGN_OR_RETURN(g.fp64_tensor_tflops,
                                f.Number("fp64_tensor_tflops", kMaxTflops, true));
        GPUHUB_ASSIGN_OR_RETURN(g.ecc, PublishedBool(f, where, "ecc"));
        const toml::node* rt = f.Find("rt_cores");
        if (rt == nullptr) return where.Error(nullptr, "rt_cores", "is missing");
        if (auto s = rt->value<std::string>(); !(s && *s == "not published")) {
          GPUHUB_ASSIGN_OR_RETURN(std::int64_t cores, f.IntegerValue(rt, "rt_cores", 0, 100'000));
          g.rt_cores = static_cast<int>(cores);
        }
        if (f.Find("rt_tflops") != nullptr) {
          GPUHUB_ASSIGN_OR_RETURN(g.rt_tflops, f.Number("rt_tflops", kMaxTflops, true));
        }
        GPUHUB_ASSIGN_OR_RETURN(g.source, f.String("specs_source"));
        if (!g.source.starts_with("https://")) {
          return where.Error(t.get("specs_source"), "specs_source",
                             "must be the datasheet's https:// URL");
        }
        GPUHUB_ASSIGN_OR_RETURN(g.note, f.String("specs_note", false));
        GPUHUB_RETURN_IF_ERROR(f.UnknownKeys());
        if (!seen.insert(name).second) return where.Error(t.get("name"), "name", "is listed twice");
        if (term != nullptr) term->general = g;
        for (SpotGpu* s : spots) {
          // A spot card's own entry wins over its term card's.
          if (s->name == name || s->general.source.empty()) s->general = g;
        }
        return Status::Ok();
      });
}

}  // namespace gpuhub::catalog
