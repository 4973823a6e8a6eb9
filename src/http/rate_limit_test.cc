#include "http/rate_limit.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace gpuhub::http {
namespace {

TEST(RateLimiterTest, AllowsCountPerWindowThenSaysHowLongToWait) {
  std::int64_t now = 1000;
  RateLimiter limiter({3, 60}, [&] { return now; });
  EXPECT_EQ(limiter.Acquire("a"), 0);
  now += 10;
  EXPECT_EQ(limiter.Acquire("a"), 0);
  EXPECT_EQ(limiter.Acquire("a"), 0);
  EXPECT_EQ(limiter.Acquire("a"), 50);  // the first event leaves the window at 1060
  EXPECT_EQ(limiter.Acquire("b"), 0);   // keys are independent
  now = 1060;
  EXPECT_EQ(limiter.Acquire("a"), 0);
  limiter.Reset("a");
  EXPECT_EQ(limiter.RetryAfter("a"), 0);
}

// The login limit per username is an Acquire before the password hash: a burst of concurrent
// guesses must not all see the same free slot.
TEST(RateLimiterTest, ConcurrentAcquiresNeverExceedTheCount) {
  RateLimiter limiter({3, 900}, [] { return std::int64_t{1000}; });
  constexpr int kKeys = 2000;
  constexpr int kThreads = 8;
  std::vector<std::atomic<int>> allowed(kKeys);
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      for (int k = 0; k < kKeys; ++k) {
        if (limiter.Acquire("user:" + std::to_string(k)) == 0) ++allowed[k];
      }
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(allowed[k].load(), 3) << "key " << k;
}

TEST(WorkerPoolTest, RunsTasksAndRefusesBeyondItsQueue) {
  std::atomic<int> done{0};
  {
    WorkerPool pool(2, 1000);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.Post([&] { ++done; }));
  }
  EXPECT_EQ(done.load(), 100);
  std::mutex gate;
  gate.lock();
  WorkerPool pool(1, 1);
  ASSERT_TRUE(pool.Post([&] { std::lock_guard<std::mutex> l(gate); }));
  // The worker may or may not have taken the first task yet; at most two fit.
  int accepted = 0;
  for (int i = 0; i < 3; ++i) accepted += pool.Post([] {}) ? 1 : 0;
  EXPECT_LE(accepted, 2);
  gate.unlock();
}

}  // namespace
}  // namespace gpuhub::http
