// The spot exchange's vocabulary: machines, asks, bids, leases, trades and payouts, as plain
// records (what the engine persists and the API shows), their states, and the parsing of prices and
// names.
//
// Ids are positive integers. Asks and bids share one sequence of order ids, so that comparing two
// ids says which order reached the book first (time priority across the two sides).
// Money is int64 micro-units: prices in micro-USD per GPU-hour (multiples of the 0.001 tick),
// amounts in micro-units of their currency. Times are TimestampMicros from the caller's clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/money.h"
#include "core/status.h"
#include "market/limits.h"

namespace gpuhub::market {

using MachineId = std::int64_t;
using OrderId = std::int64_t;  // asks and bids
using LeaseId = std::int64_t;
using TradeId = std::int64_t;
using PayoutId = std::int64_t;
using UserId = std::int64_t;

// ----- States -----------------------------------------------------------------------------------
// Names (the *Name functions) are stable: they are stored and shown in JSON.

enum class TimeInForce : std::uint8_t { kIoc, kGtc };
std::string_view TimeInForceName(TimeInForce tif);  // "ioc", "gtc"
Result<TimeInForce> ParseTimeInForce(std::string_view name);

enum class AskStatus : std::uint8_t {
  kOpen,       // offering the machine's free GPUs
  kCancelled,  // by the provider; running leases continue
  kExpired,    // less than one hour was left before available_until
};
std::string_view AskStatusName(AskStatus s);  // "open", "cancelled", "expired"
Result<AskStatus> ParseAskStatus(std::string_view name);

enum class BidStatus : std::uint8_t {
  kResting,    // gtc, on the book, holding one hour at its limit
  kFilled,     // a lease was opened
  kCancelled,  // see BidCloseReason
  kExpired,    // its expires_at passed while resting
};
std::string_view BidStatusName(BidStatus s);  // "resting", "filled", "cancelled", "expired"
Result<BidStatus> ParseBidStatus(std::string_view name);

enum class BidCloseReason : std::uint8_t {
  kNone,  // still resting
  kFilled,
  kNoMatch,          // ioc or market bid with no ask to take
  kCancelledByUser,  // DELETE /v1/bids/{id}
  kExpired,
  kInsufficientFunds,  // a fill of the resting bid could not pay its first hour (FX moved)
  kNoFxRate,  // a fill found no FX rate to convert its first hour from the bid's wallet currency
};
std::string_view BidCloseReasonName(BidCloseReason r);  // "", "filled", ..., "no_fx_rate"
Result<BidCloseReason> ParseBidCloseReason(std::string_view name);

enum class LeaseStatus : std::uint8_t { kActive, kEnded };
std::string_view LeaseStatusName(LeaseStatus s);  // "active", "ended"
Result<LeaseStatus> ParseLeaseStatus(std::string_view name);

enum class LeaseEndReason : std::uint8_t {
  kNone,
  kStopped,      // the customer stopped it (the paid hour is not refunded)
  kUnpaid,       // the next hour could not be paid: ended at that hour boundary
  kWindowEnded,  // the ask's available_until leaves no room for another whole hour
  kNoFxRate,     // the next hour could not be converted: no FX rate for the wallet's currency
  kNotStarted,   // its host never reported its workload running in time: nothing was charged
};
// "", "stopped", "unpaid", "window_ended", "no_fx_rate", "not_started"
std::string_view LeaseEndReasonName(LeaseEndReason r);
Result<LeaseEndReason> ParseLeaseEndReason(std::string_view name);

enum class PayoutStatus : std::uint8_t { kPending, kPaid, kRejected };
std::string_view PayoutStatusName(PayoutStatus s);  // "pending", "paid", "rejected"
Result<PayoutStatus> ParsePayoutStatus(std::string_view name);

// Which order of a trade was on the book first (its price is the trade price).
enum class Side : std::uint8_t { kAsk, kBid };
std::string_view SideName(Side s);  // "ask", "bid"
Result<Side> ParseSide(std::string_view name);

// ----- Records ----------------------------------------------------------------------------------

struct Machine {
  MachineId id = 0;
  UserId provider_id = 0;
  std::string gpu;     // market name, canonical ("H100 SXM")
  int gpus = 0;        // 1..kMaxGpusPerMachine
  std::string region;  // "IAD-1"
  std::int64_t vcpus = 0;
  std::int64_t ram_gb = 0;
  std::int64_t disk_gb = 0;
  // Host ports for the leases' extra container ports ([first, last]; limits.h).
  int port_range_first = kDefaultPortRangeFirst;
  int port_range_last = kDefaultPortRangeLast;
  TimestampMicros created_at = 0;
  // What the machine's host agent last showed (engine/agents.h; SetMachineCondition). A machine
  // that never had an agent keeps the defaults and trades as listed.
  TimestampMicros offline_since = 0;  // > 0: offline, its agent last seen then (asks held, leases
                                      // paused)
  std::uint32_t blocked_mask = 0;     // GPUs not sold to new leases (unhealthy, not found)
  std::string hold_reason;            // not empty: none of its GPUs is sold, and this says why
  friend bool operator==(const Machine&, const Machine&) = default;
};

struct Ask {
  OrderId id = 0;
  UserId provider_id = 0;
  MachineId machine_id = 0;
  std::string gpu;
  std::int64_t price_micros = 0;  // per GPU-hour, a multiple of kPriceTickMicros
  int min_gpus = 1;               // smallest rentable number of GPUs
  TimestampMicros available_until = 0;
  AskStatus status = AskStatus::kOpen;
  TimestampMicros created_at = 0;
  TimestampMicros closed_at = 0;  // 0 while open
  friend bool operator==(const Ask&, const Ask&) = default;
};

struct Bid {
  OrderId id = 0;
  UserId customer_id = 0;
  std::string gpu;
  int gpus = 0;
  std::string region;             // "" = any region
  bool is_market = false;         // take the best offer (always immediate-or-cancel)
  std::int64_t limit_micros = 0;  // per GPU-hour; 0 for a market bid
  TimeInForce time_in_force = TimeInForce::kIoc;
  TimestampMicros expires_at = 0;      // 0 = none (gtc only)
  Currency currency = Currency::kUsd;  // the wallet that pays
  BidStatus status = BidStatus::kCancelled;
  BidCloseReason close_reason = BidCloseReason::kNone;
  TimestampMicros created_at = 0;
  TimestampMicros closed_at = 0;
  LeaseId lease_id = 0;          // when filled
  std::int64_t hold_micros = 0;  // resting bids: one hour at the limit, in the wallet's currency
  friend bool operator==(const Bid&, const Bid&) = default;
};

struct Lease {
  LeaseId id = 0;
  OrderId bid_id = 0;
  OrderId ask_id = 0;
  MachineId machine_id = 0;
  UserId provider_id = 0;
  UserId customer_id = 0;
  std::string gpu;
  int gpus = 0;
  std::uint32_t gpu_mask = 0;          // which GPUs of the machine (bit i = GPU i)
  std::int64_t price_micros = 0;       // per GPU-hour (the trade price)
  std::int64_t fee_ppm = 0;            // platform fee at the time of the trade
  Currency currency = Currency::kUsd;  // the wallet that pays
  TimestampMicros started_at = 0;
  TimestampMicros window_until = 0;  // the ask's available_until: no hour is sold past it
  std::int64_t hours_paid = 0;       // hours 1..hours_paid are charged
  LeaseStatus status = LeaseStatus::kActive;
  TimestampMicros ended_at = 0;
  LeaseEndReason end_reason = LeaseEndReason::kNone;
  // Downtime (the machine went offline): billing stops, the unused part of the paid hour is
  // credited back from `paused_at` (when the machine was last seen), and billing resumes with a
  // new whole hour when it is back: the hour grid moves by `shift_micros`.
  TimestampMicros paused_at = 0;     // > 0 while paused
  std::int64_t shift_micros = 0;     // added to started_at by every resume
  std::int64_t credited_micros = 0;  // USD credited back for downtime, all pauses together
  std::int64_t credited_provider_micros = 0;  // the part taken back from the provider's payable
  // Provisioning (a machine whose host reports its workloads: Exchange::SetStartTimeout): nothing
  // is billed until the host reports the lease's workload running (ReportLeaseWorkload). Until
  // then hours_paid is 0 and `hold_micros` of the wallet (one hour and its tax at the fill, in the
  // wallet's currency) is held ("lease:N:hold"); running, the hold is voided and hour 1 charged
  // from that moment (the hour grid moves by shift_micros); at start_deadline the hold is voided
  // and the lease ends not_started. A lease that ran from its fill has both 0.
  TimestampMicros start_deadline = 0;
  std::int64_t hold_micros = 0;
  // Its workload stopped after it ran (the host says so, or no longer reports it): paused and
  // credited as while its machine is offline, until the host reports it running again.
  bool workload_down = false;

  // Waiting for its host to run it: not billed yet.
  bool Provisioning() const { return status == LeaseStatus::kActive && hours_paid == 0; }

  // Price of one lease-hour (all its GPUs) in micro-USD.
  std::int64_t HourMicros() const { return price_micros * gpus; }
  // End of the last paid hour.
  TimestampMicros PaidUntil() const {
    return started_at + shift_micros + hours_paid * kMicrosPerHour;
  }
  friend bool operator==(const Lease&, const Lease&) = default;
};

struct Trade {
  TradeId id = 0;
  std::string gpu;
  std::int64_t price_micros = 0;  // per GPU-hour
  int gpus = 0;
  LeaseId lease_id = 0;
  OrderId bid_id = 0;
  OrderId ask_id = 0;
  Side maker = Side::kAsk;  // the order that was on the book first
  TimestampMicros created_at = 0;
  friend bool operator==(const Trade&, const Trade&) = default;
};

struct Payout {
  PayoutId id = 0;
  UserId provider_id = 0;
  std::int64_t amount_micros = 0;  // USD
  PayoutStatus status = PayoutStatus::kPending;
  TimestampMicros created_at = 0;
  TimestampMicros updated_at = 0;
  UserId admin_id = 0;  // who marked it paid or rejected
  friend bool operator==(const Payout&, const Payout&) = default;
};

// ----- Parsing and formatting -------------------------------------------------------------------

// "2.880" -> 2'880'000: a positive decimal with at most 3 decimals (the tick), at most
// kMaxPriceMicrosPerGpuHour. `field` names the input in the message.
Result<std::int64_t> ParsePriceMicros(std::string_view text, std::string_view field);
// invalid_argument unless 0 < price <= max and a multiple of the tick.
Status ValidatePriceMicros(std::int64_t price_micros, std::string_view field);
// A listing's host port range for extra container ports: kMinPortRangeFirst <= first, first +
// kMinPortRangeSize - 1 <= last <= 65535, at most kMaxPortRangeSize ports. invalid_argument
// naming "port_range_first" / "port_range_last" otherwise.
Status ValidatePortRange(int first, int last);
// 2'880'000 -> "2.880" (always 3 decimals).
std::string FormatPrice(std::int64_t price_micros);

// The key under which GPU names are compared: lower case without spaces, dashes, underscores or
// dots ("H100 SXM", "h100-sxm" and "h100sxm" are one market).
std::string GpuKey(std::string_view name);
// invalid_argument unless 1..kMaxRegionBytes of [A-Z0-9-], starting with a letter ("IAD-1").
// Lower case is accepted and folded: returns the canonical code.
Result<std::string> CanonicalRegion(std::string_view code);

// The ledger transfer ids of the market, derived from what they do so that nothing can be charged
// twice: "bid:7:hold", "bid:7:void", "lease:3:h12:provider" / ":fee" / ":fx", "payout:5",
// "payout:5:paid", "payout:5:rejected".
std::string BidHoldTransferId(OrderId bid);
std::string BidVoidTransferId(OrderId bid);
std::string LeaseHourTransferId(LeaseId lease, std::int64_t hour, std::string_view leg);
// The downtime credit of a lease's hour: "lease:3:h12:credit:provider" / ":fee" / ":advance" /
// ":fx" (at most one pause per paid hour: a resume starts a new hour).
std::string LeaseCreditTransferId(LeaseId lease, std::int64_t hour, std::string_view leg);
// A provisioning lease's hold of its first hour, "lease:3:hold", and its release,
// "lease:3:hold:void" (when it starts, or ends without having run).
std::string LeaseHoldTransferId(LeaseId lease);
std::string LeaseHoldVoidTransferId(LeaseId lease);
std::string PayoutTransferId(PayoutId payout);

}  // namespace gpuhub::market
