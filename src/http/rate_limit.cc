#include "http/rate_limit.h"

#include <chrono>

namespace gpuhub::http {

RateLimiter::RateLimiter(RateLimit limit, std::function<std::int64_t()> now_seconds)
    : limit_(limit), now_(std::move(now_seconds)) {
  if (!now_) {
    now_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
}

std::int64_t RateLimiter::RetryAfterLocked(const std::string& key, std::int64_t now) {
  auto it = events_.find(key);
  if (it == events_.end()) return 0;
  auto& log = it->second;
  while (!log.empty() && log.front() + limit_.window_seconds <= now) log.pop_front();
  if (static_cast<std::int64_t>(log.size()) < limit_.count) return 0;
  return std::max<std::int64_t>(1, log.front() + limit_.window_seconds - now);
}

std::int64_t RateLimiter::RetryAfter(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return RetryAfterLocked(key, now_());
}

void RateLimiter::Prune(std::int64_t now) {
  for (auto it = events_.begin(); it != events_.end();) {
    if (it->second.empty() || it->second.back() + limit_.window_seconds <= now) {
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
}

void RateLimiter::RecordLocked(const std::string& key, std::int64_t now) {
  if (events_.size() >= kMaxKeys && !events_.count(key)) Prune(now);
  auto& log = events_[key];
  log.push_back(now);
  while (static_cast<std::int64_t>(log.size()) > limit_.count) log.pop_front();
}

void RateLimiter::Record(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  RecordLocked(key, now_());
}

std::int64_t RateLimiter::Acquire(const std::string& key) {
  // Check and record under one lock: concurrent callers must not all see the last free slot.
  std::lock_guard<std::mutex> lock(mutex_);
  std::int64_t now = now_();
  std::int64_t wait = RetryAfterLocked(key, now);
  if (wait == 0) RecordLocked(key, now);
  return wait;
}

void RateLimiter::Reset(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.erase(key);
}

WorkerPool::WorkerPool(int threads, std::size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < std::max(1, threads); ++i) {
    threads_.emplace_back([this] {
      while (true) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
          if (tasks_.empty()) return;
          task = std::move(tasks_.front());
          tasks_.pop_front();
        }
        task();
      }
    });
  }
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

bool WorkerPool::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || tasks_.size() >= max_queued_) return false;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

}  // namespace gpuhub::http
