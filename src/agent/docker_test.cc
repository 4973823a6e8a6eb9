#include "agent/docker.h"

#include <gtest/gtest.h>

#include "agent/test_util.h"
#include "agent/testing/fake_docker.h"

namespace gpuhub::agent {
namespace {

TEST(DockerClientTest, SpeaksTheEngineApiOverItsUnixSocket) {
  testing::TempDir dir;
  testing::FakeDocker fake(dir.File("docker.sock"));
  ASSERT_TRUE(fake.Start());
  auto docker = DockerClient::Connect(fake.url());
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  EXPECT_EQ((*docker)->api_version(), "1.43");
  EXPECT_EQ(*(*docker)->ImagePresent("nvidia/cuda:12.4.1-base-ubuntu22.04"), false);
  ASSERT_TRUE((*docker)->PullImage("nvidia/cuda:12.4.1-base-ubuntu22.04").ok());
  EXPECT_EQ(*(*docker)->ImagePresent("nvidia/cuda:12.4.1-base-ubuntu22.04"), true);
  auto pulls = fake.CallsTo("POST", "/images/create");
  ASSERT_EQ(pulls.size(), 1u);
  EXPECT_EQ(pulls[0].query, "fromImage=nvidia%2Fcuda&tag=12.4.1-base-ubuntu22.04");
  fake.FailPulls("private/img:latest", "pull access denied for private/img");
  Status denied = (*docker)->PullImage("private/img");
  EXPECT_NE(denied.message().find("pull access denied"), std::string::npos) << denied.ToString();

  ASSERT_TRUE((*docker)->EnsureIsolatedNetwork("gpuhub").ok());
  ASSERT_TRUE((*docker)->EnsureIsolatedNetwork("gpuhub").ok()) << "there already: left alone";
  EXPECT_EQ(fake.CallsTo("POST", "/networks/create").size(), 1u);
  EXPECT_EQ(fake.Network("gpuhub")["Options"]["com.docker.network.bridge.enable_icc"], "false");

  nlohmann::json body = {{"Image", "nvidia/cuda:12.4.1-base-ubuntu22.04"},
                         {"Labels", {{"io.gpuhub.managed", "true"}, {"io.gpuhub.workload", "lease-1"}}}};
  auto id = (*docker)->Create("gpuhub-lease-1", body.dump());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ((*docker)->Create("gpuhub-lease-1", body.dump()).status().code(), StatusCode::kConflict);
  ASSERT_TRUE((*docker)->Start(*id).ok());
  ASSERT_TRUE((*docker)->Start(*id).ok()) << "304: already running";
  auto listed = (*docker)->ListByLabel("io.gpuhub.managed", "true");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "gpuhub-lease-1");
  EXPECT_EQ((*listed)[0].state, "running");
  EXPECT_EQ((*listed)[0].labels.at("io.gpuhub.workload"), "lease-1");
  EXPECT_TRUE((*docker)->ListByLabel("io.gpuhub.managed", "false")->empty());
  fake.SetTxBytes(*id, 123456789);
  EXPECT_EQ(*(*docker)->NetworkTxBytes(*id), 123456789);
  ASSERT_TRUE((*docker)->Stop(*id, 5).ok());
  ASSERT_TRUE((*docker)->Remove(*id).ok());
  ASSERT_TRUE((*docker)->Remove(*id).ok()) << "removing twice is fine";
  EXPECT_TRUE(fake.Containers().empty());
  // Every call went to a versioned path.
  for (const auto& c : fake.Calls()) EXPECT_TRUE(c.path == "/_ping" || c.path[0] == '/');
  fake.Stop();
  auto gone = (*docker)->ListByLabel("io.gpuhub.managed", "true");
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(DockerClient::Connect("unix:" + dir.File("nothing.sock")).status().code(),
            StatusCode::kUnavailable);
}

TEST(DockerClientTest, APrivateImageIsPulledWithTheRegistryAuthHeader) {
  testing::TempDir dir;
  testing::FakeDocker fake(dir.File("docker.sock"));
  ASSERT_TRUE(fake.Start());
  auto docker = DockerClient::Connect(fake.url());
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  fake.RequireAuth("ghcr.io/acme/train:v2", "carl-bot", "tok-123");
  Status denied = (*docker)->PullImage("ghcr.io/acme/train:v2");
  EXPECT_NE(denied.message().find("unauthorized"), std::string::npos) << denied.ToString();
  const std::string header = RegistryAuthHeader("carl-bot", "tok-123", "ghcr.io");
  // base64url of the JSON Docker decodes (the URL-safe alphabet, padded).
  EXPECT_EQ(header,
            "eyJwYXNzd29yZCI6InRvay0xMjMiLCJzZXJ2ZXJhZGRyZXNzIjoiZ2hjci5pbyIsInVzZXJuYW1lIjoiY2Fy"
            "bC1ib3QifQ==");
  ASSERT_TRUE((*docker)->PullImage("ghcr.io/acme/train:v2", header).ok());
  auto pulls = fake.CallsTo("POST", "/images/create");
  ASSERT_EQ(pulls.size(), 2u);
  EXPECT_EQ(pulls[0].registry_auth, "");
  EXPECT_EQ(pulls[1].registry_auth, header);
  EXPECT_EQ(*(*docker)->ImagePresent("ghcr.io/acme/train:v2"), true);
}

TEST(DockerClientTest, ImageReferencesAndQueryEscaping) {
  EXPECT_EQ(SplitImageRef("nvidia/cuda:12.4.1-base").from_image, "nvidia/cuda");
  EXPECT_EQ(SplitImageRef("nvidia/cuda:12.4.1-base").tag, "12.4.1-base");
  EXPECT_EQ(SplitImageRef("ubuntu").tag, "latest");
  EXPECT_EQ(SplitImageRef("registry:5000/team/img").from_image, "registry:5000/team/img");
  EXPECT_EQ(SplitImageRef("registry:5000/team/img").tag, "latest");
  EXPECT_EQ(SplitImageRef("img@sha256:abcd").from_image, "img@sha256:abcd");
  EXPECT_EQ(SplitImageRef("img@sha256:abcd").tag, "");
  EXPECT_EQ(QueryEscape("{\"label\":[\"a=b\"]}"), "%7B%22label%22%3A%5B%22a%3Db%22%5D%7D");
}

}  // namespace
}  // namespace gpuhub::agent
