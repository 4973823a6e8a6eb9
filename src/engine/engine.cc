#include "engine/engine.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "engine/limits.h"

namespace gpuhub::engine {

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
                                        MetricsRegistry::LatencyBounds())) {
  if (options_.max_commands_per_batch == 0) options_.max_commands_per_batch = kMaxCommandsPerBatch;
  if (options_.max_queued_commands == 0) options_.max_queued_commands = kMaxQueuedCommands;
  metrics.Gauge("gpuhub_engine_queued_commands", "Commands waiting for the writer",
                [this] { return static_cast<double>(queued()); });
}

Engine::~Engine() {
  Stop();
  metrics_.Gauge("gpuhub_engine_queued_commands", "Commands waiting for the writer", nullptr);
}

Status Engine::Start() {
  GPUHUB_CHECK_MSG(!started_, "Engine::Start called twice");
  GPUHUB_ASSIGN_OR_RETURN(state_, LoadState(*store_, options_.domains));
  state_valid_ = true;
  started_ = true;
  writer_ = std::thread([this] { WriterLoop(); });
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
}

void Engine::AddTickHook(TickHook hook) {
  GPUHUB_CHECK_MSG(!started_, "tick hooks are added before Start");
  tick_hooks_.push_back(std::move(hook));
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
    if (!started_ || stopping_) return false;
    waiting = !queue_.empty();
  }
  if (!state_valid_.load()) return false;
  std::int64_t now = SteadyNanos();
  std::int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(max_batch).count();
  std::int64_t started = batch_started_ns_.load();
  if (started != 0 && now - started > limit) return false;
  if (waiting && now - last_taken_ns_.load() > limit) return false;
  return true;
}

Status Engine::Submit(Command command) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || !started_) return Status::Unavailable("the server is shutting down");
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

Status Engine::Reload() {
  auto loaded = LoadState(*store_, options_.domains);
  if (!loaded.ok()) {
    state_valid_ = false;
    return loaded.status();
  }
  state_ = std::move(loaded).value();
  state_valid_ = true;
  return Status::Ok();
}

void Engine::WriterLoop() {
  using namespace std::chrono;
  auto next_tick = steady_clock::now() + microseconds(kTickIntervalMicros);
  std::deque<Command> batch;
  while (true) {
    bool tick_due = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (options_.run_periodic_ticks && !tick_hooks_.empty()) {
        wake_.wait_until(lock, next_tick, [&] { return stopping_ || !queue_.empty(); });
        tick_due = steady_clock::now() >= next_tick;
      } else {
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      }
      if (queue_.empty() && stopping_) break;
      last_taken_ns_.store(SteadyNanos());
      std::size_t n = std::min(queue_.size(), options_.max_commands_per_batch);
      for (std::size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
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
    if (!batch.empty()) {
      batch_started_ns_.store(SteadyNanos());
      ApplyBatch(batch);
      batch_started_ns_.store(0);
    }
    batch.clear();
  }
}

void Engine::ApplyBatch(std::deque<Command>& batch) {
  if (!state_valid_) {
    Status s = Reload();
    if (!s.ok()) {
      spdlog::error("event=state_reload_failed error=\"{}\"", s.ToString());
      Status refuse = Status::Unavailable("the database is unavailable; retry shortly");
      for (auto& command : batch) command.done(refuse);
      return;
    }
    spdlog::warn("event=state_reloaded");
  }
  store::WriteBatch writes;
  for (auto& command : batch) {
    std::size_t mark = writes.size();
    Txn txn(*state_, writes, clock_.NowMicros());
    if (command.apply(txn)) {
      commands_applied_.Add();
    } else {
      commands_failed_.Add();
      writes.Truncate(mark);
    }
  }
  Status commit;
  if (!writes.empty()) {
    auto started = std::chrono::steady_clock::now();
    commit = store_->Apply(writes);
    commit_seconds_.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    batch_rows_.Observe(static_cast<double>(writes.size()));
    (commit.ok() ? commits_ok_ : commits_failed_).Add();
  }
  batch_commands_.Observe(static_cast<double>(batch.size()));
  if (!commit.ok()) {
    spdlog::error("event=commit_failed commands={} rows={} error=\"{}\"", batch.size(),
                  writes.size(), commit.ToString());
    // The database rolled the batch back; so must memory.
    Status reload = Reload();
    if (reload.ok()) {
      spdlog::warn("event=state_reloaded reason=commit_failed");
    } else {
      spdlog::error("event=state_reload_failed error=\"{}\"", reload.ToString());
    }
    commit = Status::Unavailable("the change could not be saved (database unavailable); retry");
  }
  for (auto& command : batch) command.done(commit);
}

}  // namespace gpuhub::engine
