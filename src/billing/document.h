// Tax documents: invoices and credit notes, their lines and totals, and their numbers.
//
// Pure and deterministic (no clock, no I/O): the engine builds a document from what was sold,
// allocates its number and stores it in the same transaction (engine/billing.h).
//
// Rules
// - Amounts are integer micro-units of the document's currency, all non-negative: a credit note
//   states the amounts it gives back as positive figures (its kind says which way they go).
// - Each line carries its own tax: net = quantity x unit net (or the sum of what was charged, for
//   a statement whose tax was collected hour by hour), tax = round_half_even(net x rate) once per
//   line (tax.h), gross = net + tax. Totals are the sums of the lines; tax by rate groups them.
// - Numbers: one gapless series per kind and calendar year (UTC) of issue: invoices
//   "2026-000001", credit notes "CN-2026-000001". A number is allocated only when the document
//   is sealed and written in the same transaction, so a series never skips or repeats; nothing
//   is ever deleted or renumbered (a correction is a credit note).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "billing/profile.h"
#include "billing/tax.h"
#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"

namespace gpuhub::billing {

enum class DocumentKind : std::uint8_t { kInvoice = 0, kCreditNote = 1 };
std::string_view DocumentKindName(DocumentKind kind);  // "invoice", "credit_note"
Result<DocumentKind> ParseDocumentKind(std::string_view name);

struct Party {
  std::string name;  // a business's name, or the account's username for a consumer
  std::string address;
  std::string country;  // ISO code
  std::string vat_id;   // "" when none
  friend bool operator==(const Party&, const Party&) = default;
};

struct Line {
  std::string description;
  std::int64_t quantity = 1;
  std::string unit;  // "lease-hour", "term", "item"
  std::int64_t unit_net_micros = 0;
  std::int64_t net_micros = 0;
  std::string tax_country;  // whose rate applied ("" when none did)
  std::int64_t rate_ppm = 0;
  bool reverse_charge = false;
  std::int64_t tax_micros = 0;
  std::int64_t gross_micros = 0;
  friend bool operator==(const Line&, const Line&) = default;
};

// One tax group of a document: the lines of one country, rate and treatment.
struct TaxByRate {
  std::string country;
  std::int64_t rate_ppm = 0;
  bool reverse_charge = false;
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  friend bool operator==(const TaxByRate&, const TaxByRate&) = default;
};

struct Document {
  std::int64_t id = 0;  // the engine's (1, 2, ... over all kinds)
  DocumentKind kind = DocumentKind::kInvoice;
  std::string number;  // "" until allocated
  std::int64_t year = 0;
  std::int64_t sequence = 0;
  std::int64_t user_id = 0;
  // What it bills, unique per document: "spot:2026-11" (a monthly statement), "rental:12:3" (a
  // rental charge), "credit:2026-000004:1" (the first credit note of an invoice).
  std::string source;
  std::string title;  // "Spot GPU usage, November 2026"
  TimestampMicros issued_at = 0;
  TimestampMicros supply_from = 0;   // the period supplied (the date of supply)
  TimestampMicros supply_until = 0;  // exclusive
  Currency currency = Currency::kUsd;
  Party seller;
  Party buyer;
  std::vector<Line> lines;
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  std::int64_t gross_micros = 0;
  bool reverse_charge = false;
  std::string tax_note;  // every tax treatment of its lines, for people
  CountryEvidence evidence;
  std::string corrects;  // credit note: the number of the invoice it corrects
  std::string reason;    // credit note: why

  friend bool operator==(const Document&, const Document&) = default;
};

// A line of `quantity` x `unit_net_micros`, taxed as `decision` says.
Result<Line> TaxedLine(std::string description, std::int64_t quantity, std::string unit,
                       std::int64_t unit_net_micros, const TaxDecision& decision);

// Fills the totals, the reverse-charge flag and the tax note from the lines, then checks the
// document (CheckDocument). invalid_argument when the lines do not add up or exceed the limits.
Status Seal(Document& doc);
// Every rule a stored document must meet: 1..kMaxLinesPerDocument lines, non-negative amounts,
// gross = net + tax per line and in total, totals = sums of the lines, a supply period that
// does not end before it starts, a credit note that names what it corrects.
Status CheckDocument(const Document& doc);
// The tax groups of a document, in the order their lines first appear.
std::vector<TaxByRate> TaxByRates(const Document& doc);
// "VAT 19% (DE)", the reverse-charge note, or "No VAT: no tax rate is configured for ..."
std::string TaxGroupLabel(const TaxByRate& group);

// ----- Numbers ----------------------------------------------------------------------------------

struct DocumentNumber {
  DocumentKind kind = DocumentKind::kInvoice;
  std::int64_t year = 0;
  std::int64_t sequence = 0;
  friend auto operator<=>(const DocumentNumber&, const DocumentNumber&) = default;
};
// "2026-000001" (invoices), "CN-2026-000001" (credit notes).
std::string FormatDocumentNumber(const DocumentNumber& number);
// The inverse; invalid_argument for anything else (the message says the shape).
Result<DocumentNumber> ParseDocumentNumber(std::string_view text);

// The series of every kind and year: which number comes next. Not thread-safe (the engine's
// writer owns it).
class NumberSeries {
 public:
  // The number the next document of `kind` issued at `at` gets; resource_exhausted when that
  // year's series is full. Does not allocate.
  Result<DocumentNumber> Peek(DocumentKind kind, TimestampMicros at) const;
  // Allocates what Peek said (call it only once nothing else can fail: a number taken is a
  // number written).
  DocumentNumber Take(DocumentKind kind, TimestampMicros at);
  // Restoring from the store: one existing number (any order). CheckGapless afterwards.
  void Observe(const DocumentNumber& number);
  // Restoring a whole series at once: `count` documents, the highest numbered `last` (the
  // database's count and maximum; CheckGapless afterwards).
  void ObserveSeries(DocumentKind kind, std::int64_t year, std::int64_t count, std::int64_t last);
  // internal unless every series holds exactly 1..n, each once.
  Status CheckGapless() const;
  // Documents of a series so far.
  std::int64_t Count(DocumentKind kind, std::int64_t year) const;

 private:
  struct Series {
    std::int64_t last = 0;
    std::int64_t count = 0;
  };
  std::map<std::pair<DocumentKind, std::int64_t>, Series> series_;
};

// ----- Credit notes -----------------------------------------------------------------------------

// What credit notes have already given back of an invoice.
struct Credited {
  std::int64_t net_micros = 0;
  std::int64_t tax_micros = 0;
  std::int64_t gross_micros = 0;
  std::int64_t notes = 0;
  // Counts one more credit note.
  void Add(const Document& note);
};

// A credit note correcting `invoice` (not numbered yet: the engine allocates and stores it).
// `net_micros` empty: everything not yet credited (the invoice's own lines when nothing was);
// otherwise that much net, taxed at the invoice's one rate (a document with several tax groups
// can only be credited in full, and only once). invalid_argument (field "amount") for an amount
// above what is left or of a document of several rates; failed_precondition for a credit note
// or an invoice credited in full already. The reason (field "reason") is required.
Result<Document> BuildCreditNote(const Document& invoice, const Credited& already,
                                 std::optional<std::int64_t> net_micros, std::string reason,
                                 TimestampMicros at);

}  // namespace gpuhub::billing
