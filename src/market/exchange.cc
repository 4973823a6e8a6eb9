#include "market/exchange.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <unordered_set>
#include <utility>

namespace gpuhub::market {

using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferKind;
using ledger::TransferRequest;

namespace {

Ticks ToTicks(std::int64_t price_micros) { return price_micros / kPriceTickMicros; }

// Whether a wallet in `currency` can pay a USD price: USD itself, or a rate to convert with.
bool HasUsdRate(const ledger::Ledger& ledger, Currency currency) {
  return currency == Currency::kUsd || ledger.Fx().Find(currency, Currency::kUsd).has_value();
}

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

template <typename T>
void SortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// Newest `limit` records of an ascending id list (a vector in creation order or a set), newest
// first.
template <typename Ids, typename Id, typename Fn>
void NewestFirst(const Ids& ids, std::size_t limit, Id before, Fn&& fn) {
  // Ids ascend, so the keyset start is a binary search.
  auto end = ids.end();
  if (before > 0) {
    if constexpr (requires { ids.lower_bound(before); }) {
      end = ids.lower_bound(before);
    } else {
      end = std::lower_bound(ids.begin(), ids.end(), before);
    }
  }
  std::size_t n = 0;
  for (auto it = std::make_reverse_iterator(end); it != ids.rend() && n < limit; ++it, ++n) {
    fn(*it);
  }
}
template <typename Ids, typename Fn>
void NewestFirst(const Ids& ids, std::size_t limit, Fn&& fn) {
  NewestFirst(ids, limit, typename Ids::value_type{0}, std::forward<Fn>(fn));
}

// Takes `id` out of an account's id set, and the account's entry once it is empty.
template <typename Map, typename Id>
void EraseId(Map& by_account, UserId account, Id id) {
  auto it = by_account.find(account);
  if (it == by_account.end()) return;
  it->second.erase(id);
  if (it->second.empty()) by_account.erase(it);
}

// Drops a per-account counter that went back to zero (an account with nothing open costs nothing).
void EraseIfZero(std::unordered_map<UserId, std::size_t>& counters, UserId account) {
  auto it = counters.find(account);
  if (it != counters.end() && it->second == 0) counters.erase(it);
}

std::string Plural(std::int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Status ValidateExchangeConfig(const ExchangeConfig& config) {
  if (config.fee_ppm < 0 || config.fee_ppm > kMaxFeePpm) {
    return Status::InvalidArgument("the platform fee must be between 0% and " +
                                   std::to_string(kMaxFeePpm / 10'000) + "%");
  }
  if (config.gpus.size() > kMaxMarkets) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxMarkets) + " markets");
  }
  std::unordered_set<std::string> keys;
  for (const auto& gpu : config.gpus) {
    std::string key = GpuKey(gpu);
    if (key.empty() || gpu.size() > kMaxGpuNameBytes) {
      return Status::InvalidArgument("market GPU names must be 1.." +
                                     std::to_string(kMaxGpuNameBytes) + " characters");
    }
    if (!keys.insert(key).second) {
      return Status::InvalidArgument("market '" + gpu + "' is listed twice");
    }
  }
  if (config.regions.size() > kMaxRegions) {
    return Status::InvalidArgument("more than " + std::to_string(kMaxRegions) + " regions");
  }
  std::unordered_set<std::string> regions;
  for (const auto& region : config.regions) {
    GPUHUB_ASSIGN_OR_RETURN(std::string code, CanonicalRegion(region));
    if (!regions.insert(code).second) {
      return Status::InvalidArgument("region '" + code + "' is listed twice");
    }
  }
  return Status::Ok();
}

void Changes::Clear() {
  transfers.clear();
  hours.clear();
  machines.clear();
  asks.clear();
  bids.clear();
  leases.clear();
  payouts.clear();
  trades.clear();
  providers.clear();
}

void Changes::Normalize() {
  SortUnique(machines);
  SortUnique(asks);
  SortUnique(bids);
  SortUnique(leases);
  SortUnique(payouts);
  SortUnique(providers);
}

bool Changes::empty() const {
  return transfers.empty() && hours.empty() && machines.empty() && asks.empty() && bids.empty() &&
         leases.empty() && payouts.empty() && trades.empty() && providers.empty();
}

int Exchange::MachineState::Free() const {
  if (machine.offline_since != 0 || !machine.hold_reason.empty()) return 0;
  return machine.gpus - std::popcount(Unavailable());
}

Exchange::Exchange(ExchangeConfig config) : config_(std::move(config)) {
  Status valid = ValidateExchangeConfig(config_);
  GPUHUB_CHECK_MSG(valid.ok(), valid.message().c_str());
  regions_.push_back("");  // kAnyRegion
  for (auto& region : config_.regions) region = CanonicalRegion(region).value();
  for (const auto& gpu : config_.gpus) AddMarket(gpu, /*listed=*/true);
}

int Exchange::AddMarket(const std::string& name, bool listed) {
  std::string key = GpuKey(name);
  auto it = market_by_key_.find(key);
  if (it != market_by_key_.end()) return it->second;
  int index = static_cast<int>(markets_.size());
  MarketState& m = markets_.emplace_back();
  m.name = name;
  m.key = key;
  m.listed = listed;
  market_by_key_.emplace(std::move(key), index);
  return index;
}

Result<int> Exchange::FindMarket(std::string_view gpu) const {
  auto it = market_by_key_.find(GpuKey(gpu));
  if (it == market_by_key_.end()) {
    std::string names;
    for (const auto& m : markets_) {
      if (m.listed) names += (names.empty() ? "" : ", ") + m.name;
    }
    return Status::NotFound("no market for GPU '" + std::string(gpu.substr(0, 64)) + "'" +
                            (names.empty() ? std::string(" (no markets are configured)")
                                           : " (markets: " + names + ")"));
  }
  return it->second;
}

Result<std::string> Exchange::MarketName(std::string_view gpu) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  return markets_[static_cast<std::size_t>(index)].name;
}

RegionIndex Exchange::InternRegion(const std::string& code) {
  auto it = region_by_code_.find(code);
  if (it != region_by_code_.end()) return it->second;
  GPUHUB_CHECK(regions_.size() < 65535);
  auto index = static_cast<RegionIndex>(regions_.size());
  regions_.push_back(code);
  region_by_code_.emplace(code, index);
  return index;
}

OwnerTag Exchange::InternOwner(UserId account) {
  auto it = owner_tags_.find(account);
  if (it != owner_tags_.end()) return it->second;
  // Tags 1, 2, 3, ...: 0 is the book's "no owner", kSkipNoOwner never an account's.
  GPUHUB_CHECK(owner_tags_.size() + 1 < kSkipNoOwner);
  auto tag = static_cast<OwnerTag>(owner_tags_.size() + 1);
  owner_tags_.emplace(account, tag);
  return tag;
}

OwnerTag Exchange::SkipOwner(UserId account) const {
  auto it = owner_tags_.find(account);
  // An account without a tag has no order on any book: nothing of its own to skip.
  return it == owner_tags_.end() ? kSkipNoOwner : it->second;
}

std::optional<RegionIndex> Exchange::FindRegion(const std::string& code) const {
  auto it = region_by_code_.find(code);
  if (it == region_by_code_.end()) return std::nullopt;
  return it->second;
}

Result<std::string> Exchange::CheckRegion(std::string_view text) const {
  GPUHUB_ASSIGN_OR_RETURN(std::string code, CanonicalRegion(text));
  if (!config_.regions.empty() &&
      std::find(config_.regions.begin(), config_.regions.end(), code) == config_.regions.end()) {
    std::string list;
    for (const auto& r : config_.regions) list += (list.empty() ? "" : ", ") + r;
    return Status::InvalidArgument("unknown region '" + code + "' (regions: " + list + ")");
  }
  if (region_by_code_.size() >= kMaxRegions && !region_by_code_.count(code)) {
    return Status::ResourceExhausted("too many regions");
  }
  return code;
}

TimestampMicros Exchange::AskUntil(const Ask& ask) {
  // A lease sells whole hours, so the last one can start an hour before available_until.
  return ask.available_until - kLeaseHourMicros;
}

// ----- Money ------------------------------------------------------------------------------------

std::int64_t Exchange::TaxRatePpm(UserId customer, TimestampMicros at) const {
  if (!tax_rate_) return 0;
  std::int64_t rate = tax_rate_(customer, at);
  GPUHUB_CHECK_MSG(rate >= 0 && rate <= kPpm, "a tax rate is 0..100%");
  return rate;
}

Result<Exchange::HourBill> Exchange::HourLegs(const Lease& lease, std::int64_t hour,
                                              const ledger::Ledger& ledger,
                                              TimestampMicros at) const {
  const std::int64_t total = lease.HourMicros();
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t fee, MulDivHalfEven(total, lease.fee_ppm, kPpm));
  const std::int64_t provider = total - fee;
  GPUHUB_CHECK(provider > 0 && fee >= 0);
  HourBill bill;
  HourCharge& c = bill.charge;
  c.lease_id = lease.id;
  c.customer_id = lease.customer_id;
  c.hour = hour;
  c.at = at;
  c.gpu = lease.gpu;
  c.gpus = lease.gpus;
  c.price_micros = lease.price_micros;
  c.net_micros = total;
  c.rate_ppm = TaxRatePpm(lease.customer_id, at);
  GPUHUB_ASSIGN_OR_RETURN(c.tax_micros, MulDivHalfEven(total, c.rate_ppm, kPpm));
  std::string memo = "lease " + std::to_string(lease.id) + " hour " + std::to_string(hour) + ": " +
                     std::to_string(lease.gpus) + " x " + lease.gpu + " at " +
                     FormatPrice(lease.price_micros) + " USD/GPU-hour";
  std::vector<TransferRequest>& legs = bill.legs;
  legs.reserve(4);
  AccountKey source = AccountKey::Wallet(lease.customer_id, Currency::kUsd);
  if (lease.currency != Currency::kUsd) {
    GPUHUB_ASSIGN_OR_RETURN(
        ledger::FxQuote quote,
        ledger.Fx().ConvertTo(lease.currency, Currency::kUsd, total + c.tax_micros));
    TransferRequest fx;
    fx.id = LeaseHourTransferId(lease.id, hour, "fx");
    fx.kind = TransferKind::kSinglePhase;
    fx.debit = AccountKey::Wallet(lease.customer_id, lease.currency);
    fx.credit = AccountKey::System(AccountKind::kFxConversion, lease.currency);
    fx.amount_micros = quote.from_micros;
    fx.code = "lease_fx";
    fx.memo = memo + " (" + FormatMicros(quote.from_micros) + " " +
              std::string(CurrencyCode(lease.currency)) + ")";
    fx.timestamp = at;
    legs.push_back(std::move(fx));
    source = AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
  }
  TransferRequest pay;
  pay.id = LeaseHourTransferId(lease.id, hour, "provider");
  pay.kind = TransferKind::kSinglePhase;
  pay.debit = source;
  pay.credit = AccountKey::Payable(lease.provider_id, Currency::kUsd);
  pay.amount_micros = provider;
  pay.code = "lease_hour";
  pay.memo = memo;
  pay.timestamp = at;
  legs.push_back(pay);
  if (fee > 0) {
    TransferRequest f = pay;
    f.id = LeaseHourTransferId(lease.id, hour, "fee");
    f.credit = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
    f.amount_micros = fee;
    f.code = "platform_fee";
    legs.push_back(std::move(f));
  }
  if (c.tax_micros > 0) {
    TransferRequest t = pay;
    t.id = LeaseHourTransferId(lease.id, hour, "tax");
    t.credit = AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd);
    t.amount_micros = c.tax_micros;
    t.code = "lease_tax";
    std::string rate = FormatMicros(c.rate_ppm * 100, 4);  // percent: "19.0000" -> "19"
    while (rate.back() == '0') rate.pop_back();
    if (rate.back() == '.') rate.pop_back();
    t.memo = memo + " (tax " + rate + "%)";
    legs.push_back(std::move(t));
  }
  return bill;
}

Result<std::int64_t> Exchange::HoldMicros(Currency currency, std::int64_t usd_micros,
                                          const ledger::Ledger& ledger) const {
  if (currency == Currency::kUsd) return usd_micros;
  GPUHUB_ASSIGN_OR_RETURN(ledger::FxQuote quote,
                          ledger.Fx().ConvertTo(currency, Currency::kUsd, usd_micros));
  return quote.from_micros;
}

Status Exchange::ApplyLegs(ledger::Ledger& ledger, const std::vector<TransferRequest>& legs,
                           Changes* changes) {
  ledger::BatchResult result = ledger.ApplyBatch(legs);
  if (result.result == ledger::TransferResult::kExists) {
    // Every id names one lease-hour or one hold: finding it already there means the exchange and
    // the ledger disagree, which no retry can fix.
    return Status::Internal("ledger transfer " + legs.front().id + " already exists");
  }
  if (!result.ok()) {
    Status s = result.status();
    if (s.code() == StatusCode::kInsufficientFunds && result.failed_index < legs.size() &&
        legs[result.failed_index].debit) {
      // Said in the customer's words: what the wallet has and what this needs from it.
      const AccountKey& account = *legs[result.failed_index].debit;
      std::int64_t needed = 0;
      for (const auto& leg : legs) {
        if (leg.debit && *leg.debit == account && leg.kind != TransferKind::kPostPending) {
          needed += leg.amount_micros;
        }
      }
      auto balance = ledger.GetAccount(account);
      std::int64_t available = balance.ok() ? std::max<std::int64_t>(0, balance->available()) : 0;
      std::string code(CurrencyCode(account.currency));
      return Status::InsufficientFunds("insufficient funds: this needs " + FormatMicros(needed) +
                                       " " + code + " and your " + code + " wallet has " +
                                       FormatMicros(available) + " " + code + " available");
    }
    return s;
  }
  for (auto& t : result.transfers) changes->transfers.push_back(std::move(t));
  return Status::Ok();
}

// ----- Providers --------------------------------------------------------------------------------

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

// ----- Matching and leases ----------------------------------------------------------------------

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
    hold.memo = "lease " + std::to_string(lease.id) + ": its first hour, held until the host runs it";
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

// ----- Queries ----------------------------------------------------------------------------------

const Machine* Exchange::FindMachine(MachineId id) const {
  auto it = machines_.find(id);
  return it == machines_.end() ? nullptr : &it->second.machine;
}
const Ask* Exchange::FindAsk(OrderId id) const {
  auto it = asks_.find(id);
  return it == asks_.end() ? nullptr : &it->second;
}
const Bid* Exchange::FindBid(OrderId id) const {
  auto it = bids_.find(id);
  return it == bids_.end() ? nullptr : &it->second.bid;
}
const Lease* Exchange::FindLease(LeaseId id) const {
  auto it = leases_.find(id);
  return it == leases_.end() ? nullptr : &it->second;
}
const Payout* Exchange::FindPayout(PayoutId id) const {
  auto it = payouts_.find(id);
  return it == payouts_.end() ? nullptr : &it->second;
}
int Exchange::FreeGpus(MachineId id) const {
  auto it = machines_.find(id);
  return it == machines_.end() ? 0 : it->second.Free();
}

std::vector<Lease> Exchange::ActiveLeasesOn(MachineId id) const {
  std::vector<Lease> out;
  auto it = machines_.find(id);
  if (it == machines_.end()) return out;
  for (LeaseId lease : it->second.active_leases) out.push_back(leases_.at(lease));
  return out;
}

std::vector<MachineView> Exchange::ListMachines(UserId provider, std::size_t limit) const {
  std::vector<MachineView> out;
  auto it = machines_by_provider_.find(provider);
  if (it == machines_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](MachineId id) {
    const MachineState& m = machines_.at(id);
    out.push_back({m.machine, std::popcount(m.leased_mask), m.open_ask});
  });
  return out;
}

std::vector<Ask> Exchange::ListAsks(UserId provider, std::size_t limit) const {
  std::vector<Ask> out;
  auto it = asks_by_provider_.find(provider);
  if (it == asks_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](OrderId id) { out.push_back(asks_.at(id)); });
  return out;
}

std::vector<Bid> Exchange::ListBids(UserId customer, std::size_t limit, OrderId before) const {
  std::vector<Bid> out;
  auto it = bids_by_customer_.find(customer);
  if (it == bids_by_customer_.end()) return out;
  NewestFirst(it->second, limit, before, [&](OrderId id) { out.push_back(bids_.at(id).bid); });
  return out;
}

std::vector<Lease> Exchange::ListCustomerLeases(UserId customer, std::size_t limit,
                                                LeaseId before) const {
  std::vector<Lease> out;
  auto it = leases_by_customer_.find(customer);
  if (it == leases_by_customer_.end()) return out;
  NewestFirst(it->second, limit, before, [&](LeaseId id) { out.push_back(leases_.at(id)); });
  return out;
}

std::vector<Lease> Exchange::ListProviderLeases(UserId provider, std::size_t limit,
                                                LeaseId before) const {
  std::vector<Lease> out;
  auto it = leases_by_provider_.find(provider);
  if (it == leases_by_provider_.end()) return out;
  NewestFirst(it->second, limit, before, [&](LeaseId id) { out.push_back(leases_.at(id)); });
  return out;
}

std::vector<Payout> Exchange::ListPayouts(UserId provider, std::size_t limit) const {
  std::vector<Payout> out;
  auto it = payouts_by_provider_.find(provider);
  if (it == payouts_by_provider_.end()) return out;
  NewestFirst(it->second, limit, [&](PayoutId id) { out.push_back(payouts_.at(id)); });
  return out;
}

std::vector<Payout> Exchange::ListPendingPayouts(std::size_t limit) const {
  std::vector<Payout> out;
  for (PayoutId id : pending_payouts_) {
    if (out.size() >= limit) break;
    out.push_back(payouts_.at(id));
  }
  return out;
}

std::vector<OrderId> Exchange::OpenBidIds() const {
  std::vector<OrderId> ids;
  ids.reserve(bids_.size() + leases_.size());
  for (const auto& [id, state] : bids_) ids.push_back(id);
  for (const auto& [id, lease] : leases_) ids.push_back(lease.bid_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::size_t Exchange::resting_bid_count() const {
  std::size_t n = 0;
  for (const auto& m : markets_) n += m.book.bid_orders();
  return n;
}

std::size_t Exchange::open_ask_count() const {
  std::size_t n = 0;
  for (const auto& [id, m] : machines_) n += m.open_ask != 0;
  return n;
}

std::vector<MarketSummary> Exchange::Markets() const {
  std::vector<MarketSummary> out;
  for (const auto& m : markets_) {
    if (!m.listed && !m.book.HasAsks() && !m.book.HasBids() && m.active_leases == 0) continue;
    MarketSummary s;
    s.gpu = m.name;
    s.listed = m.listed;
    if (m.book.HasAsks()) s.best_ask_micros = m.book.BestAskPrice() * kPriceTickMicros;
    if (m.book.HasBids()) s.best_bid_micros = m.book.BestBidPrice() * kPriceTickMicros;
    s.gpus_on_offer = m.book.ask_gpus();
    s.gpus_bid = m.book.bid_gpus();
    s.asks = m.book.ask_orders();
    s.bids = m.book.bid_orders();
    if (!m.recent.empty()) s.last_trade = m.recent.back();
    out.push_back(std::move(s));
  }
  return out;
}

Result<BookDepth> Exchange::Book(std::string_view gpu, std::size_t max_levels) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  const MarketState& m = markets_[static_cast<std::size_t>(index)];
  BookDepth depth;
  depth.gpu = m.name;
  depth.asks = m.book.AskLevels(max_levels);
  depth.bids = m.book.BidLevels(max_levels);
  for (auto& level : depth.asks) level.price *= kPriceTickMicros;
  for (auto& level : depth.bids) level.price *= kPriceTickMicros;
  return depth;
}

Result<std::vector<Trade>> Exchange::Trades(std::string_view gpu, std::size_t limit,
                                            TradeId before) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  const MarketState& m = markets_[static_cast<std::size_t>(index)];
  std::vector<Trade> out;
  for (auto it = m.recent.rbegin(); it != m.recent.rend() && out.size() < limit; ++it) {
    if (before == 0 || it->id < before) out.push_back(*it);
  }
  return out;
}

Result<bool> Exchange::HoldsAllTrades(std::string_view gpu) const {
  GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
  // The list only drops a trade once it holds kRecentTradesPerMarket (a restore loads at most
  // that many), so a list that is not full is the whole history.
  return markets_[static_cast<std::size_t>(index)].recent.size() < kRecentTradesPerMarket;
}

Result<std::vector<Offer>> Exchange::Offers(std::string_view gpu, TimestampMicros now) const {
  std::vector<int> markets;
  if (gpu.empty()) {
    for (std::size_t i = 0; i < markets_.size(); ++i) markets.push_back(static_cast<int>(i));
  } else {
    GPUHUB_ASSIGN_OR_RETURN(int index, FindMarket(gpu));
    markets.push_back(index);
  }
  std::vector<Offer> out;
  for (int index : markets) {
    markets_[static_cast<std::size_t>(index)].book.ForEachAsk([&](Ticks, OrderId id) {
      const Ask& ask = asks_.at(id);
      if (now >= AskUntil(ask)) return;
      const MachineState& m = machines_.at(ask.machine_id);
      out.push_back({ask.id, m.machine.id, m.machine.gpu, m.machine.region, m.Free(), ask.min_gpus,
                     ask.price_micros, ask.available_until, m.machine.vcpus, m.machine.ram_gb,
                     m.machine.disk_gb});
    });
  }
  std::stable_sort(out.begin(), out.end(), [](const Offer& a, const Offer& b) {
    if (a.price_micros != b.price_micros) return a.price_micros < b.price_micros;
    return a.ask_id < b.ask_id;
  });
  return out;
}

Earnings Exchange::ProviderEarnings(UserId provider, const ledger::Ledger& ledger) const {
  Earnings e;
  auto it = totals_.find(provider);
  if (it != totals_.end()) {
    const ProviderTotals& t = it->second;
    e.gross_micros = t.gross_micros;
    e.fee_micros = t.fee_micros;
    e.net_micros = t.gross_micros - t.fee_micros;
    e.gpu_hours = t.gpu_hours;
    e.lease_hours = t.lease_hours;
    e.active_leases = t.active_leases;
    e.pending_payout_micros = t.pending_payout_micros;
    e.paid_out_micros = t.paid_out_micros;
    e.credited_micros = t.credited_micros;
    e.net_micros -= t.credited_micros;
  }
  auto payable = ledger.GetAccount(AccountKey::Payable(provider, Currency::kUsd));
  if (payable.ok()) e.available_micros = payable->available();
  return e;
}

ProviderHistory Exchange::History(UserId provider) const {
  ProviderHistory h;
  h.provider_id = provider;
  auto it = totals_.find(provider);
  if (it == totals_.end()) return h;
  const ProviderTotals& t = it->second;
  h.gross_micros = t.gross_micros;
  h.fee_micros = t.fee_micros;
  h.gpu_hours = t.gpu_hours;
  h.lease_hours = t.lease_hours;
  h.credited_micros = t.credited_micros;
  h.paid_out_micros = t.paid_out_micros;
  return h;
}

std::int64_t Exchange::lease_hours_sold() const {
  std::int64_t hours = 0;
  for (const auto& [provider, t] : totals_) hours += t.lease_hours;
  return hours;
}

// ----- Persistence ------------------------------------------------------------------------------

void Exchange::Forget(const Changes& changes) {
  for (OrderId id : changes.bids) {
    auto it = bids_.find(id);
    if (it == bids_.end() || it->second.bid.status == BidStatus::kResting) continue;
    const UserId customer = it->second.bid.customer_id;
    EraseId(bids_by_customer_, customer, id);
    EraseIfZero(open_bids_by_customer_, customer);
    EraseIfZero(active_leases_by_customer_, customer);  // PlaceBid's limit check made one
    bids_.erase(it);
  }
  for (LeaseId id : changes.leases) {
    auto it = leases_.find(id);
    if (it == leases_.end() || it->second.status == LeaseStatus::kActive) continue;
    const Lease& lease = it->second;
    EraseId(leases_by_customer_, lease.customer_id, id);
    EraseId(leases_by_provider_, lease.provider_id, id);
    EraseIfZero(active_leases_by_customer_, lease.customer_id);
    leases_.erase(it);
  }
  for (OrderId id : changes.asks) {
    auto it = asks_.find(id);
    if (it == asks_.end() || it->second.status == AskStatus::kOpen) continue;
    EraseId(asks_by_provider_, it->second.provider_id, id);
    asks_.erase(it);
  }
  for (PayoutId id : changes.payouts) {
    auto it = payouts_.find(id);
    if (it == payouts_.end() || it->second.status == PayoutStatus::kPending) continue;
    EraseId(payouts_by_provider_, it->second.provider_id, id);
    EraseIfZero(pending_payouts_by_provider_, it->second.provider_id);
    payouts_.erase(it);
  }
}

Result<Exchange> Exchange::Restore(ExchangeConfig config, Snapshot snapshot) {
  GPUHUB_RETURN_IF_ERROR(ValidateExchangeConfig(config));
  Exchange x(std::move(config));
  auto bad = [](const std::string& what) {
    return Status::Internal("stored market data is inconsistent: " + what);
  };
  auto market_of = [&](const std::string& gpu) -> Result<int> {
    if (GpuKey(gpu).empty()) return bad("a record without a GPU model");
    auto it = x.market_by_key_.find(GpuKey(gpu));
    if (it != x.market_by_key_.end()) return it->second;
    if (x.markets_.size() >= kMaxMarkets) return bad("too many markets");
    return x.AddMarket(gpu, /*listed=*/false);
  };

  std::sort(snapshot.machines.begin(), snapshot.machines.end(),
            [](const Machine& a, const Machine& b) { return a.id < b.id; });
  for (auto& m : snapshot.machines) {
    if (m.id <= 0 || m.provider_id <= 0 || m.gpus < 1 || m.gpus > kMaxGpusPerMachine ||
        (m.blocked_mask >> m.gpus) != 0 || m.offline_since < 0 ||
        m.hold_reason.size() > kMaxHoldReasonBytes) {
      return bad("machine " + std::to_string(m.id));
    }
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(m.gpu));
    auto region = CanonicalRegion(m.region);
    if (!region.ok()) return bad("machine " + std::to_string(m.id) + " region");
    MachineState state;
    state.machine = m;
    state.machine.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    state.market = market;
    state.region = x.InternRegion(*region);
    if (!x.machines_.emplace(m.id, state).second) return bad("machine id twice");
    x.machines_by_provider_[m.provider_id].push_back(m.id);
    x.next_machine_id_ = std::max(x.next_machine_id_, m.id + 1);
  }

  std::sort(snapshot.leases.begin(), snapshot.leases.end(),
            [](const Lease& a, const Lease& b) { return a.id < b.id; });
  for (auto& l : snapshot.leases) {
    auto mit = x.machines_.find(l.machine_id);
    if (l.id <= 0 || mit == x.machines_.end()) return bad("lease " + std::to_string(l.id));
    MachineState& machine = mit->second;
    if (l.provider_id != machine.machine.provider_id || l.gpus < 1 ||
        std::popcount(l.gpu_mask) != l.gpus || (l.gpu_mask >> machine.machine.gpus) != 0 ||
        l.hours_paid < (l.start_deadline != 0 ? 0 : 1) || l.price_micros <= 0 || l.fee_ppm < 0 ||
        l.fee_ppm > kMaxFeePpm || l.credited_micros < 0 || l.credited_provider_micros < 0 ||
        l.credited_provider_micros > l.credited_micros || l.hold_micros < 0 ||
        (l.hold_micros > 0) != (l.start_deadline != 0) ||
        (l.paused_at != 0 &&
         (l.status != LeaseStatus::kActive || l.hours_paid == 0 ||
          (machine.machine.offline_since == 0 && !l.workload_down)))) {
      return bad("lease " + std::to_string(l.id));
    }
    l.gpu = machine.machine.gpu;
    if (l.status == LeaseStatus::kActive) {
      if ((machine.leased_mask & l.gpu_mask) != 0) {
        return bad("a GPU of machine " + std::to_string(machine.machine.id) +
                   " is in two active leases");
      }
      if ((machine.machine.offline_since != 0 || l.workload_down) && l.paused_at == 0 &&
          l.hours_paid > 0) {
        return bad("lease " + std::to_string(l.id) + " is billed while its machine is offline "
                   "or its workload is down");
      }
      machine.leased_mask |= l.gpu_mask;
      machine.active_leases.insert(l.id);
      ++x.markets_[static_cast<std::size_t>(machine.market)].active_leases;
      ++x.active_leases_;
      ++x.active_leases_by_customer_[l.customer_id];
      ++x.totals_[l.provider_id].active_leases;
      if (l.hours_paid == 0) {
        x.timeline_.insert({l.start_deadline, kLeaseStart, l.id});
      } else if (l.paused_at == 0) {
        x.timeline_.insert({l.PaidUntil(), kLeaseHour, l.id});
      }
    }
    x.leases_by_customer_[l.customer_id].insert(l.id);
    x.leases_by_provider_[l.provider_id].insert(l.id);
    x.next_lease_id_ = std::max(x.next_lease_id_, l.id + 1);
    x.leases_.emplace(l.id, l);
  }

  std::sort(snapshot.asks.begin(), snapshot.asks.end(),
            [](const Ask& a, const Ask& b) { return a.id < b.id; });
  for (auto& a : snapshot.asks) {
    auto mit = x.machines_.find(a.machine_id);
    if (a.id <= 0 || mit == x.machines_.end() || mit->second.machine.provider_id != a.provider_id ||
        !ValidatePriceMicros(a.price_micros, "price").ok() || a.min_gpus < 1 ||
        a.min_gpus > mit->second.machine.gpus) {
      return bad("ask " + std::to_string(a.id));
    }
    a.gpu = mit->second.machine.gpu;
    if (a.status == AskStatus::kOpen) {
      if (mit->second.open_ask != 0) return bad("two open asks on one machine");
      mit->second.open_ask = a.id;
      x.timeline_.insert({AskUntil(a), kAskExpiry, a.id});
    }
    x.asks_by_provider_[a.provider_id].insert(a.id);
    x.next_order_id_ = std::max(x.next_order_id_, a.id + 1);
    if (!x.asks_.emplace(a.id, a).second) return bad("order id twice");
  }
  for (const auto& [id, machine] : x.machines_) x.SyncAsk(machine);

  std::sort(snapshot.bids.begin(), snapshot.bids.end(),
            [](const Bid& a, const Bid& b) { return a.id < b.id; });
  for (auto& b : snapshot.bids) {
    if (b.id <= 0 || b.customer_id <= 0 || b.gpus < 1 || b.gpus > kMaxGpusPerMachine ||
        x.asks_.count(b.id)) {
      return bad("bid " + std::to_string(b.id));
    }
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(b.gpu));
    BidState state;
    state.bid = b;
    state.bid.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    state.market = market;
    if (!b.region.empty()) {
      auto region = CanonicalRegion(b.region);
      if (!region.ok()) return bad("bid " + std::to_string(b.id) + " region");
      state.region = x.InternRegion(*region);
    }
    if (b.status == BidStatus::kResting) {
      if (b.is_market || !ValidatePriceMicros(b.limit_micros, "limit").ok() || b.hold_micros <= 0) {
        return bad("resting bid " + std::to_string(b.id));
      }
      x.markets_[static_cast<std::size_t>(market)].book.AddBid(
          {b.id, ToTicks(b.limit_micros), b.gpus, state.region,
           b.expires_at == 0 ? kNever : b.expires_at, x.InternOwner(b.customer_id)});
      if (b.expires_at != 0) x.timeline_.insert({b.expires_at, kBidExpiry, b.id});
      ++x.open_bids_by_customer_[b.customer_id];
    }
    x.bids_by_customer_[b.customer_id].insert(b.id);
    x.next_order_id_ = std::max(x.next_order_id_, b.id + 1);
    if (!x.bids_.emplace(b.id, std::move(state)).second) return bad("bid id twice");
  }

  std::sort(snapshot.trades.begin(), snapshot.trades.end(),
            [](const Trade& a, const Trade& b) { return a.id < b.id; });
  for (auto& t : snapshot.trades) {
    if (t.id <= 0) return bad("trade id");
    GPUHUB_ASSIGN_OR_RETURN(int market, market_of(t.gpu));
    t.gpu = x.markets_[static_cast<std::size_t>(market)].name;
    x.RecordTrade(market, t);
    x.next_trade_id_ = std::max(x.next_trade_id_, t.id + 1);
  }

  std::sort(snapshot.payouts.begin(), snapshot.payouts.end(),
            [](const Payout& a, const Payout& b) { return a.id < b.id; });
  for (auto& p : snapshot.payouts) {
    if (p.id <= 0 || p.provider_id <= 0 || p.amount_micros <= 0) return bad("payout");
    if (p.status == PayoutStatus::kPending) {
      x.totals_[p.provider_id].pending_payout_micros += p.amount_micros;
      ++x.pending_payouts_by_provider_[p.provider_id];
      x.pending_payouts_.insert(p.id);
    }
    x.payouts_by_provider_[p.provider_id].insert(p.id);
    x.next_payout_id_ = std::max(x.next_payout_id_, p.id + 1);
    if (!x.payouts_.emplace(p.id, p).second) return bad("payout id twice");
  }
  // History: the totals as kept, not recomputed from whichever closed records were given.
  for (const auto& h : snapshot.providers) {
    if (h.provider_id <= 0 || h.gross_micros < 0 || h.fee_micros < 0 || h.gpu_hours < 0 ||
        h.lease_hours < 0 || h.credited_micros < 0 || h.paid_out_micros < 0) {
      return bad("history totals of provider " + std::to_string(h.provider_id));
    }
    ProviderTotals& t = x.totals_[h.provider_id];
    if (t.gross_micros != 0 || t.lease_hours != 0 || t.paid_out_micros != 0) {
      return bad("history totals of provider " + std::to_string(h.provider_id) + " twice");
    }
    t.gross_micros = h.gross_micros;
    t.fee_micros = h.fee_micros;
    t.gpu_hours = h.gpu_hours;
    t.lease_hours = h.lease_hours;
    t.credited_micros = h.credited_micros;
    t.paid_out_micros = h.paid_out_micros;
  }
  const LastIds& last = snapshot.last_ids;
  if (last.machine < 0 || last.order < 0 || last.lease < 0 || last.trade < 0 || last.payout < 0) {
    return bad("last ids");
  }
  x.next_machine_id_ = std::max(x.next_machine_id_, last.machine + 1);
  x.next_order_id_ = std::max(x.next_order_id_, last.order + 1);
  x.next_lease_id_ = std::max(x.next_lease_id_, last.lease + 1);
  x.next_trade_id_ = std::max(x.next_trade_id_, last.trade + 1);
  x.next_payout_id_ = std::max(x.next_payout_id_, last.payout + 1);
  // Checks that need the ledger (holds, hours) run in CheckInvariants / CheckSettlement.
  return x;
}

Snapshot Exchange::Records() const {
  Snapshot s;
  for (const auto& [id, m] : machines_) s.machines.push_back(m.machine);
  for (const auto& [id, a] : asks_) s.asks.push_back(a);
  for (const auto& [id, b] : bids_) s.bids.push_back(b.bid);
  for (const auto& [id, l] : leases_) s.leases.push_back(l);
  for (const auto& m : markets_) s.trades.insert(s.trades.end(), m.recent.begin(), m.recent.end());
  for (const auto& [id, p] : payouts_) s.payouts.push_back(p);
  std::sort(s.asks.begin(), s.asks.end(), [](const Ask& a, const Ask& b) { return a.id < b.id; });
  std::sort(s.bids.begin(), s.bids.end(), [](const Bid& a, const Bid& b) { return a.id < b.id; });
  std::sort(s.trades.begin(), s.trades.end(),
            [](const Trade& a, const Trade& b) { return a.id < b.id; });
  for (const auto& [provider, t] : totals_) {
    ProviderHistory h = History(provider);
    if (h != ProviderHistory{.provider_id = provider}) s.providers.push_back(h);
  }
  std::sort(s.providers.begin(), s.providers.end(),
            [](const ProviderHistory& a, const ProviderHistory& b) {
              return a.provider_id < b.provider_id;
            });
  s.last_ids = {next_machine_id_ - 1, next_order_id_ - 1, next_lease_id_ - 1, next_trade_id_ - 1,
                next_payout_id_ - 1};
  return s;
}

// ----- Invariants -------------------------------------------------------------------------------

Status Exchange::CheckInvariants(const ledger::Ledger& ledger) const {
  auto fail = [](const std::string& what) { return Status::Internal("market invariant: " + what); };
  // GPUs: each machine's leased mask is exactly the disjoint union of its active leases.
  std::map<MachineId, std::uint32_t> leased;
  std::unordered_map<UserId, std::size_t> active_by_customer;
  std::size_t active = 0, billed = 0, starting = 0;
  std::map<MachineId, std::size_t> active_per_machine;
  for (const auto& [id, l] : leases_) {
    if (l.status != LeaseStatus::kActive) {
      if (l.paused_at != 0) return fail("ended lease " + std::to_string(id) + " is paused");
      continue;
    }
    ++active;
    ++active_by_customer[l.customer_id];
    std::uint32_t& mask = leased[l.machine_id];
    if ((mask & l.gpu_mask) != 0)
      return fail("a GPU is in two leases (lease " + std::to_string(id) + ")");
    mask |= l.gpu_mask;
    ++active_per_machine[l.machine_id];
    const MachineState& machine = machines_.at(l.machine_id);
    if (!machine.active_leases.count(id)) return fail("lease " + std::to_string(id) + " index");
    if (l.Provisioning()) {
      // Waiting for its host: not billed, its first hour held until its deadline.
      ++starting;
      if (l.paused_at != 0 || l.workload_down || l.start_deadline == 0) {
        return fail("provisioning lease " + std::to_string(id) + " is paused or has no deadline");
      }
      if (!timeline_.count({l.start_deadline, kLeaseStart, id})) {
        return fail("provisioning lease " + std::to_string(id) + " has no deadline event");
      }
      auto hold = ledger.FindTransfer(LeaseHoldTransferId(id));
      if (!hold.ok() || hold->state != ledger::TransferState::kPending ||
          hold->amount_micros != l.hold_micros ||
          hold->debit != AccountKey::Wallet(l.customer_id, l.currency)) {
        return fail("provisioning lease " + std::to_string(id) + " has no matching pending hold");
      }
      continue;
    }
    if ((l.paused_at != 0) != (machine.machine.offline_since != 0 || l.workload_down)) {
      return fail("lease " + std::to_string(id) +
                  " is paused exactly while its machine is offline or its workload down");
    }
    if (l.paused_at == 0) {
      ++billed;
      if (!timeline_.count({l.PaidUntil(), kLeaseHour, id})) {
        return fail("active lease " + std::to_string(id) + " has no billing event");
      }
    }
    if (l.credited_micros > l.HourMicros() * l.hours_paid) {
      return fail("lease " + std::to_string(id) + " credited more than it paid");
    }
  }
  if (active != active_leases_) return fail("active lease count");
  for (const auto& [id, m] : machines_) {
    auto it = leased.find(id);
    std::uint32_t mask = it == leased.end() ? 0 : it->second;
    if (mask != m.leased_mask) return fail("machine " + std::to_string(id) + " leased mask");
    if ((mask >> m.machine.gpus) != 0) return fail("leased GPU beyond the machine");
    if ((m.machine.blocked_mask >> m.machine.gpus) != 0) return fail("blocked GPU beyond it");
    if (m.active_leases.size() != active_per_machine[id]) {
      return fail("machine " + std::to_string(id) + " active lease index");
    }
    const MarketState& market = markets_[static_cast<std::size_t>(m.market)];
    if (m.open_ask != 0) {
      auto a = asks_.find(m.open_ask);
      if (a == asks_.end() || a->second.status != AskStatus::kOpen || a->second.machine_id != id) {
        return fail("machine " + std::to_string(id) + " open ask");
      }
      if (!timeline_.count({AskUntil(a->second), kAskExpiry, m.open_ask})) {
        return fail("open ask without an expiry event");
      }
      bool on_book = market.book.Contains(m.open_ask);
      if (on_book != (m.Free() > 0))
        return fail("ask " + std::to_string(m.open_ask) + " book presence");
    }
  }
  std::size_t open_asks = 0;
  for (const auto& [id, a] : asks_) {
    if (a.status != AskStatus::kOpen) {
      if (markets_[static_cast<std::size_t>(machines_.at(a.machine_id).market)].book.Contains(id)) {
        return fail("closed ask on the book");
      }
      continue;
    }
    ++open_asks;
    if (machines_.at(a.machine_id).open_ask != id) return fail("open ask not its machine's");
  }
  // Bids and holds.
  std::unordered_map<UserId, std::size_t> resting_by_customer;
  std::size_t resting = 0;
  for (const auto& [id, state] : bids_) {
    const Bid& b = state.bid;
    const OrderBook& book = markets_[static_cast<std::size_t>(state.market)].book;
    if (b.status == BidStatus::kResting) {
      ++resting;
      ++resting_by_customer[b.customer_id];
      if (!book.Contains(id)) return fail("resting bid " + std::to_string(id) + " not on the book");
      auto hold = ledger.FindTransfer(BidHoldTransferId(id));
      if (!hold.ok() || hold->state != ledger::TransferState::kPending ||
          hold->amount_micros != b.hold_micros ||
          hold->debit != AccountKey::Wallet(b.customer_id, b.currency)) {
        return fail("resting bid " + std::to_string(id) + " has no matching pending hold");
      }
      if (b.expires_at != 0 && !timeline_.count({b.expires_at, kBidExpiry, id})) {
        return fail("resting bid without an expiry event");
      }
    } else {
      if (book.Contains(id)) return fail("closed bid on the book");
      if ((b.status == BidStatus::kFilled) != (b.lease_id != 0)) return fail("filled bid lease");
    }
  }
  std::size_t on_books = 0;
  for (const auto& m : markets_) {
    GPUHUB_RETURN_IF_ERROR(m.book.CheckConsistency());
    on_books += m.book.ask_orders() + m.book.bid_orders();
  }
  std::size_t asks_on_book = 0;
  for (const auto& [id, m] : machines_) asks_on_book += (m.open_ask != 0 && m.Free() > 0);
  if (on_books != asks_on_book + resting) return fail("books hold orders that are not open");
  for (const auto& [customer, n] : open_bids_by_customer_) {
    auto it = resting_by_customer.find(customer);
    if (n != (it == resting_by_customer.end() ? 0 : it->second)) return fail("open bid counter");
  }
  for (const auto& [customer, n] : active_leases_by_customer_) {
    auto it = active_by_customer.find(customer);
    if (n != (it == active_by_customer.end() ? 0 : it->second)) return fail("active lease counter");
  }
  // Timeline: exactly one event per active lease, open ask and resting bid with an expiry.
  std::size_t expiring_bids = 0;
  for (const auto& [id, state] : bids_) {
    expiring_bids += state.bid.status == BidStatus::kResting && state.bid.expires_at != 0;
  }
  if (timeline_.size() != billed + starting + open_asks + expiring_bids) {
    return fail("stray timeline events");
  }
  // Payouts: each pending payout is a pending transfer.
  for (PayoutId id : pending_payouts_) {
    auto t = ledger.FindTransfer(PayoutTransferId(id));
    if (!t.ok() || t->state != ledger::TransferState::kPending ||
        t->amount_micros != payouts_.at(id).amount_micros) {
      return fail("pending payout " + std::to_string(id) + " without its pending transfer");
    }
  }
  return Status::Ok();
}

Status Exchange::CheckSettlement(const ledger::Ledger& ledger, const Snapshot* history) const {
  auto fail = [](const std::string& what) { return Status::Internal("settlement: " + what); };
  std::unordered_map<UserId, ProviderTotals> sums;
  std::map<LeaseId, const Lease*> leases;
  for (const auto& [id, l] : leases_) leases.emplace(id, &l);
  std::map<OrderId, const Bid*> bids;
  for (const auto& [id, state] : bids_) bids.emplace(id, &state.bid);
  if (history != nullptr) {
    for (const auto& l : history->leases) {
      if (!leases.emplace(l.id, &l).second) return fail("lease " + std::to_string(l.id) + " twice");
    }
    for (const auto& b : history->bids) {
      if (!bids.emplace(b.id, &b).second) return fail("bid " + std::to_string(b.id) + " twice");
    }
  }
  for (const auto& [id, lease] : leases) {
    const Lease& l = *lease;
    const std::int64_t total = l.HourMicros();
    const std::int64_t fee = MulDivHalfEven(total, l.fee_ppm, kPpm).value();
    for (std::int64_t hour = 1; hour <= l.hours_paid; ++hour) {
      std::string where = "lease " + std::to_string(id) + " hour " + std::to_string(hour);
      auto pay = ledger.FindTransfer(LeaseHourTransferId(id, hour, "provider"));
      if (!pay.ok()) return fail(where + " was never charged");
      if (pay->amount_micros != total - fee ||
          pay->credit != AccountKey::Payable(l.provider_id, Currency::kUsd) ||
          pay->state != ledger::TransferState::kPosted) {
        return fail(where + ": provider leg is wrong");
      }
      std::int64_t fee_paid = 0;
      auto f = ledger.FindTransfer(LeaseHourTransferId(id, hour, "fee"));
      if (f.ok()) {
        if (f->credit != AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd) ||
            f->debit != pay->debit) {
          return fail(where + ": fee leg is wrong");
        }
        fee_paid = f->amount_micros;
      }
      // Customer paid = provider credited + fee, in USD.
      if (fee_paid != fee || pay->amount_micros + fee_paid != total) {
        return fail(where + ": provider + fee != price");
      }
      // Tax on top, when there was any (its rate is billing's: only its shape is checked here).
      auto tax = ledger.FindTransfer(LeaseHourTransferId(id, hour, "tax"));
      if (tax.ok() &&
          (tax->credit != AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd) ||
           tax->debit != pay->debit || tax->amount_micros > total ||
           tax->state != ledger::TransferState::kPosted)) {
        return fail(where + ": tax leg is wrong");
      }
      auto fx = ledger.FindTransfer(LeaseHourTransferId(id, hour, "fx"));
      if (l.currency == Currency::kUsd) {
        if (pay->debit != AccountKey::Wallet(l.customer_id, Currency::kUsd) || fx.ok()) {
          return fail(where + ": not paid from the USD wallet");
        }
      } else if (!fx.ok() || fx->debit != AccountKey::Wallet(l.customer_id, l.currency) ||
                 pay->debit != AccountKey::System(AccountKind::kFxConversion, Currency::kUsd)) {
        return fail(where + ": FX legs are wrong");
      }
    }
    if (l.hold_micros > 0) {
      // The first hour's hold: open while provisioning, voided once it started or ended.
      auto hold = ledger.FindTransfer(LeaseHoldTransferId(id));
      const auto want = l.Provisioning() ? ledger::TransferState::kPending
                                         : ledger::TransferState::kVoided;
      if (!hold.ok() || hold->state != want || hold->amount_micros != l.hold_micros ||
          hold->debit != AccountKey::Wallet(l.customer_id, l.currency)) {
        return fail("lease " + std::to_string(id) + " hold of its first hour is wrong");
      }
    }
    if (ledger.FindTransfer(LeaseHourTransferId(id, l.hours_paid + 1, "provider")).ok()) {
      return fail("lease " + std::to_string(id) + " was charged for an hour it does not count");
    }
    // Downtime credits: back to the customer's wallet (or the FX account that paid for it), never
    // more than the hour cost, adding up to what the lease says.
    std::int64_t credited = 0, credited_provider = 0;
    const AccountKey back_to = l.currency == Currency::kUsd
                                   ? AccountKey::Wallet(l.customer_id, Currency::kUsd)
                                   : AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
    for (std::int64_t hour = 1; l.credited_micros > 0 && hour <= l.hours_paid; ++hour) {
      std::int64_t in_hour = 0;
      for (const char* leg : {"provider", "fee", "advance"}) {
        auto t = ledger.FindTransfer(LeaseCreditTransferId(id, hour, leg));
        if (!t.ok()) continue;
        const AccountKey from =
            std::string_view(leg) == "provider"
                ? AccountKey::Payable(l.provider_id, Currency::kUsd)
                : AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
        if (t->debit != from || t->credit != back_to) {
          return fail("lease " + std::to_string(id) + " hour " + std::to_string(hour) +
                      ": downtime credit legs are wrong");
        }
        in_hour += t->amount_micros;
        if (std::string_view(leg) == "provider") credited_provider += t->amount_micros;
      }
      if (in_hour > total) {
        return fail("lease " + std::to_string(id) + " hour " + std::to_string(hour) +
                    " was credited more than it cost");
      }
      credited += in_hour;
    }
    if (credited != l.credited_micros || credited_provider != l.credited_provider_micros) {
      return fail("lease " + std::to_string(id) + " downtime credits disagree with the ledger");
    }
    ProviderTotals& s = sums[l.provider_id];
    s.credited_micros += credited_provider;
    s.gross_micros += total * l.hours_paid;
    s.fee_micros += fee * l.hours_paid;
    s.lease_hours += l.hours_paid;
    s.gpu_hours += l.gpus * l.hours_paid;
  }
  // Every closed bid's hold was released (voided; a fill voids it and pays the hour).
  for (const auto& [id, bid] : bids) {
    if (bid->status == BidStatus::kResting || bid->hold_micros == 0) continue;
    auto hold = ledger.FindTransfer(BidHoldTransferId(id));
    if (!hold.ok() || hold->state != ledger::TransferState::kVoided) {
      return fail("closed bid " + std::to_string(id) + " did not release its hold");
    }
  }
  if (history == nullptr) return Status::Ok();
  for (const auto& [provider, t] : totals_) {
    const ProviderTotals& s = sums[provider];
    if (s.gross_micros != t.gross_micros || s.fee_micros != t.fee_micros ||
        s.lease_hours != t.lease_hours || s.gpu_hours != t.gpu_hours ||
        s.credited_micros != t.credited_micros) {
      return fail("earnings totals of provider " + std::to_string(provider));
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::market
