#include "agent/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "agent/limits.h"
#include "agent/storage.h"
#include "core/file.h"
#include "core/strings.h"

namespace gpuhub::agent {

Result<AgentConfig> ParseAgentConfig(std::string_view toml_text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    return Status::InvalidArgument(std::string(source) + ":" +
                                   std::to_string(e.source().begin.line) + ": " +
                                   std::string(e.description()));
  }
  AgentConfig c;
  auto where = [&](const toml::node& node, std::string_view key) {
    return std::string(source) + ":" + std::to_string(node.source().begin.line) + ": " +
           std::string(key);
  };
  auto text = [&](const toml::table& t, const char* key, std::string* out) -> Status {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_string()) return Status::InvalidArgument(where(*n, key) + " must be a string");
    *out = *n->value<std::string>();
    return Status::Ok();
  };
  auto integer = [&](const toml::table& t, const char* key, std::int64_t min, std::int64_t max,
                     std::int64_t* out) -> Status {
    const toml::node* n = t.get(key);
    if (!n) return Status::Ok();
    if (!n->is_integer() || *n->value<std::int64_t>() < min || *n->value<std::int64_t>() > max) {
      return Status::InvalidArgument(where(*n, key) + " must be a whole number from " +
                                     std::to_string(min) + " to " + std::to_string(max));
    }
    *out = *n->value<std::int64_t>();
    return Status::Ok();
  };
  const std::initializer_list<std::string_view> top = {
      "server",       "ca_file",    "state_dir",  "hostname",
      "public_host",  "ssh_ports",  "docker",     "nvml_library",
      "nvidia_smi",   "disk_path",  "heartbeat_interval_ms",
      "usage_interval_ms", "reconcile_interval_ms", "storage", "nvme_devices",
      "desired_wait_seconds", "ssh_ready_timeout_ms"};
  for (const auto& [key, node] : root) {
    bool known = false;
    for (auto k : top) known = known || key.str() == k;
    if (!known) return Status::InvalidArgument(where(node, key.str()) + " is not a known setting");
  }
  GPUHUB_RETURN_IF_ERROR(text(root, "server", &c.server));
  GPUHUB_RETURN_IF_ERROR(text(root, "ca_file", &c.ca_file));
  GPUHUB_RETURN_IF_ERROR(text(root, "state_dir", &c.state_dir));
  GPUHUB_RETURN_IF_ERROR(text(root, "hostname", &c.hostname));
  GPUHUB_RETURN_IF_ERROR(text(root, "public_host", &c.public_host));
  GPUHUB_RETURN_IF_ERROR(text(root, "docker", &c.docker));
  GPUHUB_RETURN_IF_ERROR(text(root, "nvml_library", &c.nvml_library));
  GPUHUB_RETURN_IF_ERROR(text(root, "nvidia_smi", &c.nvidia_smi));
  GPUHUB_RETURN_IF_ERROR(text(root, "disk_path", &c.disk_path));
  if (const toml::node* n = root.get("nvme_devices")) {
    const toml::array* list = n->as_array();
    const std::string bad = where(*n, "nvme_devices") +
                            " must be a list of at most " + std::to_string(kMaxVolumesPerWorkload) +
                            " distinct device paths under /dev/, one per card slot";
    if (!list || list->size() > kMaxVolumesPerWorkload) return Status::InvalidArgument(bad);
    for (const auto& item : *list) {
      auto device = item.value<std::string>();
      if (!device || !ValidateDevicePath(*device).ok() ||
          std::find(c.nvme_devices.begin(), c.nvme_devices.end(), *device) !=
              c.nvme_devices.end()) {
        return Status::InvalidArgument(bad);
      }
      c.nvme_devices.push_back(*device);
    }
  }
  GPUHUB_RETURN_IF_ERROR(integer(root, "heartbeat_interval_ms", 0, 600'000, &c.heartbeat_interval_ms));
  GPUHUB_RETURN_IF_ERROR(integer(root, "usage_interval_ms", 0, 3'600'000, &c.usage_interval_ms));
  GPUHUB_RETURN_IF_ERROR(integer(root, "reconcile_interval_ms", 50, 60'000, &c.reconcile_interval_ms));
  GPUHUB_RETURN_IF_ERROR(integer(root, "desired_wait_seconds", 0, kMaxDesiredWaitSeconds,
                                 &c.desired_wait_seconds));
  GPUHUB_RETURN_IF_ERROR(integer(root, "ssh_ready_timeout_ms", 0, kMaxSshReadyTimeoutMs,
                                 &c.ssh_ready_timeout_ms));
  std::string ports;
  GPUHUB_RETURN_IF_ERROR(text(root, "ssh_ports", &ports));
  if (!ports.empty()) {
    auto parts = Split(ports, '-');
    auto first = parts.size() == 2 ? ParseInt64(Trim(parts[0]), "") : Result<std::int64_t>(0);
    auto last = parts.size() == 2 ? ParseInt64(Trim(parts[1]), "") : Result<std::int64_t>(0);
    if (parts.size() != 2 || !first.ok() || !last.ok() || *first < 1024 || *last > 65535 ||
        *first > *last || *last - *first + 1 > kMaxSshPorts) {
      return Status::InvalidArgument(where(*root.get("ssh_ports"), "ssh_ports") +
                                     " must be a range such as \"40000-40999\" within "
                                     "1024-65535, at most " + std::to_string(kMaxSshPorts) +
                                     " ports");
    }
    c.ssh_port_first = static_cast<int>(*first);
    c.ssh_port_last = static_cast<int>(*last);
  }
  if (const toml::node* s = root.get("storage")) {
    const toml::table* t = s->as_table();
    if (!t) return Status::InvalidArgument(where(*s, "storage") + " must be a table");
    for (const auto& [key, node] : *t) {
      bool known = false;
      for (const char* k : {"cryptsetup", "blkdiscard", "mkfs", "rbd", "ceph_conf", "rbd_pool",
                            "rbd_user", "rbd_keyring", "ceph_fuse", "umount"}) {
        known = known || key.str() == k;
      }
      if (!known) {
        return Status::InvalidArgument(where(node, "storage." + std::string(key.str())) +
                                       " is not a known setting");
      }
    }
    StorageConfig& st = c.storage;
    for (auto [key, out] : std::initializer_list<std::pair<const char*, std::string*>>{
             {"cryptsetup", &st.cryptsetup}, {"blkdiscard", &st.blkdiscard}, {"mkfs", &st.mkfs},
             {"rbd", &st.rbd}, {"ceph_conf", &st.ceph_conf}, {"rbd_pool", &st.rbd_pool},
             {"rbd_user", &st.rbd_user}, {"rbd_keyring", &st.rbd_keyring},
             {"ceph_fuse", &st.ceph_fuse}, {"umount", &st.umount}}) {
      GPUHUB_RETURN_IF_ERROR(text(*t, key, out));
    }
  }
  if (c.state_dir.empty() || c.state_dir.front() != '/') {
    return Status::InvalidArgument(std::string(source) + ": state_dir must be an absolute path");
  }
  return c;
}

Result<AgentConfig> LoadAgentConfig(const std::string& path) {
  std::string p = path;
  if (p.empty()) {
    if (::access(kDefaultAgentConfigPath, F_OK) != 0) return AgentConfig{};
    p = kDefaultAgentConfigPath;
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(p, 1 << 20));
  return ParseAgentConfig(text, p);
}

std::string CredentialPath(const std::string& state_dir) { return state_dir + "/credential"; }

Status WriteFileAtomically(const std::string& path, const std::string& content, unsigned mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Unavailable(tmp + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // the umask does not widen or narrow it
  std::size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::Unavailable(tmp + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::Unavailable(tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return Status::Unavailable(path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status WriteCredential(const std::string& state_dir, const CredentialFile& file) {
  if (::mkdir(state_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Status::Unavailable(state_dir + ": " + std::strerror(errno));
  }
  nlohmann::json j = {{"server", file.server},
                      {"credential", file.credential},
                      {"host_id", file.host_id},
                      {"kind", file.kind},
                      {"machine_id", file.machine_id}};
  return WriteFileAtomically(CredentialPath(state_dir), j.dump() + "\n", 0600);
}

Result<CredentialFile> ReadCredential(const std::string& state_dir) {
  const std::string path = CredentialPath(state_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::NotFound("this host is not enrolled (no " + path +
                            "): run gpuhub agent enroll --server URL --token TOKEN");
  }
  if ((st.st_mode & 077) != 0) {
    return Status::FailedPrecondition(path + " is readable by others (mode " +
                                      std::to_string(st.st_mode & 0777) +
                                      "): chmod 600 it, or enrol again");
  }
  GPUHUB_ASSIGN_OR_RETURN(std::string text, ReadFile(path, 64 * 1024));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  CredentialFile f;
  if (!j.is_object() || !j.contains("credential") || !j["credential"].is_string()) {
    return Status::FailedPrecondition(path + " is damaged: enrol again");
  }
  f.credential = j["credential"].get<std::string>();
  f.server = j.value("server", "");
  f.host_id = j.value("host_id", std::int64_t{0});
  f.kind = j.value("kind", "machine");
  f.machine_id = j.value("machine_id", std::int64_t{0});
  return f;
}

}  // namespace gpuhub::agent
