#include "agent/reconcile.h"

#include <gtest/gtest.h>

namespace gpuhub::agent {
namespace {

constexpr TimestampMicros kNow = 1'800'000'000'000'000;

WorkloadSpec W(const std::string& id, TimestampMicros not_after = kNow + kMicrosPerHour) {
  WorkloadSpec w;
  w.id = id;
  w.not_after = not_after;
  return w;
}
ActualContainer C(const std::string& id, const std::string& workload, const std::string& state,
                  TimestampMicros not_after = kNow + kMicrosPerHour) {
  return {id, workload, state, 40000, not_after};
}
std::vector<std::string> Ids(const std::vector<ActualContainer>& v) {
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(c.id);
  return out;
}

TEST(ReconcileTest, CreatesWhatIsMissingRemovesWhatIsNotDesired) {
  ReconcileInput in{{W("lease-1"), W("lease-2")}, true, {}, kNow};
  Plan p = PlanReconcile(in, {C("c1", "lease-1", "running"), C("c9", "lease-9", "running")});
  ASSERT_EQ(p.create.size(), 1u);
  EXPECT_EQ(p.create[0].id, "lease-2");
  EXPECT_EQ(Ids(p.remove), std::vector<std::string>{"c9"});
  EXPECT_TRUE(p.start.empty());
}

TEST(ReconcileTest, NeverTwoContainersForOneWorkload) {
  ReconcileInput in{{W("lease-1")}, true, {}, kNow};
  Plan p = PlanReconcile(in, {C("old", "lease-1", "exited"), C("new", "lease-1", "running"),
                              C("x", "", "running")});
  EXPECT_TRUE(p.create.empty());
  EXPECT_EQ(Ids(p.remove), (std::vector<std::string>{"old", "x"}));
  // An exited one alone is restarted, not duplicated.
  Plan q = PlanReconcile(in, {C("old", "lease-1", "exited")});
  EXPECT_TRUE(q.create.empty());
  EXPECT_EQ(Ids(q.start), std::vector<std::string>{"old"});
}

// What moby v20.10.24 does with each state (daemon/start.go): a paused, dead or removing container
// answers 409 to a start, so starting it again every second would never end: it is recreated. A
// restarting one is Docker's restart policy at work after the container exited by itself.
TEST(ReconcileTest, EachDockerStateGetsWhatTheRealEngineAllows) {
  ReconcileInput in{{W("lease-1"), W("lease-2"), W("lease-3"), W("lease-4"), W("lease-5"),
                     W("lease-6"), W("lease-7")},
                    true, {}, kNow};
  Plan p = PlanReconcile(in, {C("run", "lease-1", "running"), C("new", "lease-2", "created"),
                              C("out", "lease-3", "exited"), C("zzz", "lease-4", "paused"),
                              C("rip", "lease-5", "dead"), C("bye", "lease-6", "removing"),
                              C("again", "lease-7", "restarting")});
  EXPECT_EQ(Ids(p.start), (std::vector<std::string>{"new", "out"}));
  EXPECT_EQ(Ids(p.recreate), (std::vector<std::string>{"zzz", "rip", "bye"}));
  EXPECT_EQ(Ids(p.restarting), std::vector<std::string>{"again"});
  EXPECT_TRUE(p.remove.empty()) << "a recreate is not a plain removal: the workload stays";
  EXPECT_TRUE(p.create.empty()) << "created once the old container is gone";
  // Not desired any more: removed whatever its state.
  ReconcileInput none{{}, true, {}, kNow};
  Plan q = PlanReconcile(none,
                         {C("zzz", "lease-4", "paused"), C("again", "lease-7", "restarting")});
  EXPECT_EQ(Ids(q.remove), (std::vector<std::string>{"zzz", "again"}));
  EXPECT_TRUE(q.recreate.empty());
}

TEST(ReconcileTest, RecreatesBackOffBoundedly) {
  using std::chrono::milliseconds;
  EXPECT_EQ(RecreateBackoff(0), milliseconds(0)) << "the first recreate is at once";
  EXPECT_EQ(RecreateBackoff(1), milliseconds(5'000));
  EXPECT_EQ(RecreateBackoff(2), milliseconds(10'000));
  EXPECT_EQ(RecreateBackoff(4), milliseconds(40'000));
  EXPECT_EQ(RecreateBackoff(6), milliseconds(160'000));
  EXPECT_EQ(RecreateBackoff(7), milliseconds(300'000)) << "at most 5 minutes";
  EXPECT_EQ(RecreateBackoff(1'000'000), milliseconds(300'000));
}

TEST(ReconcileTest, PastNotAfterTheServerIsAskedFirst) {
  ReconcileInput in{{W("lease-1", kNow - 1)}, true, {}, kNow};
  std::vector<ActualContainer> actual{C("c1", "lease-1", "running")};
  Plan p = PlanReconcile(in, actual);
  EXPECT_TRUE(p.remove.empty());
  EXPECT_EQ(p.awaiting, std::vector<std::string>{"lease-1"});
  in.expired_confirmed = {"lease-1"};
  p = PlanReconcile(in, actual);
  EXPECT_EQ(Ids(p.remove), std::vector<std::string>{"c1"});
  EXPECT_TRUE(p.create.empty()) << "an expired workload is never created";
}

TEST(ReconcileTest, WithoutAnyDesiredStateLabelsDecide) {
  ReconcileInput in{{}, false, {}, kNow};
  Plan p = PlanReconcile(in, {C("keep", "lease-1", "running", kNow + 1),
                              C("gone", "lease-2", "running", kNow)});
  EXPECT_EQ(Ids(p.remove), std::vector<std::string>{"gone"});
  EXPECT_TRUE(p.create.empty());
}

TEST(ReconcileTest, FromSummariesTrustsOnlyWhatTheAgentMade) {
  std::vector<ContainerSummary> list = {
      {"a", "gpuhub-lease-1", "running",
       {{kLabelManaged, "true"}, {kLabelWorkload, "lease-1"}, {kLabelSshPort, "40007"},
        {kLabelNotAfter, "2027-01-15T08:00:00Z"}}},
      {"b", "someone-else", "running", {{kLabelManaged, "true"}, {kLabelWorkload, "lease-2"}}},
      {"c", "gpuhub-../x", "running", {{kLabelManaged, "true"}, {kLabelWorkload, "../x"}}}};
  auto actual = FromSummaries(list);
  ASSERT_EQ(actual.size(), 3u);
  EXPECT_EQ(actual[0].workload, "lease-1");
  EXPECT_EQ(actual[0].ssh_port, 40007);
  EXPECT_EQ(actual[0].label_not_after, kNow);
  EXPECT_EQ(actual[1].workload, "") << "named otherwise: not ours to adopt";
  EXPECT_EQ(actual[2].workload, "");
}

TEST(ReconcileTest, PicksTheLowestFreePort) {
  EXPECT_EQ(PickPort(40000, 40002, {}), 40000);
  EXPECT_EQ(PickPort(40000, 40002, {40000, 40001}), 40002);
  EXPECT_EQ(PickPort(40000, 40002, {40000, 40001, 40002}), 0);
}

// Bind mounts are fixed when a container is made: a volume attached, detached or turned
// read-only, or a host mount that went away, means a new container (removed now, created on the
// next pass); the same volumes keep it.
TEST(ReconcileTest, AChangeOfNetworkVolumesRecreatesTheContainer) {
  WorkloadSpec w = W("lease-1");
  w.network_volumes = {{7, "data", "/mnt/data", "m:1", "/volumes/a", "c7", "", false}};
  ActualContainer same = C("c1", "lease-1", "running");
  same.volumes = "7:c7:rw";
  ReconcileInput in{{w}, true, {}, kNow};
  Plan keep = PlanReconcile(in, {same});
  EXPECT_TRUE(keep.remove.empty());
  EXPECT_TRUE(keep.volumes_changed.empty());
  for (const char* label : {"", "7:c7:ro", "7:c8:rw", "7:c7:rw,9:c9:rw"}) {
    ActualContainer c = same;
    c.volumes = label;
    Plan p = PlanReconcile(in, {c});
    EXPECT_EQ(Ids(p.remove), std::vector<std::string>{"c1"}) << label;
    EXPECT_EQ(p.volumes_changed, std::vector<std::string>{"lease-1"}) << label;
    EXPECT_TRUE(p.create.empty()) << "created once Docker no longer lists it";
  }
  // Detached: the workload has none, its container had one.
  ReconcileInput detached{{W("lease-1")}, true, {}, kNow};
  EXPECT_EQ(Ids(PlanReconcile(detached, {same}).remove), std::vector<std::string>{"c1"});
  // The host mount is gone (ceph-fuse died): made again.
  ReconcileInput lost = in;
  lost.volumes_lost = {"lease-1"};
  EXPECT_EQ(PlanReconcile(lost, {same}).volumes_changed, std::vector<std::string>{"lease-1"});
  // A container of before network volumes (no label) with a workload that has none is kept.
  EXPECT_TRUE(PlanReconcile(detached, {C("c1", "lease-1", "running")}).remove.empty());
}

// The reconciler removed lease-1's container while a heartbeat that still said "running" was in
// flight: its answer must not swallow the "stopped" the server has not heard (the lease would
// show running forever). A "stopped" the heartbeat did carry is done.
TEST(ReconcileTest, AStoppedReportLeavesOnlyOnceAHeartbeatCarriedIt) {
  std::map<std::string, WorkloadStatus> status = {{"lease-1", {"lease-1", "stopped", 0, ""}},
                                                  {"lease-2", {"lease-2", "stopped", 0, ""}},
                                                  {"lease-3", {"lease-3", "running", 22, ""}}};
  const std::vector<WorkloadStatus> sent = {{"lease-1", "running", 20022, ""},
                                            {"lease-2", "stopped", 0, ""},
                                            {"lease-3", "running", 22, ""}};
  ForgetDeliveredStops(sent, &status);
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status.at("lease-1").state, "stopped") << "still to be reported";
  EXPECT_EQ(status.count("lease-2"), 0u) << "delivered";
  EXPECT_EQ(status.at("lease-3").state, "running");
  ForgetDeliveredStops({{"lease-1", "stopped", 0, ""}}, &status);
  EXPECT_EQ(status.count("lease-1"), 0u);
}

}  // namespace
}  // namespace gpuhub::agent
