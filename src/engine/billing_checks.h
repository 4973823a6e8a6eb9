// The checks of billing's documents: what GET /v1/admin/billing, GET /v1/admin/invariants,
// `gpuhub admin verify` and the tests ask of the books' paper trail.
//
// - DocumentRules: the rules of the documents themselves, fed every document in id order.
// - ChargeDocumentIndex + CheckChargeDocuments: rental charges <-> documents, one to one. Every
//   purchase, renewal and extra NVMe charge has its invoice (same customer, net, tax and gross);
//   every refund its own credit note (same customer, net, tax and gross) correcting the invoice
//   of the very charge it refunds; every document of a rental charge names a charge that exists.
// - CheckBillingMemory: what memory holds is consistent (indexes, line count, open usage order).
// - CheckBillingInvariants: all of it, reading the documents that left memory from the store.
//
// Memory keeps only the newest documents (BillingState's window); the rest are in the store. A
// check that may not read the store (the writer's GET /v1/admin/invariants) says how many charges
// it could not match instead of calling their documents missing: rental documents are issued in
// charge order (OnRentalCharged is their only issuer), so every charge newer than the oldest one
// with a document in memory must have its document in memory, and only the older ones can have
// theirs in the store alone.
//
// Reads only; every function here is O(documents seen + charges). Errors are `internal` naming
// the charge or document ("billing: rental 4 charge 10 (refund): ...").
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "billing/document.h"
#include "core/status.h"
#include "engine/billing.h"
#include "engine/state.h"
#include "rentals/fleet.h"

namespace gpuhub::engine {

// The rules of the stored documents, fed every document in id order: each valid
// (billing::CheckDocument), its number its kind, year and sequence, numbers and sources unique,
// credit notes within their invoices; Finish: every series gapless. Keeps the numbers, the sources
// and each invoice's totals of what it was fed (a walk of the whole history, on a reader).
class DocumentRules {
 public:
  Status Add(const billing::Document& d);
  Status Finish() const;
  std::int64_t documents() const { return documents_; }
  std::int64_t credit_notes() const { return credit_notes_; }

 private:
  struct InvoiceTotals {
    std::int64_t id = 0, user_id = 0, net_micros = 0, tax_micros = 0;
    billing::Credited credited;
  };
  billing::NumberSeries series_;
  std::set<std::string> numbers_, sources_;
  std::unordered_map<std::string, InvoiceTotals> invoices_;
  std::int64_t last_id_ = 0, documents_ = 0, credit_notes_ = 0;
};

// What the charges check needs of a rental charge's document (its lines are not needed).
struct ChargeDocument {
  std::int64_t id = 0;
  std::int64_t rental_id = 0;  // from its source "rental:<rental>:charge:<charge>"
  std::int64_t charge_id = 0;
  billing::DocumentKind kind = billing::DocumentKind::kInvoice;
  std::string number;
  std::int64_t user_id = 0;
  std::int64_t net_micros = 0, tax_micros = 0, gross_micros = 0;
  std::string corrects;
};

// The documents of rental charges a check has seen, by source. Add ignores other documents
// (statements, admins' credit notes); a source that starts "rental:" but names no charge is kept
// aside and fails CheckChargeDocuments.
class ChargeDocumentIndex {
 public:
  void Add(const billing::Document& d);
  const ChargeDocument* Find(const std::string& source) const;
  const std::unordered_map<std::string, ChargeDocument>& by_source() const { return by_source_; }
  const std::vector<std::string>& malformed() const { return malformed_; }
  std::size_t size() const { return by_source_.size(); }

 private:
  std::unordered_map<std::string, ChargeDocument> by_source_;
  std::vector<std::string> malformed_;  // the numbers of documents with a bad rental source
};

struct ChargeDocumentCounts {
  std::int64_t charges = 0;    // matched to their documents
  std::int64_t unmatched = 0;  // not matched: their documents may be in the store only
};
// Rental charges <-> documents, one to one (see the file comment). `seen`: every index the caller
// built (a document is looked up in each, in order). Charges with id <= `unmatched_through` whose
// document (or, for a refund, whose refunded charge's invoice) no index holds are counted in
// `counts->unmatched` instead of failing: pass 0 when the indexes hold every document.
Status CheckChargeDocuments(const rentals::Fleet& fleet,
                            const std::vector<const ChargeDocumentIndex*>& seen,
                            std::int64_t unmatched_through, ChargeDocumentCounts* counts);

// The documents in memory, indexed; with `after_id`, only those with a greater id.
ChargeDocumentIndex MemoryChargeDocuments(const BillingState& billing, std::int64_t after_id = 0);
// For a check that sees only memory's documents: the charges whose documents may be in the store
// only (0 when memory has forgotten none; otherwise those older than the oldest charge with a
// document in memory, or every charge when memory holds none).
std::int64_t ChargesUnmatchedInMemoryThrough(const State& state, const ChargeDocumentIndex& memory);

// Billing's invariants that memory answers (cheap enough for the writer): the window's indexes
// and line count, the open usage's order.
Status CheckBillingMemory(const State& state);
// One walk of every document (the store's, then memory's) through DocumentRules and into a
// ChargeDocumentIndex: `rules` what DocumentRules said, `charges` every rental charge against
// its document (nothing unmatched). A store that cannot answer fails both.
struct AllDocumentsCheck {
  Status rules;
  Status charges;
  std::int64_t documents = 0;
  ChargeDocumentCounts counts;
};
AllDocumentsCheck CheckAllDocuments(const State& state);
// Everything, for tests: CheckAllDocuments (rules, then charges), then CheckBillingMemory.
Status CheckBillingInvariants(const State& state);

}  // namespace gpuhub::engine
