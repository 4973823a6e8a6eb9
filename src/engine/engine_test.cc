#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"
#include "engine/idempotency.h"

namespace gpuhub::engine {
namespace {

std::string TempDb() { return FreshSqliteUrl("gpuhub_engine_test", "engine.db"); }

// Forwards to a real store; fails Apply while `fail` is set.
class FlakyStore final : public store::Store {
 public:
  explicit FlakyStore(std::unique_ptr<store::Store> inner) : inner_(std::move(inner)) {}
  std::string Describe() const override { return inner_->Describe(); }
  Result<bool> TryAcquireWriterLock() override { return inner_->TryAcquireWriterLock(); }
  void ReleaseWriterLock() override { inner_->ReleaseWriterLock(); }
  Result<int> SchemaVersion() override { return inner_->SchemaVersion(); }
  Status Apply(const store::WriteBatch& batch) override {
    ++applies_entered;
    {
      std::unique_lock<std::mutex> lock(gate_mutex);
      gate_cv.wait(lock, [&] { return !gate_closed; });
    }
    if (fail) return Status::Unavailable("disk on fire");
    return inner_->Apply(batch);
  }
  // While closed, every Apply waits (a commit in flight, as long as a test needs).
  void SetGate(bool closed) {
    {
      std::lock_guard<std::mutex> lock(gate_mutex);
      gate_closed = closed;
    }
    gate_cv.notify_all();
  }
  Status Scan(std::string_view table, const std::vector<std::string>& columns,
              std::string_view order_by,
              const std::function<Status(const store::Row&)>& fn) override {
    if (fail_reads) return Status::Unavailable("disk still on fire");
    return inner_->Scan(table, columns, order_by, fn);
  }
  Status Query(const store::Select& select,
               const std::function<Status(const store::Row&)>& fn) override {
    if (fail_reads) return Status::Unavailable("disk still on fire");
    return inner_->Query(select, fn);
  }
  Result<std::vector<std::string>> ExplainPlan(const store::Select& select) override {
    return inner_->ExplainPlan(select);
  }
  std::atomic<bool> fail{false};
  std::atomic<bool> fail_reads{false};
  std::atomic<int> applies_entered{0};
  std::mutex gate_mutex;
  std::condition_variable gate_cv;
  bool gate_closed = false;

 protected:
  Status ApplyMigration(const store::Migration&) override { return Status::Ok(); }
  Status EnsureMigrationsTable() override { return Status::Ok(); }

 private:
  std::unique_ptr<store::Store> inner_;
};

Result<std::int64_t> AddUser(Engine& engine, const std::string& name) {
  return engine.ExecuteSync<std::int64_t>([name](Txn& txn) -> Result<std::int64_t> {
    GPUHUB_ASSIGN_OR_RETURN(User u, CreateUser(txn, name, "hash", kRoleCustomer));
    return u.id;
  });
}

TEST(EngineTest, CommittedCommandsSurviveARestart) {
  std::string url = TempDb();
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  {
    Engine engine(OpenMigrated(url), clock, metrics);
    ASSERT_TRUE(engine.Start().ok());
    EXPECT_EQ(AddUser(engine, "alice").value(), 1);
    EXPECT_EQ(AddUser(engine, "bob").value(), 2);
    EXPECT_EQ(AddUser(engine, "alice").status().code(), StatusCode::kConflict);
  }
  MetricsRegistry metrics2;
  Engine engine(OpenMigrated(url), clock, metrics2);
  ASSERT_TRUE(engine.Start().ok());
  auto names = engine.ExecuteSync<std::string>([](Txn& txn) -> Result<std::string> {
    std::string out;
    for (const auto& [id, u] : txn.state.accounts.users)
      out += std::to_string(id) + u.username + ";";
    return out;
  });
  EXPECT_EQ(names.value(), "1alice;2bob;");
  EXPECT_EQ(AddUser(engine, "carol").value(), 3);
}

TEST(EngineTest, GroupCommitsConcurrentCommandsAndAnswersEveryOne) {
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  Engine engine(OpenMigrated(TempDb()), clock, metrics);
  ASSERT_TRUE(engine.Start().ok());
  constexpr int kThreads = 8, kPerThread = 200;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (AddUser(engine, "u" + std::to_string(t) + "_" + std::to_string(i)).ok()) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kPerThread);
  std::string rendered = metrics.Render();
  EXPECT_NE(rendered.find("gpuhub_engine_commands_total{result=\"ok\"} 1600"), std::string::npos)
      << rendered;
}

TEST(EngineTest, AFailedCommitFailsTheBatchAndRebuildsStateFromTheStore) {
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  auto flaky = std::make_unique<FlakyStore>(OpenMigrated(TempDb()));
  FlakyStore* store = flaky.get();
  Engine engine(std::move(flaky), clock, metrics);
  ASSERT_TRUE(engine.Start().ok());
  ASSERT_TRUE(AddUser(engine, "kept").ok());
  store->fail = true;
  auto lost = AddUser(engine, "lost");
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable);
  store->fail = false;
  // Memory forgot "lost" with the database: the name is free and ids continue from the store.
  EXPECT_EQ(AddUser(engine, "lost").value(), 2);
}

// Pipelined commit: while one batch commits, the next is applied in memory. A command of that next
// batch that read what the first one wrote must not be answered before the first is durable, and
// when the first commit fails, the batch applied on top of it fails with it.
class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto flaky = std::make_unique<FlakyStore>(OpenMigrated(TempDb()));
    store_ = flaky.get();
    engine_ = std::make_unique<Engine>(std::move(flaky), clock_, metrics_);
    ASSERT_TRUE(engine_->Start().ok());
    ASSERT_EQ(AddUser(*engine_, "kept").value(), 1);
  }
  void TearDown() override {
    store_->SetGate(false);
    engine_->Stop();
  }
  // Sends AddUser(name) and waits until its batch's commit is inside the store (held at the gate).
  std::thread AddUserInFlight(const std::string& name, Result<std::int64_t>& out) {
    int entered = store_->applies_entered.load();
    std::thread t([this, name, &out] { out = AddUser(*engine_, name); });
    WaitUntil([&] { return store_->applies_entered.load() > entered; });
    return t;
  }
  // Holds the gate shut, sends AddUser("first") (its commit held in the store), and queues a
  // lookup of "first" behind it.
  std::thread FirstInFlightThenLookup(Result<std::int64_t>& first) {
    store_->SetGate(true);
    std::thread adder = AddUserInFlight("first", first);
    engine_->Execute<bool>(
        [this](Txn& txn) -> Result<bool> {
          bool found = false;
          for (const auto& [id, u] : txn.state.accounts.users) found |= u.username == "first";
          lookup_applied_ = true;
          return found;
        },
        [this](Result<bool> r) {
          std::lock_guard<std::mutex> lock(lookup_mutex_);
          lookup_answer_.emplace(std::move(r));
        });
    return adder;
  }
  bool LookupAnswered() {
    std::lock_guard<std::mutex> lock(lookup_mutex_);
    return lookup_answer_.has_value();
  }
  Result<bool> LookupAnswer() {
    WaitUntil([&] { return LookupAnswered(); });
    std::lock_guard<std::mutex> lock(lookup_mutex_);
    return *lookup_answer_;
  }
  static void WaitUntil(const std::function<bool()>& condition) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!condition()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ManualClock clock_{1'000'000};
  MetricsRegistry metrics_;
  FlakyStore* store_ = nullptr;
  std::unique_ptr<Engine> engine_;
  std::atomic<bool> lookup_applied_{false};
  std::mutex lookup_mutex_;
  std::optional<Result<bool>> lookup_answer_;
};

TEST_F(PipelineTest, AReadOfAnUncommittedBatchIsAnsweredOnlyOnceThatBatchIsDurable) {
  Result<std::int64_t> first = Status::Internal("not answered");
  std::thread adder = FirstInFlightThenLookup(first);
  // The lookup runs while "first" is still committing, and sees it in memory...
  WaitUntil([&] { return lookup_applied_.load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(LookupAnswered()) << "answered before the batch it read was durable";
  // ...and is answered once it is.
  store_->SetGate(false);
  adder.join();
  EXPECT_EQ(first.value(), 2);
  EXPECT_TRUE(LookupAnswer().value());
}

TEST_F(PipelineTest, AFailedCommitFailsTheBatchAppliedOnTopOfItAndMemoryForgetsBoth) {
  store_->fail = true;
  Result<std::int64_t> first = Status::Internal("not answered");
  std::thread adder = FirstInFlightThenLookup(first);
  Result<std::int64_t> second = Status::Internal("not answered");
  std::thread adder2([&] { second = AddUser(*engine_, "second"); });
  WaitUntil([&] { return lookup_applied_.load(); });
  store_->SetGate(false);
  adder.join();
  adder2.join();
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  // It read "first", which never became durable: it must not say it exists.
  EXPECT_EQ(LookupAnswer().status().code(), StatusCode::kUnavailable);
  // "second" was applied on top of the failed batch (refused with it) or after the reload
  // (refused by the still failing store): either way it is not there.
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  store_->fail = false;
  EXPECT_EQ(AddUser(*engine_, "first").value(), 2);
  EXPECT_EQ(AddUser(*engine_, "second").value(), 3);
}

// Group commit: commands that arrive one by one while a commit is in flight are applied as they
// come (not left queued until it ends) and commit together, in one batch, right after it.
TEST_F(PipelineTest, CommandsArrivingWhileACommitIsInFlightJoinTheNextBatch) {
  store_->SetGate(true);
  Result<std::int64_t> first = Status::Internal("not answered");
  std::thread adder = AddUserInFlight("first", first);
  const int applies_before = store_->applies_entered.load();
  constexpr int kLate = 3;
  std::atomic<int> applied{0};
  std::vector<Result<std::int64_t>> late(kLate, Status::Internal("not answered"));
  std::vector<std::thread> senders;
  for (int i = 0; i < kLate; ++i) {
    // One at a time: each is sent after the one before was applied.
    senders.emplace_back([this, i, &applied, &late] {
      late[i] = engine_->ExecuteSync<std::int64_t>([&, i](Txn& txn) -> Result<std::int64_t> {
        GPUHUB_ASSIGN_OR_RETURN(User u,
                                CreateUser(txn, "late" + std::to_string(i), "hash", kRoleCustomer));
        ++applied;
        return u.id;
      });
    });
    WaitUntil([&] { return applied.load() == i + 1; });
  }
  // All three were applied while "first" was still inside the store, and none is answered.
  EXPECT_EQ(store_->applies_entered.load(), applies_before);
  for (const auto& r : late) EXPECT_FALSE(r.ok());
  store_->SetGate(false);
  adder.join();
  for (auto& t : senders) t.join();
  EXPECT_EQ(first.value(), 2);
  for (int i = 0; i < kLate; ++i) EXPECT_EQ(late[i].value(), 3 + i);
  EXPECT_EQ(store_->applies_entered.load(), applies_before + 1) << "one batch for the three";
}

// GET /healthz answers from Serving without a round trip through the queue: it must say false
// whenever the writer is not known to be serving (not started, stuck in a batch, state not loaded
// after a failed commit, stopped).
TEST(EngineTest, ServingIsFalseUnlessTheWriterIsKnownToServe) {
  using std::chrono::milliseconds;
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  auto flaky = std::make_unique<FlakyStore>(OpenMigrated(TempDb()));
  FlakyStore* store = flaky.get();
  Engine engine(std::move(flaky), clock, metrics);
  EXPECT_FALSE(engine.Serving(milliseconds(10))) << "not started";
  ASSERT_TRUE(engine.Start().ok());
  EXPECT_TRUE(engine.Serving(milliseconds(10)));

  // A batch that takes longer than the limit: not serving while it runs, serving once it is done.
  std::atomic<bool> release{false};
  std::atomic<bool> running{false};
  std::atomic<bool> done{false};
  engine.Execute<int>(
      [&](Txn&) -> Result<int> {
        running = true;
        while (!release) std::this_thread::sleep_for(milliseconds(1));
        return 0;
      },
      [&](Result<int>) { done = true; });
  // Polled, not slept: the writer takes the batch when the scheduler lets it, and it marks the
  // batch over only after the command's `done` ran (a fixed 60 ms / 5 ms sleep raced both).
  auto eventually = [](const std::function<bool()>& condition) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!condition() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    return condition();
  };
  EXPECT_TRUE(eventually([&] { return running.load(); })) << "the writer took the batch";
  EXPECT_TRUE(eventually([&] { return !engine.Serving(milliseconds(20)); }))
      << "inside one batch for longer than 20 ms";
  EXPECT_TRUE(engine.Serving(milliseconds(10'000)));
  release = true;
  EXPECT_TRUE(eventually([&] { return done.load(); }));
  EXPECT_TRUE(eventually([&] { return engine.Serving(milliseconds(20)); }))
      << "serving again once the batch is done";

  // A failed commit whose reload fails too: the state is not loaded.
  store->fail = true;
  store->fail_reads = true;
  EXPECT_EQ(AddUser(engine, "lost").status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(engine.Serving(milliseconds(10'000))) << "state not loaded";
  store->fail = false;
  store->fail_reads = false;
  EXPECT_TRUE(AddUser(engine, "back").ok());  // the next batch reloads
  EXPECT_TRUE(engine.Serving(milliseconds(10'000)));

  engine.Stop();
  EXPECT_FALSE(engine.Serving(milliseconds(10'000))) << "stopped";
}

TEST(EngineTest, AFailedCommandsWritesAreDropped) {
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  std::string url = TempDb();
  {
    Engine engine(OpenMigrated(url), clock, metrics);
    ASSERT_TRUE(engine.Start().ok());
    auto r = engine.ExecuteSync<int>([](Txn& txn) -> Result<int> {
      txn.writes.Upsert("engine_meta",
                        {{"name", std::string("ghost")}, {"value", std::int64_t{1}}});
      return Status::InvalidArgument("changed my mind");
    });
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  auto store = OpenMigrated(url);
  int rows = 0;
  ASSERT_TRUE(store
                  ->Scan("engine_meta", {"name"}, "name",
                         [&](const store::Row&) {
                           ++rows;
                           return Status::Ok();
                         })
                  .ok());
  EXPECT_EQ(rows, 0);
}

TEST(EngineTest, StopCommitsEverythingAlreadyQueued) {
  ManualClock clock(1'000'000);
  MetricsRegistry metrics;
  std::string url = TempDb();
  std::atomic<int> acknowledged{0};
  {
    Engine engine(OpenMigrated(url), clock, metrics);
    ASSERT_TRUE(engine.Start().ok());
    for (int i = 0; i < 500; ++i) {
      engine.Execute<int>(
          [i](Txn& txn) -> Result<int> {
            GPUHUB_RETURN_IF_ERROR(
                CreateUser(txn, "q" + std::to_string(i), "h", kRoleCustomer).status());
            return i;
          },
          [&](Result<int> r) {
            if (r.ok()) ++acknowledged;
          });
    }
    engine.Stop();
    // After Stop nothing is accepted.
    EXPECT_EQ(AddUser(engine, "late").status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(acknowledged.load(), 500);
  MetricsRegistry metrics2;
  Engine engine(OpenMigrated(url), clock, metrics2);
  ASSERT_TRUE(engine.Start().ok());
  auto count = engine.ExecuteSync<std::size_t>(
      [](Txn& txn) -> Result<std::size_t> { return txn.state.accounts.users.size(); });
  EXPECT_EQ(count.value(), 500u);
}

TEST(EngineTest, TickHooksRunWithTheCommandsTime) {
  ManualClock clock(5'000'000);
  MetricsRegistry metrics;
  EngineOptions options;
  options.run_periodic_ticks = false;
  Engine engine(OpenMigrated(TempDb()), clock, metrics, options);
  std::atomic<TimestampMicros> seen{0};
  engine.AddTickHook([&](Txn& txn) {
    seen = txn.now;
    return Status::Ok();
  });
  ASSERT_TRUE(engine.Start().ok());
  clock.Advance(3'000'000);
  ASSERT_TRUE(engine
                  .ExecuteSync<int>([&](Txn& txn) -> Result<int> {
                    GPUHUB_RETURN_IF_ERROR(engine.RunTickHooks(txn));
                    return 0;
                  })
                  .ok());
  EXPECT_EQ(seen.load(), 8'000'000);
}

// A manual clock advance runs the hooks at each time a TickDue names inside the step, earliest
// first, then at the step's end; a due at or before now, or at the end, adds no run.
TEST(EngineTest, AdvanceClockToRunsTheHooksAtEachDueTimeInOrder) {
  ManualClock clock(5'000'000);
  MetricsRegistry metrics;
  EngineOptions options;
  options.run_periodic_ticks = false;
  Engine engine(OpenMigrated(TempDb()), clock, metrics, options);
  std::vector<TimestampMicros> runs;  // written and read on the writer only (ExecuteSync waits)
  std::vector<TimestampMicros> dues = {9'000'000, 7'000'000, 20'000'000};
  engine.AddTickHook(
      [&](Txn& txn) {
        runs.push_back(txn.now);
        std::erase_if(dues, [&](TimestampMicros d) { return d <= txn.now; });
        return Status::Ok();
      },
      [&](const State&) {
        TimestampMicros next = kNoTickDue;
        for (TimestampMicros d : dues) next = std::min(next, d);
        return next;
      });
  // Another hook's due that never moves (it cannot act): it is passed over, not looped on.
  engine.AddTickHook([](Txn&) { return Status::Ok(); },
                     [](const State&) -> TimestampMicros { return 6'000'000; });
  ASSERT_TRUE(engine.Start().ok());
  // As the admin endpoint does: the clock moves, the command steps from its start time to it.
  auto advance = [&](TimestampMicros to) {
    return engine.ExecuteSync<TimestampMicros>([&](Txn& txn) -> Result<TimestampMicros> {
      if (to > clock.NowMicros()) clock.Set(to);
      GPUHUB_RETURN_IF_ERROR(engine.AdvanceClockTo(txn, to));
      return txn.now;
    });
  };
  auto now = advance(5'500'000);  // before every due but the stuck one's
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(*now, 5'500'000);
  EXPECT_EQ(runs, (std::vector<TimestampMicros>{5'500'000}));
  runs.clear();
  now = advance(20'000'000);
  EXPECT_EQ(*now, 20'000'000);
  EXPECT_EQ(runs, (std::vector<TimestampMicros>{6'000'000, 7'000'000, 9'000'000, 20'000'000}));
  runs.clear();
  now = advance(1'000'000);  // never backwards
  EXPECT_EQ(*now, 20'000'000);
  EXPECT_EQ(runs, (std::vector<TimestampMicros>{20'000'000}));
}

TEST(MetricsTest, RendersPrometheusText) {
  MetricsRegistry m;
  m.Counter("req_total", "Requests", {{"route", "/v1/x"}, {"status", "200"}}).Add(3);
  auto& h = m.Histogram("lat_seconds", "Latency", {0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(5);
  std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE req_total counter\nreq_total{route=\"/v1/x\",status=\"200\"} 3\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("lat_seconds_count 3\n"), std::string::npos);
}

}  // namespace
}  // namespace gpuhub::engine
