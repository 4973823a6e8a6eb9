#include "engine/engine.h"

#include <sodium.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "core/thread_name.h"
#include "engine/billing.h"
#include "engine/limits.h"
#include "engine/wallets.h"

namespace gpuhub::engine {
namespace {

std::string RandomHex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  std::string hex(bytes * 2 + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()),
                 raw.size());
  hex.pop_back();
  return hex;
}

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

Status LostWriterRole() { return Status::Unavailable("this node lost the writer role; retry"); }

void Refuse(std::deque<Command>& commands, const Status& why) {
  for (auto& command : commands) command.done(why);
  commands.clear();
}

// Adds the microseconds since `start` to `counter` and restarts `start`.
void AddMicrosSince(CounterSeries& counter, std::chrono::steady_clock::time_point& start) {
  auto now = std::chrono::steady_clock::now();
  counter.Add(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(now - start).count()));
  start = now;
}

}  // namespace

Engine::Engine(std::unique_ptr<store::Store> store, const Clock& clock, MetricsRegistry& metrics,
               EngineOptions options)
    : store_(std::move(store)),
      clock_(clock),
      metrics_(metrics),
      options_(options),
      commands_applied_(metrics.Counter("gpuhub_engine_commands_total",
                                        "Commands applied by the writer", {{"result", "ok"}})),
      commands_failed_(metrics.Counter("gpuhub_engine_commands_total",
                                       "Commands applied by the writer", {{"result", "error"}})),
      commits_ok_(metrics.Counter("gpuhub_engine_commits_total", "Store transactions (batches)",
                                  {{"result", "ok"}})),
      commits_failed_(metrics.Counter("gpuhub_engine_commits_total", "Store transactions (batches)",
                                      {{"result", "error"}})),
      batch_commands_(metrics.Histogram("gpuhub_engine_batch_commands",
                                        "Commands per group-commit batch",
                                        MetricsRegistry::SizeBounds())),
      batch_rows_(metrics.Histogram("gpuhub_engine_batch_rows", "Rows written per batch",
                                    {1, 4, 16, 64, 256, 1024, 4096, 16384})),
      commit_seconds_(metrics.Histogram("gpuhub_engine_commit_seconds",
                                        "Latency of one batch's store transaction",
                                        MetricsRegistry::LatencyBounds())),
      writer_applying_us_(metrics.Counter("gpuhub_engine_writer_microseconds_total",
                                          "Writer thread time by what it did", {{"phase", "apply"}})),
      writer_waiting_us_(metrics.Counter("gpuhub_engine_writer_microseconds_total",
                                         "Writer thread time by what it did",
                                         {{"phase", "wait_commit"}})),
      writer_answering_us_(metrics.Counter("gpuhub_engine_writer_microseconds_total",
                                           "Writer thread time by what it did",
                                           {{"phase", "answer"}})),
      terms_won_(metrics.Counter("gpuhub_engine_writer_terms_total",
                                 "Writer terms this process claimed (start and takeovers)")),
      step_downs_(metrics.Counter("gpuhub_engine_step_downs_total",
                                  "Times this process lost its writer term and stepped down")) {
  if (options_.max_commands_per_batch == 0) options_.max_commands_per_batch = kMaxCommandsPerBatch;
  if (options_.max_queued_commands == 0) options_.max_queued_commands = kMaxQueuedCommands;
  if (options_.node_id.empty()) options_.node_id = RandomHex(8);
  metrics.Gauge("gpuhub_engine_queued_commands", "Commands waiting for the writer",
                [this] { return static_cast<double>(queued()); });
  metrics.Gauge("gpuhub_engine_writer", "1 while this process is the writer, 0 on a standby",
                [this] { return role() == EngineRole::kWriter ? 1.0 : 0.0; });
  metrics.Gauge("gpuhub_engine_writer_term", "The database's writer term as this process saw it",
                [this] { return static_cast<double>(writer().term); });
}

Engine::~Engine() {
  Stop();
  for (const char* gauge : {"gpuhub_engine_queued_commands", "gpuhub_engine_writer",
                            "gpuhub_engine_writer_term"}) {
    metrics_.Gauge(gauge, "", nullptr);
  }
}

Status Engine::Start() {
  GPUHUB_CHECK_MSG(!started_, "Engine::Start called twice");
  GPUHUB_RETURN_IF_ERROR(BecomeWriter());
  started_ = true;
  committer_ = std::thread([this] { CommitterLoop(); });
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

Status Engine::StartStandby() {
  GPUHUB_CHECK_MSG(!started_, "Engine::Start called twice");
  // Know the writer before the first request arrives (the thread's polls keep it current).
  if (auto seen = store_->CurrentWriter(); seen.ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    writer_seen_ = *seen;
  }
  started_ = true;
  committer_ = std::thread([this] { CommitterLoop(); });
  writer_ = std::thread([this] { WriterLoop(); });
  return Status::Ok();
}

void Engine::set_advertise_address(std::string address) {
  GPUHUB_CHECK_MSG(!started_, "the advertised address is set before Start");
  options_.advertise_address = std::move(address);
}

EngineRole Engine::role() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return is_writer_ ? EngineRole::kWriter : EngineRole::kStandby;
}

store::WriterRecord Engine::writer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writer_seen_;
}

Status Engine::standby_problem() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return is_writer_ ? Status::Ok() : standby_problem_;
}

Status Engine::BecomeWriter() {
  auto started = std::chrono::steady_clock::now();
  GPUHUB_RETURN_IF_ERROR(store_->Migrate());
  // The claim comes before the load: on PostgreSQL it waits for a commit of the previous writer
  // still in flight, so the load sees everything any earlier term committed.
  GPUHUB_ASSIGN_OR_RETURN(store::WriterRecord claimed,
                          store_->ClaimWriterTerm(options_.node_id, options_.advertise_address,
                                                  RandomHex(16), clock_.NowMicros()));
  GPUHUB_ASSIGN_OR_RETURN(auto state, LoadState(*store_, options_.domains));
  if (options_.manual_clock != nullptr) {
    auto stored = state->meta.find(kManualClockMeta);
    if (stored != state->meta.end() && stored->second > options_.manual_clock->NowMicros()) {
      options_.manual_clock->Set(stored->second);
    }
    TimestampMicros now = options_.manual_clock->NowMicros();
    state->meta[kManualClockMeta] = now;
    store::WriteBatch batch;
    batch.Upsert("engine_meta", {{"name", std::string(kManualClockMeta)}, {"value", now}});
    GPUHUB_RETURN_IF_ERROR(store_->Apply(batch));
  }
  AdoptState(std::move(state));
  writer_since_us_.store(clock_.NowMicros());
  terms_won_.Add();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    is_writer_ = true;
    writer_seen_ = claimed;
  }
  // A one-shot engine (the CLI's admin verbs) claims a term too; only a server's is news.
  spdlog::log(options_.high_availability ? spdlog::level::info : spdlog::level::debug,
              "event=writer_term_claimed term={} node={} address={} load_ms={:.1f}", claimed.term,
              claimed.node, claimed.address, MillisSince(started));
  return Status::Ok();
}

void Engine::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !writer_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  // The writer returns with nothing in flight; the committer has nothing left to do.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    committer_stopping_ = true;
  }
  commit_wake_.notify_all();
  if (committer_.joinable()) committer_.join();
}

void Engine::AddTickHook(TickHook hook, TickDue due) {
  GPUHUB_CHECK_MSG(!started_, "tick hooks are added before Start");
  tick_hooks_.push_back(std::move(hook));
  if (due) tick_dues_.push_back(std::move(due));
}

void Engine::AddCommandHook(CommandHook hook) {
  GPUHUB_CHECK_MSG(!started_, "command hooks are added before Start");
  command_hooks_.push_back(std::move(hook));
}

std::size_t Engine::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size();
}

namespace {
std::int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool Engine::Serving(std::chrono::steady_clock::duration max_batch) const {
  bool waiting;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_ || !is_writer_) return false;
    waiting = !queue_.empty();
  }
  if (!state_valid_.load()) return false;
  std::int64_t now = SteadyNanos();
  std::int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(max_batch).count();
  std::int64_t started = batch_started_ns_.load();
  if (started != 0 && now - started > limit) return false;
  std::int64_t committing = commit_started_ns_.load();
  if (committing != 0 && now - committing > limit) return false;
  if (waiting && now - last_taken_ns_.load() > limit) return false;
  return true;
}

Status Engine::Submit(Command command) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !started_) return Status::Unavailable("the server is shutting down");
    if (!is_writer_) {
      return Status::Unavailable(
          writer_seen_.address.empty() || writer_seen_.node == options_.node_id
              ? std::string("this node is a standby and no writer is known yet; retry shortly")
              : "this node is a standby; the writer is " + writer_seen_.address);
    }
    if (queue_.size() >= options_.max_queued_commands) {
      return Status::Unavailable("the engine is overloaded; retry shortly");
    }
    queue_.push_back(std::move(command));
  }
  wake_.notify_one();
  return Status::Ok();
}

Status Engine::RunTickHooks(Txn& txn) {
  for (auto& hook : tick_hooks_) GPUHUB_RETURN_IF_ERROR(hook(txn));
  return Status::Ok();
}

Status Engine::AdvanceClockTo(Txn& txn, TimestampMicros to) {
  if (to < txn.now) to = txn.now;
  for (std::int64_t steps = 0; steps < kMaxTickStepsPerAdvance; ++steps) {
    // Only times after now: what was due by now was done by the hooks' last run, and a due that
    // did not move (a hook that could not act) must not hold the clock in place.
    TimestampMicros next = kNoTickDue;
    for (const auto& due : tick_dues_) {
      const TimestampMicros at = due(txn.state);
      if (at > txn.now && at < next) next = at;
    }
    if (next >= to) break;
    txn.now = next;
    GPUHUB_RETURN_IF_ERROR(RunTickHooks(txn));
  }
  txn.now = to;
  return RunTickHooks(txn);
}

void Engine::WriterLoop() {
  NameThisThread("gpuhub-writer");
  while (true) {
    if (role() == EngineRole::kStandby && !Campaign()) return;
    if (!ServeAsWriter()) return;
  }
}

bool Engine::Campaign() {
  Status last_problem;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return false;
    }
    Status problem;
    auto held = store_->TryAcquireWriterLock();
    if (held.ok() && *held) {
      problem = BecomeWriter();
      if (problem.ok()) return true;
      store_->ReleaseWriterLock();
    } else if (!held.ok()) {
      problem = held.status();
    } else if (auto seen = store_->CurrentWriter(); seen.ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      writer_seen_ = *seen;
    } else if (seen.status().message().find("engine_writer") == std::string::npos) {
      problem = seen.status();  // a database not migrated yet has no writer row: not a problem
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      standby_problem_ = problem;
    }
    // One line when a problem starts or changes and one when it is over, not one per poll.
    if (problem.message() != last_problem.message()) {
      if (problem.ok()) {
        spdlog::info("event=standby_recovered");
      } else {
        spdlog::error("event=standby_poll_failed error=\"{}\"", problem.ToString());
      }
      last_problem = problem;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, std::chrono::microseconds(kStandbyPollMicros), [&] { return stopping_; });
  }
}

bool Engine::ServeAsWriter() {
  using namespace std::chrono;
  // The first tick runs at once: after a takeover, what fell due while nobody wrote (a lease-hour
  // that began during the outage) is done before anything else.
  auto next_tick = steady_clock::now();
  auto next_check = steady_clock::now() + microseconds(kWriterCheckIntervalMicros);
  const bool ticks = options_.run_periodic_ticks && !tick_hooks_.empty();
  const bool checks = options_.high_availability;
  std::deque<Command> batch;
  while (true) {
    bool tick_due = false;
    bool check_due = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto ready = [&] { return stopping_ || !queue_.empty() || commit_finished_; };
      if (ticks || checks) {
        auto until = ticks && checks ? std::min(next_tick, next_check) : ticks ? next_tick : next_check;
        wake_.wait_until(lock, until, ready);
      } else {
        wake_.wait(lock, ready);
      }
      if (queue_.empty() && stopping_) {
        lock.unlock();
        FinishInFlight(nullptr);  // everything queued is committed (or refused) before Stop returns
        return false;
      }
      last_taken_ns_.store(SteadyNanos());
      auto now = steady_clock::now();
      tick_due = ticks && now >= next_tick;
      check_due = checks && now >= next_check;
      std::size_t n = std::min(queue_.size(), options_.max_commands_per_batch);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (check_due) {
      next_check = steady_clock::now() + microseconds(kWriterCheckIntervalMicros);
      // The store is the committer's while a batch is in flight.
      if (FinishInFlight(nullptr) == Finished::kSteppedDown) {
        Refuse(batch, LostWriterRole());
        if (role() == EngineRole::kStandby) return true;
        continue;
      }
      if (Status term = store_->CheckWriterTerm(); !term.ok()) {
        Refuse(batch, LostWriterRole());
        StepDown(term);
        if (role() == EngineRole::kStandby) return true;
        continue;
      }
    }
    if (tick_due) {
      next_tick = steady_clock::now() + microseconds(kTickIntervalMicros);
      Command tick;
      tick.apply = [this](Txn& txn) {
        Status s = RunTickHooks(txn);
        if (!s.ok()) spdlog::error("event=tick_failed error=\"{}\"", s.ToString());
        return s.ok();
      };
      tick.done = [](const Status&) {};
      batch.push_back(std::move(tick));
    }
    bool still_writer = true;
    if (!batch.empty()) {
      still_writer = ApplyBatch(batch);
    } else {
      // Woken by the committer: answer the batch it finished.
      still_writer = FinishInFlight(nullptr) != Finished::kSteppedDown;
    }
    batch.clear();
    if (!still_writer) {
      if (role() == EngineRole::kStandby) return true;
    }
  }
}

void Engine::FailQueued(const Status& why) {
  std::deque<Command> failed;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed.swap(queue_);
  }
  for (auto& command : failed) command.done(why);
}

void Engine::StepDown(const Status& why) {
  std::int64_t term = store_->writer_term();
  spdlog::warn("event=writer_stepped_down term={} error=\"{}\"", term, why.ToString());
  step_downs_.Add();
  state_.reset();
  state_valid_ = false;
  store_->ReleaseWriterLock();
  // A lone node whose session blipped takes the lock straight back (commands queued meanwhile
  // wait for the outcome); with a standby around, whichever asks first wins.
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::microseconds(kRetakeWriterLockMicros);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) break;
    }
    auto held = store_->TryAcquireWriterLock();
    if (held.ok() && *held) {
      Status s = BecomeWriter();
      if (s.ok()) return;
      spdlog::error("event=writer_retake_failed error=\"{}\"", s.ToString());
      store_->ReleaseWriterLock();
    } else if (held.ok()) {
      break;  // another engine holds it: it is the writer now
    }
    std::this_thread::sleep_for(std::chrono::microseconds(kStandbyPollMicros) / 2);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    is_writer_ = false;
  }
  FailQueued(LostWriterRole());
  spdlog::warn("event=standby reason=lost_writer_term term={}", term);
}

Status Engine::Reload() {
  auto loaded = LoadState(*store_, options_.domains);
  if (!loaded.ok()) {
    state_valid_ = false;
    return loaded.status();
  }
  AdoptState(std::move(loaded).value());
  return Status::Ok();
}

void Engine::AdoptState(std::unique_ptr<State> state) {
  state_ = std::move(state);
  state_->wallets->archive->SerializeWith(&store_mutex_);
  state_->billing->archive->SerializeWith(&store_mutex_);
  state_valid_ = true;
}

// After a failure of the store: when the writer term is gone with it (HA), the engine steps down
// instead of reloading a state it may no longer write.
Status Engine::WriterTermLost() {
  if (!options_.high_availability) return Status::Ok();
  return store_->CheckWriterTerm();
}

bool Engine::ApplyBatch(std::deque<Command>& batch) {
  if (!state_valid_) {
    // Reloading reads the store: nothing may be in flight (and what is may fail and step down).
    if (FinishInFlight(nullptr) == Finished::kSteppedDown) {
      Refuse(batch, LostWriterRole());
      return false;
    }
  }
  if (!state_valid_) {  // still: the load before this batch failed, or the one just now did
    Status s = Reload();
    if (!s.ok()) {
      spdlog::error("event=state_reload_failed error=\"{}\"", s.ToString());
      Refuse(batch, Status::Unavailable("the database is unavailable; retry shortly"));
      if (Status term = WriterTermLost(); !term.ok()) {
        StepDown(term);
        return false;
      }
      return true;
    }
    spdlog::warn("event=state_reloaded");
  }
  batch_started_ns_.store(SteadyNanos());
  auto phase_started = std::chrono::steady_clock::now();
  store::WriteBatch writes;
  auto apply_from = [&](std::size_t first) {
    for (std::size_t i = first; i < batch.size(); ++i) {
      std::size_t mark = writes.size();
      Txn txn(*state_, writes, clock_.NowMicros());
      if (batch[i].apply(txn)) {
        for (auto& hook : command_hooks_) hook(txn);
        commands_applied_.Add();
      } else {
        commands_failed_.Add();
        writes.Truncate(mark);
      }
    }
  };
  apply_from(0);
  AddMicrosSince(writer_applying_us_, phase_started);
  // Group commit: while the batch before commits, the commands that arrive join this one. Left in
  // the queue, they would wait for this batch's commit as well as the one in flight, and the
  // batches would stay small (at 256 connections ~83 commands a batch before, ~100 since).
  while (in_flight_) {
    const std::size_t first = batch.size();
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] {
        return commit_finished_ || stopping_ ||
               (!queue_.empty() && batch.size() < options_.max_commands_per_batch);
      });
      if (commit_finished_ || stopping_) break;
      // One at a time, so that the batch goes to the committer as soon as the commit before
      // ends, not once a burst that came meanwhile has all been applied.
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      last_taken_ns_.store(SteadyNanos());
    }
    AddMicrosSince(writer_waiting_us_, phase_started);
    apply_from(first);
    AddMicrosSince(writer_applying_us_, phase_started);
  }
  AddMicrosSince(writer_waiting_us_, phase_started);
  // The ledger totals the batch's commands changed commit with the transfers that changed them.
  PersistChangedAccounts(*state_, writes);
  batch_commands_.Observe(static_cast<double>(batch.size()));
  const std::int64_t last_sequence = state_->wallets->ledger.LastSequence();
  const std::int64_t last_document_id = state_->billing->next_document_id - 1;
  AddMicrosSince(writer_applying_us_, phase_started);
  // This batch commits after the one in flight, and none of its commands is answered before that
  // one is durable (they may have read what it wrote).
  std::optional<InFlight> durable;
  Finished before = FinishInFlight(&batch, &durable);
  batch_started_ns_.store(0);
  if (before == Finished::kSteppedDown) return false;
  if (before == Finished::kFailed) return true;
  if (writes.empty()) {
    if (durable) FinishDurable(*durable);
    for (auto& command : batch) command.done(Status::Ok());
    return true;
  }
  in_flight_.emplace(
      InFlight{std::move(batch), std::move(writes), last_sequence, last_document_id});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    commit_requested_ = true;
  }
  commit_wake_.notify_one();
  // Finished (memory windows, answers, and freeing its rows) while the next commit runs, not
  // before it starts.
  phase_started = std::chrono::steady_clock::now();
  if (durable) FinishDurable(*durable);
  durable.reset();
  AddMicrosSince(writer_answering_us_, phase_started);
  return true;
}

void Engine::FinishDurable(InFlight& finished) {
  // What is beyond the ledger's window may leave memory (the store answers for it). Transfers of
  // a batch applied after this one are not durable yet: they stay.
  ForgetDurableTransfers(*state_, options_.domains.ledger_transfers_in_memory +
                                      static_cast<std::size_t>(
                                          state_->wallets->ledger.LastSequence() -
                                          finished.last_sequence));
  ForgetDurableDocuments(*state_,
                         {options_.domains.tax_documents_in_memory,
                          options_.domains.tax_document_lines_in_memory},
                         static_cast<std::size_t>(state_->billing->next_document_id - 1 -
                                                  finished.last_document_id));
  for (auto& command : finished.commands) command.done(Status::Ok());
  finished.commands.clear();
}

void Engine::CommitterLoop() {
  NameThisThread("gpuhub-commit");
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      commit_wake_.wait(lock, [&] { return commit_requested_ || committer_stopping_; });
      if (!commit_requested_) return;
      commit_requested_ = false;
    }
    // in_flight_ is the writer's, but it neither reads nor changes it until commit_finished_.
    const store::WriteBatch& writes = in_flight_->writes;
    auto started = std::chrono::steady_clock::now();
    commit_started_ns_.store(SteadyNanos());
    Status commit;
    {
      std::lock_guard<std::recursive_mutex> store_lock(store_mutex_);
      commit = store_->Apply(writes);
    }
    commit_started_ns_.store(0);
    commit_seconds_.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    batch_rows_.Observe(static_cast<double>(writes.size()));
    (commit.ok() ? commits_ok_ : commits_failed_).Add();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      commit_result_ = std::move(commit);
      commit_finished_ = true;
    }
    wake_.notify_one();
  }
}

Engine::Finished Engine::FinishInFlight(std::deque<Command>* applied_after,
                                        std::optional<InFlight>* durable) {
  if (!in_flight_) return Finished::kOk;
  Status commit;
  {
    auto waiting_since = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return commit_finished_; });
    AddMicrosSince(writer_waiting_us_, waiting_since);
    commit_finished_ = false;
    commit = std::move(commit_result_);
  }
  InFlight finished = std::move(*in_flight_);
  in_flight_.reset();
  if (commit.ok()) {
    if (durable != nullptr) {
      durable->emplace(std::move(finished));
    } else {
      FinishDurable(finished);
    }
    return Finished::kOk;
  }
  spdlog::error("event=commit_failed commands={} rows={} error=\"{}\"",
                finished.commands.size(), finished.writes.size(), commit.ToString());
  Status refuse =
      Status::Unavailable("the change could not be saved (database unavailable); retry");
  auto refuse_all = [&] {
    Refuse(finished.commands, refuse);
    if (applied_after != nullptr) Refuse(*applied_after, refuse);
  };
  if (Status term = WriterTermLost(); !term.ok()) {
    refuse_all();
    StepDown(term);
    return Finished::kSteppedDown;
  }
  // The database rolled the batch back; so must memory.
  Status reload = Reload();
  if (reload.ok()) {
    spdlog::warn("event=state_reloaded reason=commit_failed");
  } else {
    spdlog::error("event=state_reload_failed error=\"{}\"", reload.ToString());
  }
  refuse_all();
  return Finished::kFailed;
}

}  // namespace gpuhub::engine
