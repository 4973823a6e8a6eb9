#include "billing/document.h"

#include <algorithm>
#include <cstdio>

#include "billing/countries.h"
#include "billing/limits.h"
#include "billing/tax_rates.h"
#include "core/strings.h"

namespace gpuhub::billing {
namespace {

Status Bad(const std::string& what) {
  return Status::InvalidArgument("tax document: " + what);
}

bool SameGroup(const TaxByRate& g, const Line& l) {
  return g.country == l.tax_country && g.rate_ppm == l.rate_ppm &&
         g.reverse_charge == l.reverse_charge;
}

}  // namespace

std::string_view DocumentKindName(DocumentKind kind) {
  return kind == DocumentKind::kCreditNote ? "credit_note" : "invoice";
}

Result<DocumentKind> ParseDocumentKind(std::string_view name) {
  if (name == "invoice") return DocumentKind::kInvoice;
  if (name == "credit_note") return DocumentKind::kCreditNote;
  return Status::InvalidArgument("document kind must be invoice or credit_note");
}

Result<Line> TaxedLine(std::string description, std::int64_t quantity, std::string unit,
                       std::int64_t unit_net_micros, const TaxDecision& decision) {
  Line line;
  line.description = std::move(description);
  line.quantity = quantity;
  line.unit = std::move(unit);
  line.unit_net_micros = unit_net_micros;
  if (quantity < 1 || unit_net_micros < 0 ||
      !CheckedMul(quantity, unit_net_micros, &line.net_micros) ||
      line.net_micros > kMaxAmountMicros) {
    return Bad("a line's quantity x unit price is out of range");
  }
  line.tax_country = decision.country;
  line.reverse_charge = decision.reverse_charge;
  line.rate_ppm = decision.reverse_charge ? 0 : decision.rate_ppm;
  GPUHUB_ASSIGN_OR_RETURN(line.tax_micros, TaxMicros(line.net_micros, line.rate_ppm));
  line.gross_micros = line.net_micros + line.tax_micros;
  return line;
}

std::vector<TaxByRate> TaxByRates(const Document& doc) {
  std::vector<TaxByRate> groups;
  for (const Line& l : doc.lines) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const TaxByRate& g) { return SameGroup(g, l); });
    if (it == groups.end()) {
      groups.push_back({l.tax_country, l.rate_ppm, l.reverse_charge, 0, 0});
      it = groups.end() - 1;
    }
    it->net_micros += l.net_micros;
    it->tax_micros += l.tax_micros;
  }
  return groups;
}

std::string TaxGroupLabel(const TaxByRate& group) {
  if (group.reverse_charge) return "Reverse charge (" + group.country + ")";
  if (group.rate_ppm == 0) {
    return group.country.empty() ? std::string("No VAT")
                                 : "No VAT: no tax rate applies to " + CountryName(group.country);
  }
  return "VAT " + FormatRatePercent(group.rate_ppm) + "% (" + group.country + ")";
}

Status CheckDocument(const Document& doc) {
  if (doc.lines.empty()) return Bad("a document needs at least one line");
  if (doc.lines.size() > kMaxLinesPerDocument) {
    return Bad("more than " + std::to_string(kMaxLinesPerDocument) + " lines");
  }
  std::int64_t net = 0, tax = 0;
  bool reverse = false;
  for (const Line& l : doc.lines) {
    if (l.description.empty() || l.description.size() > kMaxLineDescriptionBytes) {
      return Bad("a line's description must be 1.." + std::to_string(kMaxLineDescriptionBytes) +
                 " bytes");
    }
    if (l.quantity < 1 || l.unit_net_micros < 0 || l.net_micros < 0 || l.tax_micros < 0 ||
        l.rate_ppm < 0 || l.rate_ppm > kMaxRatePpm || l.net_micros > kMaxAmountMicros ||
        l.tax_micros > kMaxAmountMicros) {
      return Bad("a line has an amount out of range");
    }
    if (l.gross_micros != l.net_micros + l.tax_micros) return Bad("a line's gross != net + tax");
    if (l.reverse_charge && l.tax_micros != 0) return Bad("a reverse-charged line carries tax");
    net += l.net_micros;
    tax += l.tax_micros;
    reverse = reverse || l.reverse_charge;
    if (net > kMaxAmountMicros || tax > kMaxAmountMicros) return Bad("the totals are too large");
  }
  if (doc.net_micros != net || doc.tax_micros != tax || doc.gross_micros != net + tax) {
    return Bad("the totals are not the sums of the lines");
  }
  if (doc.reverse_charge != reverse) return Bad("the reverse-charge flag disagrees with the lines");
  if (doc.supply_until < doc.supply_from) return Bad("the supply period ends before it starts");
  if (doc.kind == DocumentKind::kCreditNote && (doc.corrects.empty() || doc.reason.empty())) {
    return Bad("a credit note names the invoice it corrects and why");
  }
  if (doc.kind == DocumentKind::kInvoice && !doc.corrects.empty()) {
    return Bad("only a credit note corrects another document");
  }
  return Status::Ok();
}

Status Seal(Document& doc) {
  doc.net_micros = doc.tax_micros = 0;
  doc.reverse_charge = false;
  for (const Line& l : doc.lines) {
    if (!CheckedAdd(doc.net_micros, l.net_micros, &doc.net_micros) ||
        !CheckedAdd(doc.tax_micros, l.tax_micros, &doc.tax_micros)) {
      return Bad("the totals are too large");
    }
    doc.reverse_charge = doc.reverse_charge || l.reverse_charge;
  }
  doc.gross_micros = doc.net_micros + doc.tax_micros;
  std::string note;
  for (const TaxByRate& g : TaxByRates(doc)) {
    note += (note.empty() ? "" : "; ") + TaxGroupLabel(g);
  }
  if (doc.reverse_charge) note += std::string(". ") + kReverseChargeNote;
  doc.tax_note = note;
  return CheckDocument(doc);
}

// ----- Numbers ----------------------------------------------------------------------------------

std::string FormatDocumentNumber(const DocumentNumber& number) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%04lld-%06lld",
                number.kind == DocumentKind::kCreditNote ? "CN-" : "",
                static_cast<long long>(number.year), static_cast<long long>(number.sequence));
  return buf;
}

Result<DocumentNumber> ParseDocumentNumber(std::string_view text) {
  auto bad = [&] {
    return Status::InvalidArgument("'" + std::string(text.substr(0, 32)) +
                                   "' is not a document number such as 2026-000001 or "
                                   "CN-2026-000001");
  };
  DocumentNumber n;
  std::string_view rest = text;
  if (rest.rfind("CN-", 0) == 0) {
    n.kind = DocumentKind::kCreditNote;
    rest.remove_prefix(3);
  }
  if (rest.size() < 11 || rest.size() > 12 || rest[4] != '-') return bad();
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (i != 4 && (rest[i] < '0' || rest[i] > '9')) return bad();
  }
  n.year = std::stoll(std::string(rest.substr(0, 4)));
  n.sequence = std::stoll(std::string(rest.substr(5)));
  if (n.sequence < 1 || n.year < 1970) return bad();
  // One spelling per number: "2026-0000001" is not "2026-000001".
  if (FormatDocumentNumber(n) != text) return bad();
  return n;
}

Result<DocumentNumber> NumberSeries::Peek(DocumentKind kind, TimestampMicros at) const {
  std::int64_t year = CivilDateOf(at).year;
  auto it = series_.find({kind, year});
  std::int64_t next = (it == series_.end() ? 0 : it->second.last) + 1;
  if (next > kMaxDocumentsPerSeriesYear) {
    return Status::ResourceExhausted("the " + std::string(DocumentKindName(kind)) + " series of " +
                                     std::to_string(year) + " is full");
  }
  return DocumentNumber{kind, year, next};
}

DocumentNumber NumberSeries::Take(DocumentKind kind, TimestampMicros at) {
  DocumentNumber n = Peek(kind, at).value();
  Series& s = series_[{kind, n.year}];
  s.last = n.sequence;
  ++s.count;
  return n;
}

void NumberSeries::Observe(const DocumentNumber& number) {
  Series& s = series_[{number.kind, number.year}];
  s.last = std::max(s.last, number.sequence);
  ++s.count;
}

void NumberSeries::ObserveSeries(DocumentKind kind, std::int64_t year, std::int64_t count,
                                 std::int64_t last) {
  Series& s = series_[{kind, year}];
  s.last = std::max(s.last, last);
  s.count += count;
}

Status NumberSeries::CheckGapless() const {
  for (const auto& [key, s] : series_) {
    if (s.count != s.last) {
      return Status::Internal("the " + std::string(DocumentKindName(key.first)) + " series of " +
                              std::to_string(key.second) + " holds " + std::to_string(s.count) +
                              " documents but its highest number is " + std::to_string(s.last));
    }
  }
  return Status::Ok();
}

std::int64_t NumberSeries::Count(DocumentKind kind, std::int64_t year) const {
  auto it = series_.find({kind, year});
  return it == series_.end() ? 0 : it->second.count;
}

// ----- Credit notes -----------------------------------------------------------------------------

void Credited::Add(const Document& note) {
  net_micros += note.net_micros;
  tax_micros += note.tax_micros;
  gross_micros += note.gross_micros;
  ++notes;
}

Result<Document> BuildCreditNote(const Document& invoice, const Credited& already,
                                 std::optional<std::int64_t> net_micros, std::string reason,
                                 TimestampMicros at) {
  if (invoice.kind != DocumentKind::kInvoice) {
    return Status::FailedPrecondition("a credit note corrects an invoice, not another credit note");
  }
  std::string_view why = Trim(reason);
  if (why.empty() || why.size() > kMaxCreditReasonBytes) {
    return Status::InvalidArgument("reason must be 1.." + std::to_string(kMaxCreditReasonBytes) +
                                   " bytes: it is printed on the credit note")
        .WithField("reason");
  }
  const std::int64_t left_net = invoice.net_micros - already.net_micros;
  const std::int64_t left_tax = invoice.tax_micros - already.tax_micros;
  if (left_net <= 0 && left_tax <= 0) {
    return Status::FailedPrecondition("invoice " + invoice.number + " is credited in full already");
  }
  Document note;
  note.kind = DocumentKind::kCreditNote;
  note.user_id = invoice.user_id;
  note.source = "credit:" + invoice.number + ":" + std::to_string(already.notes + 1);
  note.title = "Credit note for invoice " + invoice.number;
  note.issued_at = at;
  note.supply_from = invoice.supply_from;
  note.supply_until = invoice.supply_until;
  note.currency = invoice.currency;
  note.seller = invoice.seller;
  note.buyer = invoice.buyer;
  note.evidence = invoice.evidence;
  note.corrects = invoice.number;
  note.reason = std::string(why);

  std::vector<TaxByRate> groups = TaxByRates(invoice);
  if (!net_micros && already.notes == 0) {
    note.lines = invoice.lines;  // the whole invoice, line by line
  } else {
    if (groups.size() != 1) {
      return Status::InvalidArgument(
                 "invoice " + invoice.number +
                 " has lines at several tax rates: it can only be credited in full, once")
          .WithField("amount");
    }
    std::int64_t net = net_micros.value_or(left_net);
    if (net <= 0 || net > left_net) {
      return Status::InvalidArgument("amount must be more than 0 and at most " +
                                     FormatMicros(left_net) + " (the net not yet credited of " +
                                     invoice.number + ")")
          .WithField("amount");
    }
    const TaxByRate& g = groups.front();
    TaxDecision d{g.country, g.rate_ppm, g.reverse_charge, ""};
    GPUHUB_ASSIGN_OR_RETURN(Line line, TaxedLine("Credit of invoice " + invoice.number + ": " +
                                                     note.reason.substr(0, 200),
                                                 1, "item", net, d));
    // The last credit gives back exactly what is left, so rounding never leaves a micro-unit
    // of tax behind (or credits one too many).
    if (net == left_net || line.tax_micros > left_tax) line.tax_micros = left_tax;
    line.gross_micros = line.net_micros + line.tax_micros;
    note.lines.push_back(std::move(line));
  }
  GPUHUB_RETURN_IF_ERROR(Seal(note));
  return note;
}

}  // namespace gpuhub::billing
