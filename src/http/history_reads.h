// Reads of history beside the engine's writer, shared by the API's history endpoints (spot market
// history, ledger transfers): authenticate on the writer (a cheap command), read the store on a
// history reader thread through api.history (a store::ReadPool with read-only connections of its
// own: the writer's thread and connection never wait for it), then render on the writer where the
// JSON needs the engine's state. The engine acknowledges a command only after its batch committed,
// so a read issued after an answer sees that command.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/agents.h"
#include "http/api.h"
#include "store/read_pool.h"

namespace gpuhub::http {

inline Status NoHistory() {
  return Status::Unavailable("history reads are not configured on this server");
}

// Runs `work` on a history reader thread; 503 when they are saturated.
inline void OnReader(ApiContext& api, Responder respond, std::function<void(Responder)> work) {
  auto shared = std::make_shared<Responder>(std::move(respond));
  bool posted = api.history_readers.Post([shared, work = std::move(work)] { work(*shared); });
  if (!posted) {
    (*shared)(Response::Error(Status::Unavailable("too many history reads at once; retry")));
  }
}

// The rows of `select`, parsed by `from_row`.
template <typename T, typename FromRow>
Result<std::vector<T>> ReadRows(store::ReadPool& pool, const store::Select& select,
                                FromRow from_row) {
  std::vector<T> rows;
  GPUHUB_RETURN_IF_ERROR(pool.Query(select, [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(T record, from_row(row));
    rows.push_back(std::move(record));
    return Status::Ok();
  }));
  return rows;
}

// Rows of a history page and the launch specs of their bids (a closed bid's is no longer in
// memory: engine/agents.h).
template <typename T>
struct RowsWithImages {
  std::vector<T> rows;
  engine::StoredImages images;
};

// Authenticates, reads `read(pool, me)` on a reader thread, renders `render(txn, me, rows)` on the
// writer.
template <typename Rows>
void ReadThenRender(ApiContext& api, const Request& request, Responder respond, std::uint32_t roles,
                    std::function<Result<Rows>(store::ReadPool&, const engine::User&)> read,
                    std::function<Result<Reply>(engine::Txn&, const engine::User&, const Rows&)>
                        render) {
  if (api.history == nullptr) return respond(Response::Error(NoHistory()));
  AuthenticateThen(api, request, std::move(respond), roles,
                   [&api, request, roles, read = std::move(read), render = std::move(render)](
                       const engine::User& me, Responder respond) {
                     OnReader(
                         api, std::move(respond),
                         [&api, request, roles, me, read, render](Responder respond) {
                           auto rows = read(*api.history, me);
                           if (!rows.ok()) return respond(Response::Error(rows.status()));
                           RunAuthenticated(
                               api, request, std::move(respond), roles,
                               [me_id = me.id, rows = std::move(rows).value(), render](
                                   engine::Txn& txn, const engine::User& user) {
                                 // The same session, unless it was switched between the two hops.
                                 if (user.id != me_id)
                                   return Result<Reply>(Status::Unauthenticated("session changed"));
                                 return render(txn, user, rows);
                               },
                               /*idempotent=*/false);
                         });
                   });
}

}  // namespace gpuhub::http
