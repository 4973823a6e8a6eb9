// The agents' state read back from the store at start (agents.h: LoadAgents): hosts, their GPUs,
// enrolment tokens, workloads, usage hours and the launch specs of the bids that still rest.
#include "core/strings.h"
#include "engine/agents.h"
#include "engine/agents_internal.h"

namespace gpuhub::engine {

using agents_internal::PortsFromText;

Status LoadAgents(store::Store& store, const std::vector<market::OrderId>& open_bids,
                  AgentsState& a) {
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "agent_hosts",
      {"id", "kind", "owner_id", "machine_id", "node_id", "credential_hash", "enrolled_at_us",
       "revoked_at_us", "last_seen_us", "hostname", "public_host", "agent_version",
       "inventory_source", "inventory_error", "driver_version", "cuda_version", "ram_mib", "vcpus",
       "nvme_free_gb", "bound_uuids", "disk_total_gb"},
      "id", [&](const store::Row& row) -> Status {
        AgentHost h;
        GPUHUB_ASSIGN_OR_RETURN(h.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(h.kind, row.Parsed(1, ParseHostKind));
        GPUHUB_ASSIGN_OR_RETURN(h.owner_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(h.machine_id, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(h.node_id, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(h.credential_hash, row.Text(5));
        GPUHUB_ASSIGN_OR_RETURN(h.enrolled_at, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(h.revoked_at, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(h.last_seen, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(h.hostname, row.Text(9));
        GPUHUB_ASSIGN_OR_RETURN(h.public_host, row.Text(10));
        GPUHUB_ASSIGN_OR_RETURN(h.agent_version, row.Text(11));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.source, row.Text(12));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.error, row.Text(13));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.driver_version, row.Text(14));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.cuda_version, row.Text(15));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.ram_mib, row.Int(16));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.vcpus, row.Int(17));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.nvme_free_gb, row.Int(18));
        GPUHUB_ASSIGN_OR_RETURN(std::string bound, row.Text(19));
        GPUHUB_ASSIGN_OR_RETURN(h.inventory.disk_total_gb, row.Int(20));
        for (const auto& u : Split(bound, ',')) {
          if (!u.empty()) h.bound_uuids.push_back(u);
        }
        if (!h.credential_hash.empty()) a.host_by_credential[h.credential_hash] = h.id;
        if (h.kind == HostKind::kMachine) a.host_by_machine[h.machine_id] = h.id;
        if (h.kind == HostKind::kNode) a.host_by_node[h.node_id] = h.id;
        a.next_host_id = std::max(a.next_host_id, h.id + 1);
        a.hosts.emplace(h.id, std::move(h));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "agent_gpus",
      {"host_id", "gpu_index", "uuid", "name", "memory_mib", "pcie_gen", "pcie_width", "healthy",
       "health"},
      "host_id, gpu_index", [&](const store::Row& row) -> Status {
        GpuInventory g;
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t host_id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(g.index, row.IntAs<int>(1));
        GPUHUB_ASSIGN_OR_RETURN(g.uuid, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(g.name, row.Text(3));
        GPUHUB_ASSIGN_OR_RETURN(g.memory_mib, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(g.pcie_gen, row.IntAs<int>(5));
        GPUHUB_ASSIGN_OR_RETURN(g.pcie_width, row.IntAs<int>(6));
        GPUHUB_ASSIGN_OR_RETURN(g.healthy, row.IntAs<bool>(7));
        GPUHUB_ASSIGN_OR_RETURN(std::string health, row.Text(8));
        for (const auto& r : Split(health, '\n')) {
          if (!r.empty()) g.health.push_back(r);
        }
        auto it = a.hosts.find(host_id);
        if (it == a.hosts.end()) return Status::Internal("a GPU of unknown host " + std::to_string(host_id));
        it->second.inventory.gpus.push_back(std::move(g));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "agent_enrolment_tokens",
      {"token_hash", "kind", "machine_id", "node_id", "created_by", "created_at_us",
       "expires_at_us", "used_at_us", "host_id", "nonce_hash"},
      "token_hash", [&](const store::Row& row) -> Status {
        EnrolmentToken t;
        GPUHUB_ASSIGN_OR_RETURN(t.token_hash, row.Text(0));
        GPUHUB_ASSIGN_OR_RETURN(t.kind, row.Parsed(1, ParseHostKind));
        GPUHUB_ASSIGN_OR_RETURN(t.machine_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(t.node_id, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(t.created_by, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(t.created_at, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(t.expires_at, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(t.used_at, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(t.host_id, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(t.nonce_hash, row.Text(9));
        a.tokens.emplace(t.token_hash, std::move(t));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "agent_workloads",
      {"id", "host_id", "state", "ssh_port", "detail", "updated_at_us", "egress_bytes",
       "tx_counter_bytes", "last_sample_at_us", "ports"},
      "id", [&](const store::Row& row) -> Status {
        WorkloadRecord w;
        GPUHUB_ASSIGN_OR_RETURN(w.id, row.Text(0));
        GPUHUB_ASSIGN_OR_RETURN(w.host_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(w.state, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(w.ssh_port, row.IntAs<int>(3));
        GPUHUB_ASSIGN_OR_RETURN(w.detail, row.Text(4));
        GPUHUB_ASSIGN_OR_RETURN(w.updated_at, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(w.egress_bytes, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(w.tx_counter_bytes, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(w.last_sample_at, row.Int(8));
        GPUHUB_ASSIGN_OR_RETURN(std::string ports, row.Text(9));
        w.ports = ParsePublishedPorts(ports);
        a.workloads.emplace(w.id, std::move(w));
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "agent_usage_hours",
      {"workload_id", "hour_us", "egress_bytes", "gpu_utilization_sum", "samples"},
      "workload_id, hour_us", [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::string id, row.Text(0));
        GPUHUB_ASSIGN_OR_RETURN(TimestampMicros hour, row.Int(1));
        UsageHour u;
        GPUHUB_ASSIGN_OR_RETURN(u.egress_bytes, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(u.gpu_utilization_sum, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(u.samples, row.Int(4));
        a.usage[{id, hour}] = u;
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_downtime_credits",
      {"id", "rental_id", "host_id", "customer_id", "from_us", "to_us", "multiplier_ppm",
       "usd_micros", "currency", "amount_micros", "created_at_us"},
      "id", [&](const store::Row& row) -> Status {
        RentalDowntimeCredit c;
        GPUHUB_ASSIGN_OR_RETURN(c.id, row.Int(0));
        GPUHUB_ASSIGN_OR_RETURN(c.rental_id, row.Int(1));
        GPUHUB_ASSIGN_OR_RETURN(c.host_id, row.Int(2));
        GPUHUB_ASSIGN_OR_RETURN(c.customer_id, row.Int(3));
        GPUHUB_ASSIGN_OR_RETURN(c.from, row.Int(4));
        GPUHUB_ASSIGN_OR_RETURN(c.to, row.Int(5));
        GPUHUB_ASSIGN_OR_RETURN(c.multiplier_ppm, row.Int(6));
        GPUHUB_ASSIGN_OR_RETURN(c.usd_micros, row.Int(7));
        GPUHUB_ASSIGN_OR_RETURN(c.currency, row.Parsed(8, ParseCurrency));
        GPUHUB_ASSIGN_OR_RETURN(c.amount_micros, row.Int(9));
        GPUHUB_ASSIGN_OR_RETURN(c.created_at, row.Int(10));
        a.next_downtime_credit_id = std::max(a.next_downtime_credit_id, c.id + 1);
        a.downtime_by_rental.emplace(c.rental_id, c);
        return Status::Ok();
      }));
  GPUHUB_RETURN_IF_ERROR(store.Scan(
      "rental_launch_specs", {"rental_id", "image", "ports", "registry_auth"}, "rental_id",
      [&](const store::Row& row) -> Status {
        GPUHUB_ASSIGN_OR_RETURN(std::int64_t id, row.Int(0));
        RentalLaunch l;
        GPUHUB_ASSIGN_OR_RETURN(l.image, row.Text(1));
        GPUHUB_ASSIGN_OR_RETURN(std::string ports, row.Text(2));
        GPUHUB_ASSIGN_OR_RETURN(l.extras.sealed_registry_auth, row.Text(3));
        l.extras.ports = PortsFromText(ports);
        a.launch_by_rental.emplace(id, std::move(l));
        return Status::Ok();
      }));
  // Only the open bids' specs: their number is the open market's, not the history's.
  GPUHUB_RETURN_IF_ERROR(ReadLaunchSpecs(store, open_bids, a.image_by_bid));
  for (market::OrderId bid : open_bids) {
    store::Select extras{"launch_specs", {"ports", "registry_auth"},
                         {{"bid_id", store::Condition::Op::kEq, bid}}, {}, "", 1};
    GPUHUB_RETURN_IF_ERROR(store.Query(extras, [&](const store::Row& row) -> Status {
      LaunchExtras e;
      GPUHUB_ASSIGN_OR_RETURN(std::string ports, row.Text(0));
      GPUHUB_ASSIGN_OR_RETURN(e.sealed_registry_auth, row.Text(1));
      e.ports = PortsFromText(ports);
      if (!e.ports.empty() || !e.sealed_registry_auth.empty()) a.extras_by_bid[bid] = std::move(e);
      return Status::Ok();
    }));
  }
  return Status::Ok();
}

}  // namespace gpuhub::engine
