#include "http/address_filter.h"

#include <gtest/gtest.h>

namespace gpuhub::http {
namespace {

TEST(AddressFilter, MatchesNetworksOfBothFamilies) {
  auto filter =
      AddressFilter::Parse({"127.0.0.0/8", "::1/128", "10.1.2.3", "fd00::/8", "192.168.4.0/22"});
  ASSERT_TRUE(filter.ok()) << filter.status().message();
  for (const char* yes : {"127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "10.1.2.3",
                          "fd12:3456::1", "192.168.7.255", "192.168.4.0"}) {
    EXPECT_TRUE(filter->Allows(yes)) << yes;
  }
  for (const char* no : {"128.0.0.1", "10.1.2.4", "::2", "fe80::1", "192.168.8.0", "", "localhost",
                         "127.0.0.1:80", "::ffff:10.1.2.4"}) {
    EXPECT_FALSE(filter->Allows(no)) << no;
  }
}

TEST(AddressFilter, AnEmptyListAllowsNobodyAndZeroPrefixesAllowEveryone) {
  auto none = AddressFilter::Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->Allows("127.0.0.1"));
  auto all = AddressFilter::Parse({"0.0.0.0/0", "::/0"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Allows("203.0.113.9"));
  EXPECT_TRUE(all->Allows("2001:db8::1"));
}

TEST(AddressFilter, BadNetworksAreRefusedByName) {
  for (const char* bad : {"127.0.0.0/33", "::1/129", "10.0.0.1/8", "example.com", "10.0.0.0/",
                          "10.0.0.0/8x", "10.0.0.0/-1", "", "fd00::1/8"}) {
    auto r = AddressFilter::Parse({bad});
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok() && *bad) {
      EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
    }
  }
}

}  // namespace
}  // namespace gpuhub::http
