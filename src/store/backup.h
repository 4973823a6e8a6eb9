// Backups of a gpuhub database (docs/operations.md, `gpuhub admin backup|restore|verify`).
//
// A gpuhub backup is one SQLite file (rollback journal, no -wal/-shm beside it) holding every table
// of the schema at the source's schema version, plus a `gpuhub_backup` table saying where and when
// it was taken. The same format whatever the source, so a backup of PostgreSQL can be verified
// anywhere and restored into SQLite or PostgreSQL (a migration path between the two).
//   - SQLite source: SQLite's online backup API copies every page in one step, inside one read
//     transaction, while a server keeps writing (WAL): a consistent snapshot.
//   - PostgreSQL source: every table read inside one REPEATABLE READ READ ONLY transaction (one
//     snapshot, as pg_dump takes) and written into a fresh SQLite file migrated to the same schema.
// The point of the backup is its snapshot: every commit acknowledged before the backup began is in
// it, nothing committed after it ended is.
//
// Restore copies a backup into an EMPTY database (schema version 0; it refuses anything else, so
// that it can never mix two histories), migrated to the backup's schema version first, table by
// table in the schema's creation order (parents before children), then migrates it to this
// binary's latest schema. The writer row (engine_writer) is not restored: the restored database
// has no writer until a server claims it. It holds the target's writer lock throughout.
//
// The tables come from the migrations (every CREATE TABLE in order, less those dropped later), so
// a table a new migration adds is backed up without anyone remembering to list it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuhub::store {

struct BackupSummary {
  int schema_version = 0;
  std::map<std::string, std::int64_t> rows_by_table;  // the copied tables only
  std::string source;                                  // the source database, without password
  std::int64_t taken_at_us = 0;                        // wall clock when the snapshot began
};

// The tables of the schema at `version`, in creation order (schema_migrations excluded).
std::vector<std::string> SchemaTables(int version);

// Writes a backup of the database at `url` to `out_path`, which must not exist. `now_us` is
// recorded as the time the snapshot began. On error nothing is left at `out_path`.
Result<BackupSummary> BackupToFile(std::string_view url, const std::string& out_path,
                                   std::int64_t now_us);

// Reads the summary of the backup at `path` (its gpuhub_backup table and row counts); checks
// that it is a gpuhub backup (invalid_argument otherwise).
Result<BackupSummary> ReadBackupSummary(const std::string& path);

// Restores the backup at `backup_path` into the empty database at `url` (see above).
Result<BackupSummary> RestoreFromFile(const std::string& backup_path, std::string_view url);

}  // namespace gpuhub::store
