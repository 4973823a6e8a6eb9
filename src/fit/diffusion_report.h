// Diffusion sizing's faces (sizing/diffusion.h): `gpuhub size --model sdxl ...` and
// POST /v1/size/diffusion, one set of field names:
//   model (required: a bundled diffusion model's id or short name: sdxl, flux-dev, wan-14b, ...),
//   width, height (pixels), frames (video), batch (images or videos per prompt),
//   precision (the denoiser's weights), text_encoder_precision, offload (none, stages, model),
//   text_encoder_cpu (bool).
// The CLI also takes --resolution WxH. Errors are invalid_argument naming the field, not_found for
// an unknown model.
//
// JSON: {"model": {"id", "names", "task", "pipeline", "guidance", "file"},
//        "workload": {"width", "height", "frames", "batch", "precision", "text_encoder_precision",
//                     "offload", "text_encoder_cpu"},
//        "params": {"denoiser", "text_encoders": [...], "vae"},
//        "latent_tokens", "peak_stage", "per_gpu_gb", "card_gb",
//        "components": [{"name", "bytes", "gb", "formula"}] (the peak stage),
//        "outside_allocator": COMPONENT,
//        "stages": [{"name", "gb", "bytes", "components": [...]}],
//        "sources": {"denoiser", "text_encoders": [...], "vae"}, "notes": [...]}
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "sizing/diffusion.h"

namespace gpuhub::fit {

struct DiffusionRequest {
  sizing::DiffusionModel model;
  sizing::DiffusionWorkload workload;
  bool explain = false;
};

// The POST /v1/size/diffusion body.
Result<DiffusionRequest> ParseDiffusionRequestJson(std::string_view body,
                                                   const std::string& data_dir);
// "1024x1024" -> width, height (field "resolution").
Status ParseResolution(std::string_view text, sizing::DiffusionWorkload& workload);

std::string DiffusionReportJson(const DiffusionRequest& request,
                                const sizing::DiffusionEstimate& estimate);
std::string DiffusionReportText(const DiffusionRequest& request,
                                const sizing::DiffusionEstimate& estimate);
// Every bundled diffusion model: {"models": [{"id", "names", "task", "defaults", "params"}]}.
std::string DiffusionModelsJson(const std::vector<sizing::DiffusionModel>& models);

// The whole of POST /v1/size/diffusion.
Result<std::string> HandleDiffusionSizeJson(std::string_view body, const std::string& data_dir);

}  // namespace gpuhub::fit
