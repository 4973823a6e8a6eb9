// Login throttling: slow a password guesser down, never lock the account's owner out.
//
// A fixed "N failures lock the username for 15 minutes" lets anyone lock any account (`root`
// included) forever by sending N wrong passwords now and then. Instead failures are kept per
// (username, client address) pair, and only that pair is slowed:
//  - the first `free_failures` failures of a pair cost nothing (typos);
//  - after that each attempt must wait 1 s, 2 s, 4 s, ... (doubling per failure, at most
//    `max_delay_seconds`) after the pair's last failure; earlier attempts are refused (429 with
//    Retry-After) without checking the password;
//  - a pair is forgotten `window_seconds` after its last failure, and at once on a success.
// An attacker with many addresses gets `free_failures` cheap guesses per address, so the username
// also has a budget over all addresses: once it saw `failures_per_username` failures within
// `window_seconds`, every pair of that username gets one free failure instead of `free_failures`.
// That only slows addresses that failed; an address with no recent failure for the username (the
// owner's, usually) always has its attempt checked, so a correct password goes through.
//
// Usernames are keyed as given: pass the canonical (lower-case) form so that case variants are one
// account. Memory is bounded: at most kMaxPairs pairs, the least recently failed forgotten first.
// Thread-safe; time comes from a function (steady clock by default) so tests can move it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "http/config.h"
#include "http/rate_limit.h"

namespace gpuhub::http {

class LoginThrottle {
 public:
  static constexpr std::size_t kMaxPairs = 100'000;
  explicit LoginThrottle(LoginThrottlePolicy policy,
                         std::function<std::int64_t()> now_seconds = nullptr);

  // Seconds this attempt must wait (the 429's Retry-After); 0 when it may check the password now.
  // An attempt let through counts as a failure of its pair from now until Succeeded: of concurrent
  // guesses only the free ones get through.
  std::int64_t Begin(const std::string& username, const std::string& address);
  // The password checked out: the pair is forgotten.
  void Succeeded(const std::string& username, const std::string& address);
  // The password was wrong: counts toward the username's budget over all addresses.
  void Failed(const std::string& username);

  // The delay after `failures` failures of a pair with `free_failures` free ones (0 while free).
  static std::int64_t DelaySeconds(std::int64_t failures, std::int64_t free_failures,
                                   std::int64_t max_delay_seconds);

 private:
  struct Pair {
    std::string key;
    std::int64_t failures = 0;
    std::int64_t last_failure = 0;
  };
  LoginThrottlePolicy policy_;
  std::function<std::int64_t()> now_;
  std::mutex mutex_;
  // Most recently failed first; the back is forgotten when kMaxPairs are held.
  std::list<Pair> pairs_;
  std::unordered_map<std::string, std::list<Pair>::iterator> by_key_;
  RateLimiter username_failures_;  // thread-safe on its own
};

}  // namespace gpuhub::http
