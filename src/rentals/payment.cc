#include "rentals/payment.h"

#include "rentals/format.h"

namespace gpuhub::rentals {
namespace {

using ledger::AccountKey;
using ledger::AccountKind;
using ledger::TransferRequest;

std::int64_t AmountOf(const ledger::Ledger& ledger, const std::string& id) {
  auto t = ledger.FindTransfer(id);
  return t.ok() ? t->amount_micros : -1;
}

}  // namespace

Result<std::vector<PaidPart>> PayParts(ledger::Ledger& ledger, UserId customer, Currency currency,
                                       std::span<const PaymentPart> parts, TimestampMicros at,
                                       std::string_view what,
                                       std::vector<ledger::Transfer>* applied) {
  const AccountKey wallet = AccountKey::Wallet(customer, currency);
  std::vector<TransferRequest> legs;
  std::vector<PaidPart> paid(parts.size());
  std::vector<std::size_t> legs_of(parts.size());
  std::int64_t total = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const PaymentPart& part = parts[i];
    GPUHUB_RETURN_IF_ERROR(ValidateTaxBlock(part.amount));
    const std::size_t first_leg = legs.size();
    const std::string& family = part.family.empty() ? part.code : part.family;
    AccountKey source = wallet;
    std::int64_t debit = part.amount.gross_micros;
    if (currency != Currency::kUsd) {
      auto fx = ledger.Fx().ConvertTo(currency, Currency::kUsd, part.amount.gross_micros);
      if (!fx.ok()) {
        return Status::FailedPrecondition("no exchange rate between " +
                                          std::string(CurrencyCode(currency)) +
                                          " and USD is set; pay from the USD wallet")
            .WithField("currency");
      }
      debit = fx->from_micros;
      TransferRequest leg;
      leg.id = part.id_base + ":fx";
      leg.debit = wallet;
      leg.credit = AccountKey::System(AccountKind::kFxConversion, currency);
      leg.amount_micros = debit;
      leg.code = family + "_fx";
      leg.memo = part.memo + " (" + AmountText(debit, currency) + ")";
      leg.timestamp = at;
      legs.push_back(std::move(leg));
      source = AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
    }
    TransferRequest revenue;
    revenue.id = part.id_base + ":revenue";
    revenue.debit = source;
    revenue.credit = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
    revenue.amount_micros = part.amount.net_micros;
    revenue.code = part.code;
    revenue.memo = part.memo;
    revenue.timestamp = at;
    legs.push_back(revenue);
    if (part.amount.tax_micros > 0) {
      TransferRequest t = revenue;
      t.id = part.id_base + ":tax";
      t.credit = AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd);
      t.amount_micros = part.amount.tax_micros;
      t.code = family + "_tax";
      legs.push_back(std::move(t));
    }
    paid[i].paid_micros = debit;
    legs_of[i] = legs.size() - first_leg;
    if (!CheckedAdd(total, debit, &total)) return Status::InvalidArgument("amount out of range");
  }
  ledger::BatchResult result = ledger.ApplyBatch(legs);
  if (!result.ok()) {
    // A refusal of the batch as a whole is the ledger's spend guard (an API key's daily cap,
    // ledger.h): its own message says why; the wallet may well hold enough.
    if (result.result == ledger::TransferResult::kInsufficientFunds &&
        result.failed_index != ledger::kWholeBatch) {
      auto balance = ledger.GetAccount(wallet);
      std::int64_t available = balance.ok() ? balance->available() : 0;
      return Status::InsufficientFunds("the " + std::string(CurrencyCode(currency)) +
                                       " wallet holds " + AmountText(available, currency) + "; " +
                                       std::string(what) + " costs " +
                                       AmountText(total, currency));
    }
    return result.status();
  }
  GPUHUB_CHECK_MSG(result.result == ledger::TransferResult::kOk,
                   "this was already paid under these transfer ids");
  std::size_t next = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    for (std::size_t k = 0; k < legs_of[i]; ++k) {
      paid[i].transfer_ids.push_back(result.transfers[next].id);
      applied->push_back(result.transfers[next]);
      ++next;
    }
  }
  return paid;
}

Result<PaidPart> RefundPart(ledger::Ledger& ledger, UserId customer, Currency currency,
                            const TaxBlock& amount, std::int64_t paid_micros,
                            const std::string& id_base, const std::string& code,
                            const std::string& memo, TimestampMicros at,
                            std::vector<ledger::Transfer>* applied) {
  const AccountKey wallet = AccountKey::Wallet(customer, currency);
  const AccountKey sink = currency == Currency::kUsd
                              ? wallet
                              : AccountKey::System(AccountKind::kFxConversion, Currency::kUsd);
  std::vector<TransferRequest> legs;
  TransferRequest revenue;
  revenue.id = id_base + ":refund:revenue";
  revenue.debit = AccountKey::System(AccountKind::kPlatformRevenue, Currency::kUsd);
  revenue.credit = sink;
  revenue.amount_micros = amount.net_micros;
  revenue.code = code;
  revenue.memo = memo;
  revenue.timestamp = at;
  legs.push_back(revenue);
  if (amount.tax_micros > 0) {
    TransferRequest t = revenue;
    t.id = id_base + ":refund:tax";
    t.debit = AccountKey::System(AccountKind::kTaxPayable, Currency::kUsd);
    t.amount_micros = amount.tax_micros;
    legs.push_back(std::move(t));
  }
  if (currency != Currency::kUsd) {
    // Exactly what the wallet paid comes back (no second conversion at today's rate).
    TransferRequest fx = revenue;
    fx.id = id_base + ":refund:fx";
    fx.debit = AccountKey::System(AccountKind::kFxConversion, currency);
    fx.credit = wallet;
    fx.amount_micros = paid_micros;
    legs.push_back(std::move(fx));
  }
  ledger::BatchResult result = ledger.ApplyBatch(legs);
  if (!result.ok()) return result.status();
  GPUHUB_CHECK_MSG(result.result == ledger::TransferResult::kOk, "this was already refunded");
  PaidPart out;
  out.paid_micros = paid_micros;
  for (const auto& t : result.transfers) {
    out.transfer_ids.push_back(t.id);
    applied->push_back(t);
  }
  return out;
}

bool LegsMatch(const ledger::Ledger& ledger, const std::string& id_base, const std::string& prefix,
               const TaxBlock& amount, Currency currency, std::int64_t paid_micros) {
  const std::string base = id_base + ":" + prefix;
  if (AmountOf(ledger, base + "revenue") != amount.net_micros) return false;
  if (AmountOf(ledger, base + "tax") != (amount.tax_micros > 0 ? amount.tax_micros : -1)) {
    return false;
  }
  std::int64_t fx = AmountOf(ledger, base + "fx");
  return currency == Currency::kUsd ? (fx == -1 && paid_micros == amount.gross_micros)
                                    : fx == paid_micros;
}

}  // namespace gpuhub::rentals
