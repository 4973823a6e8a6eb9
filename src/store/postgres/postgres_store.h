// PostgreSQL implementation of store::Store through libpq, over the same schema as SQLite.
//
// One connection, used by the engine's writer thread. TryAcquireWriterLock takes a session-level
// advisory lock (kPostgresEngineLockKey) so that only one engine writes a database (its session
// then shows application_name "gpuhub writer" in pg_stat_activity). A broken connection without
// the lock (a standby polling, a backup) is re-established on the next call. A broken connection
// WITH the lock means the lock is gone with the session: every call then fails with `unavailable`
// until ReleaseWriterLock, so the engine steps down and competes for the lock again (and claims a
// new term) instead of writing on a new session that another engine may already have replaced.
//
// Every Apply of a store holding a writer term runs the fence first, in the same transaction and
// pipeline: SELECT ... FROM engine_writer WHERE term = $1 FOR SHARE, which errors unless exactly
// one row matched.
//
// Writes are named prepared statements, one per write shape (store/statement_cache.h) and session:
// a shape's first Apply on a session prepares it (outside the transaction, before BEGIN), every
// later row only binds and executes it, so the server parses and plans each shape once per
// session, not every row. A new session (a reset, a reconnect, ReleaseWriterLock) starts with none.
#pragma once

#include <memory>
#include <string>

#include "store/statement_cache.h"
#include "store/store.h"

struct pg_conn;

namespace gpuhub::store {

class PostgresStore final : public Store {
 public:
  // `read_only`: a session whose transactions are all READ ONLY (store/read_pool.h).
  static Result<std::unique_ptr<PostgresStore>> Open(const std::string& url,
                                                     bool read_only = false);
  ~PostgresStore() override;

  std::string Describe() const override { return description_; }
  Result<bool> TryAcquireWriterLock() override;
  void ReleaseWriterLock() override;
  Result<int> SchemaVersion() override;
  Status Apply(const WriteBatch& batch) override;
  Status Scan(std::string_view table, const std::vector<std::string>& columns,
              std::string_view order_by, const std::function<Status(const Row&)>& fn) override;
  Status Query(const Select& select, const std::function<Status(const Row&)>& fn) override;
  Result<std::vector<std::string>> ExplainPlan(const Select& select) override;

  // Backups (store/backup.h), not part of the Store interface:
  // Runs `fn` inside one REPEATABLE READ READ ONLY transaction: every Scan it makes reads the same
  // snapshot.
  Status InSnapshot(const std::function<Status()>& fn);
  // The table's column names in their order; not_found when there is no such table.
  Result<std::vector<std::string>> Columns(std::string_view table);

 protected:
  Status ApplyMigration(const Migration& migration) override;
  Status EnsureMigrationsTable() override;
  int LockWaitMilliseconds() const override;

 private:
  PostgresStore(std::string url, std::string description, pg_conn* conn, bool read_only)
      : url_(std::move(url)), description_(std::move(description)), conn_(conn),
        read_only_(read_only) {}
  Status Exec(const std::string& sql);
  Status EnsureConnected();
  Status SetUpSession();
  // After a failure: a writer whose connection broke has lost the lock.
  void NoteConnectionState();
  // Gives the advisory lock back at once when this session holds it and is healthy.
  void UnlockWhileConnected();
  // Prepares, on this session, the shapes of `batch` it has not prepared yet.
  Status PrepareShapes(const WriteBatch& batch);
  // The session changed (reset, reconnected) or may have lost its statements: prepare again.
  void ForgetPrepared() { prepared_.Clear(); }
  Status Error(std::string_view what) const;
  // Runs one SELECT with its parameters ($1...) bound in order; `what` names it in errors.
  Status RunSelect(const std::string& sql, const std::vector<Value>& parameters,
                   const std::function<Status(const Row&)>& fn, std::string_view what);

  std::string url_;
  std::string description_;
  pg_conn* conn_ = nullptr;
  bool holds_lock_ = false;
  bool lock_lost_ = false;
  bool read_only_ = false;
  StatementCache<std::string> prepared_;  // statement names on this session, by write shape
  std::uint64_t statements_named_ = 0;    // names are never reused, even across sessions
};

// The URL with any password removed, safe for logs.
std::string RedactPostgresUrl(std::string_view url);

}  // namespace gpuhub::store
