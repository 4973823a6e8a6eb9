// SHA-1 (FIPS 180-4) and HMAC-SHA-1 (RFC 2104), for TOTP (RFC 6238) only.
//
// SHA-1 is broken for collision resistance, but HMAC-SHA-1 is not: RFC 6238's authenticator apps
// compute codes with it, so the server must too. Nothing else in gpuhub may use these; hashes of
// secrets are SHA-256 (engine::Sha256Hex). libsodium has no SHA-1, hence this small one.
// Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gpuhub {

using Sha1Digest = std::array<std::uint8_t, 20>;

Sha1Digest Sha1(std::string_view data);
Sha1Digest HmacSha1(std::string_view key, std::string_view message);

}  // namespace gpuhub
