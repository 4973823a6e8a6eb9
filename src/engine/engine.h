// The engine: the single writer that owns all mutable state of the platform.
//
// Every mutating request (and every read that must be consistent) becomes a command: a function
// run on the writer thread against the in-memory State, recording the rows it changes in the
// batch's WriteBatch. The writer takes up to kMaxCommandsPerBatch queued commands, applies them in
// order, commits all their rows in ONE store transaction (group commit), and only then calls each
// command's completion. So:
//   - commands are serializable by construction (one thread, in order);
//   - nothing is acknowledged before it is durable;
//   - a read sees every earlier command and is answered only once those are committed.
//
// Failed commit: every completion of the batch gets `unavailable`, and the engine throws its
// in-memory state away and rebuilds it from the store (the store is the truth: the batch was rolled
// back there). While the store cannot be loaded, every command fails with `unavailable` and the
// writer retries the load before each batch. Chosen over undo logs because it needs no per-domain
// undo code and start-up already exercises exactly the same loading path.
//
// Pipelined commit: a batch's rows commit on a second thread (the committer) while the writer
// applies the next batch in memory; at most one batch is in flight. Commands that arrive while it
// commits join the next batch as they come (group commit), up to max_commands_per_batch, and that
// batch goes to the committer as soon as the commit before it returns. The next batch is submitted,
// and the earlier one's completions called, only once the earlier commit returned: a command is
// still answered only after its own batch and every batch before it are durable, so a read never
// answers with something that could be rolled back. A failed commit refuses the batch in flight
// AND the batch applied on top of it (memory holds both), then reloads as above. Whatever else
// the writer asks of the store (term checks, reloads) waits until nothing is in flight; the
// ledger's archive reads (transfers older than its window, all durable) take store_mutex_, which
// the committer holds for the length of a commit.
//
// A command that returns an error has the rows it wrote dropped from the batch (its in-memory
// changes must not have happened: domain code validates before it mutates).
//
// Time: commands read `txn.now` (the engine's Clock at the start of the command). Tick hooks
// (lease billing, expiries, every domain's time-driven work) run on every manual clock advance and
// every kTickIntervalMicros with the real clock.
//
// Writer and standby (high availability, docs/operations.md): several engines may share one
// database; exactly one is the writer. Start() makes this engine the writer at once (the caller
// holds the store's writer lock); StartStandby() makes it a standby whose thread polls the lock
// every kStandbyPollMicros. Becoming the writer is always the same sequence: migrate, claim the
// next writer term (store.h: from then on every commit is fenced on it), load the whole state from
// the store, run. So a takeover resumes exactly where the database says the last writer stopped:
// time-driven work is whatever the tick hooks find due in the loaded state (a lease-hour the old
// writer committed is in the store and is not billed again; one it did not commit is billed now,
// at its own timestamp). Nothing here knows which domains exist.
// With `high_availability`, a writer steps down when the database no longer names its term (it
// checks on every failed commit and every kWriterCheckIntervalMicros when idle): it drops its
// state, releases the lock, tries kRetakeWriterLockMicros to win it back (a new term, a fresh
// load), and otherwise answers every queued command `unavailable` and waits as a standby. A
// standby refuses commands (`unavailable`); the HTTP layer forwards them to the writer instead.
//
// Thread-safety: Submit/Execute/Stop/role/writer are thread-safe. State is touched only by the
// writer thread (and by the caller of Start before the writer runs).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "engine/metrics.h"
#include "engine/state.h"
#include "store/store.h"

namespace gpuhub::engine {

struct AuditOrigin;  // engine/audit_log.h

// What a command sees: the state, the batch its writes go to, and the time.
class Txn {
 public:
  Txn(State& state, store::WriteBatch& writes, TimestampMicros now)
      : state(state), writes(writes), now(now) {}
  State& state;
  store::WriteBatch& writes;
  TimestampMicros now;
  // Who asked for the command, for the audit log (actor, client address, user agent, request
  // id): set by the HTTP layer around an authenticated action (AuditOriginScope); null for the
  // engine's own work (ticks, the CLI's one-shot engines), which the log names "system".
  const AuditOrigin* origin = nullptr;
};

struct Command {
  // Runs on the writer thread. Returns false when the command failed: its writes are dropped.
  std::function<bool(Txn&)> apply;
  // Runs on the writer thread after the batch's commit (ok) or its failure (unavailable). Must be
  // quick: hand real work to another thread.
  std::function<void(const Status& commit)> done;
};

// A Tick hook: time-driven work (billing). Runs inside a command, so its writes commit like any
// other; an error is logged and its writes dropped.
using TickHook = std::function<Status(Txn&)>;
// When a tick hook next has work that must happen at its own time, because running it later would
// give another result (a silent host's machine goes offline when its limit passes, not when the
// clock is next looked at): the earliest time at which a run would act, kNoTickDue when none. A
// hook that replays its own events in time order whenever it runs (lease billing) needs none.
using TickDue = std::function<TimestampMicros(const State&)>;
inline constexpr TimestampMicros kNoTickDue = std::numeric_limits<TimestampMicros>::max();
// A command hook: work that follows whatever a command changed (alerts look at the markets and
// stock a command touched). Runs on the writer after every command that succeeded (ticks
// included), inside its Txn: what it writes commits with the command. It cannot fail the command.
using CommandHook = std::function<void(Txn&)>;

struct EngineOptions {
  std::size_t max_commands_per_batch = 0;  // 0: kMaxCommandsPerBatch
  std::size_t max_queued_commands = 0;     // 0: kMaxQueuedCommands
  bool run_periodic_ticks = true;          // with the real clock; false for a manual clock
  DomainConfig domains;                    // markets, regions, fees (state.h)
  // Step down when the writer term is lost (see above); without it a lost term leaves the engine
  // failing every command (the CLI's one-shot engines, tests).
  bool high_availability = false;
  std::string node_id;            // in engine_writer with each term; empty: a random one
  std::string advertise_address;  // HOST:PORT of this node's API, in engine_writer for standbys
  // --clock manual: each time this engine becomes the writer it moves the clock forward to the
  // latest time the database has seen (engine_meta kManualClockMeta) and stores it, so time never
  // runs backwards across a takeover.
  ManualClock* manual_clock = nullptr;
};

// engine_meta's name for the manual clock's time (microseconds).
inline constexpr const char* kManualClockMeta = "manual_clock_us";

enum class EngineRole { kStandby, kWriter };

class Engine {
 public:
  // `store` must be migrated; `clock` and `metrics` must outlive the engine.
  Engine(std::unique_ptr<store::Store> store, const Clock& clock, MetricsRegistry& metrics,
         EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Claims a writer term, loads the state from the store and starts the writer thread. The store
  // must be migrated; the caller holds its writer lock (or is alone on the database).
  Status Start();
  // Starts the thread as a standby waiting for the writer lock (high availability).
  Status StartStandby();
  // Stops taking commands, applies and commits every command already queued, joins the writer.
  // Idempotent.
  void Stop();

  // `due`: see TickDue; without one the hook only runs at the times the others and the clock set.
  void AddTickHook(TickHook hook, TickDue due = nullptr);
  // Before Start, like tick hooks.
  void AddCommandHook(CommandHook hook);

  // Queues a command. unavailable when the engine is stopping or the queue is full (the command's
  // `done` is then NOT called).
  Status Submit(Command command);

  // Typed convenience: runs `fn` on the writer; `done` gets its result once committed, or the
  // commit's error. When the queue refuses the command, `done` is called at once with that error.
  template <typename T>
  void Execute(std::function<Result<T>(Txn&)> fn, std::function<void(Result<T>)> done);

  // Blocking version for the CLI and tests (never call it from the writer thread).
  template <typename T>
  Result<T> ExecuteSync(std::function<Result<T>(Txn&)> fn);

  // Runs every tick hook inside `txn` at txn.now.
  Status RunTickHooks(Txn& txn);
  // A long step of a manual clock, as the real clock would have lived it: from txn.now to `to`,
  // runs the tick hooks at each time a TickDue names (earliest first, each at its own time, as
  // many as fall inside the step, at most kMaxTickStepsPerAdvance), then at `to`, and leaves
  // txn.now at `to` (never earlier than it was). Moving the clock itself is the caller's part.
  // The first hook error ends it (the command fails and its writes are dropped).
  Status AdvanceClockTo(Txn& txn, TimestampMicros to);

  const Clock& clock() const { return clock_; }
  std::size_t queued() const;

  EngineRole role() const;
  // The database's writer as this engine last saw it: its own claim while it is the writer, what
  // the last poll read while it is a standby (term 0 before any).
  store::WriterRecord writer() const;
  // A standby: why its last poll of the database failed (ok while it reaches the database, and
  // always on the writer). A standby that cannot reach the database cannot take over.
  Status standby_problem() const;
  // The engine clock's time when this engine last became the writer (0 before): time-driven work
  // that needs a grace after a start (host agents' heartbeats) counts it from a takeover too.
  TimestampMicros writer_since() const { return writer_since_us_.load(); }
  const std::string& node_id() const { return options_.node_id; }
  // Before Start/StartStandby (the port is known once the server listens).
  void set_advertise_address(std::string address);
  // Whether the writer is serving, known without a round trip through the queue (GET /healthz's
  // fast path): the writer (not a standby), started and not stopping, its state loaded from the store, not inside one batch
  // for longer than `max_batch`, and no command waiting while the writer has not taken any for
  // that long. false means "not known to be serving": ask the writer (a no-op command) instead.
  bool Serving(std::chrono::steady_clock::duration max_batch) const;

 private:
  void WriterLoop();
  // Runs batches as the writer; false when stopping (everything queued was committed), true when
  // it stepped down.
  bool ServeAsWriter();
  // Polls the lock as a standby until this engine is the writer (true) or stops (false).
  bool Campaign();
  // Migrate, claim, load: the one way to become the writer.
  Status BecomeWriter();
  // Drops the state and the lock; retakes the lock at once when it can, else becomes a standby.
  void StepDown(const Status& why);
  // Applies `batch` in memory, waits for the batch in flight, then hands this one's rows to the
  // committer. false when the writer term was lost (the engine stepped down).
  bool ApplyBatch(std::deque<Command>& batch);
  enum class Finished { kOk, kFailed, kSteppedDown };
  struct InFlight;
  // Waits for the batch in flight (none: kOk at once) and answers its commands. On a failed
  // commit it also refuses `applied_after` (applied on top of it, never submitted), then steps
  // down (kSteppedDown, the writer term lost) or reloads memory (kFailed). `durable`: when given,
  // a committed batch is moved there for the caller to finish (FinishDurable) once it has handed
  // the next batch to the committer, instead of finished here.
  Finished FinishInFlight(std::deque<Command>* applied_after,
                          std::optional<InFlight>* durable = nullptr);
  // A committed batch: what is beyond the memory windows leaves memory, its commands are
  // answered.
  void FinishDurable(InFlight& finished);
  void CommitterLoop();
  Status WriterTermLost();
  Status Reload();
  void FailQueued(const Status& why);

  std::unique_ptr<store::Store> store_;
  const Clock& clock_;
  MetricsRegistry& metrics_;
  EngineOptions options_;
  std::unique_ptr<State> state_;
  std::atomic<bool> state_valid_{false};
  // For Serving: steady_clock nanoseconds when the current batch started (0: between batches)
  // and when the writer last took commands from the queue.
  std::atomic<std::int64_t> batch_started_ns_{0};
  std::atomic<std::int64_t> last_taken_ns_{0};
  std::atomic<TimestampMicros> writer_since_us_{0};
  std::vector<TickHook> tick_hooks_;
  std::vector<TickDue> tick_dues_;
  std::vector<CommandHook> command_hooks_;

  // The batch being committed (see "Pipelined commit"): its commands, rows, and the ledger's last
  // transfer sequence and billing's last document id once it was applied (what is durable when
  // its commit returns).
  struct InFlight {
    std::deque<Command> commands;
    store::WriteBatch writes;
    std::int64_t last_sequence = 0;
    std::int64_t last_document_id = 0;
  };
  // A state just loaded reads its archives (ledger, documents) under store_mutex_.
  void AdoptState(std::unique_ptr<State> state);
  std::optional<InFlight> in_flight_;  // set and cleared by the writer thread
  // Held by the committer for a commit and by archive reads (recursive: a read may run inside
  // another one's row callback).
  std::recursive_mutex store_mutex_;
  std::thread committer_;
  std::atomic<std::int64_t> commit_started_ns_{0};  // for Serving: 0 while nothing commits

  mutable std::mutex mutex_;
  std::condition_variable wake_;         // the writer: commands queued, a commit finished, stop
  std::condition_variable commit_wake_;  // the committer: a batch to commit, stop
  bool commit_requested_ = false;        // guarded by mutex_: in_flight_ awaits the committer
  bool commit_finished_ = false;         // guarded by mutex_: commit_result_ is set
  bool committer_stopping_ = false;      // guarded by mutex_
  Status commit_result_;                 // guarded by mutex_
  std::deque<Command> queue_;
  bool stopping_ = false;
  bool started_ = false;
  bool is_writer_ = false;           // guarded by mutex_
  store::WriterRecord writer_seen_;  // guarded by mutex_
  Status standby_problem_;           // guarded by mutex_
  std::thread writer_;

  CounterSeries& commands_applied_;
  CounterSeries& commands_failed_;
  CounterSeries& commits_ok_;
  CounterSeries& commits_failed_;
  HistogramSeries& batch_commands_;
  HistogramSeries& batch_rows_;
  HistogramSeries& commit_seconds_;
  // Where the writer thread's time goes, in microseconds: applying commands, waiting for the
  // committer, answering commands.
  CounterSeries& writer_applying_us_;
  CounterSeries& writer_waiting_us_;
  CounterSeries& writer_answering_us_;
  CounterSeries& terms_won_;
  CounterSeries& step_downs_;
};

template <typename T>
void Engine::Execute(std::function<Result<T>(Txn&)> fn, std::function<void(Result<T>)> done) {
  auto result = std::make_shared<std::optional<Result<T>>>();
  Command command;
  command.apply = [fn = std::move(fn), result](Txn& txn) {
    result->emplace(fn(txn));
    return (*result)->ok();
  };
  command.done = [result, done](const Status& commit) {
    if (!commit.ok()) {
      done(Result<T>(commit));
    } else {
      done(std::move(**result));
    }
  };
  Status queued = Submit(std::move(command));
  if (!queued.ok()) done(Result<T>(queued));
}

template <typename T>
Result<T> Engine::ExecuteSync(std::function<Result<T>(Txn&)> fn) {
  std::mutex m;
  std::condition_variable cv;
  std::optional<Result<T>> out;
  Execute<T>(std::move(fn), [&](Result<T> r) {
    std::lock_guard<std::mutex> lock(m);
    out.emplace(std::move(r));
    cv.notify_one();
  });
  std::unique_lock<std::mutex> lock(m);
  cv.wait(lock, [&] { return out.has_value(); });
  return std::move(*out);
}

}  // namespace gpuhub::engine
