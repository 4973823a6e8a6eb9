#include "agent/protocol.h"

#include <nlohmann/json.hpp>
#include <set>

#include "agent/limits.h"
#include "agent/storage.h"
#include "agent/volumes.h"

namespace gpuhub::agent {
namespace {

using json = nlohmann::json;

Status Bad(const std::string& what) {
  return Status::InvalidArgument("the server's answer is not understood: " + what);
}

json VolumesJson(const std::vector<VolumeSpec>& volumes) {
  json list = json::array();
  for (const auto& v : volumes) list.push_back({{"name", v.name}, {"slot", v.slot}});
  return list;
}

Result<std::vector<VolumeSpec>> VolumesFrom(const json& j, const std::string& what) {
  std::vector<VolumeSpec> out;
  if (j.is_null()) return out;
  if (!j.is_array() || j.size() > kMaxVolumesPerWorkload) return Bad("volumes of " + what);
  for (const auto& v : j) {
    if (!v.is_object()) return Bad("volumes of " + what);
    VolumeSpec spec{v.at("name").get<std::string>(), v.at("slot").get<int>()};
    GPUHUB_RETURN_IF_ERROR(ValidateVolumeName(spec.name));
    if (spec.slot < 0 || spec.slot >= static_cast<int>(kMaxVolumesPerWorkload)) {
      return Bad("volume slot of " + what);
    }
    out.push_back(std::move(spec));
  }
  return out;
}

// The network volumes of a workload (absent or null: none). `key_required`: an answer of the
// server carries each client's key; the desired-state cache never does.
Result<std::vector<NetworkVolumeSpec>> NetworkVolumesFrom(const json& j, const std::string& what,
                                                          bool key_required) {
  std::vector<NetworkVolumeSpec> out;
  if (j.is_null()) return out;
  if (!j.is_array() || j.size() > kMaxNetworkVolumesPerWorkload) {
    return Bad("network_volumes of " + what + " (at most " +
               std::to_string(kMaxNetworkVolumesPerWorkload) + ")");
  }
  std::set<std::int64_t> ids;
  std::set<std::string> mounts;
  for (const auto& v : j) {
    if (!v.is_object()) return Bad("network_volumes of " + what);
    NetworkVolumeSpec spec;
    spec.id = v.at("id").get<std::int64_t>();
    spec.name = v.at("name").get<std::string>();
    spec.mount = v.at("mount").get<std::string>();
    spec.monitors = v.at("monitors").get<std::string>();
    spec.path = v.at("path").get<std::string>();
    spec.client = v.at("client").get<std::string>();
    spec.key = key_required ? v.at("key").get<std::string>() : v.value("key", "");
    spec.read_only = v.value("read_only", false);
    Status valid = ValidateNetworkVolume(spec, key_required);
    if (!valid.ok()) return Bad(valid.message() + " of " + what);
    if (!ids.insert(spec.id).second || !mounts.insert(spec.mount).second) {
      return Bad("network volume " + std::to_string(spec.id) + " of " + what +
                 ": its id or mount appears twice");
    }
    out.push_back(std::move(spec));
  }
  return out;
}

// Without the key (this is what the desired-state cache keeps).
json NetworkVolumesJson(const std::vector<NetworkVolumeSpec>& volumes) {
  json list = json::array();
  for (const auto& v : volumes) {
    list.push_back({{"id", v.id},
                    {"name", v.name},
                    {"mount", v.mount},
                    {"monitors", v.monitors},
                    {"path", v.path},
                    {"client", v.client},
                    {"read_only", v.read_only}});
  }
  return list;
}

json SpecJson(const WorkloadSpec& w) {
  return {{"id", w.id},
          {"image", w.image},
          {"gpu_uuids", w.gpu_uuids},
          {"ssh_authorized_keys", w.ssh_keys},
          {"not_after", FormatTimestamp(w.not_after)},
          {"cpus", w.cpus},
          {"memory_gb", w.memory_gb},
          {"volumes", VolumesJson(w.volumes)},
          {"ports", w.ports},
          {"port_range", {w.port_first, w.port_last}},
          {"network_volumes", NetworkVolumesJson(w.network_volumes)}};
}

Result<WorkloadSpec> SpecFrom(const json& j, bool from_cache = false) {
  if (!j.is_object()) return Bad("a workload is not an object");
  WorkloadSpec w;
  try {
    w.id = j.at("id").get<std::string>();
    w.image = j.at("image").get<std::string>();
    w.gpu_uuids = j.at("gpu_uuids").get<std::vector<std::string>>();
    w.ssh_keys = j.value("ssh_authorized_keys", std::vector<std::string>{});
    w.cpus = j.value("cpus", std::int64_t{0});
    w.memory_gb = j.value("memory_gb", std::int64_t{0});
    auto t = ParseTimestamp(j.at("not_after").get<std::string>());
    if (!t.ok()) return Bad("not_after of " + w.id);
    w.not_after = *t;
    GPUHUB_ASSIGN_OR_RETURN(w.volumes, VolumesFrom(j.value("volumes", json()), w.id));
    GPUHUB_ASSIGN_OR_RETURN(w.network_volumes,
                            NetworkVolumesFrom(j.value("network_volumes", json()), w.id,
                                               !from_cache));
    w.ports = j.value("ports", std::vector<int>{});
    if (j.contains("port_range") && j["port_range"].is_array() && j["port_range"].size() == 2) {
      w.port_first = j["port_range"][0].get<int>();
      w.port_last = j["port_range"][1].get<int>();
    }
    if (j.contains("registry_auth") && j["registry_auth"].is_object()) {
      const json& a = j["registry_auth"];
      w.registry_auth = {a.value("username", ""), a.value("password", ""),
                         a.value("serveraddress", "")};
    }
  } catch (const json::exception& e) {
    return Bad(e.what());
  }
  GPUHUB_RETURN_IF_ERROR(ValidateWorkloadId(w.id));
  GPUHUB_RETURN_IF_ERROR(ValidateImage(w.image));
  if (w.ports.size() > kMaxExtraPorts) return Bad("more than 4 extra ports of " + w.id);
  for (int p : w.ports) {
    if (p < 1 || p > 65535 || p == 22) return Bad("an extra port of " + w.id);
  }
  if (!w.ports.empty() && !(w.port_first >= 1024 && w.port_first <= w.port_last &&
                            w.port_last <= 65535)) {
    return Bad("port_range of " + w.id);
  }
  for (const auto& k : w.ssh_keys) {
    if (k.find_first_of("\r\n") != std::string::npos) return Bad("an SSH key spans lines");
  }
  return w;
}

// An answer's desired workloads (at most kMaxWorkloads).
Result<std::vector<WorkloadSpec>> SpecsFrom(const json& list) {
  if (!list.is_array() || list.size() > kMaxWorkloads) return Bad("workloads");
  std::vector<WorkloadSpec> out;
  for (const auto& w : list) {
    GPUHUB_ASSIGN_OR_RETURN(WorkloadSpec spec, SpecFrom(w));
    out.push_back(std::move(spec));
  }
  return out;
}

}  // namespace

std::string EnrolBody(const std::string& token, const std::string& nonce,
                      const std::string& hostname, const std::string& version) {
  return json{{"token", token}, {"nonce", nonce}, {"hostname", hostname}, {"agent_version", version}}
      .dump();
}

Result<EnrolAnswer> ParseEnrolAnswer(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return Bad("not a JSON object");
  EnrolAnswer a;
  try {
    a.host_id = j.at("host_id").get<std::int64_t>();
    a.credential = j.at("credential").get<std::string>();
    a.kind = j.value("kind", "machine");
    if (j.contains("machine_id") && j["machine_id"].is_number_integer()) {
      a.machine_id = j["machine_id"].get<std::int64_t>();
    }
  } catch (const json::exception& e) {
    return Bad(e.what());
  }
  if (a.credential.rfind("gha_", 0) != 0) return Bad("no credential");
  return a;
}

json InventoryObject(const Inventory& inventory) {
  json gpus = json::array();
  for (const auto& g : inventory.gpus) {
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"memory_mib", g.memory_mib},
                    {"pcie_gen", g.pcie_gen},
                    {"pcie_width", g.pcie_width},
                    {"temperature_c", g.temperature_c},
                    {"utilization_pct", g.utilization_pct},
                    {"healthy", g.health.empty()},
                    {"health", g.health}});
  }
  return {{"source", inventory.source},
          {"error", inventory.error},
          {"driver_version", inventory.driver_version},
          {"cuda_version", inventory.cuda_version},
          {"ram_mib", inventory.ram_mib},
          {"vcpus", inventory.vcpus},
          {"nvme_free_gb", inventory.disk_free_gb},
          {"disk_total_gb", inventory.disk_total_gb},
          {"gpus", gpus}};
}

std::string InventoryJson(const Inventory& inventory, int indent) {
  return InventoryObject(inventory).dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string HeartbeatBody(const std::string& hostname, const std::string& public_host,
                          const std::string& version, const Inventory& inventory,
                          const std::vector<WorkloadStatus>& workloads) {
  json list = json::array();
  for (const auto& w : workloads) {
    json item = {{"id", w.id}, {"state", w.state}, {"ssh_port", w.ssh_port}, {"detail", w.detail}};
    if (!w.ports.empty()) {
      json ports = json::array();
      for (const auto& p : w.ports) ports.push_back({{"container", p.container}, {"host", p.host}});
      item["ports"] = ports;
    }
    list.push_back(item);
  }
  json body = {{"hostname", hostname},
               {"agent_version", version},
               {"inventory", InventoryObject(inventory)},
               {"workloads", list}};
  if (!public_host.empty()) body["public_host"] = public_host;
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool NewerThan(const DesiredOrder& answer, const DesiredOrder& held) {
  if (answer.epoch.empty() || answer.epoch != held.epoch) return true;
  return answer.seq > held.seq;
}

namespace {
DesiredOrder OrderFrom(const json& j) {
  DesiredOrder o;
  if (j.contains("desired_epoch") && j["desired_epoch"].is_string()) {
    o.epoch = j["desired_epoch"].get<std::string>();
  }
  if (j.contains("desired_seq") && j["desired_seq"].is_number_unsigned()) {
    o.seq = j["desired_seq"].get<std::uint64_t>();
  }
  return o;
}
}  // namespace

Result<DesiredAnswer> ParseDesiredAnswer(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return Bad("not a JSON object");
  DesiredAnswer a;
  try {
    a.changed = j.at("changed").get<bool>();
    a.version = j.at("version").get<std::string>();
    if (a.version.size() > 32) return Bad("version");
    a.wait_seconds = j.value("wait_seconds", 0);
    if (!a.changed) return a;
    auto t = ParseTimestamp(j.at("server_time").get<std::string>());
    if (!t.ok()) return Bad("server_time");
    a.server_time = *t;
    a.order = OrderFrom(j);
    GPUHUB_ASSIGN_OR_RETURN(a.workloads, SpecsFrom(j.at("workloads")));
  } catch (const json::exception& e) {
    return Bad(e.what());
  }
  return a;
}

Result<HeartbeatAnswer> ParseHeartbeatAnswer(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return Bad("not a JSON object");
  HeartbeatAnswer a;
  try {
    a.host_id = j.at("host_id").get<std::int64_t>();
    auto t = ParseTimestamp(j.at("server_time").get<std::string>());
    if (!t.ok()) return Bad("server_time");
    a.server_time = *t;
    a.heartbeat_interval =
        std::chrono::seconds(j.value("heartbeat_interval_seconds", std::int64_t{15}));
    a.usage_interval = std::chrono::seconds(j.value("usage_interval_seconds", std::int64_t{60}));
    if (j.contains("desired_version") && j["desired_version"].is_string()) {
      a.desired_version = j["desired_version"].get<std::string>();
    }
    a.order = OrderFrom(j);
    GPUHUB_ASSIGN_OR_RETURN(a.workloads, SpecsFrom(j.at("workloads")));
    if (j.contains("disk_actions") && !j["disk_actions"].is_null()) {
      const json& actions = j["disk_actions"];
      if (!actions.is_array() || actions.size() > kMaxWorkloads) return Bad("disk_actions");
      for (const auto& d : actions) {
        DiskAction action;
        action.id = d.at("id").get<std::string>();
        action.action = d.at("action").get<std::string>();
        GPUHUB_RETURN_IF_ERROR(ValidateWorkloadId(action.id));
        if (action.action != "erase" && action.action != "wipe") return Bad("disk action");
        GPUHUB_ASSIGN_OR_RETURN(action.volumes, VolumesFrom(d.at("volumes"), action.id));
        a.disk_actions.push_back(std::move(action));
      }
    }
    if (j.contains("machine") && j["machine"].is_object() &&
        j["machine"].contains("hold_reason") && j["machine"]["hold_reason"].is_string()) {
      a.hold_reason = j["machine"]["hold_reason"].get<std::string>();
    }
  } catch (const json::exception& e) {
    return Bad(e.what());
  }
  return a;
}

std::string UsageBody(const std::vector<UsageSample>& samples) {
  json list = json::array();
  for (const auto& s : samples) {
    list.push_back({{"workload_id", s.workload_id},
                    {"at", FormatTimestamp(s.at)},
                    {"gpu_utilization_pct", s.gpu_utilization_pct},
                    {"net_tx_bytes", s.net_tx_bytes}});
  }
  return json{{"samples", list}}.dump();
}

std::string ServerMessage(std::string_view body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    return j["error"]["message"].get<std::string>();
  }
  return std::string(body.substr(0, 200));
}

std::string DesiredCacheJson(const DesiredCache& cache) {
  json list = json::array();
  for (const auto& w : cache.workloads) list.push_back(SpecJson(w));
  return json{{"server_time_us", cache.server_time},
              {"local_time_us", cache.local_time},
              {"workloads", list}}
      .dump();
}

Result<DesiredCache> ParseDesiredCache(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return Bad("cache is not a JSON object");
  DesiredCache c;
  try {
    c.server_time = j.at("server_time_us").get<std::int64_t>();
    c.local_time = j.at("local_time_us").get<std::int64_t>();
    for (const auto& w : j.at("workloads")) {
      GPUHUB_ASSIGN_OR_RETURN(WorkloadSpec spec, SpecFrom(w, /*from_cache=*/true));
      c.workloads.push_back(std::move(spec));
    }
  } catch (const json::exception& e) {
    return Bad(e.what());
  }
  return c;
}

}  // namespace gpuhub::agent
