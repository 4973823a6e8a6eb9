#include "core/totp.h"

#include "core/sha1.h"

namespace gpuhub {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

int Base32Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= '2' && c <= '7') return c - '2' + 26;
  return -1;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '.' || c == '_' || c == '~';
    if (plain) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// Constant-time equality of two strings of the same length (the length is public: 6 digits).
bool SameCode(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string Base32Encode(std::string_view bytes) {
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

Result<std::string> Base32Decode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  std::uint32_t buffer = 0;
  int bits = 0;
  std::size_t symbols = 0;
  for (char c : text) {
    if (c == ' ' || c == '-') continue;
    int v = Base32Value(c);
    if (v < 0) return Status::InvalidArgument("not base32 (A-Z and 2-7)");
    buffer = (buffer << 5) | static_cast<std::uint32_t>(v);
    bits += 5;
    ++symbols;
    if (bits >= 8) {
      out.push_back(static_cast<char>((buffer >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  // 1, 3 and 6 symbols past a full 8-symbol group never come out of an encoder.
  std::size_t tail = symbols % 8;
  if (tail == 1 || tail == 3 || tail == 6) {
    return Status::InvalidArgument("not base32 (a length no encoding has)");
  }
  return out;
}

std::string HotpCode(std::string_view key, std::uint64_t counter, int digits) {
  char message[8];
  for (int i = 7; i >= 0; --i) {
    message[i] = static_cast<char>(counter & 0xff);
    counter >>= 8;
  }
  Sha1Digest mac = HmacSha1(key, std::string_view(message, 8));
  // RFC 4226 5.3, dynamic truncation: 31 bits from the offset the last nibble names.
  int offset = mac[19] & 0x0f;
  std::uint32_t binary = ((std::uint32_t{mac[offset]} & 0x7f) << 24) |
                         (std::uint32_t{mac[offset + 1]} << 16) |
                         (std::uint32_t{mac[offset + 2]} << 8) | std::uint32_t{mac[offset + 3]};
  std::uint32_t modulus = 1;
  for (int i = 0; i < digits; ++i) modulus *= 10;
  std::string code = std::to_string(binary % modulus);
  return std::string(static_cast<std::size_t>(digits) - code.size(), '0') + code;
}

std::int64_t TotpStep(std::int64_t unix_seconds, std::int64_t step_seconds) {
  return unix_seconds >= 0 ? unix_seconds / step_seconds
                           : (unix_seconds - step_seconds + 1) / step_seconds;
}

std::string TotpCode(std::string_view key, std::int64_t unix_seconds, int digits) {
  return HotpCode(key, static_cast<std::uint64_t>(TotpStep(unix_seconds)), digits);
}

std::optional<std::int64_t> MatchTotp(std::string_view key, std::string_view code,
                                      std::int64_t unix_seconds, std::int64_t last_used_step) {
  if (code.size() != static_cast<std::size_t>(kTotpDigits)) return std::nullopt;
  for (char c : code) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  std::int64_t now = TotpStep(unix_seconds);
  std::optional<std::int64_t> found;
  // Every step of the window is computed, matched or not, so timing does not say which matched.
  for (std::int64_t step = now - kTotpWindowSteps; step <= now + kTotpWindowSteps; ++step) {
    if (step < 0) continue;
    bool same = SameCode(HotpCode(key, static_cast<std::uint64_t>(step)), code);
    if (same && step > last_used_step && !found) found = step;
  }
  return found;
}

std::string OtpauthUri(std::string_view issuer, std::string_view account,
                       std::string_view secret_base32) {
  std::string i = PercentEncode(issuer);
  return "otpauth://totp/" + i + ":" + PercentEncode(account) +
         "?secret=" + std::string(secret_base32) + "&issuer=" + i +
         "&algorithm=SHA1&digits=" + std::to_string(kTotpDigits) +
         "&period=" + std::to_string(kTotpStepSeconds);
}

}  // namespace gpuhub
