#include "engine/billing.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <unordered_map>
#include <set>
#include <tuple>

#include "billing/countries.h"
#include "billing/limits.h"
#include "engine/accounts.h"
#include "engine/billing_rows.h"
#include "engine/limits.h"
#include "engine/market.h"
#include "engine/rental_billing.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using billing::Document;
using billing::DocumentKind;
using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferKind;
using ledger::TransferRequest;

BillingState& B(Txn& txn) { return *txn.state.billing; }

std::int64_t Flag(bool b) { return b ? 1 : 0; }

// BillingState::open_usage keeps each account-month's rows in lease order (lease ids grow, so a
// new lease appends): an hour finds its row by binary search however many leases the account ran
// that month (a linear search made each new lease cost as much as all the month's leases before).
struct ByLease {
  bool operator()(const billing::SpotUsage& u, std::int64_t lease) const {
    return u.lease_id < lease;
  }
  bool operator()(std::int64_t lease, const billing::SpotUsage& u) const {
    return lease < u.lease_id;
  }
};

void WriteAccount(Txn& txn, std::int64_t user_id, const AccountBilling& a) {
  txn.writes.Upsert("billing_profiles",
                    {{"user_id", user_id},
                     {"country", a.profile.country},
                     {"business_name", a.profile.business_name},
                     {"vat_id", a.profile.vat_id},
                     {"address", a.profile.address},
                     {"updated_at_us", a.profile.updated_at},
                     {"evidence_country", a.evidence.billing_country},
                     {"evidence_address", a.evidence.ip_address},
                     {"evidence_ip_country", a.evidence.ip_country},
                     {"evidence_at_us", a.evidence.at},
                     {"wallet_hold", a.wallet_hold},
                     {"wallet_hold_since_us", a.wallet_hold_since}});
}

void WriteRateChange(Txn& txn, const TaxRateChange& c) {
  txn.writes.Insert("tax_rate_changes", {{"seq", c.seq},
                                         {"kind", c.kind},
                                         {"country", c.country},
                                         {"rate_ppm", c.rate_ppm},
                                         {"at_us", c.at},
                                         {"note", c.note},
                                         {"admin_id", c.admin_id},
                                         {"created_at_us", c.created_at}});
}

void WriteUsage(Txn& txn, std::int64_t user_id, TimestampMicros month_start,
                const billing::SpotUsage& u, std::int64_t document_id) {
  txn.writes.Upsert("spot_usage",
                    {{"user_id", user_id},
                     {"month_start_us", month_start},
                     {"lease_id", u.lease_id},
                     {"tax_country", u.tax_country},
                     {"rate_ppm", u.rate_ppm},
                     {"reverse_charge", Flag(u.reverse_charge)},
                     {"gpu", u.gpu},
                     {"gpus", u.gpus},
                     {"price_micros", u.price_micros},
                     {"hours", u.hours},
                     {"net_micros", u.net_micros},
                     {"tax_micros", u.tax_micros},
                     {"first_hour_at_us", u.first_hour_at},
                     {"last_hour_at_us", u.last_hour_at},
                     {"document_id", document_id}},
                    /*key_columns=*/6);
}

// The buyer as printed: the business, or the account for a consumer.
billing::Party BuyerParty(const State& state, std::int64_t user_id) {
  billing::Party p;
  const User* user = FindUser(state, user_id);
  const AccountBilling* a = FindAccountBilling(state, user_id);
  std::string account = user ? user->username : "account " + std::to_string(user_id);
  if (a) {
    p.name = a->profile.business_name.empty() ? account
                                              : a->profile.business_name + " (" + account + ")";
    p.address = a->profile.address;
    p.country = a->profile.country;
    p.vat_id = a->profile.vat_id;
  } else {
    p.name = account;
  }
  return p;
}

// A document by number or by source: memory first, then the store (documents that left it).
Result<std::optional<Document>> FindDocument(const BillingState& b, bool by_number,
                                             const std::string& key) {
  const auto& index = by_number ? b.by_number : b.by_source;
  if (auto it = index.find(key); it != index.end()) return std::optional<Document>(b.documents.at(it->second));
  if (b.archive == nullptr || b.documents_forgotten_through == 0) {
    return std::optional<Document>();
  }
  return by_number ? b.archive->ByNumber(key, b.documents_forgotten_through)
                   : b.archive->BySource(key, b.documents_forgotten_through);
}

// Everything IssueDocument checks before it changes anything; the number the document will get.
Result<billing::DocumentNumber> Prepare(const Txn& txn, Document& doc) {
  const BillingState& b = *txn.state.billing;
  if (FindUser(txn.state, doc.user_id) == nullptr) {
    return Status::NotFound("no account " + std::to_string(doc.user_id));
  }
  if (doc.source.empty()) return Status::InvalidArgument("a tax document needs a source");
  GPUHUB_ASSIGN_OR_RETURN(auto same_source, FindDocument(b, /*by_number=*/false, doc.source));
  if (same_source) {
    return Status::Conflict("a tax document for '" + doc.source + "' exists already");
  }
  if (doc.seller.name.empty()) doc.seller = b.seller;
  if (doc.buyer.name.empty()) doc.buyer = BuyerParty(txn.state, doc.user_id);
  if (doc.evidence.at == 0) {
    if (const AccountBilling* a = FindAccountBilling(txn.state, doc.user_id)) {
      doc.evidence = a->evidence;
      doc.evidence.billing_country = a->profile.country;
    }
  }
  GPUHUB_RETURN_IF_ERROR(billing::CheckDocument(doc));
  return b.numbers.Peek(doc.kind, doc.issued_at);
}

// Takes the number and writes the document. Nothing here can fail: Prepare checked it all.
Document Commit(Txn& txn, Document doc) {
  BillingState& b = B(txn);
  billing::DocumentNumber n = b.numbers.Take(doc.kind, doc.issued_at);
  doc.id = b.next_document_id++;
  doc.year = n.year;
  doc.sequence = n.sequence;
  doc.number = billing::FormatDocumentNumber(n);
  b.by_number[doc.number] = doc.id;
  b.by_source[doc.source] = doc.id;
  b.lines_in_memory += doc.lines.size();
  WriteDocumentRows(txn.writes, doc);
  b.documents[doc.id] = doc;
  return doc;
}

Status BadTime(const char* field) {
  return Status::InvalidArgument(std::string(field) +
                                 " must not be in the past: issued invoices keep the rate they "
                                 "were taxed at, and the table must keep saying so")
      .WithField(field);
}

Status CheckNote(const std::string& note) {
  if (note.size() > kMaxTaxRateNoteBytes) {
    return Status::InvalidArgument("note must be at most " + std::to_string(kMaxTaxRateNoteBytes) +
                                   " bytes")
        .WithField("note");
  }
  return Status::Ok();
}

Result<TaxRateChange> NewRateChange(Txn& txn, std::int64_t admin_id, const std::string& kind,
                                    const std::string& country, std::int64_t rate_ppm,
                                    TimestampMicros at, const std::string& note) {
  GPUHUB_RETURN_IF_ERROR(CheckNote(note));
  if (B(txn).rate_changes.size() >= kMaxTaxRateChanges) {
    return Status::ResourceExhausted("too many tax rate changes");
  }
  TaxRateChange c;
  c.seq = static_cast<std::int64_t>(B(txn).rate_changes.size()) + 1;
  c.kind = kind;
  c.country = country;
  c.rate_ppm = rate_ppm;
  c.at = at;
  c.note = note;
  c.admin_id = admin_id;
  c.created_at = txn.now;
  return c;
}

std::string UpperCountry(const std::string& country) {
  std::string c = country;
  for (char& ch : c) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return c;
}

}  // namespace

// ----- Profiles, evidence, holds ---------------------------------------------------------------

const AccountBilling* FindAccountBilling(const State& state, std::int64_t user_id) {
  auto it = state.billing->accounts.find(user_id);
  return it == state.billing->accounts.end() ? nullptr : &it->second;
}

Result<billing::BillingProfile> SetBillingProfile(Txn& txn, std::int64_t user_id,
                                                  const billing::ProfileInput& input) {
  GPUHUB_ASSIGN_OR_RETURN(billing::BillingProfile profile, billing::ValidateProfile(input));
  if (FindUser(txn.state, user_id) == nullptr) return Status::NotFound("no such account");
  profile.updated_at = txn.now;
  AccountBilling& a = B(txn).accounts[user_id];
  a.profile = profile;
  WriteAccount(txn, user_id, a);
  return profile;
}

Status CheckCanPurchase(const State& state, std::int64_t user_id) {
  const AccountBilling* a = FindAccountBilling(state, user_id);
  if (a == nullptr || !a->profile.complete()) {
    return Status::InvalidArgument(
               "billing_country is not set: gpuhub is the merchant of record and charges the tax "
               "of the buyer's country, so set it first (PUT /v1/billing-profile, or the billing "
               "form of the account page)")
        .WithField("billing_country");
  }
  if (!a->wallet_hold.empty()) {
    return Status::FailedPrecondition("your wallet is on hold since " +
                                      FormatTimestamp(a->wallet_hold_since) + ": " +
                                      a->wallet_hold +
                                      "; an administrator will review it (nothing can be bought "
                                      "until then)");
  }
  return Status::Ok();
}

void NoteEvidence(Txn& txn, std::int64_t user_id, const RequestOrigin& origin) {
  auto it = B(txn).accounts.find(user_id);
  if (it == B(txn).accounts.end()) return;
  AccountBilling& a = it->second;
  billing::CountryEvidence e{a.profile.country, origin.ip_address.substr(0, 64),
                             billing::CleanIpCountry(origin.ip_country), a.evidence.at};
  if (e == a.evidence && a.evidence.at != 0) return;  // unchanged: no row to write
  e.at = txn.now;
  a.evidence = e;
  WriteAccount(txn, user_id, a);
}

void PlaceWalletHold(Txn& txn, std::int64_t user_id, const std::string& reason) {
  AccountBilling& a = B(txn).accounts[user_id];
  if (a.wallet_hold.empty()) a.wallet_hold_since = txn.now;
  a.wallet_hold = reason;
  WriteAccount(txn, user_id, a);
}

void LiftWalletHold(Txn& txn, std::int64_t user_id) {
  auto it = B(txn).accounts.find(user_id);
  if (it == B(txn).accounts.end() || it->second.wallet_hold.empty()) return;
  it->second.wallet_hold.clear();
  it->second.wallet_hold_since = 0;
  WriteAccount(txn, user_id, it->second);
}

// ----- Tax ---------------------------------------------------------------------------------------

billing::TaxDecision DecideTaxFor(const State& state, std::int64_t user_id, TimestampMicros at) {
  const AccountBilling* a = FindAccountBilling(state, user_id);
  if (a == nullptr || !a->profile.complete()) {
    return {"", 0, false, "no billing country: no tax"};
  }
  const BillingState& b = *state.billing;
  return billing::DecideTax(billing::Seller{b.seller.country}, billing::BuyerOf(a->profile),
                            b.rates, at);
}

std::int64_t SpotTaxRatePpm(const State& state, std::int64_t user_id, TimestampMicros at) {
  billing::TaxDecision d = DecideTaxFor(state, user_id, at);
  return d.reverse_charge ? 0 : d.rate_ppm;
}

void BindSpotTax(State& state) {
  const State* s = &state;
  state.market->exchange.SetTaxRate([s](market::UserId customer, TimestampMicros at) {
    return SpotTaxRatePpm(*s, customer, at);
  });
}

Result<billing::RatePeriod> ChangeTaxRate(Txn& txn, std::int64_t admin_id,
                                          const std::string& country, std::int64_t rate_ppm,
                                          TimestampMicros valid_from, const std::string& note) {
  std::string code = UpperCountry(country);
  if (valid_from < txn.now) return BadTime("valid_from");
  GPUHUB_ASSIGN_OR_RETURN(TaxRateChange change,
                          NewRateChange(txn, admin_id, "set", code, rate_ppm, valid_from, note));
  GPUHUB_ASSIGN_OR_RETURN(
      billing::RatePeriod period,
      B(txn).rates.Set(code, rate_ppm, valid_from, note.empty() ? "set by an admin" : note));
  B(txn).rate_changes.push_back(change);
  WriteRateChange(txn, change);
  return period;
}

Result<billing::RatePeriod> CloseTaxRate(Txn& txn, std::int64_t admin_id,
                                         const std::string& country, TimestampMicros valid_until,
                                         const std::string& note) {
  std::string code = UpperCountry(country);
  if (!billing::IsCountryCode(code)) {
    return Status::InvalidArgument("country must be an ISO 3166-1 alpha-2 code such as DE")
        .WithField("country");
  }
  if (valid_until < txn.now) return BadTime("valid_until");
  GPUHUB_ASSIGN_OR_RETURN(TaxRateChange change,
                          NewRateChange(txn, admin_id, "close", code, 0, valid_until, note));
  GPUHUB_ASSIGN_OR_RETURN(billing::RatePeriod period, B(txn).rates.Close(code, valid_until));
  B(txn).rate_changes.push_back(change);
  WriteRateChange(txn, change);
  return period;
}

// ----- Documents ---------------------------------------------------------------------------------

void RecordSpotHours(Txn& txn, const std::vector<market::HourCharge>& hours) {
  if (hours.empty()) return;
  BillingState& b = B(txn);
  std::set<std::tuple<TimestampMicros, std::int64_t, std::int64_t>> touched;
  for (const market::HourCharge& c : hours) {
    billing::SpotHour h;
    h.lease_id = c.lease_id;
    h.gpu = c.gpu;
    h.gpus = c.gpus;
    h.price_micros = c.price_micros;
    h.at = c.at;
    h.net_micros = c.net_micros;
    h.tax_micros = c.tax_micros;
    h.tax = DecideTaxFor(txn.state, c.customer_id, c.at);
    // The exchange asked the same question for this hour in this command: same state, same answer.
    GPUHUB_CHECK((h.tax.reverse_charge ? 0 : h.tax.rate_ppm) == c.rate_ppm);
    const TimestampMicros month = billing::MonthOf(c.at).start;
    std::vector<billing::SpotUsage>& rows = b.open_usage[{month, c.customer_id}];
    auto [first, last] = std::equal_range(rows.begin(), rows.end(), c.lease_id, ByLease{});
    auto row = std::find_if(first, last, [&](const billing::SpotUsage& u) {
      return billing::SameTreatment(u, h);
    });
    if (row == last) {
      rows.insert(last, billing::UsageOf(h));  // the end, but for a lease older than the newest
    } else {
      Status added = billing::AddHour(*row, h);
      GPUHUB_CHECK_MSG(added.ok(), added.message().c_str());
    }
    touched.insert({month, c.customer_id, c.lease_id});
  }
  // Every row of a touched lease (one, or one per treatment after a rate change mid-lease).
  for (const auto& [month, user, lease] : touched) {
    const std::vector<billing::SpotUsage>& rows = b.open_usage.at({month, user});
    auto [first, last] = std::equal_range(rows.begin(), rows.end(), lease, ByLease{});
    for (auto row = first; row != last; ++row) WriteUsage(txn, user, month, *row, 0);
  }
}

Result<std::size_t> IssueDueStatements(Txn& txn) {
  BillingState& b = B(txn);
  std::size_t issued = 0;
  auto it = b.open_usage.begin();
  while (it != b.open_usage.end() && issued < kMaxStatementsPerTick) {
    const billing::Month month = billing::MonthOf(it->first.first);
    if (month.end > txn.now) break;  // the oldest open month has not ended yet
    const std::int64_t user = it->first.second;
    const std::vector<billing::SpotUsage>& rows = it->second;
    // Everything that can fail happens before Commit; a statement that cannot be built (limits)
    // stays open and is logged, and the others go on: a tick never half-applies. A month with more
    // usage rows than one document may hold (billing::kMaxLinesPerDocument) is stated in parts,
    // each a numbered invoice of its own ("part 2 of 3"), all issued in the same command.
    const std::size_t per_part = billing::kMaxLinesPerDocument;
    const std::size_t parts = (rows.size() + per_part - 1) / per_part;
    const std::string source = "spot:" + std::to_string(user) + ":" + billing::MonthKey(month);
    std::vector<Document> ready;
    Status failed;
    for (std::size_t p = 0; p < parts && failed.ok(); ++p) {
      const auto first = rows.begin() + static_cast<std::ptrdiff_t>(p * per_part);
      const auto last = rows.begin() + static_cast<std::ptrdiff_t>(
                                           std::min(rows.size(), (p + 1) * per_part));
      auto doc = billing::BuildSpotStatement(month, {first, last}, txn.now);
      if (!doc.ok()) {
        failed = doc.status();
        break;
      }
      doc->user_id = user;
      doc->source = p == 0 ? source : source + ":part" + std::to_string(p + 1);
      if (parts > 1) {
        doc->title += " (part " + std::to_string(p + 1) + " of " + std::to_string(parts) + ")";
      }
      failed = Prepare(txn, *doc).status();
      ready.push_back(std::move(*doc));
    }
    if (failed.ok()) {
      for (std::size_t p = 0; p < ready.size(); ++p) {
        Document stored = Commit(txn, std::move(ready[p]));
        for (std::size_t i = p * per_part; i < std::min(rows.size(), (p + 1) * per_part); ++i) {
          WriteUsage(txn, user, month.start, rows[i], stored.id);
        }
        spdlog::info("event=statement_issued number={} user={} month={} part={}/{} net={} tax={} "
                     "gross={}",
                     stored.number, user, billing::MonthKey(month), p + 1, parts,
                     FormatMicros(stored.net_micros), FormatMicros(stored.tax_micros),
                     FormatMicros(stored.gross_micros));
      }
      it = b.open_usage.erase(it);
      ++issued;
      continue;
    }
    spdlog::error("event=statement_failed user={} month={} error=\"{}\"", user,
                  billing::MonthKey(month), failed.ToString());
    ++it;
  }
  return issued;
}

Result<Document> IssueDocument(Txn& txn, Document doc) {
  GPUHUB_RETURN_IF_ERROR(Prepare(txn, doc).status());
  return Commit(txn, std::move(doc));
}

Result<CreditNoteResult> IssueCreditNote(Txn& txn, std::int64_t admin_id,
                                         const std::string& invoice_number,
                                         std::optional<std::int64_t> net_micros,
                                         const std::string& reason,
                                         const std::string& refunded_by) {
  GPUHUB_ASSIGN_OR_RETURN(auto found, FindDocument(B(txn), /*by_number=*/true, invoice_number));
  if (!found) return Status::NotFound("no invoice '" + invoice_number.substr(0, 32) + "'");
  const Document invoice = std::move(*found);
  if (refunded_by.empty()) GPUHUB_RETURN_IF_ERROR(CheckAdminMayCredit(txn.state, invoice, txn.now));
  GPUHUB_ASSIGN_OR_RETURN(billing::Credited credited, CreditedOf(txn.state, invoice));
  GPUHUB_ASSIGN_OR_RETURN(Document note, billing::BuildCreditNote(invoice, credited, net_micros,
                                                                  reason, txn.now));
  // A refund paid elsewhere is found again by its source (and never documented twice).
  if (!refunded_by.empty()) note.source = refunded_by;
  GPUHUB_ASSIGN_OR_RETURN(billing::DocumentNumber number, Prepare(txn, note));
  // The money first (it is the only part that could still be refused); the note cannot fail after.
  const std::string name = billing::FormatDocumentNumber(number);
  std::vector<TransferRequest> legs;
  auto leg = [&](const char* part, AccountKind from, std::int64_t amount) {
    if (amount <= 0) return;
    TransferRequest t;
    t.id = "creditnote:" + name + ":" + part;
    t.kind = TransferKind::kSinglePhase;
    t.debit = AccountKey::System(from, note.currency);
    t.credit = AccountKey::Wallet(note.user_id, note.currency);
    t.amount_micros = amount;
    t.code = "credit_note";
    t.memo = "credit note " + name + " for invoice " + invoice.number + " (" + part +
             "): " + note.reason.substr(0, 200);
    t.timestamp = txn.now;
    legs.push_back(std::move(t));
  };
  if (refunded_by.empty()) {
    leg("net", AccountKind::kPlatformRevenue, note.net_micros);
    leg("tax", AccountKind::kTaxPayable, note.tax_micros);
  }
  CreditNoteResult out;
  if (!legs.empty()) {
    ledger::BatchResult applied = txn.state.wallets->ledger.ApplyBatch(legs);
    if (!applied.ok()) return applied.status();
    WriteTransfers(txn, applied.transfers);
    for (const auto& t : legs) out.transfer_ids.push_back(t.id);
  }
  out.note = Commit(txn, std::move(note));
  GPUHUB_CHECK(out.note.number == name);
  spdlog::info("event=credit_note_issued number={} invoice={} admin={} net={} tax={}",
               out.note.number, invoice_number, admin_id, FormatMicros(out.note.net_micros),
               FormatMicros(out.note.tax_micros));
  return out;
}

Result<Document> DocumentBySource(const State& state, const std::string& source) {
  GPUHUB_ASSIGN_OR_RETURN(auto found, FindDocument(*state.billing, /*by_number=*/false, source));
  if (!found) return Status::NotFound("no tax document for '" + source + "'");
  return std::move(*found);
}

Result<Document> GetDocument(const State& state, std::int64_t user_id, const std::string& number) {
  GPUHUB_ASSIGN_OR_RETURN(auto found, FindDocument(*state.billing, /*by_number=*/true, number));
  if (found && (user_id == 0 || found->user_id == user_id)) return std::move(*found);
  return Status::NotFound("no invoice '" + number.substr(0, 32) + "'");
}

Result<std::vector<Document>> ListDocuments(const State& state, std::int64_t user_id,
                                            std::size_t limit, std::int64_t before_id) {
  std::vector<Document> out;
  const BillingState& b = *state.billing;
  // Memory holds the newest documents (a window of a few thousand): walk it newest first.
  auto end = before_id > 0 ? b.documents.lower_bound(before_id) : b.documents.end();
  for (auto it = std::make_reverse_iterator(end); it != b.documents.rend() && out.size() < limit;
       ++it) {
    if (it->second.user_id != user_id) continue;
    Document d = it->second;
    d.lines.clear();  // a list shows totals; the same shape as the store's rows
    out.push_back(std::move(d));
  }
  if (out.size() < limit && b.archive != nullptr && b.documents_forgotten_through > 0) {
    std::int64_t below = b.documents_forgotten_through + 1;
    if (before_id > 0) below = std::min(below, before_id);
    GPUHUB_ASSIGN_OR_RETURN(auto older, b.archive->UserPage(user_id, below, limit - out.size()));
    for (auto& d : older) out.push_back(std::move(d));
  }
  return out;
}

Result<billing::Credited> CreditedOf(const State& state, const Document& invoice) {
  const BillingState& b = *state.billing;
  billing::Credited credited;
  if (b.archive != nullptr && b.documents_forgotten_through > 0) {
    GPUHUB_ASSIGN_OR_RETURN(auto notes,
                            b.archive->CreditNotesOf(invoice.number, b.documents_forgotten_through));
    for (const Document& note : notes) credited.Add(note);
  }
  for (const auto& [id, d] : b.documents) {
    if (d.kind == DocumentKind::kCreditNote && d.corrects == invoice.number) credited.Add(d);
  }
  return credited;
}

void ForgetDurableDocuments(State& state, DocumentWindow window, std::size_t not_durable) {
  BillingState& b = *state.billing;
  if (b.archive == nullptr) return;
  auto beyond = [&](std::size_t slack) {
    return b.documents.size() > not_durable &&
           (b.documents.size() - not_durable > window.documents + window.documents / slack ||
            b.lines_in_memory > window.lines + window.lines / slack);
  };
  if (!beyond(5)) return;
  while (beyond(/*no slack*/ std::numeric_limits<std::size_t>::max())) {
    auto oldest = b.documents.begin();
    b.by_number.erase(oldest->second.number);
    b.by_source.erase(oldest->second.source);
    b.lines_in_memory -= oldest->second.lines.size();
    b.documents_forgotten_through = oldest->first;
    b.documents.erase(oldest);
  }
}

// Every document, the store's (those that left memory) then memory's, in id order.
Status ForEachDocument(const BillingState& b, const std::function<Status(const Document&)>& fn) {
  if (b.archive != nullptr && b.documents_forgotten_through > 0) {
    GPUHUB_RETURN_IF_ERROR(b.archive->ScanAll(b.documents_forgotten_through, fn));
  }
  for (const auto& [id, d] : b.documents) GPUHUB_RETURN_IF_ERROR(fn(d));
  return Status::Ok();
}

Result<billing::TaxReport> TaxReportOf(const DocumentArchive& archive, TimestampMicros from,
                                       TimestampMicros until) {
  billing::TaxReportBuilder report(from, until);
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t last, archive.LastId());
  GPUHUB_RETURN_IF_ERROR(archive.ScanIssued(from, until, last, [&](const Document& d) {
    report.Add(d);
    return Status::Ok();
  }));
  return report.Finish();
}

void AddBillingTickHooks(Engine& engine) {
  engine.AddTickHook([](Txn& txn) { return IssueDueStatements(txn).status(); });
}

// ----- Loading -----------------------------------------------------------------------------------

Status LoadBilling(store::Store& store, const billing::Party& seller, DocumentWindow window,
                   BillingState& state) {
  state.seller = seller;
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "billing_profiles",
      {"user_id", "country", "business_name", "vat_id", "address", "updated_at_us",
       "evidence_country", "evidence_address", "evidence_ip_country", "evidence_at_us",
       "wallet_hold", "wallet_hold_since_us"},
      "user_id", [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t user, row.Int(0));
        AccountBilling& a = state.accounts[user];
        GPUHUB_ASSIGN_OR_RETURN(a.profile.country, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(a.profile.business_name, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(a.profile.vat_id, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(a.profile.address, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(a.profile.updated_at, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(a.evidence.billing_country, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(a.evidence.ip_address, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(a.evidence.ip_country, row.Text(8));
        GPUHUB_ASSIGN_OR_RETURN(a.evidence.at, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(a.wallet_hold, row.Text(10));
        GPUHUB_ASSIGN_OR_RETURN(a.wallet_hold_since, row.Int(11));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "tax_rate_changes",
      {"seq", "kind", "country", "rate_ppm", "at_us", "note", "admin_id", "created_at_us"}, "seq",
      [&](const store::Row& row) -> Status {
        TaxRateChange c;
        GPUHUB_ASSIGN_OR_RETURN(c.seq, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(c.kind, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(c.country, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(c.rate_ppm, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(c.at, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(c.note, row.Text(5));
        GPUHUB_ASSIGN_OR_RETURN(c.admin_id, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(c.created_at, row.Int(7));
        if (c.seq != static_cast<std::int64_t>(state.rate_changes.size()) + 1) {
          return Status::Internal("tax rate change " + std::to_string(c.seq) + " is out of order");
        }
        // Replayed on the shipped table, in order, as they were applied.
        Status applied =
            c.kind == "set"
                ? state.rates.Set(c.country, c.rate_ppm, c.at, c.note.empty() ? "set by an admin" : c.note)
                      .status()
            : c.kind == "close" ? state.rates.Close(c.country, c.at).status()
                                : Status::Internal("unknown tax rate change kind " + c.kind);
        if (!applied.ok()) {
          return Status::Internal("tax rate change " + std::to_string(c.seq) +
                                  " cannot be replayed: " + applied.message());
        }
        state.rate_changes.push_back(std::move(c));
        return Status::Ok();
      }));
  // Every series from the store's aggregates (number, source and (kind, year, sequence) are
  // UNIQUE there: count == highest and lowest == 1 is gapless), then the newest documents.
  GPUHUB_RETURN_IF_ERROR(store.Query(SeriesSelect(), [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(DocumentKind kind, row.Parsed(0, billing::ParseDocumentKind));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t year, row.Int(1));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t count, row.Int(2));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t last, row.Int(3));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t lowest, row.Int(4));
    if (lowest != 1) {
      return Status::Internal("the " + std::string(billing::DocumentKindName(kind)) +
                              " series of " + std::to_string(year) + " starts at " +
                              std::to_string(lowest));
    }
    state.numbers.ObserveSeries(kind, year, count, last);
    return Status::Ok();
  }));
  std::int64_t last_id = 0;
  GPUHUB_RETURN_IF_ERROR(store.Query(LastDocumentIdSelect(), [&](const store::Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(last_id, row.Int(0));
    return Status::Ok();
  }));
  state.next_document_id = last_id + 1;
  state.archive = std::make_unique<DocumentArchive>(store);
  // The newest window.documents documents, fewer when their lines pass window.lines (counted
  // first, so that a start never reads more lines than memory keeps).
  state.documents_forgotten_through =
      std::max<std::int64_t>(0, last_id - static_cast<std::int64_t>(window.documents));
  std::vector<std::pair<std::int64_t, std::size_t>> line_counts;
  GPUHUB_RETURN_IF_ERROR(store.Query(LineCountsAfterSelect(state.documents_forgotten_through),
                                     [&](const store::Row& row) -> Status {
                                       GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, row.Int(0));
                                       GPUHUB_ASSIGN_OR_RETURN(std::int64_t n, row.Int(1));
                                       line_counts.emplace_back(id, static_cast<std::size_t>(n));
                                       return Status::Ok();
                                     }));
  std::size_t lines = 0;
  for (auto it = line_counts.rbegin(); it != line_counts.rend(); ++it) {
    lines += it->second;
    if (lines > window.lines) {
      state.documents_forgotten_through = it->first;
      break;
    }
  }
  GPUHUB_RETURN_IF_ERROR(store.Query(
      DocumentsAfterSelect(state.documents_forgotten_through),
      [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(Document d, DocumentFromRow(row));
        state.by_number[d.number] = d.id;
        state.by_source[d.source] = d.id;
        state.documents[d.id] = std::move(d);
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Query(
      LinesAfterSelect(state.documents_forgotten_through), [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, row.Int(0));
        auto it = state.documents.find(id);
        if (it == state.documents.end()) {
          return Status::Internal("a line of unknown tax document " + std::to_string(id));
        }
        GPUHUB_ASSIGN_OR_RETURN(billing::Line line, LineFromRow(row));
        it->second.lines.push_back(std::move(line));
        ++state.lines_in_memory;
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(state.numbers.CheckGapless());
  // Only the rows not on a statement yet: those on one are the statement's lines (loaded above).
  GPUHUB_RETURN_IF_ERROR(
      store.Query(OpenSpotUsageCountSelect(), [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(TimestampMicros month, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t user, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t rows, row.Int(2));
        state.open_usage[{month, user}].reserve(static_cast<std::size_t>(rows));
        return Status::Ok();
      }));
  return store.Query(OpenSpotUsageSelect(), [&](const store::Row& row) -> Status {
    billing::SpotUsage u;
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t user, row.Int(0));
    GPUHUB_ASSIGN_OR_RETURN(TimestampMicros month, row.Int(1));
    GPUHUB_ASSIGN_OR_RETURN(u.lease_id, row.Int(2));
    GPUHUB_ASSIGN_OR_RETURN(u.tax_country, row.Text(3));
    GPUHUB_ASSIGN_OR_RETURN(u.rate_ppm, row.Int(4));
    GPUHUB_ASSIGN_OR_RETURN(u.reverse_charge, row.IntAs<bool>(5));
    GPUHUB_ASSIGN_OR_RETURN(u.gpu, row.Text(6));
    GPUHUB_ASSIGN_OR_RETURN(u.gpus, row.Int(7));
    GPUHUB_ASSIGN_OR_RETURN(u.price_micros, row.Int(8));
    GPUHUB_ASSIGN_OR_RETURN(u.hours, row.Int(9));
    GPUHUB_ASSIGN_OR_RETURN(u.net_micros, row.Int(10));
    GPUHUB_ASSIGN_OR_RETURN(u.tax_micros, row.Int(11));
    GPUHUB_ASSIGN_OR_RETURN(u.first_hour_at, row.Int(12));
    GPUHUB_ASSIGN_OR_RETURN(u.last_hour_at, row.Int(13));
    // In lease order, as the engine keeps them (the query's order).
    state.open_usage[{month, user}].push_back(std::move(u));
    return Status::Ok();
  });
}

store::Select OpenSpotUsageSelect() {
  store::Select select;
  select.table = "spot_usage";
  select.columns = {"user_id",          "month_start_us", "lease_id",   "tax_country",
                    "rate_ppm",         "reverse_charge", "gpu",        "gpus",
                    "price_micros",     "hours",          "net_micros", "tax_micros",
                    "first_hour_at_us", "last_hour_at_us"};
  select.where = {{"document_id", store::Condition::Op::kEq, std::int64_t{0}}};
  select.order_by = "month_start_us, user_id, lease_id, first_hour_at_us";
  return select;
}

store::Select OpenSpotUsageCountSelect() {
  store::Select select;
  select.table = "spot_usage";
  select.columns = {"month_start_us", "user_id", "count(*)"};
  select.where = {{"document_id", store::Condition::Op::kEq, std::int64_t{0}}};
  select.group_by = {"month_start_us", "user_id"};
  return select;
}

}  // namespace gpuhub::engine
