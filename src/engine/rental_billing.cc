#include "engine/rental_billing.h"

namespace gpuhub::engine {

Result<rentals::TaxBlock> RentalTax(const State& state, std::int64_t customer_id,
                                    std::int64_t net_micros, TimestampMicros at) {
  (void)state;
  (void)customer_id;
  (void)at;
  // No billing countries yet: tax 0, gross = net (spec/market.md "Money": default 0).
  return rentals::NoTax(net_micros);
}

rentals::TaxFunction RentalTaxFunction(const State& state) {
  return [&state](rentals::UserId customer, std::int64_t net, TimestampMicros at) {
    return RentalTax(state, customer, net, at);
  };
}

Status OnRentalCharged(Txn& txn, const rentals::Charge& charge) {
  (void)txn;
  (void)charge;
  return Status::Ok();
}

Status OnStorageCharged(Txn& txn, const rentals::StorageCharge& charge) {
  (void)txn;
  (void)charge;
  return Status::Ok();
}

}  // namespace gpuhub::engine
