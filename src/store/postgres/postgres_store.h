// PostgreSQL implementation of store::Store through libpq, over the same schema as SQLite.
//
// One connection, used by the engine's writer thread. AcquireWriterLock takes a session-level
// advisory lock (kPostgresEngineLockKey) so that only one engine writes a database; API nodes
// that only read would not take it. A broken connection is re-established on the next call and
// the lock taken again (a commit that failed on the broken connection was rolled back by the
// server).
#pragma once

#include <memory>
#include <string>

#include "store/store.h"

struct pg_conn;

namespace gpuhub::store {

class PostgresStore final : public Store {
 public:
  static Result<std::unique_ptr<PostgresStore>> Open(const std::string& url);
  ~PostgresStore() override;

  std::string Describe() const override { return description_; }
  Status AcquireWriterLock() override;
  Result<int> SchemaVersion() override;
  Status Apply(const WriteBatch& batch) override;
  Status Scan(std::string_view table, const std::vector<std::string>& columns,
              std::string_view order_by, const std::function<Status(const Row&)>& fn) override;

 protected:
  Status ApplyMigration(const Migration& migration) override;
  Status EnsureMigrationsTable() override;

 private:
  PostgresStore(std::string url, std::string description, pg_conn* conn)
      : url_(std::move(url)), description_(std::move(description)), conn_(conn) {}
  Status Exec(const std::string& sql);
  Status EnsureConnected();
  Status Error(std::string_view what) const;

  std::string url_;
  std::string description_;
  pg_conn* conn_ = nullptr;
  bool wants_lock_ = false;
  bool lock_lost_ = false;
};

// The URL with any password removed, safe for logs.
std::string RedactPostgresUrl(std::string_view url);

}  // namespace gpuhub::store
