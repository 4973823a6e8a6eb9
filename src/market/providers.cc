// The exchange, providers' side: machines, asks and payouts.
#include "market/exchange.h"

#include <algorithm>
#include <string>
#include <utility>

#include "market/exchange_internal.h"

namespace gpuhub::market {

namespace {

std::string Plural(std::int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Result<Machine> Exchange::AddMachine(UserId provider, const MachineSpec& spec, TimestampMicros now,
                                     Changes* changes) {
  now = Now(now);
  GPUHUB_CHECK(provider > 0);
  auto found = FindMarket(spec.gpu);
  if (!found.ok()) return Status::InvalidArgument(found.status().message()).WithField("gpu");
  const int market = *found;
  if (!markets_[static_cast<std::size_t>(market)].listed) {
    return Status::InvalidArgument("the " + markets_[static_cast<std::size_t>(market)].name +
                                   " market takes no new machines")
        .WithField("gpu");
  }
  if (spec.gpus < 1 || spec.gpus > kMaxGpusPerMachine) {
    return Status::InvalidArgument("gpus must be between 1 and " +
                                   std::to_string(kMaxGpusPerMachine))
        .WithField("gpus");
  }
  auto checked_region = CheckRegion(spec.region);
  if (!checked_region.ok()) return checked_region.status().WithField("region");
  std::string region = *checked_region;
  if (spec.vcpus < 1 || spec.vcpus > kMaxVcpusPerMachine) {
    return Status::InvalidArgument("vcpus must be between 1 and " +
                                   std::to_string(kMaxVcpusPerMachine))
        .WithField("vcpus");
  }
  if (spec.ram_gb < 1 || spec.ram_gb > kMaxRamGbPerMachine) {
    return Status::InvalidArgument("ram_gb must be between 1 and " +
                                   std::to_string(kMaxRamGbPerMachine))
        .WithField("ram_gb");
  }
  if (spec.disk_gb < 1 || spec.disk_gb > kMaxDiskGbPerMachine) {
    return Status::InvalidArgument("disk_gb must be between 1 and " +
                                   std::to_string(kMaxDiskGbPerMachine))
        .WithField("disk_gb");
  }
  GPUHUB_RETURN_IF_ERROR(ValidatePortRange(spec.port_range_first, spec.port_range_last));
  auto& mine = machines_by_provider_[provider];
  if (mine.size() >= kMaxMachinesPerProvider) {
    return Status::ResourceExhausted("a provider may list at most " +
                                     std::to_string(kMaxMachinesPerProvider) + " machines");
  }
  MachineState state;
  state.machine.id = next_machine_id_++;
  state.machine.provider_id = provider;
  state.machine.gpu = markets_[static_cast<std::size_t>(market)].name;
  state.machine.gpus = spec.gpus;
  state.machine.region = region;
  state.machine.vcpus = spec.vcpus;
  state.machine.ram_gb = spec.ram_gb;
  state.machine.disk_gb = spec.disk_gb;
  state.machine.port_range_first = spec.port_range_first;
  state.machine.port_range_last = spec.port_range_last;
  state.machine.created_at = now;
  state.market = market;
  state.region = InternRegion(region);
  mine.push_back(state.machine.id);
  changes->machines.push_back(state.machine.id);
  Machine out = state.machine;
  machines_.emplace(out.id, std::move(state));
  return out;
}

Result<Ask> Exchange::PlaceAsk(UserId provider, const AskSpec& spec, ledger::Ledger& ledger,
                               TimestampMicros now, Changes* changes) {
  now = Now(now);
  auto it = machines_.find(spec.machine_id);
  if (it == machines_.end() || it->second.machine.provider_id != provider) {
    return Status::NotFound("no machine " + std::to_string(spec.machine_id) + " of yours");
  }
  MachineState& machine = it->second;
  if (machine.open_ask != 0) {
    return Status::Conflict("machine " + std::to_string(machine.machine.id) +
                            " already has open ask " + std::to_string(machine.open_ask) +
                            "; cancel it first to change the price");
  }
  Status price = ValidatePriceMicros(spec.price_micros, "price_usd_per_gpu_hour");
  if (!price.ok()) return price.WithField("price_usd_per_gpu_hour");
  if (spec.min_gpus < 1 || spec.min_gpus > machine.machine.gpus) {
    return Status::InvalidArgument("min_gpus must be between 1 and the machine's " +
                                   Plural(machine.machine.gpus, "GPU", "GPUs"))
        .WithField("min_gpus");
  }
  if (spec.available_until - kLeaseHourMicros <= now) {
    return Status::InvalidArgument(
               "available_until must be more than one hour from now (leases are sold by the hour)")
        .WithField("available_until");
  }
  if (spec.available_until - now > kMaxAskWindowMicros) {
    return Status::InvalidArgument("available_until must be within " +
                                   std::to_string(kMaxAskWindowMicros / kMicrosPerDay) +
                                   " days from now")
        .WithField("available_until");
  }
  Ask ask;
  ask.id = next_order_id_++;
  ask.provider_id = provider;
  ask.machine_id = machine.machine.id;
  ask.gpu = machine.machine.gpu;
  ask.price_micros = spec.price_micros;
  ask.min_gpus = spec.min_gpus;
  ask.available_until = spec.available_until;
  ask.status = AskStatus::kOpen;
  ask.created_at = now;
  machine.open_ask = ask.id;
  asks_.emplace(ask.id, ask);
  asks_by_provider_[provider].insert(ask.id);
  timeline_.insert({AskUntil(ask), kAskExpiry, ask.id});
  changes->asks.push_back(ask.id);
  SyncAsk(machine);
  MatchAsk(ask.id, ledger, now, changes);
  return asks_.at(ask.id);
}

void Exchange::CloseAsk(Ask& ask, AskStatus status, TimestampMicros at, Changes* changes) {
  MachineState& machine = machines_.at(ask.machine_id);
  GPUHUB_CHECK(ask.status == AskStatus::kOpen && machine.open_ask == ask.id);
  MarketState& market = markets_[static_cast<std::size_t>(machine.market)];
  if (market.book.Contains(ask.id)) market.book.Remove(ask.id);
  timeline_.erase({AskUntil(ask), kAskExpiry, ask.id});
  machine.open_ask = 0;
  ask.status = status;
  ask.closed_at = at;
  changes->asks.push_back(ask.id);
}

Result<Ask> Exchange::CancelAsk(UserId provider, OrderId ask_id, TimestampMicros now,
                                Changes* changes) {
  now = Now(now);
  auto it = asks_.find(ask_id);
  if (it == asks_.end() || it->second.provider_id != provider) {
    return Status::NotFound("no ask " + std::to_string(ask_id) + " of yours");
  }
  Ask& ask = it->second;
  if (ask.status != AskStatus::kOpen) {
    return Status::FailedPrecondition("ask " + std::to_string(ask_id) + " is already " +
                                      std::string(AskStatusName(ask.status)));
  }
  CloseAsk(ask, AskStatus::kCancelled, now, changes);
  return ask;
}

void Exchange::SyncAsk(const MachineState& machine) {
  if (machine.open_ask == 0) return;
  const Ask& ask = asks_.at(machine.open_ask);
  OrderBook& book = markets_[static_cast<std::size_t>(machine.market)].book;
  int free = machine.Free();
  bool listed = book.Contains(ask.id);
  if (free == 0) {
    if (listed) book.Remove(ask.id);
  } else if (listed) {
    book.SetAskFree(ask.id, free);
  } else {
    book.AddAsk({ask.id, ToTicks(ask.price_micros), free, ask.min_gpus, machine.region,
                 AskUntil(ask), InternOwner(ask.provider_id)});
  }
}

Result<Payout> Exchange::RequestPayout(UserId provider, std::int64_t amount_micros,
                                       ledger::Ledger& ledger, TimestampMicros now,
                                       Changes* changes) {
  now = Now(now);
  if (amount_micros < kMinPayoutMicros || amount_micros > kMaxAmountMicros) {
    return Status::InvalidArgument("a payout must be at least " +
                                   FormatMicros(kMinPayoutMicros, 2) + " USD")
        .WithField("amount");
  }
  if (pending_payouts_by_provider_[provider] >= kMaxPendingPayoutsPerProvider) {
    return Status::ResourceExhausted("at most " + std::to_string(kMaxPendingPayoutsPerProvider) +
                                     " payouts may be pending at once");
  }
  GPUHUB_ASSIGN_OR_RETURN(ledger::AccountBalance payable,
                          ledger.GetAccount(AccountKey::Payable(provider, Currency::kUsd)));
  if (payable.available() < amount_micros) {
    return Status::InsufficientFunds("you can pay out at most " +
                                     FormatMicros(std::max<std::int64_t>(0, payable.available())) +
                                     " USD now");
  }
  Payout payout;
  payout.id = next_payout_id_;
  payout.provider_id = provider;
  payout.amount_micros = amount_micros;
  payout.status = PayoutStatus::kPending;
  payout.created_at = payout.updated_at = now;
  TransferRequest hold;
  hold.id = PayoutTransferId(payout.id);
  hold.kind = TransferKind::kPending;
  hold.debit = AccountKey::Payable(provider, Currency::kUsd);
  hold.credit = AccountKey::System(AccountKind::kPayouts, Currency::kUsd);
  hold.amount_micros = amount_micros;
  hold.code = "payout";
  hold.memo = "payout " + std::to_string(payout.id) + " requested";
  hold.timestamp = now;
  GPUHUB_RETURN_IF_ERROR(ApplyLegs(ledger, {hold}, changes));
  ++next_payout_id_;
  payouts_.emplace(payout.id, payout);
  payouts_by_provider_[provider].insert(payout.id);
  ++pending_payouts_by_provider_[provider];
  pending_payouts_.insert(payout.id);
  totals_[provider].pending_payout_micros += amount_micros;
  changes->payouts.push_back(payout.id);
  return payout;
}

Result<Payout> Exchange::ResolvePayout(UserId admin, PayoutId payout_id, bool paid,
                                       ledger::Ledger& ledger, TimestampMicros now,
                                       Changes* changes) {
  now = Now(now);
  auto it = payouts_.find(payout_id);
  if (it == payouts_.end()) return Status::NotFound("no payout " + std::to_string(payout_id));
  Payout& payout = it->second;
  if (payout.status != PayoutStatus::kPending) {
    return Status::FailedPrecondition("payout " + std::to_string(payout_id) + " is already " +
                                      std::string(PayoutStatusName(payout.status)));
  }
  TransferRequest resolve;
  resolve.id = PayoutTransferId(payout.id) + (paid ? ":paid" : ":rejected");
  resolve.kind = paid ? TransferKind::kPostPending : TransferKind::kVoidPending;
  resolve.amount_micros = paid ? payout.amount_micros : 0;
  resolve.pending_id = PayoutTransferId(payout.id);
  resolve.code = "payout";
  resolve.memo = "payout " + std::to_string(payout.id) + (paid ? " paid" : " rejected");
  resolve.timestamp = now;
  GPUHUB_RETURN_IF_ERROR(ApplyLegs(ledger, {resolve}, changes));
  payout.status = paid ? PayoutStatus::kPaid : PayoutStatus::kRejected;
  payout.updated_at = now;
  payout.admin_id = admin;
  ProviderTotals& totals = totals_[payout.provider_id];
  totals.pending_payout_micros -= payout.amount_micros;
  if (paid) {
    totals.paid_out_micros += payout.amount_micros;
    changes->providers.push_back(payout.provider_id);
  }
  --pending_payouts_by_provider_[payout.provider_id];
  pending_payouts_.erase(payout.id);
  changes->payouts.push_back(payout.id);
  return payout;
}

}  // namespace gpuhub::market
