#include "store/read_pool.h"

#include <utility>

namespace gpuhub::store {

ReadPool::ReadPool(std::string url, std::size_t max_connections)
    : url_(std::move(url)), max_connections_(max_connections > 0 ? max_connections : 1) {}

Result<std::unique_ptr<Store>> ReadPool::Take() {
  std::unique_lock lock(mu_);
  idle_changed_.wait(lock, [&] { return !idle_.empty() || open_ < max_connections_; });
  if (!idle_.empty()) {
    std::unique_ptr<Store> store = std::move(idle_.back());
    idle_.pop_back();
    return store;
  }
  ++open_;  // reserved while opening outside the lock (a PostgreSQL connect takes a round trip)
  lock.unlock();
  auto opened = OpenReadStore(url_);
  if (!opened.ok()) {
    lock.lock();
    --open_;
    idle_changed_.notify_one();
  }
  return opened;
}

void ReadPool::Give(std::unique_ptr<Store> store, const Status& outcome) {
  std::lock_guard lock(mu_);
  if (outcome.code() == StatusCode::kUnavailable) {
    --open_;  // the database went away under it: the next Query opens a fresh connection
  } else {
    idle_.push_back(std::move(store));
  }
  idle_changed_.notify_one();
}

Status ReadPool::Query(const Select& select, const std::function<Status(const Row&)>& fn) {
  GPUHUB_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Take());
  Status s = store->Query(select, fn);
  Give(std::move(store), s);
  return s;
}

Result<std::vector<std::string>> ReadPool::ExplainPlan(const Select& select) {
  GPUHUB_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Take());
  auto plan = store->ExplainPlan(select);
  Give(std::move(store), plan.status());
  return plan;
}

std::size_t ReadPool::open_connections() const {
  std::lock_guard lock(mu_);
  return open_;
}

}  // namespace gpuhub::store
