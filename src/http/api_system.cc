// The node itself:
//   GET /healthz         200 on a serving writer (known from the engine's own bookkeeping when it
//                        is, else asked with a no-op command whose answer proves the loop is
//                        alive) and on a standby that reaches the database; the body says which
//                        ("role"), the writer term and this node's payments mode ("details");
//                        header X-Gpuhub-Role.
//   GET /healthz/writer  the same on the writer, 503 on a standby: a load balancer's check for the
//                        backend that takes writes (docs/operations.md).
//   GET /metrics         Prometheus text format 0.0.4.
// and the forwarding of the API from a standby to the writer (proxy.h).
#include <sodium.h>

#include <chrono>

#include "http/api.h"
#include "http/limits.h"
#include "http/payments_runtime.h"
#include "http/proxy.h"

namespace gpuhub::http {
namespace {

json RoleJson(const engine::Engine& engine) {
  store::WriterRecord writer = engine.writer();
  bool is_writer = engine.role() == engine::EngineRole::kWriter;
  json body = {{"status", "ok"},
               {"role", is_writer ? "writer" : "standby"},
               {"node", engine.node_id()},
               {"term", writer.term}};
  if (!is_writer) {
    body["writer"] = writer.term == 0 || writer.node == engine.node_id() ? json(nullptr)
                                                                         : json(writer.address);
  }
  return body;
}

// Payments: the mode, and for BTCPay where it is and how the last pass went (never the key).
json PaymentsDetails(const ApiContext& api) {
  json payments = {{"mode", "demo"}};
  if (api.payments && !api.payments->demo()) {
    payments = {{"mode", "btcpay"},
                {"btcpay", api.payments->btcpay->config().Describe()},
                {"last_reconcile_unix", api.payments->last_reconcile_unix_s.load()},
                {"last_reconcile_failed_invoices", api.payments->last_reconcile_failed.load()}};
  }
  return payments;
}

Response Healthy(const json& body) {
  Response ok = JsonResponse(200, body);
  ok.headers.emplace_back("Cache-Control", "no-store");
  ok.headers.emplace_back("X-Gpuhub-Role", body["role"].get<std::string>());
  return ok;
}

void Health(ApiContext& api, bool writer_only, Responder respond) {
  if (api.draining && api.draining()) {
    return respond(Response::Error(503, "unavailable", "the server is shutting down"));
  }
  json details = {{"payments", PaymentsDetails(api)}};
  if (api.engine.role() == engine::EngineRole::kStandby) {
    // A standby that cannot reach the database can neither take over nor vouch for anything: not
    // healthy (a load balancer takes it out until its polls succeed again).
    if (Status problem = api.engine.standby_problem(); !problem.ok()) {
      Response r = RetryShortly("this standby cannot reach the database: " + problem.message());
      r.headers.emplace_back("X-Gpuhub-Role", "standby");
      return respond(std::move(r));
    }
    json body = RoleJson(api.engine);
    body["details"] = details;
    if (!writer_only) return respond(Healthy(body));
    Response r = RetryShortly(body["writer"].is_string()
                                  ? "this node is a standby; the writer is " +
                                        body["writer"].get<std::string>()
                                  : std::string("this node is a standby; no writer is known yet"));
    r.headers.emplace_back("X-Gpuhub-Role", "standby");
    return respond(std::move(r));
  }
  // The common case without a round trip through the writer's queue (two thread wake-ups, and
  // a wait behind every queued write: a busy writer must not fail a load balancer's check).
  if (api.engine.Serving(std::chrono::milliseconds(kHealthzMaxBatchMilliseconds))) {
    json body = RoleJson(api.engine);
    body["details"] = details;
    return respond(Healthy(body));
  }
  engine::Engine* engine = &api.engine;
  api.engine.Execute<int>([](engine::Txn&) -> Result<int> { return 0; },
                          [respond, engine, details](Result<int> r) {
                            if (!r.ok()) return respond(Response::Error(r.status()));
                            json body = RoleJson(*engine);
                            body["details"] = details;
                            respond(Healthy(body));
                          });
}

bool SameSecret(const std::string& offered, const std::string& expected) {
  return !expected.empty() && offered.size() == expected.size() &&
         sodium_memcmp(offered.data(), expected.data(), expected.size()) == 0;
}

}  // namespace

bool AnsweredByEveryNode(const std::string& method, const std::string& pattern) {
  if (pattern == "/healthz" || pattern == "/healthz/writer" || pattern == "/metrics") return true;
  if (method == "GET") {
    return pattern == "/v1/catalog" || pattern == "/v1/guide" || pattern == "/v1/models";
  }
  return method == "POST" && (pattern == "/v1/size" || pattern == "/v1/fit");
}

bool ForwardIfStandby(ApiContext& api, const Request& request, Responder& respond) {
  if (api.proxy == nullptr || api.engine.role() == engine::EngineRole::kWriter) return false;
  store::WriterRecord writer = api.engine.writer();
  if (writer.term == 0 || writer.address.empty() || writer.node == api.engine.node_id()) {
    respond(RetryShortly("this node is a standby and no writer is known yet; retry"));
    return true;
  }
  api.proxy->Forward(request, writer.address, writer.proxy_secret, std::move(respond));
  return true;
}

Handler WriterRoute(ApiContext& api, Handler handler) {
  return [&api, handler = std::move(handler)](const Request& request, Responder respond) {
    if (ForwardIfStandby(api, request, respond)) return;
    const std::string& forwarded = request.Header(kClientAddressHeader);
    if (forwarded.empty()) return handler(request, std::move(respond));
    Request copy = request;
    if (SameSecret(request.Header(kProxySecretHeader), api.engine.writer().proxy_secret)) {
      copy.remote_address = forwarded.substr(0, 64);
    }
    copy.headers.erase(kClientAddressHeader);
    copy.headers.erase(kProxySecretHeader);
    handler(copy, std::move(respond));
  };
}

void RegisterSystemRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/healthz", [&api](const Request&, Responder respond) {
    Health(api, false, std::move(respond));
  });
  router.Add("GET", "/healthz/writer", [&api](const Request&, Responder respond) {
    Health(api, true, std::move(respond));
  });
  router.Add("GET", "/metrics", [&api](const Request&, Responder respond) {
    Response r = Response::Json(200, api.metrics.Render());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    respond(std::move(r));
  });
}

}  // namespace gpuhub::http
