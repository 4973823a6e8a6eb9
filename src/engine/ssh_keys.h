// SSH public keys on an account: what the host agent writes into the authorized_keys of a machine
// the account rents (engine/agents.h sends them with each desired workload).
//
// A key is accepted only when its blob parses as the key it claims to be (the OpenSSH wire format
// of RFC 4253 section 6.6, RFC 5656 and RFC 8709): ssh-ed25519 (a 32-byte key), ecdsa-sha2-nistp256
// / nistp384 / nistp521 (an uncompressed point of the named curve's size), ssh-rsa with a modulus
// of kMinRsaKeyBits..kMaxRsaKeyBits bits and an odd exponent >= 3. Anything else (DSA, security-key
// and certificate types, authorized_keys options, a truncated or padded blob, a prefix that names
// another type than the blob) is invalid_argument with field "public_key". The line written to a
// host is rebuilt from the parsed parts ("type base64 comment"), never copied from the input, so
// nothing a user types can add a second line or options to an authorized_keys file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

struct ParsedSshKey {
  std::string type;         // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string blob_base64;  // the key blob, canonical base64 (with padding)
  std::string comment;      // "" when none
  int bits = 0;             // 256 for ed25519 and nistp256, the modulus size for RSA
  std::string fingerprint;  // "SHA256:<base64 without padding>", as ssh-keygen -l prints it

  // "type base64[ comment]": one authorized_keys line, without options.
  std::string Line() const;
};

// Parses one public key line ("ssh-ed25519 AAAAC3Nz... alice@laptop"). Errors name field
// "public_key" and say what is wrong in words.
Result<ParsedSshKey> ParseSshPublicKey(std::string_view line);

struct SshKey {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  std::string name;
  ParsedSshKey key;
  TimestampMicros created_at = 0;
};

struct SshKeysState {
  std::map<std::int64_t, SshKey> keys;
  std::map<std::int64_t, std::vector<std::int64_t>> by_user;  // ids, oldest first
  std::int64_t next_id = 1;
};

// Adds a key to the user's account. `name` empty: the key's comment, else its fingerprint.
// invalid_argument (field "name") for a name over kMaxSshKeyNameBytes or with control characters;
// conflict when the account already has this key (same fingerprint); resource_exhausted beyond
// kMaxSshKeysPerUser.
Result<SshKey> AddSshKey(Txn& txn, std::int64_t user_id, const std::string& name,
                         const ParsedSshKey& key);
// not_found unless the key exists and is the user's.
Status DeleteSshKey(Txn& txn, std::int64_t user_id, std::int64_t key_id);
// Oldest first.
std::vector<SshKey> ListSshKeys(const State& state, std::int64_t user_id);

Status LoadSshKeys(store::Store& store, SshKeysState& state);

}  // namespace gpuhub::engine
