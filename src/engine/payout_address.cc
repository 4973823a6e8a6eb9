// ValidatePayoutAddress (payout_destinations.h): address shapes and their checksums.
#include <sodium.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <vector>

#include "engine/payout_destinations.h"

namespace gpuhub::engine {
namespace {

Status Bad(const std::string& why) {
  return Status::InvalidArgument("address " + why).WithField("address");
}

// Base58 (Bitcoin's alphabet) to bytes; nullopt for a character outside it.
std::optional<std::string> Base58Decode(std::string_view text) {
  static constexpr std::string_view kAlphabet =
      "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  std::vector<unsigned char> out;  // big-endian, grown as needed
  for (char c : text) {
    std::size_t v = kAlphabet.find(c);
    if (v == std::string_view::npos) return std::nullopt;
    unsigned carry = static_cast<unsigned>(v);
    for (auto it = out.rbegin(); it != out.rend(); ++it) {
      carry += 58u * *it;
      *it = static_cast<unsigned char>(carry & 0xff);
      carry >>= 8;
    }
    while (carry) {
      out.insert(out.begin(), static_cast<unsigned char>(carry & 0xff));
      carry >>= 8;
    }
  }
  std::size_t zeros = 0;
  while (zeros < text.size() && text[zeros] == '1') ++zeros;
  std::string bytes(zeros, '\0');
  bytes.append(out.begin(), out.end());
  return bytes;
}

// A base58check address of 25 bytes whose version byte is one of `versions`.
bool Base58CheckValid(std::string_view text, std::initializer_list<unsigned char> versions) {
  if (text.size() < 25 || text.size() > 35) return false;
  auto bytes = Base58Decode(text);
  if (!bytes || bytes->size() != 25) return false;
  unsigned char once[crypto_hash_sha256_BYTES], twice[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(once, reinterpret_cast<const unsigned char*>(bytes->data()), 21);
  crypto_hash_sha256(twice, once, sizeof once);
  if (std::memcmp(twice, bytes->data() + 21, 4) != 0) return false;
  unsigned char version = static_cast<unsigned char>((*bytes)[0]);
  return std::find(versions.begin(), versions.end(), version) != versions.end();
}

// BIP 173 / BIP 350: a mainnet segwit address ("bc1...", one case throughout).
bool SegwitValid(std::string_view text) {
  static constexpr std::string_view kCharset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
  if (text.size() < 14 || text.size() > 74) return false;
  std::string lower;
  bool has_lower = false, has_upper = false;
  for (char c : text) {
    if (c >= 'a' && c <= 'z') has_lower = true;
    if (c >= 'A' && c <= 'Z') has_upper = true;
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  if (has_lower && has_upper) return false;
  if (!lower.starts_with("bc1")) return false;
  std::vector<int> data;
  for (char c : lower.substr(3)) {
    std::size_t v = kCharset.find(c);
    if (v == std::string_view::npos) return false;
    data.push_back(static_cast<int>(v));
  }
  if (data.size() < 7) return false;
  // The checksum over the expanded human-readable part ("bc") and the data.
  std::uint32_t chk = 1;
  auto step = [&chk](int v) {
    static constexpr std::uint32_t kGen[] = {0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd,
                                             0x2a1462b3};
    std::uint32_t top = chk >> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ static_cast<std::uint32_t>(v);
    for (int i = 0; i < 5; ++i) {
      if ((top >> i) & 1) chk ^= kGen[i];
    }
  };
  for (char c : std::string_view("bc")) step(c >> 5);
  step(0);
  for (char c : std::string_view("bc")) step(c & 31);
  for (int v : data) step(v);
  int version = data[0];
  std::uint32_t expected = version == 0 ? 1u : 0x2bc830a3u;
  if (chk != expected || version > 16) return false;
  // The witness program: 5-bit groups to bytes, without the version and the 6 checksum symbols.
  std::size_t bits = (data.size() - 7) * 5;
  std::size_t program_bytes = bits / 8;
  if (bits % 8 >= 5) return false;  // more padding than a conversion leaves
  if (version == 0) return program_bytes == 20 || program_bytes == 32;
  return program_bytes >= 2 && program_bytes <= 40;
}

bool IsHex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

// "DE89 3704 0044 0532 0130 00" -> "DE89370400440532013000" when it has an IBAN's shape.
std::optional<std::string> IbanShape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ') continue;
    if (!std::isalnum(static_cast<unsigned char>(c))) return std::nullopt;
    out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  }
  if (out.size() < 15 || out.size() > 34) return std::nullopt;
  if (!std::isalpha(static_cast<unsigned char>(out[0])) ||
      !std::isalpha(static_cast<unsigned char>(out[1])) ||
      !std::isdigit(static_cast<unsigned char>(out[2])) ||
      !std::isdigit(static_cast<unsigned char>(out[3]))) {
    return std::nullopt;
  }
  return out;
}

bool IbanChecks(const std::string& iban) {
  std::string moved = iban.substr(4) + iban.substr(0, 4);
  int rest = 0;
  for (char c : moved) {
    int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : c - 'A' + 10;
    rest = v >= 10 ? (rest * 100 + v) % 97 : (rest * 10 + v) % 97;
  }
  return rest == 1;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<PayoutKind> ParsePayoutKind(std::string_view name) {
  if (name == "btc") return PayoutKind::kBtc;
  if (name == "usdt") return PayoutKind::kUsdt;
  if (name == "usdc") return PayoutKind::kUsdc;
  if (name == "bank") return PayoutKind::kBank;
  return Status::InvalidArgument("kind must be btc, usdt, usdc or bank").WithField("kind");
}

std::string_view PayoutKindName(PayoutKind kind) {
  switch (kind) {
    case PayoutKind::kBtc:
      return "btc";
    case PayoutKind::kUsdt:
      return "usdt";
    case PayoutKind::kUsdc:
      return "usdc";
    case PayoutKind::kBank:
      return "bank";
  }
  return "btc";
}

Result<std::string> ValidatePayoutAddress(PayoutKind kind, std::string_view raw) {
  std::string_view address = Trim(raw);
  if (address.empty()) return Bad("is required");
  if (address.size() > kMaxBankReferenceBytes) {
    return Bad("is longer than " + std::to_string(kMaxBankReferenceBytes) + " characters");
  }
  switch (kind) {
    case PayoutKind::kBtc:
      if ((address.starts_with("bc1") || address.starts_with("BC1"))) {
        if (!SegwitValid(address)) {
          return Bad("is not a valid bech32 Bitcoin address (checksum or length wrong)");
        }
        return std::string(address);
      }
      if (address.starts_with('1') || address.starts_with('3')) {
        if (!Base58CheckValid(address, {0x00, 0x05})) {
          return Bad("is not a valid Bitcoin address (base58 checksum wrong)");
        }
        return std::string(address);
      }
      return Bad("must be a Bitcoin mainnet address (bc1..., 1... or 3...)");
    case PayoutKind::kUsdt:
    case PayoutKind::kUsdc:
      if (address.starts_with("0x") || address.starts_with("0X")) {
        if (address.size() != 42 || !IsHex(address.substr(2))) {
          return Bad("must be 0x and 40 hex digits (an ERC-20 address)");
        }
        return std::string(address);
      }
      if (address.starts_with('T')) {
        if (!Base58CheckValid(address, {0x41})) {
          return Bad("is not a valid Tron address (base58 checksum wrong)");
        }
        return std::string(address);
      }
      return Bad("must be an ERC-20 address (0x + 40 hex) or a Tron address (T...)");
    case PayoutKind::kBank:
      if (auto iban = IbanShape(address)) {
        if (!IbanChecks(*iban)) return Bad("looks like an IBAN but its check digits are wrong");
        return *iban;
      }
      if (address.size() < kMinBankReferenceBytes) {
        return Bad("must be an IBAN or a bank reference of at least " +
                   std::to_string(kMinBankReferenceBytes) + " characters");
      }
      for (char c : address) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          return Bad("must be printable text");
        }
      }
      return std::string(address);
  }
  return Bad("has an unknown kind");
}

}  // namespace gpuhub::engine
