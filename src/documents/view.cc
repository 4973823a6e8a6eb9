#include "documents/view.h"

#include "billing/countries.h"
#include "billing/tax_rates.h"
#include "core/money.h"
#include "core/strings.h"

namespace gpuhub::documents {
namespace {

std::string Date(TimestampMicros t) { return FormatTimestamp(t).substr(0, 10); }

// The party as printed: name, address lines, country, VAT id.
std::vector<std::string> PartyLines(const billing::Party& p) {
  std::vector<std::string> out;
  out.push_back(p.name);
  for (const auto& line : Split(p.address, '\n')) {
    // A server without [billing] seller_address stores a note to its operator as the address
    // (engine/state.h); documents already issued keep it. A customer is shown no address rather
    // than the operator's configuration text.
    if (Trim(line).empty() || Trim(line).starts_with("(address not configured")) continue;
    out.emplace_back(Trim(line));
  }
  if (!p.country.empty()) out.push_back(billing::CountryName(p.country) + " (" + p.country + ")");
  if (!p.vat_id.empty()) out.push_back("VAT id: " + p.vat_id);
  return out;
}

std::string RateText(const billing::Line& l) {
  if (l.reverse_charge) return "reverse charge";
  return billing::FormatRatePercent(l.rate_ppm) + "%";
}

}  // namespace

std::string Amount(std::int64_t micros) {
  std::string s = FormatMicros(micros, 6);
  // Trim trailing zeros, keeping at least 2 decimals.
  std::size_t dot = s.find('.');
  while (s.size() > dot + 3 && s.back() == '0') s.pop_back();
  return s;
}

View MakeView(const billing::Document& doc) {
  View v;
  const bool note = doc.kind == billing::DocumentKind::kCreditNote;
  v.title = std::string(note ? "Credit note " : "Invoice ") + doc.number;
  v.heading = doc.title;
  v.currency = std::string(CurrencyCode(doc.currency));
  v.facts = {{note ? "Credit note number" : "Invoice number", doc.number},
             {"Issue date", Date(doc.issued_at)},
             {"Date of supply",
              doc.supply_until > doc.supply_from + kMicrosPerDay
                  ? Date(doc.supply_from) + " to " + Date(doc.supply_until - 1)
                  : Date(doc.supply_from)},
             {"Currency", v.currency}};
  if (note) v.facts.push_back({"Corrects invoice", doc.corrects});
  v.seller = PartyLines(doc.seller);
  v.buyer = PartyLines(doc.buyer);
  for (const auto& l : doc.lines) {
    v.lines.push_back({l.description, std::to_string(l.quantity) + " " + l.unit +
                                          (l.quantity == 1 ? "" : "s"),
                       Amount(l.unit_net_micros), Amount(l.net_micros), RateText(l),
                       Amount(l.tax_micros), Amount(l.gross_micros)});
  }
  for (const auto& g : billing::TaxByRates(doc)) {
    v.tax_groups.push_back(
        {billing::TaxGroupLabel(g) + " on " + Amount(g.net_micros), Amount(g.tax_micros)});
  }
  v.net = Amount(doc.net_micros);
  v.tax = Amount(doc.tax_micros);
  v.gross = Amount(doc.gross_micros);
  if (note) {
    v.notes.push_back("Reason: " + doc.reason);
    v.notes.push_back("The amounts of this credit note were credited to the buyer's gpuhub "
                      "balance; they reduce invoice " +
                      doc.corrects + ".");
  }
  // The tax note names every treatment (and carries the reverse-charge wording when it applies).
  v.notes.push_back("Tax: " + doc.tax_note + ".");
  v.notes.push_back("Prices exclude tax; tax is charged at the rate of the buyer's billing "
                    "country at the time of each charge.");
  const auto& e = doc.evidence;
  if (e.at != 0 || !e.billing_country.empty()) {
    std::string line = "Place of supply evidence: billing country " +
                       (e.billing_country.empty() ? std::string("(none)") : e.billing_country);
    if (!e.ip_address.empty()) line += "; client address " + e.ip_address;
    if (!e.ip_country.empty()) line += " (" + e.ip_country + " by the CDN)";
    if (!billing::EvidenceAgrees(e)) line += " - differs from the billing country";
    if (e.at != 0) line += "; recorded " + FormatTimestamp(e.at);
    v.evidence.push_back(line);
  }
  return v;
}

}  // namespace gpuhub::documents
