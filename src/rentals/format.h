// Small formatting helpers for the messages and history of term rentals (internal to
// src/rentals). Amounts print with two decimals when that is exact, else all six.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/money.h"
#include "rentals/types.h"

namespace gpuhub::rentals {

// 12'168'000'000 -> "12,168.00"; 1'234'567 -> "1.234567".
std::string UsdText(std::int64_t micros);
// "12,168.00 USD", "11,266.67 EUR".
std::string AmountText(std::int64_t micros, Currency currency);
// "rental 12 (8x H100 SXM, DFW-1)".
std::string RentalName(const Rental& rental);
// Card indices of a mask: 0b1111'0000 -> "4-7"; 0b101 -> "0, 2".
std::string CardList(std::uint32_t mask);
// Card counts an order may name: {1, 2, 4, 8} -> "1, 2, 4 or 8".
std::string CountList(const std::vector<int>& counts);

}  // namespace gpuhub::rentals
