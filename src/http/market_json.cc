#include "http/market_json.h"

#include "core/strings.h"
#include "engine/agents.h"
#include "engine/market.h"
#include "http/limits.h"
#include "market/limits.h"

namespace gpuhub::http {

using market::FormatPrice;

json TimeOrNull(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }

// A machine as its provider sees it, with what its host agent reported (`agent`) and what that
// means for sales: offline_since (its agent silent: asks off the book, leases paused),
// hold_reason (why nothing is sold: the host reports fewer or other GPUs) and blocked_gpus
// (unhealthy: not sold to new leases).
json MachineJson(const engine::State& state, TimestampMicros now, const market::Machine& m,
                 int leased, market::OrderId open_ask) {
  json blocked = json::array();
  for (int i = 0; i < m.gpus; ++i) {
    if (m.blocked_mask & (1u << i)) blocked.push_back(i);
  }
  return {{"id", m.id},
          {"gpu", m.gpu},
          {"gpus", m.gpus},
          {"gpus_leased", leased},
          {"gpus_free", m.gpus - leased},
          {"region", m.region},
          {"vcpus", m.vcpus},
          {"ram_gb", m.ram_gb},
          {"disk_gb", m.disk_gb},
          {"port_range_first", m.port_range_first},
          {"port_range_last", m.port_range_last},
          {"open_ask_id", open_ask == 0 ? json(nullptr) : json(open_ask)},
          {"created_at", FormatTimestamp(m.created_at)},
          {"offline_since", TimeOrNull(m.offline_since)},
          {"hold_reason", m.hold_reason.empty() ? json(nullptr) : json(m.hold_reason)},
          {"blocked_gpus", blocked},
          {"agent", MachineAgentJson(state, m.id, now)}};
}

json AskJson(const market::Ask& a, int gpus_offered) {
  return {{"id", a.id},
          {"machine_id", a.machine_id},
          {"gpu", a.gpu},
          {"price_usd_per_gpu_hour", FormatPrice(a.price_micros)},
          {"min_gpus", a.min_gpus},
          {"available_until", FormatTimestamp(a.available_until)},
          {"status", market::AskStatusName(a.status)},
          {"gpus_offered", a.status == market::AskStatus::kOpen ? gpus_offered : 0},
          {"created_at", FormatTimestamp(a.created_at)},
          {"closed_at", TimeOrNull(a.closed_at)}};
}

// Written, not built as a tree: placing and cancelling bids are the hottest writes, and their
// answer is made on the writer thread (a perf profile of market_api_bench put the tree at a
// quarter of the writer's time).
void WriteBidMembers(JsonWriter& w, const engine::State& state, const market::Bid& b,
                     const engine::StoredImages* stored) {
  auto optional_time = [&w](TimestampMicros t) {
    if (t == 0) {
      w.Null();
    } else {
      w.String(FormatTimestamp(t));
    }
  };
  w.Key("id").Int(b.id).Key("gpu").String(b.gpu).Key("gpus").Int(b.gpus).Key("region");
  if (b.region.empty()) {
    w.Null();
  } else {
    w.String(b.region);
  }
  w.Key("market").Bool(b.is_market).Key("limit_usd_per_gpu_hour");
  if (b.is_market) {
    w.Null();
  } else {
    w.String(FormatPrice(b.limit_micros));
  }
  w.Key("time_in_force").String(market::TimeInForceName(b.time_in_force)).Key("expires_at");
  optional_time(b.expires_at);
  w.Key("currency")
      .String(CurrencyCode(b.currency))
      .Key("status")
      .String(market::BidStatusName(b.status))
      .Key("close_reason");
  if (b.close_reason == market::BidCloseReason::kNone) {
    w.Null();
  } else {
    w.String(market::BidCloseReasonName(b.close_reason));
  }
  w.Key("lease_id");
  if (b.lease_id == 0) {
    w.Null();
  } else {
    w.Int(b.lease_id);
  }
  w.Key("hold");
  if (b.status == market::BidStatus::kResting) {
    w.String(FormatMicros(b.hold_micros));
  } else {
    w.Null();
  }
  w.Key("created_at").String(FormatTimestamp(b.created_at)).Key("closed_at");
  optional_time(b.closed_at);
  w.Key("image").String(engine::BidImage(state, b.id, stored));
}

std::string BidBody(const engine::State& state, const market::Bid& b) {
  std::string out;
  JsonWriter w(out);
  w.BeginObject();
  WriteBidMembers(w, state, b);
  w.EndObject();
  return out;
}

// A lease; `connection` says how the customer reaches the machine (the agent's report), `billing`
// whether hours are billed ("running"), not yet ("provisioning": waiting for the host to run it,
// its first hour held until `start_deadline`) or not while the machine is offline or the workload
// down ("paused").
json LeaseJson(const engine::State& state, const market::Lease& l, bool as_provider,
               const engine::StoredImages* stored) {
  json indices = json::array();
  for (int i = 0; i < market::kMaxGpusPerMachine; ++i) {
    if (l.gpu_mask & (1u << i)) indices.push_back(i);
  }
  std::int64_t hour = l.HourMicros();
  std::int64_t fee = MulDivHalfEven(hour, l.fee_ppm, market::kPpm).value();
  json out = {{"id", l.id},
              {"gpu", l.gpu},
              {"gpus", l.gpus},
              {"machine_id", l.machine_id},
              {"gpu_indices", indices},
              {"price_usd_per_gpu_hour", FormatPrice(l.price_micros)},
              {"hourly_usd", FormatMicros(hour)},
              {"currency", CurrencyCode(l.currency)},
              {"status", market::LeaseStatusName(l.status)},
              {"started_at", FormatTimestamp(l.started_at)},
              {"paid_until", FormatTimestamp(l.PaidUntil())},
              {"hours_paid", l.hours_paid},
              {"charged_usd", FormatMicros(hour * l.hours_paid)},
              {"available_until", FormatTimestamp(l.window_until)},
              {"ended_at", TimeOrNull(l.ended_at)},
              {"end_reason", l.end_reason == market::LeaseEndReason::kNone
                                 ? json(nullptr)
                                 : json(market::LeaseEndReasonName(l.end_reason))},
              {"bid_id", l.bid_id},
              {"ask_id", l.ask_id},
              {"billing", l.status != market::LeaseStatus::kActive ? "ended"
                          : l.Provisioning()                       ? "provisioning"
                          : l.paused_at != 0                       ? "paused"
                                                                   : "running"},
              {"paused_at", TimeOrNull(l.paused_at)},
              {"start_deadline", l.Provisioning() ? json(FormatTimestamp(l.start_deadline))
                                                  : json(nullptr)},
              {"held", l.Provisioning() ? json(FormatMicros(l.hold_micros)) : json(nullptr)},
              {"workload_down", l.workload_down},
              {"downtime_credit_usd", FormatMicros(l.credited_micros)},
              {"image", engine::LeaseImage(state, l, stored)},
              {"connection", LeaseConnectionJson(state, l.id)},
              {"provisioning", LeaseProvisioningJson(state, l)}};
  // The extra container ports asked for, and whether a registry credential came with the order
  // (never the credential itself). A closed lease's bid is no longer in memory: none shown.
  const engine::LaunchExtras* extras = engine::BidExtras(state, l.bid_id);
  out["ports"] = extras != nullptr ? json(extras->ports) : json::array();
  out["registry_credential"] = extras != nullptr && !extras->sealed_registry_auth.empty();

  if (as_provider) {
    out["fee_usd_per_hour"] = FormatMicros(fee);
    out["net_usd_per_hour"] = FormatMicros(hour - fee);
    // Net of the downtime credits taken back from the payable.
    out["earned_usd"] = FormatMicros((hour - fee) * l.hours_paid - l.credited_provider_micros);
  }
  return out;
}

// A customer's lease with the tax its hours carry now (the hourly price is net).
json CustomerLeaseJson(const engine::Txn& txn, const market::Lease& l,
                       const engine::StoredImages* stored) {
  json out = LeaseJson(txn.state, l, false, stored);
  out["tax"] = SpotTaxJson(txn.state, l.customer_id, l.HourMicros(), txn.now);
  return out;
}

// Market data is written with JsonWriter, not built as a tree: these are the hottest public
// reads, and they run on the writer thread.
void WriteTrade(JsonWriter& w, const market::Trade& t) {
  w.BeginObject()
      .Key("id")
      .Int(t.id)
      .Key("gpu")
      .String(t.gpu)
      .Key("price_usd_per_gpu_hour")
      .String(FormatPrice(t.price_micros))
      .Key("gpus")
      .Int(t.gpus)
      .Key("maker")
      .String(market::SideName(t.maker))
      .Key("at")
      .String(FormatTimestamp(t.created_at))
      .EndObject();
}
void WriteOptionalPrice(JsonWriter& w, const std::optional<std::int64_t>& p) {
  if (p) {
    w.String(FormatPrice(*p));
  } else {
    w.Null();
  }
}

json PayoutJson(const market::Payout& p) {
  return {{"id", p.id},
          {"amount", FormatMicros(p.amount_micros)},
          {"currency", "USD"},
          {"status", market::PayoutStatusName(p.status)},
          {"created_at", FormatTimestamp(p.created_at)},
          {"updated_at", FormatTimestamp(p.updated_at)}};
}

json OffersJson(const engine::State& state, const std::vector<market::Offer>& offers) {
  json list = json::array();
  for (const auto& o : offers) {
    const bool simulated = engine::IsSimulatedHost(state, o.machine_id);
    list.push_back({{"ask_id", o.ask_id},
                    {"machine_id", o.machine_id},
                    {"gpu", o.gpu},
                    {"region", o.region},
                    {"gpus_free", o.free_gpus},
                    {"min_gpus", o.min_gpus},
                    {"price_usd_per_gpu_hour", FormatPrice(o.price_micros)},
                    {"available_until", FormatTimestamp(o.available_until)},
                    {"vcpus", o.vcpus},
                    {"ram_gb", o.ram_gb},
                    {"disk_gb", o.disk_gb},
                    // Who runs it: the machine's agent, or a simulated host (demo, tests).
                    {"host", simulated ? "simulated" : "agent"},
                    {"host_label", simulated ? json(engine::kSimulatedHostLabel) : json(nullptr)}});
  }
  return list;
}

// Lists: `?limit=N` (1..kMaxPageSize), newest first; without it, the newest kMaxPageSize.
static_assert(market::kMaxPageSize == kMaxListPageSize, "every list takes the same ?limit=");
Result<std::size_t> ListLimit(const Request& r) {
  return LimitQuery(r, "limit", market::kMaxPageSize, market::kMaxPageSize);
}

Result<Page> PageQuery(const Request& r, std::size_t default_limit) {
  GPUHUB_ASSIGN_OR_RETURN(std::size_t limit,
                          LimitQuery(r, "limit", default_limit, market::kMaxPageSize));
  Page page{limit, 0};
  if (auto it = r.query.find("cursor"); it != r.query.end()) {
    auto before = ParseInt64(it->second, "cursor");
    if (!before.ok() || *before < 1) {
      return Status::InvalidArgument("cursor must be the next_cursor of an earlier page")
          .WithField("cursor");
    }
    page.before = *before;
  }
  return page;
}

}  // namespace gpuhub::http
