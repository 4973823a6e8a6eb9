// Top-ups paid through BTCPay: every outcome of ApplyProcessorReport, and a simulation of
// thousands of random payment histories delivered reordered, duplicated and dropped, against a
// shadow model.
#include "engine/topups.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/engine_test_fixture.h"
#include "engine/limits.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

using State = ReportedPayment::State;

class TopupsTest : public EngineOnSqliteTest {
 protected:
  TopupsTest() : EngineOnSqliteTest(1'767'225'600'000'000, "gpuhub_topups") {}
  void SetUp() override {
    OpenEngine({}, AddTopupTickHooks);
    user_ = NewUser("buyer");
    admin_ = Run<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, "admin", "h", kRoleAdmin));
      return u.id;
    });
  }
  std::int64_t NewUser(const std::string& name) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, name, "h", kRoleCustomer));
      return u.id;
    });
  }
  Invoice Create(const std::string& btcpay_id, std::int64_t amount, std::int64_t user = 0) {
    ProcessorLink link{NewInvoiceId(), btcpay_id, "https://btcpay.test/i/" + btcpay_id, 0};
    return Run<Invoice>([&](Txn& txn) {
      return CreateTopup(txn, user ? user : user_, Currency::kEur, amount, &link);
    });
  }
  ReportOutcome Report(const ProcessorReport& r, const std::string& source = "test") {
    return Run<ReportOutcome>([&](Txn& txn) { return ApplyProcessorReport(txn, r, source); });
  }
  ledger::AccountBalance Wallet(std::int64_t user = 0) {
    return Run<ledger::AccountBalance>([&](Txn& txn) -> Result<ledger::AccountBalance> {
      GPUHUB_ASSIGN_OR_RETURN(auto w, txn.state.wallets->ledger.Wallets(user ? user : user_));
      return w[static_cast<int>(Currency::kEur)];
    });
  }
  static ProcessorReport R(const std::string& id, std::int64_t amount, const std::string& status,
                           const std::string& additional, std::vector<ReportedPayment> payments) {
    return {id, status, additional, Currency::kEur, amount, std::move(payments)};
  }
  std::int64_t user_ = 0;
  std::int64_t admin_ = 0;
};

TEST_F(TopupsTest, SettledCreditsEachPaymentOnceWhateverTheOrderAndRepeats) {
  Invoice inv = Create("B1", 100'000'000);
  ProcessorReport processing =
      R("B1", 100'000'000, "Processing", "None", {{"tx-0", "BTC-CHAIN", State::kProcessing, 100'000'000}});
  ProcessorReport settled =
      R("B1", 100'000'000, "Settled", "None", {{"tx-0", "BTC-CHAIN", State::kSettled, 100'000'000}});
  EXPECT_TRUE(Report(processing).changes.empty());  // seen, not confirmed: nothing yet
  EXPECT_EQ(Wallet().available(), 0);
  auto first = Report(settled);
  ASSERT_EQ(first.changes.size(), 1u);
  EXPECT_EQ(first.changes[0].transfer_id, "btcpay:" + inv.id + ":1");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Report(settled).changes.empty());
  EXPECT_TRUE(Report(processing).changes.empty());  // an old snapshot arriving late
  EXPECT_EQ(Wallet().available(), 100'000'000);
  OpenEngine({}, AddTopupTickHooks);  // across a restart too
  EXPECT_TRUE(Report(settled).changes.empty());
  EXPECT_EQ(Wallet().available(), 100'000'000);
  auto got = Run<Invoice>([&](Txn& txn) { return GetTopup(txn, user_, inv.id); });
  EXPECT_EQ(got.status, InvoiceStatus::kSettled);
  EXPECT_EQ(got.credited_micros, 100'000'000);
  ASSERT_EQ(got.payments.size(), 1u);
  EXPECT_EQ(got.payments[0].payment_id, "tx-0");
}

TEST_F(TopupsTest, PartialCreditsThePartOverCreditsAllLateStillCredits) {
  Create("P", 100'000'000);
  auto partial = Report(R("P", 100'000'000, "Expired", "PaidPartial",
                          {{"a", "BTC-CHAIN", State::kSettled, 40'000'000}}));
  EXPECT_EQ(partial.invoice.status, InvoiceStatus::kExpired);
  EXPECT_EQ(partial.invoice.additional_status, "PaidPartial");
  EXPECT_EQ(Wallet().available(), 40'000'000);
  // The rest arrives after expiry: BTCPay keeps the invoice Expired with PaidLate.
  Report(R("P", 100'000'000, "Expired", "PaidLate",
           {{"a", "BTC-CHAIN", State::kSettled, 40'000'000},
            {"b", "LTC-CHAIN", State::kSettled, 60'000'000}}));
  EXPECT_EQ(Wallet().available(), 100'000'000);

  Create("O", 50'000'000);
  Report(R("O", 50'000'000, "Settled", "PaidOver", {{"c", "XMR-CHAIN", State::kSettled, 57'310'000}}));
  EXPECT_EQ(Wallet().available(), 157'310'000);
}

TEST_F(TopupsTest, ASettledInvoiceShortOnlyByRoundingIsCreditedItsAmount) {
  Create("R", 100'000'000);
  auto out = Report(R("R", 100'000'000, "Settled", "None",
                      {{"a", "BTC-CHAIN", State::kSettled, 33'330'000},
                       {"b", "BTC-CHAIN", State::kSettled, 33'330'000},
                       {"c", "BTC-CHAIN", State::kSettled, 33'330'000}}));
  EXPECT_EQ(Wallet().available(), 99'990'000 + 10'000);  // 1 cent over 3 payments: made up
  ASSERT_EQ(out.changes.size(), 4u);
  EXPECT_EQ(out.changes[3].payment_id, "(rounding)");
  // More than rounding short (tolerance let BTCPay settle it underpaid): only what arrived.
  Create("S", 100'000'000);
  Report(R("S", 100'000'000, "Settled", "None", {{"d", "BTC-CHAIN", State::kSettled, 99'000'000}}));
  EXPECT_EQ(Wallet().available(), 100'000'000 + 99'000'000);
}

// A payment credited, then called Invalid by BTCPay: taken back when the wallet covers it;
// otherwise the wallet goes on hold (no purchase) until an admin debits it or writes it off.
TEST_F(TopupsTest, APaymentReversedAfterItWasCreditedIsDebitedBackOrHoldsTheWallet) {
  Invoice a = Create("RA", 50'000'000);
  Report(R("RA", 50'000'000, "Settled", "None", {{"pa", "BTC-CHAIN", State::kSettled, 50'000'000}}));
  EXPECT_EQ(Wallet().available(), 50'000'000);
  auto back = Report(R("RA", 50'000'000, "Invalid", "None", {{"pa", "BTC-CHAIN", State::kInvalid, 50'000'000}}));
  ASSERT_EQ(back.changes.size(), 1u);
  EXPECT_EQ(back.changes[0].state, PaymentCreditState::kReversed);
  EXPECT_EQ(back.reversed_after_credit, 1u);
  EXPECT_EQ(Wallet().available(), 0);
  EXPECT_EQ(back.invoice.credited_micros, 0);
  EXPECT_TRUE(Report(R("RA", 50'000'000, "Invalid", "None", {{"pa", "BTC-CHAIN", State::kInvalid, 50'000'000}}))
                  .changes.empty());  // once
  auto billing_of = [&] {
    return Run<AccountBilling>([&](Txn& txn) -> Result<AccountBilling> {
      const AccountBilling* b = FindAccountBilling(txn.state, user_);
      return b ? *b : AccountBilling{};
    });
  };
  EXPECT_TRUE(billing_of().wallet_hold.empty());

  // Credited 80, 60 spent (an admin moves it out, as a purchase would), then reversed: pending.
  Invoice b = Create("RB", 80'000'000);
  Report(R("RB", 80'000'000, "Settled", "None", {{"pb", "BTC-CHAIN", State::kSettled, 80'000'000}}));
  Run<int>([&](Txn& txn) -> Result<int> {
    ledger::TransferRequest spend;
    spend.id = "spent";
    spend.debit = ledger::AccountKey::Wallet(user_, Currency::kEur);
    spend.credit = ledger::AccountKey::System(ledger::AccountKind::kPlatformRevenue, Currency::kEur);
    spend.amount_micros = 60'000'000;
    spend.code = "test";
    spend.timestamp = txn.now;
    auto r = txn.state.wallets->ledger.ApplyBatch(std::vector<ledger::TransferRequest>{spend});
    if (!r.ok()) return r.status();
    WriteTransfers(txn, r.transfers);
    return 0;
  });
  auto pending = Report(R("RB", 80'000'000, "Invalid", "None", {{"pb", "BTC-CHAIN", State::kInvalid, 80'000'000}}));
  ASSERT_EQ(pending.changes.size(), 1u);
  EXPECT_EQ(pending.changes[0].state, PaymentCreditState::kReversalPending);
  EXPECT_EQ(Wallet().available(), 20'000'000);  // nothing taken: it could not all be
  EXPECT_NE(billing_of().wallet_hold.find("reversed by the payment processor"), std::string::npos);
  auto listed = Run<std::vector<HeldPayment>>([&](Txn& txn) -> Result<std::vector<HeldPayment>> {
    return ListHeldPayments(txn, 10);
  });
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].payment.state, PaymentCreditState::kReversalPending);
  OpenEngine({}, AddTopupTickHooks);  // the pending reversal and the hold survive a restart
  EXPECT_FALSE(billing_of().wallet_hold.empty());
  auto refused = engine_->ExecuteSync<InvoicePayment>(
      [&](Txn& txn) { return DecideReversal(txn, admin_, b.id, 1, /*debit=*/true, "try"); });
  EXPECT_EQ(refused.status().code(), StatusCode::kInsufficientFunds);
  auto held_release = engine_->ExecuteSync<InvoicePayment>(
      [&](Txn& txn) { return DecideHeldPayment(txn, admin_, b.id, 1, true, "x"); });
  EXPECT_EQ(held_release.status().code(), StatusCode::kFailedPrecondition);
  auto written = Run<InvoicePayment>(
      [&](Txn& txn) { return DecideReversal(txn, admin_, b.id, 1, /*debit=*/false, "goodwill"); });
  EXPECT_EQ(written.state, PaymentCreditState::kWrittenOff);
  EXPECT_TRUE(billing_of().wallet_hold.empty());
  EXPECT_EQ(Wallet().available(), 20'000'000);
  (void)a;
  Run<int>([](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(txn.state.wallets->ledger.CheckInvariants());
    return 0;
  });
}

TEST_F(TopupsTest, InvalidHoldsForAnAdminWhoReleasesOrRefuses) {
  Invoice inv = Create("I", 100'000'000);
  auto out = Report(R("I", 100'000'000, "Invalid", "None",
                      {{"a", "BTC-CHAIN", State::kProcessing, 70'000'000},
                       {"b", "BTC-CHAIN", State::kSettled, 30'000'000},
                       {"c", "BTC-CHAIN", State::kInvalid, 5'000'000}}));
  ASSERT_EQ(out.changes.size(), 2u);  // the unaccounted payment is not money that arrived
  EXPECT_EQ(out.invoice.held_micros, 100'000'000);
  ledger::AccountBalance w = Wallet();
  EXPECT_EQ(w.available(), 0);
  EXPECT_EQ(w.credits_pending, 100'000'000);
  auto held = Run<std::vector<HeldPayment>>(
      [](Txn& txn) -> Result<std::vector<HeldPayment>> { return ListHeldPayments(txn, 10); });
  ASSERT_EQ(held.size(), 2u);
  auto released = Run<InvoicePayment>(
      [&](Txn& txn) { return DecideHeldPayment(txn, admin_, inv.id, 2, true, "confirmed on chain"); });
  EXPECT_EQ(released.state, PaymentCreditState::kReleased);
  auto refused = Run<InvoicePayment>(
      [&](Txn& txn) { return DecideHeldPayment(txn, admin_, inv.id, 1, false, "double spent"); });
  EXPECT_EQ(refused.state, PaymentCreditState::kRefused);
  auto again = engine_->ExecuteSync<InvoicePayment>(
      [&](Txn& txn) { return DecideHeldPayment(txn, admin_, inv.id, 1, true, "oops"); });
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Wallet().available(), 30'000'000);
  EXPECT_EQ(Wallet().credits_pending, 0);
  // A later report changes nothing that was decided.
  Report(R("I", 100'000'000, "Invalid", "None", {{"a", "BTC-CHAIN", State::kSettled, 70'000'000}}));
  EXPECT_EQ(Wallet().available(), 30'000'000);
}

TEST_F(TopupsTest, MarkedSettledHoldsWhatNoPaymentCovers) {
  Create("M", 100'000'000);
  auto out = Report(R("M", 100'000'000, "Settled", "Marked",
                      {{"a", "BTC-CHAIN", State::kSettled, 20'000'000}}));
  EXPECT_EQ(Wallet().available(), 20'000'000);
  EXPECT_EQ(out.invoice.held_micros, 80'000'000);
}

TEST_F(TopupsTest, UnknownInvoicesAndContradictionsChangeNothing) {
  auto unknown = engine_->ExecuteSync<ReportOutcome>([](Txn& txn) {
    return ApplyProcessorReport(txn, R("nope", 1, "Settled", "None", {}), "t");
  });
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  Create("C", 100'000'000);
  auto other = engine_->ExecuteSync<ReportOutcome>([](Txn& txn) {
    return ApplyProcessorReport(
        txn, R("C", 1'000'000'000, "Settled", "None", {{"a", "m", State::kSettled, 1'000'000'000}}),
        "t");
  });
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Wallet().available(), 0);
  // Demo events never touch a BTCPay invoice.
  auto demo = engine_->ExecuteSync<PaymentEventOutcome>([](Txn& txn) {
    std::string id = txn.state.topups->by_processor_id.at("C");
    return ApplyPaymentEvent(txn, "InvoiceSettled", id);
  });
  EXPECT_EQ(demo.status().code(), StatusCode::kNotFound);
}

// The simulation: for each invoice a random BTCPay history (payments that appear, confirm or
// fail; the invoice expiring, settling, going invalid, marked by hand), delivered as snapshots
// that are duplicated, reordered and dropped, always ending with the true state (the
// reconciliation pass). After every delivery the ledger balances and the invoice's figures equal
// its entries; at the end the credits equal what arrived, each payment exactly once.
TEST_F(TopupsTest, SimulationOfRandomPaymentHistoriesAgainstAShadowModel) {
  std::mt19937_64 rng(20260101);
  auto coin = [&](int percent) { return static_cast<int>(rng() % 100) < percent; };
  constexpr int kInvoices = 2000;
  std::int64_t expected_available = 0, expected_pending = 0;
  std::int64_t user = NewUser("sim0");
  for (int n = 0; n < kInvoices; ++n) {
    if (n % 15 == 14) user = NewUser("sim" + std::to_string(n));
    const std::int64_t amount = (10 + static_cast<std::int64_t>(rng() % 5000)) * 100'000;
    const std::string id = "S" + std::to_string(n);
    Create(id, amount, user);
    // The truth, step by step.
    ProcessorReport truth = R(id, amount, "New", "None", {});
    std::vector<ProcessorReport> history{truth};
    int steps = 1 + static_cast<int>(rng() % 10);
    for (int s = 0; s < steps; ++s) {
      int what = static_cast<int>(rng() % 6);
      if (what <= 1 && truth.status != "Invalid" && truth.payments.size() < 6) {
        std::int64_t fiat = static_cast<std::int64_t>(rng() % (amount / 10'000 + 2)) * 10'000;
        truth.payments.push_back({"p" + std::to_string(truth.payments.size()), "BTC-CHAIN",
                                  State::kProcessing, fiat});
      } else if (what == 2 && !truth.payments.empty()) {
        auto& p = truth.payments[rng() % truth.payments.size()];
        if (p.state == State::kProcessing) {
          p.state = coin(85) ? State::kSettled : State::kInvalid;
        } else if (p.state == State::kSettled && coin(10)) {
          p.state = State::kInvalid;  // reversed after it settled (a double spend, a reorg)
        }
      } else if (what == 3 && truth.status == "New") {
        truth.status = "Expired";
      } else if (what == 4 && (truth.status == "New" || truth.status == "Processing")) {
        truth.status = coin(80) ? "Settled" : "Invalid";
      } else if (what == 5 && truth.status == "Invalid" && coin(30)) {
        truth.status = "Settled";
        truth.additional_status = "Marked";
      }
      std::int64_t arrived = 0;
      for (const auto& p : truth.payments) arrived += p.state != State::kInvalid ? p.fiat_micros : 0;
      if (truth.additional_status != "Marked") {
        truth.additional_status = arrived == 0                ? "None"
                                  : arrived < amount          ? (truth.status == "Expired" ? "PaidLate" : "PaidPartial")
                                  : arrived > amount          ? "PaidOver"
                                                              : "None";
      }
      history.push_back(truth);
    }
    // Deliveries: each snapshot dropped, sent once or twice, in a shuffled order; then the truth.
    std::vector<ProcessorReport> sent;
    for (const auto& h : history) {
      if (coin(30)) continue;
      sent.push_back(h);
      if (coin(20)) sent.push_back(h);
    }
    std::shuffle(sent.begin(), sent.end(), rng);
    sent.push_back(truth);
    sent.push_back(truth);
    auto check = Run<int>([&](Txn& txn) -> Result<int> {
      const ledger::Ledger& ledger = txn.state.wallets->ledger;
      for (const auto& report : sent) {
        auto r = ApplyProcessorReport(txn, report, "sim");
        if (!r.ok()) return r.status();
        const Invoice& inv = r->invoice;
        std::int64_t credited = 0, held = 0;
        std::set<std::string> ids;
        for (const auto& e : inv.payments) {
          if (!ids.insert(e.payment_id).second) return Status::Internal("payment twice: " + e.payment_id);
          if (e.state == PaymentCreditState::kCredited || e.state == PaymentCreditState::kReleased) credited += e.fiat_micros;
          if (e.state == PaymentCreditState::kHeld) held += e.fiat_micros;
        }
        if (credited != inv.credited_micros || held != inv.held_micros) {
          return Status::Internal("invoice figures differ from its entries");
        }
        GPUHUB_RETURN_IF_ERROR(ledger.CheckInvariants());
      }
      // The shadow model of the end state.
      const Invoice& inv = txn.state.topups->invoices.at(txn.state.topups->by_processor_id.at(id));
      std::map<std::string, const InvoicePayment*> entries;
      for (const auto& e : inv.payments) entries[e.payment_id] = &e;
      std::int64_t settled_fiat = 0;
      bool ever_invalid = false;
      for (const auto& h : history) ever_invalid = ever_invalid || h.status == "Invalid";
      for (const auto& p : truth.payments) {
        auto e = entries.find(p.id);
        if (p.state == State::kSettled) {
          settled_fiat += p.fiat_micros;
          if (e == entries.end()) return Status::Internal("settled payment not credited: " + p.id);
          if (e->second->fiat_micros != p.fiat_micros) return Status::Internal("wrong amount");
        }
        if (p.state == State::kProcessing && e != entries.end() &&
            e->second->state != PaymentCreditState::kHeld) {
          return Status::Internal("an unconfirmed payment was credited: " + p.id);
        }
        if (p.state == State::kInvalid && e != entries.end() &&
            (e->second->state == PaymentCreditState::kCredited ||
             e->second->state == PaymentCreditState::kReleased)) {
          return Status::Internal("a payment BTCPay reversed kept its credit: " + p.id);
        }
      }
      std::int64_t rounding = entries.count("(rounding)") ? entries.at("(rounding)")->fiat_micros : 0;
      if (!ever_invalid) {
        if (inv.credited_micros != settled_fiat + rounding || inv.held_micros != 0) {
          return Status::Internal("credited " + FormatMicros(inv.credited_micros) + " but " +
                                  FormatMicros(settled_fiat) + " arrived");
        }
        if (truth.status == "Settled" && truth.additional_status == "None" && settled_fiat < amount &&
            amount - settled_fiat <= 6 * kRoundingMicrosPerPayment &&
            inv.credited_micros != amount) {
          return Status::Internal("a settled invoice short by rounding was not made whole");
        }
      }
      if (inv.status != InvoiceStatus::kNew && truth.status == "New") return Status::Internal("status");
      expected_available += inv.credited_micros;
      expected_pending += inv.held_micros;
      return 0;
    });
    ASSERT_FALSE(HasFailure()) << "invoice " << n;
    (void)check;
    if (n % 700 == 699) OpenEngine({}, AddTopupTickHooks);  // the store says the same
  }
  std::int64_t available = 0, pending = 0;
  Run<int>([&](Txn& txn) -> Result<int> {
    for (const auto& a : txn.state.wallets->ledger.Accounts()) {
      if (a.key.kind != ledger::AccountKind::kCustomerWallet) continue;
      available += a.available();
      pending += a.credits_pending;
    }
    return txn.state.wallets->ledger.CheckHistory().ok() ? 0 : 1;
  });
  EXPECT_EQ(available, expected_available);
  EXPECT_EQ(pending, expected_pending);
  std::size_t reversed = Run<std::size_t>([](Txn& txn) -> Result<std::size_t> {
    std::size_t n = 0;
    for (const auto& [id, inv] : txn.state.topups->invoices) {
      for (const auto& p : inv.payments) n += p.state == PaymentCreditState::kReversed ? 1 : 0;
    }
    return n;
  });
  EXPECT_GT(reversed, 5u) << "the simulation reversed only " << reversed << " credited payments";
}

}  // namespace
}  // namespace gpuhub::engine
