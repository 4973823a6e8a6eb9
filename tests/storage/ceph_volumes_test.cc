// Network volumes on a real Ceph cluster through the real server: `gpuhub serve` configured with
// [storage.regions.IAD-1] pointing at a throwaway one-host Ceph 16.2 of this test binary's own
// (scripts/ceph-test-cluster.sh, started once for the suite), its storage reconciler creating the
// subvolumes, quotas and cephx clients, and a fleet node's host credential reading the desired
// workload an agent would mount (the key really mounts the path with ceph-fuse). Nothing of Ceph
// is faked. Skipped, loudly, only where no cluster can start here (the script's exit 3).
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/process.h"
#include "core/strings.h"
#include "ceph_test_cluster.h"
#include "storage/ceph.h"
#include "storage_fixture.h"

namespace gpuhub::testing {
namespace {

constexpr long long kTb = 1000LL * 1000 * 1000 * 1000;
// Bounds of the waits for the reconciler (each Ceph CLI call takes about half a second here; a
// call against a stopped mon waits for its 10 s connect timeout).
constexpr auto kCephWait = std::chrono::seconds(120);

using Cluster = gpuhub::testing::CephTestCluster;
Cluster* cluster = nullptr;

std::string Script() { return Cluster::Script(); }

Result<ProcessResult> Exec(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  return Cluster::Exec(argv, timeout);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return in ? text.str() : "<cannot read " + path + ">";
}

class CephVolumesTest : public StorageFixture {
 public:
  static void SetUpTestSuite() { cluster = Cluster::Start("/tmp/cephv.XXXXXX"); }
  static void TearDownTestSuite() { Cluster::Stop(cluster); }

 protected:
  void SetUp() override {
    if (!cluster->skip.empty()) {
      GTEST_SKIP() << "\n*** NO CEPH CLUSTER: the real-Ceph server suite is SKIPPED ***\n"
                   << cluster->skip;
    }
    ASSERT_TRUE(cluster->error.empty()) << cluster->error;
    StorageFixture::SetUp();
  }
  void TearDown() override {
    for (const auto& m : mounts_) (void)Exec({"umount", m}, std::chrono::seconds(60));
    mounts_.clear();
  }
  void Configure(ServerOptions& options) override {
    options.config_extra = "[storage.regions.IAD-1]\nceph_conf = \"" + cluster->conf +
                           "\"\nceph_name = \"" + cluster->name + "\"\nceph_keyring = \"" +
                           cluster->keyring + "\"\ncephfs = \"" + cluster->fs +
                           "\"\nmonitors = \"" + cluster->mon + "\"\n";
  }
  static storage::CephFs Admin() {
    storage::CephConfig c;
    c.conf_path = cluster->conf;
    c.name = cluster->name;
    c.keyring_path = cluster->keyring;
    c.fs_name = cluster->fs;
    c.connect_timeout = std::chrono::seconds(5);
    return storage::CephFs(c);
  }
  // `ceph ARGS... --format json` as the cluster's admin.
  static Result<ProcessResult> Ceph(std::vector<std::string> args) {
    std::vector<std::string> argv = {"ceph", "--conf", cluster->conf, "--name", cluster->name,
                                     "--keyring", cluster->keyring, "--connect-timeout", "5"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--format", "json"});
    return Exec(argv, std::chrono::seconds(60));
  }
  // The subvolumes of the file system (`ceph fs subvolume ls`).
  static std::vector<std::string> Subvolumes() {
    std::vector<std::string> out;
    auto r = Ceph({"fs", "subvolume", "ls", cluster->fs});
    if (!r.ok() || r->exit_code != 0) return {"<ls failed>"};
    for (const auto& e : json::parse(r->stdout_text)) out.push_back(e["name"]);
    return out;
  }
  static bool ClientExists(const std::string& client) {
    auto r = Ceph({"auth", "get", "client." + client});
    return r.ok() && r->exit_code == 0;
  }

  // A fleet node of one H100 SXM in IAD-1 with an enrolled host credential reporting its card.
  void NodeWithHost() {
    auto node = client_->Call("POST", "/v1/admin/nodes",
                              {{"gpu", "H100 SXM"}, {"region", "IAD-1"}, {"cards", 1}}, admin_);
    ASSERT_EQ(node.status, 201) << node.body;
    auto token = client_->Call(
        "POST", "/v1/admin/nodes/" + std::to_string(node.Json()["id"].get<long long>()) +
                    "/enrolment-tokens",
        nullptr, admin_);
    ASSERT_EQ(token.status, 201) << token.body;
    auto e = client_->Call("POST", "/v1/agent/enroll", {{"token", token.Json()["token"]}});
    ASSERT_EQ(e.status, 201) << e.body;
    host_ = e.Json()["credential"];
    ASSERT_EQ(Heartbeat().status, 200);
  }
  HttpResponse Heartbeat() {
    json gpus = json::array(
        {{{"index", 0}, {"uuid", "GPU-0"}, {"name", "NVIDIA H100 80GB HBM3"}}});
    return client_->Call("POST", "/v1/agent/heartbeat",
                         {{"hostname", "node-1"},
                          {"public_host", "198.51.100.7"},
                          {"inventory", {{"source", "nvidia-smi"}, {"gpus", gpus}}}},
                         host_);
  }
  // The network volumes of the host's one desired workload ([] when it has none).
  json DesiredNetworkVolumes() {
    auto hb = Heartbeat();
    EXPECT_EQ(hb.status, 200) << hb.body;
    json w = hb.Json()["workloads"];
    if (!w.is_array() || w.size() != 1) return json("no workload: " + hb.body);
    return w[0]["network_volumes"];
  }
  json Volume(const std::string& token, long long id) {
    return Get("/v1/volumes/" + std::to_string(id), token);
  }
  std::string Provisioning(const std::string& token, long long id) {
    return Volume(token, id)["provisioning"]["state"];
  }
  // Mounts `path` with ceph-fuse as client.<client> with `key` (a keyring file 0600 of its own,
  // as the agent keeps it); the mount point.
  std::string Mount(const std::string& client, const std::string& key, const std::string& path) {
    const std::string keyring = cluster->dir + "/" + client + ".keyring";
    int fd = ::open(keyring.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    const std::string text = "[client." + client + "]\n\tkey = " + key + "\n";
    EXPECT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ::close(fd);
    const std::string mount_point = cluster->dir + "/mnt-" + client;
    ::mkdir(mount_point.c_str(), 0755);
    auto r = Exec({"ceph-fuse", "--conf", cluster->conf, "--name", "client." + client,
                  "--keyring", keyring, "-r", path, mount_point},
                 std::chrono::seconds(60));
    EXPECT_TRUE(r.ok() && r->exit_code == 0)
        << (r.ok() ? r->stderr_text + r->stdout_text : r.status().message());
    EXPECT_NE(ReadText("/proc/mounts").find(" " + mount_point + " fuse.ceph-fuse"),
              std::string::npos);
    mounts_.push_back(mount_point);
    return mount_point;
  }

  std::string host_;
  std::vector<std::string> mounts_;
};

TEST_P(CephVolumesTest, AVolumeIsCreatedOnCephMountedByItsAttachmentsClientGrownAndRemoved) {
  NodeWithHost();
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "5000");
  const long long rental = Rent(alice, "H100 SXM", "IAD-1");
  ASSERT_GT(rental, 0);
  const std::string before = Usd(alice);

  // Accepted at once, pending on Ceph, nothing charged yet.
  const auto sent = std::chrono::steady_clock::now();
  auto created = client_->Call("POST", "/v1/volumes",
                               {{"region", "IAD-1"}, {"size_tb", 1}, {"name", "data"}}, alice);
  ASSERT_EQ(created.status, 201) << created.body;
  json v = created.Json();
  const long long id = v["id"];
  EXPECT_EQ(v["provisioning"]["state"], "pending");
  EXPECT_EQ(v["state"], "pending");
  EXPECT_EQ(v["bill"]["days_paid"], 0);
  EXPECT_EQ(v["hosts"], json::array()) << "Ceph places the replicas, not the engine";
  EXPECT_EQ(Usd(alice), before);
  // Bad names for a mount point are refused before anything is made.
  ExpectRefused(client_->Call("POST", "/v1/volumes",
                              {{"region", "IAD-1"}, {"size_tb", 1}, {"name", "Data.v2"}}, alice),
                400, "name");

  // Ready: the subvolume exists with a 1 TB quota on a pool of 3 replicas.
  ASSERT_TRUE(WaitFor([&] { return Provisioning(alice, id) == "ready"; }, kCephWait))
      << Volume(alice, id).dump() << server_->Log();
  const double ready_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
  std::cerr << "POST /v1/volumes -> ready on Ceph: " << ready_s << " s\n";
  storage::CephFs ceph = Admin();
  auto info = ceph.GetSubvolumeInfo("vol-" + std::to_string(id));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->bytes_quota, kTb);
  auto pool_size = ceph.DataPoolSize();
  ASSERT_TRUE(pool_size.ok()) << pool_size.status().ToString();
  EXPECT_EQ(*pool_size, 3);
  v = Volume(alice, id);
  EXPECT_EQ(v["state"], "active");
  EXPECT_EQ(v["ceph"]["pool_size"], 3) << v.dump();
  EXPECT_EQ(v["ceph"]["quota_tb"], 1);
  EXPECT_EQ(v["replicas"], 3);
  EXPECT_TRUE(v["ceph"]["health"].is_string()) << v.dump();
  // Billing started at ready: one day paid (R(14/30) = 0.466667), through a day after it.
  EXPECT_EQ(v["bill"]["days_paid"], 1);
  ASSERT_EQ(v["charges"].size(), 1u) << v.dump();
  EXPECT_EQ(v["charges"][0]["days"], json({1, 1}));
  EXPECT_EQ(Micros(before) - Micros(Usd(alice)), 466'667);

  // Attached: the host's desired workload carries the mount, and its key really mounts it.
  auto attached = client_->Call("POST", "/v1/volumes/" + std::to_string(id) + "/attach",
                                {{"rental_id", rental}}, alice);
  ASSERT_EQ(attached.status, 200) << attached.body;
  const std::string client = "gpuhub-vol" + std::to_string(id) + "-r" + std::to_string(rental);
  json nv;
  ASSERT_TRUE(WaitFor([&] {
    nv = DesiredNetworkVolumes();
    return nv.is_array() && nv.size() == 1;
  }, kCephWait)) << nv.dump() << server_->Log();
  EXPECT_EQ(nv[0]["id"], id);
  EXPECT_EQ(nv[0]["name"], "data");
  EXPECT_EQ(nv[0]["mount"], "/mnt/data");
  EXPECT_EQ(nv[0]["monitors"], cluster->mon);
  EXPECT_EQ(nv[0]["path"], info->path);
  EXPECT_EQ(nv[0]["client"], client);
  EXPECT_EQ(nv[0]["read_only"], false);
  const std::string key = nv[0]["key"];
  EXPECT_EQ(key.size(), 40u);
  EXPECT_TRUE(ClientExists(client));
  const std::string mnt = Mount(client, key, info->path);
  ASSERT_FALSE(HasFailure());
  { std::ofstream(mnt + "/hello.txt") << "from the instance\n"; }
  EXPECT_EQ(ReadText(mnt + "/hello.txt"), "from the instance\n");
  // The key is never in a customer's answer, nor in the server's log.
  v = Volume(alice, id);
  EXPECT_EQ(v.dump().find(key), std::string::npos);
  EXPECT_EQ(v["attachments"][0]["client"]["name"], client);
  EXPECT_EQ(v["attachments"][0]["client"]["access"], "rw");
  EXPECT_EQ(server_->Log().find(key), std::string::npos);

  // Someone else's volume id: 404, and their attach of it too.
  std::string bob = SignUpAndLogIn(*client_, "bob");
  EXPECT_EQ(client_->Call("GET", "/v1/volumes/" + std::to_string(id), nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + std::to_string(id) + "/attach",
                          {{"rental_id", rental}}, bob)
                .status,
            404);

  // Grown: the quota follows. Deleting while attached names the field.
  auto grown = client_->Call("POST", "/v1/volumes/" + std::to_string(id) + "/resize",
                             {{"size_tb", 2}}, alice);
  ASSERT_EQ(grown.status, 200) << grown.body;
  ASSERT_TRUE(WaitFor([&] {
    auto i = ceph.GetSubvolumeInfo("vol-" + std::to_string(id));
    return i.ok() && i->bytes_quota == 2 * kTb;
  }, kCephWait));
  ASSERT_TRUE(WaitFor([&] { return Volume(alice, id)["ceph"]["quota_tb"] == 2; }, kCephWait));
  ExpectRefused(client_->Call("DELETE", "/v1/volumes/" + std::to_string(id), nullptr, alice), 409,
                "attachments");

  // Detached: gone from the desired state at once, its client removed from Ceph.
  for (const auto& m : mounts_) (void)Exec({"umount", m}, std::chrono::seconds(60));
  mounts_.clear();
  ASSERT_EQ(client_->Call("POST", "/v1/volumes/" + std::to_string(id) + "/detach",
                          {{"rental_id", rental}}, alice)
                .status,
            200);
  EXPECT_EQ(DesiredNetworkVolumes(), json::array());
  ASSERT_TRUE(WaitFor([&] { return !ClientExists(client); }, kCephWait));

  // Deleted: the subvolume is removed.
  ASSERT_EQ(client_->Call("DELETE", "/v1/volumes/" + std::to_string(id), nullptr, alice).status,
            200);
  ASSERT_TRUE(WaitFor([&] {
    auto exists = ceph.SubvolumeExists("vol-" + std::to_string(id));
    return exists.ok() && !*exists;
  }, kCephWait));
  ExpectConsistent();
}

TEST_P(CephVolumesTest, AVolumeAskedForWhileTheMonIsDownIsPendingThenReadyOnceWithOneCharge) {
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "100");
  const std::string before = Usd(alice);
  auto stop = Exec({"bash", Script(), "stop-mon", cluster->dir}, std::chrono::seconds(60));
  ASSERT_TRUE(stop.ok() && stop->exit_code == 0);
  auto created = client_->Call("POST", "/v1/volumes", {{"region", "IAD-1"}, {"size_tb", 1}},
                               alice);
  ASSERT_EQ(created.status, 201) << created.body;
  const long long id = created.Json()["id"];
  // The reconciler found the cluster unreachable: still pending, nothing charged.
  ASSERT_TRUE(WaitFor([&] { return Volume(alice, id)["ceph"]["reachable"] == false; }, kCephWait))
      << Volume(alice, id).dump();
  json v = Volume(alice, id);
  EXPECT_EQ(v["provisioning"]["state"], "pending") << v.dump();
  EXPECT_EQ(v["charges"], json::array());
  EXPECT_EQ(Usd(alice), before);
  // SIGKILLed and started again while Ceph is down: the volume is still asked for.
  server_->Kill();
  Start();

  auto start = Exec({"bash", Script(), "start-mon", cluster->dir}, std::chrono::seconds(120));
  ASSERT_TRUE(start.ok() && start->exit_code == 0) << (start.ok() ? start->stderr_text : "");
  ASSERT_TRUE(WaitFor([&] { return Provisioning(alice, id) == "ready"; }, kCephWait))
      << Volume(alice, id).dump() << server_->Log();
  // Exactly one subvolume and one charge, also after another SIGKILL and restart.
  server_->Kill();
  Start();
  EXPECT_EQ(Subvolumes(), std::vector<std::string>{"vol-" + std::to_string(id)});
  v = Volume(alice, id);
  EXPECT_EQ(v["provisioning"]["state"], "ready");
  ASSERT_EQ(v["charges"].size(), 1u) << v.dump();
  EXPECT_EQ(Micros(before) - Micros(Usd(alice)), 466'667);
  ExpectConsistent();
  // The cluster is the binary's: leave it empty for the next case.
  EXPECT_TRUE(Admin().RemoveSubvolume("vol-" + std::to_string(id)).ok());
}

TEST_P(CephVolumesTest, ASnapshotIsTakenOnceAcrossASigkillAndRestoresAsACloneOfItsMoment) {
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "100");
  auto created = client_->Call("POST", "/v1/volumes", {{"region", "IAD-1"}, {"size_tb", 2}},
                               alice);
  ASSERT_EQ(created.status, 201) << created.body;
  const long long id = created.Json()["id"];
  ASSERT_TRUE(WaitFor([&] { return Provisioning(alice, id) == "ready"; }, kCephWait))
      << server_->Log();
  storage::CephFs ceph = Admin();
  const std::string name = "vol-" + std::to_string(id);
  auto info = ceph.GetSubvolumeInfo(name);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  // Data written through a client of the subvolume's path (as an instance would).
  auto key = ceph.Authorize("t-src", info->path, storage::Access::kReadWrite);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  const std::string src = Mount("t-src", *key, info->path);
  ASSERT_FALSE(HasFailure());
  { std::ofstream(src + "/before.txt") << "in the snapshot\n"; }
  ::sync();

  // The snapshot asked for, the server SIGKILLed at once and started again: one snapshot, one
  // charge (billed on the volume's size: Ceph 16.2 reports no snapshot size).
  auto snap = client_->Call("POST", "/v1/snapshots", {{"volume_id", id}}, alice);
  ASSERT_EQ(snap.status, 201) << snap.body;
  const long long sid = snap.Json()["id"];
  server_->Kill();
  Start();
  const std::string spath = "/v1/snapshots/" + std::to_string(sid);
  ASSERT_TRUE(WaitFor([&] { return Get(spath, alice)["ceph"]["taken"] == true; }, kCephWait))
      << Get(spath, alice).dump() << server_->Log();
  EXPECT_EQ(ceph.ListSnapshots(name).value(),
            std::vector<std::string>{"snap-" + std::to_string(sid)});
  json sj = Get(spath, alice);
  EXPECT_EQ(sj["size_tb"], 2);
  EXPECT_EQ(sj["charges"].size(), 1u) << sj.dump();
  { std::ofstream(src + "/after.txt") << "after the snapshot\n"; }

  // Restore: smaller than the snapshot is refused naming the field; 3 TB clones it.
  ExpectRefused(client_->Call("POST", spath + "/restore", {{"size_tb", 1}}, alice), 400,
                "size_tb");
  auto restored = client_->Call("POST", spath + "/restore", {{"size_tb", 3}, {"name", "copy"}},
                                alice);
  ASSERT_EQ(restored.status, 201) << restored.body;
  const long long cid = restored.Json()["id"];
  EXPECT_EQ(restored.Json()["provisioning"]["state"], "cloning");
  ASSERT_TRUE(WaitFor([&] { return Provisioning(alice, cid) == "ready"; }, kCephWait))
      << Volume(alice, cid).dump() << server_->Log();
  const std::string clone = "vol-" + std::to_string(cid);
  auto cinfo = ceph.GetSubvolumeInfo(clone);
  ASSERT_TRUE(cinfo.ok()) << cinfo.status().ToString();
  EXPECT_EQ(cinfo->bytes_quota, 3 * kTb) << "grown to the size asked";
  auto ckey = ceph.Authorize("t-clone", cinfo->path, storage::Access::kReadOnly);
  ASSERT_TRUE(ckey.ok());
  const std::string copy = Mount("t-clone", *ckey, cinfo->path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(ReadText(copy + "/before.txt"), "in the snapshot\n");
  struct stat st;
  EXPECT_NE(::stat((copy + "/after.txt").c_str(), &st), 0) << "written after the snapshot";
  ExpectConsistent();
  // The cluster is the binary's: leave it empty for the next case.
  TearDown();
  (void)ceph.Deauthorize("t-src");
  (void)ceph.Deauthorize("t-clone");
  EXPECT_TRUE(ceph.RemoveSubvolume(clone).ok());
  EXPECT_TRUE(ceph.RemoveSubvolume(name).ok());
}

TEST_P(CephVolumesTest, AnUnpaidVolumesClientTurnsReadOnlyAndItsMountRefusesWrites) {
  NodeWithHost();
  std::string alice = SignUpAndLogIn(*client_, "alice");
  Credit("alice", "1690.5");  // the month of the card (1690) and the volume's first day (0.466667)
  const long long rental = Rent(alice, "H100 SXM", "IAD-1");
  ASSERT_GT(rental, 0);
  auto created = client_->Call("POST", "/v1/volumes",
                               {{"region", "IAD-1"}, {"size_tb", 1}, {"name", "ro"}}, alice);
  ASSERT_EQ(created.status, 201) << created.body;
  const long long id = created.Json()["id"];
  ASSERT_TRUE(WaitFor([&] { return Provisioning(alice, id) == "ready"; }, kCephWait));
  ASSERT_EQ(client_->Call("POST", "/v1/volumes/" + std::to_string(id) + "/attach",
                          {{"rental_id", rental}}, alice)
                .status,
            200);
  json nv;
  ASSERT_TRUE(WaitFor([&] {
    nv = DesiredNetworkVolumes();
    return nv.is_array() && nv.size() == 1;
  }, kCephWait)) << nv.dump();
  ASSERT_EQ(nv[0]["read_only"], false);
  const std::string client = nv[0]["client"], key = nv[0]["key"], path = nv[0]["path"];
  std::string mnt = Mount(client, key, path);
  ASSERT_FALSE(HasFailure());
  { std::ofstream(mnt + "/kept.txt") << "written while paid\n"; }
  TearDown();  // unmounted

  // The next day cannot be paid: read-only at once, the client's caps become r (same key).
  Advance(kDaySeconds);
  EXPECT_EQ(Volume(alice, id)["state"], "read_only");
  ASSERT_TRUE(WaitFor([&] {
    nv = DesiredNetworkVolumes();
    return nv.is_array() && nv.size() == 1 && nv[0]["read_only"] == true;
  }, kCephWait)) << nv.dump() << server_->Log();
  EXPECT_EQ(nv[0]["key"], key);
  EXPECT_EQ(Volume(alice, id)["attachments"][0]["client"]["access"], "r");
  mnt = Mount(client, key, path);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(ReadText(mnt + "/kept.txt"), "written while paid\n");
  int fd = ::open((mnt + "/new.txt").c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  const int error = fd < 0 ? errno : 0;
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(error, EACCES) << "a write through read-only caps";
  TearDown();
  ExpectConsistent();
  // The cluster is the binary's: leave it empty for the next case.
  (void)Admin().Deauthorize(client);
  EXPECT_TRUE(Admin().RemoveSubvolume("vol-" + std::to_string(id)).ok());
}

INSTANTIATE_TEST_SUITE_P(Backends, CephVolumesTest, ::testing::Values("sqlite", "postgresql"));

}  // namespace
}  // namespace gpuhub::testing
