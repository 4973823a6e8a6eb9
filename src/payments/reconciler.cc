#include "payments/reconciler.h"

#include <chrono>

#include "payments/limits.h"

namespace gpuhub::payments {

PassResult ReconcileOnce(const GreenfieldClient& client, const ReconcileHooks& hooks) {
  PassResult result;
  auto ids = hooks.open_invoices();
  if (!ids.ok()) {
    result.status = ids.status();
    return result;
  }
  std::size_t n = 0;
  for (const std::string& id : *ids) {
    if (++n > kMaxInvoicesPerReconcilePass) break;
    auto invoice = client.GetInvoice(id);
    if (!invoice.ok()) {
      ++result.failed;
      continue;
    }
    auto applied = hooks.apply(*invoice);
    if (!applied.ok()) {
      ++result.failed;
      continue;
    }
    ++result.checked;
    result.credits += static_cast<std::size_t>(*applied);
  }
  return result;
}

Reconciler::Reconciler(std::int64_t interval_seconds, std::function<void()> pass)
    : interval_seconds_(interval_seconds > 0 ? interval_seconds
                                             : kDefaultReconcileIntervalSeconds),
      pass_(std::move(pass)) {}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void Reconciler::Trigger() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    triggered_ = true;
  }
  wake_.notify_all();
}

void Reconciler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reconciler::Loop() {
  auto next = std::chrono::steady_clock::now() + std::chrono::seconds(interval_seconds_);
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_until(lock, next, [&] { return stopping_ || triggered_; });
      if (stopping_) return;
      triggered_ = false;
    }
    pass_();
    next = std::chrono::steady_clock::now() + std::chrono::seconds(interval_seconds_);
  }
}

}  // namespace gpuhub::payments
