// Limits shared by every component. Each component keeps its own limits in its own limits.h;
// this header holds only the ones that cross components.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuhub {

// Longest identifier-like string accepted anywhere (usernames, GPU names, region codes, keys).
inline constexpr std::size_t kMaxIdentifierBytes = 128;
// Largest file the product reads whole into memory (config.json, catalog.toml, checkpoint headers).
inline constexpr std::size_t kMaxReadFileBytes = 64 * 1024 * 1024;

}  // namespace gpuhub
