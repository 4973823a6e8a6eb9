// Providers' payout destinations: where their earnings may be paid (a Bitcoin address, a USDT or
// USDC address on Ethereum or Tron, or a bank account), each with a label.
//
// - Only providers hold them, at most kMaxPayoutDestinationsPerUser each.
// - The address is checked by its shape, which catches typos before money is sent:
//   btc: bech32/bech32m "bc1..." (BIP 173/350 checksum) or base58check "1..."/"3..." (its
//   double-SHA-256 checksum); usdt/usdc: "0x" + 40 hex digits (ERC-20; EIP-55's mixed-case
//   checksum needs Keccak-256, which libsodium lacks, so it is not checked) or a Tron base58check
//   "T..." address; bank: an IBAN (ISO 13616 mod-97 check) when it has an IBAN's shape, else a
//   free-text reference (printable, kMinBankReferenceBytes..kMaxBankReferenceBytes).
// - Adding one needs a fresh two-factor code on an account with two-factor (engine/totp.h); the
//   caller checks it.
// ValidatePayoutAddress is pure; the functions taking a Txn run on the writer thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/state.h"

namespace gpuhub::engine {

inline constexpr std::size_t kMaxPayoutDestinationsPerUser = 10;
inline constexpr std::size_t kMaxPayoutLabelBytes = 64;
inline constexpr std::size_t kMaxBankReferenceBytes = 140;  // a SEPA remittance line's length
inline constexpr std::size_t kMinBankReferenceBytes = 8;

enum class PayoutKind { kBtc, kUsdt, kUsdc, kBank };
Result<PayoutKind> ParsePayoutKind(std::string_view name);  // field "kind"
std::string_view PayoutKindName(PayoutKind kind);           // "btc", "usdt", "usdc", "bank"

// The address in its stored form (an IBAN without spaces, upper case; others as given, trimmed),
// or invalid_argument naming "address" and what is wrong with it.
Result<std::string> ValidatePayoutAddress(PayoutKind kind, std::string_view address);

struct PayoutDestination {
  std::int64_t id = 0;
  std::int64_t user_id = 0;
  PayoutKind kind = PayoutKind::kBtc;
  std::string address;
  std::string label;
  TimestampMicros created_at = 0;
};

// Where one payout goes: a copy of the destination it named when it was requested.
struct PayoutTarget {
  std::int64_t payout_id = 0;
  std::int64_t destination_id = 0;
  PayoutKind kind = PayoutKind::kBtc;
  std::string address;
  std::string label;
};

struct PayoutDestinationsState {
  std::map<std::int64_t, PayoutDestination> by_id;
  // By payout id. Every payout that named a destination (a few per provider a month): kept
  // whole, as the payouts' own pending list is.
  std::map<std::int64_t, PayoutTarget> targets;
  std::map<std::int64_t, std::set<std::int64_t>> by_user;
  std::int64_t next_id = 1;
};

// permission_denied unless the user is a provider; invalid_argument naming label or address;
// conflict when the same kind and address is already there; resource_exhausted beyond
// kMaxPayoutDestinationsPerUser. `address` must come from ValidatePayoutAddress.
Status CheckNewPayoutDestination(const State& state, const User& user, PayoutKind kind,
                                 const std::string& address, const std::string& label);
// CheckNewPayoutDestination, then stores it.
Result<PayoutDestination> AddPayoutDestination(Txn& txn, const User& user, PayoutKind kind,
                                               const std::string& address,
                                               const std::string& label);
// not_found unless it exists and is the user's.
Status RemovePayoutDestination(Txn& txn, std::int64_t user_id, std::int64_t id);
std::vector<PayoutDestination> ListPayoutDestinations(const State& state, std::int64_t user_id);
const PayoutDestination* FindPayoutDestination(const State& state, std::int64_t user_id,
                                               std::int64_t id);

// The user's destination `id` for a payout; not_found naming destination_id otherwise. Call it
// before the payout is made (the command validates before it mutates).
Result<PayoutDestination> PayoutDestinationFor(const State& state, std::int64_t user_id,
                                               std::int64_t id);
// Records that payout `payout_id` goes to `destination` (a copy).
void RecordPayoutTarget(Txn& txn, std::int64_t payout_id, const PayoutDestination& destination);
const PayoutTarget* FindPayoutTarget(const State& state, std::int64_t payout_id);

Status LoadPayoutDestinations(store::Store& store, PayoutDestinationsState& state);

}  // namespace gpuhub::engine
