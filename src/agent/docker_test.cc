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
  EXPECT_EQ((*docker)->api_version(), "1.41") << "Debian's engine 20.10.24";
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

// What moby v20.10.24 answers where the old fake did not: the agent's client keeps the code and
// the daemon's words.
TEST(DockerClientTest, TheRealEnginesRefusalsKeepTheirCodeAndWords) {
  testing::TempDir dir;
  testing::FakeDocker fake(dir.File("docker.sock"));
  ASSERT_TRUE(fake.Start());
  auto docker = DockerClient::Connect(fake.url());
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  fake.AddImage("img:1");
  ASSERT_TRUE((*docker)->EnsureIsolatedNetwork("gpuhub").ok());
  auto body = [](std::int64_t nano_cpus) {
    return nlohmann::json{{"Image", "img:1"},
                          {"Labels", {{"io.gpuhub.managed", "true"}}},
                          {"HostConfig",
                           {{"NanoCpus", nano_cpus},
                            {"NetworkMode", "gpuhub"},
                            {"SecurityOpt", {"no-new-privileges"}},
                            {"RestartPolicy", {{"Name", "unless-stopped"}}},
                            {"DeviceRequests",
                             {{{"Driver", "nvidia"}, {"DeviceIDs", {"GPU-1"}},
                               {"Capabilities", {{"gpu"}}}}}}}}}
        .dump();
  };
  // More CPUs than the daemon has: 400 with its words.
  fake.SetCpus(2);
  auto big = (*docker)->Create("gpuhub-lease-1", body(8'000'000'000));
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(big.status().message(),
            "create container gpuhub-lease-1: Docker answered 400: Range of CPUs is from 0.01 to "
            "2.00, as there are only 2 CPUs available");
  auto id = (*docker)->Create("gpuhub-lease-1", body(2'000'000'000));
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_TRUE(fake.DaemonLog().empty()) << "the bare no-new-privileges logs no deprecation";

  // No nvidia driver registered (no nvidia-container-runtime-hook on dockerd's PATH): 500.
  fake.SetNvidiaDriver(false);
  Status no_driver = (*docker)->Start(*id);
  EXPECT_EQ(no_driver.code(), StatusCode::kUnavailable);
  EXPECT_EQ(no_driver.message(), "start container " + id->substr(0, 12) +
                                     ": Docker answered 500: could not select device driver "
                                     "\"nvidia\" with capabilities: [[gpu]]");
  fake.SetNvidiaDriver(true);
  fake.FailPrestartHook(
      "nvidia-container-cli: initialization error: nvml error: driver not loaded");
  Status hook = (*docker)->Start(*id);
  EXPECT_EQ(hook.code(), StatusCode::kUnavailable);
  EXPECT_NE(hook.message().find("error running hook #0: error running hook: exit status 1, "
                                "stdout: , stderr: nvidia-container-cli: initialization error"),
            std::string::npos)
      << hook.message();
  EXPECT_EQ(fake.Containers()[0].state, "created") << "a failed start leaves it created";
  fake.FailPrestartHook("");
  ASSERT_TRUE((*docker)->Start(*id).ok());

  // Paused, dead, removing: 409, and Docker's state in the listing.
  fake.SetState(*id, "paused");
  Status paused = (*docker)->Start(*id);
  EXPECT_EQ(paused.code(), StatusCode::kConflict);
  EXPECT_NE(paused.message().find("cannot start a paused container, try unpause instead"),
            std::string::npos);
  auto listed = (*docker)->ListByLabel("io.gpuhub.managed", "true");
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].state, "paused");
  EXPECT_EQ((*listed)[0].status, "Up Less than a second (Paused)");
  fake.SetState(*id, "dead");
  EXPECT_EQ((*docker)->Start(*id).code(), StatusCode::kConflict);
  fake.SetState(*id, "removing");
  Status removing = (*docker)->Start(*id);
  EXPECT_NE(removing.message().find("container is marked for removal and cannot be started"),
            std::string::npos);
  EXPECT_EQ((*docker)->Remove(*id).code(), StatusCode::kConflict) << "removal already in progress";

  // It exits by itself: under unless-stopped Docker restarts it; meanwhile the stats have no
  // `networks`, which is no measurement (not a counter reset to 0).
  fake.SetState(*id, "running");
  fake.SetTxBytes(*id, 1000);
  EXPECT_EQ(*(*docker)->NetworkTxBytes(*id), 1000);
  ASSERT_TRUE(fake.Exit(*id, 137));
  EXPECT_EQ(fake.Containers()[0].state, "restarting");
  EXPECT_EQ((*docker)->ListByLabel("io.gpuhub.managed", "true")->at(0).status,
            "Restarting (137) Less than a second ago");
  auto stopped = (*docker)->NetworkTxBytes(*id);
  EXPECT_EQ(stopped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*docker)->Start(*id).ok()) << "304: Docker is restarting it";
  ASSERT_TRUE(fake.FinishRestart(*id));
  EXPECT_EQ(*(*docker)->NetworkTxBytes(*id), 0) << "a restarted container counts from zero";
  fake.Stop();
}

TEST(DockerClientTest, NamedVolumesOutliveTheirContainerUntilRemoved) {
  testing::TempDir dir;
  testing::FakeDocker fake(dir.File("docker.sock"));
  ASSERT_TRUE(fake.Start());
  auto docker = DockerClient::Connect(fake.url());
  ASSERT_TRUE(docker.ok());
  fake.AddImage("img:1");
  nlohmann::json labels = {{"io.gpuhub.managed", "true"}, {"io.gpuhub.workload", "rental-7"}};
  nlohmann::json body = {
      {"Image", "img:1"},
      {"HostConfig",
       {{"Mounts",
         {{{"Type", "volume"},
           {"Source", "gpuhub-rental-7-0"},
           {"Target", "/data/nvme0"},
           {"VolumeOptions",
            {{"Labels", labels},
             {"DriverConfig",
              {{"Name", "local"},
               {"Options", {{"type", "ext4"}, {"device", "/dev/mapper/rental-7-0"}}}}}}}}}}}}};
  auto id = (*docker)->Create("gpuhub-rental-7", body.dump());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_EQ(fake.Volumes().count("gpuhub-rental-7-0"), 1u);
  EXPECT_EQ(fake.Volumes()["gpuhub-rental-7-0"].options["device"], "/dev/mapper/rental-7-0");
  // A disk that does not mount fails the start with moby's words.
  fake.FailMounts("/dev/mapper/rental-7-0", "no such file or directory");
  Status mount = (*docker)->Start(*id);
  EXPECT_EQ(mount.message(),
            "start container " + id->substr(0, 12) +
                ": Docker answered 500: error while mounting volume "
                "'/var/lib/docker/volumes/gpuhub-rental-7-0/_data': failed to mount local volume: "
                "mount /dev/mapper/rental-7-0:/var/lib/docker/volumes/gpuhub-rental-7-0/_data: no "
                "such file or directory");
  EXPECT_TRUE((*docker)->UnusedVolumes("io.gpuhub.managed", "true")->empty()) << "in use";
  Status in_use = (*docker)->RemoveVolume("gpuhub-rental-7-0");
  EXPECT_EQ(in_use.code(), StatusCode::kConflict);
  EXPECT_NE(in_use.message().find("volume is in use - [" + *id + "]"), std::string::npos);
  ASSERT_TRUE((*docker)->Remove(*id).ok());
  EXPECT_EQ(fake.Volumes().count("gpuhub-rental-7-0"), 1u) << "v=1 keeps named volumes";
  EXPECT_EQ(*(*docker)->UnusedVolumes("io.gpuhub.managed", "true"),
            std::vector<std::string>{"gpuhub-rental-7-0"});
  ASSERT_TRUE((*docker)->RemoveVolume("gpuhub-rental-7-0").ok());
  ASSERT_TRUE((*docker)->RemoveVolume("gpuhub-rental-7-0").ok()) << "gone already is fine";
  EXPECT_TRUE(fake.Volumes().empty());
  EXPECT_TRUE((*docker)->UnusedVolumes("io.gpuhub.managed", "true")->empty());
  fake.Stop();
}

TEST(DockerClientTest, ADaemonOlderThanTheRequestSaysSo) {
  testing::TempDir dir;
  testing::FakeDocker fake(dir.File("docker.sock"));
  ASSERT_TRUE(fake.Start());
  auto client = net::Client::Open(fake.url(), {});
  ASSERT_TRUE(client.ok());
  net::Request r;
  r.target = "/v1.43/containers/json";
  auto answer = (*client)->Send(r);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->status, 400);
  EXPECT_NE(answer->body.find("client version 1.43 is too new. Maximum supported API version is "
                              "1.41"),
            std::string::npos);
  r.target = "/version";
  answer = (*client)->Send(r);
  EXPECT_EQ(nlohmann::json::parse(answer->body)["ApiVersion"], "1.41");
  fake.Stop();
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
