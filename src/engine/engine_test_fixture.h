// Shared by the engine's unit tests (the engine_test target only): a fresh SQLite database per
// test, and a fixture that runs one engine on it across restarts.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <utility>

#include "core/clock.h"
#include "engine/engine.h"
#include "engine/metrics.h"
#include "engine/wallets.h"
#include "store/store.h"

namespace gpuhub::engine {

// "sqlite:<new empty directory under the temp dir>/<file>"; the directory is `*dir` when given.
inline std::string FreshSqliteUrl(const std::string& prefix, const std::string& file,
                                  std::filesystem::path* dir = nullptr) {
  static std::mt19937_64 rng(std::random_device{}());
  auto path = std::filesystem::temp_directory_path() /
              (prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(rng()));
  std::filesystem::create_directories(path);
  if (dir != nullptr) *dir = path;
  return "sqlite:" + (path / file).string();
}

// The store at `url`, migrated; a test failure (not a crash) when it cannot be opened.
inline std::unique_ptr<store::Store> OpenMigrated(const std::string& url) {
  auto store = store::OpenStore(url);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->Migrate().ok());
  return std::move(store).value();
}

// engine_meta's ledger_accounts_through in the database at `url`: the transfer the stored account
// totals include (-1: no row yet).
inline std::int64_t StoredLedgerAccountsThrough(const std::string& url) {
  std::int64_t through = -1;
  Status read = OpenMigrated(url)->Query(
      {"engine_meta",
       {"value"},
       {{"name", store::Condition::Op::kEq, std::string(kLedgerAccountsThrough)}},
       {},
       "",
       1},
      [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(through, row.Int(0));
        return Status::Ok();
      });
  EXPECT_TRUE(read.ok()) << read.ToString();
  return through;
}

// One engine on a fresh SQLite database, with a manual clock. OpenEngine (re)starts it the way a
// server restart does: the state comes back from the database.
class EngineOnSqliteTest : public ::testing::Test {
 protected:
  EngineOnSqliteTest(TimestampMicros clock_start, const std::string& prefix)
      : clock_(clock_start), url_(FreshSqliteUrl(prefix, "engine.db", &dir_)) {}
  void TearDown() override {
    engine_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // No periodic ticks: the tests move the clock and run the tick hooks themselves.
  void OpenEngine(EngineOptions options = {},
                  const std::function<void(Engine&)>& add_tick_hooks = nullptr) {
    engine_.reset();
    auto store = store::OpenStore(url_);
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Migrate().ok());
    options.run_periodic_ticks = false;
    metrics_ = std::make_unique<MetricsRegistry>();
    engine_ = std::make_unique<Engine>(std::move(store).value(), clock_, *metrics_, options);
    if (add_tick_hooks) add_tick_hooks(*engine_);
    ASSERT_TRUE(engine_->Start().ok());
  }

  // What the admin clock endpoint does: move the clock, then run the tick hooks in one command,
  // at each due time inside the step and at its end (Engine::AdvanceClockTo).
  void Advance(std::int64_t micros) {
    Run<int>([&](Txn& txn) -> Result<int> {
      clock_.Advance(micros);
      GPUHUB_RETURN_IF_ERROR(engine_->AdvanceClockTo(txn, clock_.NowMicros()));
      return 0;
    });
  }

  // What `user` can spend from their USD wallet now.
  std::int64_t UsdAvailable(std::int64_t user) {
    return Run<std::int64_t>([&](Txn& txn) -> Result<std::int64_t> {
      return txn.state.wallets->ledger.Wallets(user)->front().available();
    });
  }

  // Runs `fn` as one command; a failed command is a test failure and returns T{}.
  template <typename T>
  T Run(std::function<Result<T>(Txn&)> fn) {
    auto r = engine_->ExecuteSync<T>(std::move(fn));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value() : T{};
  }

  ManualClock clock_;
  std::filesystem::path dir_;
  std::string url_;
  std::unique_ptr<MetricsRegistry> metrics_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace gpuhub::engine
