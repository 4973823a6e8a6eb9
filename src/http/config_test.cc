#include "http/config.h"

#include <gtest/gtest.h>

namespace gpuhub::http {
namespace {

TEST(ConfigTest, ParsesEverySection) {
  auto c = ParseServiceConfig(R"(
[server]
listen = "0.0.0.0:9000"
io_threads = 4
max_body_bytes = 65536
[auth]
argon2_ops_limit = 1
argon2_mem_limit_bytes = 8192
login_failures_per_username = 3
login_free_failures_per_address = 2
login_max_delay_seconds = 60
[payments]
webhook_secret = "s3cret-s3cret-s3cret-s3cret-s3cret"
checkout_base_url = "https://pay.example.com/i/"
)",
                              "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "0.0.0.0");
  EXPECT_EQ(c->port, 9000);
  EXPECT_EQ(c->io_threads, 4);
  EXPECT_EQ(c->max_body_bytes, 65536);
  EXPECT_EQ(c->hashing.ops_limit, 1u);
  EXPECT_EQ(c->hashing.mem_limit_bytes, 8192u);
  EXPECT_EQ(c->login_throttle.failures_per_username, 3);
  EXPECT_EQ(c->login_throttle.window_seconds, 3600);
  EXPECT_EQ(c->login_throttle.free_failures, 2);
  EXPECT_EQ(c->login_throttle.max_delay_seconds, 60);
  EXPECT_EQ(c->webhook_secret, "s3cret-s3cret-s3cret-s3cret-s3cret");
}

TEST(ConfigTest, CuratedImagesReplaceTheBuiltInListAndAreChecked) {
  auto defaults = ParseServiceConfig("", "test.toml");
  ASSERT_TRUE(defaults.ok());
  ASSERT_NE(FindCuratedImage(defaults->agents_images, "pytorch"), nullptr);
  EXPECT_EQ(FindCuratedImage(defaults->agents_images, "vllm")->image, "vllm/vllm-openai:v0.6.3");
  auto c = ParseServiceConfig(R"(
[agents]
registry_key_file = "/var/lib/gpuhub/registry.key"
[[agents.images]]
name = "train"
image = "ghcr.io/acme/train:v2"
description = "Our training image"
sshd = true
[[agents.images]]
name = "cuda"
image = "nvidia/cuda:12.4.1-base-ubuntu22.04"
)",
                              "test.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->agents_images.size(), 2u);
  EXPECT_EQ(c->agents_images[0].name, "train");
  EXPECT_EQ(c->agents_images[0].image, "ghcr.io/acme/train:v2");
  EXPECT_EQ(c->agents_images[0].description, "Our training image");
  EXPECT_TRUE(c->agents_images[0].sshd);
  EXPECT_FALSE(c->agents_images[1].sshd);
  EXPECT_EQ(c->agents_registry_key_file, "/var/lib/gpuhub/registry.key");
  for (const char* bad : {"[[agents.images]]\nname = \"Bad Name\"\nimage = \"ubuntu\"\n",
                          "[[agents.images]]\nname = \"x\"\nimage = \"Not An Image\"\n",
                          "[[agents.images]]\nname = \"x\"\nimage = \"ubuntu\"\nsshd = 1\n",
                          "[[agents.images]]\nname = \"x\"\nimage = \"ubuntu\"\ncolor = 1\n",
                          "[[agents.images]]\nname = \"x\"\nimage = \"ubuntu\"\n"
                          "[[agents.images]]\nname = \"x\"\nimage = \"debian\"\n"}) {
    auto r = ParseServiceConfig(bad, "test.toml");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("test.toml:"), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, RejectsTyposAndBadValuesWithFileAndLine) {
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"[server]\nlisten = 8080\n", "test.toml:2: server.listen must be a string"},
      {"[server]\nio_thread = 2\n", "test.toml:2: server.io_thread is not a known setting"},
      {"[auth]\nargon2_mem_limit_bytes = 10\n", "must be between 8192"},
      {"[payment]\nwebhook_secret = \"x\"\n", "is not a known section"},
      {"[payments]\nwebhook_secret = \"x\"\n",
       "test.toml:2: payments.webhook_secret is 1 bytes; a webhook secret must be at least 32 "
       "bytes"},
      {"[payments]\nwebhook_secret = \"0123456789abcdef0123456789abcde\"\n", "is 31 bytes"},
      {"[server\n", "test.toml:1:"},
      {"[server]\nlisten = \"localhost\"\n", "HOST:PORT"},
      {"[server]\nmax_connections = 100\nconnections_reserved_for_new_addresses = 100\n",
       "connections_reserved_for_new_addresses must be below max_connections (100)"},
      {"[server]\nheader_timeout_seconds = 20\n",
       "header_timeout_seconds must not exceed read_timeout_seconds (15)"},
      {"[auth]\nlogin_max_delay_seconds = 600\nlogin_username_window_seconds = 600\n",
       "login_max_delay_seconds must be shorter than auth.login_username_window_seconds"},
  };
  for (const auto& c : cases) {
    auto r = ParseServiceConfig(c.text, "test.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, CephRegionsAreReadWithEverySettingAndChecked) {
  auto none = ParseServiceConfig("", "test.toml");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->storage_ceph_regions.empty()) << "no Ceph: volumes are billing records only";
  EXPECT_EQ(none->storage_ceph_ready_timeout_seconds, 600);
  auto r = ParseServiceConfig(
      "[storage]\nceph_ready_timeout_seconds = 120\n[storage.regions.iad-1]\n"
      "ceph_conf = \"/etc/ceph/c.conf\"\nceph_keyring = \"/etc/ceph/k\"\ncephfs = \"vols\"\n"
      "monitors = \"10.0.0.1:6789,10.0.0.2:6789\"\n",
      "test.toml");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->storage_ceph_ready_timeout_seconds, 120);
  ASSERT_EQ(r->storage_ceph_regions.size(), 1u);
  const CephRegionConfig& c = r->storage_ceph_regions[0];
  EXPECT_EQ(c.region, "IAD-1");
  EXPECT_EQ(c.ceph_conf, "/etc/ceph/c.conf");
  EXPECT_EQ(c.ceph_name, "client.admin");
  EXPECT_EQ(c.ceph_keyring, "/etc/ceph/k");
  EXPECT_EQ(c.cephfs, "vols");
  EXPECT_EQ(c.monitors, "10.0.0.1:6789,10.0.0.2:6789");
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"[storage.regions.IAD-1]\nceph_conf = \"c\"\ncephfs = \"v\"\nceph_keyring = \"k\"\n",
       "storage.regions.IAD-1.monitors must be set"},
      {"[storage.regions.IAD-1]\nmonitor = \"m\"\n",
       "storage.regions.IAD-1.monitor is not a known"},
      {"[storage.regions.\"a b\"]\nmonitors = \"m\"\n", "named by a region code"},
      {"[storage]\nceph_ready_timeout_seconds = 1\n", "must be between 10"},
  };
  for (const auto& k : cases) {
    auto bad = ParseServiceConfig(k.text, "test.toml");
    ASSERT_FALSE(bad.ok()) << k.text;
    EXPECT_NE(bad.status().message().find(k.message), std::string::npos)
        << bad.status().message();
  }
}

TEST(ConfigTest, MaxConnectionsPerAddressDefaultsZeroMeansNoCapAndBadValuesAreRefused) {
  auto defaults = ParseServiceConfig("", "test.toml");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->max_connections_per_address, 256);
  auto set = ParseServiceConfig("[server]\nmax_connections_per_address = 3\n", "test.toml");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->max_connections_per_address, 3);
  // Behind a reverse proxy every client has the proxy's address: 0 turns the cap off.
  auto off = ParseServiceConfig("[server]\nmax_connections_per_address = 0\n", "test.toml");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->max_connections_per_address, 0);
  struct Case {
    const char* text;
    const char* message;
  } cases[] = {
      {"[server]\nmax_connections_per_address = -1\n",
       "test.toml:2: server.max_connections_per_address must be between 0 and 1000000"},
      {"[server]\nmax_connections_per_address = 1000001\n",
       "test.toml:2: server.max_connections_per_address must be between 0 and 1000000"},
      {"[server]\nmax_connections_per_address = 9223372036854775807\n",
       "server.max_connections_per_address must be between 0 and 1000000"},
      {"[server]\nmax_connections_per_address = \"256\"\n",
       "test.toml:2: server.max_connections_per_address must be a whole number"},
      {"[server]\nmax_connections_per_address = 2.5\n",
       "server.max_connections_per_address must be a whole number"},
      {"[server]\nmax_connection_per_address = 3\n",
       "server.max_connection_per_address is not a known setting"},
  };
  for (const auto& c : cases) {
    auto r = ParseServiceConfig(c.text, "test.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

TEST(ConfigTest, ParsesListenAddresses) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseListen("127.0.0.1:0", &host, &port).ok());
  EXPECT_EQ(port, 0);
  ASSERT_TRUE(ParseListen("[::1]:8080", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_FALSE(ParseListen("127.0.0.1:70000", &host, &port).ok());
  EXPECT_FALSE(ParseListen("127.0.0.1:http", &host, &port).ok());
}

}  // namespace
}  // namespace gpuhub::http
