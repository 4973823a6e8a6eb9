// Helpers shared by the exchange's source files (internal to src/market; the contract is
// exchange.h).
#pragma once

#include <cstdint>

#include "ledger/ledger.h"
#include "market/book.h"
#include "market/limits.h"
#include "market/types.h"

namespace gpuhub::market {

// The ledger names the exchange's files use unqualified (this header is for those files only).
using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferKind;
using ledger::TransferRequest;

inline Ticks ToTicks(std::int64_t price_micros) { return price_micros / kPriceTickMicros; }

// Whether a wallet in `currency` can pay a USD price: USD itself, or a rate to convert with.
inline bool HasUsdRate(const ledger::Ledger& ledger, Currency currency) {
  return currency == Currency::kUsd || ledger.Fx().Find(currency, Currency::kUsd).has_value();
}

}  // namespace gpuhub::market
