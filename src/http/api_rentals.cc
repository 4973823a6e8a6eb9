// Term rentals' endpoints. Amounts are decimal strings with 6 decimals, prices in USD (the fleet's
// list prices, tax excluded), debits in the paying wallet's currency; times are RFC 3339 UTC.
//
// Anyone:
//   GET  /v1/stock                    free cards and rentable sets per card, region and count
//   POST /v1/rentals/quote {"gpu", "count", "term": "week"|"month", "region"?, "currency"?,
//                           "fp8"?}   the exact price and whether it can be served now (a signed-in
//                           customer's quote carries their tax)
// Customers (role customer):
//   POST /v1/rentals {... as the quote, "auto_renew"?: true, "image"?, "ports"?, "registry_auth"?
//                     (what it runs: as a bid's, api_market.cc)}  -> 201 rental (pays the term)
//        402 insufficient_funds: {"error": {..., "shortfall": {...}, "topup": invoice | null}}
//   GET  /v1/rentals[?limit=N], GET /v1/rentals/{id} (history, charges, next transition)
//   POST /v1/rentals/{id}/renew {"currency"?}    pays the next term; paid already: same answer
//   POST /v1/rentals/{id}/auto-renew {"enabled": true|false}
//   POST /v1/rentals/{id}/release {"confirm": true}   no refund; the disk's key is destroyed
// Admins:
//   POST /v1/admin/nodes {"gpu", "region", "cards"?, "hostname"?, "nvme_included_gb_per_card"?,
//                         "nvme_extra_capacity_gb"?}  -> 201 node
//   GET  /v1/admin/nodes[?gpu=&region=&limit=&after=], POST /v1/admin/nodes/{id}/drain | /undrain,
//   DELETE /v1/admin/nodes/{id} (only without live rentals or pending wipes)
//   POST /v1/admin/rentals/{id}/instance {"state": "running"|"failed", "connection"?, "error"?}
//   POST /v1/admin/rentals/{id}/wipe     the local NVMe of a released rental was wiped
//   GET  /v1/admin/rentals               the fleet's invariants and settlement against the ledger
#include "engine/rentals.h"
#include "http/api.h"
#include "core/strings.h"
#include "http/launch_spec.h"
#include "http/web_session.h"
#include "http/limits.h"
#include "rentals/limits.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }
std::string Usd(std::int64_t micros) { return FormatMicros(micros); }
std::string Percent(std::int64_t ppm) {
  std::string text = FormatMicros(ppm * 100, 4);  // ppm x 100 = percent x 1e6
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text;
}

json CardsJson(std::uint32_t mask) {
  json out = json::array();
  for (int i = 0; i < rentals::kMaxCardsPerNode; ++i) {
    if (mask & (1u << i)) out.push_back(i);
  }
  return out;
}


json RenewalJson(const rentals::Renewal& r) {
  return {{"period", r.period},
          {"status", rentals::RenewalStatusName(r.status)},
          {"amount", TaxJson(r.amount)},
          {"issued_at", Time(r.issued_at)},
          {"due_at", Time(r.due_at)},
          {"paid_at", Time(r.paid_at)},
          {"by_auto_renew", r.by_auto_renew},
          {"paid", r.paid_at == 0 ? json(nullptr)
                                  : json({{"amount", Usd(r.paid_micros)},
                                          {"currency", CurrencyCode(r.paid_currency)}})},
          {"pay", "POST /v1/rentals/" + std::to_string(r.rental_id) + "/renew"}};
}

// The tax invoice (or credit note) billing issued for a charge: its number and links, or null.
json ChargeInvoiceJson(const Txn& txn, const rentals::Charge& c) {
  auto doc = engine::DocumentBySource(txn.state, "rental:" + std::to_string(c.rental_id) +
                                                     ":charge:" + std::to_string(c.id));
  if (!doc.ok()) return nullptr;
  return {{"number", doc->number},
          {"pdf", "/v1/invoices/" + doc->number + ".pdf"},
          {"html", "/v1/invoices/" + doc->number + ".html"}};
}

json ChargeJson(const rentals::Charge& c) {
  json ids = json::array();
  for (const auto& id : c.transfer_ids) ids.push_back(id);
  return {{"id", c.id},
          {"kind", rentals::ChargeKindName(c.kind)},
          {"period", c.period},
          {"amount", TaxJson(c.amount)},
          {"paid", {{"amount", Usd(c.paid_micros)}, {"currency", CurrencyCode(c.paid_currency)}}},
          {"period_start", Time(c.period_start)},
          {"period_end", Time(c.period_end)},
          {"at", FormatTimestamp(c.at)},
          {"extra_nvme",
           c.extra_nvme_gb == 0
               ? json(nullptr)
               : json({{"tb", c.extra_nvme_gb / rentals::kGbPerTb},
                       {"net", Usd(c.extra_nvme_micros)}})},
          {"refund_of", c.refund_of == 0 ? json(nullptr) : json(c.refund_of)},
          {"transfer_ids", ids}};
}

json RentalJson(const engine::State& state, const rentals::Rental& r) {
  const rentals::Fleet& fleet = state.rentals->fleet;
  json connection = json::object();
  for (const auto& [k, v] : r.instance.connection) connection[k] = v;
  rentals::NextTransition next = fleet.Next(r);
  const rentals::Renewal* renewal = fleet.FindRenewal(r.id, r.period + 1);
  std::int64_t subtotal = r.list_micros * r.count;
  json out = {
      {"id", r.id},
      {"gpu", r.gpu},
      {"count", r.count},
      {"region", r.region},
      {"node_id", r.node_id},
      {"cards", CardsJson(r.card_mask)},
      {"term", rentals::TermName(r.term)},
      {"price",
       {{"list_per_card", Usd(r.list_micros)},
        {"subtotal", Usd(subtotal)},
        {"discount_percent", Percent(r.discount_ppm)},
        {"discount", Usd(subtotal - r.price_micros)},
        {"net", Usd(r.price_micros)},
        {"extra_nvme_tb", r.extra_nvme_gb / rentals::kGbPerTb},
        {"extra_nvme", Usd(r.extra_nvme_micros)},
        {"term_net", Usd(r.price_micros + r.extra_nvme_micros)},
        {"currency", "USD"},
        {"locked", true}}},
      {"currency", CurrencyCode(r.currency)},
      {"auto_renew", r.auto_renew},
      {"state", rentals::RentalStateName(r.state)},
      {"release_reason", r.release_reason == rentals::ReleaseReason::kNone
                             ? json(nullptr)
                             : json(rentals::ReleaseReasonName(r.release_reason))},
      {"period", r.period},
      {"term_start", Time(r.term_start)},
      {"term_end", Time(r.term_end)},
      {"next_paid", r.next_paid},
      {"next_transition",
       next.at == 0 ? json(nullptr) : json({{"at", FormatTimestamp(next.at)}, {"what", next.what}})},
      {"renewal", renewal ? RenewalJson(*renewal) : json(nullptr)},
      {"created_at", FormatTimestamp(r.created_at)},
      {"released_at", Time(r.released_at)},
      {"instance",
       {{"state", rentals::InstanceStateName(r.instance.state)},
        {"nvme_gb", r.instance.nvme_gb},
        {"extra_nvme_gb", r.extra_nvme_gb},
        {"connection", connection},
        {"provisioning_deadline",
         r.state == rentals::RentalState::kProvisioning ? Time(r.instance.provisioning_deadline)
                                                        : json(nullptr)},
        {"error", r.instance.error.empty() ? json(nullptr) : json(r.instance.error)},
        {"key_destroyed_at", Time(r.instance.key_destroyed_at)},
        {"wipe_due_at", Time(r.instance.wipe_due_at)},
        {"wiped_at", Time(r.instance.wiped_at)}}}};
  if (r.state == rentals::RentalState::kStopped) {
    out["hold_until"] = FormatTimestamp(r.term_end + rentals::kHoldMicros);
  }
  // What it runs: the image, the extra container ports asked for, whether a registry credential
  // came with the order (never the credential).
  const engine::RentalLaunch* launch = engine::FindRentalLaunch(state, r.id);
  out["image"] = launch != nullptr ? launch->image : state.agents->config.default_image;
  out["ports"] = launch != nullptr ? json(launch->extras.ports) : json::array();
  out["registry_credential"] = launch != nullptr && !launch->extras.sealed_registry_auth.empty();
  out["provisioning"] = RentalProvisioningJson(state, r);
  return out;
}

json RentalDetailJson(const Txn& txn, const rentals::Rental& r) {
  const rentals::Fleet& fleet = txn.state.rentals->fleet;
  json out = RentalJson(txn.state, r);
  json history = json::array();
  for (const auto& e : fleet.History(r.id)) {
    history.push_back({{"sequence", e.sequence},
                       {"at", FormatTimestamp(e.at)},
                       {"event", rentals::EventKindName(e.kind)},
                       {"detail", e.detail}});
  }
  json charges = json::array();
  for (const auto& c : fleet.ChargesOf(r.id)) {
    json charge = ChargeJson(c);
    charge["invoice"] = ChargeInvoiceJson(txn, c);  // the tax invoice or credit note
    charges.push_back(std::move(charge));
  }
  out["history"] = history;
  out["charges"] = charges;
  return out;
}

json QuoteJson(const rentals::Quote& q) {
  json stock = json::array();
  for (const auto& s : q.stock) {
    stock.push_back({{"region", s.region}, {"cards_free", s.cards_free}, {"sets", s.sets}});
  }
  json fx = nullptr;
  if (q.fx) {
    fx = {{"base", CurrencyCode(q.fx->base)},
          {"quote", CurrencyCode(q.fx->quote)},
          {"mid", ledger::FormatFxRatePpb(q.fx->mid_rate_ppb)},
          {"spread_bps", q.fx->spread_bps}};
  }
  std::string formula = std::to_string(q.count) + " x " + Usd(q.list_micros) + " = " +
                        Usd(q.subtotal_micros) + "; - " + Percent(q.discount_ppm) + "% (" +
                        Usd(q.discount_micros) + ") = " + Usd(q.cards_net_micros);
  if (q.extra_nvme_tb > 0) {
    formula += "; + " + std::to_string(q.extra_nvme_tb) + " TB extra NVMe x " +
               Usd(q.extra_nvme_micros_per_tb) + " = " + Usd(q.amount.net_micros);
  }
  formula += " USD net; + tax " + Usd(q.amount.tax_micros) + " = " +
             Usd(q.amount.gross_micros) + " USD";
  if (q.fx) formula += " = " + Usd(q.charge_micros) + " " + std::string(CurrencyCode(q.currency));
  return {{"gpu", q.gpu},
          {"count", q.count},
          {"term", rentals::TermName(q.term)},
          {"region_requested", q.region_requested.empty() ? json(nullptr) : json(q.region_requested)},
          {"list_price_per_card", Usd(q.list_micros)},
          {"list_price_derived", q.list_derived},
          {"subtotal", Usd(q.subtotal_micros)},
          {"discount_percent", Percent(q.discount_ppm)},
          {"discount", Usd(q.discount_micros)},
          {"cards_net", Usd(q.cards_net_micros)},
          {"extra_nvme",
           {{"tb", q.extra_nvme_tb},
            {"per_tb", Usd(q.extra_nvme_micros_per_tb)},
            {"net", Usd(q.extra_nvme_micros)}}},
          {"amount", TaxJson(q.amount)},
          {"charge",
           {{"amount", q.charge_micros > 0 ? json(Usd(q.charge_micros)) : json(nullptr)},
            {"currency", CurrencyCode(q.currency)},
            {"fx", fx}}},
          {"formula", formula},
          {"term_start", FormatTimestamp(q.term_start)},
          {"term_end", FormatTimestamp(q.term_end)},
          {"available", q.available},
          {"region", q.available ? json(q.region) : json(nullptr)},
          {"reason", q.available ? json(nullptr)
                                 : json({{"code", q.reason_code},
                                         {"field", q.reason_field.empty() ? json(nullptr)
                                                                          : json(q.reason_field)},
                                         {"message", q.reason}})},
          {"stock", stock}};
}

json NodeJson(const rentals::Fleet& fleet, const rentals::Node& n) {
  std::uint32_t rented = fleet.RentedCards(n.id);
  json live = json::array();
  for (const auto& r : fleet.LiveRentalsOnNode(n.id)) live.push_back(r.id);
  return {{"id", n.id},
          {"gpu", n.gpu},
          {"region", n.region},
          {"cards", n.cards},
          {"cards_rented", CardsJson(rented)},
          {"hostname", n.hostname.empty() ? json(nullptr) : json(n.hostname)},
          {"nvme_included_gb_per_card", n.nvme_included_gb_per_card},
          {"nvme_extra_capacity_gb", n.nvme_extra_capacity_gb},
          {"state", rentals::NodeStateName(n.state)},
          {"live_rentals", live},
          {"created_at", FormatTimestamp(n.created_at)},
          {"updated_at", FormatTimestamp(n.updated_at)}};
}

// ----- Input ----------------------------------------------------------------------------------

Result<rentals::OrderSpec> ParseOrder(const Request& r, bool order) {
  std::initializer_list<std::string_view> quote_fields = {
      "gpu", "count", "term", "region", "currency", "fp8", "extra_nvme_tb"};
  std::initializer_list<std::string_view> order_fields = {
      "gpu",           "count",        "term",  "region", "currency", "fp8", "auto_renew",
      "extra_nvme_tb", "image",        "ports", "registry_auth"};
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, order ? order_fields : quote_fields));
  rentals::OrderSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(spec.gpu, RequiredString(body, "gpu"));
  if (spec.gpu.empty() || spec.gpu.size() > rentals::kMaxGpuNameBytes) {
    return Status::InvalidArgument("field 'gpu' must name a card such as \"H100 SXM\"")
        .WithField("gpu");
  }
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t count,
                          RequiredInteger(body, "count", 1, rentals::kMaxCardsPerNode));
  spec.count = static_cast<int>(count);
  GPUHUB_ASSIGN_OR_RETURN(std::string term, RequiredString(body, "term"));
  auto parsed = rentals::ParseTerm(term);
  if (!parsed.ok()) {
    return Status::InvalidArgument("field 'term' must be \"week\" (7 days) or \"month\" (30 days)")
        .WithField("term");
  }
  spec.term = *parsed;
  GPUHUB_ASSIGN_OR_RETURN(auto region, OptionalString(body, "region"));
  if (region && *region != "any") spec.region = *region;
  if (region && region->empty()) {
    return Status::InvalidArgument("field 'region' must be a region such as \"DFW-1\" or \"any\"")
        .WithField("region");
  }
  GPUHUB_ASSIGN_OR_RETURN(spec.currency, OptionalCurrency(body, Currency::kUsd));
  GPUHUB_ASSIGN_OR_RETURN(spec.require_fp8, OptionalBool(body, "fp8", false));
  if (body.contains("extra_nvme_tb") && !body["extra_nvme_tb"].is_null()) {
    GPUHUB_ASSIGN_OR_RETURN(spec.extra_nvme_tb, RequiredInteger(body, "extra_nvme_tb", 0,
                                                                rentals::kMaxExtraNvmeTbPerRental));
  }
  if (order) {
    GPUHUB_ASSIGN_OR_RETURN(spec.auto_renew, OptionalBool(body, "auto_renew", true));
  }
  return spec;
}

Result<rentals::NodeSpec> ParseNode(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body,
                          ParseJsonObject(r, {"gpu", "region", "cards", "hostname",
                                              "nvme_included_gb_per_card", "nvme_extra_capacity_gb"}));
  rentals::NodeSpec spec;
  GPUHUB_ASSIGN_OR_RETURN(spec.gpu, RequiredString(body, "gpu"));
  GPUHUB_ASSIGN_OR_RETURN(spec.region, RequiredString(body, "region"));
  if (body.contains("cards") && !body["cards"].is_null()) {
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t cards,
                            RequiredInteger(body, "cards", 1, rentals::kMaxCardsPerNode));
    spec.cards = static_cast<int>(cards);
  }
  GPUHUB_ASSIGN_OR_RETURN(auto hostname, OptionalString(body, "hostname"));
  if (hostname) spec.hostname = *hostname;
  for (auto [field, out] : {std::pair{"nvme_included_gb_per_card", &spec.nvme_included_gb_per_card},
                            std::pair{"nvme_extra_capacity_gb", &spec.nvme_extra_capacity_gb}}) {
    if (body.contains(field) && !body[field].is_null()) {
      GPUHUB_ASSIGN_OR_RETURN(*out, RequiredInteger(body, field, 0, rentals::kMaxNvmeGbPerNode));
    }
  }
  return spec;
}

Result<std::size_t> ListLimit(const Request& r) {
  return LimitQuery(r, "limit", rentals::kDefaultPageSize, rentals::kMaxPageSize);
}

const rentals::Fleet& Fleet(Txn& txn) { return txn.state.rentals->fleet; }

// A short wallet, as the order command found it, for the top-up the HTTP side opens afterwards.
struct ShortWallet {
  std::int64_t user_id = 0;
  engine::Shortfall shortfall;
};

// POST /v1/rentals on the writer: the order, or a 402 saying what is missing. The 402 is not
// stored under the Idempotency-Key (the order did not happen: the same key may be retried once
// the wallet is topped up), and `short_wallet` tells the caller which top-up to open.
// What a rental runs, as its order names it ("" and no extras: the default image).
struct RentalLaunchRequest {
  std::string image;
  engine::LaunchExtras extras;
  bool named() const {
    return !image.empty() || !extras.ports.empty() || !extras.sealed_registry_auth.empty();
  }
};

Result<RentalLaunchRequest> ParseRentalLaunch(const ApiContext& api, const Request& r) {
  json body = json::parse(r.body, nullptr, false);  // ParseOrder checked it is an object
  if (!body.is_object()) return RentalLaunchRequest{};
  RentalLaunchRequest out;
  GPUHUB_ASSIGN_OR_RETURN(out.image, ParseLaunchImage(api, body));
  GPUHUB_ASSIGN_OR_RETURN(out.extras, ParseLaunchExtras(api, body, out.image));
  return out;
}

Result<Reply> Order(Txn& txn, const User& me, const rentals::OrderSpec& spec,
                    const engine::RequestOrigin& origin, std::optional<ShortWallet>* short_wallet,
                    const RentalLaunchRequest& launch) {
  auto rental = engine::OrderRental(txn, me.id, spec, &origin);
  if (rental.ok() && launch.named()) {
    // Checked already (ParseRentalLaunch): this does not fail after the order.
    GPUHUB_RETURN_IF_ERROR(
        engine::RecordRentalLaunchSpec(txn, rental->id, launch.image, launch.extras));
  }
  if (rental.ok()) {
    json out = RentalJson(txn.state, *rental);
    auto charges = Fleet(txn).ChargesOf(rental->id);
    out["charge"] = charges.empty() ? json(nullptr) : ChargeJson(charges.front());
    out["invoice"] = charges.empty() ? json(nullptr) : ChargeInvoiceJson(txn, charges.front());
    return Reply{201, out};
  }
  if (rental.status().code() != StatusCode::kInsufficientFunds) return rental.status();
  GPUHUB_ASSIGN_OR_RETURN(auto quote, engine::QuoteRental(txn, me.id, spec));
  auto shortfall = engine::ComputeShortfall(txn, me.id, spec.currency, quote.charge_micros);
  if (!shortfall.ok()) return rental.status();
  *short_wallet = ShortWallet{me.id, *shortfall};
  json error = {{"code", "insufficient_funds"},
                {"message", rental.status().message()},
                {"field", "currency"},
                {"shortfall",
                 {{"amount", FormatMicros(shortfall->shortfall_micros)},
                  {"currency", CurrencyCode(shortfall->currency)},
                  {"available", FormatMicros(shortfall->available_micros)},
                  {"needed", FormatMicros(shortfall->needed_micros)}}},
                {"topup", nullptr}};
  return Reply{402, {{"error", error}}, /*replayable=*/false};
}

// Completes a 402 with the top-up for the shortfall: an open one of that amount, or a new one
// opened the way POST /v1/topups opens it (at BTCPay Server in BTCPay mode, so outside the
// writer), or none with a note saying why.
void AnswerShortWallet(ApiContext& api, Response response, const ShortWallet& s,
                       Responder respond) {
  json body = json::parse(response.body, nullptr, false);
  if (body.is_discarded() || !body.contains("error")) return respond(std::move(response));
  std::string base = api.config.checkout_base_url;
  if (s.shortfall.open_topup) {
    body["error"]["topup"] = InvoiceJson(*s.shortfall.open_topup, base);
    return respond(JsonResponse(402, body));
  }
  if (s.shortfall.topup_micros == 0) {
    body["error"]["topup_note"] = s.shortfall.topup_note;
    return respond(JsonResponse(402, body));
  }
  OpenTopup(api, s.user_id, s.shortfall.currency, s.shortfall.topup_micros,
            [body, base, respond = std::move(respond)](Result<engine::Invoice> invoice) mutable {
              if (invoice.ok()) {
                body["error"]["topup"] = InvoiceJson(*invoice, base);
              } else {
                body["error"]["topup_note"] = invoice.status().message();
              }
              respond(JsonResponse(402, body));
            });
}

}  // namespace

json TaxJson(const rentals::TaxBlock& b) {
  json lines = json::array();
  for (const auto& l : b.lines) {
    lines.push_back({{"name", l.name}, {"rate_percent", Percent(l.rate_ppm)},
                     {"amount", Usd(l.amount_micros)}});
  }
  return {{"net", Usd(b.net_micros)},
          {"tax", lines},
          {"tax_total", Usd(b.tax_micros)},
          {"gross", Usd(b.gross_micros)},
          {"currency", "USD"}};
}

void RegisterRentalRoutes(Router& router, ApiContext& api) {
  using engine::kRoleAdmin;
  using engine::kRoleCustomer;

  router.Add("GET", "/v1/stock", [&api](const Request& r, Responder respond) {
    RunAnonymous(api, r, std::move(respond), false, [](Txn& txn) -> Result<Reply> {
      json cards = json::array();
      for (const auto& card : Fleet(txn).Stock()) {
        json regions = json::array();
        for (const auto& row : card.regions) {
          json sets = json::object();
          for (int count : card.counts) sets[std::to_string(count)] = row.Sets(count);
          regions.push_back({{"region", row.region},
                             {"nodes", row.nodes},
                             {"nodes_draining", row.nodes_draining},
                             {"cards", row.cards},
                             {"cards_free", row.cards_free},
                             {"sets_free", sets}});
        }
        cards.push_back({{"gpu", card.gpu}, {"counts", card.counts}, {"regions", regions}});
      }
      return Reply{200, {{"stock", cards}, {"as_of", FormatTimestamp(txn.now)}}};
    });
  });

  // A quote needs no account; a signed-in customer's quote carries their tax.
  router.Add("POST", "/v1/rentals/quote", [&api](const Request& r, Responder respond) {
    auto spec = ParseOrder(r, /*order=*/false);
    if (!spec.ok()) return respond(Response::Error(spec.status()));
    auto action = [spec = *spec](Txn& txn, std::int64_t customer) -> Result<Reply> {
      GPUHUB_ASSIGN_OR_RETURN(auto quote, engine::QuoteRental(txn, customer, spec));
      return Reply{200, QuoteJson(quote)};
    };
    if (CredentialsOf(r).token.empty()) {
      return RunAnonymous(api, r, std::move(respond), false,
                          [action](Txn& txn) { return action(txn, 0); });
    }
    RunAuthenticated(api, r, std::move(respond), 0,
                     [action](Txn& txn, const User& me) { return action(txn, me.id); });
  });

  router.Add("POST", "/v1/rentals", RequireBearer([&api](const Request& r, Responder respond) {
               auto spec = ParseOrder(r, /*order=*/true);
               if (!spec.ok()) return respond(Response::Error(spec.status()));
               auto launch = ParseRentalLaunch(api, r);
               if (!launch.ok()) return respond(Response::Error(launch.status()));
               auto short_wallet = std::make_shared<std::optional<ShortWallet>>();
               RunAuthenticated(
                   api, r,
                   [&api, short_wallet, respond = std::move(respond)](Response response) {
                     if (response.status != 402 || !short_wallet->has_value()) {
                       return respond(std::move(response));
                     }
                     AnswerShortWallet(api, std::move(response), **short_wallet, respond);
                   },
                   kRoleCustomer,
                   [spec = *spec, short_wallet, origin = OriginOf(api, r),
                    launch = *launch](Txn& txn, const User& me) {
                     return Order(txn, me, spec, origin, short_wallet.get(), launch);
                   });
             }));
  router.Add("GET", "/v1/rentals?limit",
             Authenticated<std::size_t>(
                 api, kRoleCustomer, ListLimit,
                 [](Txn& txn, const User& me, const std::size_t& limit) -> Result<Reply> {
                   json list = json::array();
                   for (const auto& rental : Fleet(txn).ListRentals(me.id, limit)) {
                     json one = RentalJson(txn.state, rental);
                     one["downtime_credit"] = RentalDowntimeJson(txn.state, rental.id);
                     one["storage"] = RentalStorageJson(txn.state, rental.id, txn.now);
                     list.push_back(std::move(one));
                   }
                   return Reply{200, {{"rentals", list}, {"as_of", FormatTimestamp(txn.now)}}};
                 }));
  router.Add("GET", "/v1/rentals/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleCustomer, [](const Request& r) { return IdParam(r, "rental"); },
                 [](Txn& txn, const User& me, const std::int64_t& id) -> Result<Reply> {
                   const rentals::Rental* rental = Fleet(txn).FindCustomerRental(me.id, id);
                   if (rental == nullptr) {
                     return Status::NotFound("no rental " + std::to_string(id) + " of yours");
                   }
                   json out = RentalDetailJson(txn, *rental);
                   out["downtime_credit"] = RentalDowntimeJson(txn.state, id);
                   out["storage"] = RentalStorageJson(txn.state, rental->id, txn.now);
                   out["as_of"] = FormatTimestamp(txn.now);
                   return Reply{200, out};
                 }));
  router.Add("POST", "/v1/rentals/{id}/renew",
             Authenticated<std::pair<IdAnd, engine::RequestOrigin>>(
                 api, kRoleCustomer,
                 [&api](const Request& r) -> Result<std::pair<IdAnd, engine::RequestOrigin>> {
                   GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "rental", {"currency"}));
                   return std::pair{std::move(in), OriginOf(api, r)};
                 },
                 [](Txn& txn, const User& me,
                    const std::pair<IdAnd, engine::RequestOrigin>& request) -> Result<Reply> {
                   const IdAnd& in = request.first;
                   std::optional<Currency> currency;
                   if (in.body.contains("currency")) {
                     GPUHUB_ASSIGN_OR_RETURN(currency, OptionalCurrency(in.body, Currency::kUsd));
                   }
                   GPUHUB_ASSIGN_OR_RETURN(
                       auto renewal,
                       engine::PayRentalRenewal(txn, me.id, in.id, currency, &request.second));
                   const rentals::Rental* rental = Fleet(txn).FindRental(in.id);
                   json out = {{"renewal", RenewalJson(renewal)},
                               {"rental", RentalJson(txn.state, *rental)}};
                   auto charges = Fleet(txn).ChargesOf(in.id);
                   out["invoice"] = charges.empty() ? json(nullptr)
                                                    : ChargeInvoiceJson(txn, charges.back());
                   return Reply{200, out};
                 }));
  router.Add("POST", "/v1/rentals/{id}/auto-renew",
             Authenticated<IdAnd>(
                 api, kRoleCustomer,
                 [](const Request& r) -> Result<IdAnd> {
                   GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "rental", {"enabled"}));
                   auto it = in.body.find("enabled");
                   if (it == in.body.end() || !it->is_boolean()) {
                     return Status::InvalidArgument("field 'enabled' must be true or false")
                         .WithField("enabled");
                   }
                   return in;
                 },
                 [](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(
                       auto rental,
                       engine::SetRentalAutoRenew(txn, me.id, in.id, in.body["enabled"].get<bool>()));
                   return Reply{200, RentalJson(txn.state, rental)};
                 }));
  router.Add(
      "POST", "/v1/rentals/{id}/release",
      Authenticated<IdAnd>(
          api, kRoleCustomer,
          [](const Request& r) -> Result<IdAnd> {
            GPUHUB_ASSIGN_OR_RETURN(IdAnd in, IdAndBody(r, "rental", {"confirm"}));
            auto it = in.body.find("confirm");
            if (it == in.body.end() || !it->is_boolean() || !it->get<bool>()) {
              return Status::InvalidArgument(
                         "releasing ends the rental now: nothing of the term is refunded and the "
                         "instance's disk key is destroyed (its data cannot be recovered); send "
                         "{\"confirm\": true} to go ahead")
                  .WithField("confirm");
            }
            return in;
          },
          [](Txn& txn, const User& me, const IdAnd& in) -> Result<Reply> {
            GPUHUB_ASSIGN_OR_RETURN(auto rental, engine::ReleaseRental(txn, me.id, in.id));
            return Reply{200, RentalJson(txn.state, rental)};
          }));

  // ----- Admins ------------------------------------------------------------------------------
  router.Add("POST", "/v1/admin/nodes",
             Authenticated<rentals::NodeSpec>(
                 api, kRoleAdmin, ParseNode,
                 [](Txn& txn, const User&, const rentals::NodeSpec& spec) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto node, engine::AddRentalNode(txn, spec));
                   return Reply{201, NodeJson(Fleet(txn), node)};
                 }));
  struct NodeQuery {
    std::string gpu, region;
    std::int64_t after = 0;
    std::size_t limit = rentals::kMaxPageSize;
  };
  router.Add("GET", "/v1/admin/nodes?gpu&region&limit&after",
             Authenticated<NodeQuery>(
                 api, kRoleAdmin,
                 [](const Request& r) -> Result<NodeQuery> {
                   NodeQuery q;
                   if (auto it = r.query.find("gpu"); it != r.query.end()) q.gpu = it->second;
                   if (auto it = r.query.find("region"); it != r.query.end()) q.region = it->second;
                   GPUHUB_ASSIGN_OR_RETURN(q.limit, LimitQuery(r, "limit", rentals::kMaxPageSize,
                                                               rentals::kMaxPageSize));
                   if (auto it = r.query.find("after"); it != r.query.end()) {
                     auto v = ParseInt64(it->second, "after");
                     if (!v.ok() || *v < 0) {
                       return Status::InvalidArgument("after must be a node id (next_after)");
                     }
                     q.after = *v;
                   }
                   return q;
                 },
                 [](Txn& txn, const User&, const NodeQuery& q) -> Result<Reply> {
                   json list = json::array();
                   auto nodes = Fleet(txn).ListNodes(q.gpu, q.region, q.after, q.limit);
                   for (const auto& n : nodes) list.push_back(NodeJson(Fleet(txn), n));
                   json next = nodes.size() == q.limit ? json(nodes.back().id) : json(nullptr);
                   return Reply{200, {{"nodes", list}, {"next_after", next}}};
                 }));
  for (auto [path, state] :
       {std::pair{"/v1/admin/nodes/{id}/drain", rentals::NodeState::kDraining},
        std::pair{"/v1/admin/nodes/{id}/undrain", rentals::NodeState::kActive}}) {
    router.Add("POST", path,
               Authenticated<std::int64_t>(
                   api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "node"); },
                   [state](Txn& txn, const User&, const std::int64_t& id) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(auto node,
                                             engine::SetRentalNodeState(txn, id, state));
                     return Reply{200, NodeJson(Fleet(txn), node)};
                   }));
  }
  router.Add("DELETE", "/v1/admin/nodes/{id}",
             Authenticated<std::int64_t>(
                 api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "node"); },
                 [](Txn& txn, const User&, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(
                       auto node, engine::SetRentalNodeState(txn, id, rentals::NodeState::kRemoved));
                   return Reply{200, NodeJson(Fleet(txn), node)};
                 }));
  router.Add(
      "POST", "/v1/admin/rentals/{id}/instance",
      Authenticated<IdAnd>(
          api, kRoleAdmin,
          [](const Request& r) { return IdAndBody(r, "rental", {"state", "connection", "error"}); },
          [](Txn& txn, const User&, const IdAnd& in) -> Result<Reply> {
            rentals::InstanceReport report;
            GPUHUB_ASSIGN_OR_RETURN(std::string state, RequiredString(in.body, "state"));
            if (state == "running") {
              report.state = rentals::InstanceState::kRunning;
            } else if (state == "failed") {
              report.state = rentals::InstanceState::kFailed;
            } else {
              return Status::InvalidArgument("field 'state' must be \"running\" or \"failed\"")
                  .WithField("state");
            }
            if (auto it = in.body.find("connection"); it != in.body.end() && !it->is_null()) {
              if (!it->is_object()) {
                return Status::InvalidArgument("field 'connection' must be an object of strings")
                    .WithField("connection");
              }
              for (const auto& [k, v] : it->items()) {
                if (!v.is_string()) {
                  return Status::InvalidArgument("connection values must be strings")
                      .WithField("connection");
                }
                report.connection.emplace_back(k, v.get<std::string>());
              }
            }
            GPUHUB_ASSIGN_OR_RETURN(auto error, OptionalString(in.body, "error"));
            if (error) report.error = *error;
            GPUHUB_ASSIGN_OR_RETURN(auto rental, engine::ReportRentalInstance(txn, in.id, report));
            return Reply{200, RentalJson(txn.state, rental)};
          }));
  router.Add("POST", "/v1/admin/rentals/{id}/wipe",
             Authenticated<std::int64_t>(
                 api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "rental"); },
                 [](Txn& txn, const User&, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto rental, engine::RecordRentalWipe(txn, id));
                   return Reply{200, RentalJson(txn.state, rental)};
                 }));
  router.Add(
      "GET", "/v1/admin/rentals",
      Authenticated<Empty>(
          api, kRoleAdmin, NoInput, [](Txn& txn, const User&, const Empty&) -> Result<Reply> {
            const auto& ledger = txn.state.wallets->ledger;
            Status invariants = Fleet(txn).CheckInvariants();
            Status settlement = Fleet(txn).CheckSettlement(ledger);
            json overdue = json::array();
            for (const auto& r : Fleet(txn).OverdueWipes(txn.now, rentals::kMaxPageSize)) {
              overdue.push_back({{"rental_id", r.id},
                                 {"node_id", r.node_id},
                                 {"wipe_due_at", FormatTimestamp(r.instance.wipe_due_at)}});
            }
            return Reply{200,
                         {{"invariants", invariants.ok() ? "ok" : invariants.ToString()},
                          {"settlement", settlement.ok() ? "ok" : settlement.ToString()},
                          {"nodes", Fleet(txn).node_count()},
                          {"rentals", Fleet(txn).rental_count()},
                          {"live_rentals", Fleet(txn).live_rental_count()},
                          {"overdue_wipes", overdue}}};
          }));
}

}  // namespace gpuhub::http
