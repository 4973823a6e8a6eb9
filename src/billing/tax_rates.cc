#include "billing/tax_rates.h"

#include <algorithm>

#include "billing/countries.h"
#include "billing/limits.h"
#include "core/money.h"

namespace gpuhub::billing {
namespace {

constexpr TimestampMicros kUs = kMicrosPerSecond;
constexpr TimestampMicros k2024_01_01 = 1704067200 * kUs;
constexpr TimestampMicros k2024_09_01 = 1725148800 * kUs;
constexpr TimestampMicros k2025_01_01 = 1735689600 * kUs;
constexpr TimestampMicros k2025_07_01 = 1751328000 * kUs;
constexpr TimestampMicros k2025_08_01 = 1754006400 * kUs;

bool Covers(const RatePeriod& p, TimestampMicros at) {
  return p.valid_from <= at && (p.valid_until == 0 || at < p.valid_until);
}

}  // namespace

Result<std::int64_t> ParseRatePercent(std::string_view text) {
  auto micros = ParseDecimalMicros(text, kRatePercentFractionDigits);
  // percent x 1e6 micro-units = ppm x 100.
  if (!micros.ok() || *micros > 100 * kMicrosPerUnit) {
    return Status::InvalidArgument("rate must be a percentage from 0 to 100 with at most " +
                                   std::to_string(kRatePercentFractionDigits) +
                                   " decimals, such as \"19\" or \"25.5\"")
        .WithField("rate");
  }
  return *micros / 100;
}

std::string FormatRatePercent(std::int64_t rate_ppm) {
  std::string s = FormatMicros(rate_ppm * 100, kRatePercentFractionDigits);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

TaxRateTable TaxRateTable::Defaults() {
  TaxRateTable t;
  auto add = [&](const char* country, std::int64_t ppm, TimestampMicros from,
                 TimestampMicros until = 0) {
    t.by_country_[country].push_back({country, ppm, from, until, "standard VAT"});
  };
  // Unchanged since before 2024: shipped from 2024-01-01.
  for (auto [c, ppm] : std::initializer_list<std::pair<const char*, std::int64_t>>{
           {"AT", 200'000}, {"BE", 210'000}, {"BG", 200'000}, {"HR", 250'000},
           {"CY", 190'000}, {"CZ", 210'000}, {"DK", 250'000}, {"FR", 200'000},
           {"DE", 190'000}, {"GR", 240'000}, {"HU", 270'000}, {"IE", 230'000},
           {"IT", 220'000}, {"LV", 210'000}, {"LT", 210'000}, {"LU", 170'000},
           {"MT", 180'000}, {"NL", 210'000}, {"PL", 230'000}, {"PT", 230'000},
           {"SI", 220'000}, {"ES", 210'000}, {"SE", 250'000}, {"GB", 200'000},
           {"UA", 200'000}, {"NO", 250'000}, {"CH", 81'000}}) {
    add(c, ppm, k2024_01_01);
  }
  add("FI", 240'000, k2024_01_01, k2024_09_01);
  add("FI", 255'000, k2024_09_01);
  add("SK", 200'000, k2024_01_01, k2025_01_01);
  add("SK", 230'000, k2025_01_01);
  add("EE", 220'000, k2024_01_01, k2025_07_01);
  add("EE", 240'000, k2025_07_01);
  add("RO", 190'000, k2024_01_01, k2025_08_01);
  add("RO", 210'000, k2025_08_01);
  return t;
}

Result<TaxRateTable> TaxRateTable::FromPeriods(std::vector<RatePeriod> periods) {
  TaxRateTable t;
  for (auto& p : periods) t.by_country_[p.country].push_back(std::move(p));
  for (auto& [country, list] : t.by_country_) {
    std::sort(list.begin(), list.end(),
              [](const RatePeriod& a, const RatePeriod& b) { return a.valid_from < b.valid_from; });
    for (std::size_t i = 1; i < list.size(); ++i) {
      if (list[i - 1].valid_until == 0 || list[i - 1].valid_until > list[i].valid_from) {
        return Status::Internal("tax rate periods of " + country + " overlap");
      }
    }
  }
  return t;
}

std::optional<RatePeriod> TaxRateTable::Find(std::string_view country, TimestampMicros at) const {
  auto it = by_country_.find(country);
  if (it == by_country_.end()) return std::nullopt;
  for (auto p = it->second.rbegin(); p != it->second.rend(); ++p) {
    if (Covers(*p, at)) return *p;
  }
  return std::nullopt;
}

Result<RatePeriod> TaxRateTable::Set(std::string_view country, std::int64_t rate_ppm,
                                     TimestampMicros from, std::string note) {
  if (!IsCountryCode(country)) {
    return Status::InvalidArgument("country must be an ISO 3166-1 alpha-2 code such as DE")
        .WithField("country");
  }
  if (rate_ppm < 0 || rate_ppm > kMaxRatePpm) {
    return Status::InvalidArgument("rate must be a percentage from 0 to 100").WithField("rate");
  }
  if (from <= 0) return Status::InvalidArgument("valid_from must be a time").WithField("valid_from");
  auto& list = by_country_[std::string(country)];
  if (list.size() >= kMaxRatePeriodsPerCountry) {
    return Status::ResourceExhausted("too many rate changes for " + std::string(country));
  }
  // Cut what starts at or after `from`; end the period covering it there.
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const RatePeriod& p) { return p.valid_from >= from; }),
             list.end());
  for (auto& p : list) {
    if (p.valid_until == 0 || p.valid_until > from) p.valid_until = from;
  }
  RatePeriod period{std::string(country), rate_ppm, from, 0, std::move(note)};
  list.push_back(period);
  return period;
}

Result<RatePeriod> TaxRateTable::Close(std::string_view country, TimestampMicros until) {
  auto it = by_country_.find(country);
  auto covering = Find(country, until);
  if (it == by_country_.end() || !covering) {
    return Status::NotFound("no tax rate of " + std::string(country.substr(0, 8)) +
                            " is in force at that time");
  }
  auto& list = it->second;
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](const RatePeriod& p) { return p.valid_from > until; }),
             list.end());
  RatePeriod closed;
  for (auto& p : list) {
    if (p.valid_from == covering->valid_from) {
      p.valid_until = until;
      closed = p;
    }
  }
  // A period that would start and end at the same moment never was.
  list.erase(std::remove_if(list.begin(), list.end(),
                            [](const RatePeriod& p) { return p.valid_until != 0 && p.valid_until <= p.valid_from; }),
             list.end());
  return closed;
}

std::vector<RatePeriod> TaxRateTable::All() const {
  std::vector<RatePeriod> out;
  for (const auto& [c, list] : by_country_) out.insert(out.end(), list.begin(), list.end());
  return out;
}

std::vector<RatePeriod> TaxRateTable::CurrentAt(TimestampMicros at) const {
  std::vector<RatePeriod> out;
  for (const auto& [c, list] : by_country_) {
    if (auto p = Find(c, at)) out.push_back(*p);
  }
  return out;
}

}  // namespace gpuhub::billing
