// Limits of the store.
#pragma once

#include <cstdint>

namespace gpuhub::store {

// How long SQLite waits for a lock held by another connection (a backup, the sqlite3 shell)
// before a write fails.
inline constexpr std::int64_t kSqliteBusyTimeoutMs = 5000;
// SQLite: the byte of the database file on which the engine holds an open-file-description
// (OFD) write lock, so that only one engine writes a database file, whatever path (a symlink, a
// hard link) it was opened by. Far outside the bytes SQLite locks itself (0x40000000 + 0..511)
// and beyond any real file size: locks may lie past the end of a file.
inline constexpr std::int64_t kSqliteEngineLockOffset = std::int64_t{1} << 40;
// PostgreSQL: how long to wait for the server when connecting.
inline constexpr int kPostgresConnectTimeoutSeconds = 10;
// How long AcquireWriterLock waits for the advisory lock before reporting the database in use (an
// engine that just died keeps it until its backend notices the closed connection).
inline constexpr int kPostgresLockWaitMilliseconds = 5000;
// The advisory lock key that marks the single engine writing a PostgreSQL database ("gpuhub" in
// ASCII).
inline constexpr std::int64_t kPostgresEngineLockKey = 0x677075687562LL;

}  // namespace gpuhub::store
