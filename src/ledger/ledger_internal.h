// Helpers shared by the ledger's source files (internal to src/ledger; the contract is ledger.h).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "ledger/types.h"

namespace gpuhub::ledger {

// Sums of many int64 amounts are taken in 128 bits, so an overflow is seen rather than wrapped.
using Wide = __int128;
constexpr Wide kInt64Max = std::numeric_limits<std::int64_t>::max();

inline std::string Quoted(std::string_view text) {
  constexpr std::size_t kShown = 48;
  std::string out = "'";
  for (char c : text.substr(0, kShown)) out += (c >= 0x20 && c < 0x7F) ? c : '?';
  if (text.size() > kShown) out += "...";
  out += "'";
  return out;
}

// "transfer 'id': " in front of a message, built only when a message is (failures are rare).
struct Prefix {
  const std::string& id;
  friend std::string operator+(const Prefix& p, std::string_view rest) {
    std::string out = "transfer " + Quoted(p.id) + ": ";
    out += rest;
    return out;
  }
};

inline bool IsResolution(TransferKind kind) {
  return kind == TransferKind::kPostPending || kind == TransferKind::kVoidPending;
}

inline TransferState InitialState(TransferKind kind) {
  switch (kind) {
    case TransferKind::kPending:
      return TransferState::kPending;
    case TransferKind::kVoidPending:
      return TransferState::kVoided;
    case TransferKind::kSinglePhase:
    case TransferKind::kPostPending:
      return TransferState::kPosted;
  }
  return TransferState::kPosted;
}

}  // namespace gpuhub::ledger
