// The fixture of the exchange's unit tests (exchange_test.cc, machine_condition_test.cc): one
// exchange and one ledger, a manual `now_`, and the invariants checked after every test.
#pragma once

#include <gtest/gtest.h>

#include <optional>

#include "ledger/ledger.h"
#include "ledger/test_deposit.h"
#include "market/exchange.h"

namespace gpuhub::market::testing {

using ledger::AccountKey;
using ledger::AccountKind;

inline constexpr TimestampMicros kStart = 1'800'000'000'000'000;  // 2027-01-15T08:00:00Z
inline constexpr TimestampMicros kHour = kMicrosPerHour;
inline constexpr UserId kProvider = 1, kProvider2 = 2, kAlice = 10, kBob = 11, kAdmin = 99;

inline std::int64_t Usd(double units) { return static_cast<std::int64_t>(units * 1e6 + 0.5); }

class ExchangeTest : public ::testing::Test {
 protected:
  ExchangeTest() : x_(Config()) {}

  static ExchangeConfig Config() {
    ExchangeConfig c;
    c.gpus = {"H100 SXM", "A100 SXM"};
    c.regions = {"DFW-1", "IAD-1", "PDX-1"};
    c.fee_ppm = 100'000;
    return c;
  }

  void TearDown() override { Check(); }

  void Check() {
    Status s = ledger_.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = x_.CheckInvariants(ledger_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    // With the records a test made the exchange Forget (none in most tests), so that the
    // providers' totals are checked against every lease.
    s = x_.CheckSettlement(ledger_, &forgotten_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  void Fund(UserId user, std::int64_t micros, Currency c = Currency::kUsd) {
    ASSERT_TRUE(
        ledger::Deposit(ledger_, user, micros, c, "topup:" + std::to_string(++topups_), kStart)
            .ok());
  }

  std::int64_t Available(const AccountKey& key) { return ledger_.GetAccount(key)->available(); }
  std::int64_t Wallet(UserId u, Currency c = Currency::kUsd) {
    return Available(AccountKey::Wallet(u, c));
  }
  std::int64_t Held(UserId u, Currency c = Currency::kUsd) {
    return ledger_.GetAccount(AccountKey::Wallet(u, c))->held();
  }
  std::int64_t Payable(UserId p) { return Available(AccountKey::Payable(p, Currency::kUsd)); }
  std::int64_t Revenue() {
    return ledger_.GetAccount(AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd))
        ->posted();
  }

  MachineId NewMachine(UserId provider, int gpus, const char* region = "IAD-1",
                       const char* gpu = "H100 SXM") {
    auto m = x_.AddMachine(provider, {gpu, gpus, region, 64, 512, 2000}, now_, &changes_);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? m->id : 0;
  }

  OrderId AskOn(MachineId machine, std::int64_t price, int min_gpus = 1, TimestampMicros until = 0,
                UserId provider = kProvider) {
    auto a =
        x_.PlaceAsk(provider, {machine, price, min_gpus, until ? until : now_ + 30 * kMicrosPerDay},
                    ledger_, now_, &changes_);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? a->id : 0;
  }

  Result<BidResult> Buy(UserId customer, int gpus, std::optional<std::int64_t> limit,
                        TimeInForce tif = TimeInForce::kIoc, const char* region = "",
                        TimestampMicros expires = 0, Currency c = Currency::kUsd) {
    BidSpec spec;
    spec.gpu = "H100 SXM";
    spec.gpus = gpus;
    spec.region = region;
    spec.is_market = !limit.has_value();
    spec.limit_micros = limit.value_or(0);
    spec.time_in_force = tif;
    spec.expires_at = expires;
    spec.currency = c;
    return x_.PlaceBid(customer, spec, ledger_, now_, &changes_);
  }

  void Advance(std::int64_t micros) {
    now_ += micros;
    x_.AdvanceTo(ledger_, now_, &changes_);
    Check();
  }

  Exchange x_;
  ledger::Ledger ledger_;
  Changes changes_;
  Snapshot forgotten_;  // what the test made the exchange Forget, as a store would hold it
  TimestampMicros now_ = kStart;
  int topups_ = 0;
};

}  // namespace gpuhub::market::testing
