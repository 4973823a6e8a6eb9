#include "http/registry_auth.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/file.h"
#include "core/strings.h"
#include "http/limits.h"

namespace gpuhub::http {
namespace {

using json = nlohmann::json;

constexpr std::string_view kPrefix = "v1:";

bool Printable(std::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("registry_auth." + field + " " + why)
      .WithField("registry_auth." + field);
}

}  // namespace

Status ValidateRegistryAuth(const RegistryAuth& a) {
  if (a.username.empty() || a.username.size() > kMaxRegistryUsernameBytes ||
      !Printable(a.username)) {
    return Bad("username", "must be 1 to " + std::to_string(kMaxRegistryUsernameBytes) +
                               " printable characters");
  }
  if (a.password.empty() || a.password.size() > kMaxRegistryPasswordBytes ||
      !Printable(a.password)) {
    return Bad("password", "must be 1 to " + std::to_string(kMaxRegistryPasswordBytes) +
                               " printable characters (a password or an access token)");
  }
  bool host = a.server_address.size() <= 253;
  for (char c : a.server_address) {
    host = host && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == ':');
  }
  if (!host) return Bad("serveraddress", "must be a registry host such as \"ghcr.io\"");
  return Status::Ok();
}

std::string RegistryOfImage(std::string_view image) {
  auto slash = image.find('/');
  if (slash == std::string_view::npos) return "docker.io";
  std::string_view first = image.substr(0, slash);
  if (first.find_first_of(".:") != std::string_view::npos || first == "localhost") {
    return std::string(first);
  }
  return "docker.io";
}

Result<std::unique_ptr<RegistrySealer>> RegistrySealer::LoadOrCreate(const std::string& path) {
  if (sodium_init() < 0) return Status::Internal("libsodium failed to initialise");
  Key key{};
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) {
    randombytes_buf(key.data(), key.size());
    char hex[2 * 32 + 1];
    sodium_bin2hex(hex, sizeof hex, key.data(), key.size());
    std::string text = std::string(hex) + "\n";
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = ::fsync(fd) == 0 && ok;
    ::close(fd);
    sodium_memzero(hex, sizeof hex);
    if (!ok) return Status::Unavailable(path + ": cannot write the registry key");
    return std::make_unique<RegistrySealer>(key);
  }
  if (errno != EEXIST) {
    return Status::Unavailable(path + ": cannot create the registry key: " + std::strerror(errno));
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::Unavailable(path + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(path + ": the registry key must be readable by its owner "
                                             "only (chmod 600)");
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 256));
  std::string hex(Trim(text));
  std::size_t n = 0;
  if (hex.size() != 64 || sodium_hex2bin(key.data(), key.size(), hex.data(), hex.size(), nullptr,
                                         &n, nullptr) != 0 || n != key.size()) {
    return Status::InvalidArgument(path + ": not a registry key (64 hex digits)");
  }
  return std::make_unique<RegistrySealer>(key);
}

std::string RegistrySealer::Seal(const RegistryAuth& auth) const {
  std::string plain = json{{"username", auth.username},
                           {"password", auth.password},
                           {"serveraddress", auth.server_address}}
                          .dump();
  std::string box(crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + plain.size(), '\0');
  auto* out = reinterpret_cast<unsigned char*>(box.data());
  randombytes_buf(out, crypto_secretbox_NONCEBYTES);
  crypto_secretbox_easy(out + crypto_secretbox_NONCEBYTES,
                        reinterpret_cast<const unsigned char*>(plain.data()), plain.size(), out,
                        key_.data());
  sodium_memzero(plain.data(), plain.size());
  std::string b64(sodium_base64_encoded_len(box.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(b64.data(), b64.size(), out, box.size(), sodium_base64_VARIANT_ORIGINAL);
  b64.resize(std::strlen(b64.c_str()));
  return std::string(kPrefix) + b64;
}

Result<RegistryAuth> RegistrySealer::Open(std::string_view sealed) const {
  auto bad = [] {
    return Status::InvalidArgument("the registry credential does not open with this server's key");
  };
  if (sealed.substr(0, kPrefix.size()) != kPrefix) return bad();
  std::string_view b64 = sealed.substr(kPrefix.size());
  std::string box(b64.size(), '\0');
  std::size_t n = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(box.data()), box.size(), b64.data(),
                        b64.size(), nullptr, &n, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0 ||
      n < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES) {
    return bad();
  }
  const auto* in = reinterpret_cast<const unsigned char*>(box.data());
  std::string plain(n - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES, '\0');
  if (crypto_secretbox_open_easy(reinterpret_cast<unsigned char*>(plain.data()),
                                 in + crypto_secretbox_NONCEBYTES,
                                 n - crypto_secretbox_NONCEBYTES, in, key_.data()) != 0) {
    return bad();
  }
  json j = json::parse(plain, nullptr, false);
  sodium_memzero(plain.data(), plain.size());
  if (!j.is_object()) return bad();
  RegistryAuth auth;
  auth.username = j.value("username", "");
  auth.password = j.value("password", "");
  auth.server_address = j.value("serveraddress", "");
  return auth;
}

std::string DefaultRegistryKeyPath(std::string_view db_url) {
  if (db_url.substr(0, 7) == "sqlite:" && db_url.size() > 7) {
    std::string path(db_url.substr(7));
    if (path != ":memory:" && path.find('?') == std::string::npos) return path + ".registry-key";
  }
  return "gpuhub-registry.key";
}

}  // namespace gpuhub::http
