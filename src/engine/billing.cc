#include "engine/billing.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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

void WriteDocument(Txn& txn, const Document& d) {
  txn.writes.Insert("tax_documents",
                    {{"id", d.id},
                     {"kind", std::string(billing::DocumentKindName(d.kind))},
                     {"number", d.number},
                     {"year", d.year},
                     {"sequence", d.sequence},
                     {"user_id", d.user_id},
                     {"source", d.source},
                     {"title", d.title},
                     {"issued_at_us", d.issued_at},
                     {"supply_from_us", d.supply_from},
                     {"supply_until_us", d.supply_until},
                     {"currency", std::string(CurrencyCode(d.currency))},
                     {"seller_name", d.seller.name},
                     {"seller_address", d.seller.address},
                     {"seller_country", d.seller.country},
                     {"seller_vat_id", d.seller.vat_id},
                     {"buyer_name", d.buyer.name},
                     {"buyer_address", d.buyer.address},
                     {"buyer_country", d.buyer.country},
                     {"buyer_vat_id", d.buyer.vat_id},
                     {"net_micros", d.net_micros},
                     {"tax_micros", d.tax_micros},
                     {"gross_micros", d.gross_micros},
                     {"reverse_charge", Flag(d.reverse_charge)},
                     {"tax_note", d.tax_note},
                     {"evidence_country", d.evidence.billing_country},
                     {"evidence_address", d.evidence.ip_address},
                     {"evidence_ip_country", d.evidence.ip_country},
                     {"evidence_at_us", d.evidence.at},
                     {"corrects", d.corrects},
                     {"reason", d.reason}});
  for (std::size_t i = 0; i < d.lines.size(); ++i) {
    const billing::Line& l = d.lines[i];
    txn.writes.Insert("tax_document_lines", {{"document_id", d.id},
                                             {"line", static_cast<std::int64_t>(i + 1)},
                                             {"description", l.description},
                                             {"quantity", l.quantity},
                                             {"unit", l.unit},
                                             {"unit_net_micros", l.unit_net_micros},
                                             {"net_micros", l.net_micros},
                                             {"tax_country", l.tax_country},
                                             {"rate_ppm", l.rate_ppm},
                                             {"reverse_charge", Flag(l.reverse_charge)},
                                             {"tax_micros", l.tax_micros},
                                             {"gross_micros", l.gross_micros}});
  }
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

// Everything IssueDocument checks before it changes anything; the number the document will get.
Result<billing::DocumentNumber> Prepare(const Txn& txn, Document& doc) {
  const BillingState& b = *txn.state.billing;
  if (FindUser(txn.state, doc.user_id) == nullptr) {
    return Status::NotFound("no account " + std::to_string(doc.user_id));
  }
  if (doc.source.empty() || b.by_source.count(doc.source)) {
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
  b.documents_by_user[doc.user_id].push_back(doc.id);
  if (doc.kind == DocumentKind::kCreditNote) {
    b.credited[b.by_number.at(doc.corrects)].Add(doc);
  }
  WriteDocument(txn, doc);
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
  BillingState& b = B(txn);
  auto found = b.by_number.find(invoice_number);
  if (found == b.by_number.end()) {
    return Status::NotFound("no invoice '" + invoice_number.substr(0, 32) + "'");
  }
  const Document& invoice = b.documents.at(found->second);
  if (refunded_by.empty()) GPUHUB_RETURN_IF_ERROR(CheckAdminMayCredit(txn.state, invoice, txn.now));
  GPUHUB_ASSIGN_OR_RETURN(Document note,
                          billing::BuildCreditNote(invoice, CreditedOf(txn.state, invoice.id),
                                                   net_micros, reason, txn.now));
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
  const BillingState& b = *state.billing;
  auto it = b.by_source.find(source);
  if (it == b.by_source.end()) return Status::NotFound("no tax document for '" + source + "'");
  return b.documents.at(it->second);
}

Result<Document> GetDocument(const State& state, std::int64_t user_id, const std::string& number) {
  const BillingState& b = *state.billing;
  auto it = b.by_number.find(number);
  if (it != b.by_number.end()) {
    const Document& d = b.documents.at(it->second);
    if (user_id == 0 || d.user_id == user_id) return d;
  }
  return Status::NotFound("no invoice '" + number.substr(0, 32) + "'");
}

std::vector<Document> ListDocuments(const State& state, std::int64_t user_id, std::size_t limit,
                                    std::int64_t before_id) {
  std::vector<Document> out;
  const BillingState& b = *state.billing;
  auto it = b.documents_by_user.find(user_id);
  if (it == b.documents_by_user.end()) return out;
  const auto& ids = it->second;
  auto end = before_id > 0 ? std::lower_bound(ids.begin(), ids.end(), before_id) : ids.end();
  for (auto id = std::make_reverse_iterator(end); id != ids.rend() && out.size() < limit; ++id) {
    out.push_back(b.documents.at(*id));
  }
  return out;
}

billing::Credited CreditedOf(const State& state, std::int64_t invoice_id) {
  auto it = state.billing->credited.find(invoice_id);
  return it == state.billing->credited.end() ? billing::Credited{} : it->second;
}

Status CheckBillingInvariants(const State& state) {
  const BillingState& b = *state.billing;
  auto fail = [](const std::string& what) { return Status::Internal("billing: " + what); };
  billing::NumberSeries series;
  std::set<std::string> numbers, sources;
  std::map<std::int64_t, billing::Credited> credited;
  for (const auto& [id, d] : b.documents) {
    GPUHUB_RETURN_IF_ERROR(billing::CheckDocument(d).WithContext(d.number));
    auto parsed = billing::ParseDocumentNumber(d.number);
    if (!parsed.ok() || parsed->kind != d.kind || parsed->year != d.year ||
        parsed->sequence != d.sequence || d.year != CivilDateOf(d.issued_at).year) {
      return fail(d.number + " does not match its kind, year and sequence");
    }
    if (!numbers.insert(d.number).second) return fail(d.number + " is used twice");
    if (!sources.insert(d.source).second) return fail(d.source + " is billed twice");
    if (b.by_number.at(d.number) != id || b.by_source.at(d.source) != id) {
      return fail(d.number + " is indexed wrongly");
    }
    series.Observe(*parsed);
    if (d.kind == DocumentKind::kCreditNote) {
      auto inv = b.by_number.find(d.corrects);
      if (inv == b.by_number.end()) return fail(d.number + " corrects an unknown invoice");
      const Document& i = b.documents.at(inv->second);
      if (i.kind != DocumentKind::kInvoice || i.user_id != d.user_id || i.id > d.id) {
        return fail(d.number + " corrects " + d.corrects + " wrongly");
      }
      billing::Credited& c = credited[i.id];
      c.Add(d);
      if (c.net_micros > i.net_micros || c.tax_micros > i.tax_micros) {
        return fail(i.number + " is credited beyond its amounts");
      }
    }
  }
  GPUHUB_RETURN_IF_ERROR(series.CheckGapless());
  if (b.by_number.size() != b.documents.size() || b.by_source.size() != b.documents.size()) {
    return fail("indexes hold documents that do not exist");
  }
  for (const auto& [id, c] : credited) {
    billing::Credited kept = CreditedOf(state, id);
    if (kept.net_micros != c.net_micros || kept.tax_micros != c.tax_micros ||
        kept.notes != c.notes) {
      return fail("credited totals of document " + std::to_string(id) + " disagree");
    }
  }
  if (credited.size() != b.credited.size()) return fail("credited totals of unknown invoices");
  for (const auto& [key, rows] : b.open_usage) {
    auto unordered = std::adjacent_find(rows.begin(), rows.end(), [](const auto& a, const auto& n) {
      return a.lease_id > n.lease_id;
    });
    if (unordered != rows.end()) {
      return fail("open usage of account " + std::to_string(key.second) + " is out of lease order");
    }
  }
  return CheckRentalDocuments(state);
}

billing::TaxReport TaxReportOf(const State& state, TimestampMicros from, TimestampMicros until) {
  billing::TaxReportBuilder report(from, until);
  for (const auto& [id, d] : state.billing->documents) report.Add(d);
  return report.Finish();
}

void AddBillingTickHooks(Engine& engine) {
  engine.AddTickHook([](Txn& txn) { return IssueDueStatements(txn).status(); });
}

// ----- Loading -----------------------------------------------------------------------------------

Status LoadBilling(store::Store& store, const billing::Party& seller, BillingState& state) {
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
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "tax_documents",
      {"id", "kind", "number", "year", "sequence", "user_id", "source", "title", "issued_at_us",
       "supply_from_us", "supply_until_us", "currency", "seller_name", "seller_address",
       "seller_country", "seller_vat_id", "buyer_name", "buyer_address", "buyer_country",
       "buyer_vat_id", "net_micros", "tax_micros", "gross_micros", "reverse_charge", "tax_note",
       "evidence_country", "evidence_address", "evidence_ip_country", "evidence_at_us",
       "corrects", "reason"},
      "id", [&](const store::Row& row) -> Status {
        Document d;
        GPUHUB_ASSIGN_OR_RETURN(d.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(d.kind, row.Parsed(1, billing::ParseDocumentKind));
        GPUHUB_ASSIGN_OR_RETURN(d.number, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(d.year, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(d.sequence, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(d.user_id, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(d.source, row.Text(6));
        GPUHUB_ASSIGN_OR_RETURN(d.title, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(d.issued_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(d.supply_from, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(d.supply_until, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(d.currency, row.Parsed(11, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(d.seller.name, row.Text(12));
        GPUHUB_ASSIGN_OR_RETURN(d.seller.address, row.Text(13));
        GPUHUB_ASSIGN_OR_RETURN(d.seller.country, row.Text(14));
        GPUHUB_ASSIGN_OR_RETURN(d.seller.vat_id, row.Text(15));
        GPUHUB_ASSIGN_OR_RETURN(d.buyer.name, row.Text(16));
        GPUHUB_ASSIGN_OR_RETURN(d.buyer.address, row.Text(17));
        GPUHUB_ASSIGN_OR_RETURN(d.buyer.country, row.Text(18));
        GPUHUB_ASSIGN_OR_RETURN(d.buyer.vat_id, row.Text(19));
        GPUHUB_ASSIGN_OR_RETURN(d.net_micros, row.Int(20));
        GPUHUB_ASSIGN_OR_RETURN(d.tax_micros, row.Int(21));
        GPUHUB_ASSIGN_OR_RETURN(d.gross_micros, row.Int(22));
        GPUHUB_ASSIGN_OR_RETURN(d.reverse_charge, row.IntAs<bool>(23));
        GPUHUB_ASSIGN_OR_RETURN(d.tax_note, row.Text(24));
        GPUHUB_ASSIGN_OR_RETURN(d.evidence.billing_country, row.Text(25));
        GPUHUB_ASSIGN_OR_RETURN(d.evidence.ip_address, row.Text(26));
        GPUHUB_ASSIGN_OR_RETURN(d.evidence.ip_country, row.Text(27));
        GPUHUB_ASSIGN_OR_RETURN(d.evidence.at, row.Int(28));
        GPUHUB_ASSIGN_OR_RETURN(d.corrects, row.Text(29));
        GPUHUB_ASSIGN_OR_RETURN(d.reason, row.Text(30));
        state.next_document_id = std::max(state.next_document_id, d.id + 1);
        state.documents[d.id] = std::move(d);
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "tax_document_lines",
      {"document_id", "line", "description", "quantity", "unit", "unit_net_micros", "net_micros",
       "tax_country", "rate_ppm", "reverse_charge", "tax_micros", "gross_micros"},
      "document_id, line", [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, row.Int(0));
        auto it = state.documents.find(id);
        if (it == state.documents.end()) {
          return Status::Internal("a line of unknown tax document " + std::to_string(id));
        }
        billing::Line l;
        GPUHUB_ASSIGN_OR_RETURN(l.description, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(l.quantity, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(l.unit, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(l.unit_net_micros, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(l.net_micros, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(l.tax_country, row.Text(7));
        GPUHUB_ASSIGN_OR_RETURN(l.rate_ppm, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(l.reverse_charge, row.IntAs<bool>(9));
        GPUHUB_ASSIGN_OR_RETURN(l.tax_micros, row.Int(10));
        GPUHUB_ASSIGN_OR_RETURN(l.gross_micros, row.Int(11));
        it->second.lines.push_back(std::move(l));
        return Status::Ok();
      }));
  for (const auto& [id, d] : state.documents) {
    state.by_number[d.number] = id;
    state.by_source[d.source] = id;
    state.documents_by_user[d.user_id].push_back(id);
    state.numbers.Observe({d.kind, d.year, d.sequence});
    if (d.kind == DocumentKind::kCreditNote) {
      auto inv = state.by_number.find(d.corrects);
      if (inv == state.by_number.end()) {
        return Status::Internal("credit note " + d.number + " corrects an unknown invoice");
      }
      state.credited[inv->second].Add(d);
    }
  }
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
