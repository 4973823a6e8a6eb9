// Named limits of fit requests (CLI flags and the HTTP API's JSON bodies).
#pragma once

#include <cstddef>

namespace gpuhub::fit {

inline constexpr int kDefaultTop = 5;  // configurations listed: the best and 4 runners-up
inline constexpr int kMaxTop = 100;
inline constexpr std::size_t kMaxRequestJsonBytes = 1024 * 1024;  // a pasted config.json fits
inline constexpr int kMaxRequestJsonDepth = 32;
inline constexpr std::size_t kMaxModelIdBytes = 200;  // "org/name" of a bundled model

}  // namespace gpuhub::fit
