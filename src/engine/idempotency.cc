#include "engine/idempotency.h"

#include "engine/limits.h"

namespace gpuhub::engine {

Status ValidateIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyBytes) {
    return Status::InvalidArgument("Idempotency-Key must be 1 to " +
                                   std::to_string(kMaxIdempotencyKeyBytes) + " characters");
  }
  for (char c : key) {
    if (c < 0x21 || c > 0x7e) {
      return Status::InvalidArgument("Idempotency-Key must be printable ASCII without spaces");
    }
  }
  return Status::Ok();
}

Result<std::optional<StoredResponse>> FindIdempotent(const Txn& txn, const std::string& scope,
                                                     const std::string& key,
                                                     const Fingerprint& fingerprint) {
  const IdempotencyState& idem = txn.state.idempotency;
  auto it = idem.records.find(std::make_pair(scope, key));
  if (it == idem.records.end() ||
      it->second.created_at + kIdempotencyKeyLifetimeMicros <= txn.now) {
    return std::optional<StoredResponse>();
  }
  if (!fingerprint.Matches(it->second.fingerprint)) {
    return Status::InvalidArgument(
        "Idempotency-Key '" + key.substr(0, 64) +
        "' was already used for a different request; use a new key for a new request");
  }
  return std::optional<StoredResponse>(
      StoredResponse{it->second.status_code, it->second.response_body, true});
}

Result<StoredResponse> RunIdempotent(Txn& txn, const std::string& scope, const std::string& key,
                                     const Fingerprint& fingerprint,
                                     const std::function<StoredResponse(Txn&)>& fn) {
  GPUHUB_ASSIGN_OR_RETURN(std::optional<StoredResponse> stored,
                          FindIdempotent(txn, scope, key, fingerprint));
  if (stored) return *stored;
  IdempotencyState& idem = txn.state.idempotency;
  auto id = std::make_pair(scope, key);
  auto it = idem.records.find(id);
  std::size_t mark = txn.writes.size();
  StoredResponse response = fn(txn);
  if (response.status_code >= 400) txn.writes.Truncate(mark);
  if (response.status_code >= 500 || !response.replayable ||
      response.body.size() > kMaxStoredResponseBytes) {
    return response;
  }
  if (it != idem.records.end()) {  // an expired record not yet purged: replace it
    auto range = idem.by_age.equal_range(it->second.created_at);
    for (auto a = range.first; a != range.second; ++a) {
      if (a->second == id) {
        idem.by_age.erase(a);
        break;
      }
    }
  }
  IdempotencyRecord record{fingerprint.current, response.status_code, response.body, txn.now};
  idem.records[id] = record;
  idem.by_age.emplace(txn.now, id);
  txn.writes.Upsert("idempotency_keys",
                    {{"scope", scope},
                     {"idem_key", key},
                     {"fingerprint", fingerprint.current},
                     {"status_code", std::int64_t{response.status_code}},
                     {"response_body", response.body},
                     {"created_at_us", txn.now}},
                    2);
  return response;
}

Status ExpireIdempotencyKeys(Txn& txn) {
  IdempotencyState& idem = txn.state.idempotency;
  while (!idem.by_age.empty() &&
         idem.by_age.begin()->first + kIdempotencyKeyLifetimeMicros <= txn.now) {
    auto id = idem.by_age.begin()->second;
    idem.by_age.erase(idem.by_age.begin());
    idem.records.erase(id);
    txn.writes.Delete("idempotency_keys", {{"scope", id.first}, {"idem_key", id.second}});
  }
  return Status::Ok();
}

Status LoadIdempotency(store::Store& store, IdempotencyState& state) {
  return store.Scan(
      "idempotency_keys",
      {"scope", "idem_key", "fingerprint", "status_code", "response_body", "created_at_us"},
      "scope, idem_key", [&](const store::Row& row) -> Status {
        IdempotencyRecord r;
        GPUHUB_ASSIGN_OR_RETURN(std::string scope, row.Text(0));
        GPUHUB_ASSIGN_OR_RETURN(std::string key, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(r.fingerprint, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(r.status_code, row.IntAs<int>(3));
        GPUHUB_ASSIGN_OR_RETURN(r.response_body, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(r.created_at, row.Int(5));
        state.by_age.emplace(r.created_at, std::make_pair(scope, key));
        state.records[{scope, key}] = std::move(r);
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
