// Time, injected. Domain code (ledger, market, rentals) never reads the wall clock: it is handed a
// Clock, so a test or `--clock manual` can replay a week in milliseconds.
//
// Timestamps are int64 microseconds since the Unix epoch, UTC.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub {

using TimestampMicros = std::int64_t;
inline constexpr std::int64_t kMicrosPerSecond = 1'000'000;
inline constexpr std::int64_t kMicrosPerHour = 3600 * kMicrosPerSecond;
inline constexpr std::int64_t kMicrosPerDay = 24 * kMicrosPerHour;

class Clock {
 public:
  virtual ~Clock() = default;
  // Thread-safe. Never goes backwards for a ManualClock; RealClock follows the system clock.
  virtual TimestampMicros NowMicros() const = 0;
};

class RealClock final : public Clock {
 public:
  TimestampMicros NowMicros() const override;
};

// A clock that moves only when told. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimestampMicros start) : now_(start) {}
  TimestampMicros NowMicros() const override { return now_.load(std::memory_order_acquire); }
  // delta must be >= 0: time never runs backwards.
  void Advance(std::int64_t delta_micros);
  void Set(TimestampMicros now);  // must be >= the current time

 private:
  std::atomic<TimestampMicros> now_;
};

// RFC 3339 / ISO 8601 in UTC with a 'Z': "2026-11-30T12:00:00Z" (fractional seconds printed only
// when non-zero, as ".123456").
std::string FormatTimestamp(TimestampMicros t);
// Accepts "YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM|-HH:MM)". Anything else is invalid_argument.
Result<TimestampMicros> ParseTimestamp(std::string_view text);

// The UTC calendar date of a timestamp (proleptic Gregorian).
struct CivilDate {
  std::int64_t year = 1970;
  unsigned month = 1;  // 1..12
  unsigned day = 1;    // 1..31
};
CivilDate CivilDateOf(TimestampMicros t);
// Midnight UTC at the start of a date; month 13 is January of the next year (so that
// TimestampOfDate(y, m + 1, 1) is the end of month m).
TimestampMicros TimestampOfDate(std::int64_t year, unsigned month, unsigned day);

}  // namespace gpuhub
