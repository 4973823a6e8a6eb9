// GET /healthz (the engine's writer is serving: known from its own bookkeeping when it is, else
// asked with a no-op command whose answer proves the loop is alive) and GET /metrics (Prometheus
// text format 0.0.4).
#include <chrono>

#include "http/api.h"
#include "http/limits.h"
#include "http/payments_runtime.h"

namespace gpuhub::http {

void RegisterSystemRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/healthz", [&api](const Request&, Responder respond) {
    if (api.draining && api.draining()) {
      return respond(Response::Error(503, "unavailable", "the server is shutting down"));
    }
    // Payments: the mode, and for BTCPay where it is and how the last pass went (never the key).
    json payments = {{"mode", "demo"}};
    if (api.payments && !api.payments->demo()) {
      payments = {{"mode", "btcpay"},
                  {"btcpay", api.payments->btcpay->config().Describe()},
                  {"last_reconcile_unix", api.payments->last_reconcile_unix_s.load()},
                  {"last_reconcile_failed_invoices", api.payments->last_reconcile_failed.load()}};
    }
    auto healthy = [payments] {
      Response ok = JsonResponse(200, {{"status", "ok"}, {"details", {{"payments", payments}}}});
      ok.headers.emplace_back("Cache-Control", "no-store");
      return ok;
    };
    // The common case without a round trip through the writer's queue (two thread wake-ups, and
    // a wait behind every queued write: a busy writer must not fail a load balancer's check).
    if (api.engine.Serving(std::chrono::milliseconds(kHealthzMaxBatchMilliseconds))) {
      return respond(healthy());
    }
    api.engine.Execute<int>([](engine::Txn&) -> Result<int> { return 0; },
                            [respond, healthy](Result<int> r) {
                              if (!r.ok()) return respond(Response::Error(r.status()));
                              respond(healthy());
                            });
  });
  router.Add("GET", "/metrics", [&api](const Request&, Responder respond) {
    Response r = Response::Json(200, api.metrics.Render());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    respond(std::move(r));
  });
}

}  // namespace gpuhub::http
