#include "store/postgres/postgres_store.h"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <string>
#include <vector>

#include "store/limits.h"

namespace gpuhub::store {
namespace {

constexpr unsigned kInt8Oid = 20;
constexpr unsigned kInt2Oid = 21;
constexpr unsigned kInt4Oid = 23;

struct ResultCloser {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultCloser>;

std::string Trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// libpq's default prints the server's notices and warnings ("WARNING: terminating connection due
// to immediate shutdown command") raw on stderr, between the log's events: into the log instead,
// as one event (the log sink escapes their line breaks).
void LogNotice(void*, const char* message) {
  spdlog::warn("event=postgres_notice message=\"{}\"", Trimmed(message));
}

// Errors unless engine_writer still names term $1 (store.h: fencing). The CASE is not folded at
// plan time (count(*) is not a constant), and the failed cast names the cause in the server log.
constexpr const char* kFenceSql =
    "SELECT CAST(CASE WHEN count(*) = 1 THEN '1' ELSE 'gpuhub writer fenced: a newer writer term "
    "holds the database' END AS BIGINT) FROM (SELECT 1 FROM engine_writer WHERE id = 1 AND term = "
    "$1 FOR SHARE) AS fence";

}  // namespace

std::string RedactPostgresUrl(std::string_view url) {
  // postgresql://user:secret@host/db -> postgresql://user@host/db
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  auto at = url.find('@', scheme + 3);
  if (at == std::string_view::npos) return std::string(url);
  auto colon = url.find(':', scheme + 3);
  std::string out(url);
  if (colon != std::string_view::npos && colon < at) out.erase(colon, at - colon);
  // password=... in the query string
  auto pw = out.find("password=");
  if (pw != std::string::npos) {
    auto end = out.find('&', pw);
    out.replace(pw, (end == std::string::npos ? out.size() : end) - pw, "password=REDACTED");
  }
  return out;
}

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& url,
                                                           bool read_only) {
  std::string with_options = url;
  auto add = [&](std::string_view name, int value) {
    if (with_options.find(std::string(name) + "=") != std::string::npos) return;
    with_options += (with_options.find('?') == std::string::npos ? "?" : "&");
    with_options += std::string(name) + "=" + std::to_string(value);
  };
  add("connect_timeout", kPostgresConnectTimeoutSeconds);
  add("keepalives_idle", kPostgresKeepaliveIdleSeconds);
  add("keepalives_interval", kPostgresKeepaliveIntervalSeconds);
  add("keepalives_count", kPostgresKeepaliveCount);
  add("tcp_user_timeout", kPostgresTcpUserTimeoutMilliseconds);
  PGconn* conn = PQconnectdb(with_options.c_str());
  std::string description = RedactPostgresUrl(url);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string message = conn ? Trimmed(PQerrorMessage(conn)) : "out of memory";
    PQfinish(conn);
    return Status::Unavailable("cannot connect to " + description + ": " + message);
  }
  PQsetNoticeProcessor(conn, LogNotice, nullptr);  // kept across PQreset
  std::unique_ptr<PostgresStore> store(
      new PostgresStore(with_options, description, conn, read_only));
  GPUHUB_RETURN_IF_ERROR(store->SetUpSession());
  return store;
}

PostgresStore::~PostgresStore() {
  UnlockWhileConnected();
  PQfinish(conn_);
}

void PostgresStore::UnlockWhileConnected() {
  // Closing the session would release the lock too, but only when its backend gets round to
  // exiting: a `gpuhub serve` started right after a CLI verb would find it still taken (and start
  // as a standby), a standby would wait a poll longer. Bounded by tcp_user_timeout.
  if (!holds_lock_ || lock_lost_ || PQstatus(conn_) != CONNECTION_OK) return;
  PgResult r(PQexec(
      conn_, ("SELECT pg_advisory_unlock(" + std::to_string(kPostgresEngineLockKey) + ")").c_str()));
}

int PostgresStore::LockWaitMilliseconds() const { return kPostgresLockWaitMilliseconds; }

Status PostgresStore::Error(std::string_view what) const {
  return Status::Unavailable(description_ + ": " + std::string(what) + ": " +
                             Trimmed(PQerrorMessage(conn_)));
}

Status PostgresStore::SetUpSession() {
  // Quiet NOTICEs ("relation already exists, skipping") from going to stderr; the server side of
  // the keepalives (a vanished writer machine releases the advisory lock within seconds).
  return Exec("SET client_min_messages = warning; SET tcp_keepalives_idle = " +
              std::to_string(kPostgresKeepaliveIdleSeconds) + "; SET tcp_keepalives_interval = " +
              std::to_string(kPostgresKeepaliveIntervalSeconds) + "; SET tcp_keepalives_count = " +
              std::to_string(kPostgresKeepaliveCount) + "; SET tcp_user_timeout = " +
              std::to_string(kPostgresTcpUserTimeoutMilliseconds) +
              (read_only_ ? "; SET default_transaction_read_only = on" : ""));
}

void PostgresStore::NoteConnectionState() {
  if (holds_lock_ && PQstatus(conn_) != CONNECTION_OK) lock_lost_ = true;
}

Status PostgresStore::EnsureConnected() {
  NoteConnectionState();
  if (lock_lost_) {
    return Status::Unavailable(description_ +
                               ": the session that held the writer lock is gone (the connection "
                               "broke or was terminated); this engine must step down");
  }
  if (PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  ForgetPrepared();
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) return Error("reconnect");
  return SetUpSession();
}

Status PostgresStore::Exec(const std::string& sql) {
  PgResult r(PQexec(conn_, sql.c_str()));
  auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    Status s = Status::Unavailable(description_ + ": " + Trimmed(PQresultErrorMessage(r.get())));
    NoteConnectionState();
    return s;
  }
  return Status::Ok();
}

Result<bool> PostgresStore::TryAcquireWriterLock() {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  if (holds_lock_) return true;
  std::string sql = "SELECT pg_try_advisory_lock(" + std::to_string(kPostgresEngineLockKey) + ")";
  PgResult r(PQexec(conn_, sql.c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("advisory lock");
  if (std::string(PQgetvalue(r.get(), 0, 0)) != "t") return false;
  holds_lock_ = true;
  // Operators (and the tests) find the writer's session by its name.
  (void)Exec("SET application_name = 'gpuhub writer'");
  return true;
}

void PostgresStore::ReleaseWriterLock() {
  writer_term_ = 0;
  if (!holds_lock_ && !lock_lost_) return;
  UnlockWhileConnected();
  holds_lock_ = false;
  lock_lost_ = false;
  // Ending the session releases the lock even when a statement is stuck; the next call opens a
  // new session (EnsureConnected).
  // A failed connect leaves a connection object in CONNECTION_BAD: EnsureConnected resets it.
  PQfinish(conn_);
  ForgetPrepared();
  conn_ = PQconnectdb(url_.c_str());
  if (PQstatus(conn_) == CONNECTION_OK) (void)SetUpSession();
}

Status PostgresStore::EnsureMigrationsTable() {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  return Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT "
      "NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
}

Result<int> PostgresStore::SchemaVersion() {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  // Reads only (a backup's read-only snapshot asks too): no table yet is version 0.
  PgResult exists(PQexec(conn_, "SELECT to_regclass('schema_migrations') IS NOT NULL"));
  if (PQresultStatus(exists.get()) != PGRES_TUPLES_OK) return Error("schema version");
  if (std::string(PQgetvalue(exists.get(), 0, 0)) != "t") return 0;
  PgResult r(PQexec(conn_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations"));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("schema version");
  return std::atoi(PQgetvalue(r.get(), 0, 0));
}

Status PostgresStore::ApplyMigration(const Migration& migration) {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  GPUHUB_RETURN_IF_ERROR(Exec("BEGIN"));
  // Several nodes starting at once: the first migrates, the others wait and then see it applied.
  Status s =
      Exec("SELECT pg_advisory_xact_lock(" + std::to_string(kPostgresEngineLockKey + 1) + ")");
  bool already = false;
  if (s.ok()) {
    std::string check =
        "SELECT 1 FROM schema_migrations WHERE version = " + std::to_string(migration.version);
    PgResult r(PQexec(conn_, check.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      s = Error("schema_migrations");
    } else {
      already = PQntuples(r.get()) > 0;
    }
  }
  if (s.ok() && !already) s = Exec(migration.sql);
  if (s.ok() && !already) {
    s = Exec(RecordMigrationSql(migration));
  }
  if (s.ok()) s = Exec("COMMIT");
  if (!s.ok()) (void)Exec("ROLLBACK");
  return s;
}

Status PostgresStore::PrepareShapes(const WriteBatch& batch) {
  for (const Write& w : batch.writes()) {
    if (prepared_.Find(w) != nullptr) continue;
    // Outside any transaction: a prepared statement lives as long as the session, whatever
    // becomes of the batch. One round trip per new shape, a few dozen per session.
    std::string name = "gpuhub_w" + std::to_string(++statements_named_);
    PgResult r(PQprepare(conn_, name.c_str(), WriteSql(w, /*dollar=*/true).c_str(), 0, nullptr));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      Status s = Status::Unavailable(description_ + ": prepare a write to " + w.table + ": " +
                                     Trimmed(PQresultErrorMessage(r.get())));
      NoteConnectionState();
      return s;
    }
    prepared_.Add(w, std::move(name));
  }
  return Status::Ok();
}

Status PostgresStore::Apply(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  GPUHUB_RETURN_IF_ERROR(PrepareShapes(batch));
  // Pipeline mode: every statement of the batch goes out in one round trip, then one Sync.
  if (PQenterPipelineMode(conn_) != 1) return Error("pipeline mode");
  std::vector<std::string> texts;
  std::vector<const char*> params;
  bool sent = PQsendQueryParams(conn_, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  // The fence, the transaction's first statement: FOR SHARE makes a takeover's term bump wait for
  // this commit, and errors (a text that is no bigint) unless the row still names our term.
  const std::string term_text = std::to_string(writer_term_);
  const bool fenced = writer_term_ != 0;
  if (sent && fenced) {
    const char* term_param = term_text.c_str();
    sent = PQsendQueryParams(conn_, kFenceSql, 1, nullptr, &term_param, nullptr, nullptr, 0) == 1;
  }
  for (const Write& w : batch.writes()) {
    if (!sent) break;
    const std::string* statement = prepared_.Find(w);  // PrepareShapes added every shape
    texts.clear();
    texts.reserve(w.values.size());
    params.assign(w.values.size(), nullptr);
    for (std::size_t i = 0; i < w.values.size(); ++i) {
      if (const auto* n = std::get_if<std::int64_t>(&w.values[i])) {
        texts.push_back(std::to_string(*n));
        params[i] = texts.back().c_str();
      } else if (const auto* s = std::get_if<std::string>(&w.values[i])) {
        params[i] = s->c_str();
      }
    }
    sent = PQsendQueryPrepared(conn_, statement->c_str(), static_cast<int>(params.size()),
                               params.data(), nullptr, nullptr, 0) == 1;
  }
  if (sent)
    sent = PQsendQueryParams(conn_, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  if (sent) sent = PQpipelineSync(conn_) == 1;
  if (!sent) {
    Status err = Error("send batch");
    if (holds_lock_) {
      // The pipeline state is unknown and a new session would not hold the lock: step down.
      lock_lost_ = true;
    } else {
      ForgetPrepared();
      PQreset(conn_);  // start over on a fresh connection
    }
    return err;
  }
  Status first_error;
  // BEGIN, the fence, the writes, COMMIT
  const std::size_t statements = batch.size() + (fenced ? 3 : 2);
  std::size_t index = 0;
  bool committed = false;
  while (true) {
    PgResult r(PQgetResult(conn_));
    if (!r) {  // the end of one statement's results; the next call gives the next statement's
      if (PQstatus(conn_) != CONNECTION_OK) {
        if (first_error.ok()) first_error = Error("connection lost during commit");
        break;
      }
      continue;
    }
    auto st = PQresultStatus(r.get());
    if (st == PGRES_PIPELINE_SYNC) break;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && first_error.ok()) {
      std::string why = st == PGRES_PIPELINE_ABORTED ? std::string("batch aborted")
                                                     : Trimmed(PQresultErrorMessage(r.get()));
      if (fenced && index == 1) why = FencedMessage(writer_term_) + " (" + why + ")";
      // invalid_sql_statement_name: the session lost statements we prepared (DISCARD ALL behind
      // our back): the next Apply prepares every shape again, under new names.
      const char* code = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      if (code != nullptr && std::string_view(code) == "26000") ForgetPrepared();
      first_error = Status::Unavailable(description_ + ": " + why);
    }
    if (index == statements - 1 && st == PGRES_COMMAND_OK && first_error.ok()) committed = true;
    ++index;
  }
  PQexitPipelineMode(conn_);
  NoteConnectionState();
  if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
    (void)Exec("ROLLBACK");
  }
  if (!first_error.ok()) return first_error;
  if (!committed) return Error("commit");
  return Status::Ok();
}

Status PostgresStore::InSnapshot(const std::function<Status()>& fn) {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  GPUHUB_RETURN_IF_ERROR(Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  Status s = fn();
  if (PQstatus(conn_) == CONNECTION_OK) (void)Exec(s.ok() ? "COMMIT" : "ROLLBACK");
  return s;
}

Result<std::vector<std::string>> PostgresStore::Columns(std::string_view table) {
  if (!IsIdentifier(table)) return Status::InvalidArgument("not a table name");
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  std::string name(table);
  const char* param = name.c_str();
  PgResult r(PQexecParams(conn_,
                          "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                          "current_schema() AND table_name = $1 ORDER BY ordinal_position",
                          1, nullptr, &param, nullptr, nullptr, 0));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("columns of " + name);
  std::vector<std::string> columns;
  for (int i = 0; i < PQntuples(r.get()); ++i) columns.emplace_back(PQgetvalue(r.get(), i, 0));
  if (columns.empty()) return Status::NotFound(description_ + " has no table " + name);
  return columns;
}

Status PostgresStore::Scan(std::string_view table, const std::vector<std::string>& columns,
                           std::string_view order_by, const std::function<Status(const Row&)>& fn) {
  return RunSelect(ScanSql(table, columns, order_by), {}, fn, table);
}

Status PostgresStore::Query(const Select& select, const std::function<Status(const Row&)>& fn) {
  return RunSelect(SelectSql(select, /*dollar=*/true), SelectParameters(select), fn, select.table);
}

Result<std::vector<std::string>> PostgresStore::ExplainPlan(const Select& select) {
  std::vector<std::string> plan;
  GPUHUB_RETURN_IF_ERROR(RunSelect("EXPLAIN " + SelectSql(select, /*dollar=*/true),
                                   SelectParameters(select),
                                   [&](const Row& row) -> Status {
                                     GPUHUB_ASSIGN_OR_RETURN(std::string line, row.Text(0));
                                     plan.push_back(std::move(line));
                                     return Status::Ok();
                                   },
                                   select.table));
  return plan;
}

Status PostgresStore::RunSelect(const std::string& sql, const std::vector<Value>& parameters,
                                const std::function<Status(const Row&)>& fn,
                                std::string_view what) {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  std::vector<std::string> texts;
  texts.reserve(parameters.size());
  std::vector<const char*> values(parameters.size(), nullptr);
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (const auto* n = std::get_if<std::int64_t>(&parameters[i])) {
      texts.push_back(std::to_string(*n));
      values[i] = texts.back().c_str();
    } else if (const auto* text = std::get_if<std::string>(&parameters[i])) {
      values[i] = text->c_str();
    }
  }
  // Single-row mode keeps memory flat however large the table.
  if (PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                        values.data(), nullptr, nullptr, 0) != 1) {
    Status err = Error("query " + std::string(what));
    NoteConnectionState();
    return err;
  }
  PQsetSingleRowMode(conn_);
  Status result;
  Row row;
  while (true) {
    PgResult r(PQgetResult(conn_));
    if (!r) break;
    auto st = PQresultStatus(r.get());
    if (st == PGRES_TUPLES_OK) continue;  // the final, empty result
    if (st != PGRES_SINGLE_TUPLE) {
      if (result.ok())
        result = Status::Unavailable(description_ + ": read " + std::string(what) + ": " +
                                     Trimmed(PQresultErrorMessage(r.get())));
      continue;
    }
    if (!result.ok()) continue;  // drain
    row.values.clear();
    const int columns = PQnfields(r.get());
    for (int i = 0; i < columns; ++i) {
      if (PQgetisnull(r.get(), 0, i)) {
        row.values.emplace_back(std::monostate{});
        continue;
      }
      unsigned type = PQftype(r.get(), i);
      const char* text = PQgetvalue(r.get(), 0, i);
      if (type == kInt8Oid || type == kInt4Oid || type == kInt2Oid) {
        row.values.emplace_back(static_cast<std::int64_t>(std::strtoll(text, nullptr, 10)));
      } else {
        row.values.emplace_back(std::string(text, PQgetlength(r.get(), 0, i)));
      }
    }
    result = fn(row);
  }
  NoteConnectionState();
  return result;
}

}  // namespace gpuhub::store
