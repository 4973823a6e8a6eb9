#include "rentals/fleet.h"

#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "ledger/test_deposit.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;  // 2027-01-15T08:00:00Z
constexpr std::int64_t kHour = kMicrosPerHour;
constexpr std::int64_t kDay = kMicrosPerDay;
constexpr UserId kAlice = 10, kBob = 11;

std::int64_t Usd(std::int64_t units) { return units * 1'000'000; }

FleetConfig Config(Provisioning provisioning = Provisioning::kImmediate) {
  FleetConfig c;
  c.regions = {"DFW-1", "IAD-1", "PDX-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {
      {"H100 SXM", Usd(1690), Usd(475), false, {1, 2, 4, 8}, c.regions, true, 2000},
      {"A100 SXM", Usd(990), Usd(280), false, {1, 2, 4, 8}, c.regions, false, 1000},
      {"MI300X", Usd(1590), Usd(450), false, {1, 2, 4, 8}, {"DFW-1"}, true, 0},
      {"B200", Usd(3890), 1'099'120'000, true, {2, 4, 8}, c.regions, true, 0},
  };
  c.provisioning = provisioning;
  return c;
}

Result<TaxBlock> Untaxed(UserId, std::int64_t net, TimestampMicros) { return NoTax(net); }

class FleetTest : public ::testing::Test {
 protected:
  explicit FleetTest(Provisioning p = Provisioning::kImmediate) : fleet_(Config(p)) {}

  void TearDown() override { Check(); }

  void Check() {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckSettlement(ledger_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Fund(UserId user, std::int64_t micros, Currency c = Currency::kUsd) {
    ASSERT_TRUE(ledger::Deposit(ledger_, user, micros, c, "topup:" + std::to_string(++topups_), now_).ok());
  }
  std::int64_t Wallet(UserId u, Currency c = Currency::kUsd) {
    return ledger_.GetAccount(AccountKey::Wallet(u, c))->available();
  }
  std::int64_t Revenue() {
    return ledger_.GetAccount(AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd))
        ->posted();
  }

  NodeId AddNode(const char* gpu, const char* region, int cards = 0) {
    auto n = fleet_.AddNode({gpu, region, cards, "", std::nullopt, std::nullopt}, now_, &changes_);
    EXPECT_TRUE(n.ok()) << n.status().ToString();
    return n.ok() ? n->id : 0;
  }

  OrderSpec Spec(const char* gpu, int count, Term term, const char* region = "") {
    OrderSpec s;
    s.gpu = gpu;
    s.count = count;
    s.term = term;
    s.region = region;
    return s;
  }

  Result<Rental> Order(UserId u, const OrderSpec& spec) {
    return fleet_.Order(u, spec, ledger_, Untaxed, now_, &changes_);
  }

  void AdvanceTo(TimestampMicros t) {
    now_ = t;
    fleet_.AdvanceTo(ledger_, Untaxed, now_, &changes_);
    Check();
  }

  std::vector<EventKind> Kinds(RentalId id) {
    std::vector<EventKind> out;
    for (const auto& e : fleet_.History(id)) out.push_back(e.kind);
    return out;
  }
  const Event* Find(RentalId id, EventKind kind) {
    static Event found;
    for (const auto& e : fleet_.History(id)) {
      if (e.kind == kind) {
        found = e;
        return &found;
      }
    }
    return nullptr;
  }

  Fleet fleet_;
  ledger::Ledger ledger_;
  Changes changes_;
  TimestampMicros now_ = kStart;
  int topups_ = 0;
};

TEST_F(FleetTest, TheSeedFiguresComeOutExactly) {
  AddNode("H100 SXM", "DFW-1");
  AddNode("A100 SXM", "IAD-1");
  AddNode("MI300X", "DFW-1");
  auto h100 = fleet_.QuoteOrder(0, Spec("H100 SXM", 8, Term::kMonth), ledger_, Untaxed, now_);
  ASSERT_TRUE(h100.ok()) << h100.status().ToString();
  EXPECT_EQ(h100->amount.net_micros, Usd(12'168));
  EXPECT_EQ(h100->subtotal_micros, Usd(13'520));
  EXPECT_EQ(h100->discount_ppm, 100'000);
  EXPECT_EQ(h100->discount_micros, Usd(1'352));
  EXPECT_TRUE(h100->available);
  EXPECT_EQ(h100->region, "DFW-1");
  auto a100 = fleet_.QuoteOrder(0, Spec("a100-sxm", 2, Term::kWeek), ledger_, Untaxed, now_);
  ASSERT_TRUE(a100.ok());
  EXPECT_EQ(a100->amount.net_micros, Usd(532));
  EXPECT_EQ(a100->gpu, "A100 SXM");
  auto mi = fleet_.QuoteOrder(0, Spec("MI300X", 8, Term::kMonth, "DFW-1"), ledger_, Untaxed, now_);
  ASSERT_TRUE(mi.ok());
  EXPECT_EQ(mi->amount.net_micros, Usd(11'448));
  EXPECT_EQ(mi->amount.gross_micros, Usd(11'448));
  EXPECT_EQ(mi->term_end - mi->term_start, 30 * kDay);
  // A derived weekly price is marked.
  auto b200 = fleet_.QuoteOrder(0, Spec("B200", 2, Term::kWeek), ledger_, Untaxed, now_);
  ASSERT_TRUE(b200.ok());
  EXPECT_TRUE(b200->list_derived);
  EXPECT_EQ(b200->amount.net_micros, 2'088'328'000);  // 1,099.12 x 2 x 0.95
}

TEST_F(FleetTest, AQuoteSaysWhyNotAndBadInputNamesTheField) {
  AddNode("H100 SXM", "DFW-1");
  auto b200 = fleet_.QuoteOrder(0, Spec("B200", 1, Term::kMonth), ledger_, Untaxed, now_);
  ASSERT_TRUE(b200.ok());
  EXPECT_FALSE(b200->available);
  EXPECT_EQ(b200->reason_code, "count_not_allowed");
  EXPECT_EQ(b200->reason_field, "count");
  EXPECT_NE(b200->reason.find("2, 4 or 8"), std::string::npos) << b200->reason;
  auto order = Order(kAlice, Spec("B200", 1, Term::kMonth));
  EXPECT_EQ(order.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(order.status().field(), "count");

  auto three = fleet_.QuoteOrder(0, Spec("H100 SXM", 3, Term::kMonth), ledger_, Untaxed, now_);
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(three.status().field(), "count");
  auto card = fleet_.QuoteOrder(0, Spec("H999", 1, Term::kMonth), ledger_, Untaxed, now_);
  EXPECT_EQ(card.status().field(), "gpu");
  EXPECT_NE(card.status().message().find("H100 SXM"), std::string::npos);
  auto region =
      fleet_.QuoteOrder(0, Spec("H100 SXM", 1, Term::kMonth, "MARS-1"), ledger_, Untaxed, now_);
  EXPECT_EQ(region.status().field(), "region");
  auto mi = fleet_.QuoteOrder(0, Spec("MI300X", 8, Term::kMonth, "iad-1"), ledger_, Untaxed, now_);
  ASSERT_TRUE(mi.ok());
  EXPECT_EQ(mi->reason_code, "not_in_region");
  OrderSpec fp8 = Spec("A100 SXM", 1, Term::kWeek);
  fp8.require_fp8 = true;
  auto a100 = fleet_.QuoteOrder(0, fp8, ledger_, Untaxed, now_);
  ASSERT_TRUE(a100.ok());
  EXPECT_EQ(a100->reason_code, "needs_fp8");
  auto none = fleet_.QuoteOrder(0, Spec("H100 SXM", 8, Term::kMonth, "IAD-1"), ledger_, Untaxed,
                                now_);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->reason_code, "no_stock");
  EXPECT_EQ(none->reason_field, "region");
  ASSERT_EQ(none->stock.size(), 3u);
  EXPECT_EQ(none->stock[0].region, "DFW-1");
  EXPECT_EQ(none->stock[0].sets, 1);
  OrderSpec eur = Spec("H100 SXM", 1, Term::kMonth);
  eur.currency = Currency::kEur;
  auto fx = fleet_.QuoteOrder(0, eur, ledger_, Untaxed, now_);
  ASSERT_TRUE(fx.ok());
  EXPECT_EQ(fx->reason_code, "no_fx_rate");
  Fund(kAlice, Usd(20'000));
  auto refused = Order(kAlice, Spec("H100 SXM", 8, Term::kMonth, "IAD-1"));
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Wallet(kAlice), Usd(20'000));  // nothing moved
}

TEST_F(FleetTest, AnOrderPaysTheTermInOneBatchAndTakesItsCardsOnOneNode) {
  NodeId dfw = AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(600));
  auto r = Order(kAlice, Spec("A100 SXM", 2, Term::kWeek));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->state, RentalState::kActive);
  EXPECT_EQ(r->node_id, dfw);
  EXPECT_EQ(r->card_mask, 0b11u);
  EXPECT_EQ(r->term_start, now_);
  EXPECT_EQ(r->term_end, now_ + 7 * kDay);
  EXPECT_EQ(r->instance.nvme_gb, 2000);
  EXPECT_EQ(Wallet(kAlice), Usd(68));
  EXPECT_EQ(Revenue(), Usd(532));
  auto t = ledger_.FindTransfer("rental:1:p1:revenue");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->amount_micros, Usd(532));
  ASSERT_EQ(changes_.charges.size(), 1u);
  EXPECT_EQ(changes_.charges[0].kind, ChargeKind::kPurchase);
  EXPECT_EQ(changes_.charges[0].period_start, now_);
  EXPECT_EQ(changes_.charges[0].amount.net_micros, Usd(532));
  EXPECT_EQ(fleet_.RentedCards(dfw), 0b11u);
  auto stock = fleet_.Stock();
  EXPECT_EQ(stock[1].regions[0].cards_free, 6);
  EXPECT_EQ(stock[1].regions[0].Sets(8), 0);
  // Too little money: insufficient_funds and nothing changes.
  auto poor = Order(kBob, Spec("A100 SXM", 1, Term::kMonth));
  EXPECT_EQ(poor.status().code(), StatusCode::kInsufficientFunds);
  EXPECT_NE(poor.status().message().find("990.00 USD"), std::string::npos)
      << poor.status().message();
  EXPECT_EQ(fleet_.live_rental_count(), 1u);
}

TEST_F(FleetTest, UnpaidRenewalInvoicedStoppedHeldThenPaidResumesFromTheOldEnd) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(1690));
  OrderSpec spec = Spec("H100 SXM", 1, Term::kMonth);
  spec.auto_renew = false;
  auto r = Order(kAlice, spec);
  ASSERT_TRUE(r.ok());
  const TimestampMicros t = r->term_end;
  EXPECT_EQ(fleet_.Next(*r).what, "renewal_invoice");
  EXPECT_EQ(fleet_.Next(*r).at, t - 24 * kHour);
  AdvanceTo(t - 24 * kHour - 1);
  EXPECT_EQ(fleet_.FindRenewal(r->id, 2), nullptr);
  changes_.Clear();
  AdvanceTo(t - 24 * kHour);
  const Renewal* invoice = fleet_.FindRenewal(r->id, 2);
  ASSERT_NE(invoice, nullptr);
  EXPECT_EQ(invoice->status, RenewalStatus::kOpen);
  EXPECT_EQ(invoice->issued_at, t - 24 * kHour);
  EXPECT_EQ(invoice->amount.gross_micros, Usd(1690));
  ASSERT_EQ(changes_.notices.size(), 1u);
  EXPECT_EQ(changes_.notices[0].kind, "rental.renewal_invoice");
  EXPECT_EQ(changes_.notices[0].user_id, kAlice);
  AdvanceTo(t + 10 * kHour);  // stopped at T exactly
  const Rental* stopped = fleet_.FindRental(r->id);
  EXPECT_EQ(stopped->state, RentalState::kStopped);
  EXPECT_EQ(stopped->instance.state, InstanceState::kStopped);
  ASSERT_NE(Find(r->id, EventKind::kStopped), nullptr);
  EXPECT_EQ(Find(r->id, EventKind::kStopped)->at, t);
  EXPECT_EQ(fleet_.Next(*stopped).what, "released");
  EXPECT_EQ(fleet_.Next(*stopped).at, t + 72 * kHour);
  // Still held: the cards are not for sale.
  EXPECT_EQ(fleet_.Stock()[0].regions[0].cards_free, 7);
  Fund(kAlice, Usd(1690));
  auto paid = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  EXPECT_EQ(paid->status, RenewalStatus::kPaid);
  EXPECT_EQ(paid->paid_at, now_);
  const Rental* resumed = fleet_.FindRental(r->id);
  EXPECT_EQ(resumed->state, RentalState::kActive);
  EXPECT_EQ(resumed->period, 2);
  EXPECT_EQ(resumed->term_start, t);  // counted from T, not from the payment
  EXPECT_EQ(resumed->term_end, t + 30 * kDay);
  EXPECT_EQ(Wallet(kAlice), 0);
  // Paying again: the same answer, no second charge.
  auto again = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  EXPECT_EQ(again.status().code(), StatusCode::kInsufficientFunds);  // period 3 is next now
  EXPECT_EQ(Kinds(r->id),
            (std::vector<EventKind>{EventKind::kCreated, EventKind::kProvisioned,
                                    EventKind::kRenewalInvoiced, EventKind::kStopped,
                                    EventKind::kRenewalPaid, EventKind::kResumed}));
}

TEST_F(FleetTest, PayingARenewalTwiceGivesTheSameAnswerAndChargesOnce) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(10'000));
  auto r = Order(kAlice, Spec("H100 SXM", 2, Term::kWeek));
  ASSERT_TRUE(r.ok());
  auto first = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  ASSERT_TRUE(first.ok());
  std::int64_t after = Wallet(kAlice);
  now_ += kHour;
  auto second = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(Wallet(kAlice), after);
  EXPECT_EQ(fleet_.ChargesOf(r->id).size(), 2u);
  // Another customer's rental id looks missing.
  auto other = fleet_.PayRenewal(kBob, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(fleet_.Release(kBob, r->id, ledger_, now_, &changes_).status().code(),
            StatusCode::kNotFound);
  // The paid term rolls over at T without an invoice.
  AdvanceTo(r->term_end);
  const Rental* rolled = fleet_.FindRental(r->id);
  EXPECT_EQ(rolled->period, 2);
  EXPECT_EQ(rolled->term_start, r->term_end);
  EXPECT_FALSE(rolled->next_paid);
  EXPECT_EQ(Find(r->id, EventKind::kRenewalInvoiced), nullptr);
}

TEST_F(FleetTest, AutoRenewRetriesHourlyUntilTheInvoiceAndPaysOnceTheWalletHoldsIt) {
  AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(280));
  auto r = Order(kAlice, Spec("A100 SXM", 1, Term::kWeek));
  ASSERT_TRUE(r.ok());
  const TimestampMicros t = r->term_end;
  EXPECT_EQ(fleet_.Next(*r).what, "auto_renew");
  EXPECT_EQ(fleet_.Next(*r).at, t - 72 * kHour);
  changes_.Clear();
  AdvanceTo(t - 60 * kHour);  // attempts at T-72 .. T-60: 13 failures, one notice
  EXPECT_EQ(fleet_.FindRental(r->id)->auto_renew_failures, 13);
  int notices = 0;
  for (const auto& n : changes_.notices) notices += n.kind == "rental.auto_renew_failed";
  EXPECT_EQ(notices, 1);
  Fund(kAlice, Usd(280));
  AdvanceTo(t - 59 * kHour - 1);  // the next attempt is at T-59 h exactly
  EXPECT_FALSE(fleet_.FindRental(r->id)->next_paid);
  AdvanceTo(t - 59 * kHour);
  EXPECT_TRUE(fleet_.FindRental(r->id)->next_paid);
  EXPECT_EQ(fleet_.FindRenewal(r->id, 2)->paid_at, t - 59 * kHour);
  EXPECT_TRUE(fleet_.FindRenewal(r->id, 2)->by_auto_renew);
  EXPECT_EQ(Wallet(kAlice), 0);
  AdvanceTo(t + kHour);
  EXPECT_EQ(fleet_.FindRental(r->id)->term_end, t + 7 * kDay);
  EXPECT_EQ(Find(r->id, EventKind::kRenewalInvoiced), nullptr);
  // With no money at all, attempts stop at T-24h and the invoice takes over.
  const TimestampMicros t2 = t + 7 * kDay;
  AdvanceTo(t2 - 24 * kHour);
  const Rental* r2 = fleet_.FindRental(r->id);
  EXPECT_EQ(r2->auto_renew_failures, 48);  // T-72 .. T-25
  EXPECT_EQ(r2->auto_renew_attempted_at, t2 - 25 * kHour);
  EXPECT_NE(r2->renewal_invoiced_at, 0);
}

TEST_F(FleetTest, UnpaidAtTheEndOfTheHoldReleasedKeyDestroyedWipedWithinSevenDays) {
  NodeId node = AddNode("H100 SXM", "IAD-1");
  Fund(kAlice, Usd(475 * 8));
  OrderSpec spec = Spec("H100 SXM", 8, Term::kWeek);
  spec.auto_renew = false;
  auto r = Order(kAlice, spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(fleet_.Stock()[0].regions[1].Sets(8), 0);
  const TimestampMicros t = r->term_end;
  AdvanceTo(t + 10 * kDay);  // the whole rest of the lifecycle in one jump
  const Rental* done = fleet_.FindRental(r->id);
  EXPECT_EQ(done->state, RentalState::kReleased);
  EXPECT_EQ(done->release_reason, ReleaseReason::kUnpaid);
  EXPECT_EQ(done->released_at, t + 72 * kHour);
  EXPECT_EQ(done->instance.state, InstanceState::kErased);
  EXPECT_EQ(done->instance.key_destroyed_at, t + 72 * kHour);
  EXPECT_EQ(done->instance.wipe_due_at, t + 7 * kDay);
  EXPECT_EQ(done->instance.wiped_at, t + 7 * kDay);
  EXPECT_EQ(fleet_.FindRenewal(r->id, 2)->status, RenewalStatus::kVoid);
  EXPECT_EQ(fleet_.RentedCards(node), 0u);
  EXPECT_EQ(fleet_.Stock()[0].regions[1].Sets(8), 1);
  EXPECT_EQ(Kinds(r->id),
            (std::vector<EventKind>{EventKind::kCreated, EventKind::kProvisioned,
                                    EventKind::kRenewalInvoiced, EventKind::kStopped,
                                    EventKind::kReleased, EventKind::kKeyDestroyed,
                                    EventKind::kWiped}));
  EXPECT_EQ(fleet_.Next(*done).at, 0);
  auto late = fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_);
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(FleetTest, EarlyReleaseRefundsNothingOfTheRunningTermButAPrepaidNextOne) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(2 * 475));
  auto r = Order(kAlice, Spec("H100 SXM", 1, Term::kWeek));
  ASSERT_TRUE(r.ok());
  AdvanceTo(r->term_end - 72 * kHour);  // auto-renew pays term 2
  ASSERT_TRUE(fleet_.FindRental(r->id)->next_paid);
  EXPECT_EQ(Wallet(kAlice), 0);
  now_ += kHour;
  auto released = fleet_.Release(kAlice, r->id, ledger_, now_, &changes_);
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->release_reason, ReleaseReason::kCustomer);
  EXPECT_EQ(Wallet(kAlice), Usd(475));  // term 2 back, term 1 kept
  EXPECT_EQ(released->instance.wipe_due_at, now_ + 7 * kDay);
  EXPECT_EQ(fleet_.Release(kAlice, r->id, ledger_, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(FleetTest, AWalletInAnotherCurrencyPaysTheConvertedGross) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, now_).ok());
  AddNode("A100 SXM", "PDX-1");
  Fund(kAlice, Usd(1000), Currency::kEur);
  OrderSpec spec = Spec("A100 SXM", 2, Term::kWeek);
  spec.currency = Currency::kEur;
  auto q = fleet_.QuoteOrder(kAlice, spec, ledger_, Untaxed, now_);
  ASSERT_TRUE(q.ok());
  ASSERT_TRUE(q->fx.has_value());
  // 532 USD / (1.08 x 0.995) = 495.0679322.. -> 495.067933 EUR (what the customer pays rounds up)
  EXPECT_EQ(q->charge_micros, 495'067'933);
  auto r = Order(kAlice, spec);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(1000) - 495'067'933);
  EXPECT_EQ(Revenue(), Usd(532));
  EXPECT_EQ(ledger_.FindTransfer("rental:1:p1:fx")->amount_micros, 495'067'933);
}

TEST_F(FleetTest, TaxFromTheTaxFunctionIsChargedOnTopAndBooked) {
  AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(1000));
  TaxFunction vat = [](UserId, std::int64_t net, TimestampMicros) -> Result<TaxBlock> {
    std::int64_t tax = net / 5;
    return TaxBlock{net, {{"VAT 20%", 200'000, tax}}, tax, net + tax};
  };
  auto r = fleet_.Order(kAlice, Spec("A100 SXM", 2, Term::kWeek), ledger_, vat, now_, &changes_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Wallet(kAlice), Usd(1000) - 638'400'000);
  EXPECT_EQ(ledger_.FindTransfer("rental:1:p1:tax")->amount_micros, 106'400'000);
  EXPECT_EQ(changes_.charges.back().amount.lines.size(), 1u);
  TaxFunction broken = [](UserId, std::int64_t net, TimestampMicros) -> Result<TaxBlock> {
    return TaxBlock{net, {}, 5, net};
  };
  auto refused =
      fleet_.Order(kAlice, Spec("A100 SXM", 1, Term::kWeek), ledger_, broken, now_, &changes_);
  EXPECT_FALSE(refused.ok());
}

TEST_F(FleetTest, DrainingKeepsRentalsAndRemovalWaitsForThemAndTheWipe) {
  NodeId node = AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(1000));
  auto r = Order(kAlice, Spec("A100 SXM", 1, Term::kWeek));
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(fleet_.SetNodeState(node, NodeState::kDraining, now_, &changes_).ok());
  EXPECT_EQ(fleet_.FindRental(r->id)->state, RentalState::kActive);
  EXPECT_EQ(Order(kAlice, Spec("A100 SXM", 1, Term::kWeek)).status().code(),
            StatusCode::kFailedPrecondition);
  auto removed = fleet_.SetNodeState(node, NodeState::kRemoved, now_, &changes_);
  EXPECT_EQ(removed.status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(fleet_.Release(kAlice, r->id, ledger_, now_, &changes_).ok());
  removed = fleet_.SetNodeState(node, NodeState::kRemoved, now_, &changes_);
  EXPECT_EQ(removed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(removed.status().message().find("wipe"), std::string::npos);
  AdvanceTo(now_ + 7 * kDay);
  EXPECT_TRUE(fleet_.SetNodeState(node, NodeState::kRemoved, now_, &changes_).ok());
  EXPECT_EQ(fleet_.SetNodeState(node, NodeState::kActive, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST_F(FleetTest, RestoreRebuildsTheSameFleetThatGoesOnTheSameWay) {
  AddNode("H100 SXM", "DFW-1");
  AddNode("A100 SXM", "IAD-1");
  Fund(kAlice, Usd(5000));
  Fund(kBob, Usd(300));
  ASSERT_TRUE(Order(kAlice, Spec("H100 SXM", 2, Term::kWeek)).ok());
  ASSERT_TRUE(Order(kBob, Spec("A100 SXM", 1, Term::kWeek)).ok());
  AdvanceTo(now_ + 6 * kDay);
  auto restored = Fleet::Restore(Config(), fleet_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->Records().rentals, fleet_.Records().rentals);
  EXPECT_EQ(restored->Records().events, fleet_.Records().events);
  EXPECT_EQ(restored->NextEventAt(), fleet_.NextEventAt());
  ledger::Ledger copy = ledger_;
  Changes ignored;
  restored->AdvanceTo(copy, Untaxed, now_ + 20 * kDay, &ignored);
  AdvanceTo(now_ + 20 * kDay);
  EXPECT_EQ(restored->Records().rentals, fleet_.Records().rentals);
  EXPECT_EQ(restored->Records().charges, fleet_.Records().charges);
  // Records that contradict each other are refused.
  Snapshot bad = fleet_.Records();
  bad.rentals.push_back(bad.rentals.front());
  bad.rentals.back().id = 99;
  bad.rentals.back().state = RentalState::kActive;
  bad.rentals.back().node_id = bad.rentals.front().node_id;
  bad.rentals.back().card_mask = 1;
  EXPECT_EQ(Fleet::Restore(Config(), bad).status().code(), StatusCode::kInternal);
}

TEST_F(FleetTest, AutoRenewSwitchesAreLimitedPerTermAndCountAgainNextTerm) {
  AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(600));
  auto r = Order(kAlice, Spec("A100 SXM", 1, Term::kWeek));
  ASSERT_TRUE(r.ok());
  for (std::size_t i = 0; i < kMaxAutoRenewChangesPerTerm; ++i) {
    ASSERT_TRUE(fleet_.SetAutoRenew(kAlice, r->id, i % 2 == 1, now_, &changes_).ok()) << i;
  }
  auto refused = fleet_.SetAutoRenew(kAlice, r->id, false, now_, &changes_);
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().field(), "enabled");
  EXPECT_TRUE(fleet_.FindRental(r->id)->auto_renew);
  // Setting what it already is changes nothing and is always fine.
  EXPECT_TRUE(fleet_.SetAutoRenew(kAlice, r->id, true, now_, &changes_).ok());
  ASSERT_TRUE(fleet_.PayRenewal(kAlice, r->id, std::nullopt, ledger_, Untaxed, now_, &changes_).ok());
  AdvanceTo(r->term_end);  // term 2: a new allowance
  EXPECT_TRUE(fleet_.SetAutoRenew(kAlice, r->id, false, now_, &changes_).ok());
}

class AgentFleetTest : public FleetTest {
 protected:
  AgentFleetTest() : FleetTest(Provisioning::kAgent) {}
};

TEST_F(AgentFleetTest, TheTermStartsWhenTheAgentReportsRunning) {
  AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(1690));
  auto r = Order(kAlice, Spec("H100 SXM", 1, Term::kMonth));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, RentalState::kProvisioning);
  EXPECT_EQ(fleet_.Next(*r).what, "refund_unless_provisioned");
  now_ += 20 * 60 * kMicrosPerSecond;
  InstanceReport up{InstanceState::kRunning, {{"ssh_host", "203.0.113.7"}, {"ssh_port", "22"}}, ""};
  auto running = fleet_.ReportInstance(r->id, up, ledger_, now_, &changes_);
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(running->state, RentalState::kActive);
  EXPECT_EQ(running->term_start, now_);
  EXPECT_EQ(running->instance.connection.size(), 2u);
  // The order paid before the term was known: the charge says so (0); the rental has the term.
  EXPECT_EQ(fleet_.ChargesOf(r->id)[0].period_start, 0);
  InstanceReport bad{InstanceState::kRunning, {{"SSH HOST", "x"}}, ""};
  EXPECT_EQ(fleet_.ReportInstance(r->id, bad, ledger_, now_, &changes_).status().field(),
            "connection");
}

TEST_F(AgentFleetTest, NotRunningWithinAnHourIsRefundedInFull) {
  NodeId node = AddNode("H100 SXM", "DFW-1");
  Fund(kAlice, Usd(1690));
  auto r = Order(kAlice, Spec("H100 SXM", 1, Term::kMonth));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Wallet(kAlice), 0);
  AdvanceTo(now_ + kHour - 1);
  EXPECT_EQ(fleet_.FindRental(r->id)->state, RentalState::kProvisioning);
  AdvanceTo(now_ + 1);
  const Rental* failed = fleet_.FindRental(r->id);
  EXPECT_EQ(failed->state, RentalState::kReleased);
  EXPECT_EQ(failed->release_reason, ReleaseReason::kProvisioningFailed);
  EXPECT_EQ(Wallet(kAlice), Usd(1690));
  EXPECT_EQ(Revenue(), 0);
  EXPECT_EQ(fleet_.RentedCards(node), 0u);
  // The agent records the wipe (no automatic one in agent mode).
  EXPECT_EQ(fleet_.Next(*failed).at, 0);
  EXPECT_EQ(fleet_.OverdueWipes(now_ + 8 * kDay, 10).size(), 1u);
  ASSERT_TRUE(fleet_.RecordWipe(r->id, now_, &changes_).ok());
  EXPECT_TRUE(fleet_.OverdueWipes(now_ + 8 * kDay, 10).empty());
}

TEST_F(AgentFleetTest, AReportedFailureRefundsAtOnce) {
  AddNode("A100 SXM", "DFW-1");
  Fund(kAlice, Usd(280));
  auto r = Order(kAlice, Spec("A100 SXM", 1, Term::kWeek));
  ASSERT_TRUE(r.ok());
  InstanceReport down{InstanceState::kFailed, {}, "GPU 3 fell off the bus"};
  auto failed = fleet_.ReportInstance(r->id, down, ledger_, now_, &changes_);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->state, RentalState::kReleased);
  EXPECT_EQ(failed->instance.error, "GPU 3 fell off the bus");
  EXPECT_EQ(Wallet(kAlice), Usd(280));
  EXPECT_EQ(fleet_.ReportInstance(r->id, down, ledger_, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpuhub::rentals
