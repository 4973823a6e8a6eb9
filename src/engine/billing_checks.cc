#include "engine/billing_checks.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <optional>

#include "core/clock.h"
#include "core/money.h"
#include "engine/rental_billing.h"
#include "engine/rentals.h"
#include "rentals/types.h"

namespace gpuhub::engine {
namespace {

using billing::Document;
using billing::DocumentKind;

// "rental:12:charge:3" -> (12, 3); false for anything else.
bool ParseChargeSource(const std::string& source, std::int64_t* rental, std::int64_t* charge) {
  long long r = 0, c = 0;
  int used = 0;
  if (std::sscanf(source.c_str(), "rental:%lld:charge:%lld%n", &r, &c, &used) != 2 ||
      static_cast<std::size_t>(used) != source.size() || r <= 0 || c <= 0) {
    return false;
  }
  // One spelling per charge ("rental:012:charge:3" is not charge 3's source).
  if (source != "rental:" + std::to_string(r) + ":charge:" + std::to_string(c)) return false;
  *rental = r;
  *charge = c;
  return true;
}

const ChargeDocument* FindIn(const std::vector<const ChargeDocumentIndex*>& seen,
                             const std::string& source) {
  for (const ChargeDocumentIndex* index : seen) {
    if (const ChargeDocument* d = index->Find(source)) return d;
  }
  return nullptr;
}

}  // namespace

Status DocumentRules::Add(const Document& d) {
  auto fail = [](const std::string& what) { return Status::Internal("billing: " + what); };
  GPUHUB_RETURN_IF_ERROR(billing::CheckDocument(d).WithContext(d.number));
  if (d.id <= last_id_) return fail(d.number + " is out of id order");
  last_id_ = d.id;
  ++documents_;
  auto parsed = billing::ParseDocumentNumber(d.number);
  if (!parsed.ok() || parsed->kind != d.kind || parsed->year != d.year ||
      parsed->sequence != d.sequence || d.year != CivilDateOf(d.issued_at).year) {
    return fail(d.number + " does not match its kind, year and sequence");
  }
  if (!numbers_.insert(d.number).second) return fail(d.number + " is used twice");
  if (!sources_.insert(d.source).second) return fail(d.source + " is billed twice");
  series_.Observe(*parsed);
  if (d.kind == DocumentKind::kInvoice) {
    invoices_[d.number] = {d.id, d.user_id, d.net_micros, d.tax_micros, {}};
    return Status::Ok();
  }
  ++credit_notes_;
  auto inv = invoices_.find(d.corrects);
  if (inv == invoices_.end()) return fail(d.number + " corrects an unknown invoice");
  InvoiceTotals& i = inv->second;
  if (i.user_id != d.user_id || i.id > d.id) {
    return fail(d.number + " corrects " + d.corrects + " wrongly");
  }
  i.credited.Add(d);
  if (i.credited.net_micros > i.net_micros || i.credited.tax_micros > i.tax_micros) {
    return fail(d.corrects + " is credited beyond its amounts");
  }
  return Status::Ok();
}

Status DocumentRules::Finish() const { return series_.CheckGapless(); }

Status CheckBillingMemory(const State& state) {
  const BillingState& b = *state.billing;
  auto fail = [](const std::string& what) { return Status::Internal("billing: " + what); };
  std::size_t lines = 0;
  for (const auto& [id, d] : b.documents) {
    lines += d.lines.size();
    if (b.by_number.at(d.number) != id || b.by_source.at(d.source) != id) {
      return fail(d.number + " is indexed wrongly");
    }
  }
  if (b.by_number.size() != b.documents.size() || b.by_source.size() != b.documents.size()) {
    return fail("indexes hold documents that do not exist");
  }
  if (lines != b.lines_in_memory) return fail("the count of lines in memory is wrong");
  if (!b.documents.empty() && b.documents.begin()->first <= b.documents_forgotten_through) {
    return fail("a forgotten document is still in memory");
  }
  for (const auto& [key, rows] : b.open_usage) {
    auto unordered = std::adjacent_find(rows.begin(), rows.end(), [](const auto& a, const auto& n) {
      return a.lease_id > n.lease_id;
    });
    if (unordered != rows.end()) {
      return fail("open usage of account " + std::to_string(key.second) + " is out of lease order");
    }
  }
  return Status::Ok();
}

void ChargeDocumentIndex::Add(const Document& d) {
  if (d.source.rfind("rental:", 0) != 0) return;
  ChargeDocument c;
  if (!ParseChargeSource(d.source, &c.rental_id, &c.charge_id)) {
    malformed_.push_back(d.number);
    return;
  }
  c.id = d.id;
  c.kind = d.kind;
  c.number = d.number;
  c.user_id = d.user_id;
  c.net_micros = d.net_micros;
  c.tax_micros = d.tax_micros;
  c.gross_micros = d.gross_micros;
  c.corrects = d.corrects;
  by_source_[d.source] = std::move(c);
}

const ChargeDocument* ChargeDocumentIndex::Find(const std::string& source) const {
  auto it = by_source_.find(source);
  return it == by_source_.end() ? nullptr : &it->second;
}

Status CheckChargeDocuments(const rentals::Fleet& fleet,
                            const std::vector<const ChargeDocumentIndex*>& seen,
                            std::int64_t unmatched_through, ChargeDocumentCounts* counts) {
  ChargeDocumentCounts local;
  if (counts == nullptr) counts = &local;
  *counts = {};
  const auto& charges = fleet.Charges();
  for (const auto& [id, c] : charges) {
    auto fail = [&](const std::string& what) {
      return Status::Internal("billing: rental " + std::to_string(c.rental_id) + " charge " +
                              std::to_string(c.id) + " (" +
                              std::string(rentals::ChargeKindName(c.kind)) + "): " + what);
    };
    const bool refund = c.kind == rentals::ChargeKind::kRefund;
    const ChargeDocument* doc = FindIn(seen, ChargeSource(c));
    if (doc == nullptr) {
      if (c.id <= unmatched_through) {
        ++counts->unmatched;
        continue;
      }
      return fail(std::string("has no ") + (refund ? "credit note" : "invoice"));
    }
    if (doc->kind != (refund ? DocumentKind::kCreditNote : DocumentKind::kInvoice) ||
        doc->user_id != c.customer_id) {
      return fail(doc->number + " is not its " + (refund ? "credit note" : "invoice"));
    }
    if (doc->net_micros != c.amount.net_micros || doc->tax_micros != c.amount.tax_micros ||
        doc->gross_micros != c.amount.gross_micros) {
      return fail(doc->number + " says " + FormatMicros(doc->net_micros) + " net, " +
                  FormatMicros(doc->tax_micros) + " tax, " + FormatMicros(doc->gross_micros) +
                  " gross; the charge " + FormatMicros(c.amount.net_micros) + ", " +
                  FormatMicros(c.amount.tax_micros) + ", " + FormatMicros(c.amount.gross_micros));
    }
    if (refund) {
      std::optional<rentals::Charge> paid;
      if (c.refund_of != 0) {
        if (auto it = charges.find(c.refund_of); it != charges.end()) paid = it->second;
      } else {
        paid = RefundedCharge(fleet, c);
      }
      if (!paid || !rentals::Refunds(c, *paid)) return fail("refunds no charge of its rental");
      const ChargeDocument* invoice = FindIn(seen, ChargeSource(*paid));
      if (invoice == nullptr) {
        if (paid->id <= unmatched_through) {
          ++counts->unmatched;
          continue;
        }
        return fail(doc->number + " corrects " + doc->corrects + " but charge " +
                    std::to_string(paid->id) + ", which it refunds, has no invoice");
      }
      if (doc->corrects != invoice->number) {
        return fail(doc->number + " corrects " + doc->corrects + ", not " + invoice->number +
                    ", the invoice of charge " + std::to_string(paid->id) + " that it refunds");
      }
    }
    ++counts->charges;
  }
  // The other way: every document of a rental charge names a charge of that rental.
  for (const ChargeDocumentIndex* index : seen) {
    if (!index->malformed().empty()) {
      return Status::Internal("billing: " + index->malformed().front() +
                              " has a rental source that names no charge");
    }
    for (const auto& [source, d] : index->by_source()) {
      auto it = charges.find(d.charge_id);
      if (it == charges.end() || it->second.rental_id != d.rental_id) {
        return Status::Internal("billing: " + d.number + " bills " + source +
                                ", a charge that does not exist");
      }
    }
  }
  return Status::Ok();
}

ChargeDocumentIndex MemoryChargeDocuments(const BillingState& billing, std::int64_t after_id) {
  ChargeDocumentIndex index;
  for (auto it = billing.documents.upper_bound(after_id); it != billing.documents.end(); ++it) {
    index.Add(it->second);
  }
  return index;
}

std::int64_t ChargesUnmatchedInMemoryThrough(const State& state,
                                             const ChargeDocumentIndex& memory) {
  const BillingState& b = *state.billing;
  if (b.archive == nullptr || b.documents_forgotten_through == 0) return 0;
  std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
  for (const auto& [source, d] : memory.by_source()) oldest = std::min(oldest, d.charge_id);
  return oldest == std::numeric_limits<std::int64_t>::max() ? oldest : oldest - 1;
}

AllDocumentsCheck CheckAllDocuments(const State& state) {
  AllDocumentsCheck out;
  DocumentRules rules;
  ChargeDocumentIndex index;
  // A broken rule does not stop the walk: the charges are still matched against every document.
  Status walked = ForEachDocument(*state.billing, [&](const Document& d) {
    index.Add(d);
    if (out.rules.ok()) out.rules = rules.Add(d);
    return Status::Ok();
  });
  if (!walked.ok()) {
    out.rules = out.charges = walked;
    return out;
  }
  if (out.rules.ok()) out.rules = rules.Finish();
  out.documents = rules.documents();
  if (state.rentals != nullptr) {
    out.charges = CheckChargeDocuments(state.rentals->fleet, {&index}, 0, &out.counts);
  }
  return out;
}

Status CheckBillingInvariants(const State& state) {
  AllDocumentsCheck all = CheckAllDocuments(state);
  GPUHUB_RETURN_IF_ERROR(all.rules);
  GPUHUB_RETURN_IF_ERROR(all.charges);
  return CheckBillingMemory(state);
}

}  // namespace gpuhub::engine
