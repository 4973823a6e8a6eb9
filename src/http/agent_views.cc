// What the customer and the provider read of a workload as its host's agent reports it (api.h):
// a lease's connection line and provisioning steps, a rental's steps and downtime credits.
#include "core/strings.h"
#include "engine/agents.h"
#include "engine/market.h"
#include "engine/rentals.h"
#include "http/api.h"

namespace gpuhub::http {
namespace {

using engine::AgentHost;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }

}  // namespace

json LeaseConnectionJson(const engine::State& state, std::int64_t lease_id) {
  const market::Lease* lease = state.market->exchange.FindLease(lease_id);
  const engine::WorkloadRecord* w = engine::FindWorkload(state, engine::LeaseWorkloadId(lease_id));
  const AgentHost* host = w != nullptr ? engine::FindHost(state, w->host_id)
                          : lease != nullptr ? engine::FindHostOfMachine(state, lease->machine_id)
                                             : nullptr;
  if (w == nullptr) {
    const bool simulated = lease != nullptr && engine::IsSimulatedHost(state, lease->machine_id);
    if (simulated) {
      return {{"state", "simulated"},
              {"ports", json::array()},
              {"ssh", nullptr},
              {"host", nullptr},
              {"port", nullptr},
              {"user", nullptr},
              {"detail", engine::kSimulatedHostLabel},
              {"updated_at", nullptr},
              {"egress_bytes", 0}};
    }
    return {{"state", host == nullptr ? "no_agent" : "waiting"},
            {"ports", json::array()},
            {"ssh", nullptr},
            {"host", nullptr},
            {"port", nullptr},
            {"user", nullptr},
            {"detail", host == nullptr ? "the provider has not enrolled an agent on this machine"
                                       : "waiting for the host's agent to start it"},
            {"updated_at", nullptr},
            {"egress_bytes", 0}};
  }
  std::string line = host != nullptr ? engine::ConnectionLine(*host, *w) : "";
  json ports = json::array();
  if (!line.empty()) {
    for (const auto& p : w->ports) {
      ports.push_back({{"container", p.container},
                       {"host", p.host},
                       {"address", host->public_host + ":" + std::to_string(p.host)}});
    }
  }
  return {{"state", w->state},
          {"ports", ports},
          {"ssh", line.empty() ? json(nullptr) : json(line)},
          {"host", line.empty() ? json(nullptr) : json(host->public_host)},
          {"port", line.empty() ? json(nullptr) : json(w->ssh_port)},
          {"user", line.empty() ? json(nullptr) : json("root")},
          {"detail", w->detail.empty() ? json(nullptr) : json(w->detail)},
          {"updated_at", Time(w->updated_at)},
          {"egress_bytes", w->egress_bytes}};
}

namespace {
// The page's words for the agent's states.
std::string StepName(const std::string& state) {
  if (state == "running") return "ready";
  return state;  // pulling, starting, failed, stopped
}
}  // namespace

namespace {
// The steps of a workload that was ordered at `ordered_at` and ended at `ended_at` (0: not ended).
json ProvisioningJson(const engine::State& state, const std::string& workload_id,
                      TimestampMicros ordered_at, TimestampMicros ended_at, bool simulated) {
  json steps = json::array();
  const engine::WorkloadRecord* w = engine::FindWorkload(state, workload_id);
  // A demo machine's simulated host runs nothing: no steps to wait for.
  simulated = simulated && w == nullptr;
  steps.push_back({{"step", simulated ? "simulated" : "waiting_for_host"},
                   {"at", FormatTimestamp(ordered_at)}});
  if (w != nullptr) {
    auto list = w->steps;
    // After a restart only the current state is known (steps are not stored).
    if (list.empty() && !w->state.empty()) list.emplace_back(w->state, w->updated_at);
    for (const auto& [name, at] : list) {
      steps.push_back({{"step", StepName(name)}, {"at", FormatTimestamp(at)}});
    }
  }
  if (ended_at != 0) steps.push_back({{"step", "ended"}, {"at", FormatTimestamp(ended_at)}});
  const json& now = steps.back();
  return {{"step", now["step"]},
          {"since", now["at"]},
          {"detail", w == nullptr || w->detail.empty() ? json(nullptr) : json(w->detail)},
          {"steps", steps}};
}
}  // namespace

json LeaseProvisioningJson(const engine::State& state, const market::Lease& lease) {
  return ProvisioningJson(state, engine::LeaseWorkloadId(lease.id), lease.started_at,
                          lease.status != market::LeaseStatus::kActive ? lease.ended_at : 0,
                          engine::IsSimulatedHost(state, lease.machine_id));
}

json RentalProvisioningJson(const engine::State& state, const rentals::Rental& rental) {
  return ProvisioningJson(state, engine::RentalWorkloadId(rental.id), rental.created_at,
                          rental.released_at, false);
}

json RentalDowntimeJson(const engine::State& state, std::int64_t rental_id) {
  json list = json::array();
  std::int64_t total = 0;
  const rentals::Rental* r = state.rentals->fleet.FindRental(rental_id);
  for (const auto& c : engine::RentalDowntimeCredits(state, rental_id)) {
    total += c.usd_micros;
    const std::string hours = FormatMicros((c.to - c.from) / kMicrosPerSecond * 1'000'000 / 3600);
    const std::string price = r != nullptr ? FormatMicros(r->price_micros) : "?";
    const std::string term_hours =
        r != nullptr ? std::to_string(rentals::TermMicros(r->term) / kMicrosPerHour) : "?";
    list.push_back({{"from", FormatTimestamp(c.from)},
                    {"to", FormatTimestamp(c.to)},
                    {"hours", hours},
                    {"multiplier", FormatMicros(c.multiplier_ppm)},
                    {"usd", FormatMicros(c.usd_micros)},
                    {"amount", FormatMicros(c.amount_micros)},
                    {"currency", CurrencyCode(c.currency)},
                    {"formula", price + " USD / " + term_hours + " h x " + hours + " h x " +
                                    FormatMicros(c.multiplier_ppm) + " = " +
                                    FormatMicros(c.usd_micros) + " USD"}});
  }
  return {{"total_usd", FormatMicros(total)}, {"credits", list}};
}

}  // namespace gpuhub::http
