// The spot exchange's endpoints. Prices are decimal strings in USD per GPU-hour with 3 decimals
// ("2.880"); amounts are decimal strings with 6 decimals; times are RFC 3339 UTC. Never JSON
// numbers for money.
//
// Providers (role provider):
//   POST   /v1/machines {"gpu", "gpus", "region", "vcpus", "ram_gb", "disk_gb",
//                        "port_range_first"?, "port_range_last"? (default 41000-41999)} -> 201
//   machine GET    /v1/machines                                                             ->
//   {"machines"} POST   /v1/asks {"machine_id", "price_usd_per_gpu_hour", "min_gpus"?,
//   "available_until"} -> 201 GET    /v1/asks -> {"asks"} DELETE /v1/asks/{id}          (running
//   leases continue)                         -> 200 ask GET    /v1/earnings -> earnings POST
//   /v1/payouts {"amount", "destination_id"?}                                -> 201 payout GET
//   /v1/payouts                                                              -> {"payouts"}
// Customers (role customer):
//   POST   /v1/bids {"gpu", "gpus", "region"?, "limit_usd_per_gpu_hour" | "market": true,
//                    "time_in_force"? ("ioc" | "gtc"; default gtc for limit, ioc for market),
//                    "expires_at"?, "currency"? (the wallet that pays, default USD),
//                    "image"? (a curated name of GET /v1/images or a Docker reference),
//                    "ports"? ([8888, 8000]: at most 4 extra container ports),
//                    "registry_auth"? ({"username", "password", "serveraddress"?}: sealed at
//                    rest, never shown again; http/registry_auth.h)}
//            -> 201 {"id", "status": "filled" | "resting" | "cancelled", "lease_id", "lease"?, ...}
//   GET    /v1/bids, DELETE /v1/bids/{id}
//   GET    /v1/leases[?as=provider], GET /v1/leases/{id}, POST /v1/leases/{id}/stop
// Admins:
//   GET    /v1/admin/payouts (pending), POST /v1/admin/payouts/{id}/paid | /reject
//   GET    /v1/admin/market  (the exchange's invariants against the ledger)
// Anyone:
//   GET    /v1/images   the curated images ([agents] images) and the default
//   GET    /v1/markets, GET /v1/markets/{gpu}/book?levels=N, GET /v1/markets/{gpu}/trades?limit=N
//   GET    /v1/offers[?gpu=NAME]  the asks that can be taken now, cheapest first (what a fit on
//          live prices ranks: `gpuhub fit --prices market --server URL` reads it)
//   POST   /v1/fit {..., "prices": "market"}  (api_read.cc hands it to FitOnMarketPrices)
#include "core/json_writer.h"
#include "core/strings.h"
#include "engine/agents.h"
#include "engine/market.h"
#include "engine/payout_destinations.h"
#include "engine/wallets.h"
#include "http/api.h"
#include "http/limits.h"
#include "http/launch_spec.h"
#include "http/market_json.h"
#include "market/limits.h"

#ifdef GPUHUB_HAVE_FIT
#include "catalog/catalog.h"
#include "fit/market_fit.h"
#endif

namespace gpuhub::http {

Result<std::int64_t> PriceField(const json& body, std::string_view field) {
  auto it = body.find(field);
  if (it != body.end() && it->is_number()) {
    return Status::InvalidArgument(
               "field '" + std::string(field) +
               "' must be a decimal string such as \"2.880\", not a JSON number")
        .WithField(std::string(field));
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, RequiredString(body, field));
  auto price = market::ParsePriceMicros(text, std::string(field));
  if (!price.ok()) return price.status().WithField(std::string(field));
  return *price;
}

namespace {

using market::FormatPrice;

const market::Exchange& X(engine::Txn& txn) { return txn.state.market->exchange; }

// ----- Input ----------------------------------------------------------------------------------

Result<TimestampMicros> TimeField(const json& body, std::string_view field) {
  GPUHUB_ASSIGN_OR_RETURN(std::string text, RequiredString(body, field));
  auto t = ParseTimestamp(text);
  if (!t.ok()) {
    return Status::InvalidArgument("field '" + std::string(field) +
                                   "' must be an RFC 3339 time such as \"2026-12-31T18:00:00Z\"")
        .WithField(std::string(field));
  }
  return *t;
}

Result<market::MachineSpec> ParseMachine(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(
      json body, ParseJsonObject(r, {"gpu", "gpus", "region", "vcpus", "ram_gb", "disk_gb",
                                     "port_range_first", "port_range_last"}));
  market::MachineSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(spec.gpu, RequiredString(body, "gpu"));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t gpus,
                          RequiredInteger(body, "gpus", 1, market::kMaxGpusPerMachine));
  spec.gpus = static_cast<int>(gpus);
  GPUHUB_ASSIGN_OR_RETURN(spec.region, RequiredString(body, "region"));
  GPUHUB_ASSIGN_OR_RETURN(spec.vcpus,
                          RequiredInteger(body, "vcpus", 1, market::kMaxVcpusPerMachine));
  GPUHUB_ASSIGN_OR_RETURN(spec.ram_gb,
                          RequiredInteger(body, "ram_gb", 1, market::kMaxRamGbPerMachine));
  GPUHUB_ASSIGN_OR_RETURN(spec.disk_gb,
                          RequiredInteger(body, "disk_gb", 1, market::kMaxDiskGbPerMachine));
  // Optional: the host ports for the leases' extra container ports (market::ValidatePortRange).
  for (auto [field, out] : {std::pair{"port_range_first", &spec.port_range_first},
                            std::pair{"port_range_last", &spec.port_range_last}}) {
    if (body.contains(field) && !body[field].is_null()) {
      GPUHUB_ASSIGN_OR_RETURN(std::int64_t port, RequiredInteger(body, field, 1, 65535));
      *out = static_cast<int>(port);
    }
  }
  GPUHUB_RETURN_IF_ERROR(market::ValidatePortRange(spec.port_range_first, spec.port_range_last));
  return spec;
}

Result<market::AskSpec> ParseAsk(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"machine_id", "price_usd_per_gpu_hour",
                                                         "min_gpus", "available_until"}));
  market::AskSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(spec.machine_id, RequiredInteger(body, "machine_id", 1, INT64_MAX));
  GPUHUB_ASSIGN_OR_RETURN(spec.price_micros, PriceField(body, "price_usd_per_gpu_hour"));
  if (body.contains("min_gpus") && !body["min_gpus"].is_null()) {
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t min_gpus,
                            RequiredInteger(body, "min_gpus", 1, market::kMaxGpusPerMachine));
    spec.min_gpus = static_cast<int>(min_gpus);
  }
  GPUHUB_ASSIGN_OR_RETURN(spec.available_until, TimeField(body, "available_until"));
  return spec;
}

// A bid and what its leases run: the image ("" = the configured default), extra ports and the
// sealed registry credential.
struct BidRequest {
  market::BidSpec spec;
  std::string image;
  engine::LaunchExtras extras;
};

Result<BidRequest> ParseBid(const ApiContext& api, const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(
      json body, ParseJsonObject(r, {"gpu", "gpus", "region", "limit_usd_per_gpu_hour", "market",
                                     "time_in_force", "expires_at", "currency", "image", "ports",
                                     "registry_auth"}));
  BidRequest request;
  market::BidSpec& spec = request.spec;
  GPUHUB_ASSIGN_OR_RETURN(request.image, ParseLaunchImage(api, body));
  GPUHUB_ASSIGN_OR_RETURN(request.extras, ParseLaunchExtras(api, body, request.image));
  GPUHUB_ASSIGN_OR_RETURN(spec.gpu, RequiredString(body, "gpu"));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t gpus,
                          RequiredInteger(body, "gpus", 1, market::kMaxGpusPerMachine));
  spec.gpus = static_cast<int>(gpus);
  GPUHUB_ASSIGN_OR_RETURN(auto region, OptionalString(body, "region"));
  if (region) spec.region = *region;
  auto market_it = body.find("market");
  if (market_it != body.end() && !market_it->is_null()) {
    if (!market_it->is_boolean()) {
      return Status::InvalidArgument("field 'market' must be true or false").WithField("market");
    }
    spec.is_market = market_it->get<bool>();
  }
  bool has_limit =
      body.contains("limit_usd_per_gpu_hour") && !body["limit_usd_per_gpu_hour"].is_null();
  if (spec.is_market && has_limit) {
    return Status::InvalidArgument(
               "send either \"market\": true or limit_usd_per_gpu_hour, not both")
        .WithField("limit_usd_per_gpu_hour");
  }
  if (!spec.is_market) {
    if (!has_limit) {
      return Status::InvalidArgument(
                 "a bid needs limit_usd_per_gpu_hour (such as \"3.000\") or \"market\": true")
          .WithField("limit_usd_per_gpu_hour");
    }
    GPUHUB_ASSIGN_OR_RETURN(spec.limit_micros, PriceField(body, "limit_usd_per_gpu_hour"));
  }
  GPUHUB_ASSIGN_OR_RETURN(auto tif, OptionalString(body, "time_in_force"));
  if (tif) {
    auto parsed = market::ParseTimeInForce(*tif);
    if (!parsed.ok()) return parsed.status().WithField("time_in_force");
    spec.time_in_force = *parsed;
  } else {
    spec.time_in_force = spec.is_market ? market::TimeInForce::kIoc : market::TimeInForce::kGtc;
  }
  if (body.contains("expires_at") && !body["expires_at"].is_null()) {
    GPUHUB_ASSIGN_OR_RETURN(spec.expires_at, TimeField(body, "expires_at"));
  }
  GPUHUB_ASSIGN_OR_RETURN(auto currency, OptionalString(body, "currency"));
  if (currency) {
    auto c = ParseCurrency(*currency);
    if (!c.ok()) {
      return Status::InvalidArgument("field 'currency' must be USD, EUR or GBP")
          .WithField("currency");
    }
    spec.currency = *c;
  }
  return request;
}

struct PayoutRequest {
  std::int64_t amount_micros = 0;
  std::optional<std::int64_t> destination_id;  // one of the provider's payout destinations
};

Result<std::int64_t> ParsePayoutAmount(const json& body);

Result<PayoutRequest> ParsePayoutRequest(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"amount", "currency", "destination_id"}));
  PayoutRequest out;
  GPUHUB_ASSIGN_OR_RETURN(out.amount_micros, ParsePayoutAmount(body));
  if (auto it = body.find("destination_id"); it != body.end() && !it->is_null()) {
    GPUHUB_ASSIGN_OR_RETURN(out.destination_id,
                            RequiredInteger(body, "destination_id", 1, INT64_MAX));
  }
  return out;
}

}  // namespace

// The payout's JSON with where it goes: its destination (a copy of it when it was requested) or
// null.
json PayoutWithTarget(const engine::State& state, const market::Payout& p) {
  json j = PayoutJson(p);
  const engine::PayoutTarget* t = engine::FindPayoutTarget(state, p.id);
  j["destination"] = t ? json{{"id", t->destination_id},
                              {"kind", std::string(engine::PayoutKindName(t->kind))},
                              {"address", t->address},
                              {"label", t->label}}
                       : json(nullptr);
  return j;
}

namespace {

Result<std::int64_t> ParsePayoutAmount(const json& body) {
  GPUHUB_ASSIGN_OR_RETURN(auto currency, OptionalString(body, "currency"));
  if (currency && *currency != "USD") {
    return Status::InvalidArgument("payouts are in USD (provider earnings are in USD)")
        .WithField("currency");
  }
  auto it = body.find("amount");
  if (it != body.end() && it->is_number()) {
    return Status::InvalidArgument("field 'amount' must be a decimal string such as \"100.00\"")
        .WithField("amount");
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, RequiredString(body, "amount"));
  auto amount = ParseDecimalMicros(text, 6);
  if (!amount.ok() || *amount <= 0) {
    return Status::InvalidArgument(
               "field 'amount' must be a positive decimal string with at most 6 decimals, such as "
               "\"100.00\" (" +
               (amount.ok() ? "got '" + text.substr(0, 40) + "'" : amount.status().message()) + ")")
        .WithField("amount");
  }
  return *amount;
}

}  // namespace

void RegisterMarketRoutes(Router& router, ApiContext& api) {
  using engine::kRoleAdmin;
  using engine::kRoleCustomer;
  using engine::kRoleProvider;
  using engine::Txn;
  using engine::User;

  // ----- Providers ---------------------------------------------------------------------------
  router.Add("POST", "/v1/machines",
             Authenticated<market::MachineSpec>(
                 api, kRoleProvider, ParseMachine,
                 [](Txn& txn, const User& me, const market::MachineSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto m, engine::AddMachine(txn, me.id, spec));
                   return Reply{201, MachineJson(txn.state, txn.now, m, 0, 0)};
                 }));
  router.Add(
      "GET", "/v1/machines?limit",
      Authenticated<std::size_t>(
          api, kRoleProvider, ListLimit,
          [](Txn& txn, const User& me, const std::size_t& limit) -> Result<Reply> {
            json list = json::array();
            for (const auto& v : X(txn).ListMachines(me.id, limit)) {
              list.push_back(MachineJson(txn.state, txn.now, v.machine, v.leased_gpus, v.open_ask));
            }
            return Reply{200, {{"machines", list}}};
          }));
  router.Add("POST", "/v1/asks",
             Authenticated<market::AskSpec>(
                 api, kRoleProvider, ParseAsk,
                 [](Txn& txn, const User& me, const market::AskSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto ask, engine::PlaceAsk(txn, me.id, spec));
                   json out = AskJson(ask, X(txn).FreeGpus(ask.machine_id));
                   // Resting bids it filled at once.
                   json leases = json::array();
                   for (const auto& l : X(txn).ListProviderLeases(me.id, market::kMaxPageSize)) {
                     if (l.ask_id == ask.id && l.started_at == txn.now) leases.push_back(l.id);
                   }
                   out["filled_lease_ids"] = leases;
                   return Reply{201, out};
                 }));
  router.Add(
      "GET", "/v1/earnings",
      Authenticated<Empty>(
          api, kRoleProvider, NoInput, [](Txn& txn, const User& me, const Empty&) -> Result<Reply> {
            auto e = X(txn).ProviderEarnings(me.id, txn.state.wallets->ledger);
            return Reply{200,
                         {{"currency", "USD"},
                          {"gross", FormatMicros(e.gross_micros)},
                          {"fees", FormatMicros(e.fee_micros)},
                          {"net", FormatMicros(e.net_micros)},
                          {"fee_percent",
                           FormatFixed(static_cast<double>(X(txn).config().fee_ppm) / 1e4, 2)},
                          {"gpu_hours", e.gpu_hours},
                          {"lease_hours", e.lease_hours},
                          {"active_leases", e.active_leases},
                          {"available", FormatMicros(e.available_micros)},
                          {"pending_payouts", FormatMicros(e.pending_payout_micros)},
                          {"paid_out", FormatMicros(e.paid_out_micros)},
                          {"downtime_credits", FormatMicros(e.credited_micros)}}};
          }));
  router.Add("POST", "/v1/payouts",
             Authenticated<PayoutRequest>(
                 api, kRoleProvider, ParsePayoutRequest,
                 [](Txn& txn, const User& me, const PayoutRequest& in) -> Result<Reply> {
                   std::optional<engine::PayoutDestination> to;
                   if (in.destination_id) {
                     GPUHUB_ASSIGN_OR_RETURN(
                         to, engine::PayoutDestinationFor(txn.state, me.id, *in.destination_id));
                   }
                   GPUHUB_ASSIGN_OR_RETURN(auto p,
                                           engine::RequestPayout(txn, me.id, in.amount_micros));
                   if (to) engine::RecordPayoutTarget(txn, p.id, *to);
                   engine::RecordAudit(txn, me.id, engine::AuditKind::kPayoutRequested,
                                       {{"payout_id", p.id},
                                        {"amount", FormatMicros(p.amount_micros)},
                                        {"currency", "USD"},
                                        {"destination_id", to ? nlohmann::ordered_json(to->id) : nlohmann::ordered_json()}});
                   return Reply{201, PayoutWithTarget(txn.state, p)};
                 }));
  // ----- Customers ---------------------------------------------------------------------------
  // A purchase: it needs a billing country (400 naming billing_country), its origin is recorded
  // as evidence, and the answer says the tax each hour carries (prices are net).
  router.Add("POST", "/v1/bids",
             Authenticated<std::pair<BidRequest, engine::RequestOrigin>>(
                 api, kRoleCustomer,
                 [&api](const Request& r) -> Result<std::pair<BidRequest, engine::RequestOrigin>> {
                   GPUHUB_ASSIGN_OR_RETURN(BidRequest request, ParseBid(api, r));
                   return std::pair{std::move(request), OriginOf(api, r)};
                 },
                 [](Txn& txn, const User& me,
                    const std::pair<BidRequest, engine::RequestOrigin>& in) -> Result<Reply> {
                   const BidRequest& request = in.first;
                   const market::BidSpec& spec = request.spec;
                   GPUHUB_ASSIGN_OR_RETURN(auto r, engine::PlaceBid(txn, me.id, spec));
                   if (!request.image.empty() || !request.extras.ports.empty() ||
                       !request.extras.sealed_registry_auth.empty()) {
                     GPUHUB_RETURN_IF_ERROR(
                         engine::RecordLaunchSpec(txn, r.bid.id, request.image, request.extras));
                   }
                   engine::NoteEvidence(txn, me.id, in.second);
                   Reply reply{201, {}};
                   JsonWriter w(reply.serialized);
                   w.BeginObject();
                   WriteBidMembers(w, txn.state, r.bid);
                   w.Key("lease");
                   if (r.lease) {
                     w.Value(CustomerLeaseJson(txn, *r.lease));
                   } else {
                     w.Null();
                   }
                   std::int64_t hour =
                       r.lease ? r.lease->HourMicros() : spec.limit_micros * spec.gpus;
                   w.Key("tax").Value(SpotTaxJson(txn.state, me.id, hour, txn.now)).EndObject();
                   return reply;
                 }));
  // ----- Admins ------------------------------------------------------------------------------
  router.Add("GET", "/v1/admin/payouts?limit",
             Authenticated<std::size_t>(
                 api, kRoleAdmin, ListLimit,
                 [](Txn& txn, const User&, const std::size_t& limit) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& p : X(txn).ListPendingPayouts(limit)) {
                     json j = PayoutWithTarget(txn.state, p);
                     const engine::User* u = engine::FindUser(txn.state, p.provider_id);
                     j["username"] = u ? u->username : "";
                     list.push_back(j);
                   }
                   return Reply{200, {{"payouts", list}}};
                 }));
  router.Add(
      "GET", "/v1/admin/market",
      Authenticated<Empty>(
          api, kRoleAdmin, NoInput, [](Txn& txn, const User&, const Empty&) -> Result<Reply> {
            const auto& ledger = txn.state.wallets->ledger;
            Status invariants = X(txn).CheckInvariants(ledger);
            Status settlement = X(txn).CheckSettlement(ledger);
            Status books = ledger.CheckInvariants();
            return Reply{200,
                         {{"invariants", invariants.ok() ? "ok" : invariants.ToString()},
                          {"settlement", settlement.ok() ? "ok" : settlement.ToString()},
                          {"ledger", books.ok() ? "ok" : books.ToString()},
                          {"machines", X(txn).machine_count()},
                          {"open_asks", X(txn).open_ask_count()},
                          {"resting_bids", X(txn).resting_bid_count()},
                          {"active_leases", X(txn).active_lease_count()}}};
          }));

  // ----- Market data (public) ----------------------------------------------------------------
  // The curated images (config only: answered without the engine).
  router.Add("GET", "/v1/images", [&api](const Request&, Responder respond) {
    respond(JsonResponse(200, CuratedImagesJson(api)));
  });
  router.Add("GET", "/v1/markets", [&api](const Request& r, Responder respond) {
    RunAnonymous(api, r, std::move(respond), false, [](Txn& txn) -> Result<Reply> {
      Reply reply;
      JsonWriter w(reply.serialized);
      w.BeginObject().Key("markets").BeginArray();
      for (const auto& m : X(txn).Markets()) {
        w.BeginObject().Key("gpu").String(m.gpu);
        WriteOptionalPrice(w.Key("best_ask_usd_per_gpu_hour"), m.best_ask_micros);
        WriteOptionalPrice(w.Key("best_bid_usd_per_gpu_hour"), m.best_bid_micros);
        w.Key("gpus_on_offer").Int(m.gpus_on_offer).Key("gpus_bid").Int(m.gpus_bid);
        w.Key("asks").Int(static_cast<std::int64_t>(m.asks));
        w.Key("bids").Int(static_cast<std::int64_t>(m.bids));
        w.Key("last_trade");
        if (m.last_trade) {
          WriteTrade(w, *m.last_trade);
        } else {
          w.Null();
        }
        w.Key("listed").Bool(m.listed).EndObject();
      }
      w.EndArray().Key("as_of").String(FormatTimestamp(txn.now)).EndObject();
      return reply;
    });
  });
  router.Add("GET", "/v1/markets/{gpu}/book?levels", [&api](const Request& r, Responder respond) {
    auto levels = LimitQuery(r, "levels", market::kDefaultPageSize, market::kMaxBookLevels);
    if (!levels.ok()) return respond(Response::Error(levels.status()));
    std::string gpu = r.path_params.at("gpu");
    RunAnonymous(api, r, std::move(respond), false, [gpu, n = *levels](Txn& txn) -> Result<Reply> {
      GPUHUB_ASSIGN_OR_RETURN(auto depth, X(txn).Book(gpu, n));
      Reply reply;
      JsonWriter w(reply.serialized);
      auto side = [&w](const std::vector<market::BookLevel>& levels) {
        w.BeginArray();
        for (const auto& l : levels) {
          w.BeginObject()
              .Key("price_usd_per_gpu_hour")
              .String(FormatPrice(l.price))
              .Key("gpus")
              .Int(l.gpus)
              .Key("orders")
              .Int(l.orders)
              .EndObject();
        }
        w.EndArray();
      };
      w.BeginObject().Key("gpu").String(depth.gpu);
      w.Key("asks");
      side(depth.asks);
      w.Key("bids");
      side(depth.bids);
      w.Key("as_of").String(FormatTimestamp(txn.now)).EndObject();
      return reply;
    });
  });
  RegisterMarketHistoryRoutes(router, api);
  router.Add("GET", "/v1/offers?gpu", [&api](const Request& r, Responder respond) {
    std::string gpu;
    if (auto it = r.query.find("gpu"); it != r.query.end()) gpu = it->second;
    RunAnonymous(api, r, std::move(respond), false, [gpu](Txn& txn) -> Result<Reply> {
      GPUHUB_ASSIGN_OR_RETURN(auto offers, X(txn).Offers(gpu, txn.now));
      return Reply{200, {{"offers", OffersJson(txn.state, offers)},
                         {"as_of", FormatTimestamp(txn.now)}}};
    });
  });
}

Result<bool> TakePricesField(std::string* body) {
  // Most fits name no prices: without the word (or a backslash, which could spell it as
  // "\u0070rices") the body cannot hold the field, and parsing it here as well as in
  // fit::ParseRequestJson was ~12k instructions of POST /v1/fit (bench/http/profile.sh).
  if (body->find("prices") == std::string::npos && body->find('\\') == std::string::npos) {
    return false;
  }
  json parsed = json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("prices")) return false;
  const json& prices = parsed["prices"];
  if (!prices.is_string() || (prices != "list" && prices != "market")) {
    return Status::InvalidArgument(
               "field 'prices' must be \"list\" (the fleet's list prices) or \"market\" (live "
               "offers "
               "on the spot exchange)")
        .WithField("prices");
  }
  bool market = prices == "market";
  parsed.erase("prices");
  *body = parsed.dump();
  return market;
}

#ifdef GPUHUB_HAVE_FIT
std::vector<fit::MarketOffer> FitOffers(const std::vector<market::Offer>& offers) {
  std::vector<fit::MarketOffer> book;
  book.reserve(offers.size());
  for (const auto& o : offers) {
    book.push_back({o.ask_id, o.machine_id, o.gpu, o.region, o.free_gpus, o.min_gpus,
                    o.price_micros, FormatTimestamp(o.available_until)});
  }
  return book;
}
#endif

void FitOnMarketPrices(ApiContext& api, std::shared_ptr<const catalog::Catalog> catalog,
                       std::string data_dir, std::string body, Responder respond) {
#ifdef GPUHUB_HAVE_FIT
  // Read the book on the writer (a consistent snapshot), fit once it is answered: the fit is pure
  // and takes microseconds, so it runs in the completion.
  api.engine.Execute<std::vector<market::Offer>>(
      [](engine::Txn& txn) { return X(txn).Offers("", txn.now); },
      [catalog = std::move(catalog), data_dir = std::move(data_dir), body = std::move(body),
       respond = std::move(respond)](Result<std::vector<market::Offer>> offers) {
        if (!offers.ok()) return respond(Response::Error(offers.status()));
        auto out = fit::HandleMarketFitJson(body, data_dir, *catalog, FitOffers(*offers));
        respond(out.ok() ? Response::Json(200, *out) : Response::Error(out.status()));
      });
#else
  (void)api;
  (void)catalog;
  (void)data_dir;
  (void)body;
  respond(Response::Error(503, "unavailable", "the fit engine is not built in"));
#endif
}

}  // namespace gpuhub::http
