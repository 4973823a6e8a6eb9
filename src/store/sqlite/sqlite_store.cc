#include "store/sqlite/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "store/limits.h"

namespace gpuhub::store {

Result<std::unique_ptr<SqliteStore>> SqliteStore::Open(const std::string& path, Mode mode,
                                                       SqliteWalOptions wal) {
  sqlite3* db = nullptr;
  int flags = mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY
              : mode == Mode::kReader  ? SQLITE_OPEN_READWRITE  // shares the WAL index; never creates
                                       : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::Unavailable("cannot open sqlite:" + path + ": " + message);
  }
  std::unique_ptr<SqliteStore> store(new SqliteStore(path, db));
  sqlite3_busy_timeout(db, static_cast<int>(kSqliteBusyTimeoutMs));
  std::vector<const char*> pragmas;
  if (mode == Mode::kDatabase) {
    pragmas = {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"};
  } else if (mode == Mode::kBackupFile) {
    pragmas = {"PRAGMA journal_mode=DELETE", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"};
  } else if (mode == Mode::kReader) {
    pragmas = {"PRAGMA query_only=ON", "PRAGMA foreign_keys=ON"};
  } else {
    pragmas = {"PRAGMA query_only=ON"};
  }
  for (const char* pragma : pragmas) {
    GPUHUB_RETURN_IF_ERROR(store->Exec(pragma).WithContext("sqlite:" + path));
  }
  if (mode == Mode::kDatabase) {
    // Our hook replaces SQLite's automatic checkpoint (sqlite3_wal_autocheckpoint is a wal hook
    // too): commits only note the WAL's size and wake the checkpointer.
    store->wal_ = wal;
    store->next_writer_checkpoint_pages_ = wal.max_pages;
    sqlite3_wal_hook(db, &SqliteStore::OnWalCommit, store.get());
    if (wal.background) store->checkpointer_ = std::make_unique<WalCheckpointer>(path);
  }
  return store;
}

Status SqliteStore::BackupTo(const std::string& path) {
  sqlite3* out = nullptr;
  if (sqlite3_open_v2(path.c_str(), &out,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string message = out ? sqlite3_errmsg(out) : "out of memory";
    sqlite3_close(out);
    return Status::Unavailable("cannot create " + path + ": " + message);
  }
  Status result;
  sqlite3_backup* backup = sqlite3_backup_init(out, "main", db_, "main");
  if (backup == nullptr) {
    result = Status::Unavailable("backup of " + Describe() + ": " + sqlite3_errmsg(out));
  } else {
    // -1: every page in one step, so the copy is one snapshot of the source (a step that returns
    // BUSY or LOCKED is retried: another connection held a lock for a moment).
    int rc = SQLITE_OK;
    for (int attempt = 0; attempt < 100; ++attempt) {
      rc = sqlite3_backup_step(backup, -1);
      if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) break;
      sqlite3_sleep(50);
    }
    sqlite3_backup_finish(backup);
    if (rc != SQLITE_DONE) {
      result = Status::Unavailable("backup of " + Describe() + ": " + sqlite3_errstr(rc));
    }
  }
  if (result.ok() &&
      sqlite3_exec(out, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    result = Status::Unavailable("backup file " + path + ": " + sqlite3_errmsg(out));
  }
  sqlite3_close(out);
  return result;
}

Result<std::vector<std::string>> SqliteStore::Columns(std::string_view table) {
  if (!IsIdentifier(table)) return Status::InvalidArgument("not a table name");
  std::vector<std::string> columns;
  GPUHUB_ASSIGN_OR_RETURN(sqlite3_stmt * stmt,
                          Prepared("SELECT name FROM pragma_table_info(?1) ORDER BY cid"));
  sqlite3_bind_text(stmt, 1, table.data(), static_cast<int>(table.size()), SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    columns.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  }
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE) return Error("columns of " + std::string(table));
  if (columns.empty()) return Status::NotFound(Describe() + " has no table " + std::string(table));
  return columns;
}

SqliteStore::~SqliteStore() {
  SqliteWalStats stats = wal_stats();
  if (writer_term_ != 0 && (stats.background.runs > 0 || stats.writer_checkpoints > 0)) {
    // An engine's database (CLI verbs stay quiet): what the WAL cost this run; a checkpointer
    // that lags shows as writer checkpoints.
    spdlog::info(
        "event=sqlite_wal_closed db=\"{}\" wal_pages={} background_checkpoints={} "
        "background_complete={} background_failures={} writer_checkpoints={} "
        "writer_checkpoint_failures={}",
        path_, stats.wal_pages, stats.background.runs, stats.background.complete,
        stats.background.failures, stats.writer_checkpoints, stats.writer_checkpoint_failures);
  }
  // The checkpointer's connection first: the writer's close, when it is the last connection to the
  // database, checkpoints the whole WAL and removes it (as SQLite always did).
  checkpointer_.reset();
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  writes_.ForEach([](sqlite3_stmt* stmt) { sqlite3_finalize(stmt); });
  sqlite3_close(db_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
  if (file_lock_fd_ >= 0) ::close(file_lock_fd_);
}

Status SqliteStore::Error(std::string_view what) const {
  return Status::Unavailable("sqlite:" + path_ + ": " + std::string(what) + ": " +
                             sqlite3_errmsg(db_));
}

Status SqliteStore::Exec(const std::string& sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return Status::Unavailable(text);
  }
  return Status::Ok();
}

Result<bool> SqliteStore::TryAcquireWriterLock() {
  if (lock_fd_ >= 0) return true;
  // 1. A sidecar file, locked with flock: what earlier versions take, so that an older engine on
  //    the same path and this one still exclude each other. It is keyed by the path, though: a
  //    symlink or a hard link to the same database has another sidecar.
  std::string lock_path = path_ + ".lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot open " + lock_path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  // 2. The database file itself (its inode, whichever path reaches it), with an open file
  //    description lock on one byte SQLite never locks. Not flock on the whole file (emulated by
  //    POSIX locks over NFS, where it would meet SQLite's own) and not a POSIX lock (released when
  //    SQLite closes any descriptor of the file in this process); OFD locks are neither.
  int file_fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (file_fd < 0) {
    ::close(fd);
    return Status::Unavailable("cannot open sqlite:" + path_ + ": " + std::strerror(errno));
  }
  struct flock byte {};
  byte.l_type = F_WRLCK;
  byte.l_whence = SEEK_SET;
  byte.l_start = static_cast<off_t>(kSqliteEngineLockOffset);
  byte.l_len = 1;
  if (::fcntl(file_fd, F_OFD_SETLK, &byte) != 0) {
    int error = errno;
    ::close(file_fd);
    ::close(fd);
    if (error == EAGAIN || error == EACCES) {
      // An error, not "taken": this engine must not even wait as a standby here, because SQLite
      // names the WAL after the path, and a takeover through another path would not see the
      // frames the writer left in its own WAL.
      return Status::Unavailable("sqlite:" + path_ +
                                 " is in use by another gpuhub engine through another path to the "
                                 "same file (a symlink or a hard link); use the writer's path");
    }
    return Status::Unavailable("cannot lock sqlite:" + path_ + ": " + std::strerror(error));
  }
  lock_fd_ = fd;
  file_lock_fd_ = file_fd;
  return true;
}

void SqliteStore::ReleaseWriterLock() {
  writer_term_ = 0;
  for (int* fd : {&lock_fd_, &file_lock_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Status SqliteStore::EnsureMigrationsTable() {
  return Exec(
             "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT "
             "NOT NULL, applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP)")
      .WithContext(Describe());
}

Result<int> SqliteStore::SchemaVersion() {
  // Reads only (a read-only backup file is asked too): no table yet is version 0.
  bool exists = false;
  GPUHUB_RETURN_IF_ERROR(Scan("sqlite_master", {"name"}, "", [&](const Row& row) -> Status {
    auto name = row.Text(0);
    exists = exists || (name.ok() && *name == "schema_migrations");
    return Status::Ok();
  }));
  if (!exists) return 0;
  int version = 0;
  Status s = Scan("schema_migrations", {"version"}, "version", [&](const Row& row) {
    GPUHUB_ASSIGN_OR_RETURN(std::int64_t v, row.Int(0));
    version = static_cast<int>(v);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return version;
}

Status SqliteStore::ApplyMigration(const Migration& migration) {
  GPUHUB_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status s = Exec(migration.sql);
  if (s.ok()) {
    s = Exec(RecordMigrationSql(migration));
  }
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) (void)Exec("ROLLBACK");
  return s;
}

Result<sqlite3_stmt*> SqliteStore::Prepared(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) {
    sqlite3_reset(it->second);
    sqlite3_clear_bindings(it->second);
    return it->second;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return Error("prepare '" + sql + "'");
  }
  statements_.emplace(sql, stmt);
  return stmt;
}

Result<sqlite3_stmt*> SqliteStore::PreparedWrite(const Write& write) {
  if (sqlite3_stmt** cached = writes_.Find(write)) {
    // Apply resets a statement after its step; bindings are all overwritten (same shape, same
    // number of values), so there is nothing to clear.
    return *cached;
  }
  const std::string sql = WriteSql(write, /*dollar=*/false);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                         &stmt, nullptr) != SQLITE_OK) {
    return Error("prepare '" + sql + "'");
  }
  return writes_.Add(write, stmt);
}

int SqliteStore::OnWalCommit(void* arg, sqlite3*, const char*, int pages) {
  auto* store = static_cast<SqliteStore*>(arg);
  store->wal_pages_ = pages;
  // As SQLite's automatic checkpoint would, at every commit that leaves the WAL this long. Once a
  // checkpoint has copied every frame, the next commit starts the WAL over and the requests stop
  // until it is this long again; while they cannot (a commit came first), each commit asks for
  // the frames it added.
  if (pages >= store->wal_.checkpoint_pages && store->checkpointer_) {
    store->checkpointer_->Request();
  }
  return SQLITE_OK;
}

void SqliteStore::BoundWal() {
  if (wal_pages_ < next_writer_checkpoint_pages_) return;
  // RESTART: waits (the busy timeout) for the checkpointer and for readers of old snapshots, copies
  // every frame, fsyncs the database file, and makes the next commit start the WAL over.
  int wal_pages = -1, copied_pages = -1;
  std::unique_lock<std::mutex> exclusive;  // waits for the checkpointer's run in flight
  if (checkpointer_) exclusive = checkpointer_->Exclusive();
  int rc = sqlite3_wal_checkpoint_v2(db_, "main", SQLITE_CHECKPOINT_RESTART, &wal_pages,
                                     &copied_pages);
  if (rc == SQLITE_OK) {
    ++writer_checkpoints_;
    next_writer_checkpoint_pages_ = wal_.max_pages;
    return;
  }
  // A reader held an old snapshot for the whole busy timeout: the commit itself is durable; try
  // again max_pages later rather than make every commit wait.
  ++writer_checkpoint_failures_;
  next_writer_checkpoint_pages_ = wal_pages_ + wal_.max_pages;
  spdlog::warn(
      "event=sqlite_wal_over_limit db=\"{}\" wal_pages={} limit_pages={} error=\"{}\" "
      "next_attempt_pages={}",
      path_, wal_pages_, wal_.max_pages, sqlite3_errmsg(db_), next_writer_checkpoint_pages_);
}

SqliteWalStats SqliteStore::wal_stats() const {
  SqliteWalStats stats;
  stats.wal_pages = wal_pages_;
  stats.writer_checkpoints = writer_checkpoints_;
  stats.writer_checkpoint_failures = writer_checkpoint_failures_;
  if (checkpointer_) stats.background = checkpointer_->stats();
  return stats;
}

Status SqliteStore::Apply(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("begin");
  }
  auto fail = [&](Status s) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  };
  if (writer_term_ != 0) {
    // The fence, inside the transaction: BEGIN IMMEDIATE holds the database's write lock, so the
    // term read here cannot change before COMMIT.
    auto fence = Prepared("SELECT term FROM engine_writer WHERE id = 1");
    if (!fence.ok()) return fail(fence.status());
    std::int64_t term = 0;
    int rc = sqlite3_step(*fence);
    if (rc == SQLITE_ROW) term = sqlite3_column_int64(*fence, 0);
    sqlite3_reset(*fence);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(Error("writer fence"));
    if (term != writer_term_) {
      return fail(Status::Unavailable(Describe() + ": " + FencedMessage(writer_term_)));
    }
  }
  for (const Write& w : batch.writes()) {
    auto stmt_or = PreparedWrite(w);
    if (!stmt_or.ok()) return fail(stmt_or.status());
    sqlite3_stmt* stmt = *stmt_or;
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      int index = static_cast<int>(i) + 1;
      const Value& v = w.values[i];
      if (const auto* n = std::get_if<std::int64_t>(&v)) {
        sqlite3_bind_int64(stmt, index, *n);
      } else if (const auto* s = std::get_if<std::string>(&v)) {
        sqlite3_bind_text(stmt, index, s->data(), static_cast<int>(s->size()), SQLITE_STATIC);
      } else {
        sqlite3_bind_null(stmt, index);
      }
    }
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    if (rc != SQLITE_DONE) return fail(Error("write to " + w.table));
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return fail(Error("commit"));
  }
  BoundWal();
  return Status::Ok();
}

Status SqliteStore::Scan(std::string_view table, const std::vector<std::string>& columns,
                         std::string_view order_by, const std::function<Status(const Row&)>& fn) {
  return RunSelect(ScanSql(table, columns, order_by), {}, fn, table);
}

Status SqliteStore::Query(const Select& select, const std::function<Status(const Row&)>& fn) {
  return RunSelect(SelectSql(select, /*dollar=*/false), SelectParameters(select), fn, select.table);
}

Result<std::vector<std::string>> SqliteStore::ExplainPlan(const Select& select) {
  std::vector<std::string> plan;
  // EXPLAIN QUERY PLAN rows: id, parent, notused, detail.
  GPUHUB_RETURN_IF_ERROR(RunSelect("EXPLAIN QUERY PLAN " + SelectSql(select, /*dollar=*/false),
                                   SelectParameters(select),
                                   [&](const Row& row) -> Status {
                                     GPUHUB_ASSIGN_OR_RETURN(std::string detail, row.Text(3));
                                     plan.push_back(std::move(detail));
                                     return Status::Ok();
                                   },
                                   select.table));
  return plan;
}

Status SqliteStore::RunSelect(const std::string& sql, const std::vector<Value>& parameters,
                              const std::function<Status(const Row&)>& fn, std::string_view what) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    return Error("prepare '" + sql + "'");
  }
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    if (const auto* n = std::get_if<std::int64_t>(&parameters[i])) {
      sqlite3_bind_int64(stmt, index, *n);
    } else if (const auto* text = std::get_if<std::string>(&parameters[i])) {
      sqlite3_bind_text(stmt, index, text->data(), static_cast<int>(text->size()), SQLITE_STATIC);
    } else {
      sqlite3_bind_null(stmt, index);
    }
  }
  const int columns = sqlite3_column_count(stmt);
  Status result;
  Row row;
  while (true) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      result = Error("read " + std::string(what));
      break;
    }
    row.values.clear();
    for (int i = 0; i < columns; ++i) {
      switch (sqlite3_column_type(stmt, i)) {
        case SQLITE_NULL:
          row.values.emplace_back(std::monostate{});
          break;
        case SQLITE_INTEGER:
          row.values.emplace_back(std::int64_t{sqlite3_column_int64(stmt, i)});
          break;
        default: {
          const unsigned char* text = sqlite3_column_text(stmt, i);
          int n = sqlite3_column_bytes(stmt, i);
          row.values.emplace_back(std::string(reinterpret_cast<const char*>(text), n));
        }
      }
    }
    result = fn(row);
    if (!result.ok()) break;
  }
  sqlite3_finalize(stmt);
  return result;
}

}  // namespace gpuhub::store
