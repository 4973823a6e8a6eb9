#include "agent/testing/fake_docker.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sched.h>

#include <cstring>

namespace gpuhub::agent::testing {
namespace {

using json = nlohmann::json;

std::string Decode(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else if (s[i] == '+') {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::map<std::string, std::string> Query(const std::string& q) {
  std::map<std::string, std::string> out;
  std::size_t start = 0;
  while (start <= q.size() && !q.empty()) {
    std::size_t end = q.find('&', start);
    std::string part = q.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::size_t eq = part.find('=');
    if (!part.empty()) out[Decode(part.substr(0, eq))] = eq == std::string::npos ? "" : Decode(part.substr(eq + 1));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

struct Reply {
  int status = 200;
  std::string body;
};

std::string Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 409: return "Conflict";
    default: return "Internal Server Error";
  }
}

std::string Message(const std::string& m) { return json{{"message", m}}.dump(); }

constexpr int kApiMinor = 41;  // Debian's docker.io 20.10.24 (moby api/common.go DefaultVersion)
constexpr const char* kServer = "Docker/20.10.24+dfsg1 (linux)";

// What `docker ps` shows as STATUS (moby container/state.go String()), without the durations.
std::string StatusWords(const FakeDocker::Container& c) {
  const std::string code = "(" + std::to_string(c.exit_code) + ")";
  if (c.state == "running") return "Up Less than a second";
  if (c.state == "paused") return "Up Less than a second (Paused)";
  if (c.state == "restarting") return "Restarting " + code + " Less than a second ago";
  if (c.state == "removing") return "Removal In Progress";
  if (c.state == "dead") return "Dead";
  if (c.state == "created") return "Created";
  return "Exited " + code + " Less than a second ago";
}

// moby daemon/daemon_unix.go parseSecurityOpt: the error, or "" (with `warning` set for the
// deprecated "key:value" form).
std::string SecurityOptError(const std::string& opt, std::string* warning) {
  if (opt == "no-new-privileges" || opt == "disable") return "";
  std::string key, value;
  if (opt.find('=') != std::string::npos) {
    key = opt.substr(0, opt.find('='));
    value = opt.substr(opt.find('=') + 1);
  } else if (opt.find(':') != std::string::npos) {
    key = opt.substr(0, opt.find(':'));
    value = opt.substr(opt.find(':') + 1);
    *warning = "Security options with `:` as a separator are deprecated and will be completely "
               "unsupported in 17.04, use `=` instead.";
  } else {
    return "invalid --security-opt 1: \"" + opt + "\"";
  }
  if (key == "label" || key == "apparmor" || key == "seccomp") return "";
  if (key == "no-new-privileges" && (value == "true" || value == "false" || value == "1" ||
                                     value == "0")) {
    return "";
  }
  return "invalid --security-opt 2: \"" + opt + "\"";
}

int AffinityCpus() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return CPU_COUNT(&set);
}

}  // namespace

FakeDocker::FakeDocker(std::string socket_path)
    : socket_path_(std::move(socket_path)), cpus_(AffinityCpus()) {}

FakeDocker::~FakeDocker() { Stop(); }

bool FakeDocker::Start() {
  ::unlink(socket_path_.c_str());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);
    return false;
  }
  listen_fd_ = fd;
  running_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return true;
}

void FakeDocker::Stop() {
  if (!running_.exchange(false)) return;
  int fd = listen_fd_.exchange(-1);
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int c : connections_) ::shutdown(c, SHUT_RDWR);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
  ::unlink(socket_path_.c_str());
}

void FakeDocker::AcceptLoop() {
  while (running_) {
    pollfd p{listen_fd_.load(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    int c = ::accept4(listen_fd_.load(), nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.insert(c);
    workers_.emplace_back([this, c] { Serve(c); });
  }
}

void FakeDocker::Serve(int fd) {
  std::string buffer;
  char chunk[16384];
  while (running_) {
    std::size_t head_end = buffer.find("\r\n\r\n");
    if (head_end == std::string::npos) {
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    std::string head = buffer.substr(0, head_end);
    std::size_t length = 0;
    {
      std::string lower;
      for (char ch : head) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
      std::size_t cl = lower.find("content-length:");
      if (cl != std::string::npos) length = std::stoul(head.substr(cl + 15));
    }
    while (buffer.size() < head_end + 4 + length) {
      ssize_t n = ::read(fd, chunk, sizeof chunk);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
    if (buffer.size() < head_end + 4 + length) break;
    std::string body = buffer.substr(head_end + 4, length);
    buffer.erase(0, head_end + 4 + length);
    std::string line = head.substr(0, head.find("\r\n"));
    std::size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    std::string response = Handle(method, target, body);
    std::size_t off = 0;
    while (off < response.size()) {
      ssize_t n = ::write(fd, response.data() + off, response.size() - off);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.erase(fd);
}

FakeDocker::Container* FakeDocker::Find(const std::string& id_or_name) {
  auto it = containers_.find(id_or_name);
  if (it != containers_.end()) return &it->second;
  for (auto& [cid, c] : containers_) {
    if (c.name == id_or_name || cid.rfind(id_or_name, 0) == 0) return &c;
  }
  return nullptr;
}

std::vector<std::string> FakeDocker::VolumesOf(const Container& c) const {
  std::vector<std::string> out;
  const json& host = c.create_body.value("HostConfig", json::object());
  for (const auto& m : host.value("Mounts", json::array())) {
    if (m.value("Type", "") == "volume") out.push_back(m.value("Source", ""));
  }
  return out;
}

bool FakeDocker::InUse(const std::string& volume) const {
  for (const auto& [id, c] : containers_) {
    for (const auto& v : VolumesOf(c)) {
      if (v == volume) return true;
    }
  }
  return false;
}

std::pair<int, std::string> FakeDocker::StartFailure(const Container& c) {
  // moby daemon/start.go containerStart: networking (ports), then the OCI spec (volume mounts,
  // device requests), then containerd/runc (the prestart hooks).
  if (failing_starts_ > 0) {
    --failing_starts_;
    return {500, "driver failed programming external connectivity on endpoint " + c.name +
                     ": Bind for 0.0.0.0:40000 failed: port is already allocated"};
  }
  const json& host = c.create_body.value("HostConfig", json::object());
  for (const auto& m : host.value("Mounts", json::array())) {
    if (m.value("Type", "") != "volume") continue;
    const std::string name = m.value("Source", "");
    auto v = volumes_.find(name);
    std::string device = v == volumes_.end() ? "" : v->second.options.value("device", "");
    for (const auto& [prefix, error] : failing_mounts_) {
      if (device.rfind(prefix, 0) != 0) continue;
      const std::string path = "/var/lib/docker/volumes/" + name + "/_data";
      // volume/mounts/mounts.go, volume/local/local_unix.go, moby/sys/mount's mountError.
      return {500, "error while mounting volume '" + path +
                       "': failed to mount local volume: mount " + device + ":" + path + ": " +
                       error};
    }
  }
  bool gpus = false;
  for (const auto& d : host.value("DeviceRequests", json::array())) {
    if (d.value("Driver", "") == "nvidia") gpus = true;
  }
  if (gpus && !nvidia_driver_) {
    // daemon/errors.go incompatibleDeviceRequest, wrapped as a system error (500) by createSpec.
    return {500, "could not select device driver \"nvidia\" with capabilities: [[gpu]]"};
  }
  if (gpus && !failing_hook_.empty()) {
    // containerd 1.6 + runc 1.1 (Debian bookworm) through translateContainerdStartErr: Unknown.
    return {500, "failed to create shim task: OCI runtime create failed: runc create failed: "
                 "unable to start container process: error during container init: error running "
                 "hook #0: error running hook: exit status 1, stdout: , stderr: " +
                     failing_hook_ + ": unknown"};
  }
  return {0, ""};
}

std::string FakeDocker::Handle(const std::string& method, const std::string& target,
                               const std::string& body) {
  std::string path = target.substr(0, target.find('?'));
  std::string query = target.find('?') == std::string::npos ? "" : target.substr(target.find('?') + 1);
  std::string version;
  if (path.rfind("/v1.", 0) == 0 && path.find('/', 1) != std::string::npos) {
    version = path.substr(2, path.find('/', 1) - 2);
    path = path.substr(path.find('/', 1));
  }
  auto q = Query(query);
  Reply reply;
  std::string extra_headers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_.push_back({method, path, query, body});
    int minor = version.empty() ? kApiMinor : std::atoi(version.c_str() + 2);
    if (minor > kApiMinor) {
      // api/server/middleware/version.go
      reply = {400, Message("client version " + version +
                            " is too new. Maximum supported API version is 1." +
                            std::to_string(kApiMinor))};
    } else if (method == "GET" && path == "/_ping") {
      reply = {200, "OK"};
      extra_headers = "Api-Version: 1." + std::to_string(kApiMinor) + "\r\n";
    } else if (method == "GET" && path == "/version") {
      reply = {200, json{{"Version", "20.10.24+dfsg1"},
                         {"ApiVersion", "1." + std::to_string(kApiMinor)},
                         {"MinAPIVersion", "1.12"},
                         {"Os", "linux"},
                         {"Arch", "amd64"}}
                        .dump()};
    } else if (method == "GET" && path == "/containers/json") {
      json filters = json::parse(q["filters"].empty() ? "{}" : q["filters"], nullptr, false);
      json list = json::array();
      for (const auto& [id, c] : containers_) {
        json labels = c.create_body.value("Labels", json::object());
        bool match = true;
        if (filters.is_object() && filters.contains("label")) {
          for (const auto& want : filters["label"]) {
            std::string s = want.get<std::string>();
            std::string k = s.substr(0, s.find('=')), v = s.substr(s.find('=') + 1);
            match = match && labels.contains(k) && labels[k] == v;
          }
        }
        if (!match) continue;
        if (q["all"] != "1" && q["all"] != "true" && c.state != "running") continue;
        list.push_back({{"Id", id},
                        {"Names", {"/" + c.name}},
                        {"Image", c.create_body.value("Image", "")},
                        {"State", c.state},
                        {"Status", StatusWords(c)},
                        {"Labels", labels}});
      }
      reply = {200, list.dump()};
    } else if (method == "GET" && path.rfind("/images/", 0) == 0 && path.size() > 13 &&
               path.substr(path.size() - 5) == "/json") {
      std::string name = path.substr(8, path.size() - 8 - 5);
      reply = images_.count(name) ? Reply{200, json{{"Id", "sha256:" + name}}.dump()}
                                  : Reply{404, Message("No such image: " + name)};
    } else if (method == "POST" && path == "/images/create") {
      std::string ref = q["fromImage"] + (q["tag"].empty() ? "" : ":" + q["tag"]);
      auto failing = failing_pulls_.find(ref);
      if (failing != failing_pulls_.end()) {
        reply = {200, "{\"status\":\"Pulling from " + q["fromImage"] + "\"}\n" +
                          json{{"errorDetail", {{"message", failing->second}}},
                               {"error", failing->second}}
                              .dump() +
                          "\n"};
      } else {
        images_.insert(ref);
        reply = {200, "{\"status\":\"Pulling from " + q["fromImage"] +
                          "\"}\n{\"status\":\"Status: Downloaded newer image for " + ref +
                          "\"}\n"};
      }
    } else if (method == "GET" && path.rfind("/networks/", 0) == 0) {
      std::string name = path.substr(10);
      reply = networks_.count(name) ? Reply{200, networks_[name].dump()}
                                    : Reply{404, Message("network " + name + " not found")};
    } else if (method == "POST" && path == "/networks/create") {
      json b = json::parse(body, nullptr, false);
      std::string name = b.is_object() ? b.value("Name", "") : "";
      if (name.empty()) {
        reply = {400, Message("no name")};
      } else if (networks_.count(name)) {
        reply = {409, Message("network with name " + name + " already exists")};
      } else {
        networks_[name] = b;
        reply = {201, json{{"Id", "net-" + name}, {"Warning", ""}}.dump()};
      }
    } else if (method == "GET" && path == "/volumes") {
      json filters = json::parse(q["filters"].empty() ? "{}" : q["filters"], nullptr, false);
      json list = json::array();
      for (const auto& [name, v] : volumes_) {
        bool match = true;
        if (filters.is_object() && filters.contains("label")) {
          for (const auto& want : filters["label"]) {
            std::string s = want.get<std::string>();
            std::string k = s.substr(0, s.find('=')), val = s.substr(s.find('=') + 1);
            match = match && v.labels.contains(k) && v.labels[k] == val;
          }
        }
        if (filters.is_object() && filters.contains("dangling")) {
          const bool dangling = filters["dangling"][0] == "true" || filters["dangling"][0] == "1";
          match = match && InUse(name) != dangling;
        }
        if (!match) continue;
        list.push_back({{"Name", name},
                        {"Driver", "local"},
                        {"Mountpoint", "/var/lib/docker/volumes/" + name + "/_data"},
                        {"Labels", v.labels},
                        {"Options", v.options},
                        {"Scope", "local"}});
      }
      reply = {200, json{{"Volumes", list}, {"Warnings", nullptr}}.dump()};
    } else if (method == "DELETE" && path.rfind("/volumes/", 0) == 0) {
      std::string name = path.substr(9);
      if (!volumes_.count(name)) {
        reply = {404, Message("get " + name + ": no such volume")};
      } else if (InUse(name)) {
        std::string refs;
        for (const auto& [id, c] : containers_) {
          for (const auto& v : VolumesOf(c)) {
            if (v == name) refs += (refs.empty() ? "" : ", ") + id;
          }
        }
        reply = {409, Message("remove " + name + ": volume is in use - [" + refs + "]")};
      } else {
        volumes_.erase(name);
        reply = {204, ""};
      }
    } else if (method == "POST" && path == "/containers/create") {
      json b = json::parse(body, nullptr, false);
      std::string name = q["name"];
      bool taken = false;
      for (const auto& [id, c] : containers_) taken = taken || c.name == name;
      json host = b.is_object() ? b.value("HostConfig", json::object()) : json::object();
      const std::int64_t nano_cpus = host.value("NanoCpus", std::int64_t{0});
      const std::int64_t memory = host.value("Memory", std::int64_t{0});
      std::string security_error, warning;
      for (const auto& opt : host.value("SecurityOpt", json::array())) {
        if (security_error.empty()) {
          security_error = SecurityOptError(opt.get<std::string>(), &warning);
        }
      }
      if (!b.is_object()) {
        reply = {400, Message("invalid JSON")};
      } else if (taken) {
        reply = {409, Message("Conflict. The container name \"/" + name +
                              "\" is already in use by container")};
      } else if (!images_.count(b.value("Image", ""))) {
        reply = {404, Message("No such image: " + b.value("Image", ""))};
      } else if (nano_cpus > 0 &&
                 (nano_cpus < 10'000'000 || nano_cpus > std::int64_t{cpus_} * 1'000'000'000)) {
        // daemon/daemon_unix.go verifyPlatformContainerResources, as InvalidParameter.
        reply = {400, Message("Range of CPUs is from 0.01 to " + std::to_string(cpus_) +
                              ".00, as there are only " + std::to_string(cpus_) +
                              " CPUs available")};
      } else if (memory > 0 && memory < 6 * 1024 * 1024) {
        reply = {400, Message("Minimum memory limit allowed is 6MB")};
      } else if (host.contains("NetworkMode") &&
                 !networks_.count(host["NetworkMode"].get<std::string>())) {
        reply = {404, Message("network " + host["NetworkMode"].get<std::string>() +
                              " not found")};
      } else if (!security_error.empty()) {
        reply = {500, Message(security_error)};  // setSecurityOptions: an untyped error
      } else {
        if (!warning.empty()) daemon_log_.push_back("level=warning msg=\"" + warning + "\"");
        char id[65];
        std::snprintf(id, sizeof id, "%064llx", static_cast<unsigned long long>(next_id_++ * 7919));
        containers_[id] = {id, name, "created", b, 0};
        for (const auto& m : host.value("Mounts", json::array())) {
          if (m.value("Type", "") != "volume") continue;
          Volume v;
          v.name = m.value("Source", "");
          v.anonymous = v.name.empty();
          if (v.anonymous) v.name = std::string(id).substr(0, 32) + std::to_string(volumes_.size());
          json options = m.value("VolumeOptions", json::object());
          v.labels = options.value("Labels", json::object());
          v.options =
              options.value("DriverConfig", json::object()).value("Options", json::object());
          volumes_.emplace(v.name, v);  // an existing volume of that name is reused as it is
        }
        reply = {201, json{{"Id", id}, {"Warnings", json::array()}}.dump()};
      }
    } else if (path.rfind("/containers/", 0) == 0) {
      std::string rest = path.substr(12);
      Container* c = Find(rest.substr(0, rest.find('/')));
      if (c == nullptr) {
        reply = {404, Message("No such container: " + rest.substr(0, rest.find('/')))};
      } else if (method == "POST" && rest.find("/start") != std::string::npos) {
        // daemon/start.go ContainerStart's validateState, then containerStart.
        if (c->state == "paused") {
          reply = {409, Message("cannot start a paused container, try unpause instead")};
        } else if (c->state == "running" || c->state == "restarting") {
          reply = {304, ""};
        } else if (c->state == "removing" || c->state == "dead") {
          reply = {409, Message("container is marked for removal and cannot be started")};
        } else if (auto [status, why] = StartFailure(*c); status != 0) {
          reply = {status, Message(why)};
        } else {
          c->state = "running";
          c->started_once = true;
          reply = {204, ""};
        }
      } else if (method == "POST" && rest.find("/stop") != std::string::npos) {
        reply = c->state == "running" ? Reply{204, ""} : Reply{304, ""};
        if (c->state == "running" || c->state == "restarting") c->state = "exited";
      } else if (method == "DELETE") {
        const bool force = q["force"] == "1" || q["force"] == "true";
        if (c->state == "removing") {
          reply = {409, Message("removal of container " + rest + " is already in progress")};
        } else if ((c->state == "running" || c->state == "paused" || c->state == "restarting") &&
                   !force) {
          reply = {409, Message("You cannot remove a " + c->state + " container " + c->id +
                                ". Stop the container before attempting removal or force remove")};
        } else {
          const std::vector<std::string> mounted = VolumesOf(*c);
          containers_.erase(c->id);
          if (q["v"] == "1" || q["v"] == "true") {
            // daemon/mounts.go removeMountPoints: named volumes stay.
            for (const auto& name : mounted) {
              auto v = volumes_.find(name);
              if (v != volumes_.end() && v->second.anonymous && !InUse(name)) volumes_.erase(v);
            }
          }
          reply = {204, ""};
        }
      } else if (method == "GET" && rest.find("/stats") != std::string::npos) {
        if (c->state == "running" || c->state == "paused") {
          reply = {200, json{{"read", "2026-01-01T00:00:00Z"},
                             {"name", "/" + c->name},
                             {"id", c->id},
                             {"networks",
                              {{"eth0", {{"rx_bytes", 10}, {"tx_bytes", c->tx_bytes}}}}}}
                            .dump()};
        } else {
          // daemon/stats.go: not running or restarting, no stream: an empty StatsJSON.
          reply = {200, json{{"read", "0001-01-01T00:00:00Z"},
                             {"preread", "0001-01-01T00:00:00Z"},
                             {"name", "/" + c->name},
                             {"id", c->id}}
                            .dump()};
        }
      } else {
        reply = {404, Message("page not found")};
      }
    } else {
      reply = {404, Message("page not found")};
    }
  }
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " + Reason(reply.status) +
                    "\r\nServer: " + kServer + "\r\n" + extra_headers;
  if (reply.status != 204 && reply.status != 304) {
    out += "Content-Type: application/json\r\nContent-Length: " +
           std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
  } else {
    out += "\r\n";
  }
  return out;
}

std::vector<FakeDocker::Call> FakeDocker::Calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

std::vector<FakeDocker::Call> FakeDocker::CallsTo(const std::string& method,
                                                  const std::string& path_prefix) const {
  std::vector<Call> out;
  for (auto& c : Calls()) {
    if (c.method == method && c.path.rfind(path_prefix, 0) == 0) out.push_back(c);
  }
  return out;
}

nlohmann::json FakeDocker::Network(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = networks_.find(name);
  return it == networks_.end() ? nlohmann::json(nullptr) : it->second;
}

std::vector<FakeDocker::Container> FakeDocker::Containers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Container> out;
  for (const auto& [id, c] : containers_) out.push_back(c);
  return out;
}

void FakeDocker::AddImage(const std::string& reference) {
  std::lock_guard<std::mutex> lock(mutex_);
  images_.insert(reference);
}

void FakeDocker::FailPulls(const std::string& reference, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  failing_pulls_[reference] = error;
}

void FakeDocker::SetTxBytes(const std::string& container_id, std::int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = containers_.find(container_id);
  if (it != containers_.end()) it->second.tx_bytes = bytes;
}

void FakeDocker::FailStarts(int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  failing_starts_ = n;
}

std::string FakeDocker::AddContainer(const std::string& name, const nlohmann::json& create_body,
                                     const std::string& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  char id[65];
  std::snprintf(id, sizeof id, "%064llx", static_cast<unsigned long long>(next_id_++ * 7919));
  containers_[id] = {id, name, state, create_body, 0};
  return id;
}

bool FakeDocker::SetState(const std::string& id_or_name, const std::string& state) {
  std::lock_guard<std::mutex> lock(mutex_);
  Container* c = Find(id_or_name);
  if (c == nullptr) return false;
  c->state = state;
  return true;
}

bool FakeDocker::Exit(const std::string& id_or_name, int exit_code) {
  std::lock_guard<std::mutex> lock(mutex_);
  Container* c = Find(id_or_name);
  if (c == nullptr) return false;
  // restartmanager.ShouldRestart: always and unless-stopped restart any exit not asked for by a
  // stop; on-failure a non-zero one.
  const std::string policy = c->create_body.value("HostConfig", json::object())
                                 .value("RestartPolicy", json::object())
                                 .value("Name", "");
  const bool restart = policy == "always" || policy == "unless-stopped" ||
                       (policy == "on-failure" && exit_code != 0);
  c->state = restart ? "restarting" : "exited";
  c->exit_code = exit_code;
  c->tx_bytes = 0;  // a restart gets a new network sandbox: its counters start again
  return true;
}

bool FakeDocker::FinishRestart(const std::string& id_or_name) {
  std::lock_guard<std::mutex> lock(mutex_);
  Container* c = Find(id_or_name);
  if (c == nullptr || c->state != "restarting") return false;
  c->state = "running";
  return true;
}

void FakeDocker::SetNvidiaDriver(bool present) {
  std::lock_guard<std::mutex> lock(mutex_);
  nvidia_driver_ = present;
}

void FakeDocker::FailPrestartHook(const std::string& stderr_text) {
  std::lock_guard<std::mutex> lock(mutex_);
  failing_hook_ = stderr_text;
}

void FakeDocker::FailMounts(const std::string& device_prefix, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error.empty()) {
    failing_mounts_.erase(device_prefix);
  } else {
    failing_mounts_[device_prefix] = error;
  }
}

void FakeDocker::SetCpus(int cpus) {
  std::lock_guard<std::mutex> lock(mutex_);
  cpus_ = cpus;
}

std::map<std::string, FakeDocker::Volume> FakeDocker::Volumes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return volumes_;
}

std::vector<std::string> FakeDocker::DaemonLog() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return daemon_log_;
}

}  // namespace gpuhub::agent::testing
