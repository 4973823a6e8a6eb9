// Multi-node quote requests: a job too large for one 8-card node (the guide's 405B full fine-tune
// is 7,452 GB, five nodes of 8x MI300X) is not "nothing fits" but a request for a price. The
// customer sends the job and a contact; an admin answers with a price and terms, or declines; the
// customer is notified (engine/notifications.h: the account's list and its signed webhook).
//
// What the engine keeps is text the HTTP layer made: the job's fields as sent (a JSON object) and
// the server's own recomputation of it (fit/quote.h: the memory it needs and the nodes of each card
// that hold it), never the figures the customer's page showed. The engine does not size anything
// (it does not link the sizing code): it stores, limits and moves the request through its states.
//
// States: open -> answered | declined (an admin) | withdrawn (the customer). Only an open request
// changes; a second answer is failed_precondition. Limits (engine/limits.h): at most
// kMaxOpenQuoteRequestsPerAccount open and kMaxQuoteRequestsPerAccount in all per account
// (resource_exhausted), the texts bounded (invalid_argument naming the field).
//
// Functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

enum class QuoteStatus : std::uint8_t { kOpen, kAnswered, kDeclined, kWithdrawn };
std::string_view QuoteStatusName(QuoteStatus s);  // "open", "answered", "declined", "withdrawn"
Result<QuoteStatus> ParseQuoteStatus(std::string_view text);

struct QuoteRequest {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  QuoteStatus status = QuoteStatus::kOpen;
  std::string model;             // "405b", "meta-llama/Llama-3.1-405B"
  std::string workload;          // "full", "lora", "qlora", "infer"
  std::int64_t required_bytes = 0;  // the server's recomputation: the whole job's memory
  std::string summary;           // one line for lists: "405b full: 7,452 GB, 5 x 8x MI300X nodes"
  std::string job_json;          // the job's fields as sent (a JSON object)
  std::string sizing_json;       // the server's recomputation (a JSON object, fit/quote.h)
  std::string contact;           // free text: a Matrix/Telegram handle, "reply on the account"
  std::string note;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  // The answer (answered or declined): by which admin, when, the price and the terms as text.
  std::int64_t answered_by = 0;
  TimestampMicros answered_at = 0;
  std::string price;
  std::string terms;
};

struct QuoteRequestsState {
  std::map<std::int64_t, QuoteRequest> requests;
  std::map<std::int64_t, std::deque<std::int64_t>> by_user;  // ids, oldest first
  std::int64_t next_id = 1;
};

// What the HTTP layer hands over (the job already recomputed by fit/quote.h).
struct QuoteRequestInput {
  std::string model;
  std::string workload;
  std::int64_t required_bytes = 0;
  std::string summary;
  std::string job_json;
  std::string sizing_json;
  std::string contact;  // empty: "reply on the account"
  std::string note;
};

// Records an open request of `user_id`. invalid_argument (field "contact" or "note") for a text
// over its limit or with control characters (the note may have line breaks), or an oversized job
// or recomputation (a programmer error of the caller, field "job"); resource_exhausted beyond the
// per-account limits; not_found for an unknown user.
Result<QuoteRequest> CreateQuoteRequest(Txn& txn, std::int64_t user_id,
                                        const QuoteRequestInput& input);

struct QuoteAnswer {
  QuoteStatus status = QuoteStatus::kAnswered;  // answered or declined
  std::string price;  // required when answered ("$61,200/month for 5 nodes, 3 months")
  std::string terms;  // conditions, or why it is declined
};
// An admin's answer to an open request: the customer is notified ("quote_request.answered" or
// "quote_request.declined"). not_found for an unknown id; failed_precondition unless it is open;
// invalid_argument naming "status", "price" or "terms".
Result<QuoteRequest> AnswerQuoteRequest(Txn& txn, std::int64_t admin_id, std::int64_t id,
                                        const QuoteAnswer& answer);
// The customer withdraws an open request of theirs. not_found unless it is theirs;
// failed_precondition unless it is open.
Result<QuoteRequest> WithdrawQuoteRequest(Txn& txn, std::int64_t user_id, std::int64_t id);

// nullptr when there is none.
const QuoteRequest* FindQuoteRequest(const State& state, std::int64_t id);

struct QuoteRequestPage {
  std::vector<QuoteRequest> items;  // newest first
  std::int64_t next_before = 0;     // pass as `before` for the next (older) page; 0: none
};
// The requests of `user_id` (nullopt: every account's, for admins) with id < before (0: from the
// newest), at most `limit`, optionally only those in `status`.
QuoteRequestPage ListQuoteRequests(const State& state, std::optional<std::int64_t> user_id,
                                   std::int64_t before, std::size_t limit,
                                   std::optional<QuoteStatus> status = std::nullopt);

// Checks the per-account indexes and limits against the requests (the invariants tests run).
Status CheckQuoteRequests(const State& state);

Status LoadQuoteRequests(store::Store& store, QuoteRequestsState& state);

}  // namespace gpuhub::engine
