// Whether every active lease is billed up to `now`, knowing downtime (exchange.h,
// CheckLeasesPaidUp). Apart from exchange.cc: it reads only the lease records and the machines.
#include <string>

#include "market/exchange.h"

namespace gpuhub::market {

Status Exchange::CheckLeasesPaidUp(TimestampMicros now) const {
  auto fail = [](const Lease& l, const std::string& what) {
    return Status::Internal("active lease " + std::to_string(l.id) + " " + what);
  };
  for (const auto& entry : leases_) {
    const Lease& l = entry.second;
    if (l.status != LeaseStatus::kActive) continue;
    if (l.PaidUntil() > l.window_until) {
      return fail(l, "is paid until " + FormatTimestamp(l.PaidUntil()) + ", past its window (" +
                         FormatTimestamp(l.window_until) + ")");
    }
    if (l.Provisioning()) {
      // Not billed until its host runs it, and not waiting past its deadline.
      if (l.start_deadline <= now) {
        return fail(l, "is still waiting for its host after its deadline (" +
                           FormatTimestamp(l.start_deadline) + "): it was never ended");
      }
      continue;
    }
    const MachineState& machine = machines_.at(l.machine_id);
    const bool offline = machine.machine.offline_since != 0;
    if (l.paused_at == 0) {
      if (offline) {
        return fail(l, "is billed while machine " + std::to_string(l.machine_id) +
                           " is offline (since " + FormatTimestamp(machine.machine.offline_since) +
                           ")");
      }
      if (l.PaidUntil() <= now) {
        return fail(l, "is paid only until " + FormatTimestamp(l.PaidUntil()) + ", before " +
                           FormatTimestamp(now) + ": an hour was skipped");
      }
      continue;
    }
    // Paused: no hour is due while the machine (or the workload) is down (the next one is billed
    // when it is back),
    // so a paid-until in the past is expected. What must hold is that the pause began inside the
    // last paid hour (the credit covers [paused_at, PaidUntil), nothing unpaid and nothing twice)
    // and that the machine really is offline (back online, a resume bills a new hour at once).
    if (!offline && !l.workload_down) {
      return fail(l, "is paused since " + FormatTimestamp(l.paused_at) + " but machine " +
                         std::to_string(l.machine_id) +
                         " is online and its workload runs: its billing never resumed, an hour "
                         "was skipped");
    }
    if (l.paused_at > l.PaidUntil() || l.paused_at < l.PaidUntil() - kLeaseHourMicros) {
      return fail(l, "is paused since " + FormatTimestamp(l.paused_at) +
                         ", outside its last paid hour (until " + FormatTimestamp(l.PaidUntil()) +
                         "): the time between was never billed");
    }
  }
  return Status::Ok();
}

}  // namespace gpuhub::market
