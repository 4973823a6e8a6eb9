// Rate limiting for logins and signups: a sliding log per key ("user:alice", "addr:10.0.0.7").
// At most `count` events per `window_seconds`; RetryAfter says how long until the next is allowed
// (for the Retry-After header). Memory is bounded: at most kMaxKeys keys, expired ones pruned.
//
// Thread-safe. Time comes from a function (steady clock by default) so tests can move it.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/config.h"

namespace gpuhub::http {

class RateLimiter {
 public:
  static constexpr std::size_t kMaxKeys = 100'000;
  explicit RateLimiter(RateLimit limit, std::function<std::int64_t()> now_seconds = nullptr);

  // Seconds until one more event is allowed for `key`; 0 when it is allowed now.
  std::int64_t RetryAfter(const std::string& key);
  void Record(const std::string& key);
  // RetryAfter, and Record when allowed, atomically: of N concurrent callers with one slot left,
  // exactly one gets 0.
  std::int64_t Acquire(const std::string& key);
  void Reset(const std::string& key);

 private:
  std::int64_t RetryAfterLocked(const std::string& key, std::int64_t now);
  void RecordLocked(const std::string& key, std::int64_t now);
  void Prune(std::int64_t now);
  RateLimit limit_;
  std::function<std::int64_t()> now_;
  std::mutex mutex_;
  std::unordered_map<std::string, std::deque<std::int64_t>> events_;
};

// A fixed pool of threads with a bounded queue (Argon2id hashing off the I/O and writer threads).
class WorkerPool {
 public:
  WorkerPool(int threads, std::size_t max_queued);
  ~WorkerPool();
  // false when the queue is full or the pool stopped (the caller answers 503).
  bool Post(std::function<void()> task);
  // Runs the tasks already queued, then joins the threads. Idempotent; called by the destructor.
  void Stop();

 private:
  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gpuhub::http
