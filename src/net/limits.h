// Limits of the outbound HTTP client (src/net).
#pragma once

#include <chrono>
#include <cstddef>

namespace gpuhub::net {

// Largest response body a client accepts unless its options say otherwise (a misbehaving or
// hostile peer must not be able to grow our memory without bound).
inline constexpr std::size_t kDefaultMaxResponseBytes = 16 * 1024 * 1024;
// Largest response header block accepted.
inline constexpr std::size_t kMaxResponseHeaderBytes = 64 * 1024;
// Default deadline of one whole exchange (connect, TLS handshake, write, read).
inline constexpr std::chrono::milliseconds kDefaultTimeout{10000};
// Longest URL accepted (base URLs come from configuration and accounts' webhook settings).
inline constexpr std::size_t kMaxUrlBytes = 2048;

}  // namespace gpuhub::net
