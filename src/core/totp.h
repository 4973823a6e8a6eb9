// Time-based one-time passwords (RFC 6238 over RFC 4226's HOTP, HMAC-SHA-1) and RFC 4648 base32,
// the encoding authenticator apps take the shared secret in.
//
// Pure: the time is an argument (callers pass their Clock's), nothing is random here and nothing
// is logged. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub {

inline constexpr std::int64_t kTotpStepSeconds = 30;
inline constexpr int kTotpDigits = 6;
// Steps either side of now whose code is still accepted (a phone's clock a little off).
inline constexpr std::int64_t kTotpWindowSteps = 1;

// RFC 4648 base32, upper case, without '=' padding (as otpauth:// URIs carry it).
std::string Base32Encode(std::string_view bytes);
// Accepts upper or lower case, and ignores spaces, '-' and trailing '=' (as people copy a
// secret); invalid_argument for any other character or a length no encoding produces.
Result<std::string> Base32Decode(std::string_view text);

// RFC 4226: the `digits`-digit (6..8) code of `key` for `counter`, zero-padded.
std::string HotpCode(std::string_view key, std::uint64_t counter, int digits = kTotpDigits);
// The RFC 6238 time step of `unix_seconds` (T0 = 0): floor(t / step).
std::int64_t TotpStep(std::int64_t unix_seconds, std::int64_t step_seconds = kTotpStepSeconds);
// The code of `key` at `unix_seconds`.
std::string TotpCode(std::string_view key, std::int64_t unix_seconds, int digits = kTotpDigits);

// The step whose code `code` is, among now-kTotpWindowSteps .. now+kTotpWindowSteps, skipping
// steps at or before `last_used_step` (a code is good once: replay refused); nullopt when none.
// `code` must be exactly kTotpDigits digits. Compares in constant time per step.
std::optional<std::int64_t> MatchTotp(std::string_view key, std::string_view code,
                                      std::int64_t unix_seconds, std::int64_t last_used_step);

// otpauth://totp/ISSUER:ACCOUNT?secret=...&issuer=ISSUER&algorithm=SHA1&digits=6&period=30
// (Google Authenticator's Key Uri Format; issuer and account percent-encoded).
std::string OtpauthUri(std::string_view issuer, std::string_view account,
                       std::string_view secret_base32);

}  // namespace gpuhub
