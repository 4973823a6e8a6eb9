// A lifecycle simulation of the term fleet on a manual clock: thousands of random orders,
// payments, auto-renew switches, early releases, node drains and removals, top-ups, clock jumps
// and restarts (the fleet rebuilt from its own records), with after every step:
//   - the fleet's invariants: no card in two live rentals, stock = nodes - live rentals, every due
//     transition scheduled at its time (Fleet::CheckInvariants);
//   - stock recounted here from the nodes and the live rentals, independently of the fleet;
//   - every transition exactly once at the time the rules give, checked by replaying each rental's
//     events in order against a shadow of its term;
//   - the ledger's invariants (every currency balances, no wallet below zero) and, every few
//     hundred steps, that every charge's money is in the ledger exactly once.
#include <gtest/gtest.h>

#include <bit>
#include <cstdio>
#include <map>
#include <random>

#include "ledger/ledger.h"
#include "ledger/test_deposit.h"
#include "rentals/fleet.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr std::int64_t kHour = kMicrosPerHour;

FleetConfig Config(Provisioning provisioning) {
  FleetConfig c;
  c.regions = {"DFW-1", "IAD-1", "PDX-1"};
  c.discounts = {{2, 50'000}, {4, 80'000}, {8, 100'000}};
  c.cards = {
      {"H100 SXM", 1'690'000'000, 475'000'000, false, {1, 2, 4, 8}, c.regions, true, 2000},
      {"MI300X", 1'590'000'000, 450'000'000, false, {1, 2, 4, 8}, {"DFW-1"}, true, 0},
      {"B200", 3'890'000'000, 1'099'120'000, true, {2, 4, 8}, c.regions, true, 0},
      {"RTX 3090", 230'000'000, 65'000'000, false, {1, 2, 4, 8}, c.regions, false, 0},
  };
  c.provisioning = provisioning;
  return c;
}

Result<TaxBlock> Taxed(UserId customer, std::int64_t net, TimestampMicros) {
  // Odd customers pay 19% "VAT" so that tax legs and gross != net are exercised too.
  if (customer % 2 == 0) return NoTax(net);
  std::int64_t tax = MulDivHalfEven(net, 190'000, kPpm).value();
  return TaxBlock{net, {{"VAT 19%", 190'000, tax}}, tax, net + tax};
}

// What a rental's term looks like according to its own events so far.
struct Shadow {
  TimestampMicros term_end = 0;
  std::int64_t term_micros = 0;
  RentalState state = RentalState::kProvisioning;
  bool next_paid = false;
  bool invoiced = false;
  TimestampMicros last_attempt = 0;
  TimestampMicros auto_on_since = 0;  // when auto-renew was last switched on (0: from the order)
  TimestampMicros released_at = 0;
  TimestampMicros created_at = 0;
  bool wiped = false;
};

class Simulation {
 public:
  Simulation(Provisioning provisioning, std::uint32_t seed)
      : provisioning_(provisioning), fleet_(Config(provisioning)), rng_(seed) {}

  void Run(int steps) {
    ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, 1'080'000'000, 50, now_).ok());
    for (int i = 0; i < 24; ++i) AddNode();
    for (int step = 0; step < steps; ++step) {
      Step();
      CheckAll(step % 500 == 0);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "at step " << step;
        return;
      }
    }
    CheckAll(true);
  }

  std::size_t orders = 0, releases = 0, renewals_paid = 0, restarts = 0, released_unpaid = 0,
              extended = 0, resumed = 0, auto_renewed = 0, refunded = 0;

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void AddNode() {
    const auto& cards = fleet_.config().cards;
    const CardConfig& card = cards[static_cast<std::size_t>(Pick(static_cast<int>(cards.size())))];
    const std::string& region = card.regions[static_cast<std::size_t>(
        Pick(static_cast<int>(card.regions.size())))];
    int sizes[] = {0, 0, 0, 4, 7};
    auto n = fleet_.AddNode({card.name, region, sizes[Pick(5)], "", std::nullopt, std::nullopt},
                            now_, &changes_);
    ASSERT_TRUE(n.ok()) << n.status().ToString();
    nodes_.push_back(n->id);
  }

  UserId Customer() { return 100 + Pick(12); }

  void Fund(UserId user, std::int64_t micros, Currency c) {
    ASSERT_TRUE(ledger::Deposit(ledger_, user, micros, c, "topup:" + std::to_string(++topups_), now_).ok());
  }

  RentalId AnyRental() {
    if (fleet_.rental_count() == 0) return 0;
    // Mostly recent ones (the live ones), sometimes any.
    RentalId newest = static_cast<RentalId>(fleet_.rental_count());
    return Pick(4) == 0 ? 1 + Pick(static_cast<int>(newest))
                        : std::max<RentalId>(1, newest - Pick(60));
  }

  void Step() {
    int op = Pick(100);
    changes_.Clear();
    if (op < 30) {  // an order
      const auto& cards = fleet_.config().cards;
      const CardConfig& card =
          cards[static_cast<std::size_t>(Pick(static_cast<int>(cards.size())))];
      OrderSpec spec;
      spec.gpu = card.name;
      int counts[] = {1, 1, 1, 2, 2, 4, 8, 3};
      spec.count = counts[Pick(8)];
      spec.term = Pick(3) == 0 ? Term::kMonth : Term::kWeek;
      const char* regions[] = {"", "", "DFW-1", "IAD-1", "PDX-1"};
      spec.region = regions[Pick(5)];
      spec.currency = Pick(5) == 0 ? Currency::kEur : Currency::kUsd;
      spec.auto_renew = Pick(2) == 0;
      UserId who = Customer();
      auto before = fleet_.QuoteOrder(who, spec, ledger_, Taxed, now_);
      auto r = fleet_.Order(who, spec, ledger_, Taxed, now_, &changes_);
      if (r.ok()) {
        ++orders;
        ASSERT_TRUE(before.ok() && before->available);
        EXPECT_EQ(r->node_id, before->placement.node_id);  // the quote said where it goes
        EXPECT_EQ(r->price_micros, before->amount.net_micros);
        shadow_[r->id].created_at = now_;
        shadow_[r->id].term_micros = TermMicros(spec.term);
      } else if (before.ok() && before->available) {
        // Available yet refused: only for money.
        ASSERT_EQ(r.status().code(), StatusCode::kInsufficientFunds) << r.status().ToString();
      }
    } else if (op < 40) {
      UserId who = Customer();
      Fund(who, std::int64_t{100 + Pick(8000)} * 1'000'000,
           Pick(5) == 0 ? Currency::kEur : Currency::kUsd);
    } else if (op < 52) {
      RentalId id = AnyRental();
      const Rental* r = fleet_.FindRental(id);
      if (r == nullptr) return;
      UserId who = Pick(10) == 0 ? Customer() : r->customer_id;
      bool was_paid = r->next_paid;
      std::int64_t period = r->period;
      auto paid = fleet_.PayRenewal(who, id, std::nullopt, ledger_, Taxed, now_, &changes_);
      if (paid.ok()) {
        ++renewals_paid;
        ASSERT_EQ(who, fleet_.FindRental(id)->customer_id);
        ASSERT_EQ(paid->period, period + 1);
        if (was_paid) {
          ASSERT_TRUE(changes_.transfers.empty()) << "a renewal paid twice";
        }
      }
    } else if (op < 57) {
      RentalId id = AnyRental();
      const Rental* r = fleet_.FindRental(id);
      if (r == nullptr) return;
      auto released = fleet_.Release(r->customer_id, id, ledger_, now_, &changes_);
      if (released.ok()) ++releases;
    } else if (op < 62) {
      RentalId id = AnyRental();
      const Rental* r = fleet_.FindRental(id);
      if (r == nullptr) return;
      bool on = !r->auto_renew;
      if (fleet_.SetAutoRenew(r->customer_id, id, on, now_, &changes_).ok() && on) {
        shadow_[id].auto_on_since = now_;
      }
    } else if (op < 66 && provisioning_ == Provisioning::kAgent) {
      RentalId id = AnyRental();
      const Rental* r = fleet_.FindRental(id);
      if (r == nullptr) return;
      InstanceReport report;
      report.state = Pick(5) == 0 ? InstanceState::kFailed : InstanceState::kRunning;
      report.connection = {{"ssh_host", "10.0.0." + std::to_string(Pick(200))}};
      (void)fleet_.ReportInstance(id, report, ledger_, now_, &changes_);
      if (Pick(3) == 0) {
        for (const auto& wipe : fleet_.OverdueWipes(now_ + 7 * kMicrosPerDay, 5)) {
          ASSERT_TRUE(fleet_.RecordWipe(wipe.id, now_, &changes_).ok());
        }
      }
    } else if (op < 70) {
      if (nodes_.empty()) return;
      NodeId id = nodes_[static_cast<std::size_t>(Pick(static_cast<int>(nodes_.size())))];
      NodeState states[] = {NodeState::kActive, NodeState::kDraining, NodeState::kRemoved};
      NodeState target = states[Pick(3)];
      bool had_live = fleet_.RentedCards(id) != 0;
      auto changed = fleet_.SetNodeState(id, target, now_, &changes_);
      if (changed.ok() && target == NodeState::kRemoved) {
        ASSERT_FALSE(had_live);
      }
    } else if (op < 72) {
      if (fleet_.node_count() < 200) AddNode();
    } else if (op < 73) {
      Restart();
    } else {
      // Time: mostly short steps, sometimes days at once.
      std::int64_t step = Pick(10) == 0 ? std::int64_t{Pick(4 * 24)} * kHour
                                        : std::int64_t{1 + Pick(180)} * 60 * kMicrosPerSecond;
      now_ += step;
      fleet_.AdvanceTo(ledger_, Taxed, now_, &changes_);
    }
    Replay();
  }

  void Restart() {
    ++restarts;
    auto restored = Fleet::Restore(Config(provisioning_), fleet_.Records());
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    ASSERT_EQ(restored->NextEventAt(), fleet_.NextEventAt());
    ASSERT_EQ(restored->live_rental_count(), fleet_.live_rental_count());
    fleet_ = std::move(restored).value();
  }

  // Every event of the step, in order, against the shadow of its rental.
  void Replay() {
    for (const Event& e : changes_.events) {
      Shadow& s = shadow_[e.rental_id];
      const Rental& r = *fleet_.FindRental(e.rental_id);
      switch (e.kind) {
        case EventKind::kCreated:
          ASSERT_EQ(e.at, s.created_at);
          break;
        case EventKind::kProvisioned:
          ASSERT_EQ(s.state, RentalState::kProvisioning);
          ASSERT_LT(e.at, s.created_at + kProvisioningDeadlineMicros + 1);
          s.state = RentalState::kActive;
          s.term_end = e.at + s.term_micros;
          break;
        case EventKind::kAutoRenewFailed:
        case EventKind::kAutoRenewed: {
          ASSERT_EQ(s.state, RentalState::kActive);
          ASSERT_FALSE(s.invoiced);
          ASSERT_FALSE(s.next_paid);
          ASSERT_LT(e.at, s.term_end - kRenewalInvoiceLeadMicros);
          TimestampMicros first = std::max(s.term_end - kAutoRenewLeadMicros, s.auto_on_since);
          TimestampMicros expected =
              s.last_attempt == 0 ? first : std::max(s.last_attempt + kAutoRenewRetryMicros, first);
          ASSERT_EQ(e.at, expected) << "auto-renew attempt of rental " << e.rental_id;
          s.last_attempt = e.at;
          if (e.kind == EventKind::kAutoRenewed) {
            s.next_paid = true;
            ++auto_renewed;
          }
          break;
        }
        case EventKind::kRenewalPaid:
          ASSERT_FALSE(s.next_paid);
          ASSERT_NE(s.state, RentalState::kReleased);
          s.next_paid = true;
          break;
        case EventKind::kRenewalInvoiced:
          ASSERT_EQ(s.state, RentalState::kActive);
          ASSERT_FALSE(s.invoiced);
          ASSERT_EQ(e.at, s.term_end - kRenewalInvoiceLeadMicros);
          s.invoiced = true;
          break;
        case EventKind::kExtended:
          ASSERT_TRUE(s.next_paid);
          ASSERT_EQ(e.at, s.term_end);
          s.term_end += s.term_micros;
          s.next_paid = s.invoiced = false;
          s.last_attempt = 0;
          ++extended;
          break;
        case EventKind::kStopped:
          ASSERT_FALSE(s.next_paid);
          ASSERT_EQ(e.at, s.term_end);
          s.state = RentalState::kStopped;
          break;
        case EventKind::kResumed:
          ASSERT_EQ(s.state, RentalState::kStopped);
          ASSERT_TRUE(s.next_paid);
          ASSERT_GE(e.at, s.term_end);
          ASSERT_LT(e.at, s.term_end + kHoldMicros);
          s.term_end += s.term_micros;  // counted from the old end
          s.state = RentalState::kActive;
          s.next_paid = s.invoiced = false;
          s.last_attempt = 0;
          ++resumed;
          break;
        case EventKind::kReleased:
          ASSERT_NE(s.state, RentalState::kReleased);
          if (r.release_reason == ReleaseReason::kUnpaid) {
            ASSERT_EQ(s.state, RentalState::kStopped);
            ASSERT_EQ(e.at, s.term_end + kHoldMicros);
            ++released_unpaid;
          } else if (r.release_reason == ReleaseReason::kProvisioningFailed) {
            ASSERT_EQ(s.state, RentalState::kProvisioning);
            ASSERT_LE(e.at, s.created_at + kProvisioningDeadlineMicros);
          } else {
            ASSERT_EQ(e.at, now_);
          }
          s.state = RentalState::kReleased;
          s.released_at = e.at;
          break;
        case EventKind::kKeyDestroyed:
          ASSERT_EQ(s.state, RentalState::kReleased);
          ASSERT_EQ(e.at, s.released_at);
          break;
        case EventKind::kWiped:
          ASSERT_EQ(s.state, RentalState::kReleased);
          ASSERT_FALSE(s.wiped);
          if (provisioning_ == Provisioning::kImmediate) {
            ASSERT_EQ(e.at, r.instance.wipe_due_at);
          }
          s.wiped = true;
          break;
        case EventKind::kRefunded:
          ++refunded;
          break;
        case EventKind::kAutoRenewChanged:
        case EventKind::kInstanceFailed:
        case EventKind::kExtraNvmeAdded:
          break;
      }
    }
  }

  void CheckAll(bool thorough) {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = fleet_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    // Stock = nodes - live rentals, recounted from the records.
    std::map<std::pair<std::string, std::string>, int> free;
    for (const Node& n : fleet_.ListNodes("", "")) {
      if (n.state == NodeState::kActive) free[{n.gpu, n.region}] += n.cards;
    }
    std::map<NodeId, std::uint32_t> taken;
    for (const auto& [id, shadow] : shadow_) {
      if (shadow.state == RentalState::kReleased) continue;
      const Rental& r = *fleet_.FindRental(id);
      if (!IsLive(r.state)) continue;
      ASSERT_EQ(taken[r.node_id] & r.card_mask, 0u) << "a card in two live rentals";
      taken[r.node_id] |= r.card_mask;
      if (fleet_.FindNode(r.node_id)->state == NodeState::kActive) {
        free[{r.gpu, r.region}] -= r.count;
      }
    }
    for (const auto& card : fleet_.Stock()) {
      for (const auto& row : card.regions) {
        int expected = free[{card.gpu, row.region}];
        ASSERT_EQ(row.cards_free, expected) << card.gpu << " " << row.region;
      }
    }
    if (thorough) {
      s = fleet_.CheckSettlement(ledger_);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = ledger_.CheckHistory();
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
  }

  Provisioning provisioning_;
  Fleet fleet_;
  ledger::Ledger ledger_;
  Changes changes_;
  std::mt19937 rng_;
  TimestampMicros now_ = kStart;
  std::vector<NodeId> nodes_;
  std::map<RentalId, Shadow> shadow_;
  int topups_ = 0;
};

TEST(RentalsSimulationTest, RandomLifecyclesKeepEveryInvariantWithoutAnAgent) {
  Simulation sim(Provisioning::kImmediate, 20'270'115);
  sim.Run(20'000);
  std::printf("orders %zu, renewals paid %zu (auto %zu), extended %zu, resumed %zu, released unpaid "
              "%zu, released early %zu, refunds %zu, restarts %zu\n",
              sim.orders, sim.renewals_paid, sim.auto_renewed, sim.extended, sim.resumed,
              sim.released_unpaid, sim.releases, sim.refunded, sim.restarts);
  // The run exercised what it claims to.
  EXPECT_GT(sim.orders, 1'000u);
  EXPECT_GT(sim.released_unpaid, 100u);
  EXPECT_GT(sim.extended, 100u);
  EXPECT_GT(sim.resumed, 10u);
  EXPECT_GT(sim.auto_renewed, 100u);
  EXPECT_GT(sim.releases, 100u);
  EXPECT_GT(sim.restarts, 100u);
  EXPECT_GT(sim.refunded, 10u);
}

TEST(RentalsSimulationTest, RandomLifecyclesKeepEveryInvariantWithAnAgent) {
  Simulation sim(Provisioning::kAgent, 7);
  sim.Run(12'000);
  EXPECT_GT(sim.orders, 500u);
  EXPECT_GT(sim.refunded, 50u);
}

}  // namespace
}  // namespace gpuhub::rentals
