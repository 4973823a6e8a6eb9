// Simulation: >= 100,000 random ledger commands from a seeded PRNG (valid, invalid, resubmitted,
// conflicting, holds posted for less or voided, FX settlements, payouts, batches failing midway,
// FX table changes). After every command the ledger's invariants are checked and its result is
// compared with a shadow model: a deliberately simple, independent computation of what the result
// and the balances must be. At the end the shadow's balances and transfer states must match the
// ledger's exactly, and Restore(the rows the ledger handed out) must rebuild the same ledger.
//
// GPUHUB_LEDGER_SIM_SEED=<n> runs another seed (the default is fixed so CI is reproducible);
// GPUHUB_LEDGER_SIM_COMMANDS=<n> runs more commands.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ledger/ledger.h"
#include "ledger/memory_archive.h"

namespace gpuhub::ledger {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;
constexpr int kUsers = 12;     // customers 1..12
constexpr int kProviders = 6;  // providers 1..6 (1..3 are customers too)

std::int64_t EnvOr(const char* name, std::int64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoll(v, nullptr, 10) : fallback;
}

// ----- The shadow model ---------------------------------------------------------------------

struct Totals {
  std::int64_t dp = 0, cp = 0, dq = 0, cq = 0;  // debits/credits posted, debits/credits pending
  bool operator==(const Totals&) const = default;
};

struct ShadowTransfer {
  TransferKind kind;
  AccountKey debit, credit;
  std::int64_t amount;
  std::string pending_id, code, memo;
  TransferState state;
};

struct ShadowRate {
  Currency base, quote;
  std::int64_t ppb;
  std::int32_t spread;
};

struct Shadow {
  std::map<AccountKey, Totals> accounts;
  std::map<std::string, ShadowTransfer> transfers;
  std::map<std::pair<Currency, Currency>, ShadowRate> rates;  // key: (min, max)

  struct Prediction {
    TransferResult result;
    std::size_t index;
    std::map<AccountKey, Totals> accounts;            // overlay to commit
    std::map<std::string, ShadowTransfer> transfers;  // overlay to commit
  };

  static bool Limited(AccountKind k) {
    return k == AccountKind::kCustomerWallet || k == AccountKind::kProviderPayable;
  }

  // What ApplyBatch must answer for a batch of well-formed requests.
  Prediction Predict(const std::vector<TransferRequest>& batch) const {
    Prediction p{TransferResult::kOk, 0, {}, {}};
    std::size_t existing = 0, first_existing = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      auto it = transfers.find(batch[i].id);
      if (it == transfers.end()) continue;
      const TransferRequest& r = batch[i];
      const ShadowTransfer& t = it->second;
      bool same = r.kind == t.kind && (!r.debit || *r.debit == t.debit) &&
                  (!r.credit || *r.credit == t.credit) && r.pending_id == t.pending_id &&
                  r.code == t.code && r.memo == t.memo &&
                  (r.amount_micros == t.amount ||
                   (r.kind == TransferKind::kVoidPending && r.amount_micros == 0));
      if (!same) return {TransferResult::kExistsWithDifferentFields, i, {}, {}};
      if (existing++ == 0) first_existing = i;
    }
    if (existing == batch.size()) return {TransferResult::kExists, 0, {}, {}};
    if (existing > 0) return {TransferResult::kBatchMixesExistingAndNewIds, first_existing, {}, {}};

    auto account = [&](const AccountKey& k) -> Totals& {
      auto o = p.accounts.find(k);
      if (o != p.accounts.end()) return o->second;
      auto b = accounts.find(k);
      return p.accounts[k] = b == accounts.end() ? Totals{} : b->second;
    };
    auto transfer = [&](const std::string& id) -> ShadowTransfer* {
      auto o = p.transfers.find(id);
      if (o != p.transfers.end()) return &o->second;
      auto b = transfers.find(id);
      if (b == transfers.end()) return nullptr;
      return &(p.transfers[id] = b->second);
    };
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const TransferRequest& r = batch[i];
      auto fail = [&](TransferResult result) { return Prediction{result, i, {}, {}}; };
      if (r.kind == TransferKind::kSinglePhase || r.kind == TransferKind::kPending) {
        Totals& d = account(*r.debit);
        if (Limited(r.debit->kind) && d.dp + d.dq + r.amount_micros > d.cp) {
          return fail(TransferResult::kInsufficientFunds);
        }
        Totals& c = account(*r.credit);
        if (r.kind == TransferKind::kSinglePhase) {
          account(*r.debit).dp += r.amount_micros;
          c.cp += r.amount_micros;
        } else {
          account(*r.debit).dq += r.amount_micros;
          c.cq += r.amount_micros;
        }
        p.transfers[r.id] = {
            r.kind,
            *r.debit,
            *r.credit,
            r.amount_micros,
            "",
            r.code,
            r.memo,
            r.kind == TransferKind::kPending ? TransferState::kPending : TransferState::kPosted};
      } else {
        ShadowTransfer* pending = transfer(r.pending_id);
        if (!pending) return fail(TransferResult::kPendingTransferNotFound);
        if (pending->kind != TransferKind::kPending) {
          return fail(TransferResult::kPendingTransferNotPending);
        }
        const bool post = r.kind == TransferKind::kPostPending;
        if (post && r.amount_micros > pending->amount) {
          return fail(TransferResult::kExceedsPendingTransferAmount);
        }
        if (!post && r.amount_micros != 0 && r.amount_micros != pending->amount) {
          return fail(TransferResult::kPendingTransferHasDifferentAmount);
        }
        if (pending->state == TransferState::kPosted) {
          return fail(TransferResult::kPendingTransferAlreadyPosted);
        }
        if (pending->state == TransferState::kVoided) {
          return fail(TransferResult::kPendingTransferAlreadyVoided);
        }
        pending->state = post ? TransferState::kPosted : TransferState::kVoided;
        const std::int64_t held = pending->amount;
        const AccountKey debit = pending->debit, credit = pending->credit;
        Totals& d = account(debit);
        d.dq -= held;
        if (post) d.dp += r.amount_micros;
        Totals& c = account(credit);
        c.cq -= held;
        if (post) c.cp += r.amount_micros;
        p.transfers[r.id] = {r.kind,       debit,  credit, post ? r.amount_micros : held,
                             r.pending_id, r.code, r.memo, pending->state};
      }
    }
    return p;
  }

  void Commit(Prediction&& p) {
    for (auto& [k, v] : p.accounts) accounts[k] = v;
    for (auto& [k, v] : p.transfers) transfers[k] = v;
  }

  std::optional<ShadowRate> Rate(Currency a, Currency b) const {
    auto it = rates.find({std::min(a, b), std::max(a, b)});
    if (it == rates.end()) return std::nullopt;
    return it->second;
  }

  // The fx.h formula, written out independently: from = to / (r_mid x (1 - spread)), rounded up
  // (what the customer pays goes the platform's way).
  static std::int64_t AmountToPay(const ShadowRate& rate, Currency from, std::int64_t to) {
    const __int128 keep = 10'000 - rate.spread;
    __int128 num, den;
    if (from == rate.base) {  // r_mid = ppb / 1e9
      num = __int128{to} * 1'000'000'000 * 10'000;
      den = __int128{rate.ppb} * keep;
    } else {  // r_mid = 1e9 / ppb
      num = __int128{to} * rate.ppb * 10'000;
      den = __int128{1'000'000'000} * keep;
    }
    __int128 q = num / den, rem = num % den;
    if (rem != 0) ++q;
    return static_cast<std::int64_t>(q);
  }
};

// ----- The simulation -----------------------------------------------------------------------

class Simulation {
 public:
  explicit Simulation(std::uint64_t seed) : rng_(seed) {}

  // Keeps only the newest `keep` transfers in memory (Forget every few commands), the rest in
  // `archive`, as the engine does with the store.
  void KeepWindow(MemoryArchive* archive, std::size_t keep) {
    archive_ = archive;
    keep_ = keep;
    ledger_.set_archive(archive);
  }

  void Run(std::int64_t commands) {
    for (step_ = 0; step_ < commands; ++step_) {
      now_ += 1 + static_cast<TimestampMicros>(Below(5'000'000));
      OneCommand();
      if (archive_ != nullptr) {
        archive_->AddNewer(ledger_.Transfers());
        if (step_ % 37 == 0) forgotten_ += ledger_.Forget(keep_);
      }
      Status inv = ledger_.CheckInvariants();
      ASSERT_TRUE(inv.ok()) << "after command " << step_ << ": " << inv.ToString();
      if (step_ % 5000 == 0) {
        Status history = ledger_.CheckHistory();
        ASSERT_TRUE(history.ok()) << "after command " << step_ << ": " << history.ToString();
        CompareWithShadow();
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  void CompareWithShadow() {
    std::vector<AccountBalance> accounts = ledger_.Accounts();
    ASSERT_EQ(accounts.size(), shadow_.accounts.size());
    for (const AccountBalance& a : accounts) {
      auto it = shadow_.accounts.find(a.key);
      ASSERT_NE(it, shadow_.accounts.end()) << AccountKeyName(a.key);
      Totals mine{a.debits_posted, a.credits_posted, a.debits_pending, a.credits_pending};
      ASSERT_EQ(mine, it->second) << AccountKeyName(a.key);
    }
    ASSERT_EQ(ledger_.LastSequence(), static_cast<std::int64_t>(shadow_.transfers.size()));
    for (const Transfer& t : ledger_.Transfers()) {
      auto it = shadow_.transfers.find(t.id);
      ASSERT_NE(it, shadow_.transfers.end()) << t.id;
      EXPECT_EQ(t.state, it->second.state) << t.id;
      EXPECT_EQ(t.amount_micros, it->second.amount) << t.id;
      EXPECT_EQ(t.debit, it->second.debit) << t.id;
      EXPECT_EQ(t.credit, it->second.credit) << t.id;
    }
  }

  const Ledger& ledger() const { return ledger_; }
  const Shadow& shadow() const { return shadow_; }
  std::size_t forgotten() const { return forgotten_; }
  const std::vector<FxRateChange>& fx_changes() const { return fx_changes_; }
  const std::map<TransferResult, int>& outcomes() const { return outcomes_; }
  int fills_undone() const { return fills_undone_; }

 private:
  std::uint64_t Below(std::uint64_t n) { return rng_() % n; }
  bool Chance(int percent) { return Below(100) < static_cast<std::uint64_t>(percent); }
  Currency AnyCurrency() { return kAllCurrencies[Below(kCurrencyCount)]; }
  std::int64_t User() { return 1 + static_cast<std::int64_t>(Below(kUsers)); }
  std::int64_t Provider() { return 1 + static_cast<std::int64_t>(Below(kProviders)); }
  AccountKey System(AccountKind k, Currency c) { return AccountKey::System(k, c); }
  // Amounts from 1 micro to ~hundreds of units, skewed small, with odd micro parts.
  std::int64_t Amount(std::int64_t max_units) {
    switch (Below(4)) {
      case 0:
        return 1 + static_cast<std::int64_t>(Below(1000));
      case 1:
        return 1 + static_cast<std::int64_t>(Below(1'000'000));
      default:
        return 1 + static_cast<std::int64_t>(Below(max_units * 1'000'000));
    }
  }
  std::string NewId(const char* prefix) {
    return prefix + std::string(":") + std::to_string(++ids_);
  }

  TransferRequest Leg(std::string id, TransferKind kind, AccountKey debit, AccountKey credit,
                      std::int64_t amount, const char* code) {
    TransferRequest r;
    r.id = std::move(id);
    r.kind = kind;
    r.debit = debit;
    r.credit = credit;
    r.amount_micros = amount;
    r.code = code;
    r.timestamp = now_;
    if (Chance(5)) r.memo = "sim \xe2\x82\xac " + std::to_string(step_);
    return r;
  }
  TransferRequest Resolve(std::string id, TransferKind kind, const std::string& pending_id,
                          std::int64_t amount) {
    TransferRequest r;
    r.id = std::move(id);
    r.kind = kind;
    r.pending_id = pending_id;
    r.amount_micros = amount;
    r.code = kind == TransferKind::kPostPending ? "post" : "void";
    r.timestamp = now_;
    return r;
  }

  // Applies a batch of well-formed requests and checks the result against the shadow.
  void Submit(const std::vector<TransferRequest>& batch) {
    Shadow::Prediction expected = shadow_.Predict(batch);
    BatchResult got = ledger_.ApplyBatch(batch);
    ++outcomes_[got.result];
    ASSERT_EQ(got.result, expected.result)
        << "command " << step_ << ": got " << TransferResultName(got.result) << " (" << got.message
        << "), expected " << TransferResultName(expected.result);
    if (expected.result == TransferResult::kOk) {
      ASSERT_EQ(got.transfers.size(), batch.size());
      for (std::size_t i = 0; i < batch.size(); ++i) {
        ASSERT_EQ(got.transfers[i].id, batch[i].id);
        ASSERT_EQ(got.transfers[i].sequence,
                  ledger_.LastSequence() - static_cast<std::int64_t>(batch.size() - 1 - i));
        ASSERT_EQ(got.transfers[i].timestamp, batch[i].timestamp);
      }
      shadow_.Commit(std::move(expected));
      applied_.push_back(batch);
      for (const TransferRequest& r : batch) {
        if (r.kind == TransferKind::kPending) pendings_.push_back(r.id);
      }
    } else if (expected.result == TransferResult::kExists) {
      ASSERT_EQ(got.transfers.size(), batch.size());
      for (std::size_t i = 0; i < batch.size(); ++i) {
        ASSERT_EQ(got.transfers[i], *ledger_.FindTransfer(batch[i].id));
      }
    } else {
      ASSERT_EQ(got.failed_index, expected.index) << got.message;
      ASSERT_TRUE(got.transfers.empty());
    }
  }

  // Submits a batch that must fail validation with `expected` at `index`, changing nothing.
  void SubmitInvalid(const std::vector<TransferRequest>& batch, TransferResult expected,
                     std::size_t index) {
    const std::int64_t before = ledger_.LastSequence();
    BatchResult got = ledger_.ApplyBatch(batch);
    ++outcomes_[got.result];
    ASSERT_EQ(got.result, expected) << "command " << step_ << ": " << got.message;
    ASSERT_EQ(got.failed_index, index);
    ASSERT_EQ(ledger_.LastSequence(), before);
  }

  void OneCommand() {
    const std::uint64_t roll = Below(100);
    if (roll < 14) return TopUp();
    if (roll < 23) return Spend();
    if (roll < 35) return LeaseHour();
    if (roll < 39) return FillBid();
    if (roll < 47) return FxLeaseHour();
    if (roll < 55) return Hold();
    if (roll < 70) return ResolveHold();
    if (roll < 73) return Payout();
    if (roll < 79) return Resubmit();
    if (roll < 83) return Conflict();
    if (roll < 90) return Invalid();
    if (roll < 94) return FailMidway();
    if (roll < 96) return MixedResubmission();
    return ChangeFx();
  }

  void TopUp() {
    const Currency c = AnyCurrency();
    Submit({Leg(NewId("topup"), TransferKind::kSinglePhase, System(AccountKind::kDeposits, c),
                AccountKey::Wallet(User(), c), Amount(500), "topup")});
  }

  void Spend() {
    const Currency c = AnyCurrency();
    const AccountKey credit =
        Chance(50) ? AccountKey::Payable(Provider(), c) : System(AccountKind::kPlatformRevenue, c);
    Submit({Leg(NewId("spend"), TransferKind::kSinglePhase, AccountKey::Wallet(User(), c), credit,
                Amount(80), "spend")});
  }

  void LeaseHour() {
    const Currency c = AnyCurrency();
    const std::int64_t price = Amount(20);
    const std::int64_t fee = price / 10;
    const std::string id = NewId("lease");
    const AccountKey wallet = AccountKey::Wallet(User(), c);
    std::vector<TransferRequest> batch = {Leg(id + ":provider", TransferKind::kSinglePhase, wallet,
                                              AccountKey::Payable(Provider(), c), price - fee,
                                              "lease_hour")};
    if (fee > 0) {
      batch.push_back(Leg(id + ":fee", TransferKind::kSinglePhase, wallet,
                          System(AccountKind::kPlatformRevenue, c), fee, "fee"));
    }
    Submit(batch);
  }

  // The spot exchange's fill of a resting bid: release the bid's hold and pay the hour, in one
  // batch. When the price exceeds what the wallet has without the hold, the batch fails after the
  // void, which must then be undone.
  void FillBid() {
    if (pendings_.empty()) return TopUp();
    const std::string* bid = nullptr;
    for (int attempt = 0; attempt < 8 && bid == nullptr; ++attempt) {
      const std::size_t recent = std::min<std::size_t>(pendings_.size(), 100);
      const std::string& id = pendings_[pendings_.size() - 1 - Below(recent)];
      const ShadowTransfer& t = shadow_.transfers.at(id);
      if (t.state == TransferState::kPending && t.credit.kind == AccountKind::kHolds) bid = &id;
    }
    if (bid == nullptr) return ResolveHold();
    const ShadowTransfer& hold = shadow_.transfers.at(*bid);
    const Totals& wallet = shadow_.accounts.at(hold.debit);
    const std::int64_t after_release = wallet.cp - wallet.dp - wallet.dq + hold.amount;
    const std::int64_t price =
        Chance(30)
            ? after_release + 1 + static_cast<std::int64_t>(Below(1000))  // overdraws
            : 1 + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(hold.amount) * 2));
    const std::int64_t fee = price / 10;
    const std::string id = NewId("fill");
    std::vector<TransferRequest> batch = {
        Resolve(id + ":release", TransferKind::kVoidPending, *bid, 0),
        Leg(id + ":provider", TransferKind::kSinglePhase, hold.debit,
            AccountKey::Payable(Provider(), hold.debit.currency), price - fee, "lease_hour")};
    if (fee > 0) {
      batch.push_back(Leg(id + ":fee", TransferKind::kSinglePhase, hold.debit,
                          System(AccountKind::kPlatformRevenue, hold.debit.currency), fee, "fee"));
    }
    const std::string bid_id = *bid;
    Submit(batch);
    if (!ledger_.FindTransfer(id + ":release").ok()) {
      ++fills_undone_;
      ASSERT_EQ(ledger_.FindTransfer(bid_id)->state, TransferState::kPending);
    }
  }

  void FxLeaseHour() {
    const Currency from = Chance(50) ? Currency::kEur : Currency::kGbp;
    const std::int64_t price = Amount(20);
    const std::int64_t fee = price / 10;
    auto quote = ledger_.Fx().ConvertTo(from, Currency::kUsd, price);
    std::optional<ShadowRate> rate = shadow_.Rate(from, Currency::kUsd);
    if (!rate) {
      ASSERT_FALSE(quote.ok());
      ASSERT_EQ(quote.status().code(), StatusCode::kFailedPrecondition);
      return;
    }
    const std::int64_t pay = Shadow::AmountToPay(*rate, from, price);
    if (pay <= 0) {
      ASSERT_FALSE(quote.ok());
      return;
    }
    ASSERT_TRUE(quote.ok()) << quote.status().ToString();
    ASSERT_EQ(quote->from_micros, pay) << "price " << price;
    const std::string id = NewId("fxlease");
    std::vector<TransferRequest> batch = {
        Leg(id + ":in", TransferKind::kSinglePhase, AccountKey::Wallet(User(), from),
            System(AccountKind::kFxConversion, from), pay, "fx"),
        Leg(id + ":provider", TransferKind::kSinglePhase,
            System(AccountKind::kFxConversion, Currency::kUsd),
            AccountKey::Payable(Provider(), Currency::kUsd), price - fee, "lease_hour")};
    if (fee > 0) {
      batch.push_back(Leg(id + ":fee", TransferKind::kSinglePhase,
                          System(AccountKind::kFxConversion, Currency::kUsd),
                          System(AccountKind::kPlatformRevenue, Currency::kUsd), fee, "fee"));
    }
    Submit(batch);
  }

  void Hold() {
    const Currency c = AnyCurrency();
    const AccountKey credit =
        Chance(60) ? System(AccountKind::kHolds, c) : AccountKey::Payable(Provider(), c);
    Submit({Leg(NewId("hold"), TransferKind::kPending, AccountKey::Wallet(User(), c), credit,
                Amount(60), "hold")});
  }

  const std::string& SomePending() {
    // Mostly a hold that is still open (as a platform resolves every hold sooner or later), else
    // any hold ever made (already posted or voided ones included).
    if (Chance(85)) {
      for (int attempt = 0; attempt < 8; ++attempt) {
        const std::string& id = Chance(50) && pendings_.size() > 50
                                    ? pendings_[pendings_.size() - 1 - Below(50)]
                                    : pendings_[Below(pendings_.size())];
        if (shadow_.transfers.at(id).state == TransferState::kPending) return id;
      }
    }
    return pendings_[Below(pendings_.size())];
  }

  void ResolveHold() {
    if (pendings_.empty()) return TopUp();
    std::string target = SomePending();
    if (Chance(3)) target = "hold:none";
    if (Chance(3) && !applied_.empty()) target = applied_[Below(applied_.size())][0].id;
    auto it = shadow_.transfers.find(target);
    const std::int64_t held = it == shadow_.transfers.end() ? 1 : it->second.amount;
    if (Chance(55)) {
      // Post the full amount, less, or (rarely) more than held.
      std::int64_t amount = held;
      const std::uint64_t how = Below(10);
      if (how < 5) amount = 1 + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(held)));
      if (how == 9) amount = held + 1;
      Submit({Resolve(NewId("post"), TransferKind::kPostPending, target, amount)});
    } else {
      Submit({Resolve(NewId("void"), TransferKind::kVoidPending, target, Chance(50) ? 0 : held)});
    }
  }

  void Payout() {
    const Currency c = AnyCurrency();
    const AccountKey payable = AccountKey::Payable(Provider(), c);
    const auto it = shadow_.accounts.find(payable);
    std::int64_t owed =
        it == shadow_.accounts.end() ? 0 : it->second.cp - it->second.dp - it->second.dq;
    // Usually what is owed (or part of it), sometimes more than owed.
    std::int64_t amount =
        owed > 0 && Chance(85)
            ? 1 + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(owed)))
            : owed + 1;
    Submit({Leg(NewId("payout"), TransferKind::kPending, payable, System(AccountKind::kPayouts, c),
                amount, "payout")});
  }

  // A batch applied earlier. With a window, one whose transfers are all still in memory: a new id
  // is checked against memory only (ledger.h), so resubmitting a forgotten one is the store's to
  // refuse (UNIQUE), not the ledger's.
  const std::vector<TransferRequest>* PickApplied() {
    if (applied_.empty()) return nullptr;
    if (archive_ == nullptr) return &applied_[Below(applied_.size())];
    const std::size_t recent = std::min<std::size_t>(applied_.size(), 100);
    for (int attempt = 0; attempt < 20; ++attempt) {
      const auto& batch = applied_[applied_.size() - 1 - Below(recent)];
      bool all_in_memory = true;
      for (const TransferRequest& r : batch) {
        all_in_memory = all_in_memory &&
                        std::any_of(ledger_.Transfers().begin(), ledger_.Transfers().end(),
                                    [&](const Transfer& t) { return t.id == r.id; });
      }
      if (all_in_memory) return &batch;
    }
    return nullptr;
  }

  void Resubmit() {
    const std::vector<TransferRequest>* picked = PickApplied();
    if (picked == nullptr) return TopUp();
    std::vector<TransferRequest> batch = *picked;
    for (TransferRequest& r : batch) {
      r.timestamp = now_;  // a retry arrives later: still the same transfer
      // Resubmitting a post/void may name the accounts it resolved; that is still identical.
      if ((r.kind == TransferKind::kPostPending || r.kind == TransferKind::kVoidPending) &&
          Chance(30)) {
        const ShadowTransfer& t = shadow_.transfers.at(r.id);
        r.debit = t.debit;
        r.credit = t.credit;
      }
    }
    Submit(batch);
  }

  void Conflict() {
    const std::vector<TransferRequest>* picked = PickApplied();
    if (picked == nullptr) return TopUp();
    std::vector<TransferRequest> batch = *picked;
    TransferRequest& r = batch[Below(batch.size())];
    switch (Below(4)) {
      case 0:
        r.amount_micros += 1;
        break;
      case 1:
        r.code += "x";
        break;
      case 2:
        r.memo += "!";
        break;
      default:
        if (r.kind == TransferKind::kSinglePhase) {
          r.kind = TransferKind::kPending;
        } else {
          r.amount_micros += 7;
        }
    }
    Submit(batch);
  }

  void Invalid() {
    const Currency c = AnyCurrency();
    TransferRequest r =
        Leg(NewId("bad"), TransferKind::kSinglePhase, System(AccountKind::kDeposits, c),
            AccountKey::Wallet(User(), c), Amount(10), "topup");
    TransferResult expected;
    switch (Below(11)) {
      case 0:
        r.id.clear();
        expected = TransferResult::kIdMustNotBeEmpty;
        break;
      case 1:
        r.id += " x";
        expected = TransferResult::kIdHasInvalidCharacters;
        break;
      case 2:
        r.code.clear();
        expected = TransferResult::kCodeMustNotBeEmpty;
        break;
      case 3:
        r.amount_micros = -static_cast<std::int64_t>(Below(3));
        expected = TransferResult::kAmountMustBePositive;
        break;
      case 4:
        r.amount_micros = kMaxTransferAmountMicros + 1 + static_cast<std::int64_t>(Below(9));
        expected = TransferResult::kAmountExceedsMaximum;
        break;
      case 5:
        r.credit = r.debit;
        expected = TransferResult::kAccountsMustBeDifferent;
        break;
      case 6:
        r.credit =
            AccountKey::Wallet(User(), c == Currency::kUsd ? Currency::kEur : Currency::kUsd);
        expected = TransferResult::kAccountsMustHaveSameCurrency;
        break;
      case 7:
        r.debit = AccountKey::Wallet(0, c);
        expected = TransferResult::kDebitAccountInvalid;
        break;
      case 8:
        r.timestamp = 0;
        expected = TransferResult::kTimestampMustBePositive;
        break;
      case 9:
        r.memo = "line\x01";
        expected = TransferResult::kMemoHasInvalidCharacters;
        break;
      default:
        r.pending_id = "hold:1";
        expected = TransferResult::kPendingIdMustBeEmpty;
        break;
    }
    // Sometimes the bad transfer hides behind good legs of the same batch.
    std::vector<TransferRequest> batch;
    const std::size_t before = Below(3);
    for (std::size_t i = 0; i < before; ++i) {
      batch.push_back(Leg(NewId("good"), TransferKind::kSinglePhase,
                          System(AccountKind::kDeposits, c), AccountKey::Wallet(User(), c), 1,
                          "topup"));
    }
    batch.push_back(r);
    SubmitInvalid(batch, expected, before);
  }

  void FailMidway() {
    // A top-up leg, a lease leg that fits, then one that overdraws: nothing may stick.
    const Currency c = AnyCurrency();
    const AccountKey wallet = AccountKey::Wallet(User(), c);
    const auto it = shadow_.accounts.find(wallet);
    const std::int64_t available =
        it == shadow_.accounts.end() ? 0 : it->second.cp - it->second.dp - it->second.dq;
    const std::int64_t topup = Amount(5);
    const std::string id = NewId("midway");
    std::vector<TransferRequest> batch = {
        Leg(id + ":topup", TransferKind::kSinglePhase, System(AccountKind::kDeposits, c), wallet,
            topup, "topup"),
        Leg(id + ":hold", TransferKind::kPending, wallet, System(AccountKind::kHolds, c), 1,
            "hold"),
        Leg(id + ":over", TransferKind::kSinglePhase, wallet, AccountKey::Payable(Provider(), c),
            available + topup, "lease_hour"),  // 1 micro too much after the hold
    };
    Submit(batch);
    ASSERT_FALSE(ledger_.FindTransfer(id + ":topup").ok());
  }

  void MixedResubmission() {
    const std::vector<TransferRequest>* picked = PickApplied();
    if (picked == nullptr) return TopUp();
    std::vector<TransferRequest> batch = *picked;
    const Currency c = batch[0].debit ? batch[0].debit->currency : Currency::kUsd;
    batch.push_back(Leg(NewId("extra"), TransferKind::kSinglePhase,
                        System(AccountKind::kDeposits, c), AccountKey::Wallet(User(), c), 1,
                        "topup"));
    Submit(batch);
  }

  void ChangeFx() {
    const Currency base = Chance(50) ? Currency::kEur : Currency::kGbp;
    const Currency quote =
        Chance(80) ? Currency::kUsd : (base == Currency::kEur ? Currency::kGbp : Currency::kEur);
    const bool flip = Chance(30);
    const Currency b = flip ? quote : base, q = flip ? base : quote;
    const auto key = std::make_pair(std::min(b, q), std::max(b, q));
    if (Chance(15)) {
      auto change = ledger_.RemoveFxRate(b, q, now_);
      if (shadow_.rates.count(key)) {
        ASSERT_TRUE(change.ok()) << change.status().ToString();
        shadow_.rates.erase(key);
        fx_changes_.push_back(*change);
      } else {
        ASSERT_EQ(change.status().code(), StatusCode::kNotFound);
      }
      return;
    }
    // Rates around 0.5 .. 2 with all 9 digits used; spreads 0 .. 2%, sometimes out of range.
    const std::int64_t ppb = 500'000'000 + static_cast<std::int64_t>(Below(1'500'000'000));
    const auto spread = static_cast<std::int32_t>(Chance(5) ? kMaxFxSpreadBps + 1 : Below(201));
    auto change = ledger_.SetFxRate(b, q, ppb, spread, now_);
    if (spread > kMaxFxSpreadBps) {
      ASSERT_EQ(change.status().code(), StatusCode::kInvalidArgument);
      return;
    }
    ASSERT_TRUE(change.ok()) << change.status().ToString();
    shadow_.rates[key] = ShadowRate{b, q, ppb, spread};
    fx_changes_.push_back(*change);
  }

  std::mt19937_64 rng_;
  Ledger ledger_;
  Shadow shadow_;
  std::int64_t step_ = 0;
  std::int64_t ids_ = 0;
  TimestampMicros now_ = kStart;
  std::vector<std::vector<TransferRequest>> applied_;
  std::vector<std::string> pendings_;
  std::vector<FxRateChange> fx_changes_;
  MemoryArchive* archive_ = nullptr;
  std::size_t keep_ = 0;
  std::size_t forgotten_ = 0;
  std::map<TransferResult, int> outcomes_;
  int fills_undone_ = 0;  // fills whose void was rolled back because the legs could not be paid
};

TEST(LedgerSimulation, RandomCommandsKeepTheBooksRight) {
  const auto seed = static_cast<std::uint64_t>(EnvOr("GPUHUB_LEDGER_SIM_SEED", 20260401));
  const std::int64_t commands = EnvOr("GPUHUB_LEDGER_SIM_COMMANDS", 120'000);
  SCOPED_TRACE("seed " + std::to_string(seed));
  Simulation sim(seed);
  sim.Run(commands);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  sim.CompareWithShadow();
  ASSERT_TRUE(sim.ledger().CheckHistory().ok()) << sim.ledger().CheckHistory().ToString();

  // The mix really exercised every path.
  const auto& outcomes = sim.outcomes();
  for (TransferResult r :
       {TransferResult::kOk, TransferResult::kExists, TransferResult::kInsufficientFunds,
        TransferResult::kExistsWithDifferentFields, TransferResult::kBatchMixesExistingAndNewIds,
        TransferResult::kPendingTransferNotFound, TransferResult::kPendingTransferNotPending,
        TransferResult::kPendingTransferAlreadyPosted,
        TransferResult::kPendingTransferAlreadyVoided,
        TransferResult::kExceedsPendingTransferAmount, TransferResult::kAmountMustBePositive,
        TransferResult::kAccountsMustHaveSameCurrency, TransferResult::kMemoHasInvalidCharacters}) {
    auto it = outcomes.find(r);
    EXPECT_TRUE(it != outcomes.end() && it->second >= 10)
        << TransferResultName(r) << " seen " << (it == outcomes.end() ? 0 : it->second);
  }
  std::size_t open = 0, posted_for_less = 0;
  for (const Transfer& t : sim.ledger().Transfers()) {
    if (t.kind == TransferKind::kPending && t.state == TransferState::kPending) ++open;
    if (t.kind == TransferKind::kPostPending &&
        t.amount_micros < sim.ledger().FindTransfer(t.pending_id)->amount_micros) {
      ++posted_for_less;
    }
  }
  EXPECT_GT(sim.ledger().Transfers().size(), 40'000u);
  EXPECT_GT(posted_for_less, 1000u);
  EXPECT_GT(sim.fx_changes().size(), 100u);
  EXPECT_GT(sim.fills_undone(), 100);
  std::cout << "[ sim      ] " << commands << " commands, " << sim.ledger().Transfers().size()
            << " transfers, " << sim.ledger().Accounts().size() << " accounts, " << open
            << " holds open, " << posted_for_less << " posted for less, " << sim.fx_changes().size()
            << " FX changes, " << sim.fills_undone() << " bid fills rolled back\n";

  // Replaying what the ledger handed out rebuilds it exactly.
  std::vector<Transfer> rows(sim.ledger().Transfers().begin(), sim.ledger().Transfers().end());
  for (Transfer& row : rows) {
    if (row.kind == TransferKind::kPending)
      row.state = TransferState::kPending;  // as first written
  }
  auto restored = Ledger::Restore(std::move(rows), sim.fx_changes());
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  EXPECT_EQ(restored->Accounts(), sim.ledger().Accounts());
  EXPECT_TRUE(std::equal(restored->Transfers().begin(), restored->Transfers().end(),
                         sim.ledger().Transfers().begin(), sim.ledger().Transfers().end()));
  EXPECT_EQ(restored->Fx(), sim.ledger().Fx());
  for (std::int64_t owner = 1; owner <= kUsers; ++owner) {
    auto a = restored->ListOwnerTransfers(owner, 0, kMaxTransfersPageSize);
    auto b = sim.ledger().ListOwnerTransfers(owner, 0, kMaxTransfersPageSize);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->transfers, b->transfers);
    EXPECT_EQ(a->next_before_sequence, b->next_before_sequence);
  }
}

// The same simulation with only the newest 400 transfers in memory and the rest in an archive (the
// store, in production): every answer, balance and state is the shadow's, history pages equal a
// ledger that kept everything, and RestoreWindow from persisted totals rebuilds the same books.
TEST(LedgerSimulation, AWindowOfRecentTransfersAnswersLikeTheWholeHistory) {
  const auto seed = static_cast<std::uint64_t>(EnvOr("GPUHUB_LEDGER_SIM_SEED", 20261201));
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr std::size_t kKeep = 400;
  MemoryArchive archive;
  Simulation sim(seed);
  sim.KeepWindow(&archive, kKeep);
  sim.Run(40'000);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  sim.CompareWithShadow();
  const Ledger& windowed = sim.ledger();
  ASSERT_TRUE(windowed.CheckHistory().ok()) << windowed.CheckHistory().ToString();
  EXPECT_GT(sim.forgotten(), 10'000u);
  EXPECT_GT(windowed.FirstSequence(), 10'000);
  EXPECT_LE(windowed.Transfers().size(), kKeep + 37 * 4);
  EXPECT_GT(archive.asked(), 0);

  // Every transfer ever made is found, in the state the shadow says.
  for (const auto& [id, expected] : sim.shadow().transfers) {
    auto t = windowed.FindTransfer(id);
    ASSERT_TRUE(t.ok()) << id << ": " << t.status().ToString();
    EXPECT_EQ(t->state, expected.state) << id;
    EXPECT_EQ(t->amount_micros, expected.amount) << id;
  }

  // A ledger that kept everything (Restore of every row) pages the same, page by page.
  std::vector<Transfer> rows;
  for (const auto& [sequence, t] : archive.all()) rows.push_back(t);
  ASSERT_EQ(static_cast<std::int64_t>(rows.size()), windowed.LastSequence());
  auto whole = Ledger::Restore(rows, sim.fx_changes());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->Accounts(), windowed.Accounts());
  auto same_pages = [](const Ledger& a, const Ledger& b, auto list) {
    std::int64_t cursor_a = 0, cursor_b = 0;
    std::size_t seen = 0;
    do {
      auto pa = list(a, cursor_a);
      auto pb = list(b, cursor_b);
      EXPECT_TRUE(pa.ok() && pb.ok());
      if (!pa.ok() || !pb.ok()) return seen;
      EXPECT_EQ(pa->transfers, pb->transfers);
      EXPECT_EQ(pa->next_before_sequence, pb->next_before_sequence);
      seen += pa->transfers.size();
      cursor_a = pa->next_before_sequence;
      cursor_b = pb->next_before_sequence;
    } while (cursor_a != 0 && !::testing::Test::HasFailure());
    return seen;
  };
  std::size_t paged = 0;
  for (std::int64_t owner = 1; owner <= kProviders; ++owner) {
    paged += same_pages(whole.value(), windowed, [&](const Ledger& l, std::int64_t cursor) {
      return l.ListOwnerTransfers(owner, cursor, 97);
    });
    paged += same_pages(whole.value(), windowed, [&](const Ledger& l, std::int64_t cursor) {
      return l.ListAccountTransfers(AccountKey::Wallet(owner, Currency::kEur), cursor, 50);
    });
  }
  EXPECT_GT(paged, 20'000u);

  // From persisted totals: accounts, open pending transfers, the newest 300 transfers.
  Ledger::RestorePoint point;
  point.last_sequence = windowed.LastSequence();
  point.accounts = windowed.Accounts();
  for (const Transfer& t : whole->Transfers()) {
    if (t.kind == TransferKind::kPending && t.state == TransferState::kPending) {
      point.open_pending.push_back(t);
    }
  }
  ASSERT_GT(point.open_pending.size(), 5u);
  point.recent.assign(whole->Transfers().end() - 300, whole->Transfers().end());
  point.fx_changes = sim.fx_changes();
  {
    auto restored = Ledger::RestoreWindow(point, &archive);
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    EXPECT_EQ(restored->Accounts(), windowed.Accounts());
    EXPECT_EQ(restored->LastSequence(), windowed.LastSequence());
    EXPECT_TRUE(restored->CheckHistory().ok()) << restored->CheckHistory().ToString();
    EXPECT_EQ(restored->Fx(), windowed.Fx());
    for (std::int64_t owner = 1; owner <= kUsers; ++owner) {
      same_pages(whole.value(), restored.value(), [&](const Ledger& l, std::int64_t cursor) {
        return l.ListOwnerTransfers(owner, cursor, 200);
      });
    }
  }
  // From totals as of an older checkpoint (the engine writes them every few thousand transfers):
  // the transfers after it are replayed onto them, holds they resolve read from the window or the
  // archive; any checkpoint inside the window gives the same books.
  for (std::int64_t back : {1, 7, 150, 300}) {
    SCOPED_TRACE("totals as of " + std::to_string(back) + " transfers ago");
    Ledger::RestorePoint older = point;
    older.accounts_through = point.last_sequence - back;
    auto then = Ledger::Restore(
        std::vector<Transfer>(whole->Transfers().begin(), whole->Transfers().end() - back),
        sim.fx_changes());
    ASSERT_TRUE(then.ok()) << then.status().ToString();
    older.accounts = then->Accounts();
    auto restored = Ledger::RestoreWindow(older, &archive);
    ASSERT_TRUE(restored.ok()) << restored.status().ToString();
    EXPECT_EQ(restored->Accounts(), windowed.Accounts());
    EXPECT_EQ(restored->LastSequence(), windowed.LastSequence());
    EXPECT_TRUE(restored->CheckHistory().ok()) << restored->CheckHistory().ToString();
    // The accounts the replay changed are the ones the next checkpoint must write.
    EXPECT_FALSE(restored->TakeChangedAccounts().empty());
    // Refused: totals older than the window, totals that are not the checkpoint's, a missing hold.
    Ledger::RestorePoint bad = older;
    bad.accounts_through = point.last_sequence - 301;
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
    if (back >= 150) {  // a stretch that moved holds: today's totals said to be older ones
      bad = older;
      bad.accounts = windowed.Accounts();
      EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
    }
    bad = older;
    bad.open_pending.pop_back();
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
  }
  // What RestoreWindow refuses: a missing open hold, a window that does not end at the last
  // sequence, a hold listed as open that the window resolves, an account without totals.
  {
    Ledger::RestorePoint bad = point;
    bad.open_pending.pop_back();
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
  }
  {
    Ledger::RestorePoint bad = point;
    bad.recent.pop_back();
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
  }
  {
    Ledger::RestorePoint bad = point;
    for (const Transfer& t : bad.recent) {
      if (t.kind == TransferKind::kVoidPending || t.kind == TransferKind::kPostPending) {
        Transfer resolved = whole->FindTransfer(t.pending_id).value();
        resolved.state = TransferState::kPending;
        bad.open_pending.push_back(resolved);
        break;
      }
    }
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
  }
  {
    Ledger::RestorePoint bad = point;
    bad.accounts.erase(bad.accounts.begin());
    EXPECT_EQ(Ledger::RestoreWindow(bad, &archive).status().code(), StatusCode::kInternal);
  }
}

}  // namespace
}  // namespace gpuhub::ledger
