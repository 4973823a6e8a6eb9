// SHA-1 against FIPS 180's examples, HMAC-SHA-1 against RFC 2202, HOTP against RFC 4226
// Appendix D, TOTP against RFC 6238 Appendix B, base32 against RFC 4648 section 10.
#include "core/totp.h"

#include <gtest/gtest.h>

#include <string>

#include "core/sha1.h"

namespace gpuhub {
namespace {

std::string Hex(const Sha1Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (auto b : d) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

const std::string kRfcSeed = "12345678901234567890";  // RFC 6238's SHA-1 seed, 20 ASCII bytes

TEST(Sha1, Fips180Examples) {
  EXPECT_EQ(Hex(Sha1("")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  EXPECT_EQ(Hex(Sha1("abc")), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(Hex(Sha1("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  EXPECT_EQ(Hex(Sha1(std::string(1'000'000, 'a'))), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  // 55, 56 and 64 bytes: the padding's edges (one block, two blocks).
  EXPECT_EQ(Hex(Sha1(std::string(55, 'a'))), "c1c8bbdc22796e28c0e15163d20899b65621d65a");
  EXPECT_EQ(Hex(Sha1(std::string(56, 'a'))), "c2db330f6083854c99d4b5bfb6e8f29f201be699");
  EXPECT_EQ(Hex(Sha1(std::string(64, 'a'))), "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST(HmacSha1, Rfc2202) {
  EXPECT_EQ(Hex(HmacSha1(std::string(20, '\x0b'), "Hi There")),
            "b617318655057264e28bc0b6fb378c8ef146be00");
  EXPECT_EQ(Hex(HmacSha1("Jefe", "what do ya want for nothing?")),
            "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79");
  // A key longer than the block is hashed first (case 6).
  EXPECT_EQ(Hex(HmacSha1(std::string(80, '\xaa'),
                         "Test Using Larger Than Block-Size Key - Hash Key First")),
            "aa4ae5e15272d00e95705637ce8a3b55ed402112");
}

TEST(Hotp, Rfc4226AppendixD) {
  const char* expected[] = {"755224", "287082", "359152", "969429", "338314",
                            "254676", "287922", "162583", "399871", "520489"};
  for (int i = 0; i < 10; ++i) EXPECT_EQ(HotpCode(kRfcSeed, i), expected[i]) << i;
}

TEST(Totp, Rfc6238AppendixBSha1) {
  struct Vector {
    std::int64_t time;
    const char* code8;
  };
  const Vector vectors[] = {{59, "94287082"},         {1111111109, "07081804"},
                            {1111111111, "14050471"}, {1234567890, "89005924"},
                            {2000000000, "69279037"}, {20000000000, "65353130"}};
  for (const auto& v : vectors) {
    EXPECT_EQ(TotpCode(kRfcSeed, v.time, 8), v.code8) << v.time;
    // Six digits are the last six of the eight (the same number, mod 10^6).
    EXPECT_EQ(TotpCode(kRfcSeed, v.time), std::string(v.code8).substr(2)) << v.time;
  }
  EXPECT_EQ(TotpStep(59), 1);
  EXPECT_EQ(TotpStep(1111111109), 0x23523EC);
  EXPECT_EQ(TotpStep(20000000000), 0x27BC86AA);
}

TEST(Totp, AcceptsOneStepEitherSideAndNoFurther) {
  const std::int64_t t = 1234567890;  // step 41152263
  const std::int64_t step = TotpStep(t);
  for (std::int64_t d : {-1, 0, 1}) {
    std::string code = TotpCode(kRfcSeed, t + d * kTotpStepSeconds);
    EXPECT_EQ(MatchTotp(kRfcSeed, code, t, 0), step + d) << d;
  }
  for (std::int64_t d : {-2, 2}) {
    std::string code = TotpCode(kRfcSeed, t + d * kTotpStepSeconds);
    EXPECT_EQ(MatchTotp(kRfcSeed, code, t, 0), std::nullopt) << d;
  }
}

TEST(Totp, ReplayOfAUsedStepIsRefused) {
  const std::int64_t t = 1234567890;
  std::string code = TotpCode(kRfcSeed, t);
  auto used = MatchTotp(kRfcSeed, code, t, 0);
  ASSERT_TRUE(used);
  EXPECT_EQ(MatchTotp(kRfcSeed, code, t, *used), std::nullopt);
  // Nor an older one still inside the window, once a later step was used.
  std::string previous = TotpCode(kRfcSeed, t - kTotpStepSeconds);
  EXPECT_EQ(MatchTotp(kRfcSeed, previous, t, *used), std::nullopt);
  // The next step's code is still good.
  std::string next = TotpCode(kRfcSeed, t + kTotpStepSeconds);
  EXPECT_EQ(MatchTotp(kRfcSeed, next, t + kTotpStepSeconds, *used), *used + 1);
}

TEST(Totp, MalformedCodesNeverMatch) {
  const std::int64_t t = 59;
  EXPECT_EQ(MatchTotp(kRfcSeed, "94287082", t, 0), std::nullopt);  // 8 digits
  EXPECT_EQ(MatchTotp(kRfcSeed, "28708", t, 0), std::nullopt);
  EXPECT_EQ(MatchTotp(kRfcSeed, "28708a", t, 0), std::nullopt);
  EXPECT_EQ(MatchTotp(kRfcSeed, "", t, 0), std::nullopt);
  EXPECT_EQ(MatchTotp(kRfcSeed, "287082", t, 0), 1);
}

TEST(Base32, Rfc4648Vectors) {
  const std::pair<const char*, const char*> vectors[] = {{"", ""},
                                                         {"f", "MY"},
                                                         {"fo", "MZXQ"},
                                                         {"foo", "MZXW6"},
                                                         {"foob", "MZXW6YQ"},
                                                         {"fooba", "MZXW6YTB"},
                                                         {"foobar", "MZXW6YTBOI"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base32Encode(plain), encoded);
    auto decoded = Base32Decode(encoded);
    ASSERT_TRUE(decoded.ok()) << encoded;
    EXPECT_EQ(*decoded, plain);
  }
  EXPECT_EQ(Base32Encode(kRfcSeed), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
  // As people type it: lower case, spaces, padding.
  EXPECT_EQ(*Base32Decode("mzxw 6ytb oi======"), "foobar");
  EXPECT_FALSE(Base32Decode("MZXW1").ok());  // '1' is not in the alphabet
  EXPECT_FALSE(Base32Decode("M").ok());      // no encoding is 1 symbol long
}

TEST(Totp, OtpauthUriCarriesTheParameters) {
  EXPECT_EQ(OtpauthUri("gpuhub", "kate smith", "GEZDGNBV"),
            "otpauth://totp/gpuhub:kate%20smith?secret=GEZDGNBV&issuer=gpuhub&algorithm=SHA1&"
            "digits=6&period=30");
}

}  // namespace
}  // namespace gpuhub
