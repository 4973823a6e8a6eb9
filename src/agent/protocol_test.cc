#include "agent/protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace gpuhub::agent {
namespace {

using json = nlohmann::json;

TEST(ProtocolTest, HeartbeatCarriesInventoryHealthAndStates) {
  Inventory inv;
  inv.source = "nvidia-smi";
  inv.driver_version = "550.54.15";
  inv.ram_mib = 1'000'000;
  GpuInfo g;
  g.index = 0;
  g.uuid = "GPU-aaaa";
  g.name = "NVIDIA H100 80GB HBM3";
  g.health = {"row remapping pending: the GPU needs a reset"};
  inv.gpus.push_back(g);
  json body = json::parse(HeartbeatBody("gpu-7", "203.0.113.7", "0.1.0", inv,
                                        {{"lease-17", "running", 40001, ""}}));
  EXPECT_EQ(body["public_host"], "203.0.113.7");
  EXPECT_EQ(body["inventory"]["source"], "nvidia-smi");
  EXPECT_EQ(body["inventory"]["gpus"][0]["healthy"], false);
  EXPECT_EQ(body["inventory"]["gpus"][0]["health"][0],
            "row remapping pending: the GPU needs a reset");
  EXPECT_EQ(body["workloads"][0], json({{"id", "lease-17"}, {"state", "running"},
                                        {"ssh_port", 40001}, {"detail", ""}}));
  EXPECT_FALSE(json::parse(HeartbeatBody("h", "", "v", inv, {})).contains("public_host"));
}

TEST(ProtocolTest, ReadsTheServersAnswerAndRefusesWhatItCannotUse) {
  const char* answer = R"({"host_id":3,"server_time":"2027-01-15T08:00:00Z",
    "heartbeat_interval_seconds":15,"usage_interval_seconds":60,
    "workloads":[{"id":"lease-17","image":"nvidia/cuda:12.4.1-base-ubuntu22.04",
      "gpu_uuids":["GPU-aaaa"],"ssh_authorized_keys":["ssh-ed25519 AAAA c"],
      "not_after":"2027-01-15T09:00:00Z","cpus":8,"memory_gb":64}],
    "unknown_workloads":[],"machine":{"hold_reason":null,"blocked_gpus":[]}})";
  auto a = ParseHeartbeatAnswer(answer);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->host_id, 3);
  EXPECT_EQ(a->server_time, 1'800'000'000'000'000);
  EXPECT_EQ(a->heartbeat_interval, std::chrono::seconds(15));
  ASSERT_EQ(a->workloads.size(), 1u);
  EXPECT_EQ(a->workloads[0].not_after, 1'800'003'600'000'000);
  EXPECT_EQ(a->workloads[0].cpus, 8);
  EXPECT_EQ(a->hold_reason, "");
  json bad = json::parse(answer);
  bad["workloads"][0]["id"] = "../../etc";
  EXPECT_EQ(ParseHeartbeatAnswer(bad.dump()).status().code(), StatusCode::kInvalidArgument);
  bad = json::parse(answer);
  bad["workloads"][0]["ssh_authorized_keys"][0] = "ssh-ed25519 AAAA\ncommand=\"x\" ssh-rsa B";
  EXPECT_EQ(ParseHeartbeatAnswer(bad.dump()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseHeartbeatAnswer("<html>").ok());
  EXPECT_FALSE(ParseHeartbeatAnswer(R"({"host_id":3})").ok());
}

TEST(ProtocolTest, ExtraPortsAndTheRegistryCredentialComeButTheCredentialIsNeverCached) {
  const char* answer = R"({"host_id":3,"server_time":"2027-01-15T08:00:00Z",
    "workloads":[{"id":"lease-17","image":"ghcr.io/acme/train:v2","gpu_uuids":["GPU-aaaa"],
      "not_after":"2027-01-15T09:00:00Z","ports":[8888,8000],"port_range":[41000,41999],
      "registry_auth":{"username":"carl-bot","password":"tok-123","serveraddress":"ghcr.io"}}]})";
  auto a = ParseHeartbeatAnswer(answer);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const WorkloadSpec& w = a->workloads[0];
  EXPECT_EQ(w.ports, (std::vector<int>{8888, 8000}));
  EXPECT_EQ(w.port_first, 41000);
  EXPECT_EQ(w.port_last, 41999);
  EXPECT_EQ(w.registry_auth.username, "carl-bot");
  EXPECT_EQ(w.registry_auth.password, "tok-123");
  EXPECT_EQ(w.registry_auth.server_address, "ghcr.io");
  const std::string cache = DesiredCacheJson({a->workloads, 1, 1});
  EXPECT_EQ(cache.find("tok-123"), std::string::npos) << cache;
  EXPECT_EQ(cache.find("carl-bot"), std::string::npos) << cache;
  auto back = ParseDesiredCache(cache);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->workloads[0].ports, (std::vector<int>{8888, 8000}));
  EXPECT_TRUE(back->workloads[0].registry_auth.empty());
  for (const char* ports : {"[22]", "[0]", "[1,2,3,4,5]"}) {
    json bad = json::parse(answer);
    bad["workloads"][0]["ports"] = json::parse(ports);
    EXPECT_FALSE(ParseHeartbeatAnswer(bad.dump()).ok()) << ports;
  }
  json no_range = json::parse(answer);
  no_range["workloads"][0]["port_range"] = {80, 90};
  EXPECT_FALSE(ParseHeartbeatAnswer(no_range.dump()).ok());
  // The published ports are reported back.
  json body = json::parse(HeartbeatBody("h", "", "v", {},
                                        {{"lease-17", "running", 40001, "", {{8888, 41000}}}}));
  EXPECT_EQ(body["workloads"][0]["ports"], json::parse(R"([{"container":8888,"host":41000}])"));
}

TEST(ProtocolTest, CacheRoundTripsAndErrorsAreRead) {
  DesiredCache c;
  c.server_time = 10;
  c.local_time = 4;
  WorkloadSpec w;
  w.id = "lease-1";
  w.image = "img";
  w.gpu_uuids = {"GPU-a"};
  w.not_after = 99;
  c.workloads = {w};
  auto back = ParseDesiredCache(DesiredCacheJson(c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->server_time, 10);
  EXPECT_EQ(back->local_time, 4);
  EXPECT_EQ(back->workloads[0].not_after, 99);
  EXPECT_EQ(ServerMessage(R"({"error":{"code":"unauthenticated","message":"revoked"}})"), "revoked");
  EXPECT_EQ(ServerMessage("plain"), "plain");
  auto e = ParseEnrolAnswer(R"({"host_id":1,"credential":"gha_x","kind":"machine","machine_id":4})");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->machine_id, 4);
  EXPECT_FALSE(ParseEnrolAnswer(R"({"host_id":1,"credential":"nope"})").ok());
  json usage = json::parse(UsageBody({{"lease-1", 1'800'000'000'000'000, 50, 1234}}));
  EXPECT_EQ(usage["samples"][0]["at"], "2027-01-15T08:00:00Z");
  EXPECT_EQ(usage["samples"][0]["net_tx_bytes"], 1234);
}

TEST(ProtocolTest, ReadsTheLongPollsAnswers) {
  auto changed = ParseDesiredAnswer(R"({"host_id":3,"changed":true,"version":"00ff00ff00ff00ff",
    "desired_epoch":"ab12","desired_seq":7,"server_time":"2027-01-15T08:00:00Z",
    "workloads":[{"id":"lease-17","image":"nvidia/cuda:12.4.1-base-ubuntu22.04",
      "gpu_uuids":["GPU-aaaa"],"ssh_authorized_keys":["ssh-ed25519 AAAA c"],
      "not_after":"2027-01-15T09:00:00Z","cpus":8,"memory_gb":64}]})");
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_TRUE(changed->changed);
  EXPECT_EQ(changed->version, "00ff00ff00ff00ff");
  EXPECT_EQ(changed->order.epoch, "ab12");
  EXPECT_EQ(changed->order.seq, 7u);
  ASSERT_EQ(changed->workloads.size(), 1u);
  EXPECT_EQ(changed->workloads[0].gpu_uuids, std::vector<std::string>{"GPU-aaaa"});
  auto same =
      ParseDesiredAnswer(R"({"changed":false,"version":"00ff00ff00ff00ff","wait_seconds":20})");
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->changed);
  EXPECT_EQ(same->wait_seconds, 20);
  EXPECT_TRUE(same->workloads.empty());
  EXPECT_FALSE(ParseDesiredAnswer(R"({"changed":true,"version":"1"})").ok()) << "no workloads";
  EXPECT_FALSE(ParseDesiredAnswer("[]").ok());
  EXPECT_FALSE(ParseDesiredAnswer(R"({"changed":false,"version":")" + std::string(33, 'a') +
                                  R"("})")
                   .ok());
}

TEST(ProtocolTest, TheNewestDesiredStateWins) {
  const DesiredOrder held{"ab12", 7};
  EXPECT_TRUE(NewerThan({"ab12", 8}, held));
  EXPECT_FALSE(NewerThan({"ab12", 7}, held)) << "the same answer again";
  EXPECT_FALSE(NewerThan({"ab12", 6}, held)) << "read before the one held: a late heartbeat";
  EXPECT_TRUE(NewerThan({"cd34", 1}, held)) << "a restarted server numbers from 1 again";
  EXPECT_TRUE(NewerThan({"", 0}, held)) << "an older server that does not number its answers";
}

TEST(ProtocolTest, NetworkVolumesAreReadStrictlyAndTheirKeyIsNeverCached) {
  const char* answer = R"({"host_id":3,"server_time":"2027-01-15T08:00:00Z",
    "workloads":[{"id":"lease-17","image":"ubuntu:22.04","gpu_uuids":["GPU-aaaa"],
      "not_after":"2027-01-15T09:00:00Z",
      "network_volumes":[{"id":7,"name":"data","mount":"/mnt/data",
        "monitors":"127.0.0.1:6789,127.0.0.2:6789","path":"/volumes/_nogroup/vol-7/u-1",
        "client":"gpuhub-vol7-r3","key":"AQCwCBNrmvk9FxAAB78mRvVlZabLmAcErqJDcw==",
        "read_only":false},
       {"id":9,"name":"ref","mount":"/mnt/ref","monitors":"127.0.0.1:6789",
        "path":"/volumes/_nogroup/vol-9/u-2","client":"gpuhub-vol9-r3",
        "key":"AQDxCBNrmvk9FxAAB78mRvVlZabLmAcErqJDcw==","read_only":true}]}]})";
  auto a = ParseHeartbeatAnswer(answer);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->workloads[0].network_volumes.size(), 2u);
  const NetworkVolumeSpec& v = a->workloads[0].network_volumes[0];
  EXPECT_EQ(v.id, 7);
  EXPECT_EQ(v.name, "data");
  EXPECT_EQ(v.mount, "/mnt/data");
  EXPECT_EQ(v.monitors, "127.0.0.1:6789,127.0.0.2:6789");
  EXPECT_EQ(v.path, "/volumes/_nogroup/vol-7/u-1");
  EXPECT_EQ(v.client, "gpuhub-vol7-r3");
  EXPECT_EQ(v.key, "AQCwCBNrmvk9FxAAB78mRvVlZabLmAcErqJDcw==");
  EXPECT_FALSE(v.read_only);
  EXPECT_TRUE(a->workloads[0].network_volumes[1].read_only);
  // The cache keeps everything but the keys.
  const std::string cache = DesiredCacheJson({a->workloads, 1, 1});
  EXPECT_EQ(cache.find("AQCwCBNr"), std::string::npos) << cache;
  EXPECT_EQ(cache.find("AQDxCBNr"), std::string::npos) << cache;
  auto back = ParseDesiredCache(cache);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  NetworkVolumeSpec without_key = v;
  without_key.key.clear();
  EXPECT_EQ(back->workloads[0].network_volumes[0], without_key);
  // Absent, null or []: none.
  for (const char* none : {"null", "[]"}) {
    json j = json::parse(answer);
    j["workloads"][0]["network_volumes"] = json::parse(none);
    auto n = ParseHeartbeatAnswer(j.dump());
    ASSERT_TRUE(n.ok()) << none;
    EXPECT_TRUE(n->workloads[0].network_volumes.empty());
  }
  // A bad entry fails the whole answer, as any other field does; the key is not in the message.
  const std::vector<std::pair<std::string, json>> bad = {
      {"mount", "/etc"},           {"path", "/volumes/../x"}, {"client", "admin;x"},
      {"monitors", "h"},           {"key", ""},               {"id", -1},
      {"name", "Data"},            {"read_only", "yes"},
  };
  for (const auto& [field, value] : bad) {
    json j = json::parse(answer);
    j["workloads"][0]["network_volumes"][0][field] = value;
    auto r = ParseHeartbeatAnswer(j.dump());
    EXPECT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().message().find("AQCwCBNr"), std::string::npos) << r.status().message();
  }
  json missing = json::parse(answer);
  missing["workloads"][0]["network_volumes"][0].erase("key");
  EXPECT_FALSE(ParseHeartbeatAnswer(missing.dump()).ok()) << "the server always sends the key";
  json twice = json::parse(answer);
  twice["workloads"][0]["network_volumes"][1]["mount"] = "/mnt/data";
  EXPECT_FALSE(ParseHeartbeatAnswer(twice.dump()).ok()) << "two volumes on one mount";
  json many = json::parse(answer);
  for (int i = 10; i < 17; ++i) {
    json extra = many["workloads"][0]["network_volumes"][1];
    extra["id"] = i;
    extra["mount"] = "/mnt/v" + std::to_string(i);
    many["workloads"][0]["network_volumes"].push_back(extra);
  }
  EXPECT_FALSE(ParseHeartbeatAnswer(many.dump()).ok()) << "at most kMaxNetworkVolumesPerWorkload";
  // The long-poll's answer is read by the same code.
  json poll = {{"changed", true}, {"version", "v2"}, {"server_time", "2027-01-15T08:00:00Z"},
               {"workloads", json::parse(answer)["workloads"]}};
  auto d = ParseDesiredAnswer(poll.dump());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->workloads[0].network_volumes.size(), 2u);
}

}  // namespace
}  // namespace gpuhub::agent
