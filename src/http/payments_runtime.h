// What the payment routes need at run time besides the engine: the BTCPay client (absent in demo
// mode), a small pool of threads for the blocking Greenfield calls (never the I/O threads or the
// engine's writer), the reconciliation pass and its metrics. Internal to src/http.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/metrics.h"
#include "http/rate_limit.h"
#include "payments/greenfield.h"
#include "payments/reconciler.h"

namespace gpuhub::http {

struct ApiContext;

struct PaymentsRuntime {
  explicit PaymentsRuntime(engine::MetricsRegistry& metrics);
  ~PaymentsRuntime();

  std::unique_ptr<payments::GreenfieldClient> btcpay;  // null: demo mode
  WorkerPool workers{2, 256};
  std::unique_ptr<payments::Reconciler> reconciler;

  engine::CounterSeries& credits_webhook;
  engine::CounterSeries& credits_reconciliation;
  engine::CounterSeries& reconcile_ok;
  engine::CounterSeries& reconcile_failed;
  engine::CounterSeries& webhooks_ignored;
  engine::CounterSeries& webhooks_refused;
  engine::CounterSeries& btcpay_errors;
  std::atomic<std::int64_t> last_reconcile_unix_s{0};
  std::atomic<std::int64_t> last_reconcile_failed{0};

  // The store's payment methods, read at most once a minute.
  std::mutex methods_mutex;
  std::vector<payments::PaymentMethod> methods;
  std::int64_t methods_read_unix_s = 0;

  bool demo() const { return btcpay == nullptr; }
};

// Starts the reconciliation pass over `api` (BTCPay mode only); call once the engine runs.
void StartReconciliation(ApiContext& api, std::int64_t interval_seconds);
// One pass now, on the calling thread.
payments::PassResult ReconcileNow(ApiContext& api);

}  // namespace gpuhub::http
