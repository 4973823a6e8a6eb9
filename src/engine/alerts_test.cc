#include "engine/alerts.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/accounts.h"
#include "engine/agents.h"
#include "engine/billing.h"
#include "engine/engine_test_fixture.h"
#include "engine/invariants.h"
#include "engine/limits.h"
#include "engine/market.h"
#include "engine/notifications.h"
#include "engine/rentals.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

constexpr std::int64_t kUsd = 1'000'000;

rentals::FleetConfig Fleet() {
  rentals::FleetConfig c;
  c.regions = {"DFW-1", "IAD-1"};
  c.cards = {{"H100 SXM", 1690 * kUsd, 475 * kUsd, false, {1, 2, 4, 8}, c.regions, true, 2000},
             {"A40", 390 * kUsd, 110 * kUsd, false, {1, 2}, {"DFW-1"}, false, 0}};
  return c;
}

class EngineAlertsTest : public EngineOnSqliteTest {
 protected:
  EngineAlertsTest() : EngineOnSqliteTest(1'800'000'000'000'000, "gpuhub_alerts") {}
  void SetUp() override {
    Open();
    auto ids = Run<std::vector<std::int64_t>>([](Txn& txn) -> Result<std::vector<std::int64_t>> {
      GPUHUB_ASSIGN_OR_RETURN(User p, CreateUser(txn, "paula", "h", kRoleProvider));
      GPUHUB_ASSIGN_OR_RETURN(User c, CreateUser(txn, "carl", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User d, CreateUser(txn, "dora", "h", kRoleCustomer));
      GPUHUB_ASSIGN_OR_RETURN(User a, CreateUser(txn, "admin", "h", kRoleAdmin));
      GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, c.id, {"US", "", "", ""}).status());
      GPUHUB_RETURN_IF_ERROR(
          ManualCredit(txn, a.id, c.id, Currency::kUsd, 100'000 * kUsd, "test").status());
      return std::vector<std::int64_t>{p.id, c.id, d.id, a.id};
    });
    provider_ = ids[0];
    customer_ = ids[1];
    other_ = ids[2];
  }
  void Open() {
    EngineOptions options;
    options.domains.market.gpus = {"H100 SXM", "A100 SXM"};
    options.domains.market.regions = {"DFW-1", "IAD-1"};
    options.domains.agents->simulated_hosts = true;
    options.domains.rentals = Fleet();
    OpenEngine(options, [](Engine& e) {
      AddMarketTickHooks(e);
      AddRentalsTickHooks(e);
      AddAgentTickHooks(e);
      AddAlertHooks(e);
    });
  }
  // An 8-GPU H100 SXM machine of the provider in IAD-1 with an ask at `price` (micro-USD).
  std::pair<market::MachineId, market::OrderId> Offer(std::int64_t price) {
    return Run<std::pair<market::MachineId, market::OrderId>>(
        [&](Txn& txn) -> Result<std::pair<market::MachineId, market::OrderId>> {
          GPUHUB_ASSIGN_OR_RETURN(
              auto m, AddMachine(txn, provider_, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}));
          GPUHUB_ASSIGN_OR_RETURN(
              auto a, PlaceAsk(txn, provider_, {m.id, price, 1, txn.now + 7 * kMicrosPerDay}));
          return std::pair{m.id, a.id};
        });
  }
  market::OrderId Ask(market::MachineId machine, std::int64_t price) {
    return Run<market::OrderId>([&](Txn& txn) -> Result<market::OrderId> {
      GPUHUB_ASSIGN_OR_RETURN(
          auto a, PlaceAsk(txn, provider_, {machine, price, 1, txn.now + 7 * kMicrosPerDay}));
      return a.id;
    });
  }
  void Cancel(market::OrderId ask) {
    Run<int>([&](Txn& txn) -> Result<int> {
      GPUHUB_RETURN_IF_ERROR(CancelAsk(txn, provider_, ask).status());
      return 0;
    });
  }
  Result<Alert> Create(std::int64_t user, const AlertSpec& spec) {
    return engine_->ExecuteSync<Alert>([&](Txn& txn) { return CreateAlert(txn, user, spec); });
  }
  AlertSpec Price(std::optional<std::int64_t> max) {
    return {AlertKind::kPrice, "h100 sxm", "", 0, max};
  }
  AlertSpec Stock(std::string gpu, int count, std::string region) {
    return {AlertKind::kStock, std::move(gpu), std::move(region), count, std::nullopt};
  }
  // The user's notifications of `kind`, oldest first.
  std::vector<Notification> Notices(std::int64_t user, const std::string& kind) {
    auto page = Run<NotificationPage>([&](Txn& txn) -> Result<NotificationPage> {
      return ListNotifications(txn.state, user, 0, 1000);
    });
    std::vector<Notification> out;
    for (auto it = page.items.rbegin(); it != page.items.rend(); ++it) {
      if (it->kind == kind) out.push_back(*it);
    }
    return out;
  }
  Alert Get(std::int64_t user, std::int64_t id) {
    return Run<Alert>([&](Txn& txn) -> Result<Alert> {
      const Alert* a = FindAlert(txn.state, user, id);
      if (!a) return Status::NotFound("no alert");
      return *a;
    });
  }
  void CheckAll() {
    Run<int>([](Txn& txn) -> Result<int> {
      InvariantReport report = CheckStateInvariants(txn.state, txn.now);
      if (!report.ok()) return Status::Internal(report.ToString());
      return 0;
    });
  }

  std::int64_t provider_ = 0, customer_ = 0, other_ = 0;
};

TEST_F(EngineAlertsTest, APriceAlertFiresOncePerCrossingAndSurvivesARestart) {
  auto [machine_a, ask_a] = Offer(3'000'000);
  auto alert = Create(customer_, Price(2'500'000));
  ASSERT_TRUE(alert.ok()) << alert.status().ToString();
  EXPECT_EQ(alert->gpu, "H100 SXM");  // canonical
  EXPECT_EQ(alert->fired_count, 0);
  auto [machine_b, ask_b] = Offer(2'400'000);  // the best ask falls under $2.500: fires
  EXPECT_EQ(Get(customer_, alert->id).fired_count, 1);
  auto notes = Notices(customer_, "alert.price");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].subject, "alert:" + std::to_string(alert->id));
  EXPECT_EQ(notes[0].message,
            "Spot H100 SXM is offered at $2.400 per GPU-hour, at or under your "
            "$2.500 (alert " +
                std::to_string(alert->id) + ")");
  EXPECT_NE(notes[0].data_json.find("\"best_ask_usd_per_gpu_hour\":\"2.400\""), std::string::npos)
      << notes[0].data_json;
  Offer(2'450'000);  // another ask, still under: no second notification
  EXPECT_EQ(Notices(customer_, "alert.price").size(), 1u);
  CheckAll();

  Open();  // restart: the alert and what its index saw come back; nothing fires by itself
  EXPECT_EQ(Get(customer_, alert->id).fired_count, 1);
  CheckAll();
  Cancel(ask_b);  // best 2.450: still under
  EXPECT_EQ(Notices(customer_, "alert.price").size(), 1u);
  auto asks = Run<std::vector<market::Ask>>([&](Txn& txn) -> Result<std::vector<market::Ask>> {
    return txn.state.market->exchange.ListAsks(provider_, 100);
  });
  for (const auto& a : asks) {
    if (a.status == market::AskStatus::kOpen && a.price_micros == 2'450'000) Cancel(a.id);
  }
  // Back to $3.000: re-armed; a new ask at exactly $2.500 fires it again (at counts as under).
  Ask(machine_b, 2'500'000);
  EXPECT_EQ(Get(customer_, alert->id).fired_count, 2);
  EXPECT_EQ(Notices(customer_, "alert.price").size(), 2u);
  CheckAll();
  // A lease that takes all 8 GPUs of the $2.500 machine: the best is $3.000 again (re-armed);
  // its stop brings them back and the alert fires a third time.
  auto bid = Run<market::BidResult>([&](Txn& txn) {
    market::BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = 8;
    spec.is_market = true;
    return PlaceBid(txn, customer_, spec);
  });
  ASSERT_TRUE(bid.lease.has_value());
  EXPECT_EQ(bid.lease->price_micros, 2'500'000);
  EXPECT_EQ(Get(customer_, alert->id).fired_count, 2);
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(StopLease(txn, customer_, bid.lease->id).status());
    return 0;
  });
  EXPECT_EQ(Get(customer_, alert->id).fired_count, 3);
  CheckAll();
  (void)machine_a;
  (void)ask_a;
}

TEST_F(EngineAlertsTest, AnAlertThatHoldsWhenMadeFiresAtOnceAndAnyOfferMeetsAnAlertWithoutPrice) {
  auto any = Create(customer_, Price(std::nullopt));
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->max_price_micros, kAnyPriceMicros);
  EXPECT_EQ(any->fired_count, 0);  // no asks yet
  Offer(9'000'000);
  EXPECT_EQ(Get(customer_, any->id).fired_count, 1);
  auto at_once = Create(customer_, Price(9'000'000));
  ASSERT_TRUE(at_once.ok());
  EXPECT_EQ(at_once->fired_count, 1);
  auto notes = Notices(customer_, "alert.price");
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].message, "Spot H100 SXM is offered at $9.000 per GPU-hour (alert " +
                                  std::to_string(any->id) + ")");
}

TEST_F(EngineAlertsTest, AStockAlertFiresWhenASetIsFreeAgainInItsRegion) {
  auto node = Run<rentals::Node>([](Txn& txn) {
    return AddRentalNode(txn, {"H100 SXM", "DFW-1", 0, "dfw1-a", {}, {}});
  });
  // One card rented: no 8-card set is free in DFW-1.
  auto rental = Run<rentals::Rental>([&](Txn& txn) {
    rentals::OrderSpec s;
    s.gpu = "H100 SXM";
    s.count = 1;
    s.term = rentals::Term::kWeek;
    return OrderRental(txn, customer_, s);
  });
  auto eight = Create(other_, Stock("h100 sxm", 8, "dfw-1"));
  ASSERT_TRUE(eight.ok()) << eight.status().ToString();
  EXPECT_EQ(eight->region, "DFW-1");
  EXPECT_EQ(eight->fired_count, 0);
  auto anywhere = Create(other_, Stock("H100 SXM", 8, ""));
  ASSERT_TRUE(anywhere.ok());
  auto one = Create(other_, Stock("H100 SXM", 1, "DFW-1"));  // 7 single cards free: at once
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->fired_count, 1);
  // A second node in IAD-1: the any-region alert fires, DFW-1's does not.
  Run<rentals::Node>([](Txn& txn) {
    return AddRentalNode(txn, {"H100 SXM", "IAD-1", 0, "iad1-a", {}, {}});
  });
  EXPECT_EQ(Get(other_, anywhere->id).fired_count, 1);
  EXPECT_EQ(Get(other_, eight->id).fired_count, 0);
  // The release frees DFW-1's eight cards.
  Run<rentals::Rental>([&](Txn& txn) { return ReleaseRental(txn, customer_, rental.id); });
  EXPECT_EQ(Get(other_, eight->id).fired_count, 1);
  EXPECT_EQ(Get(other_, anywhere->id).fired_count, 1);  // it held already
  auto notes = Notices(other_, "alert.stock");
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[2].message, "8 × H100 SXM can be rented now in DFW-1 (1 set free; alert " +
                                  std::to_string(eight->id) + ")");
  // Draining the node takes its cards out of stock (re-arms), active again fires again.
  Run<rentals::Node>(
      [&](Txn& txn) { return SetRentalNodeState(txn, node.id, rentals::NodeState::kDraining); });
  Run<rentals::Node>(
      [&](Txn& txn) { return SetRentalNodeState(txn, node.id, rentals::NodeState::kActive); });
  EXPECT_EQ(Get(other_, eight->id).fired_count, 2);
  CheckAll();
}

TEST_F(EngineAlertsTest, BadSpecsOthersIdsAndTheLimitAreRefused) {
  auto field = [&](const AlertSpec& spec) {
    auto r = Create(customer_, spec);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string("ok") : r.status().field() + ": " + r.status().message();
  };
  EXPECT_EQ(field(Stock("A40", 4, "DFW-1")),
            "count: count must be one of the counts A40 is rented in: 1, 2");
  EXPECT_EQ(field(Stock("A40", 1, "IAD-1")),
            "region: A40 is not rented in 'IAD-1'; its regions: DFW-1");
  EXPECT_EQ(field(Stock("Z9", 1, "")),
            "gpu: unknown card 'Z9'; the term fleet rents H100 SXM, A40");
  EXPECT_EQ(field(Price(2'500'500)).substr(0, 22), "max_usd_per_gpu_hour: ");
  EXPECT_EQ(field(Price(0)).substr(0, 22), "max_usd_per_gpu_hour: ");
  EXPECT_EQ(field({AlertKind::kPrice, "nope", "", 0, 1'000'000}).substr(0, 5), "gpu: ");
  EXPECT_EQ(field({AlertKind::kPrice, "H100 SXM", "DFW-1", 0, 1'000'000}).substr(0, 8), "region: ");
  EXPECT_EQ(field({AlertKind::kStock, "A40", "", 1, 1'000'000}).substr(0, 22),
            "max_usd_per_gpu_hour: ");

  auto mine = Create(customer_, Stock("A40", 1, ""));
  ASSERT_TRUE(mine.ok());
  auto theirs = engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(CancelAlert(txn, other_, mine->id));
    return 0;
  });
  EXPECT_EQ(theirs.status().code(), StatusCode::kNotFound);
  for (std::size_t i = 1; i < kMaxAlertsPerAccount; ++i) {
    ASSERT_TRUE(Create(customer_, Price(static_cast<std::int64_t>(i) * 1000)).ok());
  }
  auto over = Create(customer_, Price(5'000'000));
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(CancelAlert(txn, customer_, mine->id));
    return 0;
  });
  EXPECT_TRUE(Create(customer_, Price(5'000'000)).ok());
  auto list = Run<std::vector<Alert>>(
      [&](Txn& txn) -> Result<std::vector<Alert>> { return ListAlerts(txn.state, customer_); });
  ASSERT_EQ(list.size(), kMaxAlertsPerAccount);
  EXPECT_GT(list.front().id, list.back().id);  // newest first
  CheckAll();
}

TEST_F(EngineAlertsTest, AFiringGoesToTheAccountsWebhookToo) {
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(SetWebhook(txn, customer_, "https://example.com/hook", false).status());
    return 0;
  });
  ASSERT_TRUE(Create(customer_, Price(3'000'000)).ok());
  Offer(2'000'000);
  auto deliveries =
      Run<std::vector<WebhookDelivery>>([&](Txn& txn) -> Result<std::vector<WebhookDelivery>> {
        return RecentDeliveries(txn.state, customer_, 10);
      });
  ASSERT_EQ(deliveries.size(), 1u);
  EXPECT_NE(deliveries[0].body.find("\"type\":\"alert.price\""), std::string::npos)
      << deliveries[0].body;
}

// Simulation through the engine: random asks, cancels, market buys, stops, rentals, releases and
// node changes with random alerts; after every command each alert has fired exactly as many times
// as its condition, read from the state after each command, went from false to true, and the
// state's invariants (the alert index's included) hold.
TEST_F(EngineAlertsTest, SimulationFiresExactlyOncePerCrossing) {
  std::mt19937_64 rng(29);
  struct Watch {
    std::int64_t user = 0;
    bool holds = false;
    std::int64_t crossings = 0;
  };
  std::map<std::int64_t, Watch> watched;
  std::vector<market::MachineId> machines;
  std::vector<rentals::NodeId> nodes;
  const std::vector<std::int64_t> users = {customer_, other_};
  auto observe = [&]() {
    Run<int>([&](Txn& txn) -> Result<int> {
      for (auto& [id, w] : watched) {
        const Alert* a = FindAlert(txn.state, w.user, id);
        if (!a) return Status::Internal("alert gone");
        const bool now = AlertHoldsNow(txn.state, *a);
        if (now && !w.holds) ++w.crossings;
        w.holds = now;
        if (a->fired_count != w.crossings) {
          return Status::Internal("alert " + std::to_string(id) + " fired " +
                                  std::to_string(a->fired_count) + " times for " +
                                  std::to_string(w.crossings) + " crossings");
        }
      }
      InvariantReport report = CheckStateInvariants(txn.state, txn.now);
      if (!report.ok()) return Status::Internal(report.ToString());
      return 0;
    });
  };
  for (int step = 0; step < 1500; ++step) {
    const auto op = rng() % 12;
    if (op == 0 && watched.size() < 40) {
      const std::int64_t user = users[rng() % users.size()];
      AlertSpec spec =
          rng() % 2 == 0
              ? Price(rng() % 8 == 0 ? std::nullopt
                                     : std::optional<std::int64_t>((10 + rng() % 30) * 100'000))
              : Stock(rng() % 2 ? "H100 SXM" : "A40", 1 << (rng() % 2),
                      rng() % 3 == 0 ? "" : "DFW-1");
      auto a = Create(user, spec);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      Watch w{user, a->fired_count == 1, a->fired_count};
      watched[a->id] = w;
    } else if (op == 1 && !watched.empty()) {
      auto it = std::next(watched.begin(), static_cast<long>(rng() % watched.size()));
      Run<int>([&](Txn& txn) -> Result<int> {
        GPUHUB_RETURN_IF_ERROR(CancelAlert(txn, it->second.user, it->first));
        return 0;
      });
      watched.erase(it);
    } else if (op == 2 && machines.size() < 6) {
      machines.push_back(Offer((10 + rng() % 30) * 100'000).first);
    } else if (op <= 4 && !machines.empty()) {  // a new price on a machine (its open ask replaced)
      const market::MachineId m = machines[rng() % machines.size()];
      (void)engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
        for (const auto& a : txn.state.market->exchange.ListAsks(provider_, 100)) {
          if (a.machine_id == m && a.status == market::AskStatus::kOpen) {
            GPUHUB_RETURN_IF_ERROR(CancelAsk(txn, provider_, a.id).status());
          }
        }
        if (rng() % 3 != 0) {
          GPUHUB_RETURN_IF_ERROR(
              PlaceAsk(txn, provider_,
                       {m, static_cast<std::int64_t>((10 + rng() % 30) * 100'000), 1,
                        txn.now + 7 * kMicrosPerDay})
                  .status());
        }
        return 0;
      });
    } else if (op == 5) {  // a market buy
      (void)engine_->ExecuteSync<market::BidResult>([&](Txn& txn) {
        market::BidSpec spec;
        spec.gpu = "H100 SXM";
        spec.gpus = 1 + static_cast<int>(rng() % 8);
        spec.is_market = true;
        return PlaceBid(txn, customer_, spec);
      });
    } else if (op == 6) {  // a lease stops
      (void)engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
        auto leases = txn.state.market->exchange.ListCustomerLeases(customer_, 100);
        for (const auto& l : leases) {
          if (l.status != market::LeaseStatus::kEnded) {
            GPUHUB_RETURN_IF_ERROR(StopLease(txn, customer_, l.id).status());
            break;
          }
        }
        return 0;
      });
    } else if (op == 7 && nodes.size() < 4) {
      const bool a40 = rng() % 2 == 0;
      nodes.push_back(
          Run<rentals::Node>([&](Txn& txn) {
            return AddRentalNode(
                txn,
                {a40 ? "A40" : "H100 SXM", a40 || rng() % 2 ? "DFW-1" : "IAD-1", 0, "", {}, {}});
          }).id);
    } else if (op == 8 || op == 9) {  // a rental of 1 or 2 cards
      (void)engine_->ExecuteSync<rentals::Rental>([&](Txn& txn) {
        rentals::OrderSpec s;
        s.gpu = rng() % 2 ? "A40" : "H100 SXM";
        s.count = 1 << (rng() % 2);
        s.term = rentals::Term::kWeek;
        return OrderRental(txn, customer_, s);
      });
    } else if (op == 10) {  // a release
      (void)engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
        auto list = txn.state.rentals->fleet.ListRentals(customer_, 100);
        for (const auto& r : list) {
          if (r.state != rentals::RentalState::kReleased && rng() % 2) {
            GPUHUB_RETURN_IF_ERROR(ReleaseRental(txn, customer_, r.id).status());
            break;
          }
        }
        return 0;
      });
    } else if (op == 11 && !nodes.empty()) {  // a node drains or comes back
      const rentals::NodeId n = nodes[rng() % nodes.size()];
      (void)engine_->ExecuteSync<rentals::Node>([&](Txn& txn) {
        return SetRentalNodeState(
            txn, n, rng() % 2 ? rentals::NodeState::kDraining : rentals::NodeState::kActive);
      });
    } else {
      Advance(kMicrosPerHour);  // hours billed, a lease may end for want of money
    }
    observe();
    if (HasFatalFailure() || HasFailure()) return;
    if (step == 750) {
      Open();  // a restart half way: nothing fires by itself
      observe();
    }
  }
  std::int64_t fired = 0;
  for (const auto& [id, w] : watched) fired += w.crossings;
  EXPECT_GT(fired, 20);
}

}  // namespace
}  // namespace gpuhub::engine
