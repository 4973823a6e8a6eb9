// Idempotency keys with Stripe's semantics, as a command wrapper.
//
// A client sends `Idempotency-Key: <key>` with a POST. The first request with that key (in its
// scope: the account, or "anonymous") runs and its response (status and body) is stored with a
// fingerprint of the request (method, path, body). Later requests with the same key:
//   - same fingerprint  -> the stored response is replayed, nothing runs again;
//   - other fingerprint -> invalid_argument ("keys are for retries of the same request");
// Responses of 5xx are not stored (the request did not run to a result: retrying may succeed).
// Keys expire kIdempotencyKeyLifetimeMicros (24 h) after first use. Concurrent duplicates (the
// first still running) are refused with 409 by the HTTP layer, which sees requests in flight.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/engine.h"

namespace gpuhub::engine {

struct StoredResponse {
  int status_code = 0;
  std::string body;
  bool replayed = false;  // true when it came from the store
};

// invalid_argument unless 1..kMaxIdempotencyKeyBytes of printable ASCII.
Status ValidateIdempotencyKey(std::string_view key);

// Runs `fn` once per (scope, key). `fn` returns the response it wants stored; when its status is
// >= 400 its writes are dropped (it must not have mutated state) but the response is still kept.
Result<StoredResponse> RunIdempotent(Txn& txn, const std::string& scope, const std::string& key,
                                     const std::string& fingerprint,
                                     const std::function<StoredResponse(Txn&)>& fn);

// Tick hook: forgets keys older than 24 h.
Status ExpireIdempotencyKeys(Txn& txn);

}  // namespace gpuhub::engine
