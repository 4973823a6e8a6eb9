// For the tests of the domains that spend from wallets (market, rentals): money into a wallet the
// way a settled top-up puts it there (deposits -> customer_wallet). Not for production code.
#pragma once

#include <string>

#include "ledger/ledger.h"

namespace gpuhub::ledger {

// A single-phase transfer `id` of `micros` from deposits(`currency`) to `user`'s wallet at `at`.
inline BatchResult Deposit(Ledger& ledger, std::int64_t user, std::int64_t micros,
                           Currency currency, std::string id, TimestampMicros at) {
  TransferRequest t;
  t.id = std::move(id);
  t.debit = AccountKey::System(AccountKind::kDeposits, currency);
  t.credit = AccountKey::Wallet(user, currency);
  t.amount_micros = micros;
  t.code = "topup";
  t.timestamp = at;
  return ledger.Apply(t);
}

}  // namespace gpuhub::ledger
