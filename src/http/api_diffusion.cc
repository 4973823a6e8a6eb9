// Diffusion sizing (sizing/diffusion.h, fit/diffusion_report.h), public and stateless like
// POST /v1/size:
//   POST /v1/size/diffusion {"model": "sdxl", "width"?, "height"?, "resolution"?, "frames"?,
//        "batch"?, "precision"?, "text_encoder_precision"?, "offload"?, "text_encoder_cpu"?}
//        -> 200 the memory at each stage and the peak, every figure with its formula
//   GET  /v1/diffusion-models -> 200 {"models": [...]}: the bundled models the route accepts
#include <memory>

#include "http/api.h"

#ifdef GPUHUB_HAVE_FIT
#include "fit/diffusion_report.h"
#include "sizing/diffusion.h"
#endif

namespace gpuhub::http {

void RegisterDiffusionRoutes(Router& router, ApiContext&, const std::string& data_dir) {
#ifdef GPUHUB_HAVE_FIT
  auto models = sizing::ListDiffusionModels(data_dir);
  auto listing = std::make_shared<std::string>(
      fit::DiffusionModelsJson(models.ok() ? *models : std::vector<sizing::DiffusionModel>{}));
  router.Add("GET", "/v1/diffusion-models", [listing](const Request&, Responder respond) {
    Response r = Response::Json(200, *listing);
    r.headers.emplace_back("Cache-Control", "public, max-age=60");
    respond(std::move(r));
  });
  router.Add("POST", "/v1/size/diffusion", [data_dir](const Request& r, Responder respond) {
    Status checked = CheckJsonBody(r);
    if (!checked.ok()) return respond(Response::Error(checked));
    auto out = fit::HandleDiffusionSizeJson(r.body, data_dir);
    respond(out.ok() ? Response::Json(200, std::move(*out)) : Response::Error(out.status()));
  });
#else
  (void)data_dir;
  auto unavailable = [](const Request&, Responder respond) {
    respond(Response::Error(503, "unavailable", "the sizing engine is not built in"));
  };
  router.Add("GET", "/v1/diffusion-models", unavailable);
  router.Add("POST", "/v1/size/diffusion", unavailable);
#endif
}

}  // namespace gpuhub::http
