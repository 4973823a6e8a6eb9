// Named limits of the sizing engine. Inputs outside them are refused with invalid_argument
// (they are typos or attacks, not workloads).
#pragma once

#include <cstdint>

namespace gpuhub::sizing {

inline constexpr std::int64_t kMaxContextTokens = 10'000'000;   // 10M tokens
inline constexpr std::int64_t kMaxSequenceTokens = 10'000'000;
inline constexpr std::int64_t kMaxBatch = 65'536;
inline constexpr int kMaxLoraRank = 65'536;
inline constexpr int kMaxGpus = 1'024;
inline constexpr double kMaxParams = 1e14;                      // 100T parameters
inline constexpr int kMaxLayers = 100'000;
inline constexpr int kMaxExperts = 100'000;
inline constexpr std::int64_t kMaxDimension = 10'000'000;       // hidden, vocab, intermediate

}  // namespace gpuhub::sizing
