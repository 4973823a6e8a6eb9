// The exchange's side of the host agent: a machine offline, held or with blocked GPUs, the
// downtime credit of the leases on it (exchange.h, SetMachineCondition), and the leases that wait
// for their host to run them (ReportLeaseWorkload).
#include <algorithm>
#include <vector>

#include "market/exchange.h"
#include "market/exchange_internal.h"

namespace gpuhub::market {

Result<std::vector<TransferRequest>> Exchange::CreditLegs(const Lease& lease,
                                                          std::int64_t unused_micros,
                                                          std::string_view why,
                                                          const ledger::Ledger& ledger,
                                                          TimestampMicros at,
                                                          std::int64_t* from_payable) const {
  const std::int64_t hour = lease.hours_paid;
  const std::int64_t total = lease.HourMicros();
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t fee, MulDivHalfEven(total, lease.fee_ppm, kPpm));
  // Pro rata of what the hour cost, each part rounded half-even once.
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t credit, MulDivHalfEven(total, unused_micros,
                                                               kLeaseHourMicros));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t credit_fee, MulDivHalfEven(fee, unused_micros,
                                                                   kLeaseHourMicros));
  const std::int64_t credit_provider = credit - credit_fee;
  GPUHUB_ASSIGN_OR_RETURN(ledger::AccountBalance payable,
                          ledger.GetAccount(AccountKey::Payable(lease.provider_id, Currency::kUsd)));
  // A payable never goes below zero: what was already paid out is advanced by the platform.
  *from_payable = std::clamp<std::int64_t>(payable.available(), 0, credit_provider);
  const std::int64_t advance = credit_provider - *from_payable;

  const AccountKey to = lease.currency == Currency::kUsd
                            ? AccountKey::Wallet(lease.customer_id, Currency::kUsd)
                            : AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
  const std::string memo = "lease " + std::to_string(lease.id) + " hour " + std::to_string(hour) +
                           ": downtime credit, " + std::to_string(unused_micros / kMicrosPerSecond) +
                           " s of the paid hour unused (" + std::string(why) + ")";
  std::vector<TransferRequest> legs;
  auto add = [&](std::string_view leg, AccountKey debit, AccountKey credit_to,
                 std::int64_t amount) {
    if (amount <= 0) return;
    TransferRequest t;
    t.id = LeaseCreditTransferId(lease.id, hour, leg);
    t.kind = TransferKind::kSinglePhase;
    t.debit = debit;
    t.credit = credit_to;
    t.amount_micros = amount;
    t.code = "downtime_credit";
    t.memo = memo;
    t.timestamp = at;
    legs.push_back(std::move(t));
  };
  const AccountKey revenue = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
  add("provider", AccountKey::Payable(lease.provider_id, Currency::kUsd), to, *from_payable);
  add("fee", revenue, to, credit_fee);
  add("advance", revenue, to, advance);
  if (lease.currency != Currency::kUsd) {
    // The same fraction of what the wallet paid for this hour, in its own currency: no new quote,
    // so a rate that moved since neither gains nor loses the customer anything.
    GPUHUB_ASSIGN_OR_RETURN(ledger::Transfer paid,
                            ledger.FindTransfer(LeaseHourTransferId(lease.id, hour, "fx")));
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t back, MulDivHalfEven(paid.amount_micros, unused_micros,
                                                               kLeaseHourMicros));
    add("fx", AccountKey::System(AccountKind::kFxConversion, lease.currency),
        AccountKey::Wallet(lease.customer_id, lease.currency), back);
  }
  return legs;
}

void Exchange::PauseLease(Lease& lease, TimestampMicros since, std::string_view why,
                          ledger::Ledger& ledger, TimestampMicros at, Changes* changes) {
  GPUHUB_CHECK(lease.status == LeaseStatus::kActive && lease.paused_at == 0 &&
               lease.hours_paid > 0);
  const TimestampMicros paid_until = lease.PaidUntil();
  // AdvanceTo(at) ran first, so the hour that is paid has not ended yet.
  GPUHUB_CHECK(paid_until > at);
  timeline_.erase({paid_until, kLeaseHour, lease.id});
  const TimestampMicros from = std::max(since, paid_until - kLeaseHourMicros);
  std::int64_t from_payable = 0;
  auto legs = CreditLegs(lease, paid_until - from, why, ledger, at, &from_payable);
  // Every amount is within what this hour moved, and the payable part is within the payable:
  // failing here means the exchange and the ledger disagree.
  GPUHUB_CHECK_MSG(legs.ok(), legs.status().message().c_str());
  std::int64_t credited = 0;
  for (const auto& leg : *legs) {
    if (leg.debit->currency == Currency::kUsd) credited += leg.amount_micros;
  }
  if (!legs->empty()) {
    Status applied = ApplyLegs(ledger, *legs, changes);
    GPUHUB_CHECK_MSG(applied.ok(), applied.message().c_str());
  }
  lease.paused_at = from;
  lease.credited_micros += credited;
  lease.credited_provider_micros += from_payable;
  totals_[lease.provider_id].credited_micros += from_payable;
  changes->providers.push_back(lease.provider_id);
  changes->leases.push_back(lease.id);
}

void Exchange::ResumeLease(Lease& lease, ledger::Ledger& ledger, TimestampMicros at,
                           Changes* changes) {
  GPUHUB_CHECK(lease.status == LeaseStatus::kActive && lease.paused_at != 0);
  // A new whole hour from now: move the grid so that the paid hours end now, then charge the next
  // one as at any boundary (which may also end the lease: unpaid, window, no FX rate).
  lease.shift_micros = at - lease.started_at - lease.hours_paid * kLeaseHourMicros;
  lease.paused_at = 0;
  changes->leases.push_back(lease.id);
  ChargeNextHour(lease.id, ledger, at, changes);
}

Result<Machine> Exchange::SetMachineCondition(MachineId id, const MachineCondition& condition,
                                              ledger::Ledger& ledger, TimestampMicros now,
                                              Changes* changes) {
  now = Now(now);
  auto it = machines_.find(id);
  if (it == machines_.end()) return Status::NotFound("no machine " + std::to_string(id));
  if (condition.offline_since < 0 || condition.offline_since > now) {
    return Status::InvalidArgument("offline_since must not be in the future");
  }
  if ((condition.blocked_mask >> it->second.machine.gpus) != 0) {
    return Status::InvalidArgument("a blocked GPU is beyond the machine's " +
                                   std::to_string(it->second.machine.gpus) + " GPUs");
  }
  if (condition.hold_reason.size() > kMaxHoldReasonBytes) {
    return Status::InvalidArgument("hold_reason is longer than " +
                                   std::to_string(kMaxHoldReasonBytes) + " bytes");
  }
  // Every hour due before now is charged (or the lease ended) before the condition changes, so
  // a pause credits the hour that is running now.
  AdvanceTo(ledger, now, changes);
  MachineState& machine = it->second;
  const bool was_offline = machine.machine.offline_since != 0;
  const bool offline = condition.offline_since != 0;
  machine.machine.offline_since = condition.offline_since;
  machine.machine.blocked_mask = condition.blocked_mask;
  machine.machine.hold_reason = condition.hold_reason;
  changes->machines.push_back(id);
  // Copies: a resume that ends a lease changes the set.
  const std::vector<LeaseId> active(machine.active_leases.begin(), machine.active_leases.end());
  if (!was_offline && offline) {
    for (LeaseId lease : active) {
      Lease& l = leases_.at(lease);
      // Not billed yet (provisioning), or already paused for its stopped workload.
      if (l.Provisioning() || l.paused_at != 0) continue;
      PauseLease(l, condition.offline_since, "machine offline", ledger, now, changes);
    }
  } else if (was_offline && !offline) {
    for (LeaseId lease : active) {
      Lease& l = leases_.at(lease);
      if (l.status == LeaseStatus::kActive && l.paused_at != 0 && !l.workload_down) {
        ResumeLease(l, ledger, now, changes);
      }
    }
  }
  SyncAsk(machine);
  if (machine.open_ask != 0) MatchAsk(machine.open_ask, ledger, now, changes);
  return machine.machine;
}

void Exchange::CountHour(const Lease& lease) {
  ProviderTotals& totals = totals_[lease.provider_id];
  totals.gross_micros += lease.HourMicros();
  totals.fee_micros += MulDivHalfEven(lease.HourMicros(), lease.fee_ppm, kPpm).value();
  totals.gpu_hours += lease.gpus;
  ++totals.lease_hours;
}

TransferRequest Exchange::StartHoldVoid(const Lease& lease, TimestampMicros at) const {
  TransferRequest release;
  release.id = LeaseHoldVoidTransferId(lease.id);
  release.kind = TransferKind::kVoidPending;
  release.pending_id = LeaseHoldTransferId(lease.id);
  release.code = "lease_hold";
  release.memo = "lease " + std::to_string(lease.id) + ": hold of its first hour released";
  release.timestamp = at;
  return release;
}

void Exchange::ReleaseStartHold(Lease& lease, TimestampMicros at, ledger::Ledger& ledger,
                                Changes* changes) {
  GPUHUB_CHECK(lease.Provisioning());
  timeline_.erase({lease.start_deadline, kLeaseStart, lease.id});
  // Voiding an open hold cannot fail; if it does, the exchange and the ledger disagree.
  Status voided = ApplyLegs(ledger, {StartHoldVoid(lease, at)}, changes);
  GPUHUB_CHECK_MSG(voided.ok(), voided.message().c_str());
}

void Exchange::StartLease(Lease& lease, ledger::Ledger& ledger, TimestampMicros at,
                          Changes* changes) {
  GPUHUB_CHECK(lease.Provisioning());
  if (at + kLeaseHourMicros > lease.window_until) {
    EndLease(lease, LeaseEndReason::kWindowEnded, ledger, at, changes);
    return;
  }
  // The hour grid starts now: hour 1 is [at, at + 1 h).
  Lease started = lease;
  started.shift_micros = at - lease.started_at;
  started.hours_paid = 1;
  auto bill = HourLegs(started, 1, ledger, at);
  Status paid = bill.status();
  if (paid.ok()) {
    std::vector<TransferRequest> legs = {StartHoldVoid(lease, at)};
    for (auto& leg : bill->legs) legs.push_back(std::move(leg));
    paid = ApplyLegs(ledger, legs, changes);
  }
  if (!paid.ok()) {
    EndLease(
        lease,
        HasUsdRate(ledger, lease.currency) ? LeaseEndReason::kUnpaid : LeaseEndReason::kNoFxRate,
        ledger, at, changes);
    return;
  }
  timeline_.erase({lease.start_deadline, kLeaseStart, lease.id});
  lease.shift_micros = started.shift_micros;
  lease.hours_paid = 1;
  changes->hours.push_back(std::move(bill->charge));
  changes->providers.push_back(lease.provider_id);
  changes->leases.push_back(lease.id);
  CountHour(lease);
  timeline_.insert({lease.PaidUntil(), kLeaseHour, lease.id});
}

Result<Lease> Exchange::ReportLeaseWorkload(LeaseId id, bool running, ledger::Ledger& ledger,
                                            TimestampMicros now, Changes* changes) {
  now = Now(now);
  if (!leases_.count(id)) return Status::NotFound("no lease " + std::to_string(id));
  // Every hour due before now is charged (or the lease ended, or its deadline passed) first.
  AdvanceTo(ledger, now, changes);
  Lease& lease = leases_.at(id);
  if (lease.status != LeaseStatus::kActive) return lease;
  const bool offline = machines_.at(lease.machine_id).machine.offline_since != 0;
  if (lease.Provisioning()) {
    if (running && !offline) StartLease(lease, ledger, now, changes);
    return lease;
  }
  if (running == !lease.workload_down) return lease;  // nothing new
  lease.workload_down = !running;
  changes->leases.push_back(lease.id);
  if (offline) return lease;  // paused with its machine; resumes with it unless down
  if (!running) {
    PauseLease(lease, now, "workload stopped", ledger, now, changes);
  } else if (lease.paused_at != 0) {
    ResumeLease(lease, ledger, now, changes);
  }
  return lease;
}

}  // namespace gpuhub::market
