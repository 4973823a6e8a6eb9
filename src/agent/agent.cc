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

#include "agent/agent_internal.h"
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
using namespace agent_internal;

namespace agent_internal {

TimestampMicros WallNow() { return RealClock().NowMicros(); }

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

}  // namespace agent_internal

namespace {

std::string HostName(const AgentConfig& config) {
  if (!config.hostname.empty()) return config.hostname;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string DesiredCachePath(const std::string& state_dir) { return state_dir + "/desired.json"; }

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
  state_->volumes = std::make_unique<NetworkVolumes>(c.storage.ceph_fuse, c.storage.umount,
                                                     c.state_dir + "/volumes");
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
          ForgetDeliveredStops(statuses, &s.status);
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
