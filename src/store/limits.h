// Limits of the store.
#pragma once

#include <cstdint>

namespace gpuhub::store {

// How long SQLite waits for a lock held by another connection (a backup, the sqlite3 shell)
// before a write fails.
inline constexpr std::int64_t kSqliteBusyTimeoutMs = 5000;
// PostgreSQL: how long to wait for the server when connecting.
inline constexpr int kPostgresConnectTimeoutSeconds = 10;
// How long AcquireWriterLock waits for the advisory lock before reporting the database in use (an
// engine that just died keeps it until its backend notices the closed connection).
inline constexpr int kPostgresLockWaitMilliseconds = 5000;
// The advisory lock key that marks the single engine writing a PostgreSQL database ("gpuhub" in
// ASCII).
inline constexpr std::int64_t kPostgresEngineLockKey = 0x677075687562LL;

}  // namespace gpuhub::store
