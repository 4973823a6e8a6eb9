// The matching engine alone, in the style of exchange-core's performance tests: one market, a
// stream of commands generated up front (so the timed loop only matches), about 1,000 resting
// orders spread over a few hundred price levels, and a mix of good-till-cancelled and
// immediate-or-cancel orders and cancels that makes a few percent of the commands trade.
//
//   BM_Book/...      the order book and the matching loop only (market/book.h): what a fill costs
//                    in the book, without leases or money.
//   BM_Exchange/...  the whole exchange (market/exchange.h) with a ledger: every fill opens a
//                    lease and settles its first hour (2 ledger transfers; a resting bid's hold is
//                    placed and voided), every command records its changes for the store.
// Each has a throughput variant (commands/s over the whole stream, nothing else timed) and a
// latency variant that times every command (p50/p99/p99.9 in ns, including ~20 ns of clock
// reads). The stream is deterministic (fixed seed): the generator runs the same engine once to
// know which orders rest, so every cancel names a live order.
//
// Exchange-core's published mix is 9% GTC, 3% IOC, 6% cancel, 82% move; our market has no move
// (an amend is a cancel and a new order), so the mix here is about 45% GTC, 15% IOC, 40% cancel,
// steered to keep ~1,000 orders resting.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "ledger/ledger.h"
#include "market/book.h"
#include "market/exchange.h"

namespace gpuhub::market {
namespace {

constexpr TimestampMicros kT = 1'800'000'000'000'000;
constexpr std::size_t kTargetResting = 1'000;
constexpr Ticks kMid = 2'880;  // 2.880 USD per GPU-hour

// ----- The book alone ---------------------------------------------------------------------------

enum class Op : std::uint8_t { kBidGtc, kBidIoc, kAsk, kCancel };
struct Command {
  Op op;
  std::int8_t gpus;  // bid: wanted; ask: free
  std::int8_t min_gpus;
  Ticks price;
  OrderId cancel_id;
};

// Matching over the book with the exchange's rules, minus leases and money: a bid takes the best
// ask that holds it (the ask's free GPUs shrink), an ask fills the best bids that fit.
class BookEngine {
 public:
  BookEngine() {
    book_.Reserve(4 * kTargetResting);
    free_.reserve(1 << 22);
  }
  // Returns whether the command traded.
  bool Apply(const Command& c) {
    switch (c.op) {
      case Op::kBidGtc:
      case Op::kBidIoc: {
        OrderId id = NextId();
        OrderId ask = book_.FindAsk(c.gpus, kAnyRegion, c.price, kT);
        if (ask != 0) {
          int left = free_[static_cast<std::size_t>(ask)] -= c.gpus;
          if (left == 0) {
            book_.Remove(ask);
          } else {
            book_.SetAskFree(ask, left);
          }
          return true;
        }
        if (c.op == Op::kBidGtc) {
          book_.AddBid({id, c.price, c.gpus, kAnyRegion, kNever});
          free_[static_cast<std::size_t>(id)] = c.gpus;
        }
        return false;
      }
      case Op::kAsk: {
        OrderId id = NextId();
        int free = c.gpus;
        bool traded = false;
        Ticks cursor = OrderBook::kBidCursorStart;
        while (free >= c.min_gpus) {
          OrderId bid = book_.FindBid(free, c.min_gpus, 1, c.price, kT, &cursor);
          if (bid == 0) break;
          free -= free_[static_cast<std::size_t>(bid)];
          book_.Remove(bid);
          traded = true;
        }
        if (free > 0) {
          book_.AddAsk({id, c.price, free, c.min_gpus, 1, kNever});
          free_[static_cast<std::size_t>(id)] = static_cast<std::int16_t>(free);
        }
        return traded;
      }
      case Op::kCancel:
        if (book_.Contains(c.cancel_id)) book_.Remove(c.cancel_id);
        return false;
    }
    return false;
  }
  std::size_t resting() const { return book_.ask_orders() + book_.bid_orders(); }
  const OrderBook& book() const { return book_; }

  // A live order id (for cancels), or 0.
  OrderId RandomResting(std::mt19937_64& rng) const {
    if (resting() == 0) return 0;
    for (int tries = 0; tries < 64; ++tries) {
      OrderId id = static_cast<OrderId>(rng() % static_cast<std::uint64_t>(next_id_ - 1)) + 1;
      // Recent orders are likelier to be alive: draw from the last few thousand.
      id = std::max<OrderId>(1, next_id_ - 1 - static_cast<OrderId>(rng() % 4000));
      if (book_.Contains(id)) return id;
    }
    return 0;
  }

 private:
  OrderId NextId() {
    OrderId id = next_id_++;
    if (free_.size() <= static_cast<std::size_t>(id))
      free_.resize(static_cast<std::size_t>(id) * 2);
    return id;
  }
  OrderBook book_;
  std::vector<std::int16_t> free_;  // by id: an ask's free GPUs, a bid's GPUs
  OrderId next_id_ = 1;
};

struct Stream {
  std::vector<Command> warmup;  // builds the ~1,000 resting orders
  std::vector<Command> timed;
  double trade_share = 0;
  std::size_t levels = 0;
};

Command RandomOrder(std::mt19937_64& rng, bool fill_up) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  Command c{};
  int kind = pick(1, 100);
  bool ask = kind <= 50;
  // Prices: a few hundred ticks either side of the mid; ~7% of orders cross into the other side.
  int offset = static_cast<int>(std::abs(std::normal_distribution<double>(0, 120)(rng))) + 1;
  bool aggressive = !fill_up && pick(1, 100) <= 7;
  if (ask) {
    c.op = Op::kAsk;
    c.gpus = static_cast<std::int8_t>(pick(0, 3) == 0 ? 4 : 8);
    c.min_gpus = static_cast<std::int8_t>(pick(1, 10) == 1 ? 2 : 1);
    c.price = aggressive ? kMid - pick(1, 150) : kMid + offset;
  } else {
    const int sizes[] = {1, 1, 2, 2, 4, 8};
    c.gpus = static_cast<std::int8_t>(sizes[pick(0, 5)]);
    c.min_gpus = 1;
    c.op = !fill_up && pick(1, 100) <= 25 ? Op::kBidIoc : Op::kBidGtc;
    c.price = aggressive || c.op == Op::kBidIoc ? kMid + pick(0, 150) : kMid - offset;
  }
  return c;
}

Stream MakeStream(std::size_t commands) {
  std::mt19937_64 rng(1130);
  BookEngine engine;
  Stream s;
  while (engine.resting() < kTargetResting) {
    Command c = RandomOrder(rng, /*fill_up=*/true);
    engine.Apply(c);
    s.warmup.push_back(c);
  }
  std::size_t trades = 0;
  s.timed.reserve(commands);
  while (s.timed.size() < commands) {
    // Cancel more when above the target, place more when below: the book stays near 1,000.
    int cancel_percent = engine.resting() > kTargetResting ? 55 : 25;
    Command c;
    if (static_cast<int>(rng() % 100) < cancel_percent) {
      c = Command{Op::kCancel, 0, 0, 0, engine.RandomResting(rng)};
      if (c.cancel_id == 0) continue;
    } else {
      c = RandomOrder(rng, /*fill_up=*/false);
    }
    trades += engine.Apply(c);
    s.timed.push_back(c);
  }
  s.trade_share = static_cast<double>(trades) / static_cast<double>(commands);
  s.levels = engine.book().AskLevels(100'000).size() + engine.book().BidLevels(100'000).size();
  return s;
}

const Stream& BookStream() {
  static const Stream stream = MakeStream(2'000'000);
  return stream;
}

void MixCounters(benchmark::State& state, const std::vector<Command>& commands, double trades,
                 std::size_t levels) {
  std::size_t gtc = 0, ioc = 0, cancel = 0;
  for (const auto& c : commands) {
    gtc += c.op == Op::kBidGtc || c.op == Op::kAsk;
    ioc += c.op == Op::kBidIoc;
    cancel += c.op == Op::kCancel;
  }
  double n = static_cast<double>(commands.size());
  state.counters["gtc_pct"] = 100.0 * static_cast<double>(gtc) / n;
  state.counters["ioc_pct"] = 100.0 * static_cast<double>(ioc) / n;
  state.counters["cancel_pct"] = 100.0 * static_cast<double>(cancel) / n;
  state.counters["trade_pct"] = 100.0 * trades;
  state.counters["levels"] = static_cast<double>(levels);
}

void LatencyCounters(benchmark::State& state, std::vector<std::int64_t>& ns) {
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return static_cast<double>(
        ns[std::min(ns.size() - 1, static_cast<std::size_t>(q * static_cast<double>(ns.size())))]);
  };
  state.counters["p50_ns"] = at(0.50);
  state.counters["p99_ns"] = at(0.99);
  state.counters["p99.9_ns"] = at(0.999);
  state.counters["max_ns"] = static_cast<double>(ns.back());
}

void BM_Book(benchmark::State& state) {
  const Stream& s = BookStream();
  const bool timed_each = state.range(0) == 1;
  std::vector<std::int64_t> ns;
  if (timed_each) ns.reserve(s.timed.size());
  std::size_t resting = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = std::make_unique<BookEngine>();
    for (const auto& c : s.warmup) engine->Apply(c);
    ns.clear();
    state.ResumeTiming();
    if (timed_each) {
      for (const auto& c : s.timed) {
        auto t0 = std::chrono::steady_clock::now();
        benchmark::DoNotOptimize(engine->Apply(c));
        ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count());
      }
    } else {
      for (const auto& c : s.timed) benchmark::DoNotOptimize(engine->Apply(c));
    }
    state.PauseTiming();
    resting = engine->resting();
    engine.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.timed.size()));
  MixCounters(state, s.timed, s.trade_share, s.levels);
  state.counters["resting_end"] = static_cast<double>(resting);
  if (timed_each) LatencyCounters(state, ns);
}
BENCHMARK(BM_Book)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("per_command_latency")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// ----- The whole exchange (leases and money)
// ------------------------------------------------------

enum class XOp : std::uint8_t { kBidGtc, kBidIoc, kBidMarket, kAsk, kCancelBid, kCancelAsk, kStop };
struct XCommand {
  XOp op;
  std::int8_t gpus;
  UserId user;
  std::int64_t id;  // machine (ask), bid, ask or lease id
  std::int64_t price_micros;
};

constexpr int kXProviders = 100;
constexpr int kXMachines = 3'000;  // 8 GPUs each
constexpr int kXCustomers = 1'000;

struct XWorld {
  Exchange exchange;
  ledger::Ledger ledger;
  Changes changes;
  TimestampMicros now = kT;
  XWorld()
      : exchange([] {
          ExchangeConfig c;
          c.gpus = {"H100 SXM"};
          c.regions = {"IAD-1"};
          return c;
        }()) {
    for (int u = 1; u <= kXCustomers; ++u) {
      ledger::TransferRequest t;
      t.id = "fund:" + std::to_string(u);
      t.debit = ledger::AccountKey::System(ledger::AccountKind::kDeposits, Currency::kUsd);
      t.credit = ledger::AccountKey::Wallet(1'000 + u, Currency::kUsd);
      t.amount_micros = 1'000'000'000LL * 1'000'000;
      t.code = "topup";
      t.timestamp = kT;
      if (!ledger.Apply(t).ok()) std::abort();
    }
    for (int m = 0; m < kXMachines; ++m) {
      if (!exchange
               .AddMachine(1 + m % kXProviders, {"H100 SXM", 8, "IAD-1", 64, 512, 2000}, kT,
                           &changes)
               .ok()) {
        std::abort();
      }
    }
  }
  // Returns whether the command traded.
  bool Apply(const XCommand& c) {
    changes.Clear();
    now += 1;  // a microsecond apart: no hour boundary is crossed
    std::size_t leases_before = exchange.active_lease_count();
    switch (c.op) {
      case XOp::kBidGtc:
      case XOp::kBidIoc:
      case XOp::kBidMarket: {
        BidSpec spec;
        spec.gpu = "H100 SXM";
        spec.gpus = c.gpus;
        spec.is_market = c.op == XOp::kBidMarket;
        spec.limit_micros = spec.is_market ? 0 : c.price_micros;
        spec.time_in_force = c.op == XOp::kBidGtc ? TimeInForce::kGtc : TimeInForce::kIoc;
        benchmark::DoNotOptimize(exchange.PlaceBid(c.user, spec, ledger, now, &changes).ok());
        break;
      }
      case XOp::kAsk:
        benchmark::DoNotOptimize(exchange
                                     .PlaceAsk(c.user,
                                               {c.id, c.price_micros, 1, kT + 7 * kMicrosPerDay},
                                               ledger, now, &changes)
                                     .ok());
        break;
      case XOp::kCancelBid:
        benchmark::DoNotOptimize(exchange.CancelBid(c.user, c.id, ledger, now, &changes).ok());
        break;
      case XOp::kCancelAsk:
        benchmark::DoNotOptimize(exchange.CancelAsk(c.user, c.id, now, &changes).ok());
        break;
      case XOp::kStop:
        benchmark::DoNotOptimize(exchange.StopLease(c.user, c.id, ledger, now, &changes).ok());
        break;
    }
    return exchange.active_lease_count() > leases_before;
  }
};

struct XStream {
  std::vector<XCommand> warmup;
  std::vector<XCommand> timed;
  double trade_share = 0;
};

XStream MakeXStream(std::size_t commands) {
  std::mt19937_64 rng(1130);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  XWorld world;
  XStream s;
  std::vector<MachineId> idle;  // machines without an open ask
  for (int m = 1; m <= kXMachines; ++m) idle.push_back(m);
  std::vector<std::pair<UserId, OrderId>> open_asks;
  std::vector<std::pair<UserId, OrderId>> bids;    // maybe resting
  std::vector<std::pair<UserId, LeaseId>> leases;  // maybe active
  auto resting = [&] {
    return world.exchange.resting_bid_count() + world.exchange.Markets()[0].asks;
  };
  auto order = [&](bool fill_up) {
    XCommand c{};
    int offset = static_cast<int>(std::abs(std::normal_distribution<double>(0, 120)(rng))) + 1;
    bool aggressive = !fill_up && pick(1, 100) <= 7;
    if (pick(1, 100) <= 35 && !idle.empty()) {
      std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(idle.size()) - 1));
      MachineId m = idle[i];
      idle[i] = idle.back();
      idle.pop_back();
      c.op = XOp::kAsk;
      c.id = m;
      c.user = world.exchange.FindMachine(m)->provider_id;
      c.price_micros = (aggressive ? kMid - pick(1, 150) : kMid + offset) * kPriceTickMicros;
      return c;
    }
    const int sizes[] = {1, 1, 2, 2, 4, 8};
    c.gpus = static_cast<std::int8_t>(sizes[pick(0, 5)]);
    c.user = 1'000 + pick(1, kXCustomers);
    int kind = pick(1, 100);
    c.op = fill_up || kind > 30 ? XOp::kBidGtc : kind > 5 ? XOp::kBidIoc : XOp::kBidMarket;
    Ticks price = aggressive || c.op != XOp::kBidGtc ? kMid + pick(0, 150) : kMid - offset;
    c.price_micros = price * kPriceTickMicros;
    return c;
  };
  auto record = [&](std::vector<XCommand>& out, const XCommand& c) {
    bool traded = world.Apply(c);
    out.push_back(c);
    // Learn what the command created, to cancel or stop it later.
    for (OrderId b : world.changes.bids) {
      const Bid* bid = world.exchange.FindBid(b);
      if (bid->status == BidStatus::kResting) bids.push_back({bid->customer_id, b});
    }
    for (const auto& t : world.changes.trades) {
      const Lease* l = world.exchange.FindLease(t.lease_id);
      leases.push_back({l->customer_id, l->id});
    }
    if (c.op == XOp::kAsk) {
      const Machine* m = world.exchange.FindMachine(c.id);
      for (const auto& v : world.exchange.ListMachines(m->provider_id, kXMachines)) {
        if (v.machine.id == c.id) open_asks.push_back({m->provider_id, v.open_ask});
      }
    }
    return traded;
  };
  while (resting() < kTargetResting) record(s.warmup, order(true));
  std::size_t trades = 0;
  while (s.timed.size() < commands) {
    int cancel_percent = resting() > kTargetResting ? 55 : 25;
    if (pick(1, 100) <= cancel_percent) {
      // Cancel a bid or an ask, or stop a lease (which frees GPUs: the next "ask" may be idle
      // capacity coming back).
      int which = pick(1, 100);
      XCommand c{};
      if (which <= 50 && !bids.empty()) {
        std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(bids.size()) - 1));
        c = {XOp::kCancelBid, 0, bids[i].first, bids[i].second, 0};
        bids[i] = bids.back();
        bids.pop_back();
        if (world.exchange.FindBid(c.id)->status != BidStatus::kResting) continue;
      } else if (which <= 80 && !open_asks.empty()) {
        std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(open_asks.size()) - 1));
        c = {XOp::kCancelAsk, 0, open_asks[i].first, open_asks[i].second, 0};
        open_asks[i] = open_asks.back();
        open_asks.pop_back();
        const Ask* a = world.exchange.FindAsk(c.id);
        if (a->status != AskStatus::kOpen) continue;
        idle.push_back(a->machine_id);
      } else if (!leases.empty()) {
        std::size_t i = static_cast<std::size_t>(pick(0, static_cast<int>(leases.size()) - 1));
        c = {XOp::kStop, 0, leases[i].first, leases[i].second, 0};
        leases[i] = leases.back();
        leases.pop_back();
        if (world.exchange.FindLease(c.id)->status != LeaseStatus::kActive) continue;
      } else {
        continue;
      }
      trades += record(s.timed, c);
    } else {
      trades += record(s.timed, order(false));
    }
  }
  s.trade_share = static_cast<double>(trades) / static_cast<double>(commands);
  return s;
}

const XStream& ExchangeStream() {
  static const XStream stream = MakeXStream(200'000);
  return stream;
}

void BM_Exchange(benchmark::State& state) {
  const XStream& s = ExchangeStream();
  const bool timed_each = state.range(0) == 1;
  std::vector<std::int64_t> ns;
  std::size_t transfers = 0, resting = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto world = std::make_unique<XWorld>();
    for (const auto& c : s.warmup) world->Apply(c);
    std::size_t transfers_before = world->ledger.Transfers().size();
    ns.clear();
    ns.reserve(s.timed.size());
    state.ResumeTiming();
    if (timed_each) {
      for (const auto& c : s.timed) {
        auto t0 = std::chrono::steady_clock::now();
        world->Apply(c);
        ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - t0)
                         .count());
      }
    } else {
      for (const auto& c : s.timed) world->Apply(c);
    }
    state.PauseTiming();
    transfers = world->ledger.Transfers().size() - transfers_before;
    resting = world->exchange.resting_bid_count() + world->exchange.Markets()[0].asks;
    if (!world->exchange.CheckInvariants(world->ledger).ok()) state.SkipWithError("invariants");
    world.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.timed.size()));
  std::size_t gtc = 0, ioc = 0, cancel = 0;
  for (const auto& c : s.timed) {
    gtc += c.op == XOp::kBidGtc || c.op == XOp::kAsk;
    ioc += c.op == XOp::kBidIoc || c.op == XOp::kBidMarket;
    cancel += c.op == XOp::kCancelBid || c.op == XOp::kCancelAsk || c.op == XOp::kStop;
  }
  double n = static_cast<double>(s.timed.size());
  state.counters["gtc_pct"] = 100.0 * static_cast<double>(gtc) / n;
  state.counters["ioc_pct"] = 100.0 * static_cast<double>(ioc) / n;
  state.counters["cancel_stop_pct"] = 100.0 * static_cast<double>(cancel) / n;
  state.counters["trade_pct"] = 100.0 * s.trade_share;
  state.counters["ledger_transfers"] = static_cast<double>(transfers);
  state.counters["resting_end"] = static_cast<double>(resting);
  if (timed_each) LatencyCounters(state, ns);
}
BENCHMARK(BM_Exchange)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("per_command_latency")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace gpuhub::market

BENCHMARK_MAIN();
