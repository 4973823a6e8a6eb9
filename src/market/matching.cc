// The exchange: matching bids against asks, opening leases, charging each hour, ending them,
// and advancing the clock to the next event.
#include "market/exchange.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "market/exchange_internal.h"

namespace gpuhub::market {

namespace {

// The lowest `n` GPUs of a machine with `gpus` GPUs that are not in `leased`.
std::uint32_t LowestFree(std::uint32_t leased, int gpus, int n) {
  std::uint32_t mask = 0;
  for (int i = 0; i < gpus && n > 0; ++i) {
    if ((leased & (1u << i)) == 0) {
      mask |= 1u << i;
      --n;
    }
  }
  GPUHUB_CHECK(n == 0);
  return mask;
}

}  // namespace

void Exchange::RecordTrade(int market, const Trade& trade) {
  auto& recent = markets_[static_cast<std::size_t>(market)].recent;
  recent.push_back(trade);
  if (recent.size() > kRecentTradesPerMarket) recent.pop_front();
}

Result<Lease> Exchange::OpenLease(const FillPlan& plan, ledger::Ledger& ledger, TimestampMicros at,
                                  Changes* changes, Trade* trade) {
  Ask& ask = asks_.at(plan.ask_id);
  MachineState& machine = machines_.at(ask.machine_id);
  GPUHUB_CHECK(ask.status == AskStatus::kOpen && machine.Free() >= plan.gpus);
  Lease lease;
  lease.id = next_lease_id_;
  lease.bid_id = plan.bid_id;
  lease.ask_id = ask.id;
  lease.machine_id = machine.machine.id;
  lease.provider_id = machine.machine.provider_id;
  lease.customer_id = plan.customer;
  lease.gpu = machine.machine.gpu;
  lease.gpus = plan.gpus;
  lease.gpu_mask = LowestFree(machine.Unavailable(), machine.machine.gpus, plan.gpus);
  lease.price_micros = plan.price_micros;
  lease.fee_ppm = config_.fee_ppm;
  lease.currency = plan.currency;
  lease.started_at = at;
  lease.window_until = ask.available_until;
  lease.hours_paid = 1;
  lease.status = LeaseStatus::kActive;

  std::vector<TransferRequest> legs;
  if (plan.resting_bid) {
    TransferRequest release;
    release.id = BidVoidTransferId(plan.bid_id);
    release.kind = TransferKind::kVoidPending;
    release.pending_id = BidHoldTransferId(plan.bid_id);
    release.code = "bid_hold";
    release.memo = "bid " + std::to_string(plan.bid_id) + " filled: hold released";
    release.timestamp = at;
    legs.push_back(std::move(release));
  }
  const std::int64_t start_timeout = start_timeout_ ? start_timeout_(machine.machine.id) : 0;
  GPUHUB_CHECK(start_timeout >= 0 && start_timeout <= kMaxLeaseStartTimeoutMicros);
  std::optional<HourBill> hour;
  if (start_timeout > 0) {
    // Provisioning: the first hour is held, not charged, until the host runs the workload.
    lease.hours_paid = 0;
    lease.start_deadline = at + start_timeout;
    const std::int64_t total = lease.HourMicros();
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t tax,
                            MulDivHalfEven(total, TaxRatePpm(lease.customer_id, at), kPpm));
    GPUHUB_ASSIGN_OR_RETURN(lease.hold_micros, HoldMicros(lease.currency, total + tax, ledger));
    TransferRequest hold;
    hold.id = LeaseHoldTransferId(lease.id);
    hold.kind = TransferKind::kPending;
    hold.debit = AccountKey::Wallet(lease.customer_id, lease.currency);
    hold.credit = AccountKey::System(AccountKind::kHolds, lease.currency);
    hold.amount_micros = lease.hold_micros;
    hold.code = "lease_hold";
    hold.memo =
        "lease " + std::to_string(lease.id) + ": its first hour, held until the host runs it";
    hold.timestamp = at;
    legs.push_back(std::move(hold));
  } else {
    GPUHUB_ASSIGN_OR_RETURN(hour, HourLegs(lease, 1, ledger, at));
    for (auto& leg : hour->legs) legs.push_back(std::move(leg));
  }
  GPUHUB_RETURN_IF_ERROR(ApplyLegs(ledger, legs, changes));
  if (hour) changes->hours.push_back(std::move(hour->charge));

  // The money moved: from here on nothing can fail.
  ++next_lease_id_;
  machine.leased_mask |= lease.gpu_mask;
  machine.active_leases.insert(lease.id);
  SyncAsk(machine);
  MarketState& market = markets_[static_cast<std::size_t>(machine.market)];
  ++market.active_leases;
  ++active_leases_;
  ++active_leases_by_customer_[lease.customer_id];
  leases_by_customer_[lease.customer_id].insert(lease.id);
  leases_by_provider_[lease.provider_id].insert(lease.id);
  changes->providers.push_back(lease.provider_id);
  ++totals_[lease.provider_id].active_leases;
  if (lease.hours_paid == 1) {
    CountHour(lease);
    timeline_.insert({lease.PaidUntil(), kLeaseHour, lease.id});
  } else {
    timeline_.insert({lease.start_deadline, kLeaseStart, lease.id});
  }
  leases_.emplace(lease.id, lease);
  changes->leases.push_back(lease.id);

  trade->id = next_trade_id_++;
  trade->gpu = lease.gpu;
  trade->price_micros = plan.price_micros;
  trade->gpus = plan.gpus;
  trade->lease_id = lease.id;
  trade->bid_id = plan.bid_id;
  trade->ask_id = ask.id;
  trade->maker = plan.maker;
  trade->created_at = at;
  RecordTrade(machine.market, *trade);
  changes->trades.push_back(*trade);
  return lease;
}

void Exchange::CloseRestingBid(BidState& state, BidStatus status, BidCloseReason reason,
                               ledger::Ledger& ledger, TimestampMicros at, Changes* changes) {
  Bid& bid = state.bid;
  GPUHUB_CHECK(bid.status == BidStatus::kResting);
  TransferRequest release;
  release.id = BidVoidTransferId(bid.id);
  release.kind = TransferKind::kVoidPending;
  release.pending_id = BidHoldTransferId(bid.id);
  release.code = "bid_hold";
  release.memo = "bid " + std::to_string(bid.id) + " " + std::string(BidCloseReasonName(reason)) +
                 ": hold released";
  release.timestamp = at;
  // Voiding an open hold cannot fail; if it does, the exchange and the ledger disagree.
  Status voided = ApplyLegs(ledger, {release}, changes);
  GPUHUB_CHECK_MSG(voided.ok(), voided.message().c_str());
  MarketState& market = markets_[static_cast<std::size_t>(state.market)];
  market.book.Remove(bid.id);
  if (bid.expires_at != 0) timeline_.erase({bid.expires_at, kBidExpiry, bid.id});
  --open_bids_by_customer_[bid.customer_id];
  bid.status = status;
  bid.close_reason = reason;
  bid.closed_at = at;
  changes->bids.push_back(bid.id);
}

void Exchange::MatchAsk(OrderId ask_id, ledger::Ledger& ledger, TimestampMicros at,
                        Changes* changes) {
  const Ask& ask = asks_.at(ask_id);
  if (ask.status != AskStatus::kOpen || at >= AskUntil(ask)) return;
  MachineState& machine = machines_.at(ask.machine_id);
  MarketState& market = markets_[static_cast<std::size_t>(machine.market)];
  // Each fill only shrinks the free GPUs and adds no bid: the search resumes where it stopped.
  Ticks cursor = OrderBook::kBidCursorStart;
  const OwnerTag skip = SkipOwner(ask.provider_id);
  while (true) {
    int free = machine.Free();
    if (free < ask.min_gpus) return;
    // The provider's own resting bids are passed over: no account trades with itself.
    OrderId bid_id = market.book.FindBid(free, ask.min_gpus, machine.region,
                                         ToTicks(ask.price_micros), at, &cursor, skip);
    if (bid_id == 0) return;
    BidState& state = bids_.at(bid_id);
    FillPlan plan;
    plan.customer = state.bid.customer_id;
    plan.bid_id = bid_id;
    plan.gpus = state.bid.gpus;
    plan.currency = state.bid.currency;
    plan.resting_bid = true;
    plan.ask_id = ask_id;
    plan.maker = bid_id < ask_id ? Side::kBid : Side::kAsk;
    plan.price_micros = plan.maker == Side::kBid ? state.bid.limit_micros : ask.price_micros;
    Trade trade;
    auto lease = OpenLease(plan, ledger, at, changes, &trade);
    if (!lease.ok()) {
      CloseRestingBid(state, BidStatus::kCancelled,
                      HasUsdRate(ledger, plan.currency) ? BidCloseReason::kInsufficientFunds
                                                        : BidCloseReason::kNoFxRate,
                      ledger, at, changes);
      continue;
    }
    market.book.Remove(bid_id);
    if (state.bid.expires_at != 0) timeline_.erase({state.bid.expires_at, kBidExpiry, bid_id});
    --open_bids_by_customer_[state.bid.customer_id];
    state.bid.status = BidStatus::kFilled;
    state.bid.close_reason = BidCloseReason::kFilled;
    state.bid.closed_at = at;
    state.bid.lease_id = lease->id;
    changes->bids.push_back(bid_id);
  }
}

Result<BidResult> Exchange::PlaceBid(UserId customer, const BidSpec& spec, ledger::Ledger& ledger,
                                     TimestampMicros now, Changes* changes) {
  now = Now(now);
  GPUHUB_CHECK(customer > 0);
  auto market_index = FindMarket(spec.gpu);
  if (!market_index.ok()) {
    return Status::InvalidArgument(market_index.status().message()).WithField("gpu");
  }
  const int market = *market_index;
  if (spec.gpus < 1 || spec.gpus > kMaxGpusPerMachine) {
    return Status::InvalidArgument("gpus must be between 1 and " +
                                   std::to_string(kMaxGpusPerMachine) +
                                   " (all GPUs of a bid are on one machine)")
        .WithField("gpus");
  }
  std::string region;
  if (!spec.region.empty()) {
    auto checked = CheckRegion(spec.region);
    if (!checked.ok()) return checked.status().WithField("region");
    region = *checked;
  }
  if (spec.is_market) {
    if (spec.limit_micros != 0) {
      return Status::InvalidArgument(
                 "a market bid has no limit price: send either \"market\": "
                 "true or limit_usd_per_gpu_hour")
          .WithField("limit_usd_per_gpu_hour");
    }
    if (spec.time_in_force != TimeInForce::kIoc) {
      return Status::InvalidArgument(
                 "market bids are immediate-or-cancel: they take the best offer or are cancelled "
                 "(use a limit price to rest on the book)")
          .WithField("time_in_force");
    }
  } else {
    Status price = ValidatePriceMicros(spec.limit_micros, "limit_usd_per_gpu_hour");
    if (!price.ok()) return price.WithField("limit_usd_per_gpu_hour");
  }
  if (spec.expires_at != 0) {
    if (spec.time_in_force != TimeInForce::kGtc) {
      return Status::InvalidArgument("expires_at applies to good-till-cancelled (gtc) bids only")
          .WithField("expires_at");
    }
    if (spec.expires_at <= now) {
      return Status::InvalidArgument("expires_at is in the past").WithField("expires_at");
    }
    if (spec.expires_at - now > kMaxBidLifetimeMicros) {
      return Status::InvalidArgument("expires_at must be within " +
                                     std::to_string(kMaxBidLifetimeMicros / kMicrosPerDay) +
                                     " days from now")
          .WithField("expires_at");
    }
  }
  if (active_leases_by_customer_[customer] >= kMaxActiveLeasesPerCustomer) {
    return Status::ResourceExhausted("at most " + std::to_string(kMaxActiveLeasesPerCustomer) +
                                     " leases may be active at once");
  }
  if (spec.time_in_force == TimeInForce::kGtc &&
      open_bids_by_customer_[customer] >= kMaxOpenBidsPerCustomer) {
    return Status::ResourceExhausted("at most " + std::to_string(kMaxOpenBidsPerCustomer) +
                                     " bids may rest on the book at once");
  }

  MarketState& m = markets_[static_cast<std::size_t>(market)];
  std::optional<RegionIndex> region_index;
  if (!region.empty()) region_index = FindRegion(region);
  OrderId ask_id = 0;
  // A region no machine has ever been in cannot match.
  if (region.empty() || region_index) {
    // The customer's own asks are passed over (a provider buying its own offer would print a
    // trade and a last price for the cost of the fee: wash trading).
    ask_id = m.book.FindAsk(
        spec.gpus, region.empty() ? kAnyRegion : *region_index,
        spec.is_market ? ToTicks(kMaxPriceMicrosPerGpuHour) : ToTicks(spec.limit_micros), now,
        SkipOwner(customer));
  }

  Bid bid;
  bid.id = next_order_id_;
  bid.customer_id = customer;
  bid.gpu = m.name;
  bid.gpus = spec.gpus;
  bid.region = region;
  bid.is_market = spec.is_market;
  bid.limit_micros = spec.is_market ? 0 : spec.limit_micros;
  bid.time_in_force = spec.time_in_force;
  bid.expires_at = spec.expires_at;
  bid.currency = spec.currency;
  bid.created_at = now;
  BidResult result;

  if (ask_id != 0) {
    FillPlan plan;
    plan.customer = customer;
    plan.bid_id = bid.id;
    plan.gpus = spec.gpus;
    plan.currency = spec.currency;
    plan.resting_bid = false;
    plan.ask_id = ask_id;
    plan.maker = Side::kAsk;
    plan.price_micros = asks_.at(ask_id).price_micros;
    Trade trade;
    GPUHUB_ASSIGN_OR_RETURN(Lease lease, OpenLease(plan, ledger, now, changes, &trade));
    bid.status = BidStatus::kFilled;
    bid.close_reason = BidCloseReason::kFilled;
    bid.closed_at = now;
    bid.lease_id = lease.id;
    result.lease = lease;
    result.trade = trade;
  } else if (spec.time_in_force == TimeInForce::kGtc) {
    // One hour at the limit, tax included: a fill can always pay its first hour (unless the
    // rate or FX moves before it fills; then the fill cancels the bid, see OpenLease's callers).
    const std::int64_t hour_micros = spec.limit_micros * spec.gpus;
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t hour_tax,
                            MulDivHalfEven(hour_micros, TaxRatePpm(customer, now), kPpm));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t hold_micros,
                            HoldMicros(spec.currency, hour_micros + hour_tax, ledger));
    TransferRequest hold;
    hold.id = BidHoldTransferId(bid.id);
    hold.kind = TransferKind::kPending;
    hold.debit = AccountKey::Wallet(customer, spec.currency);
    hold.credit = AccountKey::System(AccountKind::kHolds, spec.currency);
    hold.amount_micros = hold_micros;
    hold.code = "bid_hold";
    hold.memo = "bid " + std::to_string(bid.id) + ": one hour of " + std::to_string(spec.gpus) +
                " x " + m.name + " at " + FormatPrice(spec.limit_micros) + " USD/GPU-hour";
    hold.timestamp = now;
    GPUHUB_RETURN_IF_ERROR(ApplyLegs(ledger, {hold}, changes));
    bid.status = BidStatus::kResting;
    bid.hold_micros = hold_micros;
    RegionIndex r = region.empty() ? kAnyRegion : InternRegion(region);
    m.book.AddBid({bid.id, ToTicks(spec.limit_micros), spec.gpus, r,
                   spec.expires_at == 0 ? kNever : spec.expires_at, InternOwner(customer)});
    if (spec.expires_at != 0) timeline_.insert({spec.expires_at, kBidExpiry, bid.id});
    ++open_bids_by_customer_[customer];
  } else {
    bid.status = BidStatus::kCancelled;
    bid.close_reason = BidCloseReason::kNoMatch;
    bid.closed_at = now;
  }
  ++next_order_id_;
  BidState state;
  state.bid = bid;
  state.market = market;
  state.region = region.empty() ? kAnyRegion : InternRegion(region);
  bids_.emplace(bid.id, std::move(state));
  bids_by_customer_[customer].insert(bid.id);
  changes->bids.push_back(bid.id);
  result.bid = bid;
  return result;
}

Result<Bid> Exchange::CancelBid(UserId customer, OrderId bid_id, ledger::Ledger& ledger,
                                TimestampMicros now, Changes* changes) {
  now = Now(now);
  auto it = bids_.find(bid_id);
  if (it == bids_.end() || it->second.bid.customer_id != customer) {
    return Status::NotFound("no bid " + std::to_string(bid_id) + " of yours");
  }
  BidState& state = it->second;
  if (state.bid.status != BidStatus::kResting) {
    return Status::FailedPrecondition("bid " + std::to_string(bid_id) + " is already " +
                                      std::string(BidStatusName(state.bid.status)));
  }
  CloseRestingBid(state, BidStatus::kCancelled, BidCloseReason::kCancelledByUser, ledger, now,
                  changes);
  return state.bid;
}

void Exchange::EndLease(Lease& lease, LeaseEndReason reason, ledger::Ledger& ledger,
                        TimestampMicros at, Changes* changes) {
  GPUHUB_CHECK(lease.status == LeaseStatus::kActive);
  if (lease.hours_paid == 0) {
    ReleaseStartHold(lease, at, ledger, changes);  // nothing was charged: the hold goes back
  } else if (lease.paused_at == 0) {
    timeline_.erase({lease.PaidUntil(), kLeaseHour, lease.id});
  }
  lease.status = LeaseStatus::kEnded;
  lease.ended_at = at;
  lease.end_reason = reason;
  lease.paused_at = 0;
  MachineState& machine = machines_.at(lease.machine_id);
  GPUHUB_CHECK((machine.leased_mask & lease.gpu_mask) == lease.gpu_mask);
  machine.leased_mask &= ~lease.gpu_mask;
  machine.active_leases.erase(lease.id);
  --markets_[static_cast<std::size_t>(machine.market)].active_leases;
  --active_leases_;
  --active_leases_by_customer_[lease.customer_id];
  --totals_[lease.provider_id].active_leases;
  changes->leases.push_back(lease.id);
  // The GPUs go back to the machine's open ask (whichever ask that is now) and may fill bids.
  SyncAsk(machine);
  if (machine.open_ask != 0) MatchAsk(machine.open_ask, ledger, at, changes);
}

Result<Lease> Exchange::StopLease(UserId customer, LeaseId lease_id, ledger::Ledger& ledger,
                                  TimestampMicros now, Changes* changes) {
  now = Now(now);
  auto it = leases_.find(lease_id);
  if (it == leases_.end() || it->second.customer_id != customer) {
    return Status::NotFound("no lease " + std::to_string(lease_id) + " of yours");
  }
  Lease& lease = it->second;
  if (lease.status != LeaseStatus::kActive) {
    return Status::FailedPrecondition("lease " + std::to_string(lease_id) + " has already ended");
  }
  EndLease(lease, LeaseEndReason::kStopped, ledger, now, changes);
  return lease;
}

Result<ledger::FxRateChange> Exchange::RemoveFxRate(Currency a, Currency b, ledger::Ledger& ledger,
                                                    TimestampMicros now) {
  now = Now(now);
  // Only conversions into USD happen here (prices and payables are USD): a pair without USD is
  // never needed by the exchange.
  if (a != b && (a == Currency::kUsd || b == Currency::kUsd) && ledger.Fx().Find(a, b)) {
    const Currency wallet = a == Currency::kUsd ? b : a;
    std::size_t leases = 0, bids = 0;
    LeaseId example_lease = 0;
    OrderId example_bid = 0;
    for (const auto& [id, lease] : leases_) {
      if (lease.status != LeaseStatus::kActive || lease.currency != wallet) continue;
      if (leases++ == 0) example_lease = id;
    }
    for (const auto& [id, state] : bids_) {
      if (state.bid.status != BidStatus::kResting || state.bid.currency != wallet) continue;
      if (bids++ == 0 || id < example_bid) example_bid = id;
    }
    if (leases + bids > 0) {
      std::string code(CurrencyCode(wallet));
      std::string what;
      if (leases > 0) {
        what = std::to_string(leases) +
               (leases == 1 ? " running lease (lease " : " running leases (lease ") +
               std::to_string(example_lease) + (leases == 1 ? ")" : ", ...)");
      }
      if (bids > 0) {
        what += (what.empty() ? "" : " and ") + std::to_string(bids) +
                (bids == 1 ? " resting bid (bid " : " resting bids (bid ") +
                std::to_string(example_bid) + (bids == 1 ? ")" : ", ...)");
      }
      return Status::FailedPrecondition(
          "the " + code + "/USD rate cannot be removed: " + code + " wallets pay for " + what +
          ", converting at the rate of the moment each hour is settled; set a new rate instead, "
          "or remove it once they have ended");
    }
  }
  return ledger.RemoveFxRate(a, b, now);
}

void Exchange::ChargeNextHour(LeaseId id, ledger::Ledger& ledger, TimestampMicros at,
                              Changes* changes) {
  Lease& lease = leases_.at(id);
  GPUHUB_CHECK(lease.status == LeaseStatus::kActive && lease.PaidUntil() == at);
  if (at + kLeaseHourMicros > lease.window_until) {
    EndLease(lease, LeaseEndReason::kWindowEnded, ledger, at, changes);
    return;
  }
  const std::int64_t hour = lease.hours_paid + 1;
  auto bill = HourLegs(lease, hour, ledger, at);
  Status paid = bill.ok() ? ApplyLegs(ledger, bill->legs, changes) : bill.status();
  if (!paid.ok()) {
    // RemoveFxRate keeps the rate while this lease runs; a missing one (stored before that rule)
    // is not the customer's unpaid hour, and the end reason says so.
    EndLease(
        lease,
        HasUsdRate(ledger, lease.currency) ? LeaseEndReason::kUnpaid : LeaseEndReason::kNoFxRate,
        ledger, at, changes);
    return;
  }
  lease.hours_paid = hour;
  changes->hours.push_back(std::move(bill->charge));
  changes->providers.push_back(lease.provider_id);
  CountHour(lease);
  timeline_.insert({lease.PaidUntil(), kLeaseHour, lease.id});
  changes->leases.push_back(lease.id);
}

void Exchange::AdvanceTo(ledger::Ledger& ledger, TimestampMicros now, Changes* changes) {
  while (!timeline_.empty() && timeline_.begin()->at <= now) {
    Event event = *timeline_.begin();
    timeline_.erase(timeline_.begin());
    if (event.at > now_) now_ = event.at;
    switch (event.kind) {
      case kLeaseHour:
        ChargeNextHour(event.id, ledger, event.at, changes);
        break;
      case kBidExpiry: {
        BidState& state = bids_.at(event.id);
        CloseRestingBid(state, BidStatus::kExpired, BidCloseReason::kExpired, ledger, event.at,
                        changes);
        break;
      }
      case kAskExpiry:
        CloseAsk(asks_.at(event.id), AskStatus::kExpired, event.at, changes);
        break;
      case kLeaseStart: {
        // Its host never reported it running: it ends, and the held hour goes back.
        Lease& lease = leases_.at(event.id);
        EndLease(lease, LeaseEndReason::kNotStarted, ledger, event.at, changes);
        break;
      }
    }
  }
  if (now > now_) now_ = now;
}

std::vector<MachineId> Exchange::MachineIds() const {
  std::vector<MachineId> out;
  out.reserve(machines_.size());
  for (const auto& [id, m] : machines_) out.push_back(id);
  return out;
}

TimestampMicros Exchange::NextEventAt() const {
  return timeline_.empty() ? kNever : timeline_.begin()->at;
}

}  // namespace gpuhub::market
