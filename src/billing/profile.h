// Billing profiles: who a buyer is for tax purposes, and the evidence of where they are.
//
// Pure: validation and normalisation only (no clock, no I/O).
// - The billing country is required before the first purchase (the rate of a sale is the rate of
//   the buyer's country); the business name and VAT id are optional (a VAT id makes the buyer a
//   business: an EU business in another country than the seller's is reverse charged, tax.h).
// - The evidence recorded with each invoice: the billing country the buyer declared, the client
//   address of the request that bought (as the server saw it) and the country a CDN in front of
//   the server put in a header (docs/operations.md), when there is one. EU rules (Art. 24b of
//   Implementing Regulation 282/2011) ask for two non-contradictory pieces of such evidence.
#pragma once

#include <string>
#include <string_view>

#include "billing/tax.h"
#include "core/clock.h"
#include "core/status.h"

namespace gpuhub::billing {

struct BillingProfile {
  std::string country;        // ISO 3166-1 alpha-2; "" = not given yet (no purchase possible)
  std::string business_name;  // "" = a consumer
  std::string vat_id;         // normalised (NormalizeVatId); "" = none
  std::string address;        // free text, lines separated by '\n'; may be ""
  TimestampMicros updated_at = 0;

  bool complete() const { return !country.empty(); }
};

// What a buyer sends; every field is trimmed.
struct ProfileInput {
  std::string country;
  std::string business_name;
  std::string vat_id;
  std::string address;
};

// Validates and normalises a profile: the country upper-cased and checked against ISO 3166-1, the
// VAT id normalised for that country (its shape checked), names and addresses within their limits
// and free of control characters (the address may hold line breaks). invalid_argument naming the
// field: country, business_name, vat_id, address.
Result<BillingProfile> ValidateProfile(const ProfileInput& input);

// The buyer of a sale as tax.h decides it.
Buyer BuyerOf(const BillingProfile& profile);

struct CountryEvidence {
  std::string billing_country;  // as declared in the profile when recorded
  std::string ip_address;       // the client address of the request
  std::string ip_country;       // the CDN's country header; "" when none was sent
  TimestampMicros at = 0;       // when it was recorded (0: never)

  friend bool operator==(const CountryEvidence&, const CountryEvidence&) = default;
};

// False when the CDN's country is a real country code (not "XX"/"T1") that differs from the
// billing country: the two pieces of evidence contradict each other and need a look.
bool EvidenceAgrees(const CountryEvidence& evidence);

// The CDN header's value as kept: two ASCII letters or digits upper-cased ("de" -> "DE", and
// Cloudflare's "XX" unknown / "T1" Tor are kept as they are); anything else is dropped ("").
std::string CleanIpCountry(std::string_view header_value);

}  // namespace gpuhub::billing
