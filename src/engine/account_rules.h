// What sign-up accepts: password strength and the usernames kept from the public.
//
// Pure functions of their input (the list of common passwords is compiled into the binary from
// data/common-passwords.txt); thread-safe.
//
// Passwords
// - Valid UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF), no NUL, at most
//   kMaxPasswordBytes bytes (a bound on work, so it counts bytes).
// - At least kMinPasswordCharacters characters, where a character is a Unicode code point of the
//   text as sent, not normalized: the code points of the combining-mark blocks (U+0300..036F,
//   U+1AB0..1AFF, U+1DC0..1DFF, U+20D0..20FF, U+FE20..FE2F) do not count, so that "e" followed by
//   U+0301 counts once, as its NFC form "é" does. (A full NFC normalizer needs the Unicode
//   composition tables; this rule is never more lenient than NFC for text in those blocks, and
//   counts a decomposed Hangul syllable as its two or three jamo.)
// - At least two different characters besides whitespace (ASCII letters compared without case):
//   "aaaaaaaaaa", "Aa Aa Aa Aa" and ten spaces are refused. Whitespace is Unicode's White_Space
//   plus the zero-width characters U+200B..200D, U+2060 and U+FEFF.
// - Not one of the 10,000 most common passwords, ignoring ASCII case, nor one of them followed by
//   digits and ASCII punctuation ("password12", "Monkey2024!").
// The password is hashed as sent: these rules decide only whether it is accepted.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/status.h"

namespace gpuhub::engine {

// invalid_argument, with the rule broken in the message, unless the password follows every rule
// above.
Status ValidatePassword(std::string_view password);

// The number of characters as counted above; invalid_argument for text that is not valid UTF-8.
Result<std::size_t> PasswordCharacters(std::string_view password);

// True when `password` is on the common list or is an entry of it followed by digits and ASCII
// punctuation, ignoring ASCII case.
bool IsCommonPassword(std::string_view password);

// The entries of a list in the format of data/common-passwords.txt, folded to lower case: one a
// line, '\r' before '\n' dropped, lines that are empty or start with '#' skipped.
std::unordered_set<std::string> ParsePasswordList(std::string_view text);

// invalid_argument naming the reason when a canonical username (CanonicalUsername) is kept from
// sign-up because it would pass for the platform's staff: the names of kReservedUsernames, those
// names with separators, trailing digits or digits for letters ("ad-min", "root2", "adm1n",
// "supp0rt"), any name containing "gpuhub", and any name with a staff word between separators
// ("support-team", "john.admin"). Operators still create such accounts (gpuhub admin create-user),
// and an existing account logs in whatever its name.
Status CheckUsernameNotReserved(std::string_view canonical_username);

}  // namespace gpuhub::engine
