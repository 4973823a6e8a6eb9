#include "engine/payout_destinations.h"

#include <gtest/gtest.h>

#include "engine/accounts.h"
#include "engine/engine_test_fixture.h"

namespace gpuhub::engine {
namespace {

constexpr TimestampMicros kStart = 1'700'000'000'000'000;

std::string Field(PayoutKind kind, std::string_view address) {
  auto r = ValidatePayoutAddress(kind, address);
  return r.ok() ? "ok" : r.status().field();
}

TEST(PayoutAddress, BitcoinShapesAndChecksums) {
  // BIP 173 / 350 test vectors (mainnet) and well-known base58 addresses.
  EXPECT_EQ(Field(PayoutKind::kBtc, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"), "ok");
  EXPECT_EQ(Field(PayoutKind::kBtc, "BC1QW508D6QEJXTDG4Y5R3ZARVARY0C5XW7KV8F3T4"), "ok");
  EXPECT_EQ(
      Field(PayoutKind::kBtc, "bc1p0xlxvlhemja6c4dqv22uapctqupfhlxm9h8z3k2e72q4k9hcz7vqzk5jj0"),
      "ok");  // taproot, bech32m
  EXPECT_EQ(Field(PayoutKind::kBtc, "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"), "ok");
  EXPECT_EQ(Field(PayoutKind::kBtc, "3J98t1WpEZ73CNmQviecrnyiWrnqRhWNLy"), "ok");
  // One character changed: the checksum catches it.
  EXPECT_EQ(Field(PayoutKind::kBtc, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5"), "address");
  EXPECT_EQ(Field(PayoutKind::kBtc, "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNb"), "address");
  // Mixed case, a v0 address with a bech32m checksum, testnet, nonsense.
  EXPECT_EQ(Field(PayoutKind::kBtc, "bc1qW508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4"), "address");
  EXPECT_EQ(Field(PayoutKind::kBtc, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kemeawh"), "address");
  EXPECT_EQ(Field(PayoutKind::kBtc, "tb1qw508d6qejxtdg4y5r3zarvary0cd5xw7kxpjzsx"), "address");
  EXPECT_EQ(Field(PayoutKind::kBtc, ""), "address");
  EXPECT_EQ(Field(PayoutKind::kBtc, "hello"), "address");
}

TEST(PayoutAddress, StablecoinsOnEthereumOrTron) {
  EXPECT_EQ(Field(PayoutKind::kUsdt, "0xdAC17F958D2ee523a2206206994597C13D831ec7"), "ok");
  EXPECT_EQ(Field(PayoutKind::kUsdc, "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"), "ok");
  EXPECT_EQ(Field(PayoutKind::kUsdt, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"), "ok");  // USDT on Tron
  EXPECT_EQ(Field(PayoutKind::kUsdt, "0xdAC17F958D2ee523a2206206994597C13D831ec"), "address");
  EXPECT_EQ(Field(PayoutKind::kUsdt, "0xgAC17F958D2ee523a2206206994597C13D831ec7"), "address");
  EXPECT_EQ(Field(PayoutKind::kUsdt, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u"), "address");
  // A Bitcoin address is not a Tron one (its version byte is not 0x41).
  EXPECT_EQ(Field(PayoutKind::kUsdc, "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa"), "address");
}

TEST(PayoutAddress, BankIbanOrReference) {
  auto iban = ValidatePayoutAddress(PayoutKind::kBank, "de89 3704 0044 0532 0130 00");
  ASSERT_TRUE(iban.ok()) << iban.status().ToString();
  EXPECT_EQ(*iban, "DE89370400440532013000");
  EXPECT_EQ(Field(PayoutKind::kBank, "GB82 WEST 1234 5698 7654 32"), "ok");
  EXPECT_EQ(Field(PayoutKind::kBank, "DE89 3704 0044 0532 0130 01"), "address");  // check digits
  EXPECT_EQ(Field(PayoutKind::kBank, "ABA 026009593 acct 123456789"), "ok");
  EXPECT_EQ(Field(PayoutKind::kBank, "short"), "address");
  EXPECT_EQ(Field(PayoutKind::kBank, std::string(141, 'x')), "address");
  EXPECT_EQ(Field(PayoutKind::kBank, "routing\n026009593"), "address");
  EXPECT_EQ(ParsePayoutKind("eth").status().field(), "kind");
}

class PayoutDestinationsTest : public EngineOnSqliteTest {
 protected:
  PayoutDestinationsTest() : EngineOnSqliteTest(kStart, "gpuhub_payout_dest") {}
  void SetUp() override {
    OpenEngine();
    provider_ = Run<User>([](Txn& txn) { return CreateUser(txn, "paula", "h", kRoleProvider); });
    customer_ = Run<User>([](Txn& txn) { return CreateUser(txn, "carl", "h", kRoleCustomer); });
  }
  Result<PayoutDestination> Add(const User& u, std::string address, std::string label = "cold") {
    return engine_->ExecuteSync<PayoutDestination>(
        [&](Txn& txn) { return AddPayoutDestination(txn, u, PayoutKind::kBtc, address, label); });
  }
  User provider_, customer_;
};

TEST_F(PayoutDestinationsTest, ProvidersOnlyWithALimitAndTheyPersist) {
  const std::string a = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";
  EXPECT_EQ(Add(customer_, a).status().code(), StatusCode::kPermissionDenied);
  auto first = Add(provider_, a);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->id, 1);
  EXPECT_EQ(Add(provider_, a).status().code(), StatusCode::kConflict);
  EXPECT_EQ(Add(provider_, "1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa", "").status().field(), "label");
  for (std::size_t i = 1; i < kMaxPayoutDestinationsPerUser; ++i) {
    ASSERT_TRUE(Add(provider_, "ref-" + std::to_string(i)).ok());
  }
  EXPECT_EQ(Add(provider_, "one too many").status().code(), StatusCode::kResourceExhausted);
  OpenEngine();
  auto list =
      Run<std::vector<PayoutDestination>>([&](Txn& txn) -> Result<std::vector<PayoutDestination>> {
        return ListPayoutDestinations(txn.state, provider_.id);
      });
  ASSERT_EQ(list.size(), kMaxPayoutDestinationsPerUser);
  EXPECT_EQ(list[0].address, a);
  EXPECT_EQ(list[0].label, "cold");
  Status other = engine_
                     ->ExecuteSync<int>([&](Txn& txn) -> Result<int> {
                       GPUHUB_RETURN_IF_ERROR(RemovePayoutDestination(txn, customer_.id, 1));
                       return 0;
                     })
                     .status();
  EXPECT_EQ(other.code(), StatusCode::kNotFound);
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_RETURN_IF_ERROR(RemovePayoutDestination(txn, provider_.id, 1));
    return 0;
  });
  auto next = Add(provider_, a);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, kMaxPayoutDestinationsPerUser + 1);
}

TEST_F(PayoutDestinationsTest, APayoutKeepsACopyOfItsDestination) {
  auto d = Add(provider_, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4");
  ASSERT_TRUE(d.ok());
  auto other = engine_->ExecuteSync<PayoutDestination>(
      [&](Txn& txn) { return PayoutDestinationFor(txn.state, customer_.id, d->id); });
  EXPECT_EQ(other.status().field(), "destination_id");
  Run<int>([&](Txn& txn) -> Result<int> {
    GPUHUB_ASSIGN_OR_RETURN(PayoutDestination to,
                            PayoutDestinationFor(txn.state, provider_.id, d->id));
    RecordPayoutTarget(txn, 7, to);
    GPUHUB_RETURN_IF_ERROR(RemovePayoutDestination(txn, provider_.id, d->id));
    return 0;
  });
  OpenEngine();
  auto label = Run<std::string>([&](Txn& txn) -> Result<std::string> {
    const PayoutTarget* t = FindPayoutTarget(txn.state, 7);
    if (!t) return Status::NotFound("no target");
    return t->address + " " + t->label;
  });
  EXPECT_EQ(label, "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4 cold");
}

}  // namespace
}  // namespace gpuhub::engine
