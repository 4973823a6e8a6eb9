// Idempotency keys with Stripe's semantics, as a command wrapper.
//
// A client sends `Idempotency-Key: <key>` with a POST. The first request with that key (in its
// scope: the account, or "anonymous") runs and its response (status and body) is stored with a
// fingerprint of the request (method, path, body: see Fingerprint). Later requests with the same
// key:
//   - same fingerprint  -> the stored response is replayed, nothing runs again;
//   - other fingerprint -> invalid_argument ("keys are for retries of the same request");
// Responses of 5xx are not stored (the request did not run to a result: retrying may succeed).
// Keys expire kIdempotencyKeyLifetimeMicros (24 h) after first use. Concurrent duplicates (the
// first still running) are refused with 409 by the HTTP layer, which sees requests in flight; it
// asks FindIdempotent first, so a key whose first request has finished always replays, even while
// another retry of it is in flight.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/engine.h"

namespace gpuhub::engine {

struct StoredResponse {
  int status_code = 0;
  std::string body;
  bool replayed = false;  // true when it came from the store
  // false: the response is not stored under the Idempotency-Key, so a retry with the same key runs
  // again. For a 402 that says "not now": the order did not happen, and the same request may
  // succeed once the wallet is topped up.
  bool replayable = true;
};

// How a request is recognised under its key (the HTTP layer computes it: http::RequestFingerprint).
// `current` is stored with a new key. A stored fingerprint matches when it equals `current`, or
// `legacy` when that is set: the form an earlier version stored for the same request (a hash of
// the raw body), so a retry with the identical bytes still replays across an upgrade while keys
// stored before it live out their 24 hours.
struct Fingerprint {
  std::string current;
  std::string legacy;  // empty: no other form
  bool Matches(std::string_view stored) const {
    return stored == current || (!legacy.empty() && stored == legacy);
  }
};

// invalid_argument unless 1..kMaxIdempotencyKeyBytes of printable ASCII.
Status ValidateIdempotencyKey(std::string_view key);

// The stored answer of (scope, key) while it lives: the replay when `fingerprint` matches,
// invalid_argument when the key was used for another request, nullopt when nothing is stored (the
// first request has not finished, or its answer was a 5xx).
Result<std::optional<StoredResponse>> FindIdempotent(const Txn& txn, const std::string& scope,
                                                     const std::string& key,
                                                     const Fingerprint& fingerprint);

// Runs `fn` once per (scope, key). `fn` returns the response it wants stored; when its status is
// >= 400 its writes are dropped (it must not have mutated state) but the response is still kept
// (unless it is not replayable).
Result<StoredResponse> RunIdempotent(Txn& txn, const std::string& scope, const std::string& key,
                                     const Fingerprint& fingerprint,
                                     const std::function<StoredResponse(Txn&)>& fn);

// Tick hook: forgets keys older than 24 h.
Status ExpireIdempotencyKeys(Txn& txn);

}  // namespace gpuhub::engine
