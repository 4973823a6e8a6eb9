// Billing inside the engine: billing profiles, the tax rate table, tax documents (invoices and
// credit notes) with their gapless numbers, monthly spot statements, and wallet holds.
//
// The rules are billing's (src/billing, pure); this file keeps their state, writes their rows in
// the same group commit as the money they describe, and decides nothing about HTTP.
//
// - A purchase (a spot bid, a term rental) needs a billing country: CheckCanPurchase says
//   invalid_argument naming `billing_country` otherwise, and failed_precondition while the
//   account's wallet is on hold (a payment reversed after it was credited, engine/topups.h).
// - Tax is the buyer's at the moment of each charge (DecideTaxFor): the spot exchange takes its
//   rate per hour from SpotTaxRatePpm and reports every charged hour, which RecordSpotHours adds
//   to the month's usage; the tick (IssueDueStatements) issues one statement per account and
//   month once the month has ended (UTC), with every lease-hour of it.
// - Numbers are allocated by IssueDocument, in the command that writes the document, after
//   everything that can fail: a number taken is a number written, in the same transaction. A
//   failed commit reloads the state from the store (engine.h), so the series never skips.
//   Documents are inserted, never updated or deleted.
// - A credit note (IssueCreditNote, admins) corrects an invoice in full or in part and gives the
//   gross back to the customer's wallet in the same batch (platform revenue -> wallet for the
//   net, tax payable -> wallet for the tax).
// - Tax rates: the shipped table (billing::TaxRateTable::Defaults) plus the admins' changes, kept
//   as a log (tax_rate_changes) and replayed at load; a change never reaches into the past, so
//   the table always says the rate each issued line was taxed at.
//
// Every function taking a Txn runs on the writer thread; those taking a const State are reads.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "billing/document.h"
#include "billing/profile.h"
#include "billing/statement.h"
#include "billing/tax_rates.h"
#include "billing/tax_report.h"
#include "engine/document_archive.h"
#include "engine/engine.h"
#include "engine/limits.h"
#include "engine/state.h"
#include "market/exchange.h"

namespace gpuhub::engine {

struct AccountBilling {
  billing::BillingProfile profile;
  billing::CountryEvidence evidence;  // recorded with the latest purchase
  std::string wallet_hold;            // "" = none; else why the wallet cannot buy
  TimestampMicros wallet_hold_since = 0;
};

struct TaxRateChange {
  std::int64_t seq = 0;
  std::string kind;  // "set" | "close"
  std::string country;
  std::int64_t rate_ppm = 0;  // set: the new rate
  TimestampMicros at = 0;     // set: valid from; close: valid until
  std::string note;
  std::int64_t admin_id = 0;
  TimestampMicros created_at = 0;
};

struct BillingState {
  billing::Party seller;
  billing::TaxRateTable rates = billing::TaxRateTable::Defaults();
  std::vector<TaxRateChange> rate_changes;
  std::map<std::int64_t, AccountBilling> accounts;
  // Tax documents: the newest in memory (id > documents_forgotten_through, with their lines and
  // two indexes), every older one in the store only (the archive reads them back). Null archive:
  // a state never loaded from a store, which forgets nothing.
  std::map<std::int64_t, billing::Document> documents;  // by id
  std::unordered_map<std::string, std::int64_t> by_number;
  std::unordered_map<std::string, std::int64_t> by_source;
  std::int64_t documents_forgotten_through = 0;
  std::size_t lines_in_memory = 0;  // of `documents`
  std::unique_ptr<DocumentArchive> archive;
  billing::NumberSeries numbers;
  std::int64_t next_document_id = 1;
  // Spot usage not yet on a statement: (month start, user) -> rows.
  std::map<std::pair<TimestampMicros, std::int64_t>, std::vector<billing::SpotUsage>> open_usage;
};

// ----- Profiles, evidence, holds ---------------------------------------------------------------

Result<billing::BillingProfile> SetBillingProfile(Txn& txn, std::int64_t user_id,
                                                  const billing::ProfileInput& input);
// nullptr when the account has no billing record yet.
const AccountBilling* FindAccountBilling(const State& state, std::int64_t user_id);

// invalid_argument (field billing_country) without a billing country; failed_precondition while
// the wallet is on hold.
Status CheckCanPurchase(const State& state, std::int64_t user_id);

// Where a purchase request came from (http: the client address and the CDN's country header).
struct RequestOrigin {
  std::string ip_address;
  std::string ip_country;  // billing::CleanIpCountry'd; "" when none
};
// Records the evidence of a purchase (with the profile's country): written only when it changed.
void NoteEvidence(Txn& txn, std::int64_t user_id, const RequestOrigin& origin);

// Puts the wallet on hold (purchases refused) / lifts it. Written at once.
void PlaceWalletHold(Txn& txn, std::int64_t user_id, const std::string& reason);
void LiftWalletHold(Txn& txn, std::int64_t user_id);

// ----- Tax ---------------------------------------------------------------------------------------

// The tax of a sale to `user_id` at `at`: the rate of their billing country then, or reverse
// charge (billing::DecideTax). No billing country: no tax, with a note saying so.
billing::TaxDecision DecideTaxFor(const State& state, std::int64_t user_id, TimestampMicros at);
// The rate the spot exchange charges with a lease-hour (0 for reverse charge).
std::int64_t SpotTaxRatePpm(const State& state, std::int64_t user_id, TimestampMicros at);
// Binds the exchange of `state` to its billing (called whenever a state is built or reloaded).
void BindSpotTax(State& state);

// Admins: a new rate from `valid_from` (>= now: invalid_argument naming valid_from otherwise), or
// the end of the current period at `valid_until` (>= now). Rates 0..100% (billing::TaxRateTable).
Result<billing::RatePeriod> ChangeTaxRate(Txn& txn, std::int64_t admin_id,
                                          const std::string& country, std::int64_t rate_ppm,
                                          TimestampMicros valid_from, const std::string& note);
Result<billing::RatePeriod> CloseTaxRate(Txn& txn, std::int64_t admin_id,
                                         const std::string& country, TimestampMicros valid_until,
                                         const std::string& note);

// ----- Documents ---------------------------------------------------------------------------------

// Records the lease-hours of a command (market Changes::hours) in their month's usage.
void RecordSpotHours(Txn& txn, const std::vector<market::HourCharge>& hours);
// Tick: the statements of every account and month that ended before txn.now (at most
// kMaxStatementsPerTick per call; the rest on the next tick). Returns how many were issued.
Result<std::size_t> IssueDueStatements(Txn& txn);

// Numbers, stores and indexes a sealed, unnumbered document of `user_id` (buyer and evidence are
// filled from the account's billing record when the buyer is empty). conflict when a document of
// the same source exists (one invoice per thing billed).
Result<billing::Document> IssueDocument(Txn& txn, billing::Document doc);

// A credit note for invoice `number` (in full when `net_micros` is empty): an admin's correction,
// which gives its gross back to the customer's USD wallet in the same batch, or (`refunded_by`
// set) the document of a refund whose money another domain already moved: its source is then
// `refunded_by` ("rental:12:charge:3"), so the refund finds its note and is never noted twice.
// not_found for an unknown invoice.
struct CreditNoteResult {
  billing::Document note;
  std::vector<std::string> transfer_ids;
};
Result<CreditNoteResult> IssueCreditNote(Txn& txn, std::int64_t admin_id,
                                         const std::string& invoice_number,
                                         std::optional<std::int64_t> net_micros,
                                         const std::string& reason,
                                         const std::string& refunded_by = "");
// The document issued for `source` ("rental:12:charge:3"); not_found when there is none.
// Documents that left memory are read from the store (unavailable when it cannot answer).
Result<billing::Document> DocumentBySource(const State& state, const std::string& source);

// not_found unless the document exists and belongs to `user_id` (0: any user, for admins).
Result<billing::Document> GetDocument(const State& state, std::int64_t user_id,
                                      const std::string& number);
// The user's documents newest first: at most `limit`, older than `before_id` when it is > 0.
// Totals only: a listed document's lines may be empty (GetDocument has them).
Result<std::vector<billing::Document>> ListDocuments(const State& state, std::int64_t user_id,
                                                     std::size_t limit,
                                                     std::int64_t before_id = 0);
// What credit notes gave back of an invoice so far.
Result<billing::Credited> CreditedOf(const State& state, const billing::Document& invoice);
// Every document in id order: the store's (those that left memory, a chunk at a time) then
// memory's. Stops at the first error of `fn`.
Status ForEachDocument(const BillingState& billing,
                       const std::function<Status(const billing::Document&)>& fn);
// How many documents memory keeps: at most `documents`, and fewer when their lines pass `lines`.
struct DocumentWindow {
  std::size_t documents = kTaxDocumentsInMemory;
  std::size_t lines = kTaxDocumentLinesInMemory;
};
// Once memory holds more than the window (+ a fifth), drops its oldest documents down to the
// window, never one of the newest `not_durable` (the engine: after a commit, the documents of the
// batch applied after it).
void ForgetDurableDocuments(State& state, DocumentWindow window, std::size_t not_durable);

// The checks of all this (DocumentRules, CheckBillingInvariants): engine/billing_checks.h.

// The tax report of the stored documents issued in [from, until) (billing/tax_report.h): every
// document committed when it starts, read through `archive` (a reader's: a year of statements is
// a walk of many lines, kept off the writer).
Result<billing::TaxReport> TaxReportOf(const DocumentArchive& archive, TimestampMicros from,
                                       TimestampMicros until);

void AddBillingTickHooks(Engine& engine);
// Loads profiles, rate changes, the newest documents (the window), every series' count
// (gapless, from the store's aggregates) and the open spot usage.
Status LoadBilling(store::Store& store, const billing::Party& seller, DocumentWindow window,
                   BillingState& state);

}  // namespace gpuhub::engine
