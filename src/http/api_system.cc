// The node itself:
//   GET /healthz         200 on a serving writer (known from the engine's own bookkeeping when it
//                        is, else asked with a no-op command whose answer proves the loop is
//                        alive) and on a standby that reaches the database; the body says which
//                        ("role"), the writer term and this node's payments mode ("details");
//                        header X-Gpuhub-Role.
//   GET /healthz/writer  the same on the writer, 503 on a standby: a load balancer's check for the
//                        backend that takes writes (docs/operations.md).
//   GET /metrics         Prometheus text format 0.0.4, to [metrics] allow or its bearer token.
//   GET /v1/openapi.json the OpenAPI 3.1 document of every route (docs/openapi.json, compiled in).
// and the forwarding of the API from a standby to the writer (proxy.h).
#include <sodium.h>

#include <chrono>
#include <optional>
#include <string>

#include "core/json_writer.h"
#include "http/api.h"
#include "http/limits.h"
#include "http/payments_runtime.h"
#include "http/proxy.h"

namespace gpuhub::http {
namespace {

// The body of a healthy answer, written straight to text (a tree built and dumped per check was a
// third of GET /healthz's instructions, bench/http/profile.sh):
//   {"status":"ok","role":"writer"|"standby","node","term","writer" (standby only: its address or
//    null),"details":{"payments":{"mode":"demo"} | {"mode":"btcpay","btcpay","last_reconcile_unix",
//    "last_reconcile_failed_invoices"}}}
// Payments: the mode, and for BTCPay where it is and how the last pass went (never the key).
std::string HealthBody(const ApiContext& api, bool is_writer, const store::WriterRecord& writer,
                       const std::optional<std::string>& writer_address) {
  std::string out;
  out.reserve(160);
  JsonWriter w(out);
  w.BeginObject();
  w.Key("status").String("ok");
  w.Key("role").String(is_writer ? "writer" : "standby");
  w.Key("node").String(api.engine.node_id());
  w.Key("term").Int(writer.term);
  if (!is_writer) {
    w.Key("writer");
    if (writer_address) {
      w.String(*writer_address);
    } else {
      w.Null();
    }
  }
  w.Key("details").BeginObject().Key("payments").BeginObject();
  if (api.payments && !api.payments->demo()) {
    w.Key("mode").String("btcpay");
    w.Key("btcpay").String(api.payments->btcpay->config().Describe());
    w.Key("last_reconcile_unix").Int(api.payments->last_reconcile_unix_s.load());
    w.Key("last_reconcile_failed_invoices").Int(api.payments->last_reconcile_failed.load());
  } else {
    w.Key("mode").String("demo");
  }
  w.EndObject().EndObject().EndObject();
  return out;
}

// Where a standby forwards writes: null while no other node holds the writer's term.
std::optional<std::string> WriterAddress(const engine::Engine& engine,
                                         const store::WriterRecord& writer) {
  if (writer.term == 0 || writer.node == engine.node_id()) return std::nullopt;
  return writer.address;
}

Response Healthy(std::string body, const char* role) {
  Response ok = Response::Json(200, std::move(body));
  ok.headers.reserve(4);  // these two, X-Request-Id, and one to spare
  ok.headers.emplace_back("Cache-Control", "no-store");
  ok.headers.emplace_back("X-Gpuhub-Role", role);
  return ok;
}

// The answer of a node that is the writer now.
Response WriterHealthy(const ApiContext& api) {
  return Healthy(HealthBody(api, true, api.engine.writer(), std::nullopt), "writer");
}

void Health(ApiContext& api, bool writer_only, Responder respond) {
  if (api.draining && api.draining()) {
    return respond(Response::Error(503, "unavailable", "the server is shutting down"));
  }
  if (api.engine.role() == engine::EngineRole::kStandby) {
    // A standby that cannot reach the database can neither take over nor vouch for anything: not
    // healthy (a load balancer takes it out until its polls succeed again).
    if (Status problem = api.engine.standby_problem(); !problem.ok()) {
      Response r = RetryShortly("this standby cannot reach the database: " + problem.message());
      r.headers.emplace_back("X-Gpuhub-Role", "standby");
      return respond(std::move(r));
    }
    store::WriterRecord writer = api.engine.writer();
    std::optional<std::string> address = WriterAddress(api.engine, writer);
    if (!writer_only) return respond(Healthy(HealthBody(api, false, writer, address), "standby"));
    Response r =
        RetryShortly(address ? "this node is a standby; the writer is " + *address
                             : std::string("this node is a standby; no writer is known yet"));
    r.headers.emplace_back("X-Gpuhub-Role", "standby");
    return respond(std::move(r));
  }
  // The common case without a round trip through the writer's queue (two thread wake-ups, and
  // a wait behind every queued write: a busy writer must not fail a load balancer's check).
  if (api.engine.Serving(std::chrono::milliseconds(kHealthzMaxBatchMilliseconds))) {
    return respond(WriterHealthy(api));
  }
  ApiContext* context = &api;
  api.engine.Execute<int>(
      [](engine::Txn&) -> Result<int> { return 0; },
      [respond, context](Result<int> r) {
        if (!r.ok()) return respond(Response::Error(r.status()));
        const engine::Engine& engine = context->engine;
        if (engine.role() == engine::EngineRole::kWriter) {
          return respond(WriterHealthy(*context));
        }
        store::WriterRecord writer = engine.writer();
        respond(
            Healthy(HealthBody(*context, false, writer, WriterAddress(engine, writer)), "standby"));
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
    return pattern == "/v1/catalog" || pattern == "/v1/openapi.json" || pattern == "/v1/guide" || pattern == "/v1/models" ||
           pattern == "/v1/images" || pattern == "/v1/diffusion-models";
  }
  return method == "POST" &&
         (pattern == "/v1/size" || pattern == "/v1/fit" || pattern == "/v1/size/diffusion");
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
  router.Add("GET", "/metrics", [&api](const Request& request, Responder respond) {
    const std::string& token = api.config.metrics_bearer_token;
    std::string offered = request.BearerToken();
    bool token_ok = !token.empty() && offered.size() == token.size() &&
                    sodium_memcmp(offered.data(), token.data(), token.size()) == 0;
    if (!token_ok && !api.config.metrics_allow.Allows(request.remote_address)) {
      return respond(Response::Error(
          403, "permission_denied",
          "/metrics is served to the addresses in [metrics] allow, or with its bearer token"));
    }
    Response r = Response::Json(200, api.metrics.Render());
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.headers.emplace_back("Cache-Control", "no-store");
    respond(std::move(r));
  });
  // The same bytes for the life of the binary: caches may keep them a while (a new release may
  // change them, hence not immutable).
  router.Add("GET", "/v1/openapi.json", [](const Request&, Responder respond) {
    Response r = Response::Json(200, std::string(OpenApiDocument()));
    r.headers.emplace_back("Cache-Control", "public, max-age=300");
    respond(std::move(r));
  });
}

void RegisterApiRoutes(Router& router, ApiContext& api, const std::string& data_dir) {
  RegisterSystemRoutes(router, api);
  RegisterAccountRoutes(router, api);
  RegisterTotpRoutes(router, api);
  RegisterPayoutDestinationRoutes(router, api);
  RegisterAlertRoutes(router, api);
  RegisterAdminRoutes(router, api);
  RegisterWalletRoutes(router, api);
  RegisterPaymentRoutes(router, api);
  RegisterMarketRoutes(router, api);
  RegisterRentalRoutes(router, api);
  RegisterStorageRoutes(router, api);
  RegisterNotificationRoutes(router, api);
  RegisterAgentRoutes(router, api);
  RegisterSshKeyRoutes(router, api);
  RegisterApiKeyRoutes(router, api);
  RegisterAuditLogRoutes(router, api);
  RegisterBillingRoutes(router, api);
  RegisterReadRoutes(router, api, data_dir);
  RegisterQuoteRequestRoutes(router, api, data_dir);
  RegisterDiffusionRoutes(router, api, data_dir);
}

}  // namespace gpuhub::http
