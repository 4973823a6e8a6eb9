// Simulation: random providers, machines, asks, bids (limit and market, ioc and gtc, with and
// without expiry and region, USD and EUR wallets), cancels, lease stops, top-ups, payouts, FX rate
// changes and removals and clock advances from minutes to days, against one exchange and one
// ledger. A removal of the EUR/USD rate must be refused exactly while an active lease or a resting
// bid pays from a EUR wallet (brute force over the records), so no lease ever ends and no bid is
// ever cancelled for want of a rate (`no_fx_rate`).
//
// After every step: the ledger's invariants (balanced per currency, no wallet or payable negative,
// holds within funds) and the exchange's (no GPU in two leases, books = open orders, holds pending
// for resting bids only, timeline complete). Every incoming bid is also matched by brute force
// against the offers on the book, and the exchange must pick the same ask at the same price. Every
// 1000 steps and at the end, independent checks over the whole history: each lease-hour 1..paid is
// in the ledger exactly once with provider + fee = price, and nothing else was charged; the money
// in platform revenue and provider payables adds up to what the leases say. At the end the
// exchange is rebuilt from its records (Restore) and must equal the original and keep behaving the
// same.
//
// The simulation persists like the engine does: after each step the records the step changed are
// written to a simulated store (maps by id) and Forget drops the closed ones from the exchange, so
// that after every step memory must hold only open records; the history checks read the store,
// and the restore is built as the engine's start-up builds it: the store's open rows, the newest
// trades per market, the providers' totals and the last ids.
//
// GPUHUB_MARKET_SIM_SEED=<n> runs another seed; GPUHUB_MARKET_SIM_STEPS=<n> runs longer.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>

#include "ledger/ledger.h"
#include "market/exchange.h"

namespace gpuhub::market {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;

constexpr TimestampMicros kStart = 1'800'000'000'000'000;
constexpr int kProviders = 6;   // user ids 1..6
constexpr int kCustomers = 12;  // user ids 101..112
// Customers 101..103 are providers too: their bids must pass over their own asks and their asks
// over their own bids (no self-trades), which the brute force and CheckHistory check.
constexpr int kCustomerProviders = 3;
constexpr std::size_t kMaxMachines = 40;

std::int64_t EnvOr(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

class Simulation {
 public:
  explicit Simulation(std::uint64_t seed) : rng_(seed), x_(Config()) {
    x_.SetTaxRate(TaxRate);
    x_.SetStartTimeout(StartTimeout);
  }

  // Machines with an even id have a host agent: their leases wait for it to run their workload
  // (provisioning) for up to 10 minutes; the others run from the fill.
  static std::int64_t StartTimeout(MachineId machine) {
    return machine % 2 == 0 ? 10 * 60 * kMicrosPerSecond : 0;
  }

  // Customers pay tax by who they are and by the day (a rate that changes every other day), so
  // holds, fills and hours are taxed at several rates and some customers pay none.
  static std::int64_t TaxRate(UserId customer, TimestampMicros at) {
    switch (customer % 3) {
      case 0:
        return 0;
      case 1:
        return 190'000;
      default:
        return (at / kMicrosPerDay) % 2 == 0 ? 255'000 : 81'000;
    }
  }

  static ExchangeConfig Config() {
    ExchangeConfig c;
    c.gpus = {"H100 SXM", "A100 SXM", "H200"};
    c.regions = {"DFW-1", "IAD-1", "PDX-1"};
    c.fee_ppm = 100'000;
    return c;
  }

  void Run(std::int64_t steps) {
    SetRate(1'080'000'000, 50);
    for (int c = 0; c < kCustomers; ++c) TopUp(101 + c);
    for (std::int64_t step = 0; step < steps; ++step) {
      step_ = step;
      Changes changes;
      Step(&changes);
      if (::testing::Test::HasFatalFailure()) return;
      Persist(changes);
      CheckAfterStep();
      if (::testing::Test::HasFatalFailure()) return;
      if (step % 1000 == 0) CheckHistory();
      if (::testing::Test::HasFatalFailure()) return;
    }
    CheckHistory();
    CheckRestore();
    Summary();
  }

 private:
  int Pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  UserId PickProvider() {
    int i = Pick(1, kProviders + kCustomerProviders);
    return i <= kProviders ? i : 100 + (i - kProviders);
  }
  bool Chance(int percent) { return Pick(1, 100) <= percent; }
  template <typename T>
  T PickOf(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(Pick(0, static_cast<int>(v.size()) - 1))];
  }

  void SetRate(std::int64_t ppb, std::int32_t spread) {
    ASSERT_TRUE(ledger_.SetFxRate(Currency::kEur, Currency::kUsd, ppb, spread, now_).ok());
  }

  void TopUp(UserId customer) {
    ledger::TransferRequest t;
    t.id = "topup:" + std::to_string(++topups_);
    Currency c = Chance(25) ? Currency::kEur : Currency::kUsd;
    t.debit = AccountKey::System(AccountKind::kDeposits, c);
    t.credit = AccountKey::Wallet(customer, c);
    t.amount_micros = Pick(5, 400) * 1'000'000 + Pick(0, 999'999);
    t.code = "topup";
    t.timestamp = now_;
    ASSERT_TRUE(ledger_.Apply(t).ok());
  }

  std::int64_t RandomPrice() {
    // Prices cluster so that levels hold several orders and bids cross often.
    return (1'500 + Pick(0, 40) * 50 + (Chance(20) ? Pick(0, 49) : 0)) * kPriceTickMicros;
  }

  // What the engine's Write does: every changed record's row, then Forget.
  void Persist(const Changes& changes) {
    for (MachineId id : changes.machines) stored_.machines[id] = *x_.FindMachine(id);
    for (OrderId id : changes.asks) stored_.asks[id] = *x_.FindAsk(id);
    for (OrderId id : changes.bids) stored_.bids[id] = *x_.FindBid(id);
    for (LeaseId id : changes.leases) stored_.leases[id] = *x_.FindLease(id);
    for (PayoutId id : changes.payouts) stored_.payouts[id] = *x_.FindPayout(id);
    for (const Trade& t : changes.trades) stored_.trades.push_back(t);
    for (UserId id : changes.providers) stored_.providers[id] = x_.History(id);
    for (const HourCharge& h : changes.hours) hour_starts_[{h.lease_id, h.hour}] = h.at;
    x_.Forget(changes);
  }

  // Every record ever written, as the store holds it.
  Snapshot StoredRecords() const {
    Snapshot s;
    for (const auto& [id, r] : stored_.machines) s.machines.push_back(r);
    for (const auto& [id, r] : stored_.asks) s.asks.push_back(r);
    for (const auto& [id, r] : stored_.bids) s.bids.push_back(r);
    for (const auto& [id, r] : stored_.leases) s.leases.push_back(r);
    for (const auto& [id, r] : stored_.payouts) s.payouts.push_back(r);
    s.trades = stored_.trades;
    for (const auto& [id, r] : stored_.providers) s.providers.push_back(r);
    return s;
  }

  // The closed records of the store (those Forget dropped), for CheckSettlement.
  Snapshot ClosedRecords() const {
    Snapshot s;
    for (const auto& [id, b] : stored_.bids) {
      if (b.status != BidStatus::kResting) s.bids.push_back(b);
    }
    for (const auto& [id, l] : stored_.leases) {
      if (l.status != LeaseStatus::kActive) s.leases.push_back(l);
    }
    return s;
  }

  // What the engine's start-up reads: open rows only, the newest trades of each market, the
  // totals and the highest ids.
  Snapshot StartupRecords() const {
    Snapshot s;
    for (const auto& [id, r] : stored_.machines) s.machines.push_back(r);
    for (const auto& [id, r] : stored_.asks) {
      if (r.status == AskStatus::kOpen) s.asks.push_back(r);
      s.last_ids.order = std::max(s.last_ids.order, id);
    }
    for (const auto& [id, r] : stored_.bids) {
      if (r.status == BidStatus::kResting) s.bids.push_back(r);
      s.last_ids.order = std::max(s.last_ids.order, id);
    }
    for (const auto& [id, r] : stored_.leases) {
      if (r.status == LeaseStatus::kActive) s.leases.push_back(r);
      s.last_ids.lease = std::max(s.last_ids.lease, id);
    }
    for (const auto& [id, r] : stored_.payouts) {
      if (r.status == PayoutStatus::kPending) s.payouts.push_back(r);
      s.last_ids.payout = std::max(s.last_ids.payout, id);
    }
    if (!stored_.machines.empty()) s.last_ids.machine = stored_.machines.rbegin()->first;
    std::map<std::string, std::size_t> per_market;
    for (auto it = stored_.trades.rbegin(); it != stored_.trades.rend(); ++it) {
      s.last_ids.trade = std::max(s.last_ids.trade, it->id);
      if (per_market[it->gpu]++ < kRecentTradesPerMarket) s.trades.push_back(*it);
    }
    for (const auto& [id, r] : stored_.providers) s.providers.push_back(r);
    return s;
  }

  void Step(Changes* out) {
    Changes& changes = *out;
    int op = Pick(1, 100);
    if (op <= 6 && x_.machine_count() < kMaxMachines) {
      UserId provider = PickProvider();
      const char* gpus[] = {"H100 SXM", "a100-sxm", "H200"};
      const char* regions[] = {"DFW-1", "IAD-1", "pdx-1"};
      const int counts[] = {1, 2, 4, 8, 8, 3};
      auto m = x_.AddMachine(
          provider, {gpus[Pick(0, 2)], counts[Pick(0, 5)], regions[Pick(0, 2)], 32, 256, 1000},
          now_, &changes);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      machines_.push_back(m->id);
    } else if (op <= 20 && !machines_.empty()) {
      MachineId id = PickOf(machines_);
      const Machine* m = x_.FindMachine(id);
      AskSpec spec{id, RandomPrice(), Chance(70) ? 1 : Pick(1, m->gpus),
                   now_ + kMicrosPerHour + Pick(1, 72 * 60) * 60 * kMicrosPerSecond};
      auto a =
          x_.PlaceAsk(Chance(95) ? m->provider_id : PickProvider(), spec, ledger_, now_, &changes);
      if (!a.ok()) {
        ASSERT_TRUE(a.status().code() == StatusCode::kConflict ||
                    a.status().code() == StatusCode::kNotFound)
            << a.status().ToString();
      } else {
        ++asks_placed_;
      }
    } else if (op <= 25) {
      auto asks = x_.ListAsks(PickProvider(), 20);
      if (asks.empty()) return;
      const Ask& a = PickOf(asks);
      auto r = x_.CancelAsk(a.provider_id, a.id, now_, &changes);
      ASSERT_EQ(a.status, AskStatus::kOpen) << "a closed ask stayed in memory";
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    } else if (op <= 60) {
      PlaceRandomBid(&changes);
    } else if (op <= 67) {
      UserId customer = 100 + Pick(1, kCustomers);
      // Mostly resting bids (the interesting case); sometimes a closed one from the store, which
      // the exchange no longer knows: refused as unknown.
      std::vector<Bid> bids = x_.ListBids(customer, 100);
      if (bids.empty() || Chance(10)) {
        auto closed = stored_.bids.lower_bound(
            Pick(1, static_cast<int>(std::max<OrderId>(1, x_.Records().last_ids.order))));
        if (closed != stored_.bids.end() && closed->second.customer_id == customer &&
            closed->second.status != BidStatus::kResting) {
          bids = {closed->second};
        }
      }
      if (bids.empty()) return;
      const Bid& b = PickOf(bids);
      auto r = x_.CancelBid(customer, b.id, ledger_, now_, &changes);
      ASSERT_EQ(r.ok(), b.status == BidStatus::kResting) << r.status().ToString();
      if (b.status != BidStatus::kResting) {
        ASSERT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
        ++closed_refused_;
      }
      if (r.ok()) {
        ASSERT_EQ(r->status, BidStatus::kCancelled);
        ++cancels_;
      }
    } else if (op <= 72) {
      UserId customer = 100 + Pick(1, kCustomers);
      auto leases = x_.ListCustomerLeases(customer, 100);
      if (leases.empty()) return;
      const Lease& l = PickOf(leases);
      ASSERT_EQ(l.status, LeaseStatus::kActive) << "an ended lease stayed in memory";
      auto r = x_.StopLease(customer, l.id, ledger_, now_, &changes);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) ++stops_;
    } else if (op <= 78) {
      TopUp(100 + Pick(1, kCustomers));
    } else if (op <= 81) {
      UserId provider = PickProvider();
      std::int64_t available =
          ledger_.GetAccount(AccountKey::Payable(provider, Currency::kUsd))->available();
      std::int64_t amount = Pick(1, 30) * 1'000'000;
      auto r = x_.RequestPayout(provider, amount, ledger_, now_, &changes);
      if (amount > available) {
        ASSERT_EQ(r.status().code(), StatusCode::kInsufficientFunds);
      } else if (!r.ok()) {
        ASSERT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
      }
    } else if (op <= 83) {
      auto pending = x_.ListPendingPayouts(5);
      if (pending.empty()) return;
      ASSERT_TRUE(
          x_.ResolvePayout(999, PickOf(pending).id, Chance(80), ledger_, now_, &changes).ok());
    } else if (op <= 84) {
      SetRate(1'000'000'000 + Pick(0, 200) * 1'000'000, Pick(0, 100));
    } else if (op <= 85) {
      TryRemoveRate();
    } else if (op <= 88 && !machines_.empty()) {
      ChangeMachineCondition(&changes);
    } else if (op <= 95) {
      ReportRandomWorkload(&changes);
    } else {
      std::int64_t delta =
          Chance(5) ? Pick(1, 3) * kMicrosPerDay : Pick(1, 300) * 60 * kMicrosPerSecond;
      now_ += delta;
      x_.AdvanceTo(ledger_, now_, &changes);
      // Every due event was handled (CheckHistory also checks each active lease is paid past now).
      ASSERT_GT(x_.NextEventAt(), now_);
    }
    total_transfers_ += changes.transfers.size();
    for (const auto& h : changes.hours) hour_charges_tax_ += h.tax_micros;
  }

  // What an agent would report: offline (last seen up to an hour ago) and back, GPUs blocked and
  // unblocked, the machine held and released.
  void ChangeMachineCondition(Changes* changes) {
    MachineId id = PickOf(machines_);
    const Machine& m = *x_.FindMachine(id);
    MachineCondition c{m.offline_since, m.blocked_mask, m.hold_reason};
    // Mostly back to normal: a fleet where most machines are offline or held would leave little
    // to trade and starve the rest of the simulation.
    const bool troubled = m.offline_since != 0 || m.blocked_mask != 0 || !m.hold_reason.empty();
    int what = troubled && Chance(70) ? 0 : Pick(1, 10);
    if (what == 0) {
      if (c.offline_since != 0) ++online_;
      c = {};
    } else if (what <= 5) {
      c.offline_since = m.offline_since != 0
                            ? 0
                            : std::max<TimestampMicros>(1, now_ - Pick(0, 3600) * kMicrosPerSecond);
      (c.offline_since != 0 ? offline_ : online_)++;
    } else if (what <= 8) {
      c.blocked_mask = Chance(40) ? 0 : static_cast<std::uint32_t>(Pick(0, (1 << m.gpus) - 1));
    } else {
      c.hold_reason = m.hold_reason.empty() ? "the host reports fewer GPUs than listed" : "";
    }
    auto r = x_.SetMachineCondition(id, c, ledger_, now_, changes);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->offline_since, c.offline_since);
    // Nothing of an offline or held machine is on offer, nor a blocked GPU.
    const std::vector<Offer> offers = x_.Offers("", now_).value();
    for (const auto& o : offers) {
      if (o.machine_id != id) continue;
      ASSERT_TRUE(c.offline_since == 0 && c.hold_reason.empty()) << "step " << step_;
      ASSERT_LE(o.free_gpus, m.gpus - std::popcount(c.blocked_mask));
    }
  }

  // What a host agent would say of a lease's workload: running (it starts, or runs again), or
  // not (it stopped). A provisioning lease that starts is charged its first hour from now and its
  // hold is released; one that stops after it ran is paused and credited.
  void ReportRandomWorkload(Changes* changes) {
    UserId customer = 100 + Pick(1, kCustomers);
    auto leases = x_.ListCustomerLeases(customer, 100);
    if (leases.empty()) return;
    // Mostly the leases waiting for their host: most of them would otherwise reach their deadline
    // in the clock's long strides.
    std::vector<Lease> waiting;
    for (const auto& l : leases) {
      if (l.Provisioning()) waiting.push_back(l);
    }
    const Lease before = !waiting.empty() && Chance(70) ? PickOf(waiting) : PickOf(leases);
    const bool running = Chance(65);
    const bool offline = x_.FindMachine(before.machine_id)->offline_since != 0;
    const std::int64_t held = Held(before.customer_id, before.currency);
    auto r = x_.ReportLeaseWorkload(before.id, running, ledger_, now_, changes);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const Lease& after = *r;
    if (before.Provisioning() && after.status == LeaseStatus::kActive && after.hours_paid == 1 &&
        !after.Provisioning()) {
      // Started now: its hours run from here, and the hold is gone from the wallet.
      ASSERT_TRUE(running && !offline) << "step " << step_;
      ASSERT_EQ(after.PaidUntil(), now_ + kMicrosPerHour);
      ASSERT_EQ(Held(before.customer_id, before.currency), held - before.hold_micros);
      ++started_;
    } else if (!before.Provisioning() && after.status == LeaseStatus::kActive && !running &&
               PausedAt(before.id) == 0) {
      ASSERT_TRUE(false) << "a stopped workload left lease " << before.id << " billed";
    } else if (!before.Provisioning() && !before.workload_down && !running) {
      ++downs_;
    }
  }

  TimestampMicros PausedAt(LeaseId id) {
    const Lease* l = x_.FindLease(id);
    return l == nullptr ? 1 : l->paused_at;
  }
  std::int64_t Held(UserId user, Currency c) {
    return ledger_.GetAccount(AccountKey::Wallet(user, c))->held();
  }

  void TryRemoveRate() {
    bool eur_open = false;
    Snapshot records = StoredRecords();
    for (const auto& l : records.leases) {
      eur_open |= l.status == LeaseStatus::kActive && l.currency == Currency::kEur;
    }
    for (const auto& b : records.bids) {
      eur_open |= b.status == BidStatus::kResting && b.currency == Currency::kEur;
    }
    const bool had = ledger_.Fx().Find(Currency::kEur, Currency::kUsd).has_value();
    auto r = Chance(50) ? x_.RemoveFxRate(Currency::kEur, Currency::kUsd, ledger_, now_)
                        : x_.RemoveFxRate(Currency::kUsd, Currency::kEur, ledger_, now_);
    if (!had) {
      ASSERT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
    } else if (eur_open) {
      ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
      ASSERT_TRUE(ledger_.Fx().Find(Currency::kEur, Currency::kUsd).has_value());
      ++rate_removals_refused_;
    } else {
      ASSERT_TRUE(r.ok()) << "step " << step_ << ": " << r.status().ToString();
      ASSERT_FALSE(ledger_.Fx().Find(Currency::kEur, Currency::kUsd).has_value());
      ++rate_removals_;
    }
  }

  void PlaceRandomBid(Changes* changes) {
    UserId customer = 100 + Pick(1, kCustomers);
    BidSpec spec;
    const char* gpus[] = {"H100 SXM", "A100 SXM", "h200"};
    spec.gpu = gpus[Pick(0, 2)];
    const int counts[] = {1, 1, 2, 2, 4, 8, 3};
    spec.gpus = counts[Pick(0, 6)];
    if (Chance(25)) spec.region = Chance(50) ? "DFW-1" : "IAD-1";
    spec.is_market = Chance(20);
    spec.time_in_force = spec.is_market || Chance(40) ? TimeInForce::kIoc : TimeInForce::kGtc;
    if (!spec.is_market) spec.limit_micros = RandomPrice();
    if (spec.time_in_force == TimeInForce::kGtc && Chance(40)) {
      spec.expires_at = now_ + Pick(1, 24 * 60) * 60 * kMicrosPerSecond;
    }
    spec.currency = Chance(25) ? Currency::kEur : Currency::kUsd;

    // Brute force: the first offer (cheapest, then oldest) of another account that this bid can
    // take.
    const Offer* expected = nullptr;
    bool passed_own = false;
    auto offers = x_.Offers(spec.gpu, now_).value();
    for (const auto& o : offers) {
      if (o.free_gpus < spec.gpus || o.min_gpus > spec.gpus) continue;
      if (!spec.region.empty() && o.region != spec.region) continue;
      if (!spec.is_market && o.price_micros > spec.limit_micros) continue;
      if (x_.FindAsk(o.ask_id)->provider_id == customer) {
        passed_own = true;
        continue;
      }
      expected = &o;
      break;
    }
    own_offers_passed_ += passed_own;
    ledger::AccountBalance before =
        ledger_.GetAccount(AccountKey::Wallet(customer, spec.currency)).value();
    auto r = x_.PlaceBid(customer, spec, ledger_, now_, changes);
    if (spec.currency != Currency::kUsd && !ledger_.Fx().Find(spec.currency, Currency::kUsd)) {
      // The rate was removed: a EUR bid can neither hold nor pay, and is refused, unless it is
      // an ioc bid that finds nothing and converts nothing.
      if (r.ok()) {
        ASSERT_TRUE(expected == nullptr && spec.time_in_force == TimeInForce::kIoc);
        ASSERT_EQ(r->bid.close_reason, BidCloseReason::kNoMatch);
        ++no_match_;
        return;
      }
      ASSERT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().ToString();
      ++refused_;
      return;
    }
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), StatusCode::kInsufficientFunds) << r.status().ToString();
      // It really could not pay: the hour (or the hold) is more than the wallet has.
      std::int64_t usd = (expected ? expected->price_micros : spec.limit_micros) * spec.gpus;
      usd += MulDivHalfEven(usd, TaxRate(customer, now_), kPpm).value();
      std::int64_t needed = usd;
      if (spec.currency != Currency::kUsd) {
        needed = ledger_.Fx().ConvertTo(spec.currency, Currency::kUsd, usd)->from_micros;
      }
      ASSERT_LT(before.available(), needed);
      ASSERT_TRUE(expected != nullptr || spec.time_in_force == TimeInForce::kGtc);
      ++refused_;
      return;
    }
    const Bid& bid = r->bid;
    if (expected) {
      ASSERT_EQ(bid.status, BidStatus::kFilled) << "step " << step_;
      ASSERT_EQ(r->lease->ask_id, expected->ask_id) << "step " << step_;
      ASSERT_EQ(r->lease->price_micros, expected->price_micros);  // the resting ask's price
      ASSERT_EQ(r->lease->machine_id, expected->machine_id);
      ASSERT_EQ(r->trade->maker, Side::kAsk);
      ++fills_;
    } else if (spec.time_in_force == TimeInForce::kGtc) {
      ASSERT_EQ(bid.status, BidStatus::kResting);
      ++rests_;
    } else {
      ASSERT_EQ(bid.status, BidStatus::kCancelled);
      ASSERT_EQ(bid.close_reason, BidCloseReason::kNoMatch);
      ++no_match_;
    }
  }

  void CheckAfterStep() {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << "step " << step_ << ": " << s.ToString();
    s = x_.CheckInvariants(ledger_);
    ASSERT_TRUE(s.ok()) << "step " << step_ << ": " << s.ToString();
    // Every due hour was billed, through the pauses and resumes of machines going offline.
    s = x_.CheckLeasesPaidUp(now_);
    ASSERT_TRUE(s.ok()) << "step " << step_ << ": " << s.ToString();
    // Memory holds what is open and nothing else, whatever the history.
    Snapshot memory = x_.Records();
    for (const auto& a : memory.asks) ASSERT_EQ(a.status, AskStatus::kOpen) << "ask " << a.id;
    for (const auto& b : memory.bids) ASSERT_EQ(b.status, BidStatus::kResting) << "bid " << b.id;
    for (const auto& l : memory.leases) {
      ASSERT_EQ(l.status, LeaseStatus::kActive) << "lease " << l.id;
    }
    for (const auto& p : memory.payouts) {
      ASSERT_EQ(p.status, PayoutStatus::kPending) << "payout " << p.id;
    }
    ASSERT_EQ(memory.leases.size(), x_.active_lease_count());
    ASSERT_EQ(memory.bids.size(), x_.resting_bid_count());
  }

  // Independent of the exchange's own checks: recomputed from the records and the ledger.
  void CheckHistory() {
    Snapshot records = StoredRecords();
    // No GPU in two active leases; no lease between an account and itself.
    std::map<MachineId, std::uint32_t> used;
    std::map<MachineId, int> machine_gpus;
    std::map<MachineId, UserId> machine_provider;
    for (const auto& m : records.machines) {
      machine_gpus[m.id] = m.gpus;
      machine_provider[m.id] = m.provider_id;
    }
    for (const auto& l : records.leases) {
      ASSERT_NE(l.end_reason, LeaseEndReason::kNoFxRate) << "lease " << l.id;
      ASSERT_NE(l.customer_id, machine_provider[l.machine_id]) << "lease " << l.id << " self-trade";
      if (l.status != LeaseStatus::kActive) continue;
      if (l.paused_at == 0 && !l.Provisioning()) {
        ASSERT_GT(l.PaidUntil(), now_) << "active lease " << l.id << " has an unpaid hour";
      }
      if (l.Provisioning()) {
        ASSERT_GT(l.start_deadline, now_) << "lease " << l.id;
      }
      ASSERT_EQ(used[l.machine_id] & l.gpu_mask, 0u) << "lease " << l.id << " shares a GPU";
      used[l.machine_id] |= l.gpu_mask;
      ASSERT_EQ(l.gpu_mask >> machine_gpus[l.machine_id], 0u);
    }
    // Every lease-hour charged exactly once, and nothing else charged.
    std::map<std::pair<LeaseId, std::int64_t>, std::int64_t> provider_legs, fee_legs, tax_legs;
    std::int64_t revenue_from_fees = 0, payable_from_hours = 0, taxes_from_hours = 0,
                 credited_from_revenue = 0, credited_from_payables = 0;
    for (const auto& t : ledger_.Transfers()) {
      if (t.code == "downtime_credit" && t.debit.currency == Currency::kUsd) {
        (t.debit.kind == AccountKind::kPlatformRevenue ? credited_from_revenue
                                                       : credited_from_payables) += t.amount_micros;
        credits_ = std::max<std::int64_t>(credits_, 1);
      }
      if (t.code != "lease_hour" && t.code != "platform_fee" && t.code != "lease_tax") continue;
      long long lease = 0, hour = 0;
      char leg[16] = {};
      ASSERT_EQ(std::sscanf(t.id.c_str(), "lease:%lld:h%lld:%15s", &lease, &hour, leg), 3) << t.id;
      if (t.code == "lease_tax") {
        ASSERT_TRUE(tax_legs.emplace(std::pair{lease, hour}, t.amount_micros).second) << t.id;
        taxes_from_hours += t.amount_micros;
        continue;
      }
      auto& legs = t.code == "lease_hour" ? provider_legs : fee_legs;
      ASSERT_TRUE(legs.emplace(std::pair{lease, hour}, t.amount_micros).second)
          << "twice: " << t.id;
      (t.code == "lease_hour" ? payable_from_hours : revenue_from_fees) += t.amount_micros;
    }
    std::int64_t hours = 0, expected_fees = 0, expected_net = 0, lease_credits = 0,
                 lease_provider_credits = 0;
    for (const auto& l : records.leases) {
      lease_credits += l.credited_micros;
      lease_provider_credits += l.credited_provider_micros;
      ASSERT_LE(l.credited_micros, l.price_micros * l.gpus * l.hours_paid) << "lease " << l.id;
      std::int64_t total = l.price_micros * l.gpus;
      std::int64_t fee = MulDivHalfEven(total, l.fee_ppm, kPpm).value();
      for (std::int64_t h = 1; h <= l.hours_paid; ++h) {
        auto p = provider_legs.find({l.id, h});
        ASSERT_NE(p, provider_legs.end()) << "lease " << l.id << " hour " << h << " not charged";
        auto f = fee_legs.find({l.id, h});
        std::int64_t fee_paid = f == fee_legs.end() ? 0 : f->second;
        // Customer paid = provider credited + fee.
        ASSERT_EQ(p->second + fee_paid, total) << "lease " << l.id << " hour " << h;
        ASSERT_EQ(fee_paid, fee);
      }
      hours += l.hours_paid;
      expected_fees += fee * l.hours_paid;
      expected_net += (total - fee) * l.hours_paid;
    }
    ASSERT_EQ(static_cast<std::int64_t>(provider_legs.size()), hours) << "hours charged twice";
    // Each hour's tax is its net at the customer's rate of that hour, and nothing else is tax.
    for (const auto& [key, tax] : tax_legs) {
      auto found = stored_.leases.find(key.first);
      ASSERT_NE(found, stored_.leases.end());
      const Lease* l = &found->second;
      ASSERT_LE(key.second, l->hours_paid);
      // When the hour began (a lease paused by downtime resumes on a shifted grid).
      auto start = hour_starts_.find(key);
      ASSERT_NE(start, hour_starts_.end()) << "lease " << key.first << " hour " << key.second;
      const TimestampMicros at = start->second;
      ASSERT_EQ(tax, MulDivHalfEven(l->HourMicros(), TaxRate(l->customer_id, at), kPpm).value())
          << "lease " << key.first << " hour " << key.second;
    }
    ASSERT_EQ(
        ledger_.GetAccount(AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd))->posted(),
        taxes_from_hours);
    ASSERT_EQ(taxes_from_hours, hour_charges_tax_);
    ASSERT_EQ(revenue_from_fees, expected_fees);
    ASSERT_EQ(payable_from_hours, expected_net);
    auto revenue =
        ledger_.GetAccount(AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd));
    ASSERT_EQ(revenue->posted(), expected_fees - credited_from_revenue);
    ASSERT_EQ(credited_from_revenue + credited_from_payables, lease_credits);
    ASSERT_EQ(credited_from_payables, lease_provider_credits);
    for (const auto& b : records.bids) {
      ASSERT_NE(b.close_reason, BidCloseReason::kNoFxRate) << "bid " << b.id;
    }
    // No wallet or payable below zero; holds within the wallet.
    for (const auto& a : ledger_.Accounts()) {
      if (ledger::DebitsMustNotExceedCredits(a.key.kind)) {
        ASSERT_GE(a.available(), 0) << ledger::AccountKeyName(a.key);
      }
    }
    Snapshot closed = ClosedRecords();
    Status s = x_.CheckSettlement(ledger_, &closed);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // The totals kept per provider are the sums over the whole history.
    for (const auto& [provider, h] : stored_.providers) {
      ASSERT_EQ(h, x_.History(provider));
    }
  }

  void CheckRestore() {
    Status history = ledger_.CheckHistory();
    ASSERT_TRUE(history.ok()) << history.ToString();
    // As the engine starts: from the store's open rows, not from the exchange's memory.
    auto restored = Exchange::Restore(Config(), StartupRecords());
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    Exchange& y = *restored;
    y.SetTaxRate(TaxRate);
    y.SetStartTimeout(StartTimeout);
    ASSERT_TRUE(y.CheckInvariants(ledger_).ok());
    Snapshot a = x_.Records(), b = y.Records();
    ASSERT_EQ(a.machines, b.machines);
    ASSERT_EQ(a.asks, b.asks);
    ASSERT_EQ(a.bids, b.bids);
    ASSERT_EQ(a.leases, b.leases);
    ASSERT_EQ(a.payouts, b.payouts);
    ASSERT_EQ(a.trades, b.trades);
    ASSERT_EQ(a.providers, b.providers);
    ASSERT_EQ(a.last_ids, b.last_ids);
    for (const auto& m : a.machines) {
      ASSERT_EQ(x_.ProviderEarnings(m.provider_id, ledger_).gross_micros,
                y.ProviderEarnings(m.provider_id, ledger_).gross_micros);
    }
    // Both go on identically for another three days.
    ledger::Ledger copy = ledger_;
    Changes c1, c2;
    x_.AdvanceTo(ledger_, now_ + 3 * kMicrosPerDay, &c1);
    y.AdvanceTo(copy, now_ + 3 * kMicrosPerDay, &c2);
    ASSERT_EQ(x_.Records().leases, y.Records().leases);
    ASSERT_EQ(x_.Records().bids, y.Records().bids);
    ASSERT_EQ(ledger_.Accounts(), copy.Accounts());
    ASSERT_EQ(c1.transfers.size(), c2.transfers.size());
    // And both issue the same next ids.
    Changes d1, d2;
    auto m1 = x_.AddMachine(1, {"H200", 1, "DFW-1", 8, 64, 100}, now_, &d1);
    auto m2 = y.AddMachine(1, {"H200", 1, "DFW-1", 8, 64, 100}, now_, &d2);
    ASSERT_TRUE(m1.ok() && m2.ok());
    ASSERT_EQ(m1->id, m2->id);
  }

  void Summary() {
    const Snapshot history = StoredRecords();
    std::int64_t hours = 0, ended_unpaid = 0, ended_window = 0, ended_stopped = 0;
    for (const auto& l : history.leases) {
      hours += l.hours_paid;
      ended_unpaid += l.end_reason == LeaseEndReason::kUnpaid;
      ended_window += l.end_reason == LeaseEndReason::kWindowEnded;
      ended_stopped += l.end_reason == LeaseEndReason::kStopped;
    }
    std::printf(
        "simulation: %lld steps, %zu machines, %lld asks, %lld immediate fills, %lld rested, %lld "
        "no-match, %lld refused (funds), %lld cancels, %lld stops, %zu leases (%lld unpaid, %lld "
        "window, %lld stopped), %lld lease-hours, %zu ledger transfers, clock +%lld h\n",
        static_cast<long long>(step_ + 1), x_.machine_count(), static_cast<long long>(asks_placed_),
        static_cast<long long>(fills_), static_cast<long long>(rests_),
        static_cast<long long>(no_match_), static_cast<long long>(refused_),
        static_cast<long long>(cancels_), static_cast<long long>(stops_), history.leases.size(),
        static_cast<long long>(ended_unpaid), static_cast<long long>(ended_window),
        static_cast<long long>(ended_stopped), static_cast<long long>(hours),
        ledger_.Transfers().size(), static_cast<long long>((now_ - kStart) / kMicrosPerHour));
    // The run exercised what it claims to.
    EXPECT_GT(fills_, 100);
    EXPECT_GT(rests_, 100);
    EXPECT_GT(ended_unpaid, 0);
    EXPECT_GT(ended_window, 0);
    EXPECT_GT(ended_stopped, 0);
    std::int64_t filled_from_book = 0;
    for (const auto& t : history.trades) filled_from_book += t.maker == Side::kBid;
    EXPECT_GT(filled_from_book, 10) << "resting bids were never filled by a new ask or freed GPUs";
    std::printf("simulation: machines offline %lld times, back %lld times\n",
                static_cast<long long>(offline_), static_cast<long long>(online_));
    EXPECT_GT(offline_, 10);
    EXPECT_GT(credits_, 0) << "no lease was ever credited for downtime";
    std::int64_t not_started = 0, provisioned = 0;
    for (const auto& l : history.leases) {
      not_started += l.end_reason == LeaseEndReason::kNotStarted;
      provisioned += l.hold_micros > 0;
      if (l.end_reason == LeaseEndReason::kNotStarted) {
        EXPECT_EQ(l.hours_paid, 0) << "lease " << l.id << " was charged without running";
        EXPECT_EQ(l.ended_at, l.start_deadline) << "lease " << l.id;
      }
    }
    std::printf("simulation: %lld leases waited for their host: %lld started, %lld never did; "
                "%lld workloads stopped after they ran\n",
                static_cast<long long>(provisioned), static_cast<long long>(started_),
                static_cast<long long>(not_started), static_cast<long long>(downs_));
    EXPECT_GT(started_, 10);
    EXPECT_GT(not_started, 10);
    EXPECT_GT(downs_, 10);
    std::printf("simulation: EUR/USD rate removed %lld times, refused %lld times\n",
                static_cast<long long>(rate_removals_),
                static_cast<long long>(rate_removals_refused_));
    EXPECT_GT(rate_removals_refused_, 0) << "no removal ever met an open EUR order";
    std::int64_t customer_provider_leases = 0;
    for (const auto& l : history.leases) {
      customer_provider_leases += l.customer_id > 100 && l.customer_id <= 100 + kCustomerProviders;
    }
    std::printf("simulation: %lld bids passed over their own account's offer\n",
                static_cast<long long>(own_offers_passed_));
    EXPECT_GT(own_offers_passed_, (step_ + 1) / 1000)
        << "bids rarely met their own account's offer";
    EXPECT_GT(customer_provider_leases, 10) << "accounts on both sides never bought elsewhere";
    EXPECT_GT(closed_refused_, 0) << "no cancel ever met a closed (forgotten) bid";
    // Memory did not grow with history: only open records are held.
    const Snapshot memory = x_.Records();
    std::printf("simulation: %zu bids, %zu leases in the store; %zu and %zu in memory\n",
                history.bids.size(), history.leases.size(), memory.bids.size(),
                memory.leases.size());
    EXPECT_LT(memory.bids.size() * 4, history.bids.size());
  }

  std::mt19937_64 rng_;
  Exchange x_;
  ledger::Ledger ledger_;
  TimestampMicros now_ = kStart;
  std::vector<MachineId> machines_;
  std::int64_t step_ = 0, topups_ = 0, asks_placed_ = 0, fills_ = 0, rests_ = 0, no_match_ = 0,
               refused_ = 0, cancels_ = 0, stops_ = 0, rate_removals_ = 0,
               rate_removals_refused_ = 0, own_offers_passed_ = 0, offline_ = 0, online_ = 0,
               credits_ = 0, closed_refused_ = 0, started_ = 0, downs_ = 0;
  std::size_t total_transfers_ = 0;
  std::int64_t hour_charges_tax_ = 0;  // the tax of every reported HourCharge
  struct {
    std::map<MachineId, Machine> machines;
    std::map<OrderId, Ask> asks;
    std::map<OrderId, Bid> bids;
    std::map<LeaseId, Lease> leases;
    std::map<PayoutId, Payout> payouts;
    std::vector<Trade> trades;  // in id order
    std::map<UserId, ProviderHistory> providers;
  } stored_;                                                                 // the simulated store
  std::map<std::pair<LeaseId, std::int64_t>, TimestampMicros> hour_starts_;  // HourCharge::at
};

TEST(MarketSimulationTest, RandomTradingKeepsEveryInvariant) {
  auto seed = static_cast<std::uint64_t>(EnvOr("GPUHUB_MARKET_SIM_SEED", 5));
  std::int64_t steps = EnvOr("GPUHUB_MARKET_SIM_STEPS", 15'000);
  Simulation sim(seed);
  sim.Run(steps);
}

TEST(MarketSimulationTest, OtherSeeds) {
  for (std::uint64_t seed : {11u, 12u, 13u}) {
    SCOPED_TRACE(seed);
    Simulation sim(seed);
    sim.Run(5'000);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gpuhub::market
