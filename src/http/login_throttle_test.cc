#include "http/login_throttle.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace gpuhub::http {
namespace {

LoginThrottlePolicy Policy() {
  LoginThrottlePolicy p;
  p.free_failures = 3;
  p.max_delay_seconds = 60;
  p.failures_per_username = 10;
  p.window_seconds = 3600;
  return p;
}

// One failed attempt: Begin let it through (0) and the password was wrong.
std::int64_t Fail(LoginThrottle& t, const std::string& user, const std::string& address) {
  std::int64_t wait = t.Begin(user, address);
  if (wait == 0) t.Failed(user);
  return wait;
}

TEST(LoginThrottleTest, DelayDoublesPerFailureAfterTheFreeOnesUpToTheCap) {
  EXPECT_EQ(LoginThrottle::DelaySeconds(0, 3, 60), 0);
  EXPECT_EQ(LoginThrottle::DelaySeconds(2, 3, 60), 0);
  EXPECT_EQ(LoginThrottle::DelaySeconds(3, 3, 60), 1);
  EXPECT_EQ(LoginThrottle::DelaySeconds(4, 3, 60), 2);
  EXPECT_EQ(LoginThrottle::DelaySeconds(8, 3, 60), 32);
  EXPECT_EQ(LoginThrottle::DelaySeconds(9, 3, 60), 60);
  EXPECT_EQ(LoginThrottle::DelaySeconds(1'000'000, 3, 60), 60);
}

TEST(LoginThrottleTest, AGuesserIsSlowedOnItsOwnAddressWhileTheOwnerLogsInFromHers) {
  std::int64_t now = 1000;
  LoginThrottle t(Policy(), [&] { return now; });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fail(t, "root", "10.0.0.66"), 0) << i;
  // The 4th attempt at once waits 1 s, then 2 s, 4 s: each wait is counted from the last failure.
  EXPECT_EQ(t.Begin("root", "10.0.0.66"), 1);
  now += 1;
  EXPECT_EQ(Fail(t, "root", "10.0.0.66"), 0);
  EXPECT_EQ(t.Begin("root", "10.0.0.66"), 2);
  now += 1;
  EXPECT_EQ(t.Begin("root", "10.0.0.66"), 1);  // refused attempts do not push the wait further
  now += 1;
  EXPECT_EQ(Fail(t, "root", "10.0.0.66"), 0);
  EXPECT_EQ(t.Begin("root", "10.0.0.66"), 4);
  // Meanwhile the owner, from her own address, is not slowed at all.
  EXPECT_EQ(t.Begin("root", "192.0.2.7"), 0);
  t.Succeeded("root", "192.0.2.7");
  // Another username from the guesser's address is another pair.
  EXPECT_EQ(t.Begin("alice", "10.0.0.66"), 0);
}

TEST(LoginThrottleTest, TheDelayStopsAtTheCapAndAPairIsForgottenAWindowAfterItsLastFailure) {
  std::int64_t now = 1000;
  LoginThrottle t(Policy(), [&] { return now; });
  std::vector<std::int64_t> waits;
  for (int i = 0; i < 12; ++i) {
    std::int64_t wait = t.Begin("bob", "10.0.0.1");  // 0: this attempt is checked (and fails)
    waits.push_back(wait);
    if (wait == 0) continue;
    now += wait;
    ASSERT_EQ(t.Begin("bob", "10.0.0.1"), 0) << i;  // the wait is over
  }
  EXPECT_EQ(waits, (std::vector<std::int64_t>{0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60}));
  EXPECT_EQ(t.Begin("bob", "10.0.0.1"), 60);  // a guesser at the cap stays at the cap...
  now += 3599;
  EXPECT_EQ(t.Begin("bob", "10.0.0.1"), 0);
  EXPECT_EQ(t.Begin("bob", "10.0.0.1"), 60);  // ...as long as it keeps failing
  now += 3600;                                // an hour without failure: forgotten
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.Begin("bob", "10.0.0.1"), 0) << i;
  EXPECT_EQ(t.Begin("bob", "10.0.0.1"), 1);
}

TEST(LoginThrottleTest, ASuccessForgetsThePair) {
  std::int64_t now = 1000;
  LoginThrottle t(Policy(), [&] { return now; });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fail(t, "carol", "10.0.0.2"), 0);
  now += 1;
  ASSERT_EQ(t.Begin("carol", "10.0.0.2"), 0);
  t.Succeeded("carol", "10.0.0.2");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fail(t, "carol", "10.0.0.2"), 0) << i;
}

// Many addresses, each within its free failures: once the username's budget over all addresses is
// spent, every address that fails gets its delay after one failure, and an address that did not
// fail still has its attempt checked.
TEST(LoginThrottleTest, AUsernameUnderADistributedAttackSlowsEveryFailingAddressNotTheOwner) {
  std::int64_t now = 1000;
  LoginThrottle t(Policy(), [&] { return now; });
  for (int a = 0; a < 5; ++a) {
    for (int i = 0; i < 2; ++i) EXPECT_EQ(Fail(t, "root", "10.1.0." + std::to_string(a)), 0);
  }
  // 10 failures: the budget is spent. A new address gets one attempt, then waits.
  EXPECT_EQ(Fail(t, "root", "10.2.0.1"), 0);
  EXPECT_EQ(t.Begin("root", "10.2.0.1"), 1);
  // An address with failures already waits (2 failures, 1 free: 2 s after its last).
  EXPECT_EQ(t.Begin("root", "10.1.0.0"), 2);
  // The owner's clean address: checked at once, however long the attack goes on.
  for (int round = 0; round < 100; ++round) {
    Fail(t, "root", "10.3." + std::to_string(round) + ".1");
  }
  EXPECT_EQ(t.Begin("root", "192.0.2.7"), 0);
  t.Succeeded("root", "192.0.2.7");
  EXPECT_EQ(t.Begin("root", "192.0.2.7"), 0);
  // Other usernames are not touched by root's budget.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fail(t, "dave", "10.1.0.0"), 0);
  // The budget is over a window: an hour later root is back to 3 free failures per address.
  now += 3600;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Fail(t, "root", "10.4.0.1"), 0) << i;
}

TEST(LoginThrottleTest, ConcurrentGuessesFromOneAddressGetOnlyTheFreeAttempts) {
  LoginThrottle t(Policy(), [] { return std::int64_t{1000}; });
  constexpr int kThreads = 8;
  constexpr int kUsers = 500;
  std::vector<std::atomic<int>> through(kUsers);
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int u = 0; u < kUsers; ++u) {
        for (int k = 0; k < 2; ++k) {
          if (t.Begin("user" + std::to_string(u), "10.0.0.9") == 0) ++through[u];
        }
      }
    });
  }
  go = true;
  for (auto& th : threads) th.join();
  for (int u = 0; u < kUsers; ++u) EXPECT_EQ(through[u].load(), 3) << u;
}

TEST(LoginThrottleTest, MemoryIsBoundedByForgettingTheLeastRecentlyFailedPair) {
  LoginThrottlePolicy p = Policy();
  p.free_failures = 1;
  p.failures_per_username = 1'000'000;
  std::int64_t now = 1000;
  LoginThrottle t(p, [&] { return now; });
  ASSERT_EQ(t.Begin("first", "10.0.0.1"), 0);
  EXPECT_EQ(t.Begin("first", "10.0.0.1"), 1);
  for (std::size_t i = 0; i < LoginThrottle::kMaxPairs; ++i) {
    ASSERT_EQ(t.Begin("u" + std::to_string(i), "10.0.0.1"), 0);
  }
  // "first" was the least recently failed of kMaxPairs + 1 pairs: it is gone.
  EXPECT_EQ(t.Begin("first", "10.0.0.1"), 0);
  // The newest are still there.
  EXPECT_EQ(t.Begin("u" + std::to_string(LoginThrottle::kMaxPairs - 1), "10.0.0.1"), 1);
}

}  // namespace
}  // namespace gpuhub::http
