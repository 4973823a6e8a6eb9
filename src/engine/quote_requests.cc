#include "engine/quote_requests.h"

#include <algorithm>

#include "engine/limits.h"
#include "engine/notifications.h"

namespace gpuhub::engine {
namespace {

constexpr const char* kTable = "quote_requests";

Status BadField(const std::string& field, std::string message) {
  return Status::InvalidArgument(std::move(message)).WithField(field);
}

// Text for people: no ASCII control characters (UTF-8 beyond ASCII is allowed: a handle or a name
// in any script; the JSON parser has already refused malformed UTF-8), line breaks only where
// `lines` says so.
bool PrintableText(std::string_view text, bool lines) {
  for (unsigned char c : text) {
    if ((c == '\n' || c == '\r') && lines) continue;
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

Status CheckText(const std::string& field, std::string_view text, std::size_t max, bool lines) {
  if (text.size() > max || !PrintableText(text, lines)) {
    return BadField(field, field + " must be at most " + std::to_string(max) + " bytes of text" +
                               (lines ? "" : " on one line") + " without control characters");
  }
  return Status::Ok();
}

void Write(Txn& txn, const QuoteRequest& q) {
  txn.writes.Upsert(kTable, {{"id", q.id},
                             {"user_id", q.user_id},
                             {"status", std::string(QuoteStatusName(q.status))},
                             {"model", q.model},
                             {"workload", q.workload},
                             {"required_bytes", q.required_bytes},
                             {"summary", q.summary},
                             {"job", q.job_json},
                             {"sizing", q.sizing_json},
                             {"contact", q.contact},
                             {"note", q.note},
                             {"created_at_us", q.created_at},
                             {"updated_at_us", q.updated_at},
                             {"answered_by", q.answered_by},
                             {"answered_at_us", q.answered_at},
                             {"price", q.price},
                             {"terms", q.terms}});
}

std::size_t OpenCount(const QuoteRequestsState& s, std::int64_t user_id) {
  auto it = s.by_user.find(user_id);
  if (it == s.by_user.end()) return 0;
  return static_cast<std::size_t>(std::count_if(it->second.begin(), it->second.end(), [&](auto id) {
    return s.requests.at(id).status == QuoteStatus::kOpen;
  }));
}

}  // namespace

std::string_view QuoteStatusName(QuoteStatus s) {
  switch (s) {
    case QuoteStatus::kOpen:
      return "open";
    case QuoteStatus::kAnswered:
      return "answered";
    case QuoteStatus::kDeclined:
      return "declined";
    case QuoteStatus::kWithdrawn:
      return "withdrawn";
  }
  return "open";
}

Result<QuoteStatus> ParseQuoteStatus(std::string_view text) {
  for (QuoteStatus s : {QuoteStatus::kOpen, QuoteStatus::kAnswered, QuoteStatus::kDeclined,
                        QuoteStatus::kWithdrawn}) {
    if (text == QuoteStatusName(s)) return s;
  }
  return BadField("status", "status must be open, answered, declined or withdrawn");
}

Result<QuoteRequest> CreateQuoteRequest(Txn& txn, std::int64_t user_id,
                                        const QuoteRequestInput& input) {
  if (!txn.state.accounts.users.contains(user_id)) {
    return Status::NotFound("no user " + std::to_string(user_id));
  }
  GPUHUB_RETURN_IF_ERROR(CheckText("contact", input.contact, kMaxQuoteContactBytes, false));
  GPUHUB_RETURN_IF_ERROR(CheckText("note", input.note, kMaxQuoteNoteBytes, true));
  // Written by the HTTP layer from the server's own sizing: over these is a caller's bug, said as
  // a bad job rather than stored.
  if (input.job_json.size() > kMaxQuoteJobBytes || input.sizing_json.size() > kMaxQuoteSizingBytes ||
      input.summary.size() > kMaxQuoteSummaryBytes || input.model.empty() ||
      input.workload.empty() || input.required_bytes <= 0) {
    return BadField("job", "the job's recomputation is missing or over its size limits");
  }
  QuoteRequestsState& s = *txn.state.quote_requests;
  if (OpenCount(s, user_id) >= kMaxOpenQuoteRequestsPerAccount) {
    return Status::ResourceExhausted(
        "an account may have at most " + std::to_string(kMaxOpenQuoteRequestsPerAccount) +
        " open quote requests: wait for an answer, or withdraw one");
  }
  auto& mine = s.by_user[user_id];
  if (mine.size() >= kMaxQuoteRequestsPerAccount) {
    return Status::ResourceExhausted("an account keeps at most " +
                                     std::to_string(kMaxQuoteRequestsPerAccount) +
                                     " quote requests");
  }
  QuoteRequest q;
  q.id = s.next_id++;
  q.user_id = user_id;
  q.status = QuoteStatus::kOpen;
  q.model = input.model;
  q.workload = input.workload;
  q.required_bytes = input.required_bytes;
  q.summary = input.summary;
  q.job_json = input.job_json;
  q.sizing_json = input.sizing_json;
  q.contact = input.contact;
  q.note = input.note;
  q.created_at = q.updated_at = txn.now;
  mine.push_back(q.id);
  s.requests.emplace(q.id, q);
  Write(txn, q);
  return q;
}

Result<QuoteRequest> AnswerQuoteRequest(Txn& txn, std::int64_t admin_id, std::int64_t id,
                                        const QuoteAnswer& answer) {
  if (answer.status != QuoteStatus::kAnswered && answer.status != QuoteStatus::kDeclined) {
    return BadField("status", "status must be answered (with a price) or declined");
  }
  GPUHUB_RETURN_IF_ERROR(CheckText("price", answer.price, kMaxQuotePriceBytes, false));
  GPUHUB_RETURN_IF_ERROR(CheckText("terms", answer.terms, kMaxQuoteTermsBytes, true));
  if (answer.status == QuoteStatus::kAnswered && answer.price.empty()) {
    return BadField("price", "price is required to answer a quote request (decline it otherwise)");
  }
  QuoteRequestsState& s = *txn.state.quote_requests;
  auto it = s.requests.find(id);
  if (it == s.requests.end()) return Status::NotFound("no quote request " + std::to_string(id));
  QuoteRequest& q = it->second;
  if (q.status != QuoteStatus::kOpen) {
    return Status::FailedPrecondition("quote request " + std::to_string(id) + " is already " +
                                      std::string(QuoteStatusName(q.status)));
  }
  // Notify first: it can fail (a programmer error), and nothing may have changed then.
  const bool answered = answer.status == QuoteStatus::kAnswered;
  NotificationInput n;
  n.user_id = q.user_id;
  n.kind = answered ? "quote_request.answered" : "quote_request.declined";
  n.subject = "quote_request:" + std::to_string(q.id);
  n.message = answered ? "Your quote request " + std::to_string(q.id) + " (" + q.model + ", " +
                             q.workload + ") has an answer: " + answer.price
                       : "Your quote request " + std::to_string(q.id) + " (" + q.model + ", " +
                             q.workload + ") was declined" +
                             (answer.terms.empty() ? std::string(".") : ": " + answer.terms);
  if (n.message.size() > kMaxNotificationMessageBytes) {
    n.message.resize(kMaxNotificationMessageBytes - 3);
    // Cut on a UTF-8 boundary (no continuation byte left dangling), then mark the cut.
    while (!n.message.empty() && (static_cast<unsigned char>(n.message.back()) & 0xC0) == 0x80) {
      n.message.pop_back();
    }
    if (!n.message.empty() && static_cast<unsigned char>(n.message.back()) >= 0xC0) {
      n.message.pop_back();
    }
    n.message += "...";
  }
  n.data = {{"quote_request_id", std::to_string(q.id)},
            {"status", std::string(QuoteStatusName(answer.status))},
            {"model", q.model},
            {"workload", q.workload},
            {"price", answer.price},
            {"terms", answer.terms}};
  GPUHUB_RETURN_IF_ERROR(Notify(txn, n).status());
  q.status = answer.status;
  q.price = answer.price;
  q.terms = answer.terms;
  q.answered_by = admin_id;
  q.answered_at = q.updated_at = txn.now;
  Write(txn, q);
  return q;
}

Result<QuoteRequest> WithdrawQuoteRequest(Txn& txn, std::int64_t user_id, std::int64_t id) {
  QuoteRequestsState& s = *txn.state.quote_requests;
  auto it = s.requests.find(id);
  if (it == s.requests.end() || it->second.user_id != user_id) {
    return Status::NotFound("no quote request " + std::to_string(id) + " of yours");
  }
  QuoteRequest& q = it->second;
  if (q.status != QuoteStatus::kOpen) {
    return Status::FailedPrecondition("quote request " + std::to_string(id) + " is already " +
                                      std::string(QuoteStatusName(q.status)));
  }
  q.status = QuoteStatus::kWithdrawn;
  q.updated_at = txn.now;
  Write(txn, q);
  return q;
}

const QuoteRequest* FindQuoteRequest(const State& state, std::int64_t id) {
  auto it = state.quote_requests->requests.find(id);
  return it == state.quote_requests->requests.end() ? nullptr : &it->second;
}

QuoteRequestPage ListQuoteRequests(const State& state, std::optional<std::int64_t> user_id,
                                   std::int64_t before, std::size_t limit,
                                   std::optional<QuoteStatus> status) {
  const QuoteRequestsState& s = *state.quote_requests;
  QuoteRequestPage page;
  auto take = [&](const QuoteRequest& q) {
    if (before > 0 && q.id >= before) return true;
    if (status && q.status != *status) return true;
    if (page.items.size() == limit) {
      page.next_before = page.items.back().id;
      return false;
    }
    page.items.push_back(q);
    return true;
  };
  if (user_id) {
    auto it = s.by_user.find(*user_id);
    if (it == s.by_user.end()) return page;
    for (auto id = it->second.rbegin(); id != it->second.rend(); ++id) {
      if (!take(s.requests.at(*id))) break;
    }
  } else {
    for (auto it = s.requests.rbegin(); it != s.requests.rend(); ++it) {
      if (!take(it->second)) break;
    }
  }
  return page;
}

Status CheckQuoteRequests(const State& state) {
  const QuoteRequestsState& s = *state.quote_requests;
  std::size_t indexed = 0;
  for (const auto& [user, ids] : s.by_user) {
    indexed += ids.size();
    if (ids.size() > kMaxQuoteRequestsPerAccount) {
      return Status::Internal("user " + std::to_string(user) + " has " +
                              std::to_string(ids.size()) + " quote requests");
    }
    if (OpenCount(s, user) > kMaxOpenQuoteRequestsPerAccount) {
      return Status::Internal("user " + std::to_string(user) + " has too many open quote requests");
    }
    for (std::int64_t id : ids) {
      auto it = s.requests.find(id);
      if (it == s.requests.end() || it->second.user_id != user) {
        return Status::Internal("quote request " + std::to_string(id) + " is indexed under user " +
                                std::to_string(user) + " but is not theirs");
      }
    }
  }
  if (indexed != s.requests.size()) {
    return Status::Internal("quote requests and their per-account index disagree");
  }
  for (const auto& [id, q] : s.requests) {
    if (id >= s.next_id) return Status::Internal("quote request id beyond the next id");
    const bool has_answer = q.answered_at != 0;
    const bool answered = q.status == QuoteStatus::kAnswered || q.status == QuoteStatus::kDeclined;
    if (has_answer != answered) {
      return Status::Internal("quote request " + std::to_string(id) + " is " +
                              std::string(QuoteStatusName(q.status)) +
                              (has_answer ? " but has an answer" : " without an answer"));
    }
  }
  return Status::Ok();
}

Status LoadQuoteRequests(store::Store& store, QuoteRequestsState& state) {
  return store.Scan(
      kTable,
      {"id", "user_id", "status", "model", "workload", "required_bytes", "summary", "job", "sizing",
       "contact", "note", "created_at_us", "updated_at_us", "answered_by", "answered_at_us", "price",
       "terms"},
      "id", [&](const store::Row& row) -> Status {
        QuoteRequest q;
        GPUHUB_ASSIGN_OR_RETURN(q.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(q.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(std::string status, row.Text(2));
        auto parsed = ParseQuoteStatus(status);
        if (!parsed.ok()) {
          return Status::Internal("quote request " + std::to_string(q.id) + " has status '" +
                                  status + "'");
        }
        q.status = *parsed;
        GPUHUB_ASSIGN_OR_RETURN(q.model, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(q.workload, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(q.required_bytes, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(q.summary, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(q.job_json, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(q.sizing_json, row.Text(8));
        GPUHUB_ASSIGN_OR_RETURN(q.contact, row.Text(9));
        GPUHUB_ASSIGN_OR_RETURN(q.note, row.Text(10));
        GPUHUB_ASSIGN_OR_RETURN(q.created_at, row.Int(11));
        GPUHUB_ASSIGN_OR_RETURN(q.updated_at, row.Int(12));
        GPUHUB_ASSIGN_OR_RETURN(q.answered_by, row.Int(13));
        GPUHUB_ASSIGN_OR_RETURN(q.answered_at, row.Int(14));
        GPUHUB_ASSIGN_OR_RETURN(q.price, row.Text(15));
        GPUHUB_ASSIGN_OR_RETURN(q.terms, row.Text(16));
        state.by_user[q.user_id].push_back(q.id);
        state.next_id = std::max(state.next_id, q.id + 1);
        state.requests.emplace(q.id, std::move(q));
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
