// Ledger commands per second, in memory, on one thread (the engine's writer). Each benchmark
// starts from a ledger with 1,000 funded customers and builds every request in the timed loop
// (ids included), as the engine would.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ledger/ledger.h"

namespace gpuhub::ledger {
namespace {

constexpr TimestampMicros kT = 1'700'000'000'000'000;
constexpr std::int64_t kCustomers = 1000;
constexpr std::int64_t kProviders = 100;

const AccountKey kDeposits = AccountKey::System(AccountKind::kDeposits, Currency::kUsd);
const AccountKey kRevenue = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
const AccountKey kHolds = AccountKey::System(AccountKind::kHolds, Currency::kUsd);

TransferRequest Request(std::string id, TransferKind kind, AccountKey debit, AccountKey credit,
                        std::int64_t amount, const char* code) {
  TransferRequest r;
  r.id = std::move(id);
  r.kind = kind;
  r.debit = debit;
  r.credit = credit;
  r.amount_micros = amount;
  r.code = code;
  r.timestamp = kT;
  return r;
}

Ledger FundedLedger() {
  Ledger ledger;
  for (std::int64_t u = 1; u <= kCustomers; ++u) {
    BatchResult b = ledger.Apply(Request("fund:" + std::to_string(u), TransferKind::kSinglePhase,
                                         kDeposits, AccountKey::Wallet(u, Currency::kUsd),
                                         1'000'000'000'000'000, "topup"));
    if (!b.ok()) std::abort();
  }
  return ledger;
}

// The n-th customer -> provider payable transfer.
TransferRequest Spend(std::int64_t n) {
  return Request("t:" + std::to_string(n), TransferKind::kSinglePhase,
                 AccountKey::Wallet(1 + n % kCustomers, Currency::kUsd),
                 AccountKey::Payable(1 + n % kProviders, Currency::kUsd), 2'500'000, "spend");
}

void Require(const BatchResult& b, benchmark::State& state) {
  if (b.result != TransferResult::kOk && b.result != TransferResult::kExists) {
    state.SkipWithError(b.message.c_str());
  }
}

// The same with the engine's window: the newest 100,000 transfers stay in memory, the ledger
// forgets back to that once it has grown by a fifth (engine/wallets.cc ForgetDurableTransfers),
// so this includes the amortised cost of forgetting and memory stays flat however long it runs.
void BM_SingleTransferWithWindow(benchmark::State& state) {
  constexpr std::size_t kKeep = 100'000;
  Ledger ledger = FundedLedger();
  std::int64_t n = 0;
  std::size_t forgotten = 0;
  for (auto _ : state) {
    ++n;
    BatchResult b = ledger.Apply(Spend(n));
    Require(b, state);
    benchmark::DoNotOptimize(b);
    if (ledger.Transfers().size() > kKeep + kKeep / 5) forgotten += ledger.Forget(kKeep);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["in_memory"] = static_cast<double>(ledger.Transfers().size());
  state.counters["forgotten"] = static_cast<double>(forgotten);
}
BENCHMARK(BM_SingleTransferWithWindow);

// One single-phase transfer per command: customer -> provider payable.
void BM_SingleTransfer(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  std::int64_t n = 0;
  for (auto _ : state) {
    ++n;
    BatchResult b = ledger.Apply(Spend(n));
    Require(b, state);
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["transfers"] = static_cast<double>(ledger.LastSequence());
}
BENCHMARK(BM_SingleTransfer);

// A lease hour: a linked batch of 2 (provider share + platform fee), one command.
void BM_LinkedBatchOf2(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  std::int64_t n = 0;
  std::vector<TransferRequest> batch(2);
  for (auto _ : state) {
    ++n;
    const std::string id = "lease:" + std::to_string(n) + ":hour:1";
    const AccountKey wallet = AccountKey::Wallet(1 + n % kCustomers, Currency::kUsd);
    batch[0] =
        Request(id + ":provider", TransferKind::kSinglePhase, wallet,
                AccountKey::Payable(1 + n % kProviders, Currency::kUsd), 2'250'000, "lease_hour");
    batch[1] = Request(id + ":fee", TransferKind::kSinglePhase, wallet, kRevenue, 250'000, "fee");
    BatchResult b = ledger.ApplyBatch(batch);
    Require(b, state);
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LinkedBatchOf2);

// A hold and its settlement for less: two commands per iteration (items = commands).
void BM_PendingThenPost(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  std::int64_t n = 0;
  for (auto _ : state) {
    ++n;
    const std::string id = "bid:" + std::to_string(n);
    Require(ledger.Apply(Request(id + ":hold", TransferKind::kPending,
                                 AccountKey::Wallet(1 + n % kCustomers, Currency::kUsd), kHolds,
                                 3'000'000, "hold")),
            state);
    TransferRequest post;
    post.id = id + ":post";
    post.kind = TransferKind::kPostPending;
    post.pending_id = id + ":hold";
    post.amount_micros = 2'500'000;
    post.code = "post";
    post.timestamp = kT;
    BatchResult b = ledger.Apply(post);
    Require(b, state);
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(2 * state.iterations());
}
BENCHMARK(BM_PendingThenPost);

// A resubmitted (duplicate) transfer: answered from the id index, nothing moves.
void BM_Resubmission(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  const TransferRequest r =
      Request("fund:17", TransferKind::kSinglePhase, kDeposits,
              AccountKey::Wallet(17, Currency::kUsd), 1'000'000'000'000'000, "topup");
  for (auto _ : state) {
    BatchResult b = ledger.Apply(r);
    if (b.result != TransferResult::kExists) state.SkipWithError("expected exists");
    benchmark::DoNotOptimize(b);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Resubmission);

// Restore: rebuilding a ledger from 100,000 persisted transfers (items = transfers).
void BM_Restore(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  for (std::int64_t n = 1; ledger.LastSequence() < 100'000; ++n) {
    ledger.Apply(Request("t:" + std::to_string(n), TransferKind::kSinglePhase,
                         AccountKey::Wallet(1 + n % kCustomers, Currency::kUsd),
                         AccountKey::Payable(1 + n % kProviders, Currency::kUsd), 1'000, "spend"));
  }
  const std::vector<Transfer> rows(ledger.Transfers().begin(), ledger.Transfers().end());
  for (auto _ : state) {
    auto restored = Ledger::Restore(rows, {});
    if (!restored.ok()) state.SkipWithError(restored.status().message().c_str());
    benchmark::DoNotOptimize(restored);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(rows.size()));
}
BENCHMARK(BM_Restore)->Unit(benchmark::kMillisecond);

// CheckInvariants on a ledger of 1,100 accounts (what a test pays after each command).
void BM_CheckInvariants(benchmark::State& state) {
  Ledger ledger = FundedLedger();
  for (std::int64_t n = 1; n <= kProviders; ++n) {
    ledger.Apply(Request("t:" + std::to_string(n), TransferKind::kSinglePhase,
                         AccountKey::Wallet(n, Currency::kUsd),
                         AccountKey::Payable(n, Currency::kUsd), 1'000, "spend"));
  }
  for (auto _ : state) {
    Status s = ledger.CheckInvariants();
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
}
BENCHMARK(BM_CheckInvariants)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpuhub::ledger

BENCHMARK_MAIN();
