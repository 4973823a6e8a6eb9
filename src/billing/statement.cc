#include "billing/statement.h"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace gpuhub::billing {
namespace {

std::string HourText(TimestampMicros at) {
  CivilDate d = CivilDateOf(at);
  std::int64_t seconds = (at - TimestampOfDate(d.year, d.month, d.day)) / kMicrosPerSecond;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u %02lld:%02lld", static_cast<long long>(d.year),
                d.month, d.day, static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60));
  return buf;
}

std::string PriceText(std::int64_t micros) {
  // Prices are quoted with 3 decimals (market tick 0.001).
  return FormatMicros(micros, 3);
}

}  // namespace

Month MonthOf(TimestampMicros at) {
  CivilDate d = CivilDateOf(at);
  return {TimestampOfDate(d.year, d.month, 1), TimestampOfDate(d.year, d.month + 1, 1)};
}

std::string MonthKey(const Month& month) {
  CivilDate d = CivilDateOf(month.start);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04lld-%02u", static_cast<long long>(d.year), d.month);
  return buf;
}

std::string MonthLabel(const Month& month) {
  static constexpr const char* kNames[] = {"January", "February", "March",     "April",
                                           "May",     "June",     "July",      "August",
                                           "September", "October", "November", "December"};
  CivilDate d = CivilDateOf(month.start);
  return std::string(kNames[d.month - 1]) + " " + std::to_string(d.year);
}

bool SameTreatment(const SpotUsage& usage, const SpotHour& hour) {
  return usage.lease_id == hour.lease_id && usage.tax_country == hour.tax.country &&
         usage.rate_ppm == (hour.tax.reverse_charge ? 0 : hour.tax.rate_ppm) &&
         usage.reverse_charge == hour.tax.reverse_charge;
}

SpotUsage UsageOf(const SpotHour& hour) {
  SpotUsage u;
  u.lease_id = hour.lease_id;
  u.gpu = hour.gpu;
  u.gpus = hour.gpus;
  u.price_micros = hour.price_micros;
  u.tax_country = hour.tax.country;
  u.reverse_charge = hour.tax.reverse_charge;
  u.rate_ppm = hour.tax.reverse_charge ? 0 : hour.tax.rate_ppm;
  u.hours = 1;
  u.net_micros = hour.net_micros;
  u.tax_micros = hour.tax_micros;
  u.first_hour_at = u.last_hour_at = hour.at;
  return u;
}

Status AddHour(SpotUsage& usage, const SpotHour& hour) {
  if (!SameTreatment(usage, hour) || MonthOf(usage.first_hour_at) != MonthOf(hour.at)) {
    return Status::InvalidArgument("the hour belongs to another usage row");
  }
  SpotUsage next = usage;
  if (!CheckedAdd(next.net_micros, hour.net_micros, &next.net_micros) ||
      !CheckedAdd(next.tax_micros, hour.tax_micros, &next.tax_micros)) {
    return Status::InvalidArgument("spot usage sums overflow");
  }
  ++next.hours;
  next.first_hour_at = std::min(next.first_hour_at, hour.at);
  next.last_hour_at = std::max(next.last_hour_at, hour.at);
  usage = std::move(next);
  return Status::Ok();
}

Result<Document> BuildSpotStatement(const Month& month, std::vector<SpotUsage> usage,
                                    TimestampMicros issued_at) {
  if (usage.empty()) return Status::InvalidArgument("a statement needs at least one lease-hour");
  std::sort(usage.begin(), usage.end(), [](const SpotUsage& a, const SpotUsage& b) {
    return std::tie(a.lease_id, a.first_hour_at) < std::tie(b.lease_id, b.first_hour_at);
  });
  Document doc;
  doc.kind = DocumentKind::kInvoice;
  doc.source = "spot:" + MonthKey(month);
  doc.title = "Spot GPU usage, " + MonthLabel(month);
  doc.issued_at = issued_at;
  doc.supply_from = month.start;
  doc.supply_until = month.end;
  for (const SpotUsage& u : usage) {
    Line line;
    line.description = "Spot lease " + std::to_string(u.lease_id) + ": " +
                       std::to_string(u.gpus) + " x " + u.gpu + " at " +
                       PriceText(u.price_micros) + " USD/GPU-hour, hours from " +
                       HourText(u.first_hour_at) + " to " +
                       HourText(u.last_hour_at + kMicrosPerHour) + " UTC";
    line.quantity = u.hours;
    line.unit = "lease-hour";
    line.unit_net_micros = u.hours > 0 ? u.net_micros / u.hours : 0;
    line.net_micros = u.net_micros;
    line.tax_country = u.tax_country;
    line.rate_ppm = u.rate_ppm;
    line.reverse_charge = u.reverse_charge;
    line.tax_micros = u.tax_micros;
    line.gross_micros = u.net_micros + u.tax_micros;
    doc.lines.push_back(std::move(line));
  }
  GPUHUB_RETURN_IF_ERROR(Seal(doc));
  return doc;
}

}  // namespace gpuhub::billing
