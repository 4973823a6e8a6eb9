// Customers' registry credentials (POST /v1/bids "registry_auth": a user name and a password or
// token for a private image), sealed at rest with the server's key.
//
// Contract: the secret exists in clear only while a bid is parsed (here, sealed before it reaches
// the engine) and while a host's heartbeat answer is built (opened for the one host that pulls the
// image, http/api_agent.cc). The engine, the store and every other answer hold or show only the
// sealed text ("v1:" + base64 of the nonce and the crypto_secretbox box); nothing logs it.
//
// The key: 32 random bytes, hex, in one file (ServiceConfig::agents_registry_key_file; by default
// beside a SQLite database, else gpuhub-registry.key in the working directory), created 0600 at the
// first start; a key file readable by others is refused. Every node of a high-availability pair
// needs the same file. A lost key loses only the stored credentials: those orders' hosts get the
// workload without one (a private image then fails to pull, and the customer orders again with
// the credential); nothing else depends on it.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuhub::http {

struct RegistryAuth {
  std::string username;
  std::string password;        // or an access token
  std::string server_address;  // "ghcr.io"; "" = the image's own registry (Docker Hub)
};

// username 1..kMaxRegistryUsernameBytes and password 1..kMaxRegistryPasswordBytes of printable
// ASCII, server_address a host[:port] (or ""). invalid_argument naming "registry_auth.<field>".
Status ValidateRegistryAuth(const RegistryAuth& auth);

// The registry of an image reference: its first component when that is a host ("ghcr.io"), else
// "docker.io".
std::string RegistryOfImage(std::string_view image);

class RegistrySealer {
 public:
  using Key = std::array<unsigned char, 32>;
  explicit RegistrySealer(const Key& key) : key_(key) {}
  // Reads the key file, creating it (0600, O_EXCL) with a new random key when missing.
  static Result<std::unique_ptr<RegistrySealer>> LoadOrCreate(const std::string& path);

  std::string Seal(const RegistryAuth& auth) const;
  // invalid_argument when the text is not a box sealed with this key (a lost or replaced key).
  Result<RegistryAuth> Open(std::string_view sealed) const;

 private:
  Key key_;
};

// Where the key lives when the config does not say: "<db path>.registry-key" for "sqlite:PATH",
// else "gpuhub-registry.key".
std::string DefaultRegistryKeyPath(std::string_view db_url);

}  // namespace gpuhub::http
