// The spot exchange: machines, asks, bids, leases, trades and payouts of every market, matched by
// price-time priority and settled hour by hour through the double-entry ledger.
//
// Contract
// - Pure and deterministic: no I/O, no clock (every command takes `now`), no threads. The same
//   commands with the same times against the same ledger give the same state.
// - Not thread-safe: the engine's single writer calls the mutating methods; const methods may run
//   concurrently with each other only.
// - Commands validate first and change nothing when they fail (the ledger batches they apply are
//   atomic). Expected failures are Status codes: invalid_argument (bad input), not_found (unknown
//   id, or one that belongs to someone else), failed_precondition (wrong state: cancelling a filled
//   bid), conflict (a machine that already has an open ask), insufficient_funds (the wallet cannot
//   pay the first hour or the hold), resource_exhausted (per-account limits).
// - Each command reports what it changed in `Changes` (records to persist and the ledger transfers
//   it applied, in order); the engine writes them in the same group commit.
//
// Rules (spec: "Spot exchange"; see book.h for matching)
// - Trade price = the price of the order that was on the book first (the resting order; when the
//   GPUs of a lease come back to an ask and a bid that was already resting now fits, the older of
//   the two). All N GPUs of a bid come from one machine: the lowest-numbered free GPUs.
// - A resting (gtc) bid holds one hour at its limit: a pending transfer wallet -> holds, converted
//   into the wallet's currency at placement. A fill voids the hold and pays the first hour in one
//   atomic ledger batch; cancel and expiry void it. If a fill of a resting bid cannot pay (only
//   possible when FX moved against a non-USD wallet) the bid is cancelled (insufficient_funds) and
//   matching goes on with the next bid.
// - No self-trades: an account that is both provider and customer never trades with itself. A bid
//   passes over its own account's asks (it takes the best ask of another account, or rests), and
//   an ask passes over its own account's resting bids. Both may then rest on the book at prices
//   that cross each other; another account's order still matches either.
// - Market bids are immediate-or-cancel: they take the best offer or are cancelled ("no_match").
//   An ioc bid that finds nothing is recorded as cancelled, which is not an error.
// - Leases are billed per hour in advance: hour 1 at the trade, hour k+1 at started_at + k hours.
//   Each hour: customer wallet -> provider payable (price - fee) and -> platform revenue (fee), fee
//   = round_half_even(price x fee_ppm / 1e6), and -> tax payable (tax = round_half_even(price x
//   the customer's tax rate at that hour), SetTaxRate; no leg when 0); a non-USD wallet pays
//   through the FX accounts, price + tax converted at that moment (ledger.h). Each charged hour is
//   reported in Changes::hours (billing's monthly statement). A resting bid's hold is one hour of
//   its limit plus the tax at its placement. Transfer ids name the lease and the hour, so an hour
//   can never be charged twice. A lease whose next hour cannot be paid ends at that boundary; a
//   lease never sells an hour past its ask's available_until (it ends at the last boundary that
//   leaves no room for another whole hour). Stopping ends a lease now; the paid hour is kept.
// - FX: a lease paid from a non-USD wallet converts every hour at that hour's rate, and a resting
//   non-USD bid converts its first hour when it fills, so the rate of {currency, USD} must exist
//   while any of them is open: RemoveFxRate refuses to remove it (replacing it with another rate
//   is always allowed). A lease that still meets no rate at an hour (data from before this rule)
//   ends with `no_fx_rate`, not `unpaid`; a resting bid's fill that meets none is cancelled with
//   close reason `no_fx_rate`.
//   When a lease ends its GPUs go back to the machine's open ask, which then matches resting bids.
// - Provisioning (SetStartTimeout): a lease on a machine whose host runs its workloads is billed
//   from the moment its host reports the workload running, not from the fill. At the fill one hour
//   and its tax is held from the wallet ("lease:N:hold", in the wallet's currency, like a resting
//   bid's hold); ReportLeaseWorkload(running) voids it and charges hour 1 from then in one batch.
//   Not running by the deadline, the lease ends not_started and the hold is voided: the buyer got
//   back exactly what was held, the provider and the platform never had any of it. A customer who
//   stops a provisioning lease pays nothing either. A workload that stops after it ran pauses the
//   lease as an offline machine does (credit of the unused paid hour, a new whole hour when it
//   runs again).
// - An ask expires (leaves the book) one hour before its available_until; a cancelled ask leaves at
//   once. Running leases continue either way.
// - Time-driven work (hour boundaries, expiries) happens in AdvanceTo, in time order, each event
//   at its own timestamp: advancing a manual clock by a week replays the week hour by hour.
//   Between ticks, orders past their time simply stop matching (book.h: lazy expiry).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "ledger/ledger.h"
#include "market/book.h"
#include "market/config.h"
#include "market/limits.h"
#include "market/types.h"

namespace gpuhub::market {

// ----- Inputs
// -------------------------------------------------------------------------------------

struct MachineSpec {
  std::string gpu;  // a listed market, any spelling GpuKey accepts
  int gpus = 0;
  std::string region;
  std::int64_t vcpus = 0;
  std::int64_t ram_gb = 0;
  std::int64_t disk_gb = 0;
  int port_range_first = kDefaultPortRangeFirst;  // limits.h: ValidatePortRange
  int port_range_last = kDefaultPortRangeLast;
};

struct AskSpec {
  MachineId machine_id = 0;
  std::int64_t price_micros = 0;  // per GPU-hour, multiple of the tick
  int min_gpus = 1;
  TimestampMicros available_until = 0;
};

// What a machine's host agent shows the control plane (engine/agents.h), applied with
// Exchange::SetMachineCondition. The defaults are a machine that trades as listed.
struct MachineCondition {
  TimestampMicros offline_since = 0;  // > 0: offline, its agent last seen at that time
  std::uint32_t blocked_mask = 0;     // GPUs not sold to new leases (bit i = GPU i)
  std::string hold_reason;            // not empty: none of the machine's GPUs is sold
  friend bool operator==(const MachineCondition&, const MachineCondition&) = default;
};

struct BidSpec {
  std::string gpu;
  int gpus = 0;
  std::string region;  // "" = any
  bool is_market = false;
  std::int64_t limit_micros = 0;  // per GPU-hour; must be 0 for a market bid
  TimeInForce time_in_force = TimeInForce::kIoc;
  TimestampMicros expires_at = 0;  // gtc only; 0 = none
  Currency currency = Currency::kUsd;
};

// ----- Outputs
// ------------------------------------------------------------------------------------

// One lease-hour charged to a customer (the domain event billing adds to the monthly statement).
struct HourCharge {
  LeaseId lease_id = 0;
  UserId customer_id = 0;
  std::int64_t hour = 0;   // 1, 2, ... of the lease
  TimestampMicros at = 0;  // the start of the hour
  std::string gpu;
  int gpus = 0;
  std::int64_t price_micros = 0;  // USD per GPU-hour
  std::int64_t net_micros = 0;    // USD: gpus x price
  std::int64_t rate_ppm = 0;      // the tax rate charged with it
  std::int64_t tax_micros = 0;    // USD: round_half_even(net x rate)
};

// What a command changed. Id lists are deduplicated by Normalize (the engine upserts each record
// once); trades are new records; transfers are the ledger records applied, in order; hours are
// the lease-hours charged, in order.
struct Changes {
  std::vector<ledger::Transfer> transfers;
  std::vector<HourCharge> hours;
  std::vector<MachineId> machines;
  std::vector<OrderId> asks;
  std::vector<OrderId> bids;
  std::vector<LeaseId> leases;
  std::vector<PayoutId> payouts;
  std::vector<Trade> trades;
  std::vector<UserId> providers;  // whose ProviderHistory changed (History())

  void Clear();
  void Normalize();  // sorts and deduplicates the id lists
  bool empty() const;
};

struct BidResult {
  Bid bid;
  std::optional<Lease> lease;  // when filled
  std::optional<Trade> trade;
};

struct MachineView {
  Machine machine;
  int leased_gpus = 0;
  OrderId open_ask = 0;  // 0 when none
};

struct MarketSummary {
  std::string gpu;
  bool listed = true;                           // takes new machines
  std::optional<std::int64_t> best_ask_micros;  // per GPU-hour: the "from $X/h"
  std::optional<std::int64_t> best_bid_micros;
  std::int64_t gpus_on_offer = 0;  // free GPUs of all asks on the book
  std::int64_t gpus_bid = 0;       // GPUs wanted by resting bids
  std::size_t asks = 0;
  std::size_t bids = 0;
  std::optional<Trade> last_trade;
};

struct BookDepth {
  std::string gpu;
  std::vector<BookLevel> asks;  // best (lowest) first
  std::vector<BookLevel> bids;  // best (highest) first
};

// An ask on the book as a buyer sees it (fit on live prices): the machine's free GPUs for sale.
struct Offer {
  OrderId ask_id = 0;
  MachineId machine_id = 0;
  std::string gpu;
  std::string region;
  int free_gpus = 0;
  int min_gpus = 1;
  std::int64_t price_micros = 0;  // per GPU-hour
  TimestampMicros available_until = 0;
  std::int64_t vcpus = 0;
  std::int64_t ram_gb = 0;
  std::int64_t disk_gb = 0;
};

struct Earnings {
  std::int64_t gross_micros = 0;  // every lease-hour sold, USD
  std::int64_t fee_micros = 0;    // the platform's share
  std::int64_t net_micros = 0;    // credited to the payable: gross - fee
  std::int64_t gpu_hours = 0;
  std::int64_t lease_hours = 0;
  std::int64_t active_leases = 0;
  std::int64_t available_micros = 0;       // payable that can be paid out now
  std::int64_t pending_payout_micros = 0;  // requested, not yet paid
  std::int64_t paid_out_micros = 0;
  // Downtime credits taken back from the provider's payable (the machine was offline while
  // leased); net_micros already excludes them.
  std::int64_t credited_micros = 0;
};

// What a provider's history adds up to: every lease-hour sold and every payout paid. Kept as
// running totals (persisted in the same batch as the records that change them) so that a restore
// needs no closed record to know a provider's earnings.
struct ProviderHistory {
  UserId provider_id = 0;
  std::int64_t gross_micros = 0;  // every lease-hour sold, USD
  std::int64_t fee_micros = 0;
  std::int64_t gpu_hours = 0;
  std::int64_t lease_hours = 0;
  std::int64_t credited_micros = 0;  // downtime credits out of the payable
  std::int64_t paid_out_micros = 0;
  friend bool operator==(const ProviderHistory&, const ProviderHistory&) = default;
};

// The highest id of each kind ever issued (0: none), closed records included: new ids continue
// after them.
struct LastIds {
  MachineId machine = 0;
  OrderId order = 0;  // asks and bids share one sequence
  LeaseId lease = 0;
  TradeId trade = 0;
  PayoutId payout = 0;
  friend bool operator==(const LastIds&, const LastIds&) = default;
};

// What Restore rebuilds an exchange from: the records to hold in memory (any subset that holds
// every open one: open asks, resting bids, active and paused leases, pending payouts, and the
// recent trades of each market; closed ones given are kept as given), the providers' history
// totals and the last ids. Records() of an exchange restores an identical one.
struct Snapshot {
  std::vector<Machine> machines;
  std::vector<Ask> asks;
  std::vector<Bid> bids;
  std::vector<Lease> leases;
  std::vector<Trade> trades;  // any order; each market keeps its newest kRecentTradesPerMarket
  std::vector<Payout> payouts;
  std::vector<ProviderHistory> providers;
  LastIds last_ids;
};

class Exchange {
 public:
  // `config` must be valid (ValidateExchangeConfig): a programmer error otherwise.
  explicit Exchange(ExchangeConfig config = {});

  // ----- Tax -----------------------------------------------------------------------------------
  // Prices are net. The tax rate (parts per million) a customer pays on a lease-hour bought at
  // `at`: billing decides it (the buyer's country, reverse charge); it must be deterministic and
  // within 0..kPpm. Without one (the default) no tax is charged.
  using TaxRateFn = std::function<std::int64_t(UserId customer, TimestampMicros at)>;
  void SetTaxRate(TaxRateFn fn) { tax_rate_ = std::move(fn); }
  std::int64_t TaxRatePpm(UserId customer, TimestampMicros at) const;

  // ----- Providers ---------------------------------------------------------------------------
  Result<Machine> AddMachine(UserId provider, const MachineSpec& spec, TimestampMicros now,
                             Changes* changes);
  // The ask offers the machine's free GPUs and matches resting bids at once.
  Result<Ask> PlaceAsk(UserId provider, const AskSpec& spec, ledger::Ledger& ledger,
                       TimestampMicros now, Changes* changes);
  Result<Ask> CancelAsk(UserId provider, OrderId ask_id, TimestampMicros now, Changes* changes);
  // A pending transfer provider_payable -> payouts (USD); insufficient_funds beyond what is
  // available.
  Result<Payout> RequestPayout(UserId provider, std::int64_t amount_micros, ledger::Ledger& ledger,
                               TimestampMicros now, Changes* changes);
  // An admin marks a pending payout paid (posts it) or rejected (voids it).
  Result<Payout> ResolvePayout(UserId admin, PayoutId payout_id, bool paid, ledger::Ledger& ledger,
                               TimestampMicros now, Changes* changes);

  // ----- Machine condition (the host agent's view; machine_condition.cc) -----------------------
  // Sets what the machine's agent shows. No provider check: the control plane decides. First runs
  // every time-driven event up to `now` (AdvanceTo), then:
  // - Going offline pauses each active lease of the machine: it is no longer billed, and the
  //   unused part of its paid hour, from max(offline_since, the hour's start) to its end, is
  //   credited back to the customer pro rata (half-even): the provider's share out of the
  //   provider's payable (what the payable cannot cover, because it was paid out, the platform
  //   advances from its revenue), the fee out of platform revenue; a non-USD wallet gets back the
  //   same fraction of what it paid for that hour, in its own currency (no new FX quote).
  // - Back online, each paused lease is billed a new whole hour from `now` (or ends as at any hour
  //   boundary: unpaid, window_ended, no_fx_rate).
  // - Offline or held machines offer nothing; blocked GPUs are never sold to a new lease. Running
  //   leases are left alone (their GPUs stay theirs). Freed capacity matches resting bids at once.
  // - A provisioning lease is not billed, so offline does not pause it (its deadline still runs);
  //   a lease paused because its workload is down stays paused when the machine is back.
  // Errors (nothing changes): not_found for an unknown machine; invalid_argument for
  // offline_since after `now`, a blocked GPU beyond the machine's GPUs, or a hold_reason longer
  // than kMaxHoldReasonBytes.
  Result<Machine> SetMachineCondition(MachineId id, const MachineCondition& condition,
                                      ledger::Ledger& ledger, TimestampMicros now,
                                      Changes* changes);

  // ----- Leases on machines with a host agent (machine_condition.cc) --------------------------
  // How long a new lease on the machine waits for its host to report its workload running
  // (provisioning), or 0: it runs from its fill (a machine without a host to wait for; the
  // default when none is set). Must be deterministic and at most kMaxLeaseStartTimeoutMicros.
  using StartTimeoutFn = std::function<std::int64_t(MachineId machine)>;
  void SetStartTimeout(StartTimeoutFn fn) { start_timeout_ = std::move(fn); }
  // What the lease's host reports of its workload at `now` (first runs AdvanceTo(now)):
  // - running while provisioning: the hold is voided and hour 1 charged from now. Instead it ends
  //   (the hold voided, nothing charged) when a whole hour from now no longer fits its window
  //   (window_ended), or the hour cannot be paid (unpaid, no_fx_rate: only when FX or the tax rate
  //   moved since the fill).
  // - not running after it ran: paused and credited from now as while its machine is offline
  //   (nothing more when the machine already is); running again: a new whole hour from now
  //   (unless its machine is offline: it resumes with the machine).
  // - anything else (not running while provisioning, an ended lease) changes nothing.
  // Returns the lease as it is then; not_found for an unknown lease.
  Result<Lease> ReportLeaseWorkload(LeaseId id, bool running, ledger::Ledger& ledger,
                                    TimestampMicros now, Changes* changes);

  // ----- Customers ---------------------------------------------------------------------------
  Result<BidResult> PlaceBid(UserId customer, const BidSpec& spec, ledger::Ledger& ledger,
                             TimestampMicros now, Changes* changes);
  Result<Bid> CancelBid(UserId customer, OrderId bid_id, ledger::Ledger& ledger,
                        TimestampMicros now, Changes* changes);
  Result<Lease> StopLease(UserId customer, LeaseId lease_id, ledger::Ledger& ledger,
                          TimestampMicros now, Changes* changes);

  // ----- FX ------------------------------------------------------------------------------------
  // Removes the FX rate of the pair {a, b} from `ledger` (Ledger::RemoveFxRate) unless the
  // exchange will still convert through it: when one side is USD and active leases or resting
  // bids pay from wallets in the other currency, failed_precondition (409) saying how many and
  // that the rate can be replaced (SetFxRate) instead. Other errors: the ledger's (not_found when
  // no rate is set, invalid_argument for a == b). Changes nothing on error.
  Result<ledger::FxRateChange> RemoveFxRate(Currency a, Currency b, ledger::Ledger& ledger,
                                            TimestampMicros now);

  // ----- Time ----------------------------------------------------------------------------------
  // Runs every time-driven event due at or before `now`, in time order: hour boundaries of
  // leases (charge or end), bid and ask expiries, and the matching that freed GPUs allow.
  void AdvanceTo(ledger::Ledger& ledger, TimestampMicros now, Changes* changes);
  // When the next event is due (kNever when none).
  TimestampMicros NextEventAt() const;

  // ----- Queries -------------------------------------------------------------------------------
  const ExchangeConfig& config() const { return config_; }
  // The canonical name of a market ("h100-sxm" -> "H100 SXM"); not_found when unknown.
  Result<std::string> MarketName(std::string_view gpu) const;
  const Machine* FindMachine(MachineId id) const;
  const Ask* FindAsk(OrderId id) const;
  const Bid* FindBid(OrderId id) const;
  const Lease* FindLease(LeaseId id) const;
  const Payout* FindPayout(PayoutId id) const;
  int FreeGpus(MachineId id) const;  // 0 for an unknown machine
  // The machine's active leases (paused ones too), by id.
  std::vector<Lease> ActiveLeasesOn(MachineId id) const;

  // Newest first, at most `limit`. `before` (a keyset cursor: the last id of the page before; 0:
  // from the newest) keeps only ids below it, so pages never skip or repeat a row while new ones
  // arrive.
  std::vector<MachineView> ListMachines(UserId provider, std::size_t limit) const;
  std::vector<Ask> ListAsks(UserId provider, std::size_t limit) const;
  std::vector<Bid> ListBids(UserId customer, std::size_t limit, OrderId before = 0) const;
  std::vector<Lease> ListCustomerLeases(UserId customer, std::size_t limit,
                                        LeaseId before = 0) const;
  std::vector<Lease> ListProviderLeases(UserId provider, std::size_t limit,
                                        LeaseId before = 0) const;
  std::vector<Payout> ListPayouts(UserId provider, std::size_t limit) const;
  std::vector<Payout> ListPendingPayouts(std::size_t limit) const;  // oldest first, all providers

  // Listed markets in config order, then unlisted ones that still have orders or leases.
  std::vector<MarketSummary> Markets() const;
  Result<BookDepth> Book(std::string_view gpu, std::size_t max_levels) const;
  // Newest first (the recent trades kept per market), ids below `before` when it is not 0;
  // not_found for an unknown market.
  Result<std::vector<Trade>> Trades(std::string_view gpu, std::size_t limit,
                                    TradeId before = 0) const;
  // Whether Trades() sees every trade the market ever had (its recent list never dropped one):
  // when not, pages older than the recent trades are the store's. not_found for an unknown market.
  Result<bool> HoldsAllTrades(std::string_view gpu) const;
  // The best (lowest) ask of the market on the book now, per GPU-hour; nullopt when it has no
  // asks. not_found for an unknown market. O(1) past the market's lookup.
  Result<std::optional<std::int64_t>> BestAsk(std::string_view gpu) const;
  // Asks that can be taken at `now`, cheapest first; `gpu` empty = every market.
  Result<std::vector<Offer>> Offers(std::string_view gpu, TimestampMicros now) const;
  Earnings ProviderEarnings(UserId provider, const ledger::Ledger& ledger) const;
  // The provider's history totals (zeros and the id when it has none).
  ProviderHistory History(UserId provider) const;
  // Lease-hours sold by every provider, ever (the ledger holds one lease_hour leg per hour).
  std::int64_t lease_hours_sold() const;

  // The bids that are still open business: resting ones and those whose lease is live (what is
  // kept beside them, such as a bid's launch spec, lives as long as they do). Ascending.
  std::vector<OrderId> OpenBidIds() const;

  std::size_t machine_count() const { return machines_.size(); }
  std::vector<MachineId> MachineIds() const;  // every machine, ascending
  // The id the next ask or bid will get: orders with a lower id were made by earlier commands.
  OrderId next_order_id() const { return next_order_id_; }
  std::size_t active_lease_count() const { return active_leases_; }
  std::size_t resting_bid_count() const;
  std::size_t open_ask_count() const;

  // ----- Persistence ---------------------------------------------------------------------------
  // Drops from memory the records named in `changes` that are closed now (bids no longer
  // resting, ended leases, closed asks, resolved payouts): call it once their final rows are
  // written. From then on Find*/List* no longer see them (their history is the store's) and
  // memory holds only what is open, whatever the history. Commands behave the same either way:
  // no rule ever reads a closed record.
  void Forget(const Changes& changes);

  // Rebuilds the exchange from its records (see Snapshot). Records that contradict each other (a
  // GPU in two active leases, an open ask on an unknown machine, ...) are `internal`: the store
  // holds something no exchange produced.
  static Result<Exchange> Restore(ExchangeConfig config, Snapshot snapshot);
  // Every record in memory, the providers' totals and the last ids: what Restore needs to rebuild
  // this exchange (tests compare a restored exchange with the original).
  Snapshot Records() const;

  // ----- Invariants ----------------------------------------------------------------------------
  // Cheap enough for tests to run after every command: no GPU in two active leases and each
  // machine's leased mask is the union of its active leases; the books agree with the open asks
  // (free GPUs) and the resting bids; every resting bid's hold, and every provisioning lease's,
  // is pending in the ledger for its amount; a lease is paused exactly while its machine is
  // offline or its workload down; per-account counters and the event timeline
  // agree with the records; the books' own structures are consistent.
  Status CheckInvariants(const ledger::Ledger& ledger) const;
  // Thorough, O(lease-hours + bids): every hour 1..hours_paid of every lease is in the ledger
  // exactly as it must be (customer paid = provider credited + fee, in USD), hour hours_paid + 1 is
  // not, and every closed bid released its hold; the leases and bids checked are those in memory
  // plus `history` (the closed ones Forget dropped, as the store holds them). With `history`, the
  // providers' totals must also equal the sums over all of those leases (without it the totals
  // cannot be checked here: the engine checks them against the ledger's legs instead).
  Status CheckSettlement(const ledger::Ledger& ledger, const Snapshot* history = nullptr) const;
  // Every active lease is billed up to `now` (lease_checks.cc), O(active leases): one that bills
  // has its paid hours end after `now` and its machine online; one that is paused (its machine
  // offline: no hour is due until it is back) has its machine offline and its pause starting inside
  // its last paid hour, however long ago that hour ended (or its workload down, the same); one that
  // is provisioning has its deadline after `now`. Either way no paid hour runs past the
  // lease's window. `internal` naming the lease otherwise. The caller allows for its own clock's
  // lag (the engine passes now minus its tick).
  Status CheckLeasesPaidUp(TimestampMicros now) const;

 private:
  struct MarketState {
    std::string name;
    std::string key;
    bool listed = false;
    OrderBook book;
    std::deque<Trade> recent;  // oldest first, at most kRecentTradesPerMarket
    std::size_t active_leases = 0;
  };
  struct MachineState {
    Machine machine;
    int market = 0;
    RegionIndex region = kAnyRegion;
    std::uint32_t leased_mask = 0;
    OrderId open_ask = 0;
    std::set<LeaseId> active_leases;
    // GPUs a new lease may take now: none while offline or held, else those neither leased nor
    // blocked.
    int Free() const;
    // The GPUs new leases must not take.
    std::uint32_t Unavailable() const { return leased_mask | machine.blocked_mask; }
  };
  struct BidState {
    Bid bid;
    int market = 0;
    RegionIndex region = kAnyRegion;
  };
  struct ProviderTotals {
    std::int64_t gross_micros = 0;
    std::int64_t fee_micros = 0;
    std::int64_t gpu_hours = 0;
    std::int64_t lease_hours = 0;
    std::int64_t active_leases = 0;
    std::int64_t pending_payout_micros = 0;
    std::int64_t paid_out_micros = 0;
    std::int64_t credited_micros = 0;  // downtime credits out of the payable
  };
  enum EventKind : std::uint8_t { kLeaseHour = 0, kBidExpiry = 1, kAskExpiry = 2, kLeaseStart = 3 };
  struct Event {
    TimestampMicros at = 0;
    EventKind kind = kLeaseHour;
    std::int64_t id = 0;
    friend auto operator<=>(const Event&, const Event&) = default;
  };
  // A fill about to happen: who buys what from which ask at which price.
  struct FillPlan {
    UserId customer = 0;
    OrderId bid_id = 0;
    int gpus = 0;
    Currency currency = Currency::kUsd;
    bool resting_bid = false;  // the bid holds an hour: void the hold in the same batch
    OrderId ask_id = 0;
    std::int64_t price_micros = 0;
    Side maker = Side::kAsk;
  };

  int AddMarket(const std::string& name, bool listed);
  Result<int> FindMarket(std::string_view gpu) const;
  RegionIndex InternRegion(const std::string& code);
  // The book's tag of an account (assigned on its first order); SkipOwner: the tag to pass to
  // FindAsk/FindBid so that the account's own orders are passed over.
  OwnerTag InternOwner(UserId account);
  OwnerTag SkipOwner(UserId account) const;
  std::optional<RegionIndex> FindRegion(const std::string& code) const;
  Result<std::string> CheckRegion(std::string_view code) const;
  static TimestampMicros AskUntil(const Ask& ask);

  struct HourBill {
    std::vector<ledger::TransferRequest> legs;
    HourCharge charge;
  };
  Result<HourBill> HourLegs(const Lease& lease, std::int64_t hour, const ledger::Ledger& ledger,
                            TimestampMicros at) const;
  Result<std::int64_t> HoldMicros(Currency currency, std::int64_t usd_micros,
                                  const ledger::Ledger& ledger) const;
  Status ApplyLegs(ledger::Ledger& ledger, const std::vector<ledger::TransferRequest>& legs,
                   Changes* changes);
  // Opens the lease of a fill (ledger first: when the money does not move nothing changes).
  Result<Lease> OpenLease(const FillPlan& plan, ledger::Ledger& ledger, TimestampMicros at,
                          Changes* changes, Trade* trade);
  void SyncAsk(const MachineState& machine);  // book quantity of the machine's open ask
  void MatchAsk(OrderId ask_id, ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  void CloseRestingBid(BidState& state, BidStatus status, BidCloseReason reason,
                       ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  void EndLease(Lease& lease, LeaseEndReason reason, ledger::Ledger& ledger, TimestampMicros at,
                Changes* changes);
  void CloseAsk(Ask& ask, AskStatus status, TimestampMicros at, Changes* changes);
  void ChargeNextHour(LeaseId id, ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  // Downtime (machine_condition.cc).
  void PauseLease(Lease& lease, TimestampMicros since, std::string_view why,
                  ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  // Provisioning (machine_condition.cc): the first hour charged when the workload runs; the hold
  // voided (and the deadline event dropped) when it ends without having run.
  void StartLease(Lease& lease, ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  void ReleaseStartHold(Lease& lease, TimestampMicros at, ledger::Ledger& ledger,
                        Changes* changes);
  ledger::TransferRequest StartHoldVoid(const Lease& lease, TimestampMicros at) const;
  // A charged hour into the provider's totals.
  void CountHour(const Lease& lease);
  void ResumeLease(Lease& lease, ledger::Ledger& ledger, TimestampMicros at, Changes* changes);
  Result<std::vector<ledger::TransferRequest>> CreditLegs(const Lease& lease,
                                                          std::int64_t unused_micros,
                                                          std::string_view why,
                                                          const ledger::Ledger& ledger,
                                                          TimestampMicros at,
                                                          std::int64_t* from_payable) const;
  void RecordTrade(int market, const Trade& trade);
  TimestampMicros Now(TimestampMicros now) const { return now > now_ ? now : now_; }

  ExchangeConfig config_;
  TaxRateFn tax_rate_;
  StartTimeoutFn start_timeout_;
  std::vector<MarketState> markets_;
  std::unordered_map<std::string, int> market_by_key_;
  std::vector<std::string> regions_;  // index 0 = any
  std::unordered_map<std::string, RegionIndex> region_by_code_;
  std::unordered_map<UserId, OwnerTag> owner_tags_;  // only ever grows: at most one per account

  std::map<MachineId, MachineState> machines_;
  std::unordered_map<OrderId, Ask> asks_;
  std::unordered_map<OrderId, BidState> bids_;
  std::map<LeaseId, Lease> leases_;
  std::map<PayoutId, Payout> payouts_;
  std::set<Event> timeline_;

  // Per account, ids in creation order (sets: Forget takes closed ones out of the middle).
  std::unordered_map<UserId, std::vector<MachineId>> machines_by_provider_;
  std::unordered_map<UserId, std::set<OrderId>> asks_by_provider_;
  std::unordered_map<UserId, std::set<OrderId>> bids_by_customer_;
  std::unordered_map<UserId, std::set<LeaseId>> leases_by_customer_;
  std::unordered_map<UserId, std::set<LeaseId>> leases_by_provider_;
  std::unordered_map<UserId, std::set<PayoutId>> payouts_by_provider_;
  std::unordered_map<UserId, std::size_t> open_bids_by_customer_;
  std::unordered_map<UserId, std::size_t> active_leases_by_customer_;
  std::unordered_map<UserId, std::size_t> pending_payouts_by_provider_;
  std::unordered_map<UserId, ProviderTotals> totals_;
  std::set<PayoutId> pending_payouts_;

  std::size_t active_leases_ = 0;
  MachineId next_machine_id_ = 1;
  OrderId next_order_id_ = 1;
  LeaseId next_lease_id_ = 1;
  TradeId next_trade_id_ = 1;
  PayoutId next_payout_id_ = 1;
  TimestampMicros now_ = 0;  // the latest time seen: time never runs backwards inside
};

}  // namespace gpuhub::market
