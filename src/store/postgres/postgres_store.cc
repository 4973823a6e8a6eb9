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

Result<std::unique_ptr<PostgresStore>> PostgresStore::Open(const std::string& url) {
  std::string with_timeout = url;
  if (with_timeout.find("connect_timeout=") == std::string::npos) {
    with_timeout += (with_timeout.find('?') == std::string::npos ? "?" : "&");
    with_timeout += "connect_timeout=" + std::to_string(kPostgresConnectTimeoutSeconds);
  }
  PGconn* conn = PQconnectdb(with_timeout.c_str());
  std::string description = RedactPostgresUrl(url);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    std::string message = conn ? Trimmed(PQerrorMessage(conn)) : "out of memory";
    PQfinish(conn);
    return Status::Unavailable("cannot connect to " + description + ": " + message);
  }
  PQsetNoticeProcessor(conn, LogNotice, nullptr);  // kept across PQreset
  std::unique_ptr<PostgresStore> store(new PostgresStore(with_timeout, description, conn));
  // Quiet NOTICEs ("relation already exists, skipping") from going to stderr.
  GPUHUB_RETURN_IF_ERROR(store->Exec("SET client_min_messages = warning"));
  return store;
}

PostgresStore::~PostgresStore() { PQfinish(conn_); }

Status PostgresStore::Error(std::string_view what) const {
  return Status::Unavailable(description_ + ": " + std::string(what) + ": " +
                             Trimmed(PQerrorMessage(conn_)));
}

Status PostgresStore::EnsureConnected() {
  if (lock_lost_) {
    return Status::Unavailable(description_ +
                               ": the engine lost its advisory lock to another engine; restart");
  }
  if (PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) return Error("reconnect");
  GPUHUB_RETURN_IF_ERROR(Exec("SET client_min_messages = warning"));
  if (wants_lock_) {
    wants_lock_ = false;
    Status s = AcquireWriterLock();
    lock_lost_ = !s.ok();
    return s;
  }
  return Status::Ok();
}

Status PostgresStore::Exec(const std::string& sql) {
  PgResult r(PQexec(conn_, sql.c_str()));
  auto status = PQresultStatus(r.get());
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    return Status::Unavailable(description_ + ": " + Trimmed(PQresultErrorMessage(r.get())));
  }
  return Status::Ok();
}

Status PostgresStore::AcquireWriterLock() {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  std::string sql = "SELECT pg_try_advisory_lock(" + std::to_string(kPostgresEngineLockKey) + ")";
  // A previous engine that just died (or was restarted) releases its lock only when its backend
  // notices the closed connection: wait a little before calling the database busy.
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(kPostgresLockWaitMilliseconds);
  while (true) {
    PgResult r(PQexec(conn_, sql.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("advisory lock");
    if (std::string(PQgetvalue(r.get(), 0, 0)) == "t") break;
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Unavailable(description_ +
                                 " is in use by another gpuhub engine (it holds the advisory lock)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  wants_lock_ = true;
  return Status::Ok();
}

Status PostgresStore::EnsureMigrationsTable() {
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  return Exec(
      "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT "
      "NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())");
}

Result<int> PostgresStore::SchemaVersion() {
  GPUHUB_RETURN_IF_ERROR(EnsureMigrationsTable());
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

Status PostgresStore::Apply(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  // Pipeline mode: every statement of the batch goes out in one round trip, then one Sync.
  if (PQenterPipelineMode(conn_) != 1) return Error("pipeline mode");
  std::vector<std::string> texts;
  std::vector<const char*> params;
  bool sent = PQsendQueryParams(conn_, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  for (const Write& w : batch.writes()) {
    if (!sent) break;
    std::string sql = WriteSql(w, /*dollar=*/true);
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
    sent = PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                             params.data(), nullptr, nullptr, 0) == 1;
  }
  if (sent)
    sent = PQsendQueryParams(conn_, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
  if (sent) sent = PQpipelineSync(conn_) == 1;
  if (!sent) {
    Status err = Error("send batch");
    PQreset(conn_);  // the pipeline state is unknown: start over on a fresh connection
    if (wants_lock_) {
      wants_lock_ = false;
      (void)AcquireWriterLock();  // when another engine took it meanwhile, EnsureConnected refuses
      lock_lost_ = !wants_lock_;
    }
    return err;
  }
  Status first_error;
  const std::size_t statements = batch.size() + 2;  // BEGIN, the writes, COMMIT
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
      first_error = Status::Unavailable(description_ + ": " +
                                        (st == PGRES_PIPELINE_ABORTED
                                             ? std::string("batch aborted")
                                             : Trimmed(PQresultErrorMessage(r.get()))));
    }
    if (index == statements - 1 && st == PGRES_COMMAND_OK && first_error.ok()) committed = true;
    ++index;
  }
  PQexitPipelineMode(conn_);
  if (PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) != PQTRANS_IDLE) {
    (void)Exec("ROLLBACK");
  }
  if (!first_error.ok()) return first_error;
  if (!committed) return Error("commit");
  return Status::Ok();
}

Status PostgresStore::Scan(std::string_view table, const std::vector<std::string>& columns,
                           std::string_view order_by, const std::function<Status(const Row&)>& fn) {
  const std::string sql = ScanSql(table, columns, order_by);
  GPUHUB_RETURN_IF_ERROR(EnsureConnected());
  // Single-row mode keeps memory flat however large the table.
  if (PQsendQuery(conn_, sql.c_str()) != 1) return Error("query " + std::string(table));
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
        result = Status::Unavailable(description_ + ": read " + std::string(table) + ": " +
                                     Trimmed(PQresultErrorMessage(r.get())));
      continue;
    }
    if (!result.ok()) continue;  // drain
    row.values.clear();
    for (int i = 0; i < static_cast<int>(columns.size()); ++i) {
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
  return result;
}

}  // namespace gpuhub::store
