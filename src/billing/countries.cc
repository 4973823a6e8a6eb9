#include "billing/countries.h"

#include <algorithm>
#include <cstring>
#include <regex>

#include "billing/limits.h"

namespace gpuhub::billing {
namespace {

struct Country {
  const char* code;
  const char* name;
};

// ISO 3166-1 alpha-2 (Debian's iso-codes, /usr/share/iso-codes/json/iso_3166-1.json), sorted.
constexpr Country kCountries[] = {
    {"AD", "Andorra"},
    {"AE", "United Arab Emirates"},
    {"AF", "Afghanistan"},
    {"AG", "Antigua and Barbuda"},
    {"AI", "Anguilla"},
    {"AL", "Albania"},
    {"AM", "Armenia"},
    {"AO", "Angola"},
    {"AQ", "Antarctica"},
    {"AR", "Argentina"},
    {"AS", "American Samoa"},
    {"AT", "Austria"},
    {"AU", "Australia"},
    {"AW", "Aruba"},
    {"AX", "Åland Islands"},
    {"AZ", "Azerbaijan"},
    {"BA", "Bosnia and Herzegovina"},
    {"BB", "Barbados"},
    {"BD", "Bangladesh"},
    {"BE", "Belgium"},
    {"BF", "Burkina Faso"},
    {"BG", "Bulgaria"},
    {"BH", "Bahrain"},
    {"BI", "Burundi"},
    {"BJ", "Benin"},
    {"BL", "Saint Barthélemy"},
    {"BM", "Bermuda"},
    {"BN", "Brunei Darussalam"},
    {"BO", "Bolivia"},
    {"BQ", "Bonaire, Sint Eustatius and Saba"},
    {"BR", "Brazil"},
    {"BS", "Bahamas"},
    {"BT", "Bhutan"},
    {"BV", "Bouvet Island"},
    {"BW", "Botswana"},
    {"BY", "Belarus"},
    {"BZ", "Belize"},
    {"CA", "Canada"},
    {"CC", "Cocos (Keeling) Islands"},
    {"CD", "Congo, The Democratic Republic of the"},
    {"CF", "Central African Republic"},
    {"CG", "Congo"},
    {"CH", "Switzerland"},
    {"CI", "Côte d'Ivoire"},
    {"CK", "Cook Islands"},
    {"CL", "Chile"},
    {"CM", "Cameroon"},
    {"CN", "China"},
    {"CO", "Colombia"},
    {"CR", "Costa Rica"},
    {"CU", "Cuba"},
    {"CV", "Cabo Verde"},
    {"CW", "Curaçao"},
    {"CX", "Christmas Island"},
    {"CY", "Cyprus"},
    {"CZ", "Czechia"},
    {"DE", "Germany"},
    {"DJ", "Djibouti"},
    {"DK", "Denmark"},
    {"DM", "Dominica"},
    {"DO", "Dominican Republic"},
    {"DZ", "Algeria"},
    {"EC", "Ecuador"},
    {"EE", "Estonia"},
    {"EG", "Egypt"},
    {"EH", "Western Sahara"},
    {"ER", "Eritrea"},
    {"ES", "Spain"},
    {"ET", "Ethiopia"},
    {"FI", "Finland"},
    {"FJ", "Fiji"},
    {"FK", "Falkland Islands (Malvinas)"},
    {"FM", "Micronesia, Federated States of"},
    {"FO", "Faroe Islands"},
    {"FR", "France"},
    {"GA", "Gabon"},
    {"GB", "United Kingdom"},
    {"GD", "Grenada"},
    {"GE", "Georgia"},
    {"GF", "French Guiana"},
    {"GG", "Guernsey"},
    {"GH", "Ghana"},
    {"GI", "Gibraltar"},
    {"GL", "Greenland"},
    {"GM", "Gambia"},
    {"GN", "Guinea"},
    {"GP", "Guadeloupe"},
    {"GQ", "Equatorial Guinea"},
    {"GR", "Greece"},
    {"GS", "South Georgia and the South Sandwich Islands"},
    {"GT", "Guatemala"},
    {"GU", "Guam"},
    {"GW", "Guinea-Bissau"},
    {"GY", "Guyana"},
    {"HK", "Hong Kong"},
    {"HM", "Heard Island and McDonald Islands"},
    {"HN", "Honduras"},
    {"HR", "Croatia"},
    {"HT", "Haiti"},
    {"HU", "Hungary"},
    {"ID", "Indonesia"},
    {"IE", "Ireland"},
    {"IL", "Israel"},
    {"IM", "Isle of Man"},
    {"IN", "India"},
    {"IO", "British Indian Ocean Territory"},
    {"IQ", "Iraq"},
    {"IR", "Iran"},
    {"IS", "Iceland"},
    {"IT", "Italy"},
    {"JE", "Jersey"},
    {"JM", "Jamaica"},
    {"JO", "Jordan"},
    {"JP", "Japan"},
    {"KE", "Kenya"},
    {"KG", "Kyrgyzstan"},
    {"KH", "Cambodia"},
    {"KI", "Kiribati"},
    {"KM", "Comoros"},
    {"KN", "Saint Kitts and Nevis"},
    {"KP", "North Korea"},
    {"KR", "South Korea"},
    {"KW", "Kuwait"},
    {"KY", "Cayman Islands"},
    {"KZ", "Kazakhstan"},
    {"LA", "Laos"},
    {"LB", "Lebanon"},
    {"LC", "Saint Lucia"},
    {"LI", "Liechtenstein"},
    {"LK", "Sri Lanka"},
    {"LR", "Liberia"},
    {"LS", "Lesotho"},
    {"LT", "Lithuania"},
    {"LU", "Luxembourg"},
    {"LV", "Latvia"},
    {"LY", "Libya"},
    {"MA", "Morocco"},
    {"MC", "Monaco"},
    {"MD", "Moldova"},
    {"ME", "Montenegro"},
    {"MF", "Saint Martin (French part)"},
    {"MG", "Madagascar"},
    {"MH", "Marshall Islands"},
    {"MK", "North Macedonia"},
    {"ML", "Mali"},
    {"MM", "Myanmar"},
    {"MN", "Mongolia"},
    {"MO", "Macao"},
    {"MP", "Northern Mariana Islands"},
    {"MQ", "Martinique"},
    {"MR", "Mauritania"},
    {"MS", "Montserrat"},
    {"MT", "Malta"},
    {"MU", "Mauritius"},
    {"MV", "Maldives"},
    {"MW", "Malawi"},
    {"MX", "Mexico"},
    {"MY", "Malaysia"},
    {"MZ", "Mozambique"},
    {"NA", "Namibia"},
    {"NC", "New Caledonia"},
    {"NE", "Niger"},
    {"NF", "Norfolk Island"},
    {"NG", "Nigeria"},
    {"NI", "Nicaragua"},
    {"NL", "Netherlands"},
    {"NO", "Norway"},
    {"NP", "Nepal"},
    {"NR", "Nauru"},
    {"NU", "Niue"},
    {"NZ", "New Zealand"},
    {"OM", "Oman"},
    {"PA", "Panama"},
    {"PE", "Peru"},
    {"PF", "French Polynesia"},
    {"PG", "Papua New Guinea"},
    {"PH", "Philippines"},
    {"PK", "Pakistan"},
    {"PL", "Poland"},
    {"PM", "Saint Pierre and Miquelon"},
    {"PN", "Pitcairn"},
    {"PR", "Puerto Rico"},
    {"PS", "Palestine, State of"},
    {"PT", "Portugal"},
    {"PW", "Palau"},
    {"PY", "Paraguay"},
    {"QA", "Qatar"},
    {"RE", "Réunion"},
    {"RO", "Romania"},
    {"RS", "Serbia"},
    {"RU", "Russian Federation"},
    {"RW", "Rwanda"},
    {"SA", "Saudi Arabia"},
    {"SB", "Solomon Islands"},
    {"SC", "Seychelles"},
    {"SD", "Sudan"},
    {"SE", "Sweden"},
    {"SG", "Singapore"},
    {"SH", "Saint Helena, Ascension and Tristan da Cunha"},
    {"SI", "Slovenia"},
    {"SJ", "Svalbard and Jan Mayen"},
    {"SK", "Slovakia"},
    {"SL", "Sierra Leone"},
    {"SM", "San Marino"},
    {"SN", "Senegal"},
    {"SO", "Somalia"},
    {"SR", "Suriname"},
    {"SS", "South Sudan"},
    {"ST", "Sao Tome and Principe"},
    {"SV", "El Salvador"},
    {"SX", "Sint Maarten (Dutch part)"},
    {"SY", "Syria"},
    {"SZ", "Eswatini"},
    {"TC", "Turks and Caicos Islands"},
    {"TD", "Chad"},
    {"TF", "French Southern Territories"},
    {"TG", "Togo"},
    {"TH", "Thailand"},
    {"TJ", "Tajikistan"},
    {"TK", "Tokelau"},
    {"TL", "Timor-Leste"},
    {"TM", "Turkmenistan"},
    {"TN", "Tunisia"},
    {"TO", "Tonga"},
    {"TR", "Türkiye"},
    {"TT", "Trinidad and Tobago"},
    {"TV", "Tuvalu"},
    {"TW", "Taiwan"},
    {"TZ", "Tanzania"},
    {"UA", "Ukraine"},
    {"UG", "Uganda"},
    {"UM", "United States Minor Outlying Islands"},
    {"US", "United States"},
    {"UY", "Uruguay"},
    {"UZ", "Uzbekistan"},
    {"VA", "Holy See (Vatican City State)"},
    {"VC", "Saint Vincent and the Grenadines"},
    {"VE", "Venezuela"},
    {"VG", "Virgin Islands, British"},
    {"VI", "Virgin Islands, U.S."},
    {"VN", "Vietnam"},
    {"VU", "Vanuatu"},
    {"WF", "Wallis and Futuna"},
    {"WS", "Samoa"},
    {"YE", "Yemen"},
    {"YT", "Mayotte"},
    {"ZA", "South Africa"},
    {"ZM", "Zambia"},
    {"ZW", "Zimbabwe"},};

constexpr const char* kEu[] = {"AT", "BE", "BG", "CY", "CZ", "DE", "DK", "EE", "ES",
                               "FI", "FR", "GR", "HR", "HU", "IE", "IT", "LT", "LU",
                               "LV", "MT", "NL", "PL", "PT", "RO", "SE", "SI", "SK"};

const Country* Find(std::string_view code) {
  auto it = std::lower_bound(std::begin(kCountries), std::end(kCountries), code,
                             [](const Country& c, std::string_view k) { return c.code < k; });
  if (it == std::end(kCountries) || it->code != code) return nullptr;
  return it;
}

// The VIES shapes (after the prefix) and the other shipped countries' (with their prefix).
const char* Shape(std::string_view country) {
  static const std::pair<const char*, const char*> kShapes[] = {
      {"AT", "U[0-9]{8}"},
      {"BE", "[01][0-9]{9}"},
      {"BG", "[0-9]{9,10}"},
      {"CY", "[0-9]{8}[A-Z]"},
      {"CZ", "[0-9]{8,10}"},
      {"DE", "[0-9]{9}"},
      {"DK", "[0-9]{8}"},
      {"EE", "[0-9]{9}"},
      {"GR", "[0-9]{9}"},
      {"ES", "[A-Z0-9][0-9]{7}[A-Z0-9]"},
      {"FI", "[0-9]{8}"},
      {"FR", "[A-HJ-NP-Z0-9]{2}[0-9]{9}"},
      {"HR", "[0-9]{11}"},
      {"HU", "[0-9]{8}"},
      {"IE", "[0-9][0-9A-Z+*][0-9]{5}[A-W][A-I]?"},
      {"IT", "[0-9]{11}"},
      {"LT", "[0-9]{9}|[0-9]{12}"},
      {"LU", "[0-9]{8}"},
      {"LV", "[0-9]{11}"},
      {"MT", "[0-9]{8}"},
      {"NL", "[0-9]{9}B[0-9]{2}"},
      {"PL", "[0-9]{10}"},
      {"PT", "[0-9]{9}"},
      {"RO", "[0-9]{2,10}"},
      {"SE", "[0-9]{12}"},
      {"SI", "[0-9]{8}"},
      {"SK", "[0-9]{10}"},
      {"GB", "[0-9]{9}|[0-9]{12}|GD[0-9]{3}|HA[0-9]{3}"},
      {"CH", "E[0-9]{9}(MWST|TVA|IVA)?"},
      {"NO", "[0-9]{9}(MVA)?"},
      {"UA", "[0-9]{10}|[0-9]{12}"},
  };
  for (const auto& [c, shape] : kShapes) {
    if (country == c) return shape;
  }
  return nullptr;
}

const char* Example(std::string_view country) {
  static const std::pair<const char*, const char*> kExamples[] = {
      {"DE", "DE123456789"}, {"FR", "FR12345678901"}, {"NL", "NL123456789B01"},
      {"AT", "ATU12345678"}, {"GR", "EL123456789"},   {"GB", "GB123456789"},
      {"CH", "CHE123456789 MWST"}, {"NO", "NO123456789MVA"}, {"UA", "UA123456789012"}};
  for (const auto& [c, e] : kExamples) {
    if (country == c) return e;
  }
  return nullptr;
}

}  // namespace

bool IsCountryCode(std::string_view code) { return Find(code) != nullptr; }

std::vector<std::pair<std::string, std::string>> AllCountries() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Country& c : kCountries) out.emplace_back(c.code, c.name);
  return out;
}

std::string CountryName(std::string_view code) {
  const Country* c = Find(code);
  return c ? c->name : std::string(code);
}

bool IsEuCountry(std::string_view code) {
  for (const char* c : kEu) {
    if (code == c) return true;
  }
  return false;
}

std::string_view VatPrefix(std::string_view country) { return country == "GR" ? "EL" : country; }

Result<std::string> NormalizeVatId(std::string_view country, std::string_view vat_id) {
  std::string v;
  for (char c : vat_id) {
    if (c == ' ' || c == '.' || c == '-') continue;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '*') {
      return Status::InvalidArgument("vat_id may hold only letters, digits, spaces, dots and dashes")
          .WithField("vat_id");
    }
    v += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (v.empty()) return std::string();
  if (v.size() > kMaxVatIdBytes + 4) {
    return Status::InvalidArgument("vat_id is too long").WithField("vat_id");
  }
  std::string prefix(VatPrefix(country));
  if (country == "CH") prefix = "CH";
  std::string body = v.rfind(prefix, 0) == 0 ? v.substr(prefix.size()) : v;
  // A prefix of another country is a VAT id of another country: say so.
  if (v.rfind(prefix, 0) != 0 && v.size() >= 2 && std::isalpha(static_cast<unsigned char>(v[0])) &&
      std::isalpha(static_cast<unsigned char>(v[1])) && IsCountryCode(v.substr(0, 2)) &&
      Shape(country) != nullptr && !(country == "AT" && v[0] == 'U') &&
      !(country == "ES" || country == "FR" || country == "IE" || country == "CY")) {
    return Status::InvalidArgument("vat_id '" + v.substr(0, 24) + "' is not a VAT id of " +
                                   CountryName(country) + " (it must start with " + prefix + ")")
        .WithField("vat_id");
  }
  const char* shape = Shape(country);
  bool ok = shape ? std::regex_match(body, std::regex(std::string("^(") + shape + ")$"))
                  : body.size() >= 4 && body.size() <= kMaxVatIdBytes;
  if (!ok) {
    const char* example = Example(country);
    return Status::InvalidArgument(
               "vat_id '" + v.substr(0, 24) + "' does not have the shape of a VAT id of " +
               CountryName(country) +
               (example ? std::string(" (such as ") + example + ")" : std::string(" (4 to 20 letters and digits)")))
        .WithField("vat_id");
  }
  if (country == "UA" && v.rfind("UA", 0) != 0) return "UA" + body;
  return prefix + body;
}

}  // namespace gpuhub::billing
