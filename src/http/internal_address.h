// Which addresses a customer's webhook must not reach: the one policy behind both checks of a
// webhook URL, at PUT /v1/accounts/me/webhook (a literal host) and at delivery (every address the
// host resolves to, checked by the HTTP client on the addresses it then connects to).
//
// Internal (refused):
//   IPv4: 0/8, 10/8, 100.64/10 (CGNAT), 127/8, 169.254/16, 172.16/12, 192.0.0/24, 192.0.2/24,
//         192.88.99/24 (6to4 relays), 192.168/16, 198.18/15, 198.51.100/24, 203.0.113/24, 224/3
//         (multicast, reserved, broadcast).
//   IPv6: ::, ::1, fc00::/7, fe80::/10, fec0::/10 (site-local), ff00::/8, 100::/64 (discard),
//         2001:db8::/32 (documentation), 64:ff9b:1::/48 (local-use NAT64: not global, and where
//         an operator puts the IPv4 inside it is the operator's choice), and all of Teredo
//         2001::/32 (below).
//   IPv6 forms that carry an IPv4 address are judged by that IPv4 address (a public one passes):
//         ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), ::ffff:0:a.b.c.d (translated),
//         64:ff9b::a.b.c.d (well-known NAT64), 2002:AABB:CCDD::/48 (6to4, IPv4 in bits 16..47).
//   Teredo (2001:0::/32) is refused whatever it carries: it embeds two IPv4 addresses (the server
//   in bits 32..63, the client's NAT mapping inverted in the last 32 bits), reaching it takes a
//   relay the platform does not control, and no real webhook receiver lives behind one.
//   Anything that does not parse as an address is internal: the check fails closed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuhub::http {

// `numeric_address` as inet_pton writes it ("10.0.0.1", "::ffff:10.0.0.1", "2002:a00:1::").
bool IsInternalAddress(std::string_view numeric_address);

// The address a URL's host stands for when it is an IP literal as the system resolver reads one,
// in inet_ntop's form: "127.0.0.1" for "127.0.0.1", "127.1", "0x7f000001" or "2130706433";
// "::1" for "::1" (no brackets). nullopt for a name. No I/O (numeric parsing only).
std::optional<std::string> LiteralAddress(std::string_view host);

}  // namespace gpuhub::http
