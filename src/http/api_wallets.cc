// Money endpoints (top-ups and the payment processor are in api_payments.cc).
//
//   GET  /v1/wallets                       -> {"wallets": [{"currency", "available", "held"}]}
//   GET  /v1/transfers?limit=N&cursor=C    -> {"transfers": [...], "next_cursor": "C" | null}
//   POST /v1/conversions {"from", "to", "amount"}                       -> 201 conversion
//   GET  /v1/fx-rates                      -> {"rates": [...]}
//   POST /v1/admin/credits {"username", "amount", "currency", "reason"}  (admin) -> 201
//   PUT  /v1/admin/fx-rates/{base}/{quote} {"rate": "1.08", "spread_bps": 50}  (admin)
//   DELETE /v1/admin/fx-rates/{base}/{quote}                            (admin) -> 204
//   GET  /v1/admin/ledger                  (admin) invariants and trial balance
//
// Amounts are decimal strings in and out, never JSON numbers.
#include "core/strings.h"
#include "engine/limits.h"
#include "engine/ledger_archive.h"
#include "engine/wallets.h"
#include "http/api.h"
#include "http/history_reads.h"
#include "http/limits.h"
#include "ledger/limits.h"

namespace gpuhub::http {
namespace {

// A transfer as its owner sees it: which of their accounts, in or out, and the other side's kind
// (never another user's id).
json TransferJson(const ledger::Transfer& t, std::int64_t owner) {
  bool outgoing = t.debit.owner_id == owner && ledger::IsPerUserKind(t.debit.kind);
  const ledger::AccountKey& mine = outgoing ? t.debit : t.credit;
  const ledger::AccountKey& other = outgoing ? t.credit : t.debit;
  return {{"id", t.id},
          {"sequence", t.sequence},
          {"created_at", FormatTimestamp(t.timestamp)},
          {"kind", ledger::TransferKindName(t.kind)},
          {"state", ledger::TransferStateName(t.state)},
          {"direction", outgoing ? "out" : "in"},
          {"account", ledger::AccountKindName(mine.kind)},
          {"counterparty", ledger::AccountKindName(other.kind)},
          {"currency", CurrencyCode(t.currency())},
          {"amount", FormatMicros(t.amount_micros)},
          {"code", t.code},
          {"memo", t.memo}};
}

json FxRateJson(const ledger::FxRate& r) {
  return {{"base", CurrencyCode(r.base)},
          {"quote", CurrencyCode(r.quote)},
          {"rate", ledger::FormatFxRatePpb(r.mid_rate_ppb)},
          {"spread_bps", r.spread_bps},
          {"version", r.version}};
}

}  // namespace

Result<Currency> CurrencyField(const json& body, std::string_view field) {
  GPUHUB_ASSIGN_OR_RETURN(std::string code, RequiredString(body, field));
  auto currency = ParseCurrency(code);
  if (!currency.ok()) {
    return Status::InvalidArgument("field '" + std::string(field) + "' must be USD, EUR or GBP")
        .WithField(std::string(field));
  }
  return *currency;
}

namespace {

Result<std::int64_t> AmountField(const json& body, std::string_view field, int fraction_digits) {
  auto it = body.find(field);
  if (it != body.end() && it->is_number()) {
    return Status::InvalidArgument(
               "field '" + std::string(field) +
               "' must be a decimal string such as \"10.50\", not a JSON number")
        .WithField(std::string(field));
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, RequiredString(body, field));
  auto amount = ParseDecimalMicros(text, fraction_digits);
  if (!amount.ok() || *amount <= 0) {
    // Say what is wrong with this value: sign, digits or size.
    return Status::InvalidArgument(
               "field '" + std::string(field) + "' must be a positive decimal with at most " +
               std::to_string(fraction_digits) + " decimals (" +
               (amount.ok() ? "got '" + text.substr(0, 40) + "'" : amount.status().message()) + ")")
        .WithField(std::string(field));
  }
  return *amount;
}

std::int64_t TimestampOrNow(const engine::Txn& txn) { return txn.now; }

}  // namespace

void RegisterWalletRoutes(Router& router, ApiContext& api) {
  router.Add("GET", "/v1/wallets", RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(api, r, std::move(respond), 0,
                                [](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                                  GPUHUB_ASSIGN_OR_RETURN(auto wallets,
                                                          txn.state.wallets->ledger.Wallets(me.id));
                                  json list = json::array();
                                  for (const auto& w : wallets) {
                                    list.push_back({{"currency", CurrencyCode(w.key.currency)},
                                                    {"available", FormatMicros(w.available())},
                                                    {"held", FormatMicros(w.held())}});
                                  }
                                  return Reply{200, {{"wallets", list}}};
                                });
             }));

  router.Add(
      "GET", "/v1/transfers?limit&cursor", RequireBearer([&api](const Request& r, Responder respond) {
        std::int64_t limit = kDefaultPageSize, cursor = 0;
        if (auto it = r.query.find("limit"); it != r.query.end()) {
          auto v = ParseInt64(it->second, "limit");
          if (!v.ok() || *v < 1 || *v > static_cast<std::int64_t>(ledger::kMaxTransfersPageSize)) {
            return respond(Response::Error(
                400, "invalid_argument",
                "limit must be 1.." + std::to_string(ledger::kMaxTransfersPageSize)));
          }
          limit = *v;
        }
        if (auto it = r.query.find("cursor"); it != r.query.end()) {
          auto v = ParseInt64(it->second, "cursor");
          if (!v.ok() || *v < 1) {
            return respond(Response::Error(400, "invalid_argument",
                                           "cursor must be the next_cursor of a previous page"));
          }
          cursor = *v;
        }
        auto render = [](const engine::User& me, const ledger::TransferPage& page) {
          json list = json::array();
          for (const auto& t : page.transfers) list.push_back(TransferJson(t, me.id));
          json next = page.next_before_sequence ? json(std::to_string(page.next_before_sequence))
                                                : json(nullptr);
          return Reply{200, {{"transfers", list}, {"next_cursor", next}}};
        };
        if (api.history == nullptr) {  // no reader pool (tests): the ledger pages, on the writer
          return RunAuthenticated(
              api, r, std::move(respond), 0,
              [limit, cursor, render](engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                GPUHUB_ASSIGN_OR_RETURN(auto page,
                                        txn.state.wallets->ledger.ListOwnerTransfers(
                                            me.id, cursor, static_cast<std::size_t>(limit)));
                return render(me, page);
              });
        }
        // History is the store's (the ledger keeps only its newest transfers): read beside the
        // writer, keyset-paged on the (debit_owner, sequence) and (credit_owner, sequence) indexes.
        ReadThenRender<ledger::TransferPage>(
            api, r, std::move(respond), 0,
            [limit, cursor](store::ReadPool& pool, const engine::User& me) {
              return engine::ReadOwnerTransfers(pool, me.id, cursor,
                                                static_cast<std::size_t>(limit));
            },
            [render](engine::Txn&, const engine::User& me, const ledger::TransferPage& page)
                -> Result<Reply> { return render(me, page); });
      }));

  router.Add("POST", "/v1/conversions", RequireBearer([&api](const Request& r, Responder respond) {
               auto body = ParseJsonObject(r, {"from", "to", "amount"});
               if (!body.ok()) return respond(Response::Error(body.status()));
               auto from = CurrencyField(*body, "from");
               if (!from.ok()) return respond(Response::Error(from.status()));
               auto to = CurrencyField(*body, "to");
               if (!to.ok()) return respond(Response::Error(to.status()));
               auto amount = AmountField(*body, "amount", 6);
               if (!amount.ok()) return respond(Response::Error(amount.status()));
               RunAuthenticated(
                   api, r, std::move(respond), 0,
                   [from = *from, to = *to, amount = *amount](
                       engine::Txn& txn, const engine::User& me) -> Result<Reply> {
                     GPUHUB_ASSIGN_OR_RETURN(auto c, engine::Convert(txn, me.id, from, to, amount));
                     json ids = json::array();
                     for (const auto& t : c.transfers) ids.push_back(t.id);
                     return Reply{201,
                                  {{"from", CurrencyCode(from)},
                                   {"to", CurrencyCode(to)},
                                   {"debited", FormatMicros(c.quote.from_micros)},
                                   {"credited", FormatMicros(c.quote.to_micros)},
                                   {"rate",
                                    {{"base", CurrencyCode(c.quote.base)},
                                     {"quote", CurrencyCode(c.quote.quote)},
                                     {"mid", ledger::FormatFxRatePpb(c.quote.mid_rate_ppb)},
                                     {"spread_bps", c.quote.spread_bps},
                                     {"version", c.quote.rate_version}}},
                                   {"transfer_ids", ids},
                                   {"created_at", FormatTimestamp(TimestampOrNow(txn))}}};
                   });
             }));

  router.Add("GET", "/v1/fx-rates", RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(api, r, std::move(respond), 0,
                                [](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                                  json list = json::array();
                                  for (const auto& rate : txn.state.wallets->ledger.Fx().All()) {
                                    list.push_back(FxRateJson(rate));
                                  }
                                  return Reply{200, {{"rates", list}}};
                                });
             }));

  router.Add(
      "POST", "/v1/admin/credits", RequireBearer([&api](const Request& r, Responder respond) {
        auto body = ParseJsonObject(r, {"username", "amount", "currency", "reason"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        auto username = RequiredString(*body, "username");
        if (!username.ok()) return respond(Response::Error(username.status()));
        auto canonical = engine::CanonicalUsername(*username);
        if (!canonical.ok()) return respond(Response::Error(canonical.status()));
        auto currency = CurrencyField(*body, "currency");
        if (!currency.ok()) return respond(Response::Error(currency.status()));
        auto amount = AmountField(*body, "amount", 6);
        if (!amount.ok()) return respond(Response::Error(amount.status()));
        auto reason = RequiredString(*body, "reason");
        if (!reason.ok()) return respond(Response::Error(reason.status()));
        if (Trim(*reason).empty() || reason->size() > ledger::kMaxTransferMemoBytes) {
          return respond(Response::Error(
              Status::InvalidArgument("reason must be 1.." +
                                      std::to_string(ledger::kMaxTransferMemoBytes) +
                                      " bytes (say where the money came from)")
                  .WithField("reason")));
        }
        RunAuthenticated(
            api, r, std::move(respond), engine::kRoleAdmin,
            [name = *canonical, currency = *currency, amount = *amount, reason = *reason](
                engine::Txn& txn, const engine::User& me) -> Result<Reply> {
              const engine::User* user = engine::FindUserByName(txn.state, name);
              if (!user) return Status::NotFound("no user '" + name + "'");
              GPUHUB_ASSIGN_OR_RETURN(
                  auto t, engine::ManualCredit(txn, me.id, user->id, currency, amount, reason));
              engine::RecordAudit(txn, user->id, engine::AuditKind::kAdminCredit,
                                  {{"transfer_id", t.id},
                                   {"amount", FormatMicros(t.amount_micros)},
                                   {"currency", std::string(CurrencyCode(currency))},
                                   {"reason", t.memo}});
              return Reply{201,
                           {{"transfer_id", t.id},
                            {"username", user->username},
                            {"currency", CurrencyCode(currency)},
                            {"amount", FormatMicros(t.amount_micros)},
                            {"reason", t.memo},
                            {"created_at", FormatTimestamp(t.timestamp)}}};
            });
      }));

  auto pair_of = [](const Request& r, Currency* base, Currency* quote) -> Status {
    auto b = ParseCurrency(r.path_params.at("base"));
    auto q = ParseCurrency(r.path_params.at("quote"));
    if (!b.ok() || !q.ok()) {
      return Status::InvalidArgument("currencies in the path must be USD, EUR or GBP");
    }
    *base = *b;
    *quote = *q;
    return Status::Ok();
  };

  router.Add(
      "PUT", "/v1/admin/fx-rates/{base}/{quote}",
      RequireBearer([&api, pair_of](const Request& r, Responder respond) {
        Currency base, quote;
        if (Status s = pair_of(r, &base, &quote); !s.ok()) return respond(Response::Error(s));
        auto body = ParseJsonObject(r, {"rate", "spread_bps"});
        if (!body.ok()) return respond(Response::Error(body.status()));
        auto rate_text = RequiredString(*body, "rate");
        if (!rate_text.ok()) return respond(Response::Error(rate_text.status()));
        auto rate = ledger::ParseFxRatePpb(*rate_text);
        if (!rate.ok()) return respond(Response::Error(rate.status().WithField("rate")));
        auto spread = RequiredInteger(*body, "spread_bps", 0, ledger::kMaxFxSpreadBps);
        if (!spread.ok()) return respond(Response::Error(spread.status()));
        RunAuthenticated(
            api, r, std::move(respond), engine::kRoleAdmin,
            [base, quote, rate = *rate, spread = static_cast<std::int32_t>(*spread)](
                engine::Txn& txn, const engine::User&) -> Result<Reply> {
              GPUHUB_RETURN_IF_ERROR(engine::SetFxRate(txn, base, quote, rate, spread).status());
              auto stored = txn.state.wallets->ledger.Fx().Find(base, quote);
              if (!stored) return Status::Internal("rate not stored");
              return Reply{200, FxRateJson(*stored)};
            });
      }));

  router.Add("DELETE", "/v1/admin/fx-rates/{base}/{quote}",
             RequireBearer([&api, pair_of](const Request& r, Responder respond) {
               Currency base, quote;
               if (Status s = pair_of(r, &base, &quote); !s.ok())
                 return respond(Response::Error(s));
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [base, quote](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                     GPUHUB_RETURN_IF_ERROR(engine::RemoveFxRate(txn, base, quote).status());
                     return Reply{204, nullptr};
                   });
             }));

  router.Add("GET", "/v1/admin/ledger", RequireBearer([&api](const Request& r, Responder respond) {
               RunAuthenticated(
                   api, r, std::move(respond), engine::kRoleAdmin,
                   [](engine::Txn& txn, const engine::User&) -> Result<Reply> {
                     const ledger::Ledger& ledger = txn.state.wallets->ledger;
                     Status invariants = ledger.CheckInvariants();
                     // The replay of every transfer runs only while all of them are in memory: on
                     // the writer, history read back from the store would hold every write
                     // (`gpuhub admin verify` replays it beside the server).
                     const bool replayed = ledger.FirstSequence() == 1;
                     Status history =
                         invariants.ok() && replayed ? ledger.CheckHistory() : invariants;
                     json totals = json::object();
                     json accounts = json::array();
                     for (const auto& a : ledger.Accounts()) {
                       std::string c(CurrencyCode(a.key.currency));
                       if (!totals.contains(c)) {
                         totals[c] = {{"debits_posted", std::int64_t{0}},
                                      {"credits_posted", std::int64_t{0}},
                                      {"debits_pending", std::int64_t{0}},
                                      {"credits_pending", std::int64_t{0}}};
                       }
                       for (auto [name, value] :
                            {std::pair<const char*, std::int64_t>{"debits_posted", a.debits_posted},
                             {"credits_posted", a.credits_posted},
                             {"debits_pending", a.debits_pending},
                             {"credits_pending", a.credits_pending}}) {
                         totals[c][name] = totals[c][name].get<std::int64_t>() + value;
                       }
                       accounts.push_back({{"account", ledger::AccountKeyName(a.key)},
                                           {"debits_posted", FormatMicros(a.debits_posted)},
                                           {"credits_posted", FormatMicros(a.credits_posted)},
                                           {"debits_pending", FormatMicros(a.debits_pending)},
                                           {"credits_pending", FormatMicros(a.credits_pending)}});
                     }
                     json totals_text = json::object();
                     bool balanced = true;
                     for (auto& [c, t] : totals.items()) {
                       balanced = balanced && t["debits_posted"] == t["credits_posted"] &&
                                  t["debits_pending"] == t["credits_pending"];
                       for (auto& [name, v] : t.items())
                         totals_text[c][name] = FormatMicros(v.get<std::int64_t>());
                     }
                     return Reply{200,
                                  {{"invariants", history.ok() ? "ok" : history.ToString()},
                                   {"balanced", balanced && history.ok()},
                                   {"history_replayed", replayed},
                                   {"transfers", ledger.LastSequence()},
                                   {"totals", totals_text},
                                   {"accounts", accounts}}};
                   });
             }));
}

}  // namespace gpuhub::http
