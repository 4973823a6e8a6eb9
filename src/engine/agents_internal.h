// Shared between agents.cc (hosts, heartbeats, machines of the spot exchange) and
// agent_rentals.cc (nodes of the term fleet). Not a public header: engine/agents.h is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/agents.h"

namespace gpuhub::engine::agents_internal {

// Agent text is trusted only as far as it is printable and short.
std::string Clean(std::string_view text);
void WriteWorkload(Txn& txn, const WorkloadRecord& w);
// A launch spec's extra container ports as stored ("8888,8000"), and back (launch_specs.cc).
std::string PortsText(const std::vector<int>& ports);
std::vector<int> PortsFromText(const std::string& text);

// ----- Term-fleet nodes (agent_rentals.cc) -----
// Whether the workload is a rental placed on the host's node (any state: the last reports of a
// rental that just ended are still taken).
bool NodeWorkloadOfHost(const State& state, const AgentHost& host, std::string_view workload_id);
// The node's card i -> host GPU binding, kept by UUID while a rental is live on the node (as
// BindListing does for a listed machine).
std::vector<std::string> BindNode(const State& state, const AgentHost& host);
// One workload per provisioning or active rental on the host's node.
std::vector<DesiredWorkload> DesiredForNode(const State& state, const AgentHost& host);
// Erase, then wipe, the local NVMe of the node's released rentals until the agent reports each
// done.
std::vector<DiskAction> DiskActionsForNode(const State& state, const AgentHost& host,
                                           TimestampMicros now);
// What a changed workload record means for its rental: running -> the instance runs (the term
// starts) with the SSH line; failed while provisioning -> refunded; erased -> recorded; wiped ->
// the rental's wipe recorded. Refusals of the rentals domain (a rental no longer live) are logged,
// never a heartbeat error.
void ApplyNodeReport(Txn& txn, const AgentHost& host, const WorkloadRecord& record);
// The node's agent was silent over [from, to): each rental that ran then gets its downtime credit
// (DowntimeCreditMicros) in its wallet, through the ledger, with a notification.
Status CreditNodeDowntime(Txn& txn, const AgentHost& host, TimestampMicros from, TimestampMicros to);

}  // namespace gpuhub::engine::agents_internal
