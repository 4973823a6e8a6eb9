#include "engine/billing.h"
#include "engine/billing_checks.h"

#include <gtest/gtest.h>

#include <random>

#include "billing/countries.h"
#include "billing/limits.h"
#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/engine_test_fixture.h"
#include "engine/market.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
using billing::Document;
using billing::DocumentKind;
using ledger::AccountKey;
using ledger::AccountKind;

TimestampMicros At(const char* text) { return ParseTimestamp(text).value(); }

class EngineBillingTest : public EngineOnSqliteTest {
 protected:
  EngineBillingTest() : EngineOnSqliteTest(At("2026-11-30T20:00:00Z"), "gpuhub_billing") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      std::vector<std::int64_t> out;
      for (const char* name : {"paula", "carl", "dora", "admin"}) {
        GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, name, "h",
                                                   name[0] == 'p'   ? kRoleProvider
                                                   : name[0] == 'a' ? kRoleAdmin
                                                                    : kRoleCustomer));
        out.push_back(u.id);
      }
      return out;
    });
    provider_ = ids[0];
    carl_ = ids[1];
    dora_ = ids[2];
    admin_ = ids[3];
  }
  void Open() {
    EngineOptions options;
    // Billing of lease-hours on machines without an agent: a simulated host runs them.
    options.domains.agents->simulated_hosts = true;
    options.domains.market.gpus = {"H100 SXM", "A100 SXM"};
    options.domains.market.regions = {"DFW-1", "IAD-1"};
    options.domains.seller = {"gpuhub Inc.", "1 Main St\nDover, DE 19901", "US", ""};
    // A window of two documents: all but the newest are read back from the store, so every test
    // here also checks the archive's answers against memory's.
    options.domains.tax_documents_in_memory = 2;
    options.domains.tax_document_lines_in_memory = 6;
    OpenEngine(options, [](Engine& e) {
      AddMarketTickHooks(e);
      AddBillingTickHooks(e);
    });
  }
  void AdvanceTo(const char* time) { Advance(At(time) - clock_.NowMicros()); }
  void Fund(std::int64_t user, std::int64_t micros) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, admin_, user, Currency::kUsd, micros, "test").status());
      return 0;
    });
  }
  void Profile(std::int64_t user, billing::ProfileInput in) {
    Run<billing::BillingProfile>([&](Txn& txn) { return SetBillingProfile(txn, user, in); });
  }
  void Offer(std::int64_t price_micros, int gpus = 8) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_ASSIGN_OR_RETURN(
          auto m, AddMachine(txn, provider_, {"H100 SXM", gpus, "IAD-1", 64, 512, 2000}));
      GPUHUB_RETURN_IF_ERROR(
          PlaceAsk(txn, provider_, {m.id, price_micros, 1, txn.now + 90 * kMicrosPerDay})
              .status());
      return 0;
    });
  }
  Result<market::BidResult> Buy(std::int64_t user, int gpus) {
    return engine_->ExecuteSync<market::BidResult>([&](Txn& txn) {
      market::BidSpec spec;
      spec.gpu = "H100 SXM";
      spec.gpus = gpus;
      spec.is_market = true;
      return PlaceBid(txn, user, spec);
    });
  }
  std::int64_t Wallet(std::int64_t user) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      return txn.state.wallets->ledger.GetAccount(AccountKey::Wallet(user, Currency::kUsd))
          ->available();
    });
  }
  std::int64_t System(AccountKind kind) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      auto a = txn.state.wallets->ledger.GetAccount(AccountKey::System(kind, Currency::kUsd));
      return a.ok() ? a->posted() : 0;
    });
  }
  std::vector<Document> Documents(std::int64_t user) {
    return Run<std::vector<Document>>([&](Txn& txn) -> Result<std::vector<Document>> {
      // The list (totals), each then read whole (with its lines) by number.
      GPUHUB_ASSIGN_OR_RETURN(auto listed, ListDocuments(txn.state, user, 100));
      std::vector<Document> whole;
      for (const Document& d : listed) {
        GPUHUB_ASSIGN_OR_RETURN(Document full, GetDocument(txn.state, user, d.number));
        if (full.id != d.id || full.gross_micros != d.gross_micros) {
          return Status::Internal("the list and the document disagree on " + d.number);
        }
        whole.push_back(std::move(full));
      }
      return whole;
    });
  }
  void CheckAll() {
    Run<int>([](Txn& txn) -> Result<int> {
      const auto& ledger = txn.state.wallets->ledger;
      GPUHUB_RETURN_IF_ERROR(ledger.CheckInvariants());
      GPUHUB_RETURN_IF_ERROR(txn.state.market->exchange.CheckSettlement(ledger));
      GPUHUB_RETURN_IF_ERROR(CheckBillingInvariants(txn.state));
      return 0;
    });
  }

  std::int64_t provider_ = 0, carl_ = 0, dora_ = 0, admin_ = 0;
};

TEST_F(EngineBillingTest, ABidNeedsABillingCountryAndAWalletNotOnHold) {
  Fund(carl_, 100 * kUsd);
  Offer(2'500'000);
  auto refused = Buy(carl_, 1);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().field(), "billing_country");
  auto bad = engine_->ExecuteSync<billing::BillingProfile>([&](Txn& txn) {
    return SetBillingProfile(txn, carl_, {"DE", "Carl GmbH", "DE12", ""});
  });
  EXPECT_EQ(bad.status().field(), "vat_id");
  Profile(carl_, {"de", "", "", ""});
  Run<int>([&](Txn& txn) -> Result<int> {
    PlaceWalletHold(txn, carl_, "a payment was reversed");
    return 0;
  });
  EXPECT_EQ(Buy(carl_, 1).status().code(), StatusCode::kFailedPrecondition);
  Open();  // the hold survives a restart
  EXPECT_EQ(Buy(carl_, 1).status().code(), StatusCode::kFailedPrecondition);
  Run<int>([&](Txn& txn) -> Result<int> {
    LiftWalletHold(txn, carl_);
    return 0;
  });
  ASSERT_TRUE(Buy(carl_, 1).ok());
  // 2.50 net + 19% German VAT.
  EXPECT_EQ(Wallet(carl_), 100 * kUsd - 2'975'000);
  EXPECT_EQ(System(AccountKind::kTaxPayable), 475'000);
  CheckAll();
}

// Spot usage is invoiced once a month: the tick after the month ends issues one statement per
// account with every lease-hour of it, numbered in the year it is issued.
TEST_F(EngineBillingTest, MonthlyStatementsHoldEveryLeaseHourOfTheirMonth) {
  Profile(carl_, {"DE", "", "", "Unter den Linden 1\n10117 Berlin"});
  Profile(dora_, {"FR", "Dora SARL", "FR 12 345678901", "1 rue de Rivoli\nParis"});
  Fund(carl_, 5000 * kUsd);
  Fund(dora_, 2000 * kUsd);
  Offer(2'500'000);
  ASSERT_TRUE(Buy(carl_, 2).ok());  // 5.00/h from 20:00
  Run<int>([&](Txn& txn) -> Result<int> {
    NoteEvidence(txn, carl_, {"203.0.113.9", "de"});
    return 0;
  });
  Advance(2 * kMicrosPerHour);     // 22:00: hour 3
  ASSERT_TRUE(Buy(dora_, 1).ok());  // reverse charged: a French business, a US seller
  EXPECT_TRUE(Documents(carl_).empty());
  AdvanceTo("2026-11-30T23:59:59Z");
  EXPECT_TRUE(Documents(carl_).empty());  // November has not ended
  Advance(kMicrosPerSecond);              // 2026-12-01T00:00:00Z
  auto carl = Documents(carl_);
  ASSERT_EQ(carl.size(), 1u);
  const Document& nov = carl[0];
  EXPECT_EQ(nov.number, "2026-000001");
  EXPECT_EQ(nov.kind, DocumentKind::kInvoice);
  EXPECT_EQ(nov.issued_at, At("2026-12-01T00:00:00Z"));
  EXPECT_EQ(nov.supply_from, At("2026-11-01T00:00:00Z"));
  EXPECT_EQ(nov.supply_until, At("2026-12-01T00:00:00Z"));
  ASSERT_EQ(nov.lines.size(), 1u);
  EXPECT_EQ(nov.lines[0].quantity, 4);  // 20:00, 21:00, 22:00, 23:00
  EXPECT_EQ(nov.net_micros, 20 * kUsd);
  EXPECT_EQ(nov.tax_micros, 3'800'000);
  EXPECT_EQ(nov.gross_micros, 23'800'000);
  EXPECT_EQ(nov.tax_note, "VAT 19% (DE)");
  EXPECT_EQ(nov.seller.name, "gpuhub Inc.");
  EXPECT_EQ(nov.buyer.name, "carl");
  EXPECT_EQ(nov.buyer.address, "Unter den Linden 1\n10117 Berlin");
  EXPECT_EQ(nov.evidence.billing_country, "DE");
  EXPECT_EQ(nov.evidence.ip_address, "203.0.113.9");
  EXPECT_EQ(nov.evidence.ip_country, "DE");
  auto dora = Documents(dora_);
  ASSERT_EQ(dora.size(), 1u);
  EXPECT_EQ(dora[0].number, "2026-000002");
  EXPECT_TRUE(dora[0].reverse_charge);
  EXPECT_EQ(dora[0].tax_micros, 0);
  EXPECT_EQ(dora[0].lines[0].quantity, 2);
  EXPECT_EQ(dora[0].buyer.vat_id, "FR12345678901");
  EXPECT_NE(dora[0].tax_note.find("Art. 196"), std::string::npos);
  // What the wallets paid is what the statements say, and December's first hour (charged in
  // advance at midnight) belongs to the next one.
  EXPECT_EQ(Wallet(carl_), 5000 * kUsd - nov.gross_micros - 5'950'000);
  EXPECT_EQ(Wallet(dora_), 2000 * kUsd - dora[0].gross_micros - 2'500'000);
  EXPECT_EQ(System(AccountKind::kTaxPayable), 3'800'000 + 950'000);

  // December: a rate change mid-month splits carl's line; the statement is the first of 2027.
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(
        ChangeTaxRate(txn, admin_, "de", 210'000, At("2026-12-10T00:00:00Z"), "test").status());
    return 0;
  });
  Open();  // restarts keep the usage, the rate change and the numbers
  AdvanceTo("2027-01-01T00:00:00Z");
  carl = Documents(carl_);
  ASSERT_EQ(carl.size(), 2u);
  const Document& dec = carl[0];  // newest first
  EXPECT_EQ(dec.number, "2027-000001");
  ASSERT_EQ(dec.lines.size(), 2u);
  EXPECT_EQ(dec.lines[0].quantity, 9 * 24);
  EXPECT_EQ(dec.lines[0].rate_ppm, 190'000);
  EXPECT_EQ(dec.lines[1].quantity, 22 * 24);
  EXPECT_EQ(dec.lines[1].rate_ppm, 210'000);
  EXPECT_EQ(dec.tax_micros, 9 * 24 * 950'000 + 22 * 24 * 1'050'000);
  EXPECT_EQ(dec.tax_note, "VAT 19% (DE); VAT 21% (DE)");
  EXPECT_EQ(Documents(dora_)[0].number, "2027-000002");
  EXPECT_EQ(Wallet(carl_), 5000 * kUsd - nov.gross_micros - dec.gross_micros - 6'050'000);
  CheckAll();
  Open();
  EXPECT_EQ(Documents(carl_), carl);  // the same documents come back from the database
  CheckAll();
}

// A month with more usage rows than one document may hold (a customer running thousands of short
// leases) is stated in parts, each a numbered invoice, instead of failing at every tick forever.
TEST_F(EngineBillingTest, AMonthWithMoreLeasesThanOneInvoiceHoldsIsStatedInParts) {
  Profile(carl_, {"DE", "", "", "Berlin"});
  const std::int64_t leases = static_cast<std::int64_t>(billing::kMaxLinesPerDocument) + 3;
  Run<int>([&](Txn& txn) -> Result<int> {
    std::vector<market::HourCharge> hours;
    for (std::int64_t lease = 1; lease <= leases; ++lease) {
      hours.push_back({lease, carl_, 1, At("2026-11-30T20:00:00Z"), "H100 SXM", 1, 2'000'000,
                       2'000'000, 190'000, 380'000});
    }
    RecordSpotHours(txn, hours);
    return 0;
  });
  AdvanceTo("2026-12-01T00:00:00Z");
  auto docs = Documents(carl_);
  ASSERT_EQ(docs.size(), 2u);
  const Document& second = docs[0];  // newest first
  const Document& first = docs[1];
  EXPECT_EQ(first.number, "2026-000001");
  EXPECT_EQ(second.number, "2026-000002");
  EXPECT_EQ(first.lines.size(), billing::kMaxLinesPerDocument);
  EXPECT_EQ(second.lines.size(), 3u);
  EXPECT_EQ(first.title, "Spot GPU usage, November 2026 (part 1 of 2)");
  EXPECT_EQ(second.title, "Spot GPU usage, November 2026 (part 2 of 2)");
  EXPECT_EQ(first.net_micros + second.net_micros, leases * 2'000'000);
  EXPECT_EQ(first.tax_micros + second.tax_micros, leases * 380'000);
  // Stated once: the next ticks issue nothing more, and a restart finds both.
  Advance(kMicrosPerHour);
  EXPECT_EQ(Documents(carl_).size(), 2u);
  Open();
  EXPECT_EQ(Documents(carl_), docs);
}

TEST_F(EngineBillingTest, CreditNotesGiveBackAndNeverExceedTheInvoice) {
  Profile(carl_, {"DE", "", "", ""});
  Fund(carl_, 100 * kUsd);
  Offer(2'500'000);
  ASSERT_TRUE(Buy(carl_, 2).ok());
  AdvanceTo("2026-12-01T00:00:00Z");
  Document inv = Documents(carl_).at(0);
  auto stop = Run<market::Lease>([&](Txn& txn) { return StopLease(txn, carl_, 1); });
  const std::int64_t before = Wallet(carl_);

  auto partial = Run<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, inv.number, 5 * kUsd, "one hour was down");
  });
  EXPECT_EQ(partial.note.number, "CN-2026-000001");
  EXPECT_EQ(partial.note.corrects, inv.number);
  EXPECT_EQ(partial.note.net_micros, 5 * kUsd);
  EXPECT_EQ(partial.note.tax_micros, 950'000);
  EXPECT_EQ(Wallet(carl_), before + 5'950'000);
  auto over = engine_->ExecuteSync<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, inv.number, 16 * kUsd, "too much");
  });
  EXPECT_EQ(over.status().field(), "amount");
  auto unknown = engine_->ExecuteSync<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, "2026-000099", std::nullopt, "x");
  });
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  auto rest = Run<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, inv.number, std::nullopt, "the rest");
  });
  EXPECT_EQ(rest.note.number, "CN-2026-000002");
  EXPECT_EQ(partial.note.gross_micros + rest.note.gross_micros, inv.gross_micros);
  EXPECT_EQ(Wallet(carl_), before + inv.gross_micros);
  auto again = engine_->ExecuteSync<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, inv.number, std::nullopt, "again");
  });
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  // Another user's documents are not found; an admin (user 0) finds them.
  auto theirs = Run<int>([&](Txn& txn) -> Result<int> {
    EXPECT_EQ(GetDocument(txn.state, dora_, inv.number).status().code(), StatusCode::kNotFound);
    EXPECT_TRUE(GetDocument(txn.state, 0, inv.number).ok());
    EXPECT_EQ(GetDocument(txn.state, carl_, "CN-2026-000002")->kind, DocumentKind::kCreditNote);
    return 0;
  });
  (void)theirs;
  (void)stop;
  Open();
  EXPECT_EQ(Documents(carl_).size(), 3u);
  CheckAll();
}

TEST_F(EngineBillingTest, TaxRateChangesNeverReachIntoThePastAndSurviveRestarts) {
  auto past = engine_->ExecuteSync<billing::RatePeriod>([&](Txn& txn) {
    return ChangeTaxRate(txn, admin_, "DE", 200'000, txn.now - 1, "");
  });
  EXPECT_EQ(past.status().field(), "valid_from");
  auto bad_country = engine_->ExecuteSync<billing::RatePeriod>([&](Txn& txn) {
    return ChangeTaxRate(txn, admin_, "ZZ", 200'000, txn.now, "");
  });
  EXPECT_EQ(bad_country.status().field(), "country");
  auto bad_rate = engine_->ExecuteSync<billing::RatePeriod>([&](Txn& txn) {
    return ChangeTaxRate(txn, admin_, "DE", 1'000'001, txn.now, "");
  });
  EXPECT_EQ(bad_rate.status().field(), "rate");
  auto close_past = engine_->ExecuteSync<billing::RatePeriod>([&](Txn& txn) {
    return CloseTaxRate(txn, admin_, "DE", txn.now - 1, "");
  });
  EXPECT_EQ(close_past.status().field(), "valid_until");
  Run<billing::RatePeriod>([&](Txn& txn) {
    return ChangeTaxRate(txn, admin_, "US", 80'000, At("2027-01-01T00:00:00Z"), "sales tax");
  });
  Run<billing::RatePeriod>(
      [&](Txn& txn) { return CloseTaxRate(txn, admin_, "CH", At("2027-02-01T00:00:00Z"), ""); });
  Open();
  Profile(carl_, {"US", "", "", ""});
  Profile(dora_, {"CH", "", "", ""});
  Run<int>([&](Txn& txn) -> Result<int> {
    EXPECT_EQ(DecideTaxFor(txn.state, carl_, At("2026-12-31T23:00:00Z")).rate_ppm, 0);
    EXPECT_EQ(DecideTaxFor(txn.state, carl_, At("2027-01-01T00:00:00Z")).rate_ppm, 80'000);
    EXPECT_EQ(DecideTaxFor(txn.state, dora_, At("2027-01-31T00:00:00Z")).rate_ppm, 81'000);
    EXPECT_EQ(DecideTaxFor(txn.state, dora_, At("2027-02-01T00:00:00Z")).rate_ppm, 0);
    EXPECT_EQ(txn.state.billing->rate_changes.size(), 2u);
    return 0;
  });
}

// The issue's "must hold": random purchases, stops, refunds (credit notes), rate and profile
// changes, top-ups and restarts over months; after every step the ledger balances, every tax
// document is valid, numbers are gapless and unique per series and year, and the tax the wallets
// paid is exactly what the statements of the closed months say (plus what is still open).
TEST_F(EngineBillingTest, RandomMonthsKeepTheLedgerAndTheNumbersWhole) {
  std::mt19937_64 rng(13);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const char* countries[] = {"DE", "FR", "US", "GB", "CH", "NO", "FI", "UA", "JP"};
  std::vector<std::int64_t> customers = {carl_, dora_};
  Run<int>([&](Txn& txn) -> Result<int> {
    for (int i = 0; i < 6; ++i) {
      GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, "sim" + std::to_string(i), "h",
                                                 kRoleCustomer));
      customers.push_back(u.id);
    }
    return 0;
  });
  for (auto c : customers) {
    Profile(c, {countries[pick(0, 8)], "", "", ""});
    Fund(c, pick(50, 400) * kUsd);
  }
  for (int i = 0; i < 3; ++i) Offer((2000 + pick(0, 20) * 50) * 1000, 8);
  std::int64_t credit_notes = 0, statements_seen = 0, restarts = 0;
  const int steps = 400;
  for (int step = 0; step < steps; ++step) {
    int op = pick(1, 100);
    std::int64_t who = customers[static_cast<std::size_t>(pick(0, 7))];
    if (op <= 30) {
      (void)Buy(who, pick(1, 3));  // may find no GPUs or no money: both refuse cleanly
    } else if (op <= 38) {
      Run<int>([&](Txn& txn) -> Result<int> {
        auto leases = txn.state.market->exchange.ListCustomerLeases(who, 10);
        for (const auto& l : leases) {
          if (l.status == market::LeaseStatus::kActive) {
            return StopLease(txn, who, l.id).ok() ? 1 : 0;
          }
        }
        return 0;
      });
    } else if (op <= 48) {
      Fund(who, pick(10, 200) * kUsd);
    } else if (op <= 53) {
      if (pick(0, 3) == 0) {
        Profile(who, {"FR", "Biz " + std::to_string(who), "FR12345678901", "Paris"});
      } else {
        Profile(who, {countries[pick(0, 8)], "", "", ""});
      }
    } else if (op <= 56) {
      const char* c = countries[pick(0, 6)];
      std::int64_t rate = pick(0, 27) * 10'000;
      Run<billing::RatePeriod>([&](Txn& txn) {
        return ChangeTaxRate(txn, admin_, c, rate, txn.now + pick(0, 48) * kMicrosPerHour, "sim");
      });
    } else if (op <= 66) {
      // A refund: a credit note, in full or in part, of a random invoice.
      auto docs = Documents(who);
      std::vector<Document> invoices;
      for (const auto& d : docs) {
        if (d.kind == DocumentKind::kInvoice) invoices.push_back(d);
      }
      if (!invoices.empty()) {
        const Document& inv = invoices[static_cast<std::size_t>(pick(0, invoices.size() - 1))];
        std::optional<std::int64_t> part;
        if (pick(0, 1) == 0) part = std::int64_t{pick(1, 5000)} * 1000;
        auto r = engine_->ExecuteSync<CreditNoteResult>([&](Txn& txn) {
          return IssueCreditNote(txn, admin_, inv.number, part, "sim refund");
        });
        if (r.ok()) {
          ++credit_notes;
        } else {
          ASSERT_TRUE(r.status().code() == StatusCode::kInvalidArgument ||
                      r.status().code() == StatusCode::kFailedPrecondition)
              << r.status().ToString();
        }
      }
    } else if (op <= 70) {
      Open();
      ++restarts;
    } else {
      Advance(pick(1, 100) < 10 ? pick(5, 40) * kMicrosPerDay : pick(1, 30) * kMicrosPerHour);
    }
    if (op <= 30 && pick(0, 5) == 0) Offer((2000 + pick(0, 20) * 50) * 1000, pick(1, 8));

    // Invariants, after every step.
    Run<int>([&](Txn& txn) -> Result<int> {
      const auto& ledger = txn.state.wallets->ledger;
      GPUHUB_RETURN_IF_ERROR(ledger.CheckInvariants());
      GPUHUB_RETURN_IF_ERROR(txn.state.market->exchange.CheckSettlement(ledger));
      GPUHUB_RETURN_IF_ERROR(CheckBillingInvariants(txn.state));
      // Tax payable = tax legs of lease-hours - tax given back by credit notes; statements and
      // open usage together hold exactly the lease-hours' tax.
      std::int64_t hour_tax = 0, refunded_tax = 0, hours = 0;
      for (const auto& t : ledger.Transfers()) {
        if (t.code == "lease_tax") hour_tax += t.amount_micros;
        if (t.code == "credit_note" && t.debit.kind == AccountKind::kTaxPayable) {
          refunded_tax += t.amount_micros;
        }
      }
      auto payable = ledger.GetAccount(AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd));
      std::int64_t payable_posted = payable.ok() ? payable->posted() : 0;
      if (payable_posted != hour_tax - refunded_tax) {
        return Status::Internal("tax payable " + FormatMicros(payable_posted) + " != hours " +
                                FormatMicros(hour_tax) + " - refunds " +
                                FormatMicros(refunded_tax));
      }
      std::int64_t documented = 0;
      std::int64_t documents = 0;
      Status walked = ForEachDocument(*txn.state.billing, [&](const billing::Document& d) {
        ++documents;
        if (d.kind == DocumentKind::kInvoice) {
          documented += d.tax_micros;
          for (const auto& l : d.lines) hours += l.quantity;
        }
        return Status::Ok();
      });
      if (!walked.ok()) return walked;
      for (const auto& [key, rows] : txn.state.billing->open_usage) {
        for (const auto& u : rows) {
          documented += u.tax_micros;
          hours += u.hours;
        }
      }
      if (documented != hour_tax) {
        return Status::Internal("statements + open usage hold " + FormatMicros(documented) +
                                " of tax, the hours " + FormatMicros(hour_tax));
      }
      // Every lease-hour ever sold (ended leases left memory: the providers' totals count them).
      const std::int64_t charged_hours = txn.state.market->exchange.lease_hours_sold();
      if (hours != charged_hours) {
        return Status::Internal(std::to_string(hours) + " lease-hours on statements, " +
                                std::to_string(charged_hours) + " charged");
      }
      statements_seen = documents;
      // Memory holds the window (2 here) and the store the rest.
      if (txn.state.billing->documents.size() > 2) {
        return Status::Internal(std::to_string(txn.state.billing->documents.size()) +
                                " documents in memory, the window is 2");
      }
      return 0;
    });
    if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) {
      FAIL() << "step " << step << " op " << op;
    }
  }
  std::printf("billing simulation: %d steps, %lld documents (%lld credit notes), %lld restarts\n",
              steps, static_cast<long long>(statements_seen),
              static_cast<long long>(credit_notes), static_cast<long long>(restarts));
  EXPECT_GT(statements_seen - credit_notes, 20);
  EXPECT_GT(credit_notes, 5);
}

}  // namespace
}  // namespace gpuhub::engine
