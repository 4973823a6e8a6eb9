#include "engine/ssh_keys.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"

namespace gpuhub::engine {
namespace {

// Keys made with OpenSSH's ssh-keygen; the fingerprints and sizes are what `ssh-keygen -l` printed.
struct KnownKey {
  const char* line;
  const char* type;
  int bits;
  const char* fingerprint;
};
const KnownKey kKeys[] = {
    {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj test@ed25519",
     "ssh-ed25519", 256, "SHA256:xkh9ZCNYIFG9N7w9WVXvCkhBxKOYRyDU24Im6DZ8cqw"},
    {"ecdsa-sha2-nistp256 "
     "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBG0lWzm3IWDl1j1PND9coLgnJ7fSbIGyz6MgTffdtZ"
     "tCo7tmk8S2FqGyks0H+ay+tTJ3jztH7WORqjWio/r/o+E= test@ecdsa",
     "ecdsa-sha2-nistp256", 256, "SHA256:j5Am/4FsdVKMWBJL43Iq3bqscrfqPwI/0+0eGqn1d84"},
    {"ecdsa-sha2-nistp384 "
     "AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBMaMp6I8LpigJ0A5Q/Jr7iPZPHCYCDmbqOik8MZUQY"
     "EmoP792ta9ulbUaKIDyRGv03OIZAZ6C308Bz8mptqqn/sAPH0PP/kaXbbSgM5g219Y/jz0eCh2MSYAdjV1roPg9Q== "
     "test@ecdsa",
     "ecdsa-sha2-nistp384", 384, "SHA256:fKXIxiSm4gumbVvAOl/LZv2f1R9kGlmWMQ/SZYFUVh8"},
    {"ecdsa-sha2-nistp521 "
     "AAAAE2VjZHNhLXNoYTItbmlzdHA1MjEAAAAIbmlzdHA1MjEAAACFBADbscyo7eCR7gE/ruXXVg39falaJIZxg1L4bm4XFk"
     "pQW8DnLu2fwMFeJkovSuacMCKqBW03PC5UhqIH+1+coj+x1AABu04oKjzP/iTe0Qt2vVPcgWRga0BnaRFLLG5tVs67cUqK"
     "+L7cu0smHofRY+lNdVX9wdDqu7JfJ3bsaVVN8BvBSw== test@ecdsa",
     "ecdsa-sha2-nistp521", 521, "SHA256:kvPaJBsFXDyxQQAB470IsBZiiE/LPlDbTX0hyglF8ds"},
    {"ssh-rsa "
     "AAAAB3NzaC1yc2EAAAADAQABAAABAQC+B/IOAEOmpY/DZYw2Tr/C2XgWTcfL7vmcUD/3ECApV5irzPxYm996+8BXo9QhRw"
     "Vt0bqfWYv/JqDcr6PIPNzzl2VfmBAK8DUeOXNtsHcXaiYep2Ks0NTB239pi1QpyKeme7faew31WPVDP5OW78zPBkE4PFIK"
     "aBBx3oOahb/uDoDvetKNOIu4wKtOfbkdS2fQtZnbZx0+rK0qK0tlSn3TZGjwx/CAbRuOn+mC5fDVc0i0xhiDAq8D+mfBdJ"
     "3k9x3g6YZgG0yR/eBxBW2UpHoYtlbvklom3k/GoQkWnXsQHaIT4QvCf5/7fvpGCkXr9Dc+dW+tROHHVQC10yAOQyC5 "
     "test@rsa",
     "ssh-rsa", 2048, "SHA256:coFxRewW8Yj/HdMErVh36hJhVaNZ7pbK47NOJosNm10"},
};
const char* kRsa1024 =
    "ssh-rsa "
    "AAAAB3NzaC1yc2EAAAADAQABAAAAgQCwE2kboaWIJ+Vyi/EG/0DsLvYUXmiTsLQpSUqnw+Osj81dOG4I2mTLKvwIGK6KjYnP"
    "Tp2eDJCDaThL3ZY74Vs0DLXBDFV1nov1B9Dgs0c/98mLkNlZWd0mNoWQYCESBvQO4GnTKgiCyMgCJc6RvNrFJORtqewzOsAq"
    "n1+naiMR6Q== test@rsa";

std::string Decode(std::string_view b64) {
  std::string out(b64.size(), '\0');
  std::size_t n = 0;
  EXPECT_EQ(sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), b64.data(),
                              b64.size(), nullptr, &n, nullptr, sodium_base64_VARIANT_ORIGINAL),
            0);
  out.resize(n);
  return out;
}
std::string Encode(std::string_view bytes) {
  std::string out(sodium_base64_encoded_len(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);
  return out;
}
std::string BlobOf(const char* line) {
  std::string_view s(line);
  s.remove_prefix(s.find(' ') + 1);
  return Decode(s.substr(0, s.find(' ')));
}

TEST(SshKeyParseTest, AcceptsEveryKindAndFingerprintsItAsSshKeygenDoes) {
  for (const auto& k : kKeys) {
    auto parsed = ParseSshPublicKey(k.line);
    ASSERT_TRUE(parsed.ok()) << k.type << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->type, k.type);
    EXPECT_EQ(parsed->bits, k.bits) << k.type;
    EXPECT_EQ(parsed->fingerprint, k.fingerprint) << k.type;
    EXPECT_EQ(parsed->Line(), k.line) << "rebuilt from its parts, it is the same line";
  }
  // A pasted newline and surrounding blanks are forgiven; no comment is fine.
  auto trimmed = ParseSshPublicKey(std::string("  ") + kKeys[0].line + "\r\n");
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(trimmed->comment, "test@ed25519");
  auto bare = ParseSshPublicKey(
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG16T587uU+epMBs4vmoyyGuBG9yQ3QtlzA/ukPD/zmj");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->comment, "");
}

TEST(SshKeyParseTest, RefusesWhatIsNotAGoodKeyNamingTheField) {
  const std::string ed = kKeys[0].line;
  const std::string ed_blob = BlobOf(kKeys[0].line);
  const std::string rsa_blob = BlobOf(kKeys[4].line);
  struct Case {
    std::string line;
    std::string says;
  };
  const Case cases[] = {
      {"", "empty"},
      {kRsa1024, "1024-bit RSA key: at least 2048"},
      {"ssh-dss AAAAB3NzaC1kc3MAAACBAP", "DSA"},
      {"sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29tAAAAI", "security-key"},
      {"ssh-ed25519-cert-v01@openssh.com AAAA", "certificate"},
      {"from=\"10.0.0.1\" " + ed, "options"},
      {"command=\"/bin/sh\" " + ed, "options"},
      {"ssh-ed25519", "no key data"},
      {"ssh-ed25519 not*base64!", "base64"},
      {"ssh-rsa " + Encode(ed_blob), "key data is a 'ssh-ed25519' key"},
      {"ssh-ed25519 " + Encode(ed_blob.substr(0, ed_blob.size() - 3)), "ed25519"},
      {"ssh-ed25519 " + Encode(ed_blob + "xx"), "trailing bytes"},
      {"ssh-rsa " + Encode(rsa_blob.substr(0, 40)), "truncated"},
      {ed + "\nssh-ed25519 AAAA second", "single line"},
      {"ssh-ed25519 " + Encode(ed_blob) + " comment\x01with control", "comment"},
      {"ecdsa-sha2-nistp256 " + Encode(BlobOf(kKeys[2].line)), "key data is a"},
      {std::string(9000, 'a'), "longer than"},
  };
  for (const auto& c : cases) {
    auto r = ParseSshPublicKey(c.line);
    ASSERT_FALSE(r.ok()) << c.line.substr(0, 80);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), "public_key");
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.line.substr(0, 60) << " -> " << r.status().message();
  }
}

TEST(SshKeyParseTest, RsaExponentAndModulusAreChecked) {
  // Rebuild the 2048-bit key's blob with an even exponent (65536) and with a negative modulus.
  auto str = [](std::string_view s) {
    std::string out(4, '\0');
    out[0] = static_cast<char>(s.size() >> 24);
    out[1] = static_cast<char>(s.size() >> 16);
    out[2] = static_cast<char>(s.size() >> 8);
    out[3] = static_cast<char>(s.size());
    return out + std::string(s);
  };
  std::string blob = BlobOf(kKeys[4].line);
  // ssh-rsa blob: string "ssh-rsa" (4+7), mpint e (4+3: 01 00 01), mpint n (4+257).
  std::string n = blob.substr(4 + 7 + 4 + 3 + 4);
  ASSERT_EQ(n.size(), 257u);
  std::string even_e = str("ssh-rsa") + str(std::string("\x01\x00\x00", 3)) + str(n);
  EXPECT_NE(ParseSshPublicKey("ssh-rsa " + Encode(even_e)).status().message().find("exponent"),
            std::string::npos);
  std::string negative_n = str("ssh-rsa") + str(std::string("\x01\x00\x01", 3)) + str(n.substr(1));
  EXPECT_NE(ParseSshPublicKey("ssh-rsa " + Encode(negative_n)).status().message().find("not a valid RSA"),
            std::string::npos);
}

class SshKeysEngineTest : public EngineOnSqliteTest {
 protected:
  SshKeysEngineTest() : EngineOnSqliteTest(1'800'000'000'000'000, "gpuhub_sshkeys") {}
};

TEST_F(SshKeysEngineTest, KeysArePerAccountUniqueLimitedAndSurviveARestart) {
  OpenEngine();
  auto users = Run<std::pair<std::int64_t, std::int64_t>>([](Txn& txn) {
    auto a = CreateUser(txn, "alice", "h", kRoleCustomer);
    auto b = CreateUser(txn, "bob", "h", kRoleCustomer);
    return Result<std::pair<std::int64_t, std::int64_t>>(std::pair{a->id, b->id});
  });
  const auto [alice, bob] = users;
  auto key = [](int i) { return ParseSshPublicKey(kKeys[i].line).value(); };
  SshKey first = Run<SshKey>([&](Txn& txn) { return AddSshKey(txn, alice, "", key(0)); });
  EXPECT_EQ(first.name, "test@ed25519") << "no name: the comment";
  auto again = engine_->ExecuteSync<SshKey>([&](Txn& txn) { return AddSshKey(txn, alice, "x", key(0)); });
  EXPECT_EQ(again.status().code(), StatusCode::kConflict);
  // Another account may hold the same public key (the same person, two accounts).
  Run<SshKey>([&](Txn& txn) { return AddSshKey(txn, bob, "laptop", key(0)); });
  auto bad_name = engine_->ExecuteSync<SshKey>(
      [&](Txn& txn) { return AddSshKey(txn, alice, "tab\there", key(1)); });
  EXPECT_EQ(bad_name.status().field(), "name");
  // Bob cannot delete Alice's key, and cannot tell it apart from a missing one.
  auto theirs = engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(DeleteSshKey(txn, bob, first.id));
    return 0;
  });
  EXPECT_EQ(theirs.status().code(), StatusCode::kNotFound);
  Run<SshKey>([&](Txn& txn) { return AddSshKey(txn, alice, "work", key(4)); });

  OpenEngine();  // a restart: the keys come back parsed
  auto listed = Run<std::vector<SshKey>>(
      [&](Txn& txn) { return Result<std::vector<SshKey>>(ListSshKeys(txn.state, alice)); });
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].key.fingerprint, kKeys[0].fingerprint);
  EXPECT_EQ(listed[1].name, "work");
  EXPECT_EQ(listed[1].key.bits, 2048);
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(DeleteSshKey(txn, alice, first.id));
    return 0;
  });
  // The limit: kMaxSshKeysPerUser keys per account.
  auto many = engine_->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
    int added = 0;
    for (int i = 0; i < 30; ++i) {
      unsigned char pk[32];
      randombytes_buf(pk, sizeof pk);
      std::string blob = std::string("\0\0\0\x0bssh-ed25519\0\0\0\x20", 19) +
                         std::string(reinterpret_cast<char*>(pk), 32);
      auto r = AddSshKey(txn, bob, "", ParseSshPublicKey("ssh-ed25519 " + Encode(blob)).value());
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
        break;
      }
      ++added;
    }
    return added;
  });
  ASSERT_TRUE(many.ok());
  EXPECT_EQ(*many, 19) << "bob already had one key";
}

}  // namespace
}  // namespace gpuhub::engine
