#include "agent/reconcile.h"

#include <algorithm>
#include <map>

#include "agent/limits.h"
#include "core/strings.h"

namespace gpuhub::agent {

std::vector<ActualContainer> FromSummaries(const std::vector<ContainerSummary>& containers) {
  std::vector<ActualContainer> out;
  for (const auto& c : containers) {
    ActualContainer a;
    a.id = c.id;
    a.state = c.state;
    a.status = c.status;
    auto label = [&](const char* key) {
      auto it = c.labels.find(key);
      return it == c.labels.end() ? std::string() : it->second;
    };
    a.workload = label(kLabelWorkload);
    if (!ValidateWorkloadId(a.workload).ok() || c.name != ContainerName(a.workload)) {
      a.workload.clear();  // not a container this agent made as it makes them
    }
    auto port = ParseInt64(label(kLabelSshPort), "port");
    a.ssh_port = port.ok() && *port > 0 && *port < 65536 ? static_cast<int>(*port) : 0;
    a.ports = ParsePortMappings(label(kLabelPorts));
    a.volumes = label(kLabelVolumes);
    auto not_after = ParseTimestamp(label(kLabelNotAfter));
    a.label_not_after = not_after.ok() ? *not_after : 0;
    out.push_back(std::move(a));
  }
  return out;
}

Plan PlanReconcile(const ReconcileInput& input, const std::vector<ActualContainer>& actual) {
  Plan plan;
  // One container per workload: prefer a running one.
  std::map<std::string, const ActualContainer*> kept;
  for (const auto& c : actual) {
    if (c.workload.empty()) {
      plan.remove.push_back(c);
      continue;
    }
    auto [it, fresh] = kept.emplace(c.workload, &c);
    if (fresh) continue;
    if (c.state == "running" && it->second->state != "running") {
      plan.remove.push_back(*it->second);
      it->second = &c;
    } else {
      plan.remove.push_back(c);
    }
  }
  if (!input.desired_known) {
    for (const auto& [workload, c] : kept) {
      if (c->label_not_after != 0 && c->label_not_after <= input.now) plan.remove.push_back(*c);
    }
    return plan;
  }
  std::map<std::string, const WorkloadSpec*> desired;
  for (const auto& w : input.desired) desired.emplace(w.id, &w);
  for (const auto& [workload, c] : kept) {
    if (!desired.count(workload)) plan.remove.push_back(*c);
  }
  for (const auto& [id, w] : desired) {
    auto it = kept.find(id);
    if (w->not_after <= input.now) {
      if (input.expired_confirmed.count(id)) {
        if (it != kept.end()) plan.remove.push_back(*it->second);
      } else {
        plan.awaiting.push_back(id);
      }
      continue;
    }
    if (it == kept.end()) {
      plan.create.push_back(*w);
      continue;
    }
    if (it->second->volumes != NetworkVolumesLabel(w->network_volumes) ||
        input.volumes_lost.count(id)) {
      plan.remove.push_back(*it->second);
      plan.volumes_changed.push_back(id);
      continue;
    }
    const std::string& state = it->second->state;
    if (state == "running") continue;
    if (state == "restarting") {
      plan.restarting.push_back(*it->second);
    } else if (state == "paused" || state == "dead" || state == "removing") {
      plan.recreate.push_back(*it->second);
    } else {
      plan.start.push_back(*it->second);  // created, exited (stopped by someone), or unknown
    }
  }
  return plan;
}

std::chrono::milliseconds RecreateBackoff(int recreates) {
  if (recreates <= 0) return std::chrono::milliseconds(0);
  std::chrono::milliseconds delay = kRecreateBackoffFirst;
  for (int i = 1; i < recreates && delay < kRecreateBackoffMax; ++i) delay *= 2;
  return std::min(delay, kRecreateBackoffMax);
}

int PickPort(int first, int last, const std::set<int>& used) {
  for (int p = first; p <= last; ++p) {
    if (!used.count(p)) return p;
  }
  return 0;
}

void ForgetDeliveredStops(const std::vector<WorkloadStatus>& sent,
                          std::map<std::string, WorkloadStatus>* status) {
  for (const auto& st : sent) {
    if (st.state != "stopped") continue;
    auto it = status->find(st.id);
    if (it != status->end() && it->second.state == "stopped") status->erase(it);
  }
}

}  // namespace gpuhub::agent
