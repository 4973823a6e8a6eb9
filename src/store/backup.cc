#include "store/backup.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

#include "core/strings.h"
#include "store/limits.h"
#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"

namespace gpuhub::store {
namespace {

constexpr const char* kBackupTable = "gpuhub_backup";
// engine_writer names the writer of the source database: a restored one starts without.
constexpr const char* kNotRestored = "engine_writer";

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The path of "sqlite:PATH" (or a bare *.db path), as OpenStore reads it.
Result<std::string> SqlitePath(std::string_view url) {
  std::string path;
  if (url.starts_with("sqlite:")) {
    path = std::string(url.substr(7));
    if (path.starts_with("//")) path = path.substr(2);
  } else if (url.ends_with(".db") || url.ends_with(".sqlite")) {
    path = std::string(url);
  }
  if (path.empty()) {
    return Status::InvalidArgument("--db must be sqlite:PATH or postgresql://..., got '" +
                                   std::string(url.substr(0, 64)) + "'");
  }
  return path;
}

// The word after "CREATE TABLE [IF NOT EXISTS]" / "DROP TABLE [IF EXISTS]" at `at`.
std::string TableNameAt(const std::string& sql, std::size_t at) {
  std::size_t i = at;
  auto skip_space = [&] {
    while (i < sql.size() && (sql[i] == ' ' || sql[i] == '\n' || sql[i] == '\t')) ++i;
  };
  skip_space();
  for (const char* words : {"IF NOT EXISTS", "IF EXISTS"}) {
    std::string w = words;
    if (sql.compare(i, w.size(), w) == 0) {
      i += w.size();
      skip_space();
    }
  }
  std::size_t start = i;
  while (i < sql.size() && (std::isalnum(static_cast<unsigned char>(sql[i])) || sql[i] == '_')) {
    ++i;
  }
  return sql.substr(start, i - start);
}

// Copies every row of `table` (columns as the source has them) from `from` into `to`, in chunks.
Result<std::int64_t> CopyTable(Store& from, const std::vector<std::string>& columns,
                               const std::string& table, Store& to) {
  WriteBatch batch;
  std::int64_t rows = 0;
  Status status = from.Scan(table, columns, columns.front(), [&](const Row& row) -> Status {
    WriteBatch::Columns values;
    values.reserve(columns.size());
    for (std::size_t i = 0; i < columns.size(); ++i) values.emplace_back(columns[i], row.values[i]);
    batch.Insert(table, std::move(values));
    ++rows;
    if (batch.size() >= kBackupRowsPerTransaction) {
      GPUHUB_RETURN_IF_ERROR(to.Apply(batch));
      batch.Clear();
    }
    return Status::Ok();
  });
  GPUHUB_RETURN_IF_ERROR(status.WithContext("copying " + table));
  GPUHUB_RETURN_IF_ERROR(to.Apply(batch).WithContext("copying " + table));
  return rows;
}

// Source tables with their columns, as the source has them at its schema version.
template <typename Source>
Result<std::vector<std::pair<std::string, std::vector<std::string>>>> TablesOf(Source& source,
                                                                               int version) {
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const std::string& table : SchemaTables(version)) {
    GPUHUB_ASSIGN_OR_RETURN(auto columns, source.Columns(table));
    out.emplace_back(table, std::move(columns));
  }
  return out;
}

Status WriteBackupInfo(SqliteStore& file, const BackupSummary& summary) {
  GPUHUB_RETURN_IF_ERROR(file.ExecScript(std::string("CREATE TABLE ") + kBackupTable +
                                         " (name TEXT PRIMARY KEY, value TEXT NOT NULL)"));
  WriteBatch info;
  auto put = [&](const char* name, std::string value) {
    info.Upsert(kBackupTable, {{"name", std::string(name)}, {"value", std::move(value)}});
  };
  put("format", "gpuhub-backup-1");
  put("source", summary.source);
  put("schema_version", std::to_string(summary.schema_version));
  put("taken_at_us", std::to_string(summary.taken_at_us));
  return file.Apply(info);
}

Result<BackupSummary> BackupPostgres(std::string_view url, const std::string& out_path,
                                     BackupSummary summary) {
  GPUHUB_ASSIGN_OR_RETURN(auto source, PostgresStore::Open(std::string(url)));
  GPUHUB_ASSIGN_OR_RETURN(auto file, SqliteStore::Open(out_path, SqliteStore::Mode::kBackupFile));
  GPUHUB_RETURN_IF_ERROR(source->InSnapshot([&]() -> Status {
    GPUHUB_ASSIGN_OR_RETURN(summary.schema_version, source->SchemaVersion());
    if (summary.schema_version == 0) return Status::NotFound(summary.source + " holds no gpuhub data");
    GPUHUB_RETURN_IF_ERROR(file->Migrate(summary.schema_version));
    GPUHUB_ASSIGN_OR_RETURN(auto tables, TablesOf(*source, summary.schema_version));
    for (const auto& [table, columns] : tables) {
      GPUHUB_ASSIGN_OR_RETURN(summary.rows_by_table[table],
                              CopyTable(*source, columns, table, *file));
    }
    return Status::Ok();
  }));
  GPUHUB_RETURN_IF_ERROR(WriteBackupInfo(*file, summary));
  return summary;
}

Result<BackupSummary> BackupSqlite(const std::string& path, const std::string& out_path,
                                   BackupSummary summary) {
  if (!Exists(path)) return Status::NotFound("no database at " + path);
  GPUHUB_ASSIGN_OR_RETURN(auto source, SqliteStore::Open(path, SqliteStore::Mode::kReadOnly));
  GPUHUB_RETURN_IF_ERROR(source->BackupTo(out_path));
  GPUHUB_ASSIGN_OR_RETURN(auto file, SqliteStore::Open(out_path, SqliteStore::Mode::kBackupFile));
  GPUHUB_ASSIGN_OR_RETURN(summary.schema_version, file->SchemaVersion());
  if (summary.schema_version == 0) return Status::NotFound(summary.source + " holds no gpuhub data");
  GPUHUB_RETURN_IF_ERROR(WriteBackupInfo(*file, summary));
  return summary;
}

}  // namespace

std::vector<std::string> SchemaTables(int version) {
  std::vector<std::string> tables;
  for (const Migration& m : Migrations()) {
    if (m.version > version) break;
    const std::string sql = m.sql;
    // Statements in order; a table dropped later leaves the list.
    std::size_t at = 0;
    while (true) {
      std::size_t create = sql.find("CREATE TABLE ", at);
      std::size_t drop = sql.find("DROP TABLE ", at);
      if (create == std::string::npos && drop == std::string::npos) break;
      if (drop == std::string::npos || (create != std::string::npos && create < drop)) {
        std::string name = TableNameAt(sql, create + 13);
        if (!name.empty() && std::find(tables.begin(), tables.end(), name) == tables.end()) {
          tables.push_back(name);
        }
        at = create + 13;
      } else {
        std::string name = TableNameAt(sql, drop + 11);
        tables.erase(std::remove(tables.begin(), tables.end(), name), tables.end());
        at = drop + 11;
      }
    }
  }
  return tables;
}

Result<BackupSummary> BackupToFile(std::string_view url, const std::string& out_path,
                                   std::int64_t now_us) {
  if (out_path.empty()) return Status::InvalidArgument("--out needs a file path");
  if (Exists(out_path)) {
    return Status::InvalidArgument("--out " + out_path +
                                   " already exists; a backup never overwrites a file");
  }
  BackupSummary summary;
  summary.taken_at_us = now_us;
  std::string sqlite_path;
  if (IsPostgresUrl(url)) {
    summary.source = RedactPostgresUrl(url);
  } else {
    GPUHUB_ASSIGN_OR_RETURN(sqlite_path, SqlitePath(url));
    summary.source = "sqlite:" + sqlite_path;
  }
  Result<BackupSummary> made = sqlite_path.empty() ? BackupPostgres(url, out_path, summary)
                                                   : BackupSqlite(sqlite_path, out_path, summary);
  if (!made.ok()) {
    std::remove(out_path.c_str());
    std::remove((out_path + "-journal").c_str());
    return made.status().WithContext("backup to " + out_path);
  }
  return ReadBackupSummary(out_path);
}

Result<BackupSummary> ReadBackupSummary(const std::string& path) {
  if (!Exists(path)) return Status::NotFound("no backup file at " + path);
  GPUHUB_ASSIGN_OR_RETURN(auto file, SqliteStore::Open(path, SqliteStore::Mode::kReadOnly));
  BackupSummary summary;
  std::map<std::string, std::string> info;
  Status read = file->Scan(kBackupTable, {"name", "value"}, "name", [&](const Row& row) -> Status {
    GPUHUB_ASSIGN_OR_RETURN(std::string name, row.Text(0));
    GPUHUB_ASSIGN_OR_RETURN(info[name], row.Text(1));
    return Status::Ok();
  });
  if (!read.ok() || info["format"] != "gpuhub-backup-1") {
    return Status::InvalidArgument(path + " is not a gpuhub backup (made by gpuhub admin backup)");
  }
  summary.source = info["source"];
  auto version = ParseInt64(info["schema_version"], "schema_version");
  auto taken = ParseInt64(info["taken_at_us"], "taken_at_us");
  if (!version.ok() || !taken.ok()) return Status::InvalidArgument(path + ": damaged backup info");
  summary.schema_version = static_cast<int>(*version);
  summary.taken_at_us = *taken;
  for (const std::string& table : SchemaTables(summary.schema_version)) {
    std::int64_t rows = 0;
    GPUHUB_ASSIGN_OR_RETURN(auto columns, file->Columns(table));
    GPUHUB_RETURN_IF_ERROR(file->Scan(table, {columns.front()}, "", [&](const Row&) -> Status {
                                 ++rows;
                                 return Status::Ok();
                               })
                               .WithContext(path));
    summary.rows_by_table[table] = rows;
  }
  return summary;
}

Result<BackupSummary> RestoreFromFile(const std::string& backup_path, std::string_view url) {
  GPUHUB_ASSIGN_OR_RETURN(BackupSummary summary, ReadBackupSummary(backup_path));
  GPUHUB_ASSIGN_OR_RETURN(auto backup,
                          SqliteStore::Open(backup_path, SqliteStore::Mode::kReadOnly));
  GPUHUB_ASSIGN_OR_RETURN(auto target, OpenStore(url));
  GPUHUB_RETURN_IF_ERROR(target->AcquireWriterLock());
  GPUHUB_ASSIGN_OR_RETURN(int target_version, target->SchemaVersion());
  if (target_version != 0) {
    return Status::FailedPrecondition(
        target->Describe() + " is not empty (schema version " + std::to_string(target_version) +
        "): restore only into a new, empty database, so that two histories never mix");
  }
  GPUHUB_RETURN_IF_ERROR(target->Migrate(summary.schema_version));
  GPUHUB_ASSIGN_OR_RETURN(auto tables, TablesOf(*backup, summary.schema_version));
  summary.rows_by_table.clear();
  for (const auto& [table, columns] : tables) {
    if (table == kNotRestored) continue;
    GPUHUB_ASSIGN_OR_RETURN(summary.rows_by_table[table],
                            CopyTable(*backup, columns, table, *target));
  }
  GPUHUB_RETURN_IF_ERROR(target->Migrate().WithContext("upgrading the restored database"));
  return summary;
}

}  // namespace gpuhub::store
