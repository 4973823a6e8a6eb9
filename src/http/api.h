// The JSON API's shared machinery, for the route files (api_*.cc). Internal to src/http.
//
// Each domain registers its routes in its own file (RegisterAccountRoutes, RegisterWalletRoutes,
// ...); the spot exchange and the web pages add theirs the same way. Handlers turn a request into
// an engine command through RunAuthenticated / RunAnonymous, which take care of the bearer token,
// roles, Idempotency-Key (Stripe's semantics, engine/idempotency.h) and the JSON error shape.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "engine/accounts.h"
#include "engine/api_keys.h"
#include "engine/audit_log.h"
#include "engine/billing.h"
#include "engine/engine.h"
#include "engine/idempotency.h"
#include "engine/topups.h"
#include "engine/totp.h"
#include "engine/metrics.h"
#include "http/config.h"
#include "http/limits.h"
#include "http/login_throttle.h"
#include "http/rate_limit.h"
#include "http/router.h"

namespace gpuhub::catalog {
struct Catalog;
}
namespace gpuhub::fit {
struct MarketOffer;
}
namespace gpuhub::market {
struct Offer;
}
namespace gpuhub::rentals {
struct TaxBlock;
struct Rental;
}

namespace gpuhub::store {
class ReadPool;
}  // namespace gpuhub::store

namespace gpuhub::http {

using json = nlohmann::ordered_json;
struct PaymentsRuntime;  // http/payments_runtime.h

// Idempotency keys whose first request is still running. A concurrent duplicate either gets the
// stored answer or 409 (Run), or waits for the first to finish (InsertOrWait: a request whose slow
// part calls out, such as a BTCPay top-up, must not run twice).
class InFlightKeys {
 public:
  bool Insert(const std::string& key);
  enum class Claim { kMine, kWaiting, kBusy };
  // kMine: the key was free and is now held by the caller. kWaiting: another request holds it;
  // `on_release` runs once (on the releasing thread, after the holder's answer is stored) when
  // it is erased. kBusy: too many requests already wait for it (kMaxWaitersPerKey).
  Claim InsertOrWait(const std::string& key, std::function<void()> on_release);
  // Releases the key and runs what waited for it (outside the lock).
  void Erase(const std::string& key);

 private:
  std::mutex mutex_;
  std::set<std::string> keys_;
  std::map<std::string, std::vector<std::function<void()>>> waiters_;
};

class WriterProxy;
class RegistrySealer;
class DesiredWaiters;  // http/desired_waiters.h
class StorageReconciler;  // http/storage_reconciler.h

struct ApiContext {
  ApiContext(engine::Engine& engine, engine::MetricsRegistry& metrics, const ServiceConfig& config)
      : engine(engine),
        metrics(metrics),
        config(config),
        hashers(config.hash_threads, kHashQueue()),
        logins(config.login_throttle),
        login_attempts_by_address(config.login_attempts_per_address),
        signups_by_address(config.signups_per_address),
        renderers(kRenderThreads, kRenderQueue()),
        history_readers(kHistoryReadThreads, kHistoryReadQueue()) {}
  static std::size_t kHashQueue();
  static std::size_t kRenderQueue();
  static std::size_t kHistoryReadQueue();
  static constexpr int kRenderThreads = 1;
  static constexpr int kHistoryReadThreads = 2;

  engine::Engine& engine;
  engine::MetricsRegistry& metrics;
  const ServiceConfig& config;
  WorkerPool hashers;
  LoginThrottle logins;
  RateLimiter login_attempts_by_address;
  RateLimiter signups_by_address;
  RateLimiter agent_requests_by_host{RateLimit{kMaxAgentRequestsPerSecond, 1}};
  RateLimiter enrolments_by_address{RateLimit{kMaxEnrolmentsPerAddressPerMinute, 60}};
  WorkerPool renderers;  // invoice PDFs and pages, off the writer and the I/O threads
  // History reads (closed market records, pages of history lists): on these threads, through
  // `history` (read-only connections of its own), never on the writer's thread or connection.
  WorkerPool history_readers;
  // Admin requests whose caller the writer has confirmed an admin (AdminOnly), run here: their
  // handlers parse and submit as on an I/O thread, which the writer's completion must not do.
  WorkerPool admin_requests{1, kMaxQueuedAdminRequests};
  store::ReadPool* history = nullptr;  // set by serve
  InFlightKeys in_flight;
  ManualClock* manual_clock = nullptr;  // set with --clock manual
  std::function<bool()> draining;       // the server is shutting down
  PaymentsRuntime* payments = nullptr;  // BTCPay client, reconciliation (set by serve)
  WriterProxy* proxy = nullptr;         // a standby forwards through it (proxy.h); null: no HA
  // Seals and opens customers' registry credentials (registry_auth.h; set by serve). Null: an
  // order with a credential is refused.
  const RegistrySealer* registry_sealer = nullptr;
  // The agents' parked long-polls (set by serve); null: GET /v1/agent/desired never waits.
  DesiredWaiters* desired_waiters = nullptr;
  // Applies network volumes to the Ceph regions (storage_reconciler.h; set by serve when a
  // [storage.regions.<REGION>] is configured): woken by the volume commands, asked for the
  // regions' pool size and health.
  StorageReconciler* storage_reconciler = nullptr;
};

// Who a request says it is, read from it on the I/O thread (CallerOf) for the writer to check
// (AuthenticateCaller): a session token (bearer or cookie) or an API key ("Bearer ghk_...").
struct Caller {
  std::string token_hash;       // "" when the request carries no credential
  bool api_key = false;         // the bearer token is an API key
  std::uint32_t scopes_needed = 0;  // for an API key: what the route needs (api_key_scopes.h)
  bool session_only = false;    // for an API key: the route is closed to keys (`why`)
  std::string why;
  std::string remote_address;   // the client (a standby's forwarded address on the writer)
};
Caller CallerOf(const Request& request);
// The account behind the caller, on the writer thread. For an API key also: unauthenticated when
// it is unknown, revoked or expired; permission_denied when the route is closed to keys, the
// client is outside the key's networks, or the key lacks a scope the route needs (each message
// says which). `key` is set for an API key.
struct AuthenticatedCaller {
  engine::User user;
  std::optional<engine::ApiKey> key;
};
Result<AuthenticatedCaller> AuthenticateCaller(const engine::Txn& txn, const Caller& caller);

// What the audit log records of a request (engine/audit_log.h), read on the I/O thread: the
// client's address, User-Agent (cut further by the engine), request id, and whether the route is
// an admin route (an admin's session there is the actor "admin:<id>").
struct AuditSeen {
  std::string remote_address;
  std::string user_agent;
  std::string request_id;
  bool admin_route = false;
};
AuditSeen AuditSeenOf(const Request& request);
// The origin of an authenticated caller's events: "api_key:<id>", "admin:<id>" or "user:<id>".
engine::AuditOrigin AuditOriginOf(const AuditSeen& seen, const AuthenticatedCaller& caller);

// What an action returns on success: a status and a JSON body.
struct Reply {
  int status = 200;
  json body;
  // false: not stored under the Idempotency-Key (engine::StoredResponse::replayable).
  bool replayable = true;
  // When not empty: the body, written already (core/json_writer.h's JsonWriter for hot answers);
  // `body` is then not used.
  std::string serialized;
};
using UserAction = std::function<Result<Reply>(engine::Txn&, const engine::User&)>;
using AnonymousAction = std::function<Result<Reply>(engine::Txn&)>;

// Wraps a handler of an authenticated endpoint: a request without any bearer token is answered
// 401 before its body is even looked at (a forged token is caught by RunAuthenticated).
Handler RequireBearer(Handler handler);
// An admin route (every /v1/admin/ path; serve's router wrapper applies it): 401 without a token,
// 403 unless the token is an admin's, both before the request's body or query is looked at (a
// customer learns nothing of what the route would accept). Then `handler` runs as before, on
// api.admin_requests (503 when kMaxQueuedAdminRequests wait), and checks the role again itself.
Handler AdminOnly(ApiContext& api, Handler handler);
// 401 unauthenticated with `message` and WWW-Authenticate: Bearer.
Response BearerChallenge(std::string_view message);

// Authenticates the bearer token on the writer thread, checks that the user has one of
// `any_of_roles` (0: any signed-in user), then runs `action`. For POST with an Idempotency-Key the
// response is stored and replayed per Stripe's rules.
// `idempotent` false: the Idempotency-Key header is ignored, for answers that carry a secret that
// must never be stored for replay (an enrolment token). `key_reserved`: the caller already holds
// InFlightId(request, key) in api.in_flight (it reserved the key before slow work, such as a call
// to BTCPay); it is released when the answer is ready.
void RunAuthenticated(ApiContext& api, const Request& request, Responder respond,
                      std::uint32_t any_of_roles, UserAction action, bool idempotent = true,
                      bool key_reserved = false);
// Authenticates on the writer (bearer token, CSRF, roles as RunAuthenticated) and calls `next`
// with the user once the writer answered (on the writer's thread: `next` must only hand work on,
// never block); errors are answered through `respond`.
void AuthenticateThen(ApiContext& api, const Request& request, Responder respond,
                      std::uint32_t any_of_roles,
                      std::function<void(const engine::User&, Responder)> next);
// The same without a user (scope "anonymous"); `idempotent` honours Idempotency-Key.
// `key_reserved`: the caller already put InFlightId(request, key) in api.in_flight (because it did
// slow work first, such as hashing a password); it is released when the response is ready.
void RunAnonymous(ApiContext& api, const Request& request, Responder respond, bool idempotent,
                  AnonymousAction action, bool key_reserved = false);
// For a handler that reserves its (valid) Idempotency-Key before slow work and finds it held by
// another request: the stored answer once the key's first request finished (a retry always
// replays), else 409 "still being processed".
void ReplayAnonymousOr409(ApiContext& api, const Request& request, Responder respond);

// The request's JSON object: CheckJsonBody, then an object with only `allowed` fields.
Result<json> ParseJsonObject(const Request& request,
                             std::initializer_list<std::string_view> allowed);
// Typed field access with messages naming the field.
Result<std::string> RequiredString(const json& object, std::string_view field);
Result<std::optional<std::string>> OptionalString(const json& object, std::string_view field);
Result<std::int64_t> RequiredInteger(const json& object, std::string_view field, std::int64_t min,
                                     std::int64_t max);
// Whether a Content-Type value is application/json, parameters (charset) allowed, any case.
bool IsJsonMediaType(std::string_view content_type);
// A JSON request body must say so: Content-Type application/json (IsJsonMediaType). None, or any
// other type (text/plain, a cross-site HTML form, application/jsonx) is a 400.
Status CheckJsonContentType(const Request& request);
// invalid_argument when deeper than max_depth (scans brackets outside strings).
Status CheckJsonDepth(std::string_view text, int max_depth);
// A JSON text as a request body: no NUL byte (the parser would stop there and ignore what
// follows), at most kMaxJsonDepth deep, no object naming a member twice (http/json_keys.h).
Status CheckJsonText(std::string_view text);
// CheckJsonContentType and CheckJsonText: every JSON body goes through it before parsing.
Status CheckJsonBody(const Request& request);

Response JsonResponse(int status, const json& body);
std::string Dump(const json& body);
Response TooManyRequests(std::int64_t retry_after_seconds, std::string_view what);
// An idempotency scope + key that is unique per caller, for InFlightKeys.
std::string InFlightId(const Request& request, const std::string& key);
// How an Idempotency-Key recognises its request (engine/idempotency.h). A JSON body counts by its
// parameters: current = kCanonicalFingerprintPrefix + SHA-256 of method, path and the body parsed
// and dumped with sorted keys and no whitespace, so reordered fields or other spacing are the same
// request. A body that is not JSON (or is nested too deep to be accepted) counts by its bytes:
// current = legacy = SHA-256 of method, path and the raw body, the only form earlier versions
// stored, which is why legacy is always set.
inline constexpr std::string_view kCanonicalFingerprintPrefix = "json1:";
engine::Fingerprint RequestFingerprint(const Request& request);
// A list's `?<name>=N` query parameter: `fallback` when absent, else an integer 1..max;
// anything else is invalid_argument ("limit must be 1..500").
Result<std::size_t> LimitQuery(const Request& r, const char* name, std::size_t fallback,
                               std::size_t max);

// A positive id from the path's {id}; not_found otherwise ("no lease 'abc'").
Result<std::int64_t> IdParam(const Request& r, const char* what);
// The endpoints that act on the id in their path take no body: an empty one or `{}`. Anything
// else (`{"refund": true}` on a stop) is refused rather than silently ignored.
Result<std::int64_t> IdOnly(const Request& r, const char* what);
// The id in the path and a JSON body of `allowed` fields (an empty body reads as {}).
struct IdAnd {
  std::int64_t id = 0;
  json body;
};
Result<IdAnd> IdAndBody(const Request& r, const char* what,
                        std::initializer_list<std::string_view> allowed);
// An optional boolean field (absent or null: `fallback`); anything else is invalid_argument.
Result<bool> OptionalBool(const json& body, std::string_view field, bool fallback);
// The optional "currency" field: USD, EUR or GBP, the wallet that pays (absent: `fallback`).
Result<Currency> OptionalCurrency(const json& body, Currency fallback);
struct Empty {};
inline Result<Empty> NoInput(const Request&) { return Empty{}; }

// Parses in the I/O thread (so a bad body never reaches the writer), then runs `action` as the
// signed-in user with one of `roles` (0: any).
template <typename Spec>
Handler Authenticated(
    ApiContext& api, std::uint32_t roles, std::function<Result<Spec>(const Request&)> parse,
    std::function<Result<Reply>(engine::Txn&, const engine::User&, const Spec&)> action,
    bool idempotent = true) {
  return RequireBearer([&api, roles, parse = std::move(parse), action = std::move(action),
                        idempotent](const Request& r, Responder respond) {
    auto spec = parse(r);
    if (!spec.ok()) return respond(Response::Error(spec.status()));
    RunAuthenticated(
        api, r, std::move(respond), roles,
        [spec = std::move(spec).value(), action](engine::Txn& txn, const engine::User& me) {
          return action(txn, me, spec);
        },
        idempotent);
  });
}

json UserJson(const engine::User& user);
// A top-up invoice as GET /v1/topups/{id} shows it (api_payments.cc); a demo invoice's checkout
// URL is `checkout_base` + its id.
json InvoiceJson(const engine::Invoice& invoice, const std::string& checkout_base);
// Creates the invoice at BTCPay Server (BTCPay mode only; blocking: call it on a worker of
// api.payments, never on an I/O thread or the writer). unavailable when BTCPay refuses or cannot
// be reached (nothing is recorded then).
Result<engine::ProcessorLink> CreateBtcpayInvoice(ApiContext& api, std::int64_t user_id,
                                                  Currency currency, std::int64_t amount_micros);
// Opens a top-up invoice for the user the way POST /v1/topups does (at BTCPay, then recorded; or
// a demo invoice) and calls `done` with it or the error (from any thread).
void OpenTopup(ApiContext& api, std::int64_t user_id, Currency currency,
               std::int64_t amount_micros, std::function<void(Result<engine::Invoice>)> done);

// High availability (proxy.h). On a standby, forwards `request` to the writer, answers through
// `respond` and returns true; on the writer returns false and leaves `respond` alone.
bool ForwardIfStandby(ApiContext& api, const Request& request, Responder& respond);
// A route that needs the writer's state: forwarded from a standby; on the writer, the client
// address a standby forwarded is trusted (for the per-address limits) only with the writer's
// current proxy secret.
Handler WriterRoute(ApiContext& api, Handler handler);
// Routes every node answers itself (no state, or about the node itself): /healthz, /metrics and
// the stateless read API. POST /v1/fit forwards itself when it needs the market's prices.
bool AnsweredByEveryNode(const std::string& method, const std::string& pattern);

// Every route `gpuhub serve` answers, in its order (each domain's Register*Routes below); the
// OpenAPI coverage test (openapi_routes_test.cc) builds the same router.
void RegisterApiRoutes(Router& router, ApiContext& api, const std::string& data_dir);
// docs/openapi.json as compiled into the binary (cmake/embed_text.cmake), served at
// GET /v1/openapi.json.
std::string_view OpenApiDocument();

// Route registration, one function per domain file.
void RegisterSystemRoutes(Router& router, ApiContext& api);
void RegisterAccountRoutes(Router& router, ApiContext& api);
// Two-factor sign-in and the password (api_totp.cc); payout destinations
// (api_payout_destinations.cc).
void RegisterTotpRoutes(Router& router, ApiContext& api);
void RegisterPayoutDestinationRoutes(Router& router, ApiContext& api);
// The optional "totp_code" field of a sensitive action (at most 64 bytes).
Result<std::optional<std::string>> TotpCodeField(const json& body);
// The fresh two-factor code of a sensitive action (engine::VerifyTotp), on the writer thread. A
// code that is sent goes through the login throttle of the user and `address` (a wrong one counts
// as a failed login; 429 naming totp_code while that pair must wait). Changes nothing: spend the
// answer with engine::UseTotp once the action can no longer fail.
Result<engine::TotpUse> VerifyFreshCode(ApiContext& api, const engine::Txn& txn,
                                        const engine::User& me, const std::string& address,
                                        const std::optional<std::string>& code,
                                        engine::TotpPurpose purpose);
void RegisterAdminRoutes(Router& router, ApiContext& api);
void RegisterWalletRoutes(Router& router, ApiContext& api);
// Top-ups, BTCPay webhooks, payment methods, held payments (api_payments.cc).
void RegisterPaymentRoutes(Router& router, ApiContext& api);
// Amount and currency fields shared by the money routes (api_wallets.cc).
Result<Currency> CurrencyField(const json& body, std::string_view field);
// The spot exchange (api_market.cc): machines, asks, bids, leases, earnings, payouts, market data.
void RegisterMarketRoutes(Router& router, ApiContext& api);
// A price per GPU-hour given as a decimal string with at most 3 decimals ("2.880"), the tick of
// the book: a JSON number, a 4th decimal, 0 or a price above the exchange's cap is
// invalid_argument naming `field`.
Result<std::int64_t> PriceField(const json& body, std::string_view field);
// A payout's JSON with "destination": where it goes (a copy of the destination it named when it
// was requested) or null.
json PayoutWithTarget(const engine::State& state, const market::Payout& p);
// Stock and price alerts (engine/alerts.h): api_alerts.cc.
void RegisterAlertRoutes(Router& router, ApiContext& api);
// Term rentals (api_rentals.cc): quotes, orders, renewals, release, stock, nodes (admin).
void RegisterRentalRoutes(Router& router, ApiContext& api);
// A rental or storage charge's net, tax lines and gross, as the API shows them (api_rentals.cc).
json TaxJson(const rentals::TaxBlock& block);
// Storage (api_storage.cc): volumes, snapshots, extra NVMe on a rental, egress samples, storage
// hosts (admin).
void RegisterStorageRoutes(Router& router, ApiContext& api);
// What a rental carries of storage in GET /v1/rentals[/{id}] (api_storage.cc): its extra NVMe,
// the egress meter of each term, the volumes attached.
json RentalStorageJson(const engine::State& state, std::int64_t rental_id, TimestampMicros now);
// Notifications and the account's webhook (api_notifications.cc).
void RegisterNotificationRoutes(Router& router, ApiContext& api);
// Host agents (api_agent.cc): enrolment, heartbeats, usage, and the provider's and admin's views.
void RegisterAgentRoutes(Router& router, ApiContext& api);
// SSH public keys on the account (api_ssh_keys.cc).
void RegisterSshKeyRoutes(Router& router, ApiContext& api);
// API keys of the account (api_keys.cc): create, list, show, revoke.
void RegisterApiKeyRoutes(Router& router, ApiContext& api);
// The account's audit log (api_audit_log.cc): GET /v1/audit-log.
void RegisterAuditLogRoutes(Router& router, ApiContext& api);
// Multi-node quote requests (api_quote_requests.cc): the job recomputed with the catalog and the
// bundled models of `data_dir`.
void RegisterQuoteRequestRoutes(Router& router, ApiContext& api, const std::string& data_dir);
// Diffusion sizing (api_diffusion.cc): POST /v1/size/diffusion, GET /v1/diffusion-models.
void RegisterDiffusionRoutes(Router& router, ApiContext& api, const std::string& data_dir);
// Around every route (serve's router wrapper, outermost, on every node): a request with an API
// key on a route closed to keys (api_key_scopes.h) is answered 403 at once, naming why.
Handler ApiKeyGate(const std::string& method, const std::string& pattern, Handler handler);
// Around GET /v1/agent/desired's forwarding route: on a standby the poll is forwarded with
// wait_seconds=0 (answered at once by the writer), so no proxy thread is held for a wait.
Handler NoWaitOnStandby(ApiContext& api, Handler forwarding);
// A parked long-poll's answer (DesiredWaiters::Answer, on the writer thread): the host's desired
// state when it is no longer `version`, nullopt while it is.
std::optional<Response> DesiredChangedAnswer(ApiContext& api, engine::Txn& txn,
                                             std::int64_t host_id, const std::string& version);
// What the agent knows of a listed machine (api_agent.cc), for the provider's machine JSON:
// {"status": "none" | "online" | "offline" | "revoked", "host_id", "last_seen", ...}.
json MachineAgentJson(const engine::State& state, std::int64_t machine_id, TimestampMicros now);
// How the customer reaches a lease's machine (api_agent.cc): {"state", "ssh", "host", "port",
// "user", "detail", "updated_at"}; state "waiting" before the agent reported anything.
json LeaseConnectionJson(const engine::State& state, std::int64_t lease_id);
// Where a lease's container stands (api_agent.cc): {"step", "since", "detail", "steps": [{"step",
// "at"}]}, steps waiting_for_host (from the lease's start), then each state its agent reported:
// pulling, starting (sshd not answering yet), ready (sshd answers), failed, stopped; ended once
// the lease is over.
json LeaseProvisioningJson(const engine::State& state, const market::Lease& lease);
// The same for a term rental's instance on its node (from the order; ended once released).
json RentalProvisioningJson(const engine::State& state, const rentals::Rental& rental);
// A term rental's downtime credits (its node's agent silent): {"total_usd", "credits": [{"from",
// "to", "hours", "multiplier", "usd", "amount", "currency", "formula"}]}.
json RentalDowntimeJson(const engine::State& state, std::int64_t rental_id);
// POST /v1/fit's "prices": "list" (default: the term fleet's list prices) or "market" (the spot
// exchange's book). Takes the field out of `body` (a JSON object); true for "market".
Result<bool> TakePricesField(std::string* body);
// Answers POST /v1/fit on live prices (api_market.cc): the book's offers are read on the writer,
// the fit runs on them; `catalog` must outlive the answer (shared ownership).
void FitOnMarketPrices(ApiContext& api, std::shared_ptr<const catalog::Catalog> catalog,
                       std::string data_dir, std::string body, Responder respond);
// The book's offers as fit/market_fit.h takes them (api_market.cc; fit builds only).
std::vector<fit::MarketOffer> FitOffers(const std::vector<market::Offer>& offers);
// Billing profiles, invoices (JSON, HTML, PDF), tax rates, credit notes (api_billing.cc).
void RegisterBillingRoutes(Router& router, ApiContext& api);
// Where a purchase request came from: the client address and the CDN's country header
// ([billing] country_header), recorded as evidence with the purchase.
engine::RequestOrigin OriginOf(const ApiContext& api, const Request& r);
// The tax of a spot hour of `hourly_net_micros` to `user_id` now: country, rate, note and the
// hour's net, tax and gross (prices are net; this is what each hour will be charged).
json SpotTaxJson(const engine::State& state, std::int64_t user_id, std::int64_t hourly_net_micros,
                 TimestampMicros at);
// The public read API (catalog, size, fit, plan, guide); `data_dir` holds catalog.toml and models/.
void RegisterReadRoutes(Router& router, ApiContext& api, const std::string& data_dir);

}  // namespace gpuhub::http
