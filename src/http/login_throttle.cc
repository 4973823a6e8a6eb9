#include "http/login_throttle.h"

#include <algorithm>
#include <chrono>

namespace gpuhub::http {

LoginThrottle::LoginThrottle(LoginThrottlePolicy policy, std::function<std::int64_t()> now_seconds)
    : policy_(policy),
      now_(std::move(now_seconds)),
      username_failures_({policy.failures_per_username, policy.window_seconds}, now_) {
  if (!now_) {
    now_ = [] {
      return std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
}

std::int64_t LoginThrottle::DelaySeconds(std::int64_t failures, std::int64_t free_failures,
                                         std::int64_t max_delay_seconds) {
  if (failures < free_failures) return 0;
  std::int64_t doublings = failures - free_failures;
  // 2^doublings without overflow: past 2^40 s the cap has long applied.
  if (doublings >= 40) return max_delay_seconds;
  return std::min<std::int64_t>(std::int64_t{1} << doublings, max_delay_seconds);
}

std::int64_t LoginThrottle::Begin(const std::string& username, const std::string& address) {
  // The username's budget first (its own lock): RetryAfter > 0 means the budget is spent.
  bool strict = username_failures_.RetryAfter(username) > 0;
  std::int64_t free_failures = strict ? 1 : policy_.free_failures;
  std::string key = username;
  key += '\n';  // never part of a username or an address
  key += address;
  std::lock_guard<std::mutex> lock(mutex_);
  std::int64_t now = now_();
  auto found = by_key_.find(key);
  if (found != by_key_.end() && found->second->last_failure + policy_.window_seconds <= now) {
    pairs_.erase(found->second);  // forgotten: its last failure is older than the window
    by_key_.erase(found);
    found = by_key_.end();
  }
  if (found != by_key_.end()) {
    Pair& pair = *found->second;
    std::int64_t delay = DelaySeconds(pair.failures, free_failures, policy_.max_delay_seconds);
    if (delay > 0 && now < pair.last_failure + delay) return pair.last_failure + delay - now;
    ++pair.failures;
    pair.last_failure = now;
    pairs_.splice(pairs_.begin(), pairs_, found->second);
    return 0;
  }
  if (pairs_.size() >= kMaxPairs) {
    by_key_.erase(pairs_.back().key);
    pairs_.pop_back();
  }
  pairs_.push_front(Pair{key, 1, now});
  by_key_.emplace(std::move(key), pairs_.begin());
  return 0;
}

void LoginThrottle::Succeeded(const std::string& username, const std::string& address) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = by_key_.find(username + '\n' + address);
  if (found == by_key_.end()) return;
  pairs_.erase(found->second);
  by_key_.erase(found);
}

void LoginThrottle::Failed(const std::string& username) { username_failures_.Record(username); }

}  // namespace gpuhub::http
