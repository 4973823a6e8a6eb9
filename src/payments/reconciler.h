// The reconciliation pass: every few minutes, every invoice gpuhub still expects money for is read
// back from BTCPay and handed to the engine, exactly as a webhook would. A lost, late or refused
// webhook therefore costs at most one interval; the engine's per-payment dedupe makes a pass that
// overlaps a webhook harmless.
//
// The pass knows nothing of the ledger: `Hooks` lists the invoices (from the engine's snapshot)
// and applies what BTCPay reported (an engine command that credits); the pass only fetches.
//
// Thread-safety: Reconciler owns one thread; Trigger/Stop may be called from any thread.
// ReconcileOnce runs on the caller's thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "payments/greenfield.h"

namespace gpuhub::payments {

struct ReconcileHooks {
  // BTCPay invoice ids to check now, at most kMaxInvoicesPerReconcilePass.
  std::function<Result<std::vector<std::string>>()> open_invoices;
  // Applies one invoice as BTCPay reported it; returns how many payments it credited (or held).
  std::function<Result<int>(const ProcessorInvoice&)> apply;
};

struct PassResult {
  std::size_t checked = 0;  // invoices fetched and applied
  std::size_t credits = 0;  // payments credited or held by this pass
  std::size_t failed = 0;   // invoices that could not be fetched or applied (retried next pass)
  Status status;            // not ok when the list itself could not be read
};

PassResult ReconcileOnce(const GreenfieldClient& client, const ReconcileHooks& hooks);

class Reconciler {
 public:
  // Runs `pass` every `interval_seconds` (first run one interval after Start) and whenever
  // Trigger() is called.
  Reconciler(std::int64_t interval_seconds, std::function<void()> pass);
  ~Reconciler();
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  void Start();
  void Trigger();
  // Waits for a running pass to finish; idempotent.
  void Stop();

 private:
  void Loop();
  std::int64_t interval_seconds_;
  std::function<void()> pass_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool triggered_ = false;
  std::thread thread_;
};

}  // namespace gpuhub::payments
