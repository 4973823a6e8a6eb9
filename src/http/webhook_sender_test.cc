#include "http/webhook_sender.h"

#include <gtest/gtest.h>

namespace gpuhub::http {
namespace {

TEST(WebhookSenderTest, TheSignatureIsHmacSha256OfTimestampDotBody) {
  // openssl: printf '%s' '1767225600.{"id":1}' | openssl dgst -sha256 -hmac whsec_test
  EXPECT_EQ(WebhookSignatureHeader("whsec_test", 1767225600, "{\"id\":1}"),
            "t=1767225600,v1=c288d7ec0b1747de22e35fbdbabba9772c8e0d64b7db67e546bc92b86c005ab8");
}

TEST(WebhookSenderTest, InternalAddressesAreRecognised) {
  for (const char* internal :
       {"127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254",
        "100.64.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
        "fd00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "not-an-address"}) {
    EXPECT_TRUE(IsInternalAddress(internal)) << internal;
  }
  for (const char* external : {"93.184.216.34", "8.8.8.8", "172.32.0.1", "192.169.0.1",
                               "2606:2800:220:1::1", "::ffff:93.184.216.34"}) {
    EXPECT_FALSE(IsInternalAddress(external)) << external;
  }
}

}  // namespace
}  // namespace gpuhub::http
