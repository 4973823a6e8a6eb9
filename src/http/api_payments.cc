// Top-ups and the payment processor (BTCPay Server's Greenfield API, or the local demo mode).
//
//   POST /v1/topups {"amount": "100.00", "currency": "USD"}  -> 201 invoice (BTCPay: its checkout
//        link; BTCPay unreachable -> 503 and nothing is recorded)
//   GET  /v1/topups?limit=N, GET /v1/topups/{id}             -> the caller's invoices
//   GET  /v1/payments/methods                                -> the coins the store accepts
//   POST /v1/payments/webhook                                (BTCPay; BTCPay-Sig HMAC)
//   GET  /v1/admin/payments/held                             (admin) credits waiting for a decision
//   POST /v1/admin/topups/{id}/payments/{seq} {"decision": "release"|"refuse" (a held credit) |
//        "debit"|"write_off" (a pending reversal), "reason"} (admin)
//   POST /v1/admin/payments/reconcile                        (admin) a reconciliation pass now
//
// The webhook's body is never trusted for amounts: after the signature (constant time, over the
// raw body) the invoice and its payments are read back from BTCPay, and the engine credits what
// that says (engine/topups.h).
#include <spdlog/spdlog.h>

#include "core/strings.h"
#include "engine/limits.h"
#include "engine/topups.h"
#include "http/api.h"
#include "http/limits.h"
#include "http/payments_runtime.h"
#include "http/web_session.h"
#include "ledger/limits.h"
#include "payments/limits.h"
#include "payments/webhook.h"

namespace gpuhub::http {

PaymentsRuntime::PaymentsRuntime(engine::MetricsRegistry& metrics)
    : credits_webhook(metrics.Counter("gpuhub_payments_credits_total",
                                      "Payment credits (or holds) made, by what found them",
                                      {{"source", "webhook"}})),
      credits_reconciliation(metrics.Counter("gpuhub_payments_credits_total",
                                             "Payment credits (or holds) made, by what found them",
                                             {{"source", "reconciliation"}})),
      reconcile_ok(metrics.Counter("gpuhub_payments_reconcile_passes_total",
                                   "Reconciliation passes over open BTCPay invoices",
                                   {{"result", "ok"}})),
      reconcile_failed(metrics.Counter("gpuhub_payments_reconcile_passes_total",
                                       "Reconciliation passes over open BTCPay invoices",
                                       {{"result", "error"}})),
      webhooks_ignored(metrics.Counter("gpuhub_payments_webhooks_total",
                                       "BTCPay webhook deliveries", {{"result", "ignored"}})),
      webhooks_refused(metrics.Counter("gpuhub_payments_webhooks_total",
                                       "BTCPay webhook deliveries", {{"result", "refused"}})),
      btcpay_errors(metrics.Counter("gpuhub_payments_btcpay_errors_total",
                                    "Greenfield calls that failed (unreachable, refused, malformed)")) {}

PaymentsRuntime::~PaymentsRuntime() {
  if (reconciler) reconciler->Stop();
  workers.Stop();
}

namespace {

std::int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json PaymentJson(const engine::InvoicePayment& p) {
  return {{"seq", p.seq},
          {"payment_id", p.payment_id},
          {"payment_method", p.payment_method},
          {"amount", FormatMicros(p.fiat_micros, 2)},
          {"state", engine::PaymentCreditStateName(p.state)},
          {"transfer_id", p.transfer_id.empty() ? json(nullptr) : json(p.transfer_id)},
          {"source", p.source},
          {"created_at", FormatTimestamp(p.created_at)},
          {"updated_at", FormatTimestamp(p.updated_at)},
          {"decision_reason", p.decision_reason.empty() ? json(nullptr) : json(p.decision_reason)}};
}

}  // namespace

json InvoiceJson(const engine::Invoice& inv, const std::string& checkout_base) {
  json payments = json::array();
  for (const auto& p : inv.payments) payments.push_back(PaymentJson(p));
  return {{"invoice_id", inv.id},
          {"status", engine::InvoiceStatusName(inv.status)},
          {"additional_status",
           inv.additional_status.empty() ? json(nullptr) : json(inv.additional_status)},
          {"amount", FormatMicros(inv.amount_micros, 2)},
          {"currency", CurrencyCode(inv.currency)},
          {"credited", FormatMicros(inv.credited_micros, 2)},
          {"held", FormatMicros(inv.held_micros, 2)},
          {"processor", inv.processor},
          {"processor_invoice_id",
           inv.processor_invoice_id.empty() ? json(nullptr) : json(inv.processor_invoice_id)},
          {"checkout_url", inv.checkout_url.empty() ? checkout_base + inv.id : inv.checkout_url},
          {"created_at", FormatTimestamp(inv.created_at)},
          {"updated_at", FormatTimestamp(inv.updated_at)},
          {"expires_at", inv.expires_at ? json(FormatTimestamp(inv.expires_at)) : json(nullptr)},
          {"transfer_id", inv.transfer_id.empty() ? json(nullptr) : json(inv.transfer_id)},
          {"payments", payments}};
}

namespace {

engine::ProcessorReport ToReport(const payments::ProcessorInvoice& inv) {
  engine::ProcessorReport r;
  r.processor_invoice_id = inv.id;
  r.status = std::string(payments::ProcessorStatusName(inv.status));
  r.additional_status = std::string(payments::AdditionalStatusName(inv.additional_status));
  r.currency = inv.currency;
  r.amount_micros = inv.amount_micros;
  for (const auto& p : inv.payments) {
    engine::ReportedPayment rp;
    rp.id = p.id;
    rp.payment_method = p.payment_method_id;
    rp.state = p.status == payments::PaymentStatus::kSettled ? engine::ReportedPayment::State::kSettled
               : p.status == payments::PaymentStatus::kInvalid
                   ? engine::ReportedPayment::State::kInvalid
                   : engine::ReportedPayment::State::kProcessing;
    rp.fiat_micros = p.fiat_micros;
    r.payments.push_back(std::move(rp));
  }
  return r;
}

// Logs every credit, hold and release of an applied report: the operator's record of where each
// payment went and what found it.
void LogChanges(const engine::ReportOutcome& outcome, const std::string& source) {
  for (const auto& c : outcome.changes) {
    spdlog::info(
        "event=payment_{} invoice={} btcpay_invoice={} payment={} amount={} currency={} "
        "transfer={} source={}",
        engine::PaymentCreditStateName(c.state), outcome.invoice.id,
        outcome.invoice.processor_invoice_id, c.payment_id, FormatMicros(c.fiat_micros, 2),
        CurrencyCode(outcome.invoice.currency), c.transfer_id, source);
  }
  for (const auto& c : outcome.changes) {
    if (c.state == engine::PaymentCreditState::kReversalPending) {
      // The operator's alert: money credited earlier is gone and the balance cannot cover it.
      spdlog::error(
          "event=wallet_hold_placed invoice={} btcpay_invoice={} payment={} amount={} "
          "currency={} user={} action=\"the wallet is on hold: debit it back or write it off "
          "(POST /v1/admin/topups/{}/payments/SEQ)\"",
          outcome.invoice.id, outcome.invoice.processor_invoice_id, c.payment_id,
          FormatMicros(c.fiat_micros, 2), CurrencyCode(outcome.invoice.currency),
          outcome.invoice.user_id, outcome.invoice.id);
    }
  }
}

// Applies what BTCPay says about an invoice, on the engine, from a worker thread.
Result<engine::ReportOutcome> ApplyReport(ApiContext& api, const payments::ProcessorInvoice& inv,
                                          const std::string& source) {
  engine::ProcessorReport report = ToReport(inv);
  auto outcome = api.engine.ExecuteSync<engine::ReportOutcome>(
      [report, source](engine::Txn& txn) {
        return engine::ApplyProcessorReport(txn, report, source);
      });
  if (outcome.ok()) {
    LogChanges(*outcome, source);
  } else if (outcome.status().code() == StatusCode::kFailedPrecondition) {
    spdlog::error("event=payment_report_refused btcpay_invoice={} source={} error=\"{}\"", inv.id,
                  source, outcome.status().message());
  }
  return outcome;
}

}  // namespace

Result<engine::ProcessorLink> CreateBtcpayInvoice(ApiContext& api, std::int64_t user_id,
                                                  Currency currency, std::int64_t amount_micros) {
  payments::CreateInvoiceRequest request;
  request.order_id = engine::NewInvoiceId();
  request.user_id = user_id;
  request.amount_micros = amount_micros;
  request.currency = currency;
  request.expiration_minutes = api.config.invoice_expiration_minutes;
  if (!api.config.public_url.empty()) request.redirect_url = api.config.public_url + "/account/";
  auto created = api.payments->btcpay->CreateInvoice(request);
  if (!created.ok()) {
    api.payments->btcpay_errors.Add();
    spdlog::warn("event=btcpay_create_invoice_failed user={} error=\"{}\"", user_id,
                 created.status().message());
    return Status::Unavailable(
        "the payment processor (BTCPay Server) cannot create the invoice right now; nothing was "
        "charged or recorded, retry in a minute");
  }
  engine::ProcessorLink link{request.order_id, created->id, created->checkout_link,
                             created->expires_at};
  spdlog::info("event=btcpay_invoice_created invoice={} btcpay_invoice={} amount={} currency={}",
               link.invoice_id, link.processor_invoice_id, FormatMicros(amount_micros, 2),
               CurrencyCode(currency));
  return link;
}

void OpenTopup(ApiContext& api, std::int64_t user_id, Currency currency,
               std::int64_t amount_micros, std::function<void(Result<engine::Invoice>)> done) {
  auto record = [&api, user_id, currency, amount_micros,
                 done](std::optional<engine::ProcessorLink> link) {
    api.engine.Execute<engine::Invoice>(
        [=](engine::Txn& txn) {
          return engine::CreateTopup(txn, user_id, currency, amount_micros,
                                     link ? &*link : nullptr);
        },
        done);
  };
  if (api.payments == nullptr || api.payments->demo()) return record(std::nullopt);
  bool posted = api.payments->workers.Post([&api, user_id, currency, amount_micros, done,
                                            record] {
    auto link = CreateBtcpayInvoice(api, user_id, currency, amount_micros);
    if (!link.ok()) return done(link.status());
    record(*link);
  });
  if (!posted) done(Status::Unavailable("too many top-ups in progress; retry"));
}

namespace {

void Topup(ApiContext& api, const Request& r, Responder respond) {
  auto body = ParseJsonObject(r, {"amount", "currency"});
  if (!body.ok()) return respond(Response::Error(body.status()));
  auto currency = CurrencyField(*body, "currency");
  if (!currency.ok()) return respond(Response::Error(currency.status()));
  auto it = body->find("amount");
  if (it != body->end() && it->is_number()) {
    return respond(Response::Error(
        Status::InvalidArgument("field 'amount' must be a decimal string such as \"100.00\"")
            .WithField("amount")));
  }
  auto text = RequiredString(*body, "amount");
  if (!text.ok()) return respond(Response::Error(text.status()));
  auto amount = engine::ParseTopupAmount(*text);
  if (!amount.ok()) return respond(Response::Error(amount.status().WithField("amount")));
  std::string base = api.config.checkout_base_url;
  // `reserved`: this request holds its Idempotency-Key in api.in_flight (released with the answer).
  auto record = [&api, r, currency = *currency, amount = *amount, base](
                    Responder respond, std::optional<engine::ProcessorLink> link, bool reserved) {
    RunAuthenticated(
        api, r, std::move(respond), 0,
        [currency, amount, base, link](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
          GPUHUB_ASSIGN_OR_RETURN(
              auto inv,
              engine::CreateTopup(txn, me.id, currency, amount, link ? &*link : nullptr));
          return Reply{201, InvoiceJson(inv, base)};
        },
        /*idempotent=*/true, reserved);
  };
  if (api.payments == nullptr || api.payments->demo()) return record(std::move(respond), {}, false);

  // BTCPay: the Idempotency-Key is reserved BEFORE the outbound call (as sign-up reserves its key
  // before hashing), so two requests with one key never create two BTCPay invoices: the second
  // waits for the first and then runs again, which replays the first's stored answer (or, when
  // the first failed and stored nothing, tries itself).
  std::string held;
  if (r.headers.count("idempotency-key")) {
    std::string key = r.Header("idempotency-key");
    Status valid = engine::ValidateIdempotencyKey(key);
    if (!valid.ok()) return respond(Response::Error(valid));
    std::string id = InFlightId(r, key);
    auto claim = api.in_flight.InsertOrWait(
        id, [&api, r, respond]() mutable { Topup(api, r, std::move(respond)); });
    if (claim == InFlightKeys::Claim::kWaiting) return;
    if (claim == InFlightKeys::Claim::kBusy) {
      return respond(Response::Error(
          409, "conflict", "a request with this Idempotency-Key is still being processed; retry later"));
    }
    held = id;
  }
  auto release = [&api, held] {
    if (!held.empty()) api.in_flight.Erase(held);
  };

  // Check what can be checked first (who, how many open), then create the invoice at BTCPay,
  // then record it. A BTCPay failure answers 503 with nothing recorded; a retry whose first
  // attempt was recorded replays without calling BTCPay.
  std::string key = r.Header("idempotency-key");
  struct Check {
    std::int64_t user_id = 0;
    bool replay = false;
  };
  api.engine.Execute<Check>(
      [caller = CallerOf(r), key](engine::Txn& txn) -> Result<Check> {
        GPUHUB_ASSIGN_OR_RETURN(AuthenticatedCaller found, AuthenticateCaller(txn, caller));
        const engine::User& me = found.user;
        Check check{me.id, false};
        if (!key.empty() &&
            txn.state.idempotency.records.count({"user:" + std::to_string(me.id), key})) {
          check.replay = true;
          return check;
        }
        GPUHUB_RETURN_IF_ERROR(engine::CheckCanOpenTopup(txn, me.id));
        return check;
      },
      [&api, respond = std::move(respond), record, release, reserved = !held.empty(),
       currency = *currency, amount = *amount](Result<Check> check) mutable {
        if (!check.ok()) {
          release();
          return respond(Response::Error(check.status()));
        }
        if (check->replay) return record(std::move(respond), {}, reserved);
        auto shared = std::make_shared<Responder>(std::move(respond));
        bool posted = api.payments->workers.Post([&api, shared, record, release, reserved,
                                                  currency, amount, user = check->user_id]() {
          auto link = CreateBtcpayInvoice(api, user, currency, amount);
          if (!link.ok()) {
            release();
            return (*shared)(Response::Error(link.status()));
          }
          record(std::move(*shared), *link, reserved);
        });
        if (!posted) {
          release();
          (*shared)(Response::Error(503, "unavailable", "too many top-ups in progress; retry"));
        }
      });
}

void Webhook(ApiContext& api, const Request& request, Responder respond) {
  PaymentsRuntime* payments = api.payments;
  if (api.config.webhook_secret.empty()) {
    return respond(Response::Error(
        503, "unavailable",
        "payment webhooks are disabled: no webhook secret is configured (GPUHUB_WEBHOOK_SECRET "
        "or [payments] webhook_secret)"));
  }
  std::string signature = request.Header("btcpay-sig");
  if (signature.empty()) {
    if (payments) payments->webhooks_refused.Add();
    return respond(Response::Error(401, "unauthenticated", "missing BTCPay-Sig header"));
  }
  if (!payments::WebhookSignatureValid(api.config.webhook_secret, request.body, signature)) {
    if (payments) payments->webhooks_refused.Add();
    spdlog::warn("event=webhook_forged bytes={}", request.body.size());
    return respond(Response::Error(401, "unauthenticated", "invalid webhook signature"));
  }
  Status text = CheckJsonText(request.body);  // signed, so not a cross-site form: any type
  if (!text.ok()) return respond(Response::Error(text));
  auto event = payments::ParseWebhookEvent(request.body);
  if (!event.ok()) return respond(Response::Error(event.status()));

  if (payments == nullptr || payments->demo()) {
    // Demo mode: the signed event about our own invoice id settles it (nothing else to ask).
    return RunAnonymous(api, request, std::move(respond), /*idempotent=*/false,
                        [type = event->type, invoice = event->invoice_id](engine::Txn& txn)
                            -> Result<Reply> {
                          GPUHUB_ASSIGN_OR_RETURN(auto outcome,
                                                  engine::ApplyPaymentEvent(txn, type, invoice));
                          return Reply{200,
                                       {{"invoice_id", outcome.invoice.id},
                                        {"status", engine::InvoiceStatusName(outcome.invoice.status)},
                                        {"credited", outcome.credited},
                                        {"ignored", outcome.ignored}}};
                        });
  }
  const payments::WebhookEvent e = *event;
  auto ignored = [&](const std::string& why) {
    payments->webhooks_ignored.Add();
    spdlog::info("event=webhook_ignored delivery={} type={} btcpay_invoice={} reason=\"{}\"",
                 e.delivery_id, e.type, e.invoice_id, why);
    return Response::Json(200, Dump({{"ignored", true}, {"reason", why}}));
  };
  if (!payments::IsInvoiceEvent(e.type)) return respond(ignored("not an invoice event"));
  if (!e.store_id.empty() && e.store_id != payments->btcpay->config().store_id) {
    return respond(ignored("another store's event"));
  }
  spdlog::info("event=webhook_received delivery={} original_delivery={} redelivery={} type={} "
               "btcpay_invoice={}",
               e.delivery_id, e.original_delivery_id, e.is_redelivery, e.type, e.invoice_id);
  api.engine.Execute<std::string>(
      [id = e.invoice_id](engine::Txn& txn) -> Result<std::string> {
        const auto& by = txn.state.topups->by_processor_id;
        auto it = by.find(id);
        if (it == by.end()) return std::string();
        return it->second;
      },
      [&api, payments, e, respond = std::move(respond), ignored](Result<std::string> ours) mutable {
        if (!ours.ok()) return respond(Response::Error(ours.status()));
        if (ours->empty()) return respond(ignored("unknown invoice"));
        auto shared = std::make_shared<Responder>(std::move(respond));
        bool posted = payments->workers.Post([&api, payments, e, shared]() {
          auto invoice = payments->btcpay->GetInvoice(e.invoice_id);
          if (!invoice.ok()) {
            payments->btcpay_errors.Add();
            spdlog::warn("event=btcpay_get_invoice_failed delivery={} btcpay_invoice={} error=\"{}\"",
                         e.delivery_id, e.invoice_id, invoice.status().message());
            // 503: BTCPay redelivers; the reconciliation pass reads it anyway.
            return (*shared)(Response::Error(503, "unavailable",
                                             "cannot read the invoice back from BTCPay Server"));
          }
          std::string source = "webhook:" + (e.delivery_id.empty() ? "?" : e.delivery_id.substr(0, 100));
          auto outcome = ApplyReport(api, *invoice, source);
          if (!outcome.ok()) return (*shared)(Response::Error(outcome.status()));
          payments->credits_webhook.Add(outcome->changes.size());
          json changes = json::array();
          for (const auto& c : outcome->changes) {
            changes.push_back({{"payment_id", c.payment_id},
                               {"amount", FormatMicros(c.fiat_micros, 2)},
                               {"state", engine::PaymentCreditStateName(c.state)}});
          }
          (*shared)(Response::Json(
              200, Dump({{"invoice_id", outcome->invoice.id},
                         {"status", engine::InvoiceStatusName(outcome->invoice.status)},
                         {"credited", !outcome->changes.empty()},
                         {"credited_total", FormatMicros(outcome->invoice.credited_micros, 2)},
                         {"held_total", FormatMicros(outcome->invoice.held_micros, 2)},
                         {"changes", changes},
                         {"ignored", false}})));
        });
        if (!posted) (*shared)(Response::Error(503, "unavailable", "too many webhooks in progress"));
      });
}

void PaymentMethods(ApiContext& api, Responder respond) {
  PaymentsRuntime* payments = api.payments;
  if (payments == nullptr || payments->demo()) {
    return respond(JsonResponse(
        200, {{"mode", "demo"},
              {"identity_check", false},
              {"methods", json::array()},
              {"note",
               "demo mode: no payment processor is configured; invoices are settled by a signed "
               "webhook sent by hand"}}));
  }
  auto answer = [](const std::vector<payments::PaymentMethod>& methods) {
    json list = json::array();
    for (const auto& m : methods) {
      if (m.enabled) list.push_back({{"id", m.id}, {"label", payments::PaymentMethodLabel(m.id)}});
    }
    return JsonResponse(200, {{"mode", "btcpay"}, {"identity_check", false}, {"methods", list}});
  };
  {
    std::lock_guard<std::mutex> lock(payments->methods_mutex);
    if (payments->methods_read_unix_s + 60 > UnixNow()) return respond(answer(payments->methods));
  }
  auto shared = std::make_shared<Responder>(std::move(respond));
  bool posted = payments->workers.Post([payments, shared, answer] {
    auto methods = payments->btcpay->ListPaymentMethods();
    if (!methods.ok()) {
      payments->btcpay_errors.Add();
      return (*shared)(Response::Error(503, "unavailable",
                                       "cannot read the accepted coins from BTCPay Server"));
    }
    {
      std::lock_guard<std::mutex> lock(payments->methods_mutex);
      payments->methods = *methods;
      payments->methods_read_unix_s = UnixNow();
    }
    (*shared)(answer(*methods));
  });
  if (!posted) (*shared)(Response::Error(503, "unavailable", "busy; retry"));
}

}  // namespace

payments::PassResult ReconcileNow(ApiContext& api) {
  PaymentsRuntime* payments = api.payments;
  payments::ReconcileHooks hooks;
  hooks.open_invoices = [&api]() {
    return api.engine.ExecuteSync<std::vector<std::string>>([](engine::Txn& txn) {
      return Result<std::vector<std::string>>(
          engine::WatchedProcessorInvoices(txn, payments::kMaxInvoicesPerReconcilePass));
    });
  };
  hooks.apply = [&api, payments](const payments::ProcessorInvoice& inv) -> Result<int> {
    GPUHUB_ASSIGN_OR_RETURN(auto outcome, ApplyReport(api, inv, "reconciliation"));
    payments->credits_reconciliation.Add(outcome.changes.size());
    return static_cast<int>(outcome.changes.size());
  };
  payments::PassResult result = payments::ReconcileOnce(*payments->btcpay, hooks);
  payments->last_reconcile_unix_s = UnixNow();
  payments->last_reconcile_failed = static_cast<std::int64_t>(result.failed);
  bool ok = result.status.ok() && result.failed == 0;
  (ok ? payments->reconcile_ok : payments->reconcile_failed).Add();
  if (result.failed) payments->btcpay_errors.Add(result.failed);
  spdlog::log(ok ? spdlog::level::info : spdlog::level::warn,
              "event=payments_reconciled checked={} credits={} failed={} error=\"{}\"",
              result.checked, result.credits, result.failed,
              result.status.ok() ? "" : result.status.message());
  return result;
}

void StartReconciliation(ApiContext& api, std::int64_t interval_seconds) {
  if (api.payments == nullptr || api.payments->demo()) return;
  api.payments->reconciler = std::make_unique<payments::Reconciler>(interval_seconds, [&api] {
    // High availability: only the writer reconciles (a standby's engine refuses commands).
    if (api.engine.role() == engine::EngineRole::kWriter) ReconcileNow(api);
  });
  api.payments->reconciler->Start();
}

void RegisterPaymentRoutes(Router& router, ApiContext& api) {
  router.Add("POST", "/v1/topups", RequireBearer([&api](const Request& r, Responder respond) {
               Topup(api, r, std::move(respond));
             }));

  router.Add("GET", "/v1/topups?limit", RequireBearer([&api](const Request& r, Responder respond) {
               // Newest first: the newest 50 unless ?limit= says otherwise (1..500).
               auto limit = LimitQuery(r, "limit", kDefaultPageSize, kMaxListPageSize);
               if (!limit.ok()) return respond(Response::Error(limit.status()));
               std::string base = api.config.checkout_base_url;
               RunAuthenticated(
                   api, r, std::move(respond), 0,
                   [base, n = *limit](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                     json list = json::array();
                     for (const auto& inv : engine::ListTopups(txn, me.id, n)) {
                       list.push_back(InvoiceJson(inv, base));
                     }
                     return Reply{200, {{"topups", list}}};
                   });
             }));

  router.Add("GET", "/v1/topups/{id}", RequireBearer([&api](const Request& r, Responder respond) {
               std::string base = api.config.checkout_base_url;
               std::string id = r.path_params.at("id");
               RunAuthenticated(
                   api, r, std::move(respond), 0,
                   [base, id](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(auto inv, engine::GetTopup(txn, me.id, id));
                     return Reply{200, InvoiceJson(inv, base)};
                   });
             }));

  router.Add("GET", "/v1/payments/methods", [&api](const Request&, Responder respond) {
    PaymentMethods(api, std::move(respond));
  });

  router.Add("POST", "/v1/payments/webhook",
             [&api](const Request& r, Responder respond) { Webhook(api, r, std::move(respond)); });

  router.Add("GET", "/v1/admin/payments/held?limit",
             RequireBearer([&api](const Request& r, Responder respond) {
               auto limit = LimitQuery(r, "limit", kDefaultPageSize, kMaxListPageSize);
               if (!limit.ok()) return respond(Response::Error(limit.status()));
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [n = *limit](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                     json list = json::array();
                     for (const auto& h : engine::ListHeldPayments(txn, n)) {
                       const engine::User* owner = nullptr;
                       auto u = txn.state.accounts.users.find(h.invoice.user_id);
                       if (u != txn.state.accounts.users.end()) owner = &u->second;
                       json item = PaymentJson(h.payment);
                       item["invoice_id"] = h.invoice.id;
                       item["btcpay_invoice_id"] = h.invoice.processor_invoice_id;
                       item["invoice_status"] = engine::InvoiceStatusName(h.invoice.status);
                       item["currency"] = CurrencyCode(h.invoice.currency);
                       item["username"] = owner ? owner->username : "";
                       list.push_back(std::move(item));
                     }
                     return Reply{200, {{"held", list}}};
                   });
             }));

  router.Add(
      "POST", "/v1/admin/topups/{id}/payments/{seq}",
      RequireBearer([&api](const Request& r, Responder respond) {
        auto body = ParseJsonObject(r, {"decision", "reason"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        auto decision = RequiredString(*body, "decision");
        if (!decision.ok()) return respond(Response::Error(decision.status()));
        if (*decision != "release" && *decision != "refuse" && *decision != "debit" &&
            *decision != "write_off") {
          return respond(Response::Error(
              Status::InvalidArgument(
                  "decision must be \"release\" (credit the wallet) or \"refuse\" (drop the "
                  "held credit) for a held payment, \"debit\" (take it back from the wallet) or "
                  "\"write_off\" (let it go) for a pending reversal")
                  .WithField("decision")));
        }
        auto reason = RequiredString(*body, "reason");
        if (!reason.ok()) return respond(Response::Error(reason.status()));
        if (Trim(*reason).empty() || reason->size() > ledger::kMaxTransferMemoBytes) {
          return respond(Response::Error(
              Status::InvalidArgument("reason must be 1.." +
                                      std::to_string(ledger::kMaxTransferMemoBytes) +
                                      " bytes (say why: it is kept with the decision)")
                  .WithField("reason")));
        }
        auto seq = ParseInt64(r.path_params.at("seq"), "payment");
        if (!seq.ok() || *seq < 1) {
          return respond(Response::Error(
              Status::InvalidArgument("the payment in the path is its seq (1, 2, ...)")));
        }
        RunAuthenticated(
            api, r, std::move(respond), engine::kRoleAdmin,
            [id = r.path_params.at("id"), seq = *seq, decision = *decision,
             reason = *reason](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
              GPUHUB_ASSIGN_OR_RETURN(
                  auto p, decision == "release" || decision == "refuse"
                              ? engine::DecideHeldPayment(txn, me.id, id, seq,
                                                          decision == "release", reason)
                              : engine::DecideReversal(txn, me.id, id, seq, decision == "debit",
                                                       reason));
              spdlog::info("event=payment_{} invoice={} seq={} admin={} amount={}",
                           engine::PaymentCreditStateName(p.state), id, seq, me.id,
                           FormatMicros(p.fiat_micros, 2));
              auto invoice = txn.state.topups->invoices.find(id);
              engine::RecordAudit(
                  txn, invoice == txn.state.topups->invoices.end() ? 0 : invoice->second.user_id,
                  engine::AuditKind::kAdminPaymentDecision,
                  {{"invoice_id", id},
                   {"payment_seq", seq},
                   {"decision", decision},
                   {"state", std::string(engine::PaymentCreditStateName(p.state))},
                   {"amount", FormatMicros(p.fiat_micros)},
                   {"reason", reason}});
              return Reply{200, PaymentJson(p)};
            });
      }));

  router.Add("POST", "/v1/admin/payments/reconcile",
             RequireBearer([&api](const Request& r, Responder respond) {
               // Authorize on the writer, then run the pass on a payments worker.
               RunAuthenticated(api, r,
                                [&api, respond = std::move(respond)](Response authorized) mutable {
                                  if (authorized.status != 200) return respond(std::move(authorized));
                                  if (api.payments == nullptr || api.payments->demo()) {
                                    return respond(Response::Error(
                                        409, "failed_precondition",
                                        "demo mode: there is no payment processor to reconcile with"));
                                  }
                                  auto shared = std::make_shared<Responder>(std::move(respond));
                                  bool posted = api.payments->workers.Post([&api, shared] {
                                    payments::PassResult pass = ReconcileNow(api);
                                    (*shared)(JsonResponse(
                                        pass.status.ok() ? 200 : 503,
                                        {{"checked", pass.checked},
                                         {"credits", pass.credits},
                                         {"failed", pass.failed}}));
                                  });
                                  if (!posted) (*shared)(Response::Error(503, "unavailable", "busy"));
                                },
                                engine::kRoleAdmin,
                                [](engine::Txn&, const engine::User&) -> Result<Reply> {
                                  return Reply{200, json::object()};
                                });
             }));
}

}  // namespace gpuhub::http
