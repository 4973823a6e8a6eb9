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

}  // namespace
}  // namespace gpuhub::agent
