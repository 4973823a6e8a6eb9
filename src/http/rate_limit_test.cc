#include "http/rate_limit.h"

#include <gtest/gtest.h>

#include <atomic>

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
