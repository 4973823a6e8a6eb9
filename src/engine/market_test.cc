#include "engine/market.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/billing.h"
#include "engine/engine_test_fixture.h"
#include "engine/invariants.h"
#include "engine/ledger_archive.h"
#include "engine/market_rows.h"
#include "engine/wallets.h"
#include "store/read_pool.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;

class EngineMarketTest : public EngineOnSqliteTest {
 protected:
  EngineMarketTest() : EngineOnSqliteTest(1'800'000'000'000'000, "gpuhub_market") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      GPUHUB_ASSIGN_OR_RETURN(User p, CreateUser(txn, "paula", "h", kRoleProvider));
      GPUHUB_ASSIGN_OR_RETURN(User c, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      // No tax in this file's figures (a country without a rate); billing_test covers tax.
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, c.id, {"US", "", "", ""}).status());
      return std::vector<std::int64_t>{p.id, c.id, a.id};
    });
    provider_ = ids[0];
    customer_ = ids[1];
    admin_ = ids[2];
  }
  void Open() {
    EngineOptions options;
    options.domains.market.gpus = {"H100 SXM", "A100 SXM"};
    options.domains.market.regions = {"DFW-1", "IAD-1"};
    // These tests trade on machines without an agent: a simulated host runs them.
    options.domains.agents->simulated_hosts = simulated_hosts_;
    OpenEngine(options, [](Engine& e) {
      AddMarketTickHooks(e);
      AddAgentTickHooks(e);
    });
  }
  market::Snapshot Records() {
    return Run<market::Snapshot>(
        [](Txn& txn) -> Result<market::Snapshot> { return txn.state.market->exchange.Records(); });
  }
  std::int64_t Wallet() { return UsdAvailable(customer_); }
  void CheckAll() {
    Run<int>([](Txn& txn) -> Result<int> {
      InvariantReport report = CheckStateInvariants(txn.state, txn.now);
      if (!report.ok()) return Status::Internal(report.ToString());
      return 0;
    });
  }
  // The checks on a copy of the state that `corrupt` changed first (the live state stays sound).
  InvariantReport CheckCopy(TimestampMicros now, const std::function<void(State&)>& corrupt) {
    return Run<InvariantReport>([&](Txn& txn) -> Result<InvariantReport> {
      State copy;
      copy.accounts = txn.state.accounts;
      copy.wallets->ledger = txn.state.wallets->ledger;
      GPUHUB_ASSIGN_OR_RETURN(copy.market->exchange,
                              market::Exchange::Restore(market::ExchangeConfig{},
                                                        txn.state.market->exchange.Records()));
      corrupt(copy);
      return CheckStateInvariants(copy, now);
    });
  }

  // `credit` on the customer's USD wallet, `machine` listed by the provider with an ask at
  // `price_micros` per GPU-hour for a week, and a market bid of the customer for `gpus` of them.
  market::BidResult Lease(std::int64_t credit, const market::MachineSpec& machine,
                          std::int64_t price_micros, int gpus) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, admin_, customer_, Currency::kUsd, credit, "test").status());
      GPUHUB_ASSIGN_OR_RETURN(auto m, AddMachine(txn, provider_, machine));
      GPUHUB_RETURN_IF_ERROR(
          PlaceAsk(txn, provider_, {m.id, price_micros, 1, txn.now + 7 * kMicrosPerDay}).status());
      return 0;
    });
    return Run<market::BidResult>([&](Txn& txn) {
      market::BidSpec spec;
      spec.gpu = "H100 SXM";
      spec.gpus = gpus;
      spec.is_market = true;
      return PlaceBid(txn, customer_, spec);
    });
  }

  std::int64_t provider_ = 0, customer_ = 0, admin_ = 0;
  bool simulated_hosts_ = true;
};

TEST_F(EngineMarketTest, TradesLeasesAndHoursSurviveRestarts) {
  // Names as a user may type them: the exchange canonicalises them.
  auto bid = Lease(20 * kUsd, {"h100-sxm", 8, "iad-1", 64, 512, 2000}, 2'880'000, 2);
  ASSERT_TRUE(bid.lease.has_value());
  EXPECT_EQ(Wallet(), 20 * kUsd - 5'760'000);
  market::Snapshot before = Records();

  Open();  // restart: everything comes back from the database
  market::Snapshot after = Records();
  EXPECT_EQ(before.machines, after.machines);
  EXPECT_EQ(before.asks, after.asks);
  EXPECT_EQ(before.bids, after.bids);
  EXPECT_EQ(before.leases, after.leases);
  EXPECT_EQ(before.trades, after.trades);
  EXPECT_EQ(Wallet(), 20 * kUsd - 5'760'000);
  CheckAll();

  Advance(7 * kMicrosPerDay);  // bills hours 2 and 3, then the wallet runs dry
  Open();
  // The ended lease left memory (only open records are held); its final row is the store's.
  market::Snapshot end = Records();
  EXPECT_TRUE(end.leases.empty());
  EXPECT_EQ(end.last_ids.lease, 1);
  store::ReadPool reads(url_, 1);
  std::vector<market::Lease> stored;
  ASSERT_TRUE(reads
                  .Query(OpenRowsSelect("market_leases", LeaseColumns(), "ended"),
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(auto l, LeaseFromRow(row));
                           stored.push_back(l);
                           return Status::Ok();
                         })
                  .ok());
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].hours_paid, 3);
  EXPECT_EQ(stored[0].status, market::LeaseStatus::kEnded);
  EXPECT_EQ(stored[0].end_reason, market::LeaseEndReason::kUnpaid);
  EXPECT_EQ(Wallet(), 20 * kUsd - 3 * 5'760'000);
  auto earnings = Run<market::Earnings>([&](Txn& txn) -> Result<market::Earnings> {
    return txn.state.market->exchange.ProviderEarnings(provider_, txn.state.wallets->ledger);
  });
  EXPECT_EQ(earnings.net_micros, 3 * 5'184'000);  // from the kept totals, not from the lease
  EXPECT_EQ(earnings.lease_hours, 3);
  EXPECT_EQ(earnings.gpu_hours, 6);
  EXPECT_EQ(earnings.available_micros, 3 * 5'184'000);
  CheckAll();
}

// The ledger keeps a window of 8 transfers here (100,000 in production): lease hours, holds
// placed and released, restarts. Balances, the invariants (whose audits read the forgotten part
// back from the store), history pages and the persisted totals all agree with a full replay.
TEST_F(EngineMarketTest, TheLedgerForgetsOldTransfersAndTheStoreAnswersForThem) {
  auto open_small = [&] {
    EngineOptions options;
    options.domains.market.gpus = {"H100 SXM", "A100 SXM"};
    options.domains.market.regions = {"DFW-1", "IAD-1"};
    options.domains.ledger_transfers_in_memory = 8;
    options.domains.agents->simulated_hosts = true;
    OpenEngine(options, AddMarketTickHooks);
  };
  open_small();
  auto live_report = [&] {
    return Run<InvariantReport>([](Txn& txn) -> Result<InvariantReport> {
      return CheckStateInvariants(txn.state, txn.now, /*replay_stored_history=*/false);
    });
  };
  // While every transfer is in memory the live report runs every check.
  InvariantReport early = live_report();
  EXPECT_TRUE(early.ok()) << early.ToString();
  // billing.memory, .documents, .charge_documents, alerts.index and quote_requests included
  EXPECT_EQ(early.checks.size(), 14u);
  EXPECT_TRUE(early.skipped.empty());
  auto bid = Lease(200 * kUsd, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}, 2'000'000, 1);
  ASSERT_TRUE(bid.lease.has_value());
  // Resting bids under the ask: each holds money (a pending transfer); every other one cancelled.
  std::vector<market::OrderId> resting;
  for (int i = 0; i < 12; ++i) {
    auto placed = Run<market::BidResult>([&](Txn& txn) {
      market::BidSpec spec;
      spec.gpu = "A100 SXM";
      spec.gpus = 1;
      spec.limit_micros = 1'000'000 + i * 1'000;
      spec.time_in_force = market::TimeInForce::kGtc;
      return PlaceBid(txn, customer_, spec);
    });
    if (i % 2 == 0) {
      Run<market::Bid>([&](Txn& txn) { return CancelBid(txn, customer_, placed.bid.id); });
    } else {
      resting.push_back(placed.bid.id);
    }
  }
  for (int h = 0; h < 6; ++h) Advance(kMicrosPerHour);  // six more lease hours
  const std::int64_t wallet = Wallet();
  auto ledger_of = [&] {
    return Run<ledger::Ledger>(
        [](Txn& txn) -> Result<ledger::Ledger> { return txn.state.wallets->ledger; });
  };
  ledger::Ledger windowed = ledger_of();
  EXPECT_GT(windowed.FirstSequence(), 10);
  EXPECT_LT(windowed.Transfers().size(), 40u);
  CheckAll();  // CheckHistory, settlement of every hour and lease_hours_once read the store
  // The live endpoint's report (on the writer) does not replay what only the store holds.
  InvariantReport live = live_report();
  EXPECT_TRUE(live.ok()) << live.ToString();
  EXPECT_EQ(live.checks.size(), 12u);  // every document is in memory: billing runs in full
  ASSERT_EQ(live.skipped.size(), 2u);
  EXPECT_EQ(live.skipped[0].rfind("ledger.history: not replayed here", 0), 0u) << live.skipped[0];
  EXPECT_EQ(live.skipped[1].rfind("market.lease_hours_once: not replayed here", 0), 0u);

  // Every row of the store replayed from scratch gives the same books.
  auto store = OpenMigrated(url_);
  std::vector<ledger::Transfer> rows;
  ASSERT_TRUE(store
                  ->Scan("ledger_transfers", TransferColumns(), "sequence",
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(auto t, TransferFromRow(row));
                           rows.push_back(t);
                           return Status::Ok();
                         })
                  .ok());
  auto whole = ledger::Ledger::Restore(rows, {});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->Accounts(), windowed.Accounts());
  // The stored state of each pending transfer is how it ended.
  for (const auto& t : rows) {
    if (t.kind == ledger::TransferKind::kPending) {
      EXPECT_EQ(t.state, whole->FindTransfer(t.id)->state) << t.id;
    }
  }
  // The persisted totals are the accounts' as of the last checkpoint (every 4 transfers with this
  // window of 8), which the marker names.
  const std::int64_t through = StoredLedgerAccountsThrough(url_);
  EXPECT_LE(through, windowed.LastSequence());
  EXPECT_GT(through, windowed.LastSequence() - 4);
  auto then = ledger::Ledger::Restore(
      std::vector<ledger::Transfer>(rows.begin(), rows.begin() + through), {});
  ASSERT_TRUE(then.ok()) << then.status().ToString();
  std::size_t stored_accounts = 0;
  ASSERT_TRUE(store
                  ->Scan("ledger_accounts", AccountColumns(), "kind, owner_id, currency",
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(ledger::AccountBalance b, AccountFromRow(row));
                           EXPECT_EQ(b, then->GetAccount(b.key).value())
                               << ledger::AccountKeyName(b.key);
                           ++stored_accounts;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(stored_accounts, then->Accounts().size());
  store.reset();
  // History pages through the window and on into the store, as the full replay lists them.
  auto all_pages = [](const ledger::Ledger& l, std::int64_t owner) {
    std::vector<std::string> ids;
    std::int64_t cursor = 0;
    do {
      auto page = l.ListOwnerTransfers(owner, cursor, 5);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok()) break;
      for (const auto& t : page->transfers) {
        ids.push_back(t.id + "/" + std::string(ledger::TransferStateName(t.state)));
      }
      cursor = page->next_before_sequence;
    } while (cursor != 0);
    return ids;
  };
  auto paged = Run<std::vector<std::string>>([&](Txn& txn) -> Result<std::vector<std::string>> {
    return all_pages(txn.state.wallets->ledger, customer_);
  });
  EXPECT_EQ(paged, all_pages(whole.value(), customer_));
  EXPECT_GT(paged.size(), 20u);

  // A restart starts from the persisted totals, the open holds and the newest transfers.
  open_small();
  EXPECT_EQ(Wallet(), wallet);
  EXPECT_EQ(ledger_of().Accounts(), whole->Accounts());
  CheckAll();
  // The holds of bids placed long ago (forgotten from the window, kept as open) release.
  for (market::OrderId id : resting) {
    Run<market::Bid>([&](Txn& txn) { return CancelBid(txn, customer_, id); });
  }
  auto after = Run<std::array<ledger::AccountBalance, kCurrencyCount>>(
      [&](Txn& txn) { return txn.state.wallets->ledger.Wallets(customer_); });
  EXPECT_EQ(after[0].debits_pending, 0);
  const std::int64_t held =
      windowed.GetAccount(ledger::AccountKey::Wallet(customer_, Currency::kUsd))->debits_pending;
  EXPECT_GT(held, 0);
  EXPECT_EQ(Wallet(), wallet + held);
  CheckAll();

  // A transfer reusing a forgotten id: memory cannot see the clash, the store's UNIQUE(id)
  // refuses the commit, the engine reloads, and no money moved.
  const std::string old_id = rows.front().id;
  const std::int64_t before = Wallet();
  auto clash = engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
    ledger::TransferRequest again;
    again.id = old_id;
    again.debit = ledger::AccountKey::System(ledger::AccountKind::kDeposits, Currency::kUsd);
    again.credit = ledger::AccountKey::Wallet(customer_, Currency::kUsd);
    again.amount_micros = 5 * kUsd;
    again.code = "topup";
    again.timestamp = txn.now;
    auto applied = txn.state.wallets->ledger.Apply(again);
    if (!applied.ok()) return applied.status();
    WriteTransfers(txn, applied.transfers);
    return 0;
  });
  EXPECT_EQ(clash.status().code(), StatusCode::kUnavailable) << clash.status().ToString();
  EXPECT_EQ(Wallet(), before);
  CheckAll();
}

std::string Failed(const InvariantReport& report) {
  std::string names;
  for (const auto& c : report.checks) {
    if (!c.status.ok()) names += c.name + " ";
  }
  return names;
}

TEST_F(EngineMarketTest, TheInvariantsCatchASkippedHourAndAnHourChargedTwice) {
  auto bid = Lease(100 * kUsd, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}, 2'000'000, 1);
  ASSERT_TRUE(bid.lease.has_value());
  const TimestampMicros start = clock_.NowMicros();
  auto none = [](State&) {};
  EXPECT_EQ(Failed(CheckCopy(start, none)), "");
  EXPECT_EQ(CheckCopy(start, none).checks.size(), 14u);  // alerts.index and quote_requests too
  // An hour later without a tick: the second hour was never charged.
  EXPECT_EQ(Failed(CheckCopy(start + kMicrosPerHour, none)), "market.leases_paid_up ");
  EXPECT_EQ(Failed(CheckCopy(0, none)), "");  // a backup: no clock to compare with
  // The first hour charged again under another id: money moved for an hour no lease counts.
  auto twice = [&](State& s) {
    ledger::TransferRequest again;
    again.id = "lease:" + std::to_string(bid.lease->id) + ":h1:provider-again";
    again.debit = ledger::AccountKey::Wallet(customer_, Currency::kUsd);
    again.credit = ledger::AccountKey::Payable(provider_, Currency::kUsd);
    again.amount_micros = 1'800'000;
    again.code = "lease_hour";
    again.timestamp = start;
    ASSERT_TRUE(s.wallets->ledger.Apply(again).ok());
  };
  InvariantReport report = CheckCopy(start, twice);
  EXPECT_EQ(Failed(report), "market.lease_hours_once ") << report.ToString();
  EXPECT_NE(report.ToString().find("2 lease-hour charges but the providers' totals count 1 sold"),
            std::string::npos)
      << report.ToString();
  Advance(kMicrosPerHour);
  CheckAll();
}

TEST_F(EngineMarketTest, AFailedCommandLeavesNoRows) {
  auto r = engine_->ExecuteSync<market::Machine>([&](Txn& txn) {
    return AddMachine(txn, provider_, {"H100 SXM", 99, "IAD-1", 1, 1, 1});
  });
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  auto m = Run<market::Machine>([&](Txn& txn) {
    return AddMachine(txn, provider_, {"H100 SXM", 8, "IAD-1", 1, 1, 1});
  });
  Run<market::Ask>([&](Txn& txn) {
    return PlaceAsk(txn, provider_, {m.id, 2'000'000, 1, txn.now + kMicrosPerDay});
  });
  auto bid = engine_->ExecuteSync<market::BidResult>([&](Txn& txn) {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = 1;
    spec.is_market = true;
    return PlaceBid(txn, customer_, spec);  // an empty wallet
  });
  EXPECT_EQ(bid.status().code(), StatusCode::kInsufficientFunds);
  Open();
  market::Snapshot s = Records();
  EXPECT_EQ(s.machines.size(), 1u);
  EXPECT_TRUE(s.bids.empty());
  EXPECT_TRUE(s.leases.empty());
  CheckAll();
}

// A bid made by an earlier command gets only its outcome written (status, reason, close time,
// lease, hold): the stored row must still be the whole bid, whether it was cancelled, filled by an
// ask that came later, or made and closed inside one command.
TEST_F(EngineMarketTest, ABidsStoredRowIsTheBidAfterEveryOutcome) {
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(
        ManualCredit(txn, admin_, customer_, Currency::kUsd, 100 * kUsd, "test").status());
    return 0;
  });
  auto gtc = [&](std::int64_t limit_micros) {
    return Run<market::BidResult>([&](Txn& txn) {
      market::BidSpec spec;
      spec.gpu = "H100 SXM";
      spec.gpus = 1;
      spec.limit_micros = limit_micros;
      spec.time_in_force = market::TimeInForce::kGtc;
      spec.expires_at = txn.now + kMicrosPerDay;
      return PlaceBid(txn, customer_, spec);
    });
  };
  market::BidResult cancelled = gtc(1'500'000);
  market::BidResult filled = gtc(2'500'000);
  ASSERT_EQ(cancelled.bid.status, market::BidStatus::kResting);
  ASSERT_EQ(filled.bid.status, market::BidStatus::kResting);
  std::vector<market::Bid> expected;
  expected.push_back(
      Run<market::Bid>([&](Txn& txn) { return CancelBid(txn, customer_, cancelled.bid.id); }));
  auto m = Run<market::Machine>([&](Txn& txn) {
    return AddMachine(txn, provider_, {"H100 SXM", 8, "IAD-1", 1, 1, 1});
  });
  Run<market::Ask>([&](Txn& txn) {
    return PlaceAsk(txn, provider_, {m.id, 2'000'000, 1, txn.now + kMicrosPerDay});
  });
  // The ask met the resting bid: it closed as filled, with its lease.
  market::Snapshot records = Records();
  ASSERT_EQ(records.leases.size(), 1u);
  market::Bid fill = filled.bid;
  fill.status = market::BidStatus::kFilled;
  fill.close_reason = market::BidCloseReason::kFilled;
  fill.lease_id = records.leases[0].id;
  fill.closed_at = records.leases[0].started_at;
  expected.push_back(fill);
  // Made and closed by one command (an IOC bid below every ask): one whole row.
  market::BidResult unmatched = Run<market::BidResult>([&](Txn& txn) {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = 1;
    spec.limit_micros = 1'000'000;
    return PlaceBid(txn, customer_, spec);
  });
  ASSERT_EQ(unmatched.bid.status, market::BidStatus::kCancelled);
  expected.push_back(unmatched.bid);

  store::ReadPool reads(url_, 1);
  for (const market::Bid& bid : expected) {
    store::Select select;
    select.table = "market_bids";
    select.columns = BidColumns();
    select.where = {{"id", store::Condition::Op::kEq, bid.id}};
    std::vector<market::Bid> stored;
    ASSERT_TRUE(reads
                    .Query(select,
                           [&](const store::Row& row) -> Status {
                             GPUHUB_ASSIGN_OR_RETURN(auto b, BidFromRow(row));
                             stored.push_back(b);
                             return Status::Ok();
                           })
                    .ok());
    ASSERT_EQ(stored.size(), 1u) << bid.id;
    EXPECT_EQ(stored[0], bid) << bid.id;
  }
  EXPECT_EQ(expected[0].status, market::BidStatus::kCancelled);
  EXPECT_EQ(expected[0].close_reason, market::BidCloseReason::kCancelledByUser);
  EXPECT_GT(expected[0].closed_at, 0);
  // Nothing resting: the partial index of resting bids holds none of them.
  std::int64_t resting = -1;
  store::Select count;
  count.table = "market_bids";
  count.columns = {"count(*)"};
  count.where = {{"status", store::Condition::Op::kEq, std::string("resting")}};
  ASSERT_TRUE(reads
                  .Query(count,
                         [&](const store::Row& row) -> Status {
                           GPUHUB_ASSIGN_OR_RETURN(resting, row.Int(0));
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(resting, 0);
  Open();
  EXPECT_TRUE(Records().bids.empty());
  CheckAll();
}

// The production default: a machine nobody runs is not sold. Listed without an agent it is held
// with the reason in words, its ask rests off the book and a market bid finds nothing; a machine
// listed while simulated hosts were on is held at the first tick once they are off.
TEST_F(EngineMarketTest, NothingIsSoldWithoutAnAgent) {
  const market::MachineSpec spec{"H100 SXM", 8, "DFW-1", 64, 512, 2000};
  auto sold = Lease(100 * kUsd, spec, 2 * kUsd, 1);  // simulated: sold, as the demo does
  ASSERT_EQ(sold.bid.status, market::BidStatus::kFilled);
  simulated_hosts_ = false;
  Open();
  Advance(kMicrosPerSecond);  // the first tick holds what was listed before
  auto listed = Records().machines;
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].hold_reason, kNoAgentHoldReason);
  auto r = Lease(100 * kUsd, spec, 2 * kUsd, 1);
  EXPECT_EQ(r.bid.status, market::BidStatus::kCancelled);
  EXPECT_EQ(r.bid.close_reason, market::BidCloseReason::kNoMatch);
  auto machines = Records().machines;
  ASSERT_EQ(machines.size(), 2u);
  EXPECT_EQ(machines[1].hold_reason, kNoAgentHoldReason);
  EXPECT_EQ(Run<std::size_t>([](Txn& txn) -> Result<std::size_t> {
              auto offers = txn.state.market->exchange.Offers("", txn.now);
              GPUHUB_RETURN_IF_ERROR(offers.status());
              return offers->size();
            }),
            0u);
  CheckAll();
}

TEST_F(EngineMarketTest, DemoSeedingIsIdempotent) {
  std::vector<DemoOffer> offers = {{"H100 SXM", 2'880'000}, {"A100 SXM", 1'790'000}};
  ASSERT_TRUE(SeedDemoMarket(*engine_, offers, {"DFW-1", "IAD-1"}).ok());
  ASSERT_TRUE(SeedDemoMarket(*engine_, offers, {"DFW-1", "IAD-1"}).ok());
  Open();
  ASSERT_TRUE(SeedDemoMarket(*engine_, offers, {"DFW-1", "IAD-1"}).ok());
  auto markets = Run<std::vector<market::MarketSummary>>(
      [](Txn& txn) -> Result<std::vector<market::MarketSummary>> {
        return txn.state.market->exchange.Markets();
      });
  ASSERT_EQ(markets.size(), 2u);
  EXPECT_EQ(markets[0].best_ask_micros, 2'880'000);
  EXPECT_EQ(markets[0].asks, 1u);
  EXPECT_EQ(markets[0].gpus_on_offer, 8);
  EXPECT_EQ(markets[1].best_ask_micros, 1'790'000);
  EXPECT_EQ(Records().machines.size(), 2u);
  EXPECT_EQ(Records().machines[1].region, "IAD-1");
  CheckAll();
}

}  // namespace
}  // namespace gpuhub::engine
