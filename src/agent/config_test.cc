#include "agent/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "agent/test_util.h"

namespace gpuhub::agent {
namespace {

TEST(AgentConfigTest, ParsesEveryKeyAndRefusesTypos) {
  auto c = ParseAgentConfig(R"(
server = "https://gpuhub.example.com"
state_dir = "/srv/agent"
public_host = "203.0.113.7"
ssh_ports = "41000-41099"
docker = "unix:/run/docker.sock"
nvml_library = ""
heartbeat_interval_ms = 500
[storage]
rbd_pool = "volumes"
rbd_user = "host7"
)",
                            "agent.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://gpuhub.example.com");
  EXPECT_EQ(c->state_dir, "/srv/agent");
  EXPECT_EQ(c->ssh_port_first, 41000);
  EXPECT_EQ(c->ssh_port_last, 41099);
  EXPECT_EQ(c->nvml_library, "");
  EXPECT_EQ(c->heartbeat_interval_ms, 500);
  EXPECT_EQ(c->storage.rbd_pool, "volumes");
  EXPECT_EQ(c->storage.cryptsetup, "cryptsetup");
  struct Case {
    const char* toml;
    const char* says;
  };
  for (const Case& bad : std::initializer_list<Case>{
           {"sever = \"x\"", "agent.toml:1: sever is not a known setting"},
           {"ssh_ports = \"22-30\"", "ssh_ports must be a range"},
           {"ssh_ports = \"40000\"", "ssh_ports must be a range"},
           {"state_dir = \"relative\"", "state_dir must be an absolute path"},
           {"heartbeat_interval_ms = -1", "heartbeat_interval_ms must be a whole number"},
           {"[storage]\nrdb = \"x\"", "storage.rdb is not a known setting"},
           {"server = 3", "server must be a string"}}) {
    auto r = ParseAgentConfig(bad.toml, "agent.toml");
    ASSERT_FALSE(r.ok()) << bad.toml;
    EXPECT_NE(r.status().message().find(bad.says), std::string::npos) << r.status().message();
  }
}

TEST(AgentConfigTest, TheCredentialFileIsPrivate) {
  testing::TempDir dir;
  const std::string state = dir.File("state");
  EXPECT_EQ(ReadCredential(state).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WriteCredential(state, {"https://h", "gha_secret", 7, "machine", 3}).ok());
  struct stat st {};
  ASSERT_EQ(::stat(CredentialPath(state).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto back = ReadCredential(state);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->credential, "gha_secret");
  EXPECT_EQ(back->host_id, 7);
  EXPECT_EQ(back->machine_id, 3);
  ::chmod(CredentialPath(state).c_str(), 0644);
  EXPECT_EQ(ReadCredential(state).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpuhub::agent
