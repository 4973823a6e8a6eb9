#include "engine/agent_watch.h"

#include <cstdio>
#include <set>

#include "engine/state.h"
#include "engine/market.h"
#include "engine/rentals.h"
#include "market/limits.h"
#include "rentals/limits.h"

namespace gpuhub::engine {
namespace {

// FNV-1a, 64 bits: a version only has to tell states apart, not resist an attacker (the agent
// sends back what the server gave it).
struct Hash {
  std::uint64_t h = 1469598103934665603ULL;
  void Bytes(std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    // A separator no field holds, so ("ab", "c") and ("a", "bc") differ.
    h ^= 0xff;
    h *= 1099511628211ULL;
  }
  void Number(std::int64_t v) { Bytes(std::to_string(v)); }
};

DesiredWatch* Watch(const State& state) {
  return state.agents ? state.agents->config.watch.get() : nullptr;
}

}  // namespace

std::string DesiredVersion(const std::vector<DesiredWorkload>& workloads) {
  Hash hash;
  hash.Number(static_cast<std::int64_t>(workloads.size()));
  for (const auto& w : workloads) {
    hash.Bytes(w.id);
    hash.Bytes(w.image);
    hash.Number(static_cast<std::int64_t>(w.gpu_uuids.size()));
    for (const auto& g : w.gpu_uuids) hash.Bytes(g);
    hash.Number(static_cast<std::int64_t>(w.ssh_authorized_keys.size()));
    for (const auto& k : w.ssh_authorized_keys) hash.Bytes(k);
    hash.Number(w.not_after);
    hash.Number(w.cpus);
    hash.Number(w.memory_gb);
    hash.Number(static_cast<std::int64_t>(w.volumes.size()));
    for (const auto& v : w.volumes) {
      hash.Bytes(v.name);
      hash.Number(v.slot);
    }
    hash.Number(static_cast<std::int64_t>(w.ports.size()));
    for (int p : w.ports) hash.Number(p);
    hash.Number(w.port_range_first);
    hash.Number(w.port_range_last);
    hash.Bytes(w.sealed_registry_auth);
    hash.Number(static_cast<std::int64_t>(w.network_volumes.size()));
    for (const auto& n : w.network_volumes) {
      hash.Number(n.id);
      hash.Bytes(n.mount);
      hash.Bytes(n.monitors);
      hash.Bytes(n.path);
      hash.Bytes(n.client);
      hash.Bytes(n.sealed_key);
      hash.Number(n.read_only ? 1 : 0);
    }
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(hash.h));
  return out;
}

void NoteHostDesiredChanged(const State& state, std::int64_t host_id) {
  if (DesiredWatch* watch = Watch(state); watch != nullptr) watch->Changed(host_id);
}

void NoteMachineDesiredChanged(const State& state, std::int64_t machine_id) {
  if (Watch(state) == nullptr) return;
  if (const AgentHost* host = FindHostOfMachine(state, machine_id); host != nullptr) {
    NoteHostDesiredChanged(state, host->id);
  }
}

void NoteNodeDesiredChanged(const State& state, std::int64_t node_id) {
  if (Watch(state) == nullptr) return;
  if (const AgentHost* host = FindHostOfNode(state, node_id); host != nullptr) {
    NoteHostDesiredChanged(state, host->id);
  }
}

void NoteCustomerDesiredChanged(const State& state, std::int64_t customer_id) {
  if (Watch(state) == nullptr) return;
  std::set<std::int64_t> machines, nodes;
  for (const auto& lease : state.market->exchange.ListCustomerLeases(
           customer_id, market::kMaxActiveLeasesPerCustomer)) {
    if (lease.status == market::LeaseStatus::kActive) machines.insert(lease.machine_id);
  }
  for (const auto& rental : state.rentals->fleet.ListRentals(
           customer_id, rentals::kMaxLiveRentalsPerCustomer)) {
    nodes.insert(rental.node_id);
  }
  for (std::int64_t m : machines) NoteMachineDesiredChanged(state, m);
  for (std::int64_t n : nodes) NoteNodeDesiredChanged(state, n);
}

}  // namespace gpuhub::engine
