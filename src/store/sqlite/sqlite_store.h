// SQLite implementation of store::Store: one file, WAL journal, synchronous=FULL.
//
// Why FULL and not NORMAL: in WAL mode NORMAL does not fsync the WAL at each commit, so a power
// loss (not a process crash) can lose the last transactions after the engine has already answered
// "201 Created" for them. Money acknowledgements must survive power loss; group commit amortizes
// the extra fsync over every command of a batch.
//
// Checkpoints (kDatabase): not inside the writer's COMMIT (SQLite's automatic checkpoint is off)
// but on a thread of their own (store/sqlite/wal_checkpointer.h), woken by a commit that leaves
// the WAL at kSqliteWalCheckpointPages or more; past kSqliteWalMaxPages the writer checkpoints
// itself, so the WAL stays bounded when that thread lags or fails (store/limits.h).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "store/limits.h"
#include "store/sqlite/wal_checkpointer.h"
#include "store/statement_cache.h"
#include "store/store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace gpuhub::store {

// When the WAL is checkpointed (kDatabase only; tests make the limits small).
struct SqliteWalOptions {
  int checkpoint_pages = kSqliteWalCheckpointPages;  // wakes the background checkpointer
  int max_pages = kSqliteWalMaxPages;                // the writer checkpoints itself
  bool background = true;  // false: no checkpointer thread (tests of the writer's own bound)
};
// Where the WAL's checkpoints stand, for tests and operators.
struct SqliteWalStats {
  int wal_pages = 0;  // frames in the WAL after the last commit (since it last started over)
  std::uint64_t writer_checkpoints = 0;          // the writer's own, past max_pages
  std::uint64_t writer_checkpoint_failures = 0;  // of which timed out (a long reader)
  WalCheckpointer::Stats background;             // no runs without a checkpointer
};

class SqliteStore final : public Store {
 public:
  enum class Mode {
    kDatabase,    // WAL journal: a server's database
    kBackupFile,  // rollback journal: one self-contained file (store/backup.h), created if missing
    kReadOnly,    // an existing file, never written (a backup being read)
    kReader,      // an existing server database, read beside its writer (store/read_pool.h)
  };
  // Opens or creates the database file; sets WAL (kDatabase), synchronous=FULL, a busy timeout and
  // foreign keys.
  static Result<std::unique_ptr<SqliteStore>> Open(const std::string& path,
                                                   Mode mode = Mode::kDatabase,
                                                   SqliteWalOptions wal = {});
  ~SqliteStore() override;

  std::string Describe() const override { return "sqlite:" + path_; }
  Result<bool> TryAcquireWriterLock() override;
  void ReleaseWriterLock() override;
  Result<int> SchemaVersion() override;
  Status Apply(const WriteBatch& batch) override;
  Status Scan(std::string_view table, const std::vector<std::string>& columns,
              std::string_view order_by, const std::function<Status(const Row&)>& fn) override;
  Status Query(const Select& select, const std::function<Status(const Row&)>& fn) override;
  Result<std::vector<std::string>> ExplainPlan(const Select& select) override;

  // Backups (store/backup.h), not part of the Store interface:
  // Copies the whole database into a new file at `path` with the online backup API (one step: a
  // consistent snapshot while other connections write), then switches the copy to a rollback
  // journal so that it is one self-contained file.
  Status BackupTo(const std::string& path);
  // The table's column names in their order; not_found when there is no such table.
  Result<std::vector<std::string>> Columns(std::string_view table);
  // Runs SQL from code (the backup's own table).
  Status ExecScript(const std::string& sql) { return Exec(sql); }

  SqliteWalStats wal_stats() const;

 protected:
  Status ApplyMigration(const Migration& migration) override;
  Status EnsureMigrationsTable() override;

 private:
  SqliteStore(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  Status Exec(const std::string& sql);
  Status Error(std::string_view what) const;
  Result<sqlite3_stmt*> Prepared(const std::string& sql);
  // The prepared statement of `write`'s shape (store/statement_cache.h); Apply resets it after its
  // step.
  Result<sqlite3_stmt*> PreparedWrite(const Write& write);
  // sqlite3_wal_hook: after every commit, with the WAL's size in pages.
  static int OnWalCommit(void* store, sqlite3* db, const char* name, int pages);
  // After Apply's commit: the writer's own checkpoint when the WAL reached max_pages.
  void BoundWal();
  // Runs one SELECT with its parameters bound in order; `what` names it in errors.
  Status RunSelect(const std::string& sql, const std::vector<Value>& parameters,
                   const std::function<Status(const Row&)>& fn, std::string_view what);

  std::string path_;
  sqlite3* db_ = nullptr;
  int lock_fd_ = -1;       // the sidecar path + ".lock", flock()ed (what earlier versions take)
  int file_lock_fd_ = -1;  // the database file itself, OFD-locked at kSqliteEngineLockOffset
  std::map<std::string, sqlite3_stmt*> statements_;  // by SQL: reads, the fence
  StatementCache<sqlite3_stmt*> writes_;              // by shape: Apply's rows
  SqliteWalOptions wal_;
  int wal_pages_ = 0;                     // set by OnWalCommit
  int next_writer_checkpoint_pages_ = 0;  // max_pages, or later after a failed attempt
  std::uint64_t writer_checkpoints_ = 0;
  std::uint64_t writer_checkpoint_failures_ = 0;
  std::unique_ptr<WalCheckpointer> checkpointer_;  // kDatabase with background
};

}  // namespace gpuhub::store
