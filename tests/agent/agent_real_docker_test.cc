// The agent's Docker client alone against a real Docker engine: this binary's own throwaway
// dockerd (scripts/docker-test-env.sh, as the real-engine suite) and its sshd image built from
// Debian packages. Creates a container from a body built like the agent's (no GPU device request:
// the end-to-end suite covers that path through the stand-in hook), starts it, lists it by label,
// refuses network counters it has not got, is refused a second create of the same name (409,
// which the reconciler reads as "already there"), stops and removes it; then on the agent's
// isolated bridge counts the bytes a container sends. Skipped, loudly, only where no
// dockerd can start.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/container.h"
#include "agent/docker.h"
#include "real_engine_fixture.h"

namespace gpuhub::testing {
namespace {

class RealDockerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { StartEngine(); }
  static void TearDownTestSuite() { StopEngine(); }
  void SetUp() override {
    if (!engine->skip.empty()) {
      GTEST_SKIP() << "\n*** NO REAL DOCKER ENGINE: the Docker client test is SKIPPED ***\n"
                   << engine->skip;
    }
    ASSERT_TRUE(engine->error.empty()) << engine->error;
  }
};

TEST_F(RealDockerTest, RunsAContainerWithoutGpuThroughTheEngineApi) {
  // DOCKER_HOST form "unix:///path" -> the client's "unix:/path".
  ASSERT_EQ(engine->host.rfind("unix://", 0), 0u) << engine->host;
  auto docker = agent::DockerClient::Connect("unix:" + engine->host.substr(7));
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  auto present = (*docker)->ImagePresent(engine->image);
  ASSERT_TRUE(present.ok()) << present.status().ToString();
  ASSERT_TRUE(*present) << engine->image;
  auto absent = (*docker)->ImagePresent("gpuhub-no-such-image:never");
  ASSERT_TRUE(absent.ok()) << absent.status().ToString();
  EXPECT_FALSE(*absent);

  const std::string name = "gpuhub-realdocker-test";
  nlohmann::json body = {
      {"Image", engine->image},
      {"Cmd", {"sleep", "60"}},
      {"Labels", {{"io.gpuhub.managed", "test"}, {"io.gpuhub.workload", "realdocker-test"}}},
      {"HostConfig",
       {{"Privileged", false},
        {"CapDrop", {"ALL"}},
        {"SecurityOpt", {"no-new-privileges:true"}},
        {"PidsLimit", 64}}}};
  auto id = (*docker)->Create(name, body.dump());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_TRUE((*docker)->Start(*id).ok());
  auto listed = (*docker)->ListByLabel("io.gpuhub.managed", "test");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, name);
  EXPECT_EQ((*listed)[0].state, "running");
  EXPECT_EQ(Docker({"inspect", "--format", "{{.HostConfig.PidsLimit}}", *id}), "64");
  // This dockerd has no default bridge: a container nobody put on a network has no counters,
  // which is refused rather than read as 0 (a 0 would look like a counter reset to the egress
  // meter and count the next sample again in full).
  EXPECT_EQ((*docker)->NetworkTxBytes(*id).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*docker)->Create(name, body.dump()).status().code(), StatusCode::kConflict);
  ASSERT_TRUE((*docker)->Stop(*id, 1).ok());
  ASSERT_TRUE((*docker)->Remove(*id).ok());
  auto after = (*docker)->ListByLabel("io.gpuhub.managed", "test");
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->empty());
  EXPECT_EQ(Docker({"ps", "-aq", "--filter", "name=" + name}), "");

  // On the agent's isolated bridge (made once: a second call finds it) the counters are real:
  // 256 KiB sent to an address nobody answers grow tx_bytes by at least that.
  ASSERT_TRUE((*docker)->EnsureIsolatedNetwork(agent::kNetworkName).ok());
  ASSERT_TRUE((*docker)->EnsureIsolatedNetwork(agent::kNetworkName).ok());
  EXPECT_EQ(
      Docker({"network", "inspect", "--format",
              "{{index .Options \"com.docker.network.bridge.enable_icc\"}}", agent::kNetworkName}),
      "false");
  body["HostConfig"]["NetworkMode"] = agent::kNetworkName;
  auto on_net = (*docker)->Create(name, body.dump());
  ASSERT_TRUE(on_net.ok()) << on_net.status().ToString();
  ASSERT_TRUE((*docker)->Start(*on_net).ok());
  auto before = (*docker)->NetworkTxBytes(*on_net);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  std::string error;
  Docker({"exec", *on_net, "bash", "-c",
          "head -c 262144 /dev/zero > /dev/udp/10.213.255.254/9 || true"},
         &error);
  ASSERT_TRUE(error.empty()) << error;
  auto sent = (*docker)->NetworkTxBytes(*on_net);
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_GE(*sent - *before, 262144) << *before << " -> " << *sent;
  ASSERT_TRUE((*docker)->Remove(*on_net).ok()) << "a running container is removed by force";
  EXPECT_EQ(Docker({"ps", "-aq", "--filter", "name=" + name}), "");
}

}  // namespace
}  // namespace gpuhub::testing
