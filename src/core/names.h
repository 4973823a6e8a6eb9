// Names shared by the domains: the stable names of enum values (one table per enum, stored and
// shown in JSON), the key under which card names are compared, and region codes.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub {

// The name of `value` in `names` (index = the enum's value); "?" past the table.
template <typename E, std::size_t N>
std::string_view EnumName(const std::array<std::string_view, N>& names, E value) {
  auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : std::string_view("?");
}

// The value named `name` in `names`; invalid_argument listing the names otherwise ("`what` must
// be one of a, b, got 'x'").
template <typename E, std::size_t N>
Result<E> ParseEnumName(const std::array<std::string_view, N>& names, std::string_view name,
                        std::string_view what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  std::string list;
  for (auto n : names) {
    if (n.empty()) continue;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  return Status::InvalidArgument(std::string(what) + " must be one of " + list + ", got '" +
                                 std::string(name.substr(0, 32)) + "'");
}

// The key under which card names are compared: lower case without spaces, dashes, underscores or
// dots ("H100 SXM", "h100-sxm" and "h100sxm" are one card).
std::string NameKey(std::string_view name);

// invalid_argument unless 1..max_bytes of [A-Z0-9-] starting with a letter ("IAD-1"); lower case
// is folded: returns the canonical code.
Result<std::string> CanonicalRegionCode(std::string_view code, std::size_t max_bytes);

}  // namespace gpuhub
