#include "agent/container.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuhub::agent {
namespace {

using json = nlohmann::json;

WorkloadSpec Spec() {
  WorkloadSpec w;
  w.id = "lease-17";
  w.image = "nvidia/cuda:12.4.1-base-ubuntu22.04";
  w.gpu_uuids = {"GPU-aaaa", "GPU-bbbb"};
  w.ssh_keys = {"ssh-ed25519 AAAA carl@laptop"};
  w.not_after = 1'800'000'000'000'000;
  w.cpus = 16;
  w.memory_gb = 128;
  w.env = {"NVIDIA_VISIBLE_DEVICES=all", "CUDA_VISIBLE_DEVICES=0,1,2,3", "HF_HOME=/data/hf",
           "nvidia_visible_devices=x", "=bad", "NOEQUALS"};
  return w;
}

TEST(ContainerTest, TheCreateBodyIsLockedDown) {
  json body = json::parse(CreateBody(Spec(), {40001, "/var/lib/gpuhub-agent/workloads/lease-17/ssh"}));
  const json& host = body["HostConfig"];
  EXPECT_EQ(host["Privileged"], false);
  EXPECT_EQ(host["CapDrop"], json({"ALL"}));
  EXPECT_EQ(host["CapAdd"], json({"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID",
                                  "SYS_CHROOT", "KILL", "AUDIT_WRITE", "NET_BIND_SERVICE"}));
  // The bare form: "no-new-privileges:true" works but makes moby log a deprecation warning on
  // every create (daemon_unix.go parseSecurityOpt, v20.10.24).
  EXPECT_EQ(host["SecurityOpt"], json({"no-new-privileges"}));
  EXPECT_EQ(host["PidsLimit"], 16384);
  // GPUs by UUID only, through the nvidia driver's device request.
  ASSERT_EQ(host["DeviceRequests"].size(), 1u);
  EXPECT_EQ(host["DeviceRequests"][0],
            json({{"Driver", "nvidia"},
                  {"Count", 0},
                  {"DeviceIDs", {"GPU-aaaa", "GPU-bbbb"}},
                  {"Capabilities", {{"gpu"}}}}));
  EXPECT_EQ(host["PortBindings"], json({{"22/tcp", {{{"HostIp", ""}, {"HostPort", "40001"}}}}}));
  EXPECT_EQ(body["ExposedPorts"], json({{"22/tcp", json::object()}}));
  EXPECT_EQ(host["Binds"],
            json({"/var/lib/gpuhub-agent/workloads/lease-17/ssh:/etc/gpuhub/ssh:ro"}));
  EXPECT_EQ(host["NanoCpus"], 16'000'000'000LL);
  EXPECT_EQ(host["Memory"], 128'000'000'000LL);
  EXPECT_EQ(host["RestartPolicy"]["Name"], "unless-stopped");
  EXPECT_EQ(host["NetworkMode"], "gpuhub") << "the bridge without inter-container traffic";
  EXPECT_EQ(body["Image"], "nvidia/cuda:12.4.1-base-ubuntu22.04");
  EXPECT_EQ(body["User"], "0");
  // The customer's GPU-selecting variables are gone; ours name exactly the leased GPUs.
  EXPECT_EQ(body["Env"], json({"HF_HOME=/data/hf", "nvidia_visible_devices=x",
                               "NVIDIA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb",
                               "NVIDIA_DRIVER_CAPABILITIES=compute,utility",
                               "GPUHUB_WORKLOAD=lease-17"}));
  EXPECT_EQ(body["Labels"]["io.gpuhub.managed"], "true");
  EXPECT_EQ(body["Labels"]["io.gpuhub.workload"], "lease-17");
  EXPECT_EQ(body["Labels"]["io.gpuhub.not_after"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(body["Labels"]["io.gpuhub.ssh_port"], "40001");
  EXPECT_EQ(body["Labels"]["io.gpuhub.gpus"], "GPU-aaaa,GPU-bbbb");
  EXPECT_EQ(body["Entrypoint"], json({"/bin/sh", "-c"}));
  EXPECT_EQ(body["Cmd"][0], BootScript());
}

// A term rental's disk: a named local volume of type ext4 on the mapper device, labelled so the
// agent can find it again to remove it (Docker keeps named volumes when it removes the container).
TEST(ContainerTest, ARentalsDiskIsALabelledNamedVolumeOnItsMapperDevice) {
  WorkloadSpec w = Spec();
  w.id = "rental-7";
  Placement placement{40002, "/keys", {{"rental-7-0", "/dev/mapper/rental-7-0", "/data/nvme0"}}};
  json mounts = json::parse(CreateBody(w, placement))["HostConfig"]["Mounts"];
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0], json({{"Type", "volume"},
                             {"Source", "gpuhub-rental-7-0"},
                             {"Target", "/data/nvme0"},
                             {"VolumeOptions",
                              {{"Labels", {{"io.gpuhub.managed", "true"},
                                           {"io.gpuhub.workload", "rental-7"}}},
                               {"DriverConfig",
                                {{"Name", "local"},
                                 {"Options", {{"type", "ext4"},
                                              {"device", "/dev/mapper/rental-7-0"}}}}}}}}));
}

TEST(ContainerTest, ExtraPortsArePublishedAndLabelledForAdoption) {
  Placement placement{40001, "/keys", {}, {{8888, 41000}, {8000, 41001}}};
  json body = json::parse(CreateBody(Spec(), placement));
  EXPECT_EQ(body["HostConfig"]["PortBindings"],
            json({{"22/tcp", {{{"HostIp", ""}, {"HostPort", "40001"}}}},
                  {"8888/tcp", {{{"HostIp", ""}, {"HostPort", "41000"}}}},
                  {"8000/tcp", {{{"HostIp", ""}, {"HostPort", "41001"}}}}}));
  EXPECT_EQ(body["ExposedPorts"],
            json({{"22/tcp", json::object()}, {"8888/tcp", json::object()},
                  {"8000/tcp", json::object()}}));
  EXPECT_EQ(body["Labels"]["io.gpuhub.ports"], "8888:41000,8000:41001");
  EXPECT_EQ(ParsePortMappings("8888:41000,8000:41001"),
            (std::vector<PortMapping>{{8888, 41000}, {8000, 41001}}));
  EXPECT_TRUE(ParsePortMappings("").empty());
  for (const char* bad : {"8888", "8888:", "x:1", "8888:41000,", "0:1", "1:70000", "1:2x"}) {
    EXPECT_TRUE(ParsePortMappings(bad).empty()) << bad;
  }
  // No extra ports: the label is empty, only sshd is published.
  json plain = json::parse(CreateBody(Spec(), {40001, "/keys"}));
  EXPECT_EQ(plain["Labels"]["io.gpuhub.ports"], "");
  EXPECT_EQ(plain["HostConfig"]["PortBindings"].size(), 1u);
}

TEST(ContainerTest, SshdRunsWithKeysOnly) {
  const std::string& s = BootScript();
  for (const char* must : {"-o PermitRootLogin=prohibit-password", "-o PasswordAuthentication=no",
                           "-o AuthorizedKeysFile=/etc/gpuhub/ssh/authorized_keys", "exec ",
                           "apt-get install", "dnf install", "apk add", "ssh-keygen -A"}) {
    EXPECT_NE(s.find(must), std::string::npos) << must;
  }
  EXPECT_EQ(ContainerName("lease-17"), "gpuhub-lease-17");
}

TEST(ContainerTest, ImagesAreSafeForApiPaths) {
  EXPECT_TRUE(ValidateImage("nvidia/cuda:12.4.1-base-ubuntu22.04").ok());
  EXPECT_TRUE(ValidateImage("registry.example.com:5000/team/img@sha256:0123abcd").ok());
  for (const char* bad : {"", "../containers/json", "a/../b", "a//b", "a/.b", "img:", "-x",
                          "a b", "a?b", "a#b"}) {
    EXPECT_FALSE(ValidateImage(bad).ok()) << bad;
  }
}

TEST(ContainerTest, WorkloadIdsAreSafeForNamesAndPaths) {
  EXPECT_TRUE(ValidateWorkloadId("lease-17").ok());
  EXPECT_TRUE(ValidateWorkloadId("rental-3").ok());
  for (const char* bad : {"", "../etc", "lease/1", "Lease-1", "-x", "lease 1",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_FALSE(ValidateWorkloadId(bad).ok()) << bad;
  }
}

// A network volume: the host's mount point bound at /mnt/<name>, read-only when attached so,
// and listed in a label so that a change of volumes recreates the container.
TEST(ContainerTest, NetworkVolumesAreBoundAndLabelled) {
  WorkloadSpec w = Spec();
  NetworkVolumeSpec data{7, "data", "/mnt/data", "10.0.0.1:6789", "/volumes/_nogroup/v7/u",
                         "gpuhub-vol7-r3", "AQCwCBNrmvk9FxAAB78mRvVlZabLmAcErqJDcw==", false};
  NetworkVolumeSpec ref = data;
  ref.id = 9;
  ref.name = "ref";
  ref.mount = "/mnt/ref";
  ref.client = "gpuhub-vol9-r3";
  ref.read_only = true;
  w.network_volumes = {data, ref};
  Placement p{40001, "/s/workloads/lease-17/ssh", {}, {}};
  p.network_mounts = {{"/s/volumes/7-gpuhub-vol7-r3", "/mnt/data", false},
                      {"/s/volumes/9-gpuhub-vol9-r3", "/mnt/ref", true}};
  const std::string text = CreateBody(w, p);
  EXPECT_EQ(text.find(data.key), std::string::npos) << "never the key in Docker's records";
  json body = json::parse(text);
  EXPECT_EQ(body["HostConfig"]["Mounts"],
            json::parse(R"([{"Type":"bind","Source":"/s/volumes/7-gpuhub-vol7-r3",
                             "Target":"/mnt/data","ReadOnly":false},
                            {"Type":"bind","Source":"/s/volumes/9-gpuhub-vol9-r3",
                             "Target":"/mnt/ref","ReadOnly":true}])"));
  EXPECT_EQ(body["Labels"]["io.gpuhub.volumes"], "7:gpuhub-vol7-r3:rw,9:gpuhub-vol9-r3:ro");
  EXPECT_EQ(json::parse(CreateBody(Spec(), p))["Labels"]["io.gpuhub.volumes"], "");
}

}  // namespace
}  // namespace gpuhub::agent
