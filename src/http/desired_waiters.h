// The parked long-polls of GET /v1/agent/desired (api_agent.cc): at most one per host, at most
// max_waiters in all, none holding a thread. A poll whose host already runs the current desired
// version parks its Responder here (Park, from inside the poll's command on the writer thread);
// it is answered
// - with the new desired state, as soon as a command that changed it has committed: the engine
//   calls Changed(host) inside that command (engine/agent_watch.h), this table's thread then runs
//   one command that re-reads the parked hosts' desired state (`answer`, on the writer thread) and
//   answers, after that command's commit, those whose version moved;
// - unchanged, when its wait_seconds pass, when a second poll of the same host replaces it, or at
//   once when the server drains (so a shutdown never waits for a long-poll).
// Every Responder is called exactly once: whoever takes it out of the table under the lock calls
// it (outside the lock).
//
// Order: answers that carry a desired state (polls and heartbeats) are numbered (NextSeq, on the
// writer thread, so in the order they were read); the agent keeps the newest, so a heartbeat's
// answer read before a poll's but delivered after it never takes a new workload back. The epoch
// is random per process: the numbers restart with the server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include "engine/agent_watch.h"
#include "engine/engine.h"
#include "http/router.h"

namespace gpuhub::http {

class DesiredWaiters final : public engine::DesiredWatch {
 public:
  using Steady = std::chrono::steady_clock;
  // On the writer thread: the answer for a host whose agent holds `version`, when its desired
  // state is no longer that version (nullopt while it still is).
  using Answer = std::function<std::optional<Response>(engine::Txn&, std::int64_t host_id,
                                                        const std::string& version)>;

  explicit DesiredWaiters(std::size_t max_waiters);
  ~DesiredWaiters() override;
  DesiredWaiters(const DesiredWaiters&) = delete;
  DesiredWaiters& operator=(const DesiredWaiters&) = delete;

  // Starts the thread (timeouts, re-reads). `draining`: the server is shutting down (may be null).
  void Start(engine::Engine& engine, Answer answer, std::function<bool()> draining);
  // Answers every waiter unchanged and joins the thread. Idempotent.
  void Stop();

  // Parks `respond` for the host until its desired state leaves `version` or `wait` passes. A
  // poll already parked for the host is answered unchanged (the newer one replaces it). Returns
  // the waiter's ticket, or 0 when it was not parked (the table is full, stopping or draining):
  // the caller answers at once.
  std::uint64_t Park(std::int64_t host_id, const std::string& version, int wait_seconds,
                     Responder respond);
  // The poll's commit failed: takes its waiter back (false when it was answered already).
  std::optional<Responder> Withdraw(std::int64_t host_id, std::uint64_t ticket);

  void Changed(std::int64_t host_id) override;  // engine::DesiredWatch, on the writer thread

  std::uint64_t NextSeq() { return ++seq_; }
  const std::string& epoch() const { return epoch_; }
  std::size_t size() const;

  // {"changed": false, "version", "wait_seconds"}: what an unchanged poll answers. wait_seconds 0
  // tells the agent the server did not wait (a standby, a full table, a drain): it waits itself
  // before the next poll.
  static Response Unchanged(const std::string& version, int wait_seconds);

 private:
  static Response ParkedUnchanged(const std::string& version, int wait_seconds,
                                  std::int64_t host_id);

  struct Waiter {
    std::uint64_t ticket = 0;
    std::string version;
    int wait_seconds = 0;
    Steady::time_point deadline;
    Responder respond;
  };
  void Loop();
  // Takes the waiters whose deadline passed (all of them when `all`).
  std::vector<std::pair<Responder, Response>> TakeExpired(Steady::time_point now, bool all);
  void SubmitCheck(std::vector<std::int64_t> hosts);

  const std::size_t max_waiters_;
  const std::string epoch_;
  std::atomic<std::uint64_t> seq_{0};
  engine::Engine* engine_ = nullptr;
  Answer answer_;
  std::function<bool()> draining_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::unordered_map<std::int64_t, Waiter> waiters_;
  std::set<std::pair<Steady::time_point, std::int64_t>> deadlines_;  // (deadline, host)
  std::set<std::int64_t> pending_;  // hosts noted changed, not re-read yet
  bool check_in_flight_ = false;
  Steady::time_point next_check_{};  // after a refused check: not before
  std::uint64_t next_ticket_ = 1;
  bool stopping_ = false;
  bool refusing_ = false;  // draining or stopping: nothing parks any more
  std::thread thread_;
};

}  // namespace gpuhub::http
