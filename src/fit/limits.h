// Named limits of fit requests (CLI flags and the HTTP API's JSON bodies).
#pragma once

#include <cstddef>

namespace gpuhub::fit {

inline constexpr int kDefaultTop = 5;  // configurations listed: the best and 4 runners-up
inline constexpr int kMaxTop = 100;
inline constexpr std::size_t kMaxRequestJsonBytes = 1024 * 1024;  // a pasted config.json fits
inline constexpr int kMaxRequestJsonDepth = 32;
inline constexpr std::size_t kMaxModelIdBytes = 200;  // "org/name" of a bundled model

// Plans (gpuhub plan, POST /v1/plan).
inline constexpr double kMaxPlanTokens = 1e16;  // tokens per epoch x epochs (Llama 3: 1.5e13)
inline constexpr std::int64_t kMaxPlanEpochs = 1'000;
inline constexpr std::int64_t kMaxTokensPerDay = 1'000'000'000'000'000;  // 1e15 output tokens
inline constexpr std::int64_t kMaxPlanDays = 3'650;                      // ten years of serving
inline constexpr std::int64_t kMaxPlanHours = 87'600;  // a configuration slower is not listed
inline constexpr std::int64_t kMaxServingReplicas = 10'000;

// Multi-node quote requests (fit/quote.h): the job's fields as stored (the engine refuses more,
// engine/limits.h kMaxQuoteJobBytes).
inline constexpr std::size_t kMaxQuoteJobJsonBytes = 4 * 1024;

}  // namespace gpuhub::fit
