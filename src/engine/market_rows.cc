#include "engine/market_rows.h"

#include "core/money.h"

namespace gpuhub::engine {

const std::vector<std::string>& MachineColumns() {
  static const std::vector<std::string> columns = {
      "id",           "provider_id", "gpu",     "gpus",          "region",
      "vcpus",        "ram_gb",      "disk_gb", "created_at_us", "offline_since_us",
      "blocked_mask", "hold_reason", "port_range_first", "port_range_last"};
  return columns;
}

const std::vector<std::string>& AskColumns() {
  static const std::vector<std::string> columns = {
      "id",       "provider_id",        "machine_id", "gpu",           "price_micros",
      "min_gpus", "available_until_us", "status",     "created_at_us", "closed_at_us"};
  return columns;
}

const std::vector<std::string>& BidColumns() {
  static const std::vector<std::string> columns = {
      "id",         "customer_id",  "gpu",           "gpus",          "region",
      "is_market",  "limit_micros", "time_in_force", "expires_at_us", "currency",
      "status",     "close_reason", "created_at_us", "closed_at_us",  "lease_id",
      "hold_micros"};
  return columns;
}

const std::vector<std::string>& LeaseColumns() {
  static const std::vector<std::string> columns = {"id",
                                                   "bid_id",
                                                   "ask_id",
                                                   "machine_id",
                                                   "provider_id",
                                                   "customer_id",
                                                   "gpu",
                                                   "gpus",
                                                   "gpu_mask",
                                                   "price_micros",
                                                   "fee_ppm",
                                                   "currency",
                                                   "started_at_us",
                                                   "window_until_us",
                                                   "hours_paid",
                                                   "status",
                                                   "ended_at_us",
                                                   "end_reason",
                                                   "paused_at_us",
                                                   "shift_us",
                                                   "credited_micros",
                                                   "credited_provider_micros",
                                                   "start_deadline_us",
                                                   "hold_micros",
                                                   "workload_down"};
  return columns;
}

const std::vector<std::string>& TradeColumns() {
  static const std::vector<std::string> columns = {"id",     "gpu",      "price_micros",
                                                   "gpus",   "lease_id", "bid_id",
                                                   "ask_id", "maker",    "created_at_us"};
  return columns;
}

const std::vector<std::string>& PayoutColumns() {
  static const std::vector<std::string> columns = {
      "id", "provider_id", "amount_micros", "status", "created_at_us", "updated_at_us", "admin_id"};
  return columns;
}

Result<market::Machine> MachineFromRow(const store::Row& row) {
  market::Machine m;
  GPUHUB_ASSIGN_OR_RETURN(m.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(m.provider_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(m.gpu, row.Text(2));
  GPUHUB_ASSIGN_OR_RETURN(m.gpus, row.IntAs<int>(3));
  GPUHUB_ASSIGN_OR_RETURN(m.region, row.Text(4));
  GPUHUB_ASSIGN_OR_RETURN(m.vcpus, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(m.ram_gb, row.Int(6));
  GPUHUB_ASSIGN_OR_RETURN(m.disk_gb, row.Int(7));
  GPUHUB_ASSIGN_OR_RETURN(m.created_at, row.Int(8));
  GPUHUB_ASSIGN_OR_RETURN(m.offline_since, row.Int(9));
  GPUHUB_ASSIGN_OR_RETURN(m.blocked_mask, row.IntAs<std::uint32_t>(10));
  GPUHUB_ASSIGN_OR_RETURN(m.hold_reason, row.Text(11));
  GPUHUB_ASSIGN_OR_RETURN(m.port_range_first, row.IntAs<int>(12));
  GPUHUB_ASSIGN_OR_RETURN(m.port_range_last, row.IntAs<int>(13));
  return m;
}

Result<market::Ask> AskFromRow(const store::Row& row) {
  market::Ask a;
  GPUHUB_ASSIGN_OR_RETURN(a.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(a.provider_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(a.machine_id, row.Int(2));
  GPUHUB_ASSIGN_OR_RETURN(a.gpu, row.Text(3));
  GPUHUB_ASSIGN_OR_RETURN(a.price_micros, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(a.min_gpus, row.IntAs<int>(5));
  GPUHUB_ASSIGN_OR_RETURN(a.available_until, row.Int(6));
  GPUHUB_ASSIGN_OR_RETURN(a.status, row.Parsed(7, market::ParseAskStatus));
  GPUHUB_ASSIGN_OR_RETURN(a.created_at, row.Int(8));
  GPUHUB_ASSIGN_OR_RETURN(a.closed_at, row.Int(9));
  return a;
}

Result<market::Bid> BidFromRow(const store::Row& row) {
  market::Bid b;
  GPUHUB_ASSIGN_OR_RETURN(b.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(b.customer_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(b.gpu, row.Text(2));
  GPUHUB_ASSIGN_OR_RETURN(b.gpus, row.IntAs<int>(3));
  GPUHUB_ASSIGN_OR_RETURN(b.region, row.Text(4));
  GPUHUB_ASSIGN_OR_RETURN(b.is_market, row.IntAs<bool>(5));
  GPUHUB_ASSIGN_OR_RETURN(b.limit_micros, row.Int(6));
  GPUHUB_ASSIGN_OR_RETURN(b.time_in_force, row.Parsed(7, market::ParseTimeInForce));
  GPUHUB_ASSIGN_OR_RETURN(b.expires_at, row.Int(8));
  GPUHUB_ASSIGN_OR_RETURN(b.currency, row.Parsed(9, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(b.status, row.Parsed(10, market::ParseBidStatus));
  GPUHUB_ASSIGN_OR_RETURN(b.close_reason, row.Parsed(11, market::ParseBidCloseReason));
  GPUHUB_ASSIGN_OR_RETURN(b.created_at, row.Int(12));
  GPUHUB_ASSIGN_OR_RETURN(b.closed_at, row.Int(13));
  GPUHUB_ASSIGN_OR_RETURN(b.lease_id, row.Int(14));
  GPUHUB_ASSIGN_OR_RETURN(b.hold_micros, row.Int(15));
  return b;
}

Result<market::Lease> LeaseFromRow(const store::Row& row) {
  market::Lease l;
  GPUHUB_ASSIGN_OR_RETURN(l.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(l.bid_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(l.ask_id, row.Int(2));
  GPUHUB_ASSIGN_OR_RETURN(l.machine_id, row.Int(3));
  GPUHUB_ASSIGN_OR_RETURN(l.provider_id, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(l.customer_id, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(l.gpu, row.Text(6));
  GPUHUB_ASSIGN_OR_RETURN(l.gpus, row.IntAs<int>(7));
  GPUHUB_ASSIGN_OR_RETURN(l.gpu_mask, row.IntAs<std::uint32_t>(8));
  GPUHUB_ASSIGN_OR_RETURN(l.price_micros, row.Int(9));
  GPUHUB_ASSIGN_OR_RETURN(l.fee_ppm, row.Int(10));
  GPUHUB_ASSIGN_OR_RETURN(l.currency, row.Parsed(11, ParseCurrency));
  GPUHUB_ASSIGN_OR_RETURN(l.started_at, row.Int(12));
  GPUHUB_ASSIGN_OR_RETURN(l.window_until, row.Int(13));
  GPUHUB_ASSIGN_OR_RETURN(l.hours_paid, row.Int(14));
  GPUHUB_ASSIGN_OR_RETURN(l.status, row.Parsed(15, market::ParseLeaseStatus));
  GPUHUB_ASSIGN_OR_RETURN(l.ended_at, row.Int(16));
  GPUHUB_ASSIGN_OR_RETURN(l.end_reason, row.Parsed(17, market::ParseLeaseEndReason));
  GPUHUB_ASSIGN_OR_RETURN(l.paused_at, row.Int(18));
  GPUHUB_ASSIGN_OR_RETURN(l.shift_micros, row.Int(19));
  GPUHUB_ASSIGN_OR_RETURN(l.credited_micros, row.Int(20));
  GPUHUB_ASSIGN_OR_RETURN(l.credited_provider_micros, row.Int(21));
  GPUHUB_ASSIGN_OR_RETURN(l.start_deadline, row.Int(22));
  GPUHUB_ASSIGN_OR_RETURN(l.hold_micros, row.Int(23));
  GPUHUB_ASSIGN_OR_RETURN(l.workload_down, row.IntAs<bool>(24));
  return l;
}

Result<market::Trade> TradeFromRow(const store::Row& row) {
  market::Trade t;
  GPUHUB_ASSIGN_OR_RETURN(t.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(t.gpu, row.Text(1));
  GPUHUB_ASSIGN_OR_RETURN(t.price_micros, row.Int(2));
  GPUHUB_ASSIGN_OR_RETURN(t.gpus, row.IntAs<int>(3));
  GPUHUB_ASSIGN_OR_RETURN(t.lease_id, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(t.bid_id, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(t.ask_id, row.Int(6));
  GPUHUB_ASSIGN_OR_RETURN(t.maker, row.Parsed(7, market::ParseSide));
  GPUHUB_ASSIGN_OR_RETURN(t.created_at, row.Int(8));
  return t;
}

Result<market::Payout> PayoutFromRow(const store::Row& row) {
  market::Payout p;
  GPUHUB_ASSIGN_OR_RETURN(p.id, row.Int(0));
  GPUHUB_ASSIGN_OR_RETURN(p.provider_id, row.Int(1));
  GPUHUB_ASSIGN_OR_RETURN(p.amount_micros, row.Int(2));
  GPUHUB_ASSIGN_OR_RETURN(p.status, row.Parsed(3, market::ParsePayoutStatus));
  GPUHUB_ASSIGN_OR_RETURN(p.created_at, row.Int(4));
  GPUHUB_ASSIGN_OR_RETURN(p.updated_at, row.Int(5));
  GPUHUB_ASSIGN_OR_RETURN(p.admin_id, row.Int(6));
  return p;
}

store::Select OpenRowsSelect(const char* table, const std::vector<std::string>& columns,
                             std::string status) {
  store::Select select;
  select.table = table;
  select.columns = columns;
  select.where = {{"status", store::Condition::Op::kEq, std::move(status)}};
  return select;
}

store::Select HistoryPageSelect(const char* table, const std::vector<std::string>& columns,
                                const char* owner_column, store::Value owner, std::int64_t before,
                                std::size_t limit) {
  using Op = store::Condition::Op;
  store::Select select;
  select.table = table;
  select.columns = columns;
  select.where = {{owner_column, Op::kEq, std::move(owner)}};
  if (before > 0) select.where.push_back({"id", Op::kLt, before});
  select.order_by = "id DESC";
  select.limit = limit;
  return select;
}

store::Select TradePageSelect(const std::string& gpu, std::int64_t before, std::size_t limit) {
  return HistoryPageSelect("market_trades", TradeColumns(), "gpu", gpu, before, limit);
}

}  // namespace gpuhub::engine
