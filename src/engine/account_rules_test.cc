#include "engine/account_rules.h"

#include <gtest/gtest.h>

#include <string>

#include "engine/accounts.h"
#include "engine/limits.h"

namespace gpuhub::engine {
namespace {

void ExpectRefused(std::string_view password, const std::string& message) {
  Status s = ValidatePassword(password);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << password << "' was accepted";
  EXPECT_NE(s.message().find(message), std::string::npos)
      << "'" << password << "': " << s.message();
}

TEST(PasswordRulesTest, TheIssuesExamplesAreRefused) {
  ExpectRefused("password12", "most common");
  ExpectRefused("          ", "two different characters");
  ExpectRefused("aaaaaaaaaa", "two different characters");
}

TEST(PasswordRulesTest, ThePasswordsTheTestsAndDocsUseStayValid) {
  for (const char* ok : {"long enough pw", "correct horse battery staple", "correct horse battery",
                         "purple monkey dishwasher", "admin password 123", "another password 1",
                         "e2e admin password", "load admin password", "load user password",
                         "Sup3r-Secret-Passw0rd-xyzzy", "8472910365"}) {
    EXPECT_TRUE(ValidatePassword(ok).ok()) << ok << ": " << ValidatePassword(ok).message();
  }
}

TEST(PasswordRulesTest, LengthCountsCharactersNotBytes) {
  // Nine two-byte letters are 18 bytes but nine characters: refused. Ten are enough.
  const std::string e_acute = "\xc3\xa9", euro = "\xe2\x82\xac", emoji = "\xf0\x9f\x94\x91";
  std::string nine, ten;
  for (int i = 0; i < 9; ++i) nine += (i % 2 ? e_acute : euro);
  ten = nine + emoji;
  EXPECT_EQ(PasswordCharacters(nine).value(), 9u);
  EXPECT_EQ(PasswordCharacters(ten).value(), 10u);
  ExpectRefused(nine, "at least 10 characters");
  EXPECT_TRUE(ValidatePassword(ten).ok()) << ValidatePassword(ten).message();
  // A combining accent counts with its letter, as the NFC form would: "e" + U+0301 is one.
  std::string decomposed;
  for (char c : std::string("abcdefghi")) decomposed += std::string(1, c) + "\xcc\x81";
  EXPECT_EQ(PasswordCharacters(decomposed).value(), 9u);
  ExpectRefused(decomposed, "at least 10 characters");
  // The byte bound stays a byte bound.
  std::string long_text;  // 256 four-byte characters: exactly the 1024 bytes allowed
  for (int i = 0; i < 256; ++i) long_text += i % 2 ? emoji : "\xf0\x9f\x94\x92";
  ASSERT_EQ(long_text.size(), kMaxPasswordBytes);
  EXPECT_TRUE(ValidatePassword(long_text).ok()) << ValidatePassword(long_text).message();
  ExpectRefused(long_text + "x", "at most 1024 bytes");
}

TEST(PasswordRulesTest, TextThatIsNotUtf8IsRefused) {
  for (const std::string& bad : {std::string("abcdefghij\xff"),          // not a UTF-8 byte
                                 std::string("abcdefghij\xc3"),          // truncated
                                 std::string("abcdefghij\x80"),          // stray continuation
                                 std::string("abcdefghij\xc0\xaf"),      // overlong '/'
                                 std::string("abcdefghij\xe0\x80\xaf"),  // overlong '/'
                                 std::string("abcdefghij\xed\xa0\x80"),  // surrogate U+D800
                                 std::string("abcdefghij\xf4\x90\x80\x80")}) {  // > U+10FFFF
    ExpectRefused(bad, "valid UTF-8");
    EXPECT_FALSE(PasswordCharacters(bad).ok());
  }
  ExpectRefused(std::string("abcdefghij\0k", 12), "NUL");
}

TEST(PasswordRulesTest, OneRepeatedCharacterOrOnlySpacesIsRefused) {
  for (const std::string& weak :
       {std::string(12, 'x'), std::string("AaAaAaAaAaAa"), std::string("a a a a a a a a"),
        std::string("\t\t\t\t\t\t\t\t\t\t"),
        // Ten no-break spaces, ten ideographic spaces, ten zero-width spaces.
        [] {
          std::string s;
          for (int i = 0; i < 10; ++i) s += "\xc2\xa0";
          return s;
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10; ++i) s += "\xe3\x80\x80";
          return s;
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10; ++i) s += "\xe2\x80\x8b";
          return s;
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10; ++i) s += "\xc3\xa9";
          return s;
        }()}) {
    ExpectRefused(weak, "two different characters");
  }
  EXPECT_TRUE(ValidatePassword("ab ab ab ab ab").ok());
}

TEST(PasswordRulesTest, CommonPasswordsAreRefusedWhateverTheirCase) {
  // Entries of the list that are long enough to pass every other rule, and shorter ones with the
  // digits and punctuation people add.
  for (const char* common : {"1234567890", "qwertyuiop", "QwertyUIOP", "basketball", "Password12",
                             "password1234", "monkey2024!", "Dragon1234567", "iloveyou!!!!"}) {
    EXPECT_TRUE(IsCommonPassword(common)) << common;
    ExpectRefused(common, "most common");
  }
  // Not a listed word with digits after it: fine.
  for (const char* fine : {"password is long", "12monkeys pass", "monkeywrench", "x1234567890"}) {
    EXPECT_FALSE(IsCommonPassword(fine)) << fine;
  }
}

TEST(PasswordRulesTest, TheListLoaderSkipsItsHeader) {
  auto list =
      ParsePasswordList("# header\n# Licence: MIT\n\nPassword\r\nqwerty\n#not-a-password\nabc");
  EXPECT_EQ(list.size(), 3u);
  EXPECT_TRUE(list.count("password"));
  EXPECT_TRUE(list.count("qwerty"));
  EXPECT_TRUE(list.count("abc"));
  EXPECT_FALSE(list.count("# header"));
  // The embedded list: its header did not become entries, and its first and last entries are in.
  EXPECT_TRUE(IsCommonPassword("password"));
  EXPECT_TRUE(IsCommonPassword("eyphed"));
  EXPECT_FALSE(
      IsCommonPassword("# licence: mit. copyright (c) 2025 daniel miessler (seclists); "
                       "the licence text follows."));
}

TEST(ReservedUsernameTest, StaffNamesAndTheirVariantsAreReserved) {
  for (const char* name :
       {"admin", "administrator", "root", "support", "billing", "security", "gpuhub", "help",
        "abuse", "postmaster", "hostmaster", "webmaster", "system", "staff", "official",
        "moderator", "operator", "owner", "payments", "sales", "info", "noc", "api", "www", "mail",
        // Variants: case (folded by CanonicalUsername), separators, digits around and inside.
        "Admin", "ADMINISTRATOR", "ad-min", "ad.min", "admin_", "admin2", "2admin", "adm1n", "r00t",
        "supp0rt", "h3lp", "5ales", "gpu-hub", "gpu_hub", "9puhub", "the-gpuhub", "gpuhubsupport",
        "support-team", "john.admin", "billing_dept", "official.nvidia"}) {
    auto canonical = CanonicalUsername(name);
    ASSERT_TRUE(canonical.ok()) << name;
    Status s = CheckUsernameNotReserved(*canonical);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << name << " is not reserved";
    EXPECT_NE(s.message().find("reserved"), std::string::npos) << s.message();
  }
}

TEST(ReservedUsernameTest, OrdinaryNamesAreFree) {
  for (const char* name :
       {"alice",      "bob",       "carol",         "ada",       "henry",  "early_bird",
        "loaduser",   "victim",    "payer",         "badminton", "rooted", "helper",
        "acme-sales", "mail.bob",  "informatics",   "apiary",    "12345",  "dora",
        "mallory",    "bootstrap", "salesforce-fan"}) {
    auto canonical = CanonicalUsername(name);
    ASSERT_TRUE(canonical.ok()) << name;
    EXPECT_TRUE(CheckUsernameNotReserved(*canonical).ok())
        << name << ": " << CheckUsernameNotReserved(*canonical).message();
  }
}

}  // namespace
}  // namespace gpuhub::engine
