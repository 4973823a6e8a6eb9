#include "engine/rental_billing.h"

#include <spdlog/spdlog.h>

#include <cstdio>

#include "billing/countries.h"
#include "engine/billing.h"
#include "engine/rentals.h"
#include "rentals/limits.h"

namespace gpuhub::engine {

std::string ChargeSource(const rentals::Charge& c) {
  return "rental:" + std::to_string(c.rental_id) + ":charge:" + std::to_string(c.id);
}

namespace {

std::string Day(TimestampMicros t) { return FormatTimestamp(t).substr(0, 10); }

std::string Describe(const rentals::Rental* r, const rentals::Charge& c) {
  std::string what = "Term rental " + std::to_string(c.rental_id);
  if (r != nullptr) {
    what += ": " + std::to_string(r->count) + " x " + r->gpu + " in " + r->region + ", " +
            std::string(rentals::TermName(r->term));
  }
  what += " term " + std::to_string(c.period);
  if (c.kind == rentals::ChargeKind::kExtraNvme) {
    what += ", " + std::to_string(c.extra_nvme_gb / rentals::kGbPerTb) + " TB extra NVMe";
  }
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
  doc.title = std::string(c.kind == rentals::ChargeKind::kRenewal     ? "Term rental renewal"
                          : c.kind == rentals::ChargeKind::kExtraNvme ? "Extra NVMe of term rental"
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

// The charge `refund` gives back: by refund_of (records before issue 11 name none: then the term
// charge of its period, as rentals::Refunds says). Null when the fleet has no such charge.
std::optional<rentals::Charge> RefundedCharge(const rentals::Fleet& fleet,
                                              const rentals::Charge& refund) {
  std::optional<rentals::Charge> paid;
  for (const rentals::Charge& c : fleet.ChargesOf(refund.rental_id)) {
    if (c.id < refund.id && rentals::Refunds(refund, c)) paid = c;
  }
  return paid;
}

namespace {

// The credit note of a refund: the whole invoice of the charge it gives back, which carries that
// charge's net, tax and gross (a refund returns exactly what its charge moved).
Result<billing::Document> IssueRefundNote(Txn& txn, const rentals::Charge& refund) {
  std::optional<rentals::Charge> paid = RefundedCharge(txn.state.rentals->fleet, refund);
  if (!paid) {
    return Status::Internal("refund " + std::to_string(refund.id) + " names no charge it refunds");
  }
  GPUHUB_ASSIGN_OR_RETURN(billing::Document invoice,
                          DocumentBySource(txn.state, ChargeSource(*paid)));
  GPUHUB_ASSIGN_OR_RETURN(billing::Credited credited, CreditedOf(txn.state, invoice));
  // Crediting what is left would not be this refund's amounts: the documents would disagree with
  // the money, so the note is an admin's to settle.
  if (credited.notes > 0) {
    return Status::FailedPrecondition(invoice.number + " was already credited by " +
                                      std::to_string(credited.notes) + " credit note(s)");
  }
  if (invoice.net_micros != refund.amount.net_micros ||
      invoice.tax_micros != refund.amount.tax_micros ||
      invoice.gross_micros != refund.amount.gross_micros) {
    return Status::Internal(invoice.number + " does not bill what refund " +
                            std::to_string(refund.id) + " returns");
  }
  std::string reason = "refund of rental " + std::to_string(refund.rental_id) + " term " +
                       std::to_string(refund.period);
  if (paid->kind == rentals::ChargeKind::kExtraNvme) reason += " (extra NVMe)";
  GPUHUB_ASSIGN_OR_RETURN(
      CreditNoteResult note,
      IssueCreditNote(txn, 0, invoice.number, std::nullopt, reason, ChargeSource(refund)));
  return note.note;
}

}  // namespace

Status OnRentalCharged(Txn& txn, const rentals::Charge& charge) {
  Result<billing::Document> issued = Status::Internal("not issued");
  if (charge.kind == rentals::ChargeKind::kRefund) {
    issued = IssueRefundNote(txn, charge);
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

Status OnStorageCharged(Txn& txn, const rentals::StorageCharge& charge) {
  (void)txn;
  (void)charge;
  return Status::Ok();
}

}  // namespace gpuhub::engine
