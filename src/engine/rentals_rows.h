// The rows of term rentals (internal to src/engine): how the fleet's records become rows of the
// rental_* tables in a group commit, and back at start-up.
#pragma once

#include <string>
#include <vector>

#include "core/strings.h"
#include "engine/engine.h"
#include "rentals/fleet.h"

namespace gpuhub::engine {

// Queues the rows of everything `changes` says changed: the ledger transfers first (in the order
// they were applied), then nodes, rentals, renewals (upserted), events and charges (inserted).
void WriteRentalRows(Txn& txn, const rentals::Fleet& fleet, const rentals::Changes& changes);

// Reads the rental tables into a snapshot.
Result<rentals::Snapshot> ReadRentalRows(store::Store& store);

// Shared with the storage rows: tax lines as a JSON array, and a list of ids as "a,b,c".
std::string TaxLinesJson(const std::vector<rentals::TaxLine>& lines);
Result<std::vector<rentals::TaxLine>> ParseTaxLines(const std::string& text);
std::string JoinIds(const std::vector<std::string>& ids);

// The money columns every charge row has (rental_charges, storage_charges), in this order:
// net_micros, tax_micros, gross_micros, tax_lines_json, paid_currency, paid_micros,
// period_start_us, period_end_us, at_us, transfer_ids. `C` is rentals::Charge or
// rentals::StorageCharge (the same members).
inline const std::vector<std::string>& ChargeMoneyColumns() {
  static const std::vector<std::string> columns = {
      "net_micros",      "tax_micros",    "gross_micros", "tax_lines_json", "paid_currency",
      "paid_micros",     "period_start_us", "period_end_us", "at_us",        "transfer_ids"};
  return columns;
}
template <typename C>
void AddChargeMoney(store::WriteBatch::Columns& cols, const C& c) {
  cols.insert(cols.end(), {{"net_micros", c.amount.net_micros},
                           {"tax_micros", c.amount.tax_micros},
                           {"gross_micros", c.amount.gross_micros},
                           {"tax_lines_json", TaxLinesJson(c.amount.lines)},
                           {"paid_currency", std::string(CurrencyCode(c.paid_currency))},
                           {"paid_micros", c.paid_micros},
                           {"period_start_us", c.period_start},
                           {"period_end_us", c.period_end},
                           {"at_us", c.at},
                           {"transfer_ids", JoinIds(c.transfer_ids)}});
}
// Reads them from `row`, the first of them at column `first`.
template <typename C>
Status ReadChargeMoney(const store::Row& row, std::size_t first, C* c) {
  GPUHUB_ASSIGN_OR_RETURN(c->amount.net_micros, row.Int(first));
  GPUHUB_ASSIGN_OR_RETURN(c->amount.tax_micros, row.Int(first + 1));
  GPUHUB_ASSIGN_OR_RETURN(c->amount.gross_micros, row.Int(first + 2));
  GPUHUB_ASSIGN_OR_RETURN(std::string lines, row.Text(first + 3));
  GPUHUB_ASSIGN_OR_RETURN(c->amount.lines, ParseTaxLines(lines));
  GPUHUB_ASSIGN_OR_RETURN(c->paid_currency, row.Parsed(first + 4, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(c->paid_micros, row.Int(first + 5));
  GPUHUB_ASSIGN_OR_RETURN(c->period_start, row.Int(first + 6));
  GPUHUB_ASSIGN_OR_RETURN(c->period_end, row.Int(first + 7));
  GPUHUB_ASSIGN_OR_RETURN(c->at, row.Int(first + 8));
  GPUHUB_ASSIGN_OR_RETURN(std::string ids, row.Text(first + 9));
  c->transfer_ids.clear();
  if (!ids.empty()) c->transfer_ids = Split(ids, ',');
  return Status::Ok();
}

}  // namespace gpuhub::engine
