// Countries as billing knows them: ISO 3166-1 alpha-2 codes, EU membership and the VAT id shapes
// of the countries whose rates ship with gpuhub.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace gpuhub::billing {

// True for an assigned ISO 3166-1 alpha-2 code (upper case).
bool IsCountryCode(std::string_view code);
// Every assigned code with its English name, sorted by code (the billing form's choices).
std::vector<std::pair<std::string, std::string>> AllCountries();
// "DE" -> "Germany"; the code itself when no name is known.
std::string CountryName(std::string_view code);
// The 27 member states of the European Union.
bool IsEuCountry(std::string_view code);
// The prefix of EU VAT numbers: the country code, except Greece ("EL").
std::string_view VatPrefix(std::string_view country);

// Normalises a VAT id (spaces, dots and dashes removed, upper case, the country prefix added when
// missing) and checks its shape for `country`: the EU's VIES formats, GB (9 or 12 digits, GD/HA +
// 3), CH (CHE + 9 digits, optional MWST/TVA/IVA), NO (9 digits + optional MVA), UA (10 or 12
// digits); elsewhere 4..20 letters and digits. invalid_argument saying the expected shape. Shape
// only: whether the number is registered is not checked (no network call).
Result<std::string> NormalizeVatId(std::string_view country, std::string_view vat_id);

}  // namespace gpuhub::billing
