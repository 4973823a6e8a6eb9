#include "engine/account_rules.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "engine/limits.h"

namespace gpuhub::engine {

// data/common-passwords.txt, compiled in by cmake/EmbedFile.cmake (common_passwords_data.cc).
extern const unsigned char kCommonPasswordsText[];
extern const std::size_t kCommonPasswordsTextSize;

namespace {

char FoldAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string FoldAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = FoldAscii(c);
  return out;
}

// Strict UTF-8 (RFC 3629): false for a truncated sequence, a stray continuation byte, an overlong
// form, a surrogate or a value above U+10FFFF.
bool DecodeUtf8(std::string_view text, std::vector<char32_t>& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    unsigned char b0 = byte(i);
    std::size_t length = b0 < 0x80           ? 1
                         : (b0 >> 5) == 0x6  ? 2
                         : (b0 >> 4) == 0xE  ? 3
                         : (b0 >> 3) == 0x1E ? 4
                                             : 0;
    if (length == 0 || i + length > text.size()) return false;
    char32_t cp = length == 1   ? b0
                  : length == 2 ? (b0 & 0x1F)
                  : length == 3 ? (b0 & 0x0F)
                                : (b0 & 0x07);
    for (std::size_t k = 1; k < length; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    static constexpr std::array<char32_t, 5> kSmallest = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kSmallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    out.push_back(cp);
    i += length;
  }
  return true;
}

bool IsCombiningMark(char32_t c) {
  return (c >= 0x0300 && c <= 0x036F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
         (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
         (c >= 0xFE20 && c <= 0xFE2F);
}

// Unicode White_Space, and the zero-width characters that look like nothing at all.
bool IsBlank(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200D) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x2060 || c == 0x3000 || c == 0xFEFF;
}

const std::unordered_set<std::string>& CommonPasswords() {
  static const std::unordered_set<std::string> list = ParsePasswordList(std::string_view(
      reinterpret_cast<const char*>(kCommonPasswordsText), kCommonPasswordsTextSize));
  return list;
}

bool IsDigitOrPunct(char c) {
  return (c >= '0' && c <= '9') || (c >= '!' && c <= '/') || (c >= ':' && c <= '@') ||
         (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

}  // namespace

std::unordered_set<std::string> ParsePasswordList(std::string_view text) {
  std::unordered_set<std::string> out;
  while (!text.empty()) {
    std::size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    out.insert(FoldAscii(line));
  }
  return out;
}

bool IsCommonPassword(std::string_view password) {
  const auto& list = CommonPasswords();
  std::string folded = FoldAscii(password);
  // The entry itself, then the entry with the digits and punctuation people add to it removed one
  // by one from the end ("password12!" -> "password12" -> "password1" -> "password").
  while (!folded.empty()) {
    if (list.count(folded)) return true;
    if (!IsDigitOrPunct(folded.back())) return false;
    folded.pop_back();
  }
  return false;
}

namespace {
std::size_t CountCharacters(const std::vector<char32_t>& cps) {
  return static_cast<std::size_t>(
      std::count_if(cps.begin(), cps.end(), [](char32_t c) { return !IsCombiningMark(c); }));
}
}  // namespace

Result<std::size_t> PasswordCharacters(std::string_view password) {
  std::vector<char32_t> cps;
  if (!DecodeUtf8(password, cps)) return Status::InvalidArgument("password must be valid UTF-8");
  return CountCharacters(cps);
}

Status ValidatePassword(std::string_view password) {
  // Bytes first: the bound on work comes before any work.
  if (password.size() > kMaxPasswordBytes) {
    return Status::InvalidArgument("password must be at most " + std::to_string(kMaxPasswordBytes) +
                                   " bytes long");
  }
  if (password.find('\0') != std::string_view::npos) {
    return Status::InvalidArgument("password must not contain NUL characters");
  }
  std::vector<char32_t> cps;
  if (!DecodeUtf8(password, cps)) return Status::InvalidArgument("password must be valid UTF-8");
  if (CountCharacters(cps) < kMinPasswordCharacters) {
    return Status::InvalidArgument("password must be at least " +
                                   std::to_string(kMinPasswordCharacters) + " characters long");
  }
  char32_t first = 0;
  bool varied = false;
  for (char32_t c : cps) {
    if (IsBlank(c) || IsCombiningMark(c)) continue;
    if (c >= 'A' && c <= 'Z') c = c - 'A' + 'a';
    if (first == 0) {
      first = c;
    } else if (c != first) {
      varied = true;
      break;
    }
  }
  if (!varied) {
    return Status::InvalidArgument(
        "password must hold at least two different characters besides spaces");
  }
  if (IsCommonPassword(password)) {
    return Status::InvalidArgument(
        "password is one of the most common passwords (or one of them with digits added); "
        "a few unrelated words are easier to remember and far harder to guess");
  }
  return Status::Ok();
}

namespace {

// Names an impostor would sign up with to pass for the platform or its staff: refused as the whole
// name (after the folding of UsernameForms).
constexpr std::string_view kReservedUsernames[] = {
    "abuse",          "account",   "accounts",   "admin",      "admins",     "administrator",
    "administrators", "api",       "billing",    "compliance", "contact",    "email",
    "finance",        "gpuhub",    "help",       "helpdesk",   "hostmaster", "info",
    "legal",          "mail",      "moderator",  "moderators", "mod",        "noc",
    "noreply",        "official",  "operator",   "operators",  "ops",        "owner",
    "payment",        "payments",  "postmaster", "privacy",    "root",       "sales",
    "security",       "staff",     "superuser",  "support",    "sysadmin",   "system",
    "team",           "webmaster", "www",        "trust",      "safety",
};

// Staff words refused also as one part of a name between separators ("support-team", "john.admin"):
// the whole list would catch ordinary names such as "acme-sales" or "mail.bob".
constexpr std::string_view kStaffWords[] = {
    "abuse",      "admin",      "admins",    "administrator", "billing",   "gpuhub",
    "helpdesk",   "hostmaster", "moderator", "noreply",       "official",  "operator",
    "postmaster", "root",       "security",  "staff",         "superuser", "support",
};

std::string LeetToLetters(std::string_view s, char one) {
  std::string out(s);
  for (char& c : out) {
    switch (c) {
      case '0':
        c = 'o';
        break;
      case '1':
        c = one;
        break;
      case '3':
        c = 'e';
        break;
      case '4':
        c = 'a';
        break;
      case '5':
        c = 's';
        break;
      case '7':
        c = 't';
        break;
      case '8':
        c = 'b';
        break;
      case '9':
        c = 'g';
        break;
      default:
        break;
    }
  }
  return out;
}

// The ways a word can be dressed up: digits around it ("admin2", "1root") and digits standing for
// letters ("adm1n", "r00t", "he1p").
std::vector<std::string> UsernameForms(std::string_view word) {
  std::vector<std::string> out;
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string_view trailing = word;
  while (!trailing.empty() && is_digit(trailing.back())) trailing.remove_suffix(1);
  std::string_view both = trailing;
  while (!both.empty() && is_digit(both.front())) both.remove_prefix(1);
  for (std::string_view base : {word, trailing, both}) {
    if (base.empty()) continue;
    out.emplace_back(base);
    out.push_back(LeetToLetters(base, 'i'));
    out.push_back(LeetToLetters(base, 'l'));
  }
  return out;
}

template <std::size_t N>
bool AnyFormIn(std::string_view word, const std::string_view (&names)[N]) {
  for (const std::string& form : UsernameForms(word)) {
    if (std::find(std::begin(names), std::end(names), form) != std::end(names)) return true;
  }
  return false;
}

bool IsSeparator(char c) { return c == '.' || c == '_' || c == '-'; }

}  // namespace

Status CheckUsernameNotReserved(std::string_view canonical_username) {
  const Status reserved = Status::InvalidArgument(
      "username '" + std::string(canonical_username) +
      "' is reserved (it could pass for gpuhub or its staff); choose another");
  std::string compact;
  for (char c : canonical_username) {
    if (!IsSeparator(c)) compact.push_back(c);
  }
  if (AnyFormIn(compact, kReservedUsernames)) return reserved;
  for (const std::string& form : UsernameForms(compact)) {
    if (form.find("gpuhub") != std::string::npos) return reserved;
  }
  std::size_t start = 0;
  while (start <= canonical_username.size()) {
    std::size_t end = start;
    while (end < canonical_username.size() && !IsSeparator(canonical_username[end])) ++end;
    std::string_view part = canonical_username.substr(start, end - start);
    if (!part.empty() && AnyFormIn(part, kStaffWords)) return reserved;
    start = end + 1;
  }
  return Status::Ok();
}

}  // namespace gpuhub::engine
