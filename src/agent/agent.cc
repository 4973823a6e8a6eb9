#include "agent/agent.h"

#include <sodium.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "agent/disks.h"
#include "agent/docker.h"
#include "agent/limits.h"
#include "agent/protocol.h"
#include "agent/reconcile.h"
#include "agent/ssh_probe.h"
#include "core/file.h"
#include "core/strings.h"
#include "net/http_client.h"

namespace gpuhub::agent {
namespace {

using Steady = std::chrono::steady_clock;

TimestampMicros WallNow() { return RealClock().NowMicros(); }

std::string HostName(const AgentConfig& config) {
  if (!config.hostname.empty()) return config.hostname;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string DesiredCachePath(const std::string& state_dir) { return state_dir + "/desired.json"; }

std::string KeysDir(const std::string& state_dir, const std::string& workload) {
  return state_dir + "/workloads/" + workload + "/ssh";
}

Status MakeDirs(const std::string& path, unsigned mode) {
  std::string partial;
  for (const auto& part : Split(path, '/')) {
    if (part.empty()) continue;
    partial += "/" + part;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST) {
      return Status::Unavailable(partial + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

// Writes the workload's authorized_keys when it differs from what is there (the directory is
// mounted read-only in the container; a new key of the customer reaches a running container).
Status WriteKeys(const std::string& state_dir, const WorkloadSpec& w) {
  const std::string dir = KeysDir(state_dir, w.id);
  GPUHUB_RETURN_IF_ERROR(MakeDirs(dir, 0755));
  std::string content;
  for (const auto& k : w.ssh_keys) content += k + "\n";
  const std::string path = dir + "/authorized_keys";
  auto current = ReadFile(path, 1 << 20);
  if (current.ok() && *current == content) return Status::Ok();
  return WriteFileAtomically(path, content, 0644);
}

void RemoveKeys(const std::string& state_dir, const std::string& workload) {
  const std::string dir = KeysDir(state_dir, workload);
  ::unlink((dir + "/authorized_keys").c_str());
  ::rmdir(dir.c_str());
  ::rmdir((state_dir + "/workloads/" + workload).c_str());
}

bool PortInUse(const Status& s) {
  const std::string m = ToLower(s.message());
  return m.find("port is already allocated") != std::string::npos ||
         m.find("address already in use") != std::string::npos;
}

}  // namespace

struct Agent::State {
  std::mutex mu;
  std::condition_variable cv;
  // From the reporter and the watcher (the long-poll): the newest answer's desired state.
  std::vector<WorkloadSpec> desired;
  bool desired_known = false;
  std::string desired_version;  // "" until an answer named it
  DesiredOrder desired_order;
  // Bumped by whatever the reconciler must act on at once (a new desired state from the watcher,
  // a pull or an SSH probe finished).
  std::uint64_t nudges = 0;
  bool stopping = false;  // Run is returning: the detached watcher and probes end
  // SSH probes of containers just started (ssh_probe.h), by workload: "starting" until done.
  struct SshProbe {
    std::string container;
    bool done = false;
    bool answered = false;
  };
  std::map<std::string, std::shared_ptr<SshProbe>> probes;
  // Asked in the last answer only (never cached: a disk is erased on the server's word of now).
  std::vector<DiskAction> disk_actions;
  TimestampMicros offset = 0;  // server clock - host clock
  std::uint64_t attempts = 0;  // heartbeats finished
  bool last_ok = false;
  bool force = false;
  std::chrono::milliseconds heartbeat_interval = kDefaultHeartbeatInterval;
  std::chrono::milliseconds usage_interval = kDefaultUsageInterval;
  Inventory inventory;
  // From the reconciler.
  std::map<std::string, WorkloadStatus> status;
  // Disk actions done (or failed), reported as the workload's state while the server asks.
  std::map<std::string, WorkloadStatus> disk_status;
  std::vector<ActualContainer> actual;
  std::map<std::string, std::string> gpus_of;  // container id -> GPU UUIDs label
  // Reconciler only.
  std::unique_ptr<DockerClient> docker;
  Steady::time_point docker_retry{};
  std::map<std::string, std::uint64_t> expired_asked;  // workload -> attempts when asked
  struct Pull {
    bool done = false;
    Status result;
  };
  std::map<std::string, std::shared_ptr<Pull>> pulls;  // by image; `done`/`result` under mu
  struct Retry {
    Steady::time_point next{};
    std::chrono::milliseconds delay{0};
  };
  std::map<std::string, Retry> retries;
  // Recreates of containers Docker will not start (paused, dead, removing), by workload.
  struct Recreate {
    int count = 0;
    Steady::time_point last{};
    Steady::time_point next{};
  };
  std::map<std::string, Recreate> recreates;
  // Named volumes are left by a container's removal: swept (the unused ones of ours) after a
  // removal and once per Docker connection.
  bool sweep_volumes = false;
  std::set<int> bad_ports;
  std::unique_ptr<LuksVolumes> luks;
  std::unique_ptr<InstanceDisks> disks;
};

namespace {

// Takes an answer's desired state unless a newer one is held (protocol.h: DesiredOrder). Under
// s.mu. True when taken.
bool TakeDesired(Agent::State& s, const std::vector<WorkloadSpec>& workloads,
                 const std::string& version, const DesiredOrder& order) {
  if (s.desired_known && !NewerThan(order, s.desired_order)) return false;
  s.desired = workloads;
  s.desired_known = true;
  s.desired_version = version;
  s.desired_order = order;
  return true;
}

void SaveDesired(const std::string& state_dir, const DesiredCache& cache) {
  Status saved = WriteFileAtomically(DesiredCachePath(state_dir), DesiredCacheJson(cache), 0600);
  if (!saved.ok()) spdlog::warn("event=agent_cache_write error=\"{}\"", saved.message());
}

struct WatchOptions {
  std::string server;
  std::string credential;
  std::string ca_file;
  std::string state_dir;
  int wait_seconds = 0;
};

// The watcher: one long-poll of GET /v1/agent/desired open at a time, again at once after each
// answer; a new desired state is handed to the reconciler at once. Detached (a poll may block for
// its whole wait): it holds only shared state and ends at the first answer after s.stopping.
void WatchDesired(std::shared_ptr<Agent::State> shared, WatchOptions o) {
  Agent::State& s = *shared;
  net::ClientOptions options;
  // The wait, then the ordinary answer time on top: the server answers a wait after at most it.
  options.timeout = std::chrono::seconds(o.wait_seconds) + kServerTimeout;
  options.ca_file = o.ca_file;
  options.user_agent = std::string("gpuhub-agent/") + kAgentVersion;
  auto client = net::Client::Open(o.server, options);
  if (!client.ok()) return;  // the reporter says why
  std::chrono::milliseconds backoff{0};
  bool was_ok = true;
  while (true) {
    std::string version;
    {
      // Only after a heartbeat got through: a host back from a silence is offline on the server
      // (its leases paused, so not desired) until its heartbeat says it is back; a poll answered
      // before that would remove the customers' containers.
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] { return s.stopping || (s.attempts > 0 && s.last_ok); });
      if (s.stopping) return;
      version = s.desired_version;
    }
    std::string target = "/v1/agent/desired?wait_seconds=" + std::to_string(o.wait_seconds);
    if (!version.empty()) target += "&version=" + version;  // hex, as the server gave it
    net::Request request;
    request.method = "GET";
    request.target = target;
    request.With("Authorization", "Bearer " + o.credential);
    auto r = (*client)->Send(request);
    const TimestampMicros local = WallNow();
    std::chrono::milliseconds pause{0};
    Result<DesiredAnswer> answer = Status::Unavailable("no answer");
    if (!r.ok()) {
      answer = r.status();
    } else if (r->status == 429) {
      auto after = ParseInt64(r->HeaderValue("Retry-After").value_or("1"), "Retry-After");
      pause = std::chrono::seconds(after.ok() ? std::clamp<std::int64_t>(*after, 1, 60) : 1);
      answer = Status::ResourceExhausted("slowed down");
    } else if (r->status != 200) {
      answer = Status::Unavailable("the server answered " + std::to_string(r->status) + ": " +
                                   ServerMessage(r->body));
    } else {
      answer = ParseDesiredAnswer(r->body);
    }
    if (answer.ok()) {
      backoff = std::chrono::milliseconds(0);
      if (!was_ok) spdlog::info("event=agent_desired_poll_ok");
      was_ok = true;
      if (answer->changed) {
        DesiredCache cache;
        bool taken = false;
        {
          std::lock_guard<std::mutex> lock(s.mu);
          taken = TakeDesired(s, answer->workloads, answer->version, answer->order);
          if (taken) {
            s.offset = answer->server_time - local;
            ++s.nudges;
            s.cv.notify_all();
            cache = {s.desired, answer->server_time, local};
          }
        }
        if (taken) {
          spdlog::info("event=agent_desired_changed version={} workloads={}", answer->version,
                       answer->workloads.size());
          SaveDesired(o.state_dir, cache);
        }
      } else if (answer->wait_seconds == 0) {
        pause = kDesiredNoWaitPause;  // the server did not wait: do not ask again at once
      }
    } else if (pause.count() == 0) {
      if (was_ok) {
        spdlog::warn("event=agent_desired_poll_failed error=\"{}\"", answer.status().message());
      }
      was_ok = false;
      backoff = backoff.count() == 0 ? kDesiredRetryFirst : std::min(backoff * 2, kDesiredRetryMax);
      pause = backoff;
    }
    if (pause.count() > 0) {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait_for(lock, pause, [&] { return s.stopping; });
    }
  }
}

}  // namespace

Agent::Agent(AgentOptions options)
    : options_(std::move(options)),
      state_(std::make_shared<State>()),
      probe_(ProbeOptions{options_.config.nvml_library, options_.config.nvidia_smi,
                          options_.config.disk_path}) {}

Agent::~Agent() = default;

Status Agent::Run(const std::atomic<bool>& stop) {
  const AgentConfig& c = options_.config;
  GPUHUB_RETURN_IF_ERROR(MakeDirs(c.state_dir, 0700));
  if (options_.credential.server.empty()) {
    return Status::InvalidArgument("no server: set server in the config or enrol again");
  }
  GPUHUB_RETURN_IF_ERROR(net::ParseUrl(options_.credential.server).status());
  if (c.public_host.empty()) {
    spdlog::warn("event=agent_no_public_host message=\"public_host is not set: customers get no "
                 "connection line\"");
  }
  // The last desired state, when the server cannot be reached at start.
  if (auto text = ReadFile(DesiredCachePath(c.state_dir), 16 << 20); text.ok()) {
    auto cache = ParseDesiredCache(*text);
    if (cache.ok()) {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->desired = cache->workloads;
      state_->desired_known = true;
      state_->offset = cache->server_time - cache->local_time;
    } else {
      spdlog::warn("event=agent_cache_unreadable error=\"{}\"", cache.status().message());
    }
  }
  state_->luks = std::make_unique<LuksVolumes>(c.storage, c.state_dir + "/keys");
  state_->disks = std::make_unique<InstanceDisks>(state_->luks.get(), c.nvme_devices,
                                                  c.state_dir + "/devices");
  if (c.heartbeat_interval_ms > 0) {
    state_->heartbeat_interval = std::chrono::milliseconds(c.heartbeat_interval_ms);
  }
  if (c.usage_interval_ms > 0) state_->usage_interval = std::chrono::milliseconds(c.usage_interval_ms);
  spdlog::info("event=agent_start version={} server={} host_id={} state_dir={}", kAgentVersion,
               options_.credential.server, options_.credential.host_id, c.state_dir);
  std::thread reporter([&] { ReporterLoop(stop); });
  if (c.desired_wait_seconds > 0) {
    std::thread(WatchDesired, state_,
                WatchOptions{options_.credential.server, options_.credential.credential,
                             c.ca_file, c.state_dir, static_cast<int>(c.desired_wait_seconds)})
        .detach();
  }
  ReconcilerLoop(stop);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    state_->cv.notify_all();
  }
  reporter.join();
  spdlog::info("event=agent_stop");
  return Status::Ok();
}

// ----- Reporter ---------------------------------------------------------------------------------

void Agent::ReporterLoop(const std::atomic<bool>& stop) {
  const AgentConfig& c = options_.config;
  State& s = *state_;
  net::ClientOptions options;
  options.timeout = kServerTimeout;
  options.ca_file = c.ca_file;
  options.user_agent = std::string("gpuhub-agent/") + kAgentVersion;
  auto client = net::Client::Open(options_.credential.server, options);
  if (!client.ok()) {
    spdlog::error("event=agent_server_url error=\"{}\"", client.status().message());
    return;
  }
  const std::string hostname = HostName(c);
  auto next_heartbeat = Steady::now();
  auto next_usage = Steady::now() + s.usage_interval;
  Steady::time_point limited_until{};
  bool was_ok = true;
  while (!stop) {
    {
      std::unique_lock<std::mutex> lock(s.mu);
      // A forced heartbeat (the reconciler asks at a not_after) waits out a 429's Retry-After.
      auto forced = [&] { return s.force && Steady::now() >= limited_until; };
      s.cv.wait_until(lock, std::min(next_heartbeat, next_usage),
                      [&] { return stop || forced(); });
      if (stop) break;
      if (!forced() && Steady::now() < next_heartbeat && Steady::now() < next_usage) continue;
    }
    bool beat = false, forced_this_time = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      forced_this_time = s.force && Steady::now() >= limited_until;
      beat = forced_this_time || Steady::now() >= next_heartbeat;
      if (beat) s.force = false;
    }
    if (beat) {
      Inventory inventory = probe_.Probe();
      std::vector<WorkloadStatus> statuses;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        for (const auto& [id, st] : s.status) {
          if (!s.disk_status.count(id)) statuses.push_back(st);
        }
        for (const auto& [id, st] : s.disk_status) statuses.push_back(st);
      }
      net::Request request = net::Request::Json(
          "POST", "/v1/agent/heartbeat",
          HeartbeatBody(hostname, c.public_host, kAgentVersion, inventory, statuses));
      request.With("Authorization", "Bearer " + options_.credential.credential);
      auto r = (*client)->Send(request);
      const TimestampMicros local = WallNow();
      Result<HeartbeatAnswer> answer = Status::Unavailable("no answer");
      if (!r.ok()) {
        answer = r.status();
      } else if (r->status != 200) {
        answer = Status::Unavailable("the server answered " + std::to_string(r->status) + ": " +
                                     ServerMessage(r->body));
      } else {
        answer = ParseHeartbeatAnswer(r->body);
      }
      if (r.ok() && r->status == 429) {
        // Slowed down, not refused: this answer says nothing about the server being reachable,
        // so it must not count as a failed attempt (that would stop paid workloads).
        auto after = ParseInt64(r->HeaderValue("Retry-After").value_or("1"), "Retry-After");
        std::lock_guard<std::mutex> lock(s.mu);
        limited_until = Steady::now() + std::chrono::seconds(
                                            after.ok() ? std::clamp<std::int64_t>(*after, 1, 60) : 1);
        next_heartbeat = limited_until;
        s.force = s.force || forced_this_time;
        continue;
      }
      DesiredCache cache;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        ++s.attempts;
        s.last_ok = answer.ok();
        if (answer.ok()) {
          // Unless the watcher brought a newer state meanwhile (read after this one).
          TakeDesired(s, answer->workloads, answer->desired_version, answer->order);
          s.disk_actions = answer->disk_actions;
          // A disk report the server no longer asks about was taken.
          for (auto it = s.disk_status.begin(); it != s.disk_status.end();) {
            bool asked = std::any_of(answer->disk_actions.begin(), answer->disk_actions.end(),
                                     [&](const DiskAction& d) { return d.id == it->first; });
            it = asked ? std::next(it) : s.disk_status.erase(it);
          }
          s.offset = answer->server_time - local;
          if (c.heartbeat_interval_ms <= 0 && answer->heartbeat_interval.count() > 0) {
            s.heartbeat_interval = answer->heartbeat_interval;
          }
          if (c.usage_interval_ms <= 0 && answer->usage_interval.count() > 0) {
            s.usage_interval = answer->usage_interval;
          }
          s.inventory = inventory;
          // A "stopped" report, once delivered, is done.
          for (const auto& st : statuses) {
            auto it = s.status.find(st.id);
            if (it != s.status.end() && it->second.state == "stopped") s.status.erase(it);
          }
          cache = {s.desired, answer->server_time, local};
        }
        s.cv.notify_all();
      }
      if (answer.ok()) {
        if (!was_ok) spdlog::info("event=agent_server_reachable");
        SaveDesired(c.state_dir, cache);
        if (!answer->hold_reason.empty()) {
          spdlog::warn("event=machine_held reason=\"{}\"", answer->hold_reason);
        }
      } else if (was_ok) {
        spdlog::warn("event=agent_server_unreachable error=\"{}\"", answer.status().message());
      }
      was_ok = answer.ok();
      std::lock_guard<std::mutex> lock(s.mu);
      next_heartbeat = Steady::now() + s.heartbeat_interval;
    }
    if (Steady::now() >= next_usage) {
      SendUsage();
      std::lock_guard<std::mutex> lock(s.mu);
      next_usage = Steady::now() + s.usage_interval;
    }
  }
}

void Agent::SendUsage() {
  State& s = *state_;
  std::vector<ActualContainer> running;
  std::map<std::string, std::string> gpus_of;
  Inventory inventory;
  TimestampMicros offset = 0;
  std::set<std::string> desired;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& a : s.actual) {
      if (a.state == "running" && !a.workload.empty()) running.push_back(a);
    }
    gpus_of = s.gpus_of;
    inventory = s.inventory;
    offset = s.offset;
  }
  if (running.empty()) return;
  auto docker = DockerClient::Connect(options_.config.docker);
  if (!docker.ok()) return;
  std::vector<UsageSample> samples;
  for (const auto& a : running) {
    auto tx = (*docker)->NetworkTxBytes(a.id);
    // Stopped since it was listed (no counters): no sample, rather than a 0 the server would
    // take for a counter reset.
    if (!tx.ok()) continue;
    int sum = 0, n = 0;
    for (const auto& uuid : Split(gpus_of[a.id], ',')) {
      for (const auto& g : inventory.gpus) {
        if (g.uuid == uuid) {
          sum += g.utilization_pct;
          ++n;
        }
      }
    }
    samples.push_back({a.workload, WallNow() + offset, n > 0 ? sum / n : 0, *tx});
  }
  if (samples.empty()) return;
  net::ClientOptions options;
  options.timeout = kServerTimeout;
  options.ca_file = options_.config.ca_file;
  auto r = net::Fetch(options_.credential.server,
                      net::Request::Json("POST", "/v1/agent/usage", UsageBody(samples))
                          .With("Authorization", "Bearer " + options_.credential.credential),
                      options);
  if (!r.ok() || r->status != 200) {
    spdlog::warn("event=agent_usage_refused error=\"{}\"",
                 r.ok() ? ServerMessage(r->body) : r.status().message());
  }
}

// ----- Reconciler -------------------------------------------------------------------------------

void Agent::ReconcilerLoop(const std::atomic<bool>& stop) {
  const auto interval = std::chrono::milliseconds(options_.config.reconcile_interval_ms);
  std::uint64_t seen = 0, nudges = 0;
  while (!stop) {
    ReconcileOnce();
    std::unique_lock<std::mutex> lock(state_->mu);
    seen = state_->attempts;
    nudges = state_->nudges;
    // A heartbeat's or a long-poll's answer, a finished pull or SSH probe: acted on at once.
    state_->cv.wait_for(lock, interval, [&] {
      return stop || state_->attempts != seen || state_->nudges != nudges;
    });
  }
}

void Agent::ReconcileOnce() {
  const AgentConfig& c = options_.config;
  State& s = *state_;
  if (!s.docker) {
    if (Steady::now() < s.docker_retry) return;
    auto docker = DockerClient::Connect(c.docker);
    if (!docker.ok()) {
      spdlog::warn("event=agent_docker_unavailable error=\"{}\"", docker.status().message());
      s.docker_retry = Steady::now() + std::chrono::seconds(5);
      return;
    }
    Status network = (*docker)->EnsureIsolatedNetwork(kNetworkName);
    if (!network.ok()) {
      spdlog::warn("event=agent_docker_network error=\"{}\"", network.message());
      s.docker_retry = Steady::now() + std::chrono::seconds(5);
      return;
    }
    s.docker = std::move(docker).value();
    s.sweep_volumes = true;  // what a crash between a removal and its sweep left
    spdlog::info("event=agent_docker api={} network={}", s.docker->api_version(), kNetworkName);
  }
  auto listed = s.docker->ListByLabel(kLabelManaged, "true");
  if (!listed.ok()) {
    spdlog::warn("event=agent_docker_list error=\"{}\"", listed.status().message());
    s.docker.reset();
    return;
  }
  std::vector<ActualContainer> actual = FromSummaries(*listed);
  std::map<std::string, std::string> gpus_of;
  for (const auto& summary : *listed) {
    auto it = summary.labels.find(kLabelGpus);
    if (it != summary.labels.end()) gpus_of[summary.id] = it->second;
  }

  ReconcileInput input;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    input.desired = s.desired;
    input.desired_known = s.desired_known;
    input.now = WallNow() + s.offset;
    // Past not_after: ask the server first; remove once an attempt made since has failed.
    std::set<std::string> expired;
    for (const auto& w : s.desired) {
      if (w.not_after > input.now) continue;
      expired.insert(w.id);
      auto it = s.expired_asked.find(w.id);
      if (it == s.expired_asked.end()) {
        s.expired_asked[w.id] = s.attempts;
        s.force = true;
      } else if (s.attempts > it->second) {
        if (!s.last_ok) {
          input.expired_confirmed.insert(w.id);
        } else {
          it->second = s.attempts;  // the server still lists it: ask again
          s.force = true;
        }
      }
    }
    for (auto it = s.expired_asked.begin(); it != s.expired_asked.end();) {
      it = expired.count(it->first) ? std::next(it) : s.expired_asked.erase(it);
    }
    if (s.force) s.cv.notify_all();
  }
  Plan plan = PlanReconcile(input, actual);

  std::set<std::string> desired_ids;
  for (const auto& w : input.desired) desired_ids.insert(w.id);
  std::map<std::string, WorkloadStatus> updates;
  std::set<std::string> stopped;
  for (const auto& a : plan.remove) {
    if (a.state == "running") (void)s.docker->Stop(a.id, kStopGraceSeconds);
    Status removed = s.docker->Remove(a.id);
    spdlog::info("event=container_removed workload={} container={} why={} ok={}", a.workload,
                 a.id.substr(0, 12),
                 input.expired_confirmed.count(a.workload) ? "not_after_passed_server_unreachable"
                 : desired_ids.count(a.workload)           ? "duplicate"
                                                           : "not_desired",
                 removed.ok());
    if (!removed.ok()) continue;
    s.sweep_volumes = true;
    if (!a.workload.empty() &&
        (!desired_ids.count(a.workload) || input.expired_confirmed.count(a.workload))) {
      RemoveKeys(c.state_dir, a.workload);
      stopped.insert(a.workload);
    }
  }
  RunDiskActions(desired_ids);
  std::set<int> used;
  for (const auto& a : actual) {
    if (a.ssh_port > 0) used.insert(a.ssh_port);
    for (const auto& p : a.ports) used.insert(p.host);
  }
  used.insert(s.bad_ports.begin(), s.bad_ports.end());
  // A container Docker will not start (moby: 409 for paused, dead, removing) is removed; the
  // create follows once Docker no longer lists it, each time later (RecreateBackoff).
  auto recreate = [&](const ActualContainer& a) {
    auto& r = s.recreates[a.workload];
    const auto now = Steady::now();
    if (now < r.next) {
      const auto wait_s = std::chrono::duration_cast<std::chrono::seconds>(r.next - now).count();
      updates[a.workload] = {a.workload, "starting", 0,
                             "Docker will not start its container (" + a.state +
                                 "): recreating it in " + std::to_string(wait_s + 1) + " s"};
      return;
    }
    Status removed = s.docker->Remove(a.id);
    ++r.count;
    r.last = now;
    r.next = now + RecreateBackoff(r.count);
    s.sweep_volumes = s.sweep_volumes || removed.ok();
    updates[a.workload] = {a.workload, "starting", 0,
                           "Docker will not start its container (" + a.state + "): recreating it"};
    spdlog::warn("event=container_recreate workload={} container={} state={} recreates={} ok={} "
                 "error=\"{}\"",
                 a.workload, a.id.substr(0, 12), a.state, r.count, removed.ok(),
                 removed.ok() ? "" : removed.message());
  };
  for (const auto& a : plan.recreate) recreate(a);
  for (const auto& a : plan.start) {
    auto& retry = s.retries[a.workload];
    if (Steady::now() < retry.next) continue;  // its last failure is still reported
    Status started = s.docker->Start(a.id);
    if (started.ok()) {
      s.retries.erase(a.workload);
      updates[a.workload] = {a.workload, "running", a.ssh_port, "", a.ports};
      StartSshProbe(a.workload, a.id, a.ssh_port, updates[a.workload]);
      spdlog::info("event=container_restarted workload={} container={} was=\"{}\"", a.workload,
                   a.id.substr(0, 12), a.status);
      continue;
    }
    if (started.code() == StatusCode::kConflict) {  // paused or removed since it was listed
      s.retries.erase(a.workload);
      recreate(a);
      continue;
    }
    retry.delay = retry.delay.count() == 0 ? kRetryFirst : std::min(retry.delay * 2, kRetryMax);
    retry.next = Steady::now() + retry.delay;
    updates[a.workload] = {a.workload, "failed", a.ssh_port, started.message().substr(0, 250),
                           a.ports};
    spdlog::warn("event=workload_failed workload={} error=\"{}\" retry_in_s={}", a.workload,
                 started.message(), retry.delay.count() / 1000);
  }
  // Exited by itself (the customer's `shutdown`, sshd killed): Docker's restart policy
  // (unless-stopped) brings it back; the agent reports it down meanwhile and does not race it.
  for (const auto& a : plan.restarting) {
    bool was = false;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      auto it = s.status.find(a.workload);
      was = it != s.status.end() && it->second.state == "restarting";
    }
    updates[a.workload] = {a.workload, "restarting", a.ssh_port,
                           "the container exited by itself (Docker: " + a.status +
                               "); Docker's restart policy brings it back",
                           a.ports};
    if (!was) {
      spdlog::warn("event=container_exited workload={} container={} docker=\"{}\"", a.workload,
                   a.id.substr(0, 12), a.status);
    }
  }
  for (const auto& a : actual) {
    if (a.workload.empty() || !desired_ids.count(a.workload) || a.state != "running") continue;
    bool removing = false;
    for (const auto& r : plan.remove) removing = removing || r.id == a.id;
    if (removing) continue;
    updates[a.workload] = {a.workload, "running", a.ssh_port, "", a.ports};
    SshProbeState(a.workload, a.id, updates[a.workload]);
    auto r = s.recreates.find(a.workload);
    if (r != s.recreates.end() && Steady::now() - r->second.last >= kRecreateForgetAfter) {
      s.recreates.erase(r);  // ran long enough since: a later recreate starts over at once
    }
    for (const auto& w : input.desired) {
      if (w.id == a.workload) {
        Status keys = WriteKeys(c.state_dir, w);
        if (!keys.ok()) spdlog::warn("event=agent_keys error=\"{}\"", keys.message());
      }
    }
  }
  for (const auto& w : plan.create) {
    auto& retry = s.retries[w.id];
    if (Steady::now() < retry.next) continue;
    auto fail = [&](const std::string& why) {
      retry.delay = retry.delay.count() == 0 ? kRetryFirst : std::min(retry.delay * 2, kRetryMax);
      retry.next = Steady::now() + retry.delay;
      updates[w.id] = {w.id, "failed", 0, why.substr(0, 250)};
      spdlog::warn("event=workload_failed workload={} error=\"{}\" retry_in_s={}", w.id, why,
                   retry.delay.count() / 1000);
    };
    if (w.gpu_uuids.empty()) {
      fail("no GPU to run on");
      continue;
    }
    auto present = s.docker->ImagePresent(w.image);
    if (!present.ok()) {
      fail(present.status().message());
      continue;
    }
    if (!*present) {
      std::shared_ptr<State::Pull> pull;
      bool done = false;
      Status result;
      {
        std::lock_guard<std::mutex> lock(s.mu);
        auto it = s.pulls.find(w.image);
        if (it != s.pulls.end()) {
          pull = it->second;
          done = pull->done;
          result = pull->result;
        }
      }
      if (!pull) {
        if (s.pulls.size() >= kMaxConcurrentPulls) {
          updates[w.id] = {w.id, "pulling", 0, "waiting for another image to finish pulling"};
          continue;
        }
        pull = std::make_shared<State::Pull>();
        {
          std::lock_guard<std::mutex> lock(s.mu);
          s.pulls[w.image] = pull;
        }
        spdlog::info("event=image_pull image={} workload={}", w.image, w.id);
        // The credential travels only in the pull's header (never logged).
        std::string auth = w.registry_auth.empty()
                               ? std::string()
                               : RegistryAuthHeader(w.registry_auth.username,
                                                    w.registry_auth.password,
                                                    w.registry_auth.server_address);
        std::thread([pull, image = w.image, auth = std::move(auth), url = c.docker,
                     shared = state_] {
          auto docker = DockerClient::Connect(url);
          Status result = docker.ok() ? (*docker)->PullImage(image, auth) : docker.status();
          std::lock_guard<std::mutex> lock(shared->mu);
          pull->done = true;
          pull->result = result;
          ++shared->nudges;
          shared->cv.notify_all();
        }).detach();
        updates[w.id] = {w.id, "pulling", 0, "pulling " + w.image};
        continue;
      }
      if (!done) {
        updates[w.id] = {w.id, "pulling", 0, "pulling " + w.image};
        continue;
      }
      {
        std::lock_guard<std::mutex> lock(s.mu);
        s.pulls.erase(w.image);
      }
      if (!result.ok()) {
        fail(result.message());
        continue;
      }
    }
    Status keys = WriteKeys(c.state_dir, w);
    if (!keys.ok()) {
      fail(keys.message());
      continue;
    }
    int port = PickPort(c.ssh_port_first, c.ssh_port_last, used);
    if (port == 0) {
      fail("no free SSH port in " + std::to_string(c.ssh_port_first) + "-" +
           std::to_string(c.ssh_port_last));
      continue;
    }
    Placement placement{port, KeysDir(c.state_dir, w.id), {}, {}};
    // The extra ports on free host ports of the listing's range (a separate range from sshd's).
    std::set<int> taken = used;
    taken.insert(port);
    bool ports_ok = true;
    for (int container_port : w.ports) {
      int host_port = PickPort(w.port_first, w.port_last, taken);
      if (host_port == 0) {
        fail("no free host port in " + std::to_string(w.port_first) + "-" +
             std::to_string(w.port_last) + " for container port " +
             std::to_string(container_port));
        ports_ok = false;
        break;
      }
      taken.insert(host_port);
      placement.ports.push_back({container_port, host_port});
    }
    if (!ports_ok) continue;
    if (!w.volumes.empty()) {
      // A term rental's encrypted local NVMe: formatted the first time, opened after that.
      auto mounts = s.disks->Prepare(w.volumes);
      if (!mounts.ok()) {
        fail(mounts.status().message());
        continue;
      }
      placement.mounts = std::move(mounts).value();
    }
    const std::string body = CreateBody(w, placement);
    auto id = s.docker->Create(ContainerName(w.id), body);
    if (!id.ok()) {
      if (id.status().code() == StatusCode::kConflict) continue;  // listed on the next pass
      fail(id.status().message());
      continue;
    }
    Status started = s.docker->Start(*id);
    if (!started.ok()) {
      // Created but not started (a missing nvidia driver, a failing prestart hook, a disk that
      // does not mount: moby answers 500): removed, its volumes swept, created again later.
      s.sweep_volumes = s.sweep_volumes || s.docker->Remove(*id).ok();
      if (PortInUse(started)) {
        // Which of its ports is taken Docker does not say: none of them is tried again.
        s.bad_ports.insert(port);
        for (const auto& p : placement.ports) s.bad_ports.insert(p.host);
      }
      fail(started.message());
      continue;
    }
    used.insert(port);
    for (const auto& p : placement.ports) used.insert(p.host);
    s.retries.erase(w.id);
    updates[w.id] = {w.id, "running", port, "", placement.ports};
    StartSshProbe(w.id, *id, port, updates[w.id]);
    spdlog::info("event=container_started workload={} container={} port={} ports={} gpus={}",
                 w.id, id->substr(0, 12), port, FormatPortMappings(placement.ports),
                 w.gpu_uuids.size());
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    // A workload's new state (pulling, starting, running, failed, stopped) is reported at once,
    // not at the next heartbeat: the customer's page follows it, and "running" is when sshd
    // answers.
    bool moved = false;
    auto set = [&](const std::string& id, const WorkloadStatus& st) {
      auto it = s.status.find(id);
      moved = moved || it == s.status.end() || it->second.state != st.state ||
              it->second.ssh_port != st.ssh_port;
      s.status[id] = st;
    };
    for (auto& [id, st] : updates) set(id, st);
    for (const auto& id : stopped) set(id, {id, "stopped", 0, ""});
    if (moved) {
      s.force = true;
      s.cv.notify_all();
    }
    // Probes of containers no longer listed as running are done with.
    for (auto it = s.probes.begin(); it != s.probes.end();) {
      auto u = updates.find(it->first);
      bool live = u != updates.end() && u->second.state == "starting";
      it = live ? std::next(it) : s.probes.erase(it);
    }
    // What is neither desired nor stopped just now is no longer reported.
    for (auto it = s.status.begin(); it != s.status.end();) {
      bool keep = desired_ids.count(it->first) || it->second.state == "stopped";
      it = keep ? std::next(it) : s.status.erase(it);
    }
    s.actual = actual;
    s.gpus_of = gpus_of;
  }
  if (s.sweep_volumes) SweepVolumes();
  std::set<std::string> keep_retry = desired_ids;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& d : s.disk_actions) keep_retry.insert("disk:" + d.id);
  }
  for (auto it = s.retries.begin(); it != s.retries.end();) {
    it = keep_retry.count(it->first) ? std::next(it) : s.retries.erase(it);
  }
  for (auto it = s.recreates.begin(); it != s.recreates.end();) {
    it = desired_ids.count(it->first) ? std::next(it) : s.recreates.erase(it);
  }
}

void Agent::SweepVolumes() {
  State& s = *state_;
  auto unused = s.docker->UnusedVolumes(kLabelManaged, "true");
  if (!unused.ok()) {
    spdlog::warn("event=agent_docker_volumes error=\"{}\"", unused.status().message());
    return;  // tried again after the next removal or reconnection
  }
  s.sweep_volumes = false;
  for (const auto& name : *unused) {
    Status removed = s.docker->RemoveVolume(name);
    // In use again (a container created meanwhile): it is not leaked, leave it.
    spdlog::info("event=volume_removed volume={} ok={}{}", name, removed.ok(),
                 removed.ok() ? "" : " error=\"" + removed.message() + "\"");
  }
}

void Agent::StartSshProbe(const std::string& workload, const std::string& container, int port,
                          WorkloadStatus& status) {
  const std::int64_t timeout_ms = options_.config.ssh_ready_timeout_ms;
  if (timeout_ms <= 0 || port <= 0) return;  // "running" at once, as configured
  State& s = *state_;
  auto probe = std::make_shared<State::SshProbe>();
  probe->container = container;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    std::size_t running = 0;
    for (const auto& [id, p] : s.probes) running += p->done ? 0 : 1;
    if (running >= kMaxSshProbes) return;  // "running" without a probe rather than a queue
    s.probes[workload] = probe;
  }
  status.state = "starting";
  status.detail = "waiting for sshd to answer on port " + std::to_string(port);
  spdlog::info("event=ssh_probe_start workload={} port={}", workload, port);
  std::thread([probe, port, timeout_ms, shared = state_, workload] {
    const auto started = Steady::now();
    const auto deadline = started + std::chrono::milliseconds(timeout_ms);
    bool answered = false;
    while (Steady::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(shared->mu);
        if (shared->stopping) return;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now());
      if (SshBannerAnswers(port, std::min(left, kSshProbeAttemptTimeout))) {
        answered = true;
        break;
      }
      std::this_thread::sleep_for(kSshProbeInterval);
    }
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - started);
    spdlog::info("event=ssh_probe_done workload={} port={} answered={} after_ms={}", workload,
                 port, answered, ms.count());
    std::lock_guard<std::mutex> lock(shared->mu);
    probe->done = true;
    probe->answered = answered;
    ++shared->nudges;
    shared->cv.notify_all();
  }).detach();
}

void Agent::SshProbeState(const std::string& workload, const std::string& container,
                          WorkloadStatus& status) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.probes.find(workload);
  if (it == s.probes.end() || it->second->container != container) return;
  if (!it->second->done) {
    status.state = "starting";
    status.detail = "waiting for sshd to answer on port " + std::to_string(status.ssh_port);
  } else if (!it->second->answered) {
    // Running all the same (an image without sshd installs it at boot): said, not hidden.
    status.detail = "sshd did not answer within " +
                    std::to_string(options_.config.ssh_ready_timeout_ms / 1000) + " s";
  }
}

void Agent::RunDiskActions(const std::set<std::string>& desired_ids) {
  State& s = *state_;
  std::vector<DiskAction> actions;
  std::map<std::string, WorkloadStatus> done;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    actions = s.disk_actions;
    done = s.disk_status;
  }
  for (const DiskAction& d : actions) {
    const std::string state = d.action == "erase" ? "erased" : "wiped";
    auto it = done.find(d.id);
    if (it != done.end() && it->second.state == state) continue;
    // Never under a running container: it must be gone (not desired) first.
    if (desired_ids.count(d.id)) continue;
    auto& retry = s.retries["disk:" + d.id];
    if (Steady::now() < retry.next) continue;
    Status result = d.action == "erase" ? s.disks->Erase(d.volumes) : s.disks->Wipe(d.volumes);
    WorkloadStatus st{d.id, state, 0, ""};
    if (result.ok()) {
      s.retries.erase("disk:" + d.id);
      spdlog::info("event=disk_{} workload={} volumes={}", state, d.id, d.volumes.size());
    } else {
      retry.delay = retry.delay.count() == 0 ? kRetryFirst : std::min(retry.delay * 2, kRetryMax);
      retry.next = Steady::now() + retry.delay;
      st.state = d.action + "_failed";
      st.detail = result.message().substr(0, 250);
      spdlog::warn("event=disk_{}_failed workload={} error=\"{}\"", d.action, d.id,
                   result.message());
    }
    std::lock_guard<std::mutex> lock(s.mu);
    s.disk_status[d.id] = st;
  }
}

// ----- Enrolment ----------------------------------------------------------------------------------

Result<CredentialFile> Enrol(const AgentConfig& config, const std::string& server,
                             const std::string& token) {
  GPUHUB_RETURN_IF_ERROR(net::ParseUrl(server).status());
  unsigned char bytes[16];
  randombytes_buf(bytes, sizeof bytes);
  char nonce[sizeof bytes * 2 + 1];
  sodium_bin2hex(nonce, sizeof nonce, bytes, sizeof bytes);
  net::ClientOptions options;
  options.timeout = kServerTimeout;
  options.ca_file = config.ca_file;
  options.user_agent = std::string("gpuhub-agent/") + kAgentVersion;
  const std::string body = EnrolBody(token, nonce, HostName(config), kAgentVersion);
  Result<net::Response> r = Status::Unavailable("not sent");
  for (int attempt = 0; attempt < 3; ++attempt) {
    // The same nonce each time: the server gives a lost answer again instead of refusing.
    r = net::Fetch(server, net::Request::Json("POST", "/v1/agent/enroll", body), options);
    if (r.ok()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1 << attempt));
  }
  if (!r.ok()) return r.status();  // net says which server and why
  if (r->status != 201) {
    return Status(r->status == 401 ? StatusCode::kUnauthenticated : StatusCode::kInvalidArgument,
                  "the server refused the enrolment (" + std::to_string(r->status) +
                      "): " + ServerMessage(r->body));
  }
  GPUHUB_ASSIGN_OR_RETURN(EnrolAnswer answer, ParseEnrolAnswer(r->body));
  CredentialFile file{server, answer.credential, answer.host_id, answer.kind, answer.machine_id};
  GPUHUB_RETURN_IF_ERROR(WriteCredential(config.state_dir, file));
  return file;
}

}  // namespace gpuhub::agent
