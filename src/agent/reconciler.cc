// The agent's reconciler thread: the desired workloads against what Docker runs (reconcile.h's
// plan), acted on through the Docker Engine API; the SSH probes of new containers, the named
// volumes' sweep and the disks of released term rentals.
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "agent/agent_internal.h"
#include "agent/ssh_probe.h"
#include "core/file.h"
#include "core/strings.h"

namespace gpuhub::agent {
using namespace agent_internal;

namespace {
// The mode each network volume mount must have, by dir name: read-only only when every desired
// workload attached with that (volume, client) wants it read-only (each container's bind is
// read-only on its own workload's word).
std::map<std::string, bool> WantedReadOnly(const ReconcileInput& input) {
  std::map<std::string, bool> wanted_ro;
  for (const auto& w : input.desired) {
    if (input.expired_confirmed.count(w.id)) continue;
    for (const auto& v : w.network_volumes) {
      auto [it, fresh] = wanted_ro.emplace(NetworkVolumeDirName(v.id, v.client), v.read_only);
      if (!fresh) it->second = it->second && v.read_only;
    }
  }
  return wanted_ro;
}
}  // namespace

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
  // A container bound to a network volume whose host mount is gone or dead (ceph-fuse killed,
  // unmounted by hand) is made again on a fresh mount.
  // (The kernel's mount table, read each pass: a few kB.)
  const std::map<std::string, HostMount> mounted = s.volumes->Mounted();
  for (const auto& a : actual) {
    for (const auto& dir : DirNamesOfLabel(a.volumes)) {
      if (!mounted.count(dir) || !s.volumes->Alive(dir)) input.volumes_lost.insert(a.workload);
    }
  }
  Plan plan = PlanReconcile(input, actual);
  std::set<std::string> refit(plan.volumes_changed.begin(), plan.volumes_changed.end());

  std::set<std::string> desired_ids;
  for (const auto& w : input.desired) desired_ids.insert(w.id);
  std::map<std::string, WorkloadStatus> updates;
  std::set<std::string> stopped;
  std::set<std::string> removed_ids;
  for (const auto& a : plan.remove) {
    if (a.state == "running") (void)s.docker->Stop(a.id, kStopGraceSeconds);
    Status removed = s.docker->Remove(a.id);
    spdlog::info("event=container_removed workload={} container={} why={} ok={}", a.workload,
                 a.id.substr(0, 12),
                 input.expired_confirmed.count(a.workload) ? "not_after_passed_server_unreachable"
                 : refit.count(a.workload)                 ? "network_volumes_changed"
                 : desired_ids.count(a.workload)           ? "duplicate"
                                                           : "not_desired",
                 removed.ok());
    if (!removed.ok()) continue;
    removed_ids.insert(a.id);
    s.sweep_volumes = true;
    if (!a.workload.empty() &&
        (!desired_ids.count(a.workload) || input.expired_confirmed.count(a.workload))) {
      RemoveKeys(c.state_dir, a.workload);
      stopped.insert(a.workload);
    }
  }
  RunDiskActions(desired_ids);
  if (!mounted.empty()) {
    std::vector<ActualContainer> left;
    for (const auto& a : actual) {
      if (!removed_ids.count(a.id)) left.push_back(a);
    }
    SyncNetworkVolumes(input, left, s.volumes->Mounted());
  }
  std::set<int> used;
  for (const auto& a : actual) {
    if (a.ssh_port > 0) used.insert(a.ssh_port);
    for (const auto& p : a.ports) used.insert(p.host);
  }
  for (auto it = s.bad_ports.begin(); it != s.bad_ports.end();) {
    if (Steady::now() - it->second >= kBadPortForgetAfter) {
      it = s.bad_ports.erase(it);
    } else {
      used.insert((it++)->first);
    }
  }
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
    if (removed.ok()) removed_ids.insert(a.id);
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
    // Its network volumes, mounted on the host (once per volume and client) and bound in.
    bool volumes_ok = true;
    const auto wanted_ro = WantedReadOnly(input);
    for (const auto& v : w.network_volumes) {
      NetworkVolumeSpec mount = v;
      auto mode = wanted_ro.find(NetworkVolumeDirName(v.id, v.client));
      if (mode != wanted_ro.end()) mount.read_only = mode->second;
      auto point = s.volumes->Ensure(mount);
      if (!point.ok()) {
        fail(point.status().message());
        volumes_ok = false;
        break;
      }
      placement.network_mounts.push_back({*point, v.mount, v.read_only});
    }
    if (!volumes_ok) continue;
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
        // Which of its ports is taken Docker does not say: none of them is offered again for a
        // while, and the workload is created again at once on others. Not a failure: the port
        // range is the agent's to choose from (a failed report would end a rental's provisioning).
        const auto now = Steady::now();
        s.bad_ports[port] = now;
        for (const auto& p : placement.ports) s.bad_ports[p.host] = now;
        updates[w.id] = {w.id, "starting", 0,
                         "host port " + std::to_string(port) + " is taken here; trying another"};
        spdlog::warn("event=port_taken workload={} port={} error=\"{}\"", w.id, port,
                     started.message());
        continue;  // the next pass (reconcile_interval_ms) creates it on another port
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
    // A workload no longer desired: reported until the server has its "stopped". One whose
    // container went another way than our removal (Docker finished a removal our client gave up
    // on, someone removed it) is reported stopped once it is no longer listed; the server would
    // otherwise show it running.
    for (auto it = s.status.begin(); it != s.status.end();) {
      if (desired_ids.count(it->first) || it->second.state == "stopped") {
        ++it;
        continue;
      }
      const bool listed = std::any_of(actual.begin(), actual.end(), [&](const ActualContainer& a) {
        return a.workload == it->first;
      });
      if (!listed) {
        it->second = {it->first, "stopped", 0, ""};
        s.force = true;
        s.cv.notify_all();
      }
      ++it;
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

void Agent::SyncNetworkVolumes(const ReconcileInput& input,
                               const std::vector<ActualContainer>& left,
                               const std::map<std::string, HostMount>& mounted) {
  State& s = *state_;
  // What the desired workloads want and what the containers still there bind.
  const std::map<std::string, bool> wanted_ro = WantedReadOnly(input);
  std::set<std::string> in_use;
  for (const auto& a : left) {
    for (const auto& dir : DirNamesOfLabel(a.volumes)) in_use.insert(dir);
  }
  for (const auto& [dir, m] : mounted) {
    if (in_use.count(dir)) continue;  // never under a container: it is removed first
    auto it = wanted_ro.find(dir);
    // Wanted in its mode: kept for the create. In the other mode: remounted by the create.
    if (it != wanted_ro.end() && it->second == m.read_only) continue;
    Status off = s.volumes->Unmount(dir);
    spdlog::info("event=network_volume_released dir={} why={} ok={}{}", dir,
                 it == wanted_ro.end() ? "not_desired" : "read_only_changed", off.ok(),
                 off.ok() ? "" : " error=\"" + off.message() + "\"");
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

}  // namespace gpuhub::agent
