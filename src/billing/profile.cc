#include "billing/profile.h"

#include <cctype>

#include "billing/countries.h"
#include "billing/limits.h"
#include "core/strings.h"

namespace gpuhub::billing {
namespace {

// Printable text: no ASCII control characters (UTF-8 beyond ASCII is allowed), line breaks only
// where `lines` says so.
bool PrintableText(std::string_view text, bool lines) {
  for (unsigned char c : text) {
    if (c == '\n' && lines) continue;
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

Result<BillingProfile> ValidateProfile(const ProfileInput& input) {
  BillingProfile p;
  std::string country(Trim(input.country));
  for (char& c : country) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (country.empty()) {
    return Status::InvalidArgument(
               "billing_country is required: the country of the buyer decides the tax of every "
               "purchase (an ISO 3166-1 code such as DE, GB or US)")
        .WithField("billing_country");
  }
  if (!IsCountryCode(country)) {
    return Status::InvalidArgument("billing_country must be an ISO 3166-1 alpha-2 code such as "
                                   "DE, GB or US (got '" +
                                   country.substr(0, 8) + "')")
        .WithField("billing_country");
  }
  p.country = country;

  std::string name(Trim(input.business_name));
  if (name.size() > kMaxBusinessNameBytes || !PrintableText(name, false)) {
    return Status::InvalidArgument("business_name must be at most " +
                                   std::to_string(kMaxBusinessNameBytes) +
                                   " bytes of printable text on one line")
        .WithField("business_name");
  }
  p.business_name = name;

  std::string address(Trim(input.address));
  std::size_t lines = 1;
  for (char c : address) lines += c == '\n' ? 1 : 0;
  if (address.size() > kMaxAddressBytes || lines > kMaxAddressLines ||
      !PrintableText(address, true)) {
    return Status::InvalidArgument("address must be at most " + std::to_string(kMaxAddressLines) +
                                   " lines and " + std::to_string(kMaxAddressBytes) +
                                   " bytes of printable text")
        .WithField("address");
  }
  p.address = address;

  std::string_view vat = Trim(input.vat_id);
  if (!vat.empty()) {
    GPUHUB_ASSIGN_OR_RETURN(p.vat_id, NormalizeVatId(country, vat));
    if (p.business_name.empty()) {
      return Status::InvalidArgument(
                 "business_name is required with a VAT id: a VAT id belongs to a business, and "
                 "its name goes on the invoice")
          .WithField("business_name");
    }
  }
  return p;
}

Buyer BuyerOf(const BillingProfile& profile) {
  return Buyer{profile.country, profile.business_name, profile.vat_id};
}

bool EvidenceAgrees(const CountryEvidence& e) {
  return e.ip_country.empty() || !IsCountryCode(e.ip_country) || e.billing_country.empty() ||
         e.ip_country == e.billing_country;
}

std::string CleanIpCountry(std::string_view header_value) {
  std::string_view v = Trim(header_value);
  if (v.size() != 2) return "";
  std::string out;
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c))) return "";
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace gpuhub::billing
