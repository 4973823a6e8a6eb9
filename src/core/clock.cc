#include "core/clock.h"

#include <chrono>
#include <cstdio>

namespace gpuhub {

TimestampMicros RealClock::NowMicros() const {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
}

void ManualClock::Advance(std::int64_t delta_micros) {
  GPUHUB_CHECK_MSG(delta_micros >= 0, "a clock never runs backwards");
  now_.fetch_add(delta_micros, std::memory_order_acq_rel);
}

void ManualClock::Set(TimestampMicros now) {
  GPUHUB_CHECK_MSG(now >= NowMicros(), "a clock never runs backwards");
  now_.store(now, std::memory_order_release);
}

namespace {

// Howard Hinnant's days_from_civil / civil_from_days: exact proleptic Gregorian calendar.
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

void CivilFromDays(std::int64_t z, std::int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<std::int64_t>(yoe) + era * 400 + (*m <= 2);
}

bool ReadDigits(std::string_view s, std::size_t pos, std::size_t count, int* out) {
  if (pos + count > s.size()) return false;
  int v = 0;
  for (std::size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::string FormatTimestamp(TimestampMicros t) {
  std::int64_t days = t / kMicrosPerDay;
  std::int64_t rem = t % kMicrosPerDay;
  if (rem < 0) {
    rem += kMicrosPerDay;
    --days;
  }
  std::int64_t y;
  unsigned m, d;
  CivilFromDays(days, &y, &m, &d);
  std::int64_t secs = rem / kMicrosPerSecond;
  std::int64_t frac = rem % kMicrosPerSecond;
  char buf[64];
  if (frac == 0) {
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lldZ", static_cast<long long>(y),
                  m, d, static_cast<long long>(secs / 3600), static_cast<long long>(secs / 60 % 60),
                  static_cast<long long>(secs % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%06lldZ",
                  static_cast<long long>(y), m, d, static_cast<long long>(secs / 3600),
                  static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60),
                  static_cast<long long>(frac));
  }
  return buf;
}

Result<TimestampMicros> ParseTimestamp(std::string_view s) {
  auto bad = [&] {
    return Status::InvalidArgument("time '" + std::string(s.substr(0, 40)) +
                                   "' is not RFC 3339 like 2026-12-01T00:00:00Z");
  };
  int year, month, day, hour, minute, second;
  if (s.size() < 20 || !ReadDigits(s, 0, 4, &year) || s[4] != '-' || !ReadDigits(s, 5, 2, &month) ||
      s[7] != '-' || !ReadDigits(s, 8, 2, &day) || (s[10] != 'T' && s[10] != 't') ||
      !ReadDigits(s, 11, 2, &hour) || s[13] != ':' || !ReadDigits(s, 14, 2, &minute) ||
      s[16] != ':' || !ReadDigits(s, 17, 2, &second)) {
    return bad();
  }
  if (month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || second > 59) return bad();
  static constexpr int kDaysInMonth[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (day > kDaysInMonth[month - 1] || (month == 2 && day == 29 && !leap)) return bad();
  std::size_t pos = 19;
  std::int64_t frac_micros = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      if (digits < 6) frac_micros = frac_micros * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0 || digits > 9) return bad();
    for (int i = digits; i < 6; ++i) frac_micros *= 10;
  }
  std::int64_t offset_seconds = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int oh, om;
    if (!ReadDigits(s, pos + 1, 2, &oh) || pos + 3 >= s.size() || s[pos + 3] != ':' ||
        !ReadDigits(s, pos + 4, 2, &om) || oh > 23 || om > 59) {
      return bad();
    }
    offset_seconds = (oh * 3600 + om * 60) * (s[pos] == '+' ? 1 : -1);
    pos += 6;
  } else {
    return bad();
  }
  if (pos != s.size()) return bad();
  std::int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  std::int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_seconds;
  return seconds * kMicrosPerSecond + frac_micros;
}

CivilDate CivilDateOf(TimestampMicros t) {
  std::int64_t days = t / kMicrosPerDay;
  if (t % kMicrosPerDay < 0) --days;
  CivilDate date;
  CivilFromDays(days, &date.year, &date.month, &date.day);
  return date;
}

TimestampMicros TimestampOfDate(std::int64_t year, unsigned month, unsigned day) {
  if (month > 12) {
    year += (month - 1) / 12;
    month = (month - 1) % 12 + 1;
  }
  return DaysFromCivil(year, month, day) * kMicrosPerDay;
}

}  // namespace gpuhub
