// The public read API, the same JSON as the CLI's --json (src/fit/report_json.h):
//   GET /v1/catalog, POST /v1/size, POST /v1/fit, GET /v1/guide,
//   GET /v1/models (the presets and bundled model ids POST /v1/size and /v1/fit accept),
//   POST /v1/plan (fit/plan_report.h: hours and cost to finish, spot at the book's live asks),
//   GET /v1/use-cases/{training|fine-tuning|inference|image-video|rendering|science}
//       (fit/use_cases.h, "from $X/h" live)
// Pure computations over the catalog loaded at start; plan (and fit with "prices": "market")
// read the exchange's book through the engine first.
#include <memory>

#include "http/api.h"

#ifdef GPUHUB_HAVE_FIT
#include "catalog/catalog.h"
#include "engine/market.h"
#include "fit/guide.h"
#include "fit/market_fit.h"
#include "fit/plan_report.h"
#include "fit/use_cases.h"
#include "fit/report_json.h"
#include "market/exchange.h"
#endif

namespace gpuhub::http {

#ifdef GPUHUB_HAVE_FIT
namespace {

struct ReadData {
  std::string data_dir;
  std::optional<catalog::Catalog> catalog;
  // POST /v1/fit's catalog figures of each card and count, written once (fit/report_json.h).
  std::optional<fit::ConfigTexts> config_texts;
  std::string catalog_json;
  std::string guide_json;
  std::string models_json;
  // The use-case views without prices, built once (they size every bundled model on every card).
  std::vector<fit::UseCaseView> use_cases;
  Status error;
};

Response Cached(const std::string& body) {
  Response r = Response::Json(200, body);
  r.headers.emplace_back("Cache-Control", "public, max-age=60");
  return r;
}

// POST /v1/plan: the book's offers are read on the writer (a consistent snapshot), the plan runs
// in the completion (pure, a few milliseconds); the start is the server's clock.
void PlanOnTheBook(ApiContext& api, std::shared_ptr<ReadData> data, std::string body,
                   Responder respond) {
  api.engine.Execute<std::vector<market::Offer>>(
      [](engine::Txn& txn) { return txn.state.market->exchange.Offers("", txn.now); },
      [&api, data = std::move(data), body = std::move(body),
       respond = std::move(respond)](Result<std::vector<market::Offer>> offers) {
        if (!offers.ok()) return respond(Response::Error(offers.status()));
        auto out = fit::HandlePlanJson(body, data->data_dir, *data->catalog, FitOffers(*offers),
                                       /*live=*/true, api.engine.clock().NowMicros());
        respond(out.ok() ? Response::Json(200, *out) : Response::Error(out.status()));
      });
}

// GET /v1/use-cases/{use}: the prebuilt view with the book's best asks as "from $X/h".
void UseCaseOnTheBook(ApiContext& api, std::shared_ptr<ReadData> data, fit::UseCase use,
                      Responder respond) {
  api.engine.Execute<std::vector<market::Offer>>(
      [](engine::Txn& txn) { return txn.state.market->exchange.Offers("", txn.now); },
      [data = std::move(data), use,
       respond = std::move(respond)](Result<std::vector<market::Offer>> offers) {
        if (!offers.ok()) return respond(Response::Error(offers.status()));
        for (const auto& view : data->use_cases) {
          if (view.use != use) continue;
          fit::UseCaseView priced = view;
          fit::ApplySpotPrices(*data->catalog, FitOffers(*offers), /*live=*/true, priced);
          return respond(Response::Json(200, fit::UseCaseJson(priced)));
        }
        respond(Response::Error(503, "unavailable", "the use-case views are not built"));
      });
}

}  // namespace

void RegisterReadRoutes(Router& router, ApiContext& api, const std::string& data_dir) {
  auto data = std::make_shared<ReadData>();
  data->data_dir = data_dir;
  auto loaded = catalog::LoadCatalog(data_dir + "/catalog.toml");
  if (loaded.ok()) {
    data->catalog = std::move(loaded).value();
    // A logical name: the answer must not tell clients where the server keeps its files.
    data->catalog->source = "catalog.toml";
    data->catalog_json = fit::CatalogJson(*data->catalog);
    data->config_texts.emplace(*data->catalog);
    auto guide = fit::BuildGuide(*data->catalog);
    if (guide.ok()) {
      data->guide_json = fit::GuideJson(*guide);
    } else {
      data->error = guide.status();
    }
  } else {
    data->error = loaded.status();
  }
  // The bundled configs are read once: the model picker of the pages lists them.
  auto bundled = sizing::ListBundledModels(data_dir);
  data->models_json =
      fit::ModelsJson(bundled.ok() ? *bundled : std::vector<sizing::BundledModel>{});
  auto diffusion = sizing::ListDiffusionModels(data_dir);
  if (data->catalog && bundled.ok()) {
    for (fit::UseCase use : fit::kUseCases) {
      auto view = fit::BuildUseCase(
          *data->catalog, *bundled, use,
          diffusion.ok() ? *diffusion : std::vector<sizing::DiffusionModel>{});
      if (view.ok()) data->use_cases.push_back(std::move(*view));
    }
  }
  auto unavailable = [data] {
    return Response::Error(503, "unavailable",
                           "the catalog is not loaded: " + data->error.message());
  };
  router.Add("GET", "/v1/catalog", [data, unavailable](const Request&, Responder respond) {
    if (!data->catalog) return respond(unavailable());
    respond(Cached(data->catalog_json));
  });
  router.Add("GET", "/v1/guide", [data, unavailable](const Request&, Responder respond) {
    if (data->guide_json.empty()) return respond(unavailable());
    respond(Cached(data->guide_json));
  });
  router.Add("GET", "/v1/models",
             [data](const Request&, Responder respond) { respond(Cached(data->models_json)); });
  router.Add("POST", "/v1/size", [data](const Request& r, Responder respond) {
    Status checked = CheckJsonBody(r);
    if (!checked.ok()) return respond(Response::Error(checked));
    auto out = fit::HandleSizeJson(r.body, data->data_dir);
    respond(out.ok() ? Response::Json(200, std::move(*out)) : Response::Error(out.status()));
  });
  router.Add("POST", "/v1/fit", [data, unavailable, &api](const Request& r, Responder respond) {
    if (!data->catalog) return respond(unavailable());
    Status checked = CheckJsonBody(r);
    if (!checked.ok()) return respond(Response::Error(checked));
    // "prices": "market" fits on the spot exchange's live offers (api_market.cc).
    std::string body = r.body;
    auto market = TakePricesField(&body);
    if (!market.ok()) return respond(Response::Error(market.status()));
    if (*market) {
      if (ForwardIfStandby(api, r, respond)) return;  // the book lives on the writer
      return FitOnMarketPrices(api, std::shared_ptr<const catalog::Catalog>(data, &*data->catalog),
                               data->data_dir, std::move(body), std::move(respond));
    }
    auto out = fit::HandleFitJson(body, data->data_dir, *data->catalog, &*data->config_texts);
    respond(out.ok() ? Response::Json(200, std::move(*out)) : Response::Error(out.status()));
  });
  router.Add("GET", "/v1/use-cases/{use}",
             [data, unavailable, &api](const Request& r, Responder respond) {
               if (!data->catalog) return respond(unavailable());
               auto use = fit::ParseUseCase(r.path_params.at("use"));
               if (!use.ok()) {
                 return respond(Response::Error(404, "not_found", use.status().message()));
               }
               UseCaseOnTheBook(api, data, *use, std::move(respond));
             });
  router.Add("POST", "/v1/plan", [data, unavailable, &api](const Request& r, Responder respond) {
    if (!data->catalog) return respond(unavailable());
    Status checked = CheckJsonBody(r);
    if (!checked.ok()) return respond(Response::Error(checked));
    PlanOnTheBook(api, data, r.body, std::move(respond));
  });
}

#else

void RegisterReadRoutes(Router& router, ApiContext&, const std::string&) {
  auto unavailable = [](const Request&, Responder respond) {
    respond(Response::Error(503, "unavailable", "the sizing and fit engine is not built in yet"));
  };
  router.Add("GET", "/v1/catalog", unavailable);
  router.Add("GET", "/v1/guide", unavailable);
  router.Add("GET", "/v1/models", unavailable);
  router.Add("POST", "/v1/size", unavailable);
  router.Add("POST", "/v1/fit", unavailable);
  router.Add("POST", "/v1/plan", unavailable);
  router.Add("GET", "/v1/use-cases/{use}", unavailable);
}

#endif

}  // namespace gpuhub::http
