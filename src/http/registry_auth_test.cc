#include "http/registry_auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace gpuhub::http {
namespace {

std::string TempPath() {
  char dir[] = "/tmp/registry-auth-XXXXXX";
  EXPECT_NE(::mkdtemp(dir), nullptr);
  return std::string(dir) + "/registry.key";
}

TEST(RegistryAuthTest, SealedTextHidesTheSecretAndOpensOnlyWithTheKey) {
  const std::string path = TempPath();
  auto sealer = RegistrySealer::LoadOrCreate(path);
  ASSERT_TRUE(sealer.ok()) << sealer.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "created readable by its owner only";
  RegistryAuth auth{"carl-bot", "s3cret-token-XYZ", "ghcr.io"};
  const std::string sealed = (*sealer)->Seal(auth);
  EXPECT_EQ(sealed.rfind("v1:", 0), 0u);
  for (const char* clear : {"s3cret", "carl-bot", "ghcr.io"}) {
    EXPECT_EQ(sealed.find(clear), std::string::npos) << clear;
  }
  EXPECT_NE((*sealer)->Seal(auth), sealed) << "a fresh nonce each time";
  auto opened = (*sealer)->Open(sealed);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->username, "carl-bot");
  EXPECT_EQ(opened->password, "s3cret-token-XYZ");
  EXPECT_EQ(opened->server_address, "ghcr.io");
  // The same file again: the same key.
  auto again = RegistrySealer::LoadOrCreate(path);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->Open(sealed).ok());
  // Another key (the file lost and made again) opens nothing; tampering is refused.
  RegistrySealer other(RegistrySealer::Key{});
  EXPECT_EQ(other.Open(sealed).status().code(), StatusCode::kInvalidArgument);
  std::string tampered = sealed;
  tampered[10] = tampered[10] == 'A' ? 'B' : 'A';
  EXPECT_FALSE((*sealer)->Open(tampered).ok());
  EXPECT_FALSE((*sealer)->Open("not sealed").ok());
  // A key readable by others is refused.
  ::chmod(path.c_str(), 0644);
  EXPECT_EQ(RegistrySealer::LoadOrCreate(path).status().code(), StatusCode::kFailedPrecondition);
}

TEST(RegistryAuthTest, CredentialsAreCheckedAndTheRegistryComesFromTheImage) {
  EXPECT_TRUE(ValidateRegistryAuth({"u", "p", ""}).ok());
  EXPECT_EQ(ValidateRegistryAuth({"", "p", ""}).field(), "registry_auth.username");
  EXPECT_EQ(ValidateRegistryAuth({"u", "", ""}).field(), "registry_auth.password");
  EXPECT_EQ(ValidateRegistryAuth({"u", "p\n", ""}).field(), "registry_auth.password");
  EXPECT_EQ(ValidateRegistryAuth({"u", std::string(1025, 'p'), ""}).field(),
            "registry_auth.password");
  EXPECT_EQ(ValidateRegistryAuth({"u", "p", "https://x/"}).field(), "registry_auth.serveraddress");
  EXPECT_EQ(RegistryOfImage("ghcr.io/acme/train:v2"), "ghcr.io");
  EXPECT_EQ(RegistryOfImage("localhost:5000/a"), "localhost:5000");
  EXPECT_EQ(RegistryOfImage("pytorch/pytorch:2.4.1"), "docker.io");
  EXPECT_EQ(RegistryOfImage("ubuntu"), "docker.io");
  EXPECT_EQ(DefaultRegistryKeyPath("sqlite:/var/lib/gpuhub/gpuhub.db"),
            "/var/lib/gpuhub/gpuhub.db.registry-key");
  EXPECT_EQ(DefaultRegistryKeyPath("postgresql://db/gpuhub"), "gpuhub-registry.key");
}

}  // namespace
}  // namespace gpuhub::http
