// Limits of the store.
#pragma once

#include <cstddef>
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
// SQLite's write-ahead log, in pages (frames; 4 KiB each by default). A commit that leaves the WAL
// at kSqliteWalCheckpointPages or more wakes the background checkpointer
// (store/sqlite/wal_checkpointer.h; ten times SQLite's default of 1000 pages: under 256 clients
// that default checkpointed every commit or two, writing the same hot index pages to the database
// file and fsyncing it again and again; market_api_bench +10%). A commit that leaves it at kSqliteWalMaxPages or more (the checkpointer lags,
// fails, or the WAL never found a moment to start over) makes the writer checkpoint it itself
// (RESTART: waits up to kSqliteBusyTimeoutMs for readers, then the next commit starts the WAL at
// its beginning), so the file stays near 200 MiB at most. Only a reader that holds one snapshot
// longer than that can keep the WAL growing (SQLite cannot copy pages a reader may still need); the
// writer then retries every kSqliteWalMaxPages more pages, not at every commit.
inline constexpr int kSqliteWalCheckpointPages = 10000;
inline constexpr int kSqliteWalMaxPages = 50000;
// PostgreSQL: how long to wait for the server when connecting.
inline constexpr int kPostgresConnectTimeoutSeconds = 10;
// How long AcquireWriterLock waits for the advisory lock before reporting the database in use (an
// engine that just died keeps it until its backend notices the closed connection).
inline constexpr int kPostgresLockWaitMilliseconds = 5000;
// A writer's machine that vanishes (power, network) holds the advisory lock until its backend
// notices the dead peer; TCP keepalives bound that, so a standby can take over within seconds
// rather than the kernel's default two hours: idle + interval x count ~ 4 s. Set on the server side
// of every gpuhub session (SET tcp_keepalives_*, tcp_user_timeout) and on libpq's side (the URL's
// keepalives_* and tcp_user_timeout, unless the URL sets them).
inline constexpr int kPostgresKeepaliveIdleSeconds = 2;
inline constexpr int kPostgresKeepaliveIntervalSeconds = 1;
inline constexpr int kPostgresKeepaliveCount = 2;
inline constexpr int kPostgresTcpUserTimeoutMilliseconds = 4000;
// Backups and restores (store/backup.h) write this many rows per transaction: memory stays flat
// whatever the size of a table.
inline constexpr std::size_t kBackupRowsPerTransaction = 5000;
// The advisory lock key that marks the single engine writing a PostgreSQL database ("gpuhub" in
// ASCII).
inline constexpr std::int64_t kPostgresEngineLockKey = 0x677075687562LL;

// Read connections a ReadPool opens at most (history pages beside the writer): enough for the HTTP
// threads of one server; more would only queue inside the database.
inline constexpr std::size_t kMaxReadConnections = 8;

}  // namespace gpuhub::store
