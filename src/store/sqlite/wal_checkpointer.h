// Checkpoints a SQLite database's write-ahead log on a thread of its own, so that the engine's
// writer does not (SQLite's automatic checkpoint runs inside the COMMIT that crosses
// wal_autocheckpoint pages: copying the WAL's pages into the database file and fsyncing it, on the
// writer's thread, while every command of the next batch waits).
//
// Contract:
// - Request() (the writer, after a commit that left the WAL at or past
//   kSqliteWalCheckpointPages) wakes the thread, which runs one PASSIVE checkpoint on its own
//   connection: it copies every WAL frame no reader still needs into the database file and, when
//   it copied them all, fsyncs the database file (synchronous=FULL on its connection). It never
//   waits for the writer or readers and never blocks them; requests made while it runs fold into
//   one more run. The writer then starts the WAL over at the beginning (SQLite does, at the first
//   write transaction that finds every frame copied and no reader in the WAL).
// - It changes no data and weakens no durability: a commit is durable when its WAL frames are
//   fsynced (the writer's COMMIT, synchronous=FULL); a checkpoint only moves committed pages.
// - It is no bound on its own (it can lag, or fail: its connection cannot open); the writer keeps
//   the WAL bounded itself past kSqliteWalMaxPages (SqliteStore).
// - Thread-safe. The destructor stops and joins the thread and closes its connection.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

struct sqlite3;

namespace gpuhub::store {

class WalCheckpointer {
 public:
  struct Stats {
    std::uint64_t runs = 0;      // checkpoints run
    std::uint64_t complete = 0;  // of which copied every frame of the WAL
    std::uint64_t failures = 0;  // could not open its connection, or the checkpoint failed
    int last_wal_pages = -1;     // the WAL's frames at the last run (-1: none yet)
    int last_copied_pages = -1;  // frames copied into the database by then
  };

  // `path`: the database file (it must exist when the first request comes).
  explicit WalCheckpointer(std::string path);
  ~WalCheckpointer();
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  void Request();
  Stats stats() const;
  // Held while a checkpoint runs: the writer takes it for its own checkpoint (SQLite refuses a
  // second concurrent checkpoint at once with SQLITE_BUSY, without waiting).
  std::unique_lock<std::mutex> Exclusive() { return std::unique_lock(run_mu_); }

 private:
  void Run();

  const std::string path_;
  mutable std::mutex mu_;
  std::mutex run_mu_;
  std::condition_variable wake_;
  bool requested_ = false;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;  // last: starts once the rest is initialised
};

}  // namespace gpuhub::store
