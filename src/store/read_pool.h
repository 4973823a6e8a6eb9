// Reads beside the engine's writer: history pages, lookups of closed records and anything else
// that must not run on (and block) the writer thread.
//
// Contract:
// - Thread-safe. Each Query takes one idle connection (opening a new one, up to max_connections,
//   when none is idle; otherwise it waits for one), runs, and gives it back.
// - A Query sees every write committed before it starts (SQLite WAL readers and PostgreSQL READ
//   COMMITTED both read the latest committed state per statement), so a read issued after the
//   engine acknowledged a command sees that command's rows.
// - A connection whose query failed with `unavailable` (the database went away) is closed, not
//   reused: the next Query opens a fresh one.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/limits.h"
#include "store/store.h"

namespace gpuhub::store {

class ReadPool {
 public:
  // `url` as for OpenStore. Opens nothing yet.
  explicit ReadPool(std::string url, std::size_t max_connections = kMaxReadConnections);
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  Status Query(const Select& select, const std::function<Status(const Row&)>& fn);
  Result<std::vector<std::string>> ExplainPlan(const Select& select);

  // Connections open now (idle or in use), for tests and metrics.
  std::size_t open_connections() const;

 private:
  Result<std::unique_ptr<Store>> Take();
  void Give(std::unique_ptr<Store> store, const Status& outcome);

  const std::string url_;
  const std::size_t max_connections_;
  mutable std::mutex mu_;
  std::condition_variable idle_changed_;
  std::vector<std::unique_ptr<Store>> idle_;
  std::size_t open_ = 0;  // idle + in use + being opened
};

}  // namespace gpuhub::store
