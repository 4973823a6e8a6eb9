#include "market/exchange.h"

#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "market/exchange_test_fixture.h"

namespace gpuhub::market {
namespace {

using namespace testing;  // NOLINT: the fixture and its constants

// An account that is both provider and customer used to buy its own ask: a trade and a last price
// for the cost of the fee (wash trading). Its bids pass over its own asks and its asks over its
// own resting bids; other accounts still trade with both.
TEST_F(ExchangeTest, AnAccountNeverTradesWithItself) {
  MachineId own = NewMachine(kProvider, 8);
  OrderId own_ask = AskOn(own, Usd(2.00));
  Fund(kProvider, Usd(100));
  // A market buy by the provider itself finds no other offer: no_match, nothing moved.
  auto wash = Buy(kProvider, 2, std::nullopt);
  ASSERT_TRUE(wash.ok()) << wash.status().ToString();
  EXPECT_EQ(wash->bid.status, BidStatus::kCancelled);
  EXPECT_EQ(wash->bid.close_reason, BidCloseReason::kNoMatch);
  EXPECT_EQ(Wallet(kProvider), Usd(100));
  EXPECT_FALSE(x_.Markets()[0].last_trade.has_value());
  // Another provider's dearer ask is taken instead of the cheaper own one.
  MachineId other = NewMachine(kProvider2, 8);
  OrderId other_ask = AskOn(other, Usd(2.50), 1, 0, kProvider2);
  auto bought = Buy(kProvider, 2, Usd(3.00));
  ASSERT_TRUE(bought.ok()) << bought.status().ToString();
  ASSERT_EQ(bought->bid.status, BidStatus::kFilled);
  EXPECT_EQ(bought->lease->ask_id, other_ask);
  EXPECT_EQ(bought->lease->price_micros, Usd(2.50));
  // A resting bid of the provider above its own ask's price: its own new ask does not fill it...
  ASSERT_TRUE(x_.CancelAsk(kProvider2, other_ask, now_, &changes_).ok());
  auto resting = Buy(kProvider, 4, Usd(2.40), TimeInForce::kGtc);
  ASSERT_TRUE(resting.ok()) << resting.status().ToString();
  ASSERT_EQ(resting->bid.status, BidStatus::kResting);
  ASSERT_TRUE(x_.CancelAsk(kProvider, own_ask, now_, &changes_).ok());
  OrderId again = AskOn(own, Usd(2.10));
  EXPECT_EQ(x_.FindBid(resting->bid.id)->status, BidStatus::kResting);
  // ...both rest, crossed, and another account's orders still match either side.
  Fund(kAlice, Usd(100));
  auto alice = Buy(kAlice, 2, Usd(2.20));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  EXPECT_EQ(alice->lease->ask_id, again);
  MachineId third = NewMachine(kProvider2, 8);
  OrderId third_ask = AskOn(third, Usd(2.30), 1, 0, kProvider2);
  EXPECT_EQ(x_.FindBid(resting->bid.id)->status, BidStatus::kFilled);
  // Every lease is between two different accounts.
  for (const auto& lease : x_.Records().leases) {
    EXPECT_NE(lease.customer_id, x_.FindMachine(lease.machine_id)->provider_id) << lease.id;
  }
  // After a restart the book still knows whose orders are whose.
  auto restored = Exchange::Restore(Config(), x_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  Changes c;
  auto own_again = restored->PlaceBid(kProvider, {"H100 SXM", 2, "", true, 0, TimeInForce::kIoc},
                                      ledger_, now_, &c);
  ASSERT_TRUE(own_again.ok()) << own_again.status().ToString();
  ASSERT_EQ(own_again->bid.status, BidStatus::kFilled);
  EXPECT_EQ(own_again->lease->ask_id, third_ask);  // not its own cheaper one (2.10)
}

// The acceptance story: a provider lists a machine and an ask; a funded customer buys 2
// GPUs at market; the lease appears, an hour is charged and the provider credited minus the fee;
// advancing the clock bills each hour until the wallet runs dry and the GPUs return to the book.
TEST_F(ExchangeTest, MarketBuyIsBilledHourlyUntilTheWalletRunsDry) {
  MachineId m = NewMachine(kProvider, 8);
  OrderId ask = AskOn(m, Usd(2.88));
  Fund(kAlice, Usd(20));

  auto r = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bid.status, BidStatus::kFilled);
  ASSERT_TRUE(r->lease.has_value());
  const Lease lease = *r->lease;
  EXPECT_EQ(lease.gpus, 2);
  EXPECT_EQ(lease.gpu_mask, 0b11u);
  EXPECT_EQ(lease.price_micros, Usd(2.88));
  EXPECT_EQ(lease.hours_paid, 1);
  EXPECT_EQ(lease.started_at, kStart);
  EXPECT_EQ(r->trade->maker, Side::kAsk);
  // Hour 1: 5.76 charged; the provider gets 5.184, the platform 0.576.
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 5.76));
  EXPECT_EQ(Payable(kProvider), Usd(5.184));
  EXPECT_EQ(Revenue(), Usd(0.576));
  EXPECT_EQ(x_.FreeGpus(m), 6);
  auto book = x_.Book("H100 SXM", 10).value();
  ASSERT_EQ(book.asks.size(), 1u);
  EXPECT_EQ(book.asks[0].gpus, 6);

  Advance(kHour - 1);  // not yet the boundary
  EXPECT_EQ(x_.FindLease(lease.id)->hours_paid, 1);
  Advance(1);
  EXPECT_EQ(x_.FindLease(lease.id)->hours_paid, 2);
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 2 * 5.76));
  Advance(kHour);
  EXPECT_EQ(x_.FindLease(lease.id)->hours_paid, 3);
  EXPECT_EQ(Wallet(kAlice), Usd(20 - 3 * 5.76));  // 2.72 left: not enough for hour 4
  Advance(kHour);
  const Lease* ended = x_.FindLease(lease.id);
  EXPECT_EQ(ended->status, LeaseStatus::kEnded);
  EXPECT_EQ(ended->end_reason, LeaseEndReason::kUnpaid);
  EXPECT_EQ(ended->ended_at, kStart + 3 * kHour);  // at the hour boundary it could not pay
  EXPECT_EQ(ended->hours_paid, 3);
  EXPECT_EQ(Wallet(kAlice), Usd(2.72));
  EXPECT_EQ(Payable(kProvider), 3 * Usd(5.184));
  EXPECT_EQ(Revenue(), 3 * Usd(0.576));
  EXPECT_EQ(x_.FreeGpus(m), 8);
  EXPECT_EQ(x_.Book("h100-sxm", 10)->asks[0].gpus, 8);  // the GPUs are back on the book
  auto earnings = x_.ProviderEarnings(kProvider, ledger_);
  EXPECT_EQ(earnings.gross_micros, 3 * Usd(5.76));
  EXPECT_EQ(earnings.fee_micros, 3 * Usd(0.576));
  EXPECT_EQ(earnings.net_micros, 3 * Usd(5.184));
  EXPECT_EQ(earnings.gpu_hours, 6);
  EXPECT_EQ(earnings.available_micros, 3 * Usd(5.184));
  EXPECT_EQ(x_.FindAsk(ask)->status, AskStatus::kOpen);
}

TEST_F(ExchangeTest, AWeekInOneAdvanceChargesEveryHourInTimeOrder) {
  MachineId m = NewMachine(kProvider, 8);
  AskOn(m, Usd(1.0));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 1, std::nullopt).ok());  // 1.00/h from kStart
  now_ += 30 * kMicrosPerSecond * 60;              // half an hour later
  ASSERT_TRUE(Buy(kAlice, 2, std::nullopt).ok());  // 2.00/h from kStart + 30 min
  Advance(7 * kMicrosPerDay);
  // 100 USD pays hours alternately (1 + 2 per hour pair); the wallet runs dry after 33 pairs plus
  // the 1.00 hour: 33 x 3 = 99, then lease 1 pays its 34th hour (1.00) and lease 2 cannot.
  const Lease* l1 = x_.FindLease(1);
  const Lease* l2 = x_.FindLease(2);
  EXPECT_EQ(l1->hours_paid + 0, 34);
  EXPECT_EQ(l2->hours_paid + 0, 33);
  EXPECT_EQ(l2->ended_at, kStart + kHour / 2 + 33 * kHour);
  EXPECT_EQ(l1->ended_at, kStart + 34 * kHour);
  EXPECT_EQ(Wallet(kAlice), 0);
  EXPECT_EQ(x_.FreeGpus(m), 8);
}

// ----- Price-time priority -------------------------------------------------------------------

struct PriorityCase {
  const char* name;
  std::vector<std::pair<int, double>> asks;  // machine GPUs, price (placed in this order)
  int gpus;
  std::optional<double> limit;
  int expected_ask;  // index into asks (-1: no fill)
  double expected_price;
};

TEST_F(ExchangeTest, PriceTimePriorityTable) {
  const PriorityCase cases[] = {
      {"cheapest wins", {{8, 3.0}, {8, 2.5}, {8, 2.9}}, 1, std::nullopt, 1, 2.5},
      {"tie to the earlier ask", {{8, 2.5}, {8, 2.5}}, 1, std::nullopt, 0, 2.5},
      {"trade at the resting ask, not the limit", {{8, 2.5}}, 2, 3.0, 0, 2.5},
      {"limit below every ask", {{8, 2.5}}, 2, 2.499, -1, 0},
      {"cheapest too small", {{1, 2.0}, {4, 2.2}}, 2, 3.0, 1, 2.2},
      {"nothing large enough", {{1, 2.0}, {1, 2.0}}, 2, std::nullopt, -1, 0},
  };
  UserId provider = 100;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    // A fresh market each case: a new GPU model would need config, so cancel what is left instead.
    std::vector<OrderId> asks;
    ++provider;
    for (auto [gpus, price] : c.asks)
      asks.push_back(AskOn(NewMachine(provider, gpus), Usd(price), 1, 0, provider));
    UserId customer = provider + 1000;
    Fund(customer, Usd(100));
    auto r = Buy(customer, c.gpus, c.limit ? std::optional(Usd(*c.limit)) : std::nullopt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (c.expected_ask < 0) {
      EXPECT_EQ(r->bid.status, BidStatus::kCancelled);
      EXPECT_EQ(r->bid.close_reason, BidCloseReason::kNoMatch);
      EXPECT_EQ(Wallet(customer), Usd(100));
    } else {
      ASSERT_EQ(r->bid.status, BidStatus::kFilled);
      EXPECT_EQ(r->lease->ask_id, asks[static_cast<std::size_t>(c.expected_ask)]);
      EXPECT_EQ(r->lease->price_micros, Usd(c.expected_price));
      EXPECT_EQ(Wallet(customer), Usd(100) - Usd(c.expected_price) * c.gpus);
      ASSERT_TRUE(x_.StopLease(customer, r->lease->id, ledger_, now_, &changes_).ok());
    }
    for (OrderId a : asks) ASSERT_TRUE(x_.CancelAsk(provider, a, now_, &changes_).ok());
    Check();
  }
}

TEST_F(ExchangeTest, MinGpusAndRegionsFilterAsks) {
  OrderId big = AskOn(NewMachine(kProvider, 8, "DFW-1"), Usd(2.0), /*min_gpus=*/4);
  OrderId small = AskOn(NewMachine(kProvider, 2, "PDX-1"), Usd(2.5));
  Fund(kAlice, Usd(100));
  auto r = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lease->ask_id, small);  // the cheaper one rents 4 GPUs or more
  r = Buy(kAlice, 4, std::nullopt, TimeInForce::kIoc, "PDX-1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->bid.status, BidStatus::kCancelled);
  r = Buy(kAlice, 4, std::nullopt, TimeInForce::kIoc, "dfw-1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->lease->ask_id, big);
  EXPECT_EQ(r->bid.region, "DFW-1");
  auto bad = Buy(kAlice, 1, std::nullopt, TimeInForce::kIoc, "MARS-1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "unknown region 'MARS-1' (regions: DFW-1, IAD-1, PDX-1)");
}

// ----- Resting bids --------------------------------------------------------------------------

TEST_F(ExchangeTest, ARestingBidHoldsOneHourAndANewAskFillsItAtTheBidPrice) {
  Fund(kAlice, Usd(10));
  auto r = Buy(kAlice, 2, Usd(3.0), TimeInForce::kGtc);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->bid.status, BidStatus::kResting);
  EXPECT_EQ(r->bid.hold_micros, Usd(6.0));
  EXPECT_EQ(Held(kAlice), Usd(6.0));
  EXPECT_EQ(Wallet(kAlice), Usd(4.0));
  auto depth = x_.Book("H100 SXM", 5).value();
  ASSERT_EQ(depth.bids.size(), 1u);
  EXPECT_EQ(depth.bids[0].price, Usd(3.0));
  EXPECT_EQ(depth.bids[0].gpus, 2);

  now_ += kHour / 4;
  OrderId ask = AskOn(NewMachine(kProvider, 8), Usd(2.5));
  const Bid* bid = x_.FindBid(r->bid.id);
  ASSERT_EQ(bid->status, BidStatus::kFilled);
  const Lease* lease = x_.FindLease(bid->lease_id);
  EXPECT_EQ(lease->ask_id, ask);
  EXPECT_EQ(lease->price_micros, Usd(3.0));  // the resting order's price
  EXPECT_EQ(lease->started_at, now_);
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Wallet(kAlice), Usd(4.0));
  auto trades = x_.Trades("H100 SXM", 10).value();
  ASSERT_EQ(trades.size(), 1u);
  EXPECT_EQ(trades[0].maker, Side::kBid);
  EXPECT_EQ(trades[0].price_micros, Usd(3.0));
  EXPECT_TRUE(x_.Book("H100 SXM", 5)->bids.empty());
}

TEST_F(ExchangeTest, PriceThenTimeAmongRestingBids) {
  for (UserId u : {kAlice, kBob, UserId{12}, UserId{13}}) Fund(u, Usd(100));
  auto first = Buy(kAlice, 2, Usd(3.1), TimeInForce::kGtc);  // best price, earliest
  auto second = Buy(kBob, 8, Usd(3.1), TimeInForce::kGtc);   // same price, later
  auto third = Buy(12, 4, Usd(2.9), TimeInForce::kGtc);      // lower price
  auto below = Buy(13, 1, Usd(2.0), TimeInForce::kGtc);      // below the ask
  for (auto* r : {&first, &second, &third, &below}) ASSERT_TRUE(r->ok());
  AskOn(NewMachine(kProvider, 8), Usd(2.5));
  // 8 free: Alice's 2 first (6 left); Bob's 8 no longer fits; 12's 4 fits (2 left); 13 is below.
  EXPECT_EQ(x_.FindBid(first->bid.id)->status, BidStatus::kFilled);
  EXPECT_EQ(x_.FindBid(second->bid.id)->status, BidStatus::kResting);
  EXPECT_EQ(x_.FindBid(third->bid.id)->status, BidStatus::kFilled);
  EXPECT_EQ(x_.FindBid(below->bid.id)->status, BidStatus::kResting);
  EXPECT_EQ(x_.FindLease(x_.FindBid(third->bid.id)->lease_id)->price_micros, Usd(2.9));
  EXPECT_EQ(x_.FindLease(x_.FindBid(third->bid.id)->lease_id)->gpu_mask, 0b111100u);
  EXPECT_EQ(x_.Markets()[0].best_bid_micros, Usd(3.1));
  EXPECT_EQ(x_.Markets()[0].gpus_on_offer, 2);

  // Alice stops: 4 free, still not 8. 12 stops too: 8 free, Bob's bid fills at the older price.
  ASSERT_TRUE(
      x_.StopLease(kAlice, x_.FindBid(first->bid.id)->lease_id, ledger_, now_, &changes_).ok());
  EXPECT_EQ(x_.FindBid(second->bid.id)->status, BidStatus::kResting);
  now_ += kHour / 2;
  ASSERT_TRUE(x_.StopLease(12, x_.FindBid(third->bid.id)->lease_id, ledger_, now_, &changes_).ok());
  const Bid* bob = x_.FindBid(second->bid.id);
  ASSERT_EQ(bob->status, BidStatus::kFilled);
  const Lease* lease = x_.FindLease(bob->lease_id);
  EXPECT_EQ(lease->price_micros, Usd(3.1));  // Bob's bid (id 2) is older than the ask (id 5)
  EXPECT_EQ(lease->started_at, now_);
  EXPECT_EQ(Wallet(kBob), Usd(100 - 8 * 3.1));
  EXPECT_EQ(Held(kBob), 0);
}

TEST_F(ExchangeTest, FreedGpusGoToAnOlderAskAtTheAskPrice) {
  Fund(kAlice, Usd(100));
  Fund(kBob, Usd(100));
  MachineId m = NewMachine(kProvider, 4);
  OrderId ask = AskOn(m, Usd(2.0));
  auto lease = Buy(kAlice, 4, std::nullopt);
  ASSERT_TRUE(lease.ok());
  auto waiting = Buy(kBob, 2, Usd(3.0), TimeInForce::kGtc);  // newer than the ask, nothing free
  ASSERT_TRUE(waiting.ok());
  EXPECT_EQ(waiting->bid.status, BidStatus::kResting);
  ASSERT_TRUE(x_.StopLease(kAlice, lease->lease->id, ledger_, now_, &changes_).ok());
  const Bid* bob = x_.FindBid(waiting->bid.id);
  ASSERT_EQ(bob->status, BidStatus::kFilled);
  EXPECT_EQ(x_.FindLease(bob->lease_id)->price_micros, Usd(2.0));  // the ask was there first
  EXPECT_EQ(x_.FindLease(bob->lease_id)->ask_id, ask);
  EXPECT_EQ(Wallet(kBob), Usd(96));
}

TEST_F(ExchangeTest, CancelAndExpiryReleaseTheHold) {
  Fund(kAlice, Usd(10));
  auto r = Buy(kAlice, 1, Usd(3.0), TimeInForce::kGtc, "", now_ + 2 * kHour);
  ASSERT_TRUE(r.ok());
  auto c = Buy(kAlice, 1, Usd(3.0), TimeInForce::kGtc);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Held(kAlice), Usd(6));
  auto cancelled = x_.CancelBid(kAlice, c->bid.id, ledger_, now_, &changes_);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->status, BidStatus::kCancelled);
  EXPECT_EQ(cancelled->close_reason, BidCloseReason::kCancelledByUser);
  EXPECT_EQ(Held(kAlice), Usd(3));
  auto again = x_.CancelBid(kAlice, c->bid.id, ledger_, now_, &changes_);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  auto other = x_.CancelBid(kBob, r->bid.id, ledger_, now_, &changes_);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kNotFound);  // someone else's bid is not yours
  Advance(2 * kHour - 1);
  EXPECT_EQ(x_.FindBid(r->bid.id)->status, BidStatus::kResting);
  Advance(1);
  EXPECT_EQ(x_.FindBid(r->bid.id)->status, BidStatus::kExpired);
  EXPECT_EQ(x_.FindBid(r->bid.id)->closed_at, kStart + 2 * kHour);
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Wallet(kAlice), Usd(10));
  // An expired bid no longer matches (it is off the book).
  AskOn(NewMachine(kProvider, 1), Usd(1.0));
  EXPECT_EQ(x_.ListCustomerLeases(kAlice, 10).size(), 0u);
}

// ----- Refusals ------------------------------------------------------------------------------

TEST_F(ExchangeTest, RefusalsChangeNothing) {
  MachineId m = NewMachine(kProvider, 8);
  AskOn(m, Usd(2.88));
  Fund(kAlice, Usd(5));
  struct Case {
    const char* name;
    BidSpec spec;
    StatusCode code;
    const char* message;  // substring
  };
  auto spec = [](int gpus, bool market, std::int64_t limit, TimeInForce tif,
                 TimestampMicros expires = 0, const char* gpu = "H100 SXM") {
    BidSpec s;
    s.gpu = gpu;
    s.gpus = gpus;
    s.is_market = market;
    s.limit_micros = limit;
    s.time_in_force = tif;
    s.expires_at = expires;
    return s;
  };
  const Case cases[] = {
      {"cannot pay the first hour", spec(2, true, 0, TimeInForce::kIoc),
       StatusCode::kInsufficientFunds, "this needs 5.760000 USD and your USD wallet has 5.000000"},
      {"cannot pay the hold", spec(2, false, Usd(2.6), TimeInForce::kGtc),
       StatusCode::kInsufficientFunds, "needs 5.200000 USD"},
      {"market and gtc", spec(1, true, 0, TimeInForce::kGtc), StatusCode::kInvalidArgument,
       "immediate-or-cancel"},
      {"market with a limit", spec(1, true, Usd(1), TimeInForce::kIoc),
       StatusCode::kInvalidArgument, "no limit price"},
      {"off the tick", spec(1, false, 2'880'500, TimeInForce::kIoc), StatusCode::kInvalidArgument,
       "0.001 tick"},
      {"zero GPUs", spec(0, true, 0, TimeInForce::kIoc), StatusCode::kInvalidArgument, "gpus"},
      {"too many GPUs", spec(17, true, 0, TimeInForce::kIoc), StatusCode::kInvalidArgument,
       "one machine"},
      {"expiry on ioc", spec(1, false, Usd(1), TimeInForce::kIoc, kStart + kHour),
       StatusCode::kInvalidArgument, "gtc"},
      {"expiry in the past", spec(1, false, Usd(1), TimeInForce::kGtc, kStart),
       StatusCode::kInvalidArgument, "past"},
      {"unknown GPU", spec(1, true, 0, TimeInForce::kIoc, 0, "H999"), StatusCode::kInvalidArgument,
       "markets: H100 SXM, A100 SXM"},
  };
  for (const auto& c : cases) {
    Changes changes;
    auto r = x_.PlaceBid(kAlice, c.spec, ledger_, now_, &changes);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), c.code) << c.name;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.name << ": " << r.status().message();
    EXPECT_TRUE(changes.empty()) << c.name;
  }
  EXPECT_EQ(Wallet(kAlice), Usd(5));
  EXPECT_EQ(x_.FreeGpus(m), 8);
  EXPECT_TRUE(x_.ListBids(kAlice, 10).empty());
  // The same bid goes through once the wallet can pay.
  Fund(kAlice, Usd(1));
  EXPECT_TRUE(Buy(kAlice, 2, std::nullopt).ok());
}

TEST_F(ExchangeTest, ProviderRefusals) {
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"H100 SXM", 0, "IAD-1", 1, 1, 1}, now_, &changes_).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"H100 SXM", 8, "Mars", 1, 1, 1}, now_, &changes_).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"RTX 9999", 8, "IAD-1", 1, 1, 1}, now_, &changes_).status().code(),
      StatusCode::kInvalidArgument);
  MachineId m = NewMachine(kProvider, 4);
  auto place = [&](UserId p, AskSpec s) { return x_.PlaceAsk(p, s, ledger_, now_, &changes_); };
  // Each refusal names the field at fault, so the API can say which one to fix.
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"RTX 9999", 8, "IAD-1", 1, 1, 1}, now_, &changes_).status().field(),
      "gpu");
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"H100 SXM", 8, "Mars", 1, 1, 1}, now_, &changes_).status().field(),
      "region");
  EXPECT_EQ(
      x_.AddMachine(kProvider, {"H100 SXM", 8, "IAD-1", 0, 1, 1}, now_, &changes_).status().field(),
      "vcpus");
  EXPECT_EQ(place(kProvider, {m, Usd(2), 5, now_ + kMicrosPerDay}).status().field(), "min_gpus");
  EXPECT_EQ(place(kProvider, {m, Usd(2), 1, now_ + kHour}).status().field(), "available_until");
  EXPECT_EQ(place(kProvider, {m, 2'000'100, 1, now_ + kMicrosPerDay}).status().field(),
            "price_usd_per_gpu_hour");
  EXPECT_EQ(x_.RequestPayout(kProvider, 1, ledger_, now_, &changes_).status().field(), "amount");
  EXPECT_EQ(place(kProvider2, {m, Usd(2), 1, now_ + kMicrosPerDay}).status().code(),
            StatusCode::kNotFound);  // not their machine
  EXPECT_EQ(place(kProvider, {m, Usd(2), 5, now_ + kMicrosPerDay}).status().code(),
            StatusCode::kInvalidArgument);  // min_gpus above the machine
  EXPECT_EQ(place(kProvider, {m, Usd(2), 1, now_ + kHour}).status().code(),
            StatusCode::kInvalidArgument);  // not even one whole hour
  EXPECT_EQ(place(kProvider, {m, Usd(2), 1, now_ + 400 * kMicrosPerDay}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(place(kProvider, {m, 2'000'100, 1, now_ + kMicrosPerDay}).status().code(),
            StatusCode::kInvalidArgument);  // off the tick
  OrderId ask = AskOn(m, Usd(2));
  auto twice = place(kProvider, {m, Usd(2), 1, now_ + kMicrosPerDay});
  EXPECT_EQ(twice.status().code(), StatusCode::kConflict);
  EXPECT_EQ(x_.CancelAsk(kProvider2, ask, now_, &changes_).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(x_.CancelAsk(kProvider, ask, now_, &changes_).ok());
  EXPECT_EQ(x_.CancelAsk(kProvider, ask, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(place(kProvider, {m, Usd(2.5), 1, now_ + kMicrosPerDay}).ok());  // reprice
}

// ----- Asks ending -----------------------------------------------------------------------------

TEST_F(ExchangeTest, CancelledAskKeepsRunningLeasesButTakesNoGpusBack) {
  MachineId m = NewMachine(kProvider, 8);
  OrderId ask = AskOn(m, Usd(2.0));
  Fund(kAlice, Usd(100));
  auto r = Buy(kAlice, 4, std::nullopt);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(x_.CancelAsk(kProvider, ask, now_, &changes_).ok());
  EXPECT_TRUE(x_.Book("H100 SXM", 5)->asks.empty());
  Advance(kHour);
  EXPECT_EQ(x_.FindLease(r->lease->id)->hours_paid, 2);  // still billed
  ASSERT_TRUE(x_.StopLease(kAlice, r->lease->id, ledger_, now_, &changes_).ok());
  EXPECT_TRUE(x_.Book("H100 SXM", 5)->asks.empty());
  EXPECT_EQ(x_.FreeGpus(m), 8);
  // A new ask on the machine offers all of it again.
  AskOn(m, Usd(2.2));
  EXPECT_EQ(x_.Book("H100 SXM", 5)->asks[0].gpus, 8);
}

TEST_F(ExchangeTest, AskExpiresAnHourBeforeAvailableUntilAndLeasesStopAtTheWindow) {
  MachineId m = NewMachine(kProvider, 8);
  OrderId ask = AskOn(m, Usd(1.0), 1, kStart + 5 * kHour + kHour / 2);
  Fund(kAlice, Usd(100));
  auto r = Buy(kAlice, 1, std::nullopt);
  ASSERT_TRUE(r.ok());
  Advance(4 * kHour);  // hours 1..5 sold: the 5th ends at 5:00 <= 5:30
  EXPECT_EQ(x_.FindAsk(ask)->status, AskStatus::kOpen);
  EXPECT_EQ(x_.FindLease(r->lease->id)->hours_paid, 5);
  Advance(kHour / 2);  // 4:30: less than an hour left, the ask leaves the book
  EXPECT_EQ(x_.FindAsk(ask)->status, AskStatus::kExpired);
  EXPECT_EQ(x_.FindAsk(ask)->closed_at, kStart + 4 * kHour + kHour / 2);
  EXPECT_TRUE(x_.Book("H100 SXM", 5)->asks.empty());
  Advance(kHour / 2);  // 5:00: hour 6 would end at 6:00 > 5:30
  const Lease* lease = x_.FindLease(r->lease->id);
  EXPECT_EQ(lease->status, LeaseStatus::kEnded);
  EXPECT_EQ(lease->end_reason, LeaseEndReason::kWindowEnded);
  EXPECT_EQ(lease->hours_paid, 5);
  EXPECT_EQ(Wallet(kAlice), Usd(95));
}

TEST_F(ExchangeTest, StopEndsNowAndKeepsThePaidHour) {
  MachineId m = NewMachine(kProvider, 8);
  AskOn(m, Usd(2.0));
  Fund(kAlice, Usd(100));
  auto r = Buy(kAlice, 8, std::nullopt);
  ASSERT_TRUE(r.ok());
  now_ += 10 * 60 * kMicrosPerSecond;
  auto stopped = x_.StopLease(kAlice, r->lease->id, ledger_, now_, &changes_);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->ended_at, now_);
  EXPECT_EQ(stopped->end_reason, LeaseEndReason::kStopped);
  EXPECT_EQ(Wallet(kAlice), Usd(84));  // no refund
  EXPECT_EQ(x_.FreeGpus(m), 8);
  EXPECT_EQ(x_.StopLease(kAlice, r->lease->id, ledger_, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(x_.StopLease(kBob, r->lease->id, ledger_, now_, &changes_).status().code(),
            StatusCode::kNotFound);
  Advance(3 * kHour);
  EXPECT_EQ(Wallet(kAlice), Usd(84));  // nothing more is charged
}

// ----- Money ---------------------------------------------------------------------------------

TEST_F(ExchangeTest, NonUsdWalletsPayThroughFxAtSettlement) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kStart).ok());
  Fund(kAlice, Usd(20), Currency::kEur);
  AskOn(NewMachine(kProvider, 8), Usd(2.88));
  auto r = Buy(kAlice, 2, Usd(3.0), TimeInForce::kGtc, "", 0, Currency::kEur);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->bid.status, BidStatus::kFilled);
  // 5.76 USD at 1.08 with 0.5% spread: 5.76 / (1.08 x 0.995) = 5.3601340.. -> 5.360135 EUR (what
  // the customer pays rounds up).
  auto quote = ledger_.Fx().ConvertTo(Currency::kEur, Currency::kUsd, Usd(5.76)).value();
  EXPECT_EQ(quote.from_micros, 5'360'135);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(20) - 5'360'135);
  EXPECT_EQ(Payable(kProvider), Usd(5.184));
  EXPECT_EQ(Revenue(), Usd(0.576));
  // The rate moves; hour 2 converts at the new rate.
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'000'000'000, 0, kStart).ok());
  Advance(kHour);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(20) - 5'360'135 - Usd(5.76));
  // A resting EUR bid holds the converted hour.
  auto resting = Buy(kAlice, 1, Usd(1.0), TimeInForce::kGtc, "", 0, Currency::kEur);
  ASSERT_TRUE(resting.ok());
  EXPECT_EQ(resting->bid.hold_micros, Usd(1.0));
  EXPECT_EQ(Held(kAlice, Currency::kEur), Usd(1.0));
}

// Prices are net: each hour also moves the customer's tax (the rate billing says for that hour)
// to tax payable, a resting bid holds its hour with tax, and every charged hour is reported.
TEST_F(ExchangeTest, EachHourCarriesTheTaxOfItsMomentOnTopOfTheNetPrice) {
  std::int64_t rate = 190'000;
  x_.SetTaxRate([&](UserId customer, TimestampMicros) { return customer == kAlice ? rate : 0; });
  auto taxes = [&] {
    return ledger_.GetAccount(AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd))
        ->posted();
  };
  Fund(kAlice, Usd(30));
  Fund(kBob, Usd(30));
  // A resting bid holds 2 x 2.00 + 19% = 4.76.
  auto resting = Buy(kAlice, 2, Usd(2.0), TimeInForce::kGtc);
  ASSERT_TRUE(resting.ok());
  EXPECT_EQ(resting->bid.hold_micros, Usd(4.76));
  EXPECT_EQ(Held(kAlice), Usd(4.76));
  changes_.Clear();
  MachineId m = NewMachine(kProvider, 8);
  AskOn(m, Usd(2.0));  // fills the bid at 2.00: 4.00 net + 0.76 tax
  EXPECT_EQ(Wallet(kAlice), Usd(30 - 4.76));
  EXPECT_EQ(Held(kAlice), 0);
  EXPECT_EQ(Payable(kProvider), Usd(3.6));
  EXPECT_EQ(Revenue(), Usd(0.4));
  EXPECT_EQ(taxes(), Usd(0.76));
  ASSERT_EQ(changes_.hours.size(), 1u);
  EXPECT_EQ(changes_.hours[0].customer_id, kAlice);
  EXPECT_EQ(changes_.hours[0].hour, 1);
  EXPECT_EQ(changes_.hours[0].net_micros, Usd(4.0));
  EXPECT_EQ(changes_.hours[0].rate_ppm, 190'000);
  EXPECT_EQ(changes_.hours[0].tax_micros, Usd(0.76));
  EXPECT_EQ(changes_.hours[0].at, now_);
  // Bob pays no tax (the function says 0): no tax leg at all.
  ASSERT_TRUE(Buy(kBob, 1, std::nullopt).ok());
  EXPECT_EQ(Wallet(kBob), Usd(28));
  EXPECT_EQ(taxes(), Usd(0.76));
  // The rate changes; the next hour is taxed at the new one, each hour reported.
  rate = 210'000;
  changes_.Clear();
  Advance(kHour);
  EXPECT_EQ(Wallet(kAlice), Usd(30 - 4.76 - 4.84));
  EXPECT_EQ(taxes(), Usd(0.76 + 0.84));
  ASSERT_EQ(changes_.hours.size(), 2u);
  EXPECT_EQ(changes_.hours[0].tax_micros + changes_.hours[1].tax_micros, Usd(0.84));
  // Alice has 20.40 left: four more hours at 4.84, not a fifth.
  Advance(10 * kHour);
  EXPECT_EQ(x_.FindLease(1)->hours_paid, 6);
  EXPECT_EQ(x_.FindLease(1)->end_reason, LeaseEndReason::kUnpaid);
  EXPECT_EQ(Wallet(kAlice), Usd(30 - 4.76 - 5 * 4.84));
}

TEST_F(ExchangeTest, ANonUsdWalletConvertsPriceAndTaxTogether) {
  x_.SetTaxRate([](UserId, TimestampMicros) { return std::int64_t{200'000}; });
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'000'000'000, 0, kStart).ok());
  Fund(kAlice, Usd(20), Currency::kEur);
  AskOn(NewMachine(kProvider, 8), Usd(2.5));
  auto r = Buy(kAlice, 2, std::nullopt, TimeInForce::kIoc, "", 0, Currency::kEur);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), Usd(20 - 6.0));  // 5.00 + 20% at 1:1
  EXPECT_EQ(
      ledger_.GetAccount(AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd))->posted(),
      Usd(1.0));
}

// Settlement converts at each hour's rate (spec: "converted at settlement"), so the rate a running
// lease or a resting bid will convert through cannot be removed; replacing it is fine.
TEST_F(ExchangeTest, AnFxRateThatOpenOrdersConvertThroughCannotBeRemoved) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kStart).ok());
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kGbp, 850'000'000, 50, kStart).ok());
  Fund(kAlice, Usd(100), Currency::kEur);
  AskOn(NewMachine(kProvider, 2), Usd(2.88));
  auto r = Buy(kAlice, 2, std::nullopt, TimeInForce::kIoc, "", 0, Currency::kEur);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->lease.has_value());
  const LeaseId lease = r->lease->id;
  for (auto [a, b] :
       {std::pair{Currency::kEur, Currency::kUsd}, {Currency::kUsd, Currency::kEur}}) {
    auto refused = x_.RemoveFxRate(a, b, ledger_, now_);
    ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(refused.status().message(),
              "the EUR/USD rate cannot be removed: EUR wallets pay for 1 running lease (lease " +
                  std::to_string(lease) +
                  "), converting at the rate of the moment each hour is settled; set a new rate "
                  "instead, or remove it once they have ended");
  }
  EXPECT_TRUE(ledger_.Fx().Find(Currency::kEur, Currency::kUsd).has_value());
  // A pair without USD is never converted through by the exchange; a new rate is always fine.
  EXPECT_TRUE(x_.RemoveFxRate(Currency::kGbp, Currency::kEur, ledger_, now_).ok());
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'100'000'000, 0, kStart).ok());
  Advance(kHour);
  EXPECT_EQ(x_.FindLease(lease)->hours_paid, 2);
  // A resting EUR bid converts its first hour when it fills: it keeps the rate too.
  ASSERT_TRUE(x_.StopLease(kAlice, lease, ledger_, now_, &changes_).ok());
  auto resting = Buy(kAlice, 1, Usd(1.0), TimeInForce::kGtc, "", 0, Currency::kEur);
  ASSERT_TRUE(resting.ok()) << resting.status().ToString();
  ASSERT_EQ(resting->bid.status, BidStatus::kResting);
  auto refused = x_.RemoveFxRate(Currency::kUsd, Currency::kEur, ledger_, now_);
  ASSERT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("1 resting bid (bid " +
                                            std::to_string(resting->bid.id) + ")"),
            std::string::npos)
      << refused.status().message();
  // Once nothing open pays from EUR, the rate goes; a second removal finds nothing.
  ASSERT_TRUE(x_.CancelBid(kAlice, resting->bid.id, ledger_, now_, &changes_).ok());
  auto removed = x_.RemoveFxRate(Currency::kUsd, Currency::kEur, ledger_, now_);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(removed->mid_rate_ppb, 0);
  EXPECT_FALSE(ledger_.Fx().Find(Currency::kEur, Currency::kUsd).has_value());
  EXPECT_EQ(x_.RemoveFxRate(Currency::kEur, Currency::kUsd, ledger_, now_).status().code(),
            StatusCode::kNotFound);
}

// A rate missing at settlement anyway (removed before the rule above, straight from the ledger):
// the lease ends at that hour with `no_fx_rate`, not `unpaid`, though the wallet has the money; a
// resting bid that would fill is cancelled with `no_fx_rate` and its hold released.
TEST_F(ExchangeTest, ALeaseThatMeetsNoFxRateEndsSayingSo) {
  ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, kStart).ok());
  Fund(kAlice, Usd(100), Currency::kEur);
  Fund(kBob, Usd(100), Currency::kEur);
  MachineId m = NewMachine(kProvider, 2);
  AskOn(m, Usd(2.88));
  auto r = Buy(kAlice, 2, std::nullopt, TimeInForce::kIoc, "", 0, Currency::kEur);
  ASSERT_TRUE(r.ok() && r->lease.has_value()) << r.status().ToString();
  auto resting = Buy(kBob, 1, Usd(3.0), TimeInForce::kGtc, "", 0, Currency::kEur);
  ASSERT_TRUE(resting.ok()) << resting.status().ToString();
  ASSERT_EQ(resting->bid.status, BidStatus::kResting);  // no free GPU yet
  ASSERT_TRUE(ledger_.RemoveFxRate(Currency::kEur, Currency::kUsd, now_).ok());
  const std::int64_t eur_left = Wallet(kAlice, Currency::kEur);
  Advance(kHour);
  const Lease* ended = x_.FindLease(r->lease->id);
  EXPECT_EQ(ended->status, LeaseStatus::kEnded);
  EXPECT_EQ(ended->end_reason, LeaseEndReason::kNoFxRate);
  EXPECT_EQ(LeaseEndReasonName(ended->end_reason), "no_fx_rate");
  EXPECT_EQ(ended->ended_at, kStart + kHour);
  EXPECT_EQ(ended->hours_paid, 1);
  EXPECT_EQ(Wallet(kAlice, Currency::kEur), eur_left);  // nothing charged, nothing lost
  // Its GPUs came back and met Bob's resting EUR bid, which could not convert its first hour.
  const Bid* bid = x_.FindBid(resting->bid.id);
  EXPECT_EQ(bid->status, BidStatus::kCancelled);
  EXPECT_EQ(bid->close_reason, BidCloseReason::kNoFxRate);
  EXPECT_EQ(Held(kBob, Currency::kEur), 0);
  EXPECT_EQ(x_.FreeGpus(m), 2);
}

TEST_F(ExchangeTest, FeeIsRoundedHalfEvenOncePerHour) {
  ExchangeConfig config = Config();
  config.fee_ppm = 2'500;  // 0.25%
  Exchange x(config);
  Changes ch;
  Fund(kAlice, Usd(100));
  MachineId m = x.AddMachine(kProvider, {"H100 SXM", 8, "IAD-1", 8, 64, 100}, now_, &ch)->id;
  ASSERT_TRUE(x.PlaceAsk(kProvider, {m, 1'000, 1, now_ + kMicrosPerDay}, ledger_, now_, &ch).ok());
  BidSpec one{"H100 SXM", 1, "", true, 0, TimeInForce::kIoc, 0, Currency::kUsd};
  ASSERT_TRUE(x.PlaceBid(kAlice, one, ledger_, now_, &ch).ok());  // 1000 x 0.25% = 2.5 -> 2
  EXPECT_EQ(Revenue(), 2);
  BidSpec three = one;
  three.gpus = 3;
  ASSERT_TRUE(x.PlaceBid(kAlice, three, ledger_, now_, &ch).ok());  // 3000 x 0.25% = 7.5 -> 8
  EXPECT_EQ(Revenue(), 10);
  EXPECT_EQ(Payable(kProvider), 998 + 2992);
  EXPECT_TRUE(x.CheckSettlement(ledger_).ok());
  EXPECT_TRUE(x.CheckInvariants(ledger_).ok());

  config.fee_ppm = 0;  // no fee: no fee leg (a separate ledger: lease ids start at 1 again)
  Exchange free_x(config);
  ledger::Ledger other;
  ledger::TransferRequest topup{"topup:1",
                                ledger::TransferKind::kSinglePhase,
                                AccountKey::System(AccountKind::kDeposits, Currency::kUsd),
                                AccountKey::Wallet(kAlice, Currency::kUsd),
                                Usd(10),
                                "",
                                "topup",
                                "",
                                kStart};
  ASSERT_TRUE(other.Apply(topup).ok());
  MachineId m2 = free_x.AddMachine(kProvider2, {"H100 SXM", 8, "IAD-1", 8, 64, 100}, now_, &ch)->id;
  ASSERT_TRUE(
      free_x.PlaceAsk(kProvider2, {m2, 1'000, 1, now_ + kMicrosPerDay}, other, now_, &ch).ok());
  auto lease = free_x.PlaceBid(kAlice, one, other, now_, &ch);
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(other.GetAccount(AccountKey::Payable(kProvider2, Currency::kUsd))->available(), 1'000);
  EXPECT_FALSE(other.FindTransfer(LeaseHourTransferId(lease->lease->id, 1, "fee")).ok());
  EXPECT_TRUE(free_x.CheckSettlement(other).ok());
  EXPECT_TRUE(other.CheckInvariants().ok());
}

TEST_F(ExchangeTest, PayoutsStayPendingUntilAnAdminMarksThemPaid) {
  AskOn(NewMachine(kProvider, 8), Usd(10.0));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 1, std::nullopt).ok());
  EXPECT_EQ(Payable(kProvider), Usd(9));
  auto too_much = x_.RequestPayout(kProvider, Usd(9.01), ledger_, now_, &changes_);
  ASSERT_FALSE(too_much.ok());
  EXPECT_EQ(too_much.status().code(), StatusCode::kInsufficientFunds);
  EXPECT_EQ(too_much.status().message(), "you can pay out at most 9.000000 USD now");
  EXPECT_EQ(x_.RequestPayout(kProvider, Usd(0.5), ledger_, now_, &changes_).status().code(),
            StatusCode::kInvalidArgument);
  auto p1 = x_.RequestPayout(kProvider, Usd(5), ledger_, now_, &changes_);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(p1->status, PayoutStatus::kPending);
  EXPECT_EQ(Payable(kProvider), Usd(4));
  auto p2 = x_.RequestPayout(kProvider, Usd(4), ledger_, now_, &changes_);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(x_.ListPendingPayouts(10).size(), 2u);
  auto paid = x_.ResolvePayout(kAdmin, p1->id, true, ledger_, now_, &changes_);
  ASSERT_TRUE(paid.ok());
  EXPECT_EQ(paid->status, PayoutStatus::kPaid);
  EXPECT_EQ(paid->admin_id, kAdmin);
  EXPECT_EQ(x_.ResolvePayout(kAdmin, p1->id, true, ledger_, now_, &changes_).status().code(),
            StatusCode::kFailedPrecondition);
  auto rejected = x_.ResolvePayout(kAdmin, p2->id, false, ledger_, now_, &changes_);
  ASSERT_TRUE(rejected.ok());
  EXPECT_EQ(Payable(kProvider), Usd(4));  // the rejected payout is available again
  EXPECT_EQ(ledger_.GetAccount(AccountKey::System(AccountKind::kPayouts, Currency::kUsd))->posted(),
            Usd(5));
  auto e = x_.ProviderEarnings(kProvider, ledger_);
  EXPECT_EQ(e.paid_out_micros, Usd(5));
  EXPECT_EQ(e.pending_payout_micros, 0);
  EXPECT_EQ(e.available_micros, Usd(4));
}

// ----- Persistence ---------------------------------------------------------------------------

TEST_F(ExchangeTest, RestoreRebuildsTheSameExchange) {
  MachineId m1 = NewMachine(kProvider, 8);
  MachineId m2 = NewMachine(kProvider2, 4, "DFW-1");
  AskOn(m1, Usd(2.5));
  AskOn(m2, Usd(2.0), 2, 0, kProvider2);
  Fund(kAlice, Usd(100));
  Fund(kBob, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 4, std::nullopt).ok());
  ASSERT_TRUE(Buy(kBob, 2, Usd(3), TimeInForce::kGtc).ok());                        // fills on m2
  ASSERT_TRUE(Buy(kBob, 8, Usd(3), TimeInForce::kGtc, "", now_ + 5 * kHour).ok());  // rests
  ASSERT_TRUE(x_.RequestPayout(kProvider, Usd(1), ledger_, now_, &changes_).ok());
  Advance(2 * kHour);

  auto restored = Exchange::Restore(Config(), x_.Records());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  Exchange& y = *restored;
  EXPECT_TRUE(y.CheckInvariants(ledger_).ok());
  EXPECT_TRUE(y.CheckSettlement(ledger_).ok());
  auto a = x_.Records(), b = y.Records();
  EXPECT_EQ(a.machines, b.machines);
  EXPECT_EQ(a.asks, b.asks);
  EXPECT_EQ(a.bids, b.bids);
  EXPECT_EQ(a.leases, b.leases);
  EXPECT_EQ(a.trades, b.trades);
  EXPECT_EQ(a.payouts, b.payouts);
  EXPECT_EQ(x_.NextEventAt(), y.NextEventAt());
  EXPECT_EQ(x_.Book("H100 SXM", 10)->asks.size(), y.Book("H100 SXM", 10)->asks.size());
  // Both continue identically: the restored one on a copy of the ledger.
  ledger::Ledger copy = ledger_;
  Changes c1, c2;
  x_.AdvanceTo(ledger_, now_ + 10 * kHour, &c1);
  y.AdvanceTo(copy, now_ + 10 * kHour, &c2);
  EXPECT_EQ(x_.Records().leases, y.Records().leases);
  EXPECT_EQ(x_.Records().bids, y.Records().bids);
  EXPECT_EQ(ledger_.Accounts(), copy.Accounts());
  // Ids continue after the highest stored one.
  auto m3 = y.AddMachine(kProvider, {"A100 SXM", 1, "PDX-1", 1, 1, 1}, now_, &c2);
  EXPECT_EQ(m3->id, 3);

  Snapshot broken = x_.Records();
  for (auto& l : broken.leases) l.status = LeaseStatus::kActive;
  broken.leases.push_back(broken.leases.front());
  broken.leases.back().id = 99;
  auto bad = Exchange::Restore(Config(), broken);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

TEST_F(ExchangeTest, ChangesNameEverythingToPersist) {
  changes_.Clear();
  MachineId m = NewMachine(kProvider, 8);
  OrderId ask = AskOn(m, Usd(2.0));
  Fund(kAlice, Usd(100));
  changes_.Clear();
  auto r = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(r.ok());
  changes_.Normalize();
  EXPECT_EQ(changes_.bids, std::vector<OrderId>{r->bid.id});
  EXPECT_EQ(changes_.leases, std::vector<LeaseId>{r->lease->id});
  ASSERT_EQ(changes_.trades.size(), 1u);
  EXPECT_EQ(changes_.trades[0].ask_id, ask);
  ASSERT_EQ(changes_.transfers.size(), 2u);  // provider leg and fee leg
  EXPECT_EQ(changes_.transfers[0].id, "lease:1:h1:provider");
  EXPECT_EQ(changes_.transfers[1].id, "lease:1:h1:fee");
  EXPECT_TRUE(changes_.asks.empty());  // the ask record itself did not change
}

TEST_F(ExchangeTest, MarketsSummarizeTheBooks) {
  AskOn(NewMachine(kProvider, 8), Usd(2.88));
  AskOn(NewMachine(kProvider, 4), Usd(2.5));
  Fund(kAlice, Usd(100));
  ASSERT_TRUE(Buy(kAlice, 1, Usd(2.0), TimeInForce::kGtc).ok());
  ASSERT_TRUE(Buy(kAlice, 2, std::nullopt).ok());
  auto markets = x_.Markets();
  ASSERT_EQ(markets.size(), 2u);
  EXPECT_EQ(markets[0].gpu, "H100 SXM");
  EXPECT_EQ(markets[0].best_ask_micros, Usd(2.5));
  EXPECT_EQ(markets[0].best_bid_micros, Usd(2.0));
  EXPECT_EQ(markets[0].gpus_on_offer, 10);
  EXPECT_EQ(markets[0].asks, 2u);
  EXPECT_EQ(markets[0].bids, 1u);
  ASSERT_TRUE(markets[0].last_trade.has_value());
  EXPECT_EQ(markets[0].last_trade->price_micros, Usd(2.5));
  EXPECT_EQ(markets[0].last_trade->gpus, 2);
  EXPECT_EQ(markets[1].gpu, "A100 SXM");
  EXPECT_FALSE(markets[1].best_ask_micros.has_value());
  auto offers = x_.Offers("", now_).value();
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[0].price_micros, Usd(2.5));
  EXPECT_EQ(offers[0].free_gpus, 2);
  EXPECT_EQ(offers[1].free_gpus, 8);
  EXPECT_EQ(x_.Book("nope", 5).status().code(), StatusCode::kNotFound);
}

// Closed records leave memory once persisted (Forget); the exchange then holds only open ones,
// keeps every total and id sequence, and one restored from the open records alone (what start-up
// reads) is the same exchange.
TEST_F(ExchangeTest, ForgetDropsClosedRecordsAndRestoreNeedsOnlyOpenOnes) {
  MachineId machine = NewMachine(kProvider, 8);
  OrderId ask = AskOn(machine, Usd(2.00));
  Fund(kAlice, Usd(200));
  auto filled = Buy(kAlice, 2, std::nullopt);
  ASSERT_TRUE(filled.ok()) << filled.status().ToString();
  const LeaseId lease = filled->lease->id;
  auto resting = Buy(kAlice, 1, Usd(1.00), TimeInForce::kGtc);
  ASSERT_TRUE(resting.ok());
  ASSERT_EQ(resting->bid.status, BidStatus::kResting);
  auto no_match = Buy(kAlice, 1, Usd(1.50));
  ASSERT_EQ(no_match->bid.status, BidStatus::kCancelled);
  Advance(2 * kMicrosPerHour);  // hours 2 and 3
  ASSERT_TRUE(x_.StopLease(kAlice, lease, ledger_, now_, &changes_).ok());
  auto paid = x_.RequestPayout(kProvider, Usd(5), ledger_, now_, &changes_);
  ASSERT_TRUE(paid.ok()) << paid.status().ToString();
  ASSERT_TRUE(x_.ResolvePayout(kAdmin, paid->id, true, ledger_, now_, &changes_).ok());
  auto pending = x_.RequestPayout(kProvider, Usd(2), ledger_, now_, &changes_);
  ASSERT_TRUE(pending.ok());
  const Earnings before = x_.ProviderEarnings(kProvider, ledger_);
  EXPECT_EQ(before.gross_micros, Usd(12));  // 3 hours x 2 GPUs x $2
  EXPECT_EQ(before.paid_out_micros, Usd(5));
  EXPECT_EQ(before.pending_payout_micros, Usd(2));

  // Persist, then forget: the changes name every record that changed.
  changes_.Normalize();
  EXPECT_EQ(changes_.providers, std::vector<UserId>{kProvider});
  forgotten_.bids = {*x_.FindBid(filled->bid.id), *x_.FindBid(no_match->bid.id)};
  forgotten_.leases = {*x_.FindLease(lease)};
  x_.Forget(changes_);
  EXPECT_EQ(x_.FindBid(filled->bid.id), nullptr);
  EXPECT_EQ(x_.FindBid(no_match->bid.id), nullptr);
  EXPECT_EQ(x_.FindLease(lease), nullptr);
  EXPECT_EQ(x_.FindPayout(paid->id), nullptr);
  ASSERT_NE(x_.FindBid(resting->bid.id), nullptr);
  ASSERT_NE(x_.FindPayout(pending->id), nullptr);
  ASSERT_NE(x_.FindAsk(ask), nullptr);
  ASSERT_EQ(x_.ListBids(kAlice, 10).size(), 1u);
  EXPECT_EQ(x_.ListBids(kAlice, 10)[0].id, resting->bid.id);
  EXPECT_TRUE(x_.ListCustomerLeases(kAlice, 10).empty());
  EXPECT_TRUE(x_.ListProviderLeases(kProvider, 10).empty());
  ASSERT_EQ(x_.ListPayouts(kProvider, 10).size(), 1u);
  const Earnings after = x_.ProviderEarnings(kProvider, ledger_);
  EXPECT_EQ(after.gross_micros, before.gross_micros);
  EXPECT_EQ(after.fee_micros, before.fee_micros);
  EXPECT_EQ(after.gpu_hours, 6);
  EXPECT_EQ(after.lease_hours, 3);
  EXPECT_EQ(after.paid_out_micros, Usd(5));
  EXPECT_EQ(after.pending_payout_micros, Usd(2));
  EXPECT_EQ(x_.lease_hours_sold(), 3);
  // A forgotten record is unknown to commands (the API answers from the store).
  EXPECT_EQ(x_.CancelBid(kAlice, filled->bid.id, ledger_, now_, &changes_).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(x_.StopLease(kAlice, lease, ledger_, now_, &changes_).status().code(),
            StatusCode::kNotFound);
  Check();

  // Memory: the open records, the totals and the last ids.
  const Snapshot open = x_.Records();
  EXPECT_EQ(open.bids.size(), 1u);
  EXPECT_TRUE(open.leases.empty());
  EXPECT_EQ(open.asks.size(), 1u);
  EXPECT_EQ(open.payouts.size(), 1u);
  EXPECT_EQ(open.trades.size(), 1u);  // the recent trades stay for market data
  ASSERT_EQ(open.providers.size(), 1u);
  EXPECT_EQ(open.providers[0].gross_micros, Usd(12));
  EXPECT_EQ(open.last_ids.order, no_match->bid.id);
  EXPECT_EQ(open.last_ids.lease, lease);
  EXPECT_EQ(open.last_ids.payout, pending->id);

  auto restored = Exchange::Restore(Config(), open);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  Exchange& y = *restored;
  ASSERT_TRUE(y.CheckInvariants(ledger_).ok());
  const Snapshot again = y.Records();
  EXPECT_EQ(again.bids, open.bids);
  EXPECT_EQ(again.asks, open.asks);
  EXPECT_EQ(again.payouts, open.payouts);
  EXPECT_EQ(again.trades, open.trades);
  EXPECT_EQ(again.providers, open.providers);
  EXPECT_EQ(again.last_ids, open.last_ids);
  EXPECT_EQ(y.ProviderEarnings(kProvider, ledger_).gross_micros, Usd(12));
  EXPECT_EQ(y.ProviderEarnings(kProvider, ledger_).pending_payout_micros, Usd(2));
  // Ids continue after the forgotten ones, on both.
  ledger::Ledger copy = ledger_;
  Changes c;
  auto next_x = Buy(kAlice, 1, Usd(1.50));
  auto next_y =
      y.PlaceBid(kAlice, {"H100 SXM", 1, "", false, Usd(1.50), TimeInForce::kIoc}, copy, now_, &c);
  ASSERT_TRUE(next_x.ok() && next_y.ok());
  EXPECT_EQ(next_x->bid.id, no_match->bid.id + 1);
  EXPECT_EQ(next_y->bid.id, next_x->bid.id);
  // Inconsistent history totals are refused.
  Snapshot bad = open;
  bad.providers.push_back(bad.providers[0]);
  EXPECT_EQ(Exchange::Restore(Config(), bad).status().code(), StatusCode::kInternal);
  bad = open;
  bad.providers[0].gross_micros = -1;
  EXPECT_EQ(Exchange::Restore(Config(), bad).status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace gpuhub::market
