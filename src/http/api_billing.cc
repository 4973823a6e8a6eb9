// Billing: the caller's billing profile, tax documents (JSON, printable HTML, PDF), tax rates.
//
//   GET  /v1/billing-profile                      -> the profile, the tax it gives now, holds
//   PUT  /v1/billing-profile {"billing_country", "business_name"?, "vat_id"?, "address"?}
//   GET  /v1/invoices?limit=N&before=ID           -> the caller's invoices and credit notes,
//                                                    newest first, {"invoices", "next_before"}
//   GET  /v1/invoices/{number}                    -> one document (another user's: 404)
//   GET  /v1/invoices/{number}.pdf | .html        -> the PDF (libharu) | the printable page
//   GET  /v1/tax-rates[?country=DE][&at=TIME]     -> the rates in force (a country: every period)
//   GET  /v1/countries                            -> ISO countries with their rate now (the form)
// Admins:
//   POST /v1/admin/tax-rates {"country", "rate": "19", "valid_from"?, "note"?}     -> 201 period
//   POST /v1/admin/tax-rates/{country}/close {"valid_until"?, "note"?}            -> 200 period
//   GET  /v1/admin/tax-rates/changes                                               -> the log
//   GET  /v1/admin/invoices?username=NAME&limit=N, GET /v1/admin/invoices/{number}
//   GET  /v1/admin/billing                        -> the documents' invariants
//   GET  /v1/admin/tax-report?from=TIME&until=TIME -> net and tax by country, rate, treatment
//   POST /v1/admin/invoices/{number}/credit-notes {"amount"?, "reason"}           -> 201
//
// Documents are read on the writer (a consistent snapshot) and rendered on the renderer pool, so
// a PDF never holds up the engine.
#include <spdlog/spdlog.h>

#include "billing/countries.h"
#include "billing/limits.h"
#include "core/strings.h"
#include "documents/render.h"
#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/billing_checks.h"
#include "engine/document_archive.h"
#include "engine/rentals.h"
#include "http/api.h"
#include "http/history_reads.h"
#include "http/limits.h"
#include "http/web_session.h"

namespace gpuhub::http {
namespace {

using billing::Document;
using engine::Txn;
using engine::User;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }
json TextOrNull(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }
std::string Percent(std::int64_t ppm) { return billing::FormatRatePercent(ppm); }

json PartyJson(const billing::Party& p) {
  return {{"name", p.name},
          {"address", p.address},
          {"country", TextOrNull(p.country)},
          {"vat_id", TextOrNull(p.vat_id)}};
}

json EvidenceJson(const billing::CountryEvidence& e) {
  return {{"billing_country", TextOrNull(e.billing_country)},
          {"ip_address", TextOrNull(e.ip_address)},
          {"ip_country", TextOrNull(e.ip_country)},
          {"recorded_at", Time(e.at)},
          {"agrees", billing::EvidenceAgrees(e)}};
}

json Links(const Document& d) {
  return {{"json", "/v1/invoices/" + d.number},
          {"html", "/v1/invoices/" + d.number + ".html"},
          {"pdf", "/v1/invoices/" + d.number + ".pdf"}};
}

json SummaryJson(const Document& d) {
  return {{"id", d.id},
          {"number", d.number},
          {"kind", billing::DocumentKindName(d.kind)},
          {"title", d.title},
          {"issued_at", FormatTimestamp(d.issued_at)},
          {"currency", CurrencyCode(d.currency)},
          {"net", FormatMicros(d.net_micros)},
          {"tax", FormatMicros(d.tax_micros)},
          {"gross", FormatMicros(d.gross_micros)},
          {"reverse_charge", d.reverse_charge},
          {"corrects", TextOrNull(d.corrects)},
          {"links", Links(d)}};
}

// What the walk of every stored document found (GET /v1/admin/billing): the rules, and the
// documents of rental charges (ids <= last_id) for the writer to match against the charges.
struct StoredDocumentsCheck {
  Status rules;
  std::int64_t documents = 0;
  std::int64_t credit_notes = 0;
  std::int64_t last_id = 0;
  std::shared_ptr<const engine::ChargeDocumentIndex> charge_documents;
};

Result<json> DocumentJson(const engine::State& state, const Document& d) {
  json lines = json::array();
  for (const auto& l : d.lines) {
    lines.push_back({{"description", l.description},
                     {"quantity", l.quantity},
                     {"unit", l.unit},
                     {"unit_net", FormatMicros(l.unit_net_micros)},
                     {"net", FormatMicros(l.net_micros)},
                     {"tax_country", TextOrNull(l.tax_country)},
                     {"tax_rate_percent", Percent(l.rate_ppm)},
                     {"reverse_charge", l.reverse_charge},
                     {"tax", FormatMicros(l.tax_micros)},
                     {"gross", FormatMicros(l.gross_micros)}});
  }
  json groups = json::array();
  for (const auto& g : billing::TaxByRates(d)) {
    groups.push_back({{"country", TextOrNull(g.country)},
                      {"rate_percent", Percent(g.rate_ppm)},
                      {"reverse_charge", g.reverse_charge},
                      {"label", billing::TaxGroupLabel(g)},
                      {"net", FormatMicros(g.net_micros)},
                      {"tax", FormatMicros(g.tax_micros)}});
  }
  json out = SummaryJson(d);
  out["source"] = d.source;
  out["supply_from"] = FormatTimestamp(d.supply_from);
  out["supply_until"] = FormatTimestamp(d.supply_until);
  out["seller"] = PartyJson(d.seller);
  out["buyer"] = PartyJson(d.buyer);
  out["lines"] = lines;
  out["tax_by_rate"] = groups;
  out["tax_note"] = d.tax_note;
  out["evidence"] = EvidenceJson(d.evidence);
  out["reason"] = TextOrNull(d.reason);
  if (d.kind == billing::DocumentKind::kInvoice) {
    GPUHUB_ASSIGN_OR_RETURN(billing::Credited c, engine::CreditedOf(state, d));
    out["credited"] = {{"net", FormatMicros(c.net_micros)},
                       {"tax", FormatMicros(c.tax_micros)},
                       {"gross", FormatMicros(c.gross_micros)},
                       {"credit_notes", c.notes}};
  }
  return out;
}

json ProfileJson(const engine::State& state, std::int64_t user_id, TimestampMicros now) {
  const engine::AccountBilling* a = engine::FindAccountBilling(state, user_id);
  billing::TaxDecision tax = engine::DecideTaxFor(state, user_id, now);
  json out = {{"billing_country", nullptr},
              {"country_name", nullptr},
              {"business_name", ""},
              {"vat_id", ""},
              {"address", ""},
              {"updated_at", nullptr},
              {"complete", false},
              {"tax",
               {{"country", TextOrNull(tax.country)},
                {"rate_percent", Percent(tax.reverse_charge ? 0 : tax.rate_ppm)},
                {"reverse_charge", tax.reverse_charge},
                {"note", tax.note}}},
              {"evidence", nullptr},
              {"wallet_hold", nullptr}};
  if (a == nullptr) return out;
  const billing::BillingProfile& p = a->profile;
  out["billing_country"] = TextOrNull(p.country);
  out["country_name"] = p.country.empty() ? json(nullptr) : json(billing::CountryName(p.country));
  out["business_name"] = p.business_name;
  out["vat_id"] = p.vat_id;
  out["address"] = p.address;
  out["updated_at"] = Time(p.updated_at);
  out["complete"] = p.complete();
  if (a->evidence.at != 0) out["evidence"] = EvidenceJson(a->evidence);
  if (!a->wallet_hold.empty()) {
    out["wallet_hold"] = {{"reason", a->wallet_hold}, {"since", Time(a->wallet_hold_since)}};
  }
  return out;
}

json RatePeriodJson(const billing::RatePeriod& p) {
  return {{"country", p.country},
          {"country_name", billing::CountryName(p.country)},
          {"rate_percent", Percent(p.rate_ppm)},
          {"valid_from", FormatTimestamp(p.valid_from)},
          {"valid_until", Time(p.valid_until)},
          {"note", p.note}};
}

// An optional RFC 3339 time field; `fallback` when absent.
Result<TimestampMicros> TimeField(const json& body, const char* field, TimestampMicros fallback) {
  GPUHUB_ASSIGN_OR_RETURN(auto text, OptionalString(body, field));
  if (!text) return fallback;
  auto t = ParseTimestamp(*text);
  if (!t.ok()) return t.status().WithField(field);
  return *t;
}

Result<std::string> NoteField(const json& body) {
  GPUHUB_ASSIGN_OR_RETURN(auto note, OptionalString(body, "note"));
  return note.value_or("");
}

// ?from=TIME&until=TIME (RFC 3339, both required): until after from, at most kMaxTaxReportDays.
Result<std::pair<TimestampMicros, TimestampMicros>> ReportPeriod(const Request& r) {
  TimestampMicros t[2] = {0, 0};
  const char* names[2] = {"from", "until"};
  for (int i = 0; i < 2; ++i) {
    auto it = r.query.find(names[i]);
    if (it == r.query.end()) {
      return Status::InvalidArgument(std::string(names[i]) +
                                     " is required (a time such as 2026-10-01T00:00:00Z)")
          .WithField(names[i]);
    }
    auto parsed = ParseTimestamp(it->second);
    if (!parsed.ok()) return parsed.status().WithField(names[i]);
    t[i] = *parsed;
  }
  if (t[1] <= t[0]) {
    return Status::InvalidArgument("until must be after from").WithField("until");
  }
  if (t[1] - t[0] > billing::kMaxTaxReportDays * kMicrosPerDay) {
    return Status::InvalidArgument("a tax report covers at most " +
                                   std::to_string(billing::kMaxTaxReportDays) + " days")
        .WithField("until");
  }
  return std::pair{t[0], t[1]};
}

json TaxReportJson(const billing::TaxReport& report) {
  json rows = json::array();
  for (const auto& row : report.rows) {
    rows.push_back({{"country", row.country},
                    {"rate_percent", Percent(row.rate_ppm)},
                    {"reverse_charge", row.reverse_charge},
                    {"label", billing::TaxGroupLabel({row.country, row.rate_ppm,
                                                      row.reverse_charge, 0, 0})},
                    {"invoices", row.invoices},
                    {"credit_notes", row.credit_notes},
                    {"net", FormatMicros(row.net_micros)},
                    {"tax", FormatMicros(row.tax_micros)}});
  }
  auto range = [](const std::string& first, const std::string& last) -> json {
    if (first.empty()) return nullptr;
    return {{"first", first}, {"last", last}};
  };
  return {{"from", FormatTimestamp(report.from)},
          {"until", FormatTimestamp(report.until)},
          {"currency", "USD"},
          {"rows", rows},
          {"invoices", report.invoices},
          {"credit_notes", report.credit_notes},
          {"net", FormatMicros(report.net_micros)},
          {"tax", FormatMicros(report.tax_micros)},
          {"numbers",
           {{"invoices", range(report.first_number, report.last_number)},
            {"credit_notes", range(report.first_credit_note, report.last_credit_note)}}}};
}

// "2026-000001", "2026-000001.pdf", "2026-000001.html": the number and the form asked for.
struct DocumentPath {
  std::string number;
  enum Form { kJson, kPdf, kHtml } form = kJson;
};
Result<DocumentPath> ParseDocumentPath(const std::string& id) {
  DocumentPath p;
  std::string_view v = id;
  if (v.size() > 4 && v.substr(v.size() - 4) == ".pdf") {
    p.form = DocumentPath::kPdf;
    v.remove_suffix(4);
  } else if (v.size() > 5 && v.substr(v.size() - 5) == ".html") {
    p.form = DocumentPath::kHtml;
    v.remove_suffix(5);
  }
  if (!billing::ParseDocumentNumber(v).ok()) {
    // Not a number at all: the same answer as someone else's (nothing is told apart).
    return Status::NotFound("no invoice '" + std::string(v.substr(0, 32)) + "'");
  }
  p.number = std::string(v);
  return p;
}

// Reads one document of the caller on the writer (admins: `any_user`), then renders it on the
// renderer pool.
void ServeDocumentFile(ApiContext& api, const Request& r, Responder respond, DocumentPath path,
                       bool any_user) {
  api.engine.Execute<Document>(
      [caller = CallerOf(r), number = path.number, any_user](Txn& txn) -> Result<Document> {
        GPUHUB_ASSIGN_OR_RETURN(AuthenticatedCaller found, AuthenticateCaller(txn, caller));
        const User& me = found.user;
        if (any_user && !me.Has(engine::kRoleAdmin)) {
          return Status::PermissionDenied("this endpoint needs the admin role");
        }
        return engine::GetDocument(txn.state, any_user ? 0 : me.id, number);
      },
      [&api, respond, form = path.form](Result<Document> doc) mutable {
        if (!doc.ok()) return respond(Response::Error(doc.status()));
        auto shared = std::make_shared<Responder>(std::move(respond));
        bool posted = api.renderers.Post([shared, form, doc = std::move(doc).value(),
                                          font = api.config.pdf_font]() {
          Response out;
          out.status = 200;
          out.headers.emplace_back("Cache-Control", "private, no-store");
          if (form == DocumentPath::kHtml) {
            out.content_type = "text/html; charset=utf-8";
            out.body = documents::RenderHtml(doc);
          } else {
            documents::PdfOptions options;
            if (!font.empty()) options.font_path = font;
            auto pdf = documents::RenderPdf(doc, options);
            if (!pdf.ok()) {
              spdlog::error("event=pdf_failed number={} error=\"{}\"", doc.number,
                            pdf.status().message());
              return (*shared)(Response::Error(pdf.status()));
            }
            out.content_type = "application/pdf";
            out.body = std::move(pdf).value();
            out.headers.emplace_back("Content-Disposition",
                                     "inline; filename=\"gpuhub-" + doc.number + ".pdf\"");
          }
          (*shared)(std::move(out));
        });
        if (!posted) {
          (*shared)(Response::Error(503, "unavailable", "too many documents being rendered; retry"));
        }
      });
}

void GetDocumentHandler(ApiContext& api, const Request& r, Responder respond, bool any_user) {
  auto path = ParseDocumentPath(r.path_params.at("id"));
  if (!path.ok()) return respond(Response::Error(path.status()));
  if (path->form != DocumentPath::kJson) {
    return ServeDocumentFile(api, r, std::move(respond), *path, any_user);
  }
  RunAuthenticated(api, r, std::move(respond),
                   any_user ? std::uint32_t{engine::kRoleAdmin} : std::uint32_t{0},
                   [number = path->number, any_user](Txn& txn, const User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(
                         Document d, engine::GetDocument(txn.state, any_user ? 0 : me.id, number));
                     GPUHUB_ASSIGN_OR_RETURN(json body, DocumentJson(txn.state, d));
                     return Reply{200, std::move(body)};
                   });
}

Result<json> DocumentList(const engine::State& state, std::int64_t user_id, std::size_t limit,
                          std::int64_t before) {
  json list = json::array();
  GPUHUB_ASSIGN_OR_RETURN(auto docs, engine::ListDocuments(state, user_id, limit + 1, before));
  json next = nullptr;
  if (docs.size() > limit) {
    docs.pop_back();
    next = docs.back().id;
  }
  for (const auto& d : docs) list.push_back(SummaryJson(d));
  return json{{"invoices", list}, {"next_before", next}};
}

Result<std::int64_t> BeforeQuery(const Request& r) {
  auto it = r.query.find("before");
  if (it == r.query.end()) return std::int64_t{0};
  auto v = ParseInt64(it->second, "before");
  if (!v.ok() || *v < 1) {
    return Status::InvalidArgument("before must be the id of a document (next_before of the page)");
  }
  return *v;
}

}  // namespace

engine::RequestOrigin OriginOf(const ApiContext& api, const Request& r) {
  engine::RequestOrigin o;
  o.ip_address = r.remote_address;
  if (!api.config.country_header.empty()) {
    o.ip_country = billing::CleanIpCountry(r.Header(api.config.country_header));
  }
  return o;
}

json SpotTaxJson(const engine::State& state, std::int64_t user_id, std::int64_t hourly_net_micros,
                 TimestampMicros at) {
  billing::TaxDecision d = engine::DecideTaxFor(state, user_id, at);
  std::int64_t rate = d.reverse_charge ? 0 : d.rate_ppm;
  auto taxed = billing::TaxMicros(hourly_net_micros, rate);
  std::int64_t tax = taxed.ok() ? *taxed : 0;
  return {{"country", TextOrNull(d.country)},
          {"rate_percent", Percent(rate)},
          {"reverse_charge", d.reverse_charge},
          {"note", d.note},
          {"hourly_net_usd", FormatMicros(hourly_net_micros)},
          {"hourly_tax_usd", FormatMicros(tax)},
          {"hourly_gross_usd", FormatMicros(hourly_net_micros + tax)}};
}

void RegisterBillingRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/billing-profile",
             RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(api, r, std::move(respond), 0,
                                [](Txn& txn, const User& me) -> Result<Reply> {
                                  return Reply{200, ProfileJson(txn.state, me.id, txn.now)};
                                });
             }));

  router.Add("PUT", "/v1/billing-profile",
             RequireBearer([&api](const Request& r, Responder respond) {
               auto body =
                   ParseJsonObject(r, {"billing_country", "business_name", "vat_id", "address"});
               if (!body.ok()) return respond(Response::Error(body.status()));
               billing::ProfileInput in;
               for (auto [field, target] :
                    {std::pair<const char*, std::string*>{"billing_country", &in.country},
                     {"business_name", &in.business_name},
                     {"vat_id", &in.vat_id},
                     {"address", &in.address}}) {
                 auto v = OptionalString(*body, field);
                 if (!v.ok()) return respond(Response::Error(v.status()));
                 *target = v->value_or("");
               }
               RunAuthenticated(api, r, std::move(respond), 0,
                                [in](Txn& txn, const User& me) -> Result<Reply> {
                                  GPUHUB_RETURN_IF_ERROR(
                                      engine::SetBillingProfile(txn, me.id, in).status());
                                  // The tax-relevant facts, not the address.
                                  engine::RecordAudit(txn, me.id,
                                                      engine::AuditKind::kBillingProfileChanged,
                                                      {{"billing_country", in.country},
                                                       {"business", !in.business_name.empty()},
                                                       {"vat_id", in.vat_id}});
                                  return Reply{200, ProfileJson(txn.state, me.id, txn.now)};
                                });
             }));

  router.Add("GET", "/v1/invoices?limit&before", RequireBearer([&api](const Request& r, Responder respond) {
               auto limit = LimitQuery(r, "limit", kDefaultPageSize, kMaxListPageSize);
               if (!limit.ok()) return respond(Response::Error(limit.status().WithField("limit")));
               auto before = BeforeQuery(r);
               if (!before.ok()) return respond(Response::Error(before.status().WithField("before")));
               RunAuthenticated(
                   api, r, std::move(respond), 0,
                   [n = *limit, b = *before](Txn& txn, const User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(json body, DocumentList(txn.state, me.id, n, b));
                     return Reply{200, std::move(body)};
                   });
             }));

  router.Add("GET", "/v1/invoices/{id}", RequireBearer([&api](const Request& r, Responder respond) {
               GetDocumentHandler(api, r, std::move(respond), /*any_user=*/false);
             }));

  // The billing form's choices: every ISO 3166-1 country, with the rate in force now.
  router.Add("GET", "/v1/countries", [&api](const Request&, Responder respond) {
    api.engine.Execute<json>(
        [](Txn& txn) -> Result<json> {
          json list = json::array();
          for (const auto& [code, name] : billing::AllCountries()) {
            auto rate = txn.state.billing->rates.Find(code, txn.now);
            list.push_back({{"code", code},
                            {"name", name},
                            {"eu", billing::IsEuCountry(code)},
                            {"rate_percent", rate ? Percent(rate->rate_ppm) : "0"}});
          }
          return json{{"countries", list}};
        },
        [respond = std::move(respond)](Result<json> out) {
          if (!out.ok()) return respond(Response::Error(out.status()));
          respond(JsonResponse(200, *out));
        });
  });

  router.Add("GET", "/v1/tax-rates?country&at", [&api](const Request& r, Responder respond) {
    std::string country;
    if (auto it = r.query.find("country"); it != r.query.end()) country = ToLower(it->second);
    for (char& c : country) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (!country.empty() && !billing::IsCountryCode(country)) {
      return respond(Response::Error(
          Status::InvalidArgument("country must be an ISO 3166-1 alpha-2 code such as DE")
              .WithField("country")));
    }
    std::optional<TimestampMicros> at;
    if (auto it = r.query.find("at"); it != r.query.end()) {
      auto t = ParseTimestamp(it->second);
      if (!t.ok()) return respond(Response::Error(t.status().WithField("at")));
      at = *t;
    }
    api.engine.Execute<json>(
        [country, at](Txn& txn) -> Result<json> {
          const auto& rates = txn.state.billing->rates;
          TimestampMicros when = at.value_or(txn.now);
          json list = json::array();
          if (country.empty()) {
            for (const auto& p : rates.CurrentAt(when)) list.push_back(RatePeriodJson(p));
          } else {
            for (const auto& p : rates.All()) {
              if (p.country == country) list.push_back(RatePeriodJson(p));
            }
          }
          return json{{"at", FormatTimestamp(when)},
                      {"note", "countries not listed have no rate (0%) unless an admin sets one"},
                      {"rates", list}};
        },
        [respond = std::move(respond)](Result<json> out) {
          if (!out.ok()) return respond(Response::Error(out.status()));
          respond(JsonResponse(200, *out));
        });
  });

  // ----- Admins ------------------------------------------------------------------------------
  router.Add("POST", "/v1/admin/tax-rates", RequireBearer([&api](const Request& r,
                                                                 Responder respond) {
               auto body = ParseJsonObject(r, {"country", "rate", "valid_from", "note"});
               if (!body.ok()) return respond(Response::Error(body.status()));
               auto country = RequiredString(*body, "country");
               if (!country.ok()) return respond(Response::Error(country.status()));
               auto rate_it = body->find("rate");
               if (rate_it != body->end() && rate_it->is_number()) {
                 return respond(Response::Error(
                     Status::InvalidArgument("rate must be a percentage as a string, such as \"19\" "
                                             "or \"25.5\"")
                         .WithField("rate")));
               }
               auto rate_text = RequiredString(*body, "rate");
               if (!rate_text.ok()) return respond(Response::Error(rate_text.status()));
               auto rate = billing::ParseRatePercent(*rate_text);
               if (!rate.ok()) return respond(Response::Error(rate.status()));
               auto from = TimeField(*body, "valid_from", 0);
               if (!from.ok()) return respond(Response::Error(from.status()));
               auto note = NoteField(*body);
               if (!note.ok()) return respond(Response::Error(note.status()));
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [country = *country, rate = *rate, from = *from, note = *note](
                       Txn& txn, const User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(
                         auto period, engine::ChangeTaxRate(txn, me.id, country, rate,
                                                            from == 0 ? txn.now : from, note));
                     spdlog::info("event=tax_rate_set country={} rate={} from={} admin={}",
                                  period.country, Percent(period.rate_ppm),
                                  FormatTimestamp(period.valid_from), me.id);
                     // Every account of the country: an event of no account (admins see it).
                     engine::RecordAudit(txn, 0, engine::AuditKind::kAdminTaxRateChanged,
                                         {{"country", period.country},
                                          {"rate_percent", Percent(period.rate_ppm)},
                                          {"valid_from", FormatTimestamp(period.valid_from)}});
                     return Reply{201, RatePeriodJson(period)};
                   });
             }));

  router.Add("POST", "/v1/admin/tax-rates/{country}/close",
             RequireBearer([&api](const Request& r, Responder respond) {
               json body = json::object();
               if (!Trim(r.body).empty()) {
                 auto parsed = ParseJsonObject(r, {"valid_until", "note"});
                 if (!parsed.ok()) return respond(Response::Error(parsed.status()));
                 body = *parsed;
               }
               auto until = TimeField(body, "valid_until", 0);
               if (!until.ok()) return respond(Response::Error(until.status()));
               auto note = NoteField(body);
               if (!note.ok()) return respond(Response::Error(note.status()));
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [country = r.path_params.at("country"), until = *until, note = *note](
                       Txn& txn, const User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(
                         auto period, engine::CloseTaxRate(txn, me.id, country,
                                                           until == 0 ? txn.now : until, note));
                     spdlog::info("event=tax_rate_closed country={} until={} admin={}",
                                  period.country, FormatTimestamp(period.valid_until), me.id);
                     engine::RecordAudit(txn, 0, engine::AuditKind::kAdminTaxRateChanged,
                                         {{"country", period.country},
                                          {"closed", true},
                                          {"valid_until", FormatTimestamp(period.valid_until)}});
                     return Reply{200, RatePeriodJson(period)};
                   });
             }));

  router.Add("GET", "/v1/admin/tax-rates/changes",
             RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(api, r, std::move(respond), engine::kRoleAdmin,
                                [](Txn& txn, const User&) -> Result<Reply> {
                                  json list = json::array();
                                  for (const auto& c : txn.state.billing->rate_changes) {
                                    list.push_back({{"seq", c.seq},
                                                    {"kind", c.kind},
                                                    {"country", c.country},
                                                    {"rate_percent", Percent(c.rate_ppm)},
                                                    {"at", FormatTimestamp(c.at)},
                                                    {"note", c.note},
                                                    {"admin_id", c.admin_id},
                                                    {"created_at", FormatTimestamp(c.created_at)}});
                                  }
                                  return Reply{200, {{"changes", list}}};
                                });
             }));

  // The tax report of a period (billing/tax_report.h): what a VAT return is filled from.
  router.Add("GET", "/v1/admin/tax-report?from&until", RequireBearer([&api](const Request& r,
                                                                 Responder respond) {
               auto period = ReportPeriod(r);
               if (!period.ok()) return respond(Response::Error(period.status()));
               // Read on a history reader thread (a period's documents and lines), not the writer.
               ReadThenRender<billing::TaxReport>(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [p = *period](store::ReadPool& pool, const User&) {
                     return engine::TaxReportOf(engine::DocumentArchive(pool), p.first, p.second);
                   },
                   [](Txn&, const User&, const billing::TaxReport& report) -> Result<Reply> {
                     return Reply{200, TaxReportJson(report)};
                   });
             }));

  // Every rule of the stored documents (engine::DocumentRules), walked on a reader thread (the
  // whole history, a chunk at a time: never on the writer), then on the writer what memory holds
  // (engine::CheckBillingMemory) and every rental charge against its document, from what the walk
  // collected and the documents issued since (in memory).
  router.Add("GET", "/v1/admin/billing", RequireBearer([&api](const Request& r, Responder respond) {
               ReadThenRender<StoredDocumentsCheck>(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [](store::ReadPool& pool, const User&) -> Result<StoredDocumentsCheck> {
                     engine::DocumentArchive archive(pool);
                     GPUHUB_ASSIGN_OR_RETURN(std::int64_t last, archive.LastId());
                     engine::DocumentRules rules;
                     auto charge_documents = std::make_shared<engine::ChargeDocumentIndex>();
                     Status broken;
                     Status checked = archive.ScanAll(last, [&](const Document& d) {
                       charge_documents->Add(d);
                       if (broken.ok()) broken = rules.Add(d);
                       return Status::Ok();
                     });
                     if (!checked.ok()) return checked;
                     if (broken.ok()) broken = rules.Finish();
                     return StoredDocumentsCheck{broken, rules.documents(), rules.credit_notes(),
                                                 last, std::move(charge_documents)};
                   },
                   [](Txn& txn, const User&, const StoredDocumentsCheck& stored) -> Result<Reply> {
                     const auto& b = *txn.state.billing;
                     // Memory forgot documents the walk did not read (more were issued meanwhile
                     // than its slack): matching without them would call their charges unbilled.
                     if (b.documents_forgotten_through > stored.last_id) {
                       return Status::Unavailable(
                           "documents left memory while the check read the store; run it again");
                     }
                     engine::ChargeDocumentIndex newer =
                         engine::MemoryChargeDocuments(b, stored.last_id);
                     engine::ChargeDocumentCounts counts;
                     Status invariants = stored.rules;
                     if (invariants.ok()) invariants = engine::CheckBillingMemory(txn.state);
                     if (invariants.ok() && txn.state.rentals != nullptr) {
                       invariants = engine::CheckChargeDocuments(
                           txn.state.rentals->fleet, {stored.charge_documents.get(), &newer},
                           /*unmatched_through=*/0, &counts);
                     }
                     std::size_t open = 0;
                     for (const auto& [key, rows] : b.open_usage) open += rows.size();
                     return Reply{200,
                                  {{"invariants", invariants.ok() ? "ok" : invariants.ToString()},
                                   {"documents", stored.documents},
                                   {"credit_notes", stored.credit_notes},
                                   {"rental_charges_matched", counts.charges},
                                   {"documents_in_memory", b.documents.size()},
                                   {"open_usage_rows", open},
                                   {"tax_rate_changes", b.rate_changes.size()}}};
                   });
             }));

  router.Add("GET", "/v1/admin/invoices?limit&before&username", RequireBearer([&api](const Request& r,
                                                               Responder respond) {
               auto limit = LimitQuery(r, "limit", kDefaultPageSize, kMaxListPageSize);
               if (!limit.ok()) return respond(Response::Error(limit.status().WithField("limit")));
               auto before = BeforeQuery(r);
               if (!before.ok()) return respond(Response::Error(before.status().WithField("before")));
               auto name = r.query.find("username");
               if (name == r.query.end()) {
                 return respond(Response::Error(
                     Status::InvalidArgument("username is required").WithField("username")));
               }
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [n = *limit, b = *before, name = name->second](Txn& txn,
                                                                  const User&) -> Result<Reply> {
                     auto canonical = engine::CanonicalUsername(name);
                     const User* u =
                         canonical.ok() ? engine::FindUserByName(txn.state, *canonical) : nullptr;
                     if (u == nullptr) return Status::NotFound("no account '" + name.substr(0, 40) + "'");
                     GPUHUB_ASSIGN_OR_RETURN(json body, DocumentList(txn.state, u->id, n, b));
                     return Reply{200, std::move(body)};
                   });
             }));

  router.Add("GET", "/v1/admin/invoices/{id}",
             RequireBearer([&api](const Request& r, Responder respond) {
               GetDocumentHandler(api, r, std::move(respond), /*any_user=*/true);
             }));

  router.Add(
      "POST", "/v1/admin/invoices/{id}/credit-notes",
      RequireBearer([&api](const Request& r, Responder respond) {
        auto body = ParseJsonObject(r, {"amount", "reason"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        std::optional<std::int64_t> amount;
        auto it = body->find("amount");
        if (it != body->end() && !it->is_null()) {
          auto text = RequiredString(*body, "amount");
          if (!text.ok()) return respond(Response::Error(text.status()));
          auto micros = ParseDecimalMicros(*text, 6);
          if (!micros.ok() || *micros <= 0) {
            return respond(Response::Error(
                Status::InvalidArgument("amount must be a positive decimal string of the net to "
                                        "credit, such as \"12.50\" (omit it to credit in full)")
                    .WithField("amount")));
          }
          amount = *micros;
        }
        auto reason = RequiredString(*body, "reason");
        if (!reason.ok()) return respond(Response::Error(reason.status()));
        RunAuthenticated(
            api, r, std::move(respond), engine::kRoleAdmin,
            [number = r.path_params.at("id"), amount, reason = *reason](
                Txn& txn, const User& me) -> Result<Reply> {
              GPUHUB_ASSIGN_OR_RETURN(auto out,
                                      engine::IssueCreditNote(txn, me.id, number, amount, reason));
              GPUHUB_ASSIGN_OR_RETURN(json note, DocumentJson(txn.state, out.note));
              return Reply{201, {{"credit_note", std::move(note)}, {"transfer_ids", out.transfer_ids}}};
            });
      }));
}

}  // namespace gpuhub::http
