#include "store/sqlite/wal_checkpointer.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include "core/thread_name.h"

namespace gpuhub::store {

WalCheckpointer::WalCheckpointer(std::string path)
    : path_(std::move(path)), thread_([this] {
        NameThisThread("gpuhub-wal-ckpt");
        Run();
      }) {}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void WalCheckpointer::Request() {
  {
    std::lock_guard lock(mu_);
    if (requested_) return;
    requested_ = true;
  }
  wake_.notify_one();
}

WalCheckpointer::Stats WalCheckpointer::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void WalCheckpointer::Run() {
  sqlite3* db = nullptr;
  bool failing = false;  // log a failure once, not at every request
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stop_ || requested_; });
    if (stop_) break;
    requested_ = false;
    lock.unlock();
    int rc = SQLITE_OK;
    std::string why;
    if (db == nullptr) {
      // Never creates the file; synchronous=FULL: the checkpoint fsyncs the database file before
      // the WAL may be started over (its sync flags are this connection's).
      rc = sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
      if (rc == SQLITE_OK) {
        rc = sqlite3_exec(db, "PRAGMA synchronous=FULL", nullptr, nullptr, nullptr);
      }
      if (rc != SQLITE_OK) {
        why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        sqlite3_close(db);
        db = nullptr;
      }
    }
    int wal_pages = -1, copied_pages = -1;
    if (db != nullptr) {
      std::lock_guard run(run_mu_);
      // PASSIVE: never invokes the busy handler, never blocks the writer or a reader.
      rc = sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_PASSIVE, &wal_pages,
                                     &copied_pages);
      // BUSY: another checkpoint (the writer's own, past kSqliteWalMaxPages) runs now.
      if (rc != SQLITE_OK && rc != SQLITE_BUSY) why = sqlite3_errmsg(db);
    }
    const bool failed = !why.empty();
    if (failed && !failing) {
      spdlog::warn("event=sqlite_checkpoint_failed db=\"{}\" error=\"{}\"", path_, why);
    } else if (!failed && failing) {
      spdlog::info("event=sqlite_checkpoint_recovered db=\"{}\"", path_);
    }
    failing = failed;
    lock.lock();
    if (db != nullptr && rc == SQLITE_OK) {
      ++stats_.runs;
      if (wal_pages >= 0 && copied_pages == wal_pages) ++stats_.complete;
      stats_.last_wal_pages = wal_pages;
      stats_.last_copied_pages = copied_pages;
    }
    if (failed) ++stats_.failures;
  }
  lock.unlock();
  sqlite3_close(db);
}

}  // namespace gpuhub::store
