// The agent's Docker client against the real Docker Engine, where the machine has one: pull a
// small image, create a container from a body built like the agent's (no GPU: this machine has
// none), start it, list it by label, read its stats, stop and remove it. Skipped, saying why, when
// `docker info` fails (no engine, or no permission on its socket) or the image cannot be pulled.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "agent/docker.h"
#include "agent/process.h"

namespace gpuhub::agent {
namespace {

TEST(RealDockerTest, RunsAContainerWithoutGpuThroughTheEngineApi) {
  auto info = RunProcess({"docker", "info", "--format", "{{.ServerVersion}}"});
  if (!info.ok() || info->exit_code != 0) {
    std::string why = !info.ok() ? info.status().message()
                                 : DescribeFailure({"docker info"}, *info);
    GTEST_SKIP() << "no usable Docker engine here (" << why
                 << "): the real-container test is skipped; the fake Docker Engine API of "
                    "tests/agent/agent_e2e_test.cc covers the agent's calls";
  }
  const char* socket = std::getenv("DOCKER_HOST");
  std::string url = socket && std::string(socket).rfind("unix://", 0) == 0
                        ? "unix:" + std::string(socket).substr(7)
                        : "unix:/var/run/docker.sock";
  auto docker = DockerClient::Connect(url);
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  const char* from_env = std::getenv("GPUHUB_TEST_DOCKER_IMAGE");
  const std::string image = from_env && *from_env ? from_env : "busybox:1.36";
  if (!*(*docker)->ImagePresent(image)) {
    Status pulled = (*docker)->PullImage(image);
    if (!pulled.ok()) GTEST_SKIP() << "cannot pull " << image << " (offline?): " << pulled.message();
  }
  const std::string name = "gpuhub-realdocker-test";
  (void)(*docker)->Remove(name);
  nlohmann::json body = {
      {"Image", image},
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
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, name);
  EXPECT_EQ((*listed)[0].state, "running");
  EXPECT_TRUE((*docker)->NetworkTxBytes(*id).ok());
  EXPECT_EQ((*docker)->Create(name, body.dump()).status().code(), StatusCode::kConflict);
  ASSERT_TRUE((*docker)->Stop(*id, 1).ok());
  ASSERT_TRUE((*docker)->Remove(*id).ok());
  EXPECT_TRUE((*docker)->ListByLabel("io.gpuhub.managed", "test")->empty());
}

}  // namespace
}  // namespace gpuhub::agent
