// Fills a store with market history through the engine's own commands (so every row is one the
// real server would write, ledger included) for the start-up and memory figures of
// bench/history/startup.sh:
//
//   history_gen --db URL --orders N [--invoiced]
//
// Per ten commands: eight IOC bids priced under the only ask (each a closed, cancelled bid), one
// IOC market bid that fills (a closed bid, a trade and a lease) and the stop of that lease (an
// ended lease). So N orders leave N closed bids, N/9 trades and N/9 ended leases behind, plus
// their ledger transfers. The market is "H100 SXM" in region DFW-1 (both in data/catalog.toml), so
// `gpuhub serve --db URL` loads the result. 256 commands are kept in flight (group commit).
// --invoiced: the orders are placed in the previous month (a manual clock), and that month's spot
// statement is then issued as the tick would (in parts of billing::kMaxLinesPerDocument lines: a
// line per lease), so the history is what it is after a month end: closed, and on invoices.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "core/clock.h"
#include "engine/accounts.h"
#include "engine/billing.h"
#include "engine/engine.h"
#include "engine/market.h"
#include "engine/wallets.h"
#include "billing/statement.h"
#include "store/store.h"

namespace gpuhub::engine {
namespace {

constexpr int kInFlight = 256;
constexpr std::int64_t kAskMicrosPerHour = 2'500'000;  // $2.50 per GPU-hour
constexpr const char* kGpu = "H100 SXM";
constexpr const char* kRegion = "DFW-1";

int Run(const std::string& url, std::int64_t orders, bool invoiced) {
  auto opened = store::OpenStore(url);
  if (!opened.ok()) {
    std::fprintf(stderr, "history_gen: %s\n", opened.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<store::Store> store = std::move(opened).value();
  if (Status s = store->Migrate(); !s.ok()) {
    std::fprintf(stderr, "history_gen: %s\n", s.ToString().c_str());
    return 1;
  }
  RealClock real_clock;
  const TimestampMicros now = real_clock.NowMicros();
  const TimestampMicros last_month = billing::MonthOf(billing::MonthOf(now).start - 1).start;
  ManualClock manual_clock(last_month + std::int64_t{24} * 3600 * 1000000);
  Clock& clock = invoiced ? static_cast<Clock&>(manual_clock) : real_clock;
  MetricsRegistry metrics;
  EngineOptions options;
  options.run_periodic_ticks = false;
  options.domains.market.gpus = {kGpu};
  options.domains.market.regions = {kRegion};
  Engine engine(std::move(store), clock, metrics, options);
  if (Status s = engine.Start(); !s.ok()) {
    std::fprintf(stderr, "history_gen: %s\n", s.ToString().c_str());
    return 1;
  }
  struct Parties {
    std::int64_t customer = 0;
    market::MachineId machine = 0;
  };
  auto parties = engine.ExecuteSync<Parties>([&](Txn& txn) -> Result<Parties> {
    std::string suffix = std::to_string(txn.state.accounts.next_user_id);
    GPUHUB_ASSIGN_OR_RETURN(User admin, CreateUser(txn, "hist_admin_" + suffix, "h", kRoleAdmin));
    GPUHUB_ASSIGN_OR_RETURN(User provider,
                            CreateUser(txn, "hist_provider_" + suffix, "h", kRoleProvider));
    GPUHUB_ASSIGN_OR_RETURN(User customer,
                            CreateUser(txn, "hist_customer_" + suffix, "h", kRoleCustomer));
    // Billing charges the tax of the buyer's country: a US customer pays none.
    GPUHUB_RETURN_IF_ERROR(SetBillingProfile(txn, customer.id, {"US", "", "", "Dallas"}).status());
    // Enough for every lease-hour of the run: one hour of one GPU per fill.
    for (int i = 0; i < 100; ++i) {
      GPUHUB_RETURN_IF_ERROR(ManualCredit(txn, admin.id, customer.id, Currency::kUsd,
                                          1'000'000'000'000, "history_gen")
                                 .status());
    }
    market::MachineSpec spec{kGpu, 8, kRegion, 64, 512, 2000};
    GPUHUB_ASSIGN_OR_RETURN(market::Machine machine, AddMachine(txn, provider.id, spec));
    market::AskSpec ask{machine.id, kAskMicrosPerHour, 1,
                        txn.now + std::int64_t{300} * 24 * 3600 * 1000000};
    GPUHUB_RETURN_IF_ERROR(PlaceAsk(txn, provider.id, ask).status());
    return Parties{customer.id, machine.id};
  });
  if (!parties.ok()) {
    std::fprintf(stderr, "history_gen: setup: %s\n", parties.status().ToString().c_str());
    return 1;
  }
  const std::int64_t customer = parties->customer;

  std::mutex m;
  std::condition_variable cv;
  std::int64_t in_flight = 0, failed = 0;
  std::string first_error;
  auto finished = [&](const Status& s) {
    std::lock_guard<std::mutex> lock(m);
    --in_flight;
    if (!s.ok() && failed++ == 0) first_error = s.ToString();
    cv.notify_one();
  };
  auto wait_for_slot = [&] {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return in_flight < kInFlight; });
    ++in_flight;
  };
  auto started = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < orders; ++i) {
    wait_for_slot();
    bool fill = i % 9 == 8;
    engine.Execute<int>(
        [customer, fill](Txn& txn) -> Result<int> {
          market::BidSpec bid;
          bid.gpu = kGpu;
          bid.gpus = 1;
          bid.time_in_force = market::TimeInForce::kIoc;
          if (fill) {
            bid.is_market = true;
          } else {
            bid.limit_micros = kAskMicrosPerHour / 2;  // under the ask: cancelled at once
          }
          GPUHUB_ASSIGN_OR_RETURN(market::BidResult placed, PlaceBid(txn, customer, bid));
          // The fill's lease ends in the same command (the machine's GPUs stay free).
          if (placed.lease) GPUHUB_RETURN_IF_ERROR(StopLease(txn, customer, placed.lease->id).status());
          return 0;
        },
        [&](Result<int> r) { finished(r.status()); });
    if ((i + 1) % 100000 == 0) {
      std::fprintf(stderr, "history_gen: %lld orders\n", static_cast<long long>(i + 1));
    }
  }
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return in_flight == 0; });
  }
  std::int64_t statements = 0;
  if (invoiced && failed == 0) {
    manual_clock.Set(now);
    for (;;) {
      auto issued = engine.ExecuteSync<std::size_t>(
          [](Txn& txn) -> Result<std::size_t> { return IssueDueStatements(txn); });
      if (!issued.ok()) {
        std::fprintf(stderr, "history_gen: statements: %s\n", issued.status().ToString().c_str());
        return 1;
      }
      if (*issued == 0) break;
      statements += static_cast<std::int64_t>(*issued);
    }
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  engine.Stop();
  if (failed) {
    std::fprintf(stderr, "history_gen: %lld commands failed, the first: %s\n",
                 static_cast<long long>(failed), first_error.c_str());
    return 1;
  }
  std::printf("history_gen: %lld orders (%lld fills, leases ended; %lld account-month statements) "
              "in %.1f s (%.0f/s) into %s\n",
              static_cast<long long>(orders), static_cast<long long>(orders / 9),
              static_cast<long long>(statements), seconds, static_cast<double>(orders) / seconds,
              url.c_str());
  return 0;
}

}  // namespace
}  // namespace gpuhub::engine

int main(int argc, char** argv) {
  std::string url;
  long long orders = 100000;
  bool invoiced = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--db") && i + 1 < argc) {
      url = argv[++i];
    } else if (!std::strcmp(argv[i], "--invoiced")) {
      invoiced = true;
    } else if (!std::strcmp(argv[i], "--orders") && i + 1 < argc) {
      orders = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: history_gen --db URL [--orders N] [--invoiced]\n");
      return 2;
    }
  }
  if (url.empty() || orders < 1) {
    std::fprintf(stderr, "usage: history_gen --db URL [--orders N] [--invoiced]\n");
    return 2;
  }
  return gpuhub::engine::Run(url, orders, invoiced);
}
