#include "rentals/format.h"

#include <vector>

namespace gpuhub::rentals {

std::string UsdText(std::int64_t micros) {
  bool cents = micros % 10'000 == 0;
  std::string digits = FormatMicros(micros < 0 ? -micros : micros, cents ? 2 : 6);
  std::size_t point = digits.find('.');
  std::string whole = digits.substr(0, point);
  std::string grouped;
  for (std::size_t i = 0; i < whole.size(); ++i) {
    if (i > 0 && (whole.size() - i) % 3 == 0) grouped += ',';
    grouped += whole[i];
  }
  return (micros < 0 ? "-" : "") + grouped + digits.substr(point);
}

std::string AmountText(std::int64_t micros, Currency currency) {
  return UsdText(micros) + " " + std::string(CurrencyCode(currency));
}

std::string RentalName(const Rental& r) {
  return "rental " + std::to_string(r.id) + " (" + std::to_string(r.count) + "x " + r.gpu + ", " +
         r.region + ")";
}

std::string CardList(std::uint32_t mask) {
  std::vector<int> cards;
  for (int i = 0; i < 32; ++i) {
    if (mask & (1u << i)) cards.push_back(i);
  }
  if (cards.empty()) return "none";
  bool contiguous = cards.back() - cards.front() + 1 == static_cast<int>(cards.size());
  if (contiguous && cards.size() > 1) {
    return std::to_string(cards.front()) + "-" + std::to_string(cards.back());
  }
  std::string out;
  for (int c : cards) out += (out.empty() ? "" : ", ") + std::to_string(c);
  return out;
}

std::string CountList(const std::vector<int>& counts) {
  std::string out;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (i > 0) out += i + 1 == counts.size() ? " or " : ", ";
    out += std::to_string(counts[i]);
  }
  return out;
}

}  // namespace gpuhub::rentals
