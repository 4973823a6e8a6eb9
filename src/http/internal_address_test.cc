#include "http/internal_address.h"

#include <gtest/gtest.h>

namespace gpuhub::http {
namespace {

TEST(InternalAddressTest, PlainAddresses) {
  for (const char* internal :
       {"127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "192.0.0.8", "192.0.2.1",
        "198.18.0.1", "198.51.100.7", "203.0.113.9", "192.88.99.1", "::1", "::", "fe80::1",
        "fd00::1", "fc00::1", "fec0::1", "ff02::1", "100::1", "2001:db8::1", "not-an-address", "",
        "1.2.3.4.5", "fe80::1%1"}) {
    EXPECT_TRUE(IsInternalAddress(internal)) << internal;
  }
  for (const char* external : {"93.184.216.34", "8.8.8.8", "172.32.0.1", "192.169.0.1",
                               "100.128.0.1", "2606:2800:220:1::1", "2a00:1450:4001::200e",
                               "2001:4860:4860::8888", "2001:200::1", "100:0:0:1::1"}) {
    EXPECT_FALSE(IsInternalAddress(external)) << external;
  }
}

// Every IPv6 form that carries an IPv4 address, once with an internal and once with a public
// IPv4 inside: the IPv4 decides (Teredo and local-use NAT64 are refused whatever they carry).
TEST(InternalAddressTest, EmbeddedIPv4DecidesEveryForm) {
  struct Case {
    const char* form;
    const char* internal;  // carries an internal IPv4
    const char* external;  // carries a public IPv4 (nullptr: refused whatever it carries)
  } cases[] = {
      {"mapped ::ffff:a.b.c.d", "::ffff:127.0.0.1", "::ffff:93.184.216.34"},
      {"mapped, hex", "::ffff:7f00:1", "::ffff:5db8:d822"},
      {"mapped, uncompressed", "0:0:0:0:0:ffff:a9fe:a9fe", "0:0:0:0:0:ffff:808:808"},
      {"compatible ::a.b.c.d", "::127.0.0.1", "::93.184.216.34"},
      {"compatible, 10/8 in hex", "::a00:1", "::808:808"},
      {"compatible, metadata", "::169.254.169.254", "::1.1.1.1"},
      {"translated ::ffff:0:a.b.c.d", "::ffff:0:127.0.0.1", "::ffff:0:93.184.216.34"},
      {"translated, hex", "::ffff:0:c0a8:101", "::ffff:0:808:808"},
      {"NAT64 64:ff9b::/96", "64:ff9b::127.0.0.1", "64:ff9b::93.184.216.34"},
      {"NAT64, 10/8 in hex", "64:ff9b::a00:1", "64:ff9b::808:808"},
      {"NAT64, metadata", "64:ff9b::a9fe:a9fe", "64:ff9b::1.1.1.1"},
      {"local-use NAT64 64:ff9b:1::/48", "64:ff9b:1::a00:1", nullptr},
      {"local-use NAT64, public inside", "64:ff9b:1:0:0:0:808:808", nullptr},
      {"local-use NAT64, RFC 6052 /48 layout", "64:ff9b:1:7f00:0:100::", nullptr},
      {"6to4 2002::/16", "2002:7f00:1::1", "2002:5db8:d822::1"},
      {"6to4, 10/8", "2002:a00:1:1::", "2002:808:808:1::"},
      {"6to4, metadata", "2002:a9fe:a9fe::", "2002:101:101::"},
      {"6to4, 192.168", "2002:c0a8:101:ffff:ffff:ffff:ffff:ffff", "2002:c0a9:101::"},
      // Teredo: server 65.54.227.120 (public), client 127.0.0.1 XOR 0xffffffff = 80ff:fffe.
      {"Teredo, internal client", "2001:0:4136:e378:8000:63bf:80ff:fffe", nullptr},
      // Server 10.0.0.1, client 93.184.216.34 -> a247:27dd.
      {"Teredo, internal server", "2001:0:a00:1::a247:27dd", nullptr},
      // Both public: still refused.
      {"Teredo, both public", "2001:0:4136:e378:8000:63bf:a247:27dd", nullptr},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(IsInternalAddress(c.internal)) << c.form << ": " << c.internal;
    if (c.external != nullptr) {
      EXPECT_FALSE(IsInternalAddress(c.external)) << c.form << ": " << c.external;
    }
  }
}

TEST(InternalAddressTest, LiteralHostsAreReadAsTheResolverReadsThem) {
  EXPECT_EQ(LiteralAddress("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(LiteralAddress("[::1]"), "::1");
  EXPECT_EQ(LiteralAddress("::ffff:10.0.0.1"), "::ffff:10.0.0.1");
  EXPECT_EQ(LiteralAddress("2002:7f00:1::1"), "2002:7f00:1::1");
  // The short and numeric IPv4 forms inet_aton accepts and getaddrinfo connects to.
  EXPECT_EQ(LiteralAddress("127.1"), "127.0.0.1");
  EXPECT_EQ(LiteralAddress("2130706433"), "127.0.0.1");
  EXPECT_EQ(LiteralAddress("0x7f000001"), "127.0.0.1");
  EXPECT_EQ(LiteralAddress("0177.0.0.1"), "127.0.0.1");
  EXPECT_EQ(LiteralAddress("10.1"), "10.0.0.1");
  for (const char* name : {"example.com", "localhost", "a.b", "x1", "127.0.0.1.nip.io", ""}) {
    EXPECT_EQ(LiteralAddress(name), std::nullopt) << name;
  }
}

}  // namespace
}  // namespace gpuhub::http
