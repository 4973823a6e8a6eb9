#include "engine/rentals.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/billing_checks.h"
#include "engine/engine_test_fixture.h"
#include "engine/limits.h"
#include "engine/notifications.h"
#include "engine/topups.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;
constexpr std::int64_t kDay = kMicrosPerDay;

rentals::FleetConfig Fleet() {
  rentals::FleetConfig c;
  c.regions = {"DFW-1", "IAD-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {{"H100 SXM", 1690 * kUsd, 475 * kUsd, false, {1, 2, 4, 8}, c.regions, true, 2000},
             {"A100 SXM", 990 * kUsd, 280 * kUsd, false, {1, 2, 4, 8}, c.regions, false, 1000}};
  return c;
}

class EngineRentalsTest : public EngineOnSqliteTest {
 protected:
  EngineRentalsTest() : EngineOnSqliteTest(1'800'000'000'000'000, "gpuhub_rentals") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      GPUHUB_ASSIGN_OR_RETURN(User c, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      // A buyer needs a billing country; US has no rate, so the figures here stay net.
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, c.id, {"US", "", "", ""}).status());
      return std::vector<std::int64_t>{c.id, a.id};
    });
    customer_ = ids[0];
    admin_ = ids[1];
  }
  void Open() {
    EngineOptions options;
    options.domains.rentals = Fleet();
    OpenEngine(options, AddRentalsTickHooks);
  }
  void Credit(std::int64_t micros) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, admin_, customer_, Currency::kUsd, micros, "test").status());
      return 0;
    });
  }
  rentals::Snapshot Records() {
    return Run<rentals::Snapshot>(
        [](Txn& txn) -> Result<rentals::Snapshot> { return txn.state.rentals->fleet.Records(); });
  }
  std::int64_t Wallet() { return UsdAvailable(customer_); }
  void CheckAll() {
    Run<int>([](Txn& txn) -> Result<int> {
      const auto& ledger = txn.state.wallets->ledger;
      GPUHUB_RETURN_IF_ERROR(ledger.CheckHistory());
      GPUHUB_RETURN_IF_ERROR(txn.state.rentals->fleet.CheckInvariants());
      GPUHUB_RETURN_IF_ERROR(txn.state.rentals->fleet.CheckSettlement(ledger));
      return 0;
    });
  }
  rentals::OrderSpec Spec(int count, rentals::Term term, bool auto_renew = true) {
    rentals::OrderSpec s;
    s.gpu = "H100 SXM";
    s.count = count;
    s.term = term;
    s.auto_renew = auto_renew;
    return s;
  }

  std::int64_t customer_ = 0, admin_ = 0;
};

TEST_F(EngineRentalsTest, RentalsAndTheirLifecycleSurviveRestartsExactlyOnce) {
  Run<rentals::Node>(
      [](Txn& txn) { return AddRentalNode(txn, {"H100 SXM", "DFW-1", 0, "dfw1-a", {}, {}}); });
  Credit(2 * 475 * kUsd);
  auto rental = Run<rentals::Rental>(
      [&](Txn& txn) { return OrderRental(txn, customer_, Spec(1, rentals::Term::kWeek, false)); });
  ASSERT_EQ(rental.state, rentals::RentalState::kActive);
  rentals::Snapshot before = Records();
  Open();
  rentals::Snapshot after = Records();
  EXPECT_EQ(before.nodes, after.nodes);
  EXPECT_EQ(before.rentals, after.rentals);
  EXPECT_EQ(before.events, after.events);
  EXPECT_EQ(before.charges, after.charges);
  CheckAll();

  Advance(6 * kDay);  // the renewal invoice at T - 24 h
  Open();
  after = Records();
  ASSERT_EQ(after.renewals.size(), 1u);
  EXPECT_EQ(after.renewals[0].status, rentals::RenewalStatus::kOpen);
  EXPECT_EQ(after.renewals[0].issued_at, rental.term_end - 24 * kMicrosPerHour);
  Advance(6 * kDay);  // stopped at T, not again after the restart
  Open();
  Advance(kMicrosPerHour);
  after = Records();
  int stopped = 0;
  for (const auto& e : after.events) stopped += e.kind == rentals::EventKind::kStopped;
  EXPECT_EQ(stopped, 1);
  ASSERT_EQ(after.rentals.size(), 1u);
  EXPECT_EQ(after.rentals[0].state, rentals::RentalState::kReleased);  // T + 72 h passed
  EXPECT_EQ(after.rentals[0].released_at, rental.term_end + 72 * kMicrosPerHour);
  auto notices = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
    return ListNotifications(txn.state, customer_, 0, 50);
  });
  std::vector<std::string> kinds;
  for (const auto& n : notices.items) kinds.push_back(n.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"rental.released", "rental.stopped",
                                             "rental.renewal_invoice", "rental.active"}));
  EXPECT_EQ(Wallet(), 475 * kUsd);
  CheckAll();
}

// Merchant of record for term rentals: the quote, the order and each renewal carry the buyer's
// tax (19% in Germany), each paid term gets a tax invoice in the command that charged it, and the
// refund of a term that never started gets a credit note (the money moves once, by the refund).
TEST_F(EngineRentalsTest, EachChargeHasItsTaxInvoiceAndARefundItsCreditNote) {
  Run<rentals::Node>(
      [](Txn& txn) { return AddRentalNode(txn, {"H100 SXM", "DFW-1", 0, "dfw1-a", {}, {}}); });
  Run<billing::BillingProfile>(
      [&](Txn& txn) { return SetBillingProfile(txn, customer_, {"DE", "", "", "Berlin"}); });
  Credit(2000 * kUsd);
  auto quote = Run<rentals::Quote>(
      [&](Txn& txn) { return QuoteRental(txn, customer_, Spec(1, rentals::Term::kWeek)); });
  ASSERT_EQ(quote.amount.lines.size(), 1u);
  EXPECT_EQ(quote.amount.lines[0].name, "VAT DE 19%");
  EXPECT_EQ(quote.amount.net_micros, 475 * kUsd);
  EXPECT_EQ(quote.amount.tax_micros, 90'250'000);
  EXPECT_EQ(quote.amount.gross_micros, 565'250'000);
  auto anonymous = Run<rentals::Quote>(
      [&](Txn& txn) { return QuoteRental(txn, 0, Spec(1, rentals::Term::kWeek)); });
  EXPECT_TRUE(anonymous.amount.lines.empty());

  auto rental = Run<rentals::Rental>(
      [&](Txn& txn) { return OrderRental(txn, customer_, Spec(1, rentals::Term::kWeek)); });
  EXPECT_EQ(Wallet(), 2000 * kUsd - 565'250'000);
  auto document = [&](const std::string& source) {
    return Run<billing::Document>(
        [&](Txn& txn) { return DocumentBySource(txn.state, source); });
  };
  billing::Document first = document("rental:" + std::to_string(rental.id) + ":charge:1");
  EXPECT_EQ(first.kind, billing::DocumentKind::kInvoice);
  EXPECT_EQ(first.net_micros, 475 * kUsd);
  EXPECT_EQ(first.tax_micros, 90'250'000);
  EXPECT_EQ(first.lines[0].rate_ppm, 190'000);
  EXPECT_EQ(first.tax_note, "VAT 19% (DE)");
  EXPECT_EQ(first.supply_from, rental.term_start);
  EXPECT_EQ(first.supply_until, rental.term_end);
  EXPECT_NE(first.lines[0].description.find("1 x H100 SXM in DFW-1, week term 1"),
            std::string::npos);

  Advance(4 * kDay);  // T - 72 h: auto-renew pays the second week, with its own invoice
  billing::Document second = document("rental:" + std::to_string(rental.id) + ":charge:2");
  EXPECT_EQ(second.gross_micros, 565'250'000);
  EXPECT_NE(second.number, first.number);
  EXPECT_EQ(Wallet(), 2000 * kUsd - 2 * 565'250'000);

  // An admin cannot credit the week that has not started: releasing refunds it (not twice).
  auto early = engine_->ExecuteSync<CreditNoteResult>([&](Txn& txn) {
    return IssueCreditNote(txn, admin_, second.number, std::nullopt, "goodwill");
  });
  EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition) << early.status().ToString();

  // Released early: the second week never started and is refunded, with a credit note.
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, rental.id); });
  EXPECT_EQ(Wallet(), 2000 * kUsd - 565'250'000);  // the money came back once
  auto docs = Run<std::vector<billing::Document>>(
      [&](Txn& txn) -> Result<std::vector<billing::Document>> {
        return ListDocuments(txn.state, customer_, 10);
      });
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].kind, billing::DocumentKind::kCreditNote);
  EXPECT_EQ(docs[0].corrects, second.number);
  EXPECT_EQ(docs[0].gross_micros, second.gross_micros);
  Open();
  Run<int>([](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(CheckBillingInvariants(txn.state));
    auto payable = txn.state.wallets->ledger.GetAccount(
        ledger::AccountKey::System(ledger::AccountKind::kTaxPayable, Currency::kUsd));
    if (!payable.ok() || payable->posted() != 90'250'000) {
      return Status::Internal("tax payable is not the one week's tax");
    }
    return 0;
  });
  CheckAll();

  // Without a billing country an order is refused, naming the field.
  auto stranger = Run<std::int64_t>([](Txn& txn) -> Result<std::int64_t> {
    GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, "nina", "h", kRoleCustomer));
    return u.id;
  });
  auto refused = engine_->ExecuteSync<rentals::Rental>(
      [&](Txn& txn) { return OrderRental(txn, stranger, Spec(1, rentals::Term::kWeek)); });
  EXPECT_EQ(refused.status().field(), "billing_country");
}

TEST_F(EngineRentalsTest, AShortWalletSaysWhatIsMissingAndWhichTopUpCoversIt) {
  Run<rentals::Node>(
      [](Txn& txn) { return AddRentalNode(txn, {"H100 SXM", "IAD-1", 0, "", {}, {}}); });
  Credit(100 * kUsd);
  auto order = engine_->ExecuteSync<rentals::Rental>(
      [&](Txn& txn) { return OrderRental(txn, customer_, Spec(8, rentals::Term::kMonth)); });
  EXPECT_EQ(order.status().code(), StatusCode::kInsufficientFunds);
  auto shortfall = [&](std::int64_t needed) {
    return Run<Shortfall>(
        [&](Txn& txn) { return ComputeShortfall(txn, customer_, Currency::kUsd, needed); });
  };
  Shortfall first = shortfall(12'168 * kUsd);
  EXPECT_EQ(first.shortfall_micros, 12'068 * kUsd);
  EXPECT_EQ(first.topup_micros, 12'068 * kUsd);
  EXPECT_FALSE(first.open_topup.has_value());
  // An open invoice of that amount is reused, not a second one opened.
  auto inv = Run<Invoice>([&](Txn& txn) {
    return CreateTopup(txn, customer_, Currency::kUsd, first.topup_micros);
  });
  Shortfall again = shortfall(12'168 * kUsd);
  ASSERT_TRUE(again.open_topup.has_value());
  EXPECT_EQ(again.open_topup->id, inv.id);
  // Under a cent short: the smallest top-up; beyond one top-up's limit: none, with a note.
  EXPECT_EQ(shortfall(100 * kUsd + 1).topup_micros, 1 * kUsd);
  Shortfall huge = shortfall(500'000 * kUsd);
  EXPECT_EQ(huge.topup_micros, 0);
  EXPECT_NE(huge.topup_note.find("several"), std::string::npos);
  Open();
  EXPECT_TRUE(Records().rentals.empty());
  EXPECT_EQ(Wallet(), 100 * kUsd);
  CheckAll();
}

TEST_F(EngineRentalsTest, WebhookDeliveriesAreQueuedClaimedRetriedAndCapped) {
  Run<AccountWebhook>([&](Txn& txn) {
    return SetWebhook(txn, customer_, "https://hooks.example.com/gpuhub?x=1", false);
  });
  Run<rentals::Node>(
      [](Txn& txn) { return AddRentalNode(txn, {"A100 SXM", "DFW-1", 0, "", {}, {}}); });
  Credit(280 * kUsd);
  rentals::OrderSpec spec = Spec(1, rentals::Term::kWeek);
  spec.gpu = "A100 SXM";
  Run<rentals::Rental>([&](Txn& txn) { return OrderRental(txn, customer_, spec); });
  auto jobs = Run<std::vector<DeliveryJob>>(
      [](Txn& txn) -> Result<std::vector<DeliveryJob>> { return ClaimDeliveries(txn, 10); });
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].url, "https://hooks.example.com/gpuhub?x=1");
  EXPECT_NE(jobs[0].body.find("\"type\":\"rental.active\""), std::string::npos) << jobs[0].body;
  EXPECT_EQ(jobs[0].secret.substr(0, 6), "whsec_");
  // Claimed: not handed out again while in flight.
  auto none = Run<std::vector<DeliveryJob>>(
      [](Txn& txn) -> Result<std::vector<DeliveryJob>> { return ClaimDeliveries(txn, 10); });
  EXPECT_TRUE(none.empty());
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(RecordDeliveryAttempt(txn, jobs[0].id, false, 503, "busy", false));
    return 0;
  });
  Open();  // the retry schedule survives a restart
  clock_.Advance(59 * kMicrosPerSecond);
  none = Run<std::vector<DeliveryJob>>(
      [](Txn& txn) -> Result<std::vector<DeliveryJob>> { return ClaimDeliveries(txn, 10); });
  EXPECT_TRUE(none.empty());
  clock_.Advance(kMicrosPerSecond);
  auto retry = Run<std::vector<DeliveryJob>>(
      [](Txn& txn) -> Result<std::vector<DeliveryJob>> { return ClaimDeliveries(txn, 10); });
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].attempt, 2);
  EXPECT_EQ(retry[0].body, jobs[0].body);  // the same bytes every time
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(RecordDeliveryAttempt(txn, retry[0].id, true, 200, "", false));
    return 0;
  });
  auto deliveries = Run<std::vector<WebhookDelivery>>(
      [&](Txn& txn) -> Result<std::vector<WebhookDelivery>> {
        return RecentDeliveries(txn.state, customer_, 10);
      });
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_EQ(deliveries[0].status, DeliveryStatus::kDelivered);
  EXPECT_EQ(deliveries[0].attempts, 2);

  // A changed URL: the pending deliveries go to the new one.
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, 1); });
  Run<AccountWebhook>([&](Txn& txn) {
    return SetWebhook(txn, customer_, "https://new.example.com/hook", false);
  });
  auto moved = Run<std::vector<DeliveryJob>>(
      [](Txn& txn) -> Result<std::vector<DeliveryJob>> { return ClaimDeliveries(txn, 10); });
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].url, "https://new.example.com/hook");
  EXPECT_NE(moved[0].body.find("rental.released"), std::string::npos);

  // URLs: http(s) only, no credentials, no fragment, a valid port.
  for (const char* bad : {"ftp://x.example", "https://user:pw@x.example/", "https://x.example/#f",
                          "https://x.example:0/", "https://x.example:99999/", "https:///path",
                          "https://exa mple.com", "javascript:alert(1)", ""}) {
    EXPECT_EQ(ValidateWebhookUrl(bad).status().field(), "url") << bad;
  }
  for (const char* good : {"http://127.0.0.1:9000/hook", "https://[::1]:8443/x", "https://a.b"}) {
    EXPECT_TRUE(ValidateWebhookUrl(good).ok()) << good;
  }
}

TEST_F(EngineRentalsTest, NotificationsKeepTheNewestPerAccountAndPageBack) {
  Run<int>([&](Txn& txn) -> Result<int> {
    for (std::size_t i = 0; i < kMaxNotificationsPerAccount + 7; ++i) {
      GPUHUB_RETURN_IF_ERROR(
          Notify(txn, {customer_, "test.kind", "test:" + std::to_string(i), "message", {}})
              .status());
    }
    return 0;
  });
  Open();
  auto page = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
    return ListNotifications(txn.state, customer_, 0, 200);
  });
  ASSERT_EQ(page.items.size(), 200u);
  EXPECT_EQ(page.items[0].subject, "test:" + std::to_string(kMaxNotificationsPerAccount + 6));
  std::size_t total = 0;
  std::int64_t before = 0;
  do {
    auto p = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
      return ListNotifications(txn.state, customer_, before, 200);
    });
    total += p.items.size();
    before = p.next_before;
  } while (before != 0);
  EXPECT_EQ(total, kMaxNotificationsPerAccount);
  auto other = Run<NotificationPage>(
      [&](Txn& txn) -> Result<NotificationPage> { return ListNotifications(txn.state, admin_, 0, 50); });
  EXPECT_TRUE(other.items.empty());
}

}  // namespace
}  // namespace gpuhub::engine
