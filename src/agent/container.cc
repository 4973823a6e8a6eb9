#include "agent/container.h"

#include <nlohmann/json.hpp>

namespace gpuhub::agent {
namespace {

using json = nlohmann::ordered_json;

bool GpuSelecting(const std::string& key) {
  return key == "NVIDIA_VISIBLE_DEVICES" || key == "NVIDIA_DRIVER_CAPABILITIES" ||
         key == "CUDA_VISIBLE_DEVICES";
}

std::string Join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

std::string ContainerName(const std::string& workload_id) { return "gpuhub-" + workload_id; }

std::string FormatPortMappings(const std::vector<PortMapping>& ports) {
  std::string out;
  for (const auto& p : ports) {
    out += (out.empty() ? "" : ",") + std::to_string(p.container) + ":" + std::to_string(p.host);
  }
  return out;
}

std::string NetworkVolumesLabel(const std::vector<NetworkVolumeSpec>& volumes) {
  std::string out;
  for (const auto& v : volumes) {
    out += (out.empty() ? "" : ",") + std::to_string(v.id) + ":" + v.client + ":" +
           (v.read_only ? "ro" : "rw");
  }
  return out;
}

std::vector<PortMapping> ParsePortMappings(const std::string& label) {
  std::vector<PortMapping> out;
  if (!label.empty() && label.back() == ',') return {};
  std::size_t start = 0;
  while (start < label.size()) {
    std::size_t end = label.find(',', start);
    if (end == std::string::npos) end = label.size();
    const std::string item = label.substr(start, end - start);
    std::size_t colon = item.find(':');
    if (colon == std::string::npos) return {};
    try {
      std::size_t used = 0;
      int c = std::stoi(item.substr(0, colon), &used);
      if (used != colon) return {};
      int h = std::stoi(item.substr(colon + 1), &used);
      if (used != item.size() - colon - 1) return {};
      if (c < 1 || c > 65535 || h < 1 || h > 65535) return {};
      out.push_back({c, h});
    } catch (const std::exception&) {
      return {};
    }
    start = end + 1;
  }
  return out;
}

Status ValidateWorkloadId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 64 && id.front() != '-';
  for (char c : id) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  return ok ? Status::Ok() : Status::InvalidArgument("bad workload id '" + id.substr(0, 64) + "'");
}

Status ValidateImage(const std::string& image) {
  auto alnum = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  bool ok = !image.empty() && image.size() <= 255 && alnum(image.front()) && alnum(image.back()) &&
            image.find("..") == std::string::npos && image.find("//") == std::string::npos &&
            image.find("/.") == std::string::npos;
  for (char c : image) {
    ok = ok && (alnum(c) || c == '.' || c == '_' || c == '/' || c == ':' || c == '@' || c == '-');
  }
  return ok ? Status::Ok() : Status::InvalidArgument("bad image '" + image.substr(0, 80) + "'");
}

std::vector<std::string> SanitizedEnv(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const auto& e : env) {
    auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || e.find('\0') != std::string::npos) continue;
    if (GpuSelecting(e.substr(0, eq))) continue;
    out.push_back(e);
  }
  return out;
}

const std::string& BootScript() {
  static const std::string script = R"sh(set -e
if ! command -v sshd >/dev/null 2>&1 && [ ! -x /usr/sbin/sshd ]; then
  echo "gpuhub: installing openssh-server" >&2
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq --no-install-recommends openssh-server
  elif command -v dnf >/dev/null 2>&1; then dnf install -y -q openssh-server
  elif command -v yum >/dev/null 2>&1; then yum install -y -q openssh-server
  elif command -v apk >/dev/null 2>&1; then apk add --no-cache -q openssh-server
  else echo "gpuhub: the image has no sshd and no package manager to install it" >&2; exit 1
  fi
fi
mkdir -p /run/sshd /var/run/sshd && chmod 0755 /run/sshd
ssh-keygen -A >/dev/null 2>&1 || true
env | grep -E '^(PATH|LD_LIBRARY_PATH|CUDA_[A-Z_]*|NVIDIA_[A-Z_]*|LANG|LC_ALL|HF_[A-Z_]*)=' \
  > /etc/environment 2>/dev/null || true
SSHD=$(command -v sshd || echo /usr/sbin/sshd)
exec "$SSHD" -D -e -o PermitRootLogin=prohibit-password -o PasswordAuthentication=no \
  -o KbdInteractiveAuthentication=no -o AuthorizedKeysFile=/etc/gpuhub/ssh/authorized_keys
)sh";
  return script;
}

std::string CreateBody(const WorkloadSpec& spec, const Placement& placement) {
  std::vector<std::string> env = SanitizedEnv(spec.env);
  // Exactly the leased GPUs, whatever the image's own ENV says (container env overrides it).
  env.push_back("NVIDIA_VISIBLE_DEVICES=" + Join(spec.gpu_uuids, ","));
  env.push_back("NVIDIA_DRIVER_CAPABILITIES=compute,utility");
  env.push_back("GPUHUB_WORKLOAD=" + spec.id);
  const std::string port = std::to_string(placement.ssh_port);
  json mounts = json::array();
  for (const auto& m : placement.mounts) {
    mounts.push_back({{"Type", "volume"},
                      {"Source", "gpuhub-" + m.name},
                      {"Target", m.target},
                      {"VolumeOptions",
                       {{"Labels", {{kLabelManaged, "true"}, {kLabelWorkload, spec.id}}},
                        {"DriverConfig",
                         {{"Name", "local"},
                          {"Options", {{"type", "ext4"}, {"device", m.device}}}}}}}});
  }
  // A network volume: the host's ceph-fuse mount point bound in (private propagation: the bind
  // keeps that mount alive for the container's life; the agent unmounts the host's once no
  // container binds it, and recreates a container whose host mount went away).
  for (const auto& m : placement.network_mounts) {
    mounts.push_back(
        {{"Type", "bind"}, {"Source", m.source}, {"Target", m.target}, {"ReadOnly", m.read_only}});
  }
  json exposed = {{"22/tcp", json::object()}};
  json bindings = {{"22/tcp", {{{"HostIp", ""}, {"HostPort", port}}}}};
  for (const auto& p : placement.ports) {
    const std::string key = std::to_string(p.container) + "/tcp";
    exposed[key] = json::object();
    bindings[key] = {{{"HostIp", ""}, {"HostPort", std::to_string(p.host)}}};
  }
  json body = {
      {"Image", spec.image},
      {"Hostname", ContainerName(spec.id)},
      {"User", "0"},
      {"Entrypoint", {"/bin/sh", "-c"}},
      {"Cmd", {BootScript()}},
      {"Env", env},
      {"ExposedPorts", exposed},
      {"Labels",
       {{kLabelManaged, "true"},
        {kLabelWorkload, spec.id},
        {kLabelNotAfter, FormatTimestamp(spec.not_after)},
        {kLabelSshPort, port},
        {kLabelGpus, Join(spec.gpu_uuids, ",")},
        {kLabelPorts, FormatPortMappings(placement.ports)},
        {kLabelVolumes, NetworkVolumesLabel(spec.network_volumes)}}},
      {"HostConfig",
       {{"Privileged", false},
        {"CapDrop", {"ALL"}},
        {"CapAdd",
         {"CHOWN", "DAC_OVERRIDE", "FOWNER", "SETUID", "SETGID", "SYS_CHROOT", "KILL",
          "AUDIT_WRITE", "NET_BIND_SERVICE"}},
        // The bare form: moby (daemon_unix.go parseSecurityOpt) logs a deprecation warning for
        // "key:value" on every create.
        {"SecurityOpt", {"no-new-privileges"}},
        {"PidsLimit", 16384},
        {"Init", true},
        {"NanoCpus", spec.cpus * 1'000'000'000LL},
        {"Memory", spec.memory_gb * 1'000'000'000LL},
        // PyTorch's data loaders share memory through /dev/shm: a quarter of the memory.
        {"ShmSize", spec.memory_gb * 250'000'000LL},
        {"DeviceRequests",
         {{{"Driver", "nvidia"},
           {"Count", 0},
           {"DeviceIDs", spec.gpu_uuids},
           {"Capabilities", {{"gpu"}}}}}},
        {"PortBindings", bindings},
        {"Binds", {placement.ssh_dir + ":" + kContainerSshDir + ":ro"}},
        {"Mounts", mounts},
        {"NetworkMode", kNetworkName},
        {"RestartPolicy", {{"Name", "unless-stopped"}}}}}};
  return body.dump();
}

}  // namespace gpuhub::agent
