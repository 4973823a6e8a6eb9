#include "engine/rental_billing.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "billing/countries.h"
#include "engine/billing.h"
#include "engine/rentals.h"

namespace gpuhub::engine {
namespace {

// The invoice of a rental charge is found again by this (a refund credits it).
std::string ChargeSource(const rentals::Charge& c) {
  return "rental:" + std::to_string(c.rental_id) + ":charge:" + std::to_string(c.id);
}

std::string Day(TimestampMicros t) { return FormatTimestamp(t).substr(0, 10); }

std::string Describe(const rentals::Rental* r, const rentals::Charge& c) {
  std::string what = "Term rental " + std::to_string(c.rental_id);
  if (r != nullptr) {
    what += ": " + std::to_string(r->count) + " x " + r->gpu + " in " + r->region + ", " +
            std::string(rentals::TermName(r->term));
  }
  what += " term " + std::to_string(c.period);
  if (c.period_start != 0) what += ", " + Day(c.period_start) + " to " + Day(c.period_end);
  return what;
}

// The invoice of a purchase or renewal: the rental's term at the net and tax the charge carried.
Result<billing::Document> ChargeInvoice(const State& state, const rentals::Charge& c) {
  const rentals::Rental* rental = state.rentals->fleet.FindRental(c.rental_id);
  billing::TaxDecision tax = DecideTaxFor(state, c.customer_id, c.at);
  billing::Document doc;
  doc.kind = billing::DocumentKind::kInvoice;
  doc.user_id = c.customer_id;
  doc.source = ChargeSource(c);
  doc.title = std::string(c.kind == rentals::ChargeKind::kRenewal ? "Term rental renewal"
                                                                  : "Term rental") +
              " " + std::to_string(c.rental_id) + ", term " + std::to_string(c.period);
  doc.issued_at = c.at;
  doc.supply_from = c.period_start != 0 ? c.period_start : c.at;
  doc.supply_until = c.period_end != 0 ? c.period_end : doc.supply_from;
  billing::Line line;
  line.description = Describe(rental, c);
  line.quantity = 1;
  line.unit = "term";
  line.unit_net_micros = c.amount.net_micros;
  line.net_micros = c.amount.net_micros;
  line.tax_country = tax.country;
  line.reverse_charge = tax.reverse_charge;
  // The tax the charge carried (RentalTax at the same moment), not a recomputation.
  line.rate_ppm = c.amount.lines.empty() ? 0 : c.amount.lines.front().rate_ppm;
  line.tax_micros = c.amount.tax_micros;
  line.gross_micros = c.amount.gross_micros;
  doc.lines.push_back(std::move(line));
  GPUHUB_RETURN_IF_ERROR(billing::Seal(doc));
  return doc;
}

}  // namespace

Result<rentals::TaxBlock> RentalTax(const State& state, std::int64_t customer_id,
                                    std::int64_t net_micros, TimestampMicros at) {
  if (customer_id == 0) return rentals::NoTax(net_micros);
  billing::TaxDecision d = DecideTaxFor(state, customer_id, at);
  // No country, or one without a rate: no tax line at all. Reverse charge keeps a 0% line that
  // says so (the quote and the invoice must tell the buyer who accounts for the VAT).
  if (d.country.empty() || (!d.reverse_charge && d.rate_ppm == 0)) {
    return rentals::NoTax(net_micros);
  }
  rentals::TaxBlock b;
  b.net_micros = net_micros;
  rentals::TaxLine line;
  line.rate_ppm = d.reverse_charge ? 0 : d.rate_ppm;
  line.name = d.reverse_charge
                  ? "Reverse charge (" + d.country + ")"
                  : "VAT " + d.country + " " + billing::FormatRatePercent(d.rate_ppm) + "%";
  GPUHUB_ASSIGN_OR_RETURN(line.amount_micros, billing::TaxMicros(net_micros, line.rate_ppm));
  b.tax_micros = line.amount_micros;
  b.gross_micros = net_micros + b.tax_micros;
  b.lines.push_back(std::move(line));
  return b;
}

rentals::TaxFunction RentalTaxFunction(const State& state) {
  return [&state](rentals::UserId customer, std::int64_t net, TimestampMicros at) {
    return RentalTax(state, customer, net, at);
  };
}

Status OnRentalCharged(Txn& txn, const rentals::Charge& charge) {
  Result<billing::Document> issued = Status::Internal("not issued");
  if (charge.kind == rentals::ChargeKind::kRefund) {
    // The refund of a period: a credit note against that period's invoice.
    std::string source;
    for (const auto& c : txn.state.rentals->fleet.ChargesOf(charge.rental_id)) {
      if (c.period == charge.period && c.kind != rentals::ChargeKind::kRefund && c.id < charge.id) {
        source = ChargeSource(c);
      }
    }
    auto invoice = DocumentBySource(txn.state, source);
    if (!invoice.ok()) {
      issued = invoice.status();
    } else {
      std::optional<std::int64_t> net;
      if (charge.amount.net_micros < invoice->net_micros) net = charge.amount.net_micros;
      auto note = IssueCreditNote(txn, 0, invoice->number, net,
                                  "refund of rental " + std::to_string(charge.rental_id) +
                                      " term " + std::to_string(charge.period),
                                  ChargeSource(charge));
      issued = note.ok() ? Result<billing::Document>(note->note) : note.status();
    }
  } else {
    auto doc = ChargeInvoice(txn.state, charge);
    issued = doc.ok() ? IssueDocument(txn, std::move(doc).value()) : doc.status();
  }
  if (!issued.ok()) {
    // The payment stands; the document is an admin's to issue (the charge row has everything).
    spdlog::error("event=rental_document_failed rental={} charge={} kind={} error=\"{}\"",
                  charge.rental_id, charge.id, rentals::ChargeKindName(charge.kind),
                  issued.status().ToString());
    return Status::Ok();
  }
  spdlog::info("event=rental_document_issued number={} rental={} charge={} gross={}",
               issued->number, charge.rental_id, charge.id, FormatMicros(issued->gross_micros));
  return Status::Ok();
}

Status CheckAdminMayCredit(const State& state, const billing::Document& invoice,
                          TimestampMicros now) {
  long long rental_id = 0, charge_id = 0;
  int used = 0;
  if (state.rentals == nullptr ||
      std::sscanf(invoice.source.c_str(), "rental:%lld:charge:%lld%n", &rental_id, &charge_id,
                  &used) != 2 ||
      static_cast<std::size_t>(used) != invoice.source.size()) {
    return Status::Ok();
  }
  for (const rentals::Charge& c : state.rentals->fleet.ChargesOf(rental_id)) {
    if (c.id != charge_id) continue;
    const rentals::Rental* r = state.rentals->fleet.FindRental(rental_id);
    const bool started = c.period_start != 0 ? c.period_start <= now
                                             : r != nullptr && r->term_start != 0 &&
                                                   r->term_start <= now;
    if (!started && r != nullptr && r->state != rentals::RentalState::kReleased) {
      return Status::FailedPrecondition(
          invoice.number + " bills term " + std::to_string(c.period) + " of rental " +
          std::to_string(rental_id) +
          ", which has not started: releasing the rental refunds that term in full with its "
          "own credit note; credit notes here are for terms that ran");
    }
  }
  return Status::Ok();
}

Status CheckRentalDocuments(const State& state) {
  if (state.rentals == nullptr || state.billing == nullptr) return Status::Ok();
  for (const rentals::Charge& c : state.rentals->fleet.Records().charges) {
    auto fail = [&](const std::string& what) {
      return Status::Internal("billing: rental " + std::to_string(c.rental_id) + " charge " +
                              std::to_string(c.id) + " (" +
                              std::string(rentals::ChargeKindName(c.kind)) + "): " + what);
    };
    auto doc = DocumentBySource(state, ChargeSource(c));
    if (!doc.ok()) return fail("has no tax document");
    const bool refund = c.kind == rentals::ChargeKind::kRefund;
    if (doc->kind != (refund ? billing::DocumentKind::kCreditNote
                             : billing::DocumentKind::kInvoice) ||
        doc->user_id != c.customer_id) {
      return fail(doc->number + " is not its " + (refund ? "credit note" : "invoice"));
    }
    if (doc->gross_micros != c.amount.gross_micros ||
        (!refund && (doc->net_micros != c.amount.net_micros ||
                     doc->tax_micros != c.amount.tax_micros))) {
      return fail(doc->number + " says " + FormatMicros(doc->gross_micros) + " gross, the charge " +
                  FormatMicros(c.amount.gross_micros));
    }
  }
  return Status::Ok();
}

Status OnStorageCharged(Txn& txn, const rentals::StorageCharge& charge) {
  (void)txn;
  (void)charge;
  return Status::Ok();
}

}  // namespace gpuhub::engine
