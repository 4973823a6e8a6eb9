#include "fit/diffusion_report.h"

#include <set>

#include "core/strings.h"
#include "fit/json_parts.h"
#include "fit/limits.h"
#include "fit/report_text.h"

namespace gpuhub::fit {
namespace {

using namespace json_parts;  // NOLINT: the shared pieces of every report

Status Bad(std::string message, std::string field) {
  return Status::InvalidArgument(std::move(message)).WithField(std::move(field));
}

Json ComponentList(const std::vector<sizing::Component>& components) {
  Json list = Json::array();
  for (const auto& c : components) list.push_back(ComponentJson(c));
  return list;
}

std::string GbText(double bytes) { return FormatFixed(bytes / sizing::kBytesPerGb, 2); }

}  // namespace

Status ParseResolution(std::string_view text, sizing::DiffusionWorkload& w) {
  const auto x = text.find_first_of("xX*");
  auto width = ParseInt64(text.substr(0, x), "width");
  auto height = x == std::string_view::npos ? width : ParseInt64(text.substr(x + 1), "height");
  if (x == std::string_view::npos || !width.ok() || !height.ok() || *width < 1 || *height < 1 ||
      *width > 100'000 || *height > 100'000) {
    return Bad("resolution must be WIDTHxHEIGHT in pixels, like 1024x1024 or 1280x720, got '" +
                   std::string(text.substr(0, 40)) + "'",
               "resolution");
  }
  w.width = static_cast<int>(*width);
  w.height = static_cast<int>(*height);
  return Status::Ok();
}

Result<DiffusionRequest> ParseDiffusionRequestJson(std::string_view body,
                                                   const std::string& data_dir) {
  if (body.size() > kMaxRequestJsonBytes) {
    return Status::InvalidArgument("the request is larger than " +
                                   std::to_string(kMaxRequestJsonBytes) + " bytes");
  }
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument("the body must be a JSON object such as {\"model\": \"sdxl\", "
                                   "\"width\": 1024, \"height\": 1024}");
  }
  static const std::set<std::string> kFields = {
      "model",     "width",     "height",  "frames", "batch", "precision", "text_encoder_precision",
      "offload",   "text_encoder_cpu", "explain", "resolution"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!kFields.contains(it.key())) {
      return Bad("unknown field '" + it.key().substr(0, 40) + "' (fields: model, width, height, "
                 "resolution, frames, batch, precision, text_encoder_precision, offload, "
                 "text_encoder_cpu)",
                 it.key().substr(0, 64));
    }
  }
  auto text = [&](const char* f) -> Result<std::optional<std::string>> {
    if (!j.contains(f) || j[f].is_null()) return std::optional<std::string>();
    if (!j[f].is_string()) return Bad(std::string(f) + " must be a string", f);
    return std::optional<std::string>(j[f].get<std::string>());
  };
  auto integer = [&](const char* f, std::int64_t max) -> Result<std::optional<std::int64_t>> {
    if (!j.contains(f) || j[f].is_null()) return std::optional<std::int64_t>();
    if (!j[f].is_number_integer() || j[f].get<std::int64_t>() < 1 || j[f].get<std::int64_t>() > max) {
      return Bad(std::string(f) + " must be an integer from 1 to " + std::to_string(max), f);
    }
    return std::optional<std::int64_t>(j[f].get<std::int64_t>());
  };
  auto flag = [&](const char* f) -> Result<bool> {
    if (!j.contains(f) || j[f].is_null()) return false;
    if (!j[f].is_boolean()) return Bad(std::string(f) + " must be true or false", f);
    return j[f].get<bool>();
  };
  DiffusionRequest r;
  GPUHUB_ASSIGN_OR_RETURN(auto model, text("model"));
  if (!model) return Bad("model is required: a bundled diffusion model (sdxl, flux-dev, ...)", "model");
  GPUHUB_ASSIGN_OR_RETURN(r.model, sizing::FindDiffusionModel(*model, data_dir));
  GPUHUB_ASSIGN_OR_RETURN(auto resolution, text("resolution"));
  if (resolution) {
    GPUHUB_RETURN_IF_ERROR(ParseResolution(*resolution, r.workload));
  }
  for (auto [f, target] : {std::pair{"width", &r.workload.width}, std::pair{"height", &r.workload.height},
                           std::pair{"frames", &r.workload.frames}}) {
    GPUHUB_ASSIGN_OR_RETURN(auto v, integer(f, 100'000));
    if (v) {
      if (resolution && std::string_view(f) != "frames") {
        return Bad("give resolution or width and height, not both", f);
      }
      *target = static_cast<int>(*v);
    }
  }
  GPUHUB_ASSIGN_OR_RETURN(auto batch, integer("batch", 1'000'000));
  if (batch) r.workload.batch = *batch;
  for (auto [f, target] : {std::pair{"precision", &r.workload.precision},
                           std::pair{"text_encoder_precision", &r.workload.text_encoder_precision}}) {
    GPUHUB_ASSIGN_OR_RETURN(auto v, text(f));
    if (!v) continue;
    auto p = sizing::ParsePrecision(*v);
    if (!p.ok()) return Bad(std::string(f) + ": " + p.status().message(), f);
    *target = *p;
  }
  GPUHUB_ASSIGN_OR_RETURN(auto offload, text("offload"));
  if (offload) {
    GPUHUB_ASSIGN_OR_RETURN(r.workload.offload, sizing::ParseOffload(*offload));
  }
  GPUHUB_ASSIGN_OR_RETURN(r.workload.text_encoder_cpu, flag("text_encoder_cpu"));
  GPUHUB_ASSIGN_OR_RETURN(r.explain, flag("explain"));
  return r;
}

std::string DiffusionReportJson(const DiffusionRequest& r, const sizing::DiffusionEstimate& e) {
  const sizing::DiffusionModel& m = r.model;
  const sizing::DiffusionWorkload& w = r.workload;
  Json j;
  j["model"] = {{"id", m.id},
                {"names", m.names},
                {"task", m.task},
                {"pipeline", m.pipeline},
                {"guidance", sizing::GuidanceName(m.guidance)},
                {"file", m.source_file}};
  Json encoders = Json::array(), sources = Json::array();
  for (const auto& t : m.text_encoders) {
    encoders.push_back({{"name", t.name}, {"params", sizing::TextEncoderParams(t)}});
    sources.push_back(t.source);
  }
  j["workload"] = {
      {"width", e.width},
      {"height", e.height},
      {"frames", e.frames},
      {"batch", e.batch},
      {"precision", sizing::PrecisionName(w.precision.value_or(m.denoiser.precision))},
      {"text_encoder_precision",
       w.text_encoder_precision ? Json(sizing::PrecisionName(*w.text_encoder_precision)) : Json()},
      {"offload", sizing::OffloadName(w.offload)},
      {"text_encoder_cpu", w.text_encoder_cpu}};
  j["params"] = {{"denoiser", sizing::DenoiserParams(m.denoiser)},
                 {"text_encoders", encoders},
                 {"vae", sizing::VaeParams(m.vae)}};
  j["latent_tokens"] = e.latent_tokens;
  j["peak_stage"] = e.peak_stage;
  j["per_gpu_gb"] = Gb(e.memory.per_gpu_bytes);
  j["card_gb"] = Gb(e.memory.card_bytes());
  j["components"] = ComponentList(e.memory.components);
  j["outside_allocator"] = OutsideAllocatorJson(e.memory);
  Json stages = Json::array();
  for (const auto& s : e.stages) {
    stages.push_back({{"name", s.name},
                      {"gb", Gb(s.bytes)},
                      {"bytes", s.bytes},
                      {"components", ComponentList(s.components)}});
  }
  j["stages"] = std::move(stages);
  j["sources"] = {{"denoiser", m.denoiser.source}, {"text_encoders", sources}, {"vae", m.vae.source}};
  j["notes"] = Strings(e.memory.notes);
  return j.dump(2);
}

std::string DiffusionReportText(const DiffusionRequest& r, const sizing::DiffusionEstimate& e) {
  const sizing::DiffusionModel& m = r.model;
  std::string out = m.id + ", " + std::to_string(e.width) + "x" + std::to_string(e.height) +
                    (m.task == "video" ? ", " + std::to_string(e.frames) + " frames" : "") + ", " +
                    std::to_string(e.batch) + (m.task == "video" ? " video" : " image") +
                    (e.batch == 1 ? "" : "s") + ", denoiser " +
                    std::string(sizing::PrecisionName(
                        r.workload.precision.value_or(m.denoiser.precision))) +
                    ", offload " + std::string(sizing::OffloadName(r.workload.offload)) + "\n";
  out += "pipeline: " + m.pipeline + "\n";
  out += "peak at the " + e.peak_stage + " stage:\n";
  std::vector<std::string> header = {"component", "GB"};
  if (r.explain) header.push_back("formula");
  TextTable table(header, {TextTable::Align::kLeft, TextTable::Align::kRight});
  for (const auto& c : e.memory.components) {
    std::vector<std::string> row = {c.name, GbText(c.bytes)};
    if (r.explain) row.push_back(c.formula);
    table.AddRow(row);
  }
  out += table.Render();
  out += "\n  total: " + GbText(e.memory.per_gpu_bytes) + " GB\n";
  out += "  + " + e.memory.outside_allocator.name + " " + GbText(e.memory.outside_allocator.bytes) +
         " GB outside the framework's allocator: " + GbText(e.memory.card_bytes()) +
         " GB on the card\n";
  out += "\nstages:";
  for (const auto& s : e.stages) out += " " + s.name + " " + GbText(s.bytes) + " GB;";
  out.back() = '\n';
  if (r.explain) {
    out += "\nshapes:\n  denoiser: " + m.denoiser.source + "\n";
    for (const auto& t : m.text_encoders) out += "  " + t.name + ": " + t.source + "\n";
    out += "  VAE: " + m.vae.source + "\n";
  }
  if (!e.memory.notes.empty()) {
    out += "\n";
    for (const auto& n : e.memory.notes) out += "  note: " + n + "\n";
  }
  return out;
}

std::string DiffusionModelsJson(const std::vector<sizing::DiffusionModel>& models) {
  Json list = Json::array();
  for (const auto& m : models) {
    list.push_back({{"id", m.id},
                    {"names", m.names},
                    {"task", m.task},
                    {"defaults",
                     {{"width", m.default_width},
                      {"height", m.default_height},
                      {"frames", m.default_frames}}},
                    {"denoiser_params", sizing::DenoiserParams(m.denoiser)}});
  }
  return Json({{"models", list}}).dump(2);
}

Result<std::string> HandleDiffusionSizeJson(std::string_view body, const std::string& data_dir) {
  GPUHUB_ASSIGN_OR_RETURN(DiffusionRequest r, ParseDiffusionRequestJson(body, data_dir));
  GPUHUB_ASSIGN_OR_RETURN(sizing::DiffusionEstimate e,
                          sizing::EstimateDiffusionMemory(r.model, r.workload));
  return DiffusionReportJson(r, e);
}

}  // namespace gpuhub::fit
