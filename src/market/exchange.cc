// The exchange: its configuration, construction, the markets, regions and owners it interns,
// and the money of a lease hour (its ledger legs, holds and tax).
#include "market/exchange.h"

#include <algorithm>
#include <bit>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "market/exchange_internal.h"

namespace gpuhub::market {

namespace {

template <typename T>
void SortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
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

}  // namespace gpuhub::market
