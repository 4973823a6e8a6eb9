#include "http/desired_waiters.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "http/limits.h"

namespace gpuhub::http {
namespace {

std::string RandomEpoch() {
  unsigned char bytes[8];
  randombytes_buf(bytes, sizeof bytes);
  char hex[sizeof bytes * 2 + 1];
  sodium_bin2hex(hex, sizeof hex, bytes, sizeof bytes);
  return hex;
}

}  // namespace

DesiredWaiters::DesiredWaiters(std::size_t max_waiters)
    : max_waiters_(max_waiters), epoch_(RandomEpoch()) {}

DesiredWaiters::~DesiredWaiters() { Stop(); }

Response DesiredWaiters::Unchanged(const std::string& version, int wait_seconds) {
  nlohmann::ordered_json body = {
      {"changed", false}, {"version", version}, {"wait_seconds", wait_seconds}};
  Response r = Response::Json(200, body.dump());
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

// To a parked poll: its host was authenticated when it parked.
Response DesiredWaiters::ParkedUnchanged(const std::string& version, int wait_seconds,
                                         std::int64_t host_id) {
  Response r = Unchanged(version, wait_seconds);
  r.host_agent_id = host_id;
  return r;
}

void DesiredWaiters::Start(engine::Engine& engine, Answer answer, std::function<bool()> draining) {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  engine_ = &engine;
  answer_ = std::move(answer);
  draining_ = std::move(draining);
  thread_ = std::thread([this] { Loop(); });
}

void DesiredWaiters::Stop() {
  std::vector<std::pair<Responder, Response>> answers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = refusing_ = true;
    answers = TakeExpired(Steady::now(), /*all=*/true);
  }
  wake_.notify_all();
  for (auto& [respond, response] : answers) respond(std::move(response));
  if (thread_.joinable()) thread_.join();
}

std::size_t DesiredWaiters::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiters_.size();
}

std::uint64_t DesiredWaiters::Park(std::int64_t host_id, const std::string& version,
                                   int wait_seconds, Responder respond) {
  std::optional<Waiter> replaced;
  std::uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refusing_) return 0;
    auto it = waiters_.find(host_id);
    if (it != waiters_.end()) {
      deadlines_.erase({it->second.deadline, host_id});
      replaced = std::move(it->second);
      waiters_.erase(it);
    } else if (waiters_.size() >= max_waiters_) {
      return 0;
    }
    Waiter w;
    w.ticket = ticket = next_ticket_++;
    w.version = version;
    w.wait_seconds = wait_seconds;
    w.deadline = Steady::now() + std::chrono::seconds(wait_seconds);
    w.respond = std::move(respond);
    deadlines_.insert({w.deadline, host_id});
    waiters_.emplace(host_id, std::move(w));
  }
  wake_.notify_all();  // the earliest deadline may be this one
  if (replaced) replaced->respond(ParkedUnchanged(replaced->version, 0, host_id));
  return ticket;
}

std::optional<Responder> DesiredWaiters::Withdraw(std::int64_t host_id, std::uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = waiters_.find(host_id);
  if (it == waiters_.end() || it->second.ticket != ticket) return std::nullopt;
  Responder respond = std::move(it->second.respond);
  deadlines_.erase({it->second.deadline, host_id});
  waiters_.erase(it);
  return respond;
}

void DesiredWaiters::Changed(std::int64_t host_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Only parked hosts are re-read: a host that is not waiting gets the change with its next
    // poll (which compares versions itself) or heartbeat.
    if (!waiters_.count(host_id)) return;
    pending_.insert(host_id);
  }
  wake_.notify_all();
}

std::vector<std::pair<Responder, Response>> DesiredWaiters::TakeExpired(Steady::time_point now,
                                                                        bool all) {
  std::vector<std::pair<Responder, Response>> out;
  while (!deadlines_.empty() && (all || deadlines_.begin()->first <= now)) {
    const std::int64_t host = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    auto it = waiters_.find(host);
    if (it == waiters_.end()) continue;
    out.emplace_back(std::move(it->second.respond),
                     ParkedUnchanged(it->second.version, all ? 0 : it->second.wait_seconds, host));
    waiters_.erase(it);
  }
  return out;
}

void DesiredWaiters::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    auto until = Steady::now() + std::chrono::milliseconds(kDesiredWaiterTickMilliseconds);
    if (!deadlines_.empty()) until = std::min(until, deadlines_.begin()->first);
    const bool can_check = !check_in_flight_ && !pending_.empty();
    if (can_check) until = std::min(until, next_check_);
    wake_.wait_until(lock, until, [&] {
      return stopping_ ||
             (!check_in_flight_ && !pending_.empty() && Steady::now() >= next_check_) ||
             (!deadlines_.empty() && deadlines_.begin()->first <= Steady::now());
    });
    if (stopping_) break;
    const bool drain = draining_ && draining_();
    if (drain) refusing_ = true;
    auto answers = TakeExpired(Steady::now(), drain);
    std::vector<std::int64_t> hosts;
    if (!check_in_flight_ && !pending_.empty() && Steady::now() >= next_check_ && !drain) {
      while (!pending_.empty() && hosts.size() < kMaxHostsPerDesiredCheck) {
        hosts.push_back(*pending_.begin());
        pending_.erase(pending_.begin());
      }
      check_in_flight_ = true;
    }
    lock.unlock();
    for (auto& [respond, response] : answers) respond(std::move(response));
    if (!hosts.empty()) SubmitCheck(std::move(hosts));
    lock.lock();
  }
}

void DesiredWaiters::SubmitCheck(std::vector<std::int64_t> hosts) {
  struct Found {
    std::int64_t host = 0;
    std::uint64_t ticket = 0;
    Response response;
  };
  auto found = std::make_shared<std::vector<Found>>();
  engine::Command command;
  command.apply = [this, hosts, found](engine::Txn& txn) {
    for (std::int64_t host : hosts) {
      std::uint64_t ticket = 0;
      std::string version;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = waiters_.find(host);
        if (it == waiters_.end()) continue;
        ticket = it->second.ticket;
        version = it->second.version;
      }
      if (auto answer = answer_(txn, host, version); answer) {
        found->push_back({host, ticket, std::move(*answer)});
      }
    }
    return true;
  };
  // After the commit of this command (and of every command before it, the changing one among
  // them): the new state is durable before any agent acts on it.
  command.done = [this, hosts, found](const Status& commit) {
    std::vector<std::pair<Responder, Response>> answers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      check_in_flight_ = false;
      if (!commit.ok()) {
        pending_.insert(hosts.begin(), hosts.end());
        next_check_ = Steady::now() + std::chrono::milliseconds(kDesiredCheckRetryMilliseconds);
      } else {
        for (auto& f : *found) {
          auto it = waiters_.find(f.host);
          // Replaced by a newer poll since: that one was read after this and compares itself.
          if (it == waiters_.end() || it->second.ticket != f.ticket) continue;
          answers.emplace_back(std::move(it->second.respond), std::move(f.response));
          deadlines_.erase({it->second.deadline, f.host});
          waiters_.erase(it);
        }
      }
    }
    wake_.notify_all();
    for (auto& [respond, response] : answers) respond(std::move(response));
  };
  Status queued = engine_->Submit(std::move(command));
  if (!queued.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    check_in_flight_ = false;
    pending_.insert(hosts.begin(), hosts.end());
    next_check_ = Steady::now() + std::chrono::milliseconds(kDesiredCheckRetryMilliseconds);
  }
}

}  // namespace gpuhub::http
