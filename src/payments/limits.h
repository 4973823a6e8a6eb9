// Named limits of the payment processor client (BTCPay Server's Greenfield API).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace gpuhub::payments {

// One Greenfield call (connect, TLS, request, whole response). A top-up waits for it, so it is
// short; the reconciliation pass retries what timed out five minutes later.
inline constexpr std::chrono::milliseconds kGreenfieldTimeout{10000};
// Largest Greenfield response accepted (an invoice with its payment methods and payments is a few
// KiB; a store's payment methods list is smaller).
inline constexpr std::size_t kMaxGreenfieldResponseBytes = 1024 * 1024;
// Payments of one invoice that are looked at (BTCPay accepts any number of partial payments; past
// this the snapshot is refused and logged rather than silently truncated).
inline constexpr std::size_t kMaxPaymentsPerInvoice = 1000;
// Payment methods of one invoice or store.
inline constexpr std::size_t kMaxPaymentMethods = 64;
// Identifiers from BTCPay (invoice ids, payment ids such as "<txid>-<vout>", delivery ids, payment
// method ids): printable ASCII without spaces, at most this long.
inline constexpr std::size_t kMaxProcessorIdBytes = 200;
// Decimal strings from BTCPay (amounts, rates): at most this many digits in all; crypto amounts
// have up to 18 decimals (ETH), fiat rates a handful.
inline constexpr std::size_t kMaxDecimalDigits = 36;
// The reconciliation pass: how often by default, and how many invoices one pass looks at (the
// oldest-checked first, so a backlog is worked through pass after pass).
inline constexpr std::int64_t kDefaultReconcileIntervalSeconds = 300;
inline constexpr std::size_t kMaxInvoicesPerReconcilePass = 500;
// A BTCPay invoice's checkout expires after this by default (the store may say otherwise per
// invoice through checkout.expirationMinutes, which we send).
inline constexpr std::int64_t kDefaultInvoiceExpirationMinutes = 60;

}  // namespace gpuhub::payments
