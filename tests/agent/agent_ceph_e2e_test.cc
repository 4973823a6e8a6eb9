// Network volumes end to end, every part real but the GPU: a real `gpuhub serve` (port 0, manual
// clock) whose [storage.regions.IAD-1] is a throwaway one-host Ceph 16.2 cluster of this binary's
// own (scripts/ceph-test-cluster.sh: 1 mon, 1 mgr, 3 bluestore OSDs, 1 MDS, CephFS `vols` of size
// 3), its storage reconciler making the subvolumes, quotas, snapshots, clones and the cephx client
// of each attachment; a throwaway dockerd (scripts/docker-test-env.sh); the real `gpuhub agent`
// running term rentals on a fleet node and mounting their volumes with the real ceph-fuse. The
// customer logs in with `ssh -p PORT root@127.0.0.1` and works under /mnt/<volume name>.
//
// What is fake: the GPU (nvidia-smi script, stand-in hook) and device-mapper under the rentals'
// local disks (see RealMapperDevices). Skipped, loudly, where no Ceph cluster or no dockerd can
// start (the scripts' exit 3).
#include <thread>

#include "ceph_test_cluster.h"
#include "real_engine_fixture.h"

namespace gpuhub::testing {
namespace {

using agent::RunProcess;

constexpr long long kTb = 1000LL * 1000 * 1000 * 1000;
constexpr long long kDay = 24 * 3600;
// Bounds of the waits on the reconciler, the agent and Ceph (a Ceph CLI call takes ~0.5 s here).
constexpr auto kWait = std::chrono::seconds(120);

CephTestCluster* cluster = nullptr;

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class AgentCephE2eTest : public AgentRealEngineRentalTest {
 public:
  static void SetUpTestSuite() {
    AgentRealEngineTest::SetUpTestSuite();
    cluster = CephTestCluster::Start("/tmp/cephe.XXXXXX");
  }
  static void TearDownTestSuite() {
    CephTestCluster::Stop(cluster);
    AgentRealEngineTest::TearDownTestSuite();
  }

 protected:
  void SetUp() override {
    if (!cluster->skip.empty()) {
      GTEST_SKIP() << "\n*** NO CEPH CLUSTER: the network-volume end-to-end suite is SKIPPED ***\n"
                   << cluster->skip;
    }
    ASSERT_TRUE(cluster->error.empty()) << cluster->error;
    // The manual clock's jumps (days at once) look like the node falling silent for as long: no
    // downtime credit, or the wallet an unpaid volume waits on would be refilled by it.
    agents_extra_ = "rental_downtime_multiplier = \"0\"\n";
    AgentRealEngineRentalTest::SetUp();
  }
  void TearDown() override {
    AgentRealEngineRentalTest::TearDown();
    if (!admin_mount_.empty()) (void)RunProcess({"umount", admin_mount_});
    admin_mount_.clear();
    // The cluster is the binary's: the next case starts from no subvolume and no client.
    if (cluster == nullptr || !cluster->error.empty() || !cluster->skip.empty()) return;
    auto subvolumes = CephJson({"fs", "subvolume", "ls", cluster->fs});
    if (subvolumes.is_array()) {
      for (const auto& s : subvolumes) {
        const std::string name = s["name"];
        auto snaps = CephJson({"fs", "subvolume", "snapshot", "ls", cluster->fs, name});
        if (snaps.is_array()) {
          for (const auto& snap : snaps) {
            (void)Ceph({"fs", "subvolume", "snapshot", "rm", cluster->fs, name, snap["name"],
                        "--force"});
          }
        }
        (void)Ceph({"fs", "subvolume", "rm", cluster->fs, name, "--force"});
      }
    }
    auto auth = CephJson({"auth", "ls"});
    for (const auto& e : auth["auth_dump"]) {
      const std::string entity = e["entity"];
      if (entity.rfind("client.gpuhub-", 0) == 0) (void)Ceph({"auth", "rm", entity});
    }
  }
  void Configure(ServerOptions& options) override {
    AgentRealEngineRentalTest::Configure(options);
    options.config_extra += "[storage.regions.IAD-1]\nceph_conf = \"" + cluster->conf +
                            "\"\nceph_name = \"" + cluster->name + "\"\nceph_keyring = \"" +
                            cluster->keyring + "\"\ncephfs = \"" + cluster->fs +
                            "\"\nmonitors = \"" + cluster->mon + "\"\n";
  }

  // `ceph ARGS...` as the cluster's admin: (exit code, stdout).
  static std::pair<int, std::string> Ceph(std::vector<std::string> args) {
    std::vector<std::string> argv = {"ceph", "--conf", cluster->conf, "--name", cluster->name,
                                     "--keyring", cluster->keyring, "--connect-timeout", "10"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = CephTestCluster::Exec(argv, std::chrono::seconds(60));
    if (!r.ok()) return {-1, r.status().message()};
    return {r->exit_code, r->exit_code == 0 ? r->stdout_text : r->stderr_text};
  }
  static json CephJson(std::vector<std::string> args) {
    args.insert(args.end(), {"--format", "json"});
    auto [code, out] = Ceph(args);
    return code == 0 ? json::parse(out, nullptr, false) : json("ceph failed: " + out);
  }
  static bool SubvolumeExists(long long volume) {
    return Ceph({"fs", "subvolume", "getpath", cluster->fs, "vol-" + std::to_string(volume)})
               .first == 0;
  }
  static bool ClientExists(const std::string& client) {
    return Ceph({"auth", "get", "client." + client}).first == 0;
  }
  // Mounts a subvolume's directory as client.admin (the operator's view: what Ceph holds).
  std::string AdminMount(long long volume) {
    auto [code, path] =
        Ceph({"fs", "subvolume", "getpath", cluster->fs, "vol-" + std::to_string(volume)});
    EXPECT_EQ(code, 0) << path;
    admin_mount_ = cluster->dir + "/mnt/admin-" + std::to_string(volume);
    (void)RunProcess({"mkdir", "-p", admin_mount_});
    auto r = RunProcess({"ceph-fuse", "--conf", cluster->conf, "--name", cluster->name,
                         "--keyring", cluster->keyring, "-r", Trimmed(path), admin_mount_},
                        std::chrono::seconds(60));
    EXPECT_TRUE(r.ok() && r->exit_code == 0)
        << (r.ok() ? r->stderr_text + r->stdout_text : r.status().message());
    return admin_mount_;
  }

  json Volume(long long id) { return Get("/v1/volumes/" + std::to_string(id), customer_); }
  // POST /v1/volumes of `tb` TB named `name`, waited for until Ceph made it; its id.
  long long CreateVolume(const std::string& name, long long tb) {
    auto created = client_->Call("POST", "/v1/volumes",
                                 {{"region", "IAD-1"}, {"size_tb", tb}, {"name", name}}, customer_);
    EXPECT_EQ(created.status, 201) << created.body;
    if (created.status != 201) return 0;
    const long long id = created.Json()["id"];
    EXPECT_TRUE(WaitFor([&] { return Volume(id)["provisioning"]["state"] == "ready"; }, kWait))
        << Volume(id).dump() << server_->Log();
    return id;
  }
  void Attach(long long volume, long long rental) {
    auto r = client_->Call("POST", "/v1/volumes/" + std::to_string(volume) + "/attach",
                           {{"rental_id", rental}}, customer_);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  // A new week rental, running, its sshd letting the customer in: (rental id, SSH port).
  std::pair<long long, int> RunningRental() {
    const long long id = OrderWeekRental();
    if (id == 0) return {0, 0};
    EXPECT_TRUE(WaitFor([&] { return Rental(id)["state"] == "active"; }, kWait))
        << Rental(id).dump() << Context();
    const int port = RentalPort(id);
    Ssh login;
    EXPECT_TRUE(WaitFor([&] { return (login = RunSsh(carl_key_, port, "true")).exit_code == 0; },
                        kWait))
        << login.output << Context();
    return {id, port};
  }
  int RentalPort(long long id) {
    std::string line;
    EXPECT_TRUE(WaitFor(
        [&] {
          json c = Rental(id)["instance"]["connection"];
          line = c["ssh"].is_string() ? c["ssh"].get<std::string>() : "";
          return line.rfind("ssh -p ", 0) == 0;
        },
        kWait))
        << Rental(id).dump();
    return line.empty() ? 0 : std::stoi(line.substr(7));
  }
  // Waits until the rental's container (made again by the agent when its volumes change) has
  // `mount` as a ceph-fuse mount (or, with `present` false, has none) and lets the customer in.
  void WaitForMount(long long rental, const std::string& mount, bool present = true) {
    Ssh s;
    const std::string probe = "grep -c ' " + mount + " fuse.ceph-fuse ' /proc/mounts";
    ASSERT_TRUE(WaitFor(
        [&] {
          s = RunSsh(carl_key_, RentalPort(rental), probe);
          return present ? s.exit_code == 0 && s.output == "1\n"
                         : s.exit_code == 1 && s.output == "0\n";
        },
        kWait))
        << "rental " << rental << " " << mount << ": " << s.exit_code << " " << s.output
        << Context();
  }
  Ssh As(long long rental, const std::string& command) {
    return RunSsh(carl_key_, RentalPort(rental), command);
  }

  std::string admin_mount_;
};

// 1 TB volume -> a subvolume of a 1 TB quota on a pool of size 3; attached to a running rental:
// the customer writes under /mnt/data over SSH; a second rental attached to it reads that and
// writes back; an OSD killed while a container writes: the writes succeed and read back intact,
// also from the other instance, once the OSD is back; snapshot, more writes, restore into a new
// volume attached to a third rental: the snapshot's files, not the later ones; someone else's
// volume id is a 404 and mounts nothing; the rentals released: the volumes and their data stay.
TEST_P(AgentCephE2eTest, AVolumeIsSharedSurvivesAnOsdLossAndMovesThroughASnapshot) {
  AddNodeAndEnrol(RealMapperDevices(), 3);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] {
    json a = NodeAgent();
    return a["status"] == "online" && a["inventory"]["gpus"].size() == 3;
  }, kWait)) << Context();
  auto [a, port_a] = RunningRental();
  ASSERT_GT(port_a, 0);

  const auto posted = std::chrono::steady_clock::now();
  const long long data = CreateVolume("data", 1);
  ASSERT_GT(data, 0);
  json info = CephJson({"fs", "subvolume", "info", cluster->fs, "vol-" + std::to_string(data)});
  EXPECT_EQ(info["bytes_quota"], kTb) << info.dump();
  json pool = CephJson({"osd", "pool", "get", info["data_pool"], "size"});
  EXPECT_EQ(pool["size"], 3) << pool.dump();
  EXPECT_EQ(Volume(data)["ceph"]["pool_size"], 3);

  Attach(data, a);
  WaitForMount(a, "/mnt/data");
  std::cerr << "POST /v1/volumes -> mounted in the running container: "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - posted).count()
            << " s\n";
  Ssh w = As(a, "echo from-a > /mnt/data/one.txt && cat /mnt/data/one.txt");
  ASSERT_EQ(w.exit_code, 0) << w.output;
  EXPECT_EQ(w.output, "from-a\n");

  auto [b, port_b] = RunningRental();
  ASSERT_GT(port_b, 0);
  Attach(data, b);
  WaitForMount(b, "/mnt/data");
  Ssh r = As(b, "cat /mnt/data/one.txt && echo from-b > /mnt/data/reply.txt");
  EXPECT_EQ(r.output, "from-a\n");
  EXPECT_EQ(As(a, "cat /mnt/data/reply.txt").output, "from-b\n");
  // Each attachment its own cephx client, allowed that path only; no key in any answer.
  const std::string ca = "gpuhub-vol" + std::to_string(data) + "-r" + std::to_string(a);
  const std::string cb = "gpuhub-vol" + std::to_string(data) + "-r" + std::to_string(b);
  EXPECT_TRUE(ClientExists(ca));
  EXPECT_TRUE(ClientExists(cb));
  auto [kc, key_a] = Ceph({"auth", "print-key", "client." + ca});
  ASSERT_EQ(kc, 0);
  EXPECT_EQ(Volume(data).dump().find(Trimmed(key_a)), std::string::npos);
  EXPECT_EQ(Rental(a).dump().find(Trimmed(key_a)), std::string::npos);
  EXPECT_EQ(server_->Log().find(Trimmed(key_a)), std::string::npos);
  EXPECT_EQ(agent_->Log().find(Trimmed(key_a)), std::string::npos);

  // One OSD of three killed while rental a writes 24 fsynced MiB: every write succeeds.
  Ssh writes;
  std::thread writer([&, ra = a] {
    writes = As(ra, "for i in $(seq 1 24); do dd if=/dev/urandom of=/mnt/data/w$i bs=1M count=1 "
                    "conv=fsync status=none || exit 9; sleep 0.1; done; "
                    "cat /mnt/data/w* | sha256sum | cut -c1-64");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  auto stop = CephTestCluster::Exec({"bash", CephTestCluster::Script(), "stop-osd", cluster->dir,
                                     "2"},
                                    std::chrono::seconds(120));
  writer.join();
  ASSERT_TRUE(stop.ok() && stop->exit_code == 0) << (stop.ok() ? stop->stderr_text : "");
  ASSERT_EQ(writes.exit_code, 0) << writes.output;
  const std::string sum = writes.output;
  ASSERT_EQ(sum.size(), 65u) << sum;
  EXPECT_NE(Ceph({"health"}).second.find("HEALTH_WARN"), std::string::npos)
      << "degraded while osd.2 is down";
  auto start = CephTestCluster::Exec({"bash", CephTestCluster::Script(), "start-osd",
                                      cluster->dir, "2"},
                                     std::chrono::seconds(300));
  ASSERT_TRUE(start.ok() && start->exit_code == 0) << (start.ok() ? start->stderr_text : "");
  EXPECT_EQ(As(a, "cat /mnt/data/w* | sha256sum | cut -c1-64").output, sum);
  EXPECT_EQ(As(b, "cat /mnt/data/w* | sha256sum | cut -c1-64").output, sum)
      << "the other instance reads the same bytes";

  // Snapshot; a later write; restore into a new volume for a third rental.
  auto snap = client_->Call("POST", "/v1/snapshots", {{"volume_id", data}, {"name", "s1"}},
                            customer_);
  ASSERT_EQ(snap.status, 201) << snap.body;
  const std::string spath = "/v1/snapshots/" + std::to_string(snap.Json()["id"].get<long long>());
  ASSERT_TRUE(WaitFor([&] { return Get(spath, customer_)["ceph"]["taken"] == true; }, kWait))
      << Get(spath, customer_).dump() << server_->Log();
  ASSERT_EQ(As(a, "echo later > /mnt/data/later.txt").exit_code, 0);
  auto restored =
      client_->Call("POST", spath + "/restore", {{"size_tb", 1}, {"name", "copy"}}, customer_);
  ASSERT_EQ(restored.status, 201) << restored.body;
  const long long copy = restored.Json()["id"];
  ASSERT_TRUE(WaitFor([&] { return Volume(copy)["provisioning"]["state"] == "ready"; }, kWait))
      << Volume(copy).dump() << server_->Log();
  auto [c, port_c] = RunningRental();
  ASSERT_GT(port_c, 0);
  Attach(copy, c);
  WaitForMount(c, "/mnt/copy");
  Ssh listed = As(c, "cd /mnt/copy && ls && cat one.txt reply.txt && cat w* | sha256sum | cut -c1-64");
  EXPECT_EQ(listed.output, "one.txt\nreply.txt\n" + [] {
    std::string names;
    std::vector<std::string> w;
    for (int i = 1; i <= 24; ++i) w.push_back("w" + std::to_string(i));
    std::sort(w.begin(), w.end());
    for (const auto& n : w) names += n + "\n";
    return names;
  }() + "from-a\nfrom-b\n" + sum) << "the snapshot's files and not later.txt";

  // Someone else's volume: a 404, and no mount reaches their rental.
  std::string bob = User("bob", {"customer"});
  EXPECT_EQ(client_->Call("GET", "/v1/volumes/" + std::to_string(data), nullptr, bob).status, 404);
  EXPECT_EQ(client_->Call("POST", "/v1/volumes/" + std::to_string(data) + "/attach",
                          {{"rental_id", c}}, bob)
                .status,
            404);
  EXPECT_EQ(Volume(data)["attachments"].size(), 2u);

  // Released: the containers go, their clients leave Ceph, the volumes and the data stay.
  for (long long id : {a, b, c}) {
    auto release = client_->Call("POST", "/v1/rentals/" + std::to_string(id) + "/release",
                                 {{"confirm", true}}, customer_);
    ASSERT_EQ(release.status, 200) << release.body;
  }
  for (long long id : {a, b, c}) {
    const std::string name = "gpuhub-rental-" + std::to_string(id);
    ASSERT_TRUE(WaitFor([&] { return ContainerGone(name); }, kWait)) << Context();
  }
  ASSERT_TRUE(WaitFor([&] { return !ClientExists(ca) && !ClientExists(cb); }, kWait))
      << server_->Log();
  EXPECT_EQ(Volume(data)["state"], "active");
  EXPECT_TRUE(Volume(data)["attachments"].empty());
  EXPECT_TRUE(SubvolumeExists(data));
  EXPECT_TRUE(SubvolumeExists(copy));
  const std::string seen = AdminMount(data);
  auto kept = RunProcess({"sh", "-c", "cat " + seen + "/one.txt " + seen + "/later.txt"});
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->stdout_text, "from-a\nlater\n");
  ExpectBooksBalance();
}

// Unpaid: read-only inside the container at once (a write fails with EROFS, reads go on), then
// detached 72 h later (the container made again without /mnt/data, the client gone from Ceph),
// then deleted 7 days after that (the subvolume gone from Ceph).
TEST_P(AgentCephE2eTest, AnUnpaidVolumeTurnsReadOnlyInTheContainerThenDetachedThenDeleted) {
  // Funds for the week of one card and the volume's first day (1 TB: R(14/30) = 0.466667).
  auto quote = client_->Call("POST", "/v1/rentals/quote",
                             {{"gpu", "H100 SXM"}, {"count", 1}, {"term", "week"},
                              {"region", "IAD-1"}});
  ASSERT_EQ(quote.status, 200) << quote.body;
  const std::string week = quote.Json()["charge"]["amount"];
  const long long funds = Micros(week) + 466'667;
  const std::string credit =
      std::to_string(funds / 1'000'000) + "." + [&] {
        std::string f = std::to_string(funds % 1'000'000);
        return std::string(6 - f.size(), '0') + f;
      }();
  AddNodeAndEnrol(RealMapperDevices(), 1, credit);
  StartAgent();
  ASSERT_TRUE(WaitFor([&] { return NodeAgent()["status"] == "online"; }, kWait)) << Context();
  auto [rental, port] = RunningRental();
  ASSERT_GT(port, 0);
  const long long id = CreateVolume("data", 1);
  ASSERT_GT(id, 0);
  EXPECT_EQ(Wallet(), "0.000000");
  Attach(id, rental);
  WaitForMount(rental, "/mnt/data");
  ASSERT_EQ(As(rental, "echo paid > /mnt/data/kept.txt").exit_code, 0);

  Advance(kDay);  // the second day cannot be paid
  EXPECT_EQ(Volume(id)["state"], "read_only");
  Ssh ro;
  ASSERT_TRUE(WaitFor([&] {
    ro = As(rental, "cat /mnt/data/kept.txt; touch /mnt/data/new.txt");
    return ro.output.find("Read-only file system") != std::string::npos;
  }, kWait)) << ro.output << Context();
  EXPECT_EQ(ro.output.rfind("paid\n", 0), 0u) << ro.output;
  EXPECT_NE(ro.exit_code, 0);
  const std::string client = "gpuhub-vol" + std::to_string(id) + "-r" + std::to_string(rental);
  EXPECT_TRUE(WaitFor([&] {
    return Ceph({"auth", "get", "client." + client})
               .second.find("caps mds = \"allow r fsname=" + cluster->fs + " path=") !=
           std::string::npos;
  }, kWait)) << Ceph({"auth", "get", "client." + client}).second
             << "\nthe client's caps are read-only too";

  Advance(72 * 3600);
  EXPECT_EQ(Volume(id)["state"], "detached");
  WaitForMount(rental, "/mnt/data", false);
  ASSERT_TRUE(WaitFor([&] { return !ClientExists(client); }, kWait)) << server_->Log();
  EXPECT_TRUE(SubvolumeExists(id)) << "kept 7 days for a payment";

  Advance(7 * kDay);
  EXPECT_EQ(Volume(id)["state"], "deleted");
  ASSERT_TRUE(WaitFor([&] { return !SubvolumeExists(id); }, kWait)) << server_->Log();
  ExpectBooksBalance();
}

// The real engines are what matter here, not the database: SQLite only.
INSTANTIATE_TEST_SUITE_P(Sqlite, AgentCephE2eTest, ::testing::Values("sqlite"));

}  // namespace
}  // namespace gpuhub::testing
