// Named limits of the catalog loader: a file outside them is refused (it is a typo, not a fleet).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuhub::catalog {

inline constexpr std::size_t kMaxCatalogBytes = 1024 * 1024;
inline constexpr std::size_t kMaxTermGpus = 256;
inline constexpr std::size_t kMaxSpotGpus = 256;
inline constexpr std::size_t kMaxRegions = 64;
inline constexpr int kMaxCardsPerSet = 64;     // largest card count a rental may have
inline constexpr double kMaxVramGb = 100'000;  // per card
inline constexpr double kMaxBandwidthGbPerS = 1e6;
inline constexpr double kMaxTflops = 1e6;
inline constexpr int kMaxFreeNow = 10'000'000;
inline constexpr int kMaxPowerW = 100'000;
inline constexpr std::int64_t kHoursPerMonth = 720;  // spec §5: hourly = monthly / 720
inline constexpr std::int64_t kPpm = 1'000'000;

}  // namespace gpuhub::catalog
