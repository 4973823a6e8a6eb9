// The host agents' endpoints (engine/agents.h; the agent itself is src/agent, docs/agent.md).
//
// Agents (Authorization: Bearer <host credential>; nothing else is accepted there, and a host
// credential is accepted nowhere else):
//   POST /v1/agent/enroll    {"token", "nonce"?, "hostname"?, "agent_version"?}  (no bearer)
//        -> 201 {"host_id", "kind", "machine_id", "credential", "heartbeat_interval_seconds", ...}
//   POST /v1/agent/heartbeat {"hostname", "public_host", "agent_version", "inventory": {...},
//                             "workloads": [{"id", "state", "ssh_port", "detail",
//                                            "ports": [{"container", "host"}]}]}
//        -> 200 {"host_id", "server_time", "workloads": [desired], "unknown_workloads", "machine"}
//        (a desired workload's "registry_auth" {"username", "password", "serveraddress"} is the
//        only place a customer's registry credential is ever shown: to the host that pulls)
//        (a term rental's "network_volumes" [{"id", "name", "mount", "monitors", "path",
//        "client", "key", "read_only"}] are its attached Ceph volumes: the only place a cephx
//        client's key is shown, to the host that mounts it; docs/agent.md "Network volumes")
//   GET  /v1/agent/desired?version=V&wait_seconds=N (N: 0..kMaxDesiredWaitSeconds, default 0)
//        -> 200 {"changed": true, "version", "desired_epoch", "desired_seq", "server_time",
//                "workloads"} at once when the host's desired state is not V, else as soon as it
//           leaves V, else after N seconds {"changed": false, "version": V, "wait_seconds"}
//           (desired_waiters.h; wait_seconds 0: the server did not wait, the agent waits itself)
//   POST /v1/agent/usage     {"samples": [{"workload_id", "at", "gpu_utilization_pct",
//                             "net_tx_bytes"}]} -> 200 {"recorded"}
// Providers (role provider, their own machines):
//   POST   /v1/machines/{id}/enrolment-tokens -> 201 {"token", "expires_at", "command"}
//          (Idempotency-Key is ignored: the answer is a secret and is not stored for replay)
//   GET    /v1/machines/{id}/agent            -> 200 {"machine_id", "agent"}
//   DELETE /v1/machines/{id}/agent            -> 200 {"machine_id", "agent"} (revoked)
// Admins:
//   GET    /v1/admin/hosts?limit=N            -> 200 {"hosts"}
//   POST   /v1/admin/hosts/{id}/revoke        -> 200 host
//   POST   /v1/admin/nodes/{id}/enrolment-tokens -> 201 {"token", "expires_at", "command"} (a node
//          of the term fleet; its agent provisions the node's rentals)
//   GET    /v1/admin/nodes/{id}/agent         -> 200 {"node_id", "agent"}
#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "engine/accounts.h"
#include "engine/agent_watch.h"
#include "engine/agents.h"
#include "engine/limits.h"
#include "engine/market.h"
#include "engine/rentals.h"
#include <spdlog/spdlog.h>

#include "http/api.h"
#include "http/desired_waiters.h"
#include "http/limits.h"
#include "http/registry_auth.h"
#include "market/limits.h"

namespace gpuhub::http {
namespace {

using engine::AgentHost;

json Time(TimestampMicros t) { return t == 0 ? json(nullptr) : json(FormatTimestamp(t)); }

json HostJson(const engine::State& state, const AgentHost& h, TimestampMicros now) {
  json gpus = json::array();
  for (const auto& g : h.inventory.gpus) {
    gpus.push_back({{"index", g.index},
                    {"uuid", g.uuid},
                    {"name", g.name},
                    {"memory_mib", g.memory_mib},
                    {"pcie_gen", g.pcie_gen},
                    {"pcie_width", g.pcie_width},
                    {"temperature_c", g.temperature_c},
                    {"utilization_pct", g.utilization_pct},
                    {"healthy", g.healthy},
                    {"health", g.health}});
  }
  return {{"host_id", h.id},
          {"kind", engine::HostKindName(h.kind)},
          {"status", engine::HostStatus(state, h, now)},
          {"machine_id", h.machine_id == 0 ? json(nullptr) : json(h.machine_id)},
          {"node_id", h.node_id == 0 ? json(nullptr) : json(h.node_id)},
          {"enrolled_at", Time(h.enrolled_at)},
          {"last_seen", Time(h.last_seen)},
          {"revoked_at", Time(h.revoked_at)},
          {"hostname", h.hostname},
          {"public_host", h.public_host.empty() ? json(nullptr) : json(h.public_host)},
          {"agent_version", h.agent_version},
          {"inventory",
           {{"source", h.inventory.source.empty() ? json(nullptr) : json(h.inventory.source)},
            {"error", h.inventory.error.empty() ? json(nullptr) : json(h.inventory.error)},
            {"driver_version", h.inventory.driver_version},
            {"cuda_version", h.inventory.cuda_version},
            {"ram_mib", h.inventory.ram_mib},
            {"vcpus", h.inventory.vcpus},
            {"nvme_free_gb", h.inventory.nvme_free_gb},
            {"disk_total_gb", h.inventory.disk_total_gb},
            {"gpus", gpus}}}};
}

// ----- Reading what agents send ----------------------------------------------------------------

Result<std::string> Text(const json& o, const char* field, std::size_t max_bytes) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return std::string();
  if (!it->is_string()) {
    return Status::InvalidArgument(std::string(field) + " must be a string").WithField(field);
  }
  std::string s = it->get<std::string>();
  if (s.size() > max_bytes) s.resize(max_bytes);
  return s;
}

Result<std::int64_t> Int(const json& o, const char* field, std::int64_t min, std::int64_t max) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return std::int64_t{0};
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string(field) + " must be a whole number")
        .WithField(field);
  }
  std::int64_t v = it->is_number_unsigned() && it->get<std::uint64_t>() > INT64_MAX
                       ? INT64_MAX
                       : it->get<std::int64_t>();
  if (v < min || v > max) {
    return Status::InvalidArgument(std::string(field) + " must be between " + std::to_string(min) +
                                   " and " + std::to_string(max))
        .WithField(field);
  }
  return v;
}

// Prefixes the field of a nested error: "inventory.gpus[2].uuid".
Status In(const std::string& where, Status s) {
  if (s.ok()) return s;
  std::string field = where + (s.field().empty() ? "" : "." + s.field());
  return Status(s.code(), where + ": " + s.message()).WithField(field);
}

Result<engine::GpuInventory> ParseGpu(const json& g) {
  if (!g.is_object()) return Status::InvalidArgument("must be an object");
  engine::GpuInventory out;
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t index, Int(g, "index", 0, engine::kMaxReportedGpus - 1));
  out.index = static_cast<int>(index);
  GPUHUB_ASSIGN_OR_RETURN(out.uuid, Text(g, "uuid", engine::kMaxAgentTextBytes));
  GPUHUB_ASSIGN_OR_RETURN(out.name, Text(g, "name", engine::kMaxAgentTextBytes));
  GPUHUB_ASSIGN_OR_RETURN(out.memory_mib, Int(g, "memory_mib", 0, 1LL << 40));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t gen, Int(g, "pcie_gen", 0, 64));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t width, Int(g, "pcie_width", 0, 64));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t temp, Int(g, "temperature_c", -100, 300));
  GPUHUB_ASSIGN_OR_RETURN(std::int64_t util, Int(g, "utilization_pct", 0, 100));
  out.pcie_gen = static_cast<int>(gen);
  out.pcie_width = static_cast<int>(width);
  out.temperature_c = static_cast<int>(temp);
  out.utilization_pct = static_cast<int>(util);
  auto healthy = g.find("healthy");
  if (healthy != g.end() && !healthy->is_null()) {
    if (!healthy->is_boolean()) {
      return Status::InvalidArgument("healthy must be true or false").WithField("healthy");
    }
    out.healthy = healthy->get<bool>();
  }
  auto health = g.find("health");
  if (health != g.end() && !health->is_null()) {
    if (!health->is_array() || health->size() > engine::kMaxHealthReasonsPerGpu) {
      return Status::InvalidArgument("health must be an array of at most " +
                                     std::to_string(engine::kMaxHealthReasonsPerGpu) + " strings")
          .WithField("health");
    }
    for (const auto& r : *health) {
      if (!r.is_string()) return Status::InvalidArgument("health holds strings").WithField("health");
      out.health.push_back(r.get<std::string>().substr(0, engine::kMaxAgentTextBytes));
    }
  }
  return out;
}

Result<engine::Heartbeat> ParseHeartbeat(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"hostname", "public_host",
                                                         "agent_version", "inventory",
                                                         "workloads"}));
  engine::Heartbeat hb;
  GPUHUB_ASSIGN_OR_RETURN(hb.hostname, Text(body, "hostname", engine::kMaxAgentTextBytes));
  GPUHUB_ASSIGN_OR_RETURN(hb.public_host, Text(body, "public_host", engine::kMaxPublicHostBytes + 1));
  GPUHUB_ASSIGN_OR_RETURN(hb.agent_version,
                          Text(body, "agent_version", engine::kMaxAgentTextBytes));
  auto inv = body.find("inventory");
  if (inv != body.end() && !inv->is_null()) {
    if (!inv->is_object()) {
      return Status::InvalidArgument("inventory must be an object").WithField("inventory");
    }
    engine::HostInventory& out = hb.inventory;
    auto field = [&](Status s) { return In("inventory", std::move(s)); };
    auto text = [&](const char* name, std::string* to) -> Status {
      auto v = Text(*inv, name, engine::kMaxAgentTextBytes);
      if (!v.ok()) return field(v.status());
      *to = *v;
      return Status::Ok();
    };
    auto number = [&](const char* name, std::int64_t* to) -> Status {
      auto v = Int(*inv, name, 0, 1LL << 50);
      if (!v.ok()) return field(v.status());
      *to = *v;
      return Status::Ok();
    };
    GPUHUB_RETURN_IF_ERROR(text("source", &out.source));
    GPUHUB_RETURN_IF_ERROR(text("error", &out.error));
    GPUHUB_RETURN_IF_ERROR(text("driver_version", &out.driver_version));
    GPUHUB_RETURN_IF_ERROR(text("cuda_version", &out.cuda_version));
    GPUHUB_RETURN_IF_ERROR(number("ram_mib", &out.ram_mib));
    GPUHUB_RETURN_IF_ERROR(number("vcpus", &out.vcpus));
    GPUHUB_RETURN_IF_ERROR(number("nvme_free_gb", &out.nvme_free_gb));
    GPUHUB_RETURN_IF_ERROR(number("disk_total_gb", &out.disk_total_gb));
    auto gpus = inv->find("gpus");
    if (gpus != inv->end() && !gpus->is_null()) {
      if (!gpus->is_array() || gpus->size() > engine::kMaxReportedGpus) {
        return Status::InvalidArgument("inventory.gpus must be an array of at most " +
                                       std::to_string(engine::kMaxReportedGpus) + " GPUs")
            .WithField("inventory.gpus");
      }
      for (std::size_t i = 0; i < gpus->size(); ++i) {
        auto g = ParseGpu((*gpus)[i]);
        if (!g.ok()) return In("inventory.gpus[" + std::to_string(i) + "]", g.status());
        out.gpus.push_back(std::move(g).value());
      }
    }
  }
  auto workloads = body.find("workloads");
  if (workloads != body.end() && !workloads->is_null()) {
    if (!workloads->is_array() || workloads->size() > engine::kMaxReportedWorkloads) {
      return Status::InvalidArgument("workloads must be an array of at most " +
                                     std::to_string(engine::kMaxReportedWorkloads))
          .WithField("workloads");
    }
    for (std::size_t i = 0; i < workloads->size(); ++i) {
      const json& w = (*workloads)[i];
      const std::string where = "workloads[" + std::to_string(i) + "]";
      if (!w.is_object()) return Status::InvalidArgument(where + " must be an object").WithField(where);
      engine::WorkloadReport report;
      auto id = Text(w, "id", 64);
      auto state = Text(w, "state", 32);
      auto detail = Text(w, "detail", engine::kMaxAgentTextBytes);
      auto port = Int(w, "ssh_port", 0, 65535);
      for (const Status& s : {id.status(), state.status(), detail.status(), port.status()}) {
        if (!s.ok()) return In(where, s);
      }
      report.id = *id;
      report.state = *state;
      report.detail = *detail;
      report.ssh_port = static_cast<int>(*port);
      if (auto ports = w.find("ports"); ports != w.end() && !ports->is_null()) {
        const std::string field = where + ".ports";
        auto bad = [&] {
          return Status::InvalidArgument(field + " must be at most " +
                                         std::to_string(engine::kMaxExtraPorts) +
                                         " objects {\"container\", \"host\"} of ports")
              .WithField(field);
        };
        if (!ports->is_array() || ports->size() > engine::kMaxExtraPorts) return bad();
        for (const json& p : *ports) {
          if (!p.is_object()) return bad();
          auto container = Int(p, "container", 1, 65535);
          auto host_port = Int(p, "host", 1, 65535);
          if (!container.ok() || !host_port.ok()) return bad();
          report.ports.push_back({static_cast<int>(*container), static_cast<int>(*host_port)});
        }
      }
      hb.workloads.push_back(std::move(report));
    }
  }
  return hb;
}

Result<std::vector<engine::UsageSample>> ParseUsage(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body, ParseJsonObject(r, {"samples"}));
  auto samples = body.find("samples");
  if (samples == body.end() || !samples->is_array() ||
      samples->size() > engine::kMaxUsageSamplesPerRequest) {
    return Status::InvalidArgument("samples must be an array of at most " +
                                   std::to_string(engine::kMaxUsageSamplesPerRequest))
        .WithField("samples");
  }
  std::vector<engine::UsageSample> out;
  for (std::size_t i = 0; i < samples->size(); ++i) {
    const json& s = (*samples)[i];
    const std::string where = "samples[" + std::to_string(i) + "]";
    if (!s.is_object()) return Status::InvalidArgument(where + " must be an object").WithField(where);
    engine::UsageSample sample;
    auto id = Text(s, "workload_id", 64);
    auto at = Text(s, "at", 64);
    auto util = Int(s, "gpu_utilization_pct", 0, 100);
    auto tx = Int(s, "net_tx_bytes", 0, INT64_MAX);
    for (const Status& st : {id.status(), at.status(), util.status(), tx.status()}) {
      if (!st.ok()) return In(where, st);
    }
    auto when = ParseTimestamp(*at);
    if (!when.ok()) {
      return Status::InvalidArgument(where + ".at must be an RFC 3339 time")
          .WithField(where + ".at");
    }
    sample.workload_id = *id;
    sample.at = *when;
    sample.gpu_utilization_pct = static_cast<int>(*util);
    sample.net_tx_bytes = *tx;
    out.push_back(std::move(sample));
  }
  return out;
}

json VolumesJson(const std::vector<engine::DesiredVolume>& volumes) {
  json list = json::array();
  for (const auto& v : volumes) list.push_back({{"name", v.name}, {"slot", v.slot}});
  return list;
}

// The one place a registry credential is opened: for the host that pulls the image, in its own
// answer (never logged; a credential that no longer opens, the key lost, is left out).
json DesiredJson(const ApiContext& api, const engine::DesiredWorkload& w) {
  json out = {{"id", w.id},
              {"volumes", VolumesJson(w.volumes)},
              {"image", w.image},
              {"gpu_uuids", w.gpu_uuids},
              {"ssh_authorized_keys", w.ssh_authorized_keys},
              {"not_after", FormatTimestamp(w.not_after)},
              {"cpus", w.cpus},
              {"memory_gb", w.memory_gb},
              {"ports", w.ports},
              {"port_range", {w.port_range_first, w.port_range_last}}};
  // A network volume's client key is opened here only, for the host that mounts it (never
  // logged); one that no longer opens (the key lost) is left out: the agent does not mount it.
  json network = json::array();
  for (const auto& n : w.network_volumes) {
    auto sealed = api.registry_sealer != nullptr
                      ? api.registry_sealer->Open(n.sealed_key)
                      : Result<RegistryAuth>(Status::FailedPrecondition("no registry key"));
    if (!sealed.ok()) {
      spdlog::warn("event=ceph_key_unreadable workload={} volume={} error=\"{}\"", w.id, n.id,
                   sealed.status().message());
      continue;
    }
    network.push_back({{"id", n.id},
                       {"name", n.name},
                       {"mount", n.mount},
                       {"monitors", n.monitors},
                       {"path", n.path},
                       {"client", n.client},
                       {"key", sealed->password},
                       {"read_only", n.read_only}});
  }
  out["network_volumes"] = std::move(network);
  if (!w.sealed_registry_auth.empty()) {
    auto auth = api.registry_sealer != nullptr
                    ? api.registry_sealer->Open(w.sealed_registry_auth)
                    : Result<RegistryAuth>(Status::FailedPrecondition("no registry key"));
    if (auth.ok()) {
      out["registry_auth"] = {{"username", auth->username},
                              {"password", auth->password},
                              {"serveraddress", auth->server_address}};
    } else {
      spdlog::warn("event=registry_auth_unreadable workload={} error=\"{}\"", w.id,
                   auth.status().message());
    }
  }
  return out;
}

Response MissingCredential() {
  return BearerChallenge(
      "this endpoint needs 'Authorization: Bearer <host credential>' (gpuhub agent enroll stores "
      "it on the host)");
}

// The desired state as a poll answers it when it changed (numbered: desired_waiters.h's order).
json DesiredAnswerJson(ApiContext& api, const engine::Txn& txn, const AgentHost& host,
                       const std::vector<engine::DesiredWorkload>& workloads,
                       const std::string& version) {
  json list = json::array();
  for (const auto& w : workloads) list.push_back(DesiredJson(api, w));
  return {{"host_id", host.id},
          {"changed", true},
          {"version", version},
          {"desired_epoch", api.desired_waiters ? api.desired_waiters->epoch() : ""},
          {"desired_seq", api.desired_waiters ? api.desired_waiters->NextSeq() : 0},
          {"server_time", FormatTimestamp(txn.now)},
          {"workloads", list}};
}

struct PollInput {
  std::string version;
  int wait_seconds = 0;
};

Result<PollInput> ParsePoll(const Request& r) {
  PollInput in;
  auto v = r.query.find("version");
  if (v != r.query.end()) {
    if (v->second.size() > 32 ||
        !std::all_of(v->second.begin(), v->second.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
      return Status::InvalidArgument("version must be the version of an earlier answer")
          .WithField("version");
    }
    in.version = v->second;
  }
  auto w = r.query.find("wait_seconds");
  if (w != r.query.end()) {
    auto n = ParseInt64(w->second, "wait_seconds");
    if (!n.ok() || *n < 0 || *n > kMaxDesiredWaitSeconds) {
      return Status::InvalidArgument("wait_seconds must be 0.." +
                                     std::to_string(kMaxDesiredWaitSeconds))
          .WithField("wait_seconds");
    }
    in.wait_seconds = static_cast<int>(*n);
  }
  return in;
}

// GET /v1/agent/desired: answered from the poll's own command when the state is not the agent's,
// else parked (desired_waiters.h).
void PollDesired(ApiContext& api, const Request& r, Responder respond) {
  std::string credential = r.BearerToken();
  if (credential.empty()) return respond(MissingCredential());
  std::string hash = engine::HashToken(credential);
  if (std::int64_t wait = api.agent_requests_by_host.Acquire(hash); wait > 0) {
    return respond(TooManyRequests(wait, "this host makes too many requests"));
  }
  auto input = ParsePoll(r);
  if (!input.ok()) return respond(Response::Error(input.status()));
  PollInput in = *input;
  if (api.desired_waiters == nullptr || (api.draining && api.draining())) in.wait_seconds = 0;
  struct Parked {
    std::int64_t host = 0;
    std::uint64_t ticket = 0;
  };
  auto parked = std::make_shared<Parked>();
  api.engine.Execute<Reply>(
      [&api, hash, in, parked, respond](engine::Txn& txn) -> Result<Reply> {
        GPUHUB_ASSIGN_OR_RETURN(AgentHost host, engine::AuthenticateHost(txn, hash));
        parked->host = host.id;
        auto workloads = engine::DesiredWorkloadsOf(txn.state, host, txn.now);
        std::string version = engine::DesiredVersion(workloads);
        if (version != in.version) {
          return Reply{200, DesiredAnswerJson(api, txn, host, workloads, version)};
        }
        if (in.wait_seconds > 0) {
          parked->ticket = api.desired_waiters->Park(host.id, version, in.wait_seconds, respond);
        }
        return Reply{200, {{"changed", false}, {"version", version}, {"wait_seconds", 0}}};
      },
      [&api, parked, respond](Result<Reply> reply) {
        if (parked->ticket != 0) {
          if (reply.ok()) return;  // parked: the waiters answer
          auto taken = api.desired_waiters->Withdraw(parked->host, parked->ticket);
          if (taken) (*taken)(Response::Error(reply.status()));
          return;
        }
        if (!reply.ok()) return respond(Response::Error(reply.status()));
        Response out = JsonResponse(reply->status, reply->body);
        out.headers.emplace_back("Cache-Control", "no-store");
        out.host_agent_id = parked->host;
        respond(std::move(out));
      });
}

// Runs `action` for the host whose credential the request carries (on the writer thread).
template <typename Input>
Handler AgentEndpoint(ApiContext& api, std::function<Result<Input>(const Request&)> parse,
                      std::function<Result<Reply>(engine::Txn&, const AgentHost&, const Input&)>
                          action) {
  return [&api, parse = std::move(parse), action = std::move(action)](const Request& r,
                                                                      Responder respond) {
    // Bearer only: a browser's session cookie never reaches these endpoints.
    std::string credential = r.BearerToken();
    if (credential.empty()) return respond(MissingCredential());
    std::string hash = engine::HashToken(credential);
    if (std::int64_t wait = api.agent_requests_by_host.Acquire(hash); wait > 0) {
      return respond(TooManyRequests(wait, "this host makes too many requests"));
    }
    auto input = parse(r);
    if (!input.ok()) return respond(Response::Error(input.status()));
    auto host_id = std::make_shared<std::int64_t>(0);
    api.engine.Execute<Reply>(
        [hash, input = std::move(input).value(), action, host_id](engine::Txn& txn)
            -> Result<Reply> {
          GPUHUB_ASSIGN_OR_RETURN(AgentHost host, engine::AuthenticateHost(txn, hash));
          *host_id = host.id;
          return action(txn, host, input);
        },
        [respond, host_id](Result<Reply> reply) {
          if (!reply.ok()) return respond(Response::Error(reply.status()));
          Response out = JsonResponse(reply->status, reply->body);
          out.host_agent_id = *host_id;
          respond(std::move(out));
        });
  };
}

struct EnrolInput {
  std::string token;
  std::string nonce;
  std::string hostname;
  std::string agent_version;
};

Result<EnrolInput> ParseEnrol(const Request& r) {
  GPUHUB_ASSIGN_OR_RETURN(json body,
                          ParseJsonObject(r, {"token", "nonce", "hostname", "agent_version"}));
  EnrolInput in;
  GPUHUB_ASSIGN_OR_RETURN(in.token, RequiredString(body, "token"));
  if (in.token.empty() || in.token.size() > 128) {
    return Status::InvalidArgument("token must be the enrolment token (ghe_...)").WithField("token");
  }
  GPUHUB_ASSIGN_OR_RETURN(in.nonce, Text(body, "nonce", 128));
  GPUHUB_ASSIGN_OR_RETURN(in.hostname, Text(body, "hostname", engine::kMaxAgentTextBytes));
  GPUHUB_ASSIGN_OR_RETURN(in.agent_version, Text(body, "agent_version", engine::kMaxAgentTextBytes));
  return in;
}

}  // namespace

Handler NoWaitOnStandby(ApiContext& api, Handler forwarding) {
  return [&api, forwarding = std::move(forwarding)](const Request& r, Responder respond) {
    if (api.engine.role() == engine::EngineRole::kWriter || !r.query.count("wait_seconds")) {
      return forwarding(r, std::move(respond));
    }
    auto in = ParsePoll(r);
    if (!in.ok()) return respond(Response::Error(in.status()));
    Request copy = r;
    copy.query["wait_seconds"] = "0";
    copy.target = copy.path + "?wait_seconds=0";
    if (!in->version.empty()) {
      copy.query["version"] = in->version;
      copy.target += "&version=" + in->version;  // hex: nothing to escape
    }
    forwarding(copy, std::move(respond));
  };
}

std::optional<Response> DesiredChangedAnswer(ApiContext& api, engine::Txn& txn,
                                             std::int64_t host_id, const std::string& version) {
  const AgentHost* host = engine::FindHost(txn.state, host_id);
  if (host == nullptr || host->credential_hash.empty()) {
    // Revoked while it waited: its next poll hears so.
    return DesiredWaiters::Unchanged(version, 0);
  }
  auto workloads = engine::DesiredWorkloadsOf(txn.state, *host, txn.now);
  std::string now = engine::DesiredVersion(workloads);
  if (now == version) return std::nullopt;
  Response out = JsonResponse(200, DesiredAnswerJson(api, txn, *host, workloads, now));
  out.headers.emplace_back("Cache-Control", "no-store");
  out.host_agent_id = host_id;
  return out;
}

json MachineAgentJson(const engine::State& state, std::int64_t machine_id, TimestampMicros now) {
  const AgentHost* host = engine::FindHostOfMachine(state, machine_id);
  if (host == nullptr) {
    // A simulated host (the demo, tests) sells the machine; without one nothing is sold.
    if (engine::IsSimulatedHost(state, machine_id)) {
      return {{"status", "simulated"}, {"simulated", true}, {"label", engine::kSimulatedHostLabel}};
    }
    return {{"status", "none"}};
  }
  return HostJson(state, *host, now);
}

void RegisterAgentRoutes(Router& router, ApiContext& api) {
  using engine::kRoleAdmin;
  using engine::kRoleProvider;
  using engine::Txn;
  using engine::User;

  // ----- Agents -------------------------------------------------------------------------------
  router.Add("POST", "/v1/agent/enroll", [&api](const Request& r, Responder respond) {
    if (std::int64_t wait = api.enrolments_by_address.Acquire(r.remote_address); wait > 0) {
      return respond(TooManyRequests(wait, "too many enrolment attempts from this address"));
    }
    auto in = ParseEnrol(r);
    if (!in.ok()) return respond(Response::Error(in.status()));
    // The credential is made here and handed out once; only its hash goes to the engine.
    std::string credential = engine::NewAgentCredential();
    engine::EnrolRequest request{engine::HashToken(in->token),
                                 in->nonce.empty() ? "" : engine::HashToken(in->nonce),
                                 engine::HashToken(credential), in->hostname, in->agent_version};
    api.engine.Execute<AgentHost>(
        [request](Txn& txn) { return engine::Enrol(txn, request); },
        [respond, credential](Result<AgentHost> host) {
          if (!host.ok()) return respond(Response::Error(host.status()));
          respond(JsonResponse(
              201, {{"host_id", host->id},
                    {"kind", engine::HostKindName(host->kind)},
                    {"machine_id", host->machine_id == 0 ? json(nullptr) : json(host->machine_id)},
                    {"node_id", host->node_id == 0 ? json(nullptr) : json(host->node_id)},
                    {"credential", credential},
                    {"heartbeat_interval_seconds", engine::kAgentHeartbeatIntervalSeconds},
                    {"usage_interval_seconds", engine::kAgentUsageIntervalSeconds}}));
        });
  });
  router.Add("GET", "/v1/agent/desired?version&wait_seconds",
             [&api](const Request& r, Responder respond) { PollDesired(api, r, respond); });
  router.Add("POST", "/v1/agent/heartbeat",
             AgentEndpoint<engine::Heartbeat>(
                 api, ParseHeartbeat,
                 [&api](Txn& txn, const AgentHost& host,
                        const engine::Heartbeat& hb) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(auto reply, engine::RecordHeartbeat(txn, host.id, hb));
                   json desired = json::array();
                   for (const auto& w : reply.workloads) desired.push_back(DesiredJson(api, w));
                   json disks = json::array();
                   for (const auto& d : reply.disk_actions) {
                     disks.push_back({{"id", d.id},
                                      {"action", d.action},
                                      {"volumes", VolumesJson(d.volumes)}});
                   }
                   json blocked = json::array();
                   for (int i = 0; i < market::kMaxGpusPerMachine; ++i) {
                     if (reply.condition.blocked_mask & (1u << i)) blocked.push_back(i);
                   }
                   return Reply{
                       200,
                       {{"host_id", host.id},
                        {"server_time", FormatTimestamp(txn.now)},
                        {"heartbeat_interval_seconds", engine::kAgentHeartbeatIntervalSeconds},
                        {"usage_interval_seconds", engine::kAgentUsageIntervalSeconds},
                        {"workloads", desired},
                        // Which desired state this is, and where it stands in the order of the
                        // answers that carry one (desired_waiters.h): for the agent's long-poll.
                        {"desired_version", engine::DesiredVersion(reply.workloads)},
                        {"desired_epoch",
                         api.desired_waiters ? api.desired_waiters->epoch() : ""},
                        {"desired_seq", api.desired_waiters ? api.desired_waiters->NextSeq() : 0},
                        {"disk_actions", disks},
                        {"unknown_workloads", reply.unknown_workloads},
                        {"machine",
                         {{"hold_reason", reply.condition.hold_reason.empty()
                                              ? json(nullptr)
                                              : json(reply.condition.hold_reason)},
                          {"blocked_gpus", blocked}}}}};
                 }));
  router.Add("POST", "/v1/agent/usage",
             AgentEndpoint<std::vector<engine::UsageSample>>(
                 api, ParseUsage,
                 [](Txn& txn, const AgentHost& host,
                    const std::vector<engine::UsageSample>& samples) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(std::int64_t n,
                                           engine::RecordUsage(txn, host.id, samples));
                   return Reply{200, {{"recorded", n}}};
                 }));

  // ----- Providers ----------------------------------------------------------------------------
  router.Add("POST", "/v1/machines/{id}/enrolment-tokens",
             Authenticated<std::int64_t>(
                 api, kRoleProvider, [](const Request& r) { return IdOnly(r, "machine"); },
                 [](Txn& txn, const User& me, const std::int64_t& machine) -> Result<Reply> {
                   std::string token = engine::NewEnrolmentToken();
                   GPUHUB_ASSIGN_OR_RETURN(auto t, engine::CreateMachineEnrolmentToken(
                                                       txn, me.id, machine,
                                                       engine::HashToken(token)));
                   return Reply{201,
                                {{"token", token},
                                 {"machine_id", machine},
                                 {"expires_at", FormatTimestamp(t.expires_at)},
                                 {"command", "gpuhub agent enroll --server <this server's URL> "
                                             "--token " + token}}};
                 },
                 // The answer holds the token: never stored for an Idempotency-Key replay (a
                 // retry makes another token; unused ones are capped per machine).
                 /*idempotent=*/false));
  auto own_machine = [](Txn& txn, const User& me, std::int64_t machine) -> Status {
    const market::Machine* m = txn.state.market->exchange.FindMachine(machine);
    if (m == nullptr || m->provider_id != me.id) {
      return Status::NotFound("no machine " + std::to_string(machine) + " of yours");
    }
    return Status::Ok();
  };
  router.Add("GET", "/v1/machines/{id}/agent",
             Authenticated<std::int64_t>(
                 api, kRoleProvider, [](const Request& r) { return IdParam(r, "machine"); },
                 [own_machine](Txn& txn, const User& me, const std::int64_t& machine)
                     -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(own_machine(txn, me, machine));
                   return Reply{200,
                                {{"machine_id", machine},
                                 {"agent", MachineAgentJson(txn.state, machine, txn.now)}}};
                 }));
  router.Add("DELETE", "/v1/machines/{id}/agent",
             Authenticated<std::int64_t>(
                 api, kRoleProvider, [](const Request& r) { return IdOnly(r, "machine"); },
                 [own_machine](Txn& txn, const User& me, const std::int64_t& machine)
                     -> Result<Reply> {
                   GPUHUB_RETURN_IF_ERROR(own_machine(txn, me, machine));
                   const AgentHost* host = engine::FindHostOfMachine(txn.state, machine);
                   if (host == nullptr) {
                     return Status::NotFound("machine " + std::to_string(machine) +
                                             " has no enrolled agent");
                   }
                   GPUHUB_RETURN_IF_ERROR(engine::RevokeHost(txn, host->id).status());
                   return Reply{200,
                                {{"machine_id", machine},
                                 {"agent", MachineAgentJson(txn.state, machine, txn.now)}}};
                 }));

  // ----- Admins -------------------------------------------------------------------------------
  router.Add("GET", "/v1/admin/hosts?limit",
             Authenticated<std::size_t>(
                 api, kRoleAdmin,
                 [](const Request& r) {
                   return LimitQuery(r, "limit", market::kMaxPageSize, market::kMaxPageSize);
                 },
                 [](Txn& txn, const User&, const std::size_t& limit) -> Result<Reply> {
                   json list = json::array();
                   const auto& hosts = txn.state.agents->hosts;
                   for (auto it = hosts.rbegin(); it != hosts.rend() && list.size() < limit; ++it) {
                     list.push_back(HostJson(txn.state, it->second, txn.now));
                   }
                   return Reply{200, {{"hosts", list}}};
                 }));
  router.Add("POST", "/v1/admin/nodes/{id}/enrolment-tokens",
             Authenticated<std::int64_t>(
                 api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "node"); },
                 [](Txn& txn, const User& me, const std::int64_t& node) -> Result<Reply> {
                   std::string token = engine::NewEnrolmentToken();
                   GPUHUB_ASSIGN_OR_RETURN(auto t, engine::CreateNodeEnrolmentToken(
                                                       txn, me.id, node, engine::HashToken(token)));
                   return Reply{201,
                                {{"token", token},
                                 {"node_id", node},
                                 {"expires_at", FormatTimestamp(t.expires_at)},
                                 {"command", "gpuhub agent enroll --server <this server's URL> "
                                             "--token " + token}}};
                 },
                 /*idempotent=*/false));
  router.Add("GET", "/v1/admin/nodes/{id}/agent",
             Authenticated<std::int64_t>(
                 api, kRoleAdmin, [](const Request& r) { return IdParam(r, "node"); },
                 [](Txn& txn, const User&, const std::int64_t& node) -> Result<Reply> {
                   const AgentHost* host = engine::FindHostOfNode(txn.state, node);
                   return Reply{200, {{"node_id", node},
                                      {"agent", host == nullptr ? json{{"status", "none"}}
                                                                : HostJson(txn.state, *host, txn.now)}}};
                 }));
  router.Add("POST", "/v1/admin/hosts/{id}/revoke",
             Authenticated<std::int64_t>(
                 api, kRoleAdmin, [](const Request& r) { return IdOnly(r, "host"); },
                 [](Txn& txn, const User&, const std::int64_t& id) -> Result<Reply> {
                   GPUHUB_ASSIGN_OR_RETURN(AgentHost host, engine::RevokeHost(txn, id));
                   return Reply{200, HostJson(txn.state, host, txn.now)};
                 }));
}

}  // namespace gpuhub::http
