// Rental charges and their tax documents (engine/rental_billing.h, engine/billing_checks.h):
// issue 25's report replayed to the micro-unit, the billing check catching documents that do not
// match their charges, and a seeded simulation of orders, renewals, extra NVMe, releases and
// time that runs every billing check after each step.
#include "engine/rental_billing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/billing_checks.h"
#include "engine/engine_test_fixture.h"
#include "engine/invariants.h"
#include "engine/rentals.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr std::int64_t kDay = kMicrosPerDay;

rentals::FleetConfig Fleet() {
  rentals::FleetConfig c;
  c.regions = {"FRA-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {{"RTX 3090", 230 * kUsd, 65 * kUsd, false, {1, 2, 4, 8}, c.regions, false, 1000}};
  return c;
}

rentals::OrderSpec Week(int count = 1, bool auto_renew = false) {
  rentals::OrderSpec s;
  s.gpu = "RTX 3090";
  s.count = count;
  s.term = rentals::Term::kWeek;
  s.auto_renew = auto_renew;
  return s;
}

class RentalBillingTest : public EngineOnSqliteTest {
 protected:
  RentalBillingTest() : EngineOnSqliteTest(1'780'000'000'000'000, "gpuhub_rental_billing") {}

  void Open(std::size_t documents_in_memory = kTaxDocumentsInMemory) {
    EngineOptions options;
    options.domains.rentals = Fleet();
    options.domains.tax_documents_in_memory = documents_in_memory;
    OpenEngine(options, AddRentalsTickHooks);
  }
  std::int64_t AddUser(const std::string& name, const billing::ProfileInput& profile) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, name, "h", kRoleCustomer));
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, u.id, profile).status());
      return u.id;
    });
  }
  void Credit(std::int64_t user, std::int64_t micros) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, admin_, user, Currency::kUsd, micros, "test").status());
      return 0;
    });
  }
  std::vector<rentals::Charge> Charges() {
    return Run<std::vector<rentals::Charge>>([](Txn& txn) -> Result<std::vector<rentals::Charge>> {
      return txn.state.rentals->fleet.Records().charges;
    });
  }
  billing::Document DocumentOf(const rentals::Charge& c) {
    return Run<billing::Document>(
        [&](Txn& txn) { return DocumentBySource(txn.state, ChargeSource(c)); });
  }
  // Every billing check there is: the full one, and the invariants report as the writer's
  // endpoint runs it (memory only) and as `gpuhub admin verify` does (everything).
  void CheckBilling(const std::string& when) {
    Run<int>([&](Txn& txn) -> Result<int> {
      Status full = CheckBillingInvariants(txn.state);
      EXPECT_TRUE(full.ok()) << when << ": " << full.ToString();
      for (bool replay : {false, true}) {
        InvariantReport report = CheckStateInvariants(txn.state, 0, replay);
        EXPECT_TRUE(report.ok()) << when << " (replay " << replay << "): " << report.ToString();
        std::set<std::string> names;
        for (const auto& c : report.checks) names.insert(c.name);
        EXPECT_TRUE(names.count("billing.memory") && names.count("billing.charge_documents"))
            << when << ": " << report.ToString();
        if (replay) {
          EXPECT_TRUE(names.count("billing.documents")) << report.ToString();
        }
      }
      return 0;
    });
  }

  void SetUp() override {
    Open();
    admin_ = Run<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      return a.id;
    });
  }

  // The report's rental: a buyer in Germany orders an RTX 3090 week on a node at `node_host`,
  // pays the renewal, adds 1 TB of extra NVMe a day in, and releases it.
  struct Reported {
    std::int64_t buyer;
    rentals::Rental rental;
  };
  Reported RentRenewAddNvmeAndRelease(const std::string& node_host) {
    const std::int64_t buyer = AddUser("berta", {"DE", "", "", "Berlin"});
    Run<rentals::Node>([&](Txn& txn) {
      return AddRentalNode(txn, {"RTX 3090", "FRA-1", 0, node_host, {}, {}});
    });
    Credit(buyer, 500 * kUsd);
    auto rental = Run<rentals::Rental>([&](Txn& txn) { return OrderRental(txn, buyer, Week()); });
    Run<rentals::Renewal>(
        [&](Txn& txn) { return PayRentalRenewal(txn, buyer, rental.id, std::nullopt); });
    Advance(kDay);
    Run<rentals::Rental>([&](Txn& txn) { return AddRentalExtraNvme(txn, buyer, rental.id, 1); });
    Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, buyer, rental.id); });
    return {buyer, rental};
  }

  std::int64_t admin_ = 0;
};

// Issue 25: a buyer in Germany rents an RTX 3090 for a week, pays the renewal, adds 1 TB of extra
// NVMe a day in, then releases. The renewal (77.35) and the next week's NVMe (2.499) are refunded:
// two refunds, two credit notes, each against the invoice of the charge it refunds, each with that
// charge's net, tax and gross. Before the fix one note of 2.499 against the NVMe invoice was hung
// on the 77.35 refund and the renewal invoice was never credited.
TEST_F(RentalBillingTest, ReleasingARenewedRentalWithExtraNvmeCreditsEachChargeItsOwnInvoice) {
  auto [buyer, rental] = RentRenewAddNvmeAndRelease("fra1-a");

  // Paid: week 1 (77.35) and six sevenths of week 1's TB (1.80 net + 19% = 2.142); week 2 and
  // its TB came back.
  EXPECT_EQ(UsdAvailable(buyer), 500 * kUsd - 77'350'000 - 2'142'000);
  std::vector<rentals::Charge> charges = Charges();
  ASSERT_EQ(charges.size(), 6u);
  using K = rentals::ChargeKind;
  std::vector<K> kinds;
  for (const auto& c : charges) kinds.push_back(c.kind);
  EXPECT_EQ(kinds, (std::vector<K>{K::kPurchase, K::kRenewal, K::kExtraNvme, K::kExtraNvme,
                                   K::kRefund, K::kRefund}));
  const rentals::Charge& renewal = charges[1];
  const rentals::Charge& nvme_week2 = charges[3];
  EXPECT_EQ(charges[2].amount.gross_micros, 2'142'000);
  EXPECT_EQ(charges[4].refund_of, renewal.id);
  EXPECT_EQ(charges[5].refund_of, nvme_week2.id);

  struct Expected {
    const rentals::Charge& refund;
    const rentals::Charge& paid;
    std::int64_t net, tax, gross;
  };
  for (const Expected& e : {Expected{charges[4], renewal, 65'000'000, 12'350'000, 77'350'000},
                            Expected{charges[5], nvme_week2, 2'100'000, 399'000, 2'499'000}}) {
    billing::Document invoice = DocumentOf(e.paid);
    billing::Document note = DocumentOf(e.refund);
    SCOPED_TRACE("refund " + std::to_string(e.refund.id));
    EXPECT_EQ(invoice.kind, billing::DocumentKind::kInvoice);
    EXPECT_EQ(invoice.net_micros, e.net);
    EXPECT_EQ(invoice.tax_micros, e.tax);
    EXPECT_EQ(invoice.gross_micros, e.gross);
    EXPECT_EQ(note.kind, billing::DocumentKind::kCreditNote);
    EXPECT_EQ(note.corrects, invoice.number);
    EXPECT_EQ(note.net_micros, e.net);
    EXPECT_EQ(note.tax_micros, e.tax);
    EXPECT_EQ(note.gross_micros, e.gross);
    EXPECT_EQ(note.user_id, buyer);
    EXPECT_EQ(e.refund.amount.gross_micros, e.gross);
  }
  auto docs = Run<std::vector<billing::Document>>(
      [&](Txn& txn) { return ListDocuments(txn.state, buyer, 20); });
  ASSERT_EQ(docs.size(), 6u);  // four invoices, two credit notes
  EXPECT_EQ(
      std::count_if(docs.begin(), docs.end(),
                    [](const auto& d) { return d.kind == billing::DocumentKind::kCreditNote; }),
      2);
  EXPECT_NE(DocumentOf(nvme_week2).title.find("Extra NVMe"), std::string::npos);
  CheckBilling("after the release");
  Open();  // the same from the store
  CheckBilling("after a restart");
}

// The check names what the report saw: a refund's credit note that corrects another invoice than
// the one of the charge it refunds, and a charge without its document.
TEST_F(RentalBillingTest, TheBillingCheckNamesACreditNoteOnTheWrongInvoiceAndAMissingDocument) {
  auto [buyer, rental] = RentRenewAddNvmeAndRelease("");
  std::vector<rentals::Charge> charges = Charges();
  ASSERT_EQ(charges.size(), 6u);
  const std::string purchase_invoice = DocumentOf(charges[0]).number;
  const std::string nvme_note = DocumentOf(charges[5]).number;

  // The NVMe refund's note pointed at the purchase invoice (within its amounts: the documents'
  // own rules still hold, only the match with the charges catches it).
  Run<int>([&](Txn& txn) -> Result<int> {
    BillingState& b = *txn.state.billing;
    billing::Document& note = b.documents.at(b.by_number.at(nvme_note));
    const std::string was = note.corrects;
    note.corrects = purchase_invoice;
    AllDocumentsCheck all = CheckAllDocuments(txn.state);
    EXPECT_TRUE(all.rules.ok()) << all.rules.ToString();
    EXPECT_EQ(all.charges.code(), StatusCode::kInternal);
    EXPECT_NE(all.charges.message().find("charge 6 (refund): " + nvme_note + " corrects " +
                                         purchase_invoice + ", not " + was),
              std::string::npos)
        << all.charges.message();
    InvariantReport report = CheckStateInvariants(txn.state, 0, /*replay_stored_history=*/false);
    EXPECT_FALSE(report.ok()) << report.ToString();
    note.corrects = was;
    return 0;
  });
  // The renewal's invoice never issued: a check that sees every other document names it.
  Run<int>([&](Txn& txn) -> Result<int> {
    const BillingState& b = *txn.state.billing;
    const std::int64_t id = b.by_source.at(ChargeSource(charges[1]));
    ChargeDocumentIndex without;
    for (const auto& [doc_id, d] : b.documents) {
      if (doc_id != id) without.Add(d);
    }
    Status missing = CheckChargeDocuments(txn.state.rentals->fleet, {&without}, 0, nullptr);
    EXPECT_NE(missing.message().find("rental 1 charge 2 (renewal): has no invoice"),
              std::string::npos)
        << missing.ToString();
    // A check that may not read the store counts the older ones instead of failing.
    ChargeDocumentCounts counts;
    EXPECT_TRUE(CheckChargeDocuments(txn.state.rentals->fleet, {&without}, 2, &counts).ok());
    EXPECT_EQ(counts.unmatched, 2);  // the renewal, and the refund whose invoice it is
    EXPECT_EQ(counts.charges, 4);
    return 0;
  });
  CheckBilling("restored");
}

// Seeded: random orders (weeks and months, 1-4 cards, with and without extra NVMe), renewals paid
// by hand and by auto-renew, extra NVMe added mid-term, releases by the customer and by the hold's
// end, and time, for buyers in Germany, France and the US. Memory keeps only a handful of
// documents, so the writer's check (memory only) must stay honest about the forgotten ones. Every
// billing check runs after every step.
TEST_F(RentalBillingTest, SimulatedOrdersRenewalsExtrasAndReleasesKeepEveryChargeDocumented) {
  Open(/*documents_in_memory=*/6);
  std::vector<std::int64_t> buyers = {AddUser("dora", {"DE", "", "", "Berlin"}),
                                      AddUser("fred", {"FR", "", "", "Paris"}),
                                      AddUser("uma", {"US", "", "", "Austin"})};
  for (int n = 0; n < 3; ++n) {
    Run<rentals::Node>([](Txn& txn) {
      return AddRentalNode(txn, {"RTX 3090", "FRA-1", 0, "", {}, {}});
    });
  }
  for (std::int64_t b : buyers) Credit(b, 3'000 * kUsd);
  std::mt19937_64 rng(25);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  std::map<std::string, int> done;
  auto live = [&](std::int64_t buyer) {
    return Run<std::vector<rentals::Rental>>([&](Txn& txn) -> Result<std::vector<rentals::Rental>> {
      std::vector<rentals::Rental> out;
      for (const auto& r : txn.state.rentals->fleet.ListRentals(buyer, 100)) {
        if (r.state != rentals::RentalState::kReleased) out.push_back(r);
      }
      return out;
    });
  };
  for (int step = 0; step < 240; ++step) {
    const std::int64_t buyer = buyers[pick(buyers.size())];
    const std::vector<rentals::Rental> rentals_of = live(buyer);
    const std::size_t action = pick(11);
    std::string what;
    Status s;
    if (action < 3 || rentals_of.empty()) {
      rentals::OrderSpec spec = Week(1 << static_cast<int>(pick(3)), pick(2) == 0);
      if (pick(3) == 0) spec.term = rentals::Term::kMonth;
      spec.extra_nvme_tb = static_cast<std::int64_t>(pick(3));
      what = "order";
      s = engine_
              ->ExecuteSync<rentals::Rental>(
                  [&](Txn& txn) { return OrderRental(txn, buyer, spec); })
              .status();
    } else {
      const rentals::Rental& target = rentals_of[pick(rentals_of.size())];
      if (action < 5) {
        what = "renew";
        s = engine_
                ->ExecuteSync<rentals::Renewal>(
                    [&](Txn& txn) { return PayRentalRenewal(txn, buyer, target.id, std::nullopt); })
                .status();
      } else if (action < 7) {
        what = "extra_nvme";
        const auto tb = static_cast<std::int64_t>(1 + pick(2));
        s = engine_
                ->ExecuteSync<rentals::Rental>(
                    [&](Txn& txn) { return AddRentalExtraNvme(txn, buyer, target.id, tb); })
                .status();
      } else if (action < 8) {
        what = "release";
        s = engine_
                ->ExecuteSync<rentals::Rental>(
                    [&](Txn& txn) { return ReleaseRental(txn, buyer, target.id); })
                .status();
      } else if (action < 10) {
        what = "advance";
        Advance(static_cast<std::int64_t>(1 + pick(72)) * kMicrosPerHour);
      } else {
        // The report's order on one rental: renew, add NVMe, release (each step can be refused).
        what = "renew_extra_release";
        s = engine_
                ->ExecuteSync<rentals::Renewal>(
                    [&](Txn& txn) { return PayRentalRenewal(txn, buyer, target.id, std::nullopt); })
                .status();
        EXPECT_NE(s.code(), StatusCode::kInternal) << s.ToString();
        s = engine_
                ->ExecuteSync<rentals::Rental>(
                    [&](Txn& txn) { return AddRentalExtraNvme(txn, buyer, target.id, 1); })
                .status();
        EXPECT_NE(s.code(), StatusCode::kInternal) << s.ToString();
        s = engine_
                ->ExecuteSync<rentals::Rental>(
                    [&](Txn& txn) { return ReleaseRental(txn, buyer, target.id); })
                .status();
      }
    }
    // Refusals are the customer's (no stock, no money, wrong state), never the books'.
    EXPECT_NE(s.code(), StatusCode::kInternal) << what << ": " << s.ToString();
    if (s.ok()) ++done[what];
    if (pick(12) == 0) Credit(buyer, 400 * kUsd);
    CheckBilling("step " + std::to_string(step) + " (" + what + ")");
    if (HasFailure()) break;
  }
  // The run covered what it is about, and every charge has exactly one document.
  std::vector<rentals::Charge> charges = Charges();
  std::int64_t refunds = 0, refunded_nvme = 0;
  for (const auto& c : charges) {
    if (c.kind != rentals::ChargeKind::kRefund) continue;
    ++refunds;
    for (const auto& p : charges) {
      refunded_nvme += p.id == c.refund_of && p.kind == rentals::ChargeKind::kExtraNvme;
    }
  }
  std::printf(
      "rental billing simulation: %d orders, %d renewals, %d extra NVMe, %d releases, "
      "%zu charges (%lld refunds, %lld of extra NVMe)\n",
      done["order"], done["renew"], done["extra_nvme"], done["release"], charges.size(),
      static_cast<long long>(refunds), static_cast<long long>(refunded_nvme));
  EXPECT_GT(done["order"], 5);
  EXPECT_GT(done["renew"], 5);
  EXPECT_GT(done["extra_nvme"], 5);
  EXPECT_GT(done["release"], 3);
  EXPECT_GT(refunds, 2);
  EXPECT_GT(refunded_nvme, 0);
  auto counts = Run<AllDocumentsCheck>(
      [](Txn& txn) -> Result<AllDocumentsCheck> { return CheckAllDocuments(txn.state); });
  EXPECT_EQ(counts.counts.charges, static_cast<std::int64_t>(charges.size()));
  EXPECT_EQ(counts.counts.unmatched, 0);
  // Memory forgot most documents, and the writer's check said so instead of failing.
  auto report = Run<InvariantReport>([](Txn& txn) -> Result<InvariantReport> {
    return CheckStateInvariants(txn.state, 0, /*replay_stored_history=*/false);
  });
  EXPECT_TRUE(report.ok()) << report.ToString();
  bool rules_noted = false, charges_noted = false;
  for (const auto& s : report.skipped) {
    rules_noted = rules_noted || s.rfind("billing.documents:", 0) == 0;
    charges_noted = charges_noted || s.rfind("billing.charge_documents: ", 0) == 0;
  }
  EXPECT_TRUE(rules_noted && charges_noted) << report.ToString();
  // Honest both ways: the newest charge's document missing from memory is a failure, not a
  // charge "in the store only".
  Run<int>([](Txn& txn) -> Result<int> {
    const BillingState& b = *txn.state.billing;
    const auto& charges = txn.state.rentals->fleet.Charges();
    const std::string newest = ChargeSource(charges.rbegin()->second);
    ChargeDocumentIndex memory;
    for (const auto& [id, d] : b.documents) {
      if (d.source != newest) memory.Add(d);
    }
    Status s = CheckChargeDocuments(txn.state.rentals->fleet, {&memory},
                                    ChargesUnmatchedInMemoryThrough(txn.state, memory), nullptr);
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_NE(s.message().find("charge " + std::to_string(charges.rbegin()->first) + " ("),
              std::string::npos)
        << s.ToString();
    return 0;
  });
  Open(6);
  CheckBilling("after a restart");
}

}  // namespace
}  // namespace gpuhub::engine
