#include "engine/ssh_keys.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "engine/agent_watch.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

Status Bad(const std::string& why) {
  return Status::InvalidArgument("public_key " + why).WithField("public_key");
}

// Reads the SSH wire format: uint32 big-endian lengths before each string.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool String(std::string_view* out) {
    if (data_.size() - pos_ < 4) return false;
    std::uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(data_[pos_ + i]);
    pos_ += 4;
    if (data_.size() - pos_ < n) return false;
    *out = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

// An SSH mpint that must be positive: its significant bytes (leading zeros stripped), or "" when
// it is negative, zero or not minimally encoded.
std::string_view PositiveMpint(std::string_view mpint) {
  if (mpint.empty() || (static_cast<unsigned char>(mpint[0]) & 0x80) != 0) return {};
  if (mpint[0] == 0) {
    // A leading zero only to keep the sign bit clear.
    if (mpint.size() < 2 || (static_cast<unsigned char>(mpint[1]) & 0x80) == 0) return {};
    mpint.remove_prefix(1);
  }
  return mpint;
}

int BitLength(std::string_view magnitude) {
  if (magnitude.empty()) return 0;
  unsigned char top = static_cast<unsigned char>(magnitude[0]);
  int bits = 0;
  while (top) {
    ++bits;
    top >>= 1;
  }
  return static_cast<int>((magnitude.size() - 1) * 8) + bits;
}

bool PrintableAscii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

std::string Base64(std::string_view bytes, int variant) {
  std::string out(sodium_base64_encoded_len(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), variant);
  out.resize(std::strlen(out.c_str()));
  return out;
}

struct Curve {
  const char* name;
  std::size_t point_bytes;  // uncompressed: 0x04 || X || Y
  int bits;
};
constexpr Curve kCurves[] = {{"nistp256", 65, 256}, {"nistp384", 97, 384}, {"nistp521", 133, 521}};

void WriteKey(Txn& txn, const SshKey& k) {
  txn.writes.Upsert("ssh_keys", {{"id", k.id},
                                 {"user_id", k.user_id},
                                 {"name", k.name},
                                 {"key_type", k.key.type},
                                 {"key_blob", k.key.blob_base64},
                                 {"key_comment", k.key.comment},
                                 {"created_at_us", k.created_at}});
}

}  // namespace

std::string ParsedSshKey::Line() const {
  return type + " " + blob_base64 + (comment.empty() ? "" : " " + comment);
}

Result<ParsedSshKey> ParseSshPublicKey(std::string_view line) {
  if (line.size() > kMaxSshKeyLineBytes) {
    return Bad("is longer than " + std::to_string(kMaxSshKeyLineBytes) + " bytes");
  }
  // One line: trailing whitespace (a pasted newline) is forgiven, anything else is not.
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ' ||
                           line.back() == '\t')) {
    line.remove_suffix(1);
  }
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  if (line.empty()) return Bad("is empty: paste one line such as 'ssh-ed25519 AAAAC3Nz... you@host'");
  if (line.find_first_of("\r\n") != std::string_view::npos) {
    return Bad("must be a single line (one key per request)");
  }
  std::size_t space = line.find_first_of(" \t");
  std::string type(line.substr(0, space));
  std::string_view rest = space == std::string_view::npos ? "" : line.substr(space + 1);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  std::size_t end = rest.find_first_of(" \t");
  std::string_view b64 = rest.substr(0, end);
  std::string_view comment = end == std::string_view::npos ? "" : rest.substr(end + 1);
  while (!comment.empty() && (comment.front() == ' ' || comment.front() == '\t')) {
    comment.remove_prefix(1);
  }

  const bool ecdsa = type.rfind("ecdsa-sha2-", 0) == 0;
  if (type != "ssh-ed25519" && type != "ssh-rsa" && !ecdsa) {
    if (type == "ssh-dss") return Bad("is a DSA key: DSA is not accepted (use ed25519)");
    if (type.find("-cert-v01@openssh.com") != std::string::npos) {
      return Bad("is a certificate: add the plain public key instead");
    }
    if (type.rfind("sk-", 0) == 0) {
      return Bad("is a security-key (FIDO) key: it is not accepted yet (use ed25519, ecdsa or rsa)");
    }
    return Bad("must start with ssh-ed25519, ecdsa-sha2-nistp256/384/521 or ssh-rsa (options such "
               "as from=\"...\" or command=\"...\" are not accepted)");
  }
  if (b64.empty()) return Bad("has no key data after '" + type + "'");
  if (comment.size() > kMaxSshKeyCommentBytes || !PrintableAscii(comment)) {
    return Bad("comment must be at most " + std::to_string(kMaxSshKeyCommentBytes) +
               " printable ASCII characters");
  }
  std::string blob(b64.size(), '\0');
  std::size_t blob_len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(blob.data()), blob.size(), b64.data(),
                        b64.size(), nullptr, &blob_len, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    return Bad("key data is not valid base64");
  }
  blob.resize(blob_len);

  ParsedSshKey key;
  Reader r(blob);
  std::string_view inner_type;
  if (!r.String(&inner_type)) return Bad("key data is truncated");
  if (inner_type != type) {
    return Bad("says '" + type + "' but its key data is a '" +
               std::string(inner_type.substr(0, 40)) + "' key");
  }
  if (type == "ssh-ed25519") {
    std::string_view pk;
    if (!r.String(&pk) || pk.size() != 32) return Bad("is not a valid ed25519 key (32 bytes)");
    key.bits = 256;
  } else if (ecdsa) {
    std::string_view curve, point;
    if (!r.String(&curve) || !r.String(&point)) return Bad("key data is truncated");
    const Curve* c = nullptr;
    for (const auto& candidate : kCurves) {
      if (curve == candidate.name) c = &candidate;
    }
    if (c == nullptr || type != std::string("ecdsa-sha2-") + c->name) {
      return Bad("names an unknown curve (nistp256, nistp384 or nistp521)");
    }
    if (point.size() != c->point_bytes || point[0] != 0x04) {
      return Bad("is not a valid " + std::string(c->name) + " point");
    }
    key.bits = c->bits;
  } else {
    std::string_view e, n;
    if (!r.String(&e) || !r.String(&n)) return Bad("key data is truncated");
    std::string_view exponent = PositiveMpint(e);
    std::string_view modulus = PositiveMpint(n);
    if (exponent.empty() || modulus.empty()) return Bad("is not a valid RSA key");
    if ((static_cast<unsigned char>(exponent.back()) & 1) == 0 ||
        (exponent.size() == 1 && static_cast<unsigned char>(exponent[0]) < 3)) {
      return Bad("is not a valid RSA key (its exponent must be odd and at least 3)");
    }
    key.bits = BitLength(modulus);
    if ((static_cast<unsigned char>(modulus.back()) & 1) == 0) {
      return Bad("is not a valid RSA key (even modulus)");
    }
    if (key.bits < kMinRsaKeyBits) {
      return Bad("is a " + std::to_string(key.bits) + "-bit RSA key: at least " +
                 std::to_string(kMinRsaKeyBits) + " bits are needed");
    }
    if (key.bits > kMaxRsaKeyBits) {
      return Bad("is larger than " + std::to_string(kMaxRsaKeyBits) + " bits");
    }
  }
  if (!r.done()) return Bad("key data has trailing bytes");
  key.type = type;
  key.blob_base64 = Base64(blob, sodium_base64_VARIANT_ORIGINAL);
  key.comment = std::string(comment);
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, reinterpret_cast<const unsigned char*>(blob.data()), blob.size());
  key.fingerprint =
      "SHA256:" + Base64(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest),
                         sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
  return key;
}

Result<SshKey> AddSshKey(Txn& txn, std::int64_t user_id, const std::string& name,
                         const ParsedSshKey& key) {
  SshKeysState& state = *txn.state.ssh_keys;
  if (name.size() > kMaxSshKeyNameBytes || !PrintableAscii(name)) {
    return Status::InvalidArgument("name must be at most " + std::to_string(kMaxSshKeyNameBytes) +
                                   " printable characters")
        .WithField("name");
  }
  auto& mine = state.by_user[user_id];
  for (std::int64_t id : mine) {
    if (state.keys.at(id).key.fingerprint == key.fingerprint) {
      return Status::Conflict("this key is already on your account (" + key.fingerprint + ")")
          .WithField("public_key");
    }
  }
  if (mine.size() >= kMaxSshKeysPerUser) {
    return Status::ResourceExhausted("an account holds at most " +
                                     std::to_string(kMaxSshKeysPerUser) + " SSH keys");
  }
  SshKey k;
  k.id = state.next_id++;
  k.user_id = user_id;
  k.name = !name.empty() ? name
                         : (!key.comment.empty() ? key.comment.substr(0, kMaxSshKeyNameBytes)
                                                 : key.fingerprint.substr(0, kMaxSshKeyNameBytes));
  k.key = key;
  k.created_at = txn.now;
  mine.push_back(k.id);
  state.keys.emplace(k.id, k);
  WriteKey(txn, k);
  NoteCustomerDesiredChanged(txn.state, user_id);  // hosts of its leases (agent_watch.h)
  return k;
}

Status DeleteSshKey(Txn& txn, std::int64_t user_id, std::int64_t key_id) {
  SshKeysState& state = *txn.state.ssh_keys;
  auto it = state.keys.find(key_id);
  if (it == state.keys.end() || it->second.user_id != user_id) {
    return Status::NotFound("no SSH key " + std::to_string(key_id) + " of yours");
  }
  auto& mine = state.by_user[user_id];
  mine.erase(std::remove(mine.begin(), mine.end(), key_id), mine.end());
  state.keys.erase(it);
  txn.writes.Delete("ssh_keys", {{"id", key_id}});
  NoteCustomerDesiredChanged(txn.state, user_id);
  return Status::Ok();
}

std::vector<SshKey> ListSshKeys(const State& state, std::int64_t user_id) {
  std::vector<SshKey> out;
  auto it = state.ssh_keys->by_user.find(user_id);
  if (it == state.ssh_keys->by_user.end()) return out;
  for (std::int64_t id : it->second) out.push_back(state.ssh_keys->keys.at(id));
  return out;
}

Status LoadSshKeys(store::Store& store, SshKeysState& state) {
  return store.Scan(
      "ssh_keys", {"id", "user_id", "name", "key_type", "key_blob", "key_comment", "created_at_us"},
      "id", [&](const store::Row& row) -> Status {
        SshKey k;
        GPUHUB_ASSIGN_OR_RETURN(k.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(k.user_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(k.name, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(std::string type, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(std::string blob, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(std::string comment, row.Text(5));
        GPUHUB_ASSIGN_OR_RETURN(k.created_at, row.Int(6));
        // Parsed again: the fingerprint and size come from the blob, as on the way in.
        auto parsed = ParseSshPublicKey(type + " " + blob + (comment.empty() ? "" : " " + comment));
        if (!parsed.ok()) {
          return Status::Internal("stored SSH key " + std::to_string(k.id) + " does not parse: " +
                                  parsed.status().message());
        }
        k.key = std::move(parsed).value();
        state.by_user[k.user_id].push_back(k.id);
        state.next_id = std::max(state.next_id, k.id + 1);
        state.keys.emplace(k.id, std::move(k));
        return Status::Ok();
      });
}

}  // namespace gpuhub::engine
