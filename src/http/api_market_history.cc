// The spot market's history, read from the store: the exchange holds only open records (closed
// bids, ended leases, closed asks and resolved payouts leave memory once written, issue 15), so
// history lists and lookups of closed records page through the database.
//
//   GET /v1/bids?limit=&cursor=                    a customer's bids, newest first
//   GET /v1/leases?as=customer|provider&limit=&cursor=
//   GET /v1/leases/{id}                            one lease of the caller (either side)
//   GET /v1/asks?limit=&cursor=, GET /v1/payouts?limit=&cursor=   a provider's
//   GET /v1/markets/{gpu}/trades?limit=&cursor=    the recent trades from memory, older from the
//   store
//
// Every list is keyset-paged on (owner, id) indexes (migration 13): `cursor` is the last id of the
// page before, so a page never skips or repeats a row while new ones arrive.
//
// How a read runs: authenticate on the writer (a cheap command), read the store on a history
// reader thread through api.history (a store::ReadPool with read-only connections of its own: the
// writer's thread and connection never wait for it), then render on the writer where the JSON
// needs the engine's state (a bid's image, a lease's connection and tax). The engine acknowledges
// a command only after its batch committed, so a read issued after an answer sees that command.
//
// Commands on a closed record (cancel a filled bid, stop an ended lease, ...) get what they got
// while closed records stayed in memory: 409 "already <status>" when the record is the caller's,
// 404 otherwise (someone else's id is not disclosed).
#include <memory>
#include <optional>

#include "engine/market.h"
#include "engine/market_rows.h"
#include "http/history_reads.h"
#include "http/limits.h"
#include "http/market_json.h"
#include "market/limits.h"
#include "store/read_pool.h"

namespace gpuhub::http {
namespace {

using engine::Txn;
using engine::User;
using Op = store::Condition::Op;

const market::Exchange& X(Txn& txn) { return txn.state.market->exchange; }

store::Select ById(const char* table, const std::vector<std::string>& columns, std::int64_t id) {
  store::Select select;
  select.table = table;
  select.columns = columns;
  select.where = {{"id", Op::kEq, id}};
  return select;
}

// A command on a record by id whose 404 is checked against the store: `closed(pool, caller, id)`
// says "<what> <id> is already <status>" when the record is the caller's and closed.
using ClosedLookup =
    std::function<Result<std::optional<std::string>>(store::ReadPool&, const User&, std::int64_t)>;
Handler ClosedIs409(ApiContext& api, std::uint32_t roles, const char* what, ClosedLookup closed,
                    std::function<Result<Reply>(Txn&, const User&, std::int64_t)> action) {
  return [&api, roles, what, closed = std::move(closed), action = std::move(action)](
             const Request& r, Responder respond) {
    auto id = IdOnly(r, what);
    if (!id.ok()) return respond(Response::Error(id.status()));
    // Written by the action on the writer, read by the responder the writer then calls.
    auto caller = std::make_shared<std::optional<User>>();
    Responder check = [&api, caller, id = *id, closed, respond](Response response) mutable {
      if (response.status != 404 || !caller->has_value() || api.history == nullptr) {
        return respond(std::move(response));
      }
      auto shared = std::make_shared<Response>(std::move(response));
      OnReader(api, respond, [&api, caller, id, closed, shared](Responder respond) {
        auto message = closed(*api.history, **caller, id);
        if (message.ok() && message->has_value()) {
          return respond(Response::Error(Status::FailedPrecondition(**message)));
        }
        respond(std::move(*shared));
      });
    };
    RunAuthenticated(api, r, std::move(check), roles,
                     [caller, id = *id, action](Txn& txn, const User& me) -> Result<Reply> {
                       *caller = me;
                       auto reply = action(txn, me, id);
                       if (reply.ok() || reply.status().code() != StatusCode::kNotFound) {
                         return reply;
                       }
                       // Not kept under the Idempotency-Key: the 404 may become a 409 after the
                       // store lookup, and a retry with the same key must get that 409 again (a
                       // replay would skip the lookup and answer the bare 404).
                       Reply not_found{404, nullptr, /*replayable=*/false};
                       not_found.serialized = ErrorBody("not_found", reply.status().message(),
                                                        reply.status().field());
                       return not_found;
                     });
  };
}

}  // namespace

void RegisterMarketHistoryRoutes(Router& router, ApiContext& api) {
  using engine::kRoleAdmin;
  using engine::kRoleCustomer;
  using engine::kRoleProvider;

  // ----- Lists ----------------------------------------------------------------------------------
  router.Add("GET", "/v1/bids?limit&cursor", [&api](const Request& r, Responder respond) {
    auto page = PageQuery(r);
    if (!page.ok()) return respond(Response::Error(page.status()));
    ReadThenRender<RowsWithImages<market::Bid>>(
        api, r, std::move(respond), kRoleCustomer,
        [page = *page](store::ReadPool& pool, const User& me) -> Result<RowsWithImages<market::Bid>> {
          RowsWithImages<market::Bid> out;
          GPUHUB_ASSIGN_OR_RETURN(
              out.rows, ReadRows<market::Bid>(
                            pool,
                            engine::HistoryPageSelect("market_bids", engine::BidColumns(),
                                                      "customer_id", me.id, page.before,
                                                      page.limit + 1),
                            engine::BidFromRow));
          std::vector<std::int64_t> ids;
          for (const auto& b : out.rows) ids.push_back(b.id);
          GPUHUB_RETURN_IF_ERROR(engine::ReadLaunchSpecs(pool, ids, out.images));
          return out;
        },
        [page = *page](Txn& txn, const User&,
                       const RowsWithImages<market::Bid>& read) -> Result<Reply> {
          std::vector<market::Bid> bids = read.rows;
          json next = TakePage(bids, page.limit);
          Reply reply;
          JsonWriter w(reply.serialized);
          w.BeginObject().Key("bids").BeginArray();
          for (const auto& stored : bids) {
            // A resting bid's latest state is the exchange's.
            const market::Bid* open = X(txn).FindBid(stored.id);
            w.BeginObject();
            WriteBidMembers(w, txn.state, open != nullptr ? *open : stored, &read.images);
            w.EndObject();
          }
          w.EndArray().Key("next_cursor").Value(next).EndObject();
          return reply;
        });
  });
  router.Add("GET", "/v1/leases?limit&cursor&as", [&api](const Request& r, Responder respond) {
    auto page = PageQuery(r);
    if (!page.ok()) return respond(Response::Error(page.status()));
    bool as_provider = false;
    if (auto it = r.query.find("as"); it != r.query.end() && it->second != "customer") {
      if (it->second != "provider") {
        return respond(Response::Error(
            Status::InvalidArgument("as must be customer or provider").WithField("as")));
      }
      as_provider = true;
    }
    ReadThenRender<RowsWithImages<market::Lease>>(
        api, r, std::move(respond), 0,
        [page = *page, as_provider](store::ReadPool& pool,
                                    const User& me) -> Result<RowsWithImages<market::Lease>> {
          RowsWithImages<market::Lease> out;
          GPUHUB_ASSIGN_OR_RETURN(
              out.rows, ReadRows<market::Lease>(
                            pool,
                            engine::HistoryPageSelect("market_leases", engine::LeaseColumns(),
                                                      as_provider ? "provider_id" : "customer_id",
                                                      me.id, page.before, page.limit + 1),
                            engine::LeaseFromRow));
          std::vector<std::int64_t> ids;
          for (const auto& l : out.rows) ids.push_back(l.bid_id);
          GPUHUB_RETURN_IF_ERROR(engine::ReadLaunchSpecs(pool, ids, out.images));
          return out;
        },
        [page = *page, as_provider](Txn& txn, const User&,
                                    const RowsWithImages<market::Lease>& read) -> Result<Reply> {
          std::vector<market::Lease> leases = read.rows;
          json next = TakePage(leases, page.limit);
          json list = json::array();
          for (const auto& stored : leases) {
            const market::Lease* live = X(txn).FindLease(stored.id);
            const market::Lease& l = live != nullptr ? *live : stored;
            list.push_back(as_provider ? LeaseJson(txn.state, l, true, &read.images)
                                       : CustomerLeaseJson(txn, l, &read.images));
          }
          return Reply{200, {{"leases", list}, {"next_cursor", next}}};
        });
  });
  router.Add("GET", "/v1/asks?limit&cursor", [&api](const Request& r, Responder respond) {
    auto page = PageQuery(r);
    if (!page.ok()) return respond(Response::Error(page.status()));
    ReadThenRender<std::vector<market::Ask>>(
        api, r, std::move(respond), kRoleProvider,
        [page = *page](store::ReadPool& pool, const User& me) {
          return ReadRows<market::Ask>(
              pool,
              engine::HistoryPageSelect("market_asks", engine::AskColumns(), "provider_id", me.id,
                                        page.before, page.limit + 1),
              engine::AskFromRow);
        },
        [page = *page](Txn& txn, const User&,
                       const std::vector<market::Ask>& rows) -> Result<Reply> {
          std::vector<market::Ask> asks = rows;
          json next = TakePage(asks, page.limit);
          json list = json::array();
          for (const auto& stored : asks) {
            const market::Ask* open = X(txn).FindAsk(stored.id);
            const market::Ask& a = open != nullptr ? *open : stored;
            list.push_back(AskJson(a, X(txn).FreeGpus(a.machine_id)));
          }
          return Reply{200, {{"asks", list}, {"next_cursor", next}}};
        });
  });
  router.Add("GET", "/v1/payouts?limit&cursor", [&api](const Request& r, Responder respond) {
    auto page = PageQuery(r);
    if (!page.ok()) return respond(Response::Error(page.status()));
    ReadThenRender<std::vector<market::Payout>>(
        api, r, std::move(respond), kRoleProvider,
        [page = *page](store::ReadPool& pool, const User& me) {
          return ReadRows<market::Payout>(
              pool,
              engine::HistoryPageSelect("market_payouts", engine::PayoutColumns(), "provider_id",
                                        me.id, page.before, page.limit + 1),
              engine::PayoutFromRow);
        },
        [page = *page](Txn& txn, const User&,
                       const std::vector<market::Payout>& rows) -> Result<Reply> {
          std::vector<market::Payout> payouts = rows;
          json next = TakePage(payouts, page.limit);
          json list = json::array();
          for (const auto& stored : payouts) {
            const market::Payout* pending = X(txn).FindPayout(stored.id);
            list.push_back(PayoutWithTarget(txn.state, pending != nullptr ? *pending : stored));
          }
          return Reply{200, {{"payouts", list}, {"next_cursor", next}}};
        });
  });

  // ----- One lease -----------------------------------------------------------------------------
  router.Add("GET", "/v1/leases/{id}", [&api](const Request& r, Responder respond) {
    auto id = IdParam(r, "lease");
    if (!id.ok()) return respond(Response::Error(id.status()));
    ReadThenRender<RowsWithImages<market::Lease>>(
        api, r, std::move(respond), 0,
        [id = *id](store::ReadPool& pool,
                   const User&) -> Result<RowsWithImages<market::Lease>> {
          RowsWithImages<market::Lease> out;
          GPUHUB_ASSIGN_OR_RETURN(
              out.rows, ReadRows<market::Lease>(
                            pool, ById("market_leases", engine::LeaseColumns(), id),
                            engine::LeaseFromRow));
          if (!out.rows.empty()) {
            GPUHUB_RETURN_IF_ERROR(
                engine::ReadLaunchSpecs(pool, {out.rows.front().bid_id}, out.images));
          }
          return out;
        },
        [id = *id](Txn& txn, const User& me,
                   const RowsWithImages<market::Lease>& read) -> Result<Reply> {
          const market::Lease* l = X(txn).FindLease(id);
          if (l == nullptr && !read.rows.empty()) l = &read.rows.front();
          if (l == nullptr || (l->customer_id != me.id && l->provider_id != me.id)) {
            return Status::NotFound("no lease " + std::to_string(id) + " of yours");
          }
          return Reply{200, l->provider_id == me.id ? LeaseJson(txn.state, *l, true, &read.images)
                                                    : CustomerLeaseJson(txn, *l, &read.images)};
        });
  });

  // ----- Trades (public) -------------------------------------------------------------------------
  // The recent trades are in memory (market data); a page past them reads the store.
  router.Add("GET", "/v1/markets/{gpu}/trades?limit&cursor", [&api](const Request& r, Responder respond) {
    auto page = PageQuery(r, market::kDefaultPageSize);
    if (!page.ok()) return respond(Response::Error(page.status()));
    struct Recent {
      std::string name;
      std::vector<market::Trade> trades;
      bool complete = false;  // the page needs nothing older than memory holds
    };
    std::string gpu = r.path_params.at("gpu");
    api.engine.Execute<Recent>(
        [gpu, page = *page](Txn& txn) -> Result<Recent> {
          Recent out;
          GPUHUB_ASSIGN_OR_RETURN(out.name, X(txn).MarketName(gpu));
          GPUHUB_ASSIGN_OR_RETURN(out.trades, X(txn).Trades(gpu, page.limit + 1, page.before));
          GPUHUB_ASSIGN_OR_RETURN(bool all, X(txn).HoldsAllTrades(gpu));
          out.complete = all || out.trades.size() > page.limit;
          return out;
        },
        [&api, page = *page, respond = std::move(respond)](Result<Recent> recent) mutable {
          if (!recent.ok()) return respond(Response::Error(recent.status()));
          auto answer = [page](const std::string& name, std::vector<market::Trade> trades) {
            json next = TakePage(trades, page.limit);
            std::string body;
            JsonWriter w(body);
            w.BeginObject().Key("gpu").String(name).Key("trades").BeginArray();
            for (const auto& t : trades) WriteTrade(w, t);
            w.EndArray().Key("next_cursor").Value(next).EndObject();
            return Response::Json(200, std::move(body));
          };
          if (recent->complete || api.history == nullptr) {
            return respond(answer(recent->name, std::move(recent->trades)));
          }
          OnReader(api, std::move(respond),
                   [&api, page, name = recent->name, answer](Responder respond) {
                     auto trades = ReadRows<market::Trade>(
                         *api.history, engine::TradePageSelect(name, page.before, page.limit + 1),
                         engine::TradeFromRow);
                     if (!trades.ok()) return respond(Response::Error(trades.status()));
                     respond(answer(name, std::move(trades).value()));
                   });
        });
  });

  // ----- Commands on closed records: 409 as before they left memory ---------------------------
  auto lookup = [](const char* table, const char* owner_column, const char* what,
                   std::string open) -> ClosedLookup {
    return [table, owner_column, what, open](
               store::ReadPool& pool, const User& me,
               std::int64_t id) -> Result<std::optional<std::string>> {
      store::Select select;
      select.table = table;
      select.columns = {"status"};
      select.where = {{"id", Op::kEq, id}};
      if (owner_column != nullptr) select.where.push_back({owner_column, Op::kEq, me.id});
      std::optional<std::string> message;
      GPUHUB_RETURN_IF_ERROR(pool.Query(select, [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::string status, row.Text(0));
        if (status != open) {
          message = std::string(what) + " " + std::to_string(id) +
                    (std::string_view(what) == "lease" ? " has already " : " is already ") + status;
        }
        return Status::Ok();
      }));
      return message;
    };
  };
  router.Add("DELETE", "/v1/bids/{id}",
             ClosedIs409(api, kRoleCustomer, "bid",
                         lookup("market_bids", "customer_id", "bid",
                                std::string(market::BidStatusName(market::BidStatus::kResting))),
                         [](Txn& txn, const User& me, std::int64_t id) -> Result<Reply> {
                           GPUHUB_ASSIGN_OR_RETURN(auto bid, engine::CancelBid(txn, me.id, id));
                           Reply reply;
                           reply.serialized = BidBody(txn.state, bid);
                           return reply;
                         }));
  router.Add("POST", "/v1/leases/{id}/stop",
             ClosedIs409(api, kRoleCustomer, "lease",
                         lookup("market_leases", "customer_id", "lease",
                                std::string(market::LeaseStatusName(market::LeaseStatus::kActive))),
                         [](Txn& txn, const User& me, std::int64_t id) -> Result<Reply> {
                           GPUHUB_ASSIGN_OR_RETURN(auto lease, engine::StopLease(txn, me.id, id));
                           return Reply{200, CustomerLeaseJson(txn, lease)};
                         }));
  router.Add("DELETE", "/v1/asks/{id}",
             ClosedIs409(api, kRoleProvider, "ask",
                         lookup("market_asks", "provider_id", "ask",
                                std::string(market::AskStatusName(market::AskStatus::kOpen))),
                         [](Txn& txn, const User& me, std::int64_t id) -> Result<Reply> {
                           GPUHUB_ASSIGN_OR_RETURN(auto ask, engine::CancelAsk(txn, me.id, id));
                           return Reply{200, AskJson(ask, 0)};
                         }));
  for (bool paid : {true, false}) {
    router.Add(
        "POST", paid ? "/v1/admin/payouts/{id}/paid" : "/v1/admin/payouts/{id}/reject",
        ClosedIs409(api, kRoleAdmin, "payout",
                    lookup("market_payouts", nullptr, "payout",
                           std::string(market::PayoutStatusName(market::PayoutStatus::kPending))),
                    [paid](Txn& txn, const User& me, std::int64_t id) -> Result<Reply> {
                      GPUHUB_ASSIGN_OR_RETURN(auto p, engine::ResolvePayout(txn, me.id, id, paid));
                      return Reply{200, PayoutWithTarget(txn.state, p)};
                    }));
  }
}

}  // namespace gpuhub::http
